// hedge/attention/decode_avx2.hpp: the AVX2 + FMA + F16C decode attention kernel.
//
// Same contract as the scalar reference (decode_scalar.hpp), reading K and V in
// their stored format; nothing is dequantized to memory. With GQA every K and V
// value meets the (up to 4) query heads handled together, so the kernel is
// bound by instructions per KV byte, not by memory, unless each K/V element is
// converted once per group and every loaded register feeds several FMAs:
//
// Per tile of up to 64 consecutive positions (gathered across page runs):
//   1. logits, two keys at a time: each 8-value chunk of the queries is loaded
//      once for both keys, each key chunk once for all heads (2 x 4 accumulators),
//      and the 8 accumulators are reduced together (one transposed hadd tree), so
//      the tile's logits come out position-major, 4 head lanes per position:
//        f32/f16/bf16 keys: float FMAs on the converted key (vcvtph2ps for f16);
//        q8_0/q4_0 keys: integer dot products against the query quantized to
//        Q8_0 per 32-value block (vpmaddubsw/vpmaddwd, as llama.cpp and the Q8_0
//        GEMV do), then one float FMA per block with the product of the two
//        block scales;
//   2. online softmax on that layout, 8 lanes = 2 positions x 4 heads at a time:
//      tile max, one rescale of the running state, exp (Cephes-style polynomial,
//      < 2 ulp on [-87, 0]); for q8_0/q4_0 values each block's scale is folded
//      into the weights here (one multiply per 2 positions x 4 heads);
//   3. values: 16 output lanes per query head (32 when fewer than 3 heads) stay
//      in registers while the tile's value vectors stream through them; each
//      value chunk is converted once and feeds every head (FlashAttention's tiling).
// The group's output accumulators live on the stack and reach the workspace once,
// so two threads never write neighbouring workspace lines while they run.
//
// Accuracy: float keys give the scalar kernel's result up to float rounding. For
// q8_0/q4_0 keys the query is rounded to Q8_0 (ggml's reference quantizer,
// hedge/quant/q8_0.hpp): the logits are then exact integer dot products times the
// two fp16 block scales, i.e. attention of the Q8_0-rounded query, which the tests
// check against the float64 reference on that query to the float tolerance, and
// against the unrounded query to the looser bound in docs/attention.md.
//
// The tile loop is detail/decode_group.inc, which the AVX-512 kernel shares; this file
// gives it the 8-float parts. The code is compiled with a target attribute, so it exists in every x86 build
// and `arch::avx2::supported()` decides at run time whether it may run.
#pragma once

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/barrier.hpp"
#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hedge/attention/decode_scalar.hpp"
#include "hedge/attention/decode_tile.hpp"
#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/kv/element.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::attention::avx2 {

namespace primitives = kernels::matmul::avx2;  // load8, to_float, unpack_nibbles_16, dot_u8s8_i32

/// How the AVX2 kernel reads one element format: `load8(vector, i)` gives values
/// i..i+7 of a stored head vector as floats, without the per-block scale when the
/// format has one (`scale_block` values share `scale(vector, block)`; 0 = no scale).
/// Block formats also give `load32(vector, block)`, the block's values as int8,
/// for the integer q.k. Formats without a specialisation use the scalar kernel.
/// \tparam Elem the KV element format
template <class Elem>
struct reader {
  static constexpr bool available = false;
};

template <>
struct reader<kv::kv_f32> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_TARGET_AVX2 static __m256 load8(const float* v, std::size_t i) noexcept { return primitives::load8(v + i); }
};

template <>
struct reader<kv::kv_f16> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_TARGET_AVX2 static __m256 load8(const f16* v, std::size_t i) noexcept { return primitives::load8(v + i); }
};

template <>
struct reader<kv::kv_bf16> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_TARGET_AVX2 static __m256 load8(const bf16* v, std::size_t i) noexcept { return primitives::load8(v + i); }
};

template <>
struct reader<kv::kv_q8_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv::kv_q8_0::block_elements;
  using block = kv::kv_q8_0::unit;
  HEDGE_TARGET_AVX2 static __m256 load8(const block* v, std::size_t i) noexcept {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(v[i / 32].qs + i % 32));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
  }
  HEDGE_TARGET_AVX2 static __m256i load32(const block* v, std::size_t b) noexcept {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v[b].qs));
  }
  HEDGE_TARGET_AVX2 static float scale(const block* v, std::size_t b) noexcept { return primitives::to_float(v[b].d); }
};

