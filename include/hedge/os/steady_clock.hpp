// hedge/os/steady_clock.hpp: the real clock, for the code that is templated on a Clock.
//
// The cloud client and the engine read time through a Clock type (now() returning a
// time_point) so tests can drive a fake one; this is the default. std::chrono::steady_clock
// because deadlines and retry delays must not jump when the wall clock is set (NTP, the user).
#pragma once

#include <chrono>
#include <thread>

namespace hedge::os {

struct steady_clock {
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;

  [[nodiscard]] time_point now() const noexcept { return std::chrono::steady_clock::now(); }

  /// Blocks the calling thread for `d` (a retry's back-off); a fake clock advances instead.
  void sleep_for(duration d) const noexcept {
    if (d > duration::zero()) std::this_thread::sleep_for(d);
  }
};

}  // namespace hedge::os
