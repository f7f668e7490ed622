// hedge/attention/decode_avx512.hpp: the AVX-512 (F/BW/VL/DQ + VNNI) decode attention kernel.
//
// Same contract as the scalar reference (decode_scalar.hpp) and the AVX2 kernel's
// skeleton, written once in detail/decode_group.inc (tiles of 64 positions, logits two
// keys at a time, one online-softmax step per tile, values streamed through register
// accumulators), with 16-float lanes and one `reader` per KV format as the only
// per-format code:
//   1. logits, two keys at a time:
//        f32/f16/bf16 keys: float FMAs on the converted key (vcvtph2ps for f16, a
//        16-bit shift for bf16), 16 values per instruction;
//        bf16 keys on a CPU with AVX512_BF16 (checked at run time, no arch tag):
//        vdpbf16ps against the query rounded to bf16 once per group, 32 values per
//        instruction, the key loaded as stored (namespace bf16_keys: the skeleton
//        compiled a second time with its own queries and logits);
//        q8_0/q4_0 keys: vpdpbusd of the key block's bytes as unsigned (q8_0: the
//        sign bit flipped, i.e. k + 128; q4_0: the nibbles, i.e. k + 8) against the
//        query rounded to Q8_0 per 32-value block, the two keys' blocks in the two
//        256-bit halves of one register. The offset (128 or 8 times the query's sum)
//        is the accumulator's start value, per int32 lane the sum of its 4 query
//        bytes times the offset, so it costs nothing; the sum is exact in int32. Then
//        one convert and one FMA per head and block by the two block scales;
//        q4_0 keys 16 at a time instead (step_logits): the stored vectors read as 4-byte
//        words, transposed so each int32 lane is one key, one vpdpbusd per word, nibble
//        half and head against the query bytes that meet that word, the block scales
//        taken from the same transposed words, no horizontal sums;
//   2. online softmax: decode_avx2.hpp's softmax_tile, two position pairs per register;
//   3. values: 16-float lanes per head stay in registers while the tile's values stream
//      through; each 16-value chunk is converted once and feeds every head. q8_0:
//      vpmovsxbd + vcvtdq2ps; q4_0: vpmovzxbd, then vpermps of a 16-float table
//      {-8 .. 7} by the low nibble (and by the byte shifted right by 4): the lookup is
//      the convert. The block scale is folded into the weights once per block
//      (decode_avx2.hpp's fold_value_scales).
//
// Accuracy: as the AVX2 kernel's. For q8_0/q4_0 keys the logits are exact integer dot
// products of the Q8_0-rounded query times the two fp16 block scales (llama.cpp's
// vec_dot for quantized K quantizes q the same way); tests/attention/decode_test.cpp
// holds this to the float tolerance against the float64 reference on the rounded query.
// So does the bf16 key path: each bf16 x bf16 product is exact in float, so its logits
// are those of the bf16-rounded query (round to nearest even, as ggml's flash attention
// converts Q for bf16 K) up to float summation; values stay float FMAs. vdpbf16ps reads
// denormal inputs as zero and ignores MXCSR: a bf16 denormal is below 1.2e-38, so this
// moves no logit by more than float rounding.
//
// The arch tag is avx512vnni (HEDGE_TARGET_AVX512VNNI): an AVX-512 CPU without VNNI
// (Skylake-SP) runs the AVX2 kernel. head_dim not a multiple of 16 with float KV also
// goes to the AVX2 kernel.
#pragma once

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/barrier.hpp"
#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>

#include "hedge/attention/decode_avx2.hpp"
#include "hedge/attention/decode_scalar.hpp"
#include "hedge/attention/decode_tile.hpp"
#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/half.hpp"
#include "hedge/kernels/detail/vector_math.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/kv/element.hpp"
#include "hedge/quant/q8_0.hpp"


namespace hedge::attention::avx512 {

/// How the AVX-512 kernel reads one element format:
///   float formats: `load16(vector, i)`, values i..i+15 as floats;
///   block formats (`scale_block` 32): `key_pair(k0, k1, b)`, block b of two keys as
///   unsigned bytes (k0's in the low half) equal to value + `key_offset`;
///   `load32(vector, b, lo, hi)`, block b's 32 values as floats without the scale;
///   `scale(vector, b)`.
/// Formats without a specialisation run the AVX2 kernel.
/// \tparam Elem the KV element format
template <class Elem>
struct reader {
  static constexpr bool available = false;
};

template <>
struct reader<kv::kv_f32> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_TARGET_AVX512VNNI static __m512 load16(const float* v, std::size_t i) noexcept {
    return _mm512_loadu_ps(v + i);
  }
};

