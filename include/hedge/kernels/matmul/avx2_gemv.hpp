// hedge/kernels/matmul/avx2_gemv.hpp: AVX2 GEMV row kernels, y[r] = <w.row(r), x>.
//
// Each kernel computes a tile of R rows against one activation row (R = 4, then
// R = 1 for the last rows): the R independent accumulators hide the FMA latency,
// and the activation block loaded once serves R weight rows. A row's arithmetic
// is the same whatever R is, so results do not depend on how rows are grouped
// (and hence not on the thread count). Per block:
//
//   Q8_0 . Q8_0  vpsignb/vpmaddubsw/vpmaddwd -> 8 int32 -> cvt -> fma(d_w * d_x)
//   Q4_0 . Q8_0  nibbles n in [0, 15] are unsigned, so vpmaddubsw(n, x) needs no
//                sign trick; the -8 offset is subtracted as vpmaddubsw(8, x),
//                computed once per activation block for all R rows
//   Q5_0 . Q8_0  as Q4_0, the fifth bits or-ed in as 16 (fifth_bits_32), the
//                offset 16 * (x_2i + x_2i+1)
//   Q5_1 . Q8_0  levels n in [0, 31] unsigned: vpmaddubsw(n, x), fma with d_w * d_x;
//                the minimum as fma(sum of x in 8 lanes, m_w * d_x), the lane sums
//                computed once per activation block for all R rows
//   Q4_K . Q8_K  per 32-element sub-block vpmaddubsw(n, x), then vpmaddwd by the
//                6-bit scale (scale and pair-sum in one instruction), int32 over
//                the super-block; mins via the activation's 16-element sums
//   Q5_K . Q8_K  the Q4_K kernel with each sub-block's fifth bit or-ed into its
//                nibbles as 16 (n <= 31: |vpmaddubsw pair| <= 7874, x 63 in vpmaddwd)
//   Q6_K . Q8_K  the 6-bit levels q in [0, 63] (4 low bits | 2 high bits) are
//                unsigned, so vpmaddubsw(q, x); vpmaddwd by the int8 scales of
//                the two 16-element sub-blocks in each 32-byte vector; the "- 32"
//                of every level is 32 * sum_s sc_s * (Q8_K's 16-element sum s),
//                one vpmaddwd per super-block
//   F16/BF16/F32 . F32  convert 8 weights to float, fma
#pragma once

#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kernels/matmul/scalar.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q5_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::kernels::matmul {

namespace avx2 {

/// Prefetches `lines` cache lines of block b of the row 4 rows below row r:
/// the block the next tile will read at this step. The hardware prefetchers
/// alone do not run far enough ahead of these kernels on weights streamed from
/// DRAM (docs/perf-journal.md, matmul). The address is formed as
/// an integer: past the last row it may point outside the matrix, which a
/// prefetch never faults on.
template <int lines = 1, class Block>
HEDGE_TARGET_AVX2 inline void prefetch_next_tile(const Block* w, std::size_t stride, int r, std::size_t b) noexcept {
  const std::uintptr_t address =
      reinterpret_cast<std::uintptr_t>(w) + ((static_cast<std::size_t>(r) + 4) * stride + b) * sizeof(Block);
  for (int line = 0; line < lines; ++line) {
    _mm_prefetch(reinterpret_cast<const char*>(address + 64u * static_cast<unsigned>(line)), _MM_HINT_T0);
  }
}

/// The R (<= 4) products d_w[r] * d_x of block b (or of another fp16 field of the
/// block: Q5_1's m), one vcvtph2ps for all rows, and each broadcast to 8 lanes. They go
/// through memory because a broadcast from memory is a load, not a shuffle competing
/// with the dot products for the vector ALUs. The same float multiply whatever R is.
template <int R, class Block>
HEDGE_TARGET_AVX2 inline void row_scales(const Block* w, std::size_t stride, std::size_t b, float dx,
                                         __m256 (&scale)[R], hedge::f16 Block::*field = &Block::d) noexcept {
  static_assert(R <= 4);
  std::uint64_t bits = 0;
  for (int r = 0; r < R; ++r) bits |= std::uint64_t{(w[static_cast<std::size_t>(r) * stride + b].*field).bits} << (16 * r);
  alignas(16) float products[4];
  _mm_store_ps(products, _mm_mul_ps(_mm_cvtph_ps(_mm_set_epi64x(0, static_cast<long long>(bits))), _mm_set1_ps(dx)));
  for (int r = 0; r < R; ++r) scale[r] = _mm256_broadcast_ss(products + r);
}

/// The per-format body of the Q8_0-activation gemv_tile: `prepare` computes once
/// per activation block what serves all R rows, `dot` the 8 int32 lane sums of one
/// weight block against it. Q5_1 (`has_min`) adds m_w * d_x * sum(x) per block.
template <class Block>
struct q8_body;

/// Q8_0: vpsignb / vpmaddubsw / vpmaddwd.
template <>
struct q8_body<quant::q8_0::block> {
  static constexpr bool has_min = false;
  struct prepared {};
  HEDGE_TARGET_AVX2 static prepared prepare(__m256i) noexcept { return {}; }
  HEDGE_TARGET_AVX2 static __m256i dot(const quant::q8_0::block& w, __m256i xq, prepared) noexcept {
    return dot_s8s8_i32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs)), xq);
  }
};

