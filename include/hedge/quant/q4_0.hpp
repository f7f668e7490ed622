// hedge/quant/q4_0.hpp: Q4_0, 4-bit symmetric blocks of 32 (GGUF type 2).
//
//   block_q4_0 (18 bytes):
//   byte  0      2                                   18
//         [ d:f16 ][ qs[0] qs[1] ...         qs[15] ]
//   qs[j] = (n_{j+16} << 4) | n_j       element j in the low nibble of byte j,
//           hi nibble   lo nibble       element j+16 in the high nibble
//   value_j = (n_j - 8) * d,  n_j in [0, 15]
//
// Reference quantizer (ggml's quantize_row_q4_0_ref): take the signed value of
// largest magnitude (the first one on ties), d = max / -8, so that value maps
// to nibble 0 (-8 * d = max); n_j = min(15, (int8)(x_j * (1/d) + 8.5)),
// truncating toward zero; an all-zero block has d = 0 and every nibble 8, and
// so does a block whose 1/d overflows float (|max| below ~1e-37, where ggml's
// float-to-int8 conversion of inf is undefined behaviour).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::quant {

struct q4_0 {
  static constexpr std::string_view name = "q4_0";
  static constexpr gguf_type type_id = gguf_type::q4_0;
  static constexpr std::size_t block_elements = 32;
  /// |max| / 8 must stay below fp16's largest finite value, 65504.
  static constexpr float max_input = 65504.f * 8.f;

  struct block {
    hedge::f16 d;
    std::uint8_t qs[block_elements / 2];
  };
  /// Q4_0 x Q8_0, as ggml pairs them.
  using activation = q8_0;

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    const float max = detail::signed_absmax(x);
    const float d = max / -8.f;
    const float inverse = d != 0.f && std::isfinite(1.f / d) ? 1.f / d : 0.f;
    out.d = f32_to_f16(d);
    constexpr std::size_t half = block_elements / 2;
    for (std::size_t j = 0; j < half; ++j) {
      const int lo = static_cast<std::int8_t>(x[j] * inverse + 8.5f);
      const int hi = static_cast<std::int8_t>(x[j + half] * inverse + 8.5f);
      out.qs[j] = static_cast<std::uint8_t>((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
    }
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    const float d = f16_to_f32(b.d);
    constexpr std::size_t half = block_elements / 2;
    for (std::size_t j = 0; j < half; ++j) {
      out[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
      out[j + half] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
};

static_assert(sizeof(q4_0::block) == 18, "block_q4_0 is 18 bytes in GGUF");
static_assert(BlockFormat<q4_0>);

}  // namespace hedge::quant
