// bench/common/bandwidth.hpp: this machine's memory read bandwidth and cache size,
// measured at run time: the bound every kernel benchmark is reported against.
//
// Decode kernels stream weights from RAM, so their speed limit is the read
// bandwidth, and every kernel benchmark reports its bytes/s as a fraction of
// the figure measured here (see report.hpp). A kernel is one read pattern among
// many, so the bound is the best of several read loops, each over a buffer far
// larger than the last-level cache (LLC) so every byte comes from DRAM:
//
//   - the widest loads of each arch this CPU runs: 64-byte (AVX-512), 32-byte (AVX2),
//     16-byte (the build's baseline: SSE2 on x86, Advanced SIMD on AArch64), each
//     loop compiled with its arch tag's target attribute as the kernels are, so a
//     build without -march still measures with AVX-512 loads;
//   - 1, 2, 4 or 8 streams per thread, either far apart (the thread's slice cut into
//     that many parts read in lockstep, as the interleaved GEMV reads its groups,
//     kernels/matmul/gemv_streams.hpp) or neighbouring (that many consecutive 16 KiB
//     rows at a time, as a row-major GEMV tile reads);
//   - without software prefetch, prefetching 1 or 4 KiB ahead in each stream into L1
//     (T0), or 1, 2 or 4 KiB ahead into L2 only (T1): an L2 prefetch leaves the L1 miss
//     buffers to the loads, and one core keeps more lines in flight so, as the K-quant
//     GEMVs do (their AVX-512 kernels prefetch each block into L2: Q6_K at 1 thread read
//     1.07 of a probe without L2 loops, docs/perf-journal.md).
//
// Each loop runs at each thread count (one slice per thread), timed by the slowest
// thread's CPU time: on a machine shared with other work a preempted thread's wait is
// not bandwidth, and a bound measured while the cores were taken would sit below what
// a kernel reads in a quieter moment (wall time would put kernels above the bound). Where
// the threads of a pass did not overlap this overstates the multi-thread bound, which
// only makes kernels look slower. The first measurement
// at a thread count sweeps every loop; later ones (the machine is shared and its
// bandwidth drifts, so callers re-measure right before the benchmarks they compare)
// re-run that sweep's best few. Every loop checksums what it reads, and a loop whose
// sum says it skipped or repeated bytes aborts the binary: the probe itself is tested
// on every run. A kernel that reads faster than this bound means the probe is wrong
// (report.hpp flags it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/pool.hpp"
#include "hedge/compiler/attributes.hpp"
#include "hedge/core/arch.hpp"

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

/// Bytes of one row of the neighbouring-streams pattern.
inline constexpr std::size_t stream_row_bytes = 16384;
/// Most streams a read loop runs; a thread's slice is a whole number of
/// max_streams rows, so every loop reads the same bytes.
inline constexpr std::size_t max_streams = 8;
inline constexpr std::size_t slice_unit_bytes = max_streams * stream_row_bytes;

/// Vectors of 16, 32 and 64 bytes of 64-bit lanes (GCC/Clang vector extension): a
/// function with the matching target attribute loads and adds them with its widest
/// registers, without intrinsics, so one loop body serves every arch.
using u64x2 = std::uint64_t __attribute__((vector_size(16), may_alias));
using u64x4 = std::uint64_t __attribute__((vector_size(32), may_alias));
using u64x8 = std::uint64_t __attribute__((vector_size(64), may_alias));

/// Sums the 64-bit words of `bytes` bytes (a multiple of slice_unit_bytes, 64-byte
/// aligned) read as `Streams` streams of vectors V, far apart or neighbouring, each
/// prefetched as `Prefetch` says. One cache line per stream per step, so the streams
/// advance together; the sum makes every load observable. Inlined into each arch's
/// wrapper, which gives it the target.
inline constexpr std::size_t line_bytes = 64;

/// Where a software prefetch puts its line: `__builtin_prefetch`'s locality, 3 for L1
/// (x86 prefetcht0), 2 for L2 (prefetcht1).
enum class prefetch_hint : int { l2 = 2, l1 = 3 };
/// A read loop's software prefetch: `bytes` ahead in its stream (0: none), into `hint`.
struct prefetch_rule {
  std::size_t bytes = 0;
  prefetch_hint hint = prefetch_hint::l1;
};

/// acc += the cache line at `at` (64-byte aligned), prefetching as `Prefetch` says.
/// (A function, not a lambda: a lambda would not inherit the caller's target.)
template <class V, prefetch_rule Prefetch>
HEDGE_ALWAYS_INLINE void add_line(V& acc, const std::byte* at) noexcept {
  if constexpr (Prefetch.bytes != 0) __builtin_prefetch(at + Prefetch.bytes, 0, static_cast<int>(Prefetch.hint));
  const V* v = reinterpret_cast<const V*>(__builtin_assume_aligned(at, line_bytes));
  for (std::size_t i = 0; i < line_bytes / sizeof(V); ++i) acc += v[i];
}

