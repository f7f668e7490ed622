// hedge/kv/cache.hpp: the KV cache: sequences of K/V head vectors in fixed-size pages.
//
// Every cache is paged, as vLLM's PagedAttention (Kwon et al. 2023) pages it:
// memory is a pool of pages of `page_tokens` tokens, and each sequence owns a
// block table mapping its logical pages to pool pages. A "contiguous" cache is
// the special case of one page of `max_tokens` per sequence (page_tokens = 0 in
// kv_config), so both layouts share one code path and give identical outputs.
// Where the bytes live is the Storage policy (hedge/core/storage.hpp): an
// in-object static array (firmware), a caller buffer, or the heap. The block
// tables and page reference counts live in the same storage, so after `init`
// no operation allocates.
//
// Storage bytes (64-byte aligned sections):
//   [ sequence records | block tables | page refcounts | free-page stack ][ page 0 ][ page 1 ] ...
// One page (page_bytes = round_up(page_tokens x bytes_per_token, 64)):
//   [layer 0: K head 0 (page_tokens vectors) .. K head H-1, V head 0 .. V head H-1][layer 1 ...]
// so one (layer, head)'s keys for consecutive positions are consecutive vectors,
// which the decode attention streams.
//
// Sequence operations: create, extend (reserve positions), write (K and V of
// one layer at one position), truncate (roll back a rejected speculative
// draft), fork (share every page, copy-on-write on the first write to a shared
// page, as vLLM's beam search does), release. A full sequence or an exhausted
// pool is an error naming the sequence and the capacity; nothing is overwritten.
//
// Sliding window (config.window > 0, as Mistral's rolling buffer cache): a
// sequence keeps a ring of max_tokens slots (rounded up to whole pages);
// position p lives in slot p mod ring, attention sees the last `window`
// positions, and the length is unbounded. The slack ring - window is how far
// truncate can roll back once the ring has wrapped: a sequence remembers the oldest
// position its ring still holds (later extends overwrote the ones before), and a
// truncate whose window would need an older one is an error (to 0 always works).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/kv/element.hpp"
#include "hedge/kv/shape.hpp"

