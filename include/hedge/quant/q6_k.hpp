// hedge/quant/q6_k.hpp: Q6_K, 6-bit symmetric super-blocks of 256 (GGUF type 14).
//
//   block_q6_K (210 bytes):
//   byte 0                      128                  192                  208        210
//        [ ql: 128 bytes, low 4 bits ][ qh: 64 bytes, high 2 bits ][ scales: int8 x 16 ][ d:f16 ]
//
//   16 sub-blocks of 16 elements, each with a signed 8-bit scale s_j:
//     value_e = d * s_{e/16} * (q_e - 32),  q_e in [0, 63]
//   Two halves h = 0, 1 of 128 elements; element e = 128h + 32i + l (i = 0..3,
//   l = 0..31) keeps its low 4 bits and high 2 bits at
//     i = 0: ql[64h + l]      bits 3:0   qh[32h + l] bits 1:0
//     i = 1: ql[64h + 32 + l] bits 3:0   qh[32h + l] bits 3:2
//     i = 2: ql[64h + l]      bits 7:4   qh[32h + l] bits 5:4
//     i = 3: ql[64h + 32 + l] bits 7:4   qh[32h + l] bits 7:6
//
// Reference quantizer (ggml's quantize_row_q6_K_ref): each sub-block gets a scale
// from `make_qx_quants` (levels -32..31, weights x^2, the start scale -32 / max and
// 18 more candidates -(32 + 0.1 i) / max, keeping the best weighted least-squares
// fit); the 16 scales are quantized to int8 against the one of largest magnitude
// (d = max_scale / -128) and the levels recomputed with the rounded scales. A block
// whose scales are all below 1e-15 is all zero. Arithmetic order follows ggml's C
// exactly so the bytes match (see block_format.hpp on FP contraction).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::quant {

struct q6_k {
  static constexpr std::string_view name = "q6_k";
  static constexpr gguf_type type_id = gguf_type::q6_k;
  static constexpr std::size_t block_elements = 256;
  static constexpr std::size_t sub_elements = 16;
  static constexpr std::size_t sub_blocks = block_elements / sub_elements;
  /// |d| = |max_scale| / 128, and a sub-block's least-squares scale is at most
  /// 1.5 amax / 31.1 (a ratio x / level whose level rounding moved it by at most
  /// half a step), so |d| <= amax / 2560: amax up to 65504 * 2048 keeps d finite.
  static constexpr float max_input = 65504.f * 2048.f;

  struct block {
    std::uint8_t ql[block_elements / 2];
    std::uint8_t qh[block_elements / 4];
    std::int8_t scales[sub_blocks];
    hedge::f16 d;
  };
  /// Q6_K x Q8_K, as ggml pairs them.
  using activation = q8_k;

  /// The 6-bit level q_e in [0, 63] of element e (see the layout above).
  static constexpr std::uint8_t level(const block& b, std::size_t e) noexcept {
    const std::size_t half = e / 128, i = (e % 128) / 32, l = e % 32;
    const std::uint8_t low = b.ql[64 * half + 32 * (i & 1) + l];
    const std::uint8_t high = b.qh[32 * half + l];
    return static_cast<std::uint8_t>(((i < 2 ? low : low >> 4) & 0x0F) | (((high >> (2 * i)) & 3) << 4));
  }

