// hedge/engine/clock.hpp: the engine's Clock concept and a simulated clock.
//
// Every engine state machine (retry, circuit breaker, budget period, commit buffer, the
// request's deadline) reads time through a Clock, and waits through it: a retry's back-off
// is `clock.sleep_for(d)`. The real clock (os/steady_clock.hpp) blocks the thread; the
// simulated one only moves its time forward, so a test of a 30 s timeout or a 5 s breaker
// cooldown runs in microseconds and gives the same answer every run.
#pragma once

#include <chrono>
#include <concepts>

namespace hedge::engine {

/// A source of time that can also wait. `time_point` is a std::chrono time point.
template <class C>
concept Clock = requires(C& clock, typename C::duration d) {
  typename C::time_point;
  typename C::duration;
  { clock.now() } -> std::same_as<typename C::time_point>;
  { clock.sleep_for(d) };
};

/// Simulated time: a shared counter that only the holder of the clock moves. Copies of a
/// simulated_clock read the same time (the cloud client keeps its own copy of its clock).
class simulated_clock {
 public:
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<std::chrono::steady_clock, duration>;

  /// The shared time; one per test or simulation.
  struct state {
    duration elapsed{0};
  };

  constexpr explicit simulated_clock(state& s) noexcept : state_(&s) {}

  [[nodiscard]] time_point now() const noexcept { return time_point{state_->elapsed}; }
  /// Waiting is moving time forward.
  void sleep_for(duration d) const noexcept {
    if (d > duration::zero()) state_->elapsed += d;
  }
  void advance(duration d) const noexcept { sleep_for(d); }

 private:
  state* state_;
};

/// Milliseconds between two time points of one clock, as a double.
template <class TimePoint>
constexpr double milliseconds_between(TimePoint from, TimePoint to) noexcept {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace hedge::engine
