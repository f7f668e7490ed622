// hedge/model/forward.hpp: the llama forward pass on hedge's kernels, and sessions that
// share one model.
//
// `decode` runs one token through the model, as llama2.c's forward() does, top to bottom:
//   x = embedding[token]
//   per layer:  xn = rmsnorm(x) ; q|k|v = Wqkv xn ; RoPE(q, k) at pos ;
//               append k, v to the session's cache ; a = attention(q, cache) ; x += Wo a ;
//               xn = rmsnorm(x) ; gate|up = Wgate_up xn ; x += Wdown (silu(gate) * up)
//   logits = Wout rmsnorm(x)
// `prefill` runs the prompt's tokens through each layer together, in chunks of
// `llama_options::max_prefill` rows: the same steps with the rows of X as the activations,
// GEMMs (kernels/gemm.hpp) for the projections, RoPE per row at its position, and causal
// prefill attention (attention/prefill.hpp) after the chunk's K/V are in the cache; the
// classifier runs on the last row only. A GEMM row equals the GEMV of that row bit for bit,
// so prefill's logits differ from a loop of decodes only by the attention kernels'
// summation order (tests bound it).
// RoPE pairs adjacent elements (2i, 2i+1), as llama2.c and GGUF "llama" do (GGUF's
// converter permutes Hugging Face's Q and K rows into that order).
//
// Weights at make(): Q4_0 and Q4_K matrices (and Q8_0 ones on request) are repacked into
// kernels/repack.hpp's interleaved layout (`llama_options::repack`), and Q/K/V, and gate/up, become one matrix
// each when their formats and row lengths match (`llama_options::fuse`): free for
// repacked matrices, whose interleaved copy is laid out end to end, a copy of the
// plain-layout ones with `llama_fusion::all`. The copies live in one weight arena
// (`llama_weight_arena_bytes`, the model's or the caller's); the file's tensors they
// replace are not read again, and make() reports each one's bytes as soon as it is packed
// (its `released` callback), so the owner of a mapped file can drop their pages
// (os::mapped_file::release) and the resident set holds the copy alone. The embedding
// stays in the file's layout (row lookups), unless it is also the classifier and was
// repacked as such.
//
// Executor synchronisations (parallel_for calls) per decoded token, L layers: one per
// matrix-vector product and one for attention: 5 L + 1 with Q/K/V and gate/up fused,
// 8 L + 1 without; fewer where a product or the attention is too small to share
// (`llama_options::parallel_min_bytes`: those run on the calling thread). Per prefill
// chunk: each GEMM makes two (activation packing, product), attention one: 9 L + 1 fused,
// 15 L + 1 without.
//
// Templates: the weight formats compiled in (model/weights.hpp), the KV element (kv/element.hpp)
// and where the cache lives (core/storage.hpp); the executor is per call. Every size is
// known from the config before anything is allocated (`llama_scratch`,
// `llama_weight_arena_bytes`); after `make`, decode allocates nothing.
//
// Sessions are KV-cache sequences: several share the weights and the scratch (calls run
// one at a time); `rollback` drops positions past a length (a rejected speculative draft),
// `fork` shares a prefix copy-on-write (kv/cache.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "hedge/attention/decode.hpp"
#include "hedge/attention/prefill.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/kernels/activation.hpp"
#include "hedge/kernels/elementwise.hpp"
#include "hedge/kernels/norm.hpp"
#include "hedge/kernels/rope.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/model/weights.hpp"

