// bench/common/main.hpp: the main of every hedge bench binary.
//
// Before any benchmark runs it records in Google Benchmark's context (printed
// with the console output's header, a `context` field of the JSON) the CPU name,
// the hedge arch tags it supports, the variant arch::best runs, the LLC size, and
// the read bandwidth bound at 1 thread and at every hardware thread with the loop
// that reached it (bandwidth.hpp); then it runs Google Benchmark with the command
// line passed through. Nothing is printed on stdout, so `--benchmark_format=json`
// output is one JSON document.
#pragma once

#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "common/bandwidth.hpp"
#include "common/cpu.hpp"
#include "common/report.hpp"
#include "hedge/core/dispatch.hpp"

namespace hedge::bench {

inline int run_main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--benchmark_list_tests", 22) == 0;
  if (!listing) {
    benchmark::AddCustomContext("hedge_cpu_name", cpu_name());
    benchmark::AddCustomContext("hedge_arch_supported", supported_arch_names());
    benchmark::AddCustomContext("hedge_arch_native", std::string(arch::native::name));
    benchmark::AddCustomContext("hedge_arch_best", std::string(arch::best_name()));
    benchmark::AddCustomContext("hedge_llc_bytes", std::to_string(llc_bytes()));
    benchmark::AddCustomContext("hedge_bandwidth_buffer_bytes", std::to_string(bandwidth_buffer_bytes()));
    benchmark::AddCustomContext("hedge_read_loops", std::to_string(detail::read_loops().size()));
    for (std::size_t threads : thread_counts()) {
      const bandwidth_result bound = measured_bandwidth_result(threads);
      benchmark::AddCustomContext("hedge_read_bw_threads:" + std::to_string(threads),
                                  std::to_string(bound.bytes_per_second));
      benchmark::AddCustomContext("hedge_read_bw_loop_threads:" + std::to_string(threads), bound.loop);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace hedge::bench
