// hedge/kernels/matmul/neon_interleaved.hpp: NEON dot-product kernels for the
// 8-row interleaved layout (repack.hpp). A 32-byte quad holds 4 values of each
// of 8 rows: two 16-byte registers, rows 0-3 and rows 4-7; sdot against the
// activation's 4 values broadcast to every lane gives each row's partial dot
// in its own int32 lane, so the 8 rows' results need no horizontal sums.
// Q4_0 nibbles become signed (n - 8) before sdot, so no offset is needed.
// Q5_0 / Q5_1 levels: the nibbles with the quad's fifth bits or-ed in (fifth_bits of its
// qh word, repack.hpp), made signed (n - 16) for Q5_0; Q5_1's minimum is added apart
// (m_w * d_x * sum(x)).
// Q4_K nibbles stay unsigned (0..15 is a valid int8); each sub-block's sdot
// sums are multiplied by the rows' 6-bit scales (vmla), and the mins applied
// through Q8_K's block sums (vmlal by the rows' min pairs, then vpadd).
// Q6_K levels become signed (q - 32) before sdot; each sub-block's sums are
// multiplied by the rows' int8 scales (vmla).
// A row's operations do not depend on M, so GEMM row m equals GEMV of row m.
// One tile skeleton (group_tile) runs every format through its block body
// (group_block), as the x86 tiles do.
#pragma once

#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_NEON

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hedge/core/arch.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/matmul/neon_gemv.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::kernels::matmul {

namespace neon {

/// 4 int8 values broadcast to the 4 int32 lanes.
inline int8x16_t broadcast_quad(const std::int8_t* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/// Rows 0-3 and 4-7 of one quad of weights as signed int8.
struct quad_rows {
  int8x16_t lo, hi;
};
inline quad_rows load_quad(const interleaved<quant::q8_0>::block& g, int j) noexcept {
  return {vld1q_s8(g.qs + 32 * j), vld1q_s8(g.qs + 32 * j + 16)};
}

/// acc[m] += dots[m] * (row scales d) * (activation m's scale of block b): the
/// epilogue of one block, shared by every interleaved format.
template <int M, class Activation>
HEDGE_TARGET_DOTPROD inline void scale_accumulate(float32x4_t (&acc)[M][2], const int32x4_t (&dots)[M][2],
                                                  const f16* d, const Activation* x, std::size_t b) noexcept {
  const uint16x8_t d_bits = vld1q_u16(reinterpret_cast<const std::uint16_t*>(d));
  const float32x4_t d0 = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(d_bits)));
  const float32x4_t d1 = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(d_bits)));
  for (int m = 0; m < M; ++m) {
    const float dx = x[m].scales[b];
    acc[m][0] = vfmaq_f32(acc[m][0], vcvtq_f32_s32(dots[m][0]), vmulq_n_f32(d0, dx));
    acc[m][1] = vfmaq_f32(acc[m][1], vcvtq_f32_s32(dots[m][1]), vmulq_n_f32(d1, dx));
  }
}

/// Writes the first `valid` of the 8 row results of each activation row m.
template <int M>
HEDGE_TARGET_DOTPROD inline void store_rows(const float32x4_t (&acc)[M][2], float* y, std::size_t y_stride,
                                            std::size_t valid) noexcept {
  for (int m = 0; m < M; ++m) {
    float lanes[interleave_rows];
    vst1q_f32(lanes, acc[m][0]);
    vst1q_f32(lanes + 4, acc[m][1]);
    for (std::size_t r = 0; r < valid; ++r) y[static_cast<std::size_t>(m) * y_stride + r] = lanes[r];
  }
}

