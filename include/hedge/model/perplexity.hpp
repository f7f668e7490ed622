// hedge/model/perplexity.hpp: how well a model predicts a text, and how far a model's
// predictions are from a reference model's (a quantized file against its F16 or F32
// source): llama.cpp's llama-perplexity method (tools/perplexity/perplexity.cpp), without its
// logits file.
//
// The method (perplexity_chunks, measure_perplexity):
//   - the whole text is tokenized once, BOS first where the vocabulary adds one;
//   - it is cut into chunks of `context` tokens (the tail that does not fill a chunk is
//     left out); a text of fewer than 2 x context tokens is refused, as llama.cpp refuses it;
//   - each chunk runs from an empty cache, its first token replaced by BOS where the
//     vocabulary adds one;
//   - only the second half is scored: the logits at positions first = context / 2 up to
//     context - 2 predict the chunk's tokens first + 1 up to context - 1, so every scored
//     token has at least context / 2 tokens before it;
//   - perplexity = exp(mean negative log-likelihood), its uncertainty ppl x the standard
//     error of that mean (sqrt(var / (n - 1))).
// With a reference (measure_kl_divergence), both models run the same chunks and each scored
// position adds the reference's and the model's negative log-likelihoods, the KL divergence
// KL(reference || model) = sum_i p_ref(i) (log p_ref(i) - log p(i)), whether both rank the
// same token first, and p(target) - p_ref(target); the summary is llama-perplexity
// --kl-divergence's (Mean PPL(Q), PPL(base), ln(PPL(Q)/PPL(base)) and PPL(Q) - PPL(base)
// with the covariance of the two, Mean KLD, RMS Δp, Same top p).
//
// Where hedge differs from llama.cpp, on purpose:
//   - both models run in one process, so the reference's log-probabilities are exact
//     (llama.cpp stores them in its logits file as 16-bit steps over [max - 16, max] and
//     drops the terms below e^-16 from the KL sum): KL, top-1 and the reference's
//     perplexity here are those of the float logits;
//   - log-softmax in double throughout (llama.cpp sums expf terms in double and rounds the
//     result to float in KL mode);
//   - a chunk runs as prefills: its context half, then its scored half in blocks of up to 64
//     rows whose every logit row is kept (forward.hpp's prefill_logits; llama.cpp runs the
//     chunk as one batch that outputs the scored rows);
//   - the standard error of a mean is computed for any count above one (llama.cpp's KL mode
//     prints 0 below 11).
// The forward pass itself differs from llama.cpp's as docs/model.md says (hedge's F32 KV
// cache against llama.cpp's F16 one, and ties in the activations' Q8_0 rounding).
//
// No OS calls: the caller tokenizes the text and runs the model's sessions on its executor.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/model/scoring.hpp"
#include "hedge/model/vocabulary.hpp"

namespace hedge::model {

/// A mean and its standard error, printed by llama.cpp as "value ± uncertainty".
struct estimate {
  double value = 0.0;
  double uncertainty = 0.0;
};

/// The mean of `count` values whose sum is `sum` and sum of squares `sum2`, with the
/// standard error of the mean, sqrt(variance / (count - 1)) (0 for a count below 2).
[[nodiscard]] inline estimate mean_estimate(double sum, double sum2, std::size_t count) noexcept {
  if (count == 0) return {};
  const double n = static_cast<double>(count), mean = sum / n, variance = sum2 / n - mean * mean;
  return {mean, count > 1 && variance > 0.0 ? std::sqrt(variance / (n - 1.0)) : 0.0};
}

/// How a text of `tokens` ids is cut: `count` chunks of `context` tokens, each scored from
/// position `first` (context / 2) on.
struct perplexity_chunks {
  std::size_t context = 0;
  std::size_t first = 0;
  std::size_t count = 0;

  /// Tokens scored per chunk: positions first..context-2 predict tokens first+1..context-1.
  [[nodiscard]] std::size_t scored() const noexcept { return context - 1 - first; }
  /// Chunk i's tokens in the text.
  [[nodiscard]] std::span<const token_id> chunk(std::span<const token_id> tokens, std::size_t i) const noexcept {
    return tokens.subspan(i * context, context);
  }

