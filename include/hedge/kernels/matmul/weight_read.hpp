// hedge/kernels/matmul/weight_read.hpp: how the streamed GEMV and decode-batch tiles read
// the weights they stream from DRAM (in how many long streams, prefetched how), and the
// tuner that picks it on the CPU at hand.
//
// Which read is fastest is a property of the machine, not of the kernel. Two Zen 5 hosts
// (docs/perf-journal.md, "Weight prefetch tuned per CPU") disagree by 1.3-2.5x in opposite
// directions: on one, software prefetches ahead held the loads back and the hardware
// prefetchers alone read 0.87-0.94 of the bound; on the other the same tiles read 0.57 of
// the bound alone and 0.82 with L1 prefetches 2304 bytes ahead (Qwen3-1.7B Q4_K_M decode
// at 1 thread, 24 against 32 tok/s). The stream count splits by format on one CPU: on the
// second host Q8_0 read 4-6% faster as 2 streams than as 4 at 1 thread (4-15% at 2),
// where Q4_0 and Q5_0 read 6-18% slower. No fixed choice is right everywhere, so the first
// calls of each (arch, format, activation rows, threads) try each policy in turn, timed,
// and the rest run the fastest; the calls before run the kernel's own default. A policy
// never changes a result bit, only when bytes arrive (which group a row is in does not
// change its arithmetic), so tuning is safe at any point: outputs are identical under
// every policy (tests/kernels/weight_read_test.cpp).
//
// Tuning counts only calls that stream at least `weight_read_tuner::min_bytes`
// (smaller matrices stay in cache, where the read barely matters and one call is too
// short to time). After `warmup_calls` of them, the policies take turns in runs of
// consecutive calls (`runs` of `run_length` each, a run's first call untimed), and the
// cheapest mean in ticks per byte (each policy's dearest sample left out) decides. The state is static
// storage with relaxed atomics: no heap, no lock; calls racing on one key at worst
// overwrite one sample.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>

#include "hedge/compiler/intrinsics.hpp"
#include "hedge/kernels/matmul/gemv_streams.hpp"

