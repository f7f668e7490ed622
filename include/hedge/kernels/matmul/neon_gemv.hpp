// hedge/kernels/matmul/neon_gemv.hpp: AArch64 GEMV row kernels, y[r] = <w.row(r), x>,
// in two arch variants, each tiles 4 rows (then 1) as the AVX2 kernels do:
//
//   arch::neon          Advanced SIMD only: int8 products with smull/smull2
//                       (int16) and sadalp (pairwise into int32)
//   arch::neon_dotprod  ARMv8.2 dot product: sdot multiplies 4 int8 pairs and
//                       adds them into each int32 lane, 16 products per instruction
//
// sdot is signed x signed, so Q4_0 subtracts 8 from the nibbles and Q5_0 16 from
// its 5-bit levels (no offset trick needed), and Q5_1's and Q5_K's 5-bit levels
// (<= 31), Q4_K's unsigned nibbles (<= 15) and Q6_K's 6-bit levels (<= 63) are
// valid signed bytes; Q5_1's minimum is m_w * d_x * sum(x), the sum taken once
// per activation block; Q6_K's "- 32" is applied once per block
// through Q8_K's 16-element sums, as the AVX2 kernel does.
// The dotprod functions carry a target attribute, so a baseline armv8-a
// build contains them and they run where the CPU has the extension.
// Float formats are the same in both variants: fp16 via fcvtl, bf16 via a
// 16-bit shift, fmla into 4 lanes.
#pragma once

#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_NEON

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
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

namespace neon {

/// sdot: acc + the dot products of 4 int8 pairs per int32 lane (ARMv8.2 dot product).
/// Clang's arm_neon.h (14, Debian 12's) declares vdotq_s32 only when the whole translation
/// unit targets dotprod, not inside a function with the target attribute, so a baseline
/// armv8-a build with Clang emits the instruction by inline assembly.
HEDGE_TARGET_DOTPROD inline int32x4_t sdot(int32x4_t acc, int8x16_t a, int8x16_t b) noexcept {
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
  __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
  return acc;
#else
  return vdotq_s32(acc, a, b);
#endif
}

/// Dot products of two 16-byte int8 vectors, 4 products per int32 lane added to acc.
inline int32x4_t dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b) noexcept {
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t hi = vmull_high_s8(a, b);
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
}

/// The 32 values of a Q4_0 block as signed int8 (n - 8): [0..15] and [16..31].
inline int8x16x2_t q4_0_values(const std::uint8_t* qs) noexcept {
  const uint8x16_t packed = vld1q_u8(qs);
  const int8x16_t eight = vdupq_n_s8(8);
  return {{vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0F))), eight),
           vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight)}};
}

/// The fifth bits of a Q5_0/Q5_1 block (qh, 32 bits little-endian) as 32 bytes,
/// 16 where bit j is set, else 0: elements [0..15] and [16..31]. Byte j takes byte
/// j / 8 of the word (tbl) and tests bit j % 8 of it (cmtst).
inline uint8x16x2_t fifth_bits(const std::uint8_t* qh) noexcept {
  std::uint32_t word;
  std::memcpy(&word, qh, 4);
  const uint8x16_t bytes = vreinterpretq_u8_u32(vdupq_n_u32(word));
  const uint8x16_t select = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
  const uint8x16_t low = vqtbl1q_u8(bytes, vcombine_u8(vdup_n_u8(0), vdup_n_u8(1)));
  const uint8x16_t high = vqtbl1q_u8(bytes, vcombine_u8(vdup_n_u8(2), vdup_n_u8(3)));
  const uint8x16_t sixteen = vdupq_n_u8(16);
  return {{vandq_u8(vtstq_u8(low, select), sixteen), vandq_u8(vtstq_u8(high, select), sixteen)}};
}

/// The 32 levels n in [0, 31] of a Q5_0/Q5_1 block: [0..15] and [16..31].
template <class Block>
inline uint8x16x2_t q5_levels(const Block& b) noexcept {
  const uint8x16_t packed = vld1q_u8(b.qs);
  const uint8x16x2_t high = fifth_bits(b.qh);
  return {{vorrq_u8(vandq_u8(packed, vdupq_n_u8(0x0F)), high.val[0]), vorrq_u8(vshrq_n_u8(packed, 4), high.val[1])}};
}

/// 4 consecutive fp16 / bf16 / f32 values as floats.
inline float32x4_t load4(const hedge::f16* p) noexcept {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p))));
}
inline float32x4_t load4(const hedge::bf16* p) noexcept {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)), 16));
}
inline float32x4_t load4(const float* p) noexcept { return vld1q_f32(p); }

