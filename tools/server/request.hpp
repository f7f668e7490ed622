// tools/server/request.hpp: an OpenAI chat or completion request body, read with rapidjson
// and checked field by field before anything reaches the model.
//
// Read: model, messages (chat: role and content, a string or text parts), prompt
// (completions: a string, a list of one string, or a list of token ids), max_tokens and
// max_completion_tokens, temperature, top_p, seed, stop (a string or a list), stream,
// stream_options.include_usage, logprobs and top_logprobs (chat: a flag and a count;
// completions: logprobs is the count), echo (completions), return_tokens_as_token_ids
// (vLLM's: log-probs name tokens "token_id:N"), n (1 only), and ignore_eos
// (an extension of vLLM and llama.cpp's server: no stop on a stop token). Other fields are
// ignored, as vLLM and llama.cpp's server ignore them (the first one the edge cannot serve is
// noted in `cloud_only`: the gateway passes such a request to the cloud); a known field of the
// wrong type or out of range is an error naming it (`param`). Fields that are null count as
// absent.
// The body is parsed by json.hpp: iteratively, bounded in depth and values, its strings
// checked as UTF-8.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedge/model/chat_template.hpp"
#include "hedge/model/sampler.hpp"
#include "json.hpp"

namespace hedge::server {

/// An error answered with OpenAI's error body.
struct api_error {
  int status = 400;
  std::string message;
  std::string param;  ///< empty: null
  std::string code;   ///< empty: null
  std::string type = "invalid_request_error";
};

/// The most alternatives a token's log-probs report (the sampler's bound).
constexpr std::size_t max_top_logprobs = model::token_choice::max_alternatives;

struct parsed_request {
  bool chat = false;
  std::string model;
  /// A chat message's text, owned by the request (model::chat_message views it).
  struct message_text {
    std::string role, content;
  };
  std::vector<message_text> messages;            ///< chat
  [[nodiscard]] std::vector<model::chat_message> message_views() const {
    std::vector<model::chat_message> views;
    for (const auto& m : messages) views.push_back({m.role, m.content});
    return views;
  }
  std::string prompt;                            ///< completions: the text (echoed)
  std::vector<model::token_id> prompt_ids;       ///< completions given token ids
  bool prompt_is_ids = false;
  std::optional<std::int64_t> max_tokens;
  float temperature = 1.0f, top_p = 1.0f;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
  bool logprobs = false;         ///< report the tokens' log-probs
  std::size_t top_logprobs = 0;  ///< alternatives per token
  bool echo = false;             ///< completions: the prompt, and its log-probs with logprobs
  bool return_tokens_as_token_ids = false;  ///< log-probs name tokens "token_id:N" (vLLM's field)
  bool ignore_eos = false;       ///< vLLM's and llama.cpp's extension: no stop on EOS
  /// The first field only a cloud can serve (tools, tool_choice, response_format, functions,
  /// function_call, audio, modalities, a non-text content part): empty when the edge can.
  std::string cloud_only;
  bool cloud_only_part = false;  ///< cloud_only is a content part (without --cloud: an error)
  /// The body's members this server does not read, as one JSON object ("" when none): a
  /// gateway sends them on to its clouds, never dropping a field it does not understand.
  std::string unread;
  /// The gateway's per-request controls: the body's optional `hedge` object (docs/cloud.md).
  struct hedge_controls {
    std::uint32_t data_classes = 0;  ///< route::data_class bits
    double ttft_slo_ms = 0.0, max_cost = 0.0;
    std::string mode = "auto";       ///< auto, edge, cloud, race
    bool fallback = true;
    std::string delivery;  ///< immediate, verified, buffer (hold_tokens); empty: the gateway's default
    std::uint32_t hold_tokens = 0;
  } hedge;
};

/// A data class's route::data_class bit by its name (`private` is `personal`); 0: no such class.
inline std::uint32_t data_class_named(std::string_view name) {
  static constexpr std::pair<std::string_view, std::uint32_t> classes[] = {
      {"public", 1u}, {"internal", 2u}, {"contractual", 4u}, {"regulated", 8u}, {"personal", 16u}, {"private", 16u}};
  for (const auto& [text, bit] : classes)
    if (name == text) return bit;
  return 0;
}

namespace detail {

inline api_error bad(std::string param, std::string message) {
  return api_error{400, std::move(message), std::move(param), {}};
}

inline const char* type_name(const json::value& v) {
  if (v.is_null()) return "null";
  if (v.is_bool()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

inline api_error wrong_type(const std::string& param, const json::value& v, const char* want) {
  return bad(param, "'" + param + "' must be " + want + ", not " + type_name(v));
}

inline const json::value* member(const json::value& object, const char* name) { return object.find(name); }

inline const std::string& text_of(const json::value& v) { return v.as_string(); }

/// The message's content: a string, or a list of {"type": "text", "text": ...} parts; any
/// other part (an image, audio) is named in `cloud_only` and left out of `out`.
inline std::optional<api_error> read_content(const json::value& v, const std::string& param, std::string& out,
                                             parsed_request& r) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return out = text_of(v), std::nullopt;
  if (!v.is_array()) return wrong_type(param, v, "a string or an array of text parts");
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto& part = v[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return wrong_type(p, part, "an object");
    const auto* type = member(part, "type");
    if (!type || !type->is_string()) return bad(p + ".type", "a content part needs a string 'type'");
    if (text_of(*type) != "text") {
      if (r.cloud_only.empty()) r.cloud_only = p + ".type", r.cloud_only_part = true;
      continue;
    }
    const auto* text = member(part, "text");
    if (!text || !text->is_string()) return bad(p + ".text", "a text part needs a string 'text'");
    out += text_of(*text);
  }
  return std::nullopt;
}

/// The members of `body` (of `body_bytes` as text) this parser does not read, written as one
/// JSON object to `out`; "" when there are none.
inline void collect_unread(const json::value& body, std::size_t body_bytes, std::string& out) {
  static constexpr std::string_view read[] = {
      "model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "n", "stop",
      "stream", "stream_options", "logprobs", "top_logprobs", "echo", "return_tokens_as_token_ids", "ignore_eos", "hedge"};
  const auto unread = [&](const std::string& key) { return std::find(std::begin(read), std::end(read), key) == std::end(read); };
  if (std::none_of(body.members().begin(), body.members().end(), [&](const auto& m) { return unread(m.first); })) return;
  // Written again, a value takes at most 6 bytes per byte it had (a control character as
  // \u00XX): twice the body first, six times when that was not enough.
  for (const std::size_t factor : {2u, 6u}) {
    std::vector<char> buffer(body_bytes * factor + 64);
    cloud::json_writer w(buffer);
    w.begin_object();
    for (const auto& [key, v] : body.members()) {
      if (!unread(key)) continue;
      w.key(key);
      json::write(w, v);
    }
    w.end_object();
    if (auto text = w.finish()) return out.assign(text->data(), text->size()), void();
  }
}

}  // namespace detail

/// Parses and checks a request body for `/v1/chat/completions` (chat) or `/v1/completions`;
/// the body is parsed in place (moved in when the caller is done with it).
inline std::optional<api_error> parse_request(std::string body, bool chat, parsed_request& r) {
  using detail::bad;
  using detail::wrong_type;
  r.chat = chat;
  json::value d;
  const std::size_t body_size = body.size();
  if (auto failure = json::parse(std::move(body), d)) return bad({}, failure->message);
  if (!d.is_object()) return bad({}, std::string("the body must be a JSON object, not ") + detail::type_name(d));
  const auto field = [&](const char* name) -> const json::value* {
    const auto* m = detail::member(d, name);
    return m && !m->is_null() ? m : nullptr;
  };
  if (const auto* v = field("model")) {
    if (!v->is_string()) return wrong_type("model", *v, "a string");
    r.model = detail::text_of(*v);
  }
  for (const char* name : {"tools", "tool_choice", "response_format", "functions", "function_call", "audio", "modalities"})
    if (r.cloud_only.empty() && field(name)) r.cloud_only = name;
  if (chat) {
    const auto* v = field("messages");
    if (!v) return bad("messages", "'messages' is required");
    if (!v->is_array()) return wrong_type("messages", *v, "an array");
    if (v->items().empty()) return bad("messages", "'messages' must not be empty");
    for (std::size_t i = 0; i < v->size(); ++i) {
      const auto& m = (*v)[i];
      const std::string p = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) return wrong_type(p, m, "an object");
      parsed_request::message_text msg;
      const auto* role = detail::member(m, "role");
      if (!role || !role->is_string()) return bad(p + ".role", "a message needs a string 'role'");
      msg.role = detail::text_of(*role);
      if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "developer" &&
          msg.role != "tool")
        return bad(p + ".role", "unknown role '" + msg.role + "'");
      if (msg.role == "developer") msg.role = "system";
      if (const auto* content = detail::member(m, "content"))
        if (auto e = detail::read_content(*content, p + ".content", msg.content, r)) return e;
      r.messages.push_back(std::move(msg));
    }
  } else {
    const auto* v = field("prompt");
    if (!v) return bad("prompt", "'prompt' is required");
    if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) v = &(*v)[0];
    if (v->is_string()) {
      r.prompt = detail::text_of(*v);
    } else if (v->is_array() && !v->items().empty() && (*v)[0].is_int64()) {
      for (std::size_t i = 0; i < v->size(); ++i) {
        const auto& id = (*v)[i];
        if (!id.is_int64() || id.as_int64() < 0 || id.as_int64() > std::numeric_limits<model::token_id>::max())
          return bad("prompt", "prompt[" + std::to_string(i) + "] is not a token id");
        r.prompt_ids.push_back(static_cast<model::token_id>((*v)[i].as_int64()));
      }
      r.prompt_is_ids = true;
    } else if (v->is_array()) {
      return bad("prompt", "one prompt (a string or a list of token ids) is supported per request");
    } else {
      return wrong_type("prompt", *v, "a string");
    }
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (const auto* v = field(name)) {
      if (!v->is_int64()) return wrong_type(name, *v, "an integer");
      r.max_tokens = v->as_int64();
    }
  if (const auto* v = field("temperature")) {
    if (!v->is_number()) return wrong_type("temperature", *v, "a number");
    const double t = v->as_double();
    if (!(t >= 0 && t <= 2)) return bad("temperature", "'temperature' must be between 0 and 2");
    r.temperature = static_cast<float>(t);
  }
  if (const auto* v = field("top_p")) {
    if (!v->is_number()) return wrong_type("top_p", *v, "a number");
    const double p = v->as_double();
    if (!(p > 0 && p <= 1)) return bad("top_p", "'top_p' must be in (0, 1]");
    r.top_p = static_cast<float>(p);
  }
  if (const auto* v = field("seed")) {
    if (!v->is_int64() && !v->is_uint64()) return wrong_type("seed", *v, "an integer");
    r.seed = v->is_uint64() ? v->as_uint64() : static_cast<std::uint64_t>(v->as_int64());
  }
  if (const auto* v = field("n")) {
    if (!v->is_int64()) return wrong_type("n", *v, "an integer");
    if (v->as_int64() != 1) return bad("n", "only n = 1 is supported");
  }
  if (const auto* v = field("stop")) {
    if (v->is_string()) {
      r.stop.push_back(detail::text_of(*v));
    } else if (v->is_array()) {
      for (std::size_t i = 0; i < v->size(); ++i) {
        if (!(*v)[i].is_string()) return wrong_type("stop[" + std::to_string(i) + "]", (*v)[i], "a string");
        r.stop.push_back(detail::text_of((*v)[i]));
      }
    } else {
      return wrong_type("stop", *v, "a string or an array of strings");
    }
    if (r.stop.size() > 4) return bad("stop", "at most 4 stop strings");
    for (const auto& s : r.stop)
      if (s.empty() || s.size() > 256) return bad("stop", "a stop string must have 1 to 256 bytes");
  }
  if (const auto* v = field("stream")) {
    if (!v->is_bool()) return wrong_type("stream", *v, "a boolean");
    r.stream = v->as_bool();
  }
  if (const auto* v = field("ignore_eos")) {
    if (!v->is_bool()) return wrong_type("ignore_eos", *v, "a boolean");
    r.ignore_eos = v->as_bool();
  }
  if (const auto* v = field("stream_options")) {
    if (!v->is_object()) return wrong_type("stream_options", *v, "an object");
    if (const auto* u = detail::member(*v, "include_usage"); u && !u->is_null()) {
      if (!u->is_bool()) return wrong_type("stream_options.include_usage", *u, "a boolean");
      r.include_usage = u->as_bool();
    }
  }
  const auto count = [&](const char* name, const json::value& v, std::size_t& out) -> std::optional<api_error> {
    if (!v.is_int64()) return wrong_type(name, v, "an integer");
    if (v.as_int64() < 0 || static_cast<std::uint64_t>(v.as_int64()) > max_top_logprobs)
      return bad(name, "'" + std::string(name) + "' must be between 0 and " + std::to_string(max_top_logprobs));
    out = static_cast<std::size_t>(v.as_int64());
    return std::nullopt;
  };
  if (chat) {
    if (const auto* v = field("logprobs")) {
      if (!v->is_bool()) return wrong_type("logprobs", *v, "a boolean");
      r.logprobs = v->as_bool();
    }
    if (const auto* v = field("top_logprobs")) {
      if (auto e = count("top_logprobs", *v, r.top_logprobs)) return e;
      if (!r.logprobs) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
  } else {
    if (const auto* v = field("logprobs")) {
      if (auto e = count("logprobs", *v, r.top_logprobs)) return e;
      r.logprobs = true;
    }
    if (const auto* v = field("return_tokens_as_token_ids")) {
      if (!v->is_bool()) return wrong_type("return_tokens_as_token_ids", *v, "a boolean");
      r.return_tokens_as_token_ids = v->as_bool();
    }
    if (const auto* v = field("echo")) {
      if (!v->is_bool()) return wrong_type("echo", *v, "a boolean");
      r.echo = v->as_bool();
    }
  }
  if (const auto* v = field("hedge")) {
    if (!v->is_object()) return wrong_type("hedge", *v, "an object");
    auto& h = r.hedge;
    const auto number = [&](const char* name, double& out) -> std::optional<api_error> {
      const auto* n = detail::member(*v, name);
      if (!n || n->is_null()) return std::nullopt;
      if (!n->is_number() || !(n->as_double() >= 0.0)) return bad(std::string("hedge.") + name, std::string("'hedge.") + name + "' must be a number >= 0");
      out = n->as_double();
      return std::nullopt;
    };
    if (auto e = number("ttft_slo_ms", h.ttft_slo_ms)) return e;
    if (auto e = number("max_cost", h.max_cost)) return e;
    if (const auto* c = detail::member(*v, "data_class"); c && !c->is_null()) {
      const auto add = [&](const json::value& name) -> bool {
        const std::uint32_t bit = name.is_string() ? data_class_named(detail::text_of(name)) : 0u;
        h.data_classes |= bit;
        return bit != 0;
      };
      bool good = true;
      if (c->is_array()) {
        for (std::size_t i = 0; i < c->size(); ++i) good = good && add((*c)[i]);
      } else {
        good = add(*c);
      }
      if (!good)
        return bad("hedge.data_class", "'hedge.data_class' must name public, internal, contractual, regulated, personal "
                                       "or private (a string or an array of them)");
    }
    if (const auto* m = detail::member(*v, "mode"); m && !m->is_null()) {
      const std::string mode = m->is_string() ? detail::text_of(*m) : std::string();
      if (mode != "auto" && mode != "edge" && mode != "cloud" && mode != "race" && mode != "speculative")
        return bad("hedge.mode", "'hedge.mode' must be auto, edge, cloud, race or speculative");
      h.mode = mode;
    }
    if (const auto* f = detail::member(*v, "fallback"); f && !f->is_null()) {
      if (!f->is_bool()) return wrong_type("hedge.fallback", *f, "a boolean");
      h.fallback = f->as_bool();
    }
    if (const auto* d = detail::member(*v, "delivery"); d && !d->is_null()) {
      if (d->is_int64() && d->as_int64() >= 0 && d->as_int64() <= 1'000'000) {
        h.delivery = "buffer";
        h.hold_tokens = static_cast<std::uint32_t>(d->as_int64());
      } else if (d->is_string() && (detail::text_of(*d) == "immediate" || detail::text_of(*d) == "verified")) {
        h.delivery = detail::text_of(*d);
      } else {
        return bad("hedge.delivery", "'hedge.delivery' must be immediate, verified or a count of tokens to hold");
      }
    }
  }
  // max_tokens 0 only scores the prompt (vLLM allows it with echo).
  if (r.max_tokens && (*r.max_tokens < 1 && !(*r.max_tokens == 0 && r.echo)))
    return bad("max_tokens", "'max_tokens' must be at least 1" + std::string(chat ? "" : " (0 with echo)"));
  detail::collect_unread(d, body_size, r.unread);
  return std::nullopt;
}

}  // namespace hedge::server
