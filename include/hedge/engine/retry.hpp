// hedge/engine/retry.hpp: bounded retries with exponential back-off, full jitter and
// Retry-After, inside one deadline.
//
// The delay before retry n (n = 1, 2, ...) is uniform in [0, min(max_delay, base * 2^(n-1))]
// ("full jitter", Brooker 2015: spreads a burst of clients that failed together); a
// server's Retry-After (429 / 503) is a floor under it. A retry is not made when the
// attempts are used up, when the error is one a retry cannot fix (the tier refused the
// request as malformed or unauthorised), or when the delay would end past the request's
// deadline: the time is better spent at the other tier.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "hedge/core/result.hpp"

namespace hedge::engine {

struct retry_options {
  std::uint32_t max_attempts = 3;  ///< attempts at one tier per request, the first included
  std::chrono::milliseconds base_delay{200};
  std::chrono::milliseconds max_delay{5'000};
};

/// Errors a tier may recover from on its own: timeouts, refused or cut connections, 429
/// and 5xx (unavailable), a garbled answer (parse_error). Not: a request the tier refused
/// (invalid_argument, rejected), one too large for it (capacity_exceeded), unsupported.
constexpr bool is_transient(errc code) noexcept {
  return code == errc::timeout || code == errc::unavailable || code == errc::parse_error || code == errc::io_error;
}

/// A small deterministic generator for jitter (splitmix64): the engine is seeded once,
/// so a simulated run is reproducible.
struct jitter_source {
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  constexpr double uniform() noexcept {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

class retry_policy {
 public:
  constexpr explicit retry_policy(retry_options options = {}) noexcept : options_(options) {}

  [[nodiscard]] constexpr const retry_options& options() const noexcept { return options_; }

  /// The wait before the next attempt, or nothing when no retry should be made.
  /// \param attempts_made attempts so far at this tier (>= 1)
  /// \param remaining     time left before the request's deadline (nullopt: no deadline)
  [[nodiscard]] std::optional<std::chrono::milliseconds> next_delay(
      std::uint32_t attempts_made, errc failure, std::optional<std::chrono::seconds> retry_after,
      std::optional<std::chrono::milliseconds> remaining, jitter_source& jitter) const noexcept {
    if (attempts_made >= options_.max_attempts || !is_transient(failure)) return std::nullopt;
    const std::uint32_t shift = attempts_made - 1 < 20 ? attempts_made - 1 : 20;
    auto cap = options_.base_delay * (std::int64_t{1} << shift);
    if (cap > options_.max_delay) cap = options_.max_delay;
    auto delay = std::chrono::milliseconds(static_cast<std::int64_t>(jitter.uniform() * static_cast<double>(cap.count())));
    if (retry_after && *retry_after > delay) delay = *retry_after;
    if (remaining && delay >= *remaining) return std::nullopt;
    return delay;
  }

 private:
  retry_options options_;
};

}  // namespace hedge::engine
