// hedge/kernels/rope.hpp: rotary position embedding (RoPE, Su et al. 2021).
//
// RoPE rotates pairs of a head's elements by position * base^(-2i/d),
// i in [0, d/2), d = head_dim. Models pair the elements in one of two ways:
//
//   adjacent pairs (llama2.c, Meta's Llama checkpoints, GGUF "llama"):
//     (x[2i], x[2i+1])          e.g. d = 8: (0 1) (2 3) (4 5) (6 7)
//   NeoX half split (GPT-NeoX, Hugging Face Llama/Qwen/Mistral, GGUF "qwen2"...):
//     (x[i], x[i + d/2])        e.g. d = 8: (0 4) (1 5) (2 6) (3 7)
//
// and each pair (a, b) becomes (a cos - b sin, a sin + b cos).
//
// The angles depend only on the position, so they are computed once per token
// into a rope table and applied to every head of q and k (GQA: different head
// counts, same table). The table holds, for each element of a head, the cosine
// and the signed sine of its pair's angle, in the layout's order:
//
//   adjacent: cos = [c0 c0 c1 c1 ...]  sin = [-s0 +s0 -s1 +s1 ...]
//   neox:     cos = [c0 c1 .. c0 c1 ..] sin = [-s0 -s1 .. +s0 +s1 ..]
//
// so every output is x * cos + partner(x) * sin. Angles are computed in double
// and rounded once to float (llama2.c uses float powf/cosf, which loses about
// position * 6e-8 radians); the scalar overloads are the specification and
// the SIMD ones (avx2, avx512bw, neon) use FMA (tests allow 3e-7 (|a| + |b|)
// per pair (a, b)).
#pragma once

#include <cmath>
#include <cstddef>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/vector_math.hpp"

