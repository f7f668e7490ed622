// hedge/kernels/matmul/avx2_interleaved.hpp: AVX2 kernels for the 8-row
// interleaved layout (repack.hpp): the 8 float lanes are the 8 weight rows of a
// group, so a block's scales are one 16-byte load and one vcvtph2ps, and no
// horizontal sums are needed until the tile is stored.
//
// Microkernel: a group (8 weight rows) x M activation rows (M <= 4). Per block,
// quad by quad (so only one quad, M int sums and M accumulators are live: all
// in registers), the weight quad is loaded and unpacked once for the M rows;
// each activation row broadcasts 4 of its int8 values (vpbroadcastd) against
// the matching quad of all 8 rows:
//
//   Q4_0: vpmaddubsw(nibbles, x) for the 8 quads, summed in int16 (8 * 2 * 15 * 127
//         = 30480 < 32767), one vpmaddwd, minus 8 * sum(x) (the block offset
//         prepared with the activation), cvt, fma with d_w[8] * d_x
//   Q8_0: |w| . sign(x, w) per quad, vpmaddwd each (two int8 pairs can reach
//         2 * 127 * 127), int32 sum, cvt, fma
//   Q5_0, Q5_1: Q4_0's nibbles with the fifth bits or-ed in as 16 (fifth_bits_32 of the
//         quad's qh word), vpmaddubsw summed in int16 over two quads (4 * 2 * 31 * 127 =
//         31496 < 32767), vpmaddwd per pair of quads; Q5_0 minus 16 * sum(x) per block
//         (twice the prepared offset), Q5_1 plus fma(sum(x), m_w * d_x) after the levels'
//         fma, as the GGUF-layout kernel (avx2_gemv.hpp)
//   Q6_K: per pair of quads, vpmaddubsw(6-bit levels, x) summed in int16, then
//         vpmaddwd by the rows' int8 sub-block scales; the "- 32" of every level
//         through Q8_K's 16-element sums, one vpmaddwd per pair of sub-blocks, as in
//         the GGUF-layout kernel (avx2_gemv.hpp)
//   Q4_K: per 64-element group, the 8 quads' vpmaddubsw(nibbles, x) summed in
//         int16 per sub-block (same bound as Q4_0: |Q8_K q| <= 127), then one
//         vpmaddwd by the 8 rows' 6-bit scales (each row's scale in both int16
//         halves of its lane) scales and pair-sums; int32 over the super-block.
//         The mins: vpmaddwd of the rows' min pairs by the activation's
//         32-element sums (from Q8_K's bsums), 4 per super-block, as in ggml's
//         ggml_vec_dot_q4_K_q8_K: no per-element offset.
//
// GEMV (M = 1) and decode batches (M <= 4) of Q4_0, Q8_0, Q5_0 and Q5_1 run several
// groups at once instead (group_run): 4 long weight streams from DRAM, a quarter of the run
// apart (gemv_streams.hpp), as G = 4 groups per tile up to 2 rows and two tiles of G = 2
// from 3 rows on; or 2 streams (G = 2), and prefetched or not, as the weight read tuner
// picks (weight_read.hpp).
// One tile skeleton (group_tile: accumulators, block loop, group addressing,
// prefetch, store) runs every format through its block body (group_block), as the
// AVX-512 tiles do (pair_tile over pair_block).
// A row's operations depend neither on M nor on G, so GEMM row m equals GEMV
// of row m and results do not depend on the thread count.
#pragma once

#include "hedge/compiler/intrinsics.hpp"
#include "hedge/compiler/unroll.hpp"

#if HEDGE_SIMD_X86

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
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

