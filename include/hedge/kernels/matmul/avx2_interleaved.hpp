// hedge/kernels/matmul/avx2_interleaved.hpp: AVX2 kernels for the 8-row
// interleaved layout (repack.hpp): the 8 float lanes are the 8 weight rows of a
// group, so a block's scales are one 16-byte load and one vcvtph2ps, and no
// horizontal sums are needed until the tile is stored.
//
// Microkernel: a group (8 weight rows) x M activation rows (M <= 4). Per block,
// the weight quads are loaded and unpacked once and reused for the M rows;
// each activation row broadcasts 4 of its int8 values (vpbroadcastd) against
// the matching quad of all 8 rows:
//
//   Q4_0: vpmaddubsw(nibbles, x) for the 8 quads, summed in int16 (8 * 2 * 15 * 127
//         = 30480 < 32767), one vpmaddwd, minus 8 * sum(x) (the block sum
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
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
    __m256i n[8];  // n[2j]: values 4j..4j+3 of each row; n[2j+1]: values 16+4j..16+4j+3
    for (int j = 0; j < 4; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * j));
      n[2 * j] = _mm256_and_si256(q, low4);
      n[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    }
    for (int m = 0; m < M; ++m) {
      const std::int8_t* xq = x[m].blocks[b].qs;
      __m256i s = madd_u8s8_i16(n[0], broadcast_quad(xq));
      s = _mm256_add_epi16(s, madd_u8s8_i16(n[1], broadcast_quad(xq + 16)));
      for (int j = 1; j < 4; ++j) {
        s = _mm256_add_epi16(s, madd_u8s8_i16(n[2 * j], broadcast_quad(xq + 4 * j)));
        s = _mm256_add_epi16(s, madd_u8s8_i16(n[2 * j + 1], broadcast_quad(xq + 16 + 4 * j)));
      }
      const __m256i dot = _mm256_sub_epi32(sum_pairs_i16(s), _mm256_set1_epi32(8 * x[m].sums[b]));
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(to_float(x[m].blocks[b].d)));
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
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d)));
    __m256i w[8], magnitude[8];
    for (int j = 0; j < 8; ++j) {
      w[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs + 32 * j));
      magnitude[j] = _mm256_sign_epi8(w[j], w[j]);
    }
    for (int m = 0; m < M; ++m) {
      const std::int8_t* xq = x[m].blocks[b].qs;
      __m256i dot = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const __m256i signed_x = _mm256_sign_epi8(broadcast_quad(xq + 4 * j), w[j]);
        dot = _mm256_add_epi32(dot, dot_u8s8_i32(magnitude[j], signed_x));
      }
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(to_float(x[m].blocks[b].d)));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[m]);
    }
  }
  for (int m = 0; m < M; ++m) store_rows(y + static_cast<std::size_t>(m) * y_stride, acc[m], valid);
}

/// `rows` activation rows against one group: tiles of 4, then 2, then 1.
template <class W>
HEDGE_AVX2_TARGET void group_rows(const typename interleaved<W>::block* group, std::size_t blocks,
                                  const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                                  std::size_t valid) noexcept {
  std::size_t m = 0;
  for (; m + 4 <= rows; m += 4) group_tile<4>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
  for (; m + 2 <= rows; m += 2) group_tile<2>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
  for (; m < rows; ++m) group_tile<1>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
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