template <>
struct reader<kv::kv_f16> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_TARGET_AVX512VNNI static __m512 load16(const f16* v, std::size_t i) noexcept {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)));
  }
};

template <>
struct reader<kv::kv_bf16> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  // bf16 is the high half of a float: widen and shift (exact).
  HEDGE_TARGET_AVX512VNNI static __m512 load16(const bf16* v, std::size_t i) noexcept {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
};

template <>
struct reader<kv::kv_q8_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv::kv_q8_0::block_elements;
  static constexpr std::int32_t key_offset = 128;
  using block = kv::kv_q8_0::unit;
  HEDGE_TARGET_AVX512VNNI static __m512i key_pair(const block* k0, const block* k1, std::size_t b) noexcept {
    const __m512i both = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k0[b].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k1[b].qs)), 1);
    return _mm512_xor_si512(both, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  HEDGE_TARGET_AVX512VNNI static void load32(const block* v, std::size_t b, __m512& lo, __m512& hi) noexcept {
    lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v[b].qs))));
    hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v[b].qs + 16))));
  }
  HEDGE_TARGET_AVX512VNNI static float scale(const block* v, std::size_t b) noexcept {
    return kernels::matmul::avx2::to_float(v[b].d);
  }
};

template <>
struct reader<kv::kv_q4_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv::kv_q4_0::block_elements;
  static constexpr std::int32_t key_offset = 8;
  using block = kv::kv_q4_0::unit;
  // Value j < 16 is the low nibble of byte j, value j >= 16 the high nibble of byte j - 16:
  // each key's 16 bytes go to two 128-bit lanes, the second shifted right by 4.
  HEDGE_TARGET_AVX512VNNI static __m512i key_pair(const block* k0, const block* k1, std::size_t b) noexcept {
    const __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k0[b].qs)));
    const __m256i c = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k1[b].qs)));
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(a), c, 1);
    const __m512i shifted = _mm512_srlv_epi64(both, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
    return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
  }
  // step_logits: the key's words, 16 positions per register, as vpdpbusd's unsigned
  // operands: the low nibbles, then the high ones.
  static constexpr int word_operands = 2;
  HEDGE_TARGET_AVX512VNNI static __m512i word_operand(__m512i words, int which) noexcept {
    return _mm512_and_si512(which == 0 ? words : _mm512_srli_epi16(words, 4), _mm512_set1_epi8(0x0F));
  }
  HEDGE_TARGET_AVX512VNNI static void load32(const block* v, std::size_t b, __m512& lo, __m512& hi) noexcept {
    const __m512 levels = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v[b].qs)));
    lo = _mm512_permutexvar_ps(bytes, levels);  // vpermps reads the index's low 4 bits
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), levels);
  }
  HEDGE_TARGET_AVX512VNNI static float scale(const block* v, std::size_t b) noexcept {
    return kernels::matmul::avx2::to_float(v[b].d);
  }
};

/// Keys per logits call: q4_0 16 (step_logits), the others 2 (pair_logits). q8_0 reads
/// no faster in cache with step_logits and 26% slower from DRAM
/// (docs/perf-journal.md, "Block-format logits 16 keys at a time").
template <class Elem>
inline constexpr std::size_t key_step = std::is_same_v<Elem, kv::kv_q4_0> ? 16 : 2;