namespace hedge::kernels::matmul {

/// How a streamed tile prefetches its weights (avx512_interleaved.hpp's stream_tiles,
/// avx2_interleaved.hpp's group_run).
///   none: the hardware prefetchers alone;
///   ahead_into_l1: each block's lines `prefetch_bytes` ahead in its stream, into L1 (T0);
///   ahead_into_l2: the same lines into L2 only (T1).
enum class weight_prefetch : std::uint8_t { none, ahead_into_l1, ahead_into_l2 };

/// How a streamed tile reads a run of groups: as `streams` long streams (gemv_streams.hpp:
/// gemv_streams or 2), each prefetched as `prefetch` says.
struct weight_read {
  std::uint8_t streams = gemv_streams;
  weight_prefetch prefetch = weight_prefetch::none;
  friend constexpr bool operator==(weight_read, weight_read) noexcept = default;
};

/// The policies the tuner tries, by index.
inline constexpr weight_read weight_reads[] = {
    {gemv_streams, weight_prefetch::none}, {gemv_streams, weight_prefetch::ahead_into_l1},
    {gemv_streams, weight_prefetch::ahead_into_l2}, {2, weight_prefetch::none},
    {2, weight_prefetch::ahead_into_l1}, {2, weight_prefetch::ahead_into_l2}};
inline constexpr std::size_t weight_read_policies = std::size(weight_reads);
static_assert(weight_read_policies < 255, "a policy index + 1 fits a byte");

/// The prefetches' names, as benchmarks and logs print them.
constexpr const char* name(weight_prefetch p) noexcept {
  switch (p) {
    case weight_prefetch::none: return "none";
    case weight_prefetch::ahead_into_l1: return "ahead_into_l1";
    case weight_prefetch::ahead_into_l2: return "ahead_into_l2";
  }
  return "?";
}

/// Calls f(std::integral_constant<int, M>{}, std::integral_constant<weight_prefetch, P>{})
/// for the run-time row count `rows` = M (1 .. Most) and prefetch P: how a streamed tile
/// templated on both is picked for one call. Returns false, calling nothing, for other row
/// counts.
template <int Most, class F>
bool visit_read(std::size_t rows, weight_prefetch prefetch, F&& f) {
  const auto with_prefetch = [&]<int M>(std::integral_constant<int, M> m) {
    switch (prefetch) {
      case weight_prefetch::ahead_into_l1:
        return f(m, std::integral_constant<weight_prefetch, weight_prefetch::ahead_into_l1>{});
      case weight_prefetch::ahead_into_l2:
        return f(m, std::integral_constant<weight_prefetch, weight_prefetch::ahead_into_l2>{});
      case weight_prefetch::none: break;
    }
    f(m, std::integral_constant<weight_prefetch, weight_prefetch::none>{});
  };
  return [&]<int... M>(std::integer_sequence<int, M...>) {
    return ((rows == static_cast<std::size_t>(M + 1) && (with_prefetch(std::integral_constant<int, M + 1>{}), true)) ||
            ...);
  }(std::make_integer_sequence<int, Most>{});
}

/// The most activation rows for which arch A's GEMV and decode-batch tiles of format W take
/// a policy: 0 where none do (specialized where they do: avx512_interleaved.hpp,
/// avx2_interleaved.hpp). A call that does not tune, or not yet, passes no policy, and
/// the kernel reads as its own default says (the AVX2 tiles: L1 prefetches).
template <class A, class W>
inline constexpr std::size_t tuned_read_rows = 0;

/// A policy every call takes instead of the tuned one: `forced_weight_read = i + 1` for
/// weight_reads[i] (benchmarks compare the policies so); 0 (the default) tunes.
inline std::atomic<std::uint8_t> forced_weight_read{0};

/// Most activation rows and threads a key tells apart (more share the last key).
inline constexpr std::size_t tuned_rows = 8;
inline constexpr std::size_t tuned_threads = 16;

#if HEDGE_SIMD_X86

/// One (format, activation rows, threads) key's tuning state.
class weight_read_tuner {
 public:
  /// Calls streaming at least min_bytes that run before any is timed: a model's first
  /// token finds its weights in other states (just repacked, partly in cache) than the
  /// rest, and the policy fastest there was not the fastest after.
  static constexpr std::uint32_t warmup_calls = 32;
  /// Each policy runs `runs` times `run_length` consecutive calls, the policies taking
  /// turns; a run's first call is not timed. A policy's rate depends on what the calls
  /// before it did (the hardware prefetchers adapt to what they see): alternating the
  /// policy every call read none and L1 prefetches 5% apart where, run after run, they
  /// read 15% apart (Q4_0 4096x11008 from DRAM at 1 thread).
  static constexpr std::uint32_t run_length = 5;
  static constexpr std::uint32_t runs = 2;
  /// Timed calls per policy.
  static constexpr std::uint32_t rounds = runs * (run_length - 1);
  /// Calls the tuning takes after the warm-up.
  static constexpr std::uint32_t tuning_calls = runs * run_length * weight_read_policies;
  /// Bytes a call must stream to count.
  static constexpr std::size_t min_bytes = std::size_t{1} << 20;

  /// The policy of a call before the tuning: the kernel's own default.
  static constexpr std::uint8_t untuned = 0xFF;
  static_assert(weight_read_policies < untuned);

  /// The policy (an index into weight_reads, or untuned) for the next call streaming
  /// `bytes`, and whether to time it (then `round` is its sample's index).
  struct pick {
    std::uint8_t policy;
    bool timed;
    std::uint32_t round = 0;
  };
  pick next(std::size_t bytes) noexcept {
    const std::uint8_t chosen = chosen_.load(std::memory_order_relaxed);
    if (chosen != 0) return {static_cast<std::uint8_t>(chosen - 1), false};
    if (bytes < min_bytes) return {untuned, false};
    const std::uint32_t call = calls_.fetch_add(1, std::memory_order_relaxed);
    if (call < warmup_calls) return {untuned, false};
    const std::uint32_t step = call - warmup_calls;
    if (step >= tuning_calls) {
      decide();
      return {choice(), false};
    }
    const std::uint32_t run = step / run_length, at = step % run_length;
    const auto policy = static_cast<std::uint8_t>(run % weight_read_policies);
    if (at == 0) return {policy, false};
    return {policy, true, static_cast<std::uint32_t>(run / weight_read_policies * (run_length - 1) + at - 1)};
  }

  /// Records a timed call: `ticks` for `bytes` as sample `round` of policy `policy`.
  void record(std::uint8_t policy, std::uint32_t round, std::uint64_t ticks, std::size_t bytes) noexcept {
    if (bytes == 0 || round >= rounds || policy >= weight_read_policies) return;
    // Ticks per KiB, at least 1 (0 means no sample yet).
    const std::uint64_t cost = ticks * 1024 / bytes + 1;
    costs_[policy][round].store(static_cast<std::uint32_t>(cost < UINT32_MAX ? cost : UINT32_MAX),
                                std::memory_order_relaxed);
  }