  /// The chunks of a text of `tokens` ids (BOS included) for a context of `context`
  /// positions, at most `max_chunks` of them (0: all). A context below 4 is refused (its
  /// second half would score one token or none), and so is a text of fewer than 2 x context
  /// tokens (llama-perplexity's rule).
  static result<perplexity_chunks> plan(std::size_t tokens, std::size_t context, std::size_t max_chunks = 0) noexcept {
    if (context < 4)
      return error{errc::invalid_argument} << "a perplexity context of " << context << " tokens: at least 4 are needed";
    if (tokens / 2 < context)
      return error{errc::invalid_argument} << "the text makes " << tokens << " tokens: perplexity with a context of "
                                           << context << " needs at least " << 2 * context
                                           << " (2 chunks); give a longer text or a smaller context";
    perplexity_chunks p{context, context / 2, tokens / context};
    if (max_chunks != 0) p.count = std::min(p.count, max_chunks);
    return p;
  }
};

/// -log softmax(logits)[target], in double (log_sum: log_sum_exp(logits)).
[[nodiscard]] inline double negative_log_likelihood(std::span<const float> logits, token_id target,
                                                    double log_sum) noexcept {
  return log_sum - static_cast<double>(logits[static_cast<std::size_t>(target)]);
}

/// The first index of the largest logit (the greedy choice).
[[nodiscard]] inline std::size_t top_token(std::span<const float> logits) noexcept {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

/// A perplexity's running sums: one negative log-likelihood per scored token.
class perplexity_accumulator {
 public:
  void add(double nll) noexcept {
    sum_ += nll;
    sum2_ += nll * nll;
    ++count_;
  }
  /// Adds the score of `target` after one position's `logits`.
  void add(std::span<const float> logits, token_id target) noexcept {
    add(negative_log_likelihood(logits, target, log_sum_exp(logits)));
  }

  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  /// The mean negative log-likelihood, ln(perplexity), and its standard error.
  [[nodiscard]] estimate log_perplexity() const noexcept { return mean_estimate(sum_, sum2_, count_); }
  /// exp(mean NLL) ± exp(mean NLL) x its standard error (the error carried through exp).
  [[nodiscard]] estimate perplexity() const noexcept {
    const estimate l = log_perplexity();
    const double p = std::exp(l.value);
    return {p, p * l.uncertainty};
  }

 private:
  double sum_ = 0.0, sum2_ = 0.0;
  std::size_t count_ = 0;
};

/// llama-perplexity --kl-divergence's figures.
struct kl_divergence_summary {
  std::size_t count = 0;          ///< scored tokens
  estimate perplexity;            ///< Mean PPL(Q): the model's
  estimate reference_perplexity;  ///< Mean PPL(base): the reference's
  double correlation = 0.0;       ///< Cor(ln(PPL(Q)), ln(PPL(base))), of the two means
  estimate log_ratio;             ///< Mean ln(PPL(Q)/PPL(base)), with their covariance
  estimate ratio;                 ///< Mean PPL(Q)/PPL(base)
  estimate difference;            ///< Mean PPL(Q)-PPL(base)
  estimate kl_divergence;         ///< Mean KLD (nats)
  double max_kl_divergence = 0.0; ///< Maximum KLD
  estimate rms_p_diff;            ///< RMS Δp: of p(target) - p_base(target), a fraction
  estimate same_top;              ///< Same top p: the fraction of positions whose top tokens agree
};

/// The running sums of a comparison with a reference model, one scored position at a time.
class kl_divergence_accumulator {
 public:
  /// Adds one position: the model's and the reference's logits (the same vocabulary) and the
  /// token that followed.
  void add(std::span<const float> logits, std::span<const float> reference, token_id target) noexcept {
    const double log_sum = log_sum_exp(logits), reference_log_sum = log_sum_exp(reference);
    const double nll = negative_log_likelihood(logits, target, log_sum);
    const double nll_base = negative_log_likelihood(reference, target, reference_log_sum);
    nll_.add(nll);
    base_.add(nll_base);
    sum_nll_nll_base_ += nll * nll_base;
    double kl = 0.0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
      const double log_p_base = static_cast<double>(reference[i]) - reference_log_sum;
      kl += std::exp(log_p_base) * (log_p_base - (static_cast<double>(logits[i]) - log_sum));
    }
    sum_kld_ += kl;
    sum_kld2_ += kl * kl;
    max_kld_ = std::max(max_kld_, kl);
    const double p_diff = std::exp(-nll) - std::exp(-nll_base), p_diff2 = p_diff * p_diff;
    sum_p_diff2_ += p_diff2;
    sum_p_diff4_ += p_diff2 * p_diff2;
    if (top_token(logits) == top_token(reference)) ++same_top_;
  }

  [[nodiscard]] std::size_t count() const noexcept { return nll_.count(); }
  /// The model's perplexity so far (the running estimate).
  [[nodiscard]] estimate perplexity() const noexcept { return nll_.perplexity(); }

  [[nodiscard]] kl_divergence_summary summary() const noexcept {
    kl_divergence_summary s;
    const std::size_t n = count();
    s.count = n;
    s.perplexity = nll_.perplexity();
    s.reference_perplexity = base_.perplexity();
    const estimate log_q = nll_.log_perplexity(), log_base = base_.log_perplexity();
    // The covariance of the two means: cov(nll, nll_base) / (n - 1).
    const double dn = static_cast<double>(n);
    const double covariance = n > 1 ? (sum_nll_nll_base_ / dn - log_q.value * log_base.value) / (dn - 1.0) : 0.0;
    const double spread = log_q.uncertainty * log_base.uncertainty;
    s.correlation = spread > 0.0 ? covariance / spread : 0.0;
    const double ratio_variance = log_q.uncertainty * log_q.uncertainty +
                                  log_base.uncertainty * log_base.uncertainty - 2.0 * covariance;
    s.log_ratio = {log_q.value - log_base.value, std::sqrt(std::max(0.0, ratio_variance))};
    const double ratio = std::exp(s.log_ratio.value);
    s.ratio = {ratio, ratio * s.log_ratio.uncertainty};
    const double ppl_covariance = s.perplexity.value * s.reference_perplexity.value * covariance;
    const double difference_variance = s.perplexity.uncertainty * s.perplexity.uncertainty +
                                       s.reference_perplexity.uncertainty * s.reference_perplexity.uncertainty -
                                       2.0 * ppl_covariance;
    s.difference = {s.perplexity.value - s.reference_perplexity.value, std::sqrt(std::max(0.0, difference_variance))};
    s.kl_divergence = mean_estimate(sum_kld_, sum_kld2_, n);
    s.max_kl_divergence = max_kld_;
    const estimate mse = mean_estimate(sum_p_diff2_, sum_p_diff4_, n);
    const double rms = std::sqrt(mse.value);
    s.rms_p_diff = {rms, rms > 0.0 ? 0.5 / rms * mse.uncertainty : 0.0};
    const double same = n == 0 ? 0.0 : static_cast<double>(same_top_) / dn;
    s.same_top = {same, n > 1 ? std::sqrt(same * (1.0 - same) / (dn - 1.0)) : 0.0};
    return s;
  }

 private:
  perplexity_accumulator nll_, base_;
  double sum_nll_nll_base_ = 0.0, sum_kld_ = 0.0, sum_kld2_ = 0.0, max_kld_ = 0.0;
  double sum_p_diff2_ = 0.0, sum_p_diff4_ = 0.0;
  std::size_t same_top_ = 0;
};

/// Whether `reference` can judge a model of vocabulary `v`: the same pieces under the same
/// ids (an error names the first that differs).
inline result<void> check_same_vocabulary(const vocabulary& v, const vocabulary& reference) noexcept {
  if (v.size() != reference.size())
    return error{errc::shape_mismatch} << "the reference's vocabulary has " << reference.size() << " tokens, the model's "
                                       << v.size();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto id = static_cast<token_id>(i);
    if (v[id].piece != reference[id].piece)
      return error{errc::shape_mismatch} << "the reference's vocabulary differs from the model's at token " << i;
  }
  return ok();
}

