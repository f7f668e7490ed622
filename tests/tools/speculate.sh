#!/usr/bin/env bash
# hedge-speculate against a loopback hedge-server slowed to 10 ms a forward pass (speed is
# scripts/speculative-sweep.sh's to measure, not this test's): the
# speculative answer equals the cloud-only one token for token (Q8_0 and Q4_0 drafts of the
# served F32 checkpoint), the JSON line has its fields, and bad arguments are usage errors.
# usage: speculate.sh SERVER SPECULATE MODELS WORKDIR   (exit 77: skipped)
set -u
server=$1 speculate=$2 models=$3 work=$4
model=$models/stories260K.gguf
[ -f "$model" ] || { echo "SKIP: $model is absent"; exit 77; }
command -v jq > /dev/null || { echo "SKIP: jq is absent"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/lib.sh"
trap 'kill "${pids[@]}" 2> /dev/null; wait 2> /dev/null' EXIT
start_server cloud --token-delay-ms 10 --round-trip-ms 2
for q in q8_0 q4_0; do
  timeout 120 "$speculate" -m "$model" --url "$url" --quantize $q -n 48 --runs 1 > "$work/$q.json" 2> "$work/$q.err"
  check "$q draft: exit 0 (equal outputs)" [ $? -eq 0 ]
  check "$q draft: same_output" [ "$(jq -r .same_output "$work/$q.json")" = true ]
  check "$q draft: rounds and acceptance reported" [ "$(jq -r '.rounds > 0 and .acceptance > 0' "$work/$q.json")" = true ]
  echo "  $(cat "$work/$q.json")"
done
"$speculate" -m "$model" > /dev/null 2>&1; check "no --url: a usage error (2)" [ $? -eq 2 ]
"$speculate" -m "$model" --url "$url" --quantize q3 > /dev/null 2>&1; check "a bad --quantize: a usage error (2)" [ $? -eq 2 ]
"$speculate" -m "$model" --url http://127.0.0.1:1 -n 8 > /dev/null 2> "$work/refused.err"
check "a refused connection: exit 1" [ $? -eq 1 ]
check "a refused connection: the message says which call" grep -q "cloud-only call" "$work/refused.err"
[ $failures -eq 0 ] && echo "all speculate checks passed" || { echo "$failures speculate checks failed"; exit 1; }
