// hedge/os: needs std::thread; firmware builds do not include this header.
//
// hedge/os/thread_pool.hpp: a persistent pool of std::thread workers that
// models `Executor`. Workers are started once and reused for every call, so a
// decode step pays a wake-up, not a thread creation, per kernel. The calling
// thread runs part 0 itself; workers spin up to spin_time before sleeping on an
// atomic wait so back-to-back kernels (one per weight matrix) start without a syscall.
// Calls from several client threads are serialised; a body must not call back
// into the same pool.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "hedge/core/executor.hpp"
#include "hedge/core/function_ref.hpp"

namespace hedge::exec {

class thread_pool {
 public:
  /// `threads` counts the caller: 1 means no workers; 0 means one per hardware thread.
  explicit thread_pool(std::size_t threads = 0) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    concurrency_ = threads;
    workers_.reserve(threads - 1);
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& w : workers_) w.join();
  }

  [[nodiscard]] std::size_t concurrency() const noexcept { return concurrency_; }

  template <class Body>
  void parallel_for(std::size_t n, Body&& body) {
    if (n == 0) return;
    const std::size_t parts = std::min(n, concurrency_);
    if (parts == 1) {
      body(std::size_t{0}, n);
      return;
    }
    std::lock_guard lock(submit_);
    const function_ref<void(std::size_t, std::size_t)> job{body};
    job_ = &job;
    n_ = n;
    parts_ = parts;
    // Every worker acknowledges every job, even one with no part for it, so no
    // worker can still be reading job_/n_/parts_ when the next call rewrites them.
    pending_.store(workers_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    const range r = split_range(n, parts, 0);
    body(r.begin, r.end);
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      for (std::size_t left = pending_.load(std::memory_order_acquire); left != 0;
           left = pending_.load(std::memory_order_acquire)) {
        pending_.wait(left, std::memory_order_acquire);
      }
    }
  }

 private:
  /// How long a waiting thread spins before it sleeps. A decode step's kernels come
  /// microseconds apart, and waking a sleeping thread costs tens of microseconds (more
  /// in a VM guest) each time: TinyLlama Q4_0 decode at 2 threads on a 2-core KVM guest,
  /// alternating runs, 68-72 tok/s with a spin of 2^14 loads (~10 us) against 73-75 with
  /// 200 us (docs/perf-journal.md). Idle for longer than this, the pool sleeps.
  static constexpr std::chrono::microseconds spin_time{200};

  /// Spins until ready() or spin_time has passed; whether ready() held.
  template <class Ready>
  static bool spin_until(Ready ready) {
    const auto deadline = std::chrono::steady_clock::now() + spin_time;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (ready()) return true;
      }
      if (std::chrono::steady_clock::now() >= deadline) return ready();
    }
  }

  void work(std::size_t index) {
    unsigned seen = 0;
    for (;;) {
      if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
        while (generation_.load(std::memory_order_acquire) == seen) generation_.wait(seen, std::memory_order_acquire);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_relaxed)) return;
      if (index < parts_) {
        const range r = split_range(n_, parts_, index);
        (*job_)(r.begin, r.end);
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  std::size_t concurrency_ = 1;
  std::vector<std::thread> workers_;
  std::mutex submit_;
  const function_ref<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t n_ = 0;
  std::size_t parts_ = 0;
  std::atomic<unsigned> generation_{0};
  std::atomic<std::size_t> pending_{0};
  std::atomic<bool> stop_{false};
};

static_assert(Executor<thread_pool>);

}  // namespace hedge::exec
