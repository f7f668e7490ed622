// hedge/model/weights.hpp: a llama model's weights as views, and the one operation the
// forward pass asks of a weight matrix: y = W x in the matrix's own format.
//
// Each matrix is the bytes of a file tensor (or of a conversion made once at load time),
// rows x cols elements, row-major, each row whole blocks of one GGUF format. The format is
// known at run time (a Q4_K_M file mixes Q4_K and Q6_K; norms stay F32), and the set of
// formats a build compiles GEMV and dequantization code for is a type, `weight_formats<...>`:
// a firmware build that only ships Q4_0 weights names only Q4_0 and carries no other
// kernel. A matrix of a format outside the set is an error naming the format.
//
// Readers fill `llama_weights`: `llama2c_weights` (float32, shared classifier by the sign
// rule) and `gguf_weights` (llama.cpp's tensor names), both views of the file's bytes. The
// one thing a llama_weights holds besides views is its table of layers: on the heap, or,
// given by the caller to `gguf_weights(file, layers)`, in the caller's memory (no heap: a
// firmware image reads a GGUF in flash this way).
//
// A matrix is in one of two layouts: the file's (row-major, `interleaved` false) or
// kernels/repack.hpp's 8-row interleaved groups (Q4_0, Q8_0, Q5_0, Q5_1, Q4_K, Q6_K), which the GEMV and
// GEMM kernels of those formats run faster on. `pack_matrices` builds the interleaved
// copy once at load time, and can lay several matrices of one format and row length end
// to end as one (Q/K/V, gate/up): the concatenation costs nothing beyond the repack,
// because the interleaved copy is made anyway. `matvec` (decode) and `matmul` (prefill)
// take either layout.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/gemm.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/model/config.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_llama.hpp"
#include "hedge/model/llama2c.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q5_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::model {

/// The weight formats a model compiles code for.
template <quant::BlockFormat... Fs>
struct weight_formats {};

/// Every format hedge has a GEMV for.
using all_weight_formats = weight_formats<quant::f32, quant::f16, quant::bf16, quant::q8_0, quant::q4_0, quant::q5_0,
                                          quant::q5_1, quant::q4_k, quant::q5_k, quant::q6_k>;

/// A weight matrix: `rows` x `cols` elements of format `type`, `cols` a multiple of the
/// format's block size; row-major, or in 8-row groups when `interleaved` (repack.hpp).
struct weight_matrix {
  quant::gguf_type type = quant::gguf_type::f32;
  const std::byte* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  bool interleaved = false;

  /// The row-major matrix as blocks of F (F's type_id must be `type`).
  template <quant::BlockFormat F>
  [[nodiscard]] matrix_view<const typename F::block> as() const noexcept {
    return {reinterpret_cast<const typename F::block*>(data), rows, cols / F::block_elements};
  }
  /// The interleaved matrix as groups of F.
  template <kernels::Interleavable F>
  [[nodiscard]] kernels::interleaved_view<F> as_interleaved() const noexcept {
    return {reinterpret_cast<const typename kernels::interleaved<F>::block*>(data), rows, cols};
  }
  /// A float32 matrix.
  static weight_matrix of(matrix_view<const float> m) noexcept {
    return {quant::gguf_type::f32, reinterpret_cast<const std::byte*>(m.data()), m.rows(), m.cols()};
  }
};

namespace detail {
template <class Visit, quant::BlockFormat F, quant::BlockFormat... Rest>
result<void> visit_format(quant::gguf_type type, Visit& visit) {
  if (type == F::type_id) return visit(F{});
  if constexpr (sizeof...(Rest) > 0) {
    return visit_format<Visit, Rest...>(type, visit);
  } else {
    return error{errc::unsupported} << "weight format " << static_cast<std::uint32_t>(type)
                                    << " is not among the formats this model is built for";
  }
}
template <class Visit, quant::BlockFormat... Fs>
result<void> visit_format(weight_formats<Fs...>, quant::gguf_type type, Visit& visit) {
  return visit_format<Visit, Fs...>(type, visit);
}
template <quant::BlockFormat... Fs>
constexpr std::size_t matvec_workspace_bytes(weight_formats<Fs...>, std::size_t k) noexcept {
  std::size_t most = 0;
  ((most = kernels::gemv_workspace_bytes<Fs>(k) > most ? kernels::gemv_workspace_bytes<Fs>(k) : most), ...);
  return most;
}
template <quant::BlockFormat... Fs>
constexpr std::size_t matmul_workspace_bytes(weight_formats<Fs...>, std::size_t m, std::size_t k) noexcept {
  std::size_t most = 0;
  ((most = kernels::gemm_workspace_bytes<Fs>(m, k) > most ? kernels::gemm_workspace_bytes<Fs>(m, k) : most), ...);
  return most;
}
}  // namespace detail

