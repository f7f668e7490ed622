// hedge/core/view.hpp: non-owning views over caller memory.
//
// `vector_view<T>` is a span with a debug-checked index; `matrix_view<T>` is a
// row-major matrix with a row stride (in elements) so a view can address a
// sub-block or a padded buffer:
//
//        col 0 .. cols-1           stride - cols
//   row 0 [x x x x x x x x] [pad pad]
//   row 1 [x x x x x x x x] [pad pad]
//
// For quantized weights T is the block struct and `cols` counts blocks. Views
// never own or allocate; they are passed by value.
#pragma once

#include <concepts>
#include <cstddef>
#include <iterator>
#include <span>
#include <type_traits>

#include "hedge/core/config.hpp"

namespace hedge {

/// A contiguous 1-D view of `size()` elements.
template <class T>
class vector_view {
 public:
  using element_type = T;
  constexpr vector_view() noexcept = default;
  constexpr vector_view(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr vector_view(std::span<T, N> s) noexcept : data_(s.data()), size_(s.size()) {}
  /// Any contiguous container whose elements convert like T (std::vector, std::array, C arrays), as std::span does.
  template <class Range>
    requires(!std::is_same_v<std::remove_cvref_t<Range>, vector_view> &&
             requires(Range& r) {
               { std::data(r) } -> std::convertible_to<T*>;
               std::size(r);
             } &&
             std::is_convertible_v<std::remove_pointer_t<decltype(std::data(std::declval<Range&>()))> (*)[], T (*)[]>)
  constexpr vector_view(Range&& r) noexcept : data_(std::data(r)), size_(std::size(r)) {}
  template <class U>
    requires std::is_convertible_v<U (*)[], T (*)[]>
  constexpr vector_view(vector_view<U> other) noexcept : data_(other.data()), size_(other.size()) {}

  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T& operator[](std::size_t i) const noexcept {
    HEDGE_ASSERT(i < size_);
    return data_[i];
  }
  [[nodiscard]] constexpr vector_view subview(std::size_t offset, std::size_t count) const noexcept {
    HEDGE_ASSERT(offset <= size_ && count <= size_ - offset);
    return {data_ + offset, count};
  }
  [[nodiscard]] constexpr std::span<T> span() const noexcept { return {data_, size_}; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <class T, std::size_t N>
vector_view(std::span<T, N>) -> vector_view<T>;

/// A row-major 2-D view: element (r, c) is at data()[r * stride() + c].
template <class T>
class matrix_view {
 public:
  using element_type = T;
  constexpr matrix_view() noexcept = default;
  /// Dense rows (stride == cols).
  constexpr matrix_view(T* data, std::size_t rows, std::size_t cols) noexcept
      : matrix_view(data, rows, cols, cols) {}
  constexpr matrix_view(T* data, std::size_t rows, std::size_t cols, std::size_t stride) noexcept
      : data_(data), rows_(rows), cols_(cols), stride_(stride) {
    HEDGE_ASSERT(stride >= cols);
  }
  template <class U>
    requires std::is_convertible_v<U (*)[], T (*)[]>
  constexpr matrix_view(matrix_view<U> other) noexcept
      : data_(other.data()), rows_(other.rows()), cols_(other.cols()), stride_(other.stride()) {}

  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t rows() const noexcept { return rows_; }
  [[nodiscard]] constexpr std::size_t cols() const noexcept { return cols_; }
  [[nodiscard]] constexpr std::size_t stride() const noexcept { return stride_; }
  [[nodiscard]] constexpr bool dense() const noexcept { return stride_ == cols_; }

  constexpr T& operator()(std::size_t r, std::size_t c) const noexcept {
    HEDGE_ASSERT(r < rows_ && c < cols_);
    return data_[r * stride_ + c];
  }
  [[nodiscard]] constexpr vector_view<T> row(std::size_t r) const noexcept {
    HEDGE_ASSERT(r < rows_);
    return {data_ + r * stride_, cols_};
  }
  /// Rows [first, first + count).
  [[nodiscard]] constexpr matrix_view row_range(std::size_t first, std::size_t count) const noexcept {
    HEDGE_ASSERT(first <= rows_ && count <= rows_ - first);
    return {data_ + first * stride_, count, cols_, stride_};
  }
  /// The sub-matrix of `rows` x `cols` starting at (r, c).
  [[nodiscard]] constexpr matrix_view block(std::size_t r, std::size_t c, std::size_t rows,
                                            std::size_t cols) const noexcept {
    HEDGE_ASSERT(r <= rows_ && rows <= rows_ - r && c <= cols_ && cols <= cols_ - c);
    return {data_ + r * stride_ + c, rows, cols, stride_};
  }

 private:
  T* data_ = nullptr;
  std::size_t rows_ = 0;
  std::size_t cols_ = 0;
  std::size_t stride_ = 0;
};

}  // namespace hedge
