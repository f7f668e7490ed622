// hedge/kernels/activation.hpp: the feed-forward activations of LLMs.
//
//   silu(x) = x * sigmoid(x) = x / (1 + exp(-x))                 (Llama, Mistral, Qwen)
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))   (GPT-2, Gemma, Phi)
//   silu_mul(gate, up) = silu(gate) * up                          (SwiGLU, llama2.c's FFN)
//
// GELU is the tanh approximation (Hendrycks & Gimpel 2016, eq. in sec. 2),
// written as ggml's ggml_gelu_f32 computes it; it differs from the erf form by
// up to about 5e-4 absolute. The scalar overloads are the specification (float
// std::exp / std::tanh). The SIMD overloads (avx2, avx512bw: the vector exp of
// detail/vector_math.hpp; neon: xsimd::exp) use, for GELU, the identity
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), which costs one exp and one division
// instead of a tanh; tests allow 1e-5 relative (plus 1e-7 absolute near the
// zeros of GELU) against a float64 reference. Large |x| saturate as the formulas
// do: e^-x overflows to inf, so silu(-100) and gelu(-30) are -0.
#pragma once

#include <cmath>
#include <cstddef>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/aliasing.hpp"
#include "hedge/kernels/detail/vector_math.hpp"

namespace hedge::kernels {

namespace detail {

/// sqrt(2 / pi) and the cubic coefficient of the GELU tanh approximation.
inline constexpr float gelu_sqrt_2_over_pi = 0.79788456080286535587989211986876f;
inline constexpr float gelu_cubic = 0.044715f;

inline float silu_scalar(float x) noexcept { return x / (1.0f + std::exp(-x)); }

inline float gelu_scalar(float x) noexcept {
  return 0.5f * x * (1.0f + std::tanh(gelu_sqrt_2_over_pi * x * (1.0f + gelu_cubic * x * x)));
}

inline void silu(arch::scalar, vector_view<const float> x, vector_view<float> out) noexcept {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = silu_scalar(x[i]);
}

inline void gelu(arch::scalar, vector_view<const float> x, vector_view<float> out) noexcept {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = gelu_scalar(x[i]);
}

inline void silu_mul(arch::scalar, vector_view<const float> gate, vector_view<const float> up,
                     vector_view<float> out) noexcept {
  for (std::size_t i = 0; i < gate.size(); ++i) out[i] = silu_scalar(gate[i]) * up[i];
}

/// The GELU exponent -2u = x (k2 + c2 x^2) of 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)),
/// u = sqrt(2/pi) x (1 + 0.044715 x^2), with both factors folded into the coefficients.
inline constexpr float gelu_k2 = -2.0f * gelu_sqrt_2_over_pi;
inline constexpr float gelu_c2 = gelu_k2 * gelu_cubic;

#if HEDGE_SIMD_X86
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256 silu(arch::avx2, __m256 x) noexcept {
  const __m256 minus_x = _mm256_sub_ps(_mm256_setzero_ps(), x);
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), kernels::avx2::exp(minus_x)));
}

HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256 gelu(arch::avx2, __m256 x) noexcept {
  const __m256 minus_2u =
      _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_set1_ps(gelu_c2), _mm256_mul_ps(x, x), _mm256_set1_ps(gelu_k2)));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), kernels::avx2::exp(minus_2u)));
}

HEDGE_TARGET_AVX2 inline void silu(arch::avx2, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out.data() + i, silu(arch::avx2{}, _mm256_loadu_ps(x.data() + i)));
  for (; i < n; ++i) out[i] = silu_scalar(x[i]);
}

HEDGE_TARGET_AVX2 inline void gelu(arch::avx2, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out.data() + i, gelu(arch::avx2{}, _mm256_loadu_ps(x.data() + i)));
  for (; i < n; ++i) out[i] = gelu_scalar(x[i]);
}

HEDGE_TARGET_AVX2 inline void silu_mul(arch::avx2, vector_view<const float> gate, vector_view<const float> up,
                                       vector_view<float> out) noexcept {
  const std::size_t n = gate.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = silu(arch::avx2{}, _mm256_loadu_ps(gate.data() + i));
    _mm256_storeu_ps(out.data() + i, _mm256_mul_ps(g, _mm256_loadu_ps(up.data() + i)));
  }
  for (; i < n; ++i) out[i] = silu_scalar(gate[i]) * up[i];
}

HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m512 silu(arch::avx512bw, __m512 x) noexcept {
  const __m512 minus_x = _mm512_sub_ps(_mm512_setzero_ps(), x);
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), kernels::avx512::exp(minus_x)));
}

HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m512 gelu(arch::avx512bw, __m512 x) noexcept {
  const __m512 minus_2u =
      _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_set1_ps(gelu_c2), _mm512_mul_ps(x, x), _mm512_set1_ps(gelu_k2)));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), kernels::avx512::exp(minus_2u)));
}

