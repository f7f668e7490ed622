// hedge/os/csv_files.hpp: the files of offline routing work: whole text files read and
// written, the .csv files of a data-set folder listed, labelled routing data and traffic
// logs loaded (parsed by route/training.hpp), and complexity weights saved.
//
// Namespace hedge::os, as the folder: a call site that reads a file says so (os::...),
// and route/ stays free of the file system. Uses the heap and the C and C++ file APIs;
// errors are result values that name the file and the OS's reason (the listing uses
// std::filesystem's error_code overloads: nothing here throws).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/route/complexity_model.hpp"
#include "hedge/route/training.hpp"

namespace hedge::os {

/// Whole file as a string. The string is reserved at the file's size first, so reading a
/// large file holds it once, not twice while a growing string reallocates; a pipe or a
/// /proc file, whose size reads as 0, is read to its end all the same. Errors name the
/// file and the OS's reason (`cannot open X: No such file or directory`).
inline result<std::string> read_text_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return error{errc::io_error} << "cannot open " << path << ": " << std::strerror(errno);
  std::string text;
  struct ::stat info {};
  if (::fstat(::fileno(f), &info) == 0) {
    // fopen opens a directory for reading; its reads fail with EISDIR on Linux, not on every OS.
    if (S_ISDIR(info.st_mode)) {
      std::fclose(f);
      return error{errc::io_error} << "cannot read " << path << ": " << std::strerror(EISDIR);
    }
    if (S_ISREG(info.st_mode) && info.st_size > 0) text.reserve(static_cast<std::size_t>(info.st_size));
  }
  char buffer[1 << 16];
  std::size_t n;
  errno = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(f) != 0;
  const int reason = errno != 0 ? errno : EIO;
  std::fclose(f);
  if (failed) return error{errc::io_error} << "cannot read " << path << ": " << std::strerror(reason);
  return text;
}

/// Writes `text` as the whole file at `path` (created or replaced). A full disk (or
/// /dev/full) can fail at the write, the flush or the close: each is checked, and the
/// error names the file and the OS's reason.
inline result<void> write_text_file(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return error{errc::io_error} << "cannot write " << path << ": " << std::strerror(errno);
  errno = 0;
  bool failed = std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fflush(f) != 0;
  int reason = errno;
  if (std::fclose(f) != 0 && !failed) failed = true, reason = errno;
  if (failed) return error{errc::io_error} << "cannot write " << path << ": " << std::strerror(reason != 0 ? reason : EIO);
  return ok();
}

/// The paths of the .csv files in a directory (regular files, or links to them; not in its
/// subdirectories), sorted: a labelled data set such as ../shared/routing/mmlu, one file
/// per domain.
inline result<std::vector<std::string>> csv_files_in(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  // increment(ec), not ++: a failure while listing is an error, not an exception.
  for (std::filesystem::directory_iterator it(dir, ec); !ec && it != std::filesystem::directory_iterator{};
       it.increment(ec)) {
    std::error_code type_ec;  // an entry whose type cannot be read (a broken link) is skipped
    if (it->path().extension() == ".csv" && it->is_regular_file(type_ec)) files.push_back(it->path().string());
  }
  if (ec) return error{errc::io_error} << "cannot list " << dir << ": " << ec.message();
  std::sort(files.begin(), files.end());
  return files;
}

/// A labelled CSV file (route::parse_labelled_csv).
inline result<std::vector<route::labelled_prompt>> load_labelled_csv(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return route::parse_labelled_csv(*text, path);
}

/// A traffic log (route::parse_prompt_log).
inline result<std::vector<std::string>> load_prompt_log(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return route::parse_prompt_log(*text, path);
}

/// Saves a model as a weights file (route::complexity_weights_text).
template <std::size_t Buckets>
result<void> write_complexity_weights(const route::complexity_model<Buckets>& model, const std::string& path,
                                      std::string_view comment = {}) {
  return write_text_file(path, route::complexity_weights_text(model, comment));
}

}  // namespace hedge::os
