// hedge/kernels/activation.hpp: the feed-forward activations of LLMs.
//
//   silu(x) = x * sigmoid(x) = x / (1 + exp(-x))                 (Llama, Mistral, Qwen)
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))   (GPT-2, Gemma, Phi)
//   silu_mul(gate, up) = silu(gate) * up                          (SwiGLU, llama2.c's FFN)
//
// GELU is the tanh approximation (Hendrycks & Gimpel 2016, eq. in sec. 2),
// written as ggml's ggml_gelu_f32 computes it; it differs from the erf form by
// up to about 5e-4 absolute. The scalar overloads are the specification (float
// std::exp / std::tanh). The SIMD overloads use xsimd::exp and, for GELU, the
// identity 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), which costs one exp and
// one division instead of a tanh; tests allow 1e-5 relative (plus 1e-7
// absolute near the zeros of GELU) against a float64 reference.
#pragma once

#include <cmath>
#include <cstddef>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/ops_simd.hpp"

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

#if HEDGE_HAS_XSIMD
template <xsimd_float_arch A>
HEDGE_ALWAYS_INLINE float_batch<A> silu_batch(float_batch<A> x) noexcept {
  using batch = float_batch<A>;
  return x / (batch(1.0f) + xsimd::exp(-x));
}

template <xsimd_float_arch A>
HEDGE_ALWAYS_INLINE float_batch<A> gelu_batch(float_batch<A> x) noexcept {
  using batch = float_batch<A>;
  const batch u = batch(gelu_sqrt_2_over_pi) * x * xsimd::fma(batch(gelu_cubic), x * x, batch(1.0f));
  return x / (batch(1.0f) + xsimd::exp(batch(-2.0f) * u));
}

/// out[i] = op(x[i]) with op's batch form over full vectors and its float form on the tail.
template <xsimd_float_arch A, class BatchOp, class ScalarOp>
void map_unary(vector_view<const float> x, vector_view<float> out, BatchOp batch_op, ScalarOp scalar_op) noexcept {
  using batch = float_batch<A>;
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) batch_op(batch::load_unaligned(x.data() + i)).store_unaligned(out.data() + i);
  for (; i < n; ++i) out[i] = scalar_op(x[i]);
}

template <xsimd_float_arch A>
void silu(A, vector_view<const float> x, vector_view<float> out) noexcept {
  map_unary<A>(x, out, silu_batch<A>, silu_scalar);
}

template <xsimd_float_arch A>
void gelu(A, vector_view<const float> x, vector_view<float> out) noexcept {
  map_unary<A>(x, out, gelu_batch<A>, gelu_scalar);
}

template <xsimd_float_arch A>
void silu_mul(A, vector_view<const float> gate, vector_view<const float> up, vector_view<float> out) noexcept {
  using batch = float_batch<A>;
  const std::size_t n = gate.size();
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    (silu_batch<A>(batch::load_unaligned(gate.data() + i)) * batch::load_unaligned(up.data() + i))
        .store_unaligned(out.data() + i);
  }
  for (; i < n; ++i) out[i] = silu_scalar(gate[i]) * up[i];
}
#endif

}  // namespace detail

/// out = silu(x) (see file comment).
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): out has x's size; it is x or disjoint from it.
template <arch::Arch A = arch::native>
void silu(vector_view<const float> x, vector_view<float> out) noexcept {
  HEDGE_ASSERT(out.size() == x.size() && detail::same_or_disjoint(x.data(), out.data(), x.size()));
  detail::silu(detail::float_lanes<A>{}, x, out);
}

/// out = gelu(x), tanh approximation (see file comment).
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): out has x's size; it is x or disjoint from it.
template <arch::Arch A = arch::native>
void gelu(vector_view<const float> x, vector_view<float> out) noexcept {
  HEDGE_ASSERT(out.size() == x.size() && detail::same_or_disjoint(x.data(), out.data(), x.size()));
  detail::gelu(detail::float_lanes<A>{}, x, out);
}

/// out = silu(gate) * up, the SwiGLU gating of a Llama feed-forward block.
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): equal sizes; out is gate, up, or disjoint from both.
template <arch::Arch A = arch::native>
void silu_mul(vector_view<const float> gate, vector_view<const float> up, vector_view<float> out) noexcept {
  HEDGE_ASSERT(up.size() == gate.size() && out.size() == gate.size());
  HEDGE_ASSERT(detail::same_or_disjoint(gate.data(), out.data(), gate.size()) &&
               detail::same_or_disjoint(up.data(), out.data(), up.size()));
  detail::silu_mul(detail::float_lanes<A>{}, gate, up, out);
}

}  // namespace hedge::kernels
