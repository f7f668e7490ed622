// hedge/engine/speculative.hpp: cross-tier speculative decoding. The edge drafts k tokens,
// the cloud scores them in one request, and the output is distributed exactly as the cloud
// model's own (Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via
// Speculative Decoding"; Chen et al. 2023).
//
// One round:
//   1. the Drafter (the edge model) gives logits after the context; the decoder turns each
//      into q = softmax(logits / T), draws x ~ q, and asks for the logits after x, k times;
//   2. the Scorer (the cloud) scores context + x_1..x_k in one request: for each x_i its
//      log-prob under the target p and the target's top alternatives, and the target's own
//      next token after the whole draft (OpenAI completions: echo + logprobs + max_tokens 1);
//   3. x_i is accepted with probability min(1, p(x_i) / q(x_i)); at the first rejection the
//      replacement is drawn from norm(max(0, p - q)) and the round ends; when all k stand,
//      the cloud's own next token is appended. Greedy (T = 0): x_i stands when it is the
//      target's argmax, and the replacement is that argmax;
//   4. the drafter is truncated to the accepted prefix and given the round's last token.
// Each round yields at least one token of the target's, as in-machine speculation does.
//
// Exactness. Greedy needs only the target's argmax: exact with one alternative. Sampling
// at T = 1 needs p(x_i), which echo gives for any token, and, at a rejection, the whole of p
// for the residual: exact when the scorer returns the whole vocabulary as alternatives
// (hedge-server for a small vocabulary, vLLM's prompt_logprobs = -1). Otherwise the residual
// is drawn over the alternatives the endpoint returned (and x_i), and the round counts as
// `approximated`; at T != 1 without the whole vocabulary p_T(x_i) itself is approximate too.
// The outcome says how many rounds were approximated, never silently.
//
// Draft length. k adapts to the measured acceptance rate a and times: a round of k drafts
// emits E(k) = (1 - a^(k+1)) / (1 - a) tokens on average (Leviathan et al., eq. 1) and
// takes k * t_draft + t_round (the scoring round trip, measured); k maximises
// E(k) / (k * t_draft + t_round) over [k_min, k_max]. The same figures say whether the mode
// pays against the cloud decoding alone (`speculation_pays`): the router's boundary.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"
#include "hedge/engine/backend.hpp"
#include "hedge/engine/clock.hpp"
#include "hedge/model/random.hpp"
#include "hedge/model/sampler.hpp"