namespace avx2 {

/// 4 int8 values broadcast to the 8 int32 lanes.
HEDGE_TARGET_AVX2 inline __m256i broadcast_quad(const std::int8_t* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/// Prefetches the block `prefetch_bytes` ahead in the group's stream (groups
/// are contiguous, so past a group's end this is the next group): the hardware
/// prefetchers alone do not run far enough ahead of these kernels on weights
/// streamed from DRAM (docs/perf-journal.md, matmul).
/// The address is formed as an integer: past the matrix end it may point
/// outside it, which a prefetch never faults on. `ToL2` prefetches into L2 only
/// (T1) instead of L1 (T0): the kernels that spend longer per weight byte read
/// faster so (AVX-512 VNNI tile, docs/perf-journal.md, matmul).
inline constexpr std::size_t prefetch_bytes = 2304;
template <bool ToL2 = false, class Block>
HEDGE_TARGET_AVX2 inline void prefetch_ahead(const Block& block) noexcept {
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(&block) + prefetch_bytes;
  for (std::size_t offset = 0; offset < sizeof(Block) + 48; offset += 64) {
    if constexpr (ToL2) {
      _mm_prefetch(reinterpret_cast<const char*>(address + offset), _MM_HINT_T1);
    } else {
      _mm_prefetch(reinterpret_cast<const char*>(address + offset), _MM_HINT_T0);
    }
  }
}

/// Stores the 8 lanes, or the first `valid` of them.
HEDGE_TARGET_AVX2 inline void store_rows(float* y, __m256 v, std::size_t valid) noexcept {
  if (valid == interleave_rows) {
    _mm256_storeu_ps(y, v);
  } else {
    alignas(32) float lanes[interleave_rows];
    _mm256_store_ps(lanes, v);
    for (std::size_t r = 0; r < valid; ++r) y[r] = lanes[r];
  }
}

/// Stores the G x M tile: group t's rows at y[8 t group_stride ..] (group t is
/// group_stride groups after group t - 1), the first `valid` of the tile's 8 G rows.
template <int M, int G>
HEDGE_TARGET_AVX2 inline void store_tile(const __m256 (&acc)[G][M], float* y, std::size_t y_stride,
                                         std::size_t valid, std::size_t group_stride) noexcept {
  for (int t = 0; t < G; ++t) {
    const std::size_t first = interleave_rows * static_cast<std::size_t>(t);
    const std::size_t rows = valid - first < interleave_rows ? valid - first : interleave_rows;
    for (int m = 0; m < M; ++m) {
      store_rows(y + static_cast<std::size_t>(m) * y_stride + first * group_stride, acc[t][m], rows);
    }
  }
}

/// acc[m] += the 8 rows' dot products of group block g (block b of the group) with
/// block b of activation row m, for each of the M rows. Q4_0: the nibbles against x,
/// minus 8 * sum(x) per block.
template <int M>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q4_0>::block& g,
                                                       const activation_row<quant::q4_0>* x, std::size_t b,
                                                       __m256 (&acc)[M]) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  // Quad by quad, so only one quad's nibbles and the M int16 sums are live.
  __m256i sums[M];
  for (int m = 0; m < M; ++m) sums[m] = _mm256_setzero_si256();
  const auto quad = [&](int j) HEDGE_TARGET_AVX2 {  // a lambda does not inherit the target
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * j));
    const __m256i lo = _mm256_and_si256(q, low4);                         // values 4j .. 4j+3
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);  // values 16+4j .. 16+4j+3
    for (int m = 0; m < M; ++m) {
      const std::int8_t* xq = x[m].blocks[b].qs;
      const __m256i pair = _mm256_add_epi16(madd_u8s8_i16(lo, broadcast_quad(xq + 4 * j)),
                                            madd_u8s8_i16(hi, broadcast_quad(xq + 16 + 4 * j)));
      sums[m] = _mm256_add_epi16(sums[m], pair);
    }
  };
  if constexpr (M == 1) {
    // GEMV: unrolled (1.09-1.30x with the weights in cache, same from DRAM).
    quad(0);
    quad(1);
    quad(2);
    quad(3);
  } else {
    // Not unrolled: g++ 12 would hoist every quad's products for M rows and spill them.
    HEDGE_UNROLL(1)
    for (int j = 0; j < 4; ++j) quad(j);
  }
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
  for (int m = 0; m < M; ++m) {
    const __m256i dot = _mm256_sub_epi32(sum_pairs_i16(sums[m]), _mm256_set1_epi32(x[m].offsets[b]));
    const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(x[m].scales + b));
    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[m]);
  }
}

