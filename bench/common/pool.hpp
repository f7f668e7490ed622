// bench/common/pool.hpp: one process-wide thread pool per thread count.
//
// Benchmarks and the bandwidth measurement share these pools, so a kernel at
// "threads:2" runs on the same persistent workers the bandwidth it is compared
// against was measured with, and no benchmark pays for starting threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hedge/os/thread_pool.hpp"

namespace hedge::bench {

/// Every hardware thread of this machine (at least 1).
inline std::size_t hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

/// The thread counts every benchmark family runs at: 1, 2, 4, ... and every hardware thread.
inline std::vector<std::size_t> thread_counts() {
  std::vector<std::size_t> counts{1};
  for (std::size_t t = 2; t < hardware_threads(); t *= 2) counts.push_back(t);
  if (hardware_threads() > 1) counts.push_back(hardware_threads());
  return counts;
}

/// The pool with `threads` threads (the caller counts as one), created on first use.
inline exec::thread_pool& pool(std::size_t threads) {
  static std::mutex mutex;
  static std::map<std::size_t, std::unique_ptr<exec::thread_pool>> pools;
  const std::lock_guard lock(mutex);
  auto& slot = pools[threads];
  if (!slot) slot = std::make_unique<exec::thread_pool>(threads);
  return *slot;
}

}  // namespace hedge::bench
