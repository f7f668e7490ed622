// tools/server/chat_template.hpp: chat messages to prompt tokens.
//
// A GGUF's `tokenizer.chat_template` is a Jinja program; hedge-server does not run Jinja.
// It recognises the well-known templates by a marker in their text and renders those
// itself, the layout each model card documents:
//   ChatML   (`<|im_start|>`)        <|im_start|>ROLE\nCONTENT<|im_end|>\n ... <|im_start|>assistant\n
//   Llama 3  (`<|start_header_id|>`) <|begin_of_text|><|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
//                                    ... <|start_header_id|>assistant<|end_header_id|>\n\n
//   Llama 2  (`[INST]`)              <s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ASSISTANT </s><s>[INST] ...
//   Zephyr   (`<|user|>`)            <|ROLE|>\nCONTENT</s>\n ... <|assistant|>\n
// A marker that is a token of the vocabulary becomes that token; other text is encoded
// (without BOS), each piece as the tokenizer encodes a fragment. The turn-end marker
// (<|im_end|>, <|eot_id|>) joins BOS and EOS as a stop token.
// Any other template, and a model without one (a llama2.c checkpoint), uses the default:
// the messages' contents joined in order with "\n", encoded with BOS as hedge-generate
// encodes `-i`: a chat of one user message is that prompt, token for token.
// `hedge-server --chat-template NAME` picks a format whatever the file says.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/model/tokenizer.hpp"

namespace hedge::server {

struct chat_message {
  std::string role, content;
};

enum class chat_format { plain, chatml, llama3, llama2, zephyr };

constexpr std::string_view to_string(chat_format f) noexcept {
  switch (f) {
    case chat_format::chatml: return "chatml";
    case chat_format::llama3: return "llama3";
    case chat_format::llama2: return "llama2";
    case chat_format::zephyr: return "zephyr";
    default: return "plain";
  }
}

/// A format by its name (`--chat-template`), or none.
inline std::optional<chat_format> chat_format_named(std::string_view name) noexcept {
  for (const auto f : {chat_format::plain, chat_format::chatml, chat_format::llama3, chat_format::llama2, chat_format::zephyr})
    if (to_string(f) == name) return f;
  return std::nullopt;
}

/// The format of a GGUF chat template, by its marker; `plain` for none or an unknown one.
inline chat_format detect_chat_format(std::string_view tmpl) noexcept {
  if (tmpl.find("<|im_start|>") != std::string_view::npos) return chat_format::chatml;
  if (tmpl.find("<|start_header_id|>") != std::string_view::npos) return chat_format::llama3;
  if (tmpl.find("[INST]") != std::string_view::npos) return chat_format::llama2;
  if (tmpl.find("<|user|>") != std::string_view::npos) return chat_format::zephyr;
  return chat_format::plain;
}

/// Renders messages into prompt tokens, and lists the format's extra stop tokens.
class chat_renderer {
 public:
  chat_renderer(const model::tokenizer& tok, chat_format format) : tok_(&tok), format_(format) {
    const auto& s = tok.vocab().settings();
    stop_tokens_ = {s.bos, s.eos};
    const auto end_marker = format == chat_format::chatml ? "<|im_end|>"
                            : format == chat_format::llama3 ? "<|eot_id|>"
                                                            : "";
    if (*end_marker)
      if (const auto id = tok.vocab().find(end_marker); id != model::no_token) stop_tokens_.push_back(id);
  }

  [[nodiscard]] chat_format format() const noexcept { return format_; }
  [[nodiscard]] const std::vector<model::token_id>& stop_tokens() const noexcept { return stop_tokens_; }

  result<std::vector<model::token_id>> render(const std::vector<chat_message>& messages) const {
    std::vector<model::token_id> out;
    const auto& settings = tok_->vocab().settings();
    if (format_ == chat_format::plain) {
      std::string text;
      for (std::size_t i = 0; i < messages.size(); ++i) {
        if (i > 0) text += '\n';
        text += messages[i].content;
      }
      return tok_->encode(text);
    }
    std::string text;  // text not yet encoded
    const auto flush = [&]() -> result<void> {
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
      if (id == model::no_token) return text.append(m), ok();
      HEDGE_TRY(flush());
      out.push_back(id);
      return ok();
    };
    const auto token = [&](model::token_id id) -> result<void> {
      HEDGE_TRY(flush());
      if (id != model::no_token) out.push_back(id);
      return ok();
    };
    switch (format_) {
      case chat_format::chatml:
        for (const auto& m : messages) {
          HEDGE_TRY(marker("<|im_start|>"));
          text += m.role + "\n" + m.content;
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
          text += "\n\n" + m.content;
          HEDGE_TRY(marker("<|eot_id|>"));
        }
        HEDGE_TRY(marker("<|start_header_id|>"));
        text += "assistant";
        HEDGE_TRY(marker("<|end_header_id|>"));
        text += "\n\n";
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
            text += " " + m.content + " ";
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
          text += "<|" + m.role + "|>\n" + m.content;
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
  const model::tokenizer* tok_;
  chat_format format_;
  std::vector<model::token_id> stop_tokens_;
};

}  // namespace hedge::server