template <>
struct reader<kv::kv_q4_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv::kv_q4_0::block_elements;
  using block = kv::kv_q4_0::unit;
  // Value j < 16 is the low nibble of byte j, value j >= 16 the high nibble of byte j - 16.
  HEDGE_TARGET_AVX2 static __m256 load8(const block* v, std::size_t i) noexcept {
    const std::size_t j = i % 32;
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(v[i / 32].qs + j % 16));
    if (j >= 16) bytes = _mm_srli_epi16(bytes, 4);
    bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(8)));
  }
  HEDGE_TARGET_AVX2 static __m256i load32(const block* v, std::size_t b) noexcept {
    return _mm256_sub_epi8(primitives::unpack_nibbles_16(v[b].qs), _mm256_set1_epi8(8));
  }
  HEDGE_TARGET_AVX2 static float scale(const block* v, std::size_t b) noexcept { return primitives::to_float(v[b].d); }
};

/// e^x for x <= 0 (softmax arguments after subtracting the max); 0 below -87. Not
/// kernels::avx2::exp (vector_math.hpp): that one serves every x (overflow blend, a
/// convert and an integer add on the dependency chain), and decode's softmax pass is
/// bound by this chain's latency.
/// exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 in two parts (Cody-Waite),
/// e^r by Cephes expf's degree-6 polynomial. n is rounded by adding 1.5 * 2^23 + 127:
/// floats in [2^23, 2^24) are spaced 1 apart, so the sum is n + 127 + 1.5 * 2^23 and its
/// low mantissa bits hold n + 127 (in [1, 127] here), the biased exponent of 2^n, which a
/// shift moves into place: no round, convert or integer add (2 instructions fewer).
HEDGE_TARGET_AVX2 inline __m256 exp8(__m256 x) noexcept {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.f));
  const __m256 magic = _mm256_set1_ps(12582912.f + 127.f);
  const __m256 biased = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
  const __m256 n = _mm256_sub_ps(biased, magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // The polynomial by Estrin's scheme (three independent pairs, then r^2 twice) and
  // 2^n (1 + r + r^2 poly) as (r + r^2 poly) 2^n + 2^n: 5 dependent FMAs after r
  // instead of 9 operations. The decode softmax pass (32 of these per tile) is bound
  // by the chain's latency, not by its operations, so the shorter chain is faster
  // (docs/perf-journal.md, attention).
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 p10 = _mm256_fmadd_ps(_mm256_set1_ps(1.6666665459e-1f), r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 p32 = _mm256_fmadd_ps(_mm256_set1_ps(8.3334519073e-3f), r, _mm256_set1_ps(4.1665795894e-2f));
  const __m256 p54 = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
  const __m256 poly = _mm256_fmadd_ps(_mm256_fmadd_ps(p54, r2, p32), r2, p10);
  const __m256 pow2n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(biased), 23));
  return _mm256_andnot_ps(underflow, _mm256_fmadd_ps(_mm256_fmadd_ps(poly, r2, r), pow2n, pow2n));
}

