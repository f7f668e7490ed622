// gemv benchmarks: every weight format x every arch variant this CPU runs x the
// Llama-7B projection shapes, hot (one matrix, in cache when it fits) and cold
// (a ring of matrices larger than eight times the LLC, so weights stream from DRAM),
// at 1 thread and at every hardware thread. Names:
//   gemv/<format>/<arch>/<rows>x<K>/<hot|cold>/threads:<n>
// bytes_per_second counts weight bytes (the activation is a few KiB in cache);
// bw_fraction divides it by the read bandwidth measured in this binary.
// Q4_0, Q8_0, Q5_0, Q5_1, Q4_K and Q6_K also run on weights repacked into the 8-row interleaved layout
// (kernels/repack.hpp): variants `<arch>_repacked` (avx512vnni runs its own tile for each).
// A decode batch of M sessions is a GEMM of M activation rows over the same cold weights
// (model::llama::decode_batch); it streams the matrix once, so it is read against the same
// bound, weight bytes per call, and GFLOPs counts its 2 M rows K operations:
//   gemv/<format>/<arch>_repacked_batch<M>/4096x11008/cold/threads:<n>   (M = 2, 4, 8)
//   gemv/<format>/<arch>_repacked_batch<M>/512x4096/hot/threads:<n>      (M = 1, 2, 4, 8)
// The hot rows (1.1 MB of Q4_0, in cache) are the tile's arithmetic ceiling. M sessions
// can at best take max(the M = 1 cold time, the cold shape's operations at the hot
// GFLOPs): below that the weights' streaming binds, above it the arithmetic does.
// Every GEMV and GEMM call first quantizes its activation rows (matmul::prepare_activation):
//   activation/<q8_0|q8_k>/prepare/<K>/hot/threads:1
// bytes_per_second counts the floats read (an activation is in cache: hot only).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/buffers.hpp"
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
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace {

namespace q = hedge::quant;
namespace hb = hedge::bench;

struct shape {
  std::size_t rows, k;
  std::string name() const { return std::to_string(rows) + "x" + std::to_string(k); }
};
constexpr shape shapes[] = {{4096, 4096}, {4096, 11008}, {11008, 4096}};

/// Weight matrices for one (format, shape, residency, layout); the last one
/// made is kept so the repeated calls Google Benchmark makes reuse it.
template <class W>
const hb::buffer_ring& weights(shape s, hb::residency where, bool interleave) {
  struct cached {
    std::size_t rows = 0, k = 0;
    hb::residency where{};
    bool interleave = false;
    std::unique_ptr<hb::buffer_ring> ring;
  };
  static cached slot;
  if (!slot.ring || slot.rows != s.rows || slot.k != s.k || slot.where != where || slot.interleave != interleave) {
    slot.ring.reset();
    const auto blocks = hb::quantized_weights<W>(s.rows, s.k);
    std::vector<std::byte> matrix(blocks.size() * sizeof(typename W::block));
    std::memcpy(matrix.data(), blocks.data(), matrix.size());
    if constexpr (hedge::kernels::Interleavable<W>) {
      if (interleave) {
        std::vector<std::byte> packed(hedge::kernels::interleaved_blocks<W>(s.rows, s.k) *
                                      sizeof(typename hedge::kernels::interleaved<W>::block));
        auto* out = reinterpret_cast<typename hedge::kernels::interleaved<W>::block*>(packed.data());
        const hedge::matrix_view<const typename W::block> plain(
            reinterpret_cast<const typename W::block*>(matrix.data()), s.rows, s.k / W::block_elements);
        (void)hedge::kernels::repack<W>(plain, {out, hedge::kernels::interleaved_blocks<W>(s.rows, s.k)});
        matrix = std::move(packed);
      }
    }
    slot.ring = std::make_unique<hb::buffer_ring>(hb::buffer_ring::for_residency(matrix.size(), where));
    slot.ring->fill_all(matrix.data());
    slot.rows = s.rows;
    slot.k = s.k;
    slot.where = where;
    slot.interleave = interleave;
  }
  return *slot.ring;
}

/// One GEMV per call, or with `batch` > 1 (repacked weights) a GEMM of `batch` activation
/// rows: a decode step of that many sessions.
template <class W, class A, bool Interleave>
void gemv_benchmark(benchmark::State& state, shape s, hb::residency where, std::size_t threads,
                    std::size_t batch = 1) {
  const auto& ring = weights<W>(s, where, Interleave);
  const auto x = hb::pseudo_random_floats(batch * s.k, 11);
  std::vector<float> y(batch * s.rows);
  std::vector<std::byte> workspace(batch == 1 ? hedge::kernels::gemv_workspace_bytes<W>(s.k)
                                              : hedge::kernels::gemm_workspace_bytes<W>(batch, s.k));
  auto& pool = hb::pool(threads);
  std::size_t next = 0;
  const auto call = [&] {
    if constexpr (Interleave) {
      using block = typename hedge::kernels::interleaved<W>::block;
      const hedge::kernels::interleaved_view<W> w(ring.template get<const block>(next++), s.rows, s.k);
      if (batch > 1) {
        return hedge::kernels::gemm<W, A>(w, hedge::matrix_view<const float>(x.data(), batch, s.k),
                                          hedge::matrix_view<float>(y.data(), batch, s.rows), workspace, pool);
      }
      return hedge::kernels::gemv<W, A>(w, {x.data(), s.k}, {y.data(), s.rows}, workspace, pool);
    } else {
      const hedge::matrix_view<const typename W::block> w(ring.template get<const typename W::block>(next++),
                                                           s.rows, s.k / W::block_elements);
      return hedge::kernels::gemv<W, A>(w, {x.data(), s.k}, {y.data(), s.rows}, workspace, pool);
    }
  };
  // The first calls of each (arch, format, rows, threads) tune the weight read
  // (matmul/weight_read.hpp): they run before the timed ones, and the counters say which
  // policy the timed ones ran, where the key tuned (calls under min_bytes, and batches of
  // more rows than the arch's tiles stream, run the kernel's default): weight_streams (4
  // or 2) and weight_prefetch (0 none, 1 into L1, 2 into L2).
#if HEDGE_SIMD_X86
  namespace mm = hedge::kernels::matmul;
  if constexpr (Interleave && mm::tuned_read_rows<A, W> >= 1) {
    using tuner = mm::weight_read_tuner;
    if (batch <= mm::tuned_read_rows<A, W>) {
      for (std::uint32_t i = 0; i <= tuner::warmup_calls + tuner::tuning_calls; ++i) (void)call();
    }
  }
#endif
  const hb::loop_clock clock;
  for (auto _ : state) {
    const auto status = call();
    if (!status) {
      state.SkipWithError(status.error().c_str());
      break;
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  hb::set_bandwidth_counters(state, static_cast<double>(ring.bytes()), threads, where, clock);
  hb::set_flops_counters(state, 2.0 * double(batch) * double(s.rows) * double(s.k));
#if HEDGE_SIMD_X86
  if constexpr (Interleave && mm::tuned_read_rows<A, W> >= 1) {
    if (const mm::weight_read_tuner& tuner = mm::read_tuner<A, W>(batch, threads); tuner.decided()) {
      const mm::weight_read read = mm::weight_reads[tuner.choice()];
      state.counters["weight_streams"] = static_cast<double>(read.streams);
      state.counters["weight_prefetch"] = static_cast<double>(read.prefetch);
    }
  }
#endif
}

template <class W, class A, bool Interleave = false>
void register_variant() {
  if (!A::supported()) return;
  const std::string variant = std::string(A::name) + (Interleave ? "_repacked" : "");
  for (const shape& s : shapes) {
    for (hb::residency where : {hb::residency::cold, hb::residency::hot}) {
      for (std::size_t threads : hb::thread_counts()) {
        hb::register_benchmark(hb::benchmark_name("gemv/" + std::string(W::name), variant, s.name(), where, threads),
                               [s, where, threads](benchmark::State& state) {
                                 gemv_benchmark<W, A, Interleave>(state, s, where, threads);
                               });
      }
    }
  }
}

/// Decode batches of M sessions, repacked weights: cold over the FFN-down shape (M > 1: M = 1
/// is the plain repacked GEMV) and hot over a matrix that fits in cache, the ceiling.
template <class W, class A>
void register_batches() {
  if (!A::supported()) return;
  constexpr shape cold_shape = shapes[1], hot_shape{512, 4096};
  for (std::size_t batch : {1u, 2u, 4u, 8u}) {
    const std::string variant = std::string(A::name) + "_repacked_batch" + std::to_string(batch);
    for (std::size_t threads : hb::thread_counts()) {
      for (const auto where : {hb::residency::cold, hb::residency::hot}) {
        const shape s = where == hb::residency::cold ? cold_shape : hot_shape;
        if (batch == 1 && where == hb::residency::cold) continue;
        hb::register_benchmark(hb::benchmark_name("gemv/" + std::string(W::name), variant, s.name(), where, threads),
                               [s, where, batch, threads](benchmark::State& state) {
                                 gemv_benchmark<W, A, true>(state, s, where, threads, batch);
                               });
      }
    }
  }
}

template <class W>
void register_gemv() {
  hb::begin_family("gemv/" + std::string(W::name));
#if HEDGE_SIMD_X86
  if constexpr (hedge::kernels::Interleavable<W>) {
    register_variant<W, hedge::arch::avx512vnni, true>();
    register_variant<W, hedge::arch::avx2, true>();
    register_batches<W, hedge::arch::avx512vnni>();
    register_batches<W, hedge::arch::avx2>();
  }
  if constexpr (std::is_same_v<W, q::q5_0>) register_variant<W, hedge::arch::avx512vnni>();  // avx512_gemv.hpp
  register_variant<W, hedge::arch::avx2>();
#endif
#if HEDGE_SIMD_NEON
  register_variant<W, hedge::arch::neon_dotprod>();
  register_variant<W, hedge::arch::neon>();
#endif
  register_variant<W, hedge::arch::scalar>();
}

/// One activation row of K floats quantized as the kernels of W read it (W's activation
/// format), on the calling thread as gemv.hpp does.
template <class W>
void register_activation(std::size_t k) {
  hb::register_benchmark(
      hb::benchmark_name("activation/" + std::string(W::activation::name), "prepare", std::to_string(k),
                         hb::residency::hot, 1),
      [k](benchmark::State& state) {
        const auto x = hb::pseudo_random_floats(k, 12);
        std::vector<std::byte> workspace(hedge::kernels::gemv_workspace_bytes<W>(k));
        const hb::loop_clock clock;
        for (auto _ : state) {
          const auto row = hedge::kernels::matmul::prepare_activation<W>({x.data(), k}, workspace.data());
          if (!row) {
            state.SkipWithError(row.error().c_str());
            break;
          }
          benchmark::DoNotOptimize(workspace.data());
          benchmark::ClobberMemory();
        }
        hb::set_bandwidth_counters(state, static_cast<double>(k * sizeof(float)), 1, hb::residency::hot, clock);
      });
}

const bool gemv_registered = [] {
  hb::begin_family("activation");
  for (std::size_t k : {std::size_t{4096}, std::size_t{11008}}) {
    register_activation<q::q4_0>(k);  // Q8_0
    register_activation<q::q4_k>(k);  // Q8_K
  }
  register_gemv<q::q4_0>();
  register_gemv<q::q8_0>();
  register_gemv<q::q5_0>();
  register_gemv<q::q5_1>();
  register_gemv<q::q4_k>();
  register_gemv<q::q5_k>();
  register_gemv<q::q6_k>();
  register_gemv<q::f16>();
  register_gemv<q::bf16>();
  register_gemv<q::f32>();
  return true;
}();

}  // namespace
