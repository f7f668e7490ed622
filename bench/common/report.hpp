// bench/common/report.hpp: how every hedge benchmark registers, names and
// reports itself, so scripts/bench.sh can build one per-CPU report from the
// Google Benchmark JSON of any bench binary.
//
// Names: `<kernel>/<variant>/<shape>/<hot|cold>/threads:<n>`, built by
// benchmark_name(), e.g. `gemv/q4_0/avx2/4096x11008/cold/threads:2`. The
// kernel may have several segments; the variant is the first segment that is
// an arch tag name (scalar, avx2, avxvnni, avx512bw, avx512vnni, neon,
// neon_dotprod, amx), optionally followed by `_suffix` (`avx2_repacked`). The
// report compares variants of the same kernel, shape, residency and threads.
//
// Counters: set_bandwidth_counters() sets bytes_per_second and `bw_fraction`
// (that rate over the read bandwidth measured at the same thread count, see
// bandwidth.hpp; for a cold benchmark measured right after its timed loop, so that
// the median of the repetitions' fractions compares kernel and bound on the same machine); a cold benchmark above max_bw_fraction of that bound is labelled
// "ABOVE THE BOUND" (the probe, not the kernel, is wrong). set_flops_counters() sets `GFLOPs`. A family opens with
// begin_family(), which registers `<family>/bandwidth`: it runs right before
// the family's benchmarks and re-measures the bandwidth they are compared to.
//
// Timing: kernels run on pool(threads), so worker time is invisible to the
// main thread's CPU clock; register_benchmark() therefore times in real time.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "common/bandwidth.hpp"
#include "common/pool.hpp"