/// The queries of the (up to 4) heads handled together, as the key format wants them:
/// floats zero-padded to the stored width, or per Q8_0 block its 32 values twice (both
/// 256-bit halves, one per key of a pair), the dot product's start value per int32 lane
/// (-key_offset times the lane's 4 query values) and the fp16-rounded scale.
struct group_queries {
  static constexpr std::size_t blocks = attention_max_head_dim / 32;
  alignas(64) float f[4][attention_max_head_dim];
  alignas(64) std::int8_t q[4][blocks][64];
  alignas(64) std::int32_t start[4][blocks][16];
  float d[4][blocks];
  // For step_logits: the stored key vector read as 4-byte words. Per word and head, the
  // query bytes that multiply its bytes (0 against the block scales' bytes; q4_0: one
  // int32 for the low nibbles, one for the high), and per word its layout.
  static constexpr std::size_t max_words = blocks * sizeof(kv::kv_q8_0::unit) / 4;
  struct word_layout {
    std::uint8_t block;       // the block whose values the word holds
    bool last;                // the block's last word
    std::int8_t scale_block;  // the block whose fp16 scale the word holds, or -1
    std::uint8_t scale_half;  // in its low (0) or high (1) 16 bits
  };
  alignas(64) std::int32_t word_q[2][4][max_words];
  std::int32_t block_start[4][blocks];  // -key_offset x the block's query sum
  word_layout words[max_words];
  std::size_t word_count = 0;
};

/// Fills q's word_q, block_start and words for step_logits from its Q8_0 blocks: byte x of
/// a stored key vector (`units` blocks of the format, each an fp16 scale then the values)
/// is block x / size's, at offset o = x % size; o < 2 is the scale, else it holds value
/// o - 2 (q8_0), or values o - 2 and o + 14 as its low and high nibble (q4_0). Blocks are
/// 34 or 18 bytes and start at even bytes, so a word holds values of exactly one block (the
/// half beside a scale is that block's first values or the previous block's last) and at
/// most one scale.
template <int N, class Elem>
HEDGE_TARGET_AVX512VNNI void spread_queries(std::size_t units, group_queries& q) noexcept {
  constexpr std::size_t size = sizeof(typename Elem::unit);
  constexpr bool nibbles = std::is_same_v<Elem, kv::kv_q4_0>;
  const std::size_t bytes = units * size, words = (bytes + 3) / 4;
  q.word_count = words;
  for (std::size_t w = 0; w < words; ++w) {
    group_queries::word_layout layout{0, false, -1, 0};
    for (int n = 0; n < 4; ++n) q.word_q[0][n][w] = q.word_q[1][n][w] = 0;
    for (std::size_t k = 0; k < 4 && 4 * w + k < bytes; ++k) {
      const std::size_t x = 4 * w + k, b = x / size, o = x % size;
      if (o < 2) {
        if (o == 0) {
          layout.scale_block = static_cast<std::int8_t>(b);
          layout.scale_half = static_cast<std::uint8_t>(k / 2);
        }
        continue;
      }
      layout.block = static_cast<std::uint8_t>(b);
      for (int n = 0; n < N; ++n) {
        reinterpret_cast<std::uint8_t*>(&q.word_q[0][n][w])[k] = static_cast<std::uint8_t>(q.q[n][b][o - 2]);
        if constexpr (nibbles)
          reinterpret_cast<std::uint8_t*>(&q.word_q[1][n][w])[k] = static_cast<std::uint8_t>(q.q[n][b][o + 14]);
      }
    }
    q.words[w] = layout;
  }
  for (std::size_t w = 0; w < words; ++w)
    q.words[w].last = w + 1 == words || q.words[w + 1].block != q.words[w].block;
  // The sum of the block's 8 lane start values (load_queries: -key_offset x 4 query bytes each).
  for (int n = 0; n < N; ++n)
    for (std::size_t b = 0; b < units; ++b) q.block_start[n][b] = std::accumulate(q.start[n][b], q.start[n][b] + 8, 0);
}

/// Copies the N queries starting at `queries` into `q` in the form the key format's dot product reads.
template <int N, class Elem>
HEDGE_TARGET_AVX512VNNI void load_queries(const float* queries, std::size_t dim, std::size_t width, group_queries& q) noexcept {
  for (int n = 0; n < N; ++n) {
    detail::prepare_decode_query(queries + n * dim, dim, width, q.f[n], reader<Elem>::scale_block != 0,
                                 [&](std::size_t b, const quant::q8_0::block& block) {
                                   if constexpr (reader<Elem>::scale_block != 0) {
                                     std::copy_n(block.qs, 32, q.q[n][b]);
                                     std::copy_n(block.qs, 32, q.q[n][b] + 32);
                                     for (std::size_t l = 0; l < 8; ++l) {
                                       const std::int32_t sum = block.qs[4 * l] + block.qs[4 * l + 1] +
                                                                block.qs[4 * l + 2] + block.qs[4 * l + 3];
                                       q.start[n][b][l] = q.start[n][b][l + 8] = -reader<Elem>::key_offset * sum;
                                     }
                                     q.d[n][b] = kernels::matmul::avx2::to_float(block.d);
                                   }
                                 });
  }
  if constexpr (key_step<Elem> == 16) spread_queries<N, Elem>(width / 32, q);
}

