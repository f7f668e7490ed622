// hedge/kernels/detail/aliasing.hpp: the operand aliasing the elementwise kernels
// (norm, softmax, activation, elementwise, rope) accept.
#pragma once

#include <cstddef>

namespace hedge::kernels::detail {

/// Whether [a, a + n) and [b, b + n) are the same range or do not overlap: the
/// only aliasing the elementwise kernels accept (in-place or disjoint).
inline bool same_or_disjoint(const float* a, const float* b, std::size_t n) noexcept {
  return a == b || a + n <= b || b + n <= a;
}

}  // namespace hedge::kernels::detail
