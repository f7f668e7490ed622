// hedge/kernels/elementwise.hpp: elementwise add, multiply and scale of float
// vectors (residual connections, gating, attention output scaling).
//
// Every output element is one IEEE operation on its inputs, so the SIMD
// overloads (avx2, avx512bw, neon) are bit-identical to the scalar reference.
#pragma once

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

/// The operation of binary(): out = a + b or out = a * b.
enum class binary_op { add, mul };

template <binary_op Op>
void binary(arch::scalar, const float* a, const float* b, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = Op == binary_op::add ? a[i] + b[i] : a[i] * b[i];
}

inline void scale(arch::scalar, const float* x, float s, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

#if HEDGE_SIMD_X86
template <binary_op Op>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256 apply(__m256 a, __m256 b) noexcept {
  return Op == binary_op::add ? _mm256_add_ps(a, b) : _mm256_mul_ps(a, b);
}

template <binary_op Op>
HEDGE_TARGET_AVX2 void binary(arch::avx2, const float* a, const float* b, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 r0 = apply<Op>(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    const __m256 r1 = apply<Op>(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
    _mm256_storeu_ps(out + i, r0);
    _mm256_storeu_ps(out + i + 8, r1);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, apply<Op>(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) out[i] = Op == binary_op::add ? a[i] + b[i] : a[i] * b[i];
}

HEDGE_TARGET_AVX2 inline void scale(arch::avx2, const float* x, float s, float* out, std::size_t n) noexcept {
  const __m256 s_v = _mm256_set1_ps(s);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 r0 = _mm256_mul_ps(_mm256_loadu_ps(x + i), s_v);
    const __m256 r1 = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), s_v);
    _mm256_storeu_ps(out + i, r0);
    _mm256_storeu_ps(out + i + 8, r1);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s_v));
  for (; i < n; ++i) out[i] = x[i] * s;
}

template <binary_op Op>
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m512 apply(__m512 a, __m512 b) noexcept {
  return Op == binary_op::add ? _mm512_add_ps(a, b) : _mm512_mul_ps(a, b);
}

template <binary_op Op>
HEDGE_TARGET_AVX512 void binary(arch::avx512bw, const float* a, const float* b, float* out, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 r0 = apply<Op>(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    const __m512 r1 = apply<Op>(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16));
    _mm512_storeu_ps(out + i, r0);
    _mm512_storeu_ps(out + i + 16, r1);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, apply<Op>(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n) {
    const __mmask16 tail = kernels::avx512::first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, tail, apply<Op>(_mm512_maskz_loadu_ps(tail, a + i), _mm512_maskz_loadu_ps(tail, b + i)));
  }
}

HEDGE_TARGET_AVX512 inline void scale(arch::avx512bw, const float* x, float s, float* out, std::size_t n) noexcept {
  const __m512 s_v = _mm512_set1_ps(s);
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 r0 = _mm512_mul_ps(_mm512_loadu_ps(x + i), s_v);
    const __m512 r1 = _mm512_mul_ps(_mm512_loadu_ps(x + i + 16), s_v);
    _mm512_storeu_ps(out + i, r0);
    _mm512_storeu_ps(out + i + 16, r1);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), s_v));
  if (i < n) {
    const __mmask16 tail = kernels::avx512::first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), s_v));
  }
}
#endif

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
template <binary_op Op>
void binary(arch::neon, const float* a, const float* b, float* out, std::size_t n) noexcept {
  using batch = kernels::neon::floats;
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) {
    const batch x = batch::load_unaligned(a + i), y = batch::load_unaligned(b + i);
    (Op == binary_op::add ? x + y : x * y).store_unaligned(out + i);
  }
  for (; i < n; ++i) out[i] = Op == binary_op::add ? a[i] + b[i] : a[i] * b[i];
}

inline void scale(arch::neon, const float* x, float s, float* out, std::size_t n) noexcept {
  using batch = kernels::neon::floats;
  const batch s_v(s);
  std::size_t i = 0;
  for (; i + batch::size <= n; i += batch::size) (batch::load_unaligned(x + i) * s_v).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = x[i] * s;
}
#endif

inline bool binary_views_ok(vector_view<const float> a, vector_view<const float> b, vector_view<float> out) noexcept {
  return b.size() == a.size() && out.size() == a.size() && same_or_disjoint(a.data(), out.data(), a.size()) &&
         same_or_disjoint(b.data(), out.data(), b.size());
}

}  // namespace detail

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
