// hedge/model/forward.hpp: the forward pass of the llama family (llama, smollm3, qwen2,
// qwen3, phi3, gemma2, gemma3: model/config.hpp) on hedge's kernels, and sessions that
// share one model.
//
// `decode` runs one token through the model, as llama2.c's forward() does, top to bottom;
// the steps in [brackets] are those an architecture adds, each a named member function
// that is a no-op where the config says the architecture lacks it:
//   x = embedding[token] [x sqrt(dim)]                                      embed
//   per layer:  xn = rmsnorm(x) ; q|k|v = Wqkv xn [+ biases] [rmsnorm per Q/K head] ;
//               RoPE(q, k) at pos over rope_dim of each head, the layer's table
//               [local or global; none in smollm3's no-RoPE layers]             attention_inputs
//               append k, v to the session's cache ;
//               a = attention(q, cache [last sliding_window positions in a local layer],
//                             scale [, soft-cap]) ;                             layer_view
//               x += [rmsnorm] (Wo a) ;                                         add_residual
//               xn = rmsnorm(x) ; gate|up = Wgate_up xn ;
//               x += [rmsnorm] (Wdown (act(gate) * up)), act SiLU [or tanh GELU] gated_activation
//   logits = Wout rmsnorm(x) [soft-capped]                                   cap_logits
// `prefill` runs the prompt's tokens through each layer together, in chunks of
// `llama_options::max_prefill` rows: the same steps with the rows of X as the activations,
// GEMMs (kernels/gemm.hpp) for the projections, the per-row steps above per row, and
// causal prefill attention (attention/prefill.hpp) after the chunk's K/V are in the cache;
// the classifier runs on the last row only (on every row: prefill_logits, for scoring a
// text). A GEMM row equals the GEMV of that row bit for bit, so prefill's logits differ from
// a loop of decodes only by the attention kernels' summation order (tests bound it). With
// max_prefill 0 the model has no prefill buffers (their rows and the prefill attention's
// tiles are most of a small model's scratch) and prefill is that loop of decodes, as
// llama2.c's run.c reads a prompt.
// `decode_batch` is a decode step of several sessions in one pass over the weights
// (continuous batching, as llama.cpp's server runs its slots): the same rows pass as a
// prefill chunk, but row i is session i's next token, its attention is decode's over that
// session's cache, and the classifier runs on every row. Its rows' logits equal decode()'s
// of each session alone wherever the format's GEMM row equals its GEMV bit for bit (every
// format but those AVX-512 VNNI packs on the fly from the file's layout when they are not
// repacked, Q8_0 by default, whose rows differ by a few ulps; kernels/gemm.hpp).
// RoPE pairs adjacent elements (2i, 2i+1) in llama and smollm3, as llama2.c and GGUF
// "llama" do (GGUF's converter permutes Hugging Face's Q and K rows into that order), and
// the NeoX halves (i, i + rope_dim/2) in the others (config.rope_layout).
// Local (sliding-window) layers keep their K/V in a cache of their own, a ring of
// sliding_window + max_prefill positions per session (kv/cache.hpp's window mode, as
// llama.cpp's SWA cache keeps n_swa + n_ubatch): a chunk's first query still finds the
// window before it, and a session rolls back up to max_prefill positions past what the
// ring overwrote (further is an error naming the position). The global layers' cache keeps
// every position. Where the ring would not be smaller than the context (or every layer is
// local) the local layers share the one cache and their attention sees the last window of
// it (kv_sequence_view::windowed).
//
// Weights at make(): Q4_0, Q5_0, Q5_1, Q4_K and Q6_K matrices (and Q8_0 ones on request) are repacked into
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
// known from the config before anything is allocated (`llama_buffers::lay_out`, the one
// place the scratch's buffers are named and sized, and `llama_weight_arena_bytes`); after
// `make`, decode allocates nothing. `make` allocates all of it in one block
// (`memory_bytes`); `make_in` takes that block from the caller (with a buffer_storage KV
// cache, the model then touches no heap at all: a firmware image's static array).
//
// Sessions are KV-cache sequences: several share the weights and the scratch (calls run
// one at a time); `rollback` drops positions past a length (a rejected speculative draft),
// `fork` shares a prefix copy-on-write (kv/cache.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <span>
#include <utility>

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
  decode,  ///< every interleaved format but Q8_0 (Q4_0, Q5_0, Q5_1, Q4_K, Q6_K): their
           ///< interleaved GEMV and GEMM outrun the file layout's kernels
  all,     ///< also Q8_0, as os::make_llama makes models: on the 1B-class Q8_0 files its
           ///< interleaved GEMV and GEMM took about half the file layout's CPU time (docs/model.md)
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
  /// Prompt rows run through the layers together; longer prompts go in chunks. 0: no
  /// prefill buffers (the least memory: a firmware image), prefill() decodes the prompt
  /// one token at a time, as llama2.c's run.c does.
  std::size_t max_prefill = 64;
  std::size_t max_batch = 1;  ///< sessions a decode_batch step runs together
  llama_repack repack = llama_repack::decode;
  llama_fusion fuse = llama_fusion::repacked;
  /// A decode step's matrix-vector product over fewer weight bytes than this, or its
  /// attention over fewer KV bytes (counted at f32), runs on the calling thread: waking a
  /// worker costs more than sharing so little work saves, and on a busy machine far more
  /// (docs/model.md, "Small models"). 0: every one goes to the executor.
  std::size_t parallel_min_bytes = 256 * 1024;
  std::span<std::byte> weight_arena = {};  ///< llama_weight_arena_bytes, 64-byte aligned; empty: the model allocates it
};

/// The forward pass's buffers, each named, as llama2.c's RunState names them: `lay_out`
/// places them end to end in one float allocation and is the only place their sizes are
/// stated (make() sizes the allocation by laying them out without one).
struct llama_buffers {
  // One decode step (one token).
  vector_view<float> x;          ///< [dim] the residual stream
  vector_view<float> xn;         ///< [dim] x normalised, the input of a block
  vector_view<float> qkv;        ///< [q_dim + 2 kv_dim] Q|K|V
  vector_view<float> att;        ///< [q_dim] attention output, all heads
  vector_view<float> o;          ///< [dim] a block's output, before the residual add
  vector_view<float> gate_up;    ///< [2 hidden_dim] gate|up
  vector_view<float> logits;     ///< [vocab] decode's, and prefill's last row's
  vector_view<float> cos, sin;   ///< [rope_dim] the global layers' RoPE table at the position
  vector_view<float> cos_local, sin_local;  ///< [rope_dim] the local layers' (empty: no local layers)
  vector_view<float> attention;  ///< decode or prefill attention workspace, the larger
  // One pass of rows, a row per token: a prefill chunk (max_prefill rows) or a batched
  // decode step (max_batch rows), the more.
  matrix_view<float> rows_x, rows_xn, rows_qkv, rows_att, rows_o, rows_gate_up;  ///< as above, per row
  matrix_view<float> rows_q;     ///< [q_dim] Q after RoPE, gathered for attention
  matrix_view<float> rows_cos, rows_sin, rows_cos_local, rows_sin_local;  ///< [rope_dim]
  matrix_view<float> rows_logits;  ///< [vocab] per session of a batched decode step (max_batch rows)

