// hedge/attention/prefill_avx2.hpp: the AVX2 + FMA tiled prefill kernel.
//
// Per item (one KV head, a tile of query tokens = `rows` query rows), scratch:
//   Q  rows x padded     queries x scale, zero-padded
//   O  rows x padded     unnormalised outputs
//   S  rows x 64         scores, then probabilities, of one key tile
//   m, l  rows           running max and sum
//   Kt padded x 64       the key tile dequantized and transposed
//   V  64 x padded       the value tile dequantized
// For each key tile up to the last query: S = Q Kt; mask (causal, window) and
// transform; online-softmax update of (m, l) and rescale of O; O += S V. Both
// products run on a 4 x 16 register-tiled microkernel (8 accumulators,
// broadcast A, two B vectors per k): about 2 FMAs per load.
#pragma once

#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "hedge/attention/decode_avx2.hpp"
#include "hedge/attention/decode_scalar.hpp"
#include "hedge/attention/params.hpp"
#include "hedge/attention/prefill_scalar.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kv/cache.hpp"

namespace hedge::attention::avx2 {

/// C[R x 16] (+)= A[R x k] B[k x 16]; A, B, C row-major with leading dimensions.
/// \tparam R          rows of C (1..4), each two 8-float accumulators
/// \tparam Accumulate add to C (true) or overwrite it; a template argument so the
///                    accumulators stay in registers (a run-time flag made GCC spill them)
template <int R, bool Accumulate>
HEDGE_TARGET_AVX2 inline void micro_4x16(const float* a, std::size_t lda, const float* b, std::size_t ldb,
                                          std::size_t k, float* c, std::size_t ldc) noexcept {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) acc[r][v] = Accumulate ? _mm256_loadu_ps(c + r * ldc + 8 * v) : _mm256_setzero_ps();
  for (std::size_t kk = 0; kk < k; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(b + kk * ldb), b1 = _mm256_loadu_ps(b + kk * ldb + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + kk);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);
}

/// C[rows x cols] (+)= A B with cols a multiple of 16.
/// \tparam Accumulate add to C (true) or overwrite it
template <bool Accumulate>
HEDGE_TARGET_AVX2 inline void gemm(const float* a, std::size_t lda, const float* b, std::size_t ldb, std::size_t k,
                                   float* c, std::size_t ldc, std::size_t rows, std::size_t cols) noexcept {
  for (std::size_t r = 0; r < rows; r += 4) {
    for (std::size_t j = 0; j < cols; j += 16) {
      const float* ar = a + r * lda;
      float* cr = c + r * ldc + j;
      switch (std::min<std::size_t>(4, rows - r)) {
        case 4: micro_4x16<4, Accumulate>(ar, lda, b + j, ldb, k, cr, ldc); break;
        case 3: micro_4x16<3, Accumulate>(ar, lda, b + j, ldb, k, cr, ldc); break;
        case 2: micro_4x16<2, Accumulate>(ar, lda, b + j, ldb, k, cr, ldc); break;
        default: micro_4x16<1, Accumulate>(ar, lda, b + j, ldb, k, cr, ldc); break;
      }
    }
  }
}

/// One stored head vector as `padded` floats (block scales applied, zero-padded).
/// \tparam Elem the KV element format
template <class Elem>
HEDGE_TARGET_AVX2 inline void dequantize(const typename Elem::unit* v, std::size_t width, std::size_t padded,
                                          float* out) noexcept {
  using R = reader<Elem>;
  for (std::size_t c = 0; c < width; c += 8) {
    __m256 x = R::load8(v, c);
    if constexpr (R::scale_block != 0) x = _mm256_mul_ps(x, _mm256_set1_ps(R::scale(v, c / R::scale_block)));
    _mm256_storeu_ps(out + c, x);
  }
  std::fill(out + width, out + padded, 0.f);
}

