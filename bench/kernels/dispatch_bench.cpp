// The cost of run-time dispatch (core/dispatch.hpp): a call through `arch::best`
// against the same call on the tag it resolves to, on work small enough for the
// difference to show. Names:
//   dispatch/visit/<best|direct>                   visit alone, around an empty call
//   dispatch/gemv/q4_0/64x256/<best|direct>/hot    a 16 KiB-weight GEMV
// In a build whose -march covers every compiled variant `best` is resolved at
// compile time and both rows must agree; in a baseline build the difference is
// the dispatch cost per call.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/report.hpp"
#include "kernels/matmul_fixtures.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/quant/q4_0.hpp"

namespace {

namespace q = hedge::quant;
namespace hb = hedge::bench;
namespace arch = hedge::arch;

/// The smallest kernel: a call the optimiser can neither remove nor fold.
template <class A>
[[gnu::noinline]] std::size_t variant_work(A, std::size_t x) noexcept {
  benchmark::DoNotOptimize(x);
  return x + A::name.size();
}

template <class A>
void visit_benchmark(benchmark::State& state) {
  std::size_t sum = 0;
  for (auto _ : state) {
    sum = arch::visit<A>([sum](auto tag) { return variant_work(tag, sum); });
    benchmark::DoNotOptimize(sum);
  }
}

template <class A>
void gemv_benchmark(benchmark::State& state) {
  constexpr std::size_t rows = 64, k = 256;
  static const auto blocks = hb::quantized_weights<q::q4_0>(rows, k);
  const hedge::matrix_view<const q::q4_0::block> w{blocks.data(), rows, k / q::q4_0::block_elements};
  std::vector<float> x(k, 0.5f), y(rows);
  std::vector<std::byte> workspace(hedge::kernels::gemv_workspace_bytes<q::q4_0>(k));
  const hb::loop_clock clock;
  for (auto _ : state) {
    const auto status = hedge::kernels::gemv<q::q4_0, A>(w, {x.data(), k}, {y.data(), rows}, workspace);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(y.data());
  }
  hb::set_bandwidth_counters(state, double(blocks.size() * sizeof(q::q4_0::block)), 1, hb::residency::hot, clock);
}

template <class Resolved>
void register_pair() {
  benchmark::RegisterBenchmark("dispatch/visit/best", visit_benchmark<arch::best>);
  benchmark::RegisterBenchmark("dispatch/visit/direct", visit_benchmark<Resolved>);
  hb::register_benchmark("dispatch/gemv/q4_0/64x256/best/hot", gemv_benchmark<arch::best>);
  hb::register_benchmark("dispatch/gemv/q4_0/64x256/direct/hot", gemv_benchmark<Resolved>);
}

const bool dispatch_registered = [] {
  arch::visit<arch::best>([](auto tag) { register_pair<decltype(tag)>(); });
  return true;
}();

}  // namespace
