// hedge/quant/float_formats.hpp: unquantized rows, F32 / F16 / BF16 (GGUF types 0, 1, 30).
//
//   f32:  [ 4 bytes IEEE binary32 ] per element
//   f16:  [ 2 bytes IEEE binary16 ] per element   s eeeee mmmmmmmmmm
//   bf16: [ 2 bytes bfloat16      ] per element   s eeeeeeee mmmmmmm (top half of a binary32)
//
// Each "block" is one element, so any K works. Their activation partner is F32:
// a GEMV streams the weights once and reads the activation from cache, so
// converting the activation down to 16 bits would cost accuracy and buy nothing.
// Narrowing rounds to nearest even (hedge/core/half.hpp), as ggml's converters do.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string_view>

#include "hedge/core/half.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::quant {

struct f32 {
  static constexpr std::string_view name = "f32";
  static constexpr gguf_type type_id = gguf_type::f32;
  static constexpr std::size_t block_elements = 1;
  static constexpr float max_input = std::numeric_limits<float>::max();
  using block = float;
  using activation = f32;

  static void quantize_block(std::span<const float, 1> x, block& out) noexcept { out = x[0]; }
  static void dequantize_block(const block& b, std::span<float, 1> out) noexcept { out[0] = b; }
};

struct f16 {
  static constexpr std::string_view name = "f16";
  static constexpr gguf_type type_id = gguf_type::f16;
  static constexpr std::size_t block_elements = 1;
  /// Values up to 65504 + half an ulp round to 65504; beyond that to inf.
  static constexpr float max_input = 65504.f;
  using block = hedge::f16;
  using activation = f32;

  static void quantize_block(std::span<const float, 1> x, block& out) noexcept { out = f32_to_f16(x[0]); }
  static void dequantize_block(const block& b, std::span<float, 1> out) noexcept { out[0] = f16_to_f32(b); }
};

struct bf16 {
  static constexpr std::string_view name = "bf16";
  static constexpr gguf_type type_id = gguf_type::bf16;
  static constexpr std::size_t block_elements = 1;
  /// The largest bfloat16 (0x7F7F); larger floats may round up to inf.
  static constexpr float max_input = 3.38953139e38f;
  using block = hedge::bf16;
  using activation = f32;

  static void quantize_block(std::span<const float, 1> x, block& out) noexcept { out = f32_to_bf16(x[0]); }
  static void dequantize_block(const block& b, std::span<float, 1> out) noexcept { out[0] = bf16_to_f32(b); }
};

static_assert(sizeof(f32::block) == 4 && sizeof(f16::block) == 2 && sizeof(bf16::block) == 2);
static_assert(BlockFormat<f32> && BlockFormat<f16> && BlockFormat<bf16>);

}  // namespace hedge::quant