namespace hedge::model {

/// Which matrices are repacked into the interleaved layout (kernels/repack.hpp) at make().
enum class llama_repack {
  none,    ///< every matrix in the file's layout
  decode,  ///< Q4_0 and Q4_K: their interleaved GEMV and GEMM both outrun the file layout's
  all,     ///< also Q8_0, whose file-layout GEMV decodes faster (AVX2, AVX-512) and whose
           ///< file-layout GEMM packs its weights on the fly where that pays (AVX-512 VNNI)
};

/// Which projections become one matrix (Q/K/V; gate/up) when their formats and row lengths match.
enum class llama_fusion {
  none,      ///< every projection its own matrix
  repacked,  ///< those repacked anyway: free (their interleaved copies are laid end to end)
  all,       ///< also plain-layout ones, copied into the weight arena (their bytes once more,
             ///< unless the caller drops the file's pages: make()'s `released`)
};

/// Run-time choices of a model instance.
struct llama_options {
  std::size_t max_sessions = 1;  ///< sequences alive at once
  std::size_t context = 0;       ///< positions a session holds; 0 = the model's trained context
  std::size_t max_threads = 1;   ///< the most threads a call's executor uses (sizes the attention workspace)
  std::size_t max_prefill = 64;  ///< prompt rows run through the layers together; longer prompts go in chunks
  llama_repack repack = llama_repack::decode;
  llama_fusion fuse = llama_fusion::repacked;
  /// A decode step's matrix-vector product over fewer weight bytes than this, or its
  /// attention over fewer KV bytes (counted at f32), runs on the calling thread: waking a
  /// worker costs more than sharing so little work saves, and on a busy machine far more
  /// (docs/model.md, "Small models"). 0: every one goes to the executor.
  std::size_t parallel_min_bytes = 256 * 1024;
  std::span<std::byte> weight_arena = {};  ///< llama_weight_arena_bytes, 64-byte aligned; empty: the model allocates it
};

/// The scratch of the forward pass, in floats, and the GEMV/GEMM workspace in bytes.
struct llama_sizes {
  std::size_t scratch_floats = 0;        ///< one decode step
  std::size_t gemv_workspace_bytes = 0;  ///< one activation row
  std::size_t attention_floats = 0;      ///< decode or prefill attention, the larger
  std::size_t prefill_floats = 0;        ///< one prefill chunk of max_prefill rows
  std::size_t gemm_workspace_bytes = 0;  ///< max_prefill activation rows
};

/// What the forward pass needs besides the weights and the cache.
template <class Formats>
constexpr llama_sizes llama_scratch(const llama_config& c, std::size_t max_threads,
                                    std::size_t max_prefill = llama_options{}.max_prefill) noexcept {
  const std::size_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim(), head = c.head_dim();
  const std::size_t threads = std::max<std::size_t>(1, max_threads), rows = std::max<std::size_t>(1, max_prefill);
  llama_sizes s;
  // x, xn, attention out, o (dim each); q|k|v (dim + 2 kv_dim); gate|up (2 hidden); logits
  // (vocab); the rope table (2 x head_dim).
  s.scratch_floats = 5 * dim + 2 * kv + 2 * hidden + c.vocab_size + 2 * head;
  s.gemv_workspace_bytes = matvec_workspace_bytes<Formats>(std::max(dim, hidden));
  const std::size_t splits = c.n_kv_heads == 0 ? 1 : (threads + c.n_kv_heads - 1) / c.n_kv_heads;
  s.attention_floats =
      std::max(attention::decode_workspace_floats(c.n_heads, head, splits),
               c.n_kv_heads == 0 ? 0 : attention::prefill_workspace_floats(c.n_heads, c.n_kv_heads, head, threads));
  // Per row: the decode step's vectors but the logits, and q again, gathered for attention.
  s.prefill_floats = rows * (6 * dim + 2 * kv + 2 * hidden + 2 * head);
  s.gemm_workspace_bytes = matmul_workspace_bytes<Formats>(rows, std::max(dim, hidden));
  return s;
}

namespace detail {

/// Up to three matrices whose outputs are consecutive slices of one vector (Q|K|V,
/// gate|up); one matrix when fused.
struct projection {
  std::array<weight_matrix, 3> parts{};
  std::size_t count = 0;
  [[nodiscard]] std::span<const weight_matrix> matrices() const noexcept { return {parts.data(), count}; }
};

/// One layer's matrices as the forward pass runs them.
struct layer_matrices {
  projection qkv, gate_up;
  weight_matrix wo, w_down;
};

inline constexpr std::size_t weight_arena_alignment = 64;

/// Called with byte ranges of the weights the model no longer reads.
using released_bytes = function_ref<void(std::span<const std::byte>)>;

/// Bytes of `m` in the file's layout.
template <class Formats>
std::size_t stored_bytes(const weight_matrix& m) {
  std::size_t bytes = 0;
  static_cast<void>(model::visit_format<Formats>(m.type, [&](auto format) -> result<void> {
    bytes = m.rows * quant::row_bytes<decltype(format)>(m.cols);
    return ok();
  }));
  return bytes;
}

/// Decides, for every projection, whether it is packed into the weight arena (repacked,
/// fused) or stays a view of the weights, and packs it when the arena is given (telling
/// `released`, when given, the bytes of the matrices it replaced); without one it only
/// counts the bytes.
template <class Formats>
class weight_arranger {
 public:
  weight_arranger(const llama_options& options, std::byte* arena, const released_bytes* released = nullptr) noexcept
      : options_(options), arena_(arena), released_(released) {}

