// hedge/quant/q5_1.hpp: Q5_1, 5-bit asymmetric blocks of 32 (GGUF type 7).
//
//   block_q5_1 (24 bytes):
//   byte  0      2        4                 8                                   24
//         [ d:f16 ][ m:f16 ][ qh: 4 bytes    ][ qs[0] qs[1] ...          qs[15] ]
//   qh, read as a little-endian uint32: bit j = bit 4 of n_j (j = 0..31)
//   qs[j] = (n_{j+16} & 15) << 4 | (n_j & 15)    (Q5_0's layout)
//   value_j = n_j * d + m,  n_j in [0, 31]
//
// Reference quantizer (ggml's quantize_row_q5_1_ref): m = the block's minimum,
// d = (max - min) / 31, n_j = (uint8)((x_j - min) * (1/d) + 0.5), truncating; a
// constant block has d = 0 and every level 0, and so does a block whose 1/d
// overflows float (max - min below ~1e-37, where ggml's conversion of inf is
// undefined behaviour).
//
// The activation is Q8_0, not ggml's Q8_1 (Q8_0 plus s = fp16(d * sum q)): the
// m * sum(x) term uses the exact integer sum of the Q8_0 levels instead of an fp16
// rounding of it, and Q5_1 shares the Q8_0 activation row of the other 32-blocks.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::quant {

struct q5_1 {
  static constexpr std::string_view name = "q5_1";
  static constexpr gguf_type type_id = gguf_type::q5_1;
  static constexpr std::size_t block_elements = 32;
  /// m (the minimum) is stored as fp16, so |x| must stay within 65504.
  static constexpr float max_input = 65504.f;

  struct block {
    hedge::f16 d;
    hedge::f16 m;
    std::uint8_t qh[4];
    std::uint8_t qs[block_elements / 2];
  };
  /// Q5_1 x Q8_0 (see the file comment).
  using activation = q8_0;

  /// The level n_j in [0, 31] of element j (Q5_0's layout of qs and qh).
  static int level(const block& b, std::size_t j) noexcept { return detail::q5_level(b, j); }

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    float min = x[0];
    float max = x[0];
    for (float v : x) {
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const float d = (max - min) / 31.f;
    const float inverse = d != 0.f && std::isfinite(1.f / d) ? 1.f / d : 0.f;
    out.d = f32_to_f16(d);
    out.m = f32_to_f16(min);
    unsigned levels[block_elements];
    for (std::size_t j = 0; j < block_elements; ++j) levels[j] = static_cast<std::uint8_t>((x[j] - min) * inverse + 0.5f);
    detail::pack_q5_levels(levels, out);
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    const float d = f16_to_f32(b.d);
    const float m = f16_to_f32(b.m);
    for (std::size_t j = 0; j < block_elements; ++j) out[j] = static_cast<float>(level(b, j)) * d + m;
  }
};

static_assert(sizeof(q5_1::block) == 24, "block_q5_1 is 24 bytes in GGUF");
static_assert(offsetof(q5_1::block, m) == 2 && offsetof(q5_1::block, qh) == 4 && offsetof(q5_1::block, qs) == 8,
              "block_q5_1 field offsets");
static_assert(BlockFormat<q5_1>);

}  // namespace hedge::quant