namespace hedge::kv {

/// Byte storage a kv_cache can live in: any `Storage` of std::byte.
template <class S>
concept KvStorage = Storage<S> && std::same_as<typename S::value_type, std::byte>;

/// Run-time sizing of a kv_cache.
struct kv_config {
  std::size_t max_sequences = 1;  ///< sequences alive at once
  std::size_t max_tokens = 0;     ///< positions one sequence holds (the ring size in window mode)
  std::size_t page_tokens = 0;    ///< tokens per page; 0 = contiguous (one page of max_tokens per sequence)
  std::size_t pages = 0;          ///< pages in the pool; 0 = max_sequences x pages per sequence
  std::size_t window = 0;         ///< 0 = full causal attention; else sliding-window size (<= max_tokens)
};

/// A sequence handle (an index into the cache's sequence records).
struct kv_seq {
  std::uint32_t index = 0;
  friend constexpr bool operator==(kv_seq, kv_seq) = default;
};

/// The derived sizes of a cache: every byte count kv_cache uses, from shape and config.
struct kv_layout {
  std::size_t page_tokens = 0;         ///< tokens per page
  std::size_t pages_per_sequence = 0;  ///< block-table entries per sequence
  std::size_t ring_tokens = 0;         ///< pages_per_sequence x page_tokens
  std::size_t pages = 0;               ///< pool size
  std::size_t vector_bytes = 0;        ///< one head vector
  std::size_t page_bytes = 0;          ///< one page, 64-byte rounded
  std::size_t records_offset = 0, tables_offset = 0, refs_offset = 0, free_offset = 0, pages_offset = 0;
  std::size_t total_bytes = 0;         ///< storage a cache needs
};

namespace detail {
constexpr std::size_t round_up(std::size_t n, std::size_t to) noexcept { return (n + to - 1) / to * to; }

/// Per-sequence bookkeeping kept in the cache's storage.
struct kv_sequence_record {
  std::uint64_t length;   // positions appended (the next position to extend)
  std::uint32_t live;     // 1 while created and not released
  std::uint32_t held;     // block-table entries in use
  std::uint64_t stored;   // oldest position the ring still holds (0 until it wraps); truncate keeps it
};
}  // namespace detail

/// Computes the layout for a shape and config (no validation: `kv_cache::init` validates).
/// Constexpr, so a static shape and config size a static array at compile time.
/// \tparam Elem the element format
template <KvElement Elem, KvShape Shape>
constexpr kv_layout kv_plan(const Shape& shape, const kv_config& config) noexcept {
  using detail::round_up;
  kv_layout l;
  l.page_tokens = config.page_tokens != 0 ? config.page_tokens : config.max_tokens;
  if (l.page_tokens == 0) return l;
  l.pages_per_sequence = (config.max_tokens + l.page_tokens - 1) / l.page_tokens;
  l.ring_tokens = l.pages_per_sequence * l.page_tokens;
  l.pages = config.pages != 0 ? config.pages : config.max_sequences * l.pages_per_sequence;
  l.vector_bytes = kv_vector_bytes<Elem>(shape.head_dim());
  l.page_bytes = round_up(l.page_tokens * kv_bytes_per_token<Elem>(shape), cache_line_bytes);
  l.records_offset = 0;
  l.tables_offset = round_up(config.max_sequences * sizeof(detail::kv_sequence_record), cache_line_bytes);
  l.refs_offset =
      l.tables_offset + round_up(config.max_sequences * l.pages_per_sequence * sizeof(std::uint32_t), cache_line_bytes);
  l.free_offset = l.refs_offset + round_up(l.pages * sizeof(std::uint32_t), cache_line_bytes);
  l.pages_offset = l.free_offset + round_up(l.pages * sizeof(std::uint32_t), cache_line_bytes);
  l.total_bytes = l.pages_offset + l.pages * l.page_bytes;
  return l;
}

/// Storage bytes a cache of this shape and config needs (for static or caller buffers).
/// \tparam Elem the element format
template <KvElement Elem, KvShape Shape>
constexpr std::size_t kv_storage_bytes(const Shape& shape, const kv_config& config) noexcept {
  return kv_plan<Elem>(shape, config).total_bytes;
}

/// A read-only view of one sequence for attention kernels: where each position's
/// K and V vectors are, independent of the cache's storage policy. Valid until
/// the sequence is next modified.
/// \tparam Elem the element format
template <KvElement Elem>
class kv_sequence_view {
 public:
  using unit = typename Elem::unit;

  /// Consecutive positions stored back to back: `tokens` vectors of `vector_units()` units.
  struct run {
    const unit* keys;
    const unit* values;
    std::size_t tokens;
  };

  constexpr kv_sequence_view(const std::byte* pages, const std::uint32_t* block_table, const kv_layout& layout,
                             std::size_t layers, std::size_t kv_heads, std::size_t head_dim, std::size_t window,
                             std::uint64_t begin, std::uint64_t end) noexcept
      : pages_(pages), block_table_(block_table), layout_(&layout), layers_(layers), kv_heads_(kv_heads),
        head_dim_(head_dim), window_(window), begin_(begin), end_(end) {}

  /// First position attention sees (0, or length - window in sliding-window mode).
  constexpr std::uint64_t begin() const noexcept { return begin_; }
  /// One past the last position (the sequence length).
  constexpr std::uint64_t end() const noexcept { return end_; }
  /// Sliding-window size (0: none): a query at position p sees keys (p - window, p].
  constexpr std::size_t window() const noexcept { return window_; }
  /// Oldest position still stored (older ones were overwritten by the sliding-window ring).
  constexpr std::uint64_t stored_begin() const noexcept {
    return end_ > layout_->ring_tokens ? end_ - layout_->ring_tokens : 0;
  }
  /// This view as a layer that attends to the last `window` positions sees it, in a cache
  /// that keeps every position (a model whose local and global layers share one cache:
  /// Gemma's sliding-window layers).
  constexpr kv_sequence_view windowed(std::size_t window) const noexcept {
    kv_sequence_view v = *this;
    v.window_ = window;
    v.begin_ = std::max<std::uint64_t>(begin_, end_ > window ? end_ - window : 0);
    return v;
  }
  constexpr std::size_t layers() const noexcept { return layers_; }
  constexpr std::size_t kv_heads() const noexcept { return kv_heads_; }
  constexpr std::size_t head_dim() const noexcept { return head_dim_; }
  constexpr std::size_t vector_units() const noexcept { return Elem::units(head_dim_); }

