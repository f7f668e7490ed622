#!/usr/bin/env bash
# hedge-server over HTTP against hedge-generate in process: time to first token and decode
# tok/s for the same model, prompt, token count and threads, greedy with EOS ignored (so
# both generate exactly --tokens tokens).
#
# In process: hedge-generate's own figures (stderr): time to first token = the prefill's
# time (prompt tokens / prefill tok/s), decode tok/s as it prints it.
# Over HTTP: a streamed /v1/completions request from a Node client (node:http) on loopback,
# the server started once and warmed by one request: time to first token = from sending
# the request to receiving the first text chunk; decode tok/s = (tokens - 1) / (time from
# the first to the last text chunk; n/a when a fast model's stream arrives in one read);
# time to the last token: in process, the prefill's time plus (tokens - 1) / decode tok/s;
# over HTTP, from sending the request to the last text chunk. Runs alternate, hedge-generate then HTTP, ROUNDS
# times; the table reports medians and HTTP / in process.
#
# Usage: scripts/compare-server.sh [--build-dir DIR] [--model GGUF] [--prompt TEXT]
#                                  [--tokens N] [--threads N] [--rounds N]
#   --build-dir  a configured build with hedge-server and hedge-generate (default build/release)
#   --model      default ../shared/models/stories260K.gguf; the TinyLlama-shaped synthetic
#                model is build/models/tinyllama-1.1b-q4_0.gguf (scripts/compare-llamacpp.sh writes it)
# The table (markdown) goes to stdout; raw figures to build/compare-server/<date>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

build_dir=build/release
model=$root/../shared/models/stories260K.gguf
prompt="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
tokens=128
threads=1
rounds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-server.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in node curl jq; do
  command -v $tool > /dev/null || { echo "compare-server.sh: $tool is needed" >&2; exit 2; }
done
server=$build_dir/tools/hedge-server
generate=$build_dir/tools/hedge-generate
[ -x "$server" ] && [ -x "$generate" ] || { echo "compare-server.sh: build hedge-server and hedge-generate in $build_dir" >&2; exit 2; }
out=build/compare-server/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"

"$server" -m "$model" --port 0 --threads "$threads" > "$out/server.out" 2> "$out/server.err" &
pid=$!
trap 'kill $pid 2> /dev/null; wait $pid 2> /dev/null' EXIT
url=
for _ in $(seq 600); do
  url=$(sed -n 's/^listening on //p' "$out/server.out" 2> /dev/null || true)
  [ -n "$url" ] && break
  kill -0 $pid 2> /dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { echo "compare-server.sh: the server did not start" >&2; cat "$out/server.err" >&2; exit 1; }

body=$(jq -cn --arg p "$prompt" --argjson n "$tokens" \
  '{prompt: $p, max_tokens: $n, temperature: 0, ignore_eos: true, stream: true, stream_options: {include_usage: true}}')
# The HTTP client: scripts/stream-timer.mjs.
http() { node "$root/scripts/stream-timer.mjs" "$url" "$body"; }

read -r _ _ _ n prompt_tokens < <(http)  # warm-up; gives the prompt's token count
[ "$n" = "$tokens" ] || { echo "compare-server.sh: the server generated $n tokens, not $tokens" >&2; exit 1; }
steps=$((prompt_tokens + tokens - 1))
in_process() {
  "$generate" -m "$model" -i "$prompt" -t 0 -n "$steps" --ignore-eos --threads "$threads" 2>&1 > /dev/null |
    awk -v n="$tokens" '/^prefill:/ {p = $2; r = $4} /^decode:/ {d = $4}
      END {printf "%.3f %s %.3f\n", p / r * 1000, d, p / r * 1000 + (n - 1) / d * 1000}'
}

for r in $(seq "$rounds"); do
  in_process >> "$out/in_process.txt"
  http >> "$out/http.txt"
done
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ttft_in=$(cut -d' ' -f1 "$out/in_process.txt" | median); tps_in=$(cut -d' ' -f2 "$out/in_process.txt" | median)
ttft_http=$(cut -d' ' -f1 "$out/http.txt" | median); tps_http=$(cut -d' ' -f2 "$out/http.txt" | grep -v nan | median)
last_in=$(cut -d' ' -f3 "$out/in_process.txt" | median); last_http=$(cut -d' ' -f3 "$out/http.txt" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "scripts/compare-server.sh --model $(basename "$model") --tokens $tokens --threads $threads --rounds $rounds ($(date -u +%Y-%m-%d), $(nproc) cores)"
echo "prompt: $prompt_tokens tokens; generated: $tokens tokens; medians of $rounds interleaved rounds"
echo
echo "| measure | in process (hedge-generate) | HTTP (hedge-server, streamed) | HTTP / in process |"
echo "|---|---|---|---|"
echo "| time to first token, ms | $ttft_in | $ttft_http | $(ratio "$ttft_http" "$ttft_in") |"
echo "| decode, tok/s | $tps_in | ${tps_http:-n/a} | $([ -n "$tps_http" ] && ratio "$tps_http" "$tps_in" || echo n/a) |"
echo "| time to the last token, ms | $last_in | $last_http | $(ratio "$last_http" "$last_in") |"
