// hedge/core/half.hpp: IEEE binary16 (fp16) and bfloat16 <-> float32.
//
//   fp16: [sign:1][exponent:5, bias 15][mantissa:10]   (IEEE 754 binary16, GGUF F16)
//   bf16: [sign:1][exponent:8, bias 127][mantissa:7]   (upper half of a binary32, GGUF BF16)
//
// Narrowing rounds to nearest, ties to even, as IEEE 754 and F16C's VCVTPS2PH
// (imm 0) do, so these scalar routines are the specification the SIMD
// conversions are tested against. Overflow gives inf, NaN stays NaN (quiet).
// Integer-only bit manipulation: constexpr, no FPU state, exact on any target.
#pragma once

#include <bit>
#include <cstdint>

namespace hedge {

/// A binary16 value held as its bits (the GGUF/ggml `ggml_fp16_t` ABI).
struct f16 {
  std::uint16_t bits = 0;
  friend constexpr bool operator==(f16, f16) = default;
};
/// A bfloat16 value held as its bits (the GGUF/ggml `ggml_bf16_t` ABI).
struct bf16 {
  std::uint16_t bits = 0;
  friend constexpr bool operator==(bf16, bf16) = default;
};
static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2);

constexpr float f16_to_f32(f16 h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = h.bits & 0x3FFu;
  std::uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf or NaN, payload kept
  } else if (exponent != 0) {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalise. value = mantissa * 2^-24.
    int shift = std::countl_zero(mantissa) - 21;  // leading zeros within the 10-bit field, +1
    mantissa = (mantissa << shift) & 0x3FFu;
    bits = sign | (static_cast<std::uint32_t>(127 - 15 + 1 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

constexpr f16 f32_to_f16(float value) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    const bool nan = abs > 0x7F800000u;
    return f16{static_cast<std::uint16_t>(sign | 0x7C00u | (nan ? 0x200u | ((abs >> 13) & 0x3FFu) : 0u))};
  }
  if (abs >= 0x477FF000u) return f16{static_cast<std::uint16_t>(sign | 0x7C00u)};  // rounds to >= 65520: inf
  const std::int32_t exponent = static_cast<std::int32_t>(abs >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: drop 13 mantissa bits with round-to-nearest-even; a carry
    // into the exponent is the correct result (it may reach the next binade).
    const std::uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return f16{static_cast<std::uint16_t>(sign | ((rounded - (static_cast<std::uint32_t>(127 - 15) << 23)) >> 13))};
  }
  if (exponent < -25) return f16{sign};  // below half the smallest subnormal: zero
  // Subnormal half: value = m * 2^-24 with m = full significand >> (shift).
  const std::uint32_t significand = (abs & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = static_cast<std::uint32_t>(-exponent - 14 + 13);  // 14..24
  const std::uint32_t truncated = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1);
  const std::uint32_t m = truncated + ((remainder > halfway || (remainder == halfway && (truncated & 1u))) ? 1u : 0u);
  return f16{static_cast<std::uint16_t>(sign | m)};
}

constexpr float bf16_to_f32(bf16 h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16);
}

constexpr bf16 f32_to_bf16(float value) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return bf16{static_cast<std::uint16_t>((x >> 16) | 0x40u)};  // quiet NaN
  return bf16{static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16)};
}

}  // namespace hedge
