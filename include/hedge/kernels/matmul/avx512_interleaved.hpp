// hedge/kernels/matmul/avx512_interleaved.hpp: AVX-512 VNNI kernels for the 8-row
// interleaved Q4_0, Q8_0, Q5_0 and Q5_1 layouts (repack.hpp): the GEMM of prefill, the GEMV
// of decode, and the GGUF-layout GEMM, which packs 16-row slices into this layout on the
// fly; and the interleaved Q4_K and Q6_K GEMV and GEMM.
//
// A 512-bit vector holds two consecutive groups (16 weight rows, whose outputs
// are 16 consecutive floats of Y): quad j of group g in the low half and of
// group g + 1 in the high half (one 32-byte load, one 32-byte insert). Each
// activation row broadcasts its 4 int8 values of quad j to the 16 lanes, and
// one vpdpbusd (u8 x s8, four products summed into each int32 lane) does the
// work of the AVX2 kernel's vpmaddubsw + vpaddw (+ vpmaddwd) on twice the
// lanes:
//
//   Q4_0: vpdpbusd(nibbles, x); minus 8 * sum(x) per block (prepared with the
//         activation), cvt, fma with d_w[16] * d_x
//   Q8_0: vpdpbusd(w + 128, x) (the sign bits flipped once per weight vector);
//         minus 128 * sum(x) per block, cvt, fma
//
// Q4_K: vpdpbusd of the nibbles per sub-block, times the rows' 6-bit scales (vpmulld),
// the mins as the AVX2 kernel applies them: GEMV in L2 at 1 thread 1.15x the AVX2 tile
// (256x4096, thread CPU time); GEMM (tiles of at most 4 activation rows: a row's five
// int32 sums and its accumulator) 1.55x the AVX2 tile (512x4096x4096, 1 thread, CPU time).
//
// Q6_K: vpdpbusd of the 6-bit levels (one vpternlogd select of nibble and high bits each)
// per sub-block, times the rows' int8 scales (vpmulld), the "- 32" through Q8_K's bsums
// (vpdpwssd of the rows' scale pairs), as the AVX2 kernel: the same integers, the same bits.
//
// GEMM tile: 2 groups x M activation rows (M = 8, then 4, 2, 1), with two int32
// accumulators per row (even and odd quads) so 2M independent vpdpbusd chains
// hide its latency: 16 + 8 float accumulators + the weight vectors fit the 32
// zmm registers at M = 8. GEMV tile: 4 groups in four long DRAM streams
// (gemv_streams.hpp; or 2, and prefetched, as weight_read.hpp's tuner picks)
// x 1 row. A lone group or one with padding rows runs the AVX2 kernel.
//
// Q5_0, Q5_1: Q4_0's nibbles, each quad's fifth bits added as 16 where the quad's qh word
// (repack.hpp), taken as a byte mask, has them set (one masked vpaddb per vector):
//
//   Q5_0: vpdpbusd(levels, x); minus 16 * sum(x) per block (twice the prepared offset),
//         cvt, fma with d_w[16] * d_x
//   Q5_1: vpdpbusd(levels, x), cvt, fma with d_w[16] * d_x; plus fma(sum(x), m_w[16] * d_x)
//
// Bit-identical to the AVX2 kernels (every format): the int32 block sums are exact in both
// (the AVX2 int16 partial sums cannot saturate, see avx2_interleaved.hpp), and
// the float epilogue is the same operations in the same order per lane. So
// GEMM row m still equals GEMV of row m, for any thread count.
#pragma once

#include "hedge/compiler/barrier.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/compiler/unroll.hpp"

#if HEDGE_SIMD_X86

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/matmul/avx2_interleaved.hpp"
#include "hedge/kernels/matmul/gemv_streams.hpp"
#include "hedge/kernels/matmul/weight_read.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::kernels::matmul {

namespace avx512 {

/// 4 int8 values broadcast to the 16 int32 lanes.
HEDGE_TARGET_AVX512VNNI inline __m512i broadcast_quad(const std::int8_t* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

/// Bytes [32 j, 32 j + 32) of block b of two consecutive groups: group 0's in
/// the low half, group 1's in the high half.
template <class Block>
HEDGE_TARGET_AVX512VNNI inline __m512i load_pair(const Block& b0, const Block& b1, int j) noexcept {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0.qs + 32 * j));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1.qs + 32 * j));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/// 8 fp16 values of group 0 and 8 of group 1 as 16 floats.
HEDGE_TARGET_AVX512VNNI inline __m512 halves_pair(const hedge::f16* lo, const hedge::f16* hi) noexcept {
  const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1));
}

/// The 16 rows' scales of block b (group 0's rows, then group 1's).
template <class Block>
HEDGE_TARGET_AVX512VNNI inline __m512 scales_pair(const Block& b0, const Block& b1) noexcept {
  return halves_pair(b0.d, b1.d);
}

