// hedge/model/forward.hpp: the llama forward pass on hedge's kernels, and sessions that
// share one model.
//
// `decode` runs one token through the model, as llama2.c's forward() does, top to bottom:
//   x = embedding[token]
//   per layer:  xn = rmsnorm(x) ; q, k, v = Wq xn, Wk xn, Wv xn ; RoPE(q, k) at pos ;
//               append k, v to the session's cache ; a = attention(q, cache) ; x += Wo a ;
//               xn = rmsnorm(x) ; x += Wdown (silu(Wgate xn) * Wup xn)
//   logits = Wout rmsnorm(x)
// RoPE pairs adjacent elements (2i, 2i+1), as llama2.c and GGUF "llama" do (GGUF's
// converter permutes Hugging Face's Q and K rows into that order).
//
// Templates: the weight formats compiled in (model/weights.hpp), the KV element (kv/element.hpp)
// and where the cache lives (core/storage.hpp); the executor is per call. Every size is
// known from the config before anything is allocated (`llama_sizes`); after `make`, decode
// allocates nothing.
//
// Sessions are KV-cache sequences: several share the weights and the scratch (calls run
// one at a time); `rollback` drops positions past a length (a rejected speculative draft),
// `fork` shares a prefix copy-on-write (kv/cache.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "hedge/attention/decode.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/kernels/activation.hpp"
#include "hedge/kernels/elementwise.hpp"
#include "hedge/kernels/norm.hpp"
#include "hedge/kernels/rope.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/model/weights.hpp"

namespace hedge::model {

/// Run-time choices of a model instance.
struct llama_options {
  std::size_t max_sessions = 1;  ///< sequences alive at once
  std::size_t context = 0;       ///< positions a session holds; 0 = the model's trained context
  std::size_t max_threads = 1;   ///< the most threads a call's executor has (sizes the attention workspace)
};

/// The scratch of one forward step, in floats, and the GEMV workspace in bytes.
struct llama_sizes {
  std::size_t scratch_floats = 0;
  std::size_t gemv_workspace_bytes = 0;
  std::size_t attention_floats = 0;
};

/// What a forward step needs besides the weights and the cache.
template <class Formats>
constexpr llama_sizes llama_scratch(const llama_config& c, std::size_t max_threads) noexcept {
  const std::size_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim();
  llama_sizes s;
  // x, xn, q, attention out, o (dim each); k, v (kv_dim); gate, up (hidden); logits (vocab);
  // the rope table (2 x head_dim).
  s.scratch_floats = 5 * dim + 2 * kv + 2 * hidden + c.vocab_size + 2 * c.head_dim();
  s.gemv_workspace_bytes = matvec_workspace_bytes<Formats>(std::max(dim, hidden));
  const std::size_t splits = c.n_kv_heads == 0 ? 1 : (std::max<std::size_t>(1, max_threads) + c.n_kv_heads - 1) / c.n_kv_heads;
  s.attention_floats = attention::decode_workspace_floats(c.n_heads, c.head_dim(), splits);
  return s;
}

/// A llama model ready to run: weights, KV cache, scratch.
/// \tparam Formats   weight formats compiled in (weight_formats<...>)
/// \tparam KvElem    the KV cache element
/// \tparam KvStorage where the cache's bytes live
template <class Formats = all_weight_formats, kv::KvElement KvElem = kv::kv_f32,
          kv::KvStorage KvStorage = heap_storage<std::byte>>
class llama {
 public:
  using cache_type = kv::kv_cache<kv::kv_dynamic_shape, KvElem, KvStorage>;

  /// Checks the weights against their config and sets up the cache and scratch (the only
  /// allocations). `weights` must outlive the model.
  static result<llama> make(const llama_weights& weights, const llama_options& options = {}) noexcept {
    const auto& c = weights.config;
    HEDGE_TRY(c.check());
    HEDGE_TRY(check_shapes(weights));
    if (c.rope_dim != c.head_dim())
      return error{errc::unsupported} << "RoPE over " << c.rope_dim << " of " << c.head_dim()
                                      << " head dimensions (partial rotary) is not supported";
    if (c.head_dim() > attention::attention_max_head_dim)
      return error{errc::unsupported} << "head dimension " << c.head_dim() << " above the attention kernels' "
                                      << attention::attention_max_head_dim;
    llama m;
    m.weights_ = &weights;
    m.options_ = options;
    if (m.options_.context == 0) m.options_.context = c.context_length;
    m.sizes_ = llama_scratch<Formats>(c, options.max_threads);
    auto cache = cache_type::make(kv::kv_dynamic_shape{c.n_layers, c.n_kv_heads, c.head_dim()},
                                  kv::kv_config{.max_sequences = options.max_sessions, .max_tokens = m.options_.context});
    if (!cache) return cache.error();
    m.cache_ = std::move(*cache);
    auto scratch = heap_storage<float>::make(m.sizes_.scratch_floats + m.sizes_.attention_floats);
    if (!scratch) return scratch.error();
    m.scratch_ = std::move(*scratch);
    auto workspace = heap_storage<std::byte>::make(std::max<std::size_t>(1, m.sizes_.gemv_workspace_bytes));
    if (!workspace) return workspace.error();
    m.gemv_workspace_ = std::move(*workspace);
    return m;
  }

