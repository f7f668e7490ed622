// hedge/model/gguf_llama.hpp: the hyperparameters of a GGUF file (model/config.hpp's
// llama_config from the `<arch>.*` keys, <arch> the file's general.architecture).
//
// Keys, and the default where a key is absent (llama.cpp's, from llama-model.cpp's
// hparams loading and src/models/<arch>.cpp):
//
//   general.architecture                    required: llama, smollm3, qwen2, qwen3, phi3,
//                                           gemma2 or gemma3 (any other is refused by name)
//   <arch>.embedding_length                 required                      -> dim
//   <arch>.feed_forward_length              required (or per-layer array) -> hidden_dim
//   <arch>.block_count                      required                      -> n_layers
//   <arch>.attention.head_count             required (or per-layer array) -> n_heads
//   <arch>.attention.head_count_kv          head_count (or per-layer)     -> n_kv_heads
//   <arch>.context_length                   required                      -> context_length
//   <arch>.attention.key_length             dim / head_count              -> head_size
//   <arch>.attention.value_length           key_length (hedge needs them equal)
//   <arch>.rope.dimension_count             key_length                    -> rope_dim
//   <arch>.attention.layer_norm_rms_epsilon 1e-5                          -> norm_eps
//   <arch>.rope.freq_base                   10000                         -> rope_theta
//   <arch>.rope.scaling.type                linear (none, linear and longrope run; yarn and others are refused)
//   <arch>.rope.scaling.factor              1                             -> 1 / rope_scale
//   <arch>.rope.scaling.attn_factor         1                             -> rope_attention_factor
//   <arch>.rope.scaling.original_context_length  context_length         -> rope_original_context
//   <arch>.attention.sliding_window         gemma2: 4096; gemma3: none    -> sliding_window
//   <arch>.attention.sliding_window_pattern gemma2: 2; gemma3: 6          -> sliding_pattern
//   <arch>.rope.freq_base_swa               gemma2: freq_base; gemma3: 10000 -> rope_theta_local
//   <arch>.attn_logit_softcapping           gemma2: 50                    -> attention_softcap
//   <arch>.final_logit_softcapping          gemma2: 30; gemma3: 0         -> final_softcap
//   <arch>.vocab_size                       tokenizer.ggml.tokens' count, else
//                                           token_embd.weight's dims[1]   -> vocab_size
//   output.weight tensor absent             -> shared_classifier (llama.cpp ties it to token_embd;
//                                           gemma2 always does)
//
// What each architecture adds without a key (RoPE pairing, activation, biases, norms) is
// `apply_architecture`, one line per difference. A per-layer array (llama.cpp's
// get_key_or_arr) has one entry per layer; hedge's config holds one value, so the entries
// must be equal. Integer keys take any integer type whose value fits (gguf_value::as_int);
// float keys float32 or float64.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "hedge/core/result.hpp"
#include "hedge/model/config.hpp"
#include "hedge/model/gguf.hpp"

