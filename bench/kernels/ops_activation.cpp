// Benchmarks of SiLU, GELU and SwiGLU's silu(gate) * up over 11008-float rows
// (Llama-7B's feed-forward width).
#include "hedge/kernels/activation.hpp"
#include "ops_bench.hpp"

namespace {

using namespace hedge;
using bench::ops::operands;

constexpr std::size_t width = 11008;

const bool registered = [] {
  bench::ops::register_family("ops/silu", 2, width, 1.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) kernels::silu<A>(o.row(0, r), o.row(1, r));
                              });
  bench::ops::register_family("ops/gelu", 2, width, 1.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) kernels::gelu<A>(o.row(0, r), o.row(1, r));
                              });
  bench::ops::register_family("ops/silu_mul", 3, width, 2.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) {
                                  kernels::silu_mul<A>(o.row(0, r), o.row(1, r), o.row(2, r));
                                }
                              });
  return true;
}();

}  // namespace
