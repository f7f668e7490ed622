// hedge/model/generate.hpp: a prompt in, a stream of tokens out through a callback, each
// with its text and the signals of its choice.
//
// `generator::run` prefills the prompt into a session, then samples and decodes one token
// at a time. Each token reaches the callback with the text it completes: never part of a
// UTF-8 character (tokenizer.hpp's stream_decoder holds an incomplete one back), and never
// text that may begin a stop string until the next tokens show it does not (held back at
// most the longest stop string's length). Generation stops on a stop token (the
// vocabulary's end-of-generation set: EOS, EOT, <|im_end|>, ..., unless
// `ignore_eos`), after `max_tokens`, on a stop string (its text and what follows it are not
// delivered), or when the callback returns false (cancelled). Held-back text is delivered
// at the end as one last callback with `id == no_token`. The session keeps every token
// decoded, so a cancelled or stopped generation can be continued or rolled back.
//
// Errors are results: a prompt or generation that does not fit the context is
// `capacity_exceeded`, reported after every token produced before it was delivered. The
// generator owns its buffers (sized at `make`): a run allocates nothing beyond them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/model/sampler.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/model/vocabulary.hpp"

namespace hedge::model {

/// When to stop, and what to report.
struct generation_options {
  std::size_t max_tokens = 256;                   ///< tokens generated after the prompt
  std::span<const std::string_view> stop = {};    ///< stop strings
  std::span<const token_id> stop_tokens = {};     ///< tokens that end generation; empty = the vocabulary's end-of-generation set (EOS, EOT, ...)
  bool ignore_eos = false;                        ///< never stop on a stop token
  std::size_t alternatives = 0;                   ///< alternatives per token (<= token_choice::max_alternatives)
};

enum class stop_reason { stop_token, max_tokens, stop_string, cancelled };

constexpr std::string_view to_string(stop_reason r) noexcept {
  switch (r) {
    case stop_reason::stop_token: return "stop_token";
    case stop_reason::max_tokens: return "max_tokens";
    case stop_reason::stop_string: return "stop_string";
    default: return "cancelled";
  }
}

/// One generated token as the callback sees it.
struct generated_token {
  token_id id = no_token;     ///< no_token for the final delivery of held-back text
  std::string_view text;      ///< the text this token completes (valid during the callback)
  token_choice choice;        ///< log-prob, entropy, alternatives
  std::uint64_t position = 0; ///< its position in the session
};

/// What a run did.
struct generation_summary {
  std::size_t prompt_tokens = 0;
  std::size_t generated = 0;  ///< tokens sampled (a stop token included)
  stop_reason reason = stop_reason::max_tokens;
  double prefill_seconds = 0.0, decode_seconds = 0.0;
};

/// Runs generation on a model (forward.hpp's llama) with a tokenizer.
template <class Model>
class generator {
 public:
  /// Buffers for the model's vocabulary and stop strings of up to `max_stop_bytes`.
  static result<generator> make(Model& model, const tokenizer& tok, std::size_t max_stop_bytes = 64) {
    generator g;
    g.model_ = &model;
    g.tokenizer_ = &tok;
    const std::size_t vocab = model.config().vocab_size;
    if (tok.vocab().size() != vocab)
      return error{errc::shape_mismatch} << "the tokenizer has " << tok.vocab().size() << " tokens, the model "
                                         << vocab;
    g.logits_.resize(vocab);
    g.sampler_workspace_.resize(sampler_workspace_bytes(vocab));
    g.history_.reserve(model.context());
    g.pending_.reserve(max_stop_bytes + 2 * tok.vocab().max_piece_bytes() + 8);
    g.max_stop_bytes_ = max_stop_bytes;
    return g;
  }

