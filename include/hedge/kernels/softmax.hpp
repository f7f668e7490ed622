// hedge/kernels/softmax.hpp: numerically stable softmax.
//
//   out[i] = exp(x[i] - max(x)) / sum_j exp(x[j] - max(x))
//
// Subtracting the maximum keeps every exponent <= 0, so nothing overflows and
// the largest term is exactly 1 (llama2.c `softmax`). The scalar overload is
// the specification: float std::exp and a double sum (as ggml's soft_max).
// The SIMD overload uses xsimd::exp (a range-reduced polynomial within a few
// ulp of std::exp over the range used here, [-88, 0]) and float partial sums;
// tests allow 1e-5 relative per output against a float64 reference.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/ops_simd.hpp"

namespace hedge::kernels {

namespace detail {

inline void softmax(arch::scalar, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  float max_value = x[0];
  for (std::size_t i = 1; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = std::exp(x[i] - max_value);
    sum += out[i];
  }
  const float inverse = float(1.0 / sum);
  for (std::size_t i = 0; i < n; ++i) out[i] *= inverse;
}

#if HEDGE_HAS_XSIMD
template <xsimd_float_arch A>
void softmax(A, vector_view<const float> x, vector_view<float> out) noexcept {
  using batch = float_batch<A>;
  constexpr std::size_t lanes = batch::size;
  const std::size_t n = x.size();
  const float* xp = x.data();
  float* op = out.data();

  batch max_v(-std::numeric_limits<float>::infinity());
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) max_v = xsimd::max(max_v, batch::load_unaligned(xp + i));
  alignas(64) float lanes_max[lanes];
  max_v.store_aligned(lanes_max);
  float max_value = -std::numeric_limits<float>::infinity();
  for (float m : lanes_max) max_value = m > max_value ? m : max_value;
  for (; i < n; ++i) max_value = xp[i] > max_value ? xp[i] : max_value;

  const batch shift(max_value);
  batch sum0(0.0f), sum1(0.0f);
  i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const batch e0 = xsimd::exp(batch::load_unaligned(xp + i) - shift);
    const batch e1 = xsimd::exp(batch::load_unaligned(xp + i + lanes) - shift);
    e0.store_unaligned(op + i);
    e1.store_unaligned(op + i + lanes);
    sum0 += e0;
    sum1 += e1;
  }
  for (; i + lanes <= n; i += lanes) {
    const batch e = xsimd::exp(batch::load_unaligned(xp + i) - shift);
    e.store_unaligned(op + i);
    sum0 += e;
  }
  float sum = xsimd::hadd(sum0 + sum1);
  for (; i < n; ++i) {
    op[i] = std::exp(xp[i] - max_value);
    sum += op[i];
  }

  const float inverse = 1.0f / sum;
  const batch inverse_v(inverse);
  i = 0;
  for (; i + lanes <= n; i += lanes) (batch::load_unaligned(op + i) * inverse_v).store_unaligned(op + i);
  for (; i < n; ++i) op[i] *= inverse;
}
#endif

}  // namespace detail

/// out = softmax(x) (see file comment).
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): x is non-empty, out has x's size and is x
/// (in place) or does not overlap it. Elements are finite or -inf (masked),
/// at least one finite: a fully masked row or a +inf gives NaN.
template <arch::Arch A = arch::native>
void softmax(vector_view<const float> x, vector_view<float> out) noexcept {
  HEDGE_ASSERT(!x.empty() && out.size() == x.size());
  HEDGE_ASSERT(detail::same_or_disjoint(x.data(), out.data(), x.size()));
  detail::softmax(detail::float_lanes<A>{}, x, out);
}

}  // namespace hedge::kernels