template <class V, std::size_t Streams, bool Near, prefetch_rule Prefetch>
HEDGE_ALWAYS_INLINE std::uint64_t read_streams(const std::byte* data, std::size_t bytes) noexcept {
  V acc[Streams] = {};
  if constexpr (Near) {
    for (std::size_t base = 0; base < bytes; base += Streams * stream_row_bytes) {
      for (std::size_t offset = 0; offset < stream_row_bytes; offset += line_bytes) {
        for (std::size_t s = 0; s < Streams; ++s) {
          add_line<V, Prefetch>(acc[s], data + base + s * stream_row_bytes + offset);
        }
      }
    }
  } else {
    const std::size_t part = bytes / Streams;
    for (std::size_t offset = 0; offset < part; offset += line_bytes) {
      for (std::size_t s = 0; s < Streams; ++s) add_line<V, Prefetch>(acc[s], data + s * part + offset);
    }
  }
  V total = {};
  for (std::size_t s = 0; s < Streams; ++s) total += acc[s];
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < sizeof(V) / sizeof(std::uint64_t); ++i) sum += total[i];
  return sum;
}

/// The build's baseline vectors (SSE2 on x86-64, Advanced SIMD on AArch64).
template <std::size_t S, bool Near, prefetch_rule Prefetch>
std::uint64_t read_baseline(const std::byte* data, std::size_t bytes) noexcept {
  return read_streams<u64x2, S, Near, Prefetch>(data, bytes);
}
#if HEDGE_SIMD_X86
template <std::size_t S, bool Near, prefetch_rule Prefetch>
HEDGE_TARGET_AVX2 std::uint64_t read_avx2(const std::byte* data, std::size_t bytes) noexcept {
  return read_streams<u64x4, S, Near, Prefetch>(data, bytes);
}
template <std::size_t S, bool Near, prefetch_rule Prefetch>
HEDGE_TARGET_AVX512 std::uint64_t read_avx512(const std::byte* data, std::size_t bytes) noexcept {
  return read_streams<u64x8, S, Near, Prefetch>(data, bytes);
}
#endif