  /// Prefills `prompt` into `session` (which may already hold tokens), then generates.
  template <class Random, Executor E, class OnToken>
  result<generation_summary> run(kv::kv_seq session, std::span<const token_id> prompt, sampler<Random>& sampler,
                                 const generation_options& options, E& executor, OnToken&& on_token) {
    for (const auto s : options.stop)
      if (s.empty() || s.size() > max_stop_bytes_)
        return error{errc::invalid_argument} << "a stop string of " << s.size() << " bytes (1 to " << max_stop_bytes_
                                             << " allowed)";
    generation_summary summary;
    summary.prompt_tokens = prompt.size();
    history_.assign(prompt.begin(), prompt.end());
    pending_.clear();
    stream_decoder text(*tokenizer_);
    if (auto followed = text.follow(prompt); !followed) return followed.error();
    const token_id bos = tokenizer_->vocab().settings().bos;
    const auto clock_start = std::chrono::steady_clock::now();
    auto logits = model_->prefill(session, prompt, executor);
    if (!logits) return logits.error();
    summary.prefill_seconds = seconds_since(clock_start);
    const auto decode_start = std::chrono::steady_clock::now();
    auto position = model_->length(session);
    if (!position) return position.error();

    const auto finish = [&](stop_reason reason) -> result<generation_summary> {
      summary.reason = reason;
      summary.decode_seconds = seconds_since(decode_start);
      if (reason != stop_reason::cancelled) {
        text.finish([&](std::string_view s) { pending_.append(s); });
        if (!pending_.empty()) on_token(generated_token{no_token, pending_, {}, *position});
      }
      return summary;
    };

    for (std::size_t n = 0; n < options.max_tokens; ++n) {
      std::copy(logits->begin(), logits->end(), logits_.begin());
      auto choice = sampler.sample(logits_, history_, sampler_workspace_, options.alternatives);
      if (!choice) return choice.error();
      const token_id id = choice->id;
      ++summary.generated;
      history_.push_back(id);
      if (!options.ignore_eos && is_stop_token(id, options)) return finish(stop_reason::stop_token);
      // The token's text: what the decoder releases, less what may begin a stop string.
      if (id != bos) {
        auto pushed = text.push(id, [&](std::string_view s) { pending_.append(s); });
        if (!pushed) return pushed.error();
      }
      const auto [stop_at, keep] = scan_stop(options.stop);
      const bool stopped = stop_at != std::string::npos;
      const std::size_t deliver = stopped ? stop_at : pending_.size() - keep;
      const bool go_on = on_token(generated_token{id, std::string_view(pending_).substr(0, deliver), *choice, *position});
      pending_.erase(0, stopped ? pending_.size() : deliver);
      if (stopped) return finish(stop_reason::stop_string);
      if (!go_on) return finish(stop_reason::cancelled);
      if (n + 1 == options.max_tokens) break;
      logits = model_->decode(session, id, executor);
      if (!logits) {
        static_cast<void>(finish(stop_reason::max_tokens));  // deliver what is held back first
        return logits.error();
      }
      ++*position;
    }
    return finish(stop_reason::max_tokens);
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  bool is_stop_token(token_id id, const generation_options& options) const noexcept {
    if (options.stop_tokens.empty()) return tokenizer_->vocab().is_end_of_generation(id);
    return std::find(options.stop_tokens.begin(), options.stop_tokens.end(), id) != options.stop_tokens.end();
  }

  struct stop_scan {
    std::size_t stop_at;  ///< where the first stop string starts in pending_, or npos
    std::size_t keep;     ///< bytes at the end of pending_ that may begin a stop string
  };

  /// The earliest stop string in pending_, or how much of its end to hold back.
  stop_scan scan_stop(std::span<const std::string_view> stops) const noexcept {
    stop_scan s{std::string::npos, 0};
    const std::string_view p(pending_);
    for (const auto stop : stops) {
      if (const auto at = p.find(stop); at != std::string_view::npos && at < s.stop_at) s.stop_at = at;
      for (std::size_t k = std::min(stop.size() - 1, p.size()); k > s.keep; --k)
        if (p.substr(p.size() - k) == stop.substr(0, k)) {
          s.keep = k;
          break;
        }
    }
    return s;
  }

  Model* model_ = nullptr;
  const tokenizer* tokenizer_ = nullptr;
  std::vector<float> logits_;
  std::vector<std::byte> sampler_workspace_;
  std::vector<token_id> history_;
  std::string pending_;
  std::size_t max_stop_bytes_ = 0;
};

}  // namespace hedge::model