  /// The index of the choice made, or 0 while tuning.
  [[nodiscard]] std::uint8_t choice() const noexcept {
    const std::uint8_t chosen = chosen_.load(std::memory_order_relaxed);
    return chosen == 0 ? 0 : static_cast<std::uint8_t>(chosen - 1);
  }
  [[nodiscard]] bool decided() const noexcept { return chosen_.load(std::memory_order_relaxed) != 0; }

 private:
  /// The policy whose samples cost least on average, the dearest of each left out: a
  /// model's calls alternate matrices that stream fast and slow (2.5x apart under one policy
  /// and not another: Qwen3-1.7B's Q6_K matrices at 1 thread), so the mean of all of them is
  /// what the model's time follows, and no minimum or median of a few samples shows that;
  /// a preempted call (10-100x slow) is the one sample left out.
  void decide() noexcept {
    std::size_t best = 0;
    std::uint64_t cheapest = 0;  // the best policy's sum over its samples but the dearest
    std::uint32_t cheapest_n = 0;
    for (std::size_t p = 0; p < weight_read_policies; ++p) {
      std::uint64_t sum = 0;
      std::uint32_t dearest = 0, n = 0;
      for (std::uint32_t r = 0; r < rounds; ++r) {
        const std::uint32_t cost = costs_[p][r].load(std::memory_order_relaxed);
        if (cost == 0) continue;
        sum += cost;
        dearest = cost > dearest ? cost : dearest;
        ++n;
      }
      if (n < 2) continue;
      sum -= dearest;
      --n;
      // sum / n < cheapest / cheapest_n, without dividing
      if (cheapest_n == 0 || sum * cheapest_n < cheapest * n) {
        cheapest = sum;
        cheapest_n = n;
        best = p;
      }
    }
    chosen_.store(static_cast<std::uint8_t>(best + 1), std::memory_order_relaxed);
  }

  std::atomic<std::uint32_t> calls_{0};
  std::atomic<std::uint8_t> chosen_{0};  // 0 while tuning, else policy + 1
  std::atomic<std::uint32_t> costs_[weight_read_policies][rounds] = {};
};

/// The tuner of arch A's tiles of format W with `rows` activation rows (a decode batch) on
/// `threads` threads.
template <class A, class W>
weight_read_tuner& read_tuner(std::size_t rows, std::size_t threads) noexcept {
  static weight_read_tuner tuners[tuned_rows][tuned_threads];
  const auto clamp = [](std::size_t n, std::size_t most) { return (n < 1 ? 1 : n > most ? most : n) - 1; };
  return tuners[clamp(rows, tuned_rows)][clamp(threads, tuned_threads)];
}

/// The time-stamp counter: ticks at a constant rate.
inline std::uint64_t tuner_ticks() noexcept { return __rdtsc(); }

#endif  // HEDGE_SIMD_X86

/// Runs `run(policy)` (a call of arch A's tiles streaming `bytes` of W with `rows`
/// activation rows on `threads` threads) under the forced policy, or the tuner's next
/// one, timing it while the tuner asks; `run()` while the tuner says untuned (x86, where
/// the AVX2 and AVX-512 tiles take a policy).
template <class A, class W, class Run>
void with_weight_read(std::size_t rows, std::size_t threads, std::size_t bytes, Run&& run) {
  if (const std::uint8_t forced = forced_weight_read.load(std::memory_order_relaxed);
      forced != 0 && forced <= weight_read_policies) {
    run(weight_reads[forced - 1]);
    return;
  }
#if HEDGE_SIMD_X86
  weight_read_tuner& tuner = read_tuner<A, W>(rows, threads);
  const weight_read_tuner::pick pick = tuner.next(bytes);
  if (pick.policy == weight_read_tuner::untuned) {
    run();
    return;
  }
  if (!pick.timed) {
    run(weight_reads[pick.policy]);
    return;
  }
  const std::uint64_t start = tuner_ticks();
  run(weight_reads[pick.policy]);
  tuner.record(pick.policy, pick.round, tuner_ticks() - start, bytes);
#else
  // No kernel off x86 takes a policy.
  (void)rows, (void)threads, (void)bytes;
  run();
#endif
}

}  // namespace hedge::kernels::matmul