/// Calls visit(F{}) with the format F of `type` among `Formats`; unsupported otherwise.
template <class Formats, class Visit>
result<void> visit_format(quant::gguf_type type, Visit&& visit) {
  return detail::visit_format(Formats{}, type, visit);
}

/// Workspace bytes `matvec` needs for rows of `k` elements, whatever the format.
template <class Formats>
constexpr std::size_t matvec_workspace_bytes(std::size_t k) noexcept {
  return detail::matvec_workspace_bytes(Formats{}, k);
}

/// Workspace bytes `matmul` needs for `m` activation rows of `k` elements, whatever the format.
template <class Formats>
constexpr std::size_t matmul_workspace_bytes(std::size_t m, std::size_t k) noexcept {
  return detail::matmul_workspace_bytes(Formats{}, m, k);
}

namespace detail {
/// Calls run(view) with W's view in its layout, W of format F.
template <quant::BlockFormat F, class Run>
result<void> with_layout(const weight_matrix& w, Run&& run) {
  if constexpr (kernels::Interleavable<F>) {
    if (w.interleaved) return run(w.as_interleaved<F>());
  }
  if (w.interleaved) return error{errc::unsupported} << F::name << " has no interleaved layout";
  return run(w.as<F>());
}
}  // namespace detail

/// y = W x with the GEMV of W's format and layout, rows split over the executor.
template <class Formats, Executor E>
result<void> matvec(const weight_matrix& w, vector_view<const float> x, vector_view<float> y,
                    std::span<std::byte> workspace, E& executor) {
  return visit_format<Formats>(w.type, [&](auto format) {
    using F = decltype(format);
    return detail::with_layout<F>(w, [&](auto view) { return kernels::gemv<F>(view, x, y, workspace, executor); });
  });
}

/// Y = X W^T (one row of Y per row of X) with the GEMM of W's format and layout; row m of
/// Y equals matvec of row m of X (kernels/gemm.hpp).
template <class Formats, Executor E>
result<void> matmul(const weight_matrix& w, matrix_view<const float> x, matrix_view<float> y,
                    std::span<std::byte> workspace, E& executor) {
  return visit_format<Formats>(w.type, [&](auto format) {
    using F = decltype(format);
    return detail::with_layout<F>(w, [&](auto view) { return kernels::gemm<F>(view, x, y, workspace, executor); });
  });
}

/// Row `r` of W as floats (the embedding lookup), in either layout.
template <class Formats>
result<void> dequantize_row(const weight_matrix& w, std::size_t r, vector_view<float> out) {
  if (r >= w.rows) return error{errc::out_of_range} << "row " << r << " of a matrix of " << w.rows << " rows";
  return visit_format<Formats>(w.type, [&](auto format) -> result<void> {
    using F = decltype(format);
    if constexpr (kernels::Interleavable<F>) {
      if (w.interleaved) {
        if (out.size() != w.cols) return error{errc::shape_mismatch} << "a row of " << w.cols << " into " << out.size();
        const auto m = w.as_interleaved<F>();
        const auto* group = m.group(r / kernels::interleave_rows);
        for (std::size_t b = 0; b < m.blocks_per_row(); ++b) {
          const typename F::block block = kernels::original_block<F>(group[b], r % kernels::interleave_rows);
          HEDGE_TRY(quant::dequantize<F>({&block, 1}, out.subview(b * F::block_elements, F::block_elements)));
        }
        return ok();
      }
    }
    return quant::dequantize<F>(w.as<F>().row(r), out);
  });
}

