// hedge/kernels/matmul/avx2_primitives.hpp: the int8 dot-product and conversion
// primitives the AVX2 matmul kernels are written in (xsimd 8.1 has no int8
// dot products). Each is one or two instructions behind a name that says what
// it computes.
//
// Every AVX2 function carries HEDGE_TARGET_AVX2 (compiler/attributes.hpp).
#pragma once

#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86

#include <cstdint>
#include <cstring>

#include "hedge/core/half.hpp"

namespace hedge::kernels::matmul::avx2 {

/// 16 bytes of packed nibbles -> 32 bytes in [0, 15]: byte j of the input gives
/// byte j (its low nibble) and byte j + 16 (its high nibble), Q4_0's order.
/// The 16 bytes are broadcast to both 128-bit halves (a load, no shuffle) and
/// the upper half shifted right by 4 (vpsrlvd), so the unpack is two ALU ops.
HEDGE_TARGET_AVX2 inline __m256i unpack_nibbles_16(const std::uint8_t* packed) noexcept {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed)));
  const __m256i shifted = _mm256_srlv_epi32(both, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F));
}

/// The 32 bits at `bits` (little-endian) as 32 bytes: byte j is 0x10 where bit j is
/// set, else 0: Q5_0/Q5_1's fifth bits moved to bit 4 of each element's level, to be
/// or-ed into the nibbles of unpack_nibbles_16. Byte j takes byte j / 8 of the word
/// (vpshufb), keeps bit j % 8 of it (vpand) and compares.
HEDGE_TARGET_AVX2 inline __m256i fifth_bits_32(const std::uint8_t* bits) noexcept {
  std::int32_t word;
  std::memcpy(&word, bits, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(word), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/// The 32 levels n in [0, 31] of a Q5_0 / Q5_1 block, in Q4_0's element order: the
/// nibbles of `qs` with the fifth bits of `qh` or-ed in.
HEDGE_TARGET_AVX2 inline __m256i q5_levels_32(const std::uint8_t* qs, const std::uint8_t* qh) noexcept {
  return _mm256_or_si256(unpack_nibbles_16(qs), fifth_bits_32(qh));
}

/// The levels of 64-element group g of a Q4_K / Q5_K super-block: n_lo for sub-block
/// 2g (the low nibbles of qs[32 g ..]), n_hi for 2g + 1 (the high nibbles). Q5_K (a
/// block with qh) or-s in the fifth bits as 16: `high` starts as qh's 32 bytes
/// (k_fifth_bits) and holds sub-blocks 2g, 2g + 1 in bits 0, 1; it is shifted for g + 1.
template <class Block>
HEDGE_TARGET_AVX2 inline __m256i k_fifth_bits(const Block& wb) noexcept {
  if constexpr (requires { wb.qh; }) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh));
  } else {
    return _mm256_setzero_si256();
  }
}
template <class Block>
HEDGE_TARGET_AVX2 inline void k_group_levels(const Block& wb, int g, __m256i& high, __m256i& n_lo,
                                             __m256i& n_hi) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * g));
  n_lo = _mm256_and_si256(q, low4);
  n_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  if constexpr (requires { wb.qh; }) {
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    n_lo = _mm256_or_si256(n_lo, _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
    n_hi = _mm256_or_si256(n_hi, _mm256_and_si256(_mm256_slli_epi16(high, 3), bit4));
    high = _mm256_srli_epi16(high, 2);
  }
}

/// int16 lane `sub` (0..7) of `scales` (8 int16 in each 128-bit half) in every lane.
HEDGE_TARGET_AVX2 inline __m256i broadcast_scale(__m256i scales, int sub) noexcept {
  return _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * sub)));
}

/// Pairwise sums of u8 x s8 products as int16 (vpmaddubsw). The caller keeps
/// |u * s| pairs below 32767 (true for u <= 127 or |s| <= 127 with u <= 128).
HEDGE_TARGET_AVX2 inline __m256i madd_u8s8_i16(__m256i u, __m256i s) noexcept { return _mm256_maddubs_epi16(u, s); }

/// Sums adjacent int16 pairs into int32 lanes (vpmaddwd by ones).
HEDGE_TARGET_AVX2 inline __m256i sum_pairs_i16(__m256i v) noexcept {
  return _mm256_madd_epi16(v, _mm256_set1_epi16(1));
}

/// Dot products of unsigned u8 and signed s8 lanes, four products per int32 lane.
HEDGE_TARGET_AVX2 inline __m256i dot_u8s8_i32(__m256i u, __m256i s) noexcept {
  return sum_pairs_i16(madd_u8s8_i16(u, s));
}

/// Dot products of two signed s8 vectors, four products per int32 lane. vpmaddubsw
/// wants one unsigned operand: |a| . sign(b, a) has the same products. Needs
/// a, b != -128 (Q8_0 never stores -128).
HEDGE_TARGET_AVX2 inline __m256i dot_s8s8_i32(__m256i a, __m256i b) noexcept {
  return dot_u8s8_i32(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

/// The sum of the 8 float lanes.
HEDGE_TARGET_AVX2 inline float sum_lanes(__m256 v) noexcept {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// The largest of the 8 float lanes (no NaN lanes).
HEDGE_TARGET_AVX2 inline float max_lanes(__m256 v) noexcept {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

/// The sum of the 4 float lanes.
HEDGE_TARGET_AVX2 inline float sum_lanes(__m128 s) noexcept {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// fp16 -> float with F16C (exact, as f16_to_f32).
HEDGE_TARGET_AVX2 inline float to_float(hedge::f16 h) noexcept { return _cvtsh_ss(h.bits); }

/// 8 consecutive fp16 / bf16 / f32 values as 8 floats.
HEDGE_TARGET_AVX2 inline __m256 load8(const hedge::f16* p) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
HEDGE_TARGET_AVX2 inline __m256 load8(const hedge::bf16* p) noexcept {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
HEDGE_TARGET_AVX2 inline __m256 load8(const float* p) noexcept { return _mm256_loadu_ps(p); }

}  // namespace hedge::kernels::matmul::avx2

#endif
