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
// KleidiAI repack the same way).
//
// Q4_K (8 rows x one 256-element super-block, 1184 bytes):
//
//   d[8], dmin[8]:  fp16                                         (32 bytes)
//   scales[8 j + r]:        6-bit scale of sub-block j, row r    (64 bytes)
//   mins[16 p + 2 r + i]:   6-bit min of sub-block 2p + i, row r (64 bytes)
//   qs[256 g + 32 j + 4 r + i] = byte 32 g + 4 j + i of row r's qs  (1024 bytes)
//
// The nibbles move like Q4_0's (quad j of group g: low nibbles sub-block 2g,
// high nibbles 2g+1). The 12 bytes of packed 6-bit scales and mins are stored
// unpacked, one byte each (+32 bytes per group block, 2.8% more than GGUF),
// so the kernels load 8 rows' scales of a sub-block with one 8-byte load
// instead of unpacking 8 rows' fields every super-block; the mins are stored
// in pairs so one vpmaddwd applies two sub-blocks' mins per row. (ggml's
// q4_Kx8 keeps the packed 96 bytes and unpacks them per block.)
//
// Q6_K (8 rows x one 256-element super-block, 1680 bytes: the GGUF bytes moved):
//
//   d[8]:  fp16                                                   (16 bytes)
//   scales[16 p + 2 r + i]:  int8 scale of sub-block 2p + i, row r (128 bytes)
//   qs[768 h + 96 k + 4 r + i]       = ql[64 h + 4 k + i] of row r       (A)
//   qs[768 h + 96 k + 32 + 4 r + i]  = ql[64 h + 32 + 4 k + i] of row r  (B)
//   qs[768 h + 96 k + 64 + 4 r + i]  = qh[32 h + 4 k + i] of row r       (H)
//
// for half h (0, 1) and quad k (0..7): one 32-byte load of A, B and H each gives
// quad k of the 8 rows' elements 128h + 32i + 4k .. +3 for i = 0..3 (low nibbles
// of A and B, then their high nibbles, with H's bit pairs 2i: the GGUF kernel's
// bit moves, quant/q6_k.hpp). The scales are paired per row as Q4_K's mins are, so
// one vpmaddwd applies two sub-blocks' scales to Q8_K's 16-element sums.
//
// Q5_0 / Q5_1 (8 rows x one 32-element block, 176 / 192 bytes: the GGUF bytes moved):
//
//   d[8] (Q5_1: then m[8]):  fp16                               (16 / 32 bytes)
//   qh[4 w .. 4 w + 3]:  word w, little-endian; bit 4 r + i of word 2j is the fifth bit
//                        of element 4j + i of row r, of word 2j + 1 that of 16 + 4j + i
//   qs:  Q4_0's nibble quads                                     (128 bytes)
//
// so word 2j (2j + 1) lines up bit for byte with quad j's low (high) nibbles: bit p is
// the fifth bit of byte p of the 32-byte load. The AVX-512 kernel takes the word as a
// byte mask (one masked add of 16), the AVX2 and NEON ones spread it to bytes as their
// GGUF-layout kernels spread qh (matmul/avx2_primitives.hpp's fifth_bits_32).
//
// Rows beyond a multiple of 8 are padded with zero blocks. Repacking is
// explicit (`repack`), never done per call.
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
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::kernels {

/// Rows per interleaved group.
inline constexpr std::size_t interleave_rows = 8;

/// The 8-row interleaved layout of format W (defined for Q4_0, Q8_0, Q5_0, Q5_1, Q4_K and Q6_K),
/// with `pack` / `unpack` moving one row's block in and out of a group block.
/// \tparam W the per-row format whose blocks are interleaved
template <quant::BlockFormat W>
struct interleaved;

namespace detail {

/// Moves row r's block into (pack) or out of (unpack) a quad-interleaved
/// group: quad j of the row at bytes [32 j + 4 r, +4) (Q4_0, Q8_0).
template <std::size_t Quads, class Group, class Block>
constexpr void pack_quads(Group& dst, std::size_t r, const Block& src) noexcept {
  dst.d[r] = src.d;
  for (std::size_t j = 0; j < Quads; ++j) {
    for (std::size_t i = 0; i < 4; ++i) dst.qs[32 * j + 4 * r + i] = src.qs[4 * j + i];
  }
}
template <std::size_t Quads, class Block, class Group>
constexpr Block unpack_quads(const Group& group, std::size_t r) noexcept {
  Block b{};
  b.d = group.d[r];
  for (std::size_t j = 0; j < Quads; ++j) {
    for (std::size_t i = 0; i < 4; ++i) b.qs[4 * j + i] = group.qs[32 * j + 4 * r + i];
  }
  return b;
}

/// Moves row r's Q5_0 / Q5_1 block into (pack) or out of (unpack) a group: the scales
/// and nibbles as Q4_0's; the fifth bits of quad j's low (high) nibbles, bits 4j .. 4j+3
/// (16 + 4j ..) of qh, are nibble r of qh word 2j (2j + 1): byte r / 2, bits 4 (r % 2) ..
template <class Group, class Block>
constexpr void pack_q5(Group& dst, std::size_t r, const Block& src) noexcept {
  pack_quads<4>(dst, r, src);
  if constexpr (requires { src.m; }) dst.m[r] = src.m;
  const std::uint32_t qh = static_cast<std::uint32_t>(src.qh[0]) | static_cast<std::uint32_t>(src.qh[1]) << 8 |
                           static_cast<std::uint32_t>(src.qh[2]) << 16 | static_cast<std::uint32_t>(src.qh[3]) << 24;
  const unsigned shift = 4 * (r % 2);
  for (std::size_t w = 0; w < 8; ++w) {
    const unsigned nibble = (qh >> (4 * (w / 2) + 16 * (w % 2))) & 0x0Fu;
    std::uint8_t& byte = dst.qh[4 * w + r / 2];
    byte = static_cast<std::uint8_t>((byte & ~(0x0Fu << shift)) | nibble << shift);
  }
}
template <class Block, class Group>
constexpr Block unpack_q5(const Group& group, std::size_t r) noexcept {
  Block b = unpack_quads<4, Block>(group, r);
  if constexpr (requires { b.m; }) b.m = group.m[r];
  std::uint32_t qh = 0;
  for (std::size_t w = 0; w < 8; ++w) {
    const std::uint32_t nibble = (group.qh[4 * w + r / 2] >> (4 * (r % 2))) & 0x0Fu;
    qh |= nibble << (4 * (w / 2) + 16 * (w % 2));
  }
  for (std::size_t i = 0; i < 4; ++i) b.qh[i] = static_cast<std::uint8_t>(qh >> (8 * i));
  return b;
}

}  // namespace detail

template <>
struct interleaved<quant::q4_0> {
  using format = quant::q4_0;
  struct block {
    hedge::f16 d[interleave_rows];
    std::uint8_t qs[interleave_rows * 16];
  };
  static constexpr void pack(block& dst, std::size_t r, const format::block& src) noexcept {
    detail::pack_quads<4>(dst, r, src);
  }
  static constexpr format::block unpack(const block& group, std::size_t r) noexcept {
    return detail::unpack_quads<4, format::block>(group, r);
  }
};

template <>
struct interleaved<quant::q8_0> {
  using format = quant::q8_0;
  struct block {
    hedge::f16 d[interleave_rows];
    std::int8_t qs[interleave_rows * 32];
  };
  static constexpr void pack(block& dst, std::size_t r, const format::block& src) noexcept {
    detail::pack_quads<8>(dst, r, src);
  }
  static constexpr format::block unpack(const block& group, std::size_t r) noexcept {
    return detail::unpack_quads<8, format::block>(group, r);
  }
};

template <>
struct interleaved<quant::q5_0> {
  using format = quant::q5_0;
  struct block {
    hedge::f16 d[interleave_rows];
    std::uint8_t qh[interleave_rows * 4];
    std::uint8_t qs[interleave_rows * 16];
  };
  static constexpr void pack(block& dst, std::size_t r, const format::block& src) noexcept {
    detail::pack_q5(dst, r, src);
  }
  static constexpr format::block unpack(const block& group, std::size_t r) noexcept {
    return detail::unpack_q5<format::block>(group, r);
  }
};

template <>
struct interleaved<quant::q5_1> {
  using format = quant::q5_1;
  struct block {
    hedge::f16 d[interleave_rows];
    hedge::f16 m[interleave_rows];
    std::uint8_t qh[interleave_rows * 4];
    std::uint8_t qs[interleave_rows * 16];
  };
  static constexpr void pack(block& dst, std::size_t r, const format::block& src) noexcept {
    detail::pack_q5(dst, r, src);
  }
  static constexpr format::block unpack(const block& group, std::size_t r) noexcept {
    return detail::unpack_q5<format::block>(group, r);
  }
};

template <>
struct interleaved<quant::q4_k> {
  using format = quant::q4_k;
  static constexpr std::size_t subs = format::sub_blocks;
  struct block {
    hedge::f16 d[interleave_rows];
    hedge::f16 dmin[interleave_rows];
    std::uint8_t scales[subs * interleave_rows];
    std::uint8_t mins[subs * interleave_rows];
    std::uint8_t qs[interleave_rows * format::block_elements / 2];
  };
  static void pack(block& dst, std::size_t r, const format::block& src) noexcept {
    dst.d[r] = src.d;
    dst.dmin[r] = src.dmin;
    const auto sm = format::unpack_scales_mins(src.scales);
    for (std::size_t j = 0; j < subs; ++j) {
      dst.scales[interleave_rows * j + r] = sm.scales[j];
      dst.mins[16 * (j / 2) + 2 * r + j % 2] = sm.mins[j];
    }
    for (std::size_t g = 0; g < 4; ++g) {
      for (std::size_t j = 0; j < 8; ++j) std::memcpy(dst.qs + 256 * g + 32 * j + 4 * r, src.qs + 32 * g + 4 * j, 4);
    }
  }
  static constexpr format::block unpack(const block& group, std::size_t r) noexcept {
    format::block b{};
    b.d = group.d[r];
    b.dmin = group.dmin[r];
    std::uint8_t s[subs], m[subs];
    for (std::size_t j = 0; j < subs; ++j) {
      s[j] = group.scales[interleave_rows * j + r];
      m[j] = group.mins[16 * (j / 2) + 2 * r + j % 2];
    }
    // The inverse of q4_k::unpack_scale_min (layout in quant/q4_k.hpp).
    for (std::size_t j = 0; j < 4; ++j) {
      b.scales[j] = static_cast<std::uint8_t>(s[j] | ((s[j + 4] >> 4) << 6));
      b.scales[j + 4] = static_cast<std::uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
      b.scales[j + 8] = static_cast<std::uint8_t>((s[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
    }
    for (std::size_t g = 0; g < 4; ++g) {
      for (std::size_t j = 0; j < 8; ++j) {
        for (std::size_t i = 0; i < 4; ++i) b.qs[32 * g + 4 * j + i] = group.qs[256 * g + 32 * j + 4 * r + i];
      }
    }
    return b;
  }
};

template <>
struct interleaved<quant::q6_k> {
  using format = quant::q6_k;
  static constexpr std::size_t subs = format::sub_blocks;
  struct block {
    hedge::f16 d[interleave_rows];
    std::int8_t scales[subs * interleave_rows];
    std::uint8_t qs[interleave_rows * (sizeof(format::block::ql) + sizeof(format::block::qh))];
  };
  /// Offset in qs of quad k of half h's A (ql low), B (ql high) or H (qh) bytes.
  static constexpr std::size_t quad_offset(std::size_t h, std::size_t k, std::size_t part) noexcept {
    return 768 * h + 96 * k + 32 * part;
  }
  static void pack(block& dst, std::size_t r, const format::block& src) noexcept {
    dst.d[r] = src.d;
    for (std::size_t j = 0; j < subs; ++j) dst.scales[16 * (j / 2) + 2 * r + j % 2] = src.scales[j];
    for (std::size_t h = 0; h < 2; ++h) {
      for (std::size_t k = 0; k < 8; ++k) {
        std::memcpy(dst.qs + quad_offset(h, k, 0) + 4 * r, src.ql + 64 * h + 4 * k, 4);
        std::memcpy(dst.qs + quad_offset(h, k, 1) + 4 * r, src.ql + 64 * h + 32 + 4 * k, 4);
        std::memcpy(dst.qs + quad_offset(h, k, 2) + 4 * r, src.qh + 32 * h + 4 * k, 4);
      }
    }
  }
  static constexpr format::block unpack(const block& group, std::size_t r) noexcept {
    format::block b{};
    b.d = group.d[r];
    for (std::size_t j = 0; j < subs; ++j) b.scales[j] = group.scales[16 * (j / 2) + 2 * r + j % 2];
    for (std::size_t h = 0; h < 2; ++h) {
      for (std::size_t k = 0; k < 8; ++k) {
        for (std::size_t i = 0; i < 4; ++i) {
          b.ql[64 * h + 4 * k + i] = group.qs[quad_offset(h, k, 0) + 4 * r + i];
          b.ql[64 * h + 32 + 4 * k + i] = group.qs[quad_offset(h, k, 1) + 4 * r + i];
          b.qh[32 * h + 4 * k + i] = group.qs[quad_offset(h, k, 2) + 4 * r + i];
        }
      }
    }
    return b;
  }
};

static_assert(sizeof(interleaved<quant::q4_0>::block) == 8 * sizeof(quant::q4_0::block));
static_assert(sizeof(interleaved<quant::q5_0>::block) == 8 * sizeof(quant::q5_0::block));
static_assert(sizeof(interleaved<quant::q5_1>::block) == 8 * sizeof(quant::q5_1::block));
static_assert(sizeof(interleaved<quant::q6_k>::block) == 8 * sizeof(quant::q6_k::block));
static_assert(sizeof(interleaved<quant::q8_0>::block) == 8 * sizeof(quant::q8_0::block));
static_assert(sizeof(interleaved<quant::q4_k>::block) == 8 * sizeof(quant::q4_k::block) + 32);

/// A format with an interleaved layout.
template <class W>
concept Interleavable = quant::BlockFormat<W> && requires { typename interleaved<W>::block; };

/// A rows x K matrix in the interleaved layout: ceil(rows / 8) groups of
/// K / block_elements blocks each, group-major. Non-owning, like matrix_view.
/// \tparam W the per-row format (Q4_0, Q8_0, Q5_0, Q5_1, Q4_K or Q6_K)
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
  /// Bytes of the matrix: what a GEMV streams.
  [[nodiscard]] constexpr std::size_t bytes() const noexcept { return groups() * blocks_per_row() * sizeof(block); }
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
  return interleaved<W>::unpack(group, r);
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
  for (std::size_t g = 0; g * interleave_rows < w.rows(); ++g) {
    for (std::size_t b = 0; b < w.cols(); ++b) {
      auto& dst = out[g * w.cols() + b];
      std::memset(static_cast<void*>(&dst), 0, sizeof dst);
      for (std::size_t r = 0; r < interleave_rows && g * interleave_rows + r < w.rows(); ++r) {
        interleaved<W>::pack(dst, r, w(g * interleave_rows + r, b));
      }
    }
  }
  return interleaved_view<W>(out.data(), w.rows(), k);
}

}  // namespace hedge::kernels
