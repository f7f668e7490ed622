// Benchmarks of RMSNorm and softmax over 4096-float rows (Llama-7B's width).
#include "hedge/kernels/norm.hpp"
#include "hedge/kernels/softmax.hpp"
#include "ops_bench.hpp"

namespace {

using namespace hedge;
using bench::ops::operands;

constexpr std::size_t width = 4096;

const bool registered = [] {
  bench::ops::register_family("ops/rmsnorm", 3, width, 2.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) {
                                  kernels::rmsnorm<A>(o.row(0, r), o.row(1, r), 1e-5f, o.row(2, r));
                                }
                              });
  bench::ops::register_family("ops/softmax", 2, width, 1.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) kernels::softmax<A>(o.row(0, r), o.row(1, r));
                              });
  return true;
}();

}  // namespace