  /// The positions from `pos` (in [begin, end)) that are contiguous in memory,
  /// at most up to `limit` (<= end): they end at a page boundary.
  run contiguous(std::size_t layer, std::size_t head, std::uint64_t pos, std::uint64_t limit) const noexcept {
    const std::size_t slot = static_cast<std::size_t>(pos % layout_->ring_tokens);
    const std::size_t in_page = slot % layout_->page_tokens;
    const std::size_t available = layout_->page_tokens - in_page;
    const std::byte* page = pages_ + std::size_t{block_table_[slot / layout_->page_tokens]} * layout_->page_bytes;
    const std::size_t key_vector = ((layer * 2) * kv_heads_ + head) * layout_->page_tokens + in_page;
    const std::size_t value_vector = key_vector + kv_heads_ * layout_->page_tokens;
    return {reinterpret_cast<const unit*>(page + key_vector * layout_->vector_bytes),
            reinterpret_cast<const unit*>(page + value_vector * layout_->vector_bytes),
            static_cast<std::size_t>(std::min<std::uint64_t>(available, limit - pos))};
  }

 private:
  const std::byte* pages_;
  const std::uint32_t* block_table_;
  const kv_layout* layout_;
  std::size_t layers_, kv_heads_, head_dim_, window_;
  std::uint64_t begin_, end_;
};

/// The KV cache (see the file comment for layout and semantics).
/// \tparam Shape   layers x kv_heads x head_dim (`kv_static_shape` or `kv_dynamic_shape`)
/// \tparam Elem    the element format (`kv_f32`, `kv_f16`, `kv_bf16`, `kv_q8_0`, or a user KvElement)
/// \tparam Storage where the bytes live: `heap_storage<std::byte>`, `buffer_storage<std::byte>`,
///                 `static_storage<std::byte, kv_storage_bytes<Elem>(shape, config)>`, or a user KvStorage
template <KvShape Shape, KvElement Elem, KvStorage Storage = heap_storage<std::byte>>
class kv_cache {
 public:
  using shape_type = Shape;
  using element = Elem;
  using storage_type = Storage;

  kv_cache() = default;

  /// Sets the cache up in `storage`, which must hold `kv_storage_bytes<Elem>(shape, config)` bytes.
  result<void> init(const Shape& shape, const kv_config& config, Storage storage) noexcept {
    storage_ = std::move(storage);
    return setup(shape, config);
  }
  /// Sets the cache up in storage that allocates itself (heap) or is already held (static).
  result<void> init(const Shape& shape, const kv_config& config) noexcept {
    if constexpr (requires { { Storage::make(std::size_t{}) } -> std::same_as<result<Storage>>; }) {
      auto made = Storage::make(kv_storage_bytes<Elem>(shape, config));
      if (!made) return made.error();
      storage_ = std::move(*made);
    }
    return setup(shape, config);
  }
  /// `init` then return the cache (for movable storages: heap, caller buffer).
  template <class... StorageArg>
  static result<kv_cache> make(const Shape& shape, const kv_config& config, StorageArg&&... storage) noexcept {
    kv_cache cache;
    HEDGE_TRY(cache.init(shape, config, std::forward<StorageArg>(storage)...));
    return cache;
  }

  const Shape& shape() const noexcept { return shape_; }
  const kv_config& config() const noexcept { return config_; }
  const kv_layout& layout() const noexcept { return layout_; }
  /// K and V bytes per token over all layers (constexpr as `kv_bytes_per_token<Elem>(Shape{})` for static shapes).
  constexpr std::size_t bytes_per_token() const noexcept { return kv_bytes_per_token<Elem>(shape_); }
  /// Positions one sequence can hold (unbounded in sliding-window mode).
  std::uint64_t max_tokens() const noexcept {
    return config_.window != 0 ? std::numeric_limits<std::uint64_t>::max() : config_.max_tokens;
  }
  std::size_t total_pages() const noexcept { return layout_.pages; }
  std::size_t free_pages() const noexcept { return free_count_; }
  /// Tokens the free pages can still take (over all sequences).
  std::size_t free_tokens() const noexcept { return free_count_ * layout_.page_tokens; }

