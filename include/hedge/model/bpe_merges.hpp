// hedge/model/bpe_merges.hpp: the merge ranks of a byte-level BPE vocabulary (GGUF's
// tokenizer.ggml.merges: strings "LEFT RIGHT", rank = position), read as llama.cpp's
// llama_vocab::load reads them: a merge splits at its first space after the first byte; one
// with no such space is skipped (llama.cpp files it under an empty pair no symbol matches);
// when a pair repeats, its first (lowest) rank holds.
//
// The strings are views of the bytes they were read from, which must outlive the table. The
// table is built once (one record per merge and an open-addressing hash of 2^k slots), so a
// lookup in the encoder's merge loop hashes the two candidate strings and compares a few
// records, with no heap; a pair longer than the longest merge is never hashed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"

namespace hedge::model {

class bpe_merges {
 public:
  /// The most merges a table holds: ranks fit int32, the slots fit uint32.
  static constexpr std::size_t max_merges = std::size_t{1} << 30;

  bpe_merges() noexcept = default;

  /// Builds the table of `count` merges, `merge_at(i)` giving merge i's string (a
  /// result<std::string_view>). Allocates the records and the hash table, once.
  template <class MergeAt>
  static result<bpe_merges> build(std::size_t count, MergeAt&& merge_at) noexcept {
    if (count > max_merges) return error{errc::unsupported} << "tokenizer.ggml.merges holds " << count << " merges, more than " << max_merges;
    bpe_merges m;
    if (count == 0) return m;
    auto records = heap_storage<record>::make(count);
    if (!records) return records.error();
    std::size_t slots = 1;
    while (slots < 2 * count) slots *= 2;
    auto table = heap_storage<std::uint32_t>::make(slots);
    if (!table) return table.error();
    m.records_ = std::move(*records);
    m.table_ = std::move(*table);
    for (auto& slot : m.table_.span()) slot = empty_slot;
    for (std::size_t i = 0; i < count; ++i) {
      result<std::string_view> text = merge_at(i);
      if (!text) return text.error();
      const std::size_t split = text->size() < 2 ? std::string_view::npos : text->find(' ', 1);
      if (split == std::string_view::npos) continue;
      const record r{*text, static_cast<std::uint32_t>(split), static_cast<std::int32_t>(i)};
      if (m.insert(r)) {
        const std::size_t pair = text->size() - 1;
        m.max_pair_ = m.max_pair_ < pair ? pair : m.max_pair_;
      }
    }
    return m;
  }

  /// Merges in the table (repeats and unsplittable strings are not).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// Bytes of the longest pair (left and right together).
  [[nodiscard]] std::size_t max_pair_bytes() const noexcept { return max_pair_; }

  /// The rank of merging `left` with `right`, or -1 when no merge joins them.
  [[nodiscard]] std::int32_t rank(std::string_view left, std::string_view right) const noexcept {
    if (size_ == 0 || left.size() + right.size() > max_pair_) return -1;
    const std::size_t mask = table_.size() - 1;
    for (std::size_t slot = hash(left, right) & mask;; slot = (slot + 1) & mask) {
      const std::uint32_t index = table_.data()[slot];
      if (index == empty_slot) return -1;
      const record& r = records_.data()[index];
      if (r.left() == left && r.right() == right) return r.rank;
    }
  }

 private:
  struct record {
    std::string_view text;
    std::uint32_t split;
    std::int32_t rank;
    [[nodiscard]] std::string_view left() const noexcept { return text.substr(0, split); }
    [[nodiscard]] std::string_view right() const noexcept { return text.substr(split + 1); }
  };

  static constexpr std::uint32_t empty_slot = 0xFFFFFFFFu;

  /// FNV-1a over left, a separator no UTF-8 text holds (0xFF), then right.
  static std::uint64_t hash(std::string_view left, std::string_view right) noexcept {
    std::uint64_t h = 14695981039346656037ull;
    const auto mix = [&h](unsigned char c) {
      h ^= c;
      h *= 1099511628211ull;
    };
    for (char c : left) mix(static_cast<unsigned char>(c));
    mix(0xFF);
    for (char c : right) mix(static_cast<unsigned char>(c));
    return h;
  }

  /// Files `r` unless its pair is there already (the lower rank holds); true when filed.
  bool insert(const record& r) noexcept {
    const std::size_t mask = table_.size() - 1;
    for (std::size_t slot = hash(r.left(), r.right()) & mask;; slot = (slot + 1) & mask) {
      std::uint32_t& entry = table_.data()[slot];
      if (entry == empty_slot) {
        records_.data()[size_] = r;
        entry = static_cast<std::uint32_t>(size_++);
        return true;
      }
      const record& other = records_.data()[entry];
      if (other.left() == r.left() && other.right() == r.right()) return false;
    }
  }

  heap_storage<record> records_;
  heap_storage<std::uint32_t> table_;
  std::size_t size_ = 0;
  std::size_t max_pair_ = 0;
};

}  // namespace hedge::model
