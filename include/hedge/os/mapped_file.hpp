// hedge/os/mapped_file.hpp: a file mapped read-only into memory, for the model readers
// (model/gguf.hpp parses the mapped bytes in place: weights are paged in on first use and
// shared with every process mapping the same file).
//
// POSIX mmap; RAII and move-only. Errors name the file and the OS's reason. A zero-size
// file maps to an empty span (mmap rejects a zero length), and a directory or another
// non-regular file is an error before any mapping.
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

class mapped_file {
 public:
  mapped_file() noexcept = default;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  mapped_file(mapped_file&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  mapped_file& operator=(mapped_file&& other) noexcept {
    if (this != &other) {
      unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~mapped_file() { unmap(); }

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
      file.data_ = p;
      file.size_ = static_cast<std::size_t>(info.st_size);
    }
    ::close(fd);
    return file;
  }

  /// The file's bytes (empty for an empty file).
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(data_), size_};
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  static error close_with(int fd, const std::string& path, const char* what, int reason) noexcept {
    ::close(fd);
    return error{errc::io_error} << what << path << ": " << std::strerror(reason);
  }
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace hedge::os