/// Lane j of the result is the sum of the 8 lanes of a[j]: six hadds, two
/// cross-lane permutes and one add for eight reductions.
HEDGE_TARGET_AVX2 inline __m256 sum8x8(const __m256* a) noexcept {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/// How far ahead of the logits loop each of a task's K and V streams is prefetched.
inline constexpr std::size_t prefetch_bytes = 1024;

/// Prefetches the cache lines of two positions' stored K and V vectors (`bytes` each)
/// into L1, in one loop: a loop per vector costs more instructions than the prefetches.
template <class Unit>
HEDGE_TARGET_AVX2 inline void prefetch_lines(const Unit* k0, const Unit* v0, const Unit* k1, const Unit* v1,
                                             std::size_t bytes) noexcept {
  const char* a = reinterpret_cast<const char*>(k0);
  const char* b = reinterpret_cast<const char*>(v0);
  const char* c = reinterpret_cast<const char*>(k1);
  const char* d = reinterpret_cast<const char*>(v1);
  for (std::size_t offset = 0; offset < bytes; offset += 64) {
    _mm_prefetch(a + offset, _MM_HINT_T0);
    _mm_prefetch(b + offset, _MM_HINT_T0);
    _mm_prefetch(c + offset, _MM_HINT_T0);
    _mm_prefetch(d + offset, _MM_HINT_T0);
  }
}

/// The next tile's K and V vectors, prefetched into L2 in step with this tile's work: the
/// first half of its positions one per logits step (a pair of keys), the rest a cache line
/// of K and one of V at a time, evenly over the values pass's `value_steps` (position x
/// chunk). Spread so, the requests reach DRAM at about the rate it serves them; issued all
/// in the logits loop, they came in a burst the memory system did not take, and DRAM idled
/// during the values (docs/perf-journal.md, attention).
template <class Unit>
class tile_prefetch {
 public:
  tile_prefetch(const Unit* const* keys, const Unit* const* values, std::size_t count, std::size_t vector_bytes,
                std::size_t value_steps) noexcept
      : keys_(keys), values_(values), count_(count), bytes_(vector_bytes), in_logits_((count + 1) / 2) {
    // Line pairs left for the values pass, issued `per_tick_` at every `stride_`-th step.
    const std::size_t left = std::max<std::size_t>(1, (count - in_logits_) * ((vector_bytes + 63) / 64));
    per_tick_ = (left + value_steps - 1) / value_steps;
    stride_ = countdown_ = std::max<std::size_t>(1, value_steps * per_tick_ / left);
  }
  HEDGE_ALWAYS_INLINE void logits_step() noexcept {
    if (pos_ >= in_logits_) return;
    const char* k = reinterpret_cast<const char*>(keys_[pos_]);
    const char* v = reinterpret_cast<const char*>(values_[pos_]);
    for (std::size_t offset = 0; offset < bytes_; offset += 64) {
      _mm_prefetch(k + offset, _MM_HINT_T1);
      _mm_prefetch(v + offset, _MM_HINT_T1);
    }
    ++pos_;
  }
  HEDGE_ALWAYS_INLINE void value_step() noexcept {
    if (--countdown_ != 0) return;
    countdown_ = stride_;
    for (std::size_t t = 0; t < per_tick_ && pos_ < count_; ++t) {
      _mm_prefetch(reinterpret_cast<const char*>(keys_[pos_]) + offset_, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(values_[pos_]) + offset_, _MM_HINT_T1);
      if ((offset_ += 64) >= bytes_) {
        offset_ = 0;
        ++pos_;
      }
    }
  }

 private:
  const Unit* const* keys_;
  const Unit* const* values_;
  std::size_t count_, bytes_, in_logits_, per_tick_, stride_, countdown_;
  std::size_t pos_ = 0, offset_ = 0;  // the next line pair: byte offset_ of position pos_'s K and V
};

/// The AVX2 kernel's stand-in for tile_prefetch: nothing (its L1 prefetch alone measured
/// best on the Zen 3 it was tuned on).
struct no_tile_prefetch {
  template <class... Args>
  explicit no_tile_prefetch(const Args&...) noexcept {}
  void logits_step() noexcept {}
  void value_step() noexcept {}
};

/// The online-softmax step of one tile (Milakov & Gimelshein), 8 lanes = 2 positions x
/// 4 heads at a time: the tile max, one rescale of the running max4 / sum4 (heads in
/// lanes 0..3), and the logits in `weights` (position-major, `pairs` pairs) replaced by
/// exp(logit - new max). corr[n] gets exp(old max - new max), by which head n's
/// accumulator must be scaled (0 on the first tile: old max -inf, accumulators still 0).
/// The AVX-512 kernel has its own, two pairs per register (decode_avx512.hpp).
HEDGE_TARGET_AVX2 inline void softmax_tile(float* weights, std::size_t pairs, __m128& max4, __m128& sum4,
                                           float* corr) noexcept {
  __m256 m = _mm256_load_ps(weights);
  for (std::size_t j = 1; j < pairs; ++j) m = _mm256_max_ps(m, _mm256_load_ps(weights + 8 * j));
  const __m128 new_max = _mm_max_ps(max4, _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1)));
  const __m256 shift = _mm256_set_m128(new_max, new_max);
  const __m128 correction = _mm256_castps256_ps128(exp8(_mm256_sub_ps(_mm256_castps128_ps256(max4), shift)));
  __m256 total = _mm256_setzero_ps();
  for (std::size_t j = 0; j < pairs; ++j) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(weights + 8 * j), shift));
    _mm256_store_ps(weights + 8 * j, e);
    total = _mm256_add_ps(total, e);
  }
  sum4 = _mm_fmadd_ps(sum4, correction, _mm_add_ps(_mm256_castps256_ps128(total), _mm256_extractf128_ps(total, 1)));
  max4 = new_max;
  _mm_store_ps(corr, correction);
}

