// tests/model/synthetic_gguf.hpp: synthetic GGUF models (model/synthetic_llama.hpp) with a
// byte-level SentencePiece vocabulary, written in memory and parsed, for the model tests;
// and the check of their errors' codes and messages.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/synthetic_llama.hpp"
#include "hedge/model/weights.hpp"
#include "support/model_files.hpp"

namespace hedge::test {

using model::gguf_file;
using model::gguf_writer;
using model::llama_weights;
using model::synthetic_llama;
using model::synthetic_tensor_bytes;

/// A GGUF file's bytes in 4-byte aligned storage, as a mapped file would be.
struct aligned_bytes {
  std::vector<float> words;  ///< aligned_copy
  std::size_t size = 0;
  [[nodiscard]] std::span<const std::byte> span() const { return {reinterpret_cast<const std::byte*>(words.data()), size}; }
};

/// `spec`'s GGUF with a vocabulary of spec.vocab pieces: <unk>, <s>, </s>, then "\u2581t<id>".
inline result<aligned_bytes> write_synthetic_gguf(const synthetic_llama& spec) {
  gguf_writer w;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<std::int32_t> token_types;
  for (std::uint32_t id = 0; id < spec.vocab; ++id) {
    pieces.push_back(id == 0 ? "<unk>" : id == 1 ? "<s>" : id == 2 ? "</s>" : "\xE2\x96\x81t" + std::to_string(id));
    scores.push_back(-static_cast<float>(id));
    token_types.push_back(id == 0 ? 2 : id < 3 ? 3 : 1);  // unknown, control, normal
  }
  w.add("tokenizer.ggml.model", "llama")
      .add_array<std::string>("tokenizer.ggml.tokens", pieces)
      .add_array<float>("tokenizer.ggml.scores", scores)
      .add_array<std::int32_t>("tokenizer.ggml.token_type", token_types)
      .add("tokenizer.ggml.bos_token_id", std::uint32_t{1})
      .add("tokenizer.ggml.eos_token_id", std::uint32_t{2});
  synthetic_tensor_bytes tensors;
  HEDGE_TRY(model::add_synthetic_llama(w, spec, tensors));
  std::vector<std::byte> bytes;
  HEDGE_TRY(w.write(bytes));
  return aligned_bytes{aligned_copy(bytes), bytes.size()};
}

/// A synthetic GGUF, parsed, and its weights (views of `file`'s bytes).
struct synthetic_model {
  aligned_bytes bytes;
  gguf_file file;
  llama_weights weights;
};

inline result<synthetic_model> load_synthetic(const synthetic_llama& spec) {
  auto bytes = write_synthetic_gguf(spec);
  if (!bytes) return bytes.error();
  auto file = gguf_file::parse(bytes->span());  // a view of the heap buffer, which moves with the vector
  if (!file) return file.error();
  auto weights = model::gguf_weights(*file);
  if (!weights) return weights.error();
  return synthetic_model{std::move(*bytes), *file, std::move(*weights)};
}

/// Expects error `e` to have `code` and a message that contains `text`.
inline void expect_error(const error& e, errc code, std::string_view text) {
  EXPECT_EQ(e.code(), code) << e.message();
  EXPECT_NE(e.message().find(text), std::string_view::npos) << "'" << e.message() << "' does not say '" << text << "'";
}

}  // namespace hedge::test
