// tools/server/passthrough.hpp: a request only a cloud can serve (tools, response_format, an
// image, a model the edge does not serve), passed to the cloud whole, and its answer passed
// back whole.
//
//   client body --forward_body--> the same bytes, except: message strings with PII (content,
//                                 text parts, tool-call arguments; completions: the prompt) hold
//                                 placeholders (engine/privacy.hpp), and `model` names the cloud's
//   cloud event --answer_restorer--> the same bytes, except: the text (delta.content, text)
//                                 has the placeholders restored (the engine's restorer)
//
// Only the edited strings change; every other byte (fields the gateway does not know
// included) arrives as the client wrote it: an edit replaces one string literal, found by its
// offset in the parsed text (json.hpp), and leaves the bytes around it alone.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "hedge/core/result.hpp"
#include "hedge/engine/privacy.hpp"
#include "json.hpp"

namespace hedge::server {

/// `text` as a JSON string literal (quoted, escaped).
inline std::string json_literal(std::string_view text) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  return std::string(b.GetString(), b.GetSize());
}

/// Replacements of string literals in one JSON text, applied in the order of the text.
class literal_edits {
 public:
  explicit literal_edits(std::string_view text) : text_(text) {}
  /// Replaces the literal of `v` (a string of the parsed text) by `replacement` (JSON).
  void replace(const json::value& v, std::string replacement) {
    const std::size_t begin = v.literal_offset();
    edits_.push_back({begin, json::literal_end(text_, begin), std::move(replacement)});
  }
  /// Inserts `json` at `offset` of the text.
  void insert(std::size_t offset, std::string json) { edits_.push_back({offset, offset, std::move(json)}); }
  [[nodiscard]] bool empty() const noexcept { return edits_.empty(); }

  [[nodiscard]] std::string apply() {
    std::sort(edits_.begin(), edits_.end(), [](const edit& a, const edit& b) { return a.begin < b.begin; });
    std::string out;
    out.reserve(text_.size());
    std::size_t at = 0;
    for (const edit& e : edits_) {
      out.append(text_.substr(at, e.begin - at));
      out.append(e.replacement);
      at = e.end;
    }
    out.append(text_.substr(at));
    return out;
  }

 private:
  struct edit {
    std::size_t begin, end;
    std::string replacement;
  };
  std::string_view text_;
  std::vector<edit> edits_;
};

/// The body a cloud gets, and how many PII spans it has as placeholders.
struct forwarded_body {
  std::string body;
  std::size_t redactions = 0;
};

/// `raw` (a request body that parsed) as the cloud gets it: message strings and the prompt
/// redacted with `vault`; `model`, when not empty, in place of the body's model (or added).
inline result<forwarded_body> forward_body(std::string_view raw, std::string_view model,
                                           const engine::privacy_options& privacy, engine::privacy_vault& vault) {
  json::value root;
  if (auto failure = json::parse(std::string(raw), root)) return error{errc::parse_error} << failure->message;
  if (!root.is_object()) return error{errc::parse_error} << "the body is not a JSON object";
  forwarded_body out;
  literal_edits edits(raw);
  const auto redact = [&](const json::value& v) {
    if (!v.is_string()) return;
    std::string redacted;
    const std::size_t n = engine::redact(v.as_string(), privacy, vault, redacted);
    if (n == 0) return;
    out.redactions += n;
    edits.replace(v, json_literal(redacted));
  };
  if (const auto* m = root.find("model"); m && m->is_string() && !model.empty()) {
    edits.replace(*m, json_literal(model));
  } else if (!m && !model.empty()) {
    edits.insert(raw.find('{') + 1, "\"model\":" + json_literal(model) + ",");
  }
  if (const auto* p = root.find("prompt")) redact(*p);
  if (const auto* messages = root.find("messages"); messages && messages->is_array()) {
    for (const auto& message : messages->items()) {
      if (!message.is_object()) continue;
      if (const auto* content = message.find("content")) {
        redact(*content);
        if (content->is_array())
          for (const auto& part : content->items())
            if (const auto* text = part.is_object() ? part.find("text") : nullptr) redact(*text);
      }
      if (const auto* calls = message.find("tool_calls"); calls && calls->is_array())
        for (const auto& call : calls->items())
          if (const auto* f = call.is_object() ? call.find("function") : nullptr; f && f->is_object())
            if (const auto* args = f->find("arguments")) redact(*args);
    }
  }
  out.body = edits.empty() ? std::string(raw) : edits.apply();
  return out;
}

