// Causal prefill attention of 512 tokens (a prompt appended to an empty
// sequence): 32 query heads, 8 KV heads, head_dim 128, f16 and q8_0 KV,
// every arch tag this build compiles and this CPU supports, then `best` (the
// default, dispatched at run time; variants.hpp), 1 and all threads. Reports GFLOP/s counting the causal work
// only: 4 x head_dim flops (q.k and p.v, multiply + add) per visible (query
// head, key) pair, (n (n + 1) / 2) pairs per query head.
//
//   attention_prefill/<elem>/<arch>/tokens512_q32_kv8_d128/hot/threads:<t>
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/inputs.hpp"
#include "common/report.hpp"
#include "hedge/attention/prefill.hpp"
#include "attention/variants.hpp"
#include "hedge/kv/cache.hpp"

namespace {

namespace hb = hedge::bench;
using hedge::bench::attention::q_heads, hedge::bench::attention::kv_heads, hedge::bench::attention::head_dim;
constexpr std::size_t tokens = 512;

template <class Elem, class Arch>
void prefill_benchmark(benchmark::State& state, std::size_t threads) {
  hedge::kv::kv_cache<hedge::kv::kv_dynamic_shape, Elem> cache;
  if (auto r = cache.init({1, kv_heads, head_dim}, hedge::kv::kv_config{1, tokens, 16, 0, 0}); !r) {
    state.SkipWithError(r.error().c_str());
    return;
  }
  const auto seq = *cache.create();
  const auto k = hb::pseudo_random_floats(tokens * kv_heads * head_dim, 1), v = hb::pseudo_random_floats(k.size(), 2);
  const std::size_t n = kv_heads * head_dim;
  (void)cache.extend(seq, tokens);
  for (std::size_t pos = 0; pos < tokens; ++pos)
    (void)cache.write(seq, 0, pos, {k.data() + pos * n, n}, {v.data() + pos * n, n});
  const auto view = *cache.view(seq);
  const auto q = hb::pseudo_random_floats(tokens * q_heads * head_dim, 3);
  std::vector<float> out(q.size());
  auto& pool = hb::pool(threads);
  std::vector<float> workspace(hedge::attention::prefill_workspace_floats(q_heads, kv_heads, head_dim, pool.concurrency()));
  for (auto _ : state) {
    const auto status =
        hedge::attention::prefill_attention<Arch>(view, 0, tokens, q, out, {0.0883883f}, workspace, pool);
    if (!status) {
      state.SkipWithError(status.error().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  hb::set_flops_counters(state, 4.0 * head_dim * q_heads * (tokens * (tokens + 1) / 2.0));
}

template <class Elem>
void register_prefill() {
  for (std::size_t threads : hb::thread_counts()) {
    hedge::bench::attention::for_each_variant([&](auto arch) {
      using Arch = decltype(arch);
      hb::register_benchmark(hb::benchmark_name("attention_prefill/" + std::string(Elem::name), Arch::name,
                                                "tokens512_q32_kv8_d128", hb::residency::hot, threads),
                             [threads](benchmark::State& state) { prefill_benchmark<Elem, Arch>(state, threads); });
    });
  }
}

const bool prefill_registered = [] {
  register_prefill<hedge::kv::kv_f16>();
  register_prefill<hedge::kv::kv_q8_0>();
  return true;
}();

}  // namespace
