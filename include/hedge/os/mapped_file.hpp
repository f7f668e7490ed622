// hedge/os/mapped_file.hpp: memory mapped from the OS for a model: a file mapped read-only
// (model/gguf.hpp parses the mapped bytes in place: weights are paged in on first use and
// shared with every process mapping the same file), and anonymous memory on transparent
// huge pages for the weights a model repacks at load (llama_options::weight_arena).
//
// POSIX mmap; RAII and move-only. Errors name the file and the OS's reason. A zero-size
// file maps to an empty span (mmap rejects a zero length), and a directory or another
// non-regular file is an error before any mapping.
//
// `mapped_file::release` drops the resident pages of a range the process no longer reads
// (madvise MADV_DONTNEED: for a private read-only file mapping the pages are simply
// unmapped; a later read faults them in again from the page cache, so it is only a hint
// about residency, never about contents). A model that repacked a tensor into its arena
// reports the tensor's bytes (llama::make's `released` callback), and the owner of the
// mapping releases them, so the resident set holds one copy of those weights, not two.
//
// `mapped_memory` asks for huge pages (MADV_HUGEPAGE) because weights streamed at DRAM
// bandwidth from 4 KiB pages decoded about 8% slower here (docs/model.md): the file's own
// pages are already large folios in the page cache, an operator new buffer of the same
// bytes is not, unless the kernel's THP mode is "always".
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "hedge/core/result.hpp"

namespace hedge::os {

namespace detail {

/// One mmap'ed region, unmapped when it goes: the RAII both mappings below share.
class mapping {
 public:
  mapping() noexcept = default;
  mapping(void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  mapping(mapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  mapping& operator=(mapping&& other) noexcept {
    if (this != &other) {
      unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~mapping() { unmap(); }

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

class mapped_file {
 public:
  /// Maps the file at `path` read-only. The descriptor is closed once mapped: the mapping
  /// holds the file.
  static result<mapped_file> open(const std::string& path) noexcept {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error{errc::io_error} << "cannot open " << path << ": " << std::strerror(errno);
    struct ::stat info {};
    if (::fstat(fd, &info) != 0) return close_with(fd, path, "cannot stat ", errno);
    if (S_ISDIR(info.st_mode)) return close_with(fd, path, "cannot map ", EISDIR);
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      return error{errc::io_error} << "cannot map " << path << ": not a regular file";
    }
    if (static_cast<unsigned long long>(info.st_size) > static_cast<unsigned long long>(SIZE_MAX)) {
      ::close(fd);
      return error{errc::io_error} << "cannot map " << path << ": larger than this process's address space";
    }
    mapped_file file;
    if (info.st_size > 0) {
      void* p = ::mmap(nullptr, static_cast<std::size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) return close_with(fd, path, "cannot map ", errno);
      file.map_ = detail::mapping(p, static_cast<std::size_t>(info.st_size));
    }
    ::close(fd);
    return file;
  }

  /// The file's bytes (empty for an empty file).
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(map_.data()), map_.size()};
  }
  [[nodiscard]] std::size_t size() const noexcept { return map_.size(); }

  /// Drops the resident pages wholly inside `range` (a part of bytes(); the partial pages
  /// at its ends stay, since neighbouring data may share them). The bytes stay readable.
  /// Returns the bytes released.
  std::size_t release(std::span<const std::byte> range) const noexcept {
    const auto begin = reinterpret_cast<std::uintptr_t>(range.data());
    const auto base = reinterpret_cast<std::uintptr_t>(map_.data());
    if (range.empty() || begin < base || begin + range.size() > base + map_.size()) return 0;
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t first = (begin + page - 1) / page * page, last = (begin + range.size()) / page * page;
    if (last <= first) return 0;
    if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
    return last - first;
  }

 private:
  static error close_with(int fd, const std::string& path, const char* what, int reason) noexcept {
    ::close(fd);
    return error{errc::io_error} << what << path << ": " << std::strerror(reason);
  }

  detail::mapping map_;
};

/// Zeroed anonymous memory, page aligned, on transparent huge pages where the kernel
/// grants them (see the file comment); RAII and move-only.
class mapped_memory {
 public:
  /// `bytes` of memory (none for 0). The huge-page advice is best effort: a kernel
  /// without THP leaves 4 KiB pages, which is not an error.
  static result<mapped_memory> allocate(std::size_t bytes) noexcept {
    mapped_memory m;
    if (bytes == 0) return m;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return error{errc::out_of_memory} << "cannot map " << bytes << " bytes: " << std::strerror(errno);
#ifdef MADV_HUGEPAGE
    static_cast<void>(::madvise(p, bytes, MADV_HUGEPAGE));
#endif
    m.map_ = detail::mapping(p, bytes);
    return m;
  }

  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {static_cast<std::byte*>(map_.data()), map_.size()}; }
  [[nodiscard]] std::size_t size() const noexcept { return map_.size(); }

 private:
  detail::mapping map_;
};

}  // namespace hedge::os