/// One prefill item (see the file comment for the scratch layout).
/// \tparam Elem the KV element format
template <class Elem>
HEDGE_TARGET_AVX2 void prefill_tile(const kv::kv_sequence_view<Elem>& kv, std::size_t layer,
                                    const attention_params& p, const detail::prefill_task& t) noexcept {
  using R = reader<Elem>;
  constexpr std::size_t bk = prefill_key_tile;
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const std::size_t dim = kv.head_dim(), units = kv.vector_units(), padded = attention_padded_dim(dim);
  const std::size_t width = R::scale_block != 0 ? units * R::scale_block : dim;
  const std::size_t group = t.group, rows = (t.token_end - t.token_begin) * group;
  float* qs = t.scratch;
  float* o = qs + rows * padded;
  float* s = o + rows * padded;
  float* m = s + rows * bk;
  float* l = m + rows;
  float* kt = l + rows;
  float* v = kt + padded * bk;
  // Row r is token token_begin + r / group, query head kv_head * group + r % group.
  for (std::size_t r = 0; r < rows; ++r) {
    const float* src = t.q + ((t.token_begin + r / group) * t.q_heads + t.kv_head * group + r % group) * dim;
    for (std::size_t j = 0; j < dim; ++j) qs[r * padded + j] = src[j] * p.scale;
    std::fill(qs + r * padded + dim, qs + (r + 1) * padded, 0.f);
    std::fill(o + r * padded, o + (r + 1) * padded, 0.f);
    m[r] = minus_inf;
    l[r] = 0.f;
  }
  const std::uint64_t first_query = t.first_pos + t.token_begin, last_query = t.first_pos + t.token_end - 1;
  const bool transform = has_logit_transform(p);
  float row_values[attention_max_head_dim];
  for (std::uint64_t k0 = prefill_first_key(first_query, kv.window()); k0 <= last_query; k0 += bk) {
    const std::size_t count = static_cast<std::size_t>(std::min<std::uint64_t>(bk, last_query + 1 - k0));
    const std::size_t cols = (count + 15) / 16 * 16;
    // Gather the tile: keys transposed into kt (padded x cols), values into v (count x padded).
    for (std::uint64_t pos = k0; pos < k0 + count;) {
      const auto run = kv.contiguous(layer, t.kv_head, pos, k0 + count);
      for (std::size_t i = 0; i < run.tokens; ++i) {
        const std::size_t j = static_cast<std::size_t>(pos - k0) + i;
        dequantize<Elem>(run.keys + i * units, width, padded, row_values);
        for (std::size_t c = 0; c < padded; ++c) kt[c * bk + j] = row_values[c];
        dequantize<Elem>(run.values + i * units, width, padded, v + j * padded);
      }
      pos += run.tokens;
    }
    for (std::size_t c = 0; c < padded; ++c) std::fill(kt + c * bk + count, kt + c * bk + cols, 0.f);
    gemm<false>(qs, padded, kt, bk, padded, s, bk, rows, cols);
    // Tiles below the diagonal and inside every row's window need no mask (most of them).
    const bool unmasked = !transform && count == cols && k0 + count <= first_query + 1 &&
                          k0 >= prefill_first_key(last_query, kv.window());
    for (std::size_t r = 0; r < rows; ++r) {
      const std::uint64_t query = t.first_pos + t.token_begin + r / group;
      const std::uint64_t lowest = prefill_first_key(query, kv.window());
      float* sr = s + r * bk;
      float row_max = minus_inf;
      if (unmasked) {
        __m256 m = _mm256_loadu_ps(sr);
        for (std::size_t j = 8; j < cols; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(sr + j));
        row_max = primitives::max_lanes(m);
      } else {
        for (std::size_t j = 0; j < cols; ++j) {
          const std::uint64_t key = k0 + j;
          if (j >= count || key > query || key < lowest) {
            sr[j] = minus_inf;
            continue;
          }
          if (transform) sr[j] = transform_logit(p, sr[j], t.kv_head * group + r % group, key, query);
          row_max = std::max(row_max, sr[j]);
        }
      }
      const float new_max = std::max(m[r], row_max);
      if (new_max == minus_inf) {  // nothing visible yet for this row
        std::fill(sr, sr + cols, 0.f);
        continue;
      }
      const float correction = std::exp(m[r] - new_max);
      const __m256 shift = _mm256_set1_ps(new_max);
      __m256 total = _mm256_setzero_ps();
      for (std::size_t j = 0; j < cols; j += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sr + j), shift));
        _mm256_storeu_ps(sr + j, e);
        total = _mm256_add_ps(total, e);
      }
      l[r] = l[r] * correction + primitives::sum_lanes(total);
      m[r] = new_max;
      if (correction != 1.f) {
        const __m256 cv = _mm256_set1_ps(correction);
        for (std::size_t c = 0; c < padded; c += 8)
          _mm256_storeu_ps(o + r * padded + c, _mm256_mul_ps(_mm256_loadu_ps(o + r * padded + c), cv));
      }
    }
    gemm<true>(s, bk, v, padded, count, o, padded, rows, padded);
  }
  for (std::size_t r = 0; r < rows; ++r) {
    float* dst = t.out + ((t.token_begin + r / group) * t.q_heads + t.kv_head * group + r % group) * dim;
    const float inverse = l[r] != 0.f ? 1.f / l[r] : 0.f;
    for (std::size_t j = 0; j < dim; ++j) dst[j] = o[r * padded + j] * inverse;
  }
}

}  // namespace hedge::attention::avx2

namespace hedge::attention::detail {

/// AVX2 tiled prefill; formats without an AVX2 reader, or head_dim not a multiple
/// of 8, use the scalar kernel.
/// \tparam Elem the KV element format
template <kv::KvElement Elem>
void prefill_tile(arch::avx2, const kv::kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
                  const prefill_task& t) noexcept {
  if constexpr (!avx2::reader<Elem>::available) {
    prefill_tile(arch::scalar{}, kv, layer, p, t);
  } else {
    if (kv.head_dim() % 8 != 0) return prefill_tile(arch::scalar{}, kv, layer, p, t);
    avx2::prefill_tile(kv, layer, p, t);
  }
}

}  // namespace hedge::attention::detail

#endif  // x86