/// Bytes of `parts` packed end to end by `pack_matrices`, each part's rows in order: their
/// interleaved groups when `interleave` (0 when the format has no interleaved layout, or a
/// part but the last has rows that are not whole groups, or formats or row lengths differ).
template <class Formats>
std::size_t packed_matrix_bytes(std::span<const weight_matrix> parts, bool interleave) {
  if (parts.empty()) return 0;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const weight_matrix& m = parts[i];
    if (m.type != parts[0].type || m.cols != parts[0].cols || m.interleaved) return 0;
    const bool whole_groups = m.rows % kernels::interleave_rows == 0 || i + 1 == parts.size();
    auto known = visit_format<Formats>(m.type, [&](auto format) -> result<void> {
      using F = decltype(format);
      if (m.cols % F::block_elements != 0) return error{errc::shape_mismatch};
      if constexpr (kernels::Interleavable<F>) {
        if (interleave && whole_groups) {
          bytes += kernels::interleaved_blocks<F>(m.rows, m.cols) * sizeof(typename kernels::interleaved<F>::block);
          return ok();
        }
      }
      if (interleave) return error{errc::unsupported};
      bytes += m.rows * quant::row_bytes<F>(m.cols);
      return ok();
    });
    if (!known) return 0;
  }
  return bytes;
}

/// Packs `parts` (see packed_matrix_bytes) into `out` and returns the one matrix they make:
/// rows of parts[0], then of parts[1], ...; interleaved when `interleave`. Done once, at
/// load time.
template <class Formats>
result<weight_matrix> pack_matrices(std::span<const weight_matrix> parts, bool interleave, std::span<std::byte> out) {
  const std::size_t bytes = packed_matrix_bytes<Formats>(parts, interleave);
  if (bytes == 0) return error{errc::unsupported} << "these " << parts.size() << " matrices cannot be packed as one";
  if (out.size() < bytes)
    return error{errc::capacity_exceeded} << "packing " << bytes << " bytes of weights into " << out.size();
  weight_matrix packed{parts[0].type, out.data(), 0, parts[0].cols, interleave};
  std::byte* at = out.data();
  for (const weight_matrix& m : parts) {
    HEDGE_TRY(visit_format<Formats>(m.type, [&](auto format) -> result<void> {
      using F = decltype(format);
      if constexpr (kernels::Interleavable<F>) {
        if (interleave) {
          using group = typename kernels::interleaved<F>::block;
          if (reinterpret_cast<std::uintptr_t>(at) % alignof(group) != 0)
            return error{errc::misaligned} << "the weight arena is not aligned for interleaved " << F::name;
          const std::size_t blocks = kernels::interleaved_blocks<F>(m.rows, m.cols);
          HEDGE_TRY(kernels::repack<F>(m.as<F>(), {reinterpret_cast<group*>(at), blocks}));
          at += blocks * sizeof(group);
          return ok();
        }
      }
      const std::size_t n = m.rows * quant::row_bytes<F>(m.cols);
      std::memcpy(at, m.data, n);
      at += n;
      return ok();
    }));
    packed.rows += m.rows;
  }
  return packed;
}

/// One decoder layer. The vectors an architecture does not have are empty (config.hpp
/// says which it has).
struct llama_layer {
  vector_view<const float> attn_norm, ffn_norm;          ///< [dim]
  weight_matrix wq, wk, wv, wo, w_gate, w_up, w_down;  ///< [out][in]
  vector_view<const float> q_bias, k_bias, v_bias;       ///< [q_dim], [kv_dim], [kv_dim] (qkv_bias)
  vector_view<const float> q_norm, k_norm;               ///< [head_dim] (qk_norm)
  vector_view<const float> post_attn_norm, post_ffn_norm;  ///< [dim] (post_norms)
};

