// hedge/kernels/repack.hpp: weights interleaved 8 rows at a time, built once at
// load time, for the GEMV/GEMM kernels whose SIMD lanes are weight rows.
//
// A GGUF Q4_0/Q8_0 row keeps each block's 32 values together; a kernel that
// computes 8 rows at once wants, in one 32-byte load, 4 consecutive values of
// each of 8 rows. `interleaved<W>` stores a group of 8 rows' block b as:
//
//   d[8]:  the 8 rows' fp16 scales                               (16 bytes)
//   qs:    quad j of row r at bytes [32 j + 4 r, 32 j + 4 r + 4)
//
//          j = 0                         j = 1
//          [r0 q0..q3][r1 q0..q3]..[r7]  [r0 q4..q7][r1 q4..q7]..[r7]  ...
//
// where "quad j" is bytes 4j..4j+3 of the row's original qs: values 4j..4j+3
// for Q8_0 (8 quads); for Q4_0 (4 quads) the low nibbles hold values 4j..4j+3
// and the high nibbles values 16+4j..16+4j+3, as in the original block. The
// bytes are the original ones moved, so a group is exactly 8 blocks long and
// streams the same bytes per row as the GGUF layout (ggml's q4_0x8 and
// KleidiAI repack the same way). Rows beyond a multiple of 8 are padded with
// zero blocks. Repacking is explicit (`repack`), never done per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hedge/core/half.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::kernels {

/// Rows per interleaved group.
inline constexpr std::size_t interleave_rows = 8;

/// The 8-row interleaved layout of format W (defined for Q4_0 and Q8_0).
/// \tparam W the per-row format whose blocks are interleaved
template <quant::BlockFormat W>
struct interleaved;

template <>
struct interleaved<quant::q4_0> {
  using format = quant::q4_0;
  static constexpr std::size_t quads = 4;
  struct block {
    hedge::f16 d[interleave_rows];
    std::uint8_t qs[interleave_rows * 16];
  };
};

template <>
struct interleaved<quant::q8_0> {
  using format = quant::q8_0;
  static constexpr std::size_t quads = 8;
  struct block {
    hedge::f16 d[interleave_rows];
    std::int8_t qs[interleave_rows * 32];
  };
};

static_assert(sizeof(interleaved<quant::q4_0>::block) == 8 * sizeof(quant::q4_0::block));
static_assert(sizeof(interleaved<quant::q8_0>::block) == 8 * sizeof(quant::q8_0::block));

/// A format with an interleaved layout.
template <class W>
concept Interleavable = quant::BlockFormat<W> && requires { typename interleaved<W>::block; };

/// A rows x K matrix in the interleaved layout: ceil(rows / 8) groups of
/// K / 32 blocks each, group-major. Non-owning, like matrix_view.
/// \tparam W the per-row format (Q4_0 or Q8_0)
template <Interleavable W>
class interleaved_view {
 public:
  using block = typename interleaved<W>::block;
  constexpr interleaved_view() noexcept = default;
  constexpr interleaved_view(const block* data, std::size_t rows, std::size_t k) noexcept
      : data_(data), rows_(rows), k_(k) {}
  [[nodiscard]] constexpr const block* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t rows() const noexcept { return rows_; }
  /// Row length in elements.
  [[nodiscard]] constexpr std::size_t k() const noexcept { return k_; }
  [[nodiscard]] constexpr std::size_t blocks_per_row() const noexcept { return k_ / W::block_elements; }
  [[nodiscard]] constexpr std::size_t groups() const noexcept {
    return (rows_ + interleave_rows - 1) / interleave_rows;
  }
  /// The blocks of group g (rows 8g .. 8g+7).
  [[nodiscard]] constexpr const block* group(std::size_t g) const noexcept {
    HEDGE_ASSERT(g < groups());
    return data_ + g * blocks_per_row();
  }

 private:
  const block* data_ = nullptr;
  std::size_t rows_ = 0;
  std::size_t k_ = 0;
};

/// Interleaved blocks needed for a rows x k matrix of format W.
template <Interleavable W>
constexpr std::size_t interleaved_blocks(std::size_t rows, std::size_t k) noexcept {
  return (rows + interleave_rows - 1) / interleave_rows * (k / W::block_elements);
}

/// Row r (0..7) of an interleaved group block, as the original GGUF block.
template <Interleavable W>
constexpr typename W::block original_block(const typename interleaved<W>::block& group, std::size_t r) noexcept {
  typename W::block b{};
  b.d = group.d[r];
  for (std::size_t j = 0; j < interleaved<W>::quads; ++j) {
    for (std::size_t i = 0; i < 4; ++i) b.qs[4 * j + i] = group.qs[32 * j + 4 * r + i];
  }
  return b;
}

/// Copies `w` into the interleaved layout in `out` (interleaved_blocks(rows, k)
/// blocks) and returns the view of it.
template <Interleavable W>
result<interleaved_view<W>> repack(matrix_view<const typename W::block> w,
                                   vector_view<typename interleaved<W>::block> out) noexcept {
  const std::size_t k = w.cols() * W::block_elements;
  if (out.size() != interleaved_blocks<W>(w.rows(), k)) {
    return error{errc::shape_mismatch} << "repack<" << W::name << ">: " << w.rows() << "x" << k << " needs "
                                       << interleaved_blocks<W>(w.rows(), k) << " blocks, got " << out.size();
  }
  constexpr std::size_t quads = interleaved<W>::quads;
  for (std::size_t g = 0; g * interleave_rows < w.rows(); ++g) {
    for (std::size_t b = 0; b < w.cols(); ++b) {
      auto& dst = out[g * w.cols() + b];
      std::memset(static_cast<void*>(&dst), 0, sizeof dst);
      for (std::size_t r = 0; r < interleave_rows && g * interleave_rows + r < w.rows(); ++r) {
        const typename W::block& src = w(g * interleave_rows + r, b);
        dst.d[r] = src.d;
        for (std::size_t j = 0; j < quads; ++j) std::memcpy(dst.qs + 32 * j + 4 * r, src.qs + 4 * j, 4);
      }
    }
  }
  return interleaved_view<W>(out.data(), w.rows(), k);
}

}  // namespace hedge::kernels
