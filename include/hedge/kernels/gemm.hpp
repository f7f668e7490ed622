// hedge/kernels/gemm.hpp: Y = X W^T for many activation rows, the operation of
// prefill (compute bound, unlike the GEMV of decode).
//
//   W: N x K weights of format W (GGUF layout, or interleaved by repack.hpp)
//   X: M x K floats (any row stride)      Y: M x N floats (any row stride)
//
// Stages (gemmlowp's pack / compute / epilogue split):
//  1. pack activations: each of the M rows is quantized once to W's activation
//     format into caller workspace (rows split over the executor);
//  2. compute: the weight rows are cut into pieces the executor's threads claim (8-row groups for the
//     interleaved layout); each part walks the activation rows in chunks that
//     stay in L2 and runs the arch's register-tiled microkernel: 8 weight rows
//     x up to 4 activation rows (matmul/avx2_interleaved.hpp), or, where the
//     arch has a tile spanning several groups (`gemm_groups`), 16 weight rows
//     x up to 8 activation rows (4 for Q4_K; AVX-512 VNNI, matmul/avx512_interleaved.hpp).
//     The GGUF layout splits 16-row weight slices; Q4_K has a microkernel of
//     1 weight row x 4 activation rows and F32/F16/BF16 one of 4 weight rows x
//     2 activation rows (matmul/avx2_gemm.hpp); Q4_0/Q8_0 pack the slice into
//     the interleaved layout on the fly on AVX-512 VNNI, and elsewhere run
//     their GEMV row kernel per activation row over the slice, which stays in
//     L1 (repack them, and Q4_K, for prefill);
//  3. the epilogue is the store: Y(m, n) holds the finished dot product.
// Each Y(m, n) depends only on row m of X and row n of W, so results are the
// same for any thread count, and GEMM row m equals GEMV of X row m (the
// GGUF-layout Q4_0/Q8_0 GEMM on AVX-512 VNNI equals the interleaved GEMV).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/matmul/avx2_gemm.hpp"
#include "hedge/kernels/matmul/avx512_interleaved.hpp"
#include "hedge/kernels/matmul/activation.hpp"
#include "hedge/kernels/matmul/weight_read.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::kernels {

/// Workspace bytes gemm<W> needs for m activation rows of k elements: the
/// prepared rows plus one small descriptor per row.
template <quant::BlockFormat W>
constexpr std::size_t gemm_workspace_bytes(std::size_t m, std::size_t k) noexcept {
  return m * (sizeof(matmul::activation_row<W>) + (matmul::activation_row_bytes<W>(k) + 7) / 8 * 8);
}

namespace detail {

/// Activation rows handled per pass over the weights: 64 prepared rows of a
/// 4096-wide Q8_0 activation are ~280 KiB, which stays in a 512 KiB L2.
inline constexpr std::size_t gemm_row_chunk = 64;
/// Weight rows per slice in the GGUF-layout GEMM (16 x 4096 Q4_0 = 36 KiB).
inline constexpr std::size_t gemm_weight_slice = 16;

/// Quantizes every row of x into the workspace (rows split over the executor)
/// and returns the row descriptors, which live at the start of the workspace.
template <quant::BlockFormat W, Executor E>
result<const matmul::activation_row<W>*> prepare_gemm_activations(matrix_view<const float> x,
                                                                   std::span<std::byte> workspace, E& executor) {
  using row = matmul::activation_row<W>;
  const std::size_t m = x.rows(), k = x.cols();
  if (workspace.size() < gemm_workspace_bytes<W>(m, k)) {
    return error{errc::capacity_exceeded} << "gemm<" << W::name << ">: workspace of " << workspace.size()
                                          << " bytes < " << gemm_workspace_bytes<W>(m, k);
  }
  if (reinterpret_cast<std::uintptr_t>(workspace.data()) % alignof(row) != 0) {
    return error{errc::misaligned} << "gemm<" << W::name << ">: workspace not aligned to " << alignof(row);
  }
  auto* rows = reinterpret_cast<row*>(workspace.data());
  std::byte* data = workspace.data() + m * sizeof(row);
  const std::size_t stride = (matmul::activation_row_bytes<W>(k) + 7) / 8 * 8;
  std::atomic<std::size_t> first_bad{m};
  executor.parallel_for(m, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto prepared = matmul::prepare_activation<W>(x.row(i), data + i * stride);
      if (prepared) {
        rows[i] = *prepared;
      } else {
        std::size_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
      }
    }
  });
  if (const std::size_t bad = first_bad.load(); bad != m) {
    const auto again = matmul::prepare_activation<W>(x.row(bad), data + bad * stride);
    return error{again.error().code()} << "gemm: activation row " << bad << ": " << again.error().message();
  }
  return static_cast<const row*>(rows);
}

inline result<void> check_gemm_shapes(std::string_view name, std::size_t n, std::size_t k, matrix_view<const float> x,
                                      matrix_view<float> y) noexcept {
  if (x.cols() != k || y.rows() != x.rows() || y.cols() != n) {
    return error{errc::shape_mismatch} << "gemm<" << name << ">: W is " << n << "x" << k << ", X is " << x.rows()
                                       << "x" << x.cols() << ", Y is " << y.rows() << "x" << y.cols();
  }
  return ok();
}

}  // namespace detail

