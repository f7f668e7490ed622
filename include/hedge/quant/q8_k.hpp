// hedge/quant/q8_k.hpp: Q8_K, the 8-bit activation format of the K-quants (GGUF type 15).
//
//   block_q8_K (292 bytes):
//   byte 0        4                            260                         292
//        [ d:f32 ][ qs[0] ...          qs[255] ][ bsums[0] ... bsums[15]   ]
//                   int8, value_j = qs[j] * d    int16, bsums[i] = sum of qs[16i .. 16i+15]
//
// The per-16 sums let a Q4_K dot product apply each sub-block's minimum with
// one multiply instead of a pass over the elements. Reference quantizer
// (ggml's quantize_row_q8_K_ref): take the signed value of largest magnitude
// `max` (first on ties), scale = -127 / max, q_j = min(127, nearest_int(scale * x_j))
// (ties to even), d = 1 / scale; an all-zero block has d = 0, q = 0, sums 0,
// and so does a block whose scale overflows float (|max| below ~4e-37, where
// ggml's result is garbage from converting inf).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "hedge/quant/block_format.hpp"

namespace hedge::quant {

struct q8_k {
  static constexpr std::string_view name = "q8_k";
  static constexpr gguf_type type_id = gguf_type::q8_k;
  static constexpr std::size_t block_elements = 256;
  static constexpr std::size_t sum_group = 16;
  /// The scale is a float, so every finite input is representable.
  static constexpr float max_input = std::numeric_limits<float>::max();

  struct block {
    float d;
    std::int8_t qs[block_elements];
    std::int16_t bsums[block_elements / sum_group];
  };
  using activation = q8_k;

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    const float max = detail::signed_absmax(x);
    const float scale = max != 0.f ? -127.f / max : 0.f;
    if (!std::isfinite(scale) || scale == 0.f) {
      out = block{};
      return;
    }
    for (std::size_t j = 0; j < block_elements; ++j) {
      const int q = detail::nearest_int(scale * x[j]);
      out.qs[j] = static_cast<std::int8_t>(q < 127 ? q : 127);
    }
    for (std::size_t g = 0; g < block_elements / sum_group; ++g) {
      int sum = 0;
      for (std::size_t j = 0; j < sum_group; ++j) sum += out.qs[g * sum_group + j];
      out.bsums[g] = static_cast<std::int16_t>(sum);
    }
    out.d = 1.f / scale;
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    for (std::size_t j = 0; j < block_elements; ++j) out[j] = b.d * static_cast<float>(b.qs[j]);
  }
};

static_assert(sizeof(q8_k::block) == 292, "block_q8_K is 292 bytes in ggml");
static_assert(BlockFormat<q8_k>);

}  // namespace hedge::quant
