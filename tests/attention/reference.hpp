// Float64 reference attention with a materialised softmax, and helpers to fill
// a cache with random K/V, shared by the attention tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/half.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::test {

/// Calls f(tag) for every arch tag this build compiles (arch::compiled) that this CPU runs,
/// so a test covers each kernel variant of the build, whatever its -march.
template <class F>
void for_each_supported_arch(F&& f) {
  [&]<class... Tags>(arch::tag_list<Tags...>) { ((Tags::supported() ? f(Tags{}) : void()), ...); }(arch::compiled{});
}

/// The tag `arch::best` runs on this CPU, as a name (what the dispatch tests compare).
inline std::string_view best_arch_name() {
  return arch::visit<arch::best>([](auto tag) { return decltype(tag)::name; });
}

/// Every built-in KV element format, for typed tests.
using kv_elements = ::testing::Types<kv::kv_f32, kv::kv_f16, kv::kv_bf16, kv::kv_q8_0, kv::kv_q4_0>;

/// out[h] = sum_i softmax_i(logit(q_h, k_i)) v_i in double over key positions
/// [key_begin, key_end) (K/V decoded with the element's own decode, so only the
/// attention math is checked); query_pos is the query's position (ALiBi).
/// Each key and value is decoded once per KV head and used by the group's query heads
/// (decoding dominated the reference's time, and the qemu-aarch64 run's).
template <class Elem>
std::vector<double> reference_attention(const kv::kv_sequence_view<Elem>& kv, std::size_t layer,
                                        std::span<const float> q, const attention::attention_params& p,
                                        std::uint64_t key_begin, std::uint64_t key_end,
                                        std::uint64_t query_pos) {
  const std::size_t dim = kv.head_dim(), q_heads = q.size() / dim, group = q_heads / kv.kv_heads();
  const auto keys = static_cast<std::size_t>(key_end - key_begin);
  std::vector<double> out(q.size(), 0.0);
  std::vector<float> key(dim), value(dim);
  std::vector<double> logits(group * keys), sums(group);
  for (std::size_t kv_head = 0; kv_head < kv.kv_heads(); ++kv_head) {
    const std::size_t first = kv_head * group;
    for (std::uint64_t pos = key_begin; pos < key_end; ++pos) {
      const auto run = kv.contiguous(layer, kv_head, pos, pos + 1);
      Elem::decode(std::span(run.keys, kv.vector_units()), key);
      for (std::size_t g = 0; g < group; ++g) {
        const std::size_t h = first + g;
        double dot = 0;
        for (std::size_t j = 0; j < dim; ++j) dot += static_cast<double>(q[h * dim + j]) * key[j];
        double logit = dot * p.scale;
        if (p.softcap > 0) logit = p.softcap * std::tanh(logit / p.softcap);
        if (!p.alibi_slopes.empty())
          logit += p.alibi_slopes[h] * (static_cast<double>(pos) - static_cast<double>(query_pos));
        logits[g * keys + (pos - key_begin)] = logit;
      }
    }
    for (std::size_t g = 0; g < group; ++g) {
      const auto row = std::span(logits).subspan(g * keys, keys);
      const double max = *std::max_element(row.begin(), row.end());
      sums[g] = 0;
      for (double& l : row) sums[g] += (l = std::exp(l - max));
    }
    for (std::uint64_t pos = key_begin; pos < key_end; ++pos) {
      const auto run = kv.contiguous(layer, kv_head, pos, pos + 1);
      Elem::decode(std::span(run.values, kv.vector_units()), value);
      for (std::size_t g = 0; g < group; ++g) {
        const std::size_t h = first + g;
        const double w = logits[g * keys + (pos - key_begin)] / sums[g];
        for (std::size_t j = 0; j < dim; ++j) out[h * dim + j] += w * value[j];
      }
    }
  }
  return out;
}

/// The queries (head_dim floats per head) rounded to Q8_0 per 32-value block, as
/// the AVX2 kernel rounds them for q8_0/q4_0 keys (ggml's reference quantizer,
/// the tail of a head zero-padded to a whole block).
inline std::vector<float> q8_0_rounded(std::span<const float> q, std::size_t dim) {
  std::vector<float> out(q.size());
  for (std::size_t h = 0; h < q.size() / dim; ++h) {
    for (std::size_t b = 0; b < dim; b += 32) {
      float block[32] = {}, back[32];
      const std::size_t n = std::min<std::size_t>(32, dim - b);
      std::copy_n(q.data() + h * dim + b, n, block);
      quant::q8_0::block quantized;
      quant::q8_0::quantize_block(std::span<const float, 32>(block), quantized);
      quant::q8_0::dequantize_block(quantized, std::span<float, 32>(back));
      std::copy_n(back, n, out.data() + h * dim + b);
    }
  }
  return out;
}