HEDGE_TARGET_AVX512 inline void silu(arch::avx512bw, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out.data() + i, silu(arch::avx512bw{}, _mm512_loadu_ps(x.data() + i)));
  if (i < n) {
    const __mmask16 tail = kernels::avx512::first_lanes(n - i);
    _mm512_mask_storeu_ps(out.data() + i, tail, silu(arch::avx512bw{}, _mm512_maskz_loadu_ps(tail, x.data() + i)));
  }
}

HEDGE_TARGET_AVX512 inline void gelu(arch::avx512bw, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out.data() + i, gelu(arch::avx512bw{}, _mm512_loadu_ps(x.data() + i)));
  if (i < n) {
    const __mmask16 tail = kernels::avx512::first_lanes(n - i);
    _mm512_mask_storeu_ps(out.data() + i, tail, gelu(arch::avx512bw{}, _mm512_maskz_loadu_ps(tail, x.data() + i)));
  }
}

HEDGE_TARGET_AVX512 inline void silu_mul(arch::avx512bw, vector_view<const float> gate, vector_view<const float> up,
                                         vector_view<float> out) noexcept {
  const std::size_t n = gate.size();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = silu(arch::avx512bw{}, _mm512_loadu_ps(gate.data() + i));
    _mm512_storeu_ps(out.data() + i, _mm512_mul_ps(g, _mm512_loadu_ps(up.data() + i)));
  }
  if (i < n) {
    const __mmask16 tail = kernels::avx512::first_lanes(n - i);
    const __m512 g = silu(arch::avx512bw{}, _mm512_maskz_loadu_ps(tail, gate.data() + i));
    _mm512_mask_storeu_ps(out.data() + i, tail, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(tail, up.data() + i)));
  }
}
#endif

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
inline kernels::neon::floats silu(arch::neon, kernels::neon::floats x) noexcept {
  using batch = kernels::neon::floats;
  return x / (batch(1.0f) + xsimd::exp(-x));
}

inline kernels::neon::floats gelu(arch::neon, kernels::neon::floats x) noexcept {
  using batch = kernels::neon::floats;
  return x / (batch(1.0f) + xsimd::exp(x * xsimd::fma(batch(gelu_c2), x * x, batch(gelu_k2))));
}

inline void silu(arch::neon, vector_view<const float> x, vector_view<float> out) noexcept {
  using batch = kernels::neon::floats;
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    silu(arch::neon{}, batch::load_unaligned(x.data() + i)).store_unaligned(out.data() + i);
  }
  for (; i < n; ++i) out[i] = silu_scalar(x[i]);
}

inline void gelu(arch::neon, vector_view<const float> x, vector_view<float> out) noexcept {
  using batch = kernels::neon::floats;
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    gelu(arch::neon{}, batch::load_unaligned(x.data() + i)).store_unaligned(out.data() + i);
  }
  for (; i < n; ++i) out[i] = gelu_scalar(x[i]);
}

inline void silu_mul(arch::neon, vector_view<const float> gate, vector_view<const float> up,
                     vector_view<float> out) noexcept {
  using batch = kernels::neon::floats;
  const std::size_t n = gate.size();
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    (silu(arch::neon{}, batch::load_unaligned(gate.data() + i)) * batch::load_unaligned(up.data() + i))
        .store_unaligned(out.data() + i);
  }
  for (; i < n; ++i) out[i] = silu_scalar(gate[i]) * up[i];
}
#endif

}  // namespace detail

/// out = silu(x) (see file comment).
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): out has x's size; it is x or disjoint from it.
template <arch::Arch A = arch::best>
void silu(vector_view<const float> x, vector_view<float> out) noexcept {
  HEDGE_ASSERT(out.size() == x.size() && detail::same_or_disjoint(x.data(), out.data(), x.size()));
  arch::visit<A>([&](auto tag) { detail::silu(tag, x, out); });
}

/// out = gelu(x), tanh approximation (see file comment).
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): out has x's size; it is x or disjoint from it.
template <arch::Arch A = arch::best>
void gelu(vector_view<const float> x, vector_view<float> out) noexcept {
  HEDGE_ASSERT(out.size() == x.size() && detail::same_or_disjoint(x.data(), out.data(), x.size()));
  arch::visit<A>([&](auto tag) { detail::gelu(tag, x, out); });
}

/// out = silu(gate) * up, the SwiGLU gating of a Llama feed-forward block.
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): equal sizes; out is gate, up, or disjoint from both.
template <arch::Arch A = arch::best>
void silu_mul(vector_view<const float> gate, vector_view<const float> up, vector_view<float> out) noexcept {
  HEDGE_ASSERT(up.size() == gate.size() && out.size() == gate.size());
  HEDGE_ASSERT(detail::same_or_disjoint(gate.data(), out.data(), gate.size()) &&
               detail::same_or_disjoint(up.data(), out.data(), up.size()));
  arch::visit<A>([&](auto tag) { detail::silu_mul(tag, gate, up, out); });
}

}  // namespace hedge::kernels
