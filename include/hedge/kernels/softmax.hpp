// hedge/kernels/softmax.hpp: numerically stable softmax.
//
//   out[i] = exp(x[i] - max(x)) / sum_j exp(x[j] - max(x))
//
// Subtracting the maximum keeps every exponent <= 0, so nothing overflows and
// the largest term is exactly 1 (llama2.c `softmax`). The scalar overload is
// the specification: float std::exp and a double sum (as ggml's soft_max).
// The SIMD overloads (every width of detail/vec.hpp, written once in
// detail/softmax_simd.inc) use the vector exp of detail/vector_math.hpp (avx2,
// avx512bw: within 1 ulp of e^x wherever it is a normal float) or xsimd::exp
// (neon: a few ulp), and float partial sums; tests allow 1e-5 relative per
// output against a float64 reference. A masked (-inf) logit gives exactly 0.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/aliasing.hpp"
#include "hedge/kernels/elementwise.hpp"

namespace hedge::kernels {

namespace detail {

inline void softmax(arch::scalar, vector_view<const float> x, vector_view<float> out) noexcept {
  const std::size_t n = x.size();
  float max_value = x[0];
  for (std::size_t i = 1; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = std::exp(x[i] - max_value);
    sum += out[i];
  }
  const float inverse = float(1.0 / sum);
  for (std::size_t i = 0; i < n; ++i) out[i] *= inverse;
}

}  // namespace detail

}  // namespace hedge::kernels

#define HEDGE_VEC_BODY "hedge/kernels/detail/softmax_simd.inc"
#include "hedge/kernels/detail/for_each_width.inc"

namespace hedge::kernels {

/// out = softmax(x) (see file comment).
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): x is non-empty, out has x's size and is x
/// (in place) or does not overlap it. Elements are finite or -inf (masked),
/// at least one finite: a fully masked row or a +inf gives NaN.
template <arch::Arch A = arch::best>
void softmax(vector_view<const float> x, vector_view<float> out) noexcept {
  HEDGE_ASSERT(!x.empty() && out.size() == x.size());
  HEDGE_ASSERT(detail::same_or_disjoint(x.data(), out.data(), x.size()));
  arch::visit<A>([&](auto tag) { detail::softmax(tag, x, out); });
}

}  // namespace hedge::kernels
