// Benchmarks of SiLU and GELU (x -> out) and SwiGLU's silu(gate) * up
// (gate, up -> out) over 11008-float rows (Llama-7B's feed-forward width).
#include "hedge/kernels/activation.hpp"
#include "ops_bench.hpp"

namespace {

using hedge::bench::ops::operands;
namespace kernels = hedge::kernels;

const bool activation_registered = [] {
  hedge::bench::ops::register_row_family("ops/silu", 2, 1, 11008, []<class A>(A, const operands& o, std::size_t r) {
    kernels::silu<A>(o.row(0, r), o.row(1, r));
  });
  hedge::bench::ops::register_row_family("ops/gelu", 2, 1, 11008, []<class A>(A, const operands& o, std::size_t r) {
    kernels::gelu<A>(o.row(0, r), o.row(1, r));
  });
  hedge::bench::ops::register_row_family("ops/silu_mul", 3, 2, 11008, []<class A>(A, const operands& o, std::size_t r) {
    kernels::silu_mul<A>(o.row(0, r), o.row(1, r), o.row(2, r));
  });
  return true;
}();

}  // namespace