/// Where a tile's results go. The tile's groups are q = 0 .. 2P - 1 (pair p: groups 2p
/// and 2p + 1), group q being `group_stride` groups after group q - 1 in the weights
/// and its 8 rows at y[8 q group_stride ..] of each activation row's output; the first
/// `valid` of the tile's 16 P rows are stored. With `accumulate` the tile continues the
/// sums already there (the next blocks of K), else it starts from zero.
struct tile_out {
  float* y;
  std::size_t y_stride;
  std::size_t valid;
  bool accumulate = false;
  std::size_t group_stride = 1;

  float* group_rows(int q, int m) const noexcept {
    return y + static_cast<std::size_t>(m) * y_stride + interleave_rows * group_stride * static_cast<std::size_t>(q);
  }
  __mmask8 group_mask(int q) const noexcept {
    const std::size_t first = interleave_rows * static_cast<std::size_t>(q);
    const std::size_t rows = valid <= first ? 0 : valid - first;
    return rows >= interleave_rows ? __mmask8(0xFF) : static_cast<__mmask8>((1u << rows) - 1u);
  }
};

template <int P, int M>
HEDGE_TARGET_AVX512VNNI inline void load_tile(__m512 (&acc)[P][M], const tile_out& out) noexcept {
  for (int p = 0; p < P; ++p) {
    for (int m = 0; m < M; ++m) {
      if (!out.accumulate) {
        acc[p][m] = _mm512_setzero_ps();
        continue;
      }
      const __m256 lo = _mm256_maskz_loadu_ps(out.group_mask(2 * p), out.group_rows(2 * p, m));
      const __m256 hi = _mm256_maskz_loadu_ps(out.group_mask(2 * p + 1), out.group_rows(2 * p + 1, m));
      acc[p][m] = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    }
  }
}

template <int P, int M>
HEDGE_TARGET_AVX512VNNI inline void store_tile(const __m512 (&acc)[P][M], const tile_out& out) noexcept {
  for (int p = 0; p < P; ++p) {
    for (int m = 0; m < M; ++m) {
      _mm256_mask_storeu_ps(out.group_rows(2 * p, m), out.group_mask(2 * p), _mm512_castps512_ps256(acc[p][m]));
      _mm256_mask_storeu_ps(out.group_rows(2 * p + 1, m), out.group_mask(2 * p + 1),
                            _mm512_extractf32x8_ps(acc[p][m], 1));
    }
  }
}

/// acc[m] += the 16 rows' dot products of block b0 | b1 (two groups' block b) with block
/// xb of activation row m, for each of the M rows. Q4_0: the nibbles against x, minus
/// 8 * sum(x) per block.
template <int M>
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void pair_block(const interleaved<quant::q4_0>::block& b0,
                                                            const interleaved<quant::q4_0>::block& b1,
                                                            const activation_row<quant::q4_0>* x, std::size_t xb,
                                                            __m512 (&acc)[M]) noexcept {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i even[M], odd[M];
  for (int m = 0; m < M; ++m) even[m] = odd[m] = _mm512_setzero_si512();
  HEDGE_UNROLL(4)
  for (int j = 0; j < 4; ++j) {
    const __m512i q = load_pair(b0, b1, j);
    const __m512i lo = _mm512_and_si512(q, low4);                         // values 4j .. 4j+3
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);  // values 16+4j .. 16+4j+3
    for (int m = 0; m < M; ++m) {
      const std::int8_t* xq = x[m].blocks[xb].qs;
      even[m] = _mm512_dpbusd_epi32(even[m], lo, broadcast_quad(xq + 4 * j));
      odd[m] = _mm512_dpbusd_epi32(odd[m], hi, broadcast_quad(xq + 16 + 4 * j));
    }
  }
  const __m512 dw = scales_pair(b0, b1);
  for (int m = 0; m < M; ++m) {
    const __m512i dot = _mm512_sub_epi32(_mm512_add_epi32(even[m], odd[m]), _mm512_set1_epi32(x[m].offsets[xb]));
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(x[m].scales[xb]));
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[m]);
  }
}

