// Benchmarks of elementwise add, mul and scale over 4096-float rows.
#include "hedge/kernels/elementwise.hpp"
#include "ops_bench.hpp"

namespace {

using namespace hedge;
using bench::ops::operands;

constexpr std::size_t width = 4096;

const bool registered = [] {
  bench::ops::register_family("ops/add", 3, width, 2.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) {
                                  kernels::add<A>(o.row(0, r), o.row(1, r), o.row(2, r));
                                }
                              });
  bench::ops::register_family("ops/mul", 3, width, 2.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) {
                                  kernels::mul<A>(o.row(0, r), o.row(1, r), o.row(2, r));
                                }
                              });
  bench::ops::register_family("ops/scale", 2, width, 1.0 * width * sizeof(float), bench::ops::standard_cases(),
                              []<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                                for (std::size_t r = begin; r < end; ++r) kernels::scale<A>(o.row(0, r), 0.5f, o.row(1, r));
                              });
  return true;
}();

}  // namespace