/// A llama model's weights: views into a file's bytes (or a load-time arena), which must
/// outlive it, and the table of its layers. Move-only (`copy_weights` copies).
struct llama_weights {
  llama_config config;
  weight_matrix token_embedding;  ///< [vocab][dim]
  std::span<llama_layer> layers;  ///< [n_layers]: in layer_storage, or in the memory a reader was lent
  vector_view<const float> output_norm;  ///< [dim]
  weight_matrix output;                  ///< [vocab][dim]: the embedding itself when shared
  /// [rope_dim / 2] divisors of each pair's RoPE frequency (llama.cpp's rope_freqs, or
  /// LongRoPE's short factors); empty: none.
  vector_view<const float> rope_factors;
  /// LongRoPE's long factors [rope_dim / 2], for contexts above config.rope_original_context; empty: none.
  vector_view<const float> rope_factors_long;
  heap_storage<llama_layer> layer_storage;  ///< the layers, unless a reader was lent their memory

  /// `n` empty layers on the heap.
  result<void> allocate_layers(std::size_t n) noexcept {
    auto storage = heap_storage<llama_layer>::make(n);
    if (!storage) return storage.error();
    layer_storage = std::move(*storage);
    layers = layer_storage.span();
    return ok();
  }
};

/// A copy of `w` whose layer table is on the heap (the views still name w's bytes).
inline result<llama_weights> copy_weights(const llama_weights& w) noexcept {
  llama_weights c;
  c.config = w.config;
  c.token_embedding = w.token_embedding;
  c.output_norm = w.output_norm;
  c.output = w.output;
  c.rope_factors = w.rope_factors;
  c.rope_factors_long = w.rope_factors_long;
  HEDGE_TRY(c.allocate_layers(w.layers.size()));
  for (std::size_t l = 0; l < w.layers.size(); ++l) c.layers[l] = w.layers[l];
  return c;
}

/// A llama2.c checkpoint's weights (float32; w1 is the gate, w3 the up projection).
inline result<llama_weights> llama2c_weights(const llama2c_checkpoint& c) noexcept {
  llama_weights w;
  w.config = c.config();
  w.token_embedding = weight_matrix::of(c.token_embedding());
  HEDGE_TRY(w.allocate_layers(w.config.n_layers));
  for (std::size_t l = 0; l < w.config.n_layers; ++l) {
    const auto v = c.layer(l);
    llama_layer& y = w.layers[l];
    y.attn_norm = v.rms_att;
    y.ffn_norm = v.rms_ffn;
    y.wq = weight_matrix::of(v.wq);
    y.wk = weight_matrix::of(v.wk);
    y.wv = weight_matrix::of(v.wv);
    y.wo = weight_matrix::of(v.wo);
    y.w_gate = weight_matrix::of(v.w1);
    y.w_up = weight_matrix::of(v.w3);
    y.w_down = weight_matrix::of(v.w2);
  }
  w.output_norm = c.rms_final();
  w.output = weight_matrix::of(c.classifier());
  return w;
}

namespace detail {
/// Calls f(matrix) for every weight matrix of `w` (llama_weights, const or not): the
/// embedding, each layer's, and the classifier unless it is the embedding.
template <class Weights, class F>
void for_each_matrix(Weights& w, F&& f) {
  const bool shared = w.output.data == w.token_embedding.data;  // before f changes either
  f(w.token_embedding);
  for (auto& y : w.layers)
    for (auto* m : {&y.wq, &y.wk, &y.wv, &y.wo, &y.w_gate, &y.w_up, &y.w_down}) f(*m);
  if (!shared) f(w.output);
}
inline bool is_float_matrix(const weight_matrix& m) noexcept {
  return m.type == quant::gguf_type::f32 || m.type == quant::gguf_type::f16 || m.type == quant::gguf_type::bf16;
}
}  // namespace detail

/// Arena bytes `quantize_weights<To>` needs: To's bytes of every float matrix whose rows are
/// whole To blocks (a shared classifier counted once).
template <quant::BlockFormat To>
std::size_t quantized_weights_bytes(const llama_weights& w) {
  std::size_t bytes = 0;
  detail::for_each_matrix(w, [&](const weight_matrix& m) {
    if (detail::is_float_matrix(m) && m.cols % To::block_elements == 0) bytes += m.rows * quant::row_bytes<To>(m.cols);
  });
  return bytes;
}