/// acc[m] += the 8 rows' dot products of group block g (block b of the group) with
/// block b of activation row m, for each of the M rows. Q4_0: nibbles made signed (n - 8).
template <int M>
HEDGE_TARGET_DOTPROD HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q4_0>::block& g,
                                                          const activation_row<quant::q4_0>* x, std::size_t b,
                                                          float32x4_t (&acc)[M][2]) noexcept {
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  const int8x16_t eight = vdupq_n_s8(8);
  int32x4_t dots[M][2];
  for (int m = 0; m < M; ++m) dots[m][0] = dots[m][1] = vdupq_n_s32(0);
  for (int j = 0; j < 4; ++j) {
    const uint8x16_t q0 = vld1q_u8(g.qs + 32 * j), q1 = vld1q_u8(g.qs + 32 * j + 16);
    // Low nibbles: values 4j..4j+3 of each row; high nibbles: 16+4j..16+4j+3.
    const int8x16_t lo0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q0, low4)), eight);
    const int8x16_t lo1 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q1, low4)), eight);
    const int8x16_t hi0 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), eight);
    const int8x16_t hi1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), eight);
    for (int m = 0; m < M; ++m) {
      const int8x16_t x_lo = broadcast_quad(x[m].blocks[b].qs + 4 * j);
      const int8x16_t x_hi = broadcast_quad(x[m].blocks[b].qs + 16 + 4 * j);
      dots[m][0] = neon::sdot(neon::sdot(dots[m][0], lo0, x_lo), hi0, x_hi);
      dots[m][1] = neon::sdot(neon::sdot(dots[m][1], lo1, x_lo), hi1, x_hi);
    }
  }
  scale_accumulate<M>(acc, dots, g.d, x, b);
}

/// Q8_0: sdot of the signed weights.
template <int M>
HEDGE_TARGET_DOTPROD HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q8_0>::block& g,
                                                          const activation_row<quant::q8_0>* x, std::size_t b,
                                                          float32x4_t (&acc)[M][2]) noexcept {
  int32x4_t dots[M][2];
  for (int m = 0; m < M; ++m) dots[m][0] = dots[m][1] = vdupq_n_s32(0);
  for (int j = 0; j < 8; ++j) {
    const quad_rows w = load_quad(g, j);
    for (int m = 0; m < M; ++m) {
      const int8x16_t xq = broadcast_quad(x[m].blocks[b].qs + 4 * j);
      dots[m][0] = neon::sdot(dots[m][0], w.lo, xq);
      dots[m][1] = neon::sdot(dots[m][1], w.hi, xq);
    }
  }
  scale_accumulate<M>(acc, dots, g.d, x, b);
}

/// Q5_0 / Q5_1: sdot of the 5-bit levels (signed n - 16 for Q5_0).
template <int M, class W>
  requires(std::is_same_v<W, quant::q5_0> || std::is_same_v<W, quant::q5_1>)
HEDGE_TARGET_DOTPROD HEDGE_ALWAYS_INLINE void group_block(const typename interleaved<W>::block& g,
                                                          const activation_row<W>* x, std::size_t b,
                                                          float32x4_t (&acc)[M][2]) noexcept {
  constexpr bool has_min = std::is_same_v<W, quant::q5_1>;
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  const int8x16_t offset = vdupq_n_s8(has_min ? 0 : 16);
  const auto levels = [&](uint8x16_t nibbles, uint8x16_t fifth) HEDGE_TARGET_DOTPROD {
    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(nibbles, fifth)), offset);
  };
  int32x4_t dots[M][2];
  for (int m = 0; m < M; ++m) dots[m][0] = dots[m][1] = vdupq_n_s32(0);
  for (int j = 0; j < 4; ++j) {
    const uint8x16_t q0 = vld1q_u8(g.qs + 32 * j), q1 = vld1q_u8(g.qs + 32 * j + 16);
    const uint8x16x2_t fifth_lo = fifth_bits(g.qh + 8 * j), fifth_hi = fifth_bits(g.qh + 8 * j + 4);
    const int8x16_t lo0 = levels(vandq_u8(q0, low4), fifth_lo.val[0]);
    const int8x16_t lo1 = levels(vandq_u8(q1, low4), fifth_lo.val[1]);
    const int8x16_t hi0 = levels(vshrq_n_u8(q0, 4), fifth_hi.val[0]);
    const int8x16_t hi1 = levels(vshrq_n_u8(q1, 4), fifth_hi.val[1]);
    for (int m = 0; m < M; ++m) {
      const int8x16_t x_lo = broadcast_quad(x[m].blocks[b].qs + 4 * j);
      const int8x16_t x_hi = broadcast_quad(x[m].blocks[b].qs + 16 + 4 * j);
      dots[m][0] = neon::sdot(neon::sdot(dots[m][0], lo0, x_lo), hi0, x_hi);
      dots[m][1] = neon::sdot(neon::sdot(dots[m][1], lo1, x_lo), hi1, x_hi);
    }
  }
  scale_accumulate<M>(acc, dots, g.d, x, b);
  if constexpr (has_min) {
    const float32x4_t m0 = load4(g.m), m1 = load4(g.m + 4);
    for (int m = 0; m < M; ++m) {
      const float dx = x[m].scales[b];
      const float32x4_t x_sum = vdupq_n_f32(static_cast<float>(x[m].offsets[b] / 8));
      acc[m][0] = vfmaq_f32(acc[m][0], x_sum, vmulq_n_f32(m0, dx));
      acc[m][1] = vfmaq_f32(acc[m][1], x_sum, vmulq_n_f32(m1, dx));
    }
  }
}