  result<projection> place(std::initializer_list<weight_matrix> matrices) {
    const std::span<const weight_matrix> parts(matrices.begin(), matrices.size());
    const bool fusable = parts.size() > 1 && options_.fuse != llama_fusion::none;
    if (fusable && repacks(parts[0]))
      if (const std::size_t n = packed_matrix_bytes<Formats>(parts, true)) return pack(parts, true, n);
    if (fusable && options_.fuse == llama_fusion::all)
      if (const std::size_t n = packed_matrix_bytes<Formats>(parts, false)) return pack(parts, false, n);
    projection p;
    for (const weight_matrix& m : parts) {
      const std::size_t n = repacks(m) ? packed_matrix_bytes<Formats>({&m, 1}, true) : 0;
      if (n == 0) {
        p.parts[p.count++] = m;
        continue;
      }
      auto packed = pack({&m, 1}, true, n);
      if (!packed) return packed.error();
      p.parts[p.count++] = packed->parts[0];
    }
    return p;
  }
  result<weight_matrix> place(const weight_matrix& m) {
    auto p = place({m});
    if (!p) return p.error();
    return p->parts[0];
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return used_; }

 private:
  /// Whether the options repack m's format (packed_matrix_bytes then says whether it can).
  [[nodiscard]] bool repacks(const weight_matrix& m) const noexcept {
    switch (options_.repack) {
      case llama_repack::none: return false;
      case llama_repack::decode: return m.type != quant::gguf_type::q8_0;
      case llama_repack::all: return true;
    }
    return false;
  }

  result<projection> pack(std::span<const weight_matrix> parts, bool interleave, std::size_t bytes) {
    used_ = (used_ + weight_arena_alignment - 1) / weight_arena_alignment * weight_arena_alignment;
    projection p;
    p.count = 1;
    if (arena_ != nullptr) {
      auto packed = pack_matrices<Formats>(parts, interleave, {arena_ + used_, bytes});
      if (!packed) return packed.error();
      p.parts[0] = *packed;
      if (released_ != nullptr)
        for (const weight_matrix& m : parts) (*released_)({m.data, stored_bytes<Formats>(m)});
    }
    used_ += bytes;
    return p;
  }

