// hedge/model/synthetic_llama.hpp: a random llama checkpoint added to a GGUF writer: the
// general.* and llama.* keys and every tensor, each in the type asked for. The caller adds
// the vocabulary (tokenizer.ggml.*) and writes the file. hedge's synthetic models all come
// from here: the tests' (against a float64 reference, and files a reader must refuse), the
// benchmarks' TinyLlama-shaped files (which scripts/compare-llamacpp.sh also hands to
// llama.cpp), and the demo's edge model when no real checkpoint is at hand.
//
// Values: row r of the t-th tensor added draws from SplitMix64 (model/random.hpp) seeded
// with (seed, t, r), so a file does not depend on how the executor splits the rows.
//   matrices   uniform in [-a, a], a = sqrt(3 / cols): variance 1 / fan-in, so each
//              projection keeps its input's scale and activations stay of order one
//              through the layers
//   embedding  uniform in [-sqrt 3, sqrt 3]: variance 1
//   norms      1 + uniform in [-0.1, 0.1]: not all ones, so a norm weight that is not
//              applied shows in the output
// then quantized row by row with hedge's reference quantizers (bit-exact with ggml's).
// Uses the heap: a tool and test utility, not a runtime path.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/random.hpp"
#include "hedge/model/weights.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::model {

/// The shape, tensor types and seed of a synthetic llama.
struct synthetic_llama {
  std::string name = "hedge synthetic";  ///< general.name
  std::uint32_t dim = 64, hidden_dim = 96, layers = 2, heads = 8, kv_heads = 8, context = 32;
  std::uint32_t vocab = 48;    ///< rows of the embedding and the classifier: the caller's vocabulary's size
  std::uint32_t rope_dim = 0;  ///< llama.rope.dimension_count; 0: key absent (the head size)

  quant::gguf_type embedding = quant::gguf_type::f32;
  quant::gguf_type attention = quant::gguf_type::f32;  ///< attn_q, attn_k, attn_output
  quant::gguf_type value = quant::gguf_type::f32;      ///< attn_v
  quant::gguf_type gate_up = quant::gguf_type::f32;    ///< ffn_gate, ffn_up
  quant::gguf_type down = quant::gguf_type::f32;       ///< ffn_down
  quant::gguf_type output = quant::gguf_type::f32;     ///< output.weight, unless shared
  bool shared_classifier = false;                      ///< no output.weight: the embedding classifies

  std::uint64_t seed = 1;

  /// A file a reader must refuse: each names one tensor, or is empty.
  struct defect_list {
    std::string missing;    ///< not written
    std::string extra_row;  ///< written with one row too many
    std::string f16_norm;   ///< a norm written as F16
  } defects{};

  /// Every matrix in `type` (the classifier too, unless shared).
  constexpr synthetic_llama& all_types(quant::gguf_type type) noexcept {
    embedding = attention = value = gate_up = down = output = type;
    return *this;
  }
};

/// TinyLlama-1.1B's shape (its config.json), every matrix in `type`, the classifier in
/// `output`: llama.cpp's quantize makes output.weight Q6_K in a Q4_0 file.
inline synthetic_llama synthetic_tinyllama_1b(quant::gguf_type type, quant::gguf_type output) {
  synthetic_llama s{.name = "hedge synthetic tinyllama-1.1b", .dim = 2048, .hidden_dim = 5632, .layers = 22,
                    .heads = 32, .kv_heads = 4, .context = 2048, .vocab = 32000, .rope_dim = 64};
  s.all_types(type).output = output;
  return s;
}

/// The bytes of the tensors add_synthetic_llama adds: the writer references them until write().
using synthetic_tensor_bytes = std::deque<std::vector<std::byte>>;

namespace detail {

/// llama.cpp's general.file_type (enum llama_ftype) for a file mostly of `type`.
constexpr std::uint32_t llama_file_type(quant::gguf_type type) noexcept {
  switch (type) {
    case quant::gguf_type::f32: return 0;
    case quant::gguf_type::f16: return 1;
    case quant::gguf_type::q4_0: return 2;
    case quant::gguf_type::q8_0: return 7;
    case quant::gguf_type::q5_0: return 8;
    case quant::gguf_type::q5_1: return 9;
    case quant::gguf_type::q4_k: return 15;  // Q4_K_M
    case quant::gguf_type::q5_k: return 17;  // Q5_K_M
    case quant::gguf_type::q6_k: return 18;
    case quant::gguf_type::bf16: return 32;
    default: return 0;
  }
}

/// `rows` x `cols` values center + uniform(-half_width, half_width) as `type`, row r from
/// SplitMix64 seeded with (seed, r).
template <Executor E>
result<std::vector<std::byte>> synthetic_rows(quant::gguf_type type, std::size_t rows, std::size_t cols, float center,
                                              float half_width, std::uint64_t seed, E& executor) {
  std::vector<std::byte> bytes;
  HEDGE_TRY(model::visit_format<all_weight_formats>(type, [&](auto format) -> result<void> {
    using F = decltype(format);
    if (cols % F::block_elements != 0)
      return error{errc::shape_mismatch} << "rows of " << cols << " are not whole " << F::name << " blocks";
    const std::size_t row_bytes = quant::row_bytes<F>(cols);
    bytes.resize(rows * row_bytes);
    std::atomic<bool> failed{false};
    executor.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
      std::vector<float> x(cols);
      for (std::size_t r = begin; r < end; ++r) {
        seeded_random random{seed * 0x9E3779B97F4A7C15ull + r};
        for (float& v : x) v = center + half_width * static_cast<float>(2.0 * random.uniform() - 1.0);
        auto* blocks = reinterpret_cast<typename F::block*>(bytes.data() + r * row_bytes);
        if (!quant::quantize<F>(x, {blocks, cols / F::block_elements})) failed = true;
      }
    });
    if (failed) return error{errc::invalid_argument} << "quantizing random rows to " << F::name << " failed";
    return ok();
  }));
  return bytes;
}

}  // namespace detail