/// The queries of the (up to 4) heads handled together, as the key format wants
/// them: floats zero-padded to the stored width, or Q8_0 blocks (int8 values and
/// the fp16-rounded block scale broadcast to 8 lanes) for block-quantized keys.
struct group_queries {
  alignas(32) float f[4][attention_max_head_dim];
  alignas(32) std::int8_t q[4][attention_max_head_dim];     // Q8_0 values
  alignas(32) std::uint8_t a[4][attention_max_head_dim];    // |q|, the unsigned operand of vpmaddubsw
  alignas(32) float d[4][attention_max_head_dim / 32][8];
};

/// acc[n] += q[n][c .. c + 8) * k0[c ..] and acc[4 + n] += q[n][c ..] * k1[c ..] for
/// the N heads: one 8-value chunk of dot2. A named target function, not a lambda: a
/// lambda does not inherit its enclosing function's target attribute.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format (no block scale)
template <int N, class Elem>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void dot2_chunk(__m256 (&acc)[8], const group_queries& q,
                                                      const typename Elem::unit* k0, const typename Elem::unit* k1,
                                                      std::size_t c) noexcept {
  using R = reader<Elem>;
  const __m256 x0 = R::load8(k0, c), x1 = R::load8(k1, c);
  for (int n = 0; n < N; ++n) {
    __m256 qn = _mm256_load_ps(q.f[n] + c);
    qn = compiler::opaque(qn);
    acc[n] = _mm256_fmadd_ps(qn, x0, acc[n]);
    acc[4 + n] = _mm256_fmadd_ps(qn, x1, acc[4 + n]);
  }
}

/// Logits of keys k0 and k1 for N query heads (float keys): lane n is k0 . q[n],
/// lane 4 + n is k1 . q[n]; lanes of heads >= N are 0.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format (no block scale)
template <int N, class Elem>
HEDGE_TARGET_AVX2 inline __m256 dot2(const group_queries& q, const typename Elem::unit* k0,
                                     const typename Elem::unit* k1, std::size_t width) noexcept {
  __m256 acc[8];
  for (int n = 0; n < 8; ++n) acc[n] = _mm256_setzero_ps();
  std::size_t c = 0;
  for (; c + 16 <= width; c += 16) {  // two chunks per iteration: half the loop overhead
    dot2_chunk<N, Elem>(acc, q, k0, k1, c);
    dot2_chunk<N, Elem>(acc, q, k0, k1, c + 8);
  }
  if (c < width) dot2_chunk<N, Elem>(acc, q, k0, k1, c);
  return sum8x8(acc);
}

/// As dot2, for block-quantized keys against the Q8_0 query: per block, int8 x
/// int8 products summed exactly in int32 (|q| . sign(k, q) by vpmaddubsw, pairs
/// by vpmaddwd; |values| <= 127, so no int16 pair sum saturates), then one FMA by
/// the product of the key's and the query's block scales. |q| is precomputed and
/// the key is the operand that takes the sign, so per block only the two keys and
/// their scales stay live beside the 8 accumulators (no spills).
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format (q8_0 or q4_0)
template <int N, class Elem>
HEDGE_TARGET_AVX2 inline __m256 dot2_blocks(const group_queries& q, const typename Elem::unit* k0,
                                            const typename Elem::unit* k1, std::size_t blocks) noexcept {
  using R = reader<Elem>;
  __m256 acc[8];
  for (int n = 0; n < 8; ++n) acc[n] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m256i x0 = R::load32(k0, b), x1 = R::load32(k1, b);
    const __m256 d0 = _mm256_set1_ps(R::scale(k0, b)), d1 = _mm256_set1_ps(R::scale(k1, b));
    for (int n = 0; n < N; ++n) {
      const __m256i qn = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.q[n] + 32 * b));
      __m256i an = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.a[n] + 32 * b));
      __m256 dq = _mm256_load_ps(q.d[n][b]);
      an = compiler::opaque(an);
      dq = compiler::opaque(dq);
      const __m256 p0 = _mm256_cvtepi32_ps(primitives::dot_u8s8_i32(an, _mm256_sign_epi8(x0, qn)));
      const __m256 p1 = _mm256_cvtepi32_ps(primitives::dot_u8s8_i32(an, _mm256_sign_epi8(x1, qn)));
      acc[n] = _mm256_fmadd_ps(p0, _mm256_mul_ps(d0, dq), acc[n]);
      acc[4 + n] = _mm256_fmadd_ps(p1, _mm256_mul_ps(d1, dq), acc[4 + n]);
    }
  }
  return sum8x8(acc);
}