/// Q8_0: |w| against x with the sign of w.
template <int M>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q8_0>::block& g,
                                                       const activation_row<quant::q8_0>* x, std::size_t b,
                                                       __m256 (&acc)[M]) noexcept {
  __m256i dots[M];
  for (int m = 0; m < M; ++m) dots[m] = _mm256_setzero_si256();
  HEDGE_UNROLL(1)
  for (int j = 0; j < 8; ++j) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * j));
    const __m256i magnitude = _mm256_sign_epi8(w, w);
    for (int m = 0; m < M; ++m) {
      const __m256i signed_x = _mm256_sign_epi8(broadcast_quad(x[m].blocks[b].qs + 4 * j), w);
      const __m256i dot = dot_u8s8_i32(magnitude, signed_x);
      dots[m] = _mm256_add_epi32(dots[m], dot);
    }
  }
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
  for (int m = 0; m < M; ++m) {
    const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(x[m].scales + b));
    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[m]), scale, acc[m]);
  }
}

/// Q5_0 / Q5_1: the 5-bit levels against x (see the file comment for the sums' bounds).
template <int M, class W>
  requires(std::is_same_v<W, quant::q5_0> || std::is_same_v<W, quant::q5_1>)
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void group_block(const typename interleaved<W>::block& g,
                                                       const activation_row<W>* x, std::size_t b,
                                                       __m256 (&acc)[M]) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i dots[M];
  for (int m = 0; m < M; ++m) dots[m] = _mm256_setzero_si256();
  HEDGE_UNROLL(1)
  for (int j = 0; j < 4; j += 2) {
    __m256i sums[M];
    for (int m = 0; m < M; ++m) sums[m] = _mm256_setzero_si256();
    for (int i = j; i < j + 2; ++i) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * i));
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), fifth_bits_32(g.qh + 8 * i));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), fifth_bits_32(g.qh + 8 * i + 4));
      for (int m = 0; m < M; ++m) {
        const std::int8_t* xq = x[m].blocks[b].qs;
        sums[m] = _mm256_add_epi16(sums[m], _mm256_add_epi16(madd_u8s8_i16(lo, broadcast_quad(xq + 4 * i)),
                                                             madd_u8s8_i16(hi, broadcast_quad(xq + 16 + 4 * i))));
      }
    }
    for (int m = 0; m < M; ++m) dots[m] = _mm256_add_epi32(dots[m], sum_pairs_i16(sums[m]));
  }
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
  for (int m = 0; m < M; ++m) {
    const __m256 dx = _mm256_broadcast_ss(x[m].scales + b);
    if constexpr (std::is_same_v<W, quant::q5_0>) {
      const __m256i dot = _mm256_sub_epi32(dots[m], _mm256_set1_epi32(2 * x[m].offsets[b]));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, dx), acc[m]);
    } else {
      const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.m)));
      const __m256 x_sum = _mm256_set1_ps(static_cast<float>(x[m].offsets[b] / 8));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[m]), _mm256_mul_ps(dw, dx), acc[m]);
      acc[m] = _mm256_fmadd_ps(x_sum, _mm256_mul_ps(mw, dx), acc[m]);
    }
  }
}