/// Chunks run through one model's session, one at a time: the context half as one prefill,
/// then the scored half in blocks of rows whose logits prefill_logits keeps (forward.hpp),
/// handed out a position at a time. Each `next` returns the logits of the chunk's next
/// scored position (first, first + 1, ..., context - 2), valid until the block's last.
template <class Model>
class chunk_run {
 public:
  /// The most logits a block holds: 4 Mi floats (16 MiB), and at most 64 rows.
  static constexpr std::size_t block_floats = std::size_t{1} << 22, max_block_rows = 64;

  /// `rows`: the rows of a block (0: as many as block_floats and max_block_rows allow).
  static result<chunk_run> make(Model& model, kv::kv_seq session, std::size_t first, std::size_t rows = 0) noexcept {
    const std::size_t vocab = model.config().vocab_size;
    if (rows == 0) rows = std::clamp<std::size_t>(block_floats / std::max<std::size_t>(1, vocab), 1, max_block_rows);
    auto block = heap_storage<float>::make(rows * vocab);
    if (!block) return block.error();
    return chunk_run(model, session, first, rows, std::move(*block));
  }

  /// Starts chunk `input` (as the model sees it: BOS first where the vocabulary adds one).
  void begin(std::span<const token_id> input) noexcept {
    input_ = input;
    at_ = block_end_ = 0;
  }