/// Q8_0: w + 128 (the sign bit flipped: unsigned) against x, minus 128 * sum(x) per block
/// (16 times the prepared 8 * sum(x)). The flip is one op per weight vector, shared by the
/// M rows; x is broadcast as it is, so each vpdpbusd needs nothing else. (|w| against x
/// negated where w < 0, the vpsignb way, costs a masked subtract per vpdpbusd: 0.65x this
/// speed on Zen 5, GEMM 512x4096x4096 at 1 thread, thread CPU time.)
template <int M>
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void pair_block(const interleaved<quant::q8_0>::block& b0,
                                                            const interleaved<quant::q8_0>::block& b1,
                                                            const activation_row<quant::q8_0>* x, std::size_t xb,
                                                            __m512 (&acc)[M]) noexcept {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i even[M], odd[M];
  for (int m = 0; m < M; ++m) even[m] = odd[m] = _mm512_setzero_si512();
  HEDGE_UNROLL(4)
  for (int j = 0; j < 8; j += 2) {
    const __m512i w0 = _mm512_xor_si512(load_pair(b0, b1, j), flip);
    const __m512i w1 = _mm512_xor_si512(load_pair(b0, b1, j + 1), flip);
    for (int m = 0; m < M; ++m) {
      const std::int8_t* xq = x[m].blocks[xb].qs + 4 * j;
      even[m] = _mm512_dpbusd_epi32(even[m], w0, broadcast_quad(xq));
      odd[m] = _mm512_dpbusd_epi32(odd[m], w1, broadcast_quad(xq + 4));
    }
  }
  const __m512 dw = scales_pair(b0, b1);
  for (int m = 0; m < M; ++m) {
    const __m512i dot =
        _mm512_sub_epi32(_mm512_add_epi32(even[m], odd[m]), _mm512_set1_epi32(16 * x[m].offsets[xb]));
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(x[m].scales[xb]));
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[m]);
  }
}

/// The 16 rows' bytes at offset `at` of a per-row array of 8 bytes in each group (group 0's
/// rows, then group 1's), widened to int32.
HEDGE_TARGET_AVX512VNNI inline __m512i row_bytes_pair(const std::uint8_t* g0, const std::uint8_t* g1) noexcept {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g0));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g1));
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(lo, hi));
}

/// Q4_K: per 64-element group h, vpdpbusd of the low nibbles (sub-block 2h) and of the
/// high nibbles (2h + 1) against x, each sub-block's int32 sum times the rows' 6-bit scale;
/// the mins through Q8_K's 32-element sums (vpmaddwd of the rows' min pairs), as the AVX2
/// kernel: the same exact integers and the same float epilogue, so the same bits.
template <int M>
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void pair_block(const interleaved<quant::q4_k>::block& b0,
                                                            const interleaved<quant::q4_k>::block& b1,
                                                            const activation_row<quant::q4_k>* x, std::size_t xb,
                                                            __m512 (&acc)[M]) noexcept {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i total[M];
  for (int m = 0; m < M; ++m) total[m] = _mm512_setzero_si512();
  HEDGE_UNROLL(1)
  for (int h = 0; h < 4; ++h) {
    // Even and odd quads sum in separate chains (4M independent vpdpbusd chains, added
    // exactly before the scale): 4-row batches in cache 1.13x (512x4096, 1 thread, Zen 5).
    __m512i sum_lo[2][M], sum_hi[2][M];
    for (int m = 0; m < M; ++m) sum_lo[0][m] = sum_hi[0][m] = sum_lo[1][m] = sum_hi[1][m] = _mm512_setzero_si512();
    HEDGE_UNROLL(8)
    for (int j = 0; j < 8; ++j) {
      const __m512i q = load_pair(b0, b1, 8 * h + j);
      const __m512i lo = _mm512_and_si512(q, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      for (int m = 0; m < M; ++m) {
        const std::int8_t* xq = x[m].blocks[xb].qs + 64 * h + 4 * j;
        sum_lo[j & 1][m] = _mm512_dpbusd_epi32(sum_lo[j & 1][m], lo, broadcast_quad(xq));
        sum_hi[j & 1][m] = _mm512_dpbusd_epi32(sum_hi[j & 1][m], hi, broadcast_quad(xq + 32));
      }
    }
    const __m512i s_lo = row_bytes_pair(b0.scales + 16 * h, b1.scales + 16 * h);
    const __m512i s_hi = row_bytes_pair(b0.scales + 16 * h + 8, b1.scales + 16 * h + 8);
    for (int m = 0; m < M; ++m) {
      const __m512i lo = _mm512_add_epi32(sum_lo[0][m], sum_lo[1][m]);
      const __m512i hi = _mm512_add_epi32(sum_hi[0][m], sum_hi[1][m]);
      total[m] = _mm512_add_epi32(total[m], _mm512_add_epi32(_mm512_mullo_epi32(lo, s_lo), _mm512_mullo_epi32(hi, s_hi)));
    }
  }
  __m512i mins[4];  // rows' (m_2p, m_2p+1) as int16 pairs, group 0's rows then group 1's
  for (int p = 0; p < 4; ++p) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.mins + 16 * p));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.mins + 16 * p));
    mins[p] = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
  const __m512 d = scales_pair(b0, b1);
  const __m512 dmin = _mm512_cvtph_ps(_mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.dmin))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.dmin)), 1));
  for (int m = 0; m < M; ++m) {
    const quant::q8_k::block& xq = x[m].blocks[xb];
    // The activation's 8 sub-block sums (int16), pair p in int32 lane p.
    const __m128i sums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq.bsums)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(xq.bsums + 8)));
    const __m512i min_total = _mm512_add_epi32(
        _mm512_add_epi32(_mm512_madd_epi16(mins[0], _mm512_set1_epi32(_mm_extract_epi32(sums, 0))),
                         _mm512_madd_epi16(mins[1], _mm512_set1_epi32(_mm_extract_epi32(sums, 1)))),
        _mm512_add_epi32(_mm512_madd_epi16(mins[2], _mm512_set1_epi32(_mm_extract_epi32(sums, 2))),
                         _mm512_madd_epi16(mins[3], _mm512_set1_epi32(_mm_extract_epi32(sums, 3)))));
    const __m512 dx = _mm512_set1_ps(xq.d);
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total[m]), _mm512_mul_ps(d, dx), acc[m]);
    acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_total), _mm512_mul_ps(dmin, dx), acc[m]);
  }
}

