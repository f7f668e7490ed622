// hedge/kernels/elementwise.hpp: elementwise add, multiply and scale of float
// vectors (residual connections, gating, attention output scaling).
//
// Every output element is one IEEE operation on its inputs, so the SIMD
// overloads are bit-identical to the scalar reference.
#pragma once

#include <cstddef>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/detail/ops_simd.hpp"

namespace hedge::kernels {

namespace detail {

/// Applies `op` to elements of a and b into out; `op` is called with floats,
/// or with batches of tag A's lanes on the SIMD path.
template <class Op>
void binary(arch::scalar, const float* a, const float* b, float* out, std::size_t n, Op op) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = op(a[i], b[i]);
}

#if HEDGE_HAS_XSIMD
template <xsimd_float_arch A, class Op>
void binary(A, const float* a, const float* b, float* out, std::size_t n, Op op) noexcept {
  using batch = float_batch<A>;
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    op(batch::load_unaligned(a + i), batch::load_unaligned(b + i)).store_unaligned(out + i);
  }
  for (; i < n; ++i) out[i] = op(a[i], b[i]);
}

template <xsimd_float_arch A>
void scale(A, const float* x, float s, float* out, std::size_t n) noexcept {
  using batch = float_batch<A>;
  const batch s_v(s);
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) (batch::load_unaligned(x + i) * s_v).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = x[i] * s;
}
#endif

inline void scale(arch::scalar, const float* x, float s, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

inline bool binary_views_ok(vector_view<const float> a, vector_view<const float> b, vector_view<float> out) noexcept {
  return b.size() == a.size() && out.size() == a.size() && same_or_disjoint(a.data(), out.data(), a.size()) &&
         same_or_disjoint(b.data(), out.data(), b.size());
}

}  // namespace detail

/// out = a + b.
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): equal sizes; out is a, b, or disjoint from both.
template <arch::Arch A = arch::native>
void add(vector_view<const float> a, vector_view<const float> b, vector_view<float> out) noexcept {
  HEDGE_ASSERT(detail::binary_views_ok(a, b, out));
  detail::binary(detail::float_lanes<A>{}, a.data(), b.data(), out.data(), a.size(),
                 [](auto x, auto y) { return x + y; });
}

/// out = a * b (elementwise).
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): equal sizes; out is a, b, or disjoint from both.
template <arch::Arch A = arch::native>
void mul(vector_view<const float> a, vector_view<const float> b, vector_view<float> out) noexcept {
  HEDGE_ASSERT(detail::binary_views_ok(a, b, out));
  detail::binary(detail::float_lanes<A>{}, a.data(), b.data(), out.data(), a.size(),
                 [](auto x, auto y) { return x * y; });
}

/// out = x * s.
/// \tparam A arch tag selecting the implementation (`arch::scalar` is the reference).
/// Preconditions (debug-checked): out has x's size; it is x or disjoint from it.
template <arch::Arch A = arch::native>
void scale(vector_view<const float> x, float s, vector_view<float> out) noexcept {
  HEDGE_ASSERT(out.size() == x.size() && detail::same_or_disjoint(x.data(), out.data(), x.size()));
  detail::scale(detail::float_lanes<A>{}, x.data(), s, out.data(), x.size());
}

}  // namespace hedge::kernels