namespace hedge::kernels {

/// How a model pairs the elements of a head for RoPE (see file comment).
enum class rope_layout { adjacent_pairs, neox_halves };

/// A model's RoPE frequencies beyond the base, as llama.cpp's ggml_rope_ext applies them
/// without YaRN (ext_factor 0): pair i of a d-element table turns by
/// position * position_scale * base^(-2i/d) / factors[i], and cos and sin are multiplied
/// by `magnitude`.
struct rope_frequencies {
  float base = 10000.0f;                  ///< the model's rope theta
  float position_scale = 1.0f;            ///< linear scaling: 1 / rope.scaling.factor
  vector_view<const float> factors = {};  ///< d/2 per-pair divisors (Llama 3's rope_freqs, LongRoPE); empty: none
  float magnitude = 1.0f;                 ///< LongRoPE's attention factor
};

/// Writes the rope table of `position` for heads of cos.size() elements in `layout` (see
/// file comment) with frequencies `f`.
/// Errors: invalid_argument for an odd or zero head size, a non-positive base, or factors
/// that are not one per pair; shape_mismatch when sin's size differs from cos's.
inline result<void> rope_table(rope_layout layout, std::size_t position, const rope_frequencies& f,
                               vector_view<float> cos, vector_view<float> sin) {
  const std::size_t head_dim = cos.size();
  if (head_dim == 0 || head_dim % 2 != 0) {
    return error{errc::invalid_argument} << "rope head size " << head_dim << " is not a positive even number";
  }
  if (!(f.base > 0.0f)) return error{errc::invalid_argument} << "rope base must be positive";
  if (sin.size() != head_dim) {
    return error{errc::shape_mismatch} << "rope sin table has " << sin.size() << " elements, cos has " << head_dim;
  }
  const std::size_t half = head_dim / 2;
  if (!f.factors.empty() && f.factors.size() != half)
    return error{errc::invalid_argument} << f.factors.size() << " rope frequency factors for " << half << " pairs";
  const double at = double(position) * double(f.position_scale);
  for (std::size_t i = 0; i < half; ++i) {
    double angle = at * std::pow(double(f.base), -2.0 * double(i) / double(head_dim));
    if (!f.factors.empty()) angle /= double(f.factors[i]);
    const float c = float(std::cos(angle) * double(f.magnitude)), s = float(std::sin(angle) * double(f.magnitude));
    const std::size_t first = layout == rope_layout::adjacent_pairs ? 2 * i : i;
    const std::size_t second = layout == rope_layout::adjacent_pairs ? 2 * i + 1 : i + half;
    cos[first] = c;
    cos[second] = c;
    sin[first] = -s;
    sin[second] = s;
  }
  return ok();
}

/// Writes the rope table of `position` for heads of cos.size() elements in
/// `layout` (see file comment); base is the model's rope theta (10000 for Llama 2).
/// Errors: invalid_argument for an odd or zero head size or a non-positive
/// base; shape_mismatch when sin's size differs from cos's.
inline result<void> rope_table(rope_layout layout, std::size_t position, float base, vector_view<float> cos,
                               vector_view<float> sin) {
  return rope_table(layout, position, rope_frequencies{.base = base}, cos, sin);
}

namespace detail {

inline void rope(arch::scalar, rope_layout layout, matrix_view<float> heads, const float* cos,
                 const float* sin) noexcept {
  const std::size_t head_dim = heads.cols(), half = head_dim / 2;
  for (std::size_t h = 0; h < heads.rows(); ++h) {
    float* x = heads.row(h).data();
    for (std::size_t i = 0; i < half; ++i) {
      const std::size_t first = layout == rope_layout::adjacent_pairs ? 2 * i : i;
      const std::size_t second = layout == rope_layout::adjacent_pairs ? 2 * i + 1 : i + half;
      const float a = x[first], b = x[second];
      x[first] = a * cos[first] + b * sin[first];
      x[second] = b * cos[second] + a * sin[second];
    }
  }
}

/// One pair of the scalar overload, for the SIMD overloads' tails.
inline void rotate_pair(float* x, const float* cos, const float* sin, std::size_t first, std::size_t second) noexcept {
  const float a = x[first], b = x[second];
  x[first] = a * cos[first] + b * sin[first];
  x[second] = b * cos[second] + a * sin[second];
}

#if HEDGE_SIMD_X86
HEDGE_TARGET_AVX2 inline void rope(arch::avx2, rope_layout layout, matrix_view<float> heads, const float* cos,
                                   const float* sin) noexcept {
  const std::size_t head_dim = heads.cols(), half = head_dim / 2;
  for (std::size_t h = 0; h < heads.rows(); ++h) {
    float* x = heads.row(h).data();
    if (layout == rope_layout::adjacent_pairs) {
      // 8 lanes hold 4 whole pairs; vpermilps swaps each pair's elements.
      const std::size_t vector_end = head_dim - head_dim % 8;
      for (std::size_t i = 0; i < vector_end; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 swapped = _mm256_permute_ps(v, 0xB1);
        _mm256_storeu_ps(x + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(cos + i),
                                                _mm256_mul_ps(swapped, _mm256_loadu_ps(sin + i))));
      }
      for (std::size_t i = vector_end; i < head_dim; i += 2) rotate_pair(x, cos, sin, i, i + 1);
    } else {
      const std::size_t vector_end = half - half % 8;
      for (std::size_t i = 0; i < vector_end; i += 8) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + half + i);
        const __m256 c = _mm256_loadu_ps(cos + i);
        _mm256_storeu_ps(x + i, _mm256_fmadd_ps(a, c, _mm256_mul_ps(b, _mm256_loadu_ps(sin + i))));
        _mm256_storeu_ps(x + half + i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, _mm256_loadu_ps(sin + half + i))));
      }
      for (std::size_t i = vector_end; i < half; ++i) rotate_pair(x, cos, sin, i, i + half);
    }
  }
}

/// x * cos + (x with each adjacent pair swapped) * sin.
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m512 rotate_adjacent_pairs(__m512 x, __m512 cos, __m512 sin) noexcept {
  return _mm512_fmadd_ps(x, cos, _mm512_mul_ps(_mm512_permute_ps(x, 0xB1), sin));
}

HEDGE_TARGET_AVX512 inline void rope_adjacent_pairs(arch::avx512bw, matrix_view<float> heads, const float* cos,
                                                    const float* sin) noexcept {
  // 16 lanes hold 8 whole pairs (the tail's count is even too); vpermilps swaps
  // each pair's elements.
  const std::size_t head_dim = heads.cols();
  const std::size_t vector_end = head_dim - head_dim % 16;
  const __mmask16 tail = kernels::avx512::first_lanes(head_dim % 16);
  for (std::size_t h = 0; h < heads.rows(); ++h) {
    float* x = heads.row(h).data();
    for (std::size_t i = 0; i < vector_end; i += 16) {
      _mm512_storeu_ps(x + i, rotate_adjacent_pairs(_mm512_loadu_ps(x + i), _mm512_loadu_ps(cos + i),
                                                    _mm512_loadu_ps(sin + i)));
    }
    if (tail) {
      const std::size_t i = vector_end;
      _mm512_mask_storeu_ps(x + i, tail,
                            rotate_adjacent_pairs(_mm512_maskz_loadu_ps(tail, x + i), _mm512_maskz_loadu_ps(tail, cos + i),
                                                  _mm512_maskz_loadu_ps(tail, sin + i)));
    }
  }
}

