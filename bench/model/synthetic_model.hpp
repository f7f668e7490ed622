// bench/model/synthetic_model.hpp: the benchmarks' synthetic GGUF models, written once and
// reused by every later run (the benchmarks' fixture, and the files
// scripts/compare-llamacpp.sh hands to llama.cpp). Random weights (model/synthetic_llama.hpp)
// in the shapes of the models people run on devices, with vocabularies of their real size:
// the classifier over a 128k-262k vocabulary is a large part of a 1B model's decode.
//
//   tinyllama-1.1b  TinyLlama-1.1B's shape (model::synthetic_tinyllama_1b), Llama 2's
//                   vocabulary (../shared/models/llama2-vocab.gguf); q4_0 and q8_0, the
//                   types of llama.cpp's quantize for those files: every matrix in the
//                   file's type, output.weight Q6_K in Q4_0 (Q8_0 in Q8_0), norms F32.
//   llama-3.2-1b    Llama-3.2-1B's config.json: dim 2048, 16 layers, 32 heads, 8 KV heads
//                   of 64, FFN 8192, RoPE base 500000 with rope_freqs factors, classifier
//                   tied to the embedding; Llama 3's vocabulary (128,256 pieces, llama.cpp's
//                   ggml-vocab-llama-bpe.gguf).
//   qwen3-1.7b      Qwen3-1.7B's: dim 2048, 28 layers, 16 heads, 8 KV heads of 128 (Q and K
//                   norms), FFN 6144, RoPE base 1e6, tied classifier; Qwen2's vocabulary
//                   (151,936 pieces, ggml-vocab-qwen2.gguf).
//   gemma-3-1b      Gemma-3-1B's: dim 1152, 26 layers, 4 heads, 1 KV head of 256 (Q and K
//                   norms), FFN 6912 (GeGLU), post-block norms, five local layers of window
//                   512 in six, RoPE bases 1e6 (global) and 10000 (local), tied classifier;
//                   a SentencePiece vocabulary of its 262,144 pieces (<unk>, <s>, </s>, the
//                   byte pieces, then "\u2581t<id>": Gemma's own is not in ../shared).
//   The last three in q4_k_m and q8_0 (also q4_0, q5_k_m): written in F16, then converted
//   by hedge-quantize's mix (model/gguf_quantize.hpp, llama-quantize's types byte for byte),
//   so Q4_K_M has Q6_K on llama-quantize's layers and Gemma's 1152-wide rows fall back
//   to Q5_0 (its classifier to Q8_0), as in the files people download.
//
// Where: $HEDGE_BENCH_MODELS, else the folder of the running executable (build/<dir>/bench/).
// Name: <model>-<format>.gguf. Each file is written under a temporary name and renamed, so
// an interrupted write leaves no file that looks complete; the F16 source is deleted.
#pragma once

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/pool.hpp"
#include "hedge/core/result.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_quantize.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/synthetic_llama.hpp"
#include "hedge/os/mapped_file.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::bench {

inline constexpr std::string_view tinyllama_1b = "tinyllama-1.1b";
inline constexpr std::string_view llama32_1b = "llama-3.2-1b";
inline constexpr std::string_view qwen3_1_7b = "qwen3-1.7b";
inline constexpr std::string_view gemma3_1b = "gemma-3-1b";

/// One benchmark model: its name, and the formats the benchmarks run it in.
struct synthetic_model_name {
  std::string_view name;
  std::array<std::string_view, 2> formats;
};
inline constexpr std::array<synthetic_model_name, 4> synthetic_models{{
    {tinyllama_1b, {"q4_0", "q8_0"}},
    {llama32_1b, {"q4_k_m", "q8_0"}},
    {qwen3_1_7b, {"q4_k_m", "q8_0"}},
    {gemma3_1b, {"q4_k_m", "q8_0"}},
}};

/// The folder synthetic models are cached in (see the file comment).
inline std::string synthetic_model_dir() {
  if (const char* dir = std::getenv("HEDGE_BENCH_MODELS"); dir != nullptr && *dir != '\0') return dir;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string{"."} : exe.parent_path().string();
}