/// The 32 values of a Q8_0-activation block as int8, [0..15] and [16..31]: Q4_0's
/// n - 8, Q5_0's n - 16, Q5_1's levels n (its minimum is added apart), Q8_0's own.
inline int8x16x2_t signed_values(const quant::q8_0::block& b) noexcept { return {{vld1q_s8(b.qs), vld1q_s8(b.qs + 16)}}; }
inline int8x16x2_t signed_values(const quant::q4_0::block& b) noexcept { return q4_0_values(b.qs); }
inline int8x16x2_t signed_values(const quant::q5_0::block& b) noexcept {
  const uint8x16x2_t n = q5_levels(b);
  const int8x16_t sixteen = vdupq_n_s8(16);
  return {{vsubq_s8(vreinterpretq_s8_u8(n.val[0]), sixteen), vsubq_s8(vreinterpretq_s8_u8(n.val[1]), sixteen)}};
}
inline int8x16x2_t signed_values(const quant::q5_1::block& b) noexcept {
  const uint8x16x2_t n = q5_levels(b);
  return {{vreinterpretq_s8_u8(n.val[0]), vreinterpretq_s8_u8(n.val[1])}};
}

/// Q8_0 / Q4_0 / Q5_0 / Q5_1 weights . Q8_0 activation with the int8 dot product `Dot`.
template <int R, class Dot, class Block>
inline void q8_tile(const Block* w, std::size_t stride, const quant::q8_0::block* x, std::size_t blocks, float* y,
                    Dot dot) noexcept {
  constexpr bool has_min = std::is_same_v<Block, quant::q5_1::block>;
  float32x4_t acc[R];
  float acc_min[R];  // Q5_1: sum over blocks of m_w * d_x * sum(x)
  for (int r = 0; r < R; ++r) {
    acc[r] = vdupq_n_f32(0.f);
    acc_min[r] = 0.f;
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const int8x16_t x0 = vld1q_s8(x[b].qs), x1 = vld1q_s8(x[b].qs + 16);
    const float dx = f16_to_f32(x[b].d);
    float x_sum = 0.f;
    if constexpr (has_min) x_sum = static_cast<float>(vaddlvq_s8(x0) + vaddlvq_s8(x1));
    for (int r = 0; r < R; ++r) {
      const Block& wb = w[static_cast<std::size_t>(r) * stride + b];
      if constexpr (has_min) acc_min[r] += f16_to_f32(wb.m) * dx * x_sum;
      const int8x16x2_t values = signed_values(wb);
      const int32x4_t sums = dot(dot(vdupq_n_s32(0), values.val[0], x0), values.val[1], x1);
      acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(sums), vdupq_n_f32(f16_to_f32(wb.d) * dx));
    }
  }
  for (int r = 0; r < R; ++r) y[r] = vaddvq_f32(acc[r]) + acc_min[r];
}