/// Q4_K: per 64-element group the sub-blocks' nibble sums, scaled by the rows' 6-bit
/// scales; the mins through the activation's sub-block sums.
template <int M>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q4_k>::block& g,
                                                       const activation_row<quant::q4_k>* x, std::size_t b,
                                                       __m256 (&acc)[M]) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i total[M];  // per row: sum over sub-blocks of scale * sum(n * x)
  for (int m = 0; m < M; ++m) total[m] = _mm256_setzero_si256();
  HEDGE_UNROLL(1)
  for (int h = 0; h < 4; ++h) {  // group h: sub-blocks 2h (low nibbles) and 2h + 1 (high)
    __m256i sum_lo[M], sum_hi[M];
    for (int m = 0; m < M; ++m) sum_lo[m] = sum_hi[m] = _mm256_setzero_si256();
    const std::uint8_t* qs = g.qs + 256 * h;
    HEDGE_UNROLL(2)
    for (int j = 0; j < 8; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
      const __m256i lo = _mm256_and_si256(q, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      for (int m = 0; m < M; ++m) {
        const std::int8_t* xq = x[m].blocks[b].qs + 64 * h + 4 * j;
        sum_lo[m] = _mm256_add_epi16(sum_lo[m], madd_u8s8_i16(lo, broadcast_quad(xq)));
        sum_hi[m] = _mm256_add_epi16(sum_hi[m], madd_u8s8_i16(hi, broadcast_quad(xq + 32)));
      }
    }
    // Scales of sub-blocks 2h and 2h + 1, bytes doubled so each row's scale
    // fills both int16 halves of its lane.
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scales + 16 * h));
    const __m256i s_lo = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s, s));
    const __m256i s_hi = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(s, s));
    for (int m = 0; m < M; ++m) {
      total[m] = _mm256_add_epi32(total[m], _mm256_add_epi32(_mm256_madd_epi16(sum_lo[m], s_lo),
                                                             _mm256_madd_epi16(sum_hi[m], s_hi)));
    }
  }
  __m256i mins[4];  // rows' (m_2p, m_2p+1) as int16 pairs
  for (int p = 0; p < 4; ++p) {
    mins[p] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.mins + 16 * p)));
  }
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
  const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.dmin)));
  for (int m = 0; m < M; ++m) {
    const quant::q8_k::block& xb = x[m].blocks[b];
    // The activation's 8 sub-block sums (int16, |s| <= 4064), pair p in int32 lane p.
    const __m256i sums = _mm256_broadcastsi128_si256(
        _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8))));
    const __m256i min_total = _mm256_add_epi32(
        _mm256_add_epi32(_mm256_madd_epi16(mins[0], _mm256_shuffle_epi32(sums, 0x00)),
                         _mm256_madd_epi16(mins[1], _mm256_shuffle_epi32(sums, 0x55))),
        _mm256_add_epi32(_mm256_madd_epi16(mins[2], _mm256_shuffle_epi32(sums, 0xAA)),
                         _mm256_madd_epi16(mins[3], _mm256_shuffle_epi32(sums, 0xFF))));
    const __m256 dx = _mm256_broadcast_ss(&xb.d);
    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total[m]), _mm256_mul_ps(d, dx), acc[m]);
    acc[m] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_total), _mm256_mul_ps(dmin, dx), acc[m]);
  }
}

/// The 6-bit levels of quad k, element set i (elements 128h + 32i + 4k .. +3) of the 8
/// rows, from that quad's A, B and H vectors (repack.hpp): the low nibble of A (i = 0, 2)
/// or B (i = 1, 3), shifted down for i >= 2, with H's bit pair 2i moved to bits 5:4.
template <int I>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i q6_levels(__m256i a, __m256i b, __m256i h) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i high2 = _mm256_set1_epi8(0x30);
  const __m256i ql = (I & 1) ? b : a;
  const __m256i low = I < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
  const __m256i high = I == 0   ? _mm256_slli_epi16(h, 4)
                       : I == 1 ? _mm256_slli_epi16(h, 2)
                       : I == 2 ? h
                                : _mm256_srli_epi16(h, 2);
  return _mm256_or_si256(low, _mm256_and_si256(high, high2));
}

