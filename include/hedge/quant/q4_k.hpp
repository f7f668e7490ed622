// hedge/quant/q4_k.hpp: Q4_K, 4-bit asymmetric super-blocks of 256 (GGUF type 12).
//
//   block_q4_K (144 bytes):
//   byte 0        2           4                    16                              144
//        [ d:f16 ][ dmin:f16 ][ scales: 12 bytes   ][ qs: 128 bytes of nibbles      ]
//
//   8 sub-blocks of 32 elements, each with a 6-bit scale s_j and a 6-bit min m_j:
//     value = d * s_j * n - dmin * m_j,  n in [0, 15]
//   scales[12], sixteen 6-bit fields (each byte drawn bit 7 .. bit 0), j = 0..3:
//     byte j:      [ s_{j+4} bits 5:4 ][ s_j: 6 bits ]
//     byte j + 4:  [ m_{j+4} bits 5:4 ][ m_j: 6 bits ]
//     byte j + 8:  [ m_{j+4} bits 3:0 ][ s_{j+4} bits 3:0 ]
//   qs: four 32-byte groups; group g holds sub-block 2g in the low nibbles and
//   sub-block 2g+1 in the high nibbles (byte l: element 64g+l | element 64g+32+l).
//
// Reference quantizer (ggml's quantize_row_q4_K_ref): each sub-block gets a
// weighted least-squares (scale, min) from `make_qkx2_quants` (a search over 21
// candidate inverse scales, weights rms + |x|); the 8 scales and mins are then
// quantized to 6 bits against their maxima (d = max_scale / 63, dmin = max_min / 63)
// and the nibbles recomputed with the rounded scales. Arithmetic order follows
// ggml's C exactly so the bytes match (see block_format.hpp on FP contraction).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::quant {

struct q4_k {
  static constexpr std::string_view name = "q4_k";
  static constexpr gguf_type type_id = gguf_type::q4_k;
  static constexpr std::size_t block_elements = 256;
  static constexpr std::size_t sub_elements = 32;
  static constexpr std::size_t sub_blocks = block_elements / sub_elements;
  /// dmin = max_min / 63 bounds |min| <= 63 * 65504; half of that leaves room
  /// for a fitted minimum beyond the data's own.
  static constexpr float max_input = 65504.f * 32.f;

  struct block {
    hedge::f16 d;
    hedge::f16 dmin;
    std::uint8_t scales[12];
    std::uint8_t qs[block_elements / 2];
  };
  /// Q4_K x Q8_K, as ggml pairs them.
  using activation = q8_k;

