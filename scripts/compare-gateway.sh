#!/usr/bin/env bash
# The gateway's own cost: the same streamed /v1/completions request sent straight to a cloud
# (hedge-server on loopback) and through hedge-server's gateway mode in front of it (hedge
# object: mode cloud, so the cloud answers), time to first token and decode tok/s as the
# client sees them (scripts/stream-timer.mjs), greedy with EOS ignored. Runs alternate, direct
# then gateway, ROUNDS times; the table reports medians and gateway / direct.
#
# Usage: scripts/compare-gateway.sh [--build-dir DIR] [--model GGUF] [--edge GGUF] [--tokens N]
#                                   [--threads N] [--rounds N] [--token-delay MS]
#   --model  the cloud's model (default ../shared/models/stories260K.gguf; the TinyLlama-shaped
#            synthetic model scripts/compare-llamacpp.sh writes is build/models/tinyllama-1.1b-q4_0.gguf)
#   --edge   the gateway's edge model (default: the same file)
#   --token-delay  the cloud waits MS before each token (hedge-server --token-delay-ms): a
#            slower cloud, e.g. 20 for a 50 tok/s 1B-class one, without its weights (default 0)
# The table (markdown) goes to stdout; raw figures to build/compare-gateway/<date>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build_dir=build/release
model=$root/../shared/models/stories260K.gguf
edge=
prompt="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
tokens=128
threads=1
rounds=5
token_delay=0
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --edge) edge=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --token-delay) token_delay=$2; shift 2 ;;
    *) echo "compare-gateway.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
edge=${edge:-$model}
for tool in node jq; do
  command -v $tool > /dev/null || { echo "compare-gateway.sh: $tool is needed" >&2; exit 1; }
done
server=$build_dir/tools/hedge-server
out=build/compare-gateway/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
pids=()
trap 'kill "${pids[@]}" 2> /dev/null; wait 2> /dev/null' EXIT
start_server() {  # NAME ARGS...: the URL in $url
  local name=$1; shift
  "$server" "$@" --port 0 > "$out/$name.out" 2> "$out/$name.err" &
  pids+=($!)
  url=
  for _ in $(seq 600); do
    url=$(sed -n 's/^listening on //p' "$out/$name.out" 2> /dev/null)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "compare-gateway.sh: $name did not start" >&2; cat "$out/$name.err" >&2; exit 1
}
start_server cloud -m "$model" --threads "$threads" --token-delay-ms "$token_delay"
cloud=$url
start_server gateway -m "$edge" --threads "$threads" --cloud "$cloud"
gateway=$url
direct_body=$(jq -cn --arg p "$prompt" --argjson n "$tokens" \
  '{prompt: $p, max_tokens: $n, temperature: 0, ignore_eos: true, stream: true, stream_options: {include_usage: true}}')
gateway_body=$(jq -c '. + {hedge: {mode: "cloud", fallback: false}}' <<< "$direct_body")
timer() { node "$root/scripts/stream-timer.mjs" "$1" "$2"; }
timer "$cloud" "$direct_body" > /dev/null
timer "$gateway" "$gateway_body" > /dev/null
for _ in $(seq "$rounds"); do
  timer "$cloud" "$direct_body" >> "$out/direct.txt"
  timer "$gateway" "$gateway_body" >> "$out/gateway.txt"
done
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
for f in direct gateway; do
  eval "ttft_$f=\$(cut -d' ' -f1 \"$out/$f.txt\" | median)"
  eval "tps_$f=\$(cut -d' ' -f2 \"$out/$f.txt\" | grep -v nan | median)"
  eval "last_$f=\$(cut -d' ' -f3 \"$out/$f.txt\" | median)"
done
echo "cloud: $model (token delay $token_delay ms); gateway edge: $edge; $tokens tokens, $threads thread(s), $rounds rounds, medians ($(date +%F))"
echo
echo "| measure | direct | through the gateway | gateway / direct |"
echo "|---|---|---|---|"
echo "| time to first token, ms | $ttft_direct | $ttft_gateway | $(ratio "$ttft_gateway" "$ttft_direct") |"
echo "| decode, tok/s | ${tps_direct:-n/a} | ${tps_gateway:-n/a} | $([ -n "${tps_direct:-}" ] && [ -n "${tps_gateway:-}" ] && ratio "$tps_gateway" "$tps_direct" || echo n/a) |"
echo "| time to the last token, ms | $last_direct | $last_gateway | $(ratio "$last_gateway" "$last_direct") |"
