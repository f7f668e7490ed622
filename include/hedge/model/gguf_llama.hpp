// hedge/model/gguf_llama.hpp: the llama hyperparameters of a GGUF file (model/config.hpp's
// llama_config from the `llama.*` keys).
//
// Keys, and the default where a key is absent (llama.cpp's, from llama-model.cpp's
// hparams loading for LLM_ARCH_LLAMA):
//
//   general.architecture                    required, must be "llama"
//   llama.embedding_length                  required                      -> dim
//   llama.feed_forward_length               required (or per-layer array) -> hidden_dim
//   llama.block_count                       required                      -> n_layers
//   llama.attention.head_count              required (or per-layer array) -> n_heads
//   llama.attention.head_count_kv           head_count (or per-layer)     -> n_kv_heads
//   llama.context_length                    required                      -> context_length
//   llama.rope.dimension_count              dim / head_count              -> rope_dim
//   llama.attention.layer_norm_rms_epsilon  1e-5                          -> norm_eps
//   llama.rope.freq_base                    10000                         -> rope_theta
//   llama.vocab_size                        tokenizer.ggml.tokens' count, else
//                                           token_embd.weight's dims[1]   -> vocab_size
//   llama.attention.key_length / value_length  must be dim / head_count where present
//   output.weight tensor absent             -> shared_classifier (llama.cpp ties it to token_embd)
//
// A per-layer array (llama.cpp's get_key_or_arr) has one entry per layer; hedge's config
// holds one value, so the entries must be equal. Integer keys take any integer type
// whose value fits (gguf_value::as_int); float keys float32 or float64.
#pragma once

#include <cstdint>
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

/// The llama hyperparameters of `file` (keys and defaults in the file comment), checked
/// with llama_config::check() and against token_embd.weight's shape where it exists.
inline result<llama_config> read_llama_config(const gguf_file& file) noexcept {
  const auto architecture = file.find("general.architecture");
  if (!architecture) return detail::missing_key("general.architecture");
  const auto name = architecture->as_string();
  if (!name) return name.error();
  if (*name != "llama") {
    error e{errc::unsupported};
    e << "architecture ";
    return detail::append_name(e, *name) << " is not supported (llama is)";
  }

  llama_config c;
  const auto read_u32 = [&](std::string_view key, std::uint32_t& out) -> result<void> {
    const auto value = file.find(key);
    if (!value) return detail::missing_key(key);
    auto v = value->as_u32();
    if (!v) return v.error();
    out = *v;
    return ok();
  };
  HEDGE_TRY(read_u32("llama.embedding_length", c.dim));
  HEDGE_TRY(read_u32("llama.block_count", c.n_layers));
  HEDGE_TRY(read_u32("llama.context_length", c.context_length));
  auto hidden = detail::read_layer_u32(file, "llama.feed_forward_length", c.n_layers, std::nullopt);
  if (!hidden) return hidden.error();
  c.hidden_dim = *hidden;
  auto heads = detail::read_layer_u32(file, "llama.attention.head_count", c.n_layers, std::nullopt);
  if (!heads) return heads.error();
  c.n_heads = *heads;
  auto kv_heads = detail::read_layer_u32(file, "llama.attention.head_count_kv", c.n_layers, c.n_heads);
  if (!kv_heads) return kv_heads.error();
  c.n_kv_heads = *kv_heads;

  for (std::string_view key : {"llama.attention.key_length", "llama.attention.value_length"}) {
    if (const auto value = file.find(key)) {
      auto v = value->as_u32();
      if (!v) return v.error();
      if (*v != c.head_dim())
        return error{errc::unsupported} << "key " << key << " is " << *v << ", not dim / head_count ("
                                        << c.head_dim() << ")";
    }
  }
  if (const auto value = file.find("llama.rope.dimension_count")) {
    auto v = value->as_u32();
    if (!v) return v.error();
    c.rope_dim = *v;
  } else {
    c.rope_dim = c.head_dim();
  }
  auto eps = detail::read_f32(file, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
  if (!eps) return eps.error();
  c.norm_eps = *eps;
  auto theta = detail::read_f32(file, "llama.rope.freq_base", 10000.0f);
  if (!theta) return theta.error();
  c.rope_theta = *theta;

  const auto embedding = file.find_tensor("token_embd.weight");
  if (const auto value = file.find("llama.vocab_size")) {
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
  c.shared_classifier = !file.find_tensor("output.weight").has_value();
  HEDGE_TRY(c.check());
  return c;
}

}  // namespace hedge::model