namespace hedge::engine {

/// The edge side: a model that decodes one token at a time and can be truncated.
/// reset(ids) decodes a context (all of it) and returns the logits after it; extend(id)
/// decodes one more token; truncate(n) keeps the first n tokens decoded.
template <class D>
concept Drafter = requires(D& d, std::span<const std::int32_t> ids, std::int32_t id, std::size_t n) {
  { d.vocab_size() } -> std::convertible_to<std::size_t>;
  { d.reset(ids) } -> std::same_as<result<std::span<const float>>>;
  { d.extend(id) } -> std::same_as<result<std::span<const float>>>;
  { d.truncate(n) } -> std::same_as<result<void>>;
};

/// An edge tier the engine can speculate with: a Drafter that also gives a call's prompt as
/// ids, its stop ids, and turns emitted ids into whole UTF-8 characters as text that follows
/// the prompt (begin_text(prompt ids): a first piece keeps its leading space, as
/// model::generator's text does; engine/edge_tier.hpp).
template <class E>
concept SpeculativeEdge = Drafter<E> && requires(E& e, const E& ce, const edge_call& call, std::int32_t id,
                                                 std::span<const std::int32_t> ids, function_ref<void(std::string_view)> sink) {
  { e.prompt_ids(call) } -> std::same_as<result<std::span<const std::int32_t>>>;
  { ce.stop_ids() } -> std::convertible_to<std::span<const std::int32_t>>;
  { e.begin_text(ids) };
  { e.text_of(id, sink) } -> std::same_as<result<void>>;
  { e.end_text(sink) };
};

/// One scoring request.
struct score_call {
  std::span<const std::int32_t> context;  ///< the prompt and every token accepted so far
  std::span<const std::int32_t> draft;    ///< x_1..x_k
  std::size_t alternatives = 1;           ///< the target's top alternatives wanted per position
  double temperature = 0.0;               ///< for the target's own next token (0: its argmax)
  std::uint64_t seed = 0;                 ///< for the target's own next token
};

/// What the target says at one position.
struct position_score {
  std::int32_t token = -1;  ///< x_i (rows 0..k-1), or the target's own next token (row k)
  float logprob = std::numeric_limits<float>::quiet_NaN();  ///< log p(token) at temperature 1
  std::span<const model::id_logprob> top;  ///< the target's most probable tokens, best first
};

/// The cloud side: scores a draft in one request. Returns k + 1 rows, or an error (the
/// engine's failure semantics apply: retry, breaker, fallback).
template <class S>
concept Scorer = requires(S& s, const score_call& call) {
  { s.score(call) } -> std::same_as<result<std::span<const position_score>>>;
};

/// A Scorer behind a type-erased reference (what a cloud tier holds when it can score).
using scorer_ref = function_ref<result<std::span<const position_score>>(const score_call&)>;

struct speculative_options {
  std::size_t max_tokens = 256;
  double temperature = 0.0;  ///< 0: greedy on both tiers
  std::uint64_t seed = 0;    ///< the decoder's draws (drafts, acceptances, residuals)
  std::size_t k_min = 1, k_max = 8, k_first = 4;
  std::size_t alternatives = 8;  ///< asked per position; 1 suffices for greedy
  std::span<const std::int32_t> stop_tokens{};  ///< the answer ends after one of these
};

/// The measured figures of a run (and of every run before it, for the adaptive k).
struct speculative_stats {
  std::size_t rounds = 0;
  std::size_t drafted = 0;          ///< tokens the edge drafted
  std::size_t accepted = 0;         ///< drafted tokens the target accepted
  std::size_t cloud_tokens = 0;     ///< tokens the target chose itself (replacements, bonuses)
  std::size_t scored = 0;           ///< positions the cloud scored (draft + 1 per round)
  std::size_t approximated = 0;     ///< rounds whose rule used a partial distribution
  double draft_seconds = 0;         ///< edge time drafting
  double score_seconds = 0;         ///< scoring round trips
  [[nodiscard]] double acceptance() const noexcept {
    return drafted ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  }
  [[nodiscard]] std::size_t emitted() const noexcept { return accepted + cloud_tokens; }
};

/// E(k) / (k t_draft + t_round): tokens per second of a round of k drafts.
[[nodiscard]] inline double speculative_rate(double acceptance, std::size_t k, double draft_seconds_per_token,
                                             double round_seconds) noexcept {
  const double a = std::clamp(acceptance, 0.0, 0.999999);
  const double expected = (1.0 - std::pow(a, static_cast<double>(k + 1))) / (1.0 - a);
  const double time = static_cast<double>(k) * draft_seconds_per_token + round_seconds;
  return time > 0 ? expected / time : std::numeric_limits<double>::infinity();
}

/// The k in [k_min, k_max] that maximises speculative_rate.
[[nodiscard]] inline std::size_t best_draft_length(double acceptance, double draft_seconds_per_token,
                                                   double round_seconds, std::size_t k_min, std::size_t k_max) noexcept {
  std::size_t best = k_min;
  double best_rate = -1;
  for (std::size_t k = k_min; k <= k_max; ++k) {
    const double r = speculative_rate(acceptance, k, draft_seconds_per_token, round_seconds);
    if (r > best_rate) best_rate = r, best = k;
  }
  return best;
}

/// Whether speculation beats the cloud decoding alone (`cloud_seconds_per_token`, its
/// streamed decode rate) by `margin` (1.1: ten percent): the router's boundary.
[[nodiscard]] inline bool speculation_pays(double acceptance, double draft_seconds_per_token, double round_seconds,
                                           double cloud_seconds_per_token, std::size_t k_max,
                                           double margin = 1.1) noexcept {
  const std::size_t k = best_draft_length(acceptance, draft_seconds_per_token, round_seconds, 1, k_max);
  return speculative_rate(acceptance, k, draft_seconds_per_token, round_seconds) * cloud_seconds_per_token > margin;
}

/// One emitted token: its id, its log-prob under the target (NaN when unknown), and whether
/// the edge drafted it (true) or the target chose it (false).
struct speculative_token {
  std::int32_t id = -1;
  float logprob = std::numeric_limits<float>::quiet_NaN();
  bool drafted = false;
};

enum class speculative_end : std::uint8_t { length, stop_token, stopped };

struct speculative_summary {
  speculative_end end = speculative_end::length;
  std::size_t tokens = 0;
  speculative_stats stats;  ///< this run's
};

/// The speculative loop over a Drafter and a Scorer; buffers sized once by make().
/// \tparam Clk measures draft and round-trip times (a simulated clock in tests)
template <Clock Clk>
class speculative_decoder {
 public:
  static result<speculative_decoder> make(std::size_t vocab, std::size_t k_max, std::size_t context_tokens, Clk clock) {
    if (vocab == 0 || k_max == 0) return error{errc::invalid_argument} << "speculative_decoder: vocab and k_max must be positive";
    speculative_decoder d(clock);
    d.vocab_ = vocab;
    d.q_.resize(vocab * k_max);
    d.residual_.resize(vocab);
    d.draft_.resize(k_max);
    d.context_.reserve(context_tokens);
    return d;
  }