  const llama_options& options_;
  std::byte* arena_;
  const released_bytes* released_;
  std::size_t used_ = 0;
};

/// Runs every layer's and the classifier's matrices through `arranger`.
template <class Formats>
result<void> arrange_weights(const llama_weights& w, weight_arranger<Formats>& arranger,
                             std::vector<layer_matrices>* layers, weight_matrix* output) {
  for (const llama_layer& y : w.layers) {
    auto qkv = arranger.place({y.wq, y.wk, y.wv});
    if (!qkv) return qkv.error();
    auto wo = arranger.place(y.wo);
    if (!wo) return wo.error();
    auto gate_up = arranger.place({y.w_gate, y.w_up});
    if (!gate_up) return gate_up.error();
    auto down = arranger.place(y.w_down);
    if (!down) return down.error();
    if (layers != nullptr) layers->push_back({*qkv, *gate_up, *wo, *down});
  }
  auto out = arranger.place(w.output);
  if (!out) return out.error();
  if (output != nullptr) *output = *out;
  return ok();
}

/// An executor that reports at most `threads` of concurrency (the attention workspace was
/// sized for that many parts) and runs on `inner`.
template <Executor E>
struct at_most {
  E& inner;
  std::size_t threads;
  [[nodiscard]] std::size_t concurrency() const noexcept { return std::min<std::size_t>(inner.concurrency(), threads); }
  template <class Body>
  void parallel_for(std::size_t n, Body&& body) {
    inner.parallel_for(n, std::forward<Body>(body));
  }
};

}  // namespace detail

/// Bytes of the weight arena a model made with `options` packs its repacked and fused
/// matrices into (0: none; their formats' kernels use the file's layout).
template <class Formats = all_weight_formats>
result<std::size_t> llama_weight_arena_bytes(const llama_weights& weights, const llama_options& options = {}) {
  detail::weight_arranger<Formats> counter(options, nullptr);
  HEDGE_TRY(detail::arrange_weights(weights, counter, nullptr, nullptr));
  return counter.bytes();
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

  /// Checks the weights against their config, packs the repacked and fused matrices, and
  /// sets up the cache and scratch (the only allocations). `weights` must outlive the model.
  static result<llama> make(const llama_weights& weights, const llama_options& options = {}) noexcept {
    return make(weights, options, [](std::span<const std::byte>) {});
  }

  /// As above, and calls `released` with the bytes of each of the weights' matrices as soon
  /// as its packed copy is made: the model never reads them again (the caller may drop
  /// their pages: os::mapped_file::release). Not called after make() returns.
  static result<llama> make(const llama_weights& weights, const llama_options& options,
                            detail::released_bytes released) noexcept {
    const auto& c = weights.config;
    HEDGE_TRY(c.check());
    HEDGE_TRY(check_shapes(weights));
    if (c.rope_dim != c.head_dim())
      return error{errc::unsupported} << "RoPE over " << c.rope_dim << " of " << c.head_dim()
                                      << " head dimensions (partial rotary) is not supported";
    if (c.head_dim() > attention::attention_max_head_dim)
      return error{errc::unsupported} << "head dimension " << c.head_dim() << " above the attention kernels' "
                                      << attention::attention_max_head_dim;
    if (options.max_prefill == 0) return error{errc::invalid_argument} << "max_prefill of 0 rows";
    llama m;
    m.weights_ = &weights;
    m.options_ = options;
    if (m.options_.context == 0) m.options_.context = c.context_length;
    HEDGE_TRY(m.arrange(weights, released));
    m.sizes_ = llama_scratch<Formats>(c, options.max_threads, options.max_prefill);
    auto cache = cache_type::make(kv::kv_dynamic_shape{c.n_layers, c.n_kv_heads, c.head_dim()},
                                  kv::kv_config{.max_sequences = options.max_sessions, .max_tokens = m.options_.context});
    if (!cache) return cache.error();
    m.cache_ = std::move(*cache);
    auto scratch =
        heap_storage<float>::make(m.sizes_.scratch_floats + m.sizes_.attention_floats + m.sizes_.prefill_floats);
    if (!scratch) return scratch.error();
    m.scratch_ = std::move(*scratch);
    const std::size_t workspace_bytes = std::max(m.sizes_.gemv_workspace_bytes, m.sizes_.gemm_workspace_bytes);
    auto workspace = heap_storage<std::byte>::make(std::max<std::size_t>(1, workspace_bytes));
    if (!workspace) return workspace.error();
    m.workspace_ = std::move(*workspace);
    return m;
  }

  [[nodiscard]] const llama_config& config() const noexcept { return weights_->config; }
  [[nodiscard]] const llama_sizes& sizes() const noexcept { return sizes_; }
  [[nodiscard]] std::size_t context() const noexcept { return options_.context; }
  [[nodiscard]] const cache_type& cache() const noexcept { return cache_; }
  /// Bytes of the repacked and fused matrices (in the caller's arena, or the model's).
  [[nodiscard]] std::size_t weight_arena_bytes() const noexcept { return arena_bytes_; }

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

  /// Runs `tokens` at the session's next positions, all rows of a chunk through each layer
  /// together; returns the logits after the last one. Checks every token and the room left
  /// before running any; an error leaves the session as it was.
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
    for (std::size_t first = 0; first < tokens.size(); first += options_.max_prefill) {
      const auto chunk = tokens.subspan(first, std::min(options_.max_prefill, tokens.size() - first));
      auto at = cache_.extend(s, chunk.size());
      result<void> done = at.ok() ? prefill_chunk(s, chunk, *at, first + chunk.size() == tokens.size(), executor)
                                  : result<void>(at.error());
      if (!done) {
        static_cast<void>(cache_.truncate(s, *have));
        return done.error();
      }
    }
    const float* logits = scratch_.data() + logits_offset();
    return std::span<const float>(logits, c.vocab_size);
  }

