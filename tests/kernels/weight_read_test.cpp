// weight_read: after its warm-up calls the tuner runs each policy in turn, in runs of
// consecutive calls (a run's first call untimed), then keeps the one with the fewest ticks per byte on average (one slow
// sample never decides; alternating fast and slow calls count at their mean; calls below
// min_bytes neither count nor wait); a GEMV streaming enough bytes tunes its (format, rows,
// threads) key, per arch, and so does a decode batch up to the rows the arch's tiles
// stream; and the AVX-512 VNNI and AVX2 GEMV and decode batches give the same bits under
// every policy (4 or 2 streams, each prefetch) as under the kernel's own default, so tuning
// can never change a result.
// (x86: no other kernel takes a policy.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "hedge/kernels/gemm.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/matmul/weight_read.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/os/thread_pool.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q6_k.hpp"
#include "kernels/matmul_support.hpp"

namespace {

namespace q = hedge::quant;
namespace k = hedge::kernels;
namespace mm = hedge::kernels::matmul;

#if HEDGE_SIMD_X86

constexpr std::size_t policies = mm::weight_read_policies;

using tuner_t = mm::weight_read_tuner;

/// Runs the tuner's warm-up calls, then its timed ones, each costing `per_kib(policy,
/// round)` ticks per KiB (policy: an index into weight_reads); returns the choice.
template <class Cost>
std::uint8_t tune(tuner_t& tuner, std::size_t bytes, Cost per_kib) {
  for (std::uint32_t call = 0; call < tuner_t::warmup_calls; ++call) {
    const auto pick = tuner.next(bytes);
    EXPECT_FALSE(pick.timed) << "warm-up call " << call;
    EXPECT_EQ(pick.policy, tuner_t::untuned) << "the kernel's own default";
  }
  std::uint32_t timed[policies] = {};
  for (std::uint32_t call = 0; call < tuner_t::tuning_calls; ++call) {
    const auto pick = tuner.next(bytes);
    // Runs of run_length calls per policy, in turn; a run's first call untimed.
    const std::uint32_t run = call / tuner_t::run_length;
    EXPECT_EQ(pick.policy, run % policies) << "call " << call;
    EXPECT_EQ(pick.timed, call % tuner_t::run_length != 0) << "call " << call;
    EXPECT_FALSE(tuner.decided());
    if (!pick.timed) continue;
    std::uint32_t& n = timed[pick.policy];
    EXPECT_EQ(pick.round, n++) << "call " << call;
    tuner.record(pick.policy, pick.round, per_kib(pick.policy, pick.round) * bytes / 1024, bytes);
  }
  for (std::uint32_t n : timed) EXPECT_EQ(n, tuner_t::rounds);
  const auto pick = tuner.next(bytes);
  EXPECT_FALSE(pick.timed);
  EXPECT_TRUE(tuner.decided());
  EXPECT_EQ(pick.policy, tuner.choice());
  return pick.policy;
}

/// The index of `read` in weight_reads.
std::uint8_t index_of(mm::weight_read read) {
  for (std::size_t i = 0; i < policies; ++i) {
    if (mm::weight_reads[i] == read) return static_cast<std::uint8_t>(i);
  }
  ADD_FAILURE() << "no such policy";
  return 0;
}

TEST(WeightReadTuner, TriesEachPolicyInTurnThenKeepsTheFastest) {
  // Every policy is someone's fastest: each in turn here.
  for (std::size_t fastest = 0; fastest < policies; ++fastest) {
    tuner_t tuner;
    EXPECT_EQ(tune(tuner, tuner_t::min_bytes,
                   [&](std::uint8_t p, std::uint32_t) -> std::uint64_t { return p == fastest ? 100 : 200 + 10 * p; }),
              fastest);
    for (int call = 0; call < 3; ++call) EXPECT_EQ(tuner.next(tuner_t::min_bytes).policy, fastest);
  }
}

TEST(WeightReadTuner, OneSlowSampleDoesNotDecide) {
  tuner_t tuner;
  // 2 streams prefetched into L2 is the fastest, but one of its calls was preempted (100x
  // slower).
  const std::uint8_t best = index_of({2, mm::weight_prefetch::ahead_into_l2});
  EXPECT_EQ(tune(tuner, 4 * tuner_t::min_bytes,
                 [&](std::uint8_t p, std::uint32_t round) -> std::uint64_t {
                   if (p == best) return round == 3 ? 10000 : 100;
                   return p == 0 ? 150 : 400;
                 }),
            best);
}

TEST(WeightReadTuner, TheMeanDecidesWhereCallsAlternateFastAndSlow) {
  tuner_t tuner;
  // As Qwen3-1.7B's Q6_K matrices at 1 thread: with no prefetch every other call is 2.5x
  // slower (its minimum and median look best); L1 prefetches are steady.
  const std::uint8_t l1 = index_of({mm::gemv_streams, mm::weight_prefetch::ahead_into_l1});
  EXPECT_EQ(tune(tuner, tuner_t::min_bytes,
                 [&](std::uint8_t p, std::uint32_t round) -> std::uint64_t {
                   if (mm::weight_reads[p].prefetch == mm::weight_prefetch::none) return round % 2 ? 160 : 64;
                   return p == l1 ? 77 : 95;
                 }),
            l1);
}

TEST(WeightReadTuner, SmallCallsNeitherCountNorWait) {
  tuner_t tuner;
  for (int call = 0; call < 100; ++call) {
    const auto pick = tuner.next(tuner_t::min_bytes - 1);
    EXPECT_FALSE(pick.timed);
    EXPECT_EQ(pick.policy, tuner_t::untuned);
  }
  EXPECT_FALSE(tuner.decided());
  for (std::uint32_t call = 0; call <= tuner_t::warmup_calls; ++call) EXPECT_FALSE(tuner.next(tuner_t::min_bytes).timed);
  EXPECT_TRUE(tuner.next(tuner_t::min_bytes).timed) << "the first run's second call";
}

/// Forces policy weight_reads[p] for the scope, then tunes again.
struct forced_policy {
  explicit forced_policy(std::size_t p) noexcept { mm::forced_weight_read.store(static_cast<std::uint8_t>(p + 1)); }
  ~forced_policy() { mm::forced_weight_read.store(0); }
  forced_policy(const forced_policy&) = delete;
  forced_policy& operator=(const forced_policy&) = delete;
};

/// The interleaved GEMV and decode batches of W on arch A under every policy, and under the
/// kernel's own default read (the matrix streams less than min_bytes, so an unforced call
/// runs that default), equal the rows of a 9-row GEMM, which no tile streams, bit for bit,
/// at 1 and 3 threads.
template <class W, class A>
void check_same_bits() {
  if constexpr (hedge::test::may_run<A>) {
    if (!A::supported()) GTEST_SKIP() << "this CPU cannot run " << A::name;
    // 23 groups, the last partial: stream_tiles' 4 streams of 5 groups, a pair and the
    // partial group, or 2 streams of 11 and the partial group; K of 5 blocks.
    const std::size_t n = 181, kk = 5 * W::block_elements, most_rows = 9;
    hedge::test::quantized_matrix<W> w(n, kk, 17);
    std::vector<typename k::interleaved<W>::block> storage(k::interleaved_blocks<W>(n, kk));
    ASSERT_TRUE((k::repack<W>(w.view(), {storage.data(), storage.size()})));
    const k::interleaved_view<W> view(storage.data(), n, kk);
    const auto xs = hedge::test::random_floats(most_rows * kk, 18);
    std::vector<std::byte> workspace(k::gemm_workspace_bytes<W>(most_rows, kk));
    hedge::exec::thread_pool pool(3);
    static_assert(mm::tuned_rows < 9, "9 rows are not a decode batch");
    std::vector<float> unstreamed(most_rows * n);
    ASSERT_TRUE((k::gemm<W, A>(view, {xs.data(), most_rows, kk}, {unstreamed.data(), most_rows, n}, workspace)));
    for (std::size_t rows : {1u, 2u, 3u, 4u, 5u, 8u}) {
      const hedge::matrix_view<const float> x(xs.data(), rows, kk);
      const std::vector<float> expected(unstreamed.begin(), unstreamed.begin() + static_cast<std::ptrdiff_t>(rows * n));
      std::vector<float> seen(rows * n);
      ASSERT_LT(view.bytes(), tuner_t::min_bytes);
      ASSERT_TRUE((k::gemm<W, A>(view, x, {seen.data(), rows, n}, workspace)));
      EXPECT_EQ(seen, expected) << W::name << ", " << rows << " rows, the kernel's default read";
      for (std::size_t p = 0; p < policies; ++p) {
        const forced_policy forced(p);
        SCOPED_TRACE(testing::Message() << W::name << ", " << rows << " rows, " << int{mm::weight_reads[p].streams}
                                        << " streams, " << mm::name(mm::weight_reads[p].prefetch));
        // Each call writes into NaNs, so no row can pass on an earlier call's value.
        const auto clear = [&] { std::fill(seen.begin(), seen.end(), std::numeric_limits<float>::quiet_NaN()); };
        clear();
        ASSERT_TRUE((k::gemm<W, A>(view, x, {seen.data(), rows, n}, workspace)));
        EXPECT_EQ(seen, expected);
        clear();
        ASSERT_TRUE((k::gemm<W, A>(view, x, {seen.data(), rows, n}, workspace, pool)));
        EXPECT_EQ(seen, expected) << "3 threads";
        if (rows == 1) {
          clear();
          ASSERT_TRUE((k::gemv<W, A>(view, {xs.data(), kk}, {seen.data(), n}, workspace)));
          EXPECT_EQ(seen, expected) << "GEMV";
          clear();
          ASSERT_TRUE((k::gemv<W, A>(view, {xs.data(), kk}, {seen.data(), n}, workspace, pool)));
          EXPECT_EQ(seen, expected) << "GEMV, 3 threads";
        }
      }
    }
  }
}

template <class A>
void check_same_bits_every_format() {
  check_same_bits<q::q4_0, A>();
  check_same_bits<q::q8_0, A>();
  check_same_bits<q::q5_0, A>();
  check_same_bits<q::q5_1, A>();
  check_same_bits<q::q4_k, A>();
  check_same_bits<q::q6_k, A>();
}

TEST(WeightRead, EveryPolicyGivesTheSameBits) { check_same_bits_every_format<hedge::arch::avx512vnni>(); }

TEST(WeightRead, EveryPolicyGivesTheSameBitsOnAvx2) { check_same_bits_every_format<hedge::arch::avx2>(); }

TEST(WeightRead, TheArchsThatTuneAndWhat) {
  // The AVX2 tiles stream (and tune) up to 4 activation rows of every format they run.
  static_assert(mm::tuned_read_rows<hedge::arch::avx2, q::q4_0> == 4);
  static_assert(mm::tuned_read_rows<hedge::arch::avx2, q::q8_0> == 4);
  static_assert(mm::tuned_read_rows<hedge::arch::avx2, q::q5_1> == 4);
  static_assert(mm::tuned_read_rows<hedge::arch::avx2, q::q4_k> == 4);
  static_assert(mm::tuned_read_rows<hedge::arch::avx2, q::q6_k> == 4);
  static_assert(mm::tuned_read_rows<hedge::arch::avx512vnni, q::q4_k> == 8);
  // avx512bw (AVX-512 without VNNI) runs the AVX2 tiles, and tunes them as avx2 does.
  static_assert(mm::tuned_read_rows<hedge::arch::avx512bw, q::q8_0> == 4);
  static_assert(mm::tuned_read_rows<hedge::arch::avx512bw, q::q4_k> == 4);
  // The K-quants' AVX2 tiles take at most 2 groups (their 4-group tile spills).
  static_assert(mm::avx2::gemv_tile_groups<q::q4_k> == 2 && mm::avx2::gemv_tile_groups<q::q6_k> == 2);
  static_assert(mm::avx2::gemv_tile_groups<q::q4_0> == 4);
  static_assert(mm::tuned_read_rows<hedge::arch::scalar, q::q8_0> == 0);
  // Their defaults: the AVX2 tiles prefetch into L1, the AVX-512 ones leave it to the
  // hardware (docs/matmul.md, "Weight read tuned per CPU").
  static_assert(mm::avx2_untuned_read == mm::weight_read{mm::gemv_streams, mm::weight_prefetch::ahead_into_l1});
}

/// A GEMV of W on arch A streaming just over min_bytes, on `threads` threads (a key no
/// other test tunes), tunes A's key and no other, with the same bits on every call; so
/// does a decode batch of as many rows as A's tiles stream (tuned_read_rows), and a batch
/// of one row more (where a key tells it apart) runs the kernel's default, untuned.
template <class W, class A>
void check_tunes_its_key(std::size_t threads) {
  if constexpr (hedge::test::may_run<A>) {
    if (!A::supported()) GTEST_SKIP() << "this CPU cannot run " << A::name;
    constexpr std::size_t streamed = mm::tuned_read_rows<A, W>, most = mm::tuned_rows;
    static_assert(streamed >= 1);
    const std::size_t kk = 4096;  // rows for just over 1 MiB (Q8_0: 256, Q4_K: 464)
    const std::size_t n = (tuner_t::min_bytes / (kk / W::block_elements * sizeof(typename W::block)) / 16 + 1) * 16;
    hedge::test::quantized_matrix<W> w(n, kk, 21);
    std::vector<typename k::interleaved<W>::block> storage(k::interleaved_blocks<W>(n, kk));
    ASSERT_TRUE((k::repack<W>(w.view(), {storage.data(), storage.size()})));
    const k::interleaved_view<W> view(storage.data(), n, kk);
    ASSERT_GE(view.bytes(), tuner_t::min_bytes);
    const auto x = hedge::test::random_floats(most * kk, 22);
    std::vector<std::byte> workspace(k::gemm_workspace_bytes<W>(most, kk));
    std::vector<float> first(most * n), y(most * n);
    hedge::exec::thread_pool pool(threads);
    // `rows` activation rows (a GEMV for 1) over every call of a key's tuning.
    const auto tune = [&](std::size_t rows) {
      const auto call = [&](std::vector<float>& out) {
        if (rows == 1) return k::gemv<W, A>(view, {x.data(), kk}, {out.data(), n}, workspace, pool);
        return k::gemm<W, A>(view, {x.data(), rows, kk}, {out.data(), rows, n}, workspace, pool);
      };
      ASSERT_TRUE(call(first));
      for (std::uint32_t i = 1; i <= tuner_t::warmup_calls + tuner_t::tuning_calls; ++i) {
        ASSERT_TRUE(call(y));
        ASSERT_TRUE(std::equal(first.begin(), first.begin() + rows * n, y.begin())) << rows << " rows, call " << i;
      }
    };
    ASSERT_FALSE((mm::read_tuner<A, W>(1, threads).decided()));
    tune(1);
    EXPECT_TRUE((mm::read_tuner<A, W>(1, threads).decided()));
    EXPECT_FALSE((mm::read_tuner<A, W>(streamed, threads).decided())) << "another key";
    if (streamed > 1) {
      tune(streamed);
      EXPECT_TRUE((mm::read_tuner<A, W>(streamed, threads).decided())) << streamed << " rows";
    }
    if (streamed < most) {
      tune(streamed + 1);
      EXPECT_FALSE((mm::read_tuner<A, W>(streamed + 1, threads).decided())) << streamed + 1 << " rows";
    }
  } else {
    (void)threads;
  }
}

TEST(WeightRead, AGemvStreamingEnoughBytesTunesItsKey) {
  using W = q::q8_0;
  check_tunes_its_key<W, hedge::arch::avx512vnni>(5);
  EXPECT_FALSE((mm::read_tuner<hedge::arch::avx2, W>(1, 5).decided())) << "another arch";
}

TEST(WeightRead, AnAvx2GemvAndItsBatchesTuneTheirKeys) {
  using W = q::q8_0;
  check_tunes_its_key<W, hedge::arch::avx2>(6);
  EXPECT_FALSE((mm::read_tuner<hedge::arch::avx512vnni, W>(1, 6).decided())) << "another arch";
  check_tunes_its_key<q::q4_k, hedge::arch::avx2>(7);
}

#endif  // HEDGE_SIMD_X86

}  // namespace
