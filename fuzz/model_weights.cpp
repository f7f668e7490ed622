// libFuzzer target: the weights loader and the per-architecture config (model/weights.hpp's
// gguf_weights, model/gguf_llama.hpp's read_llama_config) and the model built on them
// (model/forward.hpp's llama::make): any bytes give a model or an error, never an
// allocation sized by a count the file does not back (ASan: allocation-size-too-big, or
// the -rss_limit_mb), and every weight view lies inside the input. The seed corpus
// (fuzz/corpus/model_weights/) holds a small model of each architecture.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "hedge/model/forward.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/weights.hpp"

namespace {

using namespace hedge::model;

const std::byte* low = nullptr;
const std::byte* high = nullptr;

void check_inside(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const std::byte*>(data);
  if (bytes != 0 && (p < low || p + bytes > high)) std::abort();
}
void check_vector(hedge::vector_view<const float> v) { check_inside(v.data(), v.size() * sizeof(float)); }
void check_matrix(const weight_matrix& m) {
  if (m.data != nullptr) check_inside(m.data, detail::stored_bytes<all_weight_formats>(m));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint64_t> words((size + 7) / 8);  // 8-byte aligned, as a mapped file is
  if (size != 0) std::memcpy(words.data(), data, size);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(words.data()), size);
  low = bytes.data(), high = bytes.data() + bytes.size();
  const auto file = gguf_file::parse(bytes);
  if (!file) return 0;
  const auto weights = gguf_weights(*file);
  if (!weights) return 0;
  const llama_weights& w = *weights;
  if (w.layers.size() != w.config.n_layers) std::abort();
  check_matrix(w.token_embedding), check_matrix(w.output), check_vector(w.output_norm);
  check_vector(w.rope_factors), check_vector(w.rope_factors_long);
  for (const llama_layer& y : w.layers) {
    for (const weight_matrix* m : {&y.wq, &y.wk, &y.wv, &y.wo, &y.w_gate, &y.w_up, &y.w_down}) check_matrix(*m);
    for (const auto* v : {&y.attn_norm, &y.ffn_norm, &y.q_bias, &y.k_bias, &y.v_bias, &y.q_norm, &y.k_norm,
                          &y.post_attn_norm, &y.post_ffn_norm})
      check_vector(*v);
  }
  // The model sizes its cache, scratch and arena from the config: a short context, so the
  // sizes are the weights' (which the file backs), not the trained context's.
  const std::size_t context = std::min<std::size_t>(w.config.context_length, 16);
  const auto model = llama<>::make(w, {.context = context, .max_prefill = 4});
  static_cast<void>(model);
  return 0;
}
