// hedge/attention/decode_neon.hpp: the AArch64 Advanced SIMD (NEON) decode attention kernel.
//
// Same contract as the scalar reference (decode_scalar.hpp) and the same tiling
// as the AVX2 kernel (decode_avx2.hpp), on 128-bit registers: K and V are read in
// their stored format and converted in registers, and every converted K/V value
// feeds the (up to 4) query heads of a GQA group handled together.
//
// Per tile of up to 64 consecutive positions (gathered across page runs):
//   1. logits, two keys at a time: each 4-value chunk of the queries is loaded
//      once for both keys, each key chunk once for all heads (2 x 4 accumulators);
//      one pairwise-add tree (faddp) per key turns its 4 accumulators into one
//      register of 4 head logits, so the tile's logits are position-major, 4 head
//      lanes per position:
//        f32/f16/bf16 keys: float FMAs on the converted key (fcvtl for f16, a
//        16-bit shift for bf16);
//        q8_0/q4_0 keys: int8 dot products against the query rounded to Q8_0 per
//        32-value block (ggml's reference quantizer, as llama.cpp and the Q8_0
//        GEMV do): sdot (vdotq_s32) under arch::neon_dotprod, smull + sadalp
//        (int16 products, pairwise into int32: nothing saturates) under
//        arch::neon, then one float FMA per block by the product of the two scales;
//   2. online softmax on that layout, one position (4 head lanes) per register:
//      tile max, one rescale of the running state, exp4 (the AVX2 polynomial,
//      at most 1 ulp on [-87, 0]);
//   3. values: 16 output lanes per query head (32 when fewer than 3 heads) stay
//      in registers while the tile's values stream through; each value chunk is
//      converted once and multiplied into every head by fmla by element (the
//      head's weight is lane n of the position's weight register, so no
//      broadcasts); block formats fold the value block's scale into that register.
//
// Accuracy: float keys give the scalar kernel's result up to float rounding
// (fused multiply-adds, another summation order). For q8_0/q4_0 keys the logits
// are exact integer dot products times the two fp16 block scales, i.e. attention
// of the Q8_0-rounded query, as in the AVX2 kernel; the tests hold both to the
// bounds in docs/attention.md.
//
// The dot-product entry carries a target attribute (HEDGE_TARGET_DOTPROD, as
// the NEON GEMV), so a baseline armv8-a build contains it; arch::neon_dotprod's
// `supported()` says whether it may run.
#pragma once

#include "hedge/compiler/intrinsics.hpp"
#include "hedge/compiler/unroll.hpp"

#if HEDGE_SIMD_NEON
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include "hedge/attention/decode_scalar.hpp"
#include "hedge/attention/decode_tile.hpp"
#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/half.hpp"
#include "hedge/kernels/matmul/neon_gemv.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/kv/element.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::attention::neon {

namespace primitives = kernels::matmul::neon;  // load4, q4_0_values, smull_dot, sdot_dot

// The short loops over heads and register lanes carry `#pragma GCC unroll`: GCC 12
// at -O2 keeps some of them rolled, which leaves the accumulator arrays on the stack
// (a load and a store around every FMA).

/// The 16 int8 values of `x` as 4 float registers.
inline float32x4x4_t to_float16(int8x16_t x) noexcept {
  const int16x8_t lo = vmovl_s8(vget_low_s8(x)), hi = vmovl_high_s8(x);
  return {{vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_high_s16(lo)),
           vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_high_s16(hi))}};
}

/// A block scale as float with the hardware conversion (fcvtl), not the portable bit-level one.
inline float scale_to_float(const f16& d) noexcept {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_dup_u16(&d.bits))), 0);
}

/// How the NEON kernel reads one element format: `load16(vector, i)` gives values
/// i..i+15 (i a multiple of 16) of a stored head vector as floats, without the
/// block scale when the format has one (`scale_block` values share
/// `scale(vector, block)`; 0 = no scale). Float formats also give `load4` (for a
/// head_dim that is not a multiple of 16); block formats give `load32(vector,
/// block)`, the block's values as int8, for the integer q.k. Formats without a
/// specialisation use the scalar kernel.
/// \tparam Elem the KV element format
template <class Elem>
struct reader {
  static constexpr bool available = false;
};

