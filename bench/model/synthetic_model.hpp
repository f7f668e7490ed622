// bench/model/synthetic_model.hpp: the benchmarks' synthetic llama GGUF of TinyLlama-1.1B's
// shape (model/synthetic_llama.hpp), written once and reused by every later run (the
// benchmarks' fixture, and the file scripts/compare-llamacpp.sh hands to llama.cpp).
//
// Types follow llama.cpp's quantize (llama_tensor_get_type) for a Q4_0 or Q8_0 file: every
// matrix in the file's type, output.weight in Q6_K for Q4_0 (Q8_0 for Q8_0), norms F32. The
// vocabulary is Llama 2's, copied from ../shared/models/llama2-vocab.gguf (its
// tokenizer.ggml.* keys), so llama.cpp loads the file as a llama model.
//
// Where: $HEDGE_BENCH_MODELS, else the folder of the running executable (build/<dir>/bench/).
// Name: tinyllama-1.1b-<format>.gguf. The file is written under a temporary name and renamed,
// so an interrupted write leaves no file that looks complete.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "common/pool.hpp"
#include "hedge/core/result.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/synthetic_llama.hpp"
#include "hedge/os/mapped_file.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::bench {

/// The benchmarks' model's name: TinyLlama-1.1B's shape (model::synthetic_tinyllama_1b).
inline constexpr std::string_view tinyllama_1b = "tinyllama-1.1b";

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

}  // namespace detail

/// The path of the TinyLlama-shaped GGUF in format F (Q4_0 or Q8_0), written first if
/// absent. `seconds_to_write` receives the time the write took (0 when the file was there).
template <quant::BlockFormat F>
result<std::string> synthetic_tinyllama_gguf(double* seconds_to_write = nullptr) {
  static_assert(F::type_id == quant::gguf_type::q4_0 || F::type_id == quant::gguf_type::q8_0);
  const std::string dir = synthetic_model_dir();
  const std::string path = dir + "/" + std::string(tinyllama_1b) + "-" + std::string(F::name) + ".gguf";
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
  for (const auto& kv : vocabulary->metadata())
    if (kv.key.starts_with("tokenizer.ggml.")) w.add_value(kv.key, kv.value);
  const auto output = F::type_id == quant::gguf_type::q4_0 ? quant::gguf_type::q6_k : F::type_id;
  model::synthetic_tensor_bytes tensors;
  HEDGE_TRY(model::add_synthetic_llama(w, model::synthetic_tinyllama_1b(F::type_id, output), tensors,
                                       pool(hardware_threads())));
  HEDGE_TRY(detail::write_file(w, path));
  if (seconds_to_write != nullptr)
    *seconds_to_write = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return path;
}

}  // namespace hedge::bench
