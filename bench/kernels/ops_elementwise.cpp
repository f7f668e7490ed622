// Benchmarks of elementwise add and mul (a, b -> out) and scale (x -> out)
// over 4096-float rows (a residual connection's width in Llama-7B).
#include "hedge/kernels/elementwise.hpp"
#include "ops_bench.hpp"

namespace {

using hedge::bench::ops::operands;
namespace kernels = hedge::kernels;

const bool elementwise_registered = [] {
  hedge::bench::ops::register_row_family("ops/add", 3, 2, 4096, []<class A>(A, const operands& o, std::size_t r) {
    kernels::add<A>(o.row(0, r), o.row(1, r), o.row(2, r));
  });
  hedge::bench::ops::register_row_family("ops/mul", 3, 2, 4096, []<class A>(A, const operands& o, std::size_t r) {
    kernels::mul<A>(o.row(0, r), o.row(1, r), o.row(2, r));
  });
  hedge::bench::ops::register_row_family("ops/scale", 2, 1, 4096, []<class A>(A, const operands& o, std::size_t r) {
    kernels::scale<A>(o.row(0, r), 0.5f, o.row(1, r));
  });
  return true;
}();

}  // namespace
