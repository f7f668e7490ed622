// hedge/kernels/softmax.hpp: numerically stable softmax.
//
//   out[i] = exp(x[i] - max(x)) / sum_j exp(x[j] - max(x))
//
// Subtracting the maximum keeps every exponent <= 0, so nothing overflows and
// the largest term is exactly 1 (llama2.c `softmax`). The scalar overload is
// the specification: float std::exp and a double sum (as ggml's soft_max).
// The SIMD overloads use the vector exp of detail/vector_math.hpp (avx2,
// avx512bw: within 1 ulp of e^x wherever it is a normal float) or xsimd::exp
// (neon: a few ulp), and float partial sums; tests allow 1e-5 relative per
// output against a float64 reference. A masked (-inf) logit gives exactly 0.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/aliasing.hpp"
#include "hedge/kernels/detail/vector_math.hpp"

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

#if HEDGE_SIMD_X86
HEDGE_TARGET_AVX2 inline void softmax(arch::avx2, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  const float* xp = x.data();
  float* op = out.data();

  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 max0 = minus_inf, max1 = minus_inf, max2 = minus_inf, max3 = minus_inf;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    max0 = _mm256_max_ps(max0, _mm256_loadu_ps(xp + i));
    max1 = _mm256_max_ps(max1, _mm256_loadu_ps(xp + i + 8));
    max2 = _mm256_max_ps(max2, _mm256_loadu_ps(xp + i + 16));
    max3 = _mm256_max_ps(max3, _mm256_loadu_ps(xp + i + 24));
  }
  for (; i + 8 <= n; i += 8) max0 = _mm256_max_ps(max0, _mm256_loadu_ps(xp + i));
  float max_value = matmul::avx2::max_lanes(_mm256_max_ps(_mm256_max_ps(max0, max1), _mm256_max_ps(max2, max3)));
  for (; i < n; ++i) max_value = xp[i] > max_value ? xp[i] : max_value;

  const __m256 shift = _mm256_set1_ps(max_value);
  __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
  i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = kernels::avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(xp + i), shift));
    const __m256 e1 = kernels::avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(xp + i + 8), shift));
    _mm256_storeu_ps(op + i, e0);
    _mm256_storeu_ps(op + i + 8, e1);
    sum0 = _mm256_add_ps(sum0, e0);
    sum1 = _mm256_add_ps(sum1, e1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 e = kernels::avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(xp + i), shift));
    _mm256_storeu_ps(op + i, e);
    sum0 = _mm256_add_ps(sum0, e);
  }
  float sum = matmul::avx2::sum_lanes(_mm256_add_ps(sum0, sum1));
  for (; i < n; ++i) {
    op[i] = std::exp(xp[i] - max_value);
    sum += op[i];
  }

  const float inverse = 1.0f / sum;
  const __m256 inverse_v = _mm256_set1_ps(inverse);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(op + i, _mm256_mul_ps(_mm256_loadu_ps(op + i), inverse_v));
  for (; i < n; ++i) op[i] *= inverse;
}

HEDGE_TARGET_AVX512 inline void softmax(arch::avx512bw, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  const float* xp = x.data();
  float* op = out.data();
  const std::size_t vector_end = n - n % 16;
  const __mmask16 tail = kernels::avx512::first_lanes(n % 16);

  // The tail's masked lanes load -inf for the maximum and 0 for the sum (a NaN of
  // -inf - -inf there would turn the sum into NaN).
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 max0 = _mm512_mask_loadu_ps(minus_inf, tail, xp + vector_end), max1 = minus_inf, max2 = minus_inf,
         max3 = minus_inf;
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    max0 = _mm512_max_ps(max0, _mm512_loadu_ps(xp + i));
    max1 = _mm512_max_ps(max1, _mm512_loadu_ps(xp + i + 16));
    max2 = _mm512_max_ps(max2, _mm512_loadu_ps(xp + i + 32));
    max3 = _mm512_max_ps(max3, _mm512_loadu_ps(xp + i + 48));
  }
  for (; i < vector_end; i += 16) max0 = _mm512_max_ps(max0, _mm512_loadu_ps(xp + i));
  const float max_value = kernels::avx512::max(_mm512_max_ps(_mm512_max_ps(max0, max1), _mm512_max_ps(max2, max3)));

  const __m512 shift = _mm512_set1_ps(max_value);
  __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
  i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = kernels::avx512::exp(_mm512_sub_ps(_mm512_loadu_ps(xp + i), shift));
    const __m512 e1 = kernels::avx512::exp(_mm512_sub_ps(_mm512_loadu_ps(xp + i + 16), shift));
    _mm512_storeu_ps(op + i, e0);
    _mm512_storeu_ps(op + i + 16, e1);
    sum0 = _mm512_add_ps(sum0, e0);
    sum1 = _mm512_add_ps(sum1, e1);
  }
  for (; i < vector_end; i += 16) {
    const __m512 e = kernels::avx512::exp(_mm512_sub_ps(_mm512_loadu_ps(xp + i), shift));
    _mm512_storeu_ps(op + i, e);
    sum0 = _mm512_add_ps(sum0, e);
  }
  if (tail) {
    const __m512 e = _mm512_maskz_mov_ps(tail, kernels::avx512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, xp + i), shift)));
    _mm512_mask_storeu_ps(op + i, tail, e);
    sum1 = _mm512_add_ps(sum1, e);
  }
  const float sum = kernels::avx512::sum(_mm512_add_ps(sum0, sum1));

  const __m512 inverse_v = _mm512_set1_ps(1.0f / sum);
  i = 0;
  for (; i < vector_end; i += 16) _mm512_storeu_ps(op + i, _mm512_mul_ps(_mm512_loadu_ps(op + i), inverse_v));
  if (tail) _mm512_mask_storeu_ps(op + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, op + i), inverse_v));
}
#endif

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
inline void softmax(arch::neon, vector_view<const float> x, vector_view<float> out) noexcept {
  using batch = kernels::neon::floats;
  constexpr std::size_t lanes = batch::size;
  const std::size_t n = x.size();
  const float* xp = x.data();
  float* op = out.data();

  batch max_v(-std::numeric_limits<float>::infinity());
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) max_v = xsimd::max(max_v, batch::load_unaligned(xp + i));
  alignas(16) float lanes_max[lanes];
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
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): x is non-empty, out has x's size and is x
/// (in place) or does not overlap it. Elements are finite or -inf (masked),
/// at least one finite: a fully masked row or a +inf gives NaN.
template <arch::Arch A = arch::best>
void softmax(vector_view<const float> x, vector_view<float> out) noexcept {
  HEDGE_ASSERT(!x.empty() && out.size() == x.size());
  HEDGE_ASSERT(detail::same_or_disjoint(x.data(), out.data(), x.size()));
  arch::visit<A>([&](auto tag) { detail::softmax(tag, x, out); });
}

}  // namespace hedge::kernels