  static void quantize_block(std::span<const float, block_elements> x, block& out) noexcept {
    std::uint8_t levels[block_elements];
    float scales[sub_blocks];
    float max_scale = 0.f;
    float max_abs_scale = 0.f;
    for (std::size_t j = 0; j < sub_blocks; ++j) {
      scales[j] = fit_scale(x.data() + j * sub_elements, levels + j * sub_elements);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < group_max_eps) {
      out = block{};
      return;
    }

    const float inverse = -128.f / max_scale;
    out.d = f32_to_f16(1.f / inverse);
    for (std::size_t j = 0; j < sub_blocks; ++j) {
      const int s = detail::nearest_int(inverse * scales[j]);
      out.scales[j] = static_cast<std::int8_t>(s < 127 ? s : 127);
    }

    // Requantize with the int8 scales actually stored. A sub-block whose stored
    // scale is 0 keeps the levels of the search, as ggml's does.
    for (std::size_t j = 0; j < sub_blocks; ++j) {
      const float d = f16_to_f32(out.d) * static_cast<float>(out.scales[j]);
      if (d == 0.f) continue;
      for (std::size_t l = 0; l < sub_elements; ++l) {
        const int q = detail::nearest_int(x[j * sub_elements + l] / d);
        levels[j * sub_elements + l] = static_cast<std::uint8_t>((q < -32 ? -32 : q > 31 ? 31 : q) + 32);
      }
    }
    for (std::size_t half = 0; half < 2; ++half) {
      const std::uint8_t* lv = levels + 128 * half;
      for (std::size_t l = 0; l < 32; ++l) {
        out.ql[64 * half + l] = static_cast<std::uint8_t>((lv[l] & 0x0F) | ((lv[l + 64] & 0x0F) << 4));
        out.ql[64 * half + 32 + l] = static_cast<std::uint8_t>((lv[l + 32] & 0x0F) | ((lv[l + 96] & 0x0F) << 4));
        out.qh[32 * half + l] = static_cast<std::uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) |
                                                          ((lv[l + 64] >> 4) << 4) | ((lv[l + 96] >> 4) << 6));
      }
    }
  }

  static void dequantize_block(const block& b, std::span<float, block_elements> out) noexcept {
    const float d = f16_to_f32(b.d);
    for (std::size_t e = 0; e < block_elements; ++e) {
      out[e] = d * static_cast<float>(b.scales[e / sub_elements]) * static_cast<float>(level(b, e) - 32);
    }
  }

 private:
  /// ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is zero.
  static constexpr float group_max_eps = 1e-15f;

  /// ggml's make_qx_quants(16, 32, x, L, rmse_type 1, no weights): levels
  /// l + 32 with l = nearest_int(iscale * x) in [-32, 31], weights x^2; returns
  /// the best least-squares scale over iscale = -(32 + 0.1 i) / max, i = -9..9.
  /// An all-zero sub-block (|x| < 1e-15) gets levels 0 and scale 0.
  static float fit_scale(const float* x, std::uint8_t* levels) noexcept {
    constexpr int n = static_cast<int>(sub_elements);
    constexpr int nmax = 32;
    float max = 0.f;
    float amax = 0.f;
    for (int i = 0; i < n; ++i) {
      const float ax = std::fabs(x[i]);
      if (ax > amax) {
        amax = ax;
        max = x[i];
      }
    }
    if (amax < group_max_eps) {
      for (int i = 0; i < n; ++i) levels[i] = 0;
      return 0.f;
    }
    float inverse = static_cast<float>(-nmax) / max;
    float sum_lx = 0.f;
    float sum_l2 = 0.f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_level(detail::nearest_int(inverse * x[i]));
      levels[i] = static_cast<std::uint8_t>(l + nmax);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = sum_l2 != 0.f ? sum_lx / sum_l2 : 0.f;
    float best = scale * sum_lx;
    for (int step = -9; step <= 9; ++step) {
      if (step == 0) continue;
      inverse = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
      sum_lx = 0.f;
      sum_l2 = 0.f;
      for (int i = 0; i < n; ++i) {
        const int l = clamp_level(detail::nearest_int(inverse * x[i]));
        const float w = x[i] * x[i];
        sum_lx += w * x[i] * static_cast<float>(l);
        sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
      }
      if (sum_l2 > 0.f && sum_lx * sum_lx > best * sum_l2) {
        for (int i = 0; i < n; ++i) {
          levels[i] = static_cast<std::uint8_t>(clamp_level(detail::nearest_int(inverse * x[i])) + nmax);
        }
        scale = sum_lx / sum_l2;
        best = scale * sum_lx;
      }
    }
    return scale;
  }

  static int clamp_level(int l) noexcept { return l < -32 ? -32 : l > 31 ? 31 : l; }
};

static_assert(sizeof(q6_k::block) == 210, "block_q6_K is 210 bytes in GGUF");
static_assert(offsetof(q6_k::block, qh) == 128 && offsetof(q6_k::block, scales) == 192 &&
                  offsetof(q6_k::block, d) == 208,
              "block_q6_K field offsets");
static_assert(BlockFormat<q6_k>);

}  // namespace hedge::quant
