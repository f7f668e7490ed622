// hedge/engine/circuit_breaker.hpp: closed / open / half-open, per tier, over a Clock.
//
//   closed --(failure_threshold consecutive failures)--> open
//   open   --(cooldown elapsed, at the next allow())-->  half_open: one probe request
//   half_open --(probe succeeds)--> closed    --(probe fails)--> open, cooldown doubled
//                                                                 (up to max_cooldown)
//
// Defaults, reasoned: LiteLLM's router cools a deployment down after 3 allowed failures
// for 5 s (allowed_fails, cooldown_time); Envoy's outlier detection ejects a host after 5
// consecutive 5xx for a 30 s base time that grows with each ejection. A hybrid has a
// fallback that is always there (the edge), so ejecting early costs little: we take
// LiteLLM's 3 failures and 5 s, and Envoy's growing ejection (doubling, capped at 60 s)
// so an endpoint that stays down is probed once a minute, not every 5 s. Only failures that
// say the tier is unhealthy count (timeouts, refused connections, 429 and 5xx, cut
// streams); a request the tier refused as malformed (4xx) does not.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "hedge/engine/clock.hpp"
#include "hedge/route/request.hpp"

namespace hedge::engine {

struct breaker_options {
  std::uint32_t failure_threshold = 3;
  std::chrono::milliseconds cooldown{5'000};
  std::chrono::milliseconds max_cooldown{60'000};
};

enum class breaker_transition : std::uint8_t { none, opened, half_opened, closed };

constexpr std::string_view to_string(breaker_transition t) noexcept {
  switch (t) {
    case breaker_transition::none: return "none";
    case breaker_transition::opened: return "opened";
    case breaker_transition::half_opened: return "half_opened";
    case breaker_transition::closed: return "closed";
  }
  return "unknown";
}

/// \tparam C a Clock
template <Clock C>
class circuit_breaker {
 public:
  using time_point = typename C::time_point;

  explicit circuit_breaker(C clock, breaker_options options = {}) noexcept
      : clock_(clock), options_(options), cooldown_(options.cooldown) {}

  /// The state the router sees (route_context::cloud_circuit): open until the cooldown has
  /// passed, then half_open until a probe decides.
  [[nodiscard]] route::circuit state() const noexcept {
    if (state_ == route::circuit::open && clock_.now() >= reopen_at_) return route::circuit::half_open;
    return state_;
  }

  /// May a request go to this tier now? In half_open, only one probe at a time.
  /// `transition` reports a move to half_open.
  bool allow(breaker_transition* transition = nullptr) noexcept {
    if (state_ == route::circuit::open) {
      if (clock_.now() < reopen_at_) return false;
      state_ = route::circuit::half_open;
      probing_ = false;
      if (transition) *transition = breaker_transition::half_opened;
    }
    if (state_ == route::circuit::half_open) {
      if (probing_) return false;
      probing_ = true;
    }
    return true;
  }

  breaker_transition record_success() noexcept {
    failures_ = 0;
    probing_ = false;
    if (state_ == route::circuit::closed) return breaker_transition::none;
    state_ = route::circuit::closed;
    cooldown_ = options_.cooldown;
    return breaker_transition::closed;
  }

  breaker_transition record_failure() noexcept {
    probing_ = false;
    if (state_ == route::circuit::half_open) {
      cooldown_ = cooldown_ * 2 < options_.max_cooldown ? cooldown_ * 2 : options_.max_cooldown;
      return open();
    }
    if (state_ == route::circuit::open) return breaker_transition::none;
    if (++failures_ >= options_.failure_threshold) return open();
    return breaker_transition::none;
  }

  /// A probe that ended without a verdict (cancelled: the other tier won a race).
  void release_probe() noexcept { probing_ = false; }

  [[nodiscard]] std::uint32_t consecutive_failures() const noexcept { return failures_; }
  [[nodiscard]] std::chrono::milliseconds current_cooldown() const noexcept { return cooldown_; }

 private:
  breaker_transition open() noexcept {
    state_ = route::circuit::open;
    reopen_at_ = clock_.now() + std::chrono::duration_cast<typename C::duration>(cooldown_);
    failures_ = 0;
    return breaker_transition::opened;
  }

  C clock_;
  breaker_options options_;
  std::chrono::milliseconds cooldown_;
  route::circuit state_ = route::circuit::closed;
  std::uint32_t failures_ = 0;
  bool probing_ = false;
  time_point reopen_at_{};
};

}  // namespace hedge::engine