/// Adds `s`'s keys and tensors to `w`, the tensor bytes into `bytes`; rows are made and
/// quantized on `executor`.
template <Executor E = exec::serial>
result<void> add_synthetic_llama(gguf_writer& w, const synthetic_llama& s, synthetic_tensor_bytes& bytes,
                                 E&& executor = E{}) {
  // Any shape is written, one the model must refuse too; only zero heads has no K/V width.
  if (s.heads == 0) return error{errc::invalid_argument} << "a synthetic llama needs at least one head";
  w.add("general.architecture", "llama").add("general.name", std::string_view(s.name));
  w.add("general.file_type", detail::llama_file_type(s.attention));
  w.add("general.quantization_version", std::uint32_t{2});
  w.add("llama.context_length", s.context).add("llama.embedding_length", s.dim);
  w.add("llama.block_count", s.layers).add("llama.feed_forward_length", s.hidden_dim);
  w.add("llama.attention.head_count", s.heads).add("llama.attention.head_count_kv", s.kv_heads);
  if (s.rope_dim != 0) w.add("llama.rope.dimension_count", s.rope_dim);
  w.add("llama.rope.freq_base", 10000.0f).add("llama.attention.layer_norm_rms_epsilon", 1e-5f);

  std::uint64_t tensor = 0;
  // A vector (a norm) when rows is 0: one row of cols values, written 1-D.
  const auto add = [&](const std::string& name, quant::gguf_type type, std::size_t rows, std::size_t cols,
                       float center, float half_width) -> result<void> {
    ++tensor;
    if (name == s.defects.missing) return ok();
    if (name == s.defects.extra_row) ++rows;
    auto made = detail::synthetic_rows(type, rows == 0 ? 1 : rows, cols, center, half_width,
                                       s.seed * 1000003u + tensor, executor);
    if (!made) return error{made.error().code()} << name << ": " << made.error().message();
    bytes.push_back(std::move(*made));
    if (rows == 0) {
      w.add_tensor(name, type, {cols}, bytes.back());
    } else {
      w.add_tensor(name, type, {cols, rows}, bytes.back());
    }
    return ok();
  };
  const auto matrix = [&](const std::string& name, quant::gguf_type type, std::size_t rows, std::size_t cols) {
    return add(name, type, rows, cols, 0.0f, std::sqrt(3.0f / static_cast<float>(cols)));
  };
  const auto norm = [&](const std::string& name) {
    return add(name, name == s.defects.f16_norm ? quant::gguf_type::f16 : quant::gguf_type::f32, 0, s.dim, 1.0f, 0.1f);
  };
  const std::size_t kv_dim = std::size_t{s.dim} / s.heads * s.kv_heads;
  HEDGE_TRY(add("token_embd.weight", s.embedding, s.vocab, s.dim, 0.0f, std::sqrt(3.0f)));
  for (std::uint32_t l = 0; l < s.layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    HEDGE_TRY(norm(blk + "attn_norm.weight"));
    HEDGE_TRY(matrix(blk + "attn_q.weight", s.attention, s.dim, s.dim));
    HEDGE_TRY(matrix(blk + "attn_k.weight", s.attention, kv_dim, s.dim));
    HEDGE_TRY(matrix(blk + "attn_v.weight", s.value, kv_dim, s.dim));
    HEDGE_TRY(matrix(blk + "attn_output.weight", s.attention, s.dim, s.dim));
    HEDGE_TRY(norm(blk + "ffn_norm.weight"));
    HEDGE_TRY(matrix(blk + "ffn_gate.weight", s.gate_up, s.hidden_dim, s.dim));
    HEDGE_TRY(matrix(blk + "ffn_up.weight", s.gate_up, s.hidden_dim, s.dim));
    HEDGE_TRY(matrix(blk + "ffn_down.weight", s.down, s.dim, s.hidden_dim));
  }
  HEDGE_TRY(norm("output_norm.weight"));
  if (!s.shared_classifier) HEDGE_TRY(matrix("output.weight", s.output, s.vocab, s.dim));
  return ok();
}

}  // namespace hedge::model