  std::size_t floats = 0;                ///< all of the above
  std::size_t gemv_workspace_bytes = 0;  ///< one activation row
  std::size_t gemm_workspace_bytes = 0;  ///< a pass's activation rows

  /// The buffers of config `c` for the options' threads, prefill chunks and batches, from
  /// `base` (null: only the sizes).
  template <class Formats>
  static llama_buffers lay_out(const llama_config& c, const llama_options& options, float* base) noexcept {
    const std::size_t dim = c.dim, q_dim = c.q_dim(), kv = c.kv_dim(), hidden = c.hidden_dim, head = c.head_dim();
    const std::size_t rope = c.rope_dim, local_rope = c.has_local_layers() ? rope : 0;
    const std::size_t threads = std::max<std::size_t>(1, options.max_threads);
    // A batch of one runs decode's buffers.
    const std::size_t batch = options.max_batch > 1 ? options.max_batch : 0;
    const std::size_t rows = std::max(options.max_prefill, batch);
    llama_buffers b;
    const auto next = [&](std::size_t n) {
      float* p = base == nullptr ? nullptr : base + b.floats;
      b.floats += n;
      return p;
    };
    const auto vector = [&](std::size_t n) { return vector_view<float>(next(n), n); };
    const auto matrix = [&](std::size_t cols) { return matrix_view<float>(next(rows * cols), rows, cols); };
    b.x = vector(dim), b.xn = vector(dim), b.qkv = vector(q_dim + 2 * kv), b.att = vector(q_dim), b.o = vector(dim);
    b.gate_up = vector(2 * hidden), b.logits = vector(c.vocab_size);
    b.cos = vector(rope), b.sin = vector(rope), b.cos_local = vector(local_rope), b.sin_local = vector(local_rope);
    const std::size_t splits = c.n_kv_heads == 0 ? 1 : (threads + c.n_kv_heads - 1) / c.n_kv_heads;
    b.attention = vector(std::max(attention::decode_workspace_floats(c.n_heads, head, splits),
                                  c.n_kv_heads == 0 || options.max_prefill == 0
                                      ? 0
                                      : attention::prefill_workspace_floats(c.n_heads, c.n_kv_heads, head, threads)));
    b.rows_x = matrix(dim), b.rows_xn = matrix(dim), b.rows_qkv = matrix(q_dim + 2 * kv), b.rows_att = matrix(q_dim);
    b.rows_o = matrix(dim), b.rows_gate_up = matrix(2 * hidden), b.rows_q = matrix(q_dim);
    b.rows_cos = matrix(rope), b.rows_sin = matrix(rope);
    b.rows_cos_local = matrix(local_rope), b.rows_sin_local = matrix(local_rope);
    b.rows_logits = matrix_view<float>(next(batch * c.vocab_size), batch, c.vocab_size);
    const std::size_t widest = std::max({dim, hidden, q_dim});
    b.gemv_workspace_bytes = matvec_workspace_bytes<Formats>(widest);
    b.gemm_workspace_bytes = rows == 0 ? 0 : matmul_workspace_bytes<Formats>(rows, widest);
    return b;
  }
};

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