/// Logits of keys k0 and k1 for N query heads in the format's way: dot2 for float keys,
/// dot2_blocks for block-quantized ones (`units` blocks, `width` values per vector).
template <int N, class Elem>
HEDGE_TARGET_AVX2 inline __m256 pair_logits(const group_queries& q, const typename Elem::unit* k0,
                                            const typename Elem::unit* k1, std::size_t units,
                                            std::size_t width) noexcept {
  if constexpr (reader<Elem>::scale_block != 0)
    return dot2_blocks<N, Elem>(q, k0, k1, units);
  else
    return dot2<N, Elem>(q, k0, k1, width);
}

/// Block formats: row b of `scaled` (rows `stride` floats apart) gets the tile's weights
/// (position-major, 4 head lanes) times the scale of each position's value block b, two
/// positions per multiply (an odd count's last pair repeats its last position, whose
/// second half weighs 0), so the value loop multiplies raw int8 values.
template <class Elem>
HEDGE_TARGET_AVX2 inline void fold_value_scales(const typename Elem::unit* const* values, std::size_t count,
                                                std::size_t units, const float* weights, float* scaled,
                                                std::size_t stride) noexcept {
  using R = reader<Elem>;
  for (std::size_t b = 0; b < units; ++b) {
    for (std::size_t j = 0; j < (count + 1) / 2; ++j) {
      const float s0 = R::scale(values[2 * j], b);
      const float s1 = R::scale(values[std::min(2 * j + 1, count - 1)], b);
      _mm256_store_ps(scaled + b * stride + 8 * j,
                      _mm256_mul_ps(_mm256_load_ps(weights + 8 * j), _mm256_set_m128(_mm_set1_ps(s1), _mm_set1_ps(s0))));
    }
  }
}

/// a[n][l] += w[n] v[offset + 8 l ..]: one position's value chunk, converted once, into
/// the N heads' registers (a named target function: see dot2_chunk).
/// \tparam N     query heads handled together (1..4)
/// \tparam Lanes 8-float vectors of output per query head kept in registers
/// \tparam Elem  the KV element format
template <int N, int Lanes, class Elem>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void accumulate_position(__m256 (&a)[N][Lanes], const typename Elem::unit* v,
                                                               std::size_t offset, const float* w) noexcept {
  using R = reader<Elem>;
  __m256 x[Lanes];
  for (int l = 0; l < Lanes; ++l) x[l] = R::load8(v, offset + 8 * l);
  for (int n = 0; n < N; ++n) {
    const __m256 wn = _mm256_broadcast_ss(w + n);
    for (int l = 0; l < Lanes; ++l) a[n][l] = _mm256_fmadd_ps(x[l], wn, a[n][l]);
  }
}

