// hedge/verify/speculative.hpp: speculative sampling's accept/reject step.
//
// Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via Speculative
// Decoding" (also Chen et al. 2023): a draft model proposes k tokens x_1..x_k, sampled
// from its distributions q_1..q_k; the target model scores all k + 1 positions at once,
// giving p_1..p_{k+1}. For i = 1..k, accept x_i with probability min(1, p_i(x_i)/q_i(x_i));
// at the first rejection, sample a replacement from norm(max(0, p_i - q_i)) and stop; if
// all k are accepted, sample one more token from p_{k+1}. The emitted tokens are then
// distributed exactly as if sampled from the target model alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/model/random.hpp"

namespace hedge::verify {

/// Outcome of one speculative step: the first `accepted` draft tokens stand, followed by
/// `next` (the replacement at the first rejection, or the bonus token).
struct speculative_step {
  std::size_t accepted = 0;
  std::int32_t next = 0;
};

/// One speculative step.
/// \tparam Random provides `double uniform()` in [0, 1) (e.g. model::seeded_random)
/// \param target  (k + 1) x vocab target probabilities p_1..p_{k+1}
/// \param draft   k x vocab draft probabilities q_1..q_k
/// \param tokens  the k draft tokens, x_i sampled from q_i
/// \param scratch vocab floats for the residual distribution (caller memory: no allocation)
template <class Random>
result<speculative_step> speculative_accept(matrix_view<const float> target, matrix_view<const float> draft,
                                            std::span<const std::int32_t> tokens, std::span<float> scratch,
                                            Random& random) noexcept {
  const std::size_t k = tokens.size(), vocab = target.cols();
  if (target.rows() != k + 1 || draft.rows() != k || draft.cols() != vocab)
    return error{errc::shape_mismatch} << "speculative_accept: target " << target.rows() << 'x' << vocab << ", draft "
                                       << draft.rows() << 'x' << draft.cols() << ", " << k << " draft tokens";
  if (scratch.size() < vocab) return error{errc::capacity_exceeded} << "speculative_accept: scratch smaller than vocab";
  for (std::size_t i = 0; i < k; ++i) {
    const auto x = tokens[i];
    if (x < 0 || static_cast<std::size_t>(x) >= vocab)
      return error{errc::out_of_range} << "draft token " << x << " outside vocab " << vocab;
    const double p = target(i, static_cast<std::size_t>(x)), q = draft(i, static_cast<std::size_t>(x));
    // q(x) > 0 because x was drawn from q; accept outright when p >= q.
    if (p >= q || random.uniform() * q < p) continue;
    double residual_mass = 0.0;
    for (std::size_t v = 0; v < vocab; ++v) {
      const float r = target(i, v) - draft(i, v);
      scratch[v] = r > 0.0f ? r : 0.0f;
      residual_mass += scratch[v];
    }
    // A rejection implies p(x) < q(x), so some other token has p > q and the residual has mass.
    const auto row = residual_mass > 0.0 ? std::span<const float>{scratch.data(), vocab}
                                         : std::span<const float>{target.row(i).data(), vocab};
    return speculative_step{i, model::sample_index(row, random.uniform())};
  }
  return speculative_step{k, model::sample_index({target.row(k).data(), vocab}, random.uniform())};
}

}  // namespace hedge::verify