/// The float formats: fp32, fp16 and bf16 values converted 4 at a time.
/// \tparam T the stored value type
template <class T>
struct float_reader {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  static float32x4_t load4(const T* v, std::size_t i) noexcept { return primitives::load4(v + i); }
  static float32x4x4_t load16(const T* v, std::size_t i) noexcept {
    return {{load4(v, i), load4(v, i + 4), load4(v, i + 8), load4(v, i + 12)}};
  }
};

template <>
struct reader<kv::kv_f32> : float_reader<float> {};
template <>
struct reader<kv::kv_f16> : float_reader<f16> {};
template <>
struct reader<kv::kv_bf16> : float_reader<bf16> {};

template <>
struct reader<kv::kv_q8_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv::kv_q8_0::block_elements;
  using block = kv::kv_q8_0::unit;
  static float32x4x4_t load16(const block* v, std::size_t i) noexcept { return to_float16(vld1q_s8(v[i / 32].qs + i % 32)); }
  static int8x16x2_t load32(const block* v, std::size_t b) noexcept {
    return {{vld1q_s8(v[b].qs), vld1q_s8(v[b].qs + 16)}};
  }
  static float scale(const block* v, std::size_t b) noexcept { return scale_to_float(v[b].d); }
};

template <>
struct reader<kv::kv_q4_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv::kv_q4_0::block_elements;
  using block = kv::kv_q4_0::unit;
  // Value j < 16 is the low nibble of byte j, value j >= 16 the high nibble of byte j - 16.
  static float32x4x4_t load16(const block* v, std::size_t i) noexcept {
    const uint8x16_t bytes = vld1q_u8(v[i / 32].qs);
    const uint8x16_t nibbles = i % 32 == 0 ? vandq_u8(bytes, vdupq_n_u8(0x0F)) : vshrq_n_u8(bytes, 4);
    return to_float16(vsubq_s8(vreinterpretq_s8_u8(nibbles), vdupq_n_s8(8)));
  }
  static int8x16x2_t load32(const block* v, std::size_t b) noexcept { return primitives::q4_0_values(v[b].qs); }
  static float scale(const block* v, std::size_t b) noexcept { return scale_to_float(v[b].d); }
};

/// e^x for x <= 0 (softmax arguments after subtracting the max); 0 below -87.
/// The AVX2 kernel's exp8 approximation on 4 lanes: exp(x) = 2^n e^r, n = round(x / ln 2),
/// r = x - n ln 2 in two parts (Cody-Waite), e^r by Cephes expf's degree-6
/// polynomial, here in Horner's order (exp8 uses Estrin's, shorter in latency on Zen 3;
/// not measured on ARM). At most 1 ulp from the correctly rounded e^x on [-87, 0]
/// (measured on every 13th float there, under qemu-aarch64).
inline float32x4_t exp4(float32x4_t x) noexcept {
  const uint32x4_t underflow = vcltq_f32(x, vdupq_n_f32(-87.f));
  x = vmaxq_f32(x, vdupq_n_f32(-87.f));
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t poly = vdupq_n_f32(1.9875691500e-4f);
  poly = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), poly, r);
  poly = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), poly, r);
  poly = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), poly, r);
  poly = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), poly, r);
  poly = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), poly, r);
  const float32x4_t er = vaddq_f32(vfmaq_f32(r, vmulq_f32(poly, r), r), vdupq_n_f32(1.f));
  const int32x4_t pow2n = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);  // n is integral
  const float32x4_t e = vmulq_f32(er, vreinterpretq_f32_s32(pow2n));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(e), underflow));
}

/// Lane n is the sum of the 4 lanes of a[n]: three pairwise adds for four reductions.
inline float32x4_t sum4x4(const float32x4_t* a) noexcept {
  return vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3]));
}

/// The queries of the (up to 4) heads handled together, as the key format wants
/// them: floats zero-padded to the stored width, or Q8_0 blocks (int8 values and
/// the fp16-rounded block scale) for block-quantized keys.
struct group_queries {
  alignas(16) float f[4][attention_max_head_dim];
  alignas(16) std::int8_t q[4][attention_max_head_dim];
  float d[4][attention_max_head_dim / 32];
};