/// Bytes 0-3 / 4-7 of 8 unsigned bytes (one per row) widened to int32 lanes.
struct row_values {
  int32x4_t lo, hi;
};
inline row_values widen_rows(uint8x8_t v) noexcept {
  const uint16x8_t wide = vmovl_u8(v);
  return {vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(wide))), vreinterpretq_s32_u32(vmovl_high_u16(wide))};
}

/// Q4_K: unsigned nibbles, sub-block sums times the rows' 6-bit scales; the mins
/// through the activation's sub-block sums.
template <int M>
HEDGE_TARGET_DOTPROD HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q4_k>::block& g,
                                                          const activation_row<quant::q4_k>* x, std::size_t b,
                                                          float32x4_t (&acc)[M][2]) noexcept {
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  int32x4_t total[M][2];  // per row: sum over sub-blocks of scale * sum(n * x)
  for (int m = 0; m < M; ++m) total[m][0] = total[m][1] = vdupq_n_s32(0);
  for (int h = 0; h < 4; ++h) {  // sub-blocks 2h (low nibbles) and 2h + 1 (high)
    int32x4_t dot_lo[M][2], dot_hi[M][2];
    for (int m = 0; m < M; ++m) dot_lo[m][0] = dot_lo[m][1] = dot_hi[m][0] = dot_hi[m][1] = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
      const uint8x16_t q0 = vld1q_u8(g.qs + 256 * h + 32 * j), q1 = vld1q_u8(g.qs + 256 * h + 32 * j + 16);
      const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(q0, low4)), lo1 = vreinterpretq_s8_u8(vandq_u8(q1, low4));
      const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), hi1 = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
      for (int m = 0; m < M; ++m) {
        const std::int8_t* xq = x[m].blocks[b].qs + 64 * h + 4 * j;
        const int8x16_t x_lo = broadcast_quad(xq), x_hi = broadcast_quad(xq + 32);
        dot_lo[m][0] = neon::sdot(dot_lo[m][0], lo0, x_lo);
        dot_lo[m][1] = neon::sdot(dot_lo[m][1], lo1, x_lo);
        dot_hi[m][0] = neon::sdot(dot_hi[m][0], hi0, x_hi);
        dot_hi[m][1] = neon::sdot(dot_hi[m][1], hi1, x_hi);
      }
    }
    const uint8x16_t s = vld1q_u8(g.scales + 16 * h);
    const row_values s_lo = widen_rows(vget_low_u8(s)), s_hi = widen_rows(vget_high_u8(s));
    for (int m = 0; m < M; ++m) {
      total[m][0] = vmlaq_s32(vmlaq_s32(total[m][0], dot_lo[m][0], s_lo.lo), dot_hi[m][0], s_hi.lo);
      total[m][1] = vmlaq_s32(vmlaq_s32(total[m][1], dot_lo[m][1], s_lo.hi), dot_hi[m][1], s_hi.hi);
    }
  }
  const uint16x8_t d_bits = vld1q_u16(reinterpret_cast<const std::uint16_t*>(g.d));
  const uint16x8_t dmin_bits = vld1q_u16(reinterpret_cast<const std::uint16_t*>(g.dmin));
  const float32x4_t d[2] = {vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(d_bits))),
                            vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(d_bits)))};
  const float32x4_t dmin[2] = {vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(dmin_bits))),
                               vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(dmin_bits)))};
  for (int m = 0; m < M; ++m) {
    const quant::q8_k::block& xb = x[m].blocks[b];
    // The activation's 8 sub-block sums; pair p = (s_2p, s_2p+1) is int32 lane p.
    const int32x4_t sums = vreinterpretq_s32_s16(vpaddq_s16(vld1q_s16(xb.bsums), vld1q_s16(xb.bsums + 8)));
    const int16x8_t pairs[4] = {vreinterpretq_s16_s32(vdupq_laneq_s32(sums, 0)),
                                vreinterpretq_s16_s32(vdupq_laneq_s32(sums, 1)),
                                vreinterpretq_s16_s32(vdupq_laneq_s32(sums, 2)),
                                vreinterpretq_s16_s32(vdupq_laneq_s32(sums, 3))};
    // Products for rows 0-1, 2-3, 4-5, 6-7 (two lanes per row), pair-summed below.
    int32x4_t part[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int p = 0; p < 4; ++p) {
      const uint8x16_t mv = vld1q_u8(g.mins + 16 * p);  // rows' (m_2p, m_2p+1)
      const int16x8_t m03 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mv)));
      const int16x8_t m47 = vreinterpretq_s16_u16(vmovl_high_u8(mv));
      part[0] = vmlal_s16(part[0], vget_low_s16(m03), vget_low_s16(pairs[p]));
      part[1] = vmlal_high_s16(part[1], m03, pairs[p]);
      part[2] = vmlal_s16(part[2], vget_low_s16(m47), vget_low_s16(pairs[p]));
      part[3] = vmlal_high_s16(part[3], m47, pairs[p]);
    }
    const int32x4_t min_total[2] = {vpaddq_s32(part[0], part[1]), vpaddq_s32(part[2], part[3])};
    for (int i = 0; i < 2; ++i) {
      acc[m][i] = vfmaq_f32(acc[m][i], vcvtq_f32_s32(total[m][i]), vmulq_n_f32(d[i], xb.d));
      acc[m][i] = vfmsq_f32(acc[m][i], vcvtq_f32_s32(min_total[i]), vmulq_n_f32(dmin[i], xb.d));
    }
  }
}