  /// Runs until max_tokens, a stop token, or on_token returns false. Errors (the scorer's
  /// or the drafter's) return at once; what was emitted stands (on_token saw it).
  template <Drafter D, Scorer S>
  result<speculative_summary> run(D& drafter, S& scorer, std::span<const std::int32_t> prompt,
                                  const speculative_options& o,
                                  function_ref<bool(const speculative_token&)> on_token) {
    if (drafter.vocab_size() != vocab_)
      return error{errc::shape_mismatch} << "speculative_decoder: the drafter's vocabulary of " << drafter.vocab_size()
                                         << " tokens, not " << vocab_;
    if (prompt.empty()) return error{errc::invalid_argument} << "speculative_decoder: an empty prompt";
    const std::size_t k_cap = std::min(o.k_max, draft_.size());
    if (o.k_min == 0 || o.k_min > k_cap)
      return error{errc::invalid_argument} << "speculative_decoder: k_min " << o.k_min << " outside 1.." << k_cap;
    speculative_summary out;
    last_ = {};
    model::seeded_random random{o.seed};
    context_.assign(prompt.begin(), prompt.end());
    auto logits = drafter.reset(context_);
    if (!logits) return logits.error();
    std::span<const float> next_logits = *logits;
    if (k_ == 0) k_ = std::clamp(o.k_first, o.k_min, k_cap);
    while (out.tokens < o.max_tokens) {
      // 1. Draft k tokens (never past max_tokens: the round's last token is the target's).
      const std::size_t room = o.max_tokens - out.tokens;
      const std::size_t k = std::min(k_, room > 1 ? room - 1 : std::size_t{0});
      const auto draft_start = clock_.now();
      for (std::size_t i = 0; i < k; ++i) {
        std::span<float> q{q_.data() + i * vocab_, vocab_};
        draft_[i] = draw_draft(next_logits, o.temperature, q, random);
        if (i + 1 < k) {
          auto l = drafter.extend(draft_[i]);
          if (!l) return l.error();
          next_logits = *l;
        }
      }
      const double draft_seconds = seconds_since(draft_start);
      // 2. Score the draft.
      const auto score_start = clock_.now();
      auto rows = scorer.score({.context = context_, .draft = {draft_.data(), k},
                                .alternatives = o.temperature > 0 ? o.alternatives : std::max<std::size_t>(1, o.alternatives),
                                .temperature = o.temperature, .seed = random.next()});
      if (!rows) return rows.error();
      const double round_seconds = seconds_since(score_start);
      if (rows->size() != k + 1)
        return error{errc::parse_error} << "the scorer returned " << rows->size() << " positions for a draft of " << k;
      // 3. Accept the longest prefix the rule accepts, then the target's token.
      std::size_t accepted = 0;
      std::int32_t next = -1;
      float next_logprob = std::numeric_limits<float>::quiet_NaN();
      bool approximated = false;
      for (; accepted < k; ++accepted) {
        const position_score& row = (*rows)[accepted];
        std::span<const float> q{q_.data() + accepted * vocab_, vocab_};
        if (row.token != draft_[accepted])
          return error{errc::parse_error} << "the scorer scored token " << row.token << " at draft position "
                                          << accepted << ", not " << draft_[accepted];
        if (accept(row, q, o.temperature, random, approximated)) continue;
        next = replacement(row, q, o.temperature, random, approximated);
        if (next < 0) return error{errc::parse_error} << "the scorer returned no alternatives to replace a draft token";
        next_logprob = logprob_of(row, next);
        break;
      }
      if (accepted == k) {
        const position_score& bonus = (*rows)[k];
        if (bonus.token < 0 || static_cast<std::size_t>(bonus.token) >= vocab_)
          return error{errc::out_of_range} << "the target's next token " << bonus.token << " is outside the vocabulary of "
                                           << vocab_;
        next = bonus.token;
        next_logprob = bonus.logprob;
      }
      if (next < 0 || static_cast<std::size_t>(next) >= vocab_)
        return error{errc::out_of_range} << "replacement token " << next << " is outside the vocabulary of " << vocab_;
      learn(k, accepted, draft_seconds, round_seconds, o, k_cap);
      out.stats.rounds++, out.stats.drafted += k, out.stats.accepted += accepted, out.stats.cloud_tokens++;
      out.stats.scored += k + 1, out.stats.approximated += approximated ? 1 : 0;
      out.stats.draft_seconds += draft_seconds, out.stats.score_seconds += round_seconds;
      last_ = out.stats;
      // Emit: the accepted drafts, then the target's token; a stop token ends the answer.
      for (std::size_t i = 0; i <= accepted; ++i) {
        const bool drafted = i < accepted;
        const speculative_token t{drafted ? draft_[i] : next, drafted ? (*rows)[i].logprob : next_logprob, drafted};
        context_.push_back(t.id);
        ++out.tokens;
        if (is_stop(t.id, o.stop_tokens)) return finish(out, speculative_end::stop_token);
        if (!on_token(t)) return finish(out, speculative_end::stopped);
      }
      if (out.tokens >= o.max_tokens) break;
      // 4. The drafter keeps the accepted prefix and decodes the round's last token.
      const std::size_t kept = context_.size() - 1;
      if (accepted == k && k > 0) {
        auto l = drafter.extend(draft_[k - 1]);
        if (!l) return l.error();
      } else if (auto t = drafter.truncate(kept); !t) {
        return t.error();
      }
      auto l = drafter.extend(next);
      if (!l) return l.error();
      next_logits = *l;
    }
    return finish(out, speculative_end::length);
  }

