#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ with clang++ (ASan+UBSan) and runs each for
# SECONDS (default 20) in two halves: small inputs (up to 4 KB) from its seed corpus
# fuzz/corpus/<name>/ if present, where mutations are fast and coverage grows; then inputs
# up to 1 MB (-max_len) from generated 256 KB adversarial seeds (long runs after PII stops,
# shapes of tests/route/pii_scan_cost_test.cpp) and what the first half found. One input
# may take 10 s (-timeout): a linear scan of 256 KB takes about 0.3 s under the sanitizers
# here, a quadratic one over a minute. A crash, leak, sanitizer report or timeout fails
# the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
./scripts/deps.sh
cmake -S fuzz -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j "$(nproc)"
max_len=$((1 << 20))
seeds=build/fuzz/adversarial
rm -rf "$seeds"; mkdir -p "$seeds"
# seed NAME HEAD RUN: HEAD, then RUN repeated, to 256 KB (head ends the pipe early, hence
# the '|| true' under pipefail).
seed() { { printf '%s' "$2"; yes "$3" | tr -d '\n'; } | head -c $((256 << 10)) >"$seeds/$1" || true; }
seed letters-after-a1 a1 b
seed letters-after-colon a: b
seed letters-after-at @ b
seed digit-tokens '' '1 '
seed birth-digit-tokens 'born ' '1 '
# fuzz_target BIN: both halves of one target; prints its lines, returns non-zero on a finding.
fuzz_target() {
  local bin="$1" name="${1##*/fuzz_}" half corpus=() inputs limits work
  [ -d "fuzz/corpus/$name" ] && corpus=("fuzz/corpus/$name")
  work="build/fuzz/work-$name"; mkdir -p "$work"
  echo "fuzz: $name for ${seconds}s"
  for half in small large; do
    if [ "$half" = small ]; then limits=(-max_len=4096); inputs=("${corpus[@]}"); else limits=(-max_len="$max_len"); inputs=("$seeds"); fi
    if ! "$bin" -max_total_time="$(( (seconds + 1) / 2 ))" "${limits[@]}" -timeout=10 -rss_limit_mb=2048 \
         -print_final_stats=1 "$work" "${inputs[@]}" >"build/fuzz/$name-$half.log" 2>&1; then
      tail -60 "build/fuzz/$name-$half.log"; echo "fuzz: $name failed (log: build/fuzz/$name-$half.log)"; return 1
    fi
    echo "  $half inputs: $(grep -E '^stat::number_of_executed_units' "build/fuzz/$name-$half.log" | awk '{print $2}') runs"
  done
}
# One target per core at a time (libFuzzer runs one process on one core): each still gets
# SECONDS of its own core, and the whole run takes 1/nproc of the time one after another.
# Each target's lines are printed in order once all have run.
shopt -s nullglob
bins=(build/fuzz/fuzz_*)
parallel="$(nproc)"
for bin in "${bins[@]}"; do
  name="${bin##*/fuzz_}"
  rm -f "build/fuzz/$name.failed"
  { fuzz_target "$bin" || touch "build/fuzz/$name.failed"; } >"build/fuzz/$name.summary" 2>&1 &
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
done
wait
failed=0
for bin in "${bins[@]}"; do
  name="${bin##*/fuzz_}"
  cat "build/fuzz/$name.summary"
  [ -e "build/fuzz/$name.failed" ] && failed=1
done
exit "$failed"
