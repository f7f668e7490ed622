// hedge/os/concurrent_cloud.hpp: any blocking CloudBackend made concurrent with a thread, so
// the engine can race it against the edge (engine/backend.hpp).
//
// begin() hands the wrapped backend's call to a thread of its own (started at the first call
// and kept: a thread made per call cost a clone, a stack mapping and a join on every request's
// path to its first token); the pieces it delivers are copied into a queue, and poll() hands
// them over on the engine's thread, waiting at most `max_wait` for the first. cancel() cancels
// the wrapped call and waits until it has returned (the wrapped transport stops within one poll
// interval, os/http_transport.hpp), so nothing runs on the call's views after the engine moved
// on. The queue allocates: this is os/, not the engine's allocation-free path.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "hedge/engine/backend.hpp"
#include "hedge/engine/speculative.hpp"

namespace hedge::os {

/// \tparam Blocking a CloudBackend whose poll() runs the whole call (engine::cloud_tier)
template <engine::CloudBackend Blocking>
class concurrent_cloud {
 public:
  static constexpr bool concurrent = true;

  explicit concurrent_cloud(Blocking& inner) noexcept : inner_(inner) {}
  concurrent_cloud(const concurrent_cloud&) = delete;
  concurrent_cloud& operator=(const concurrent_cloud&) = delete;
  ~concurrent_cloud() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    start_.notify_all();
    if (worker_.joinable()) worker_.join();  // after the call in flight, if any, returned
  }

  result<void> begin(const engine::cloud_call& call) {
    join();
    if (auto r = inner_.begin(call); !r) return r;
    {
      std::lock_guard lock(mutex_);
      pieces_.clear();
      finished_ = false;
      final_ = {};
      busy_ = true;
    }
    if (!worker_.joinable()) worker_ = std::thread([this] { serve(); });
    start_.notify_one();
    return ok();
  }

  engine::cloud_poll poll(function_ref<bool(const engine::cloud_piece&)> on_piece, std::chrono::milliseconds max_wait) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, max_wait, [&] { return finished_ || !pieces_.empty(); });
    std::deque<queued> ready;
    ready.swap(pieces_);
    const bool finished = finished_;
    const engine::cloud_poll final_result = final_;
    lock.unlock();
    for (const queued& q : ready) on_piece(engine::cloud_piece{q.text, q.logprob, q.tokens});
    if (!finished) return engine::cloud_poll{};
    join();
    return final_result;
  }

  /// Speculative scoring (engine/speculative.hpp) runs on the caller's thread: a round is
  /// one request-response, never raced. Present when the wrapped backend scores.
  result<std::span<const engine::position_score>> score(const engine::score_call& call)
    requires requires(Blocking& b, const engine::score_call& c) { b.score(c); }
  {
    join();
    return inner_.score(call);
  }

  void cancel() {
    inner_.cancel();
    join();
  }

 private:
  struct queued {
    std::string text;
    float logprob = std::numeric_limits<float>::quiet_NaN();
    std::uint32_t tokens = 1;
  };

  /// The worker thread: runs each begun call to its end.
  void serve() {
    auto on_piece = [this](const engine::cloud_piece& p) {
      {
        std::lock_guard lock(mutex_);
        pieces_.push_back({std::string(p.text), p.logprob, p.tokens});
      }
      changed_.notify_all();
      return true;
    };
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return quit_ || (busy_ && !running_); });
        if (quit_ && !busy_) return;
        running_ = true;
      }
      engine::cloud_poll result = inner_.poll(on_piece, std::chrono::milliseconds(0));
      {
        std::lock_guard lock(mutex_);
        final_ = result;
        // The finish reason is a view into the wrapped backend, which keeps it until its next call.
        finished_ = true;
        running_ = busy_ = false;
      }
      changed_.notify_all();
    }
  }

  /// Waits until the call in flight, if any, has returned.
  void join() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
  }

  Blocking& inner_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;  ///< a piece, or the call's end
  std::condition_variable start_;    ///< a call to run, or quit
  std::deque<queued> pieces_;
  bool busy_ = false;     ///< a call was begun and has not returned
  bool running_ = false;  ///< the worker runs it
  bool quit_ = false;
  bool finished_ = false;
  engine::cloud_poll final_{};
};

}  // namespace hedge::os