/// Logits of keys k0 and k1 for N query heads (float keys): lane n of val[0] is
/// k0 . q[n], of val[1] k1 . q[n]; lanes of heads >= N are 0.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format (no block scale)
template <int N, class Elem>
inline float32x4x2_t dot2(const group_queries& q, const typename Elem::unit* k0, const typename Elem::unit* k1,
                          std::size_t width) noexcept {
  using R = reader<Elem>;
  float32x4_t acc[8];
HEDGE_UNROLL(8)
  for (int n = 0; n < 8; ++n) acc[n] = vdupq_n_f32(0.f);
  for (std::size_t c = 0; c < width; c += 4) {
    const float32x4_t x0 = R::load4(k0, c), x1 = R::load4(k1, c);
HEDGE_UNROLL(4)
    for (int n = 0; n < N; ++n) {
      const float32x4_t qn = vld1q_f32(q.f[n] + c);
      acc[n] = vfmaq_f32(acc[n], qn, x0);
      acc[4 + n] = vfmaq_f32(acc[4 + n], qn, x1);
    }
  }
  return {{sum4x4(acc), sum4x4(acc + 4)}};
}

/// As dot2, for block-quantized keys against the Q8_0 query: per block, the
/// int8 x int8 products summed exactly in int32 by `Dot` (sdot, or smull +
/// sadalp), then one FMA by the product of the key's and the query's block scales.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format (q8_0 or q4_0)
/// \tparam Dot  the int8 dot product (primitives::sdot_dot or primitives::smull_dot)
template <int N, class Elem, class Dot>
inline float32x4x2_t dot2_blocks(const group_queries& q, const typename Elem::unit* k0,
                                 const typename Elem::unit* k1, std::size_t blocks) noexcept {
  using R = reader<Elem>;
  const Dot dot;
  float32x4_t acc[8];
HEDGE_UNROLL(8)
  for (int n = 0; n < 8; ++n) acc[n] = vdupq_n_f32(0.f);
  for (std::size_t b = 0; b < blocks; ++b) {
    const int8x16x2_t x0 = R::load32(k0, b), x1 = R::load32(k1, b);
    const float d0 = R::scale(k0, b), d1 = R::scale(k1, b);
HEDGE_UNROLL(4)
    for (int n = 0; n < N; ++n) {
      const int8x16_t lo = vld1q_s8(q.q[n] + 32 * b), hi = vld1q_s8(q.q[n] + 32 * b + 16);
      const int32x4_t p0 = dot(dot(vdupq_n_s32(0), x0.val[0], lo), x0.val[1], hi);
      const int32x4_t p1 = dot(dot(vdupq_n_s32(0), x1.val[0], lo), x1.val[1], hi);
      acc[n] = vfmaq_n_f32(acc[n], vcvtq_f32_s32(p0), d0 * q.d[n][b]);
      acc[4 + n] = vfmaq_n_f32(acc[4 + n], vcvtq_f32_s32(p1), d1 * q.d[n][b]);
    }
  }
  return {{sum4x4(acc), sum4x4(acc + 4)}};
}

