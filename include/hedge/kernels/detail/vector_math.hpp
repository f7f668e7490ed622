// hedge/kernels/detail/vector_math.hpp: the float vector primitives of the
// elementwise kernels (norm, softmax, activation, rope), once per x86 width:
// e^x, and for AVX-512 the horizontal sum and maximum (the AVX2 ones are
// matmul/avx2_primitives.hpp's sum_lanes and max_lanes) and the mask of a tail; and the
// xsimd batch type of their NEON overloads, which take xsimd's exp.
//
// exp is Cephes' expf (S. Moshier); xsimd's float exp has the same structure with
// a polynomial of one degree less:
//
//   n = round(x log2 e),  r = x - n ln2   (ln2 split in two, Cody & Waite 1980,
//                                          so r is exact to about 2^-32 relative)
//   e^x = 2^n (1 + r + r^2 P(r)),  P of degree 5 on |r| <= ln2 / 2
//
// Accuracy, measured against e^x in double rounded to float over every float in
// [-104, 89] (tests/kernels/softmax_test.cpp, VectorExp, checks every 251st): at
// most 1 ulp for x in [-87.336, 88.723], where e^x is a normal float; below, AVX2
// gives 0 (std::exp gives subnormals < 1.2e-38 there) and AVX-512 the subnormal
// within 1 ulp (vscalefps); above, +inf; e^-inf = 0, e^NaN = NaN. The softmax and
// the activations rely on these limits: a masked -inf logit gives 0, and
// silu(-100) = -100 / (1 + inf) = -0.
#pragma once

#include <cstddef>
#include <limits>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/config.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
#include <xsimd/xsimd.hpp>
#endif

namespace hedge::kernels::detail {

/// The constants of the float exp (see file comment), shared by every width.
struct exp_constants {
  static constexpr float log2e = 1.44269504088896341f;
  // ln 2 = ln2_hi + ln2_lo, ln2_hi with 9 significant bits, so n * ln2_hi is exact for |n| <= 2^15.
  static constexpr float ln2_hi = 0.693359375f;
  static constexpr float ln2_lo = -2.12194440e-4f;
  // Cephes expf's P(r), highest degree first.
  static constexpr float p5 = 1.9875691500e-4f, p4 = 1.3981999507e-3f, p3 = 8.3334519073e-3f;
  static constexpr float p2 = 4.1665795894e-2f, p1 = 1.6666665459e-1f, p0 = 5.0000001201e-1f;
  // The smallest float whose e^x rounds to at least FLT_MIN (just above ln FLT_MIN)
  // and the largest whose e^x is finite (just below ln FLT_MAX).
  static constexpr float min_normal_arg = -0x1.5d589ep+6f;  // -87.3365402
  static constexpr float max_arg = 0x1.62e42ep+6f;          // 88.7228317
  // 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer held in
  // the low mantissa bits (two's complement), read back by subtracting it.
  static constexpr float round_magic = 12582912.0f;
};

}  // namespace hedge::kernels::detail

#if HEDGE_SIMD_X86

namespace hedge::kernels::avx2 {

/// e^x per lane (accuracy and limits in the file comment).
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256 exp(__m256 x) noexcept {
  using c = detail::exp_constants;
  // No clamp: where x is out of range (+-inf included) n and r are garbage, and
  // the masks at the end replace the result.
  const __m256 biased = _mm256_fmadd_ps(x, _mm256_set1_ps(c::log2e), _mm256_set1_ps(c::round_magic));
  const __m256 n = _mm256_sub_ps(biased, _mm256_set1_ps(c::round_magic));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::ln2_hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::ln2_lo), r);
  // P(r) by Estrin's scheme: three independent pairs, then r^2 twice.
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 p10 = _mm256_fmadd_ps(_mm256_set1_ps(c::p1), r, _mm256_set1_ps(c::p0));
  const __m256 p32 = _mm256_fmadd_ps(_mm256_set1_ps(c::p3), r, _mm256_set1_ps(c::p2));
  const __m256 p54 = _mm256_fmadd_ps(_mm256_set1_ps(c::p5), r, _mm256_set1_ps(c::p4));
  const __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(p54, r2, p32), r2, p10);
  const __m256 mantissa = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
  // 2^n by adding n to the exponent field: n = 128 (x near ln FLT_MAX) comes with
  // r < 0, so mantissa < 1 and the sum stays finite, which building 2^n itself
  // would not; n = -126 comes with r >= 0 above min_normal_arg. A NaN n converts
  // to 0x80000000, whose shift is 0, so a NaN mantissa stays NaN.
  const __m256i n_exponent = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  const __m256 scaled = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(mantissa), n_exponent));
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(c::min_normal_arg), _CMP_LT_OQ);
  const __m256 overflow = _mm256_cmp_ps(x, _mm256_set1_ps(c::max_arg), _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_andnot_ps(underflow, scaled), _mm256_set1_ps(std::numeric_limits<float>::infinity()), overflow);
}

}  // namespace hedge::kernels::avx2

namespace hedge::kernels::avx512 {

/// e^x per lane (accuracy and limits in the file comment).
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m512 exp(__m512 x) noexcept {
  using c = detail::exp_constants;
  // Below -110 e^x rounds to 0 and above 89 to inf; the clamp keeps r finite for
  // x = +-inf. max/min return their second operand when one is NaN: NaN stays NaN.
  const __m512 clamped = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-110.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(clamped, _mm512_set1_ps(c::log2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::ln2_hi), clamped);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::ln2_lo), r);
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 p10 = _mm512_fmadd_ps(_mm512_set1_ps(c::p1), r, _mm512_set1_ps(c::p0));
  const __m512 p32 = _mm512_fmadd_ps(_mm512_set1_ps(c::p3), r, _mm512_set1_ps(c::p2));
  const __m512 p54 = _mm512_fmadd_ps(_mm512_set1_ps(c::p5), r, _mm512_set1_ps(c::p4));
  const __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(p54, r2, p32), r2, p10);
  const __m512 mantissa = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
  // vscalefps: mantissa * 2^n with IEEE overflow to inf and gradual underflow.
  return _mm512_scalef_ps(mantissa, n);
}

/// Lanes 8..15 (AVX-512F only: vextractf32x8 would need AVX-512DQ).
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m256 upper_half(__m512 v) noexcept {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/// The sum of the 16 lanes.
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE float sum(__m512 v) noexcept {
  return matmul::avx2::sum_lanes(_mm256_add_ps(_mm512_castps512_ps256(v), upper_half(v)));
}

/// The largest of the 16 lanes (no NaN lanes).
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE float max(__m512 v) noexcept {
  return matmul::avx2::max_lanes(_mm256_max_ps(_mm512_castps512_ps256(v), upper_half(v)));
}

/// The mask of the first `count` lanes, count <= 16.
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __mmask16 first_lanes(std::size_t count) noexcept {
  return __mmask16((1u << count) - 1u);
}

}  // namespace hedge::kernels::avx512

#endif

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
namespace hedge::kernels::neon {

/// The float vector of the NEON overloads: 4 lanes of AArch64 Advanced SIMD.
using floats = xsimd::batch<float, xsimd::neon64>;

}  // namespace hedge::kernels::neon
#endif
