// hedge_bench_model: the model layer's benchmarks (forward pass, tokenizer), registered by
// the other .cpp files of this folder (see bench/common/report.hpp for the conventions).
#include "common/main.hpp"

int main(int argc, char** argv) { return hedge::bench::run_main(argc, argv); }
