// hedge/attention/decode_avx2.hpp: the AVX2 + FMA + F16C decode attention kernel.
//
// Same contract and result as the scalar reference (decode_scalar.hpp), reading K
// and V in their stored format: f16 via vcvtph2ps, bf16 by a 16-bit shift, q8_0
// as int8 -> float with the block scale folded into the dot product (keys) or
// into the softmax weight (values), so nothing is dequantized to memory.
//
// Per tile of up to 64 consecutive positions (gathered across page runs), for the (up to 4)
// query heads of a GQA group handled together:
//   1. logits: one pass over the tile's keys, each key vector loaded once for all
//      query heads;
//   2. online softmax: tile max, one rescale of the running state, exp of the
//      tile's logits 8 at a time (Cephes-style polynomial, < 2 ulp on [-87, 0]);
//   3. values: 16 output lanes per query head stay in registers while the tile's
//      value vectors stream through them (FlashAttention's tiling, Dao et al.).
// The code is compiled with a target attribute, so it exists in every x86 build
// and `arch::avx2::supported()` decides at run time whether it may run.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hedge/attention/decode_scalar.hpp"
#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kv/element.hpp"

namespace hedge {
namespace attention_avx2 {

namespace primitives = kernels::matmul::avx2;  // load8, sum_lanes, to_float shared with the matmul kernels

/// How the AVX2 kernel reads one element format: `load8(vector, i)` gives values
/// i..i+7 of a stored head vector as floats, without the per-block scale when the
/// format has one (`scale_block` values share `scale(vector, block)`; 0 = no scale).
/// Formats without a specialisation use the scalar kernel.
/// \tparam Elem the KV element format
template <class Elem>
struct reader {
  static constexpr bool available = false;
};

template <>
struct reader<kv_f32> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_AVX2_TARGET static __m256 load8(const float* v, std::size_t i) noexcept { return primitives::load8(v + i); }
};

template <>
struct reader<kv_f16> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_AVX2_TARGET static __m256 load8(const f16* v, std::size_t i) noexcept { return primitives::load8(v + i); }
};

template <>
struct reader<kv_bf16> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = 0;
  HEDGE_AVX2_TARGET static __m256 load8(const bf16* v, std::size_t i) noexcept { return primitives::load8(v + i); }
};

template <>
struct reader<kv_q8_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv_q8_0::block_elements;
  using block = kv_q8_0::unit;
  HEDGE_AVX2_TARGET static __m256 load8(const block* v, std::size_t i) noexcept {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(v[i / 32].qs + i % 32));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
  }
  HEDGE_AVX2_TARGET static float scale(const block* v, std::size_t b) noexcept { return primitives::to_float(v[b].d); }
};

template <>
struct reader<kv_q4_0> {
  static constexpr bool available = true;
  static constexpr std::size_t scale_block = kv_q4_0::block_elements;
  using block = kv_q4_0::unit;
  // Value j < 16 is the low nibble of byte j, value j >= 16 the high nibble of byte j - 16.
  HEDGE_AVX2_TARGET static __m256 load8(const block* v, std::size_t i) noexcept {
    const std::size_t j = i % 32;
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(v[i / 32].qs + j % 16));
    if (j >= 16) bytes = _mm_srli_epi16(bytes, 4);
    bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(8)));
  }
  HEDGE_AVX2_TARGET static float scale(const block* v, std::size_t b) noexcept { return primitives::to_float(v[b].d); }
};

HEDGE_AVX2_TARGET inline float max8(__m256 v) noexcept {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

/// e^x for x <= 0 (softmax arguments after subtracting the max); 0 below -87.
/// exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 in two parts (Cody-Waite),
/// e^r by Cephes expf's degree-6 polynomial.
HEDGE_AVX2_TARGET inline __m256 exp8(__m256 x) noexcept {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 poly = _mm256_set1_ps(1.9875691500e-4f);
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.3981999507e-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(8.3334519073e-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(4.1665795894e-2f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.6666665459e-1f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 er = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(poly, r), r, r), _mm256_set1_ps(1.f));
  const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(er, _mm256_castsi256_ps(pow2n)));
}