  template <Executor E>
  result<std::span<const float>> next(E& executor) noexcept {
    const std::size_t vocab = model_->config().vocab_size;
    if (at_ == 0) {
      HEDGE_TRY(model_->rollback(session_, 0));
      auto context = model_->prefill(session_, input_.first(first_), executor);
      if (!context) return context.error();
      at_ = block_end_ = first_;
    }
    if (at_ + 1 >= input_.size())
      return error{errc::out_of_range} << "chunk_run: the chunk's " << input_.size() << " positions are all scored";
    if (at_ == block_end_) {
      const std::size_t rows = std::min(block_rows_, input_.size() - 1 - at_);
      HEDGE_TRY(model_->prefill_logits(session_, input_.subspan(at_, rows),
                                       matrix_view<float>(block_.data(), rows, vocab), executor));
      block_begin_ = at_;
      block_end_ = at_ + rows;
    }
    const std::size_t row = at_++ - block_begin_;
    return std::span<const float>(block_.data() + row * vocab, vocab);
  }

 private:
  chunk_run(Model& model, kv::kv_seq session, std::size_t first, std::size_t rows, heap_storage<float> block) noexcept
      : model_(&model), session_(session), first_(first), block_rows_(rows), block_(std::move(block)) {}

  Model* model_;
  kv::kv_seq session_;
  std::size_t first_, block_rows_;
  heap_storage<float> block_;
  std::span<const token_id> input_;
  std::size_t at_ = 0, block_begin_ = 0, block_end_ = 0;
};

namespace detail {

/// `chunks.chunk(tokens, i)` into `input`, its first token BOS where `bos` is a token.
inline void chunk_input(std::span<const token_id> tokens, const perplexity_chunks& chunks, std::size_t i, token_id bos,
                        std::span<token_id> input) noexcept {
  const auto chunk = chunks.chunk(tokens, i);
  std::copy(chunk.begin(), chunk.end(), input.begin());
  if (bos != no_token) input[0] = bos;
}

/// A session of `model` for the run, released when the run ends.
template <class Model>
class run_session {
 public:
  explicit run_session(Model& model) noexcept : model_(&model) {}
  ~run_session() {
    if (session_) static_cast<void>(model_->release(*session_));
  }
  run_session(const run_session&) = delete;
  run_session& operator=(const run_session&) = delete;
  result<kv::kv_seq> open() noexcept {
    auto s = model_->create_session();
    if (!s) return s.error();
    session_ = *s;
    return *s;
  }

 private:
  Model* model_;
  std::optional<kv::kv_seq> session_;
};

template <class Model>
result<void> check_context(const Model& model, const perplexity_chunks& chunks, const char* which) noexcept {
  if (model.context() < chunks.context)
    return error{errc::capacity_exceeded} << which << "'s context of " << model.context()
                                          << " positions is shorter than the chunks' " << chunks.context;
  return ok();
}

}  // namespace detail