  /// A new empty sequence; capacity_exceeded when max_sequences are alive.
  result<kv_seq> create() noexcept {
    if (layout_.total_bytes == 0) return error{errc::invalid_argument} << "KV cache: not initialised";
    for (std::uint32_t i = 0; i < config_.max_sequences; ++i) {
      if (records()[i].live == 0) {
        records()[i] = {0, 1, 0, 0};
        return kv_seq{i};
      }
    }
    return error{errc::capacity_exceeded} << "KV cache: all " << config_.max_sequences << " sequences are in use";
  }

  /// Number of positions appended to `seq`.
  result<std::uint64_t> length(kv_seq seq) const noexcept {
    HEDGE_TRY(check(seq));
    return records()[seq.index].length;
  }

  /// Reserves `tokens` more positions for `seq` and returns the first one. Takes
  /// pages from the pool (and copies a shared tail page, copy-on-write); fails
  /// without changing anything when the sequence or the pool is full.
  result<std::uint64_t> extend(kv_seq seq, std::size_t tokens) noexcept {
    HEDGE_TRY(check(seq));
    detail::kv_sequence_record& r = records()[seq.index];
    const std::uint64_t first = r.length;
    const std::uint64_t end = first + tokens;
    if (config_.window == 0 && end > config_.max_tokens)
      return error{errc::capacity_exceeded} << "KV cache: sequence " << seq.index << " is full at "
                                            << config_.max_tokens << " tokens (has " << first << ", asked "
                                            << tokens << " more)";
    const std::size_t needed = pages_for(end);
    std::size_t copies = 0;
    for_each_touched_page(first, end, [&](std::size_t page) {
      if (page < r.held && refs()[table(seq)[page]] > 1) ++copies;
    });
    const std::size_t wanted = (needed - r.held) + copies;
    if (wanted > free_count_)
      return error{errc::capacity_exceeded} << "KV cache: page pool exhausted: sequence " << seq.index << " needs "
                                            << wanted << " pages, " << free_count_ << " of " << layout_.pages
                                            << " free (" << layout_.page_tokens << " tokens each)";
    for_each_touched_page(first, end, [&](std::size_t page) {
      if (page < r.held) (void)copy_if_shared(seq, page);  // cannot fail: the free pages were counted above
    });
    while (r.held < needed) table(seq)[r.held++] = take_page();
    r.length = end;
    r.stored = std::max(r.stored, stored_begin(end));
    return first;
  }

  /// Stores the K and V head vectors (kv_heads x head_dim floats each, head-major)
  /// of `layer` at position `pos` of `seq`, encoding them in Elem.
  result<void> write(kv_seq seq, std::size_t layer, std::uint64_t pos, std::span<const float> keys,
                     std::span<const float> values) noexcept {
    HEDGE_TRY(check(seq));
    const detail::kv_sequence_record& r = records()[seq.index];
    const std::size_t heads = shape_.kv_heads(), dim = shape_.head_dim();
    if (layer >= shape_.layers())
      return error{errc::out_of_range} << "KV cache: layer " << layer << " >= " << shape_.layers();
    if (keys.size() != heads * dim || values.size() != heads * dim)
      return error{errc::shape_mismatch} << "KV cache: write takes " << heads * dim << " keys and values, got "
                                         << keys.size() << " and " << values.size();
    if (pos >= r.length || pos < stored_begin(r.length))
      return error{errc::out_of_range} << "KV cache: position " << pos << " of sequence " << seq.index
                                       << " is not stored (stored: " << stored_begin(r.length) << ".."
                                       << r.length << "; extend first)";
    const std::size_t slot = static_cast<std::size_t>(pos % layout_.ring_tokens);
    HEDGE_TRY(copy_if_shared(seq, slot / layout_.page_tokens));
    std::byte* page = page_data(table(seq)[slot / layout_.page_tokens]);
    const std::size_t units = Elem::units(dim);
    for (std::size_t kind = 0; kind < 2; ++kind) {
      const std::span<const float> source = kind == 0 ? keys : values;
      for (std::size_t h = 0; h < heads; ++h) {
        const std::size_t vector = ((layer * 2 + kind) * heads + h) * layout_.page_tokens + slot % layout_.page_tokens;
        auto* out = reinterpret_cast<typename Elem::unit*>(page + vector * layout_.vector_bytes);
        HEDGE_TRY(Elem::encode(source.subspan(h * dim, dim), std::span<typename Elem::unit>(out, units)));
      }
    }
    return ok();
  }