/// Q6_K: levels q in [0, 63] against x (vpmaddubsw, two quads summed in int16: |sum| <=
/// 4 * 63 * 128 < 2^15), times the row's sub-block scale (vpmaddwd); the "- 32" of every
/// level is 32 * sum_j sc_j * (Q8_K's 16-element sum j), one vpmaddwd per scale pair.
template <int M>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q6_k>::block& g,
                                                       const activation_row<quant::q6_k>* x, std::size_t b,
                                                       __m256 (&acc)[M]) noexcept {
  using layout = interleaved<quant::q6_k>;
  __m256i total[M];  // per row: sum over sub-blocks of scale * sum(q * x)
  for (int m = 0; m < M; ++m) total[m] = _mm256_setzero_si256();
  // Row r's scale of sub-block 2p + i in both int16 halves of lane r, from the pair vector.
  // (vpshufb indexes bytes within each 128-bit half: lane r's int16 are bytes 4r', 4r' + 1
  // and 4r' + 2, 4r' + 3 with r' = r mod 4.)
  const __m256i pick_even = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,  //
                                             0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i pick_odd = _mm256_add_epi8(pick_even, _mm256_set1_epi8(2));
  const auto load = [&](std::size_t offset) HEDGE_TARGET_AVX2 {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + offset));
  };
  const auto set = [&]<int I>(std::size_t h, std::size_t k, __m256i (&sums)[M]) HEDGE_TARGET_AVX2 {
    const __m256i q0 = q6_levels<I>(load(layout::quad_offset(h, k, 0)), load(layout::quad_offset(h, k, 1)),
                                    load(layout::quad_offset(h, k, 2)));
    const __m256i q1 = q6_levels<I>(load(layout::quad_offset(h, k + 1, 0)), load(layout::quad_offset(h, k + 1, 1)),
                                    load(layout::quad_offset(h, k + 1, 2)));
    for (int m = 0; m < M; ++m) {
      const std::int8_t* xq = x[m].blocks[b].qs + 128 * h + 32 * I + 4 * k;
      sums[m] = _mm256_add_epi16(madd_u8s8_i16(q0, broadcast_quad(xq)), madd_u8s8_i16(q1, broadcast_quad(xq + 4)));
    }
  };
  const auto scale_add = [&](std::size_t h, int i, std::size_t k, const __m256i (&sums)[M]) HEDGE_TARGET_AVX2 {
    const std::size_t pair = 4 * h + static_cast<std::size_t>(i);  // sub-blocks 2 pair (k < 4), 2 pair + 1
    const __m256i pairs =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scales + 16 * pair)));
    const __m256i scale = _mm256_shuffle_epi8(pairs, k < 4 ? pick_even : pick_odd);
    for (int m = 0; m < M; ++m) total[m] = _mm256_add_epi32(total[m], _mm256_madd_epi16(sums[m], scale));
  };
  for (std::size_t h = 0; h < 2; ++h) {
    HEDGE_UNROLL(1)
    for (std::size_t k = 0; k < 8; k += 2) {
      __m256i sums[M];
      set.template operator()<0>(h, k, sums);
      scale_add(h, 0, k, sums);
      set.template operator()<1>(h, k, sums);
      scale_add(h, 1, k, sums);
      set.template operator()<2>(h, k, sums);
      scale_add(h, 2, k, sums);
      set.template operator()<3>(h, k, sums);
      scale_add(h, 3, k, sums);
    }
  }
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
  for (int m = 0; m < M; ++m) {
    const quant::q8_k::block& xb = x[m].blocks[b];
    // 32 * sum_j sc_j * bsum_j per row lane (|.| <= 2^27).
    __m256i offset = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
      std::int32_t sum_pair;
      std::memcpy(&sum_pair, xb.bsums + 2 * p, 4);
      const __m256i pairs = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.scales + 16 * p)));
      offset = _mm256_add_epi32(offset, _mm256_madd_epi16(pairs, _mm256_set1_epi32(sum_pair)));
    }
    const __m256i dot = _mm256_sub_epi32(total[m], _mm256_slli_epi32(offset, 5));
    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, _mm256_broadcast_ss(&xb.d)), acc[m]);
  }
}

/// G groups (group t is group_stride groups after group t - 1) x M activation rows:
/// the tile skeleton (accumulators, block loop, group addressing, prefetch, store) over
/// the per-format block body group_block. The weights are prefetched as `Prefetch` says
/// (weight_read.hpp): a GEMV's and a decode batch's as tuned (group_run), a prefill's into L1.
template <int M, int G, class W, weight_prefetch Prefetch = weight_prefetch::ahead_into_l1>
HEDGE_TARGET_AVX2 void group_tile(const typename interleaved<W>::block* group, std::size_t blocks,
                                  const activation_row<W>* x, float* y, std::size_t y_stride, std::size_t valid,
                                  std::size_t group_stride = 1) noexcept {
  __m256 acc[G][M];
  for (int t = 0; t < G; ++t) {
    for (int m = 0; m < M; ++m) acc[t][m] = _mm256_setzero_ps();
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    for (int t = 0; t < G; ++t) {  // G groups, G streams from DRAM
      const auto& g = group[static_cast<std::size_t>(t) * group_stride * blocks + b];
      if constexpr (Prefetch != weight_prefetch::none) prefetch_ahead<Prefetch == weight_prefetch::ahead_into_l2>(g);
      group_block<M>(g, x, b, acc[t]);
    }
  }
  store_tile<M, G>(acc, y, y_stride, valid, group_stride);
}

