// hedge/core/storage.hpp: where a buffer's bytes live, as a type.
//
// Three policies with one interface (`data()`, `size()`, `span()`), all aligned
// to `cache_line_bytes` (64):
//   static_storage<T, N>  an in-object array: no heap, size fixed at compile time (firmware)
//   buffer_storage<T>     memory the caller owns and lends (arena, DMA region, mmap)
//   heap_storage<T>       owned, allocated once at construction, never in a hot loop
// An empty heap_storage (never made) reaches no allocator: its destructor frees through a
// function that `make` stores, so a type that holds one for the memory it owns when the
// caller lends none (vocabulary, llama) links no heap into a program that always lends.
// Components that hold state (KV caches, workspaces) take a storage type as a
// template argument; `Storage` states what such a type must provide.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "hedge/core/config.hpp"
#include "hedge/core/result.hpp"

namespace hedge {

template <class S>
concept Storage = requires(S& s, const S& cs) {
  typename S::value_type;
  { s.data() } -> std::same_as<typename S::value_type*>;
  { cs.size() } -> std::convertible_to<std::size_t>;
};

/// `N` elements of T inside the object, 64-byte aligned.
template <class T, std::size_t N>
class static_storage {
  static_assert(std::is_trivially_destructible_v<T>, "static_storage holds trivially destructible elements");

 public:
  using value_type = T;
  static constexpr std::size_t capacity = N;

  constexpr T* data() noexcept { return data_; }
  constexpr const T* data() const noexcept { return data_; }
  static constexpr std::size_t size() noexcept { return N; }
  constexpr std::span<T> span() noexcept { return {data_, N}; }
  constexpr std::span<const T> span() const noexcept { return {data_, N}; }

 private:
  alignas(cache_line_bytes) T data_[N > 0 ? N : 1]{};
};

/// Caller-owned memory; `make` checks the 64-byte alignment contract.
template <class T>
class buffer_storage {
 public:
  using value_type = T;
  constexpr buffer_storage() noexcept = default;

  static result<buffer_storage> make(std::span<T> memory) noexcept {
    if (reinterpret_cast<std::uintptr_t>(memory.data()) % cache_line_bytes != 0)
      return error{errc::misaligned} << "caller buffer at address % 64 = "
                                     << reinterpret_cast<std::uintptr_t>(memory.data()) % cache_line_bytes
                                     << "; hedge buffers must be 64-byte aligned";
    return buffer_storage{memory};
  }

  constexpr T* data() noexcept { return memory_.data(); }
  constexpr const T* data() const noexcept { return memory_.data(); }
  constexpr std::size_t size() const noexcept { return memory_.size(); }
  constexpr std::span<T> span() noexcept { return memory_; }
  constexpr std::span<const T> span() const noexcept { return memory_; }

 private:
  constexpr explicit buffer_storage(std::span<T> memory) noexcept : memory_(memory) {}
  std::span<T> memory_{};
};

/// Owned heap memory, value-initialised, 64-byte aligned; move-only.
/// `make` reports allocation failure as an error instead of throwing.
template <class T>
class heap_storage {
  static_assert(std::is_trivially_destructible_v<T>, "heap_storage holds trivially destructible elements");

 public:
  using value_type = T;
  constexpr heap_storage() noexcept = default;

  static result<heap_storage> make(std::size_t count) noexcept {
    if (count > SIZE_MAX / sizeof(T))
      return error{errc::out_of_memory} << "heap_storage of " << count << " elements overflows size_t";
    heap_storage s;
    if (count == 0) return s;
    void* p = ::operator new(count * sizeof(T), std::align_val_t{cache_line_bytes}, std::nothrow);
    if (p == nullptr)
      return error{errc::out_of_memory} << "heap_storage: cannot allocate " << count * sizeof(T) << " bytes";
    s.data_ = ::new (p) T[count]();
    s.size_ = count;
    s.free_ = &free_memory;
    return s;
  }

  heap_storage(heap_storage&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), free_(std::exchange(o.free_, nullptr)) {}
  heap_storage& operator=(heap_storage&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      free_ = std::exchange(o.free_, nullptr);
    }
    return *this;
  }
  heap_storage(const heap_storage&) = delete;
  heap_storage& operator=(const heap_storage&) = delete;
  ~heap_storage() { release(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::span<T> span() noexcept { return {data_, size_}; }
  std::span<const T> span() const noexcept { return {data_, size_}; }

 private:
  static void free_memory(void* p) noexcept { ::operator delete(p, std::align_val_t{cache_line_bytes}); }
  void release() noexcept {
    if (data_ != nullptr) free_(static_cast<void*>(data_));
    data_ = nullptr;
    size_ = 0;
    free_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
  void (*free_)(void*) noexcept = nullptr;  ///< set by make() alone (see the file comment)
};

}  // namespace hedge
