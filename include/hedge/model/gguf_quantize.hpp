// hedge/model/gguf_quantize.hpp: re-quantizing a GGUF file's float weight matrices with
// hedge's reference quantizers (bit-exact with ggml's) into one of llama.cpp's mixes, by
// the names llama-quantize takes: Q8_0, Q4_0, Q4_K_M and Q5_K_M. Which tensor becomes what
// follows llama.cpp's llama_tensor_get_type for these mixes (without an importance matrix):
//   - quantized: 2-D (or more) F32/F16/BF16 tensors whose name ends in "weight", norms
//     ("_norm.weight") excepted; every other tensor, and a tensor already quantized, is
//     copied as it is;
//   - the mix's base type (Q8_0, Q4_0, Q4_K, Q5_K) for every quantized tensor, except:
//   - output.weight (token_embd.weight when the file has no output.weight: tied
//     embeddings): Q8_0 when its rows are not whole blocks of the base type, else Q6_K
//     (Q8_0 stays Q8_0);
//   - Q4_K_M and Q5_K_M: attn_v (also attn_qkv, attn_kv_b) and ffn_down become Q6_K on
//     the layers use_more_bits picks: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2, where i
//     counts those tensors in llama.cpp's order (layer, then name) and n is their number
//     (attn_v) or the layer count (ffn_down);
//   - fallbacks, where a row is not whole blocks of the chosen type: Q4_K -> Q5_0,
//     Q5_K -> Q5_1, Q6_K -> Q8_0, and then F16 where the row is not whole 32-blocks.
// Not followed: the rules for mixture-of-experts, Falcon and 70B-class models.
// general.file_type becomes llama.cpp's ftype (Q4_0: 2, Q8_0: 7, Q4_K_M: 15, Q5_K_M: 17)
// and general.quantization_version 2, as llama.cpp writes them. Offline (hedge-quantize,
// tests): it allocates the converted tensors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_writer.hpp"
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

/// llama.cpp's quantization mixes hedge writes (llama_ftype).
enum class quant_mix { q8_0, q4_0, q4_k_m, q5_k_m };

/// What a mix is: llama-quantize's name for it, its base type and its general.file_type.
struct quant_mix_traits {
  std::string_view name;
  quant::gguf_type base;
  std::uint32_t file_type;
};

constexpr quant_mix_traits traits_of(quant_mix mix) noexcept {
  switch (mix) {
    case quant_mix::q8_0: return {"Q8_0", quant::gguf_type::q8_0, 7};
    case quant_mix::q4_0: return {"Q4_0", quant::gguf_type::q4_0, 2};
    case quant_mix::q4_k_m: return {"Q4_K_M", quant::gguf_type::q4_k, 15};
    case quant_mix::q5_k_m: return {"Q5_K_M", quant::gguf_type::q5_k, 17};
  }
  return {"Q8_0", quant::gguf_type::q8_0, 7};
}

/// The mix named `name` (Q8_0, Q4_0, Q4_K_M, Q5_K_M, in any case), if any.
inline std::optional<quant_mix> parse_quant_mix(std::string_view name) noexcept {
  for (const quant_mix mix : {quant_mix::q8_0, quant_mix::q4_0, quant_mix::q4_k_m, quant_mix::q5_k_m}) {
    const std::string_view known = traits_of(mix).name;
    bool same = known.size() == name.size();
    for (std::size_t i = 0; same && i < name.size(); ++i) {
      const char c = name[i] >= 'a' && name[i] <= 'z' ? static_cast<char>(name[i] - 'a' + 'A') : name[i];
      same = c == known[i];
    }
    if (same) return mix;
  }
  return std::nullopt;
}

namespace detail {

using quant::gguf_type;

/// The block size of a type hedge quantizes to.
inline std::size_t block_of(gguf_type t) {
  switch (t) {
    case gguf_type::q8_0: return quant::q8_0::block_elements;
    case gguf_type::q4_0: return quant::q4_0::block_elements;
    case gguf_type::q5_0: return quant::q5_0::block_elements;
    case gguf_type::q5_1: return quant::q5_1::block_elements;
    case gguf_type::q4_k: return quant::q4_k::block_elements;
    case gguf_type::q5_k: return quant::q5_k::block_elements;
    case gguf_type::q6_k: return quant::q6_k::block_elements;
    default: return 1;
  }
}

/// The layer of a tensor named "blk.N. ...", or -1 (llama.cpp's weight_name_comparer).
inline long layer_of(std::string_view name) noexcept {
  if (name.substr(0, 4) != "blk.") return -1;
  long layer = 0;
  std::size_t i = 4;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && layer < 1000000; ++i) layer = layer * 10 + (name[i] - '0');
  return i > 4 && i < name.size() && name[i] == '.' ? layer : -1;
}