  /// Every run's figures together (the adaptive k's memory, and the router's).
  [[nodiscard]] const speculative_stats& total() const noexcept { return total_; }
  /// The last run's figures, also when it ended with an error (its completed rounds).
  [[nodiscard]] const speculative_stats& last_run() const noexcept { return last_; }
  /// The draft length the next round starts with.
  [[nodiscard]] std::size_t draft_length() const noexcept { return k_; }

 private:
  explicit speculative_decoder(Clk clock) : clock_(clock) {}

  speculative_summary finish(speculative_summary& out, speculative_end end) noexcept {
    out.end = end;
    const speculative_stats& s = out.stats;
    total_.rounds += s.rounds, total_.drafted += s.drafted, total_.accepted += s.accepted;
    total_.cloud_tokens += s.cloud_tokens, total_.scored += s.scored, total_.approximated += s.approximated;
    total_.draft_seconds += s.draft_seconds, total_.score_seconds += s.score_seconds;
    return out;
  }

  double seconds_since(typename Clk::time_point t) const {
    return std::chrono::duration<double>(clock_.now() - t).count();
  }

  static bool is_stop(std::int32_t id, std::span<const std::int32_t> stops) noexcept {
    return std::find(stops.begin(), stops.end(), id) != stops.end();
  }

  /// q = softmax(logits / T) (one-hot at the argmax for T = 0), and a draw from it.
  static std::int32_t draw_draft(std::span<const float> logits, double temperature, std::span<float> q,
                                 model::seeded_random& random) noexcept {
    std::size_t best = 0;
    for (std::size_t v = 1; v < logits.size(); ++v)
      if (logits[v] > logits[best]) best = v;
    if (temperature <= 0) {
      std::fill(q.begin(), q.end(), 0.0f);
      q[best] = 1.0f;
      return static_cast<std::int32_t>(best);
    }
    double sum = 0;
    for (std::size_t v = 0; v < logits.size(); ++v) sum += std::exp((static_cast<double>(logits[v]) - logits[best]) / temperature);
    for (std::size_t v = 0; v < logits.size(); ++v)
      q[v] = static_cast<float>(std::exp((static_cast<double>(logits[v]) - logits[best]) / temperature) / sum);
    return model::sample_index(q, random.uniform());
  }

