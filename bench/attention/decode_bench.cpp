// Decode attention: 32 query heads over 8 KV heads (GQA group 4), head_dim 128,
// context 512 / 4096 / 16384, f32, f16, bf16, q8_0 and q4_0 KV, 1 and all threads.
//
//   attention_decode/<elem>/<arch>[_paged<p>]/ctx<n>_q32_kv8_d128/cold/threads:<t>
//
// Bytes per iteration are the K and V bytes of one layer of the sequence (what
// decode must stream); `bw_fraction` compares them with the read bandwidth
// measured in this binary. "cold": the cache holds enough layers (each one
// sequence's K/V for one layer) that cycling through them exceeds eight times the
// LLC, so every iteration streams from DRAM, as a real model's layers do.
// <arch> is each tag this build compiles and this CPU supports, then `best` (the
// default, dispatched at run time; bench/attention/variants.hpp). `<arch>` uses a
// contiguous cache (one page per sequence), `<arch>_paged16` and `<arch>_paged64`
// pages of 16 (vLLM's default) and 64 tokens taken alternately by two sequences,
// so pages are not adjacent: their ratio is the paging overhead.
// "hot" (context 512, contiguous, one layer of 1 MiB f16 that stays in L2/L3) is
// the kernel's in-cache throughput: the compute bound the cold figures meet.
// At one thread, `cycles_per_position` is the thread's user cycles per (position, KV
// head), to set beside attention_decode_ceiling's (decode_ceiling_bench.cpp).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/cycles.hpp"
#include "common/inputs.hpp"
#include "common/report.hpp"
#include "hedge/attention/decode.hpp"
#include "hedge/kv/cache.hpp"
#include "attention/variants.hpp"

namespace {

namespace hb = hedge::bench;
namespace kv = hedge::kv;
using hedge::bench::attention::q_heads, hedge::bench::attention::kv_heads, hedge::bench::attention::head_dim;

template <class Elem>
struct filled_cache {
  kv::kv_cache<kv::kv_dynamic_shape, Elem> cache;
  kv::kv_seq seq;
  std::size_t layers = 0;
};

/// The cache for one (element, context, page size); the last one made is kept
/// so Google Benchmark's repeated calls reuse it (benchmarks run in order).
template <class Elem>
filled_cache<Elem>& cache_for(std::size_t context, std::size_t page_tokens, hb::residency where) {
  static std::unique_ptr<filled_cache<Elem>> slot;
  static std::size_t slot_context = 0, slot_page = 0;
  static hb::residency slot_where = hb::residency::cold;
  if (slot && slot_context == context && slot_page == page_tokens && slot_where == where) return *slot;
  slot.reset();
  auto made = std::make_unique<filled_cache<Elem>>();
  const std::size_t layer_bytes = context * kv_heads * 2 * kv::kv_vector_bytes<Elem>(head_dim);
  made->layers = where == hb::residency::cold ? hb::cold_buffer_count(layer_bytes) : 1;
  const std::size_t sequences = page_tokens != 0 ? 2 : 1;
  auto status = made->cache.init({made->layers, kv_heads, head_dim},
                                 kv::kv_config{sequences, context, page_tokens, 0, 0});
  if (!status) {
    std::fprintf(stderr, "attention bench: %s\n", status.error().c_str());
    std::abort();
  }
  made->seq = *made->cache.create();
  const auto other = page_tokens != 0 ? made->cache.create() : hedge::result<kv::kv_seq>(made->seq);
  // 64 distinct token vectors, reused: quantizing every position would dominate set-up.
  const auto keys = hb::pseudo_random_floats(64 * kv_heads * head_dim, 1), values = hb::pseudo_random_floats(64 * kv_heads * head_dim, 2);
  const std::size_t n = kv_heads * head_dim;
  for (std::size_t pos = 0; pos < context; ++pos) {
    (void)made->cache.extend(made->seq, 1);
    if (page_tokens != 0 && pos % page_tokens == 0) (void)made->cache.extend(*other, page_tokens);
    for (std::size_t layer = 0; layer < made->layers; ++layer) {
      const std::size_t t = (pos * 7 + layer) % 64;
      (void)made->cache.write(made->seq, layer, pos, {keys.data() + t * n, n}, {values.data() + t * n, n});
    }
  }
  slot = std::move(made);
  slot_context = context;
  slot_page = page_tokens;
  slot_where = where;
  return *slot;
}

template <class Elem, class Arch>
void decode_benchmark(benchmark::State& state, std::size_t context, std::size_t page_tokens, hb::residency where,
                      std::size_t threads) {
  auto& filled = cache_for<Elem>(context, page_tokens, where);
  const auto view = *filled.cache.view(filled.seq);
  const auto q = hb::pseudo_random_floats(q_heads * head_dim, 3);
  std::vector<float> out(q.size());
  std::vector<float> workspace(hedge::attention::decode_workspace_floats(q_heads, head_dim, 16));
  auto& pool = hb::pool(threads);
  const hedge::attention::attention_params params{0.0883883f};
  std::size_t layer = 0;
  const hb::user_cycles cycles;
  const hb::loop_clock clock;
  for (auto _ : state) {
    const auto status = hedge::attention::decode_attention<Arch>(view, layer, q, out, params, workspace, pool);
    if (!status) {
      state.SkipWithError(status.error().c_str());
      break;
    }
    layer = (layer + 1) % filled.layers;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const auto cycles_per_position = cycles.per(static_cast<double>(state.iterations()) * context * kv_heads);
  const double bytes = static_cast<double>(context * kv_heads * 2 * kv::kv_vector_bytes<Elem>(head_dim));
  hb::set_bandwidth_counters(state, bytes, threads, where, clock);
  state.counters["layers_cycled"] = static_cast<double>(filled.layers);
  if (threads == 1 && cycles_per_position) state.counters["cycles_per_position"] = *cycles_per_position;
}

template <class Elem>
void register_decode() {
  const std::string family = "attention_decode/" + std::string(Elem::name);
  hb::begin_family(family);
  for (std::size_t threads : hb::thread_counts()) {
    hedge::bench::attention::for_each_variant([&](auto arch) {
      using Arch = decltype(arch);
      hb::register_benchmark(hb::benchmark_name(family, Arch::name, "ctx512_q32_kv8_d128", hb::residency::hot, threads),
                             [threads](benchmark::State& state) {
                               decode_benchmark<Elem, Arch>(state, 512, 0, hb::residency::hot, threads);
                             });
    });
  }
  // The variants innermost: they share one cache (cache_for keeps the last one made).
  for (std::size_t context : {512, 4096, 16384}) {
    for (std::size_t page_tokens : {0, 16, 64}) {
      const std::string shape = "ctx" + std::to_string(context) + "_q32_kv8_d128";
      const std::string paging = page_tokens != 0 ? "_paged" + std::to_string(page_tokens) : "";
      for (std::size_t threads : hb::thread_counts()) {
        hedge::bench::attention::for_each_variant([&](auto arch) {
          using Arch = decltype(arch);
          hb::register_benchmark(
              hb::benchmark_name(family, std::string(Arch::name) + paging, shape, hb::residency::cold, threads),
              [context, page_tokens, threads](benchmark::State& state) {
                decode_benchmark<Elem, Arch>(state, context, page_tokens, hb::residency::cold, threads);
              });
        });
      }
    }
  }
}

const bool decode_registered = [] {
  register_decode<kv::kv_f32>();
  register_decode<kv::kv_f16>();
  register_decode<kv::kv_bf16>();
  register_decode<kv::kv_q8_0>();
  register_decode<kv::kv_q4_0>();
  return true;
}();

}  // namespace