  result<std::span<const float>> prefill(kv::kv_seq s, std::span<const std::int32_t> tokens) noexcept {
    exec::serial serial;
    return prefill(s, tokens, serial);
  }

 private:
  /// Where the decode scratch keeps the logits (prefill writes its last row's there too).
  [[nodiscard]] std::size_t logits_offset() const noexcept {
    const auto& c = weights_->config;
    return 5 * std::size_t{c.dim} + 2 * c.kv_dim() + 2 * std::size_t{c.hidden_dim};
  }

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
    const auto x = take(dim), xn = take(dim), att = take(dim), o = take(dim), qkv = take(dim + 2 * kv_dim);
    const auto gate_up = take(2 * hidden), logits = take(c.vocab_size), cos = take(head), sin = take(head);
    const auto q = qkv.subview(0, dim), k = qkv.subview(dim, kv_dim), v = qkv.subview(dim + kv_dim, kv_dim);
    const auto gate = gate_up.subview(0, hidden), up = gate_up.subview(hidden, hidden);
    const vector_view<float> attention_workspace(p, sizes_.attention_floats);
    const std::span<std::byte> ws(workspace_.data(), sizes_.gemv_workspace_bytes);
    exec::serial serial;
    const auto matmul = [&](const weight_matrix& m, vector_view<const float> in, vector_view<float> out) {
      if (detail::stored_bytes<Formats>(m) < options_.parallel_min_bytes)
        return matvec<Formats>(m, in, out, ws, serial);
      return matvec<Formats>(m, in, out, ws, executor);
    };
    const auto project = [&](const detail::projection& m, vector_view<const float> in,
                             vector_view<float> out) -> result<void> {
      std::size_t at = 0;
      for (const weight_matrix& part : m.matrices()) {
        HEDGE_TRY(matmul(part, in, out.subview(at, part.rows)));
        at += part.rows;
      }
      return ok();
    };
    const attention::attention_params params{.scale = 1.0f / std::sqrt(static_cast<float>(head))};
    const std::size_t threads = std::min(executor.concurrency(), std::max<std::size_t>(1, options_.max_threads));

