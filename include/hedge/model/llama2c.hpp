// hedge/model/llama2c.hpp: llama2.c checkpoints (karpathy/llama2.c: run.c reads them,
// export.py writes them), read in place: the weights are views of the file's bytes.
//
// Layouts (little-endian; every weight float32, a matrix stored row-major as
// [out][in], as run.c's matmul reads it; L layers, kv_dim = n_kv_heads * dim / n_heads):
//
//   v0, legacy (run.c): 7 int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads,
//     vocab_size, seq_len}; a negative vocab_size says the classifier is stored apart
//     (the sign rule), a positive one that it is the token embedding. Then
//       token_embedding[vocab][dim], rms_att[L][dim], wq[L][dim][dim], wk[L][kv_dim][dim],
//       wv[L][kv_dim][dim], wo[L][dim][dim], rms_ffn[L][dim], w1[L][hidden][dim],
//       w2[L][dim][hidden], w3[L][hidden][dim], rms_final[dim],
//       freq_cis_real[seq_len][head_dim / 2], freq_cis_imag[seq_len][head_dim / 2] (unused:
//       RoPE is computed), and wcls[vocab][dim] when not shared.
//   v1 (export.py version1_export): uint32 magic 0x616b3432 ("ak42"), int32 version 1,
//     the 7 int32, uint8 shared_classifier, zeros to byte 256. Then rms_att, rms_ffn,
//     rms_final, token_embedding, wq, wk, wv, wo, w1, w2, w3, and wcls when not shared.
//   v2 (int8 groups, export.py version2_export) is refused by name: its weights are int8
//     arrays with separate scale arrays, not ggml blocks.
//
// The file must be exactly as long as its header says (a shorter one is truncated, a longer
// one is not a llama2.c checkpoint), and the buffer 4-byte aligned so its floats are read in
// place (a mapped file is). Hyperparameters the format does not store are run.c's:
// RMSNorm epsilon 1e-5, RoPE base 10000 over the whole head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/model/config.hpp"

namespace hedge::model {

/// One decoder layer's weights (matrices [out][in]).
struct llama2c_layer {
  vector_view<const float> rms_att, rms_ffn;
  matrix_view<const float> wq, wk, wv, wo, w1, w2, w3;
};

/// A parsed llama2.c checkpoint: its config and views of its weights.
class llama2c_checkpoint {
 public:
  /// Parses and validates the whole checkpoint; the views point into `bytes`, which must
  /// outlive the result.
  static result<llama2c_checkpoint> parse(std::span<const std::byte> bytes) noexcept;

  [[nodiscard]] const llama_config& config() const noexcept { return config_; }
  /// 0 (legacy) or 1.
  [[nodiscard]] int version() const noexcept { return version_; }

  /// [vocab][dim]
  [[nodiscard]] matrix_view<const float> token_embedding() const noexcept {
    return {floats(token_embedding_), config_.vocab_size, config_.dim};
  }
  /// Layer l's weights, l < config().n_layers.
  [[nodiscard]] llama2c_layer layer(std::size_t l) const noexcept {
    const std::size_t dim = config_.dim, kv = config_.kv_dim(), hidden = config_.hidden_dim;
    return {vector_view<const float>(floats(rms_att_) + l * dim, dim),
            vector_view<const float>(floats(rms_ffn_) + l * dim, dim),
            {floats(wq_) + l * dim * dim, dim, dim},
            {floats(wk_) + l * kv * dim, kv, dim},
            {floats(wv_) + l * kv * dim, kv, dim},
            {floats(wo_) + l * dim * dim, dim, dim},
            {floats(w1_) + l * hidden * dim, hidden, dim},
            {floats(w2_) + l * dim * hidden, dim, hidden},
            {floats(w3_) + l * hidden * dim, hidden, dim}};
  }
  /// [dim]
  [[nodiscard]] vector_view<const float> rms_final() const noexcept { return {floats(rms_final_), config_.dim}; }
  /// [vocab][dim]: the token embedding itself when the classifier is shared.
  [[nodiscard]] matrix_view<const float> classifier() const noexcept {
    return {floats(config_.shared_classifier ? token_embedding_ : classifier_), config_.vocab_size, config_.dim};
  }