/// `w` with its float matrices (F32, F16, BF16) quantized to To (e.g. Q8_0, Q4_0) with the
/// reference quantizer, into `arena` (quantized_weights_bytes<To>(w) bytes); matrices whose
/// rows are not whole To blocks, and quantized ones, stay views of the original. Done once,
/// at load time.
template <quant::BlockFormat To>
result<llama_weights> quantize_weights(const llama_weights& w, std::span<std::byte> arena) {
  if (arena.size() < quantized_weights_bytes<To>(w))
    return error{errc::capacity_exceeded} << "an arena of " << arena.size() << " bytes for "
                                          << quantized_weights_bytes<To>(w) << " bytes of " << To::name << " weights";
  if (reinterpret_cast<std::uintptr_t>(arena.data()) % alignof(typename To::block) != 0)
    return error{errc::misaligned} << "the weight arena is not aligned for " << To::name << " blocks";
  auto copy = copy_weights(w);
  if (!copy) return copy.error();
  llama_weights q = std::move(*copy);
  const bool shared = w.output.data == w.token_embedding.data;
  std::size_t used = 0;
  std::vector<float> row;
  result<void> status = ok();
  detail::for_each_matrix(q, [&](weight_matrix& m) {
    if (!status || !detail::is_float_matrix(m) || m.cols % To::block_elements != 0) return;
    const std::size_t blocks = m.cols / To::block_elements;
    auto* out = reinterpret_cast<typename To::block*>(arena.data() + used);
    row.resize(m.cols);
    for (std::size_t r = 0; r < m.rows && status; ++r) {
      status = dequantize_row<all_weight_formats>(m, r, row);
      if (status) status = quant::quantize<To>(row, vector_view<typename To::block>(out + r * blocks, blocks));
    }
    m = {To::type_id, reinterpret_cast<const std::byte*>(out), m.rows, m.cols};
    used += m.rows * blocks * sizeof(typename To::block);
  });
  if (!status) return status.error();
  if (shared) q.output = q.token_embedding;
  return q;
}

namespace detail {
/// Rows [first, first + count) of the row-major matrix `m`: a view of its bytes.
inline result<weight_matrix> matrix_rows(const weight_matrix& m, std::size_t first, std::size_t count) {
  std::size_t row_bytes = 0;
  HEDGE_TRY(model::visit_format<all_weight_formats>(m.type, [&](auto format) -> result<void> {
    row_bytes = quant::row_bytes<decltype(format)>(m.cols);
    return ok();
  }));
  return weight_matrix{m.type, m.data + first * row_bytes, count, m.cols};
}

/// "blk.<layer>.<suffix>", a layer's tensor name, in a buffer of GGUF's longest name (cut there).
class layer_tensor_name {
 public:
  layer_tensor_name(std::size_t layer, std::string_view suffix) noexcept {
    append("blk.");
    char digits[20];
    const auto written = std::to_chars(digits, digits + sizeof digits, layer);
    append({digits, static_cast<std::size_t>(written.ptr - digits)});
    append(".");
    append(suffix);
  }
  [[nodiscard]] std::string_view view() const noexcept { return {text_, size_}; }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: a name wherever one is read

 private:
  void append(std::string_view s) noexcept {
    for (char c : s)
      if (size_ < sizeof text_) text_[size_++] = c;
  }
  char text_[gguf_limits::max_tensor_name_bytes];
  std::size_t size_ = 0;
};

/// The file's llama config, its block_count checked against the tensors it holds.
inline result<llama_config> gguf_checked_config(const gguf_file& file) noexcept {
  auto config = read_llama_config(file);
  if (!config) return config.error();
  // A layer has at least 6 tensors (two norms, Q|K|V, output, up, down): a block_count
  // the file cannot hold is refused before the layers are allocated.
  constexpr std::uint64_t least_layer_tensors = 6;
  if (config->n_layers > file.tensor_count() / least_layer_tensors)
    return error{errc::parse_error} << "GGUF: block_count " << config->n_layers << " needs at least "
                                    << least_layer_tensors * config->n_layers << " tensors, the file holds "
                                    << file.tensor_count();
  return config;
}
}  // namespace detail

