// The arithmetic ceiling of AVX2 decode attention: the kernel's own inner loops alone,
// on K/V that stay in L1, for GQA group 4 and head_dim 128 (the decode benchmark's shape).
//
//   attention_decode_ceiling/<elem>/avx2/tile32_g4_d128/hot/threads:<t>
//
// One pass = the logits of a 32-position tile for 4 query heads (attention::avx2::dot2, or
// dot2_blocks against the Q8_0-rounded query), for block formats the weights times each
// value block's scale, then the tile's values into the 4 heads' outputs
// (accumulate_values). No softmax, no tile gathering, no prefetch, no cache misses: what
// decode_partial spends beyond these loops is not here. Each thread runs passes over its
// own tile. bytes/s counts the tile's K+V bytes per pass, and `bw_fraction` compares it
// with the DRAM read bandwidth at the same thread count: no decode built from these loops
// can stream K/V faster than this on this CPU, so a `bw_fraction` target above this
// benchmark's cannot be met with this arithmetic (docs/attention.md, "Ceiling: the
// `bw_fraction` this CPU allows").
// `cycles_per_position`: the calling thread's user cycles per (position, KV head), which
// unlike bytes/s does not move with the core clock (on a shared guest it moves).
#include <benchmark/benchmark.h>

#include "hedge/compiler/attributes.hpp"  // HEDGE_SIMD_X86

#if HEDGE_SIMD_X86
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cycles.hpp"
#include "common/inputs.hpp"
#include "attention/variants.hpp"
#include "common/report.hpp"
#include "hedge/attention/decode_avx2.hpp"
#include "hedge/kv/element.hpp"

namespace {

namespace hb = hedge::bench;
namespace av = hedge::attention::avx2;
using hedge::bench::attention::head_dim;
constexpr std::size_t positions = 32, heads = 4, passes = 64;

/// One thread's tile: K and V of `positions` positions in the stored format, the 4 queries
/// in the form the key format's dot product reads, and the outputs.
template <class Elem>
struct ceiling_tile {
  using unit = typename Elem::unit;
  static constexpr std::size_t units = Elem::units(head_dim);
  std::vector<unit> keys, values;
  const unit* key[positions];
  const unit* value[positions];
  av::group_queries q;
  alignas(32) float logits[positions * 4];
  alignas(32) float weights[positions * 4];
  alignas(32) float scaled[head_dim / 32][positions * 4];
  alignas(32) float acc[heads][hedge::attention::attention_max_head_dim];

  explicit ceiling_tile(std::size_t seed) : keys(positions * units), values(positions * units) {
    const auto k = hb::pseudo_random_floats(positions * head_dim, static_cast<std::uint32_t>(2 * seed + 1));
    const auto v = hb::pseudo_random_floats(positions * head_dim, static_cast<std::uint32_t>(2 * seed + 2));
    for (std::size_t i = 0; i < positions; ++i) {
      (void)Elem::encode({k.data() + i * head_dim, head_dim}, {keys.data() + i * units, units});
      (void)Elem::encode({v.data() + i * head_dim, head_dim}, {values.data() + i * units, units});
      key[i] = keys.data() + i * units;
      value[i] = values.data() + i * units;
    }
    const auto queries = hb::pseudo_random_floats(heads * head_dim, static_cast<std::uint32_t>(seed + 7));
    av::load_queries<heads, Elem>(queries.data(), head_dim, head_dim, q);
    for (std::size_t i = 0; i < positions * 4; ++i) weights[i] = 1.0f / static_cast<float>(positions);
    for (auto& row : acc) std::fill(std::begin(row), std::end(row), 0.0f);
  }

  /// The kernel's loops over the tile, as group_partial runs them for 4 heads (the logits
  /// are stored, as there; the weights stay fixed, as the softmax is left out).
  HEDGE_TARGET_AVX2 void pass() noexcept {
    using R = av::reader<Elem>;
    constexpr bool blocks = R::scale_block != 0;
    for (std::size_t i = 0; i < positions; i += 2)
      _mm256_store_ps(logits + 4 * i, av::pair_logits<heads, Elem>(q, key[i], key[i + 1], units, head_dim));
    if constexpr (blocks) av::fold_value_scales<Elem>(value, positions, units, weights, scaled[0], positions * 4);
    av::no_tile_prefetch upcoming;
    for (std::size_t c = 0; c < head_dim; c += 16) {
      const float* chunk_weights[1] = {blocks ? scaled[c / 32] : weights};  // a chunk lies in one block
      av::accumulate_values<heads, 2, Elem>(acc, value, positions, chunk_weights, c, upcoming);
    }
    benchmark::ClobberMemory();
  }
};

template <class Elem>
void ceiling_benchmark(benchmark::State& state, std::size_t threads) {
  std::vector<std::unique_ptr<ceiling_tile<Elem>>> tiles;
  for (std::size_t t = 0; t < threads; ++t) tiles.push_back(std::make_unique<ceiling_tile<Elem>>(t));
  auto& pool = hb::pool(threads);
  const hb::user_cycles cycles;
  const hb::loop_clock clock;
  for (auto _ : state) {
    pool.parallel_for(threads, [&](std::size_t begin, std::size_t end) {
      for (std::size_t t = begin; t < end; ++t)
        for (std::size_t p = 0; p < passes; ++p) tiles[t]->pass();
    });
  }
  // The calling thread runs one tile per iteration (parallel_for gives each thread one) and
  // then waits, spinning, for the others: with several threads this is the slowest one's.
  if (const auto per_position = cycles.per(static_cast<double>(state.iterations()) * passes * positions))
    state.counters["cycles_per_position"] = *per_position;
  const double tile_bytes = static_cast<double>(positions * 2 * hedge::kv::kv_vector_bytes<Elem>(head_dim));
  hb::set_bandwidth_counters(state, tile_bytes * passes * static_cast<double>(threads), threads, hb::residency::hot,
                             clock);
}

template <class Elem>
void register_ceiling() {
  if (!hedge::arch::avx2::supported()) return;
  hb::begin_family("attention_decode_ceiling/" + std::string(Elem::name));
  for (std::size_t threads : hb::thread_counts())
    hb::register_benchmark(hb::benchmark_name("attention_decode_ceiling/" + std::string(Elem::name), "avx2",
                                              "tile32_g4_d128", hb::residency::hot, threads),
                           [threads](benchmark::State& state) { ceiling_benchmark<Elem>(state, threads); });
}

const bool ceiling_registered = [] {
  register_ceiling<hedge::kv::kv_f16>();
  register_ceiling<hedge::kv::kv_q8_0>();
  return true;
}();

}  // namespace
#endif