  static constexpr std::uint32_t magic = 0x616b3432;  // "ak42", little-endian
  static constexpr std::size_t v0_header_bytes = 7 * 4;
  static constexpr std::size_t v1_header_bytes = 256;

 private:
  const float* floats(std::size_t offset) const noexcept {
    return reinterpret_cast<const float*>(bytes_.data() + offset);
  }

  std::span<const std::byte> bytes_;
  llama_config config_;
  int version_ = 0;
  // Byte offsets of the weights in bytes_.
  std::size_t token_embedding_ = 0, rms_att_ = 0, rms_ffn_ = 0, wq_ = 0, wk_ = 0, wv_ = 0, wo_ = 0, w1_ = 0, w2_ = 0,
              w3_ = 0, rms_final_ = 0, classifier_ = 0;
};

namespace detail {

inline std::int32_t read_i32(std::span<const std::byte> bytes, std::size_t offset) noexcept {
  std::int32_t v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

/// Lays out consecutive float32 arrays, each `count` floats, in 64-bit arithmetic (a 32-bit
/// target's size_t cannot hold a lying header's sizes), failing past `limit` floats in all.
struct llama2c_layout {
  std::uint64_t offset;  ///< byte offset of the next array
  bool overflow = false;
  static constexpr std::uint64_t limit = std::uint64_t{1} << 40;  // 4 TiB of floats: no real checkpoint is near

  std::size_t take(std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) noexcept {
    const auto at = static_cast<std::size_t>(offset);
    // Each factor is below 2^31 (checked ints): a * b < 2^62; the product with c is checked.
    const std::uint64_t ab = a * b;
    if (overflow || ab > limit / c || ab * c * sizeof(float) > limit * sizeof(float) - offset) {
      overflow = true;
      return at;
    }
    offset += ab * c * sizeof(float);
    return at;
  }
};

}  // namespace detail

inline result<llama2c_checkpoint> llama2c_checkpoint::parse(std::span<const std::byte> bytes) noexcept {
  llama2c_checkpoint c;
  c.bytes_ = bytes;
  if (bytes.size() < v0_header_bytes)
    return error{errc::parse_error} << "llama2.c checkpoint: " << bytes.size() << " bytes, shorter than the "
                                    << v0_header_bytes << "-byte header";
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(float) != 0)
    return error{errc::misaligned} << "llama2.c checkpoint: the buffer is not 4-byte aligned (its floats are read in place)";
  std::size_t fields = 0;  // byte offset of the 7 config ints
  bool shared = false;
  if (static_cast<std::uint32_t>(detail::read_i32(bytes, 0)) == magic) {
    const std::int32_t version = detail::read_i32(bytes, 4);
    if (version == 2)
      return error{errc::unsupported} << "llama2.c checkpoint: version 2 (int8 groups) is not supported; export version 0 "
                                         "or 1, or convert to GGUF";
    if (version != 1)
      return error{errc::unsupported} << "llama2.c checkpoint: unknown version " << version << " at byte 4";
    if (bytes.size() < v1_header_bytes)
      return error{errc::parse_error} << "llama2.c checkpoint: " << bytes.size() << " bytes, shorter than the "
                                      << v1_header_bytes << "-byte version 1 header";
    const auto flag = static_cast<std::uint8_t>(bytes[36]);
    if (flag > 1)
      return error{errc::parse_error} << "llama2.c checkpoint: shared_classifier flag " << flag << " at byte 36 is not 0 or 1";
    shared = flag == 1;
    c.version_ = 1;
    fields = 8;
  }
  constexpr const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  std::int32_t v[7];
  for (std::size_t k = 0; k < 7; ++k) {
    v[k] = detail::read_i32(bytes, fields + 4 * k);
    // The sign rule: a legacy file's negative vocab_size marks an unshared classifier.
    if (k == 5 && c.version_ == 0) {
      shared = v[k] > 0;
      if (v[k] < 0 && v[k] != INT32_MIN) v[k] = -v[k];
    }
    if (v[k] <= 0)
      return error{errc::parse_error} << "llama2.c checkpoint: " << names[k] << " " << v[k] << " at byte "
                                      << fields + 4 * k << " is not positive";
  }
  auto& cfg = c.config_;
  cfg.dim = static_cast<std::uint32_t>(v[0]);
  cfg.hidden_dim = static_cast<std::uint32_t>(v[1]);
  cfg.n_layers = static_cast<std::uint32_t>(v[2]);
  cfg.n_heads = static_cast<std::uint32_t>(v[3]);
  cfg.n_kv_heads = static_cast<std::uint32_t>(v[4]);
  cfg.vocab_size = static_cast<std::uint32_t>(v[5]);
  cfg.context_length = static_cast<std::uint32_t>(v[6]);
  cfg.rope_dim = cfg.head_dim();
  cfg.shared_classifier = shared;
  if (auto shape = cfg.check(); !shape) return error{errc::parse_error} << "llama2.c checkpoint: " << shape.error().message();

