// hedge_bench_cloud: the cloud client's per-token overhead (stream_bench.cpp), with the
// common main of every hedge bench binary (bench/common/main.hpp).
#include "common/main.hpp"

int main(int argc, char** argv) { return hedge::bench::run_main(argc, argv); }
