// hedge/kernels/norm.hpp: RMSNorm, the normalisation of Llama-family models.
//
//   out[i] = weight[i] * (x[i] / sqrt(mean(x^2) + eps))
//
// (Zhang & Sennrich 2019; llama2.c `rmsnorm`). The scalar overload is the
// specification: it accumulates the sum of squares in double, as ggml's
// rms_norm does, so its only float roundings are the final scale and
// multiplies. The SIMD overload accumulates in float over 4 x lanes partial
// sums (about 1e-7 relative error on the scale for unit-scale inputs of a few
// thousand elements; tests allow 2e-6 relative per output).
#pragma once

#include <cmath>
#include <cstddef>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/ops_simd.hpp"

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

#if HEDGE_HAS_XSIMD
template <xsimd_float_arch A>
void rmsnorm(A, vector_view<const float> x, vector_view<const float> weight, float eps,
             vector_view<float> out) noexcept {
  using batch = float_batch<A>;
  constexpr std::size_t lanes = batch::size;
  const std::size_t n = x.size();
  const float* xp = x.data();
  batch acc0(0.0f), acc1(0.0f), acc2(0.0f), acc3(0.0f);
  std::size_t i = 0;
  // Four independent accumulators hide the FMA latency.
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    const batch v0 = batch::load_unaligned(xp + i), v1 = batch::load_unaligned(xp + i + lanes);
    const batch v2 = batch::load_unaligned(xp + i + 2 * lanes), v3 = batch::load_unaligned(xp + i + 3 * lanes);
    acc0 = xsimd::fma(v0, v0, acc0);
    acc1 = xsimd::fma(v1, v1, acc1);
    acc2 = xsimd::fma(v2, v2, acc2);
    acc3 = xsimd::fma(v3, v3, acc3);
  }
  for (; i + lanes <= n; i += lanes) {
    const batch v = batch::load_unaligned(xp + i);
    acc0 = xsimd::fma(v, v, acc0);
  }
  float sum_squares = xsimd::hadd((acc0 + acc1) + (acc2 + acc3));
  for (; i < n; ++i) sum_squares += xp[i] * xp[i];
  const float scale = 1.0f / std::sqrt(sum_squares / float(n) + eps);

  const batch scale_v(scale);
  const float* wp = weight.data();
  float* op = out.data();
  i = 0;
  for (; i + lanes <= n; i += lanes) {
    (batch::load_unaligned(wp + i) * (scale_v * batch::load_unaligned(xp + i))).store_unaligned(op + i);
  }
  for (; i < n; ++i) op[i] = wp[i] * (scale * xp[i]);
}
#endif

}  // namespace detail

/// out = weight * x / sqrt(mean(x^2) + eps) (see file comment).
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): x, weight and out have the same non-zero
/// size; out is x (in place) or does not overlap it.
template <arch::Arch A = arch::native>
void rmsnorm(vector_view<const float> x, vector_view<const float> weight, float eps, vector_view<float> out) noexcept {
  HEDGE_ASSERT(!x.empty() && weight.size() == x.size() && out.size() == x.size());
  HEDGE_ASSERT(detail::same_or_disjoint(x.data(), out.data(), x.size()));
  detail::rmsnorm(detail::float_lanes<A>{}, x, weight, eps, out);
}

}  // namespace hedge::kernels