namespace detail {

/// Writes `writer`'s file to `path` through a temporary file renamed into place.
inline result<void> write_file(const model::gguf_writer& writer, const std::string& path) {
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (f == nullptr) return error{errc::io_error} << "cannot create " << temporary << ": " << std::strerror(errno);
  auto written = writer.write([&](std::span<const std::byte> bytes) -> result<void> {
    if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
      return error{errc::io_error} << "cannot write " << temporary << ": " << std::strerror(errno);
    return ok();
  });
  if (std::fclose(f) != 0 && written)
    written = error{errc::io_error} << "cannot write " << temporary << ": " << std::strerror(errno);
  std::error_code ec;
  if (written) std::filesystem::rename(temporary, path, ec);
  if (!written || ec) {
    std::filesystem::remove(temporary, ec);
    if (written) return error{errc::io_error} << "cannot rename " << temporary << " to " << path << ": " << ec.message();
    return written.error();
  }
  return ok();
}

/// Copies the tokenizer.ggml.* keys of the GGUF at `path` into `w`; returns its piece count.
inline result<std::uint32_t> copy_vocabulary(const std::string& path, model::gguf_writer& w) {
  auto file = os::mapped_file::open(path);
  if (!file) return file.error();
  auto gguf = model::gguf_file::parse(file->bytes());
  if (!gguf) return error{gguf.error().code()} << path << ": " << gguf.error().message();
  std::uint32_t pieces = 0;
  for (const auto& kv : gguf->metadata()) {
    if (!kv.key.starts_with("tokenizer.ggml.")) continue;
    w.add_value(kv.key, kv.value);
    if (kv.key == "tokenizer.ggml.tokens") pieces = static_cast<std::uint32_t>(kv.value.size());
  }
  if (pieces == 0) return error{errc::invalid_argument} << path << ": no tokenizer.ggml.tokens";
  return pieces;
}

/// A SentencePiece vocabulary of `pieces` pieces: <unk>, <s>, </s>, the 256 byte pieces
/// <0x00> ... <0xFF> (llama.cpp looks up <0x0A> when it loads one), then "\u2581t<id>".
inline void add_synthetic_vocabulary(model::gguf_writer& w, std::uint32_t pieces) {
  std::vector<std::string> text;
  std::vector<float> scores;
  std::vector<std::int32_t> types;
  constexpr std::uint32_t first_byte = 3, bytes = 256;
  for (std::uint32_t id = 0; id < pieces; ++id) {
    if (id >= first_byte && id < first_byte + bytes) {
      char piece[8];
      std::snprintf(piece, sizeof piece, "<0x%02X>", id - first_byte);
      text.emplace_back(piece);
    } else {
      text.push_back(id == 0 ? "<unk>" : id == 1 ? "<s>" : id == 2 ? "</s>" : "\xE2\x96\x81t" + std::to_string(id));
    }
    scores.push_back(-static_cast<float>(id));
    // unknown, control, byte, normal
    types.push_back(id == 0 ? 2 : id < first_byte ? 3 : id < first_byte + bytes ? 6 : 1);
  }
  w.add("tokenizer.ggml.model", "llama")
      .add_array<std::string>("tokenizer.ggml.tokens", text)
      .add_array<float>("tokenizer.ggml.scores", scores)
      .add_array<std::int32_t>("tokenizer.ggml.token_type", types)
      .add("tokenizer.ggml.bos_token_id", std::uint32_t{1})
      .add("tokenizer.ggml.eos_token_id", std::uint32_t{2});
}

/// The shape of `model` (one of the 1B-class names above) with every matrix in F16 and
/// the vocabulary added to `w`; nullopt for another name.
inline result<std::optional<model::synthetic_llama>> shape_with_vocabulary(std::string_view model,
                                                                           model::gguf_writer& w) {
  model::synthetic_llama s;
  std::uint32_t vocabulary = 0;
  if (model == llama32_1b) {
    s = {.name = "hedge synthetic llama-3.2-1b", .dim = 2048, .hidden_dim = 8192, .layers = 16, .heads = 32,
         .kv_heads = 8, .context = 131072, .rope_dim = 64, .head_dim = 64, .rope_theta = 500000.0f,
         .rope_factors = true, .shared_classifier = true};
    auto pieces = copy_vocabulary(HEDGE_SHARED_DIR "/models/vocab/ggml-vocab-llama-bpe.gguf", w);
    if (!pieces) return pieces.error();
    vocabulary = *pieces;
  } else if (model == qwen3_1_7b) {
    s = {.name = "hedge synthetic qwen3-1.7b", .dim = 2048, .hidden_dim = 6144, .layers = 28, .heads = 16,
         .kv_heads = 8, .context = 40960, .architecture = "qwen3", .head_dim = 128, .rope_theta = 1000000.0f,
         .shared_classifier = true};
    auto pieces = copy_vocabulary(HEDGE_SHARED_DIR "/models/vocab/ggml-vocab-qwen2.gguf", w);
    if (!pieces) return pieces.error();
    vocabulary = *pieces;
  } else if (model == gemma3_1b) {
    s = {.name = "hedge synthetic gemma-3-1b", .dim = 1152, .hidden_dim = 6912, .layers = 26, .heads = 4,
         .kv_heads = 1, .context = 32768, .architecture = "gemma3", .head_dim = 256, .rope_theta = 1000000.0f,
         .sliding_window = 512, .sliding_pattern = 6, .shared_classifier = true};
    vocabulary = 262144;
    add_synthetic_vocabulary(w, vocabulary);
  } else {
    return std::optional<model::synthetic_llama>{};
  }
  s.vocab = vocabulary;
  s.all_types(quant::gguf_type::f16);
  return std::optional<model::synthetic_llama>{s};
}

}  // namespace detail

