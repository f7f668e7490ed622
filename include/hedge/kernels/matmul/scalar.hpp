// hedge/kernels/matmul/scalar.hpp: the scalar reference kernels: dot products of one weight
// row with one activation row, per format pair. They are the specification the
// SIMD kernels are tested against, and read like the formats' definitions:
//
//   Q8_0 . Q8_0   sum_b  (d_w * d_x) * sum_j qw_j * qx_j
//   Q4_0 . Q8_0   sum_b  (d_w * d_x) * sum_j (n_j - 8) * qx_j
//   Q5_0 . Q8_0   sum_b  (d_w * d_x) * sum_j (n_j - 16) * qx_j
//   Q5_1 . Q8_0   sum_b  (d_w * d_x) * sum_j n_j qx_j  +  (m_w * d_x) * sum_j qx_j
//   Q4_K . Q8_K   sum_B  d_x * (d_w * sum_s sc_s * sum_j n_j qx_j  -  dmin_w * sum_s m_s * sum_j qx_j)
//   Q5_K . Q8_K   as Q4_K, with n_j in [0, 31]
//   Q6_K . Q8_K   sum_B  d_x * (d_w * sum_s sc_s * sum_j (q_j - 32) qx_j)
//   F32/F16/BF16 . F32   sum_k w_k * x_k
//
// Integer sums are exact; each block's float contribution is added in block
// order, so the result is a fixed function of the bytes (no -ffast-math).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hedge/compiler/overload_set.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/half.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/block_format.hpp"
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

inline float dot_block(const quant::q8_0::block& w, const quant::q8_0::block& x) noexcept {
  std::int32_t sum = 0;
  for (std::size_t j = 0; j < quant::q8_0::block_elements; ++j) sum += w.qs[j] * x.qs[j];
  return f16_to_f32(w.d) * f16_to_f32(x.d) * static_cast<float>(sum);
}

inline float dot_block(const quant::q4_0::block& w, const quant::q8_0::block& x) noexcept {
  constexpr std::size_t half = quant::q4_0::block_elements / 2;
  std::int32_t sum = 0;
  for (std::size_t j = 0; j < half; ++j) {
    sum += ((w.qs[j] & 0x0F) - 8) * x.qs[j];
    sum += ((w.qs[j] >> 4) - 8) * x.qs[j + half];
  }
  return f16_to_f32(w.d) * f16_to_f32(x.d) * static_cast<float>(sum);
}

inline float dot_block(const quant::q5_0::block& w, const quant::q8_0::block& x) noexcept {
  std::int32_t sum = 0;
  for (std::size_t j = 0; j < quant::q5_0::block_elements; ++j) sum += (quant::q5_0::level(w, j) - 16) * x.qs[j];
  return f16_to_f32(w.d) * f16_to_f32(x.d) * static_cast<float>(sum);
}

inline float dot_block(const quant::q5_1::block& w, const quant::q8_0::block& x) noexcept {
  std::int32_t sum = 0;    // sum of n * qx
  std::int32_t sum_x = 0;  // sum of qx
  for (std::size_t j = 0; j < quant::q5_1::block_elements; ++j) {
    sum += quant::q5_1::level(w, j) * x.qs[j];
    sum_x += x.qs[j];
  }
  const float dx = f16_to_f32(x.d);
  return f16_to_f32(w.d) * dx * static_cast<float>(sum) + f16_to_f32(w.m) * dx * static_cast<float>(sum_x);
}

inline float dot_block(const quant::q4_k::block& w, const quant::q8_k::block& x) noexcept {
  std::int32_t scaled = 0;  // sum over sub-blocks of scale * sum(n * qx)
  std::int32_t mins = 0;    // sum over sub-blocks of min * sum(qx)
  for (std::size_t s = 0; s < quant::q4_k::sub_blocks; ++s) {
    const auto sm = quant::q4_k::unpack_scale_min(w.scales, s);
    // Sub-block s: nibbles of group s/2, low half for even s, high for odd.
    const std::uint8_t* q = w.qs + (s / 2) * 32;
    const int shift = (s % 2) * 4;
    std::int32_t sum = 0;
    for (std::size_t l = 0; l < 32; ++l) sum += ((q[l] >> shift) & 0x0F) * x.qs[s * 32 + l];
    scaled += sm.scale * sum;
    mins += sm.min * (x.bsums[2 * s] + x.bsums[2 * s + 1]);
  }
  return x.d * (f16_to_f32(w.d) * static_cast<float>(scaled) - f16_to_f32(w.dmin) * static_cast<float>(mins));
}