/// Q4_0 / Q5_0: the unsigned levels against x, minus the offset (8 or 16) * (x_2i + x_2i+1).
template <class Block, int level_offset>
struct offset_levels_body {
  static constexpr bool has_min = false;
  struct prepared {
    __m256i offset;
  };
  HEDGE_TARGET_AVX2 static prepared prepare(__m256i xq) noexcept {
    return {madd_u8s8_i16(_mm256_set1_epi8(level_offset), xq)};
  }
  HEDGE_TARGET_AVX2 static __m256i dot(const Block& w, __m256i xq, const prepared& p) noexcept {
    return sum_pairs_i16(_mm256_sub_epi16(madd_u8s8_i16(levels(w), xq), p.offset));
  }
  HEDGE_TARGET_AVX2 static __m256i levels(const Block& w) noexcept {
    if constexpr (std::is_same_v<Block, quant::q4_0::block>) {
      return unpack_nibbles_16(w.qs);
    } else {
      return q5_levels_32(w.qs, w.qh);
    }
  }
};
template <>
struct q8_body<quant::q4_0::block> : offset_levels_body<quant::q4_0::block, 8> {};
template <>
struct q8_body<quant::q5_0::block> : offset_levels_body<quant::q5_0::block, 16> {};

/// Q5_1: levels in [0, 31] against x; the minimum through the sum of x in 8 lanes.
template <>
struct q8_body<quant::q5_1::block> {
  static constexpr bool has_min = true;
  struct prepared {
    __m256 x_sums;
  };
  HEDGE_TARGET_AVX2 static prepared prepare(__m256i xq) noexcept {
    return {_mm256_cvtepi32_ps(dot_u8s8_i32(_mm256_set1_epi8(1), xq))};
  }
  HEDGE_TARGET_AVX2 static __m256i dot(const quant::q5_1::block& w, __m256i xq, const prepared&) noexcept {
    return dot_u8s8_i32(q5_levels_32(w.qs, w.qh), xq);
  }
};

/// Q8_0 / Q4_0 / Q5_0 / Q5_1 weights . Q8_0 activation, R rows starting at w (row
/// stride in blocks): the block loop, row scales, prefetch and accumulation shared,
/// the block's integer dot product from q8_body.
template <int R, class Block>
  requires(std::is_same_v<Block, quant::q8_0::block> || std::is_same_v<Block, quant::q4_0::block> ||
           std::is_same_v<Block, quant::q5_0::block> || std::is_same_v<Block, quant::q5_1::block>)