/// Y = X W^T with W in the GGUF layout (see the file comment).
/// \tparam W the weight format   \tparam A the arch tag   \tparam E the executor
template <quant::BlockFormat W, arch::Arch A = arch::best, Executor E = exec::serial>
result<void> gemm(matrix_view<const typename W::block> w, matrix_view<const float> x, matrix_view<float> y,
                  std::span<std::byte> workspace, E& executor) {
  if constexpr (std::is_same_v<A, arch::best>) {
    return arch::visit<A>([&](auto tag) { return gemm<W, decltype(tag)>(w, x, y, workspace, executor); });
  } else {
    HEDGE_TRY(detail::check_arch<A>());
    HEDGE_TRY(detail::check_gemm_shapes(W::name, w.rows(), w.cols() * W::block_elements, x, y));
    if (x.rows() == 0) return ok();  // Y may be an empty view with no storage
    const auto prepared = detail::prepare_gemm_activations<W>(x, workspace, executor);
    if (!prepared) return prepared.error();
    const matmul::activation_row<W>* rows = *prepared;
    const std::size_t slices = (w.rows() + detail::gemm_weight_slice - 1) / detail::gemm_weight_slice;
    executor.parallel_for(slices, [&](std::size_t begin, std::size_t end) {
      for (std::size_t s = begin; s < end; ++s) {
        const std::size_t first = s * detail::gemm_weight_slice;
        const std::size_t count = std::min(detail::gemm_weight_slice, w.rows() - first);
        const auto slice = w.row_range(first, count);
        if constexpr (requires { matmul::gemm_rows(A{}, W{}, slice, rows, x.rows(), y.data(), y.stride()); }) {
          matmul::gemm_rows(A{}, W{}, slice, rows, x.rows(), y.data() + first, y.stride());
        } else {
          for (std::size_t m = 0; m < x.rows(); ++m) {
            matmul::gemv_rows(A{}, W{}, slice, rows[m].blocks, y.row(m).data() + first);
          }
        }
      }
    });
    return ok();
  }
}

/// Y = X W^T with W interleaved by repack() (see the file comment).
template <Interleavable W, arch::Arch A = arch::best, Executor E = exec::serial>
result<void> gemm(interleaved_view<W> w, matrix_view<const float> x, matrix_view<float> y,
                  std::span<std::byte> workspace, E& executor) {
  if constexpr (std::is_same_v<A, arch::best>) {
    return arch::visit<A>([&](auto tag) { return gemm<W, decltype(tag)>(w, x, y, workspace, executor); });
  } else {
    HEDGE_TRY(detail::check_arch<A>());
    HEDGE_TRY(detail::check_gemm_shapes(W::name, w.rows(), w.k(), x, y));
    if (x.rows() == 0) return ok();  // Y may be an empty view with no storage
    const auto prepared = detail::prepare_gemm_activations<W>(x, workspace, executor);
    if (!prepared) return prepared.error();
    const matmul::activation_row<W>* rows = *prepared;
    // `read`: the weight read policy, or none for the kernel's default.
    const auto run = [&](auto... read) {
      parallel_claim(executor, w.groups(), matmul_pieces_per_thread * executor.concurrency(),
                     [&](std::size_t begin, std::size_t end) {
                       for (std::size_t m0 = 0; m0 < x.rows(); m0 += detail::gemm_row_chunk) {
                         const std::size_t count = std::min(detail::gemm_row_chunk, x.rows() - m0);
                         const std::size_t first = begin * interleave_rows;
                         const std::size_t valid = std::min(end * interleave_rows, w.rows()) - first;
                         const auto* group = w.group(begin);
                         float* out = y.row(m0).data() + first;
                         if constexpr (requires {
                                         matmul::gemm_groups(A{}, W{}, group, end - begin, w.blocks_per_row(),
                                                             rows + m0, count, out, y.stride(), valid, read...);
                                       }) {
                           matmul::gemm_groups(A{}, W{}, group, end - begin, w.blocks_per_row(), rows + m0, count, out,
                                               y.stride(), valid, read...);
                         } else {
                           for (std::size_t g = begin; g < end; ++g) {
                             const std::size_t group_rows = std::min(interleave_rows, w.rows() - g * interleave_rows);
                             matmul::gemm_group(A{}, W{}, w.group(g), w.blocks_per_row(), rows + m0, count,
                                                y.row(m0).data() + g * interleave_rows, y.stride(), group_rows);
                           }
                         }
                       }
                     });
    };
    // A decode batch streams its weights as a GEMV does, and tunes their read so, up to the
    // rows the arch's tiles stream.
    if constexpr (matmul::tuned_read_rows<A, W> >= 1) {
      if (x.rows() <= matmul::tuned_read_rows<A, W>) {
        matmul::with_weight_read<A, W>(x.rows(), executor.concurrency(), w.bytes(), run);
        return ok();
      }
    }
    run();
    return ok();
  }
}

/// Y = X W^T on the calling thread (either layout).
template <class W, arch::Arch A = arch::best, class Weights>
  requires quant::BlockFormat<W>
result<void> gemm(Weights w, matrix_view<const float> x, matrix_view<float> y, std::span<std::byte> workspace) {
  exec::serial serial;
  return gemm<W, A>(w, x, y, workspace, serial);
}

}  // namespace hedge::kernels