/// Lane j of the result is the sum of the 16 lanes of a[j].
HEDGE_TARGET_AVX512VNNI inline __m256 sum16x8(const __m512* a) noexcept {
  __m256 h[8];
  for (int j = 0; j < 8; ++j) h[j] = _mm256_add_ps(_mm512_castps512_ps256(a[j]), _mm512_extractf32x8_ps(a[j], 1));
  return avx2::sum8x8(h);
}

/// Logits of keys k0 and k1 for N query heads (float keys): lane n is k0 . q[n], lane
/// 4 + n is k1 . q[n]; lanes of heads >= N are 0.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format (no block scale)
template <int N, class Elem>
HEDGE_TARGET_AVX512VNNI inline __m256 dot2(const group_queries& q, const typename Elem::unit* k0,
                                           const typename Elem::unit* k1, std::size_t width) noexcept {
  using R = reader<Elem>;
  __m512 acc[8];
  for (int n = 0; n < 8; ++n) acc[n] = _mm512_setzero_ps();
  for (std::size_t c = 0; c < width; c += 16) {
    const __m512 x0 = R::load16(k0, c), x1 = R::load16(k1, c);
    for (int n = 0; n < N; ++n) {
      // opaque: one load per use, not 8 x N query registers hoisted out of the loop.
      const __m512 qn = compiler::opaque(_mm512_load_ps(q.f[n] + c));
      acc[n] = _mm512_fmadd_ps(qn, x0, acc[n]);
      acc[4 + n] = _mm512_fmadd_ps(qn, x1, acc[4 + n]);
    }
  }
  return sum16x8(acc);
}

/// As dot2, for block-quantized keys against the Q8_0 query: per block, vpdpbusd of the
/// two keys' unsigned bytes (one register) against the query block (in both halves),
/// starting from the offset correction, so lanes 0..7 sum k0's products and 8..15 k1's
/// exactly; then one FMA per head by the product of the key and query block scales.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format (q8_0 or q4_0)
template <int N, class Elem>
HEDGE_TARGET_AVX512VNNI inline __m256 dot2_blocks(const group_queries& q, const typename Elem::unit* k0,
                                                  const typename Elem::unit* k1, std::size_t blocks) noexcept {
  using R = reader<Elem>;
  __m512 acc[8];
  for (int n = 0; n < 8; ++n) acc[n] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m512i x = R::key_pair(k0, k1, b);
    // The two keys' fp16 scales, converted together and spread over the two halves.
    const __m128i both = _mm_insert_epi16(_mm_cvtsi32_si128(k0[b].d.bits), k1[b].d.bits, 1);
    const __m512 dk = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                            _mm512_castps128_ps512(_mm_cvtph_ps(both)));
    for (int n = 0; n < N; ++n) {
      const __m512i qn = _mm512_load_si512(q.q[n][b]);
      const __m512i start = _mm512_load_si512(q.start[n][b]);
      const __m512i dot = _mm512_dpbusd_epi32(start, x, qn);
      acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dk, _mm512_set1_ps(q.d[n][b])), acc[n]);
    }
  }
  // acc[n]'s halves are (k0, k1) for head n: lay them out as dot2's 8 accumulators.
  __m256 h[8];
  for (int n = 0; n < 4; ++n) {
    h[n] = _mm512_castps512_ps256(acc[n]);
    h[4 + n] = _mm512_extractf32x8_ps(acc[n], 1);
  }
  return avx2::sum8x8(h);
}

