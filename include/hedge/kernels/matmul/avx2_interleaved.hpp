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
//
// A row's operations do not depend on M, so GEMM row m equals GEMV of row m.
#pragma once

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hedge/core/arch.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::kernels::matmul {

namespace avx2 {

/// 4 int8 values broadcast to the 8 int32 lanes.
HEDGE_AVX2_TARGET inline __m256i broadcast_quad(const std::int8_t* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/// Prefetches the block `prefetch_bytes` ahead in the group's stream (groups
/// are contiguous, so past a group's end this is the next group). Measured on
/// Zen 3 with weights streamed from DRAM: GEMV 11-12 -> 14-16 GB/s; the
/// hardware prefetchers alone do not run far enough ahead of these kernels.
/// The address is formed as an integer: past the matrix end it may point
/// outside it, which a prefetch never faults on.
inline constexpr std::size_t prefetch_bytes = 2304;
template <class Block>
HEDGE_AVX2_TARGET inline void prefetch_ahead(const Block& block) noexcept {
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(&block) + prefetch_bytes;
  for (std::size_t offset = 0; offset < sizeof(Block) + 48; offset += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(address + offset), _MM_HINT_T0);
  }
}

/// Stores the 8 lanes, or the first `valid` of them.
HEDGE_AVX2_TARGET inline void store_rows(float* y, __m256 v, std::size_t valid) noexcept {
  if (valid == interleave_rows) {
    _mm256_storeu_ps(y, v);
  } else {
    alignas(32) float lanes[interleave_rows];
    _mm256_store_ps(lanes, v);
    for (std::size_t r = 0; r < valid; ++r) y[r] = lanes[r];
  }
}

template <int M>
HEDGE_AVX2_TARGET void group_tile(const interleaved<quant::q4_0>::block* group, std::size_t blocks,
                                  const activation_row<quant::q4_0>* x, float* y, std::size_t y_stride,
                                  std::size_t valid) noexcept {
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (std::size_t b = 0; b < blocks; ++b) {
    const auto& g = group[b];
    prefetch_ahead(g);
    // Quad by quad, so only one quad's nibbles and the M int16 sums are live.
    // Not unrolled: g++ 12 would hoist every quad's products and spill them.
    __m256i sums[M];
    for (int m = 0; m < M; ++m) sums[m] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int j = 0; j < 4; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * j));
      const __m256i lo = _mm256_and_si256(q, low4);                         // values 4j .. 4j+3
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);  // values 16+4j .. 16+4j+3
      for (int m = 0; m < M; ++m) {
        const std::int8_t* xq = x[m].blocks[b].qs;
        const __m256i pair = _mm256_add_epi16(madd_u8s8_i16(lo, broadcast_quad(xq + 4 * j)),
                                              madd_u8s8_i16(hi, broadcast_quad(xq + 16 + 4 * j)));
        sums[m] = _mm256_add_epi16(sums[m], pair);
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
    for (int m = 0; m < M; ++m) {
      const __m256i dot = _mm256_sub_epi32(sum_pairs_i16(sums[m]), _mm256_set1_epi32(x[m].offsets[b]));
      const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ss(x[m].scales + b));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[m]);
    }
  }
  for (int m = 0; m < M; ++m) store_rows(y + static_cast<std::size_t>(m) * y_stride, acc[m], valid);
}

template <int M>
HEDGE_AVX2_TARGET void group_tile(const interleaved<quant::q8_0>::block* group, std::size_t blocks,
                                  const activation_row<quant::q8_0>* x, float* y, std::size_t y_stride,
                                  std::size_t valid) noexcept {
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < blocks; ++b) {
    const auto& g = group[b];
    prefetch_ahead(g);
    __m256i dots[M];
    for (int m = 0; m < M; ++m) dots[m] = _mm256_setzero_si256();
#pragma GCC unroll 1
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
  for (int m = 0; m < M; ++m) store_rows(y + static_cast<std::size_t>(m) * y_stride, acc[m], valid);
}

/// `rows` activation rows against one group: tiles of 4, then 2, then 1.
template <class W>
HEDGE_AVX2_TARGET void group_rows(const typename interleaved<W>::block* group, std::size_t blocks,
                                  const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                                  std::size_t valid) noexcept {
  for (std::size_t m = 0; m < rows;) {
    const std::size_t left = rows - m;
    if (left >= 4) {
      group_tile<4>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 4;
    } else if (left >= 2) {
      group_tile<2>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 2;
    } else {
      group_tile<1>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 1;
    }
  }
}

}  // namespace avx2

/// AVX2 overload, chosen for arch::avx2 and every tag derived from it.
template <Interleavable W>
void gemm_group(arch::avx2, W, const typename interleaved<W>::block* group, std::size_t blocks,
                const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                std::size_t valid) noexcept {
  avx2::group_rows<W>(group, blocks, x, rows, y, y_stride, valid);
}

}  // namespace hedge::kernels::matmul

#endif
