// hedge/model/gguf_quantize.hpp: re-quantizing a GGUF file's float weight matrices with
// hedge's reference quantizers (bit-exact with ggml's), as llama.cpp's quantize tool chooses
// the types (its llama_tensor_get_type, for the llama types hedge has):
//   - 1-D tensors (norms, biases) stay as they are; so do tensors already quantized;
//   - output.weight: Q8_0 when Q8_0 is asked for; otherwise Q6_K, or Q8_0 when its rows are
//     not whole 256-element blocks;
//   - every other F32/F16/BF16 matrix: the requested type; when its rows are not whole
//     blocks of it, Q4_K falls back to Q4_0, and a row that fits no block becomes F16 (as
//     llama.cpp falls back to F16).
// general.file_type becomes llama.cpp's ftype (Q8_0: 7, Q4_0: 2, Q4_K: 14, its Q4_K_S) and
// general.quantization_version 2, as llama.cpp writes them. Offline (hedge-quantize, tests):
// it allocates the converted tensors.
#pragma once

#include <cstdint>
#include <deque>
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
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::model {

namespace detail {

using quant::gguf_type;

/// The block size of a type hedge quantizes to.
inline std::size_t block_of(gguf_type t) {
  switch (t) {
    case gguf_type::q8_0: return quant::q8_0::block_elements;
    case gguf_type::q4_0: return quant::q4_0::block_elements;
    case gguf_type::q4_k: return quant::q4_k::block_elements;
    case gguf_type::q6_k: return quant::q6_k::block_elements;
    default: return 1;
  }
}

/// What llama.cpp's quantize makes of a float matrix (see the file comment).
inline gguf_type quantized_type_of(std::string_view name, std::uint64_t row, gguf_type wanted) {
  gguf_type t = wanted;
  if (name == "output.weight" && wanted != gguf_type::q8_0) t = row % 256 == 0 ? gguf_type::q6_k : gguf_type::q8_0;
  if (row % block_of(t) != 0 && t == gguf_type::q4_k) t = gguf_type::q4_0;
  if (row % block_of(t) != 0) t = gguf_type::f16;
  return t;
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
    case gguf_type::q4_k: HEDGE_TRY(run(quant::q4_k{})); break;
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

/// Adds `file`'s metadata and tensors to `writer`, its float matrices quantized as the file
/// comment says; `wanted` is Q8_0, Q4_0 or Q4_K. Returns the tensors converted.
inline result<std::vector<quantized_tensor>> quantize_gguf(const gguf_file& file, quant::gguf_type wanted,
                                                           gguf_writer& writer, quantized_storage& storage) {
  using quant::gguf_type;
  std::uint32_t file_type = 0;
  switch (wanted) {
    case gguf_type::q8_0: file_type = 7; break;
    case gguf_type::q4_0: file_type = 2; break;
    case gguf_type::q4_k: file_type = 14; break;
    default: return error{errc::unsupported} << "quantizing a file to type " << static_cast<unsigned>(wanted) << " (Q8_0, Q4_0 or Q4_K)";
  }
  for (const auto& kv : file.metadata()) {
    if (kv.key == "general.file_type" || kv.key == "general.quantization_version") continue;
    writer.add_value(kv.key, kv.value);
  }
  writer.add("general.quantization_version", std::uint32_t{2});
  writer.add("general.file_type", file_type);
  std::vector<quantized_tensor> converted;
  for (const auto& t : file.tensors()) {
    const std::span<const std::uint64_t> dims(t.dims.data(), t.n_dims);
    const bool is_float = t.type == gguf_type::f32 || t.type == gguf_type::f16 || t.type == gguf_type::bf16;
    const gguf_type to = is_float && t.n_dims >= 2 ? detail::quantized_type_of(t.name, t.dims[0], wanted) : t.type;
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