/// Q6_K, quad k of half h (repack.hpp): the 6-bit levels of element sets i = 0..3 of the
/// 16 rows, from the quad's A, B and H bytes. Each level is one vpternlogd select: its low
/// nibble from A or B (shifted down for i >= 2), bits 5:4 from H's bit pair 2i, moved there
/// from H masked to the pairs that land in bits 5:4 and nothing above (0x33 for i = 0, 2;
/// 0xCC for i = 1, 3), so no bit reaches bits 7:6 (the AVX2 kernel's and-or-and per level).
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void q6_levels(const interleaved<quant::q6_k>::block& b0,
                                                           const interleaved<quant::q6_k>::block& b1, int h, int k,
                                                           __m512i (&levels)[4]) noexcept {
  using layout = interleaved<quant::q6_k>;
  const auto quad = [&](std::size_t part) HEDGE_TARGET_AVX512VNNI {
    const int offset = static_cast<int>(layout::quad_offset(static_cast<std::size_t>(h), static_cast<std::size_t>(k), part));
    return load_pair(b0, b1, offset / 32);
  };
  const __m512i a = quad(0), b = quad(1), hb = quad(2);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i h_even = _mm512_and_si512(hb, _mm512_set1_epi8(0x33));
  const __m512i h_odd = _mm512_and_si512(hb, _mm512_set1_epi8(static_cast<char>(0xCC)));
  // vpternlogd 0xE4 is (c ? a : b) per bit, with c = low4: a the nibble, b the high bits.
  levels[0] = _mm512_ternarylogic_epi32(a, _mm512_slli_epi16(h_even, 4), low4, 0xE4);
  levels[1] = _mm512_ternarylogic_epi32(b, _mm512_slli_epi16(h_odd, 2), low4, 0xE4);
  levels[2] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 4), h_even, low4, 0xE4);
  levels[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b, 4), _mm512_srli_epi16(h_odd, 2), low4, 0xE4);
}

/// Q6_K: per half h and quad range (sub-blocks 8h + 2i for quads 0..3, 8h + 2i + 1 for
/// 4..7), vpdpbusd of the levels q in [0, 63] against x; each sub-block's int32 sum times
/// the rows' int8 scale (vpmulld); the "- 32" of every level is 32 * sum_j sc_j * (Q8_K's
/// 16-element sum j), one vpdpwssd per scale pair, as the AVX2 kernel: the same exact
/// integers and the same float epilogue, so the same bits.
template <int M>
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void pair_block(const interleaved<quant::q6_k>::block& b0,
                                                            const interleaved<quant::q6_k>::block& b1,
                                                            const activation_row<quant::q6_k>* x, std::size_t xb,
                                                            __m512 (&acc)[M]) noexcept {
  // Row r's (sc_2p, sc_2p+1) as int16 pairs in lane r, group 0's rows then group 1's.
  const auto scale_pairs = [&](int p) HEDGE_TARGET_AVX512VNNI {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.scales + 16 * p));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.scales + 16 * p));
    return _mm512_cvtepi8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  };
  __m512i total[M];  // per row: sum over sub-blocks of scale * sum(q * x)
  for (int m = 0; m < M; ++m) total[m] = _mm512_setzero_si512();
  HEDGE_UNROLL(1)
  for (int h = 0; h < 2; ++h) {
    HEDGE_UNROLL(1)
    for (int half = 0; half < 2; ++half) {  // quads 4 half .. 4 half + 3: sub-blocks 8h + 2i + half
      __m512i sums[4][M];
      for (int i = 0; i < 4; ++i) {
        for (int m = 0; m < M; ++m) sums[i][m] = _mm512_setzero_si512();
      }
      for (int k = 4 * half; k < 4 * half + 4; ++k) {
        __m512i levels[4];
        q6_levels(b0, b1, h, k, levels);
        for (int i = 0; i < 4; ++i) {
          for (int m = 0; m < M; ++m) {
            const std::int8_t* xq = x[m].blocks[xb].qs + 128 * h + 32 * i + 4 * k;
            sums[i][m] = _mm512_dpbusd_epi32(sums[i][m], levels[i], broadcast_quad(xq));
          }
        }
      }
      for (int i = 0; i < 4; ++i) {
        const __m512i pairs = scale_pairs(4 * h + i);
        const __m512i scale = half == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 16)
                                        : _mm512_srai_epi32(pairs, 16);
        for (int m = 0; m < M; ++m) total[m] = _mm512_add_epi32(total[m], _mm512_mullo_epi32(sums[i][m], scale));
      }
    }
  }
  const __m512 d = scales_pair(b0, b1);
  for (int m = 0; m < M; ++m) {
    const quant::q8_k::block& xq = x[m].blocks[xb];
    // sum_j sc_j * bsum_j per row lane (|.| <= 2^22).
    __m512i offset = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      std::int32_t sum_pair;
      std::memcpy(&sum_pair, xq.bsums + 2 * p, 4);
      offset = _mm512_dpwssd_epi32(offset, scale_pairs(p), _mm512_set1_epi32(sum_pair));
    }
    const __m512i dot = _mm512_sub_epi32(total[m], _mm512_slli_epi32(offset, 5));
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, _mm512_set1_ps(xq.d)), acc[m]);
  }
}

