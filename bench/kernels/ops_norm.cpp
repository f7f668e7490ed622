// Benchmarks of RMSNorm (x, weight -> out) and softmax (x -> out) over
// 4096-float rows (Llama-7B's width).
#include "hedge/kernels/norm.hpp"
#include "hedge/kernels/softmax.hpp"
#include "ops_bench.hpp"

namespace {

using hedge::bench::ops::operands;
namespace kernels = hedge::kernels;

const bool norm_registered = [] {
  hedge::bench::ops::register_row_family("ops/rmsnorm", 3, 2, 4096, []<class A>(A, const operands& o, std::size_t r) {
    kernels::rmsnorm<A>(o.row(0, r), o.row(1, r), 1e-5f, o.row(2, r));
  });
  hedge::bench::ops::register_row_family("ops/softmax", 2, 1, 4096, []<class A>(A, const operands& o, std::size_t r) {
    kernels::softmax<A>(o.row(0, r), o.row(1, r));
  });
  return true;
}();

}  // namespace
