// hedge/kernels/gemv.hpp: y = W x for a quantized (or float) weight matrix, the
// operation of every decode step.
//
//   W: rows x K elements, row-major, each row K / block_elements blocks of format
//      W (GGUF tensor bytes as they are); a matrix_view of blocks, any row stride
//   x: K floats        y: rows floats (must not overlap x or W)
//
// Steps: (1) quantize x once to W's activation format (Q8_0 for Q4_0/Q8_0, Q8_K
// for Q4_K/Q6_K; float formats use x as it is) into caller workspace, with the
// reference quantizer, so every arch sees the same activation bytes; (2) split
// the rows, in tiles of `gemv_tile_rows`, into pieces the executor's threads claim;
// each piece runs the row kernel of arch tag A (matmul/scalar.hpp, matmul/avx2_gemv.hpp, ...).
// A row's result depends only on the row, so it is the same for any thread count.
//
// Decode streams every weight byte once: the kernels are written to keep up
// with DRAM bandwidth, and bench/kernels measures them as a fraction of it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/core/config.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/matmul/avx2_gemv.hpp"
#include "hedge/kernels/matmul/avx2_interleaved.hpp"
#include "hedge/kernels/matmul/avx512_gemv.hpp"
#include "hedge/kernels/matmul/avx512_interleaved.hpp"
#include "hedge/kernels/matmul/neon_gemv.hpp"
#include "hedge/kernels/matmul/neon_interleaved.hpp"
#include "hedge/kernels/matmul/scalar.hpp"
#include "hedge/kernels/matmul/weight_read.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/float_formats.hpp"

namespace hedge::kernels {

/// Rows per unit of work handed to the executor; every arch's tile height divides it.
inline constexpr std::size_t gemv_tile_rows = 4;

/// Pieces per thread a matrix's rows are cut into for the GEMV and GEMM (gemm.hpp),
/// claimed one at a time (parallel_claim in core/executor.hpp): threads that share DRAM
/// rarely get equal shares of it, and with one fixed half each the call waits for the
/// one that got less.
inline constexpr std::size_t matmul_pieces_per_thread = 4;

/// Workspace bytes gemv<W> needs for rows of `k` elements: one activation row
/// prepared for W (matmul/activation.hpp; 0 for float formats).
template <quant::BlockFormat W>
constexpr std::size_t gemv_workspace_bytes(std::size_t k) noexcept {
  return matmul::activation_row_bytes<W>(k);
}

/// Workspace for a row length K known at compile time: declare it static (or
/// on the stack) to run gemv without any heap.
/// \tparam W the weight format
/// \tparam K the row length in elements
template <quant::BlockFormat W, std::size_t K>
struct gemv_workspace {
  alignas(cache_line_bytes) std::byte bytes[std::max<std::size_t>(gemv_workspace_bytes<W>(K), 1)];
  std::span<std::byte> span() noexcept { return {bytes, gemv_workspace_bytes<W>(K)}; }
};

namespace detail {

/// Checks the workspace and prepares the activation row in it.
template <quant::BlockFormat W>
result<matmul::activation_row<W>> prepare_gemv_activation(vector_view<const float> x,
                                                          std::span<std::byte> workspace) noexcept {
  if (workspace.size() < gemv_workspace_bytes<W>(x.size())) {
    return error{errc::capacity_exceeded} << W::name << ": workspace of " << workspace.size() << " bytes < "
                                          << gemv_workspace_bytes<W>(x.size());
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data()) % 4 != 0) {
    return error{errc::misaligned} << W::name << ": workspace not 4-byte aligned";
  }
  return matmul::prepare_activation<W>(x, workspace.data());
}

template <arch::Arch A>
result<void> check_arch() noexcept {
  if (!A::supported()) return error{errc::unsupported} << "this CPU cannot run arch " << A::name;
  return ok();
}

}  // namespace detail