/// acc[n][c .. c + 8 Lanes) += sum_i weights[4 i + n] value_i[c ..] (for block formats the
/// weights of the chunk's block): the tile's values stream once through the registers;
/// each chunk is converted once for all heads. This width prefetches no next tile
/// (no_tile_prefetch).
/// \tparam N     query heads handled together (1..4)
/// \tparam Lanes 8-float vectors of output per query head kept in registers
/// \tparam Elem  the KV element format
template <int N, int Lanes, class Elem>
HEDGE_TARGET_AVX2 inline void accumulate_values(float (*acc)[attention_max_head_dim],
                                                const typename Elem::unit* const* values, std::size_t count,
                                                const float* const* block_weights, std::size_t c,
                                                no_tile_prefetch&) noexcept {
  using R = reader<Elem>;
  // The chunk lies in one value block, whose weights are block_weights[0].
  static_assert(R::scale_block == 0 || 8 * Lanes <= R::scale_block);
  const float* weights = block_weights[0];
  // For block formats, address the block holding value c once, then offsets inside it.
  std::size_t block = 0, offset = c;
  if constexpr (R::scale_block != 0) {
    block = c / R::scale_block;
    offset = c % R::scale_block;
  }
  __m256 a[N][Lanes];
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < Lanes; ++l) a[n][l] = _mm256_load_ps(acc[n] + c + 8 * l);
  std::size_t i = 0;
  for (; i + 2 <= count; i += 2) {  // two positions per iteration: half the loop overhead
    accumulate_position<N, Lanes, Elem>(a, values[i] + block, offset, weights + 4 * i);
    accumulate_position<N, Lanes, Elem>(a, values[i + 1] + block, offset, weights + 4 * (i + 1));
  }
  if (i < count) accumulate_position<N, Lanes, Elem>(a, values[i] + block, offset, weights + 4 * i);
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < Lanes; ++l) _mm256_store_ps(acc[n] + c + 8 * l, a[n][l]);
}

/// Copies the N queries starting at `first` into `q` in the form the key format's dot product reads.
template <int N, class Elem>
HEDGE_TARGET_AVX2 void load_queries(const float* queries, std::size_t dim, std::size_t width,
                                    group_queries& q) noexcept {
  for (int n = 0; n < N; ++n) {
    detail::prepare_decode_query(queries + n * dim, dim, width, q.f[n], reader<Elem>::scale_block != 0,
                                 [&](std::size_t b, const quant::q8_0::block& block) {
                                   std::copy_n(block.qs, 32, q.q[n] + 32 * b);
                                   for (std::size_t j = 0; j < 32; ++j)
                                     q.a[n][32 * b + j] =
                                         static_cast<std::uint8_t>(block.qs[j] < 0 ? -block.qs[j] : block.qs[j]);
                                   std::fill_n(q.d[n][b], 8, primitives::to_float(block.d));
                                 });
  }
}

/// acc[0 .. width) *= factor: a head's accumulator rescaled by its softmax correction.
HEDGE_TARGET_AVX2 inline void rescale(float* acc, std::size_t width, float factor) noexcept {
  const __m256 f = _mm256_set1_ps(factor);
  for (std::size_t j = 0; j < width; j += 8) _mm256_store_ps(acc + j, _mm256_mul_ps(_mm256_load_ps(acc + j), f));
}

/// The skeleton's parameters for 8-float vectors (detail/decode_group.inc).
inline constexpr std::size_t vector_floats = 8;
template <int N>
inline constexpr int value_lanes = N >= 3 ? 2 : 4;  // >= 8 independent accumulators where the registers allow
template <class Elem>
inline constexpr int tail_lanes = 1;
template <class Unit>
using next_tile_prefetch = no_tile_prefetch;
template <class Elem>
inline constexpr bool l1_prefetch = true;
template <class Elem>
inline constexpr std::size_t key_step = 2;  // pair_logits for every format

#define HEDGE_DECODE_TARGET HEDGE_TARGET_AVX2
#include "hedge/attention/detail/decode_group.inc"
#undef HEDGE_DECODE_TARGET

}  // namespace hedge::attention::avx2

namespace hedge::attention::detail {

/// AVX2 decode kernel: query heads in groups of up to 4 per pass over the K/V
/// tile; falls back to the scalar kernel for formats without a reader or a
/// head_dim that is not a multiple of 8.
/// \tparam Elem the KV element format
template <kv::KvElement Elem>
void decode_partial(arch::avx2, const kv::kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
                    const decode_task& task) noexcept {
  if constexpr (!avx2::reader<Elem>::available) {
    decode_partial(arch::scalar{}, kv, layer, p, task);
  } else {
    if (kv.head_dim() % 8 != 0) return decode_partial(arch::scalar{}, kv, layer, p, task);
    avx2::head_groups<Elem>(kv, layer, p, task);
  }
}

}  // namespace hedge::attention::detail

#endif  // x86