/// The four horizontal sums of a, b, c, d in one vector (three hadds instead of four reductions).
HEDGE_AVX2_TARGET inline __m128 sum8x4(__m256 a, __m256 b, __m256 c, __m256 d) noexcept {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/// dots[n] = q[n] . key over `width` values (q zero-padded to width); dots has 4 slots.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format
template <int N, class Elem>
HEDGE_AVX2_TARGET inline void dot_keys(const float (*q)[attention_max_head_dim], const typename Elem::unit* key,
                                          std::size_t width, float* dots) noexcept {
  using R = reader<Elem>;
  __m256 acc[4];
  for (int n = 0; n < 4; ++n) acc[n] = _mm256_setzero_ps();
  if constexpr (R::scale_block != 0) {
    // Block by block: the int8 values times q in float, then one FMA with the block scale.
    for (std::size_t b = 0; b < width / R::scale_block; ++b) {
      __m256 part[N];
      for (int n = 0; n < N; ++n) part[n] = _mm256_setzero_ps();
      const float* qb = q[0] + b * R::scale_block;
      for (std::size_t j = 0; j < R::scale_block; j += 8) {
        const __m256 k = R::load8(key + b, j);
        for (int n = 0; n < N; ++n)
          part[n] = _mm256_fmadd_ps(_mm256_loadu_ps(qb + n * attention_max_head_dim + j), k, part[n]);
      }
      const __m256 scale = _mm256_set1_ps(R::scale(key, b));
      for (int n = 0; n < N; ++n) acc[n] = _mm256_fmadd_ps(part[n], scale, acc[n]);
    }
  } else {
    // Two accumulators per query halve the FMA dependency chain.
    __m256 odd[N];
    for (int n = 0; n < N; ++n) odd[n] = _mm256_setzero_ps();
    std::size_t c = 0;
    for (; c + 16 <= width; c += 16) {
      const __m256 k0 = R::load8(key, c), k1 = R::load8(key, c + 8);
      for (int n = 0; n < N; ++n) {
        acc[n] = _mm256_fmadd_ps(_mm256_loadu_ps(q[n] + c), k0, acc[n]);
        odd[n] = _mm256_fmadd_ps(_mm256_loadu_ps(q[n] + c + 8), k1, odd[n]);
      }
    }
    if (c < width) {
      const __m256 k = R::load8(key, c);
      for (int n = 0; n < N; ++n) acc[n] = _mm256_fmadd_ps(_mm256_loadu_ps(q[n] + c), k, acc[n]);
    }
    for (int n = 0; n < N; ++n) acc[n] = _mm256_add_ps(acc[n], odd[n]);
  }
  _mm_storeu_ps(dots, sum8x4(acc[0], acc[1], acc[2], acc[3]));
}

/// acc[n][c .. c + 8 Lanes) += sum_i weight(i, n) value_i[c ..], the tile's values streamed once.
/// \tparam N     query heads handled together (1..4)
/// \tparam Lanes 8-float vectors of output per query head kept in registers (1 or 2)
/// \tparam Elem  the KV element format
template <int N, int Lanes, class Elem>
HEDGE_AVX2_TARGET inline void accumulate_values(float* const* acc, const typename Elem::unit* const* values,
                                                   std::size_t count, const float* weights, std::size_t c) noexcept {
  using R = reader<Elem>;
  // For block formats, address the block holding value c once, then offsets inside it.
  const std::size_t block = R::scale_block != 0 ? c / R::scale_block : 0;
  const std::size_t offset = R::scale_block != 0 ? c % R::scale_block : c;
  __m256 a[N][Lanes];
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < Lanes; ++l) a[n][l] = _mm256_loadu_ps(acc[n] + c + 8 * l);
  for (std::size_t i = 0; i < count; ++i) {
    const typename Elem::unit* v = values[i] + block;
    __m256 x[Lanes];
    for (int l = 0; l < Lanes; ++l) x[l] = R::load8(v, offset + 8 * l);
    for (int n = 0; n < N; ++n) {
      const __m256 w = _mm256_broadcast_ss(weights + i * N + n);
      for (int l = 0; l < Lanes; ++l) a[n][l] = _mm256_fmadd_ps(x[l], w, a[n][l]);
    }
  }
  for (int n = 0; n < N; ++n)
    for (int l = 0; l < Lanes; ++l) _mm256_storeu_ps(acc[n] + c + 8 * l, a[n][l]);
}