/// q with every value rounded to bf16 (round to nearest even, f32_to_bf16): the query
/// the AVX-512 kernel dots bf16 keys with on a CPU with AVX512_BF16 (vdpbf16ps).
inline std::vector<float> bf16_rounded(std::span<const float> q) {
  std::vector<float> out(q.size());
  for (std::size_t j = 0; j < q.size(); ++j) out[j] = bf16_to_f32(f32_to_bf16(q[j]));
  return out;
}

/// Whether arch A's decode kernel takes bf16 keys of `head_dim` values by vdpbf16ps on
/// this CPU (the avx512vnni kernel, or a tag derived from it, where CPUID reports
/// AVX512_BF16; head_dim not a multiple of 16 runs the AVX2 kernel).
template <class A>
bool dots_bf16_keys_in_bf16([[maybe_unused]] std::size_t head_dim) {
#if HEDGE_SIMD_X86
  return std::is_base_of_v<arch::avx512vnni, A> && arch::detail::cpu().avx512bf16 && head_dim % 16 == 0;
#else
  return false;
#endif
}

/// A bound on max |out(q) - out(rounded)| / max |out(q)| from the query rounding
/// alone: with E = max over heads and keys of |scale (rounded - q) . k| (soft-cap
/// and ALiBi do not widen logit differences), every softmax weight moves by a
/// factor within e^(+-2E), so each output moves by at most (e^(2E) - 1) max |v|.
template <class Elem>
double query_rounding_bound(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, std::span<const float> q,
                            std::span<const float> rounded, const attention::attention_params& p,
                            std::span<const double> want) {
  const std::size_t dim = kv.head_dim(), q_heads = q.size() / dim, group = q_heads / kv.kv_heads();
  std::vector<float> key(dim), value(dim);
  double e = 0, vmax = 0;
  for (std::uint64_t pos = kv.begin(); pos < kv.end(); ++pos) {
    for (std::size_t head = 0; head < kv.kv_heads(); ++head) {
      const auto run = kv.contiguous(layer, head, pos, pos + 1);
      Elem::decode(std::span(run.keys, kv.vector_units()), key);
      Elem::decode(std::span(run.values, kv.vector_units()), value);
      for (float v : value) vmax = std::max(vmax, std::fabs(static_cast<double>(v)));
      for (std::size_t h = head * group; h < (head + 1) * group; ++h) {
        double d = 0;
        for (std::size_t j = 0; j < dim; ++j)
          d += (static_cast<double>(rounded[h * dim + j]) - q[h * dim + j]) * key[j];
        e = std::max(e, std::fabs(d * p.scale));
      }
    }
  }
  double scale = 1e-30;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  return std::expm1(2 * e) * vmax / scale;
}

/// max |got - want| / max |want| (0 when want is all zero).
inline double relative_error(std::span<const float> got, std::span<const double> want) {
  double err = 0, scale = 1e-30;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

inline std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float amplitude = 1.f) {
  std::uniform_real_distribution<float> d(-amplitude, amplitude);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

/// Appends `tokens` positions of random K/V (every layer) to `seq`.
template <class Cache>
void append_random(Cache& cache, kv::kv_seq seq, std::size_t tokens, std::mt19937& rng) {
  const auto& s = cache.shape();
  const std::size_t n = s.kv_heads() * s.head_dim();
  for (std::size_t t = 0; t < tokens; ++t) {
    const auto pos = cache.extend(seq, 1);
    ASSERT_TRUE(pos) << pos.error().c_str();
    for (std::size_t layer = 0; layer < s.layers(); ++layer) {
      const auto k = random_floats(n, rng, 2.f), v = random_floats(n, rng);
      ASSERT_TRUE(cache.write(seq, layer, *pos, k, v));
    }
  }
}

/// A heap cache holding one sequence of `tokens` random positions (the common test set-up).
template <class Elem>
struct filled_sequence {
  kv::kv_cache<kv::kv_dynamic_shape, Elem> cache;
  kv::kv_seq seq;
  kv::kv_sequence_view<Elem> view() const { return *cache.view(seq); }
};
template <class Elem>
filled_sequence<Elem> make_filled_sequence(kv::kv_dynamic_shape shape, kv::kv_config config, std::size_t tokens,
                                           std::mt19937& rng) {
  auto cache = kv::kv_cache<kv::kv_dynamic_shape, Elem>::make(shape, config);
  EXPECT_TRUE(cache) << cache.error().c_str();
  filled_sequence<Elem> filled{std::move(*cache), {}};
  filled.seq = *filled.cache.create();
  append_random(filled.cache, filled.seq, tokens, rng);
  return filled;
}

}  // namespace hedge::test
