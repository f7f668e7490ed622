// hedge/quant/q8_0.hpp: Q8_0, 8-bit symmetric blocks of 32 (GGUF type 8).
//
//   block_q8_0 (34 bytes):
//   byte  0      2                                         34
//         [ d:f16 ][ qs[0] qs[1] ...               qs[31] ]
//                    int8, value_j = qs[j] * d
//
// Reference quantizer (ggml's quantize_row_q8_0_ref): d = amax / 127, stored as
// fp16 (round to nearest even); q_j = roundf(x_j * (1/d)) with ties away from
// zero, computed from the float d (not the rounded fp16 one); an all-zero block
// has d = 0 and q = 0. |q| <= 127, so -128 never appears: the kernels rely on
// that to keep vpmaddubsw's int16 pair sums from saturating. Where 1/d
// overflows float (amax below ~1e-36, so d is 0 in fp16 anyway) the block
// stores q = 0: ggml's result there is undefined behaviour (inf to int8).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::quant {

struct q8_0 {
  static constexpr std::string_view name = "q8_0";
  static constexpr gguf_type type_id = gguf_type::q8_0;
  static constexpr std::size_t block_elements = 32;
  /// amax / 127 must stay below fp16's largest finite value, 65504.
  static constexpr float max_input = 65504.f * 127.f;

  struct block {
    hedge::f16 d;
    std::int8_t qs[block_elements];
  };
  /// Q8_0 x Q8_0: the activation is quantized to the same format.
  using activation = q8_0;

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    const float amax = detail::largest_magnitude(x);
    const float d = amax / 127.f;
    const float inverse = d != 0.f && std::isfinite(1.f / d) ? 1.f / d : 0.f;
    out.d = f32_to_f16(d);
    for (std::size_t j = 0; j < block_elements; ++j) {
      out.qs[j] = static_cast<std::int8_t>(detail::round_half_away(x[j] * inverse));
    }
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    const float d = f16_to_f32(b.d);
    for (std::size_t j = 0; j < block_elements; ++j) out[j] = static_cast<float>(b.qs[j]) * d;
  }
};

static_assert(sizeof(q8_0::block) == 34, "block_q8_0 is 34 bytes in GGUF");
static_assert(BlockFormat<q8_0>);

}  // namespace hedge::quant
