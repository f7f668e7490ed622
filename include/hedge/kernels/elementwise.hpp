// hedge/kernels/elementwise.hpp: elementwise add, multiply and scale of float
// vectors (residual connections, gating, attention output scaling).
//
// Every output element is one IEEE operation on its inputs, so the SIMD
// overloads (every width of detail/vec.hpp, written once in
// detail/elementwise_simd.inc) are bit-identical to the scalar reference.
#pragma once

#include <cstddef>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/aliasing.hpp"

namespace hedge::kernels {

namespace detail {

/// The operation of binary(): out = a + b or out = a * b.
enum class binary_op { add, mul };

template <binary_op Op>
void binary(arch::scalar, const float* a, const float* b, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = Op == binary_op::add ? a[i] + b[i] : a[i] * b[i];
}

inline void scale(arch::scalar, const float* x, float s, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

inline bool binary_views_ok(vector_view<const float> a, vector_view<const float> b, vector_view<float> out) noexcept {
  return b.size() == a.size() && out.size() == a.size() && same_or_disjoint(a.data(), out.data(), a.size()) &&
         same_or_disjoint(b.data(), out.data(), b.size());
}

}  // namespace detail

}  // namespace hedge::kernels

#define HEDGE_VEC_BODY "hedge/kernels/detail/elementwise_simd.inc"
#include "hedge/kernels/detail/for_each_width.inc"

namespace hedge::kernels {

/// out = a + b.
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): equal sizes; out is a, b, or disjoint from both.
template <arch::Arch A = arch::best>
void add(vector_view<const float> a, vector_view<const float> b, vector_view<float> out) noexcept {
  HEDGE_ASSERT(detail::binary_views_ok(a, b, out));
  arch::visit<A>([&](auto tag) {
    detail::binary<detail::binary_op::add>(tag, a.data(), b.data(), out.data(), a.size());
  });
}

/// out = a * b (elementwise).
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): equal sizes; out is a, b, or disjoint from both.
template <arch::Arch A = arch::best>
void mul(vector_view<const float> a, vector_view<const float> b, vector_view<float> out) noexcept {
  HEDGE_ASSERT(detail::binary_views_ok(a, b, out));
  arch::visit<A>([&](auto tag) {
    detail::binary<detail::binary_op::mul>(tag, a.data(), b.data(), out.data(), a.size());
  });
}

/// out = x * s.
/// \tparam A arch tag selecting the implementation: `arch::best` (the best variant
/// this CPU runs), a concrete tag, or `arch::scalar` (the reference).
/// Preconditions (debug-checked): out has x's size; it is x or disjoint from it.
template <arch::Arch A = arch::best>
void scale(vector_view<const float> x, float s, vector_view<float> out) noexcept {
  HEDGE_ASSERT(out.size() == x.size() && detail::same_or_disjoint(x.data(), out.data(), x.size()));
  arch::visit<A>([&](auto tag) { detail::scale(tag, x.data(), s, out.data(), x.size()); });
}

}  // namespace hedge::kernels