/// t[k] = word k of 16 rows, row p in lane p, from t[p] = (row p's 8 words | row p + 8's):
/// an 8 x 8 transpose of 32-bit words in both 256-bit halves, then the halves' quarters
/// put in row order.
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void transpose_words(__m512i (&t)[8]) noexcept {
  __m512i a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm512_unpacklo_epi32(t[i], t[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(t[i], t[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
    b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
    b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  // b[k] (k < 4), 128-bit quarters: rows 0-3 word k, rows 0-3 word k + 4, rows 8-11 word k,
  // rows 8-11 word k + 4; b[k + 4] the same for rows 4-7 and 12-15.
  const __m512i low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_permutex2var_epi64(b[k], low, b[k + 4]);
    t[k + 4] = _mm512_permutex2var_epi64(b[k], high, b[k + 4]);
  }
}

/// Scaled logits of up to 16 block-format keys (`count`; the last one stands in for the
/// rest) for N query heads, into out[4 i + n]. The keys are read as 4-byte words, 8 words
/// of 16 keys at a time transposed so that each int32 lane is one key (transpose_words):
/// per word and head one vpdpbusd against that word's query bytes (spread_queries) sums a
/// block's products for 16 keys at once, exact in int32 from the offset start value; at a
/// block's last word one convert and FMA per head by the 16 keys' scales (read from the
/// same transposed words) times the query block's scale. Against pair_logits: no
/// horizontal sums, and the block scales applied per 16 keys instead of per 2.
template <int N, class Elem>
HEDGE_TARGET_AVX512VNNI inline void step_logits(const group_queries& q, const typename Elem::unit* const* keys,
                                                std::size_t count, std::size_t units, float scale,
                                                float* out) noexcept {
  using R = reader<Elem>;
  const std::size_t bytes = units * sizeof(typename Elem::unit), words = q.word_count;
  const char* rows[16];
  for (std::size_t r = 0; r < 16; ++r) rows[r] = reinterpret_cast<const char*>(keys[std::min(r, count - 1)]);
  __m512 logit[4], dk[group_queries::blocks];
  __m512i acc[4];
  for (int n = 0; n < 4; ++n) logit[n] = _mm512_setzero_ps();
  for (int n = 0; n < N; ++n) acc[n] = _mm512_set1_epi32(q.block_start[n][0]);
  for (std::size_t c = 0; c < words; c += 8) {
    const std::size_t left = bytes - 4 * c;
    const __mmask32 m = left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1);
    __m512i t[8];
    for (int r = 0; r < 8; ++r)
      t[r] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(m, rows[r] + 4 * c)),
                                _mm256_maskz_loadu_epi8(m, rows[r + 8] + 4 * c), 1);
    transpose_words(t);
    for (int k = 0; k < 8 && c + k < words; ++k) {
      const std::size_t w = c + k;
      const group_queries::word_layout layout = q.words[w];
      if (layout.scale_block >= 0) {
        const __m512i bits = layout.scale_half != 0 ? _mm512_srli_epi32(t[k], 16) : t[k];
        dk[layout.scale_block] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(bits));
      }
      for (int o = 0; o < R::word_operands; ++o) {
        const __m512i x = R::word_operand(t[k], o);
        for (int n = 0; n < N; ++n) acc[n] = _mm512_dpbusd_epi32(acc[n], x, _mm512_set1_epi32(q.word_q[o][n][w]));
      }
      if (layout.last) {
        const std::size_t b = layout.block;
        for (int n = 0; n < N; ++n) {
          logit[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[n]), _mm512_mul_ps(dk[b], _mm512_set1_ps(q.d[n][b] * scale)),
                                     logit[n]);
          if (b + 1 < units) acc[n] = _mm512_set1_epi32(q.block_start[n][b + 1]);
        }
      }
    }
  }
  // Head-major (logit[n], 16 keys) to key-major (4 heads per key).
  const __m512 h01lo = _mm512_unpacklo_ps(logit[0], logit[1]), h01hi = _mm512_unpackhi_ps(logit[0], logit[1]);
  const __m512 h23lo = _mm512_unpacklo_ps(logit[2], logit[3]), h23hi = _mm512_unpackhi_ps(logit[2], logit[3]);
  // r[j], quarter Q: key 4Q + j's 4 heads.
  const __m512 r0 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(h01lo), _mm512_castps_pd(h23lo)));
  const __m512 r1 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(h01lo), _mm512_castps_pd(h23lo)));
  const __m512 r2 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(h01hi), _mm512_castps_pd(h23hi)));
  const __m512 r3 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(h01hi), _mm512_castps_pd(h23hi)));
  const __m512 x0 = _mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(1, 0, 1, 0));  // keys 0, 4, 1, 5
  const __m512 y0 = _mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(1, 0, 1, 0));  // keys 2, 6, 3, 7
  const __m512 x1 = _mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(3, 2, 3, 2));  // keys 8, 12, 9, 13
  const __m512 y1 = _mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(3, 2, 3, 2));  // keys 10, 14, 11, 15
  _mm512_store_ps(out, _mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(2, 0, 2, 0)));
  _mm512_store_ps(out + 16, _mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(3, 1, 3, 1)));
  _mm512_store_ps(out + 32, _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(2, 0, 2, 0)));
  _mm512_store_ps(out + 48, _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/// Logits of keys k0 and k1 for N query heads in the format's way.
template <int N, class Elem>
HEDGE_TARGET_AVX512VNNI inline __m256 pair_logits(const group_queries& q, const typename Elem::unit* k0,
                                                  const typename Elem::unit* k1, std::size_t units,
                                                  std::size_t width) noexcept {
  if constexpr (reader<Elem>::scale_block != 0)
    return dot2_blocks<N, Elem>(q, k0, k1, units);
  else
    return dot2<N, Elem>(q, k0, k1, width);
}

/// The values of one position, chunk [c, c + 16 Lanes), as floats (no block scale).
template <int Lanes, class Elem>
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void load_values(const typename Elem::unit* v, std::size_t c,
                                                             __m512 (&x)[Lanes]) noexcept {
  using R = reader<Elem>;
  if constexpr (R::scale_block != 0) {
    static_assert(Lanes % 2 == 0, "block formats are read 32 values at a time");
    for (int l = 0; l < Lanes; l += 2) R::load32(v, c / 32 + l / 2, x[l], x[l + 1]);
  } else {
    for (int l = 0; l < Lanes; ++l) x[l] = R::load16(v, c + 16 * l);
  }
}

/// a[n][l] += w[n] v[c + 16 l ..]: one position's value chunk, converted once, into the
/// N heads' registers; for block formats each 32-value block has its own weights
/// (`weights[g]`, the position's 4 head lanes, g the block within the chunk).
template <int N, int Lanes, class Elem>
HEDGE_TARGET_AVX512VNNI HEDGE_ALWAYS_INLINE void accumulate_position(__m512 (&a)[N][Lanes],
                                                                     const typename Elem::unit* v, std::size_t c,
                                                                     const float* const* weights,
                                                                     std::size_t i) noexcept {
  constexpr int per_weight = reader<Elem>::scale_block != 0 ? 2 : Lanes;
  __m512 x[Lanes];
  load_values<Lanes, Elem>(v, c, x);
  for (int n = 0; n < N; ++n) {
    for (int g = 0; g < Lanes / per_weight; ++g) {
      const __m512 wn = _mm512_set1_ps(weights[g][4 * i + n]);
      for (int l = g * per_weight; l < (g + 1) * per_weight; ++l) a[n][l] = _mm512_fmadd_ps(x[l], wn, a[n][l]);
    }
  }
}

/// acc[n][c .. c + 16 Lanes) += sum_i weight(i, n) value_i[c ..]: the tile's values
/// stream once through the registers; each chunk is converted once for all heads. Each
/// position is one of `upcoming`'s value steps (the next tile's L2 prefetch).
template <int N, int Lanes, class Elem>
HEDGE_TARGET_AVX512VNNI inline void accumulate_values(float (*acc)[attention_max_head_dim],
                                                      const typename Elem::unit* const* values, std::size_t count,
                                                      const float* const* weights, std::size_t c,
                                                      avx2::tile_prefetch<typename Elem::unit>& upcoming) noexcept {
  __m512 a[N][Lanes];
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < Lanes; ++l) a[n][l] = _mm512_load_ps(acc[n] + c + 16 * l);
  for (std::size_t i = 0; i < count; ++i) {
    upcoming.value_step();
    accumulate_position<N, Lanes, Elem>(a, values[i], c, weights, i);
  }
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < Lanes; ++l) _mm512_store_ps(acc[n] + c + 16 * l, a[n][l]);
}