  [[nodiscard]] const llama_config& config() const noexcept { return weights_->config; }
  [[nodiscard]] const llama_sizes& sizes() const noexcept { return sizes_; }
  [[nodiscard]] std::size_t context() const noexcept { return options_.context; }
  [[nodiscard]] const cache_type& cache() const noexcept { return cache_; }

  /// A new, empty session.
  result<kv::kv_seq> create_session() noexcept { return cache_.create(); }
  /// Positions the session holds.
  result<std::uint64_t> length(kv::kv_seq s) const noexcept { return cache_.length(s); }
  /// Drops the positions from `length` on.
  result<void> rollback(kv::kv_seq s, std::uint64_t length) noexcept { return cache_.truncate(s, length); }
  /// A new session sharing this one's positions (copy-on-write).
  result<kv::kv_seq> fork(kv::kv_seq s) noexcept { return cache_.fork(s); }
  result<void> release(kv::kv_seq s) noexcept { return cache_.release(s); }

  /// Runs `token` at the session's next position; returns the logits of the next token
  /// (valid until the next call). A full session is an error that leaves it unchanged.
  template <Executor E>
  result<std::span<const float>> decode(kv::kv_seq s, std::int32_t token, E& executor) noexcept {
    const auto& c = weights_->config;
    if (token < 0 || static_cast<std::uint32_t>(token) >= c.vocab_size)
      return error{errc::out_of_range} << "token " << token << " outside the vocabulary of " << c.vocab_size;
    auto at = cache_.extend(s, 1);
    if (!at) return at.error();
    const std::uint64_t pos = *at;
    auto result = step(s, token, pos, executor);
    if (!result) static_cast<void>(cache_.truncate(s, pos));  // leave the session as it was
    return result;
  }

  result<std::span<const float>> decode(kv::kv_seq s, std::int32_t token) noexcept {
    exec::serial serial;
    return decode(s, token, serial);
  }

  /// Runs `tokens` in order at the session's next positions; returns the logits after the
  /// last one. Checks every token and the room left before running any.
  template <Executor E>
  result<std::span<const float>> prefill(kv::kv_seq s, std::span<const std::int32_t> tokens, E& executor) noexcept {
    const auto& c = weights_->config;
    if (tokens.empty()) return error{errc::invalid_argument} << "prefill of no tokens";
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || static_cast<std::uint32_t>(tokens[i]) >= c.vocab_size)
        return error{errc::out_of_range} << "prompt token " << i << " is " << tokens[i] << ", outside the vocabulary of "
                                         << c.vocab_size;
    auto have = cache_.length(s);
    if (!have) return have.error();
    if (*have + tokens.size() > options_.context)
      return error{errc::capacity_exceeded} << "a prompt of " << tokens.size() << " tokens after " << *have
                                            << " does not fit the context of " << options_.context;
    std::span<const float> logits;
    for (const auto t : tokens) {
      auto r = decode(s, t, executor);
      if (!r) return r.error();
      logits = *r;
    }
    return logits;
  }

  result<std::span<const float>> prefill(kv::kv_seq s, std::span<const std::int32_t> tokens) noexcept {
    exec::serial serial;
    return prefill(s, tokens, serial);
  }