/// A cloud's answer as the client gets it: the placeholders of `vault` restored in its text
/// (choices[].delta.content or .message.content for chat, choices[].text for completions);
/// with an empty vault, every byte as the cloud sent it.
class answer_restorer {
 public:
  answer_restorer(const engine::privacy_vault& vault, bool chat) : vault_(&vault), restorer_(vault), chat_(chat) {}

  /// One streamed event's data as `data: ...` lines for the client, or nothing when the data
  /// is not JSON (the client's parse fails the call, and the caller ends the stream). Text the
  /// restorer holds back goes out with a later event, at the latest before the finish reason.
  [[nodiscard]] std::string event(std::string_view data) {
    json::value root;
    if (json::parse(std::string(data), root) || !root.is_object()) return {};
    const json::value* choice = first_choice(root);
    const json::value* text = choice ? text_of(*choice, chat_ ? "delta" : nullptr) : nullptr;
    const json::value* finish = choice ? choice->find("finish_reason") : nullptr;
    const bool finishing = finish && !finish->is_null();
    if (vault_->empty()) return sse(data);
    std::string restored, before;
    if (text) {
      restorer_.feed(text->as_string(), [&](std::string_view s) { restored.append(s); });
      if (finishing) restorer_.finish([&](std::string_view s) { restored.append(s); });
      literal_edits edits(data);
      edits.replace(*text, json_literal(restored));
      return sse(edits.apply());
    }
    if (finishing) before = flush();
    return before + sse(data);
  }

  /// Text still held at the stream's end, as one more event (empty: none).
  [[nodiscard]] std::string flush() {
    std::string held;
    restorer_.finish([&](std::string_view s) { held.append(s); });
    if (held.empty()) return {};
    const std::string piece = json_literal(held);
    return sse(chat_ ? R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":)" + piece +
                           "},\"finish_reason\":null}]}"
                     : R"({"object":"text_completion","choices":[{"index":0,"text":)" + piece +
                           ",\"finish_reason\":null}]}");
  }

  /// A whole (non-streamed) answer's body for the client.
  [[nodiscard]] std::string whole(std::string_view body) {
    json::value root;
    if (vault_->empty() || json::parse(std::string(body), root) || !root.is_object()) return std::string(body);
    const json::value* choices = root.find("choices");
    if (!choices || !choices->is_array()) return std::string(body);
    literal_edits edits(body);
    for (const auto& choice : choices->items()) {
      const json::value* text = text_of(choice, chat_ ? "message" : nullptr);
      if (!text) continue;
      std::string restored;
      restorer_.reset();
      restorer_.feed(text->as_string(), [&](std::string_view s) { restored.append(s); });
      restorer_.finish([&](std::string_view s) { restored.append(s); });
      edits.replace(*text, json_literal(restored));
    }
    return edits.apply();
  }

 private:
  static std::string sse(std::string_view data) { return "data: " + std::string(data) + "\n\n"; }

  static const json::value* first_choice(const json::value& root) {
    const json::value* choices = root.find("choices");
    if (!choices || !choices->is_array() || choices->items().empty() || !(*choices)[0].is_object()) return nullptr;
    return &(*choices)[0];
  }

  /// The choice's text string: choice[holder].content (chat), or choice.text.
  static const json::value* text_of(const json::value& choice, const char* holder) {
    if (!choice.is_object()) return nullptr;
    const json::value* at = &choice;
    if (holder) {
      at = choice.find(holder);
      if (!at || !at->is_object()) return nullptr;
    }
    const json::value* text = at->find(holder ? "content" : "text");
    return text && text->is_string() ? text : nullptr;
  }

  const engine::privacy_vault* vault_;
  engine::restorer restorer_;
  bool chat_;
};

}  // namespace hedge::server
