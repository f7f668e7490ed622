// bench/common/bandwidth.hpp: this machine's memory read bandwidth and cache size,
// measured at run time.
//
// Decode kernels stream weights from RAM, so their speed limit is the read
// bandwidth, and every kernel benchmark reports its bytes/s as a fraction of
// the figure measured here (see report.hpp). The figure is the best of several
// passes of a vectorised sum over a buffer far larger than the last-level cache
// (LLC), so the loop is load-bound and every byte comes from DRAM. The machine
// is shared and its bandwidth drifts, so callers measure right before the
// benchmarks they compare against it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "common/pool.hpp"

namespace hedge::bench {

namespace detail {

/// Parses a sysfs cache size such as "32768K" or "1M" into bytes (0 when unreadable).
inline std::size_t parse_cache_size(const std::string& text) {
  std::size_t value = 0;
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') value = value * 10 + std::size_t(text[i++] - '0');
  if (i < text.size()) {
    if (text[i] == 'K') value <<= 10;
    if (text[i] == 'M') value <<= 20;
    if (text[i] == 'G') value <<= 30;
  }
  return value;
}

/// Page-aligned memory released with std::free.
struct free_deleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using aligned_bytes = std::unique_ptr<std::byte[], free_deleter>;

inline aligned_bytes allocate_pages(std::size_t bytes) {
  constexpr std::size_t page = 4096;
  return aligned_bytes(static_cast<std::byte*>(std::aligned_alloc(page, (bytes + page - 1) / page * page)));
}

/// 32 bytes of unsigned lanes (GCC/Clang vector extension): integer adds are
/// associative, so the compiler keeps the sum in vector registers without
/// -ffast-math, and eight independent accumulators leave the loop load-bound.
using u64x4 = std::uint64_t __attribute__((vector_size(32)));

inline std::uint64_t sum_words(const u64x4* data, std::size_t count) {
  u64x4 acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += data[i + std::size_t(k)];
  }
  for (; i < count; ++i) acc[0] += data[i];
  u64x4 total = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
  return total[0] + total[1] + total[2] + total[3];
}

}  // namespace detail

/// Size in bytes of the largest (last-level) cache, read from Linux sysfs for
/// CPU 0. Falls back to 64 MiB, larger than most LLCs, when sysfs is absent,
/// so cold buffers stay cold.
inline std::size_t llc_bytes() {
  static const std::size_t bytes = [] {
    std::size_t best_level = 0, best_size = 0;
    for (int index = 0; index < 16; ++index) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
      std::ifstream level_file(dir + "level"), size_file(dir + "size");
      std::size_t level = 0;
      std::string size_text;
      if (!(level_file >> level) || !(size_file >> size_text)) continue;
      const std::size_t size = detail::parse_cache_size(size_text);
      if (level > best_level || (level == best_level && size > best_size)) {
        best_level = level;
        best_size = size;
      }
    }
    return best_size != 0 ? best_size : std::size_t{64} << 20;
  }();
  return bytes;
}

/// How many distinct buffers of `bytes_per_buffer` bytes a benchmark cycles
/// through so that their total exceeds twice the LLC: by the time a buffer is
/// used again, it has been evicted, and the kernel reads it from DRAM ("cold").
inline std::size_t cold_buffer_count(std::size_t bytes_per_buffer) {
  return 2 * llc_bytes() / std::max<std::size_t>(bytes_per_buffer, 1) + 1;
}

/// Bytes of the buffer read_bandwidth streams: 4x the LLC, at least 256 MiB.
inline std::size_t bandwidth_buffer_bytes() { return std::max<std::size_t>(4 * llc_bytes(), std::size_t{256} << 20); }

/// Read bandwidth in bytes/s with `threads` threads (from pool(threads)) each
/// summing an equal slice of one large buffer; the best of `passes` passes.
/// The buffer is allocated and faulted in on first use and kept for the process.
inline double read_bandwidth(std::size_t threads, int passes = 6) {
  static std::mutex mutex;
  static detail::aligned_bytes buffer;
  const std::lock_guard lock(mutex);
  const std::size_t bytes = bandwidth_buffer_bytes();
  const std::size_t words = bytes / sizeof(detail::u64x4);
  if (!buffer) {
    buffer = detail::allocate_pages(bytes);
    auto* p = reinterpret_cast<std::uint64_t*>(buffer.get());
    for (std::size_t i = 0; i < bytes / sizeof(std::uint64_t); ++i) p[i] = i;
  }
  const auto* data = reinterpret_cast<const detail::u64x4*>(buffer.get());
  auto& workers = pool(threads);
  std::uint64_t sink[64] = {};
  double best = 0.0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    workers.parallel_for(workers.concurrency(), [&](std::size_t begin, std::size_t end) {
      for (std::size_t part = begin; part < end; ++part) {
        const range r = split_range(words, workers.concurrency(), part);
        sink[part % 64] += detail::sum_words(data + r.begin, r.end - r.begin);
      }
    });
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    best = std::max(best, double(words * sizeof(detail::u64x4)) / seconds.count());
  }
  // The sums must be observable or the loads could be dropped.
  volatile std::uint64_t observed = 0;
  for (std::uint64_t s : sink) observed = observed + s;
  return best;
}

}  // namespace hedge::bench