/// The calling thread's CPU time in seconds (0 where the clock is unavailable).
inline double thread_cpu_seconds() noexcept {
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0.0;
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// One read loop of the probe.
struct read_loop {
  std::string name;  ///< e.g. "avx512bw/4 far/prefetch 1024 to L2"
  bool (*supported)() noexcept;
  std::uint64_t (*read)(const std::byte*, std::size_t) noexcept;
};

template <class A, std::size_t S, bool Near, prefetch_rule Prefetch>
read_loop make_loop(std::uint64_t (*read)(const std::byte*, std::size_t) noexcept, const char* arch_name) {
  std::string name = std::string(arch_name) + "/" + std::to_string(S) + (Near ? " near" : " far");
  if (Prefetch.bytes == 0) return {std::move(name) + "/no prefetch", &A::supported, read};
  name += "/prefetch " + std::to_string(Prefetch.bytes) + (Prefetch.hint == prefetch_hint::l1 ? " to L1" : " to L2");
  return {std::move(name), &A::supported, read};
}

template <std::size_t S, bool Near, prefetch_rule Prefetch>
void add_loops(std::vector<read_loop>& loops) {
#if HEDGE_SIMD_X86
  loops.push_back(make_loop<arch::avx512bw, S, Near, Prefetch>(&read_avx512<S, Near, Prefetch>, "avx512bw"));
  loops.push_back(make_loop<arch::avx2, S, Near, Prefetch>(&read_avx2<S, Near, Prefetch>, "avx2"));
#endif
  loops.push_back(make_loop<arch::scalar, S, Near, Prefetch>(&read_baseline<S, Near, Prefetch>, "baseline"));
}

/// The prefetch rules of every stream pattern (2 KiB into L2 won at 1 thread on the Zen 5
/// guest as often as 1 KiB; 512 bytes never did).
template <std::size_t S, bool Near>
void add_prefetch_loops(std::vector<read_loop>& loops) {
  add_loops<S, Near, prefetch_rule{}>(loops);
  add_loops<S, Near, prefetch_rule{1024, prefetch_hint::l1}>(loops);
  add_loops<S, Near, prefetch_rule{4096, prefetch_hint::l1}>(loops);
  add_loops<S, Near, prefetch_rule{1024, prefetch_hint::l2}>(loops);
  add_loops<S, Near, prefetch_rule{2048, prefetch_hint::l2}>(loops);
  add_loops<S, Near, prefetch_rule{4096, prefetch_hint::l2}>(loops);
}

template <std::size_t S>
void add_stream_loops(std::vector<read_loop>& loops) {
  add_prefetch_loops<S, false>(loops);
  if constexpr (S > 1) add_prefetch_loops<S, true>(loops);  // one neighbouring stream is one far stream
}

/// Every read loop this CPU runs.
inline const std::vector<read_loop>& read_loops() {
  static const std::vector<read_loop> loops = [] {
    std::vector<read_loop> all;
    add_stream_loops<1>(all);
    add_stream_loops<2>(all);
    add_stream_loops<4>(all);
    add_stream_loops<8>(all);
    std::erase_if(all, [](const read_loop& l) { return !l.supported(); });
    return all;
  }();
  return loops;
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

/// Bytes of the buffer read_bandwidth streams: 4x the LLC, at least 256 MiB, a
/// whole number of slice units per thread.
inline std::size_t bandwidth_buffer_bytes() {
  const std::size_t unit = detail::slice_unit_bytes * 64;
  const std::size_t bytes = std::max<std::size_t>(4 * llc_bytes(), std::size_t{256} << 20);
  return (bytes + unit - 1) / unit * unit;
}

/// The read bandwidth at one thread count and the loop that reached it.
struct bandwidth_result {
  double bytes_per_second = 0.0;
  std::string loop;  ///< detail::read_loop::name of the best loop
};

namespace detail {

/// The probe's buffer, filled with 64-bit ones (so a loop's checksum is the number
/// of words it read), and each thread count's loops, fastest first, from its sweep.
struct probe_state {
  std::mutex mutex;
  aligned_bytes buffer;
  std::map<std::size_t, std::vector<std::size_t>> ranking;
};
inline probe_state& probe() {
  static probe_state state;
  return state;
}

/// Bytes/s of loop `l` over the buffer on pool(threads), best of `passes`.
inline double time_loop(const read_loop& l, const std::byte* data, std::size_t bytes, std::size_t threads,
                        int passes) {
  auto& workers = pool(threads);
  const std::size_t parts = workers.concurrency();
  const std::size_t units = bytes / slice_unit_bytes;
  std::vector<std::uint64_t> sums(parts);
  std::vector<double> busy(parts);  // each part's thread CPU seconds
  double best = 0.0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    workers.parallel_for(parts, [&](std::size_t begin, std::size_t end) {
      for (std::size_t part = begin; part < end; ++part) {
        const double cpu_start = thread_cpu_seconds();
        const range r = split_range(units, parts, part);
        sums[part] = l.read(data + r.begin * slice_unit_bytes, (r.end - r.begin) * slice_unit_bytes);
        busy[part] = thread_cpu_seconds() - cpu_start;
      }
    });
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
    std::uint64_t words = 0;
    for (std::uint64_t s : sums) words += s;
    if (words != units * slice_unit_bytes / sizeof(std::uint64_t)) {
      std::fprintf(stderr, "hedge bench: read loop %s read %llu words of %zu: the bandwidth probe is wrong\n",
                   l.name.c_str(), static_cast<unsigned long long>(words), units * slice_unit_bytes / 8);
      std::abort();
    }
    // The slowest thread's time on a CPU: a thread other work preempted does not count
    // the time it waited (wall time when the CPU clock is unavailable).
    const double on_cpu = *std::max_element(busy.begin(), busy.end());
    const double seconds = on_cpu > 0.0 && on_cpu < wall.count() ? on_cpu : wall.count();
    best = std::max(best, double(units * slice_unit_bytes) / seconds);
  }
  return best;
}

}  // namespace detail

/// Read bandwidth in bytes/s with `threads` threads (from pool(threads)), each
/// reading an equal slice of one large buffer: the best loop of the sweep (see the
/// file comment). The first call at a thread count sweeps every loop; later calls
/// re-run its best `rerun` loops. The buffer is allocated and faulted in on first
/// use and kept for the process.
inline bandwidth_result read_bandwidth(std::size_t threads, std::size_t rerun = 4) {
  auto& state = detail::probe();
  const std::lock_guard lock(state.mutex);
  const std::size_t bytes = bandwidth_buffer_bytes();
  if (!state.buffer) {
    state.buffer = detail::allocate_pages(bytes);
    auto* words = reinterpret_cast<std::uint64_t*>(state.buffer.get());
    std::fill(words, words + bytes / sizeof(std::uint64_t), std::uint64_t{1});
  }
  const auto& loops = detail::read_loops();
  auto& ranking = state.ranking[threads];
  const bool sweep = ranking.empty();
  std::vector<std::pair<double, std::size_t>> rates;
  for (std::size_t i = 0; i < (sweep ? loops.size() : std::min(rerun, ranking.size())); ++i) {
    const std::size_t loop = sweep ? i : ranking[i];
    rates.emplace_back(detail::time_loop(loops[loop], state.buffer.get(), bytes, threads, sweep ? 2 : 3), loop);
  }
  std::sort(rates.begin(), rates.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (sweep) {
    for (const auto& [rate, loop] : rates) ranking.push_back(loop);
  }
  return {rates.front().first, loops[rates.front().second].name};
}

}  // namespace hedge::bench
