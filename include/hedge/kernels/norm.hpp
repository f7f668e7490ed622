// hedge/kernels/norm.hpp: RMSNorm, the normalisation of Llama-family models.
//
//   out[i] = weight[i] * (x[i] / sqrt(mean(x^2) + eps))
//
// (Zhang & Sennrich 2019; llama2.c `rmsnorm`). The scalar overload is the
// specification: it accumulates the sum of squares in double, as ggml's
// rms_norm does, so its only float roundings are the final scale and
// multiplies. The SIMD overloads (every width of detail/vec.hpp, written once
// in detail/norm_simd.inc) accumulate in float over 4 x lanes partial sums (about 1e-7 relative error on the scale for
// unit-scale inputs of a few thousand elements; tests allow 2e-6 relative per
// output).
#pragma once

#include <cmath>
#include <cstddef>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/aliasing.hpp"
#include "hedge/kernels/elementwise.hpp"

namespace hedge::kernels {

namespace detail {

inline void rmsnorm(arch::scalar, vector_view<const float> x, vector_view<const float> weight, float eps,
                    vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  double sum_squares = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum_squares += double(x[i]) * double(x[i]);
  const float scale = float(1.0 / std::sqrt(sum_squares / double(n) + double(eps)));
  for (std::size_t i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

}  // namespace detail

}  // namespace hedge::kernels

#define HEDGE_VEC_BODY "hedge/kernels/detail/norm_simd.inc"
#include "hedge/kernels/detail/for_each_width.inc"

namespace hedge::kernels {

/// out = weight * x / sqrt(mean(x^2) + eps) (see file comment).
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): x, weight and out have the same non-zero
/// size; out is x (in place) or does not overlap it.
template <arch::Arch A = arch::best>
void rmsnorm(vector_view<const float> x, vector_view<const float> weight, float eps, vector_view<float> out) noexcept {
  HEDGE_ASSERT(!x.empty() && weight.size() == x.size() && out.size() == x.size());
  HEDGE_ASSERT(detail::same_or_disjoint(x.data(), out.data(), x.size()));
  arch::visit<A>([&](auto tag) { detail::rmsnorm(tag, x, weight, eps, out); });
}

}  // namespace hedge::kernels
