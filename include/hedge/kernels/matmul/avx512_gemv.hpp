// hedge/kernels/matmul/avx512_gemv.hpp: AVX-512 VNNI GEMV row kernels for the GGUF layout,
// y[r] = <w.row(r), x>, for the formats with no interleaved layout that decode streams:
// Q5_0, which llama-quantize's Q4_K_M gives every matrix whose rows are not whole 256-blocks
// (Gemma-3-1B's 1152-wide Q, K, V, gate and up: most of its layers' bytes).
//
// The AVX2 kernel's tile (matmul/avx2_gemv.hpp: R = 4 rows, then 1; the same row scales,
// prefetch and accumulation), with two steps of the block body replaced:
//   - the fifth bits: qh's 32 bits are a byte mask (kmovd), and a masked add puts 16 into
//     the bytes whose bit is set (AVX2 spreads the word with vpshufb, vpand, vpcmpeqb);
//   - the products: vpdpbusd(levels, x) sums four consecutive u8 x s8 products into each
//     int32 lane, minus vpdpbusd(16, x) once per activation block (AVX2: vpmaddubsw of
//     both, vpsubw, vpmaddwd).
// Each int32 lane is the same exact sum of the same four products in both (AVX2's int16
// partial sums cannot overflow: |2 * 31 * 128| < 2^15), and the float epilogue is the same
// operations in the same order, so the result equals the AVX2 kernel's bit for bit.
#pragma once

#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/matmul/avx2_gemv.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::kernels::matmul {

namespace avx512 {

/// Q5_0 weights . Q8_0 activation, R rows starting at w (row stride in blocks).
template <int R>
HEDGE_TARGET_AVX512VNNI void gemv_tile_q5_0(const quant::q5_0::block* w, std::size_t stride,
                                            const quant::q8_0::block* x, std::size_t blocks, float* y) noexcept {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i sixteen = _mm256_set1_epi8(16);
  const __m256i zero = _mm256_setzero_si256();
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i offset = _mm256_dpbusd_epi32(zero, sixteen, xq);  // 16 * (x_4i + ... + x_4i+3)
    __m256 scale[R];
    avx2::row_scales<R>(w, stride, b, avx2::to_float(x[b].d), scale);
    for (int r = 0; r < R; ++r) {
      avx2::prefetch_next_tile(w, stride, r, b);
      const quant::q5_0::block& wb = w[static_cast<std::size_t>(r) * stride + b];
      std::uint32_t fifth;
      std::memcpy(&fifth, wb.qh, 4);
      const __m256i nibbles = avx2::unpack_nibbles_16(wb.qs);
      const __m256i levels = _mm256_mask_add_epi8(nibbles, _cvtu32_mask32(fifth), nibbles, sixteen);
      const __m256i dot = _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, levels, xq), offset);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale[r], acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = avx2::sum_lanes(acc[r]);
}

}  // namespace avx512

/// AVX-512 VNNI Q5_0: tiles of 4 rows, then single rows, as avx2::gemv_rows.
HEDGE_TARGET_AVX512VNNI inline void gemv_rows(arch::avx512vnni, quant::q5_0, matrix_view<const quant::q5_0::block> w,
                                              const quant::q8_0::block* x, float* y) noexcept {
  for (std::size_t r = 0; r < w.rows();) {
    if (w.rows() - r >= 4) {
      avx512::gemv_tile_q5_0<4>(w.data() + r * w.stride(), w.stride(), x, w.cols(), y + r);
      r += 4;
    } else {
      avx512::gemv_tile_q5_0<1>(w.data() + r * w.stride(), w.stride(), x, w.cols(), y + r);
      r += 1;
    }
  }
}

}  // namespace hedge::kernels::matmul

#endif