/// llama.cpp's order of tensors while quantizing: by layer (none first), then by name.
inline bool quantize_order(std::string_view a, std::string_view b) noexcept {
  const long la = layer_of(a), lb = layer_of(b);
  return la != lb ? la < lb : a < b;
}

/// Whether llama.cpp quantizes a tensor of this name and shape (tensor_allows_quantization).
inline bool quantizable(const gguf_tensor& t) noexcept {
  const bool is_float = t.type == gguf_type::f32 || t.type == gguf_type::f16 || t.type == gguf_type::bf16;
  const std::string_view suffix = "weight";
  return is_float && t.n_dims >= 2 && t.name.size() >= suffix.size() &&
         t.name.substr(t.name.size() - suffix.size()) == suffix &&
         t.name.find("_norm.weight") == std::string_view::npos;
}

inline bool contains(std::string_view name, std::string_view part) noexcept {
  return name.find(part) != std::string_view::npos;
}

/// attn_v and the tensors llama.cpp treats as it (category_is_attn_v).
inline bool is_attn_v(std::string_view name) noexcept {
  return contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight");
}
inline bool is_ffn_down(std::string_view name) noexcept {
  return !is_attn_v(name) && !contains(name, "attn_k.weight") && !contains(name, "attn_q.weight") &&
         !contains(name, "attn_output.weight") && !contains(name, "ffn_up") && !contains(name, "ffn_gate") &&
         contains(name, "ffn_down");
}

/// llama.cpp's use_more_bits: the layers of a Q4_K_M / Q5_K_M file that get Q6_K.
constexpr bool use_more_bits(long i, long n) noexcept { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/// The shape-driven fallback (tensor_type_fallback): a row that is not whole blocks of
/// `t` takes the 32-block type llama.cpp names, then F16 if that does not fit either.
inline gguf_type with_fallback(gguf_type t, std::uint64_t row) {
  if (row % block_of(t) != 0) {
    if (t == gguf_type::q4_k) t = gguf_type::q5_0;
    else if (t == gguf_type::q5_k) t = gguf_type::q5_1;
    else if (t == gguf_type::q6_k) t = gguf_type::q8_0;
  }
  return row % block_of(t) != 0 ? gguf_type::f16 : t;
}

/// The types llama.cpp's quantize gives the tensors of `file` in `mix`, in file order
/// (a tensor it copies keeps its type).
inline std::vector<gguf_type> mix_types(const gguf_file& file, quant_mix mix) {
  std::vector<gguf_tensor> tensors;
  for (const auto& t : file.tensors()) tensors.push_back(t);
  bool tied = true;
  long layers = 0, attn_v_count = 0;
  for (const auto& t : tensors) {
    tied = tied && t.name != "output.weight";
    layers = std::max(layers, layer_of(t.name) + 1);
    attn_v_count += is_attn_v(t.name);
  }
  // A tensor's ordinal among those of its kind, in llama.cpp's order.
  const auto ordinal = [&](const gguf_tensor& of, bool (*kind)(std::string_view)) {
    long before = 0;
    for (const auto& t : tensors) before += kind(t.name) && quantize_order(t.name, of.name);
    return before;
  };
  const bool k_mix = mix == quant_mix::q4_k_m || mix == quant_mix::q5_k_m;
  const gguf_type base = traits_of(mix).base;
  std::vector<gguf_type> out;
  for (const auto& t : tensors) {
    if (!quantizable(t)) {
      out.push_back(t.type);
      continue;
    }
    const std::uint64_t row = t.dims[0];
    gguf_type type = base;
    if (t.name == "output.weight" || (tied && t.name == "token_embd.weight")) {
      if (row % block_of(base) != 0) type = gguf_type::q8_0;
      else if (base != gguf_type::q8_0) type = gguf_type::q6_k;
    } else if (k_mix && is_attn_v(t.name)) {
      if (use_more_bits(ordinal(t, is_attn_v), attn_v_count)) type = gguf_type::q6_k;
    } else if (k_mix && is_ffn_down(t.name)) {
      if (use_more_bits(ordinal(t, is_ffn_down), layers)) type = gguf_type::q6_k;
    }
    out.push_back(with_fallback(type, row));
  }
  return out;
}

/// The tensor's elements as floats (F32, F16 or BF16 source).
inline result<std::vector<float>> as_floats(const gguf_tensor& t) {
  std::vector<float> x(t.elements);
  switch (t.type) {
    case gguf_type::f32: {
      auto v = t.vector<quant::f32>();
      if (!v) {  // a matrix: read row by row
        auto m = t.matrix<quant::f32>();
        if (!m) return m.error();
        for (std::size_t r = 0; r < m->rows(); ++r)
          for (std::size_t c = 0; c < m->cols(); ++c) x[r * m->cols() + c] = (*m)(r, c);
        return x;
      }
      for (std::size_t k = 0; k < x.size(); ++k) x[k] = (*v)[k];
      return x;
    }
    case gguf_type::f16:
    case gguf_type::bf16: {
      const auto convert = [&](auto format) -> result<void> {
        using F = decltype(format);
        auto m = t.matrix<F>();
        if (!m) return m.error();
        for (std::size_t r = 0; r < m->rows(); ++r)
          HEDGE_TRY(quant::dequantize<F>(m->row(r), vector_view<float>(x.data() + r * m->cols(), m->cols())));
        return ok();
      };
      HEDGE_TRY(t.type == gguf_type::f16 ? convert(quant::f16{}) : convert(quant::bf16{}));
      return x;
    }
    default: return error{errc::unsupported} << "tensor " << t.name << " is not F32, F16 or BF16";
  }
}

/// `x` (rows of `row` elements) quantized to `t`, as bytes.
inline result<std::vector<std::byte>> quantized(const std::vector<float>& x, std::uint64_t row, gguf_type t) {
  const std::size_t rows = x.size() / row;
  std::vector<std::byte> out;
  const auto run = [&](auto format) -> result<void> {
    using F = decltype(format);
    const std::size_t blocks = row / F::block_elements;
    out.resize(rows * blocks * sizeof(typename F::block));
    auto* b = reinterpret_cast<typename F::block*>(out.data());
    for (std::size_t r = 0; r < rows; ++r)
      HEDGE_TRY(quant::quantize<F>(vector_view<const float>(x.data() + r * row, row),
                                   vector_view<typename F::block>(b + r * blocks, blocks)));
    return ok();
  };
  switch (t) {
    case gguf_type::q8_0: HEDGE_TRY(run(quant::q8_0{})); break;
    case gguf_type::q4_0: HEDGE_TRY(run(quant::q4_0{})); break;
    case gguf_type::q5_0: HEDGE_TRY(run(quant::q5_0{})); break;
    case gguf_type::q5_1: HEDGE_TRY(run(quant::q5_1{})); break;
    case gguf_type::q4_k: HEDGE_TRY(run(quant::q4_k{})); break;
    case gguf_type::q5_k: HEDGE_TRY(run(quant::q5_k{})); break;
    case gguf_type::q6_k: HEDGE_TRY(run(quant::q6_k{})); break;
    case gguf_type::f16: HEDGE_TRY(run(quant::f16{})); break;
    default: return error{errc::unsupported} << "quantizing to type " << static_cast<unsigned>(t);
  }
  return out;
}

}  // namespace detail