/// Element set I (elements 128h + 32i + 4k .. +3, i = I) of 4 rows' quad from their A,
/// B and H bytes (repack.hpp), as signed levels q - 32.
template <int I>
HEDGE_TARGET_DOTPROD inline int8x16_t q6_levels(uint8x16_t a, uint8x16_t b, uint8x16_t h) noexcept {
  const uint8x16_t ql = (I & 1) ? b : a;
  const uint8x16_t low = I < 2 ? vandq_u8(ql, vdupq_n_u8(0x0F)) : vshrq_n_u8(ql, 4);
  uint8x16_t high;
  if constexpr (I == 0) high = vshlq_n_u8(h, 4);
  if constexpr (I == 1) high = vshlq_n_u8(h, 2);
  if constexpr (I == 2) high = h;
  if constexpr (I == 3) high = vshrq_n_u8(h, 2);
  const uint8x16_t q = vorrq_u8(low, vandq_u8(high, vdupq_n_u8(0x30)));
  return vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(32));
}

/// total[m] += the rows' scale of sub-block 2 (4h + I) + (k0 / 4) times their dots of
/// element set I over quads k0 .. k0 + 3 (one sub-block of 16 elements).
template <int I, int M>
HEDGE_TARGET_DOTPROD inline void q6_sub_block(const interleaved<quant::q6_k>::block& g,
                                              const activation_row<quant::q6_k>* x, std::size_t b, std::size_t h,
                                              std::size_t k0, int32x4_t (&total)[M][2]) noexcept {
  using layout = interleaved<quant::q6_k>;
  int32x4_t dots[M][2];
  for (int m = 0; m < M; ++m) dots[m][0] = dots[m][1] = vdupq_n_s32(0);
  for (std::size_t k = k0; k < k0 + 4; ++k) {
    for (int half = 0; half < 2; ++half) {  // rows 0-3, rows 4-7
      const std::uint8_t* at = g.qs + 16 * half;
      const int8x16_t q = q6_levels<I>(vld1q_u8(at + layout::quad_offset(h, k, 0)),
                                       vld1q_u8(at + layout::quad_offset(h, k, 1)),
                                       vld1q_u8(at + layout::quad_offset(h, k, 2)));
      for (int m = 0; m < M; ++m) {
        dots[m][half] = neon::sdot(dots[m][half], q, broadcast_quad(x[m].blocks[b].qs + 128 * h + 32 * I + 4 * k));
      }
    }
  }
  // The pair vector holds (sc_{2p}, sc_{2p+1}) per row; even bytes are sub-block 2p's.
  const int8x16_t pairs = vld1q_s8(g.scales + 16 * (4 * h + I));
  const int8x16_t picked = k0 < 4 ? vuzp1q_s8(pairs, pairs) : vuzp2q_s8(pairs, pairs);
  const int16x8_t wide = vmovl_s8(vget_low_s8(picked));
  const int32x4_t scale[2] = {vmovl_s16(vget_low_s16(wide)), vmovl_high_s16(wide)};
  for (int m = 0; m < M; ++m) {
    total[m][0] = vmlaq_s32(total[m][0], dots[m][0], scale[0]);
    total[m][1] = vmlaq_s32(total[m][1], dots[m][1], scale[1]);
  }
}

