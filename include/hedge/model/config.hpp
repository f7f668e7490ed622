// hedge/model/config.hpp: the hyperparameters of a decoder-only transformer of the llama
// family, as llama2.c's `Config` states them, with the derived sizes the forward pass and
// the KV cache need, and the differences of the architectures hedge runs, each a named
// field the forward pass reads where it applies (model/forward.hpp).
//
// Both readers fill it: model/gguf_llama.hpp from the `<arch>.*` keys (with the defaults
// llama.cpp applies when a key is absent), model/llama2c.hpp from the checkpoint header.
// `check()` is the one place that says which shapes hedge runs.
//
// What differs between the architectures (llama.cpp's src/models/<arch>.cpp):
//
//   architecture  RoPE pairs  FFN         other
//   llama         adjacent    SwiGLU      rope_freqs per-pair factors (Llama 3.1+); tied output
//   smollm3       adjacent    SwiGLU      every 4th layer without RoPE
//   qwen2         NeoX        SwiGLU      Q/K/V biases
//   qwen3         NeoX        SwiGLU      RMSNorm over each Q and K head; head_dim from key_length
//   phi3          NeoX        SwiGLU      fused attn_qkv, ffn_up = gate|up; partial rotary;
//                                         LongRoPE short/long factors and attention factor
//   gemma2        NeoX        GeGLU(tanh) embedding x sqrt(dim); post-attention and post-FFN
//                                         norms; attention and final logit soft-capping;
//                                         every other layer local (sliding window)
//   gemma3        NeoX        GeGLU(tanh) as gemma2 without soft-capping by default, Q/K head
//                                         norms, 5 local layers in 6 with their own RoPE base
#pragma once

#include <cstdint>

#include "hedge/core/result.hpp"
#include "hedge/kernels/rope.hpp"

namespace hedge::model {

/// The architectures hedge runs (GGUF general.architecture).
enum class model_architecture : std::uint8_t { llama, smollm3, qwen2, qwen3, phi3, gemma2, gemma3 };

/// The feed-forward block's gate activation: act(gate) * up.
enum class ffn_activation : std::uint8_t {
  silu,       ///< SwiGLU (Shazeer 2020)
  gelu_tanh,  ///< GeGLU with GELU's tanh approximation (Gemma)
};

/// Largest context hedge sizes a cache for: 2^24 positions, above every trained context
/// (Llama 4 Scout's 10M), so a file's context_length cannot size an allocation by itself.
inline constexpr std::uint32_t max_context_length = 1u << 24;

/// Hyperparameters of a llama-family decoder (GGUF key in brackets, `<arch>.` omitted).
struct llama_config {
  std::uint32_t dim = 0;             ///< embedding width [embedding_length]
  std::uint32_t hidden_dim = 0;      ///< feed-forward width [feed_forward_length]
  std::uint32_t n_layers = 0;        ///< decoder blocks [block_count]
  std::uint32_t n_heads = 0;         ///< query heads [attention.head_count]
  std::uint32_t n_kv_heads = 0;      ///< key/value heads [attention.head_count_kv; default n_heads]
  std::uint32_t vocab_size = 0;      ///< tokens [vocab_size; default the tokenizer's piece count]
  std::uint32_t context_length = 0;  ///< trained context [context_length]
  std::uint32_t rope_dim = 0;        ///< rotated dimensions per head [rope.dimension_count; default head_dim]
  std::uint32_t head_size = 0;       ///< q/k/v width per head [attention.key_length]; 0: dim / n_heads
  float norm_eps = 1e-5f;            ///< RMSNorm epsilon [attention.layer_norm_rms_epsilon]
  float rope_theta = 10000.0f;       ///< RoPE base frequency [rope.freq_base]
  bool shared_classifier = false;    ///< the output classifier is the token embedding

  model_architecture architecture = model_architecture::llama;
  kernels::rope_layout rope_layout = kernels::rope_layout::adjacent_pairs;
  ffn_activation activation = ffn_activation::silu;
  bool qkv_bias = false;              ///< Q, K, V projections add a bias (qwen2)
  bool qk_norm = false;               ///< RMSNorm of width head_dim over each Q and K head before RoPE (qwen3, gemma3)
  bool post_norms = false;            ///< RMSNorm of the attention and FFN outputs before the residual add (gemma)
  float embedding_scale = 1.0f;       ///< multiplies the embedding row (gemma: sqrt(dim))
  float attention_scale = 0.0f;       ///< multiplies q.k; 0: 1 / sqrt(head_dim)
  float attention_softcap = 0.0f;     ///< c tanh(s / c) on attention logits; 0: none [attn_logit_softcapping]
  float final_softcap = 0.0f;         ///< the same on the output logits [final_logit_softcapping]
  std::uint32_t sliding_window = 0;   ///< keys a local layer sees [attention.sliding_window]; 0: none
  std::uint32_t sliding_pattern = 0;  ///< layer l is local when l % pattern < pattern - 1; 0: none
  float rope_theta_local = 0.0f;      ///< RoPE base of local layers [rope.freq_base_swa]; 0: rope_theta
  float rope_scale = 1.0f;            ///< position multiplier (1 / [rope.scaling.factor])
  float rope_scale_local = 1.0f;      ///< position multiplier of local layers (gemma2: rope_scale; gemma3: 1)
  float rope_attention_factor = 1.0f; ///< multiplies RoPE's cos and sin [rope.scaling.attn_factor] (Phi-3 LongRoPE)
  std::uint32_t rope_original_context = 0;  ///< [rope.scaling.original_context_length]; 0: context_length
  std::uint32_t no_rope_interval = 0; ///< layer l has no RoPE when (l + 1) % interval == 0 (smollm3: 4); 0: none

