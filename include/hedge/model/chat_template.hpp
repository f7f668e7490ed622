// hedge/model/chat_template.hpp: chat messages to prompt tokens.
//
// A GGUF's `tokenizer.chat_template` is a Jinja program; hedge does not run Jinja. It
// recognises the well-known templates by a marker in their text and renders those itself,
// the layout each model card documents (and llama.cpp's llm_chat_apply_template renders):
//   ChatML   (`<|im_start|>`: Qwen2.5, Qwen3, SmolLM)
//            <|im_start|>ROLE\nCONTENT<|im_end|>\n ... <|im_start|>assistant\n
//   Llama 3  (`<|start_header_id|>`)
//            <|begin_of_text|><|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
//            ... <|start_header_id|>assistant<|end_header_id|>\n\n
//   Gemma    (`<start_of_turn>`: Gemma 2 and 3; no system role: a system message opens the
//            first user turn, followed by a blank line; the assistant is "model")
//            <bos><start_of_turn>user\nCONTENT<end_of_turn>\n ... <start_of_turn>model\n
//   Phi-3    (`<|user|>` and `<|end|>`)
//            <|ROLE|>\nCONTENT<|end|>\n ... <|assistant|>\n
//   Llama 2  (`[INST]`)   <s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ASSISTANT </s><s>[INST] ...
//   Zephyr   (`<|user|>` without `<|end|>`)   <|ROLE|>\nCONTENT</s>\n ... <|assistant|>\n
// A marker that is a token of the vocabulary becomes that token; other text is encoded
// (without BOS), each piece as the tokenizer encodes a fragment, so the ids are those of
// llama.cpp tokenizing the rendered prompt with parse_special (white space after a marker
// dropped where the vocabulary strips it: Phi-3's). BOS comes first where the vocabulary
// adds one. The stop tokens are BOS and the vocabulary's end-of-generation set (EOS,
// <|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>, ...).
// Any other template, and a model without one (a llama2.c checkpoint), uses the default:
// the messages' contents joined in order with "\n", encoded with BOS as hedge-generate
// encodes `-i`: a chat of one user message is that prompt, token for token.
// `hedge-server --chat-template NAME` picks a format whatever the file says.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/model/chat_message.hpp"
#include "hedge/model/tokenizer.hpp"

namespace hedge::model {

enum class chat_format { plain, chatml, llama3, gemma, phi3, llama2, zephyr };

constexpr std::string_view to_string(chat_format f) noexcept {
  switch (f) {
    case chat_format::chatml: return "chatml";
    case chat_format::llama3: return "llama3";
    case chat_format::gemma: return "gemma";
    case chat_format::phi3: return "phi3";
    case chat_format::llama2: return "llama2";
    case chat_format::zephyr: return "zephyr";
    default: return "plain";
  }
}

/// A format by its name (`--chat-template`), or none.
inline std::optional<chat_format> chat_format_named(std::string_view name) noexcept {
  for (const auto f : {chat_format::plain, chat_format::chatml, chat_format::llama3, chat_format::gemma, chat_format::phi3,
                       chat_format::llama2, chat_format::zephyr})
    if (to_string(f) == name) return f;
  return std::nullopt;
}

/// The format of a GGUF chat template, by its marker; `plain` for none or an unknown one.
inline chat_format detect_chat_format(std::string_view tmpl) noexcept {
  const auto has = [tmpl](std::string_view marker) { return tmpl.find(marker) != std::string_view::npos; };
  if (has("<|im_start|>")) return chat_format::chatml;
  if (has("<|start_header_id|>")) return chat_format::llama3;
  if (has("<start_of_turn>")) return chat_format::gemma;
  if (has("<|user|>") && has("<|end|>")) return chat_format::phi3;
  if (has("[INST]")) return chat_format::llama2;
  if (has("<|user|>")) return chat_format::zephyr;
  return chat_format::plain;
}

/// Renders messages into prompt tokens, and lists the format's extra stop tokens.
class chat_renderer {
 public:
  chat_renderer(const tokenizer& tok, chat_format format) : tok_(&tok), format_(format) {
    const auto& v = tok.vocab();
    if (v.settings().bos != no_token) stop_tokens_.push_back(v.settings().bos);
    for (const token_id id : v.end_of_generation())
      if (id != v.settings().bos) stop_tokens_.push_back(id);
  }

  [[nodiscard]] chat_format format() const noexcept { return format_; }
  [[nodiscard]] const std::vector<token_id>& stop_tokens() const noexcept { return stop_tokens_; }

