// hedge/kernels/activation.hpp: the feed-forward activations of LLMs.
//
//   silu(x) = x * sigmoid(x) = x / (1 + exp(-x))                 (Llama, Mistral, Qwen)
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))   (GPT-2, Gemma, Phi)
//   silu_mul(gate, up) = silu(gate) * up                          (SwiGLU, llama2.c's FFN)
//
// GELU is the tanh approximation (Hendrycks & Gimpel 2016, eq. in sec. 2),
// written as ggml's ggml_gelu_f32 computes it; it differs from the erf form by
// up to about 5e-4 absolute. The scalar overloads are the specification (float
// std::exp / std::tanh). The SIMD overloads (every width of detail/vec.hpp,
// written once in detail/activation_simd.inc; avx2, avx512bw: the vector exp of
// detail/vector_math.hpp; neon: xsimd::exp) use, for GELU, the identity
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), which costs one exp and one division
// instead of a tanh; tests allow 1e-5 relative (plus 1e-7 absolute near the
// zeros of GELU) against a float64 reference. Large |x| saturate as the formulas
// do: e^-x overflows to inf, so silu(-100) and gelu(-30) are -0.
#pragma once

#include <cmath>
#include <cstddef>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/aliasing.hpp"
#include "hedge/kernels/elementwise.hpp"

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

}  // namespace detail

}  // namespace hedge::kernels

#define HEDGE_VEC_BODY "hedge/kernels/detail/activation_simd.inc"
#include "hedge/kernels/detail/for_each_width.inc"

namespace hedge::kernels {

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