HEDGE_TARGET_AVX2 void gemv_tile(const Block* w, std::size_t stride, const quant::q8_0::block* x, std::size_t blocks,
                                 float* y) noexcept {
  using body = q8_body<Block>;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const auto prepared = body::prepare(xq);
    const float dx = to_float(x[b].d);
    __m256 scale[R];
    row_scales<R>(w, stride, b, dx, scale);
    [[maybe_unused]] __m256 min_scale[R];
    if constexpr (body::has_min) row_scales<R>(w, stride, b, dx, min_scale, &Block::m);
    for (int r = 0; r < R; ++r) {
      prefetch_next_tile(w, stride, r, b);
      const Block& wb = w[static_cast<std::size_t>(r) * stride + b];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(body::dot(wb, xq, prepared)), scale[r], acc[r]);
      if constexpr (body::has_min) acc[r] = _mm256_fmadd_ps(prepared.x_sums, min_scale[r], acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = sum_lanes(acc[r]);
}

/// Q4_K or Q5_K weights . Q8_K activation.
template <int R, class Block>
  requires(std::is_same_v<Block, quant::q4_k::block> || std::is_same_v<Block, quant::q5_k::block>)
HEDGE_TARGET_AVX2 void gemv_tile(const Block* w, std::size_t stride, const quant::q8_k::block* x, std::size_t blocks,
                                 float* y) noexcept {
  constexpr bool fifth_bit = std::is_same_v<Block, quant::q5_k::block>;
  __m256 acc[R];
  __m128 acc_min[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    acc_min[r] = _mm_setzero_ps();
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const quant::q8_k::block& xb = x[b];
    // Sums of the activation over each 32-element sub-block (int16, |s| <= 4064).
    const __m128i sums16 = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8)));
    for (int r = 0; r < R; ++r) {
      const Block& wb = w[static_cast<std::size_t>(r) * stride + b];
      prefetch_next_tile<fifth_bit ? 4 : 3>(w, stride, r, b);  // 144 (176) bytes span up to 3 (4) lines
      const auto sm = quant::q4_k::unpack_scales_mins(wb.scales);
      const __m128i scales16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.scales)));
      const __m128i mins16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.mins)));
      const __m256i scales = _mm256_broadcastsi128_si256(scales16);
      __m256i total = _mm256_setzero_si256();
      __m256i high = k_fifth_bits(wb);
      for (int g = 0; g < 4; ++g) {
        const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * g));
        const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * g + 32));
        __m256i n_lo, n_hi;
        k_group_levels(wb, g, high, n_lo, n_hi);
        const __m256i p_lo = madd_u8s8_i16(n_lo, x_lo);
        const __m256i p_hi = madd_u8s8_i16(n_hi, x_hi);
        // Scale 2g (resp. 2g + 1) in every lane, then scale and pair-sum.
        const __m256i s_lo = broadcast_scale(scales, 2 * g);
        const __m256i s_hi = broadcast_scale(scales, 2 * g + 1);
        total = _mm256_add_epi32(total, _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo), _mm256_madd_epi16(p_hi, s_hi)));
      }
      const float d = to_float(wb.d) * xb.d;
      const float dmin = to_float(wb.dmin) * xb.d;
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(d), acc[r]);
      acc_min[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins16, sums16)), _mm_set1_ps(dmin), acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = sum_lanes(acc[r]) - sum_lanes(acc_min[r]);
}

