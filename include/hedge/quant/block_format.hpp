// hedge/quant/block_format.hpp: what a weight/activation storage format is.
//
// A format stores a row of K floats as K / block_elements fixed-size blocks:
//
//   row of K floats:  [x0 .. x31][x32 .. x63] ... [x(K-32) .. x(K-1)]
//                          |          |                  |
//   row of blocks:    [ block 0 ][ block 1 ]   ...   [ block K/32-1 ]
//
// The block struct is an ABI: its bytes are exactly those of the matching GGUF
// tensor type (ggml's `block_q4_0`, ...), so a GGUF file's tensor data is used
// in place. Formats are types modelling `BlockFormat`:
//
//   F::block             the block struct (standard layout, trivially copyable)
//   F::block_elements    floats per block (32 for Q8_0/Q4_0, 256 for K-quants, 1 for F32)
//   F::type_id           the GGUF/ggml tensor type id
//   F::name              short name used in benchmark and test names ("q4_0")
//   F::activation        the format a GEMV quantizes the float activation to before
//                        the dot products (Q4_0 -> Q8_0, Q4_K -> Q8_K, floats -> F32)
//   F::max_input         the largest |x| the format stores without its scale
//                        overflowing (fp16 scales stop at 65504)
//   F::quantize_block    reference quantizer: the specification, bit-exact with ggml's
//   F::dequantize_block  reference dequantizer
//
// The row functions `quantize<F>` / `dequantize<F>` below validate their input
// (shape, NaN/inf, range) and return errors as values; the block functions
// assume valid input. Reference quantizers must be compiled without FP
// contraction (-ffp-contract=off, as hedge's own targets are): a fused
// multiply-add rounds once where ggml's C rounds twice and bytes would differ.
#pragma once

#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"

namespace hedge::quant {

/// GGUF tensor type ids (ggml's `enum ggml_type`; the numbers are the file ABI).
enum class gguf_type : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  bf16 = 30,
};

/// A storage format for rows of floats (see the file comment for each member).
template <class F>
concept BlockFormat =
    requires {
      typename F::block;
      typename F::activation;
      { F::name } -> std::convertible_to<std::string_view>;
      { F::type_id } -> std::convertible_to<gguf_type>;
      { F::block_elements } -> std::convertible_to<std::size_t>;
      { F::max_input } -> std::convertible_to<float>;
    } && std::is_standard_layout_v<typename F::block> && std::is_trivially_copyable_v<typename F::block> &&
    requires(std::span<const float, F::block_elements> in, typename F::block& out, const typename F::block& b,
             std::span<float, F::block_elements> values) {
      F::quantize_block(in, out);
      F::dequantize_block(b, values);
    };

/// Bytes of one row of `elements` values in format F (elements a multiple of the block).
template <BlockFormat F>
constexpr std::size_t row_bytes(std::size_t elements) noexcept {
  return elements / F::block_elements * sizeof(typename F::block);
}