/// Layers `gguf_weights(file, layers)` needs room for: the file's block_count, checked
/// against the tensors it holds.
inline result<std::size_t> gguf_layer_count(const gguf_file& file) noexcept {
  auto config = detail::gguf_checked_config(file);
  if (!config) return config.error();
  return std::size_t{config->n_layers};
}

/// A GGUF model's weights, by llama.cpp's tensor names: token_embd, output_norm, output
/// (absent: the embedding classifies), rope_freqs or rope_factors_long/_short, and per
/// layer blk.N.attn_norm, attn_q, attn_k, attn_v (or one attn_qkv holding the three),
/// attn_q/k/v biases, attn_q_norm, attn_k_norm, attn_output, attn_post_norm, ffn_norm,
/// ffn_gate and ffn_up (or one ffn_up holding gate then up), ffn_down, post_ffw_norm;
/// which ones a file must have is its architecture's (config.hpp). Every tensor's shape is
/// checked against the config here, and a mismatch names the tensor; vectors must be F32;
/// matrices may be any type, checked against the model's formats when the model is made.
/// Nothing is sized by the file's counts before they are checked against its tensors.
/// The layer table goes in `layers` (at least gguf_layer_count(file) of them, outliving
/// the weights): no heap.
inline result<llama_weights> gguf_weights(const gguf_file& file, std::span<llama_layer> layers) noexcept {
  llama_weights w;
  auto config = detail::gguf_checked_config(file);
  if (!config) return config.error();
  w.config = *config;
  const llama_config& c = w.config;
  if (layers.size() < c.n_layers)
    return error{errc::capacity_exceeded} << "GGUF: block_count " << c.n_layers << " in a table of " << layers.size()
                                          << " layers";
  w.layers = layers.first(c.n_layers);
  const std::size_t dim = c.dim, q_dim = c.q_dim(), kv = c.kv_dim(), hidden = c.hidden_dim, head = c.head_dim();
  const auto shape_error = [](std::string_view name) {
    error e{errc::shape_mismatch};
    e << "GGUF: tensor ";
    return detail::append_name(e, name);
  };
  // A matrix of `rows` x `cols`.
  const auto matrix = [&](std::string_view name, std::size_t rows, std::size_t cols, bool required,
                          weight_matrix& out) -> result<void> {
    const auto t = file.find_tensor(name);
    if (!t) {
      if (required) return error{errc::parse_error} << "GGUF: tensor " << name << " is missing";
      return ok();
    }
    if (t->n_dims > 2 || t->dims[0] != cols || t->rows() != rows)
      return shape_error(name) << " is " << t->dims[0] << "x" << t->rows() << " (" << t->n_dims
                               << " dims), the config needs " << cols << "x" << rows;
    out = {t->type, t->bytes.data(), static_cast<std::size_t>(t->rows()), static_cast<std::size_t>(t->dims[0])};
    return ok();
  };
  const auto vector = [&](std::string_view name, std::size_t size, bool required,
                          vector_view<const float>& out) -> result<void> {
    if (!required && !file.find_tensor(name)) return ok();
    auto v = file.vector<quant::f32>(name);
    if (!v) return error{v.error().code()} << "GGUF: " << name << ": " << v.error().message();
    if (v->size() != size)
      return shape_error(name) << " has " << v->size() << " weights, the config needs " << size;
    out = *v;
    return ok();
  };
  HEDGE_TRY(matrix("token_embd.weight", c.vocab_size, dim, true, w.token_embedding));
  HEDGE_TRY(vector("output_norm.weight", dim, true, w.output_norm));
  if (!c.shared_classifier) HEDGE_TRY(matrix("output.weight", c.vocab_size, dim, true, w.output));
  if (w.output.data == nullptr) w.output = w.token_embedding;
  HEDGE_TRY(vector("rope_freqs.weight", c.rope_dim / 2, false, w.rope_factors));
  if (w.rope_factors.empty()) HEDGE_TRY(vector("rope_factors_short.weight", c.rope_dim / 2, false, w.rope_factors));
  HEDGE_TRY(vector("rope_factors_long.weight", c.rope_dim / 2, false, w.rope_factors_long));

  for (std::size_t l = 0; l < c.n_layers; ++l) {
    const auto blk = [l](std::string_view suffix) { return detail::layer_tensor_name(l, suffix); };
    llama_layer& y = w.layers[l];
    y = {};
    HEDGE_TRY(vector(blk("attn_norm.weight"), dim, true, y.attn_norm));
    HEDGE_TRY(vector(blk("ffn_norm.weight"), dim, true, y.ffn_norm));
    if (file.find_tensor(blk("attn_q.weight")) || !file.find_tensor(blk("attn_qkv.weight"))) {
      HEDGE_TRY(matrix(blk("attn_q.weight"), q_dim, dim, true, y.wq));
      HEDGE_TRY(matrix(blk("attn_k.weight"), kv, dim, true, y.wk));
      HEDGE_TRY(matrix(blk("attn_v.weight"), kv, dim, true, y.wv));
    } else {  // Q, K and V rows in one tensor (Phi-3)
      weight_matrix qkv;
      HEDGE_TRY(matrix(blk("attn_qkv.weight"), q_dim + 2 * kv, dim, true, qkv));
      auto q = detail::matrix_rows(qkv, 0, q_dim), k = detail::matrix_rows(qkv, q_dim, kv),
           v = detail::matrix_rows(qkv, q_dim + kv, kv);
      if (!q || !k || !v) return error{errc::unsupported} << blk("attn_qkv.weight").view() << ": its format has no GEMV";
      y.wq = *q, y.wk = *k, y.wv = *v;
    }
    HEDGE_TRY(matrix(blk("attn_output.weight"), dim, q_dim, true, y.wo));
    if (file.find_tensor(blk("ffn_gate.weight")) || c.architecture != model_architecture::phi3) {
      HEDGE_TRY(matrix(blk("ffn_gate.weight"), hidden, dim, true, y.w_gate));
      HEDGE_TRY(matrix(blk("ffn_up.weight"), hidden, dim, true, y.w_up));
    } else {  // gate rows, then up rows, in ffn_up (Phi-3)
      weight_matrix gate_up;
      HEDGE_TRY(matrix(blk("ffn_up.weight"), 2 * hidden, dim, true, gate_up));
      auto gate = detail::matrix_rows(gate_up, 0, hidden), up = detail::matrix_rows(gate_up, hidden, hidden);
      if (!gate || !up) return error{errc::unsupported} << blk("ffn_up.weight").view() << ": its format has no GEMV";
      y.w_gate = *gate, y.w_up = *up;
    }
    HEDGE_TRY(matrix(blk("ffn_down.weight"), dim, hidden, true, y.w_down));
    if (c.qkv_bias) {
      HEDGE_TRY(vector(blk("attn_q.bias"), q_dim, true, y.q_bias));
      HEDGE_TRY(vector(blk("attn_k.bias"), kv, true, y.k_bias));
      HEDGE_TRY(vector(blk("attn_v.bias"), kv, true, y.v_bias));
    }
    if (c.qk_norm) {
      HEDGE_TRY(vector(blk("attn_q_norm.weight"), head, true, y.q_norm));
      HEDGE_TRY(vector(blk("attn_k_norm.weight"), head, true, y.k_norm));
    }
    if (c.post_norms) {
      HEDGE_TRY(vector(blk("post_attention_norm.weight"), dim, true, y.post_attn_norm));
      HEDGE_TRY(vector(blk("post_ffw_norm.weight"), dim, true, y.post_ffn_norm));
    }
  }
  return w;
}

/// As above, the layer table on the heap.
inline result<llama_weights> gguf_weights(const gguf_file& file) noexcept {
  auto count = gguf_layer_count(file);
  if (!count) return count.error();
  auto storage = heap_storage<llama_layer>::make(*count);
  if (!storage) return storage.error();
  auto w = gguf_weights(file, storage->span());
  if (!w) return w.error();
  w->layer_storage = std::move(*storage);
  return w;
}

}  // namespace hedge::model
