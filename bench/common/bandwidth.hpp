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

/// 8 float lanes (GCC/Clang vector extension: explicit vectors, so no
/// -ffast-math is needed for the compiler to keep the sums in registers).
using f32x8 = float __attribute__((vector_size(32)));

/// Bytes of one "row" of the read pattern below.
inline constexpr std::size_t stream_row_bytes = 16384;

/// Sums `count` vectors the way a GEMV tile reads its weights: four
/// neighbouring 16 KiB rows at a time, one accumulator per row. On this
/// machine kind (Zen 3) a single sequential stream reads about 25% slower
/// than four neighbouring ones, and a GEMV reads the latter way, so a
/// single-stream figure would understate the bound (bw_fraction > 1).
inline float sum_rows(const f32x8* data, std::size_t count) {
  constexpr std::size_t row = stream_row_bytes / sizeof(f32x8);
  f32x8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  std::size_t base = 0;
  for (; base + 4 * row <= count; base += 4 * row) {
    for (std::size_t i = 0; i < row; ++i) {
      a0 += data[base + i];
      a1 += data[base + row + i];
      a2 += data[base + 2 * row + i];
      a3 += data[base + 3 * row + i];
    }
  }
  for (; base < count; ++base) a0 += data[base];
  const f32x8 total = (a0 + a1) + (a2 + a3);
  float sum = 0.0f;
  for (int k = 0; k < 8; ++k) sum += total[k];
  return sum;
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
/// through so that their total exceeds eight times the LLC: by the time a
/// buffer is used again it has been evicted, and the kernel reads it from DRAM
/// ("cold"). Twice the LLC is not enough on AMD's victim-cache L3, whose
/// replacement keeps part of a ring that size: Q8_0 GEMV then read at 1.1-1.2x
/// the DRAM bandwidth.
inline std::size_t cold_buffer_count(std::size_t bytes_per_buffer) {
  return 8 * llc_bytes() / std::max<std::size_t>(bytes_per_buffer, 1) + 1;
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
  const std::size_t words = bytes / sizeof(detail::f32x8);
  if (!buffer) {
    // Ordinary floats (no denormals or NaNs, whose arithmetic can be slow).
    buffer = detail::allocate_pages(bytes);
    auto* p = reinterpret_cast<float*>(buffer.get());
    for (std::size_t i = 0; i < bytes / sizeof(float); ++i) p[i] = 1.0f;
  }
  const auto* data = reinterpret_cast<const detail::f32x8*>(buffer.get());
  auto& workers = pool(threads);
  float sink[64] = {};
  double best = 0.0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    workers.parallel_for(workers.concurrency(), [&](std::size_t begin, std::size_t end) {
      for (std::size_t part = begin; part < end; ++part) {
        const range r = split_range(words, workers.concurrency(), part);
        sink[part % 64] += detail::sum_rows(data + r.begin, r.end - r.begin);
      }
    });
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    best = std::max(best, double(words * sizeof(detail::f32x8)) / seconds.count());
  }
  // The sums must be observable or the loads could be dropped.
  volatile float observed = 0.0f;
  for (float s : sink) observed = observed + s;
  return best;
}

}  // namespace hedge::bench