  /// Rolls `seq` back to `new_length` positions (<= its length), returning whole
  /// pages it no longer needs to the pool. In window mode the positions the window
  /// at `new_length` sees must not have been overwritten by the ring.
  result<void> truncate(kv_seq seq, std::uint64_t new_length) noexcept {
    HEDGE_TRY(check(seq));
    detail::kv_sequence_record& r = records()[seq.index];
    if (new_length > r.length)
      return error{errc::out_of_range} << "KV cache: cannot truncate sequence " << seq.index << " of length "
                                       << r.length << " to " << new_length;
    if (new_length != 0 && visible_begin(new_length) < r.stored)
      return error{errc::out_of_range} << "KV cache: sliding window: truncating sequence " << seq.index << " to "
                                       << new_length << " needs position " << visible_begin(new_length)
                                       << ", already overwritten (oldest stored " << r.stored << ")";
    const std::size_t needed = pages_for(new_length);
    while (r.held > needed) drop_page(table(seq)[--r.held]);
    r.length = new_length;
    if (new_length == 0) r.stored = 0;
    return ok();
  }

  /// A new sequence sharing every page of `seq` (a shared prompt prefix, a beam);
  /// either one copies a shared page before writing into it.
  result<kv_seq> fork(kv_seq seq) noexcept {
    HEDGE_TRY(check(seq));
    auto child = create();
    if (!child) return child.error();
    const detail::kv_sequence_record parent = records()[seq.index];
    records()[child->index] = parent;
    for (std::size_t p = 0; p < parent.held; ++p) {
      table(*child)[p] = table(seq)[p];
      ++refs()[table(seq)[p]];
    }
    return child;
  }

  /// Ends `seq`; its pages return to the pool once no fork shares them.
  result<void> release(kv_seq seq) noexcept {
    HEDGE_TRY(check(seq));
    detail::kv_sequence_record& r = records()[seq.index];
    while (r.held > 0) drop_page(table(seq)[--r.held]);
    r = {0, 0, 0, 0};
    return ok();
  }

  /// The positions attention reads for `seq` (see kv_sequence_view).
  result<kv_sequence_view<Elem>> view(kv_seq seq) const noexcept {
    HEDGE_TRY(check(seq));
    const std::uint64_t length = records()[seq.index].length;
    return kv_sequence_view<Elem>(storage_.data() + layout_.pages_offset, table(seq), layout_, shape_.layers(),
                                  shape_.kv_heads(), shape_.head_dim(), config_.window, visible_begin(length),
                                  length);
  }

 private:
  // Validates, then commits shape, config and layout; a failed init leaves an empty cache.
  result<void> setup(const Shape& shape, const kv_config& config) noexcept {
    layout_ = {};
    free_count_ = 0;
    const kv_layout l = kv_plan<Elem>(shape, config);
    if (shape.layers() == 0 || shape.kv_heads() == 0 || shape.head_dim() == 0)
      return error{errc::invalid_argument} << "KV cache: shape has a zero extent";
    if (config.max_sequences == 0 || config.max_tokens == 0 || config.max_sequences > UINT32_MAX)
      return error{errc::invalid_argument} << "KV cache: max_sequences (" << config.max_sequences
                                           << ") and max_tokens (" << config.max_tokens << ") must be positive";
    if (config.window > config.max_tokens)
      return error{errc::invalid_argument} << "KV cache: window " << config.window << " exceeds the ring of "
                                           << config.max_tokens << " tokens";
    if (l.pages == 0 || l.pages > UINT32_MAX)
      return error{errc::invalid_argument} << "KV cache: pool of " << l.pages << " pages";
    if (storage_.size() < l.total_bytes)
      return error{errc::capacity_exceeded} << "KV cache: storage holds " << storage_.size() << " bytes, needs "
                                            << l.total_bytes;
    if (reinterpret_cast<std::uintptr_t>(storage_.data()) % cache_line_bytes != 0)
      return error{errc::misaligned} << "KV cache: storage is not 64-byte aligned";
    shape_ = shape;
    config_ = config;
    layout_ = l;
    std::memset(storage_.data(), 0, layout_.pages_offset);
    for (std::size_t p = 0; p < layout_.pages; ++p)  // lowest page on top: a fresh cache fills memory in order
      free_stack()[p] = static_cast<std::uint32_t>(layout_.pages - 1 - p);
    free_count_ = layout_.pages;
    return ok();
  }

