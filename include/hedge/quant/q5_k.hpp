// hedge/quant/q5_k.hpp: Q5_K, 5-bit asymmetric super-blocks of 256 (GGUF type 13).
//
//   block_q5_K (176 bytes):
//   byte 0        2           4                  16                 48                        176
//        [ d:f16 ][ dmin:f16 ][ scales: 12 bytes ][ qh: 32 bytes     ][ qs: 128 bytes of nibbles ]
//
//   Q4_K with a fifth bit per element: the same 8 sub-blocks of 32 with 6-bit scales
//   s_j and mins m_j packed in `scales` exactly as Q4_K's (quant/q4_k.hpp), the same
//   nibble layout in qs, and
//     value = d * s_j * n - dmin * m_j,  n in [0, 31]
//   where bit 4 of n is in qh: element 64g + l (l < 32) of sub-block 2g has it at
//   bit 2g of qh[l], element 64g + 32 + l (sub-block 2g + 1) at bit 2g + 1 of qh[l].
//
//          qh[l]:  bit 7 6 5 4 3 2 1 0
//              sub-block 7 6 5 4 3 2 1 0   (element l of each sub-block)
//
// Reference quantizer (ggml's quantize_row_q5_K_ref): Q4_K's (q4_k::quantize_levels)
// with levels in [0, 31] and make_qkx2_quants' search rmin -0.5, rdelta 0.1, 15 steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::quant {

struct q5_k {
  static constexpr std::string_view name = "q5_k";
  static constexpr gguf_type type_id = gguf_type::q5_k;
  static constexpr std::size_t block_elements = 256;
  static constexpr std::size_t sub_elements = 32;
  static constexpr std::size_t sub_blocks = block_elements / sub_elements;
  /// As Q4_K's: dmin = max_min / 63 with room for a fitted minimum beyond the data's.
  static constexpr float max_input = q4_k::max_input;

  struct block {
    hedge::f16 d;
    hedge::f16 dmin;
    std::uint8_t scales[12];
    std::uint8_t qh[block_elements / 8];
    std::uint8_t qs[block_elements / 2];
  };
  /// Q5_K x Q8_K, as ggml pairs them.
  using activation = q8_k;

  /// The level n in [0, 31] of element e (see the layout above).
  static constexpr std::uint8_t level(const block& b, std::size_t e) noexcept {
    const std::size_t sub = e / sub_elements, l = e % sub_elements;
    const std::uint8_t nibble = (b.qs[32 * (sub / 2) + l] >> (4 * (sub % 2))) & 0x0F;
    return static_cast<std::uint8_t>(nibble | ((b.qh[l] >> sub) & 1) << 4);
  }

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    std::uint8_t levels[block_elements];
    q4_k::quantize_levels<31>(x, {-0.5f, 0.1f, 15}, out, levels);
    for (std::size_t g = 0; g < block_elements / 64; ++g) {
      for (std::size_t l = 0; l < 32; ++l) {
        const std::uint8_t lo = levels[64 * g + l], hi = levels[64 * g + 32 + l];
        out.qs[32 * g + l] = static_cast<std::uint8_t>((lo & 0x0F) | (hi & 0x0F) << 4);
        const std::uint8_t bits = static_cast<std::uint8_t>((lo >> 4) << (2 * g) | (hi >> 4) << (2 * g + 1));
        out.qh[l] = static_cast<std::uint8_t>((g == 0 ? 0 : out.qh[l]) | bits);
      }
    }
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    for (std::size_t sub = 0; sub < sub_blocks; ++sub) {
      const auto sm = q4_k::unpack_scale_min(b.scales, sub);
      const float ds = d * static_cast<float>(sm.scale), dm = dmin * static_cast<float>(sm.min);
      for (std::size_t l = 0; l < sub_elements; ++l) {
        out[sub * sub_elements + l] = ds * static_cast<float>(level(b, sub * sub_elements + l)) - dm;
      }
    }
  }
};

static_assert(sizeof(q5_k::block) == 176, "block_q5_K is 176 bytes in GGUF");
static_assert(offsetof(q5_k::block, scales) == 4 && offsetof(q5_k::block, qh) == 16 &&
                  offsetof(q5_k::block, qs) == 48,
              "block_q5_K field offsets");
static_assert(BlockFormat<q5_k>);

}  // namespace hedge::quant
