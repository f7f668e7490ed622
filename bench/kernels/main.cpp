// hedge_bench_kernels: the benchmarks of every kernel, registered by the other
// .cpp files of this folder (see bench/common/report.hpp for the conventions).
#include "common/main.hpp"

int main(int argc, char** argv) { return hedge::bench::run_main(argc, argv); }