 private:
  /// The forward pass of one token at `pos` (its cache position already reserved).
  template <Executor E>
  result<std::span<const float>> step(kv::kv_seq s, std::int32_t token, std::uint64_t pos, E& executor) noexcept {
    const auto& w = *weights_;
    const auto& c = w.config;
    const std::size_t dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim, head = c.head_dim();
    float* p = scratch_.data();
    const auto take = [&p](std::size_t n) {
      vector_view<float> v(p, n);
      p += n;
      return v;
    };
    const auto x = take(dim), xn = take(dim), q = take(dim), att = take(dim), o = take(dim);
    const auto k = take(kv_dim), v = take(kv_dim), gate = take(hidden), up = take(hidden);
    const auto logits = take(c.vocab_size), cos = take(head), sin = take(head);
    const vector_view<float> attention_workspace(p, sizes_.attention_floats);
    const std::span<std::byte> ws(gemv_workspace_.data(), sizes_.gemv_workspace_bytes);
    const auto matmul = [&](const weight_matrix& m, vector_view<const float> in, vector_view<float> out) {
      return matvec<Formats>(m, in, out, ws, executor);
    };
    const attention::attention_params params{.scale = 1.0f / std::sqrt(static_cast<float>(head))};
    const std::size_t threads = std::min(executor.concurrency(), std::max<std::size_t>(1, options_.max_threads));

    HEDGE_TRY(dequantize_row<Formats>(w.token_embedding, static_cast<std::size_t>(token), x));
    HEDGE_TRY(kernels::rope_table(kernels::rope_layout::adjacent_pairs, pos, c.rope_theta, cos, sin));
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      const llama_layer& layer = w.layers[l];
      // Attention block.
      kernels::rmsnorm(x, layer.attn_norm, c.norm_eps, xn);
      HEDGE_TRY(matmul(layer.wq, xn, q));
      HEDGE_TRY(matmul(layer.wk, xn, k));
      HEDGE_TRY(matmul(layer.wv, xn, v));
      kernels::rope(kernels::rope_layout::adjacent_pairs, matrix_view<float>(q.data(), c.n_heads, head), cos, sin);
      kernels::rope(kernels::rope_layout::adjacent_pairs, matrix_view<float>(k.data(), c.n_kv_heads, head), cos, sin);
      HEDGE_TRY(cache_.write(s, l, pos, k.span(), v.span()));
      auto seen = cache_.view(s);
      if (!seen) return seen.error();
      const std::size_t splits = attention::decode_splits(c.n_kv_heads, pos + 1, threads);
      HEDGE_TRY(attention::decode_attention(*seen, l, q, att, params, attention_workspace, executor, splits));
      HEDGE_TRY(matmul(layer.wo, att, o));
      kernels::add(x, o, x);
      // Feed-forward block (SwiGLU).
      kernels::rmsnorm(x, layer.ffn_norm, c.norm_eps, xn);
      HEDGE_TRY(matmul(layer.w_gate, xn, gate));
      HEDGE_TRY(matmul(layer.w_up, xn, up));
      kernels::silu_mul(gate, up, gate);
      HEDGE_TRY(matmul(layer.w_down, gate, o));
      kernels::add(x, o, x);
    }
    kernels::rmsnorm(x, w.output_norm, c.norm_eps, xn);
    HEDGE_TRY(matmul(w.output, xn, logits));
    return std::span<const float>(logits.data(), logits.size());
  }

  /// Every matrix and norm has the config's shape.
  static result<void> check_shapes(const llama_weights& w) noexcept {
    const auto& c = w.config;
    const std::size_t dim = c.dim, kv = c.kv_dim(), hidden = c.hidden_dim, vocab = c.vocab_size;
    const auto matrix = [](const weight_matrix& m, std::size_t rows, std::size_t cols, const char* name,
                           std::size_t layer) -> result<void> {
      if (m.data == nullptr || m.rows != rows || m.cols != cols)
        return error{errc::shape_mismatch} << name << " of layer " << layer << " is " << m.rows << " x " << m.cols
                                           << ", the config needs " << rows << " x " << cols;
      auto known = visit_format<Formats>(m.type, [&](auto format) -> result<void> {
        if (cols % decltype(format)::block_elements != 0)
          return error{errc::shape_mismatch} << "rows of " << cols << " elements are not whole " << decltype(format)::name
                                             << " blocks";
        return ok();
      });
      if (!known) return error{known.error().code()} << name << " of layer " << layer << ": " << known.error().message();
      return ok();
    };
    const auto norm = [dim](vector_view<const float> n, const char* name, std::size_t layer) -> result<void> {
      if (n.data() == nullptr || n.size() != dim)
        return error{errc::shape_mismatch} << name << " of layer " << layer << " has " << n.size() << " weights, the config needs "
                                           << dim;
      return ok();
    };
    if (w.layers.size() != c.n_layers)
      return error{errc::shape_mismatch} << w.layers.size() << " layers of weights, the config has " << c.n_layers;
    HEDGE_TRY(matrix(w.token_embedding, vocab, dim, "token embedding", 0));
    HEDGE_TRY(matrix(w.output, vocab, dim, "output", 0));
    HEDGE_TRY(norm(w.output_norm, "output norm", 0));
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      const auto& y = w.layers[l];
      HEDGE_TRY(norm(y.attn_norm, "attention norm", l));
      HEDGE_TRY(norm(y.ffn_norm, "feed-forward norm", l));
      HEDGE_TRY(matrix(y.wq, dim, dim, "wq", l));
      HEDGE_TRY(matrix(y.wk, kv, dim, "wk", l));
      HEDGE_TRY(matrix(y.wv, kv, dim, "wv", l));
      HEDGE_TRY(matrix(y.wo, dim, dim, "wo", l));
      HEDGE_TRY(matrix(y.w_gate, hidden, dim, "w_gate", l));
      HEDGE_TRY(matrix(y.w_up, hidden, dim, "w_up", l));
      HEDGE_TRY(matrix(y.w_down, dim, hidden, "w_down", l));
    }
    return ok();
  }

  const llama_weights* weights_ = nullptr;
  llama_options options_;
  llama_sizes sizes_;
  cache_type cache_;
  heap_storage<float> scratch_;
  heap_storage<std::byte> gemv_workspace_;
};

}  // namespace hedge::model
