// The test models of ../shared/models, read into memory the way the readers need them.
#pragma once

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "support/alloc_counter.hpp"

namespace hedge::test {

/// ../shared/models/, where the real checkpoints and their reference outputs are.
inline const std::string models_dir = std::string(shared_dir()) + "/models/";

/// `bytes` copied into 4-byte aligned storage (the readers view floats in place), as a
/// mapped file's bytes are aligned.
inline std::vector<float> aligned_copy(std::span<const std::byte> bytes) {
  std::vector<float> storage((bytes.size() + 3) / 4);
  if (!bytes.empty()) std::memcpy(storage.data(), bytes.data(), bytes.size());
  return storage;
}

/// A file's bytes in 4-byte aligned storage (the readers view floats in place); `bytes`
/// receives the file's size.
inline std::vector<float> read_aligned(const std::string& path, std::size_t& bytes) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes = raw.size();
  return aligned_copy(std::as_bytes(std::span<const char>(raw)));
}

}  // namespace hedge::test

/// Skips the test when ../shared/models is absent.
#define SKIP_WITHOUT_MODELS()                                                   \
  if (!std::ifstream(hedge::test::models_dir + "stories260K.bin").good()) \
  GTEST_SKIP() << hedge::test::models_dir << " is absent (../shared/models)"
