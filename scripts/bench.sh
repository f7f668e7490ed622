#!/usr/bin/env bash
# Builds hedge's benchmarks (Release, -march=native), runs every bench binary and
# writes the per-CPU report: bench-report/<cpu>.md, <cpu>.json, <cpu>.svg (a table
# per kernel of every arch variant this CPU supports, bytes/s or GFLOP/s, bw_fraction,
# the best variant marked) and <cpu>-scaling.svg (each case against the thread
# count). Each binary first records in its JSON context the CPU name, the hedge arch
# tags it supports and the read bandwidth bound.
#
# Usage: ./scripts/bench.sh [--quick] [FILTER]
#   FILTER   a Google Benchmark regex on names, e.g. gemv/q4_0 or 'ops/rmsnorm/.*/hot'
#   --quick  one short repetition per benchmark (smoke runs); the default is 3
#            repetitions of at least 0.5 s each, reporting the median
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
filter="."
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench.sh: unknown option $arg" >&2; exit 2 ;;
    *) filter="$arg" ;;
  esac
done

./scripts/deps.sh
# The report tool lives in tools/, which the bench preset does not build by default.
cmake --preset bench -DHEDGE_BUILD_EXAMPLES=ON > /dev/null
layers=()
for dir in bench/*/; do
  layer="$(basename "$dir")"
  [ "$layer" != common ] && compgen -G "$dir*.cpp" > /dev/null && layers+=("$layer")
done
targets=(hedge-bench-report)
for layer in "${layers[@]}"; do targets+=("hedge_bench_$layer"); done
cmake --build --preset bench -j "$(nproc)" --target "${targets[@]}"

if [ "$quick" -eq 1 ]; then
  run_args=(--benchmark_min_time=0.02 --benchmark_repetitions=1)
else
  run_args=(--benchmark_min_time=0.5 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
fi
results_dir=build/bench/results
rm -rf "$results_dir"
mkdir -p "$results_dir" bench-report
results=()
for layer in "${layers[@]}"; do
  echo "== hedge_bench_$layer (filter: $filter)"
  out="$results_dir/$layer.json"
  ./build/bench/bench/"hedge_bench_$layer" --benchmark_filter="$filter" "${run_args[@]}" \
    --benchmark_out="$out" --benchmark_out_format=json
  [ -s "$out" ] && results+=("$out")
done
if [ ${#results[@]} -eq 0 ]; then
  echo "bench.sh: no benchmark matched '$filter'" >&2
  exit 1
fi
command="./scripts/bench.sh $*"
./build/bench/tools/hedge-bench-report --out bench-report --command "${command% }" "${results[@]}"