/// acc[0 .. width) *= factor: a head's accumulator rescaled by its softmax correction.
HEDGE_TARGET_AVX512VNNI inline void rescale(float* acc, std::size_t width, float factor) noexcept {
  const __m512 f = _mm512_set1_ps(factor);
  for (std::size_t j = 0; j < width; j += 16) _mm512_store_ps(acc + j, _mm512_mul_ps(_mm512_load_ps(acc + j), f));
}

/// One online-softmax step over a tile's logits (position-major, 4 head lanes per position,
/// `pairs` pairs of positions): the running max and sum of the 4 heads updated, the
/// logits replaced by their weights e^(l - max), corr[n] = the factor head n's earlier
/// sums and accumulators are rescaled by. decode_avx2.hpp's softmax_tile with two pairs
/// per register: half the exps; the kernel 0-7% faster in cache (docs/perf-journal.md).
HEDGE_TARGET_AVX512VNNI inline void softmax_tile(float* weights, std::size_t pairs, __m128& max4, __m128& sum4,
                                                  float* corr) noexcept {
  const std::size_t quads = pairs / 2;
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (std::size_t j = 0; j < quads; ++j) m = _mm512_max_ps(m, _mm512_load_ps(weights + 16 * j));
  __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(m), _mm512_extractf32x8_ps(m, 1));
  if (pairs % 2) m8 = _mm256_max_ps(m8, _mm256_load_ps(weights + 16 * quads));
  const __m128 new_max = _mm_max_ps(max4, _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1)));
  // A head whose logits so far are all -inf (masked) shifts by the lowest float, not by
  // -inf: -inf - -inf would be NaN, which this exp keeps; -inf - lowest gives e^-inf = 0.
  const __m512 shift = _mm512_broadcast_f32x4(_mm_max_ps(new_max, _mm_set1_ps(std::numeric_limits<float>::lowest())));
  const __m128 correction = _mm512_castps512_ps128(kernels::avx512::exp(_mm512_sub_ps(_mm512_castps128_ps512(max4), shift)));
  __m512 total = _mm512_setzero_ps();
  for (std::size_t j = 0; j < quads; ++j) {
    const __m512 e = kernels::avx512::exp(_mm512_sub_ps(_mm512_load_ps(weights + 16 * j), shift));
    _mm512_store_ps(weights + 16 * j, e);
    total = _mm512_add_ps(total, e);
  }
  if (pairs % 2) {
    const __m512 e = kernels::avx512::exp(_mm512_sub_ps(_mm512_castps256_ps512(_mm256_load_ps(weights + 16 * quads)), shift));
    _mm256_store_ps(weights + 16 * quads, _mm512_castps512_ps256(e));
    total = _mm512_add_ps(total, _mm512_maskz_mov_ps(0x00FF, e));
  }
  const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(total), _mm512_extractf32x8_ps(total, 1));
  sum4 = _mm_fmadd_ps(sum4, correction, _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1)));
  max4 = new_max;
  _mm_store_ps(corr, correction);
}

