// hedge/model/random.hpp: a small seeded random generator with the same output on every
// platform and standard library (std:: distributions differ between libstdc++ versions,
// so tests and tools that must reproduce numbers use this instead), and sampling an index
// from a weight vector: the sampler draws tokens with them, the speculative verifier
// (verify/speculative.hpp) its accept/reject decisions and replacement tokens.
//
// SplitMix64 (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number generators"),
// the generator Java's SplittableRandom and xoshiro's seeding use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace hedge::model {

class seeded_random {
 public:
  constexpr explicit seeded_random(std::uint64_t seed) noexcept : state_(seed) {}

  constexpr std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  constexpr double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n) for 0 < n <= 2^53.
  constexpr std::uint64_t below(std::uint64_t n) noexcept {
    return static_cast<std::uint64_t>(uniform() * static_cast<double>(n));
  }
  /// Shuffles `items` in place (Fisher-Yates, Knuth TAOCP 3.4.2 algorithm P: each position
  /// from the last down swaps with a uniform one at or before it).
  template <class T>
  constexpr void shuffle(std::span<T> items) noexcept {
    for (std::size_t k = items.size(); k > 1; --k) std::swap(items[k - 1], items[below(k)]);
  }

 private:
  std::uint64_t state_;
};

/// llama2.c run.c's generator, for reproducing its sampled output: xorshift64* (Marsaglia
/// 2003, "Xorshift RNGs"; the multiplier of Vigna 2016), and a float in [0, 1) from the top
/// 24 bits of each 32-bit output. The state is the seed (`run -s S`); a zero seed stays
/// zero, as run.c's would (it takes the time instead).
class llama2c_random {
 public:
  constexpr explicit llama2c_random(std::uint64_t seed) noexcept : state_(seed) {}

  constexpr std::uint32_t next_u32() noexcept {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<std::uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  }
  /// run.c's random_f32, exactly (24 bits: the double holds the same value as its float).
  constexpr double uniform() noexcept { return static_cast<double>(next_u32() >> 8) / 16777216.0; }

 private:
  std::uint64_t state_;
};

/// Index sampled from an (unnormalised, non-negative) weight vector with uniform u in [0, 1).
inline std::int32_t sample_index(std::span<const float> weights, double u) noexcept {
  double total = 0.0;
  for (float w : weights) total += w;
  double target = u * total, running = 0.0;
  std::size_t last_positive = 0;
  for (std::size_t k = 0; k < weights.size(); ++k) {
    if (weights[k] <= 0.0f) continue;
    last_positive = k;
    running += weights[k];
    if (target < running) return static_cast<std::int32_t>(k);
  }
  return static_cast<std::int32_t>(last_positive);  // rounding at the top end
}

}  // namespace hedge::model
