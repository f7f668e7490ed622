// hedge/kernels/matmul/avx2_gemm.hpp: AVX2 GEMM microkernels for the GGUF
// layout: Q4_K and Q5_K (the Q4_K tile with the fifth bits or-ed in, as the GEMV
// tile does), and the float formats F32/F16/BF16 (Q4_0/Q8_0 prefill uses the
// interleaved layout instead).
//
// Tile: 1 weight row x M (<= 4) activation rows. Per super-block the 6-bit
// scales/mins are unpacked and each 32-byte group of nibbles is split and its
// two scales broadcast once, then reused by the M activation rows, which is
// what the GEMV kernel repeats for every activation row. The loop order keeps
// the 4 activation rows (4 x 4.7 KiB at K = 4096) in L1 while the weight rows
// of the slice stream through. Each (weight row, activation row) pair does the
// same arithmetic as the GEMV kernel, in the same order, so GEMM row m equals
// GEMV of row m bit for bit.
#pragma once

#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86

#include <cstddef>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kernels/matmul/scalar.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_k.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::kernels::matmul {

namespace avx2 {

template <int M, class W>
HEDGE_TARGET_AVX2 void q4_k_gemm_tile(const typename W::block* w, std::size_t blocks, const activation_row<W>* x,
                                      float* y, std::size_t y_stride) noexcept {
  __m256 acc[M];
  __m128 acc_min[M];
  for (int m = 0; m < M; ++m) {
    acc[m] = _mm256_setzero_ps();
    acc_min[m] = _mm_setzero_ps();
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const typename W::block& wb = w[b];
    const auto sm = quant::q4_k::unpack_scales_mins(wb.scales);
    const __m256i scales = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.scales))));
    __m256i total[M];
    for (int m = 0; m < M; ++m) total[m] = _mm256_setzero_si256();
    __m256i high = k_fifth_bits(wb);
    for (int g = 0; g < 4; ++g) {
      __m256i n_lo, n_hi;
      k_group_levels(wb, g, high, n_lo, n_hi);
      const __m256i s_lo = broadcast_scale(scales, 2 * g);
      const __m256i s_hi = broadcast_scale(scales, 2 * g + 1);
      for (int m = 0; m < M; ++m) {
        const std::int8_t* xq = x[m].blocks[b].qs + 64 * g;
        const __m256i p_lo = madd_u8s8_i16(n_lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
        const __m256i p_hi = madd_u8s8_i16(n_hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)));
        total[m] = _mm256_add_epi32(total[m], _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo), _mm256_madd_epi16(p_hi, s_hi)));
      }
    }
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm.mins)));
    const float dw = to_float(wb.d), dmin_w = to_float(wb.dmin);
    for (int m = 0; m < M; ++m) {
      const quant::q8_k::block& xb = x[m].blocks[b];
      const __m128i sums16 = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8)));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total[m]), _mm256_set1_ps(dw * xb.d), acc[m]);
      acc_min[m] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins16, sums16)), _mm_set1_ps(dmin_w * xb.d), acc_min[m]);
    }
  }
  for (int m = 0; m < M; ++m) y[static_cast<std::size_t>(m) * y_stride] = sum_lanes(acc[m]) - sum_lanes(acc_min[m]);
}