/// `rows` activation rows against one group: tiles of 4, then 2, then 1.
template <class W>
HEDGE_TARGET_AVX2 void group_rows(const typename interleaved<W>::block* group, std::size_t blocks,
                                  const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                                  std::size_t valid) noexcept {
  for (std::size_t m = 0; m < rows;) {
    const std::size_t left = rows - m;
    if (left >= 4) {
      group_tile<4, 1, W>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 4;
    } else if (left >= 2) {
      group_tile<2, 1, W>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 2;
    } else {
      group_tile<1, 1, W>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 1;
    }
  }
}

/// Groups per tile, at most, of the streamed GEMV and decode batches: 4 for Q4_0, Q8_0,
/// Q5_0 and Q5_1 up to 2 rows (four long DRAM streams, gemv_streams.hpp); 2 for Q4_K and
/// Q6_K, whose 4-group tile keeps 16 accumulators at one row and spilled on Zen 3 (0.83-0.91x
/// one group per tile, docs/perf-journal.md, matmul), so their 4 streams run as two pair
/// tiles one after the other, as every format's do from 3 rows on.
template <class W>
inline constexpr int gemv_tile_groups = std::is_same_v<W, quant::q4_k> || std::is_same_v<W, quant::q6_k> ? 2 : 4;

/// M activation rows (x[m] against y + m y_stride; M <= stream_rows) against `groups`
/// consecutive groups (`valid` rows in all), prefetched as `Prefetch` says: the full groups
/// as `streams` long streams (gemv_streams.hpp: gemv_streams or 2), then the rest in tiles
/// of 2 and 1 groups. A tile takes one group of each stream up to 2 rows where the format's
/// tiles take 4 groups; else (from 3 rows on, whose accumulators would fill the 16
/// registers, and for Q4_K and Q6_K) a tile takes one pair of streams, and the pairs of a
/// step run one after the other, so the streams still advance together.
inline constexpr int stream_rows = 4;
static_assert(stream_rows <= tuned_rows, "a decode batch's rows each tune their weight read");
template <int M, class W, weight_prefetch Prefetch>
  requires(M <= stream_rows)
HEDGE_TARGET_AVX2 void group_run(const typename interleaved<W>::block* group, std::size_t groups,
                                 std::size_t blocks, const activation_row<W>* x, float* y, std::size_t y_stride,
                                 std::size_t valid, std::size_t streams) noexcept {
  const stream_split split(groups, valid, streams == 2 ? 2 : gemv_streams);
  for (std::size_t i = 0; i < split.per_stream; ++i) {
    if constexpr (M <= 2 && static_cast<std::size_t>(gemv_tile_groups<W>) == gemv_streams) {
      if (split.streams == gemv_streams) {
        group_tile<M, gemv_streams, W, Prefetch>(group + i * blocks, blocks, x, y + i * interleave_rows, y_stride,
                                                 gemv_streams * interleave_rows, split.per_stream);
        continue;
      }
    }
    for (std::size_t pair = 0; pair < split.streams / 2; ++pair) {
      const std::size_t first = 2 * pair * split.per_stream + i;  // this pair's group in stream 2 pair
      group_tile<M, 2, W, Prefetch>(group + first * blocks, blocks, x, y + first * interleave_rows, y_stride,
                                    2 * interleave_rows, split.per_stream);
    }
  }
  std::size_t t = split.streamed();
  while (t < groups) {
    const std::size_t left = groups - t;
    const std::size_t first = t * interleave_rows;
    const auto* g = group + t * blocks;
    if (left >= 2) {
      group_tile<M, 2, W, Prefetch>(g, blocks, x, y + first, y_stride, valid - first);
      t += 2;
    } else {
      group_tile<M, 1, W, Prefetch>(g, blocks, x, y + first, y_stride, valid - first);
      t += 1;
    }
  }
}

