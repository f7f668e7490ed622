// hedge/model/checkpoint.hpp: a checkpoint read from its bytes, whatever its format.
//
// The format is told by the bytes: "GGUF" magic -> a GGUF (weights, vocabulary and, when the
// file has one, its chat template); anything else -> a llama2.c checkpoint, which needs its
// tokenizer.bin's bytes beside it. The weights are views of the bytes (or of the arena that a
// load-time quantization writes), so the bytes must outlive the checkpoint. Mapping files is
// the OS's part: os/model_file.hpp maps them and calls this.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/llama2c.hpp"
#include "hedge/model/llama2c_tokenizer.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/model/weights.hpp"

namespace hedge::model {

/// Float weights quantized as they are loaded (a llama2.c checkpoint, an F32/F16 GGUF).
enum class load_quantization { none, q8_0, q4_0 };

/// A checkpoint's weights, vocabulary and chat template, read from its bytes.
struct checkpoint {
  llama_weights weights;
  tokenizer tok;
  heap_storage<std::byte> arena;  ///< the load-time quantized weights, when asked for
  std::string chat_template;      ///< GGUF tokenizer.chat_template, empty when absent
};

[[nodiscard]] inline bool is_gguf(std::span<const std::byte> bytes) noexcept {
  return bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
}

/// Reads a GGUF, or a llama2.c checkpoint with its `llama2c_tokenizer` bytes.
inline result<checkpoint> read_checkpoint(std::span<const std::byte> bytes,
                                          std::span<const std::byte> llama2c_tokenizer = {},
                                          load_quantization quantize = load_quantization::none) {
  checkpoint c;
  if (is_gguf(bytes)) {
    if (!llama2c_tokenizer.empty())
      return error{errc::invalid_argument} << "a GGUF holds its vocabulary: no separate tokenizer is read";
    auto gguf = gguf_file::parse(bytes);
    if (!gguf) return gguf.error();
    auto weights = gguf_weights(*gguf);
    if (!weights) return weights.error();
    auto vocab = read_gguf_vocabulary(*gguf);
    if (!vocab) return vocab.error();
    c.weights = std::move(*weights);
    c.tok = tokenizer{std::move(*vocab)};
    if (const auto value = gguf->find("tokenizer.chat_template"))
      if (const auto text = value->as_string()) c.chat_template = std::string(*text);
  } else {
    if (llama2c_tokenizer.empty())
      return error{errc::invalid_argument} << "not a GGUF: a llama2.c checkpoint needs its tokenizer";
    auto parsed = llama2c_checkpoint::parse(bytes);
    if (!parsed) return parsed.error();
    auto vocab = read_llama2c_tokenizer(llama2c_tokenizer, parsed->config().vocab_size);
    if (!vocab) return error{vocab.error().code()} << "tokenizer: " << vocab.error().message();
    auto weights = llama2c_weights(*parsed);
    if (!weights) return weights.error();
    c.weights = std::move(*weights);
    c.tok = tokenizer{std::move(*vocab)};
  }
  const auto requantize = [&](auto format) -> result<void> {
    using F = decltype(format);
    auto arena = heap_storage<std::byte>::make(quantized_weights_bytes<F>(c.weights));
    if (!arena) return arena.error();
    c.arena = std::move(*arena);
    auto q = quantize_weights<F>(c.weights, {c.arena.data(), c.arena.size()});
    if (!q) return q.error();
    c.weights = std::move(*q);
    return ok();
  };
  if (quantize == load_quantization::q8_0) HEDGE_TRY(requantize(quant::q8_0{}));
  if (quantize == load_quantization::q4_0) HEDGE_TRY(requantize(quant::q4_0{}));
  return c;
}

}  // namespace hedge::model
