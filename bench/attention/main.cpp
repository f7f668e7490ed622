// hedge_bench_attention: decode and prefill attention benchmarks, registered by
// the other .cpp files of this folder. The shared main prints the CPU, its arch
// tags and the read bandwidth before any benchmark runs (bench/common/main.hpp).
#include "common/main.hpp"

int main(int argc, char** argv) { return hedge::bench::run_main(argc, argv); }
