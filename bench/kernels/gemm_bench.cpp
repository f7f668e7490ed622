// gemm benchmarks (prefill): Y = X W^T for 64 and 512 activation rows against
// a 4096x4096 weight matrix (and 11008x4096, Llama 7B's FFN up/gate, for the
// repacked and pack-on-the-fly variants that prefill runs), reported in GFLOPs (2 * M * N * K per call; for
// the int8 formats these are int8 operations). Names:
//   gemm/<format>/<arch>[_repacked|_rowwise]/<M>x<N>x<K>/hot/threads:<n>
// `_repacked` runs on the 8-row interleaved layout, plain names on the GGUF
// layout, and `_rowwise` is the baseline of calling gemv once per activation
// row (what a runtime without a GEMM would do).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "common/pool.hpp"
#include "common/report.hpp"
#include "kernels/matmul_fixtures.hpp"
#include "hedge/kernels/gemm.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q5_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace {

namespace q = hedge::quant;
namespace hb = hedge::bench;
namespace hk = hedge::kernels;

constexpr std::size_t k_cols = 4096;

enum class layout { gguf, repacked, rowwise };

template <class W, class A, layout L>
void gemm_benchmark(benchmark::State& state, std::size_t m, std::size_t n_rows, std::size_t threads) {
  const auto w = hb::quantized_weights<W>(n_rows, k_cols);
  const hedge::matrix_view<const typename W::block> plain(w.data(), n_rows, k_cols / W::block_elements);
  const auto xs = hb::pseudo_random_floats(m * k_cols, 5);
  const hedge::matrix_view<const float> x(xs.data(), m, k_cols);
  std::vector<float> ys(m * n_rows);
  const hedge::matrix_view<float> y(ys.data(), m, n_rows);
  std::vector<std::byte> workspace(hk::gemm_workspace_bytes<W>(m, k_cols));
  auto& pool = hb::pool(threads);
  auto run = [&]() -> hedge::result<void> {
    if constexpr (L == layout::rowwise) {
      for (std::size_t i = 0; i < m; ++i) HEDGE_TRY((hk::gemv<W, A>(plain, x.row(i), y.row(i), workspace, pool)));
      return hedge::ok();
    } else {
      return hk::gemm<W, A>(plain, x, y, workspace, pool);
    }
  };
  if constexpr (L == layout::repacked) {
    std::vector<typename hk::interleaved<W>::block> packed(hk::interleaved_blocks<W>(n_rows, k_cols));
    const auto view = hk::repack<W>(plain, {packed.data(), packed.size()});
    for (auto _ : state) {
      const auto status = hk::gemm<W, A>(*view, x, y, workspace, pool);
      if (!status) state.SkipWithError(status.error().c_str());
      benchmark::DoNotOptimize(ys.data());
    }
  } else {
    for (auto _ : state) {
      const auto status = run();
      if (!status) state.SkipWithError(status.error().c_str());
      benchmark::DoNotOptimize(ys.data());
    }
  }
  hb::set_flops_counters(state, 2.0 * double(m) * double(n_rows) * double(k_cols));
}

template <class W, class A, layout L>
void register_variant(std::size_t m, std::size_t n_rows = 4096) {
  if (!A::supported()) return;
  const char* suffix = L == layout::repacked ? "_repacked" : L == layout::rowwise ? "_rowwise" : "";
  const std::string shape = std::to_string(m) + "x" + std::to_string(n_rows) + "x" + std::to_string(k_cols);
  for (std::size_t threads : hb::thread_counts()) {
    hb::register_benchmark(
        hb::benchmark_name("gemm/" + std::string(W::name), std::string(A::name) + suffix, shape, hb::residency::hot,
                           threads),
        [m, n_rows, threads](benchmark::State& state) { gemm_benchmark<W, A, L>(state, m, n_rows, threads); });
  }
}

template <class W>
void register_gemm() {
  for (std::size_t m : {64u, 512u}) {
#if HEDGE_SIMD_X86
    for (std::size_t n_rows : {4096u, 11008u}) {
      if constexpr (hk::Interleavable<W>) {
        register_variant<W, hedge::arch::avx512vnni, layout::repacked>(m, n_rows);
        register_variant<W, hedge::arch::avx2, layout::repacked>(m, n_rows);
      }
      if constexpr (std::is_same_v<W, q::q4_0> || std::is_same_v<W, q::q8_0> || std::is_same_v<W, q::q5_0> ||
                    std::is_same_v<W, q::q5_1>) {
        register_variant<W, hedge::arch::avx512vnni, layout::gguf>(m, n_rows);  // packs on the fly
      }
    }
    register_variant<W, hedge::arch::avx2, layout::gguf>(m);
    register_variant<W, hedge::arch::avx2, layout::rowwise>(m);
#endif
#if HEDGE_SIMD_NEON
    register_variant<W, hedge::arch::neon_dotprod, layout::gguf>(m);
    register_variant<W, hedge::arch::neon_dotprod, layout::rowwise>(m);
#endif
    // The scalar reference takes seconds per call at 512 rows: 64 rows show it.
    if (m == 64) register_variant<W, hedge::arch::scalar, layout::gguf>(m);
  }
}

const bool gemm_registered = [] {
  register_gemm<q::q4_0>();
  register_gemm<q::q8_0>();
  register_gemm<q::q5_0>();
  register_gemm<q::q5_1>();
  register_gemm<q::q4_k>();
  register_gemm<q::q5_k>();
  register_gemm<q::f16>();
  register_gemm<q::bf16>();
  register_gemm<q::f32>();
  return true;
}();

}  // namespace