/// Q4_K / Q5_K weights . Q8_K activation with the int8 dot product `Dot`.
template <int R, class Dot, class Block>
inline void q4_k_tile(const Block* w, std::size_t stride, const quant::q8_k::block* x, std::size_t blocks, float* y,
                      Dot dot) noexcept {
  constexpr bool fifth_bit = std::is_same_v<Block, quant::q5_k::block>;
  float32x4_t acc[R];
  float acc_min[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = vdupq_n_f32(0.f);
    acc_min[r] = 0.f;
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const quant::q8_k::block& xb = x[b];
    // Sums of the activation over each 32-element sub-block.
    const int16x8_t sub_sums = vpaddq_s16(vld1q_s16(xb.bsums), vld1q_s16(xb.bsums + 8));
    for (int r = 0; r < R; ++r) {
      const Block& wb = w[static_cast<std::size_t>(r) * stride + b];
      const auto sm = quant::q4_k::unpack_scales_mins(wb.scales);
      int32x4_t total = vdupq_n_s32(0);
      // Q5_K: the fifth bits of sub-blocks 2g and 2g + 1 in bits 0 and 1 of qh[l].
      uint8x16_t high_a = vdupq_n_u8(0), high_b = vdupq_n_u8(0);
      if constexpr (fifth_bit) {
        high_a = vld1q_u8(wb.qh);
        high_b = vld1q_u8(wb.qh + 16);
      }
      for (int g = 0; g < 4; ++g) {
        const uint8x16_t qa = vld1q_u8(wb.qs + 32 * g), qb = vld1q_u8(wb.qs + 32 * g + 16);
        const std::int8_t* xq = xb.qs + 64 * g;
        const uint8x16_t low4 = vdupq_n_u8(0x0F);
        uint8x16_t n[4] = {vandq_u8(qa, low4), vandq_u8(qb, low4), vshrq_n_u8(qa, 4), vshrq_n_u8(qb, 4)};
        if constexpr (fifth_bit) {
          const uint8x16_t bit4 = vdupq_n_u8(0x10);
          n[0] = vorrq_u8(n[0], vandq_u8(vshlq_n_u8(high_a, 4), bit4));
          n[1] = vorrq_u8(n[1], vandq_u8(vshlq_n_u8(high_b, 4), bit4));
          n[2] = vorrq_u8(n[2], vandq_u8(vshlq_n_u8(high_a, 3), bit4));
          n[3] = vorrq_u8(n[3], vandq_u8(vshlq_n_u8(high_b, 3), bit4));
          high_a = vshrq_n_u8(high_a, 2);
          high_b = vshrq_n_u8(high_b, 2);
        }
        int32x4_t lo = dot(vdupq_n_s32(0), vreinterpretq_s8_u8(n[0]), vld1q_s8(xq));
        lo = dot(lo, vreinterpretq_s8_u8(n[1]), vld1q_s8(xq + 16));
        int32x4_t hi = dot(vdupq_n_s32(0), vreinterpretq_s8_u8(n[2]), vld1q_s8(xq + 32));
        hi = dot(hi, vreinterpretq_s8_u8(n[3]), vld1q_s8(xq + 48));
        total = vmlaq_n_s32(total, lo, sm.scales[2 * g]);
        total = vmlaq_n_s32(total, hi, sm.scales[2 * g + 1]);
      }
      const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm.mins)));
      const std::int32_t min_sum = vaddvq_s32(vaddq_s32(vmull_s16(vget_low_s16(mins), vget_low_s16(sub_sums)),
                                                        vmull_high_s16(mins, sub_sums)));
      acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(total), vdupq_n_f32(f16_to_f32(wb.d) * xb.d));
      acc_min[r] += f16_to_f32(wb.dmin) * xb.d * static_cast<float>(min_sum);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = vaddvq_f32(acc[r]) - acc_min[r];
}

/// Q6_K weights . Q8_K activation with the int8 dot product `Dot`.
template <int R, class Dot>
inline void q6_k_tile(const quant::q6_k::block* w, std::size_t stride, const quant::q8_k::block* x,
                      std::size_t blocks, float* y, Dot dot) noexcept {
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.f);
  const uint8x16_t low4 = vdupq_n_u8(0x0F), high2 = vdupq_n_u8(0x30);
  for (std::size_t b = 0; b < blocks; ++b) {
    const quant::q8_k::block& xb = x[b];
    const int16x8_t bsums_lo = vld1q_s16(xb.bsums), bsums_hi = vld1q_s16(xb.bsums + 8);
    for (int r = 0; r < R; ++r) {
      const quant::q6_k::block& wb = w[static_cast<std::size_t>(r) * stride + b];
      const int8x16_t scales8 = vld1q_s8(wb.scales);
      const int16x8_t scales_lo = vmovl_s8(vget_low_s8(scales8)), scales_hi = vmovl_high_s8(scales8);
      // sum_s sc_s * sum(qx of sub-block s), in 4 int32 lanes.
      const int32x4_t offset =
          vaddq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(scales_lo), vget_low_s16(bsums_lo)), scales_lo, bsums_lo),
                    vmlal_high_s16(vmull_s16(vget_low_s16(scales_hi), vget_low_s16(bsums_hi)), scales_hi, bsums_hi));
      int32x4_t total = vdupq_n_s32(0);
      for (int half = 0; half < 2; ++half) {
        for (int part = 0; part < 2; ++part) {  // l = 16 part .. 16 part + 15
          const uint8x16_t ql0 = vld1q_u8(wb.ql + 64 * half + 16 * part);
          const uint8x16_t ql1 = vld1q_u8(wb.ql + 64 * half + 32 + 16 * part);
          const uint8x16_t qh = vld1q_u8(wb.qh + 32 * half + 16 * part);
          const uint8x16_t q[4] = {vorrq_u8(vandq_u8(ql0, low4), vandq_u8(vshlq_n_u8(qh, 4), high2)),
                                   vorrq_u8(vandq_u8(ql1, low4), vandq_u8(vshlq_n_u8(qh, 2), high2)),
                                   vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, high2)),
                                   vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), high2))};
          for (int i = 0; i < 4; ++i) {
            const int sub = 8 * half + 2 * i + part;  // elements 16 sub .. 16 sub + 15
            const int32x4_t products = dot(vdupq_n_s32(0), vreinterpretq_s8_u8(q[i]), vld1q_s8(xb.qs + 16 * sub));
            total = vmlaq_n_s32(total, products, wb.scales[sub]);
          }
        }
      }
      total = vsubq_s32(total, vshlq_n_s32(offset, 5));
      acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(total), vdupq_n_f32(f16_to_f32(wb.d) * xb.d));
    }
  }
  for (int r = 0; r < R; ++r) y[r] = vaddvq_f32(acc[r]);
}