/// The fifth bits of quad word w (repack.hpp) of group 0 and of group 1 as the byte mask
/// of a load_pair vector: group 0's 32 bytes, then group 1's.
template <class Block>
HEDGE_TARGET_AVX512VNNI inline __mmask64 fifth_bits_pair(const Block& b0, const Block& b1, int w) noexcept {
  std::uint32_t lo, hi;
  std::memcpy(&lo, b0.qh + 4 * w, 4);
  std::memcpy(&hi, b1.qh + 4 * w, 4);
  return _cvtu64_mask64(static_cast<std::uint64_t>(hi) << 32 | lo);
}

/// Q5_0 / Q5_1: the 5-bit levels against x (even and odd quads' products in two vpdpbusd
/// chains per row, as Q4_0's low and high nibbles); Q5_0 subtracts 16 * sum(x) per block
/// (twice the prepared offset), Q5_1 adds m_w * d_x * sum(x).
template <int M, class W>
  requires(std::is_same_v<W, quant::q5_0> || std::is_same_v<W, quant::q5_1>)
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void pair_block(const typename interleaved<W>::block& b0,
                                                            const typename interleaved<W>::block& b1,
                                                            const activation_row<W>* x, std::size_t xb,
                                                            __m512 (&acc)[M]) noexcept {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i sixteen = _mm512_set1_epi8(0x10);
  __m512i even[M], odd[M];
  for (int m = 0; m < M; ++m) even[m] = odd[m] = _mm512_setzero_si512();
  HEDGE_UNROLL(4)
  for (int j = 0; j < 4; ++j) {
    const __m512i q = load_pair(b0, b1, j);
    const __m512i lo_nibbles = _mm512_and_si512(q, low4);
    const __m512i hi_nibbles = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    const __m512i lo = _mm512_mask_add_epi8(lo_nibbles, fifth_bits_pair(b0, b1, 2 * j), lo_nibbles, sixteen);
    const __m512i hi = _mm512_mask_add_epi8(hi_nibbles, fifth_bits_pair(b0, b1, 2 * j + 1), hi_nibbles, sixteen);
    for (int m = 0; m < M; ++m) {
      const std::int8_t* xq = x[m].blocks[xb].qs;
      even[m] = _mm512_dpbusd_epi32(even[m], lo, broadcast_quad(xq + 4 * j));
      odd[m] = _mm512_dpbusd_epi32(odd[m], hi, broadcast_quad(xq + 16 + 4 * j));
    }
  }
  const __m512 dw = scales_pair(b0, b1);
  [[maybe_unused]] __m512 mw;
  if constexpr (std::is_same_v<W, quant::q5_1>) mw = halves_pair(b0.m, b1.m);
  for (int m = 0; m < M; ++m) {
    const __m512 dx = _mm512_set1_ps(x[m].scales[xb]);
    const __m512i levels_dot = _mm512_add_epi32(even[m], odd[m]);
    if constexpr (std::is_same_v<W, quant::q5_0>) {
      const __m512i dot = _mm512_sub_epi32(levels_dot, _mm512_set1_epi32(2 * x[m].offsets[xb]));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, dx), acc[m]);
    } else {
      const __m512 x_sum = _mm512_set1_ps(static_cast<float>(x[m].offsets[xb] / 8));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(levels_dot), _mm512_mul_ps(dw, dx), acc[m]);
      acc[m] = _mm512_fmadd_ps(x_sum, _mm512_mul_ps(mw, dx), acc[m]);
    }
  }
}

