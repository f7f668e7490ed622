// Shared helpers of the gemv/gemm tests: random quantized matrices, the
// float64 (Eigen) reference and the error bounds the kernels are held to.
#pragma once

#include <Eigen/Dense>

#include <cmath>
#include <cstddef>
#include <random>
#include <type_traits>
#include <vector>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"

namespace hedge::test {

/// A (format, arch) pair for typed tests.
template <class W, class A>
struct variant {
  using format = W;
  using arch = A;
};

namespace detail {
template <class A, class... Compiled>
constexpr bool derives_from_simd_tag(arch::tag_list<Compiled...>) {
  return ((!std::is_same_v<Compiled, arch::scalar> && std::is_base_of_v<Compiled, A>) || ...);
}
}  // namespace detail

/// Whether A::supported() can be true in this build: A is scalar, arch::best, or derives
/// from a SIMD tag of arch::compiled. Every other tag's supported() is false whatever the
/// CPU (NEON tags in an x86 build, x86 tags in an AArch64 or HEDGE_NO_SIMD one:
/// core/arch.hpp), so its typed tests skip, and their bodies are left uninstantiated
/// (`if constexpr`) rather than compiled for nothing: the tag falls back to the scalar
/// kernels, and the references would be compiled once more per (format, tag).
template <class A>
inline constexpr bool may_run = std::is_same_v<A, arch::scalar> || std::is_same_v<A, arch::best> ||
                                detail::derives_from_simd_tag<A>(arch::compiled{});

/// Random floats, roughly normal, with a few larger values per row as real weights have.
inline std::vector<float> random_floats(std::size_t n, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  for (std::size_t i = 0; i < n; i += 97) v[i] *= 4.f;
  return v;
}

/// A rows x k weight matrix in format W, stored with `stride` blocks per row
/// (>= k / block_elements) starting `offset` blocks into the buffer, plus its
/// exact dequantized values as float64.
template <quant::BlockFormat W>
struct quantized_matrix {
  std::size_t rows, k, stride, offset;
  std::vector<typename W::block> storage;
  Eigen::MatrixXd values;  // rows x k, the dequantized weights

  quantized_matrix(std::size_t rows_, std::size_t k_, unsigned seed, std::size_t extra_stride = 0,
                   std::size_t offset_ = 0)
      : rows(rows_), k(k_), stride(k_ / W::block_elements + extra_stride), offset(offset_),
        storage(offset_ + rows_ * stride + 1), values(rows_, k_) {
    const auto floats = random_floats(rows * k, seed);
    std::vector<float> row(k);
    for (std::size_t r = 0; r < rows; ++r) {
      auto* blocks = storage.data() + offset + r * stride;
      const auto status =
          quant::quantize<W>({floats.data() + r * k, k}, {blocks, k / W::block_elements});
      if (!status) std::abort();
      (void)quant::dequantize<W>({blocks, k / W::block_elements}, {row.data(), k});
      for (std::size_t c = 0; c < k; ++c) values(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) = row[c];
    }
  }
  matrix_view<const typename W::block> view() const {
    return {storage.data() + offset, rows, k / W::block_elements, stride};
  }
};

/// The activation as the kernels see it (quantized to W's activation format and
/// back, or as it is for float formats), and per element the largest error that
/// rounding x to that format can introduce.
template <quant::BlockFormat W>
struct activation_error {
  std::vector<double> seen;
  std::vector<double> bound;
  explicit activation_error(const std::vector<float>& x) : seen(x.size()), bound(x.size(), 0.0) {
    using act = typename W::activation;
    if constexpr (std::is_same_v<act, quant::f32>) {
      for (std::size_t i = 0; i < x.size(); ++i) seen[i] = x[i];
    } else {
      constexpr std::size_t n = act::block_elements;
      std::vector<typename act::block> blocks(x.size() / n);
      std::vector<float> back(x.size());
      if (!quant::quantize<act>({x.data(), x.size()}, {blocks.data(), blocks.size()})) std::abort();
      (void)quant::dequantize<act>({blocks.data(), blocks.size()}, {back.data(), back.size()});
      for (std::size_t i = 0; i < x.size(); ++i) {
        seen[i] = back[i];
        double amax = 0;
        for (std::size_t j = i / n * n; j < i / n * n + n; ++j) amax = std::max(amax, std::fabs(double(x[j])));
        // Half a step of amax/127, plus (Q8_0) the fp16 rounding of the scale
        // times up to 127 steps: 2^-11 relative.
        bound[i] = amax / 127.0 * (0.5 + 127.0 * 0x1p-11) + 1e-30;
      }
    }
  }
};

}  // namespace hedge::test