/// Q6_K weights . Q8_K activation.
template <int R>
HEDGE_TARGET_AVX2 void gemv_tile(const quant::q6_k::block* w, std::size_t stride, const quant::q8_k::block* x,
                                 std::size_t blocks, float* y) noexcept {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i high2 = _mm256_set1_epi8(0x30);
  for (std::size_t b = 0; b < blocks; ++b) {
    const quant::q8_k::block& xb = x[b];
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
    __m256 scale[R];
    row_scales<R>(w, stride, b, xb.d, scale);
    for (int r = 0; r < R; ++r) {
      const quant::q6_k::block& wb = w[static_cast<std::size_t>(r) * stride + b];
      prefetch_next_tile<4>(w, stride, r, b);  // 210 bytes: 4 lines, then the next block's first
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales));
      // 32 * sum_s sc_s * sum(qx of sub-block s), in 8 int32 lanes (|lane| <= 2^24).
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8), bsums), 5);
      __m256i total = _mm256_setzero_si256();
      for (int half = 0; half < 2; ++half) {
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh + 32 * half));
        // Element 128 half + 32 i + l: its 2 high bits moved to bits 5:4 of the
        // byte (16-bit shifts; the bits they carry across bytes are masked off).
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high2)),
            _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, high2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), high2))};
        for (int i = 0; i < 4; ++i) {
          const int pair = 4 * half + i;  // sub-blocks 2 pair and 2 pair + 1
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 32 * pair));
          // int16 scale 2 pair in the low 128 bits, 2 pair + 1 in the high 128 bits.
          const __m128i pick = _mm_set_epi64x(static_cast<long long>(0x0101010101010101ull * (2 * pair + 1)),
                                              static_cast<long long>(0x0101010101010101ull * (2 * pair)));
          const __m256i scales = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, pick));
          // |q x + q x| <= 2 * 63 * 128 fits int16; scaled pairs <= 2^22 per lane.
          total = _mm256_add_epi32(total, _mm256_madd_epi16(madd_u8s8_i16(q[i], xq), scales));
        }
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(total, offset)), scale[r], acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = sum_lanes(acc[r]);
}

/// F32 / F16 / BF16 weights . F32 activation; `elements` need not be a multiple of 8.
template <int R, class Element>
HEDGE_TARGET_AVX2 void gemv_tile(const Element* w, std::size_t stride, const float* x, std::size_t elements,
                                 float* y) noexcept {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  std::size_t k = 0;
  for (; k + 8 <= elements; k += 8) {
    const __m256 xv = _mm256_loadu_ps(x + k);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(load8(w + static_cast<std::size_t>(r) * stride + k), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float sum = sum_lanes(acc[r]);
    for (std::size_t t = k; t < elements; ++t) sum += matmul::to_float(w[static_cast<std::size_t>(r) * stride + t]) * x[t];
    y[r] = sum;
  }
}

/// All rows of w: tiles of 4, then single rows.
template <class WeightBlock, class Activation>
HEDGE_TARGET_AVX2 void gemv_rows(matrix_view<const WeightBlock> w, const Activation* x, float* y) noexcept {
  // One loop choosing the tile (not a 4-row loop and a remainder loop): with
  // the row count known after inlining, g++ 12 warns about the remainder loop.
  for (std::size_t r = 0; r < w.rows();) {
    if (w.rows() - r >= 4) {
      gemv_tile<4>(w.data() + r * w.stride(), w.stride(), x, w.cols(), y + r);
      r += 4;
    } else {
      gemv_tile<1>(w.data() + r * w.stride(), w.stride(), x, w.cols(), y + r);
      r += 1;
    }
  }
}

}  // namespace avx2

/// AVX2 overloads: chosen for arch::avx2 and every tag derived from it.
template <class W>
  requires(std::is_same_v<W, quant::q8_0> || std::is_same_v<W, quant::q4_0> || std::is_same_v<W, quant::q5_0> ||
           std::is_same_v<W, quant::q5_1> || std::is_same_v<W, quant::q4_k> || std::is_same_v<W, quant::q5_k> ||
           std::is_same_v<W, quant::q6_k> || std::is_same_v<W, quant::f32> || std::is_same_v<W, quant::f16> ||
           std::is_same_v<W, quant::bf16>)
void gemv_rows(arch::avx2, W, matrix_view<const typename W::block> w, const typename W::activation::block* x,
               float* y) noexcept {
  avx2::gemv_rows(w, x, y);
}

}  // namespace hedge::kernels::matmul

#endif