/// The perplexity of `model` over `tokens` (the whole text's ids, BOS first where the
/// vocabulary adds one) in `chunks`; `bos`: the token that replaces each chunk's first
/// (no_token: none). After each chunk, on_chunk(chunk index, the accumulator so far).
template <class Model, Executor E, class OnChunk>
result<perplexity_accumulator> measure_perplexity(Model& model, std::span<const token_id> tokens,
                                                  const perplexity_chunks& chunks, token_id bos, E& executor,
                                                  OnChunk&& on_chunk) {
  HEDGE_TRY(detail::check_context(model, chunks, "the model"));
  if (tokens.size() < chunks.count * chunks.context)
    return error{errc::invalid_argument} << "measure_perplexity: " << chunks.count << " chunks of " << chunks.context
                                         << " tokens from " << tokens.size();
  auto input = heap_storage<token_id>::make(chunks.context);
  if (!input) return input.error();
  detail::run_session<Model> session(model);
  auto s = session.open();
  if (!s) return s.error();
  auto run = chunk_run<Model>::make(model, *s, chunks.first);
  if (!run) return run.error();
  perplexity_accumulator sums;
  for (std::size_t i = 0; i < chunks.count; ++i) {
    detail::chunk_input(tokens, chunks, i, bos, {input->data(), input->size()});
    run->begin({input->data(), input->size()});
    const auto chunk = chunks.chunk(tokens, i);
    for (std::size_t k = chunks.first; k + 1 < chunks.context; ++k) {
      auto logits = run->next(executor);
      if (!logits) return logits.error();
      sums.add(*logits, chunk[k + 1]);
    }
    on_chunk(i, static_cast<const perplexity_accumulator&>(sums));
  }
  return sums;
}

/// As measure_perplexity, with `reference` (a model of the same vocabulary) run on the same
/// chunks: the comparison's sums. on_chunk(chunk index, the accumulator so far).
template <class Model, class Reference, Executor E, class OnChunk>
result<kl_divergence_accumulator> measure_kl_divergence(Model& model, Reference& reference,
                                                        std::span<const token_id> tokens,
                                                        const perplexity_chunks& chunks, token_id bos, E& executor,
                                                        OnChunk&& on_chunk) {
  HEDGE_TRY(detail::check_context(model, chunks, "the model"));
  HEDGE_TRY(detail::check_context(reference, chunks, "the reference"));
  if (model.config().vocab_size != reference.config().vocab_size)
    return error{errc::shape_mismatch} << "the reference's classifier has " << reference.config().vocab_size
                                       << " rows, the model's " << model.config().vocab_size;
  if (tokens.size() < chunks.count * chunks.context)
    return error{errc::invalid_argument} << "measure_kl_divergence: " << chunks.count << " chunks of "
                                         << chunks.context << " tokens from " << tokens.size();
  auto input = heap_storage<token_id>::make(chunks.context);
  if (!input) return input.error();
  detail::run_session<Model> session(model);
  detail::run_session<Reference> reference_session(reference);
  auto s = session.open();
  if (!s) return s.error();
  auto r = reference_session.open();
  if (!r) return r.error();
  auto run = chunk_run<Model>::make(model, *s, chunks.first);
  if (!run) return run.error();
  auto reference_run = chunk_run<Reference>::make(reference, *r, chunks.first);
  if (!reference_run) return reference_run.error();
  kl_divergence_accumulator sums;
  for (std::size_t i = 0; i < chunks.count; ++i) {
    detail::chunk_input(tokens, chunks, i, bos, {input->data(), input->size()});
    run->begin({input->data(), input->size()});
    reference_run->begin({input->data(), input->size()});
    const auto chunk = chunks.chunk(tokens, i);
    for (std::size_t k = chunks.first; k + 1 < chunks.context; ++k) {
      auto logits = run->next(executor);
      if (!logits) return logits.error();
      auto reference_logits = reference_run->next(executor);
      if (!reference_logits) return reference_logits.error();
      sums.add(*logits, *reference_logits, chunk[k + 1]);
    }
    on_chunk(i, static_cast<const kl_divergence_accumulator&>(sums));
  }
  return sums;
}

}  // namespace hedge::model