/// Runs every layer's and the classifier's matrices through `arranger`, into `layers` (one
/// per layer) and `output` unless they are empty / null (then it only counts).
template <class Formats>
result<void> arrange_weights(const llama_weights& w, weight_arranger<Formats>& arranger,
                             std::span<layer_matrices> layers, weight_matrix* output) {
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const llama_layer& y = w.layers[l];
    auto qkv = arranger.place({y.wq, y.wk, y.wv});
    if (!qkv) return qkv.error();
    auto wo = arranger.place(y.wo);
    if (!wo) return wo.error();
    auto gate_up = arranger.place({y.w_gate, y.w_up});
    if (!gate_up) return gate_up.error();
    auto down = arranger.place(y.w_down);
    if (!down) return down.error();
    if (!layers.empty()) layers[l] = {*qkv, *gate_up, *wo, *down};
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
  HEDGE_TRY(detail::arrange_weights(weights, counter, {}, nullptr));
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

  /// Whether the KV caches live in the model's memory block (KvStorage = buffer_storage):
  /// otherwise their storage allocates itself (heap_storage) or is held (static_storage).
  static constexpr bool caches_in_memory = std::same_as<KvStorage, buffer_storage<std::byte>>;

  /// Bytes of the one block a model of `weights` made with `options` keeps everything it
  /// owns in: its tables of layers, the weight arena (unless options.weight_arena is given),
  /// the scratch, the matmul workspace, and the KV caches where caches_in_memory. make()
  /// allocates it; make_in() takes it from the caller.
  static result<std::size_t> memory_bytes(const llama_weights& weights, const llama_options& options = {}) noexcept {
    auto layout = lay_out_memory(weights, with_context(options, weights.config));
    if (!layout) return layout.error();
    return layout->end;
  }

  /// Checks the weights against their config, packs the repacked and fused matrices, and
  /// sets up the cache and scratch in one allocation of memory_bytes (the only one).
  /// `weights` must outlive the model.
  static result<llama> make(const llama_weights& weights, const llama_options& options = {}) noexcept {
    return make(weights, options, [](std::span<const std::byte>) {});
  }

  /// As above, and calls `released` with the bytes of each of the weights' matrices as soon
  /// as its packed copy is made: the model never reads them again (the caller may drop
  /// their pages: os::mapped_file::release). Not called after make() returns.
  static result<llama> make(const llama_weights& weights, const llama_options& options,
                            detail::released_bytes released) noexcept {
    auto bytes = memory_bytes(weights, options);
    if (!bytes) return bytes.error();
    auto owned = heap_storage<std::byte>::make(std::max<std::size_t>(1, *bytes));
    if (!owned) return owned.error();
    auto m = make_in(weights, options, owned->span(), released);
    if (!m) return m.error();
    m->memory_ = std::move(*owned);
    return m;
  }

  /// As make(), in the caller's `memory` (memory_bytes(weights, options) bytes, 64-byte
  /// aligned, outliving the model): with KvStorage = buffer_storage<std::byte>, no heap (a
  /// firmware image's static array).
  static result<llama> make_in(const llama_weights& weights, const llama_options& options, std::span<std::byte> memory,
                               detail::released_bytes released = [](std::span<const std::byte>) {}) noexcept {
    const auto& c = weights.config;
    HEDGE_TRY(c.check());
    HEDGE_TRY(check_shapes(weights));
    if (c.head_dim() > attention::attention_max_head_dim)
      return error{errc::unsupported} << "head dimension " << c.head_dim() << " above the attention kernels' "
                                      << attention::attention_max_head_dim;
    if (options.max_batch == 0) return error{errc::invalid_argument} << "max_batch of 0 sessions";
    if (options.max_batch > options.max_sessions)
      return error{errc::invalid_argument} << "max_batch of " << options.max_batch << " above max_sessions of "
                                           << options.max_sessions;
    llama m;
    m.weights_ = &weights;
    m.options_ = with_context(options, c);
    auto layout = lay_out_memory(weights, m.options_);
    if (!layout) return layout.error();
    if (memory.size() < layout->end)
      return error{errc::capacity_exceeded} << "a model memory of " << memory.size() << " bytes, the model needs "
                                            << layout->end;
    if (reinterpret_cast<std::uintptr_t>(memory.data()) % detail::weight_arena_alignment != 0)
      return error{errc::misaligned} << "the model memory is not " << detail::weight_arena_alignment << "-byte aligned";
    std::byte* base = memory.data();
    auto* layers = reinterpret_cast<detail::layer_matrices*>(base + layout->layers);
    for (std::size_t l = 0; l < c.n_layers; ++l) ::new (static_cast<void*>(layers + l)) detail::layer_matrices{};
    m.layers_ = {layers, c.n_layers};
    m.kv_layer_ = {reinterpret_cast<std::uint32_t*>(base + layout->kv_layer), c.n_layers};
    const std::span<std::byte> arena = options.weight_arena.empty()
                                           ? std::span<std::byte>(base + layout->arena, layout->arena_bytes)
                                           : options.weight_arena;
    HEDGE_TRY(m.arrange(weights, arena, layout->arena_bytes, released));
    // LongRoPE: the long factors for a context beyond the one the short ones were trained for.
    const std::size_t original_context = c.rope_original_context != 0 ? c.rope_original_context : c.context_length;
    m.rope_factors_ = !weights.rope_factors_long.empty() && m.options_.context > original_context
                          ? weights.rope_factors_long
                          : weights.rope_factors;
    HEDGE_TRY(m.make_caches(layout->caches, {base + layout->kv_global, layout->kv_global_bytes},
                            {base + layout->kv_ring, layout->kv_ring_bytes}));
    auto* scratch = reinterpret_cast<float*>(base + layout->scratch);
    std::fill_n(scratch, layout->scratch_floats, 0.0f);
    m.buffers_ = llama_buffers::lay_out<Formats>(c, m.options_, scratch);
    m.workspace_ = {base + layout->workspace, layout->workspace_bytes};
    m.batch_positions_ = {reinterpret_cast<std::uint64_t*>(base + layout->batch_positions), m.options_.max_batch};
    return m;
  }

  [[nodiscard]] const llama_config& config() const noexcept { return weights_->config; }
  [[nodiscard]] const llama_buffers& buffers() const noexcept { return buffers_; }
  [[nodiscard]] std::size_t context() const noexcept { return options_.context; }
  [[nodiscard]] const cache_type& cache() const noexcept { return cache_; }
  /// Bytes of the repacked and fused matrices (in the caller's arena, or the model's).
  [[nodiscard]] std::size_t weight_arena_bytes() const noexcept { return arena_bytes_; }

  /// The local layers' ring (sliding window + max_prefill positions per session); not
  /// initialised (layout().total_bytes == 0) where they share cache().
  [[nodiscard]] const cache_type& local_cache() const noexcept { return local_cache_; }

  /// A new, empty session.
  result<kv::kv_seq> create_session() noexcept {
    auto s = cache_.create();
    if (!s || !local_ring_) return s;
    return paired(*s, local_cache_.create());
  }
  /// Positions the session holds.
  result<std::uint64_t> length(kv::kv_seq s) const noexcept { return cache_.length(s); }
  /// Drops the positions from `length` on. With a local ring, an error (nothing changed)
  /// where the window at `length` needs positions the ring has overwritten.
  result<void> rollback(kv::kv_seq s, std::uint64_t length) noexcept {
    if (local_ring_) HEDGE_TRY(local_cache_.truncate(s, length));
    return cache_.truncate(s, length);
  }
  /// A new session sharing this one's positions (copy-on-write).
  result<kv::kv_seq> fork(kv::kv_seq s) noexcept {
    auto child = cache_.fork(s);
    if (!child || !local_ring_) return child;
    return paired(*child, local_cache_.fork(s));
  }
  result<void> release(kv::kv_seq s) noexcept {
    if (local_ring_) HEDGE_TRY(local_cache_.release(s));
    return cache_.release(s);
  }

  /// Runs `token` at the session's next position; returns the logits of the next token
  /// (valid until the next call). A full session is an error that leaves it unchanged.
  template <Executor E>
  result<std::span<const float>> decode(kv::kv_seq s, std::int32_t token, E& executor) noexcept {
    const auto& c = weights_->config;
    if (token < 0 || static_cast<std::uint32_t>(token) >= c.vocab_size)
      return error{errc::out_of_range} << "token " << token << " outside the vocabulary of " << c.vocab_size;
    auto at = extend(s, 1);
    if (!at) return at.error();
    const std::uint64_t pos = *at;
    auto result = step(s, token, pos, executor);
    if (!result) static_cast<void>(rollback(s, pos));  // leave the session as it was
    return result;
  }

  result<std::span<const float>> decode(kv::kv_seq s, std::int32_t token) noexcept {
    exec::serial serial;
    return decode(s, token, serial);
  }

  /// Runs `tokens` at the session's next positions, all rows of a chunk through each layer
  /// together; returns the logits after the last one. Checks every token and the room left
  /// before running any; an error leaves the session as it was (or, where a local ring
  /// has already overwritten the positions it would return to, says so: release it).
  template <Executor E>
  result<std::span<const float>> prefill(kv::kv_seq s, std::span<const std::int32_t> tokens, E& executor) noexcept {
    HEDGE_TRY(prefill_rows(s, tokens, {}, executor));
    return std::span<const float>(buffers_.logits.data(), weights_->config.vocab_size);
  }

  result<std::span<const float>> prefill(kv::kv_seq s, std::span<const std::int32_t> tokens) noexcept {
    exec::serial serial;
    return prefill(s, tokens, serial);
  }

  /// As prefill, with the logits after every token: row i of `logits` ([tokens.size() x
  /// vocab]) after tokens[i], as decode would give them but for the attention's summation
  /// order. For scoring a text (model/perplexity.hpp): the layers and the classifier run once
  /// per chunk of rows (GEMMs).
  template <Executor E>
  result<void> prefill_logits(kv::kv_seq s, std::span<const std::int32_t> tokens, matrix_view<float> logits,
                              E& executor) noexcept {
    if (logits.rows() != tokens.size() || logits.cols() != weights_->config.vocab_size)
      return error{errc::shape_mismatch} << "prefill_logits: " << logits.rows() << " x " << logits.cols()
                                         << " logits for " << tokens.size() << " tokens of a vocabulary of "
                                         << weights_->config.vocab_size;
    return prefill_rows(s, tokens, logits, executor);
  }

  result<void> prefill_logits(kv::kv_seq s, std::span<const std::int32_t> tokens, matrix_view<float> logits) noexcept {
    exec::serial serial;
    return prefill_logits(s, tokens, logits, serial);
  }

  /// Runs `tokens[i]` at the next position of `sessions[i]`, every session's row through
  /// each layer together (one pass over the weights); returns the next token's logits, a
  /// row per session in order (valid until the next call). Checks the count (1 to
  /// max_batch), every token, that no session comes twice and that each has room before
  /// running any; an error leaves every session as it was.
  template <Executor E>
  result<matrix_view<const float>> decode_batch(std::span<const kv::kv_seq> sessions,
                                                std::span<const std::int32_t> tokens, E& executor) noexcept {
    const auto& c = weights_->config;
    const std::size_t n = sessions.size();
    if (n == 0 || n > options_.max_batch || tokens.size() != n)
      return error{errc::invalid_argument} << "a batch of " << n << " sessions and " << tokens.size()
                                           << " tokens (1 to max_batch " << options_.max_batch << " of each)";
    for (std::size_t i = 0; i < n; ++i) {
      if (tokens[i] < 0 || static_cast<std::uint32_t>(tokens[i]) >= c.vocab_size)
        return error{errc::out_of_range} << "the token of batch row " << i << " is " << tokens[i]
                                         << ", outside the vocabulary of " << c.vocab_size;
      for (std::size_t j = 0; j < i; ++j)
        if (sessions[j].index == sessions[i].index)
          return error{errc::invalid_argument} << "session " << sessions[i].index << " in batch rows " << j << " and "
                                               << i;
    }
    // One session: decode's matrix-vector products, which outrun a GEMM of one row (and
    // equal it bit for bit where the layout makes GEMM rows GEMVs).
    if (n == 1) {
      auto logits = decode(sessions[0], tokens[0], executor);
      if (!logits) return error{logits.error().code()} << "batch row 0: " << logits.error().message();
      return matrix_view<const float>(logits->data(), 1, c.vocab_size);
    }
    const std::span<std::uint64_t> positions(batch_positions_.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      auto at = extend(sessions[i], 1);
      if (!at) {
        for (std::size_t j = 0; j < i; ++j) static_cast<void>(rollback(sessions[j], positions[j]));
        return error{at.error().code()} << "batch row " << i << ": " << at.error().message();
      }
      positions[i] = *at;
    }
    const pass_rows rows{.tokens = tokens, .sessions = sessions, .positions = positions, .first = 0};
    auto done = layers(rows, executor);
    const auto logits = buffers_.rows_logits.row_range(0, n);
    if (done) done = classify(n, logits, executor);
    if (!done) {
      for (std::size_t i = 0; i < n; ++i) static_cast<void>(rollback(sessions[i], positions[i]));
      return done.error();
    }
    return matrix_view<const float>(logits);
  }

 private:
  /// prefill's work: the classifier on the last row, or on every row into `logits` when it is
  /// not empty.
  template <Executor E>
  result<void> prefill_rows(kv::kv_seq s, std::span<const std::int32_t> tokens, matrix_view<float> logits,
                            E& executor) noexcept {
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
    if (options_.max_prefill == 0) {  // no prefill buffers: one token at a time
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        auto at = extend(s, 1);
        result<std::span<const float>> done =
            at.ok() ? step(s, tokens[i], *at, executor) : result<std::span<const float>>(at.error());
        if (!done) {
          if (!rollback(s, *have))
            return error{done.error().code()} << done.error().message() << "; the local layers' ring no longer holds "
                                              << "the window at " << *have << " positions: release the session";
          return done.error();
        }
        if (logits.rows() != 0) std::copy(done->begin(), done->end(), logits.row(i).data());
      }
      return ok();
    }
    for (std::size_t first = 0; first < tokens.size(); first += options_.max_prefill) {
      const auto chunk = tokens.subspan(first, std::min(options_.max_prefill, tokens.size() - first));
      auto at = extend(s, chunk.size());
      const bool last = first + chunk.size() == tokens.size() && logits.rows() == 0;
      result<void> done = at.ok() ? prefill_chunk(s, chunk, *at, last, executor) : result<void>(at.error());
      if (done.ok() && logits.rows() != 0)
        done = classify(chunk.size(), logits.row_range(first, chunk.size()), executor);
      if (!done) {
        if (!rollback(s, *have))
          return error{done.error().code()} << done.error().message() << "; the local layers' ring no longer holds "
                                            << "the window at " << *have << " positions: release the session";
        return done.error();
      }
    }
    return ok();
  }

  /// The rows of one pass through the layers: a prefill chunk (one session's consecutive
  /// positions from `first`) or a batched decode step (row i at `positions[i]` of `sessions[i]`).
  struct pass_rows {
    std::span<const std::int32_t> tokens;
    std::span<const kv::kv_seq> sessions;       ///< one (a chunk) or one per row (a batch)
    std::span<const std::uint64_t> positions;   ///< a batch's, per row; empty for a chunk
    std::uint64_t first = 0;                    ///< a chunk's first position
    [[nodiscard]] bool chunk() const noexcept { return positions.empty(); }
    [[nodiscard]] std::size_t size() const noexcept { return tokens.size(); }
    [[nodiscard]] kv::kv_seq session(std::size_t i) const noexcept { return sessions[chunk() ? 0 : i]; }
    [[nodiscard]] std::uint64_t position(std::size_t i) const noexcept { return chunk() ? first + i : positions[i]; }
  };

  /// The caches a model keeps: the global layers' (every layer's without a ring) and, where
  /// it saves memory, the local layers' ring of sliding_window + max_prefill positions.
  struct cache_plan {
    bool local_ring = false;
    std::uint32_t global_layers = 0, ring_layers = 0;
    kv::kv_config global{}, ring{};
  };
  static cache_plan plan_caches(const llama_config& c, const llama_options& options) noexcept {
    cache_plan p;
    std::size_t local = 0;
    for (std::uint32_t l = 0; l < c.n_layers; ++l) local += c.local_layer(l) ? 1 : 0;
    const std::size_t ring = std::size_t{c.sliding_window} + options.max_prefill;
    p.local_ring = local != 0 && local < c.n_layers && ring < options.context;
    p.ring_layers = p.local_ring ? static_cast<std::uint32_t>(local) : 0;
    p.global_layers = c.n_layers - p.ring_layers;
    p.global = kv::kv_config{.max_sequences = options.max_sessions, .max_tokens = options.context};
    p.ring = kv::kv_config{.max_sequences = options.max_sessions, .max_tokens = ring, .window = c.sliding_window};
    return p;
  }

  /// Where make_in() puts each part of the model's memory (byte offsets, each 64-byte aligned).
  struct memory_layout {
    std::size_t layers = 0, kv_layer = 0, batch_positions = 0;
    std::size_t arena = 0, arena_bytes = 0;
    std::size_t scratch = 0, scratch_floats = 0;
    std::size_t workspace = 0, workspace_bytes = 0;
    std::size_t kv_global = 0, kv_global_bytes = 0, kv_ring = 0, kv_ring_bytes = 0;
    std::size_t end = 0;
    cache_plan caches;
  };
  static result<memory_layout> lay_out_memory(const llama_weights& weights, const llama_options& options) noexcept {
    const auto& c = weights.config;
    memory_layout m;
    const auto place = [&m](std::size_t bytes) {
      const std::size_t at = (m.end + detail::weight_arena_alignment - 1) / detail::weight_arena_alignment *
                             detail::weight_arena_alignment;
      m.end = at + bytes;
      return at;
    };
    m.layers = place(c.n_layers * sizeof(detail::layer_matrices));
    m.kv_layer = place(c.n_layers * sizeof(std::uint32_t));
    m.batch_positions = place(options.max_batch * sizeof(std::uint64_t));
    auto arena = llama_weight_arena_bytes<Formats>(weights, options);
    if (!arena) return arena.error();
    m.arena_bytes = *arena;
    m.arena = place(options.weight_arena.empty() ? m.arena_bytes : 0);
    const llama_buffers sizes = llama_buffers::lay_out<Formats>(c, options, nullptr);
    m.scratch_floats = sizes.floats;
    m.scratch = place(sizes.floats * sizeof(float));
    m.workspace_bytes = std::max<std::size_t>(1, std::max(sizes.gemv_workspace_bytes, sizes.gemm_workspace_bytes));
    m.workspace = place(m.workspace_bytes);
    m.caches = plan_caches(c, options);
    if constexpr (caches_in_memory) {
      m.kv_global_bytes =
          kv::kv_storage_bytes<KvElem>(kv::kv_dynamic_shape{m.caches.global_layers, c.n_kv_heads, c.head_dim()},
                                       m.caches.global);
      m.kv_global = place(m.kv_global_bytes);
      if (m.caches.local_ring) {
        m.kv_ring_bytes = kv::kv_storage_bytes<KvElem>(
            kv::kv_dynamic_shape{m.caches.ring_layers, c.n_kv_heads, c.head_dim()}, m.caches.ring);
        m.kv_ring = place(m.kv_ring_bytes);
      }
    }
    return m;
  }

  /// `options` with its context resolved (0: the model's trained context).
  static llama_options with_context(llama_options options, const llama_config& c) noexcept {
    if (options.context == 0) options.context = c.context_length;
    return options;
  }

  /// Sets up the caches `plan` names, in `global` and `ring` where caches_in_memory.
  result<void> make_caches(const cache_plan& plan, std::span<std::byte> global, std::span<std::byte> ring) noexcept {
    const auto& c = weights_->config;
    local_ring_ = plan.local_ring;
    std::uint32_t next[2] = {0, 0};  // next index in the global cache, in the ring
    for (std::uint32_t l = 0; l < c.n_layers; ++l) kv_layer_[l] = next[ring_layer(l) ? 1 : 0]++;
    const auto make_cache = [](cache_type& cache, const kv::kv_dynamic_shape& shape, const kv::kv_config& config,
                               [[maybe_unused]] std::span<std::byte> memory) -> result<void> {
      if constexpr (caches_in_memory) {
        auto storage = KvStorage::make(memory);
        if (!storage) return storage.error();
        return cache.init(shape, config, *storage);
      } else {
        return cache.init(shape, config);
      }
    };
    HEDGE_TRY(make_cache(cache_, kv::kv_dynamic_shape{next[0], c.n_kv_heads, c.head_dim()}, plan.global, global));
    if (!local_ring_) return ok();
    return make_cache(local_cache_, kv::kv_dynamic_shape{next[1], c.n_kv_heads, c.head_dim()}, plan.ring, ring);
  }

  /// Whether layer l keeps its K/V in the local ring.
  [[nodiscard]] bool ring_layer(std::size_t l) const noexcept {
    return local_ring_ && weights_->config.local_layer(static_cast<std::uint32_t>(l));
  }
  /// The cache layer l writes and reads (its index there: kv_layer_[l]).
  [[nodiscard]] cache_type& layer_cache(std::size_t l) noexcept { return ring_layer(l) ? local_cache_ : cache_; }

  /// The ring's sequence made with the global cache's `s` (create, fork): the two caches
  /// take the same steps, so their sequence indices agree; a failure undoes `s`.
  result<kv::kv_seq> paired(kv::kv_seq s, result<kv::kv_seq> local) noexcept {
    if (local && local->index == s.index) return s;
    static_cast<void>(cache_.release(s));
    if (!local) return local.error();
    static_cast<void>(local_cache_.release(*local));
    return error{errc::invalid_argument} << "the local ring's session " << local->index << " is not session "
                                         << s.index;
  }

  /// Reserves `tokens` more positions in the session's caches; the first one.
  result<std::uint64_t> extend(kv::kv_seq s, std::size_t tokens) noexcept {
    auto at = cache_.extend(s, tokens);
    if (!at || !local_ring_) return at;
    auto local = local_cache_.extend(s, tokens);
    if (local && *local == *at) return at;
    static_cast<void>(cache_.truncate(s, *at));
    if (!local) return local.error();
    static_cast<void>(local_cache_.truncate(s, *at));
    return error{errc::invalid_argument} << "the local ring is at position " << *local << ", the cache at " << *at;
  }

  // The steps of a layer that differ between architectures, each on one token's row and
  // each a no-op where the config says the architecture lacks it (config.hpp's table).

  /// x = embedding[token], times the embedding scale (Gemma: sqrt(dim)).
  result<void> embed(std::int32_t token, vector_view<float> x) const noexcept {
    HEDGE_TRY(dequantize_row<Formats>(embedding_, static_cast<std::size_t>(token), x));
    if (weights_->config.embedding_scale != 1.0f) kernels::scale(x, weights_->config.embedding_scale, x);
    return ok();
  }

  /// The RoPE tables of the global layers, and of the local ones where there are any.
  result<void> rope_tables(std::uint64_t pos, vector_view<float> cos, vector_view<float> sin,
                           vector_view<float> cos_local, vector_view<float> sin_local) const noexcept {
    const auto& c = weights_->config;
    const kernels::rope_frequencies global{.base = c.rope_theta, .position_scale = c.rope_scale,
                                           .factors = rope_factors_, .magnitude = c.rope_attention_factor};
    HEDGE_TRY(kernels::rope_table(c.rope_layout, pos, global, cos, sin));
    if (cos_local.empty()) return ok();
    const kernels::rope_frequencies local{.base = c.rope_theta_local != 0.0f ? c.rope_theta_local : c.rope_theta,
                                          .position_scale = c.rope_scale_local,
                                          .factors = rope_factors_,
                                          .magnitude = c.rope_attention_factor};
    return kernels::rope_table(c.rope_layout, pos, local, cos_local, sin_local);
  }

  /// Q|K|V of one token as attention takes them: biases added (qwen2), each Q and K head
  /// RMS-normalised (qwen3, gemma3), then rotated over the first rope_dim elements of each
  /// head with the layer's table (none in smollm3's no-RoPE layers).
  void attention_inputs(std::size_t l, vector_view<float> qkv, vector_view<const float> cos,
                        vector_view<const float> sin) const noexcept {
    const auto& c = weights_->config;
    const llama_layer& y = weights_->layers[l];
    const std::size_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), head = c.head_dim();
    const auto q = qkv.subview(0, q_dim), k = qkv.subview(q_dim, kv_dim), v = qkv.subview(q_dim + kv_dim, kv_dim);
    if (c.qkv_bias) {
      kernels::add(q, y.q_bias, q);
      kernels::add(k, y.k_bias, k);
      kernels::add(v, y.v_bias, v);
    }
    if (c.qk_norm) {
      for (std::size_t h = 0; h < c.n_heads; ++h)
        kernels::rmsnorm(q.subview(h * head, head), y.q_norm, c.norm_eps, q.subview(h * head, head));
      for (std::size_t h = 0; h < c.n_kv_heads; ++h)
        kernels::rmsnorm(k.subview(h * head, head), y.k_norm, c.norm_eps, k.subview(h * head, head));
    }
    if (!c.rotary_layer(static_cast<std::uint32_t>(l))) return;
    kernels::rope(c.rope_layout, matrix_view<float>(q.data(), c.n_heads, c.rope_dim, head), cos, sin);
    kernels::rope(c.rope_layout, matrix_view<float>(k.data(), c.n_kv_heads, c.rope_dim, head), cos, sin);
  }

  /// x += o, o RMS-normalised first where the architecture has post-block norms (Gemma).
  void add_residual(vector_view<const float> post_norm, vector_view<float> o, vector_view<float> x) const noexcept {
    if (!post_norm.empty()) kernels::rmsnorm(o, post_norm, weights_->config.norm_eps, o);
    kernels::add(x, o, x);
  }

  /// gate = act(gate) * up: SwiGLU, or GeGLU with tanh GELU (Gemma).
  void gated_activation(vector_view<float> gate, vector_view<const float> up) const noexcept {
    if (weights_->config.activation == ffn_activation::silu) return kernels::silu_mul(gate, up, gate);
    kernels::gelu(gate, gate);
    kernels::mul(gate, up, gate);
  }

  /// c tanh(logits / c), the final soft-capping (Gemma 2).
  void cap_logits(vector_view<float> logits) const noexcept {
    const float cap = weights_->config.final_softcap;
    if (cap == 0.0f) return;
    for (float& z : logits) z = cap * std::tanh(z / cap);
  }

  [[nodiscard]] attention::attention_params attention_parameters() const noexcept {
    const auto& c = weights_->config;
    return {.scale = c.attention_scale != 0.0f ? c.attention_scale
                                               : 1.0f / std::sqrt(static_cast<float>(c.head_dim())),
            .softcap = c.attention_softcap};
  }

  /// The KV positions layer l attends to: the last sliding_window ones in a local layer.
  template <class View>
  [[nodiscard]] View layer_view(const View& seen, std::size_t l) const noexcept {
    const auto& c = weights_->config;
    return c.local_layer(static_cast<std::uint32_t>(l)) ? seen.windowed(c.sliding_window) : seen;
  }

  /// The forward pass of one token at `pos` (its cache position already reserved).
  template <Executor E>
  result<std::span<const float>> step(kv::kv_seq s, std::int32_t token, std::uint64_t pos, E& executor) noexcept {
    const auto& w = *weights_;
    const auto& c = w.config;
    const llama_buffers& b = buffers_;
    const std::size_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
    const auto q = b.qkv.subview(0, q_dim), k = b.qkv.subview(q_dim, kv_dim), v = b.qkv.subview(q_dim + kv_dim, kv_dim);
    const auto gate = b.gate_up.subview(0, hidden), up = b.gate_up.subview(hidden, hidden);
    const std::span<std::byte> ws = workspace_.first(b.gemv_workspace_bytes);
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

    HEDGE_TRY(embed(token, b.x));
    HEDGE_TRY(rope_tables(pos, b.cos, b.sin, b.cos_local, b.sin_local));
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      const llama_layer& y = w.layers[l];
      const detail::layer_matrices& layer = layers_[l];
      const bool local = c.local_layer(static_cast<std::uint32_t>(l));
      // Attention block.
      kernels::rmsnorm(b.x, y.attn_norm, c.norm_eps, b.xn);
      HEDGE_TRY(project(layer.qkv, b.xn, b.qkv));
      attention_inputs(l, b.qkv, local ? b.cos_local : b.cos, local ? b.sin_local : b.sin);
      cache_type& layer_kv = layer_cache(l);
      const std::size_t kv_l = kv_layer_[l];
      HEDGE_TRY(layer_kv.write(s, kv_l, pos, k.span(), v.span()));
      HEDGE_TRY(attend(s, l, q, b.att, executor));
      HEDGE_TRY(matmul(layer.wo, b.att, b.o));
      add_residual(y.post_attn_norm, b.o, b.x);
      // Feed-forward block.
      kernels::rmsnorm(b.x, y.ffn_norm, c.norm_eps, b.xn);
      HEDGE_TRY(project(layer.gate_up, b.xn, b.gate_up));
      gated_activation(gate, up);
      HEDGE_TRY(matmul(layer.w_down, gate, b.o));
      add_residual(y.post_ffn_norm, b.o, b.x);
    }
    kernels::rmsnorm(b.x, w.output_norm, c.norm_eps, b.xn);
    HEDGE_TRY(matmul(output_, b.xn, b.logits));
    cap_logits(b.logits);
    return std::span<const float>(b.logits.data(), b.logits.size());
  }

  /// One token's decode attention in layer l over session s's cache (the last window in a
  /// local layer): split across the executor's threads where the K/V it reads (counted at
  /// f32; a quantized cache reads less) is worth sharing, else on the calling thread. A
  /// session's attention is thereby the same alone and in a batch.
  template <Executor E>
  result<void> attend(kv::kv_seq s, std::size_t l, vector_view<const float> q, vector_view<float> out,
                      E& executor) noexcept {
    const auto& c = weights_->config;
    const std::size_t kv_l = kv_layer_[l];
    auto seen = layer_cache(l).view(s);
    if (!seen) return seen.error();
    const auto kv = layer_view(*seen, l);
    const attention::attention_params params = attention_parameters();
    const std::size_t threads = std::min(executor.concurrency(), std::max<std::size_t>(1, options_.max_threads));
    const std::size_t kv_bytes = 2 * c.kv_dim() * (kv.end() - kv.begin()) * sizeof(float);
    if (threads == 1 || kv_bytes < options_.parallel_min_bytes) {
      exec::serial serial;
      return attention::decode_attention(kv, kv_l, q, out, params, buffers_.attention, serial, 1);
    }
    const std::size_t splits = attention::decode_splits(c.n_kv_heads, kv.end() - kv.begin(), threads);
    return attention::decode_attention(kv, kv_l, q, out, params, buffers_.attention, executor, splits);
  }

  /// The forward pass of `tokens` at positions pos, pos + 1, ... (reserved in the cache),
  /// all rows through each layer together; the classifier runs on the last row when `last`.
  template <Executor E>
  result<void> prefill_chunk(kv::kv_seq s, std::span<const std::int32_t> tokens, std::uint64_t pos, bool last,
                             E& executor) noexcept {
    const pass_rows rows{.tokens = tokens, .sessions = {&s, 1}, .positions = {}, .first = pos};
    HEDGE_TRY(layers(rows, executor));
    if (!last) return ok();
    const auto& w = *weights_;
    const llama_buffers& b = buffers_;
    const auto final_x = b.rows_x.row(rows.size() - 1), final_row = b.rows_xn.row(rows.size() - 1);
    kernels::rmsnorm(final_x, w.output_norm, w.config.norm_eps, final_row);
    HEDGE_TRY(matvec<Formats>(output_, final_row, b.logits,
                              std::span<std::byte>(workspace_.data(), b.gemv_workspace_bytes), executor));
    cap_logits(b.logits);
    return ok();
  }

  /// The classifier on the first `rows` rows of the last pass: logits.row(i) for row i.
  template <Executor E>
  result<void> classify(std::size_t rows, matrix_view<float> logits, E& executor) noexcept {
    const auto& w = *weights_;
    const llama_buffers& b = buffers_;
    const auto x = b.rows_x.row_range(0, rows), xn = b.rows_xn.row_range(0, rows);
    for (std::size_t i = 0; i < rows; ++i) kernels::rmsnorm(x.row(i), w.output_norm, w.config.norm_eps, xn.row(i));
    HEDGE_TRY(matmul<Formats>(output_, xn, logits, std::span<std::byte>(workspace_.data(), b.gemm_workspace_bytes),
                              executor));
    for (std::size_t i = 0; i < rows; ++i) cap_logits(logits.row(i));
    return ok();
  }

  /// The layers on the rows of a pass (their positions reserved in the cache), all rows
  /// through each layer together: a prefill chunk's attention is causal over its session,
  /// a batch row's is decode's over its own session.
  template <Executor E>
  result<void> layers(const pass_rows& r, E& executor) noexcept {
    const auto& w = *weights_;
    const auto& c = w.config;
    const llama_buffers& b = buffers_;
    const std::size_t rows = r.size(), q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
    const auto chunk = [rows](matrix_view<float> m) { return m.row_range(0, rows); };
    const auto x = chunk(b.rows_x), xn = chunk(b.rows_xn), qkv = chunk(b.rows_qkv), q = chunk(b.rows_q);
    const auto att = chunk(b.rows_att), o = chunk(b.rows_o), gate_up = chunk(b.rows_gate_up);
    const auto cos = chunk(b.rows_cos), sin = chunk(b.rows_sin);
    const auto cos_local = chunk(b.rows_cos_local), sin_local = chunk(b.rows_sin_local);
    const auto all = [rows](matrix_view<float> m) { return vector_view<float>(m.data(), rows * m.cols()); };
    const std::span<std::byte> ws = workspace_.first(b.gemm_workspace_bytes);
    const auto project = [&](const detail::projection& m, matrix_view<const float> in,
                             matrix_view<float> out) -> result<void> {
      std::size_t at = 0;
      for (const weight_matrix& part : m.matrices()) {
        HEDGE_TRY(matmul<Formats>(part, in, out.block(0, at, rows, part.rows), ws, executor));
        at += part.rows;
      }
      return ok();
    };
    const auto each_row = [rows](auto&& f) {
      for (std::size_t i = 0; i < rows; ++i) f(i);
    };
    const attention::attention_params params = attention_parameters();
    detail::at_most<E> capped{executor, std::max<std::size_t>(1, options_.max_threads)};

    for (std::size_t i = 0; i < rows; ++i) {
      HEDGE_TRY(embed(r.tokens[i], x.row(i)));
      HEDGE_TRY(rope_tables(r.position(i), cos.row(i), sin.row(i), cos_local.row(i), sin_local.row(i)));
    }
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      const llama_layer& y = w.layers[l];
      const detail::layer_matrices& layer = layers_[l];
      const bool local = c.local_layer(static_cast<std::uint32_t>(l));
      // Attention block.
      each_row([&](std::size_t i) { kernels::rmsnorm(x.row(i), y.attn_norm, c.norm_eps, xn.row(i)); });
      HEDGE_TRY(project(layer.qkv, xn, qkv));
      cache_type& layer_kv = layer_cache(l);
      const std::size_t kv_l = kv_layer_[l];
      for (std::size_t i = 0; i < rows; ++i) {
        const auto row = qkv.row(i);
        attention_inputs(l, row, local ? cos_local.row(i) : cos.row(i), local ? sin_local.row(i) : sin.row(i));
        std::copy_n(row.data(), q_dim, q.row(i).data());
        HEDGE_TRY(layer_kv.write(r.session(i), kv_l, r.position(i), row.subview(q_dim, kv_dim).span(),
                                 row.subview(q_dim + kv_dim, kv_dim).span()));
      }
      if (r.chunk()) {
        auto seen = layer_kv.view(r.session(0));
        if (!seen) return seen.error();
        HEDGE_TRY(attention::prefill_attention(layer_view(*seen, l), kv_l, rows, all(q), all(att), params,
                                               b.attention, capped));
      } else {
        for (std::size_t i = 0; i < rows; ++i) HEDGE_TRY(attend(r.session(i), l, q.row(i), att.row(i), executor));
      }
      HEDGE_TRY(matmul<Formats>(layer.wo, att, o, ws, executor));
      each_row([&](std::size_t i) { add_residual(y.post_attn_norm, o.row(i), x.row(i)); });
      // Feed-forward block.
      each_row([&](std::size_t i) { kernels::rmsnorm(x.row(i), y.ffn_norm, c.norm_eps, xn.row(i)); });
      HEDGE_TRY(project(layer.gate_up, xn, gate_up));
      each_row([&](std::size_t i) {
        const auto row = gate_up.row(i);
        gated_activation(row.subview(0, hidden), row.subview(hidden, hidden));
      });
      HEDGE_TRY(matmul<Formats>(layer.w_down, gate_up.block(0, 0, rows, hidden), o, ws, executor));
      each_row([&](std::size_t i) { add_residual(y.post_ffn_norm, o.row(i), x.row(i)); });
    }
    return ok();
  }

  /// Packs the repacked and fused matrices (`bytes` of them) into `arena`.
  result<void> arrange(const llama_weights& w, std::span<std::byte> arena, std::size_t bytes,
                       detail::released_bytes released) {
    arena_bytes_ = bytes;
    if (arena.size() < arena_bytes_)
      return error{errc::capacity_exceeded} << "a weight arena of " << arena.size() << " bytes for " << arena_bytes_
                                            << " bytes of repacked and fused weights";
    if (reinterpret_cast<std::uintptr_t>(arena.data()) % detail::weight_arena_alignment != 0)
      return error{errc::misaligned} << "the weight arena is not " << detail::weight_arena_alignment
                                     << "-byte aligned";
    detail::weight_arranger<Formats> arranger(options_, arena.data(), &released);
    HEDGE_TRY(detail::arrange_weights(w, arranger, layers_, &output_));
    const bool shared = w.output.data == w.token_embedding.data;
    embedding_ = shared ? output_ : w.token_embedding;
    return ok();
  }

  /// Every matrix and vector has the config's shape, and those the architecture has are there.
  static result<void> check_shapes(const llama_weights& w) noexcept {
    const auto& c = w.config;
    const std::size_t dim = c.dim, q_dim = c.q_dim(), kv = c.kv_dim(), hidden = c.hidden_dim,
                      vocab = c.vocab_size, head = c.head_dim();
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
    // A vector the architecture has (`present`) of `size` weights, or one it lacks (empty).
    const auto vector = [](vector_view<const float> n, bool present, std::size_t size, const char* name,
                           std::size_t layer) -> result<void> {
      if (!present && !n.empty())
        return error{errc::invalid_argument} << name << " of layer " << layer << " given to an architecture without it";
      if (present && (n.data() == nullptr || n.size() != size))
        return error{errc::shape_mismatch} << name << " of layer " << layer << " has " << n.size()
                                           << " weights, the config needs " << size;
      return ok();
    };
    if (w.layers.size() != c.n_layers)
      return error{errc::shape_mismatch} << w.layers.size() << " layers of weights, the config has " << c.n_layers;
    HEDGE_TRY(matrix(w.token_embedding, vocab, dim, "token embedding", 0));
    HEDGE_TRY(matrix(w.output, vocab, dim, "output", 0));
    HEDGE_TRY(vector(w.output_norm, true, dim, "output norm", 0));
    HEDGE_TRY(vector(w.rope_factors, !w.rope_factors.empty(), c.rope_dim / 2, "RoPE frequency factors", 0));
    HEDGE_TRY(vector(w.rope_factors_long, !w.rope_factors_long.empty(), c.rope_dim / 2, "LongRoPE long factors", 0));
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      const auto& y = w.layers[l];
      HEDGE_TRY(vector(y.attn_norm, true, dim, "attention norm", l));
      HEDGE_TRY(vector(y.ffn_norm, true, dim, "feed-forward norm", l));
      HEDGE_TRY(matrix(y.wq, q_dim, dim, "wq", l));
      HEDGE_TRY(matrix(y.wk, kv, dim, "wk", l));
      HEDGE_TRY(matrix(y.wv, kv, dim, "wv", l));
      HEDGE_TRY(matrix(y.wo, dim, q_dim, "wo", l));
      HEDGE_TRY(matrix(y.w_gate, hidden, dim, "w_gate", l));
      HEDGE_TRY(matrix(y.w_up, hidden, dim, "w_up", l));
      HEDGE_TRY(matrix(y.w_down, dim, hidden, "w_down", l));
      HEDGE_TRY(vector(y.q_bias, c.qkv_bias, q_dim, "Q bias", l));
      HEDGE_TRY(vector(y.k_bias, c.qkv_bias, kv, "K bias", l));
      HEDGE_TRY(vector(y.v_bias, c.qkv_bias, kv, "V bias", l));
      HEDGE_TRY(vector(y.q_norm, c.qk_norm, head, "Q norm", l));
      HEDGE_TRY(vector(y.k_norm, c.qk_norm, head, "K norm", l));
      HEDGE_TRY(vector(y.post_attn_norm, c.post_norms, dim, "post-attention norm", l));
      HEDGE_TRY(vector(y.post_ffn_norm, c.post_norms, dim, "post-feed-forward norm", l));
    }
    return ok();
  }

  const llama_weights* weights_ = nullptr;
  llama_options options_;
  llama_buffers buffers_;
  vector_view<const float> rope_factors_;  ///< the weights' rope_factors, or LongRoPE's long ones (make())
  std::span<detail::layer_matrices> layers_;  ///< in the memory block, as everything below
  weight_matrix embedding_, output_;
  std::size_t arena_bytes_ = 0;
  cache_type cache_;        ///< the global layers' K/V (every layer's without a local ring)
  cache_type local_cache_;  ///< the local layers' ring, where local_ring_
  bool local_ring_ = false;
  std::span<std::uint32_t> kv_layer_;  ///< layer l's index in its cache
  std::span<std::uint64_t> batch_positions_;  ///< decode_batch's rows' positions (max_batch)
  std::span<std::byte> workspace_;      ///< the GEMV / GEMM activation rows
  heap_storage<std::byte> memory_;      ///< the memory block, unless the caller lent it (make_in)
};

}  // namespace hedge::model