/// Whether more than 4 rows of the format's pair_block spill the 32 zmm registers: Q4_K's
/// block keeps five int32 sums per row live beside the row's accumulator, Q6_K's five.
/// pair_tile then runs such a block as 4 rows and the rest: 8-row batches on a 512x4096
/// tile in cache at 1 thread, CPU time, Zen 5: Q6_K 372 -> 176 us, Q4_K 152 -> 133 us
/// (4 rows: 89, 67 us). A prefill's tiles (pair_rows) stay at 4 rows: 8-row ones, split so,
/// measured no faster (Q4_K 64x4096x4096 in cache: 7.8 ms CPU time against 7.3).
template <class W>
inline constexpr bool spills_above_4 = std::is_same_v<W, quant::q4_k> || std::is_same_v<W, quant::q6_k>;

/// Whether a tile of two pairs runs the format's pair_block on one pair and then the other
/// (compiler::fence between them). Without it, GCC hoists the second pair's activation
/// loads into Q6_K's first and spills. With it, gemv/q6_k/avx512vnni_repacked_batch4 at 1
/// thread (Zen 5): 512x4096 in cache 319-336 -> 358-367 GOP/s, 4096x11008 from DRAM
/// 0.69-0.71 -> 0.76-0.83 of the bound; a standalone loop over 128x4096 in L2 timed the
/// 1-row tile at 168 -> 130 cycles per pair block (one pair alone: 123). Q4_K's tile is
/// faster without it (99 against 110 cycles in that loop).
template <class W>
inline constexpr bool pairs_apart = std::is_same_v<W, quant::q6_k>;

/// P pairs of groups (tile_out: group q at group + q * group_stride groups) x M activation
/// rows, blocks [x_block, x_block + blocks) of the activation, prefetching the weights as
/// `Prefetch` says (weight_read.hpp): a GEMV's and a decode batch's come from DRAM
/// (stream_tiles, tuned per CPU); a prefill's tiles re-read theirs from cache.
template <int M, int P, class W, weight_prefetch Prefetch = weight_prefetch::none>
HEDGE_TARGET_AVX512VNNI void pair_tile(const typename interleaved<W>::block* group, std::size_t blocks,
                                       const activation_row<W>* x, std::size_t x_block, const tile_out& out) noexcept {
  __m512 acc[P][M];
  load_tile(acc, out);
  const std::size_t pair_stride = 2 * out.group_stride * blocks;  // blocks from pair p to pair p + 1
  for (std::size_t b = 0; b < blocks; ++b) {
    for (int p = 0; p < P; ++p) {  // 2P groups: 2P streams from DRAM in a GEMV
      const auto& b0 = group[static_cast<std::size_t>(p) * pair_stride + b];
      const auto& b1 = group[static_cast<std::size_t>(p) * pair_stride + out.group_stride * blocks + b];
      if constexpr (Prefetch != weight_prefetch::none) {
        avx2::prefetch_ahead<Prefetch == weight_prefetch::ahead_into_l2>(b0);
        avx2::prefetch_ahead<Prefetch == weight_prefetch::ahead_into_l2>(b1);
      }
      if constexpr (M > 4 && spills_above_4<W>) {
        // Two passes over the block while it is in L1, rows 0..3 then 4..M-1: each row's
        // arithmetic is the same as in one pass, so the same bits.
        __m512 low[4], high[M - 4];
        std::copy_n(acc[p], 4, low);
        std::copy_n(acc[p] + 4, M - 4, high);
        pair_block<4>(b0, b1, x, x_block + b, low);
        pair_block<M - 4>(b0, b1, x + 4, x_block + b, high);
        std::copy_n(low, 4, acc[p]);
        std::copy_n(high, M - 4, acc[p] + 4);
      } else {
        pair_block<M>(b0, b1, x, x_block + b, acc[p]);
      }
      if constexpr (P > 1 && pairs_apart<W>) compiler::fence();
    }
  }
  store_tile(acc, out);
}