  /// The 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
  struct scale_min {
    std::uint8_t scale;
    std::uint8_t min;
  };
  static constexpr scale_min unpack_scale_min(const std::uint8_t (&scales)[12], std::size_t j) noexcept {
    if (j < 4) return {static_cast<std::uint8_t>(scales[j] & 63), static_cast<std::uint8_t>(scales[j + 4] & 63)};
    return {static_cast<std::uint8_t>((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4)),
            static_cast<std::uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
  }

  /// All 8 scales and 8 mins at once: each group of four 6-bit fields is
  /// gathered with 32-bit masks and shifts (the same layout as unpack_scale_min).
  struct scales_mins {
    std::uint8_t scales[sub_blocks];
    std::uint8_t mins[sub_blocks];
  };
  static scales_mins unpack_scales_mins(const std::uint8_t (&packed)[12]) noexcept {
    std::uint32_t a[3];
    std::memcpy(a, packed, sizeof a);
    const std::uint32_t low6 = 0x3F3F3F3Fu, low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
    const std::uint32_t words[4] = {a[0] & low6, (a[2] & low4) | (((a[0] >> 6) & low2) << 4), a[1] & low6,
                                    ((a[2] >> 4) & low4) | (((a[1] >> 6) & low2) << 4)};
    scales_mins out;
    std::memcpy(out.scales, words, 8);
    std::memcpy(out.mins, words + 2, 8);
    return out;
  }

  /// make_qkx2_quants' search: candidate inverse scales (nmax + rmin + rdelta * i) / (max - min), i = 0..steps.
  struct fit_search {
    float rmin;
    float rdelta;
    int steps;
  };

  /// The super-block quantizer Q4_K and Q5_K share (ggml's quantize_row_q4_K_ref and
  /// quantize_row_q5_K_ref differ only in the level range and the search parameters):
  /// fits each sub-block with fit_scale_min<Nmax>, stores d, dmin and the packed 6-bit
  /// scales and mins in `out`, and writes the 256 levels (in [0, Nmax]) recomputed
  /// with the stored scales.
  template <int Nmax, class Block>
  static void quantize_levels(std::span<const float, block_elements> x, const fit_search& search, Block& out,
                              std::uint8_t (&levels)[block_elements]) noexcept {
    float scales[sub_blocks];
    float mins[sub_blocks];
    float max_scale = 0.f;
    float max_min = 0.f;
    for (std::size_t j = 0; j < sub_blocks; ++j) {
      const float* sub = x.data() + j * sub_elements;
      float sum_x2 = 0.f;
      for (std::size_t l = 0; l < sub_elements; ++l) sum_x2 += sub[l] * sub[l];
      const float rms = std::sqrt(sum_x2 / 32.f);
      float weights[sub_elements];
      for (std::size_t l = 0; l < sub_elements; ++l) weights[l] = rms + std::fabs(sub[l]);
      scales[j] = fit_scale_min<Nmax>(sub, weights, search, levels + j * sub_elements, mins[j]);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }

    const float inverse_scale = max_scale > 0.f ? 63.f / max_scale : 0.f;
    const float inverse_min = max_min > 0.f ? 63.f / max_min : 0.f;
    for (std::size_t j = 0; j < sub_blocks; ++j) {
      const std::uint8_t ls = clamp63(detail::nearest_int(inverse_scale * scales[j]));
      const std::uint8_t lm = clamp63(detail::nearest_int(inverse_min * mins[j]));
      if (j < 4) {
        out.scales[j] = ls;
        out.scales[j + 4] = lm;
      } else {
        out.scales[j + 4] = static_cast<std::uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
        out.scales[j - 4] = static_cast<std::uint8_t>(out.scales[j - 4] | ((ls >> 4) << 6));
        out.scales[j] = static_cast<std::uint8_t>(out.scales[j] | ((lm >> 4) << 6));
      }
    }
    out.d = f32_to_f16(max_scale / 63.f);
    out.dmin = f32_to_f16(max_min / 63.f);

    // Requantize with the 6-bit scales actually stored. A sub-block whose
    // stored scale is 0 keeps the levels of the search, as ggml's does.
    for (std::size_t j = 0; j < sub_blocks; ++j) {
      const scale_min sm = unpack_scale_min(out.scales, j);
      const float d = f16_to_f32(out.d) * static_cast<float>(sm.scale);
      if (d == 0.f) continue;
      const float dm = f16_to_f32(out.dmin) * static_cast<float>(sm.min);
      for (std::size_t l = 0; l < sub_elements; ++l) {
        const int level = detail::nearest_int((x[j * sub_elements + l] + dm) / d);
        levels[j * sub_elements + l] = static_cast<std::uint8_t>(level < 0 ? 0 : level > Nmax ? Nmax : level);
      }
    }
  }

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    std::uint8_t levels[block_elements];
    quantize_levels<15>(x, {-1.f, 0.1f, 20}, out, levels);
    for (std::size_t g = 0; g < block_elements / 64; ++g) {
      for (std::size_t l = 0; l < 32; ++l) {
        out.qs[g * 32 + l] = static_cast<std::uint8_t>(levels[g * 64 + l] | (levels[g * 64 + 32 + l] << 4));
      }
    }
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    for (std::size_t g = 0; g < block_elements / 64; ++g) {
      const scale_min lo = unpack_scale_min(b.scales, 2 * g);
      const scale_min hi = unpack_scale_min(b.scales, 2 * g + 1);
      const float d_lo = d * static_cast<float>(lo.scale), m_lo = dmin * static_cast<float>(lo.min);
      const float d_hi = d * static_cast<float>(hi.scale), m_hi = dmin * static_cast<float>(hi.min);
      for (std::size_t l = 0; l < 32; ++l) {
        out[g * 64 + l] = d_lo * static_cast<float>(b.qs[g * 32 + l] & 0x0F) - m_lo;
        out[g * 64 + 32 + l] = d_hi * static_cast<float>(b.qs[g * 32 + l] >> 4) - m_hi;
      }
    }
  }