/// The path of `model` in `format` (synthetic_models' names), written first if absent.
/// `seconds_to_write` receives the time the write took (0 when the file was there).
inline result<std::string> synthetic_model_gguf(std::string_view model, std::string_view format,
                                                double* seconds_to_write = nullptr) {
  const std::string dir = synthetic_model_dir();
  const std::string path = dir + "/" + std::string(model) + "-" + std::string(format) + ".gguf";
  if (seconds_to_write != nullptr) *seconds_to_write = 0.0;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return path;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error{errc::io_error} << "cannot create " << dir << ": " << ec.message();
  const auto start = std::chrono::steady_clock::now();
  auto& executor = pool(hardware_threads());

  if (model == tinyllama_1b) {
    if (format != "q4_0" && format != "q8_0") return error{errc::invalid_argument} << "no " << model << " in " << format;
    model::gguf_writer w;
    HEDGE_TRY(detail::copy_vocabulary(HEDGE_SHARED_DIR "/models/llama2-vocab.gguf", w));
    const auto type = format == "q4_0" ? quant::gguf_type::q4_0 : quant::gguf_type::q8_0;
    const auto output = type == quant::gguf_type::q4_0 ? quant::gguf_type::q6_k : type;
    model::synthetic_tensor_bytes tensors;
    HEDGE_TRY(model::add_synthetic_llama(w, model::synthetic_tinyllama_1b(type, output), tensors, executor));
    HEDGE_TRY(detail::write_file(w, path));
  } else {
    const auto mix = model::parse_quant_mix(format);
    if (!mix) return error{errc::invalid_argument} << "no quantization mix " << format;
    // The F16 source, written and then converted as hedge-quantize converts a file.
    const std::string source = path + ".f16";
    {
      model::gguf_writer w;
      auto shape = detail::shape_with_vocabulary(model, w);
      if (!shape) return shape.error();
      if (!*shape) return error{errc::invalid_argument} << "no synthetic model " << model;
      model::synthetic_tensor_bytes tensors;
      HEDGE_TRY(model::add_synthetic_llama(w, **shape, tensors, executor));
      HEDGE_TRY(detail::write_file(w, source));
    }
    auto mapped = os::mapped_file::open(source);
    if (!mapped) return mapped.error();
    auto converted = [&]() -> result<void> {
      auto gguf = model::gguf_file::parse(mapped->bytes());
      if (!gguf) return gguf.error();
      model::gguf_writer w;
      model::quantized_storage storage;
      HEDGE_TRY(model::quantize_gguf(*gguf, *mix, w, storage));
      return detail::write_file(w, path);
    }();
    std::filesystem::remove(source, ec);
    HEDGE_TRY(converted);
  }
  if (seconds_to_write != nullptr)
    *seconds_to_write = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return path;
}

}  // namespace hedge::bench
