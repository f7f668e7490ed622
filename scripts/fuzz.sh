#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ with clang++ (ASan+UBSan) and runs each
# for SECONDS (default 20) from its seed corpus fuzz/corpus/<name>/ if present.
# A crash, leak, sanitizer report or timeout fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
./scripts/deps.sh
cmake -S fuzz -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j "$(nproc)"
shopt -s nullglob
for bin in build/fuzz/fuzz_*; do
  name="${bin##*/fuzz_}"
  corpus=(); [ -d "fuzz/corpus/$name" ] && corpus=("fuzz/corpus/$name")
  work="build/fuzz/work-$name"; mkdir -p "$work"
  echo "fuzz: $name for ${seconds}s"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       "$work" "${corpus[@]}" >"build/fuzz/$name.log" 2>&1; then
    tail -60 "build/fuzz/$name.log"; echo "fuzz: $name failed (log: build/fuzz/$name.log)"; exit 1
  fi
  grep -E '^stat::number_of_executed_units' "build/fuzz/$name.log" || true
done
