#include "hedge/core/executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "hedge/os/thread_pool.hpp"

namespace {

// A user-written executor: runs each item's range in reverse order of parts.
// Modelling the concept is all it takes to drop into any kernel.
struct reverse_executor {
  std::size_t parts = 3;
  std::size_t concurrency() const { return parts; }
  template <class Body>
  void parallel_for(std::size_t n, Body&& body) {
    for (std::size_t p = parts; p-- > 0;) {
      const auto r = hedge::split_range(n, parts, p);
      if (r.begin != r.end) body(r.begin, r.end);
    }
  }
};
static_assert(hedge::Executor<reverse_executor>);
static_assert(hedge::Executor<hedge::exec::serial>);
static_assert(hedge::Executor<hedge::exec::thread_pool>);

struct not_an_executor {
  void parallel_for(std::size_t, int) {}
};
static_assert(!hedge::Executor<not_an_executor>);

// A "kernel" written against the concept: squares each element of [0, n).
template <hedge::Executor E>
void square_all(E& exec, std::vector<long>& out) {
  exec.parallel_for(out.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = static_cast<long>(i * i);
  });
}

template <hedge::Executor E>
void expect_covers_exactly_once(E& exec, std::size_t n) {
  std::vector<std::atomic<int>> hits(n);
  exec.parallel_for(n, [&](std::size_t b, std::size_t e) {
    ASSERT_LE(b, e);
    for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
}

}  // namespace

TEST(Executor, SplitRangeCoversWithoutGaps) {
  for (std::size_t n : {0u, 1u, 7u, 100u, 4096u})
    for (std::size_t parts = 1; parts <= 9; ++parts) {
      std::size_t next = 0;
      for (std::size_t p = 0; p < parts; ++p) {
        const auto r = hedge::split_range(n, parts, p);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.end - r.begin, n / parts + 1);
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(Executor, EveryExecutorGivesTheSameResult) {
  std::vector<long> expected(1000), a(1000), b(1000), c(1000);
  hedge::exec::serial serial;
  square_all(serial, expected);
  reverse_executor rev;
  square_all(rev, a);
  hedge::exec::thread_pool pool(4);
  square_all(pool, b);
  hedge::exec::thread_pool one(1);
  square_all(one, c);
  EXPECT_EQ(a, expected);
  EXPECT_EQ(b, expected);
  EXPECT_EQ(c, expected);
}

TEST(ThreadPool, CoversEveryItemExactlyOnceForManyShapes) {
  for (std::size_t threads : {1u, 2u, 3u, 8u}) {
    hedge::exec::thread_pool pool(threads);
    EXPECT_EQ(pool.concurrency(), threads);
    for (std::size_t n : {0u, 1u, 2u, 3u, 5u, 64u, 1001u}) expect_covers_exactly_once(pool, n);
  }
}

TEST(ThreadPool, UsesSeveralThreadsAndManyBackToBackCalls) {
  hedge::exec::thread_pool pool(2);
  std::mutex m;
  std::set<std::thread::id> ids;
  long total = 0;
  for (int call = 0; call < 2000; ++call) {
    std::atomic<long> sum{0};
    pool.parallel_for(16, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) sum += static_cast<long>(i);
      if (call % 100 == 0) {
        std::lock_guard lock(m);
        ids.insert(std::this_thread::get_id());
      }
    });
    total += sum;
  }
  EXPECT_EQ(total, 2000L * 120);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPool, SeveralClientThreadsAreSerialised) {
  hedge::exec::thread_pool pool(3);
  std::vector<std::thread> clients;
  std::atomic<long> total{0};
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&] {
      for (int i = 0; i < 500; ++i)
        pool.parallel_for(10, [&](std::size_t b, std::size_t e) { total += static_cast<long>(e - b); });
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(total.load(), 4L * 500 * 10);
}

TEST(ParallelClaim, RunsEachPieceOnceAndCoversEveryItem) {
  for (std::size_t threads : {1u, 2u, 3u}) {
    hedge::exec::thread_pool pool(threads);
    for (std::size_t n : {0u, 1u, 5u, 64u, 1001u})
      for (std::size_t chunks : {0u, 1u, 2u, 7u, 64u, 5000u}) {
        std::vector<std::atomic<int>> hits(n);
        std::mutex m;
        std::set<std::size_t> begins;
        hedge::parallel_claim(pool, n, chunks, [&](std::size_t b, std::size_t e) {
          ASSERT_LT(b, e);
          for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
          std::lock_guard lock(m);
          begins.insert(b);
        });
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " chunks=" << chunks;
        // The pieces are split_range's: min(chunks, n) of them; one call with one thread.
        const std::size_t pieces = n == 0 ? 0 : threads == 1 ? 1 : std::max<std::size_t>(1, std::min(chunks, n));
        EXPECT_EQ(begins.size(), pieces) << "threads=" << threads << " n=" << n << " chunks=" << chunks;
      }
  }
}

TEST(ParallelClaim, OneThreadRunsTheWholeRangeInOneCall) {
  hedge::exec::serial serial;
  int calls = 0;
  hedge::parallel_claim(serial, 100, 8, [&](std::size_t b, std::size_t e) {
    ++calls;
    EXPECT_EQ(b, 0u);
    EXPECT_EQ(e, 100u);
  });
  EXPECT_EQ(calls, 1);
}

// The point of claiming: a thread held up on its first piece (here it sleeps 200 ms,
// as a preempted vCPU would) does not keep the rest of the pieces waiting for it.
TEST(ParallelClaim, AHeldUpThreadTakesFewerPieces) {
  hedge::exec::thread_pool pool(2);
  std::mutex m;
  std::vector<std::thread::id> ran_by(8);
  hedge::parallel_claim(pool, 8, 8, [&](std::size_t b, std::size_t e) {
    ASSERT_EQ(e, b + 1);
    if (b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::lock_guard lock(m);
    ran_by[b] = std::this_thread::get_id();
  });
  const auto held_up = std::count(ran_by.begin(), ran_by.end(), ran_by[0]);
  EXPECT_LE(held_up, 2) << "the thread that slept on piece 0 also ran " << held_up - 1 << " of the other 7";
}
