// hedge/os/model_file.hpp: a model file loaded for generation, the one way every tool, the
// demo and the server load one (`-m MODEL [-z TOKENIZER] [--quantize q8_0|q4_0]`).
//
// The files are mapped, not read (os/mapped_file.hpp); model/checkpoint.hpp tells the format
// from the bytes and reads the weights as views of the mapping. make_llama builds the forward
// pass over it: the repacked and fused weights on huge pages (os::mapped_memory), and the
// file's pages of what they replace released (mapped_file::release), so the resident set holds
// one copy of the weights; fusing the plain-layout projections too (llama_fusion::all, a copy)
// then costs no memory and saves synchronisations (docs/model.md), and so does repacking
// Q8_0 (llama_repack::all): its interleaved GEMV and GEMM took about half the CPU time of
// the file layout's on AVX-512 VNNI in Gemma-3-1B- and Llama-3.2-1B-shaped Q8_0 files, whose
// tied classifier is most of a token's work (docs/perf-journal.md, 2026-11-28).
#pragma once

#include <span>
#include <string>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/model/checkpoint.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/os/mapped_file.hpp"

namespace hedge::os {

struct model_load_options {
  std::string model;      ///< a GGUF, or a llama2.c .bin
  std::string tokenizer;  ///< a llama2.c tokenizer.bin (only with a .bin)
  model::load_quantization quantize = model::load_quantization::none;
};

/// The mapped files and the checkpoint read from them (its weights view the mapping).
struct loaded_model : model::checkpoint {
  mapped_file file, tokenizer_file;
};

inline result<loaded_model> load_model(const model_load_options& o) {
  loaded_model m;
  auto file = mapped_file::open(o.model);
  if (!file) return file.error();
  m.file = std::move(*file);
  if (!o.tokenizer.empty()) {
    if (model::is_gguf(m.file.bytes()))
      return error{errc::invalid_argument} << "-z is for llama2.c checkpoints; a GGUF holds its vocabulary";
    auto tok = mapped_file::open(o.tokenizer);
    if (!tok) return tok.error();
    m.tokenizer_file = std::move(*tok);
  } else if (!model::is_gguf(m.file.bytes())) {
    return error{errc::invalid_argument} << o.model << " is not a GGUF: a llama2.c checkpoint needs -z TOKENIZER";
  }
  auto c = model::read_checkpoint(m.file.bytes(), m.tokenizer_file.bytes(), o.quantize);
  if (!c) return error{c.error().code()} << o.model << ": " << c.error().message();
  static_cast<model::checkpoint&>(m) = std::move(*c);
  return m;
}

/// A forward pass with the memory that holds its weights.
struct runnable_llama {
  mapped_memory arena;  ///< the repacked and fused weights
  model::llama<> model;
};

inline result<runnable_llama> make_llama(loaded_model& m, model::llama_options options) {
  options.fuse = model::llama_fusion::all;
  options.repack = model::llama_repack::all;
  const auto arena_bytes = model::llama_weight_arena_bytes(m.weights, options);
  if (!arena_bytes) return arena_bytes.error();
  auto arena = mapped_memory::allocate(*arena_bytes);
  if (!arena) return arena.error();
  options.weight_arena = arena->bytes();
  auto model = model::llama<>::make(m.weights, options, [&](std::span<const std::byte> r) { m.file.release(r); });
  if (!model) return model.error();
  return runnable_llama{std::move(*arena), std::move(*model)};
}

}  // namespace hedge::os
