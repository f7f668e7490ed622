// bench/common/main.hpp: the main of every hedge bench binary.
//
// Before any benchmark runs it prints (and records in the JSON context, for
// the report) the CPU name, the hedge arch tags it supports, the variant
// arch::best runs, the LLC size and
// the read bandwidth at 1 thread and at every hardware thread; then it runs
// Google Benchmark with the command line passed through.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
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
    const std::string name = cpu_name();
    const std::string features = supported_arch_names();
    std::printf("hedge bench: cpu \"%s\"\n", name.c_str());
    std::printf("hedge bench: arch tags supported: %s (this binary's native tag: %s; arch::best runs %s)\n",
                features.c_str(), std::string(arch::native::name).c_str(), std::string(arch::best_name()).c_str());
    std::printf("hedge bench: last-level cache %.1f MiB; bandwidth buffer %.0f MiB\n",
                double(llc_bytes()) / (1 << 20), double(bandwidth_buffer_bytes()) / (1 << 20));
    benchmark::AddCustomContext("hedge_cpu_name", name);
    benchmark::AddCustomContext("hedge_arch_supported", features);
    benchmark::AddCustomContext("hedge_arch_native", std::string(arch::native::name));
    benchmark::AddCustomContext("hedge_arch_best", std::string(arch::best_name()));
    benchmark::AddCustomContext("hedge_llc_bytes", std::to_string(llc_bytes()));
    for (std::size_t threads : thread_counts()) {
      const double bw = measured_bandwidth(threads);
      std::printf("hedge bench: read bandwidth at %zu thread%s: %.2f GB/s\n", threads, threads == 1 ? "" : "s",
                  bw * 1e-9);
      benchmark::AddCustomContext("hedge_read_bw_threads:" + std::to_string(threads), std::to_string(bw));
    }
    std::fflush(stdout);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace hedge::bench