namespace detail {

/// Round to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23 moves the
/// integer part into the low mantissa bits, where the FPU's default rounding
/// (to nearest even) has already rounded it. ggml's `nearest_int` uses this
/// trick, and the K-quant searches depend on its tie rule.
inline int nearest_int(float x) noexcept {
  const float shifted = x + 12582912.f;
  return static_cast<int>(std::bit_cast<std::uint32_t>(shifted) & 0x007FFFFFu) - 0x00400000;
}

/// Round to nearest, ties away from zero (C's roundf), as ggml's Q8_0 reference
/// does, for |x| < 2^31. Adding the largest float below 0.5 and truncating is
/// exact: a sum that reaches the next integer only does so when x's fraction is
/// >= 0.5 (the one rounding of the add cannot carry a smaller fraction across).
/// Inline arithmetic instead of a libm call keeps activation quantization cheap.
inline int round_half_away(float x) noexcept { return static_cast<int>(x + std::copysign(0.49999997f, x)); }

/// The largest magnitude of x as the bits of a float without its sign: finite floats and
/// inf order as these integers do, and a NaN lies above them all. A maximum over integers
/// vectorises, where a float compare-and-keep does not; it runs on every activation row
/// (quantize's check) and block (largest_magnitude).
inline std::int32_t largest_magnitude_bits(std::span<const float> x) noexcept {
  std::int32_t largest = 0;
  for (const float v : x) {
    const std::int32_t m = std::bit_cast<std::int32_t>(v) & 0x7FFFFFFF;
    largest = m > largest ? m : largest;
  }
  return largest;
}

/// The largest |v| of x, for finite x (ggml's `MAX(amax, fabsf(v))` loop): Q8_0 activation
/// rows 1.78x as fast as with that loop (activation/q8_0/prepare, bench/kernels/gemv_bench.cpp;
/// g++ 12 -O3 -march=native, Zen 5).
inline float largest_magnitude(std::span<const float> x) noexcept {
  return std::bit_cast<float>(largest_magnitude_bits(x));
}

/// The value of largest magnitude in finite x, with its sign (the first one on ties; +0 for
/// an all-zero block, as ggml's loop leaves it): ggml's symmetric quantizers (Q4_0, Q5_0,
/// Q8_K) scale by it so that it lands on the lowest level. Two branch-free passes, the
/// largest magnitude and then the first element that has it, which vectorise; ggml's one
/// compare-and-keep loop does not (Q8_K activation rows 2.57x as fast: activation/q8_k/prepare).
inline float signed_absmax(std::span<const float> x) noexcept {
  const float largest = largest_magnitude(x);
  if (largest == 0.f) return 0.f;
  const std::size_t n = x.size();
  std::size_t first = n;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = std::fabs(x[i]) == largest ? i : n;
    first = at < first ? at : first;
  }
  return x[first];
}

}  // namespace detail

/// Quantizes `x` (K floats) into `out` (K / F::block_elements blocks) with F's
/// reference quantizer. Rejects a size mismatch, NaN/inf and |x| > F::max_input.
template <BlockFormat F>
result<void> quantize(vector_view<const float> x, vector_view<typename F::block> out) noexcept {
  constexpr std::size_t n = F::block_elements;
  if (x.size() % n != 0 || x.size() / n != out.size()) {
    return error{errc::shape_mismatch} << F::name << ": " << x.size() << " floats do not fill " << out.size()
                                       << " blocks of " << n;
  }
  // inf and NaN have larger magnitude bits than any finite bound, so one maximum finds
  // them too; only a bad row is scanned again.
  if (detail::largest_magnitude_bits(x) > std::bit_cast<std::int32_t>(F::max_input)) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!std::isfinite(x[i])) return error{errc::invalid_argument} << F::name << ": non-finite input at " << i;
      if (std::fabs(x[i]) > F::max_input) {
        return error{errc::out_of_range} << F::name << ": |x[" << i << "]| = " << static_cast<double>(x[i])
                                         << " exceeds " << static_cast<double>(F::max_input);
      }
    }
  }
  for (std::size_t b = 0; b < out.size(); ++b) {
    F::quantize_block(std::span<const float, n>(x.data() + b * n, n), out[b]);
  }
  return ok();
}

/// Expands `blocks` into `out` (blocks.size() * F::block_elements floats).
template <BlockFormat F>
result<void> dequantize(vector_view<const typename F::block> blocks, vector_view<float> out) noexcept {
  constexpr std::size_t n = F::block_elements;
  if (out.size() != blocks.size() * n) {
    return error{errc::shape_mismatch} << F::name << ": " << blocks.size() << " blocks do not fill " << out.size()
                                       << " floats";
  }
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    F::dequantize_block(blocks[b], std::span<float, n>(out.data() + b * n, n));
  }
  return ok();
}

}  // namespace hedge::quant
