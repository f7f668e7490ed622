// hedge/core/executor.hpp: how a kernel's independent work is spread over threads.
//
// Kernels never start threads. They describe work as a range [0, n) of
// independent items (row tiles, KV splits) and hand a body to an executor:
//
//   exec.parallel_for(n, [&](std::size_t begin, std::size_t end) { ... });
//
// The executor calls the body on disjoint contiguous sub-ranges that cover
// [0, n) exactly once and returns when all have finished. Each item's result
// depends only on the item, so the output is identical for any thread count.
// `exec::serial` (the default everywhere) runs the body inline; the OS thread
// pool lives in hedge/os/thread_pool.hpp, which firmware builds do not include.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>

#include "hedge/core/function_ref.hpp"

namespace hedge {

/// A type that runs a range body, possibly in parallel (see file comment).
template <class E>
concept Executor = requires(E& e, const E& ce, std::size_t n, function_ref<void(std::size_t, std::size_t)> body) {
  { ce.concurrency() } -> std::convertible_to<std::size_t>;
  e.parallel_for(n, body);
};

/// The sub-range [begin, end) of part `part` when [0, n) is cut into `parts`
/// near-equal contiguous pieces. Shared by every executor so splits agree.
struct range {
  std::size_t begin;
  std::size_t end;
};
constexpr range split_range(std::size_t n, std::size_t parts, std::size_t part) noexcept {
  return {n * part / parts, n * (part + 1) / parts};
}

/// Runs body(begin, end) on `chunks` contiguous near-equal pieces of [0, n) that the
/// executor's threads claim one at a time from a shared counter, instead of one fixed
/// piece per thread: a thread that runs slower (a core shared with another process, a
/// worker still waking up, less of the memory bandwidth) takes fewer pieces instead of
/// holding up the whole call. Which thread ran a piece does not change its result.
/// With one thread, or one piece, it is body(0, n) on the calling thread.
template <Executor E, class Body>
void parallel_claim(E& executor, std::size_t n, std::size_t chunks, Body&& body) {
  chunks = std::min(chunks, n);
  const std::size_t parts = std::min<std::size_t>(executor.concurrency(), chunks);
  if (parts <= 1) {
    if (n != 0) body(std::size_t{0}, n);
    return;
  }
  std::atomic<std::size_t> next{0};
  executor.parallel_for(parts, [&](std::size_t, std::size_t) {
    for (std::size_t chunk; (chunk = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      const range r = split_range(n, chunks, chunk);
      body(r.begin, r.end);
    }
  });
}

namespace exec {

/// Runs every body inline on the calling thread.
struct serial {
  static constexpr std::size_t concurrency() noexcept { return 1; }
  template <class Body>
  constexpr void parallel_for(std::size_t n, Body&& body) const {
    if (n != 0) body(std::size_t{0}, n);
  }
};

}  // namespace exec

static_assert(Executor<exec::serial>);

}  // namespace hedge