/// The skeleton's parameters for 16-float vectors (detail/decode_group.inc); the
/// prefetches and the scale folding are the AVX2 kernel's.
inline constexpr std::size_t vector_floats = 16;
template <int N>
inline constexpr int value_lanes = N >= 3 ? 4 : 8;  // N x lanes accumulators: 16 of the 32 registers
template <class Elem>
inline constexpr int tail_lanes = reader<Elem>::scale_block != 0 ? 2 : 1;  // block formats: 32 values at a time
template <class Unit>
using next_tile_prefetch = avx2::tile_prefetch<Unit>;
// With the next tile in L2, the float formats' logits need no L1 prefetch (f16 from DRAM
// 6% faster, f32 10% faster in cache without it); q8_0's are 7% slower from DRAM without.
template <class Elem>
inline constexpr bool l1_prefetch = reader<Elem>::scale_block != 0;
using avx2::fold_value_scales;
using avx2::prefetch_bytes;
using avx2::prefetch_lines;

#define HEDGE_DECODE_TARGET HEDGE_TARGET_AVX512VNNI
#include "hedge/attention/detail/decode_group.inc"
#undef HEDGE_DECODE_TARGET

/// bf16 keys by vdpbf16ps, on CPUs with AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4
/// and 5; not Ice Lake or Cascade Lake). The skeleton included a second time: this
/// namespace's group_queries, load_queries and pair_logits hide avx512's; everything
/// else (reader, values, softmax, prefetch) is found in avx512. The query is rounded to
/// bf16 once per group (round to nearest even, f32_to_bf16: what ggml's flash attention
/// does to Q for bf16 K, whose vec_dot type is bf16), then one vdpbf16ps per 32 values,
/// key and head sums 2 exact products per lane into float (widen + shift + FMA before:
/// 16 values per FMA plus 2 ops per 16 key values).
namespace bf16_keys {

/// The queries of up to 4 heads rounded to bf16, zero-padded to a multiple of 32.
struct group_queries {
  alignas(64) bf16 b[4][attention_max_head_dim];
};

/// Rounds the N queries starting at `queries` to bf16 into `q`.
template <int N, class Elem>
HEDGE_TARGET_AVX512BF16 void load_queries(const float* queries, std::size_t dim, std::size_t,
                                          group_queries& q) noexcept {
  for (int n = 0; n < N; ++n) {
    for (std::size_t j = 0; j < dim; ++j) q.b[n][j] = f32_to_bf16(queries[n * dim + j]);
    std::fill(q.b[n] + dim, q.b[n] + (dim + 31) / 32 * 32, bf16{});
  }
}

/// Logits of bf16 keys k0 and k1 for N query heads, laid out as avx512::dot2's: lane n
/// is k0 . q[n], lane 4 + n is k1 . q[n]. `width` is a multiple of 16; an odd 16-value
/// tail is read with a mask (the query's padding is zero).
template <int N, class Elem>
HEDGE_TARGET_AVX512BF16 inline __m256 pair_logits(const group_queries& q, const bf16* k0, const bf16* k1,
                                                  std::size_t, std::size_t width) noexcept {
  static_assert(std::is_same_v<Elem, kv::kv_bf16>);
  __m512 acc[8];
  for (int n = 0; n < 8; ++n) acc[n] = _mm512_setzero_ps();
  for (std::size_t c = 0; c < width; c += 32) {
    const __mmask32 m = width - c >= 32 ? ~__mmask32{0} : __mmask32{0xFFFF};
    const __m512bh x0 = (__m512bh)_mm512_maskz_loadu_epi16(m, k0 + c);
    const __m512bh x1 = (__m512bh)_mm512_maskz_loadu_epi16(m, k1 + c);
    for (int n = 0; n < N; ++n) {
      // opaque: as dot2, one load per use.
      const __m512bh qn = (__m512bh)compiler::opaque(_mm512_load_si512(q.b[n] + c));
      acc[n] = _mm512_dpbf16_ps(acc[n], qn, x0);
      acc[4 + n] = _mm512_dpbf16_ps(acc[4 + n], qn, x1);
    }
  }
  return sum16x8(acc);
}

#define HEDGE_DECODE_TARGET HEDGE_TARGET_AVX512BF16
#include "hedge/attention/detail/decode_group.inc"
#undef HEDGE_DECODE_TARGET

}  // namespace bf16_keys

}  // namespace hedge::attention::avx512