/// One tensor the quantization converted.
struct quantized_tensor {
  std::string_view name;
  quant::gguf_type from, to;
};

/// The converted tensors' bytes, which the writer references until it writes.
using quantized_storage = std::deque<std::vector<std::byte>>;

/// Adds `file`'s metadata and tensors to `writer`, its float matrices quantized into `mix`
/// as the file comment says. Returns the tensors converted.
inline result<std::vector<quantized_tensor>> quantize_gguf(const gguf_file& file, quant_mix mix, gguf_writer& writer,
                                                           quantized_storage& storage) {
  for (const auto& kv : file.metadata()) {
    if (kv.key == "general.file_type" || kv.key == "general.quantization_version") continue;
    writer.add_value(kv.key, kv.value);
  }
  writer.add("general.quantization_version", std::uint32_t{2});
  writer.add("general.file_type", traits_of(mix).file_type);
  const std::vector<quant::gguf_type> types = detail::mix_types(file, mix);
  std::vector<quantized_tensor> converted;
  std::size_t i = 0;
  for (const auto& t : file.tensors()) {
    const std::span<const std::uint64_t> dims(t.dims.data(), t.n_dims);
    const quant::gguf_type to = types[i++];
    if (to == t.type) {
      writer.add_tensor(t.name, t.type, dims, t.bytes);
      continue;
    }
    auto x = detail::as_floats(t);
    if (!x) return x.error();
    auto q = detail::quantized(*x, t.dims[0], to);
    if (!q) return error{q.error().code()} << "tensor " << t.name << ": " << q.error().message();
    storage.push_back(std::move(*q));
    writer.add_tensor(t.name, to, dims, storage.back());
    converted.push_back({t.name, t.type, to});
  }
  HEDGE_TRY(writer.status());
  return converted;
}

}  // namespace hedge::model
