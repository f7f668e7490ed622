// Benchmarks of RoPE in both layouts on 128-float heads (Llama's head size):
// a row is one head rotated in place (its bytes read once); the table is built
// once, as a model builds it once per token for every head of q and k.
#include "hedge/kernels/rope.hpp"
#include "ops_bench.hpp"

namespace {

using namespace hedge;
using bench::ops::operands;

constexpr std::size_t head_dim = 128;

/// 32 heads: one token's q in Llama-7B, hot; 8192 heads (256 tokens) cold.
std::vector<bench::ops::op_case> rope_cases() {
  std::vector<bench::ops::op_case> cases{{32, bench::residency::hot, 1}};
  for (std::size_t threads : bench::thread_counts()) cases.push_back({8192, bench::residency::cold, threads});
  return cases;
}

template <kernels::rope_layout Layout>
struct rope_rows {
  std::vector<float> cos = std::vector<float>(head_dim), sin = std::vector<float>(head_dim);
  rope_rows() { (void)kernels::rope_table(Layout, 1234, 10000.0f, {cos.data(), head_dim}, {sin.data(), head_dim}); }
  template <class A>
  void operator()(A, const operands& o, std::size_t begin, std::size_t end) const {
    kernels::rope<A>(Layout, o.matrix(0).row_range(begin, end - begin), {cos.data(), head_dim}, {sin.data(), head_dim});
  }
};

const bool rope_registered = [] {
  bench::ops::register_family("ops/rope_adjacent_pairs", 1, head_dim, 1.0 * head_dim * sizeof(float), rope_cases(),
                              rope_rows<kernels::rope_layout::adjacent_pairs>{});
  bench::ops::register_family("ops/rope_neox", 1, head_dim, 1.0 * head_dim * sizeof(float), rope_cases(),
                              rope_rows<kernels::rope_layout::neox_halves>{});
  return true;
}();

}  // namespace