/// group_run for a run-time row count (1 .. stream_rows; returns false, nothing done, for
/// more) under the weight read `read`.
template <class W>
HEDGE_TARGET_AVX2 bool group_run(const typename interleaved<W>::block* group, std::size_t groups, std::size_t blocks,
                                 const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                                 std::size_t valid, weight_read read) noexcept {
  return visit_read<stream_rows>(rows, read.prefetch, [&](auto m, auto prefetch) {
    group_run<m.value, W, prefetch.value>(group, groups, blocks, x, y, y_stride, valid, read.streams);
  });
}

}  // namespace avx2

/// The AVX2 tiles' read while untuned: 4 streams with L1 prefetches 2304 bytes ahead
/// (prefetch_ahead), as they read before the tuner (the hardware prefetchers alone did
/// not run far enough ahead of them on Zen 3 and Zen 5: docs/perf-journal.md, matmul).
inline constexpr weight_read avx2_untuned_read{gemv_streams, weight_prefetch::ahead_into_l1};

/// The arch tags whose interleaved GEMV is the AVX2 tile (avx2, avx512bw, and user tags
/// derived from them), not the AVX-512 VNNI one.
template <class A>
concept runs_avx2_gemv = std::is_base_of_v<arch::avx2, A> && !std::is_base_of_v<arch::avx512vnni, A>;

/// The AVX2 GEMV and decode batches of up to avx2::stream_rows rows take a weight read
/// policy, which gemv.hpp and gemm.hpp tune (weight_read.hpp): on one Zen 5 guest 2 streams
/// read Q8_0 at Qwen3's shapes at 0.82-0.93 of the bound where 4 read 0.55-0.70, and Q5_0
/// at 0.67-0.80 where 4 read 0.36-0.51 (docs/perf-journal.md, "The AVX2 tile's read tuned
/// too"); Q4_K and Q6_K, read as one stream per group before, 0.87-0.96 at 1 thread where
/// they read 0.73-0.81 ("The AVX2 K-quant tiles streamed").
template <class A, class W>
  requires runs_avx2_gemv<A>
inline constexpr std::size_t tuned_read_rows<A, W> = Interleavable<W> ? avx2::stream_rows : 0;

/// GEMV over a run of consecutive groups (rows 8 * first ...), AVX2, read as `read` says.
template <Interleavable W>
void gemv_groups(arch::avx2, W, const typename interleaved<W>::block* group, std::size_t groups,
                 std::size_t blocks, const activation_row<W>& x, float* y, std::size_t valid,
                 weight_read read = avx2_untuned_read) noexcept {
  avx2::group_run<W>(group, groups, blocks, &x, 1, y, 0, valid, read);
}

/// GEMM over a run of `groups` consecutive groups (`valid` rows in all) and `rows`
/// activation rows, AVX2: up to stream_rows rows (a decode batch) the full groups as the
/// GEMV streams them, read as `read` says; more rows group by group (group_rows), whose
/// tiles are compute-bound on one core. Every row's sums are the GEMV's, in the same order,
/// whichever tile runs it.
template <Interleavable W>
void gemm_groups(arch::avx2, W, const typename interleaved<W>::block* group, std::size_t groups,
                 std::size_t blocks, const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                 std::size_t valid, weight_read read = avx2_untuned_read) noexcept {
  if (avx2::group_run<W>(group, groups, blocks, x, rows, y, y_stride, valid, read)) return;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t first = g * interleave_rows;
    const std::size_t left = valid - first < interleave_rows ? valid - first : interleave_rows;
    avx2::group_rows<W>(group + g * blocks, blocks, x, rows, y + first, y_stride, left);
  }
}

/// AVX2 overload, chosen for arch::avx2 and every tag derived from it.
template <Interleavable W>
void gemm_group(arch::avx2, W, const typename interleaved<W>::block* group, std::size_t blocks,
                const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                std::size_t valid) noexcept {
  avx2::group_rows<W>(group, blocks, x, rows, y, y_stride, valid);
}

}  // namespace hedge::kernels::matmul

#endif
