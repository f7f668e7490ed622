// bench/common/cycles.hpp: the calling thread's own CPU cycles in user mode (Linux
// perf_event_open), for benchmarks whose time this shared machine's host distorts: a
// thread's cycle count stops while it is preempted or its vCPU is descheduled and does not
// scale with the core clock, so cycles per call move much less than CPU time per call (a
// cache miss still costs more cycles at a higher clock). Where the counter is unavailable
// (other OSes, perf_event_paranoid, no PMU in the guest), was shared with other events
// (multiplexed) or did not count, reads give nothing and the benchmark reports no cycle
// figure.
#pragma once

#include <cstdint>
#include <optional>

#if defined(__linux__)
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#endif

namespace hedge::bench {

class user_cycles {
 public:
  user_cycles() noexcept {
#if defined(__linux__)
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_HARDWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    fd_ = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
#endif
    start_ = read();
  }
  ~user_cycles() {
#if defined(__linux__)
    if (fd_ >= 0) close(fd_);
#endif
  }
  user_cycles(const user_cycles&) = delete;
  user_cycles& operator=(const user_cycles&) = delete;

  /// Cycles per unit of the work done since construction (construct right before the
  /// timed loop), if the counter worked all along and counted something (a guest without
  /// a PMU opens the counter but never counts).
  [[nodiscard]] std::optional<double> per(double units) const noexcept {
    const auto now = read();
    if (!now || !start_ || *now <= *start_) return std::nullopt;
    return static_cast<double>(*now - *start_) / units;
  }

 private:
  /// Cycles counted since the counter was opened, if the counter works and has counted all
  /// along (never multiplexed with other events).
  [[nodiscard]] std::optional<std::uint64_t> read() const noexcept {
#if defined(__linux__)
    struct {
      std::uint64_t value, enabled, running;
    } sample{};
    if (fd_ >= 0 && ::read(fd_, &sample, sizeof sample) == static_cast<ssize_t>(sizeof sample) &&
        sample.running == sample.enabled)
      return sample.value;
#endif
    return std::nullopt;
  }

  int fd_ = -1;
  std::optional<std::uint64_t> start_;  ///< read() when the counter was opened
};

}  // namespace hedge::bench
