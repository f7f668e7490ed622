// hedge/model/synthetic_llama.hpp: a random checkpoint of one of the architectures hedge
// runs (model/config.hpp) added to a GGUF writer: the general.* and <arch>.* keys and every
// tensor the architecture has (its biases, Q/K norms, post-block norms, fused Phi-3
// projections, RoPE factors), each matrix in the type asked for. The caller adds
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
#include "hedge/model/gguf_llama.hpp"
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

  /// general.architecture (config.hpp's list): the keys are `<architecture>.*`, and the
  /// tensors those the architecture has (gguf_llama.hpp's apply_architecture).
  std::string architecture = "llama";
  std::uint32_t head_dim = 0;        ///< attention.key_length and value_length; 0: keys absent (dim / heads)
  float rope_theta = 10000.0f;       ///< rope.freq_base
  float rope_scaling = 0.0f;         ///< rope.scaling.factor (linear); 0: key absent
  bool rope_factors = false;         ///< rope_freqs.weight (Phi-3: rope_factors_long/short and attn_factor)
  std::uint32_t sliding_window = 0;  ///< attention.sliding_window; 0: key absent
  std::uint32_t sliding_pattern = 0; ///< attention.sliding_window_pattern; 0: key absent

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
    std::string extra_row;  ///< written with one row (a vector: one element) too many
    std::string f16_norm;   ///< a norm written as F16
    std::uint32_t block_count = 0;  ///< written as <arch>.block_count instead of `layers`; 0: none
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
  const detail::architecture_entry* entry = nullptr;
  for (const auto& a : detail::architectures)
    if (a.name == s.architecture) entry = &a;
  if (entry == nullptr)
    return error{errc::invalid_argument} << "a synthetic " << s.architecture << ": no such architecture";
  llama_config traits;
  detail::apply_architecture(entry->architecture, traits);
  const bool phi3 = entry->architecture == model_architecture::phi3;
  const bool shared = s.shared_classifier || entry->architecture == model_architecture::gemma2;

  const std::string arch = s.architecture;
  const auto key = [&](const char* suffix) { return arch + "." + suffix; };
  w.add("general.architecture", std::string_view(arch)).add("general.name", std::string_view(s.name));
  w.add("general.file_type", detail::llama_file_type(s.attention));
  w.add("general.quantization_version", std::uint32_t{2});
  w.add(key("context_length"), s.context).add(key("embedding_length"), s.dim);
  w.add(key("block_count"), s.defects.block_count != 0 ? s.defects.block_count : s.layers);
  w.add(key("feed_forward_length"), s.hidden_dim);
  w.add(key("attention.head_count"), s.heads).add(key("attention.head_count_kv"), s.kv_heads);
  if (s.head_dim != 0) w.add(key("attention.key_length"), s.head_dim).add(key("attention.value_length"), s.head_dim);
  if (s.rope_dim != 0) w.add(key("rope.dimension_count"), s.rope_dim);
  w.add(key("rope.freq_base"), s.rope_theta).add(key("attention.layer_norm_rms_epsilon"), 1e-5f);
  if (s.rope_scaling != 0.0f) w.add(key("rope.scaling.type"), "linear").add(key("rope.scaling.factor"), s.rope_scaling);
  if (s.sliding_window != 0) w.add(key("attention.sliding_window"), s.sliding_window);
  if (s.sliding_pattern != 0) w.add(key("attention.sliding_window_pattern"), s.sliding_pattern);
  if (s.rope_factors && phi3)  // as llama.cpp's converter writes Phi-3.5's
    w.add(key("rope.scaling.type"), "longrope")
        .add(key("rope.scaling.attn_factor"), 1.19f)
        .add(key("rope.scaling.original_context_length"), s.context / 2);

  std::uint64_t tensor = 0;
  // A vector when rows is 0: one row of cols values, written 1-D.
  const auto add = [&](const std::string& name, quant::gguf_type type, std::size_t rows, std::size_t cols,
                       float center, float half_width) -> result<void> {
    ++tensor;
    if (name == s.defects.missing) return ok();
    if (name == s.defects.extra_row) ++(rows == 0 ? cols : rows);  // a vector gets one more element
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
  const auto norm_of = [&](const std::string& name, std::size_t size) {
    return add(name, name == s.defects.f16_norm ? quant::gguf_type::f16 : quant::gguf_type::f32, 0, size, 1.0f, 0.1f);
  };
  const auto norm = [&](const std::string& name) { return norm_of(name, s.dim); };
  // Biases of the scale of the projections' outputs; RoPE factors in [1, 4] (Llama 3.1's
  // run from 1 to 8), so every pair's frequency moves.
  const auto bias = [&](const std::string& name, std::size_t size) {
    return add(name, quant::gguf_type::f32, 0, size, 0.0f, 0.5f);
  };
  const std::size_t head = s.head_dim != 0 ? s.head_dim : s.dim / s.heads;
  const std::size_t q_dim = head * s.heads, kv_dim = head * s.kv_heads;
  const std::size_t rope_pairs = (s.rope_dim != 0 ? s.rope_dim : head) / 2;
  HEDGE_TRY(add("token_embd.weight", s.embedding, s.vocab, s.dim, 0.0f, std::sqrt(3.0f)));
  if (s.rope_factors && phi3) {
    HEDGE_TRY(add("rope_factors_long.weight", quant::gguf_type::f32, 0, rope_pairs, 2.5f, 1.5f));
    HEDGE_TRY(add("rope_factors_short.weight", quant::gguf_type::f32, 0, rope_pairs, 2.5f, 1.5f));
  } else if (s.rope_factors) {
    HEDGE_TRY(add("rope_freqs.weight", quant::gguf_type::f32, 0, rope_pairs, 2.5f, 1.5f));
  }
  for (std::uint32_t l = 0; l < s.layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    HEDGE_TRY(norm(blk + "attn_norm.weight"));
    if (phi3) {
      HEDGE_TRY(matrix(blk + "attn_qkv.weight", s.attention, q_dim + 2 * kv_dim, s.dim));
    } else {
      HEDGE_TRY(matrix(blk + "attn_q.weight", s.attention, q_dim, s.dim));
      HEDGE_TRY(matrix(blk + "attn_k.weight", s.attention, kv_dim, s.dim));
      HEDGE_TRY(matrix(blk + "attn_v.weight", s.value, kv_dim, s.dim));
    }
    if (traits.qkv_bias) {
      HEDGE_TRY(bias(blk + "attn_q.bias", q_dim));
      HEDGE_TRY(bias(blk + "attn_k.bias", kv_dim));
      HEDGE_TRY(bias(blk + "attn_v.bias", kv_dim));
    }
    if (traits.qk_norm) {
      HEDGE_TRY(norm_of(blk + "attn_q_norm.weight", head));
      HEDGE_TRY(norm_of(blk + "attn_k_norm.weight", head));
    }
    HEDGE_TRY(matrix(blk + "attn_output.weight", s.attention, s.dim, q_dim));
    if (traits.post_norms) HEDGE_TRY(norm(blk + "post_attention_norm.weight"));
    HEDGE_TRY(norm(blk + "ffn_norm.weight"));
    if (phi3) {
      HEDGE_TRY(matrix(blk + "ffn_up.weight", s.gate_up, 2 * std::size_t{s.hidden_dim}, s.dim));
    } else {
      HEDGE_TRY(matrix(blk + "ffn_gate.weight", s.gate_up, s.hidden_dim, s.dim));
      HEDGE_TRY(matrix(blk + "ffn_up.weight", s.gate_up, s.hidden_dim, s.dim));
    }
    HEDGE_TRY(matrix(blk + "ffn_down.weight", s.down, s.dim, s.hidden_dim));
    if (traits.post_norms) HEDGE_TRY(norm(blk + "post_ffw_norm.weight"));
  }
  HEDGE_TRY(norm("output_norm.weight"));
  if (!shared) HEDGE_TRY(matrix("output.weight", s.output, s.vocab, s.dim));
  return ok();
}

}  // namespace hedge::model