/// Where the K and V vectors of up to `tile` consecutive positions are: a tile
/// may span several page runs, so the per-tile work does not shrink with the page size.
/// \tparam Elem the KV element format
template <class Elem>
struct tile_refs {
  static constexpr std::size_t tile = 64;
  const typename Elem::unit* keys[tile];
  const typename Elem::unit* values[tile];
  std::size_t count = 0;

  /// Fills the tile with positions [pos, min(pos + tile, end)) of (layer, head).
  void gather(const kv_sequence_view<Elem>& kv, std::size_t layer, std::size_t head, std::uint64_t pos,
              std::uint64_t end) noexcept {
    count = 0;
    const std::size_t units = kv.vector_units();
    while (count < tile && pos < end) {
      const auto run = kv.contiguous(layer, head, pos, std::min<std::uint64_t>(end, pos + (tile - count)));
      for (std::size_t i = 0; i < run.tokens; ++i, ++count) {
        keys[count] = run.keys + i * units;
        values[count] = run.values + i * units;
      }
      pos += run.tokens;
    }
  }
};

/// The states of query heads [first, first + N) of the task's group.
/// \tparam N    query heads handled together (1..4)
/// \tparam Elem the KV element format
template <int N, class Elem>
HEDGE_AVX2_TARGET void group_partial(const kv_sequence_view<Elem>& kv, std::size_t layer,
                                        const attention_params& p, const decode_task& task,
                                        std::size_t first) noexcept {
  using R = reader<Elem>;
  constexpr std::size_t tile = tile_refs<Elem>::tile;
  constexpr std::size_t max_blocks = R::scale_block != 0 ? attention_max_head_dim / R::scale_block : 1;
  const std::size_t dim = kv.head_dim(), units = kv.vector_units(), stride = decode_state_floats(dim);
  const std::size_t padded = attention_padded_dim(dim);
  const std::size_t width = R::scale_block != 0 ? units * R::scale_block : dim;  // values per stored vector
  const bool transform = has_logit_transform(p);

  alignas(32) float q[N][attention_max_head_dim];
  float* acc[N];
  float max[N], sum[N];
  for (int n = 0; n < N; ++n) {
    std::copy_n(task.queries + (first + n) * dim, dim, q[n]);
    std::fill(q[n] + dim, q[n] + width, 0.f);
    acc[n] = task.states + (first + n) * stride;
    std::fill(acc[n], acc[n] + stride, 0.f);
    max[n] = -std::numeric_limits<float>::infinity();
    sum[n] = 0.f;
  }
  alignas(32) float logits[N][tile];
  alignas(32) float weights[max_blocks][tile * N];

  const std::size_t vector_lines = (units * sizeof(typename Elem::unit) + 63) / 64;
  tile_refs<Elem> refs[2];
  refs[0].gather(kv, layer, task.kv_head, task.begin, task.end);
  for (std::uint64_t pos = task.begin, which = 0; pos < task.end; pos += refs[which].count, which ^= 1) {
    const tile_refs<Elem>& current = refs[which];
    tile_refs<Elem>& next = refs[which ^ 1];
    next.gather(kv, layer, task.kv_head, pos + current.count, task.end);
    const std::size_t count = current.count;
    const std::size_t count8 = (count + 7) / 8 * 8;
    for (std::size_t i = 0; i < count; ++i) {
      // Software prefetch of the next tile's K and V while this tile's keys are
      // dotted: the hardware prefetchers alone leave one thread latency bound on
      // the interleaved K and V streams, and they stop at page-run boundaries.
      // Into L2: the next tile would not fit L1 beside the current one.
      if (i < next.count) {
        const char* k = reinterpret_cast<const char*>(next.keys[i]);
        const char* v = reinterpret_cast<const char*>(next.values[i]);
        for (std::size_t line = 0; line < vector_lines; ++line) {
          _mm_prefetch(k + 64 * line, _MM_HINT_T1);
          _mm_prefetch(v + 64 * line, _MM_HINT_T1);
        }
      }
      float dots[4];
      dot_keys<N, Elem>(q, current.keys[i], width, dots);
      for (int n = 0; n < N; ++n) logits[n][i] = dots[n] * p.scale;
    }
    if (transform) {
      for (int n = 0; n < N; ++n)
        for (std::size_t i = 0; i < count; ++i)
          logits[n][i] =
              transform_logit(p, logits[n][i], task.first_query_head + first + n, pos + i, task.query_pos);
    }
    for (int n = 0; n < N; ++n) {
      std::fill(logits[n] + count, logits[n] + count8, -std::numeric_limits<float>::infinity());
      __m256 m = _mm256_load_ps(logits[n]);
      for (std::size_t i = 8; i < count8; i += 8) m = _mm256_max_ps(m, _mm256_load_ps(logits[n] + i));
      const float new_max = std::max(max[n], max8(m));
      const float correction = std::exp(max[n] - new_max);
      const __m256 shift = _mm256_set1_ps(new_max);
      __m256 total = _mm256_setzero_ps();
      for (std::size_t i = 0; i < count8; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(logits[n] + i), shift));
        _mm256_store_ps(logits[n] + i, e);
        total = _mm256_add_ps(total, e);
      }
      sum[n] = sum[n] * correction + primitives::sum_lanes(total);
      max[n] = new_max;
      if (correction != 1.f) {
        const __m256 c = _mm256_set1_ps(correction);
        for (std::size_t j = 0; j < width; j += 8)
          _mm256_storeu_ps(acc[n] + j, _mm256_mul_ps(_mm256_loadu_ps(acc[n] + j), c));
      }
    }
    if constexpr (R::scale_block != 0) {
      for (std::size_t b = 0; b < units; ++b)
        for (std::size_t i = 0; i < count; ++i) {
          const float s = R::scale(current.values[i], b);
          for (int n = 0; n < N; ++n) weights[b][i * N + n] = logits[n][i] * s;
        }
    } else {
      for (std::size_t i = 0; i < count; ++i)
        for (int n = 0; n < N; ++n) weights[0][i * N + n] = logits[n][i];
    }
    std::size_t c = 0;
    for (; c + 16 <= width; c += 16) {
      const float* w = weights[R::scale_block != 0 ? c / R::scale_block : 0];
      accumulate_values<N, 2, Elem>(acc, current.values, count, w, c);
    }
    if (c < width) accumulate_values<N, 1, Elem>(acc, current.values, count, weights[0], c);
  }
  for (int n = 0; n < N; ++n) {
    acc[n][padded] = max[n];
    acc[n][padded + 1] = sum[n];
  }
}

}  // namespace attention_avx2

/// AVX2 decode kernel: query heads in groups of up to 4 per pass over the K/V
/// tile; falls back to the scalar kernel for formats without a reader or a
/// head_dim that is not a multiple of 8.
/// \tparam Elem the KV element format
template <KvElement Elem>
void decode_partial(arch::avx2, const kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
                    const decode_task& task) noexcept {
  if constexpr (!attention_avx2::reader<Elem>::available) {
    decode_partial(arch::scalar{}, kv, layer, p, task);
  } else {
    if (kv.head_dim() % 8 != 0) return decode_partial(arch::scalar{}, kv, layer, p, task);
    std::size_t first = 0;
    for (; first + 4 <= task.count; first += 4) attention_avx2::group_partial<4>(kv, layer, p, task, first);
    switch (task.count - first) {
      case 3: attention_avx2::group_partial<3>(kv, layer, p, task, first); break;
      case 2: attention_avx2::group_partial<2>(kv, layer, p, task, first); break;
      case 1: attention_avx2::group_partial<1>(kv, layer, p, task, first); break;
      default: break;
    }
  }
}

}  // namespace hedge

#endif  // x86