/// a[n][l] += x[l] * lane n of w for heads n < N (fmla by element needs the lane
/// as a constant, hence the index pack).
template <int N, int Lanes>
inline void fma_heads(float32x4_t (&a)[N][Lanes], const float32x4_t (&x)[Lanes], float32x4_t w) noexcept {
  [&]<int... n>(std::integer_sequence<int, n...>) {
    const auto head = [&]<int h>(std::integral_constant<int, h>) {
HEDGE_UNROLL(8)
      for (int l = 0; l < Lanes; ++l) a[h][l] = vfmaq_laneq_f32(a[h][l], x[l], w, h);
    };
    (head(std::integral_constant<int, n>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

/// acc[n][c .. c + 4 Lanes) += sum_i weights[4 i + n] value_i[c ..]: the tile's
/// values stream once through the registers; each chunk is converted once for all heads.
/// \tparam N     query heads handled together (1..4)
/// \tparam Lanes 4-float vectors of output per query head kept in registers (1, or a multiple of 4)
/// \tparam Elem  the KV element format
template <int N, int Lanes, class Elem>
inline void accumulate_values(float (*acc)[attention_max_head_dim], const typename Elem::unit* const* values,
                              std::size_t count, const float* weights, std::size_t c) noexcept {
  using R = reader<Elem>;
  float32x4_t a[N][Lanes];
HEDGE_UNROLL(4)
  for (int n = 0; n < N; ++n)
HEDGE_UNROLL(8)
    for (int l = 0; l < Lanes; ++l) a[n][l] = vld1q_f32(acc[n] + c + 4 * l);
  for (std::size_t i = 0; i < count; ++i) {
    const typename Elem::unit* v = values[i];
    float32x4_t x[Lanes];
    if constexpr (Lanes == 1) {
      x[0] = R::load4(v, c);
    } else {
HEDGE_UNROLL(2)
      for (int l = 0; l < Lanes; l += 4) {
        const float32x4x4_t chunk = R::load16(v, c + 4 * l);
HEDGE_UNROLL(4)
        for (int k = 0; k < 4; ++k) x[l + k] = chunk.val[k];
      }
    }
    float32x4_t w = vld1q_f32(weights + 4 * i);
    if constexpr (R::scale_block != 0) w = vmulq_n_f32(w, R::scale(v, c / R::scale_block));
    fma_heads<N, Lanes>(a, x, w);
  }
HEDGE_UNROLL(4)
  for (int n = 0; n < N; ++n)
HEDGE_UNROLL(8)
    for (int l = 0; l < Lanes; ++l) vst1q_f32(acc[n] + c + 4 * l, a[n][l]);
}

/// Copies the N queries starting at `queries` into `q` in the form the key format's dot product reads.
template <int N, class Elem>
void load_queries(const float* queries, std::size_t dim, std::size_t width, group_queries& q) noexcept {
  for (int n = 0; n < N; ++n) {
    detail::prepare_decode_query(queries + n * dim, dim, width, q.f[n], reader<Elem>::scale_block != 0,
                                 [&](std::size_t b, const quant::q8_0::block& block) {
                                   std::copy_n(block.qs, 32, q.q[n] + 32 * b);
                                   q.d[n][b] = scale_to_float(block.d);
                                 });
  }
}

/// The states of query heads [first, first + N) of the task's group.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format
/// \tparam Dot  the int8 dot product for block-quantized keys
template <int N, class Elem, class Dot>
void group_partial(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
                   const detail::decode_task& task, std::size_t first) noexcept {
  using R = reader<Elem>;
  constexpr std::size_t tile = detail::decode_tile<Elem>::tile;
  constexpr bool blocks = R::scale_block != 0;
  constexpr int lanes = N >= 3 ? 4 : 8;  // N x lanes <= 16 accumulators, of 32 registers
  const std::size_t dim = kv.head_dim(), units = kv.vector_units();
  const std::size_t width = blocks ? units * R::scale_block : dim;  // values per stored vector
  const bool transform = has_logit_transform(p);

  group_queries q;
  load_queries<N, Elem>(task.queries + first * dim, dim, width, q);
  alignas(16) float acc[N][attention_max_head_dim];
  for (int n = 0; n < N; ++n) std::fill(acc[n], acc[n] + width, 0.f);
  // Running max and sum of heads 0..3 (lanes of heads >= N are computed and ignored).
  float32x4_t max4 = vdupq_n_f32(-std::numeric_limits<float>::infinity()), sum4 = vdupq_n_f32(0.f);
  // Position-major, 4 head lanes per position: logits, then softmax weights.
  alignas(16) float weights[tile * 4];

  detail::decode_tile<Elem> refs;
  for (std::uint64_t pos = task.begin; pos < task.end; pos += refs.count) {
    refs.gather(kv, layer, task.kv_head, pos, task.end);
    const std::size_t count = refs.count;
    for (std::size_t i = 0; i < count; i += 2) {
      const typename Elem::unit* k0 = refs.keys[i];
      const typename Elem::unit* k1 = refs.keys[std::min(i + 1, count - 1)];
      float32x4x2_t dots;
      if constexpr (blocks)
        dots = dot2_blocks<N, Elem, Dot>(q, k0, k1, units);
      else
        dots = dot2<N, Elem>(q, k0, k1, width);
      vst1q_f32(weights + 4 * i, vmulq_n_f32(dots.val[0], p.scale));
      if (i + 1 < count) vst1q_f32(weights + 4 * (i + 1), vmulq_n_f32(dots.val[1], p.scale));
    }
    if (transform) detail::transform_tile_logits<N>(p, task, first, pos, weights, count);
    float32x4_t m = vld1q_f32(weights);
    for (std::size_t i = 1; i < count; ++i) m = vmaxq_f32(m, vld1q_f32(weights + 4 * i));
    const float32x4_t new_max = vmaxq_f32(max4, m);
    // exp(old max - new max): 0 on the first tile (old max -inf), where acc and sum are still 0.
    const float32x4_t correction = exp4(vsubq_f32(max4, new_max));
    float32x4_t total = vdupq_n_f32(0.f);
    for (std::size_t i = 0; i < count; ++i) {
      const float32x4_t e = exp4(vsubq_f32(vld1q_f32(weights + 4 * i), new_max));
      vst1q_f32(weights + 4 * i, e);
      total = vaddq_f32(total, e);
    }
    sum4 = vfmaq_f32(total, sum4, correction);
    max4 = new_max;
    alignas(16) float corr[4];
    vst1q_f32(corr, correction);
    for (int n = 0; n < N; ++n) {
      if (corr[n] == 1.f) continue;
      for (std::size_t j = 0; j < width; j += 4) vst1q_f32(acc[n] + j, vmulq_n_f32(vld1q_f32(acc[n] + j), corr[n]));
    }
    std::size_t c = 0;
    for (; c + 4 * lanes <= width; c += 4 * lanes)
      accumulate_values<N, lanes, Elem>(acc, refs.values, count, weights, c);
    if constexpr (lanes > 4)
      for (; c + 16 <= width; c += 16) accumulate_values<N, 4, Elem>(acc, refs.values, count, weights, c);
    if constexpr (!blocks)  // block widths are whole blocks, so only float formats have a tail
      for (; c < width; c += 4) accumulate_values<N, 1, Elem>(acc, refs.values, count, weights, c);
  }
  alignas(16) float max_out[4], sum_out[4];
  vst1q_f32(max_out, max4);
  vst1q_f32(sum_out, sum4);
  for (int n = 0; n < N; ++n) detail::store_decode_state(task, first + n, dim, acc[n], max_out[n], sum_out[n]);
}

/// Query heads in groups of up to 4 per pass over the K/V tile; the scalar
/// kernel for a head_dim that is not a multiple of 4.
template <class Dot, class Elem>
void partial(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
             const detail::decode_task& task) noexcept {
  if (kv.head_dim() % 4 != 0) return detail::decode_partial(arch::scalar{}, kv, layer, p, task);
  std::size_t first = 0;
  for (; first + 4 <= task.count; first += 4) group_partial<4, Elem, Dot>(kv, layer, p, task, first);
  switch (task.count - first) {
    case 3: group_partial<3, Elem, Dot>(kv, layer, p, task, first); break;
    case 2: group_partial<2, Elem, Dot>(kv, layer, p, task, first); break;
    case 1: group_partial<1, Elem, Dot>(kv, layer, p, task, first); break;
    default: break;
  }
}

}  // namespace hedge::attention::neon

namespace hedge::attention::detail {

/// NEON decode kernel, int8 q.k by smull + sadalp; the scalar kernel for formats without a reader.
/// \tparam Elem the KV element format
template <kv::KvElement Elem>
void decode_partial(arch::neon, const kv::kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
                    const decode_task& task) noexcept {
  if constexpr (!neon::reader<Elem>::available)
    decode_partial(arch::scalar{}, kv, layer, p, task);
  else
    neon::partial<kernels::matmul::neon::smull_dot>(kv, layer, p, task);
}

/// NEON decode kernel with int8 q.k by sdot; float formats have no int8 work and take the neon one.
/// \tparam Elem the KV element format
template <kv::KvElement Elem>
HEDGE_TARGET_DOTPROD void decode_partial(arch::neon_dotprod, const kv::kv_sequence_view<Elem>& kv, std::size_t layer,
                                         const attention_params& p, const decode_task& task) noexcept {
  if constexpr (neon::reader<Elem>::available && neon::reader<Elem>::scale_block != 0)
    neon::partial<kernels::matmul::neon::sdot_dot>(kv, layer, p, task);
  else
    decode_partial(arch::neon{}, kv, layer, p, task);
}

}  // namespace hedge::attention::detail

#endif  // HEDGE_SIMD_NEON