/// Float formats: R weight rows x M activation rows, R * M accumulators (8 at
/// 4 x 2, with the 4 converted weight vectors and one activation vector: 13
/// of the 16 ymm registers). Each weight vector is converted once for M
/// activation rows, where the GEMV row kernel converts it for every row (the
/// conversion, not the FMA, bounds F16/BF16 GEMV from cache). Each (row, m)
/// pair runs the GEMV tile's arithmetic in its order (one 8-lane FMA chain,
/// sum_lanes, then the scalar tail), so GEMM row m equals GEMV of row m.
template <int R, int M, class Element>
HEDGE_TARGET_AVX2 void float_gemm_tile(const Element* w, std::size_t stride, const float* const* x,
                                       std::size_t elements, float* y, std::size_t y_stride) noexcept {
  __m256 acc[R][M];
  for (int r = 0; r < R; ++r) {
    for (int m = 0; m < M; ++m) acc[r][m] = _mm256_setzero_ps();
  }
  std::size_t k = 0;
  for (; k + 8 <= elements; k += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load8(w + static_cast<std::size_t>(r) * stride + k);
    for (int m = 0; m < M; ++m) {
      const __m256 xv = _mm256_loadu_ps(x[m] + k);
      for (int r = 0; r < R; ++r) acc[r][m] = _mm256_fmadd_ps(wv[r], xv, acc[r][m]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const Element* row = w + static_cast<std::size_t>(r) * stride;
    for (int m = 0; m < M; ++m) {
      float sum = sum_lanes(acc[r][m]);
      for (std::size_t t = k; t < elements; ++t) sum += matmul::to_float(row[t]) * x[m][t];
      y[static_cast<std::size_t>(m) * y_stride + static_cast<std::size_t>(r)] = sum;
    }
  }
}

}  // namespace avx2

/// Y[m][r] for every weight row r of `w` and activation row m < rows, float
/// formats: tiles of 2 activation rows (then 1) x 4 weight rows (then 1).
/// Chosen for arch::avx2 and every tag derived from it.
template <class W>
  requires(std::is_same_v<W, quant::f32> || std::is_same_v<W, quant::f16> || std::is_same_v<W, quant::bf16>)
HEDGE_TARGET_AVX2 void gemm_rows(arch::avx2, W, matrix_view<const typename W::block> w,
                                 const activation_row<W>* x, std::size_t rows, float* y,
                                 std::size_t y_stride) noexcept {
  for (std::size_t m = 0; m < rows;) {
    const std::size_t tile_m = rows - m >= 2 ? 2 : 1;
    const float* xs[2] = {x[m].blocks, x[m + tile_m - 1].blocks};
    for (std::size_t r = 0; r < w.rows();) {
      const auto* wr = w.data() + r * w.stride();
      float* out = y + m * y_stride + r;
      const bool four = w.rows() - r >= 4;
      if (tile_m == 2 && four) {
        avx2::float_gemm_tile<4, 2>(wr, w.stride(), xs, w.cols(), out, y_stride);
      } else if (tile_m == 2) {
        avx2::float_gemm_tile<1, 2>(wr, w.stride(), xs, w.cols(), out, y_stride);
      } else if (four) {
        avx2::float_gemm_tile<4, 1>(wr, w.stride(), xs, w.cols(), out, y_stride);
      } else {
        avx2::float_gemm_tile<1, 1>(wr, w.stride(), xs, w.cols(), out, y_stride);
      }
      r += four ? 4 : 1;
    }
    m += tile_m;
  }
}

/// Y[m][r] for every weight row r of `w` and activation row m < rows.
/// Chosen for arch::avx2 and every tag derived from it.
template <class W>
  requires(std::is_same_v<W, quant::q4_k> || std::is_same_v<W, quant::q5_k>)
HEDGE_TARGET_AVX2 void gemm_rows(arch::avx2, W, matrix_view<const typename W::block> w, const activation_row<W>* x,
                                 std::size_t rows, float* y, std::size_t y_stride) noexcept {
  for (std::size_t m = 0; m < rows;) {
    const std::size_t tile = rows - m >= 4 ? 4 : 1;
    for (std::size_t r = 0; r < w.rows(); ++r) {
      float* out = y + m * y_stride + r;
      if (tile == 4) {
        avx2::q4_k_gemm_tile<4, W>(w.row(r).data(), w.cols(), x + m, out, y_stride);
      } else {
        avx2::q4_k_gemm_tile<1, W>(w.row(r).data(), w.cols(), x + m, out, y_stride);
      }
    }
    m += tile;
  }
}

}  // namespace hedge::kernels::matmul

#endif
