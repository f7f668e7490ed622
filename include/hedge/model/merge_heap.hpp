// hedge/model/merge_heap.hpp: the merge loop's priority queue, shared by the SentencePiece and
// the byte-level BPE encoders: an indexed binary heap holding at most one candidate per
// symbol (the pair that symbol starts), so it never holds stale pairs, its size is bounded by
// the symbols, and a pair whose left or right side changed is updated or removed in place,
// O(log n). It lives in the caller's workspace: no heap allocation.
//
//   Pair    { ...key...; std::uint32_t symbol; static bool before(const Pair&, const Pair&); }
//           before: a merges ahead of b (SPM: higher score; BPE: lower rank; then leftmost)
//   Symbol  { ...; std::uint32_t heap_slot; }  (not_in_heap when the symbol has no entry)
#pragma once

#include <cstddef>
#include <cstdint>

namespace hedge::model::detail {

inline constexpr std::uint32_t not_in_heap = 0xFFFFFFFFu;

template <class Pair, class Symbol>
struct merge_heap {
  Pair* slots = nullptr;
  Symbol* symbols = nullptr;
  std::size_t size = 0;

  [[nodiscard]] bool empty() const noexcept { return size == 0; }
  [[nodiscard]] const Pair& top() const noexcept { return slots[0]; }

  /// Appends without ordering; call heapify once after the appends.
  void append(Pair pair) noexcept { place(size++, pair); }

  void heapify() noexcept {
    for (std::size_t slot = size / 2; slot-- > 0;) sift_down(slot);
  }

  /// Puts `pair` in, or updates its symbol's entry.
  void upsert(Pair pair) noexcept {
    const std::uint32_t slot = symbols[pair.symbol].heap_slot;
    if (slot == not_in_heap) {
      place(size++, pair);
      sift_up(size - 1);
      return;
    }
    place(slot, pair);
    sift_up(slot);
    sift_down(symbols[pair.symbol].heap_slot);
  }

  /// Takes symbol `sym`'s entry out, if it has one.
  void remove(std::uint32_t sym) noexcept {
    const std::size_t slot = symbols[sym].heap_slot;
    if (slot == not_in_heap) return;
    symbols[sym].heap_slot = not_in_heap;
    const Pair last = slots[--size];
    if (slot == size) return;
    place(slot, last);
    sift_up(slot);
    sift_down(symbols[last.symbol].heap_slot);
  }

 private:
  void place(std::size_t slot, Pair pair) noexcept {
    slots[slot] = pair;
    symbols[pair.symbol].heap_slot = static_cast<std::uint32_t>(slot);
  }

  void sift_up(std::size_t slot) noexcept {
    const Pair moving = slots[slot];
    while (slot > 0) {
      const std::size_t parent = (slot - 1) / 2;
      if (!Pair::before(moving, slots[parent])) break;
      place(slot, slots[parent]);
      slot = parent;
    }
    place(slot, moving);
  }

  void sift_down(std::size_t slot) noexcept {
    const Pair moving = slots[slot];
    for (;;) {
      std::size_t child = 2 * slot + 1;
      if (child >= size) break;
      if (child + 1 < size && Pair::before(slots[child + 1], slots[child])) ++child;
      if (!Pair::before(slots[child], moving)) break;
      place(slot, slots[child]);
      slot = child;
    }
    place(slot, moving);
  }
};

}  // namespace hedge::model::detail