namespace hedge::model {

namespace detail {

inline error missing_key(std::string_view key) noexcept {
  return error{errc::parse_error} << "key " << key << " is missing";
}

/// A u32 key that may be a per-layer array of `layers` equal entries; `fallback` where
/// absent (none: the key is required).
inline result<std::uint32_t> read_layer_u32(const gguf_file& file, std::string_view key, std::uint32_t layers,
                                            std::optional<std::uint32_t> fallback) noexcept {
  const auto value = file.find(key);
  if (!value) {
    if (fallback) return *fallback;
    return missing_key(key);
  }
  if (!value->is_array()) return value->as_u32();
  if (value->size() != layers)
    return error{errc::parse_error} << "key " << key << " has " << value->size() << " entries, not one per layer ("
                                    << layers << ")";
  std::optional<std::uint32_t> first;
  for (const gguf_value entry : value->elements()) {
    auto v = entry.as_u32();
    if (!v) return v.error();
    if (first && *first != *v)
      return error{errc::unsupported} << "key " << key << " varies across layers (" << *first << ", " << *v << ")";
    first = *v;
  }
  return *first;
}

inline result<float> read_f32(const gguf_file& file, std::string_view key, float fallback) noexcept {
  const auto value = file.find(key);
  if (!value) return fallback;
  return value->as_f32();
}

}  // namespace detail

namespace detail {

/// An architecture hedge runs: its GGUF name and what it adds to a llama (config.hpp).
struct architecture_entry {
  std::string_view name;
  model_architecture architecture;
};

inline constexpr architecture_entry architectures[] = {
    {"llama", model_architecture::llama}, {"smollm3", model_architecture::smollm3},
    {"qwen2", model_architecture::qwen2}, {"qwen3", model_architecture::qwen3},
    {"phi3", model_architecture::phi3},   {"gemma2", model_architecture::gemma2},
    {"gemma3", model_architecture::gemma3},
};

/// The architecture's fixed differences from llama (those no key states).
constexpr void apply_architecture(model_architecture a, llama_config& c) noexcept {
  using enum model_architecture;
  const bool neox = a == qwen2 || a == qwen3 || a == phi3 || a == gemma2 || a == gemma3;
  c.architecture = a;
  c.rope_layout = neox ? kernels::rope_layout::neox_halves : kernels::rope_layout::adjacent_pairs;
  c.activation = a == gemma2 || a == gemma3 ? ffn_activation::gelu_tanh : ffn_activation::silu;
  c.qkv_bias = a == qwen2;
  c.qk_norm = a == qwen3 || a == gemma3;
  c.post_norms = a == gemma2 || a == gemma3;
  c.no_rope_interval = a == smollm3 ? 4 : 0;
}

}  // namespace detail

/// The hyperparameters of `file` (keys and defaults in the file comment), checked with
/// llama_config::check() and against token_embd.weight's shape where it exists.
inline result<llama_config> read_llama_config(const gguf_file& file) noexcept {
  const auto architecture = file.find("general.architecture");
  if (!architecture) return detail::missing_key("general.architecture");
  const auto name = architecture->as_string();
  if (!name) return name.error();
  const detail::architecture_entry* entry = nullptr;
  for (const auto& a : detail::architectures)
    if (a.name == *name) entry = &a;
  if (entry == nullptr) {
    error e{errc::unsupported};
    e << "architecture ";
    return detail::append_name(e, *name) << " is not supported (llama, smollm3, qwen2, qwen3, phi3, gemma2 and "
                                            "gemma3 are)";
  }
  using enum model_architecture;
  const model_architecture arch = entry->architecture;

  // "<arch>.<suffix>", for the keys below (the longest suffix is 40 characters).
  char key_buffer[96];
  const auto key = [&](std::string_view suffix) {
    const std::size_t n = entry->name.size();
    std::memcpy(key_buffer, entry->name.data(), n);
    key_buffer[n] = '.';
    std::memcpy(key_buffer + n + 1, suffix.data(), suffix.size());
    return std::string_view(key_buffer, n + 1 + suffix.size());
  };

  llama_config c;
  detail::apply_architecture(arch, c);
  const auto read_u32 = [&](std::string_view suffix, std::uint32_t& out, bool required) -> result<void> {
    const auto k = key(suffix);
    const auto value = file.find(k);
    if (!value) return required ? result<void>(detail::missing_key(k)) : ok();
    auto v = value->as_u32();
    if (!v) return error{v.error().code()} << "key " << k << ": " << v.error().message();
    out = *v;
    return ok();
  };
  const auto read_f32 = [&](std::string_view suffix, float& out) -> result<void> {
    const auto k = key(suffix);
    const auto value = file.find(k);
    if (!value) return ok();
    auto v = value->as_f32();
    if (!v) return error{v.error().code()} << "key " << k << ": " << v.error().message();
    out = *v;
    return ok();
  };
  const auto read_layer_u32 = [&](std::string_view suffix, std::optional<std::uint32_t> fallback,
                                  std::uint32_t& out) -> result<void> {
    auto v = detail::read_layer_u32(file, key(suffix), c.n_layers, fallback);
    if (!v) return v.error();
    out = *v;
    return ok();
  };
  HEDGE_TRY(read_u32("embedding_length", c.dim, true));
  HEDGE_TRY(read_u32("block_count", c.n_layers, true));
  HEDGE_TRY(read_u32("context_length", c.context_length, true));
  HEDGE_TRY(read_layer_u32("feed_forward_length", std::nullopt, c.hidden_dim));
  HEDGE_TRY(read_layer_u32("attention.head_count", std::nullopt, c.n_heads));
  HEDGE_TRY(read_layer_u32("attention.head_count_kv", c.n_heads, c.n_kv_heads));
  HEDGE_TRY(read_u32("attention.key_length", c.head_size, false));
  std::uint32_t value_length = c.head_dim();
  HEDGE_TRY(read_u32("attention.value_length", value_length, false));
  if (value_length != c.head_dim())
    return error{errc::unsupported} << "key " << key("attention.value_length") << " is " << value_length
                                    << ", not the key length (" << c.head_dim() << ")";
  c.rope_dim = c.head_dim();
  HEDGE_TRY(read_u32("rope.dimension_count", c.rope_dim, false));
  HEDGE_TRY(read_f32("attention.layer_norm_rms_epsilon", c.norm_eps));
  HEDGE_TRY(read_f32("rope.freq_base", c.rope_theta));

  if (const auto value = file.find(key("rope.scaling.type"))) {
    auto type = value->as_string();
    if (!type) return type.error();
    // longrope (Phi-3.5, Phi-4-mini) is linear scaling plus the rope_factors_* tensors.
    if (*type != "none" && *type != "linear" && *type != "longrope") {
      error e{errc::unsupported};
      e << "key " << key("rope.scaling.type") << " is ";
      return detail::append_name(e, *type) << ": RoPE scaling other than linear and longrope is not supported";
    }
  }
  float rope_factor = 0.0f;
  HEDGE_TRY(read_f32("rope.scaling.factor", rope_factor));
  if (rope_factor != 0.0f) c.rope_scale = 1.0f / rope_factor;
  HEDGE_TRY(read_f32("rope.scaling.attn_factor", c.rope_attention_factor));
  HEDGE_TRY(read_u32("rope.scaling.original_context_length", c.rope_original_context, false));

  if (arch == gemma2 || arch == gemma3) {
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    // Gemma's 27B models scale by dim / heads, the others by the head size (gemma_pytorch's config).
    const bool gemma_27b = c.n_layers == (arch == gemma2 ? 46u : 62u);
    c.attention_scale =
        1.0f / std::sqrt(static_cast<float>(gemma_27b && c.n_heads != 0 ? c.dim / c.n_heads : c.head_dim()));
    c.sliding_window = arch == gemma2 ? 4096 : 0;
    c.sliding_pattern = arch == gemma2 ? 2 : 6;
    HEDGE_TRY(read_u32("attention.sliding_window", c.sliding_window, false));
    if (const auto pattern = file.find(key("attention.sliding_window_pattern")); pattern && pattern->is_array())
      return error{errc::unsupported} << "key " << key("attention.sliding_window_pattern")
                                      << " as a per-layer array is not supported";
    HEDGE_TRY(read_u32("attention.sliding_window_pattern", c.sliding_pattern, false));
    if (c.sliding_window != 0 && c.sliding_pattern == 0)
      return error{errc::unsupported} << "key " << key("attention.sliding_window_pattern")
                                      << " is 0 (every layer local): not supported";
    c.rope_theta_local = arch == gemma2 ? c.rope_theta : 10000.0f;
    HEDGE_TRY(read_f32("rope.freq_base_swa", c.rope_theta_local));
    c.rope_scale_local = arch == gemma2 ? c.rope_scale : 1.0f;
    c.attention_softcap = arch == gemma2 ? 50.0f : 0.0f;
    c.final_softcap = arch == gemma2 ? 30.0f : 0.0f;
    if (arch == gemma2) HEDGE_TRY(read_f32("attn_logit_softcapping", c.attention_softcap));
    HEDGE_TRY(read_f32("final_logit_softcapping", c.final_softcap));
  }

  const auto embedding = file.find_tensor("token_embd.weight");
  if (const auto value = file.find(key("vocab_size"))) {
    auto v = value->as_u32();
    if (!v) return v.error();
    c.vocab_size = *v;
  } else if (const auto tokens = file.find("tokenizer.ggml.tokens")) {
    if (!tokens->is_array() || tokens->size() > std::numeric_limits<std::uint32_t>::max())
      return error{errc::parse_error} << "key tokenizer.ggml.tokens is not an array of at most 2^32 tokens";
    c.vocab_size = static_cast<std::uint32_t>(tokens->size());
  } else if (embedding && embedding->dims[1] <= std::numeric_limits<std::uint32_t>::max()) {
    c.vocab_size = static_cast<std::uint32_t>(embedding->dims[1]);
  }
  if (embedding && (embedding->n_dims != 2 || embedding->dims[0] != c.dim || embedding->dims[1] != c.vocab_size))
    return error{errc::shape_mismatch} << "tensor 'token_embd.weight' is " << embedding->dims[0] << "x"
                                       << embedding->rows() << ", not dim x vocab (" << c.dim << "x" << c.vocab_size
                                       << ")";
  c.shared_classifier = arch == gemma2 || !file.find_tensor("output.weight").has_value();
  HEDGE_TRY(c.check());
  return c;
}

}  // namespace hedge::model