  result<void> check(kv_seq seq) const noexcept {
    if (layout_.total_bytes == 0) return error{errc::invalid_argument} << "KV cache: not initialised";
    if (seq.index >= config_.max_sequences || records()[seq.index].live == 0)
      return error{errc::invalid_argument} << "KV cache: sequence " << seq.index << " does not exist";
    return ok();
  }

  // Oldest position still in the ring, and oldest position attention sees.
  std::uint64_t stored_begin(std::uint64_t length) const noexcept {
    return length > layout_.ring_tokens ? length - layout_.ring_tokens : 0;
  }
  std::uint64_t visible_begin(std::uint64_t length) const noexcept {
    return config_.window != 0 && length > config_.window ? length - config_.window : 0;
  }
  std::size_t pages_for(std::uint64_t length) const noexcept {
    const std::uint64_t pages = (length + layout_.page_tokens - 1) / layout_.page_tokens;
    return static_cast<std::size_t>(std::min<std::uint64_t>(pages, layout_.pages_per_sequence));
  }
  // Calls f(block-table index) once for each page slot positions [first, end) land in.
  template <class F>
  void for_each_touched_page(std::uint64_t first, std::uint64_t end, F&& f) const noexcept {
    if (end - first >= layout_.ring_tokens) first = end - layout_.ring_tokens;  // the ring holds only the last lap
    std::uint64_t pos = first;
    while (pos < end) {
      const std::size_t slot = static_cast<std::size_t>(pos % layout_.ring_tokens);
      f(slot / layout_.page_tokens);
      pos += layout_.page_tokens - slot % layout_.page_tokens;
    }
  }

  std::uint32_t take_page() noexcept {
    const std::uint32_t page = free_stack()[--free_count_];
    refs()[page] = 1;
    return page;
  }
  void drop_page(std::uint32_t page) noexcept {
    if (--refs()[page] == 0) free_stack()[free_count_++] = page;
  }
  result<void> copy_if_shared(kv_seq seq, std::size_t entry) noexcept {
    const std::uint32_t shared = table(seq)[entry];
    if (refs()[shared] == 1) return ok();
    if (free_count_ == 0)
      return error{errc::capacity_exceeded} << "KV cache: page pool exhausted copying a shared page of sequence "
                                            << seq.index << " (" << layout_.pages << " pages)";
    const std::uint32_t copy = take_page();
    std::memcpy(page_data(copy), page_data(shared), layout_.page_bytes);
    --refs()[shared];
    table(seq)[entry] = copy;
    return ok();
  }

  std::byte* page_data(std::uint32_t page) noexcept {
    return storage_.data() + layout_.pages_offset + std::size_t{page} * layout_.page_bytes;
  }
  template <class T>
  T* section(std::size_t offset) const noexcept {
    return reinterpret_cast<T*>(const_cast<std::byte*>(storage_.data()) + offset);
  }
  detail::kv_sequence_record* records() const noexcept {
    return section<detail::kv_sequence_record>(layout_.records_offset);
  }
  std::uint32_t* table(kv_seq seq) const noexcept {
    return section<std::uint32_t>(layout_.tables_offset) + std::size_t{seq.index} * layout_.pages_per_sequence;
  }
  std::uint32_t* refs() const noexcept { return section<std::uint32_t>(layout_.refs_offset); }
  std::uint32_t* free_stack() const noexcept { return section<std::uint32_t>(layout_.free_offset); }

  Storage storage_{};
  Shape shape_{};
  // All-zero until make() sets it, so a static cache (storage included) lands in .bss
  // instead of being stored whole in a firmware image's flash as .data.
  kv_config config_{.max_sequences = 0};
  kv_layout layout_{};
  std::size_t free_count_ = 0;
};

}  // namespace hedge::kv
