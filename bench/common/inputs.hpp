// bench/common/inputs.hpp: deterministic benchmark inputs (a linear
// congruential generator: cheap and identical on every run and platform;
// kernel speed does not depend on the values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hedge::bench {

/// n floats in [-1, 1) from `seed`.
inline std::vector<float> pseudo_random_floats(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.f;
  }
  return v;
}

}  // namespace hedge::bench