inline float dot_block(const quant::q5_k::block& w, const quant::q8_k::block& x) noexcept {
  std::int32_t scaled = 0;  // sum over sub-blocks of scale * sum(n * qx)
  std::int32_t mins = 0;    // sum over sub-blocks of min * sum(qx)
  for (std::size_t s = 0; s < quant::q5_k::sub_blocks; ++s) {
    const auto sm = quant::q4_k::unpack_scale_min(w.scales, s);
    std::int32_t sum = 0;
    for (std::size_t l = 0; l < 32; ++l) sum += quant::q5_k::level(w, s * 32 + l) * x.qs[s * 32 + l];
    scaled += sm.scale * sum;
    mins += sm.min * (x.bsums[2 * s] + x.bsums[2 * s + 1]);
  }
  return x.d * (f16_to_f32(w.d) * static_cast<float>(scaled) - f16_to_f32(w.dmin) * static_cast<float>(mins));
}

inline float dot_block(const quant::q6_k::block& w, const quant::q8_k::block& x) noexcept {
  // |sum| <= 16 sub-blocks * 128 * 16 * 32 * 128 = 2^27: exact in int32.
  std::int32_t scaled = 0;  // sum over sub-blocks of scale * sum((q - 32) * qx)
  for (std::size_t s = 0; s < quant::q6_k::sub_blocks; ++s) {
    std::int32_t sum = 0;
    for (std::size_t l = 0; l < quant::q6_k::sub_elements; ++l) {
      const std::size_t e = s * quant::q6_k::sub_elements + l;
      sum += (quant::q6_k::level(w, e) - 32) * x.qs[e];
    }
    scaled += w.scales[s] * sum;
  }
  return x.d * (f16_to_f32(w.d) * static_cast<float>(scaled));
}

/// Value of one element of a float-format row.
inline float to_float(float w) noexcept { return w; }
inline float to_float(hedge::f16 w) noexcept { return f16_to_f32(w); }
inline float to_float(hedge::bf16 w) noexcept { return bf16_to_f32(w); }

/// sum_b dot_block(w[b], x[b]) over `blocks` blocks, in block order.
template <class WeightBlock, class ActivationBlock>
float dot_row(const WeightBlock* w, const ActivationBlock* x, std::size_t blocks) noexcept {
  float sum = 0.f;
  for (std::size_t b = 0; b < blocks; ++b) sum += dot_block(w[b], x[b]);
  return sum;
}

/// sum_k w[k] * x[k] for float formats, in element order.
template <class WeightElement>
float dot_row(const WeightElement* w, const float* x, std::size_t elements) noexcept {
  float sum = 0.f;
  for (std::size_t k = 0; k < elements; ++k) sum += to_float(w[k]) * x[k];
  return sum;
}

/// y[r] = <w.row(r), x> for every row of w: the reference every GEMV overload
/// for a more specific arch tag is tested against.
template <quant::BlockFormat W>
void gemv_rows(arch::scalar, W, matrix_view<const typename W::block> w, const typename W::activation::block* x,
               float* y) noexcept {
  for (std::size_t r = 0; r < w.rows(); ++r) y[r] = dot_row(w.row(r).data(), x, w.cols());
}

/// GGUF-layout GEMM microkernels are overloads `gemm_rows(arch tag, format,
/// weight slice, activation rows, count, y, y_stride)` where an arch has one
/// (AVX2 Q4_K); gemm.hpp falls back to the GEMV row kernel per activation row
/// otherwise. HEDGE_OVERLOAD_SET makes the name exist on every target.
HEDGE_OVERLOAD_SET(gemm_rows);

/// Likewise `gemv_groups(arch tag, format, first group, groups, blocks,
/// activation row, y, valid rows)`: a GEMV kernel over a run of interleaved
/// groups, where an arch has one (AVX2); gemv.hpp otherwise runs gemm_group
/// with one activation row per group.
HEDGE_OVERLOAD_SET(gemv_groups);

/// Likewise `gemm_groups(arch tag, format, first group, groups, blocks,
/// activation rows, count, y, y_stride, valid rows)`: a GEMM kernel over a run
/// of interleaved groups whose tile spans several groups, where an arch has one
/// (AVX-512 VNNI); gemm.hpp otherwise runs gemm_group per group.
HEDGE_OVERLOAD_SET(gemm_groups);

/// Y[m][r] = <row r of the interleaved group, activation row m> for m < rows,
/// r < valid: each row is first restored to its GGUF block, so the result is
/// bit-identical to the plain reference above.
template <Interleavable W>
void gemm_group(arch::scalar, W, const typename interleaved<W>::block* group, std::size_t blocks,
                const activation_row<W>* x, std::size_t rows, float* y, std::size_t y_stride,
                std::size_t valid) noexcept {
  for (std::size_t m = 0; m < rows; ++m) {
    for (std::size_t r = 0; r < valid; ++r) {
      float sum = 0.f;
      for (std::size_t b = 0; b < blocks; ++b) sum += dot_block(original_block<W>(group[b], r), x[m].blocks[b]);
      y[m * y_stride + r] = sum;
    }
  }
}

}  // namespace hedge::kernels::matmul