/// F32 / F16 / BF16 weights . F32 activation; any length.
template <int R, class Element>
inline void float_tile(const Element* w, std::size_t stride, const float* x, std::size_t elements, float* y) noexcept {
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.f);
  std::size_t k = 0;
  for (; k + 4 <= elements; k += 4) {
    const float32x4_t xv = vld1q_f32(x + k);
    for (int r = 0; r < R; ++r) acc[r] = vfmaq_f32(acc[r], load4(w + static_cast<std::size_t>(r) * stride + k), xv);
  }
  for (int r = 0; r < R; ++r) {
    float sum = vaddvq_f32(acc[r]);
    for (std::size_t t = k; t < elements; ++t) sum += matmul::to_float(w[static_cast<std::size_t>(r) * stride + t]) * x[t];
    y[r] = sum;
  }
}

struct smull_dot {
  int32x4_t operator()(int32x4_t acc, int8x16_t a, int8x16_t b) const noexcept { return dot_s8(acc, a, b); }
};
struct sdot_dot {
  HEDGE_TARGET_DOTPROD int32x4_t operator()(int32x4_t acc, int8x16_t a, int8x16_t b) const noexcept {
    return sdot(acc, a, b);
  }
};

/// The row tile for weight block type `Block` with dot product `Dot`: by the activation
/// it pairs with (floats, Q8_0, Q8_K), then Q6_K's own.
template <int R, class Dot, class Block, class Activation>
inline void tile(const Block* w, std::size_t s, const Activation* x, std::size_t n, float* y) noexcept {
  if constexpr (std::is_same_v<Activation, float>) {
    float_tile<R>(w, s, x, n, y);
  } else if constexpr (std::is_same_v<Activation, quant::q8_0::block>) {
    q8_tile<R>(w, s, x, n, y, Dot{});
  } else if constexpr (std::is_same_v<Block, quant::q6_k::block>) {
    q6_k_tile<R>(w, s, x, n, y, Dot{});
  } else {
    q4_k_tile<R>(w, s, x, n, y, Dot{});
  }
}

template <class Dot, class WeightBlock, class Activation>
inline void gemv_rows(matrix_view<const WeightBlock> w, const Activation* x, float* y) noexcept {
  for (std::size_t r = 0; r < w.rows();) {
    if (w.rows() - r >= 4) {
      tile<4, Dot>(w.data() + r * w.stride(), w.stride(), x, w.cols(), y + r);
      r += 4;
    } else {
      tile<1, Dot>(w.data() + r * w.stride(), w.stride(), x, w.cols(), y + r);
      r += 1;
    }
  }
}

}  // namespace neon

template <class W>
concept neon_gemv_format = std::is_same_v<W, quant::q8_0> || std::is_same_v<W, quant::q4_0> ||
                           std::is_same_v<W, quant::q5_0> || std::is_same_v<W, quant::q5_1> ||
                           std::is_same_v<W, quant::q4_k> || std::is_same_v<W, quant::q5_k> ||
                           std::is_same_v<W, quant::q6_k> ||
                           std::is_same_v<W, quant::f32> || std::is_same_v<W, quant::f16> ||
                           std::is_same_v<W, quant::bf16>;

/// NEON overloads: chosen for arch::neon, and arch::neon_dotprod (and tags derived from them).
template <neon_gemv_format W>
void gemv_rows(arch::neon, W, matrix_view<const typename W::block> w, const typename W::activation::block* x,
               float* y) noexcept {
  neon::gemv_rows<neon::smull_dot>(w, x, y);
}
template <neon_gemv_format W>
HEDGE_TARGET_DOTPROD void gemv_rows(arch::neon_dotprod, W, matrix_view<const typename W::block> w,
                                    const typename W::activation::block* x, float* y) noexcept {
  neon::gemv_rows<neon::sdot_dot>(w, x, y);
}

}  // namespace hedge::kernels::matmul

#endif