HEDGE_TARGET_AVX512 inline void rope_neox_halves(arch::avx512bw, matrix_view<float> heads, const float* cos,
                                                 const float* sin) noexcept {
  const std::size_t half = heads.cols() / 2;
  const std::size_t vector_end = half - half % 16;
  const __mmask16 tail = kernels::avx512::first_lanes(half % 16);
  for (std::size_t h = 0; h < heads.rows(); ++h) {
    float* x = heads.row(h).data();
    for (std::size_t i = 0; i < vector_end; i += 16) {
      const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + half + i);
      const __m512 c = _mm512_loadu_ps(cos + i);
      _mm512_storeu_ps(x + i, _mm512_fmadd_ps(a, c, _mm512_mul_ps(b, _mm512_loadu_ps(sin + i))));
      _mm512_storeu_ps(x + half + i, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, _mm512_loadu_ps(sin + half + i))));
    }
    if (tail) {
      const std::size_t i = vector_end;
      const __m512 a = _mm512_maskz_loadu_ps(tail, x + i), b = _mm512_maskz_loadu_ps(tail, x + half + i);
      const __m512 c = _mm512_maskz_loadu_ps(tail, cos + i);
      _mm512_mask_storeu_ps(x + i, tail, _mm512_fmadd_ps(a, c, _mm512_mul_ps(b, _mm512_maskz_loadu_ps(tail, sin + i))));
      _mm512_mask_storeu_ps(x + half + i, tail,
                            _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(tail, sin + half + i))));
    }
  }
}

HEDGE_TARGET_AVX512 inline void rope(arch::avx512bw, rope_layout layout, matrix_view<float> heads, const float* cos,
                                     const float* sin) noexcept {
  if (layout == rope_layout::adjacent_pairs) {
    rope_adjacent_pairs(arch::avx512bw{}, heads, cos, sin);
  } else {
    rope_neox_halves(arch::avx512bw{}, heads, cos, sin);
  }
}
#endif

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
inline void rope(arch::neon, rope_layout layout, matrix_view<float> heads, const float* cos, const float* sin) noexcept {
  using batch = kernels::neon::floats;
  constexpr std::size_t lanes = batch::size;
  const std::size_t head_dim = heads.cols(), half = head_dim / 2;
  for (std::size_t h = 0; h < heads.rows(); ++h) {
    float* x = heads.row(h).data();
    if (layout == rope_layout::adjacent_pairs) {
      // 4 lanes hold 2 whole pairs; vrev64q swaps each pair's elements.
      const std::size_t vector_end = head_dim - head_dim % lanes;
      for (std::size_t i = 0; i < vector_end; i += lanes) {
        const batch v = batch::load_unaligned(x + i);
        const batch swapped(vrev64q_f32(v));
        xsimd::fma(v, batch::load_unaligned(cos + i), swapped * batch::load_unaligned(sin + i)).store_unaligned(x + i);
      }
      for (std::size_t i = vector_end; i < head_dim; i += 2) rotate_pair(x, cos, sin, i, i + 1);
    } else {
      const std::size_t vector_end = half - half % lanes;
      for (std::size_t i = 0; i < vector_end; i += lanes) {
        const batch a = batch::load_unaligned(x + i), b = batch::load_unaligned(x + half + i);
        const batch c = batch::load_unaligned(cos + i);
        xsimd::fma(a, c, b * batch::load_unaligned(sin + i)).store_unaligned(x + i);
        xsimd::fma(b, c, a * batch::load_unaligned(sin + half + i)).store_unaligned(x + half + i);
      }
      for (std::size_t i = vector_end; i < half; ++i) rotate_pair(x, cos, sin, i, i + half);
    }
  }
}
#endif

}  // namespace detail

/// Rotates every row of `heads` (one head per row, head_dim = cols) in place
/// with a table from rope_table() for the same layout and head size.
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): cos and sin have heads.cols() elements, an even number.
template <arch::Arch A = arch::best>
void rope(rope_layout layout, matrix_view<float> heads, vector_view<const float> cos,
          vector_view<const float> sin) noexcept {
  HEDGE_ASSERT(heads.cols() % 2 == 0 && cos.size() == heads.cols() && sin.size() == heads.cols());
  arch::visit<A>([&](auto tag) { detail::rope(tag, layout, heads, cos.data(), sin.data()); });
}

}  // namespace hedge::kernels
