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
// `generation` is the same loop's state between forward passes, for callers that run the
// passes themselves (several sessions in one batch); `generator::run` is built on it.
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

/// One generation between forward passes: all that `generator::run` does around each
/// pass, for a caller that runs the passes itself (a server decoding several sessions in
/// one batch: llama::decode_batch). `start` reads the prompt; each `next` samples a token
/// from the logits after the last one and delivers its text, and says whether that token
/// is to be decoded for the next call; when it says no, the generation has ended (`reason`)
/// and what was held back has been delivered. It owns its buffers (sized at `make`).
class generation {
 public:
  /// Buffers for a vocabulary of `vocab` tokens, `context` positions and stop strings of up
  /// to `max_stop_bytes`.
  static result<generation> make(const tokenizer& tok, std::size_t vocab, std::size_t context,
                                 std::size_t max_stop_bytes = 64) {
    if (tok.vocab().size() != vocab)
      return error{errc::shape_mismatch} << "the tokenizer has " << tok.vocab().size() << " tokens, the model "
                                         << vocab;
    generation g(tok);
    g.logits_.resize(vocab);
    g.sampler_workspace_.resize(sampler_workspace_bytes(vocab));
    g.history_.reserve(context);
    g.pending_.reserve(max_stop_bytes + 2 * tok.vocab().max_piece_bytes() + 8);
    g.max_stop_bytes_ = max_stop_bytes;
    return g;
  }

  /// Starts a generation after `prompt` (the session holds it, or will before `next`).
  /// `options` (and the stop strings it names) must outlive the generation.
  result<void> start(std::span<const token_id> prompt, const generation_options& options) {
    for (const auto s : options.stop)
      if (s.empty() || s.size() > max_stop_bytes_)
        return error{errc::invalid_argument} << "a stop string of " << s.size() << " bytes (1 to " << max_stop_bytes_
                                             << " allowed)";
    options_ = &options;
    history_.assign(prompt.begin(), prompt.end());
    pending_.clear();
    generated_ = 0;
    reason_ = stop_reason::max_tokens;
    text_ = stream_decoder(*tokenizer_);
    return text_.follow(prompt);
  }

  /// Samples the token at `position` from `logits` and delivers its text to `on_token`
  /// (a generated_token; returns false to cancel). True: decode last() at `position` and
  /// call again with its logits; false: the generation has ended.
  template <class Random, class OnToken>
  result<bool> next(std::span<const float> logits, sampler<Random>& sampler, std::uint64_t position,
                    OnToken&& on_token) {
    const generation_options& options = *options_;
    if (generated_ >= options.max_tokens) return end(stop_reason::max_tokens, position, on_token);
    std::copy(logits.begin(), logits.end(), logits_.begin());
    auto choice = sampler.sample(logits_, history_, sampler_workspace_, options.alternatives);
    if (!choice) return choice.error();
    const token_id id = choice->id;
    ++generated_;
    history_.push_back(id);
    if (!options.ignore_eos && is_stop_token(id, options)) return end(stop_reason::stop_token, position, on_token);
    // The token's text: what the decoder releases, less what may begin a stop string.
    if (id != tokenizer_->vocab().settings().bos) {
      auto pushed = text_.push(id, [&](std::string_view s) { pending_.append(s); });
      if (!pushed) return pushed.error();
    }
    const auto [stop_at, keep] = scan_stop(options.stop);
    const bool stopped = stop_at != std::string::npos;
    const std::size_t deliver = stopped ? stop_at : pending_.size() - keep;
    const bool go_on = on_token(generated_token{id, std::string_view(pending_).substr(0, deliver), *choice, position});
    pending_.erase(0, stopped ? pending_.size() : deliver);
    if (stopped) return end(stop_reason::stop_string, position, on_token);
    if (!go_on) return end(stop_reason::cancelled, position, on_token);
    if (generated_ == options.max_tokens) return end(stop_reason::max_tokens, position, on_token);
    return true;
  }

  /// Ends the generation for `reason`: delivers what is held back (unless cancelled) as one
  /// last generated_token with id no_token; returns false, for `next`.
  template <class OnToken>
  bool end(stop_reason reason, std::uint64_t position, OnToken&& on_token) {
    reason_ = reason;
    if (reason == stop_reason::cancelled) return false;
    text_.finish([&](std::string_view s) { pending_.append(s); });
    if (!pending_.empty()) on_token(generated_token{no_token, pending_, {}, position});
    pending_.clear();
    return false;
  }

  /// The token the last `next` sampled.
  [[nodiscard]] token_id last() const noexcept { return history_.back(); }
  [[nodiscard]] std::size_t generated() const noexcept { return generated_; }
  [[nodiscard]] stop_reason reason() const noexcept { return reason_; }

 private:
  explicit generation(const tokenizer& tok) : tokenizer_(&tok), text_(tok) {}

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

  const tokenizer* tokenizer_;
  const generation_options* options_ = nullptr;
  stream_decoder text_;
  std::vector<float> logits_;
  std::vector<std::byte> sampler_workspace_;
  std::vector<token_id> history_;
  std::string pending_;
  std::size_t max_stop_bytes_ = 0;
  std::size_t generated_ = 0;
  stop_reason reason_ = stop_reason::max_tokens;
};

/// Runs generation on a model (forward.hpp's llama) with a tokenizer: prefill, then a
/// generation's tokens one decode at a time.
template <class Model>
class generator {
 public:
  /// Buffers for the model's vocabulary and stop strings of up to `max_stop_bytes`.
  static result<generator> make(Model& model, const tokenizer& tok, std::size_t max_stop_bytes = 64) {
    auto state = generation::make(tok, model.config().vocab_size, model.context(), max_stop_bytes);
    if (!state) return state.error();
    return generator(model, std::move(*state));
  }

  /// Prefills `prompt` into `session` (which may already hold tokens), then generates.
  template <class Random, Executor E, class OnToken>
  result<generation_summary> run(kv::kv_seq session, std::span<const token_id> prompt, sampler<Random>& sampler,
                                 const generation_options& options, E& executor, OnToken&& on_token) {
    HEDGE_TRY(state_.start(prompt, options));
    generation_summary summary;
    summary.prompt_tokens = prompt.size();
    const auto clock_start = std::chrono::steady_clock::now();
    auto logits = model_->prefill(session, prompt, executor);
    if (!logits) return logits.error();
    summary.prefill_seconds = seconds_since(clock_start);
    const auto decode_start = std::chrono::steady_clock::now();
    auto position = model_->length(session);
    if (!position) return position.error();
    const auto done = [&]() -> generation_summary {
      summary.generated = state_.generated();
      summary.reason = state_.reason();
      summary.decode_seconds = seconds_since(decode_start);
      return summary;
    };
    for (;;) {
      auto more = state_.next(*logits, sampler, *position, on_token);
      if (!more) return more.error();
      if (!*more) return done();
      logits = model_->decode(session, state_.last(), executor);
      if (!logits) {
        state_.end(stop_reason::max_tokens, *position, on_token);  // deliver what is held back first
        return logits.error();
      }
      ++*position;
    }
  }

 private:
  generator(Model& model, generation state) : model_(&model), state_(std::move(state)) {}

  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  Model* model_;
  generation state_;
};

}  // namespace hedge::model
