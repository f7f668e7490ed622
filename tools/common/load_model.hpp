// tools/common/load_model.hpp: a GGUF or llama2.c checkpoint loaded for generation, as the
// tools take it on the command line (`-m MODEL [-z TOKENIZER] [--quantize q8_0|q4_0]`).
// The file is mapped, not read: the weights are views of the mapping (or of the arena the
// load-time quantization writes). A GGUF holds its vocabulary and may hold a chat template
// (`tokenizer.chat_template`); a llama2.c .bin needs its tokenizer.bin and has none.
// make_llama builds the forward pass over it the way every tool runs one.
// Header-only and shared by the tools: not a tool folder of its own (it has no .cpp).
#pragma once

#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/llama2c.hpp"
#include "hedge/model/llama2c_tokenizer.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/model/weights.hpp"
#include "hedge/os/mapped_file.hpp"

namespace hedge::tools {

struct load_options {
  std::string model;      ///< a GGUF, or a llama2.c .bin
  std::string tokenizer;  ///< a llama2.c tokenizer.bin (only with a .bin)
  std::string quantize;   ///< "", "q8_0" or "q4_0": the float weights quantized at load time
};

/// A checkpoint's bytes and what is read from them.
struct loaded_model {
  os::mapped_file file, tokenizer_file;
  model::llama_weights weights;
  model::tokenizer tok;
  heap_storage<std::byte> arena;
  std::string chat_template;  ///< GGUF tokenizer.chat_template, empty when absent
};

inline result<loaded_model> load_model(const load_options& o) {
  using namespace hedge::model;
  loaded_model m;
  auto file = os::mapped_file::open(o.model);
  if (!file) return file.error();
  m.file = std::move(*file);
  const auto bytes = m.file.bytes();
  const bool is_gguf = bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
  if (is_gguf) {
    if (!o.tokenizer.empty()) return error{errc::invalid_argument} << "-z is for llama2.c checkpoints; a GGUF holds its vocabulary";
    auto gguf = gguf_file::parse(bytes);
    if (!gguf) return error{gguf.error().code()} << o.model << ": " << gguf.error().message();
    auto weights = gguf_weights(*gguf);
    if (!weights) return error{weights.error().code()} << o.model << ": " << weights.error().message();
    auto vocab = read_gguf_vocabulary(*gguf);
    if (!vocab) return error{vocab.error().code()} << o.model << ": " << vocab.error().message();
    m.weights = std::move(*weights);
    m.tok = tokenizer{std::move(*vocab)};
    if (const auto value = gguf->find("tokenizer.chat_template"))
      if (const auto text = value->as_string()) m.chat_template = std::string(*text);
  } else {
    if (o.tokenizer.empty()) return error{errc::invalid_argument} << o.model << " is not a GGUF: a llama2.c checkpoint needs -z TOKENIZER";
    auto checkpoint = llama2c_checkpoint::parse(bytes);
    if (!checkpoint) return error{checkpoint.error().code()} << o.model << ": " << checkpoint.error().message();
    auto tok_file = os::mapped_file::open(o.tokenizer);
    if (!tok_file) return tok_file.error();
    m.tokenizer_file = std::move(*tok_file);
    auto vocab = read_llama2c_tokenizer(m.tokenizer_file.bytes(), checkpoint->config().vocab_size);
    if (!vocab) return error{vocab.error().code()} << o.tokenizer << ": " << vocab.error().message();
    m.weights = llama2c_weights(*checkpoint);
    m.tok = tokenizer{std::move(*vocab)};
  }
  const auto quantize = [&](auto format) -> result<void> {
    using F = decltype(format);
    auto arena = heap_storage<std::byte>::make(quantized_weights_bytes<F>(m.weights));
    if (!arena) return arena.error();
    m.arena = std::move(*arena);
    auto q = quantize_weights<F>(m.weights, {m.arena.data(), m.arena.size()});
    if (!q) return q.error();
    m.weights = std::move(*q);
    return ok();
  };
  if (o.quantize == "q8_0") HEDGE_TRY(quantize(quant::q8_0{}));
  if (o.quantize == "q4_0") HEDGE_TRY(quantize(quant::q4_0{}));
  return m;
}

/// A forward pass with the memory that holds its weights.
struct runnable_llama {
  os::mapped_memory arena;  ///< the repacked and fused weights
  model::llama<> model;
};

/// The forward pass over `m` with `options` (context, threads, sessions), as the tools run
/// it: the repacked and fused weights on huge pages (os::mapped_memory) and the file's
/// pages of what they replace released (mapped_file::release), so the resident set holds
/// one copy of the weights; fusing the plain-layout projections too (llama_fusion::all,
/// a copy) then costs no memory and saves synchronisations (docs/model.md).
inline result<runnable_llama> make_llama(loaded_model& m, model::llama_options options) {
  options.fuse = model::llama_fusion::all;
  const auto arena_bytes = model::llama_weight_arena_bytes(m.weights, options);
  if (!arena_bytes) return arena_bytes.error();
  auto arena = os::mapped_memory::allocate(*arena_bytes);
  if (!arena) return arena.error();
  options.weight_arena = arena->bytes();
  auto model = model::llama<>::make(m.weights, options, [&](std::span<const std::byte> r) { m.file.release(r); });
  if (!model) return model.error();
  return runnable_llama{std::move(*arena), std::move(*model)};
}

}  // namespace hedge::tools
