// hedge/kv/element.hpp: how one head vector (head_dim floats) is stored in the KV cache.
//
// A KV element format encodes a K or V head vector on append and decodes it for
// the reference attention; the fast attention kernels read the stored units
// directly and dequantize in registers (hedge/attention/decode_avx2.hpp).
//
//   kv_f32   head_dim x float                      4 bytes / value
//   kv_f16   head_dim x binary16 (round to even)   2 bytes / value
//   kv_bf16  head_dim x bfloat16 (round to even)   2 bytes / value
//   kv_q8_0  ceil(head_dim / 32) x block_q8_0      34 bytes / 32 values
//   kv_q4_0  ceil(head_dim / 32) x block_q4_0      18 bytes / 32 values
//            (GGUF Q8_0 / Q4_0 blocks, one scale per 32 values of one head vector,
//            as llama.cpp's quantized KV caches; a head_dim that is not a multiple of
//            32, such as 80, pads its last block with zeros, which add nothing to a
//            dot product and are never read back as values)
//
// `KvElement` states what a format provides; a user format (e.g. fp8) that
// models it plugs into kv_cache and the reference attention unchanged.
#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include "hedge/core/half.hpp"
#include "hedge/core/result.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::kv {

/// A KV cache element format: `unit` is the stored type (trivially copyable),
/// `units(head_dim)` how many units hold one head vector, `encode` stores a head
/// vector (an error for values the format cannot hold), `decode` reads it back.
template <class E>
concept KvElement =
    requires { typename E::unit; } && std::is_trivially_copyable_v<typename E::unit> &&
    requires(std::size_t head_dim, std::span<const float> values, std::span<typename E::unit> out,
             std::span<const typename E::unit> stored, std::span<float> decoded) {
      { E::name } -> std::convertible_to<std::string_view>;
      { E::units(head_dim) } -> std::same_as<std::size_t>;
      { E::encode(values, out) } -> std::same_as<result<void>>;
      E::decode(stored, decoded);
    };

/// Bytes one head vector of `head_dim` values occupies in format E.
template <KvElement E>
constexpr std::size_t kv_vector_bytes(std::size_t head_dim) noexcept {
  return E::units(head_dim) * sizeof(typename E::unit);
}

/// float32, stored as given.
struct kv_f32 {
  using unit = float;
  static constexpr std::string_view name = "f32";
  static constexpr std::size_t units(std::size_t head_dim) noexcept { return head_dim; }
  static result<void> encode(std::span<const float> values, std::span<unit> out) noexcept {
    std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
    return ok();
  }
  static void decode(std::span<const unit> stored, std::span<float> out) noexcept {
    std::memcpy(out.data(), stored.data(), out.size() * sizeof(float));
  }
};

/// IEEE binary16: halves the cache; values beyond 65504 become inf, as in every fp16 KV cache.
struct kv_f16 {
  using unit = f16;
  static constexpr std::string_view name = "f16";
  static constexpr std::size_t units(std::size_t head_dim) noexcept { return head_dim; }
  static result<void> encode(std::span<const float> values, std::span<unit> out) noexcept {
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = f32_to_f16(values[i]);
    return ok();
  }
  static void decode(std::span<const unit> stored, std::span<float> out) noexcept {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(stored[i]);
  }
};

/// bfloat16: float32's range with 8 significant bits.
struct kv_bf16 {
  using unit = bf16;
  static constexpr std::string_view name = "bf16";
  static constexpr std::size_t units(std::size_t head_dim) noexcept { return head_dim; }
  static result<void> encode(std::span<const float> values, std::span<unit> out) noexcept {
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = f32_to_bf16(values[i]);
    return ok();
  }
  static void decode(std::span<const unit> stored, std::span<float> out) noexcept {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(stored[i]);
  }
};

namespace detail {
/// A KV element made of GGUF blocks of format F, quantized on append with ggml's
/// reference rounding (hedge/quant/). Non-finite values are rejected: one NaN would
/// poison the block's scale and every later attention output.
/// \tparam F the block format (quant::q8_0, quant::q4_0)
template <class F>
struct kv_block_element {
  using format = F;
  using unit = typename F::block;
  static constexpr std::size_t block_elements = F::block_elements;
  static constexpr std::string_view name = F::name;
  static constexpr std::size_t units(std::size_t head_dim) noexcept {
    return (head_dim + block_elements - 1) / block_elements;
  }
  static result<void> encode(std::span<const float> values, std::span<unit> out) noexcept {
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i]) || std::fabs(values[i]) > F::max_input)
        return error{errc::invalid_argument} << F::name << " KV: value " << i << " is not finite or exceeds "
                                             << static_cast<double>(F::max_input);
    }
    for (std::size_t b = 0; b < out.size(); ++b) {
      float padded[block_elements] = {};
      const std::size_t begin = b * block_elements;
      const std::size_t count = values.size() - begin < block_elements ? values.size() - begin : block_elements;
      std::memcpy(padded, values.data() + begin, count * sizeof(float));
      F::quantize_block(std::span<const float, block_elements>(padded, block_elements), out[b]);
    }
    return ok();
  }
  static void decode(std::span<const unit> stored, std::span<float> out) noexcept {
    for (std::size_t b = 0; b < stored.size(); ++b) {
      float block[block_elements];
      F::dequantize_block(stored[b], std::span<float, block_elements>(block, block_elements));
      const std::size_t begin = b * block_elements;
      const std::size_t count = out.size() - begin < block_elements ? out.size() - begin : block_elements;
      std::memcpy(out.data() + begin, block, count * sizeof(float));
    }
  }
};
}  // namespace detail

/// GGUF Q8_0 blocks per head vector (8-bit, 1.06 bytes per value).
struct kv_q8_0 : detail::kv_block_element<quant::q8_0> {};
/// GGUF Q4_0 blocks per head vector (4-bit, 0.56 bytes per value).
struct kv_q4_0 : detail::kv_block_element<quant::q4_0> {};

static_assert(KvElement<kv_f32> && KvElement<kv_f16> && KvElement<kv_bf16> && KvElement<kv_q8_0> &&
              KvElement<kv_q4_0>);

}  // namespace hedge::kv