  const std::uint64_t dim = cfg.dim, hidden = cfg.hidden_dim, layers = cfg.n_layers, vocab = cfg.vocab_size,
                      kv = cfg.kv_dim(), seq = cfg.context_length, half_head = cfg.head_dim() / 2;
  detail::llama2c_layout at{c.version_ == 0 ? v0_header_bytes : v1_header_bytes};
  if (c.version_ == 0) {
    c.token_embedding_ = at.take(vocab, dim);
    c.rms_att_ = at.take(layers, dim);
    c.wq_ = at.take(layers, dim, dim);
    c.wk_ = at.take(layers, kv, dim);
    c.wv_ = at.take(layers, kv, dim);
    c.wo_ = at.take(layers, dim, dim);
    c.rms_ffn_ = at.take(layers, dim);
    c.w1_ = at.take(layers, hidden, dim);
    c.w2_ = at.take(layers, dim, hidden);
    c.w3_ = at.take(layers, hidden, dim);
    c.rms_final_ = at.take(dim);
    at.take(2, seq, half_head);  // freq_cis_real, freq_cis_imag
  } else {
    c.rms_att_ = at.take(layers, dim);
    c.rms_ffn_ = at.take(layers, dim);
    c.rms_final_ = at.take(dim);
    c.token_embedding_ = at.take(vocab, dim);
    c.wq_ = at.take(layers, dim, dim);
    c.wk_ = at.take(layers, kv, dim);
    c.wv_ = at.take(layers, kv, dim);
    c.wo_ = at.take(layers, dim, dim);
    c.w1_ = at.take(layers, hidden, dim);
    c.w2_ = at.take(layers, dim, hidden);
    c.w3_ = at.take(layers, hidden, dim);
  }
  if (!shared) c.classifier_ = at.take(vocab, dim);
  if (at.overflow)
    return error{errc::parse_error} << "llama2.c checkpoint: the header's shape (dim " << dim << ", hidden_dim " << hidden
                                    << ", layers " << layers << ", vocab " << vocab << ") needs more than "
                                    << detail::llama2c_layout::limit << " floats";
  if (at.offset != static_cast<std::uint64_t>(bytes.size()))
    return error{errc::parse_error} << "llama2.c checkpoint: " << bytes.size() << " bytes, but a version " << c.version_
                                    << " file of this shape has " << at.offset << " (" << (shared ? "shared" : "separate")
                                    << " classifier)" << (bytes.size() < at.offset ? ": truncated" : "");
  return c;
}

}  // namespace hedge::model