  /// p_T(token) from a row: exact from the log-prob at T = 1, or from the whole vocabulary.
  double target_probability(const position_score& row, std::int32_t token, double temperature, bool& approximated) const {
    if (temperature == 1.0 && token == row.token && !std::isnan(row.logprob)) return std::exp(static_cast<double>(row.logprob));
    double norm = 0, mass = 0;
    bool found = false;
    for (const auto& a : row.top) {
      const double w = std::exp(static_cast<double>(a.logprob) / temperature);
      norm += w;
      if (a.id == token) mass = w, found = true;
    }
    if (!found && token == row.token && !std::isnan(row.logprob)) {
      const double w = std::exp(static_cast<double>(row.logprob) / temperature);
      norm += w, mass = w;
    }
    if (row.top.size() < vocab_) approximated = true;
    return norm > 0 ? mass / norm : 0.0;
  }

  bool accept(const position_score& row, std::span<const float> q, double temperature, model::seeded_random& random,
              bool& approximated) const {
    if (temperature <= 0) return !row.top.empty() && row.top[0].id == row.token;
    const double p = target_probability(row, row.token, temperature, approximated);
    const double qx = q[static_cast<std::size_t>(row.token)];
    return p >= qx || random.uniform() * qx < p;
  }

  /// At a rejection: the target's argmax (greedy), or a draw from norm(max(0, p - q)).
  std::int32_t replacement(const position_score& row, std::span<const float> q, double temperature,
                           model::seeded_random& random, bool& approximated) {
    if (row.top.empty()) return -1;
    if (temperature <= 0) return row.top[0].id;
    std::fill(residual_.begin(), residual_.end(), 0.0f);
    bool any = false;
    for (const auto& a : row.top) {
      if (a.id < 0 || static_cast<std::size_t>(a.id) >= vocab_) return -1;
      const double p = target_probability(row, a.id, temperature, approximated);
      const double r = p - q[static_cast<std::size_t>(a.id)];
      residual_[static_cast<std::size_t>(a.id)] = r > 0 ? static_cast<float>(r) : 0.0f;
      any = any || r > 0;
    }
    if (!any) {  // the known part of p lies under q: draw from the known part of p
      approximated = true;
      for (const auto& a : row.top)
        residual_[static_cast<std::size_t>(a.id)] = static_cast<float>(target_probability(row, a.id, temperature, approximated));
    }
    return model::sample_index(residual_, random.uniform());
  }

  static float logprob_of(const position_score& row, std::int32_t id) noexcept {
    for (const auto& a : row.top)
      if (a.id == id) return a.logprob;
    return std::numeric_limits<float>::quiet_NaN();
  }

  /// Exponential moving averages of the acceptance and the times; the next k.
  void learn(std::size_t k, std::size_t accepted, double draft_seconds, double round_seconds,
             const speculative_options& o, std::size_t k_cap) {
    if (k == 0) return;
    // Acceptance per position: accepted of the positions tried (a rejection tries one).
    const double tried = static_cast<double>(std::min(k, accepted + 1));
    const double a = static_cast<double>(accepted) / tried;
    constexpr double w = 0.25;
    if (rounds_seen_ == 0) {
      acceptance_ = a, draft_per_token_ = draft_seconds / static_cast<double>(k), round_ = round_seconds;
    } else {
      acceptance_ += w * (a - acceptance_);
      draft_per_token_ += w * (draft_seconds / static_cast<double>(k) - draft_per_token_);
      round_ += w * (round_seconds - round_);
    }
    ++rounds_seen_;
    k_ = best_draft_length(acceptance_, draft_per_token_, round_, o.k_min, k_cap);
  }

  Clk clock_;
  std::size_t vocab_ = 0;
  std::vector<float> q_;         // k_max x vocab draft distributions
  std::vector<float> residual_;  // vocab
  std::vector<std::int32_t> draft_;
  std::vector<std::int32_t> context_;
  std::size_t k_ = 0;
  std::size_t rounds_seen_ = 0;
  double acceptance_ = 0, draft_per_token_ = 0, round_ = 0;
  speculative_stats total_;
  speculative_stats last_;
};

}  // namespace hedge::engine