  result<std::vector<token_id>> render(std::span<const chat_message> messages) const {
    std::vector<token_id> out;
    const auto& settings = tok_->vocab().settings();
    if (format_ == chat_format::plain) {
      std::string text;
      for (std::size_t i = 0; i < messages.size(); ++i) {
        if (i > 0) text += '\n';
        text += messages[i].content;
      }
      return tok_->encode(text);
    }
    std::string text;     // text not yet encoded
    bool strip = false;   // drop the white space that opens `text` (after a marker token)
    const auto flush = [&]() -> result<void> {
      if (strip) {
        std::size_t skip = 0;
        while (skip < text.size() && (text[skip] == ' ' || (text[skip] >= '\t' && text[skip] <= '\r'))) ++skip;
        text.erase(0, skip);
      }
      strip = false;
      if (text.empty()) return ok();
      auto ids = tok_->encode(text, {.add_special = false});
      if (!ids) return ids.error();
      out.insert(out.end(), ids->begin(), ids->end());
      text.clear();
      return ok();
    };
    // A marker: its token when the vocabulary has one, else text.
    const auto marker = [&](std::string_view m) -> result<void> {
      const auto id = tok_->vocab().find(m);
      if (id == no_token) return text.append(m), ok();
      HEDGE_TRY(flush());
      out.push_back(id);
      strip = tok_->vocab().settings().strip_after_special && m != "<|endoftext|>";
      return ok();
    };
    const auto token = [&](token_id id) -> result<void> {
      HEDGE_TRY(flush());
      if (id != no_token) out.push_back(id);
      return ok();
    };
    switch (format_) {
      case chat_format::chatml:
        for (const auto& m : messages) {
          HEDGE_TRY(marker("<|im_start|>"));
          text.append(m.role).append("\n").append(m.content);
          HEDGE_TRY(marker("<|im_end|>"));
          text += "\n";
        }
        HEDGE_TRY(marker("<|im_start|>"));
        text += "assistant\n";
        break;
      case chat_format::llama3:
        HEDGE_TRY(marker("<|begin_of_text|>"));
        for (const auto& m : messages) {
          HEDGE_TRY(marker("<|start_header_id|>"));
          text += m.role;
          HEDGE_TRY(marker("<|end_header_id|>"));
          text.append("\n\n").append(m.content);
          HEDGE_TRY(marker("<|eot_id|>"));
        }
        HEDGE_TRY(marker("<|start_header_id|>"));
        text += "assistant";
        HEDGE_TRY(marker("<|end_header_id|>"));
        text += "\n\n";
        break;
      case chat_format::gemma: {
        std::string system;
        bool first_user = true;
        for (const auto& m : messages) {
          if (m.role == "system") {
            system += m.content;
            continue;
          }
          HEDGE_TRY(marker("<start_of_turn>"));
          text.append(m.role == "assistant" ? std::string_view("model") : m.role).append("\n");
          if (m.role == "user" && first_user && !system.empty()) text += system + "\n\n";
          if (m.role == "user") first_user = false;
          text += m.content;
          HEDGE_TRY(marker("<end_of_turn>"));
          text += "\n";
        }
        HEDGE_TRY(marker("<start_of_turn>"));
        text += "model\n";
        break;
      }
      case chat_format::phi3:
        for (const auto& m : messages) {
          HEDGE_TRY(marker("<|" + std::string(m.role) + "|>"));
          text.append("\n").append(m.content);
          HEDGE_TRY(marker("<|end|>"));
          text += "\n";
        }
        HEDGE_TRY(marker("<|assistant|>"));
        text += "\n";
        break;
      case chat_format::llama2: {
        std::string system;
        bool open = false;  // an [INST] waits for its [/INST]
        for (const auto& m : messages) {
          if (m.role == "system") {
            system = m.content;
          } else if (m.role == "assistant") {
            if (open) text += " [/INST]";
            open = false;
            text.append(" ").append(m.content).append(" ");
            HEDGE_TRY(token(settings.eos));
          } else {
            if (open) text += " [/INST]";
            HEDGE_TRY(token(settings.bos));
            text += "[INST] ";
            if (!system.empty()) text += "<<SYS>>\n" + system + "\n<</SYS>>\n\n", system.clear();
            text += m.content;
            open = true;
          }
        }
        if (open) text += " [/INST]";
        break;
      }
      case chat_format::zephyr:
        for (const auto& m : messages) {
          text.append("<|").append(m.role).append("|>\n").append(m.content);
          HEDGE_TRY(token(settings.eos));
          text += "\n";
        }
        text += "<|assistant|>\n";
        break;
      default: break;
    }
    HEDGE_TRY(flush());
    if (out.empty() || (settings.add_bos && out.front() != settings.bos && format_ != chat_format::llama3))
      out.insert(out.begin(), settings.bos);
    return out;
  }

 private:
  const tokenizer* tok_;
  chat_format format_;
  std::vector<token_id> stop_tokens_;
};

}  // namespace hedge::model