namespace hedge::bench {

namespace detail {
struct bandwidth_figure {
  bandwidth_result result;
  std::chrono::steady_clock::time_point measured;
};
struct bandwidth_cache {
  std::mutex mutex;
  std::map<std::size_t, bandwidth_figure> by_threads;
  std::map<std::size_t, double> best_by_threads;  ///< the highest figure measured in this process
};
inline bandwidth_cache& cache() {
  static bandwidth_cache instance;
  return instance;
}
/// A figure older than this is re-measured on next use even inside a family,
/// for runs whose filter skips the `<family>/bandwidth` entries.
inline constexpr std::chrono::seconds bandwidth_max_age{60};
}  // namespace detail

/// Drops every cached bandwidth figure: the next use re-measures.
inline void remeasure_bandwidth() {
  auto& c = detail::cache();
  const std::lock_guard lock(c.mutex);
  c.by_threads.clear();
}

/// Read bandwidth at `threads` threads and its loop: the cached figure, measured
/// now when there is none or it is older than detail::bandwidth_max_age.
inline bandwidth_result measured_bandwidth_result(std::size_t threads) {
  auto& c = detail::cache();
  {
    const std::lock_guard lock(c.mutex);
    const auto it = c.by_threads.find(threads);
    if (it != c.by_threads.end() && std::chrono::steady_clock::now() - it->second.measured < detail::bandwidth_max_age) {
      return it->second.result;
    }
  }
  bandwidth_result figure = read_bandwidth(threads);
  const std::lock_guard lock(c.mutex);
  c.by_threads[threads] = {figure, std::chrono::steady_clock::now()};
  double& best = c.best_by_threads[threads];
  best = std::max(best, figure.bytes_per_second);
  return figure;
}

/// The highest read bandwidth measured at `threads` threads in this process (0 if none):
/// what the machine showed it can do, however busy it was at the latest measurement.
inline double best_measured_bandwidth(std::size_t threads) {
  auto& c = detail::cache();
  const std::lock_guard lock(c.mutex);
  const auto it = c.best_by_threads.find(threads);
  return it == c.best_by_threads.end() ? 0.0 : it->second;
}

/// Read bandwidth (bytes/s) at `threads` threads (measured_bandwidth_result).
inline double measured_bandwidth(std::size_t threads) { return measured_bandwidth_result(threads).bytes_per_second; }

/// Read bandwidth (bytes/s) at `threads` threads measured now, by the two loops that were
/// fastest at that thread count (read_bandwidth's re-run of 2; re-running the first alone
/// read 8-10% below the sweep at 1 thread, and the Q6_K GEMV above it): the bound next to a
/// cold run.
/// The DRAM bandwidth a shared host gives this guest moves within seconds (2 threads:
/// 32-56 GB/s within one run, docs/matmul.md), so a figure taken at the start of a family
/// makes a kernel's fraction depend on when it ran; measured right after the kernel's timed
/// loop, the two meet the same machine. Also becomes the cached figure.
inline double adjacent_bandwidth(std::size_t threads) {
  const bandwidth_result figure = read_bandwidth(threads, 2);
  auto& c = detail::cache();
  const std::lock_guard lock(c.mutex);
  c.by_threads[threads] = {figure, std::chrono::steady_clock::now()};
  double& best = c.best_by_threads[threads];
  best = std::max(best, figure.bytes_per_second);
  return figure.bytes_per_second;
}

/// Whether the data a benchmark reads is in cache (`hot`: one buffer reused)
/// or streamed from DRAM (`cold`: cycles through cold_buffer_count() buffers).
enum class residency { hot, cold };

/// The most a cold benchmark may read, as a fraction of the best bound this process
/// measured at its thread count, before it is labelled as above the bound: that bound is the
/// best of many loops over several measurements, so a kernel above it by more than the
/// machine's run-to-run noise (a few percent here) means the probe missed a faster read
/// pattern. (The latest figure, which bw_fraction divides by, can be low when other
/// work shares the machine at that moment; the check does not use it.)
inline constexpr double max_bw_fraction = 1.05;

/// The real time of a benchmark's timed loop, from its construction (right before
/// `for (auto _ : state)`): Google Benchmark turns counters into rates only after the
/// benchmark returns, so the bound check below times the loop itself.
class loop_clock {
 public:
  [[nodiscard]] double seconds() const noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Sets bytes_per_second (bytes_per_iteration per iteration), `bw_fraction`
/// (that over the read bandwidth at `threads` threads: for a cold benchmark measured right
/// after its loop, adjacent_bandwidth; for a hot one the cached measured_bandwidth) and
/// `read_bw` (the figure itself). A cold benchmark whose loop (timed by `clock`) read above
/// max_bw_fraction of best_measured_bandwidth(threads) is labelled "ABOVE THE BOUND" with
/// both figures.
inline void set_bandwidth_counters(benchmark::State& state, double bytes_per_iteration, std::size_t threads,
                                   residency where, const loop_clock& clock) {
  const double seconds = clock.seconds();
  const double bytes = bytes_per_iteration * double(state.iterations());
  const double bandwidth = where == residency::cold ? adjacent_bandwidth(threads) : measured_bandwidth(threads);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["bw_fraction"] = benchmark::Counter(bytes / bandwidth, benchmark::Counter::kIsRate);
  state.counters["read_bw"] = benchmark::Counter(bandwidth);
  const double bound = std::max(bandwidth, best_measured_bandwidth(threads));
  if (where == residency::cold && seconds > 0.0 && bytes / seconds > max_bw_fraction * bound) {
    // A label, not SkipWithError: Google Benchmark 1.7's repetition statistics break on
    // an error raised after the timed loop.
    state.SetLabel("ABOVE THE BOUND: read " + std::to_string(bytes / seconds * 1e-9) + " GB/s from DRAM, bound " +
                   std::to_string(bound * 1e-9) + " GB/s: the bandwidth probe (bench/common/bandwidth.hpp) missed a "
                   "faster read");
  }
}

/// Sets `GFLOPs`, the rate in 1e9 floating-point (or int8: integer) operations
/// per second, from the operations one iteration performs.
inline void set_flops_counters(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOPs"] =
      benchmark::Counter(flops_per_iteration * double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
}

/// `<kernel>/<variant>/<shape>/<hot|cold>/threads:<threads>` (see file comment).
inline std::string benchmark_name(std::string_view kernel, std::string_view variant, std::string_view shape,
                                  residency where, std::size_t threads) {
  std::string name;
  name.append(kernel).append("/").append(variant).append("/").append(shape);
  name.append(where == residency::cold ? "/cold" : "/hot");
  name.append("/threads:").append(std::to_string(threads));
  return name;
}

/// Registers a benchmark timed in real time (see file comment), reported in
/// microseconds. `body` is called as body(benchmark::State&).
template <class Body>
benchmark::internal::Benchmark* register_benchmark(const std::string& name, Body body) {
  return benchmark::RegisterBenchmark(name.c_str(), std::move(body))
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

/// Opens the family `family` (e.g. "gemv/q4_0"): registers `<family>/bandwidth`,
/// which re-measures the read bandwidth at 1 thread and at every hardware
/// thread right before the benchmarks registered after it run, and reports
/// the figures as counters `read_bw_threads:<n>` (bytes/s).
inline void begin_family(const std::string& family) {
  register_benchmark(family + "/bandwidth",
                     [](benchmark::State& state) {
                       remeasure_bandwidth();
                       for (auto _ : state) {
                         for (std::size_t threads : thread_counts()) measured_bandwidth(threads);
                       }
                       for (std::size_t threads : thread_counts()) {
                         state.counters["read_bw_threads:" + std::to_string(threads)] =
                             benchmark::Counter(measured_bandwidth(threads));
                       }
                     })
      ->Iterations(1)
      ->Repetitions(1);
}

}  // namespace hedge::bench
