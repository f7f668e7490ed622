// hedge/quant/q5_0.hpp: Q5_0, 5-bit symmetric blocks of 32 (GGUF type 6).
//
//   block_q5_0 (22 bytes):
//   byte  0      2                 6                                   22
//         [ d:f16 ][ qh: 4 bytes    ][ qs[0] qs[1] ...          qs[15] ]
//   qh, read as a little-endian uint32: bit j = bit 4 of n_j (j = 0..31)
//   qs[j] = (n_{j+16} & 15) << 4 | (n_j & 15)    element j in the low nibble of
//                                                byte j, element j+16 in the high
//   value_j = (n_j - 16) * d,  n_j in [0, 31]
//
// Q4_0 with a fifth bit per element, kept apart in qh so the nibbles keep Q4_0's
// layout. Reference quantizer (ggml's quantize_row_q5_0_ref): take the signed value
// of largest magnitude (the first one on ties), d = max / -16, so that value maps to
// level 0 (-16 * d = max); n_j = min(31, (int8)(x_j * (1/d) + 16.5)), truncating
// toward zero; an all-zero block has d = 0 and every level 16, and so does a block
// whose 1/d overflows float (|max| below ~2e-37, where ggml's float-to-int8
// conversion of inf is undefined behaviour).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::quant {

namespace detail {

/// The level n_j in [0, 31] of element j of a block in Q5_0's layout of qs and qh
/// (Q5_0 and Q5_1).
template <class Block>
int q5_level(const Block& b, std::size_t j) noexcept {
  const int nibble = j < 16 ? b.qs[j] & 0x0F : b.qs[j - 16] >> 4;
  return nibble | ((b.qh[j / 8] >> (j % 8)) & 1) << 4;
}

/// Stores 32 levels in [0, 31] into a block's qs and qh (Q5_0's layout).
template <class Block>
void pack_q5_levels(const unsigned (&levels)[32], Block& out) noexcept {
  std::uint32_t qh = 0;
  for (std::size_t j = 0; j < 16; ++j) {
    const unsigned n0 = levels[j], n1 = levels[j + 16];
    out.qs[j] = static_cast<std::uint8_t>((n0 & 0x0F) | (n1 & 0x0F) << 4);
    qh |= ((n0 >> 4) & 1u) << j | ((n1 >> 4) & 1u) << (j + 16);
  }
  for (std::size_t i = 0; i < 4; ++i) out.qh[i] = static_cast<std::uint8_t>(qh >> (8 * i));
}

}  // namespace detail

struct q5_0 {
  static constexpr std::string_view name = "q5_0";
  static constexpr gguf_type type_id = gguf_type::q5_0;
  static constexpr std::size_t block_elements = 32;
  /// |max| / 16 must stay below fp16's largest finite value, 65504.
  static constexpr float max_input = 65504.f * 16.f;

  struct block {
    hedge::f16 d;
    std::uint8_t qh[4];
    std::uint8_t qs[block_elements / 2];
  };
  /// Q5_0 x Q8_0, as ggml pairs them.
  using activation = q8_0;

  /// The fifth bits of the 32 levels, bit j for element j.
  static std::uint32_t high_bits(const block& b) noexcept {
    return static_cast<std::uint32_t>(b.qh[0]) | static_cast<std::uint32_t>(b.qh[1]) << 8 |
           static_cast<std::uint32_t>(b.qh[2]) << 16 | static_cast<std::uint32_t>(b.qh[3]) << 24;
  }

  /// The level n_j in [0, 31] of element j.
  static int level(const block& b, std::size_t j) noexcept { return detail::q5_level(b, j); }

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    const float max = detail::signed_absmax(x);
    const float d = max / -16.f;
    const float inverse = d != 0.f && std::isfinite(1.f / d) ? 1.f / d : 0.f;
    out.d = f32_to_f16(d);
    unsigned levels[block_elements];
    for (std::size_t j = 0; j < block_elements; ++j) {
      const int n = static_cast<std::int8_t>(x[j] * inverse + 16.5f);
      levels[j] = static_cast<unsigned>(n < 31 ? n : 31);
    }
    detail::pack_q5_levels(levels, out);
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    const float d = f16_to_f32(b.d);
    for (std::size_t j = 0; j < block_elements; ++j) out[j] = static_cast<float>(level(b, j) - 16) * d;
  }
};

static_assert(sizeof(q5_0::block) == 22, "block_q5_0 is 22 bytes in GGUF");
static_assert(offsetof(q5_0::block, qh) == 2 && offsetof(q5_0::block, qs) == 6, "block_q5_0 field offsets");
static_assert(BlockFormat<q5_0>);

}  // namespace hedge::quant