    HEDGE_TRY(dequantize_row<Formats>(embedding_, static_cast<std::size_t>(token), x));
    HEDGE_TRY(kernels::rope_table(kernels::rope_layout::adjacent_pairs, pos, c.rope_theta, cos, sin));
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      const llama_layer& norms = w.layers[l];
      const detail::layer_matrices& layer = layers_[l];
      // Attention block.
      kernels::rmsnorm(x, norms.attn_norm, c.norm_eps, xn);
      HEDGE_TRY(project(layer.qkv, xn, qkv));
      kernels::rope(kernels::rope_layout::adjacent_pairs, matrix_view<float>(q.data(), c.n_heads, head), cos, sin);
      kernels::rope(kernels::rope_layout::adjacent_pairs, matrix_view<float>(k.data(), c.n_kv_heads, head), cos, sin);
      HEDGE_TRY(cache_.write(s, l, pos, k.span(), v.span()));
      auto seen = cache_.view(s);
      if (!seen) return seen.error();
      // K and V of every position so far, counted at f32 (a quantized cache reads less).
      const std::size_t kv_bytes = 2 * kv_dim * (pos + 1) * sizeof(float);
      if (threads == 1 || kv_bytes < options_.parallel_min_bytes) {
        HEDGE_TRY(attention::decode_attention(*seen, l, q, att, params, attention_workspace, serial, 1));
      } else {
        const std::size_t splits = attention::decode_splits(c.n_kv_heads, pos + 1, threads);
        HEDGE_TRY(attention::decode_attention(*seen, l, q, att, params, attention_workspace, executor, splits));
      }
      HEDGE_TRY(matmul(layer.wo, att, o));
      kernels::add(x, o, x);
      // Feed-forward block (SwiGLU).
      kernels::rmsnorm(x, norms.ffn_norm, c.norm_eps, xn);
      HEDGE_TRY(project(layer.gate_up, xn, gate_up));
      kernels::silu_mul(gate, up, gate);
      HEDGE_TRY(matmul(layer.w_down, gate, o));
      kernels::add(x, o, x);
    }
    kernels::rmsnorm(x, w.output_norm, c.norm_eps, xn);
    HEDGE_TRY(matmul(output_, xn, logits));
    return std::span<const float>(logits.data(), logits.size());
  }

  /// The forward pass of `tokens` at positions pos, pos + 1, ... (reserved in the cache),
  /// all rows through each layer together; the classifier runs on the last row when `last`.
  template <Executor E>
  result<void> prefill_chunk(kv::kv_seq s, std::span<const std::int32_t> tokens, std::uint64_t pos, bool last,
                             E& executor) noexcept {
    const auto& w = *weights_;
    const auto& c = w.config;
    const std::size_t rows = tokens.size(), dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim,
                      head = c.head_dim(), qkv_dim = dim + 2 * kv_dim;
    float* p = scratch_.data() + sizes_.scratch_floats + sizes_.attention_floats;
    const auto take = [&p, rows](std::size_t cols) {
      matrix_view<float> m(p, rows, cols);
      p += rows * cols;
      return m;
    };
    const auto x = take(dim), xn = take(dim), q = take(dim), att = take(dim), o = take(dim), qkv = take(qkv_dim);
    const auto gate_up = take(2 * hidden), cos = take(head), sin = take(head);
    const auto logits = vector_view<float>(scratch_.data() + logits_offset(), c.vocab_size);
    const auto all = [rows](matrix_view<float> m) { return vector_view<float>(m.data(), rows * m.cols()); };
    const auto columns = [rows](matrix_view<float> m, std::size_t first, std::size_t count) {
      return matrix_view<float>(m.data() + first, rows, count, m.stride());
    };
    const vector_view<float> attention_workspace(scratch_.data() + sizes_.scratch_floats, sizes_.attention_floats);
    const std::span<std::byte> ws(workspace_.data(), sizes_.gemm_workspace_bytes);
    const auto project = [&](const detail::projection& m, matrix_view<const float> in,
                             matrix_view<float> out) -> result<void> {
      std::size_t at = 0;
      for (const weight_matrix& part : m.matrices()) {
        HEDGE_TRY(matmul<Formats>(part, in, columns(out, at, part.rows), ws, executor));
        at += part.rows;
      }
      return ok();
    };
    const auto each_row = [rows](auto&& f) {
      for (std::size_t i = 0; i < rows; ++i) f(i);
    };
    const attention::attention_params params{.scale = 1.0f / std::sqrt(static_cast<float>(head))};
    detail::at_most<E> capped{executor, std::max<std::size_t>(1, options_.max_threads)};

    for (std::size_t i = 0; i < rows; ++i) {
      HEDGE_TRY(dequantize_row<Formats>(embedding_, static_cast<std::size_t>(tokens[i]), x.row(i)));
      HEDGE_TRY(
          kernels::rope_table(kernels::rope_layout::adjacent_pairs, pos + i, c.rope_theta, cos.row(i), sin.row(i)));
    }
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      const llama_layer& norms = w.layers[l];
      const detail::layer_matrices& layer = layers_[l];
      // Attention block.
      each_row([&](std::size_t i) { kernels::rmsnorm(x.row(i), norms.attn_norm, c.norm_eps, xn.row(i)); });
      HEDGE_TRY(project(layer.qkv, xn, qkv));
      for (std::size_t i = 0; i < rows; ++i) {
        float* row = qkv.row(i).data();
        kernels::rope(kernels::rope_layout::adjacent_pairs, matrix_view<float>(row, c.n_heads, head), cos.row(i),
                      sin.row(i));
        kernels::rope(kernels::rope_layout::adjacent_pairs, matrix_view<float>(row + dim, c.n_kv_heads, head),
                      cos.row(i), sin.row(i));
        std::copy(row, row + dim, q.row(i).data());
        HEDGE_TRY(cache_.write(s, l, pos + i, {row + dim, kv_dim}, {row + dim + kv_dim, kv_dim}));
      }
      auto seen = cache_.view(s);
      if (!seen) return seen.error();
      HEDGE_TRY(attention::prefill_attention(*seen, l, rows, all(q), all(att), params, attention_workspace, capped));
      HEDGE_TRY(matmul<Formats>(layer.wo, att, o, ws, executor));
      kernels::add(all(x), all(o), all(x));
      // Feed-forward block (SwiGLU).
      each_row([&](std::size_t i) { kernels::rmsnorm(x.row(i), norms.ffn_norm, c.norm_eps, xn.row(i)); });
      HEDGE_TRY(project(layer.gate_up, xn, gate_up));
      each_row([&](std::size_t i) {
        const auto row = gate_up.row(i);
        kernels::silu_mul(row.subview(0, hidden), row.subview(hidden, hidden), row.subview(0, hidden));
      });
      HEDGE_TRY(matmul<Formats>(layer.w_down, columns(gate_up, 0, hidden), o, ws, executor));
      kernels::add(all(x), all(o), all(x));
    }
    if (!last) return ok();
    const auto final_row = xn.row(rows - 1);
    kernels::rmsnorm(x.row(rows - 1), w.output_norm, c.norm_eps, final_row);
    return matvec<Formats>(output_, final_row, logits,
                           std::span<std::byte>(workspace_.data(), sizes_.gemv_workspace_bytes), executor);
  }

  /// Packs the repacked and fused matrices into the weight arena (the caller's or a new one).
  result<void> arrange(const llama_weights& w, detail::released_bytes released) {
    auto bytes = llama_weight_arena_bytes<Formats>(w, options_);
    if (!bytes) return bytes.error();
    arena_bytes_ = *bytes;
    std::byte* arena = options_.weight_arena.data();
    if (!options_.weight_arena.empty()) {
      if (options_.weight_arena.size() < arena_bytes_)
        return error{errc::capacity_exceeded} << "a weight arena of " << options_.weight_arena.size() << " bytes for "
                                              << arena_bytes_ << " bytes of repacked and fused weights";
      if (reinterpret_cast<std::uintptr_t>(arena) % detail::weight_arena_alignment != 0)
        return error{errc::misaligned} << "the weight arena is not " << detail::weight_arena_alignment
                                       << "-byte aligned";
    } else if (arena_bytes_ != 0) {
      auto owned = heap_storage<std::byte>::make(arena_bytes_);
      if (!owned) return owned.error();
      arena_ = std::move(*owned);
      arena = arena_.data();
    }
    detail::weight_arranger<Formats> arranger(options_, arena, &released);
    layers_.reserve(w.layers.size());
    HEDGE_TRY(detail::arrange_weights(w, arranger, &layers_, &output_));
    const bool shared = w.output.data == w.token_embedding.data;
    embedding_ = shared ? output_ : w.token_embedding;
    return ok();
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
  std::vector<detail::layer_matrices> layers_;
  weight_matrix embedding_, output_;
  heap_storage<std::byte> arena_;
  std::size_t arena_bytes_ = 0;
  cache_type cache_;
  heap_storage<float> scratch_;
  heap_storage<std::byte> workspace_;
};

}  // namespace hedge::model
