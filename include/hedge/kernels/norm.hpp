// hedge/kernels/norm.hpp: RMSNorm, the normalisation of Llama-family models.
//
//   out[i] = weight[i] * (x[i] / sqrt(mean(x^2) + eps))
//
// (Zhang & Sennrich 2019; llama2.c `rmsnorm`). The scalar overload is the
// specification: it accumulates the sum of squares in double, as ggml's
// rms_norm does, so its only float roundings are the final scale and
// multiplies. The SIMD overloads (avx2, avx512bw, neon) accumulate in float
// over 4 x lanes partial sums (about 1e-7 relative error on the scale for
// unit-scale inputs of a few thousand elements; tests allow 2e-6 relative per
// output).
#pragma once

#include <cmath>
#include <cstddef>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/aliasing.hpp"
#include "hedge/kernels/detail/vector_math.hpp"

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

#if HEDGE_SIMD_X86
HEDGE_TARGET_AVX2 inline void rmsnorm(arch::avx2, vector_view<const float> x, vector_view<const float> weight,
                                      float eps, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  const float* xp = x.data();
  const float* wp = weight.data();
  float* op = out.data();
  // Four independent accumulators hide the FMA latency.
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 v0 = _mm256_loadu_ps(xp + i), v1 = _mm256_loadu_ps(xp + i + 8);
    const __m256 v2 = _mm256_loadu_ps(xp + i + 16), v3 = _mm256_loadu_ps(xp + i + 24);
    acc0 = _mm256_fmadd_ps(v0, v0, acc0);
    acc1 = _mm256_fmadd_ps(v1, v1, acc1);
    acc2 = _mm256_fmadd_ps(v2, v2, acc2);
    acc3 = _mm256_fmadd_ps(v3, v3, acc3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(xp + i);
    acc0 = _mm256_fmadd_ps(v, v, acc0);
  }
  float sum_squares = matmul::avx2::sum_lanes(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) sum_squares += xp[i] * xp[i];
  const float scale = 1.0f / std::sqrt(sum_squares / float(n) + eps);

  const __m256 scale_v = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(op + i, _mm256_mul_ps(_mm256_loadu_ps(wp + i), _mm256_mul_ps(scale_v, _mm256_loadu_ps(xp + i))));
  }
  for (; i < n; ++i) op[i] = wp[i] * (scale * xp[i]);
}

HEDGE_TARGET_AVX512 inline void rmsnorm(arch::avx512bw, vector_view<const float> x, vector_view<const float> weight,
                                        float eps, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  const float* xp = x.data();
  const float* wp = weight.data();
  float* op = out.data();
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 v0 = _mm512_loadu_ps(xp + i), v1 = _mm512_loadu_ps(xp + i + 16);
    const __m512 v2 = _mm512_loadu_ps(xp + i + 32), v3 = _mm512_loadu_ps(xp + i + 48);
    acc0 = _mm512_fmadd_ps(v0, v0, acc0);
    acc1 = _mm512_fmadd_ps(v1, v1, acc1);
    acc2 = _mm512_fmadd_ps(v2, v2, acc2);
    acc3 = _mm512_fmadd_ps(v3, v3, acc3);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(xp + i);
    acc0 = _mm512_fmadd_ps(v, v, acc0);
  }
  if (i < n) {  // the tail's masked lanes load 0
    const __m512 v = _mm512_maskz_loadu_ps(kernels::avx512::first_lanes(n - i), xp + i);
    acc1 = _mm512_fmadd_ps(v, v, acc1);
  }
  const float sum_squares = kernels::avx512::sum(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
  const float scale = 1.0f / std::sqrt(sum_squares / float(n) + eps);

  const __m512 scale_v = _mm512_set1_ps(scale);
  i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(op + i, _mm512_mul_ps(_mm512_loadu_ps(wp + i), _mm512_mul_ps(scale_v, _mm512_loadu_ps(xp + i))));
  }
  if (i < n) {
    const __mmask16 tail = kernels::avx512::first_lanes(n - i);
    _mm512_mask_storeu_ps(op + i, tail,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, wp + i),
                                        _mm512_mul_ps(scale_v, _mm512_maskz_loadu_ps(tail, xp + i))));
  }
}
#endif

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
inline void rmsnorm(arch::neon, vector_view<const float> x, vector_view<const float> weight, float eps,
                    vector_view<float> out) noexcept {
  using batch = kernels::neon::floats;
  constexpr std::size_t lanes = batch::size;
  const std::size_t n = x.size();
  const float* xp = x.data();
  batch acc0(0.0f), acc1(0.0f), acc2(0.0f), acc3(0.0f);
  std::size_t i = 0;
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