/// y = W x (see the file comment).
/// \tparam W the weight format (a quant::BlockFormat)
/// \tparam A the arch tag whose kernels run (must be supported by this CPU), or
///           `arch::best` (the default): the best compiled variant this CPU runs
/// \tparam E the executor the rows are split over
template <quant::BlockFormat W, arch::Arch A = arch::best, Executor E = exec::serial>
result<void> gemv(matrix_view<const typename W::block> w, vector_view<const float> x, vector_view<float> y,
                  std::span<std::byte> workspace, E& executor) {
  if constexpr (std::is_same_v<A, arch::best>) {
    return arch::visit<A>([&](auto tag) { return gemv<W, decltype(tag)>(w, x, y, workspace, executor); });
  } else {
    HEDGE_TRY(detail::check_arch<A>());
    if (w.cols() * W::block_elements != x.size() || w.rows() != y.size()) {
      return error{errc::shape_mismatch} << "gemv<" << W::name << ">: W is " << w.rows() << "x"
                                         << w.cols() * W::block_elements << ", x has " << x.size() << ", y has "
                                         << y.size();
    }
    const auto activation = detail::prepare_gemv_activation<W>(x, workspace);
    if (!activation) return activation.error();
    const auto* xq = activation->blocks;
    const std::size_t tiles = (w.rows() + gemv_tile_rows - 1) / gemv_tile_rows;
    parallel_claim(executor, tiles, matmul_pieces_per_thread * executor.concurrency(), [&](std::size_t begin,
                                                                                         std::size_t end) {
      const std::size_t first = begin * gemv_tile_rows;
      const std::size_t last = std::min(end * gemv_tile_rows, w.rows());
      matmul::gemv_rows(A{}, W{}, w.row_range(first, last - first), xq, y.data() + first);
    });
    return ok();
  }
}

/// y = W x on the calling thread.
template <quant::BlockFormat W, arch::Arch A = arch::best>
result<void> gemv(matrix_view<const typename W::block> w, vector_view<const float> x, vector_view<float> y,
                  std::span<std::byte> workspace) noexcept {
  exec::serial serial;
  return gemv<W, A>(w, x, y, workspace, serial);
}

/// y = W x for weights repacked into the interleaved layout (repack.hpp); the
/// executor splits the 8-row groups, each part runs the arch's multi-group
/// GEMV kernel where it has one (`gemv_groups`, AVX2), else the GEMM
/// microkernel with one activation row per group. Same workspace as the plain layout.
/// Where the arch's kernel takes a weight read policy (AVX2, AVX-512 VNNI), the calls tune
/// it (matmul/weight_read.hpp).
template <Interleavable W, arch::Arch A = arch::best, Executor E = exec::serial>
result<void> gemv(interleaved_view<W> w, vector_view<const float> x, vector_view<float> y,
                  std::span<std::byte> workspace, E& executor) {
  if constexpr (std::is_same_v<A, arch::best>) {
    return arch::visit<A>([&](auto tag) { return gemv<W, decltype(tag)>(w, x, y, workspace, executor); });
  } else {
    HEDGE_TRY(detail::check_arch<A>());
    if (w.k() != x.size() || w.rows() != y.size()) {
      return error{errc::shape_mismatch} << "gemv<interleaved " << W::name << ">: W is " << w.rows() << "x" << w.k()
                                         << ", x has " << x.size() << ", y has " << y.size();
    }
    const auto activation = detail::prepare_gemv_activation<W>(x, workspace);
    if (!activation) return activation.error();
    const matmul::activation_row<W> row = *activation;
    // `read`: the weight read policy, or none for the kernel's default.
    const auto run = [&](auto... read) {
      parallel_claim(executor, w.groups(), matmul_pieces_per_thread * executor.concurrency(),
                     [&](std::size_t begin, std::size_t end) {
                       const std::size_t first = begin * interleave_rows;
                       const std::size_t valid = std::min(end * interleave_rows, w.rows()) - first;
                       const auto* group = w.group(begin);
                       if constexpr (requires { matmul::gemv_groups(A{}, W{}, group, end - begin, w.blocks_per_row(),
                                                                    row, y.data() + first, valid, read...); }) {
                         matmul::gemv_groups(A{}, W{}, group, end - begin, w.blocks_per_row(), row, y.data() + first,
                                             valid, read...);
                       } else {
                         for (std::size_t g = begin; g < end; ++g) {
                           const std::size_t rows = std::min(interleave_rows, w.rows() - g * interleave_rows);
                           matmul::gemm_group(A{}, W{}, w.group(g), w.blocks_per_row(), &row, 1,
                                              y.data() + g * interleave_rows, 0, rows);
                         }
                       }
                     });
    };
    if constexpr (matmul::tuned_read_rows<A, W> >= 1) {
      matmul::with_weight_read<A, W>(1, executor.concurrency(), w.bytes(), run);
    } else {
      run();
    }
    return ok();
  }
}

template <Interleavable W, arch::Arch A = arch::best>
result<void> gemv(interleaved_view<W> w, vector_view<const float> x, vector_view<float> y,
                  std::span<std::byte> workspace) noexcept {
  exec::serial serial;
  return gemv<W, A>(w, x, y, workspace, serial);
}

}  // namespace hedge::kernels
