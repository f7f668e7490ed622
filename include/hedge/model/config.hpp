// hedge/model/config.hpp: the hyperparameters of a llama model, as llama2.c's `Config`
// states them, with the derived sizes the forward pass and the KV cache need.
//
// Both readers fill it: model/gguf.hpp from the `llama.*` keys (with the defaults llama.cpp
// applies when a key is absent), model/llama2c.hpp from the checkpoint header. `check()`
// is the one place that says which shapes hedge runs.
#pragma once

#include <cstdint>

#include "hedge/core/result.hpp"

namespace hedge::model {

/// Hyperparameters of a llama decoder (GGUF key in brackets).
struct llama_config {
  std::uint32_t dim = 0;             ///< embedding width [llama.embedding_length]
  std::uint32_t hidden_dim = 0;      ///< feed-forward width [llama.feed_forward_length]
  std::uint32_t n_layers = 0;        ///< decoder blocks [llama.block_count]
  std::uint32_t n_heads = 0;         ///< query heads [llama.attention.head_count]
  std::uint32_t n_kv_heads = 0;      ///< key/value heads [llama.attention.head_count_kv; default n_heads]
  std::uint32_t vocab_size = 0;      ///< tokens [llama.vocab_size; default the tokenizer's piece count]
  std::uint32_t context_length = 0;  ///< trained context [llama.context_length]
  std::uint32_t rope_dim = 0;        ///< rotated dimensions per head [llama.rope.dimension_count; default head_dim]
  float norm_eps = 1e-5f;            ///< RMSNorm epsilon [llama.attention.layer_norm_rms_epsilon]
  float rope_theta = 10000.0f;       ///< RoPE base frequency [llama.rope.freq_base]
  bool shared_classifier = false;    ///< the output classifier is the token embedding

  [[nodiscard]] constexpr std::uint32_t head_dim() const noexcept { return n_heads == 0 ? 0 : dim / n_heads; }
  [[nodiscard]] constexpr std::uint32_t kv_dim() const noexcept { return n_kv_heads * head_dim(); }
  /// Query heads per key/value head (grouped-query attention).
  [[nodiscard]] constexpr std::uint32_t group_size() const noexcept {
    return n_kv_heads == 0 ? 0 : n_heads / n_kv_heads;
  }

  /// Whether the shape is one hedge runs: every size positive, heads dividing the width,
  /// key/value heads dividing the heads, an even rotated part within each head.
  [[nodiscard]] constexpr result<void> check() const noexcept {
    if (dim == 0 || hidden_dim == 0 || n_layers == 0 || n_heads == 0 || n_kv_heads == 0 || vocab_size == 0 ||
        context_length == 0)
      return error{errc::invalid_argument} << "model shape has a zero size (dim " << dim << ", hidden_dim " << hidden_dim
                                           << ", layers " << n_layers << ", heads " << n_heads << ", kv heads "
                                           << n_kv_heads << ", vocab " << vocab_size << ", context " << context_length
                                           << ")";
    if (dim % n_heads != 0)
      return error{errc::invalid_argument} << "dim " << dim << " is not a multiple of the head count " << n_heads;
    if (n_heads % n_kv_heads != 0)
      return error{errc::invalid_argument} << "head count " << n_heads << " is not a multiple of the kv head count "
                                           << n_kv_heads;
    if (rope_dim == 0 || rope_dim > head_dim() || rope_dim % 2 != 0)
      return error{errc::invalid_argument} << "rope dimension " << rope_dim << " is not even and within the head ("
                                           << head_dim() << ")";
    if (!(norm_eps > 0.0f && norm_eps < 1.0f))
      return error{errc::invalid_argument} << "RMSNorm epsilon " << norm_eps << " outside (0, 1)";
    if (!(rope_theta > 0.0f && rope_theta < 1e30f))
      return error{errc::invalid_argument} << "RoPE base " << rope_theta << " is not a positive finite number";
    return ok();
  }
};

}  // namespace hedge::model