  [[nodiscard]] constexpr std::uint32_t head_dim() const noexcept {
    return head_size != 0 ? head_size : n_heads == 0 ? 0 : dim / n_heads;
  }
  /// Width of all query heads (dim unless key_length says otherwise).
  [[nodiscard]] constexpr std::uint32_t q_dim() const noexcept { return n_heads * head_dim(); }
  [[nodiscard]] constexpr std::uint32_t kv_dim() const noexcept { return n_kv_heads * head_dim(); }
  /// Query heads per key/value head (grouped-query attention).
  [[nodiscard]] constexpr std::uint32_t group_size() const noexcept {
    return n_kv_heads == 0 ? 0 : n_heads / n_kv_heads;
  }
  /// Whether layer l attends to the last sliding_window positions only.
  [[nodiscard]] constexpr bool local_layer(std::uint32_t l) const noexcept {
    return sliding_window != 0 && sliding_pattern != 0 && l % sliding_pattern < sliding_pattern - 1;
  }
  /// Whether layer l rotates Q and K.
  [[nodiscard]] constexpr bool rotary_layer(std::uint32_t l) const noexcept {
    return no_rope_interval == 0 || (l + 1) % no_rope_interval != 0;
  }
  /// Whether any layer is local (the forward pass keeps a second RoPE table for them).
  [[nodiscard]] constexpr bool has_local_layers() const noexcept { return sliding_window != 0 && sliding_pattern > 1; }

  /// Whether the shape is one hedge runs: every size positive, key/value heads dividing
  /// the heads, an even rotated part within each head, a context of at most
  /// max_context_length, finite positive scales.
  [[nodiscard]] constexpr result<void> check() const noexcept {
    if (dim == 0 || hidden_dim == 0 || n_layers == 0 || n_heads == 0 || n_kv_heads == 0 || vocab_size == 0 ||
        context_length == 0)
      return error{errc::invalid_argument} << "model shape has a zero size (dim " << dim << ", hidden_dim " << hidden_dim
                                           << ", layers " << n_layers << ", heads " << n_heads << ", kv heads "
                                           << n_kv_heads << ", vocab " << vocab_size << ", context " << context_length
                                           << ")";
    if (head_size == 0 && dim % n_heads != 0)
      return error{errc::invalid_argument} << "dim " << dim << " is not a multiple of the head count " << n_heads;
    // Query widths run to about twice the model's (Gemma 3 27B: 32 x 128 in 5376, Qwen3-4B:
    // 32 x 128 in 2560): at most 16 times, and within the 32 bits of q_dim().
    if (n_heads > dim || (head_size != 0 && head_size > dim) ||
        std::uint64_t{n_heads} * head_dim() > 16 * std::uint64_t{dim} ||
        std::uint64_t{n_heads} * head_dim() > std::uint64_t{0xffffffffu})
      return error{errc::invalid_argument} << n_heads << " heads of " << head_dim() << " for a width of " << dim;
    if (n_heads % n_kv_heads != 0)
      return error{errc::invalid_argument} << "head count " << n_heads << " is not a multiple of the kv head count "
                                           << n_kv_heads;
    if (context_length > max_context_length)
      return error{errc::invalid_argument} << "context length " << context_length << " above the "
                                           << max_context_length << " positions hedge sizes a cache for";
    if (rope_dim == 0 || rope_dim > head_dim() || rope_dim % 2 != 0)
      return error{errc::invalid_argument} << "rope dimension " << rope_dim << " is not even and within the head ("
                                           << head_dim() << ")";
    if (!(norm_eps > 0.0f && norm_eps < 1.0f))
      return error{errc::invalid_argument} << "RMSNorm epsilon " << norm_eps << " outside (0, 1)";
    for (const float base : {rope_theta, rope_theta_local == 0.0f ? rope_theta : rope_theta_local})
      if (!(base > 0.0f && base < 1e30f))
        return error{errc::invalid_argument} << "RoPE base " << base << " is not a positive finite number";
    for (const float scale : {embedding_scale, rope_scale, rope_scale_local, rope_attention_factor})
      if (!(scale > 0.0f && scale < 1e30f))
        return error{errc::invalid_argument} << "scale " << scale << " is not a positive finite number";
    for (const float scale : {attention_scale, attention_softcap, final_softcap})
      if (!(scale >= 0.0f && scale < 1e30f))
        return error{errc::invalid_argument} << "attention scale or soft-cap " << scale
                                             << " is not a non-negative finite number";
    if (sliding_window != 0 && sliding_pattern == 0)
      return error{errc::invalid_argument} << "a sliding window of " << sliding_window << " with no layer pattern";
    return ok();
  }
};

}  // namespace hedge::model