namespace hedge::attention::detail {

/// AVX-512 VNNI decode kernel: query heads in groups of up to 4 per pass over the K/V
/// tile; the AVX2 kernel for formats without a reader, or float KV whose head_dim is
/// not a multiple of 16.
/// \tparam Elem the KV element format
template <kv::KvElement Elem>
void decode_partial(arch::avx512vnni, const kv::kv_sequence_view<Elem>& kv, std::size_t layer,
                    const attention_params& p, const decode_task& task) noexcept {
  if constexpr (!avx512::reader<Elem>::available) {
    decode_partial(arch::avx2{}, kv, layer, p, task);
  } else {
    if (avx512::reader<Elem>::scale_block == 0 && kv.head_dim() % 16 != 0)
      return decode_partial(arch::avx2{}, kv, layer, p, task);
    // bf16 keys take vdpbf16ps where the CPU has AVX512_BF16, checked here rather than by
    // an arch tag of its own: a tag per feature would multiply every dispatch list and
    // the compile matrix for this one kernel.
    if constexpr (std::is_same_v<Elem, kv::kv_bf16>) {
      if (arch::detail::cpu().avx512bf16) return avx512::bf16_keys::head_groups<Elem>(kv, layer, p, task);
    }
    avx512::head_groups<Elem>(kv, layer, p, task);
  }
}

}  // namespace hedge::attention::detail

#endif  // x86