/// `rows` activation rows against two groups (blocks [x_block, x_block + blocks) of
/// the activation): tiles of 8, 4, 2, then 1 rows.
template <class W>
HEDGE_TARGET_AVX512VNNI void pair_rows(const typename interleaved<W>::block* group, std::size_t blocks,
                                       const activation_row<W>* x, std::size_t x_block, std::size_t rows,
                                       tile_out out) noexcept {
  const auto at = [&](std::size_t m) {
    tile_out o = out;
    o.y += m * out.y_stride;
    return o;
  };
  std::size_t m = 0;
  if constexpr (!spills_above_4<W>) {
    for (; m + 8 <= rows; m += 8) pair_tile<8, 1, W>(group, blocks, x + m, x_block, at(m));
  }
  for (; m + 4 <= rows; m += 4) pair_tile<4, 1, W>(group, blocks, x + m, x_block, at(m));
  if (m + 2 <= rows) {
    pair_tile<2, 1, W>(group, blocks, x + m, x_block, at(m));
    m += 2;
  }
  if (m < rows) pair_tile<1, 1, W>(group, blocks, x + m, x_block, at(m));
}

}  // namespace avx512

namespace avx512 {

/// Activation rows up to which a GEMM reads its weights as a GEMV does: a decode batch's
/// few rows read each weight once from DRAM, so the bandwidth of the long streams counts;
/// a prefill's tiles of 8 rows re-read them from cache. (Q4_K's 8 rows spill registers, as
/// in pair_rows, and still stream faster than as a prefill tile: 4096x11008 cold at 1
/// thread, 2,860-3,334 us against 3,391-3,928.)
inline constexpr int stream_rows = 8;
static_assert(stream_rows == tuned_rows, "a decode batch's rows each tune their weight read");

/// M activation rows (M <= stream_rows) against the full groups of a run, read as
/// `streams` long streams (gemv_streams.hpp: gemv_streams or 2) prefetched as `Prefetch`
/// says, every row per tile; returns the groups done. 4 streams are one tile of two pairs
/// up to 4 rows; from 5 rows on (whose accumulators fill the registers), and for 2 streams,
/// a tile is one pair, and the pairs of a step run one after the other, so the streams
/// still advance together.
template <int M, class W, weight_prefetch Prefetch>
HEDGE_TARGET_AVX512VNNI std::size_t stream_tiles(const typename interleaved<W>::block* group, std::size_t groups,
                                                 std::size_t blocks, const activation_row<W>* x, float* y,
                                                 std::size_t y_stride, std::size_t valid, std::size_t streams) noexcept {
  static_assert(gemv_streams == 4, "4 streams are two pairs");
  static_assert(M <= stream_rows);
  const stream_split split(groups, valid, streams == 2 ? 2 : gemv_streams);
  for (std::size_t i = 0; i < split.per_stream; ++i) {
    if constexpr (M <= 4) {
      if (split.streams == 4) {
        pair_tile<M, 2, W, Prefetch>(group + i * blocks, blocks, x, 0,
                                     {y + i * interleave_rows, y_stride, 4 * interleave_rows, false, split.per_stream});
        continue;
      }
    }
    for (std::size_t pair = 0; pair < split.streams / 2; ++pair) {
      const std::size_t first = 2 * pair * split.per_stream + i;  // this pair's group in stream 2 pair
      pair_tile<M, 1, W, Prefetch>(group + first * blocks, blocks, x, 0,
                                   {y + first * interleave_rows, y_stride, 2 * interleave_rows, false, split.per_stream});
    }
  }
  return split.streamed();
}

/// stream_tiles for a run-time row count (1 .. stream_rows; 0 groups done for more) and read.
template <class W>
HEDGE_TARGET_AVX512VNNI std::size_t stream_rows_tiles(const typename interleaved<W>::block* group, std::size_t groups,
                                                      std::size_t blocks, const activation_row<W>* x, std::size_t rows,
                                                      float* y, std::size_t y_stride, std::size_t valid,
                                                      weight_read read) noexcept {
  std::size_t done = 0;
  visit_read<stream_rows>(rows, read.prefetch, [&](auto m, auto prefetch) {
    done = stream_tiles<m.value, W, prefetch.value>(group, groups, blocks, x, y, y_stride, valid, read.streams);
  });
  return done;
}

}  // namespace avx512

/// The interleaved formats the 512-bit tiles run (each has a pair_block): Q4_0, Q8_0, Q5_0,
/// Q5_1, Q4_K and Q6_K. Others (a user's interleaved format) take the AVX2 tile.
template <class W>
concept PairTiled = Interleavable<W> && (std::is_same_v<W, quant::q4_0> || std::is_same_v<W, quant::q8_0> ||
                                         std::is_same_v<W, quant::q5_0> || std::is_same_v<W, quant::q5_1> ||
                                         std::is_same_v<W, quant::q4_k> || std::is_same_v<W, quant::q6_k>);

/// The AVX-512 VNNI GEMV and decode-batch tiles of W take a weight read policy (streams and
/// prefetch), which gemv.hpp and gemm.hpp tune (weight_read.hpp).
template <class A, class W>
  requires std::is_base_of_v<arch::avx512vnni, A>
inline constexpr std::size_t tuned_read_rows<A, W> = PairTiled<W> ? avx512::stream_rows : 0;

