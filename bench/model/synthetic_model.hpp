// bench/model/synthetic_model.hpp: a synthetic llama GGUF of a real model's shape, written
// once with the GGUF writer and reused by every later run (the benchmarks' fixture, and the
// file scripts/compare-llamacpp.sh hands to llama.cpp).
//
// Weights are uniform random in [-a, a] with a = sqrt(3 / row length) (variance 1 / fan-in,
// so each projection keeps its input's scale and activations stay finite through the
// layers), quantized row by row with hedge's reference quantizers (bit-exact with ggml's).
// Types follow llama.cpp's quantize (llama_tensor_get_type) for a Q4_0 or Q8_0 file: every
// matrix in the file's type, output.weight in Q6_K for Q4_0 (Q8_0 for Q8_0), norms F32
// (all ones). The vocabulary is Llama 2's, copied from ../shared/models/llama2-vocab.gguf
// (its tokenizer.ggml.* keys), so llama.cpp loads the file as a llama model.
//
// Where: $HEDGE_BENCH_MODELS, else the folder of the running executable (build/<dir>/bench/).
// Name: <shape>-<format>.gguf. The file is written under a temporary name and renamed, so an
// interrupted write leaves no file that looks complete.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "common/pool.hpp"
#include "hedge/core/result.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/os/mapped_file.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::bench {

/// A llama shape for a synthetic checkpoint.
struct llama_shape {
  const char* name;
  std::uint32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, context_length;
};