 private:
  static std::uint8_t clamp63(int v) noexcept {
    const auto u = static_cast<std::uint8_t>(v);  // ggml stores into uint8_t, then clamps
    return u < 63 ? u : std::uint8_t{63};
  }

  /// Weighted least-squares fit of x ~ scale * level + min, level in [0, Nmax]
  /// (ggml's make_qkx2_quants, squared error). Writes the levels, returns the
  /// scale and sets `neg_min` to -min (>= 0).
  template <int Nmax>
  static float fit_scale_min(const float* x, const float* weights, const fit_search& search, std::uint8_t* levels,
                             float& neg_min) noexcept {
    constexpr int n = static_cast<int>(sub_elements);
    constexpr int nmax = Nmax;
    const float rmin = search.rmin, rdelta = search.rdelta;
    const int steps = search.steps;
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
      if (x[i] < min) min = x[i];
      if (x[i] > max) max = x[i];
      const float w = weights[i];
      sum_w += w;
      sum_x += w * x[i];
    }
    if (min > 0.f) min = 0.f;
    if (max == min) {
      for (int i = 0; i < n; ++i) levels[i] = 0;
      neg_min = -min;
      return 0.f;
    }
    float inverse = static_cast<float>(nmax) / (max - min);
    float scale = 1.f / inverse;
    float best_error = 0.f;
    for (int i = 0; i < n; ++i) {
      levels[i] = clamp_level<Nmax>(detail::nearest_int(inverse * (x[i] - min)));
      float diff = scale * static_cast<float>(levels[i]) + min - x[i];
      diff = diff * diff;
      best_error += weights[i] * diff;
    }
    std::uint8_t trial[sub_elements];
    for (int step = 0; step <= steps; ++step) {
      inverse = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
      float sum_l = 0.f, sum_l2 = 0.f, sum_xl = 0.f;
      for (int i = 0; i < n; ++i) {
        trial[i] = clamp_level<Nmax>(detail::nearest_int(inverse * (x[i] - min)));
        const float w = weights[i];
        const float l = static_cast<float>(trial[i]);
        sum_l += w * l;
        sum_l2 += w * l * l;
        sum_xl += w * l * x[i];
      }
      const float det = sum_w * sum_l2 - sum_l * sum_l;
      if (det > 0.f) {
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0.f) {
          this_min = 0.f;
          this_scale = sum_xl / sum_l2;
        }
        float error = 0.f;
        for (int i = 0; i < n; ++i) {
          float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
          diff = diff * diff;
          error += weights[i] * diff;
        }
        if (error < best_error) {
          for (int i = 0; i < n; ++i) levels[i] = trial[i];
          best_error = error;
          scale = this_scale;
          min = this_min;
        }
      }
    }
    neg_min = -min;
    return scale;
  }

  template <int Nmax>
  static std::uint8_t clamp_level(int l) noexcept {
    return static_cast<std::uint8_t>(l < 0 ? 0 : l > Nmax ? Nmax : l);
  }
};

static_assert(sizeof(q4_k::block) == 144, "block_q4_K is 144 bytes in GGUF");
static_assert(BlockFormat<q4_k>);

}  // namespace hedge::quant
