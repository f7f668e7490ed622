// hedge/os/csv_files.hpp: the files of offline routing work: whole text files read and
// written, the .csv files of a data-set folder listed, labelled routing data and traffic
// logs loaded (parsed by route/training.hpp), and complexity weights saved.
//
// Namespace hedge::os, as the folder: a call site that reads a file says so (os::...),
// and route/ stays free of the file system. Uses the heap and the C and C++ file APIs;
// errors are result values (the listing uses std::filesystem's error_code overloads).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/route/complexity_model.hpp"
#include "hedge/route/training.hpp"

namespace hedge::os {

/// Whole file as a string.
inline result<std::string> read_text_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return error{errc::io_error} << "cannot open " << path;
  std::string text;
  char buffer[1 << 16];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return error{errc::io_error} << "error reading " << path;
  return text;
}

/// Writes `text` as the whole file at `path` (created or replaced).
inline result<void> write_text_file(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return error{errc::io_error} << "cannot create " << path;
  const bool short_write = std::fwrite(text.data(), 1, text.size(), f) != text.size();
  const bool failed = std::ferror(f) != 0 || short_write;
  if (std::fclose(f) != 0 || failed) return error{errc::io_error} << "error writing " << path;
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
