// bench/kernels/ops_bench.hpp: shared registration of the elementwise kernel
// benchmarks (ops_*.cpp): every arch variant and arch::best, hot and cold
// cases, counters.
//
// Bytes per call count the operand bytes the kernel reads (x, weight; a
// rotated head once), not the bytes it writes: bw_fraction compares them with
// the read bandwidth. Writes are extra traffic the CPU buffers and overlaps,
// so an op that also writes can stream reads at most at about that fraction
// of its reads-only speed. The cold case cycles through cold_buffer_count()
// copies of all operands, so the reads come from DRAM and bw_fraction is
// meaningful; hot cases (one decode row; a 64-row prefill chunk) show
// in-cache speed and exceed 1.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "common/buffers.hpp"
#include "common/report.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"

namespace hedge::bench::ops {

/// Calls fn(A{}) for each variant of arch::compiled this CPU runs, then for
/// arch::best: what an entry point called without a tag runs, its dispatch included.
template <class Fn>
void for_each_variant(Fn&& fn) {
  [&fn]<class... Tags>(arch::tag_list<Tags...>) { ((Tags::supported() ? fn(Tags{}) : void()), ...); }(arch::compiled{});
  fn(arch::best{});
}

/// `count` operand matrices of rows x cols floats, contiguous in one buffer.
struct operands {
  float* data;
  std::size_t rows, cols;
  [[nodiscard]] vector_view<float> row(std::size_t operand, std::size_t r) const noexcept {
    return {data + (operand * rows + r) * cols, cols};
  }
  [[nodiscard]] matrix_view<float> matrix(std::size_t operand) const noexcept {
    return {data + operand * rows * cols, rows, cols};
  }
};

/// One benchmark case of an ops family.
struct op_case {
  std::size_t rows;
  residency where;
  std::size_t threads;
};

/// The decode row and a 64-row chunk in cache at 1 thread; 1024 rows cold at
/// every thread count (the rows are split over pool(threads)).
inline std::vector<op_case> standard_cases() {
  std::vector<op_case> cases{{1, residency::hot, 1}, {64, residency::hot, 1}};
  for (std::size_t threads : thread_counts()) cases.push_back({1024, residency::cold, threads});
  return cases;
}

/// Registers the family `kernel` (see report.hpp for the names): for every
/// variant and case, each iteration calls apply(tag, operands, row_begin,
/// row_end) over all rows of `operand_count` operands of `cols` floats per row,
/// and the counters count `bytes_read_per_row` per row.
template <class Apply>
void register_family(const std::string& kernel, std::size_t operand_count, std::size_t cols, double bytes_read_per_row,
                     const std::vector<op_case>& cases, Apply apply) {
  begin_family(kernel);
  for_each_variant([&]<class A>(A) {
    for (const op_case& c : cases) {
      const std::string shape = std::to_string(c.rows) + "x" + std::to_string(cols);
      register_benchmark(benchmark_name(kernel, A::name, shape, c.where, c.threads),
                         [=](benchmark::State& state) {
                           const std::size_t floats = operand_count * c.rows * cols;
                           std::vector<float> initial(floats);
                           std::mt19937 rng(42);
                           std::normal_distribution<float> dist(0.0f, 1.0f);
                           for (float& v : initial) v = dist(rng);
                           auto ring = buffer_ring::for_residency(floats * sizeof(float), c.where);
                           ring.fill_all(initial.data());
                           auto& workers = pool(c.threads);
                           std::size_t next = 0;
                           const loop_clock clock;
                           for (auto _ : state) {
                             const operands o{ring.get<float>(next++), c.rows, cols};
                             workers.parallel_for(c.rows, [&](std::size_t begin, std::size_t end) {
                               apply(A{}, o, begin, end);
                             });
                             benchmark::ClobberMemory();
                           }
                           set_bandwidth_counters(state, bytes_read_per_row * double(c.rows), c.threads, c.where, clock);
                         });
    }
  });
}

/// The common family: standard_cases() over rows of `cols` floats, of which
/// `operands_read` operands are read; row_op(tag, operands, row) handles one row.
template <class RowOp>
void register_row_family(const std::string& kernel, std::size_t operand_count, std::size_t operands_read,
                         std::size_t cols, RowOp row_op) {
  register_family(kernel, operand_count, cols, double(operands_read * cols * sizeof(float)), standard_cases(),
                  [row_op]<class A>(A, const operands& o, std::size_t begin, std::size_t end) {
                    for (std::size_t r = begin; r < end; ++r) row_op(A{}, o, r);
                  });
}

}  // namespace hedge::bench::ops