/// GEMV over a run of `groups` consecutive groups (`valid` rows in all), AVX-512
/// VNNI, the PairTiled formats. The run's full groups are read as long streams, as `read`
/// says (gemv_streams.hpp); the pairs left over, then a lone or partial group on the AVX2
/// kernel.
template <PairTiled W>
void gemv_groups(arch::avx512vnni, W, const typename interleaved<W>::block* group, std::size_t groups,
                 std::size_t blocks, const activation_row<W>& x, float* y, std::size_t valid,
                 weight_read read = {}) noexcept {
  const stream_split split(groups, valid);
  std::size_t g = avx512::stream_rows_tiles<W>(group, groups, blocks, &x, 1, y, 0, valid, read);
  for (; g + 2 <= split.full; g += 2) {
    avx512::pair_tile<1, 1, W>(group + g * blocks, blocks, &x, 0, {y + g * interleave_rows, 0, 2 * interleave_rows});
  }
  if (g < groups) {
    avx2::group_run<W>(group + g * blocks, groups - g, blocks, &x, 1, y + g * interleave_rows, 0,
                       valid - g * interleave_rows, avx2_untuned_read);
  }
}

/// GEMM over a run of `groups` consecutive groups (rows 8 * first ...; `valid`
/// rows in all) and `rows` activation rows, AVX-512 VNNI, the PairTiled formats: up to
/// stream_rows rows (a decode batch) the full groups as the GEMV streams them, then
/// pairs of full groups on the 512-bit tile, a lone or partial group on the AVX2 one.
/// Every row's sums are the GEMV's, in the same order, whichever tile runs it.
template <PairTiled W>
void gemm_groups(arch::avx512vnni, W, const typename interleaved<W>::block* group, std::size_t groups,
                 std::size_t blocks, const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                 std::size_t valid, weight_read read = {}) noexcept {
  std::size_t g = avx512::stream_rows_tiles<W>(group, groups, blocks, x, rows, y, y_stride, valid, read);
  for (; g + 2 <= groups && (g + 2) * interleave_rows <= valid; g += 2) {
    avx512::pair_rows<W>(group + g * blocks, blocks, x, 0, rows,
                         {y + g * interleave_rows, y_stride, 2 * interleave_rows});
  }
  for (; g < groups; ++g) {
    const std::size_t first = g * interleave_rows;
    const std::size_t left = valid - first < interleave_rows ? valid - first : interleave_rows;
    avx2::group_rows<W>(group + g * blocks, blocks, x, rows, y + first, y_stride, left);
  }
}

/// Y[m][r] for every weight row r of a GGUF-layout slice of at most 16 rows and
/// activation row m < rows, AVX-512 VNNI, Q4_0, Q8_0, Q5_0 and Q5_1: the slice is packed
/// into the interleaved layout on the fly, `pack_blocks` blocks of K at a time, in a
/// buffer on the stack (at most 17 KiB, Q8_0's) that stays in L1 while every
/// activation row passes over it; each chunk continues the sums of the one before. The
/// packing is one pass over the slice's bytes per call, against a tile's pass per 8
/// activation rows. Rows past the slice's end are zero blocks, never stored. The rows
/// equal the interleaved GEMM's bit for bit (not the GGUF-layout GEMV, whose lanes sum
/// in another order).
template <class W>
  requires(std::is_same_v<W, quant::q4_0> || std::is_same_v<W, quant::q8_0> || std::is_same_v<W, quant::q5_0> ||
           std::is_same_v<W, quant::q5_1>)
void gemm_rows(arch::avx512vnni, W, matrix_view<const typename W::block> w, const activation_row<W>* x,
               std::size_t rows, float* y, std::size_t y_stride) noexcept {
  constexpr std::size_t pack_blocks = 32;
  using packed_block = typename interleaved<W>::block;
  packed_block packed[2 * pack_blocks];
  const std::size_t valid = w.rows() < 2 * interleave_rows ? w.rows() : 2 * interleave_rows;
  for (std::size_t first = 0; first < w.cols(); first += pack_blocks) {
    const std::size_t n = w.cols() - first < pack_blocks ? w.cols() - first : pack_blocks;
    for (std::size_t g = 0; g < 2; ++g) {
      for (std::size_t b = 0; b < n; ++b) {
        packed_block& dst = packed[g * n + b];
        for (std::size_t r = 0; r < interleave_rows; ++r) {
          const std::size_t row = g * interleave_rows + r;
          interleaved<W>::pack(dst, r, row < valid ? w(row, first + b) : typename W::block{});
        }
      }
    }
    avx512::pair_rows<W>(packed, n, x, first, rows, {y, y_stride, valid, first > 0});
  }
}

}  // namespace hedge::kernels::matmul

#endif