/// TinyLlama-1.1B's shape (its config.json): 1.1e9 parameters.
inline constexpr llama_shape tinyllama_1b{"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048};

/// The folder synthetic models are cached in (see the file comment).
inline std::string synthetic_model_dir() {
  if (const char* dir = std::getenv("HEDGE_BENCH_MODELS"); dir != nullptr && *dir != '\0') return dir;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string{"."} : exe.parent_path().string();
}

namespace detail {

/// Rows x cols uniform random values in [-scale, scale] from `seed`, quantized to F.
template <quant::BlockFormat F>
result<std::vector<std::byte>> random_quantized(std::size_t rows, std::size_t cols, float scale, std::uint64_t seed) {
  const std::size_t row_bytes = quant::row_bytes<F>(cols);
  std::vector<std::byte> out(rows * row_bytes);
  std::atomic<bool> failed{false};
  pool(hardware_threads()).parallel_for(rows, [&](std::size_t begin, std::size_t end) {
    std::vector<float> x(cols);
    for (std::size_t r = begin; r < end; ++r) {
      // splitmix64 per row: every row is independent of the split across threads.
      std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + r;
      for (float& v : x) {
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        v = scale * (static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
      }
      auto* blocks = reinterpret_cast<typename F::block*>(out.data() + r * row_bytes);
      if (!quant::quantize<F>(x, vector_view<typename F::block>(blocks, cols / F::block_elements))) failed = true;
    }
  });
  if (failed) return error{errc::invalid_argument} << "quantizing random rows to " << F::name << " failed";
  return out;
}

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

}  // namespace detail

/// The path of `shape`'s synthetic GGUF in format F (Q4_0 or Q8_0), written first if absent.
/// `seconds_to_write` receives the time the write took (0 when the file was there).
template <quant::BlockFormat F>
result<std::string> synthetic_llama_gguf(const llama_shape& s, double* seconds_to_write = nullptr) {
  static_assert(F::type_id == quant::gguf_type::q4_0 || F::type_id == quant::gguf_type::q8_0);
  const std::string dir = synthetic_model_dir();
  const std::string path = dir + "/" + s.name + "-" + std::string(F::name) + ".gguf";
  if (seconds_to_write != nullptr) *seconds_to_write = 0.0;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return path;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error{errc::io_error} << "cannot create " << dir << ": " << ec.message();
  const auto start = std::chrono::steady_clock::now();

  auto vocabulary_file = os::mapped_file::open(HEDGE_SHARED_DIR "/models/llama2-vocab.gguf");
  if (!vocabulary_file) return vocabulary_file.error();
  auto vocabulary = model::gguf_file::parse(vocabulary_file->bytes());
  if (!vocabulary) return vocabulary.error();

  model::gguf_writer w;
  w.add("general.architecture", "llama").add("general.name", std::string("hedge synthetic ") + s.name);
  // llama.cpp's ftype: MOSTLY_Q4_0 = 2, MOSTLY_Q8_0 = 7.
  w.add("general.file_type", std::uint32_t{F::type_id == quant::gguf_type::q4_0 ? 2u : 7u});
  w.add("general.quantization_version", std::uint32_t{2});
  w.add("llama.context_length", s.context_length).add("llama.embedding_length", s.dim);
  w.add("llama.block_count", s.n_layers).add("llama.feed_forward_length", s.hidden_dim);
  w.add("llama.attention.head_count", s.n_heads).add("llama.attention.head_count_kv", s.n_kv_heads);
  w.add("llama.rope.dimension_count", s.dim / s.n_heads).add("llama.rope.freq_base", 10000.0f);
  w.add("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  for (const auto& kv : vocabulary->metadata())
    if (kv.key.starts_with("tokenizer.ggml.")) w.add_value(kv.key, kv.value);

  std::deque<std::vector<std::byte>> storage;  // referenced by the writer until write()
  const std::vector<float> ones(s.dim, 1.0f);
  const std::span<const std::byte> norm(reinterpret_cast<const std::byte*>(ones.data()), ones.size() * sizeof(float));
  std::uint64_t seed = 1;
  const auto matrix = [&]<class G>(G, const std::string& name, std::uint64_t rows, std::uint64_t cols) -> result<void> {
    auto bytes = detail::random_quantized<G>(rows, cols, std::sqrt(3.0f / static_cast<float>(cols)), seed++);
    if (!bytes) return bytes.error();
    storage.push_back(std::move(*bytes));
    w.add_tensor(name, G::type_id, {cols, rows}, storage.back());
    return ok();
  };
  const std::uint32_t kv_dim = s.dim / s.n_heads * s.n_kv_heads;
  HEDGE_TRY(matrix(F{}, "token_embd.weight", s.vocab_size, s.dim));
  w.add_tensor("output_norm.weight", quant::gguf_type::f32, {s.dim}, norm);
  if constexpr (F::type_id == quant::gguf_type::q4_0) {
    HEDGE_TRY(matrix(quant::q6_k{}, "output.weight", s.vocab_size, s.dim));
  } else {
    HEDGE_TRY(matrix(F{}, "output.weight", s.vocab_size, s.dim));
  }
  for (std::uint32_t l = 0; l < s.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    w.add_tensor(b + "attn_norm.weight", quant::gguf_type::f32, {s.dim}, norm);
    w.add_tensor(b + "ffn_norm.weight", quant::gguf_type::f32, {s.dim}, norm);
    HEDGE_TRY(matrix(F{}, b + "attn_q.weight", s.dim, s.dim));
    HEDGE_TRY(matrix(F{}, b + "attn_k.weight", kv_dim, s.dim));
    HEDGE_TRY(matrix(F{}, b + "attn_v.weight", kv_dim, s.dim));
    HEDGE_TRY(matrix(F{}, b + "attn_output.weight", s.dim, s.dim));
    HEDGE_TRY(matrix(F{}, b + "ffn_gate.weight", s.hidden_dim, s.dim));
    HEDGE_TRY(matrix(F{}, b + "ffn_up.weight", s.hidden_dim, s.dim));
    HEDGE_TRY(matrix(F{}, b + "ffn_down.weight", s.dim, s.hidden_dim));
  }
  HEDGE_TRY(detail::write_file(w, path));
  if (seconds_to_write != nullptr)
    *seconds_to_write = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return path;
}

}  // namespace hedge::bench