/// Q6_K: signed levels (q - 32) by sdot, each sub-block's sums times the rows' int8 scales.
template <int M>
HEDGE_TARGET_DOTPROD HEDGE_ALWAYS_INLINE void group_block(const interleaved<quant::q6_k>::block& g,
                                                          const activation_row<quant::q6_k>* x, std::size_t b,
                                                          float32x4_t (&acc)[M][2]) noexcept {
  int32x4_t total[M][2];
  for (int m = 0; m < M; ++m) total[m][0] = total[m][1] = vdupq_n_s32(0);
  for (std::size_t h = 0; h < 2; ++h) {
    for (std::size_t k0 = 0; k0 < 8; k0 += 4) {
      q6_sub_block<0, M>(g, x, b, h, k0, total);
      q6_sub_block<1, M>(g, x, b, h, k0, total);
      q6_sub_block<2, M>(g, x, b, h, k0, total);
      q6_sub_block<3, M>(g, x, b, h, k0, total);
    }
  }
  const uint16x8_t d_bits = vld1q_u16(reinterpret_cast<const std::uint16_t*>(g.d));
  const float32x4_t d[2] = {vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(d_bits))),
                            vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(d_bits)))};
  for (int m = 0; m < M; ++m) {
    const float dx = x[m].blocks[b].d;
    for (int i = 0; i < 2; ++i) acc[m][i] = vfmaq_f32(acc[m][i], vcvtq_f32_s32(total[m][i]), vmulq_n_f32(d[i], dx));
  }
}

/// One group x M activation rows: the tile skeleton (accumulators, block loop, store)
/// over the per-format block body group_block.
template <int M, class W>
HEDGE_TARGET_DOTPROD void group_tile(const typename interleaved<W>::block* group, std::size_t blocks,
                                     const activation_row<W>* x, float* y, std::size_t y_stride,
                                     std::size_t valid) noexcept {
  float32x4_t acc[M][2];
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = vdupq_n_f32(0.f);
  for (std::size_t b = 0; b < blocks; ++b) group_block<M>(group[b], x, b, acc);
  store_rows<M>(acc, y, y_stride, valid);
}

}  // namespace neon

/// NEON dot-product overload, chosen for arch::neon_dotprod and tags derived from it.
template <Interleavable W>
HEDGE_TARGET_DOTPROD void gemm_group(arch::neon_dotprod, W, const typename interleaved<W>::block* group,
                                     std::size_t blocks, const activation_row<W>* x, std::size_t rows, float* y,
                                     std::size_t y_stride, std::size_t valid) noexcept {
  for (std::size_t m = 0; m < rows;) {
    if (rows - m >= 4) {
      neon::group_tile<4, W>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 4;
    } else {
      neon::group_tile<1, W>(group, blocks, x + m, y + m * y_stride, y_stride, valid);
      m += 1;
    }
  }
}

}  // namespace hedge::kernels::matmul

#endif
