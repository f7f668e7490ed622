// bench/common/buffers.hpp: page-aligned benchmark buffers, one or a ring of
// distinct copies.
//
// A "cold" benchmark must read its data from DRAM every iteration, as a real
// model's weights are: it cycles through cold_buffer_count(bytes) copies, more
// than eight times the LLC in total, so each copy is evicted before its next use.
// A "hot" benchmark uses a ring of one.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "common/bandwidth.hpp"
#include "common/report.hpp"

namespace hedge::bench {

/// `count` distinct page-aligned buffers of `bytes` bytes each.
class buffer_ring {
 public:
  buffer_ring(std::size_t bytes, std::size_t count) : bytes_(bytes) {
    buffers_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) buffers_.push_back(detail::allocate_pages(bytes));
  }
  /// One buffer when `where` is hot, cold_buffer_count(bytes) when cold.
  static buffer_ring for_residency(std::size_t bytes, residency where) {
    return buffer_ring(bytes, where == residency::cold ? cold_buffer_count(bytes) : 1);
  }

  [[nodiscard]] std::size_t count() const noexcept { return buffers_.size(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  /// Buffer i modulo count(), typed as T.
  template <class T = std::byte>
  [[nodiscard]] T* get(std::size_t i) const noexcept {
    return reinterpret_cast<T*>(buffers_[i % buffers_.size()].get());
  }
  /// Copies `bytes()` bytes from `source` into every buffer.
  void fill_all(const void* source) {
    for (auto& b : buffers_) std::memcpy(b.get(), source, bytes_);
  }

 private:
  std::size_t bytes_;
  std::vector<detail::aligned_bytes> buffers_;
};

}  // namespace hedge::bench
