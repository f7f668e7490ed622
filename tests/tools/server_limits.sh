#!/usr/bin/env bash
# hedge-server under attack, on loopback (issue 29's reproductions, scaled to run in seconds):
#   1. a 20 MiB chunked prompt: 413, server memory peak < 100 MB above its start
#   2. a 7.9 MB prompt (under the body limit) too long for the context: 400
#      context_length_exceeded, peak < 100 MB
#   3. 200,000 header lines: 431; 4. a 1 MB `model` name: 400 (param model); peaks < 100 MB
#   5. 30 connections sending header bytes at 1 byte/s: /health under 100 ms meanwhile
#   6. 500 idle connections: /health under 100 ms meanwhile
#   7. a burst of 1,000 requests: every one answered, 200 or 429
#   8. two pipelined GET /health on one connection: two answers, in order
#   9. conflicting, negative and 2^64 Content-Length: 400 / 400 / 413 within a second
#  10. --queue 0: one request runs (200), a second at the same time gets 429
#  11. SIGTERM while streaming: the running stream ends with an error event and [DONE], waiting
#      streamed and plain requests get 503, the process exits 0 within 2 s
#  12. gateway mode: 60 slow-header and 1,000 idle connections while a chat request and
#      /health are answered within 100 ms
# usage: server_limits.sh SERVER MODELS WORKDIR   (exit 77: skipped)
set -u
server=$1 models=$2 work=$3
for tool in curl jq timeout; do
  command -v $tool > /dev/null || { echo "SKIP: $tool is absent"; exit 77; }
done
model=$models/stories260K.gguf
[ -f "$model" ] || { echo "SKIP: $model is absent"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/lib.sh"
trap 'for p in "${pids[@]}"; do kill -9 $p 2> /dev/null; done; wait 2> /dev/null' EXIT

kb() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" /proc/$pid/status; }
# peak_below NAME: the server's peak resident memory rose less than 100 MB since $base_kb.
peak_below() {
  local peak; peak=$(kb VmHWM)
  echo "$1: peak $((peak / 1024)) MB, $(((peak - base_kb) / 1024)) MB above the start"
  check "$1: peak < 100 MB above the start" [ $((peak - base_kb)) -lt 102400 ]
}
# raw BYTES-FILE: sends the file on a new connection and prints what comes back (at most 3 s).
raw() {
  timeout 3 bash -c 'exec 3<> /dev/tcp/'"$host/$port"'; cat "$1" >&3 2> /dev/null; timeout 2 cat <&3' _ "$1"
}
status_of() { head -1 | sed -n 's/^HTTP\/1\.1 \([0-9]*\) .*/\1/p'; }

# fresh: a new server for the next memory check (its peak is its own).
fresh() {
  [ -n "${pid:-}" ] && { kill -9 $pid 2> /dev/null; wait $pid 2> /dev/null; }
  start_server main --queue 4
  base_kb=$(kb VmRSS)
  echo "server at $url, resident $((base_kb / 1024)) MB"
}
pid=
fresh

# 1. A chunked body past the 8 MiB limit.
head -c $((20 << 20)) /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt":"/; s/$/"}/' > "$work/big-prompt.json"
status=$(curl -s -m 20 -o "$work/chunked.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -H 'Transfer-Encoding: chunked' --data-binary @"$work/big-prompt.json" "$url/v1/completions")
check "1. a 20 MiB chunked body: 413 payload_too_large" [ "$status/$(jq -r .error.code "$work/chunked.json" 2> /dev/null)" = 413/payload_too_large ]
peak_below "1. chunked 20 MiB"

# 2. A prompt under the body limit, far too long for the context.
fresh
head -c 7900000 /dev/zero | tr '\0' 'a' | sed 's/^/{"prompt":"/; s/$/"}/' > "$work/long-prompt.json"
status=$(curl -s -m 20 -o "$work/long.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$work/long-prompt.json" "$url/v1/completions")
check "2. a 7.9 MB prompt: 400 context_length_exceeded" [ "$status/$(jq -r .error.code "$work/long.json" 2> /dev/null)" = 400/context_length_exceeded ]
peak_below "2. a 7.9 MB prompt"
fresh
head -c 7900000 /dev/zero | tr '\0' 'a' | sed 's/^/{"messages":[{"role":"user","content":"/; s/$/"}]}/' > "$work/long-chat.json"
status=$(curl -s -m 20 -o "$work/long-chat.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$work/long-chat.json" "$url/v1/chat/completions")
check "2. a 7.9 MB chat message: 400 context_length_exceeded" [ "$status/$(jq -r .error.code "$work/long-chat.out" 2> /dev/null)" = 400/context_length_exceeded ]
peak_below "2. a 7.9 MB chat message"
rm -f "$work"/*prompt.json "$work/long-chat.json"

# 3. Endless header lines.
fresh
{ printf 'GET /health HTTP/1.1\r\nHost: x\r\n'; yes $'X-Filler: 0123456789\r' | head -n 200000; printf '\r\n'; } > "$work/headers.bin"
check "3. 200,000 header lines: 431" [ "$(raw "$work/headers.bin" | status_of)" = 431 ]
peak_below "3. header lines"

# 4. A long model name would be echoed in every chunk.
fresh
{ printf '{"model":"'; head -c 1000000 /dev/zero | tr '\0' 'm'; printf '","prompt":"Once","max_tokens":500,"stream":true}'; } > "$work/model.json"
status=$(curl -s -m 20 -o "$work/model.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$work/model.json" "$url/v1/completions")
check "4. a 1 MB model name: 400, param model" [ "$status/$(jq -r .error.param "$work/model.out" 2> /dev/null)" = 400/model ]
bytes=$(curl -s -m 20 -H 'Content-Type: application/json' --data-binary '{"model":"short","prompt":"Once","max_tokens":5,"stream":true}' "$url/v1/completions" | wc -c)
check "4. a short model name is still served (stream of $bytes bytes)" [ "$bytes" -gt 100 ]
peak_below "4. model name"

# 5. Slow header senders: /health stays fast while they drip.
drip() { exec 3<> "/dev/tcp/$host/$port" || return; for c in G E T ' ' / h e a l t h; do printf '%s' "$c" >&3 2> /dev/null || return; sleep 1; done; }
drippers=()
for _ in $(seq 30); do drip & drippers+=($!); done
sleep 1.5
times=$(for _ in $(seq 5); do health_ms; sleep 0.3; done | sort -n | tr '\n' ' ')
median=$(echo $times | cut -d' ' -f3)
check "5. 30 slow-header connections: /health within 100 ms (median of 5; ms: $times)" [ "$median" -lt 100 ]
kill "${drippers[@]}" 2> /dev/null; wait "${drippers[@]}" 2> /dev/null

# 6. Idle connections.
idle=()
for _ in $(seq 500); do exec {fd}<> "/dev/tcp/$host/$port" && idle+=($fd); done
times=$(for _ in $(seq 5); do health_ms; done | sort -n | tr '\n' ' ')
median=$(echo $times | cut -d' ' -f3)
check "6. ${#idle[@]} idle connections: /health within 100 ms (median of 5; ms: $times)" [ "${#idle[@]}" -eq 500 -a "$median" -lt 100 ]
for fd in "${idle[@]}"; do exec {fd}>&-; done

# 7. A burst of 1,000 requests at once (curl's parallel transfers: 1,000 connections).
for i in $(seq 1000); do printf 'url = "%s/v1/completions"\noutput = "/dev/null"\n' "$url"; done > "$work/burst.cfg"
t0=$(date +%s%N)
curl -s -Z --parallel-max 1000 --parallel-immediate -m 60 -H 'Content-Type: application/json' \
  --data-binary '{"prompt":"Once","max_tokens":2}' -K "$work/burst.cfg" -w '%{http_code}\n' > "$work/burst.codes" 2> /dev/null
t1=$(date +%s%N)
answered=$(grep -cE '^(200|429)$' "$work/burst.codes")
echo "7. burst: $(grep -c '^200$' "$work/burst.codes") answered 200, $(grep -c '^429$' "$work/burst.codes") refused 429, in $(((t1 - t0) / 1000000)) ms"
check "7. a burst of 1,000: every request answered 200 or 429" [ "$answered" -eq 1000 ]

# 8. Pipelining.
printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' > "$work/pipelined.bin"
raw "$work/pipelined.bin" > "$work/pipelined.out"
check "8. two pipelined requests: two answers, in order" \
  [ "$(grep -o 'HTTP/1.1 200' "$work/pipelined.out" | wc -l)/$(grep -o '"status":"ok"\|"object":"list"' "$work/pipelined.out" | tr '\n' ' ')" = '2/"status":"ok" "object":"list" ' ]

# 9. Content-Length framing.
cl() { # cl WANT HEADER...: the request with these headers is answered WANT within a second
  local want=$1; shift
  { printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\n'; printf '%s\r\n' "$@"; printf '\r\n'; } > "$work/cl.bin"
  local t0 t1 got; t0=$(date +%s%N); got=$(raw "$work/cl.bin" | status_of); t1=$(date +%s%N)
  check "9. $*: $want at once ($(((t1 - t0) / 1000000)) ms)" [ "$got" = "$want" -a $(((t1 - t0) / 1000000)) -lt 1000 ]
}
cl 400 'Content-Length: 63' 'Content-Length: 3'
cl 400 'Content-Length: -5'
cl 413 'Content-Length: 18446744073709551616'
cl 413 'Content-Length: 100000000'
kill -TERM $pid; wait $pid 2> /dev/null

# 12. Gateway mode (--cloud): 60 slow-header connections and 1,000 idle ones at once, while a
# chat request through the engine and /health are each answered within 100 ms (median of 5).
ulimit -n 4096 2> /dev/null
start_server cloud --queue 4
start_server gateway --queue 4 --cloud "$url"
drippers=()
for _ in $(seq 60); do drip & drippers+=($!); done
idle=()
for _ in $(seq 1000); do exec {fd}<> "/dev/tcp/$host/$port" && idle+=($fd); done
sleep 1
chat_ms() {
  curl -s -m 2 -o /dev/null -w '%{http_code} %{time_total}\n' -H 'Content-Type: application/json' --data-binary \
    '{"messages":[{"role":"user","content":"Once"}],"max_tokens":4,"hedge":{"mode":"edge"}}' "$url/v1/chat/completions" |
    awk '{ if ($1 == 200) printf "%d\n", $2 * 1000; else print 9999 }'
}
times=$(for _ in $(seq 5); do chat_ms; sleep 0.2; done | sort -n | tr '\n' ' ')
check "12. gateway, 60 slow + ${#idle[@]} idle connections: a chat request within 100 ms (median of 5; ms: $times)" \
  [ "${#idle[@]}" -eq 1000 -a "$(echo $times | cut -d' ' -f3)" -lt 100 ]
times=$(for _ in $(seq 5); do health_ms; sleep 0.2; done | sort -n | tr '\n' ' ')
check "12. gateway, the same: /health within 100 ms (median of 5; ms: $times)" [ "$(echo $times | cut -d' ' -f3)" -lt 100 ]
kill "${drippers[@]}" 2> /dev/null; wait "${drippers[@]}" 2> /dev/null
for fd in "${idle[@]}"; do exec {fd}>&-; done
kill -TERM $pid "${pids[-2]}"; wait $pid "${pids[-2]}" 2> /dev/null

# 10. --queue 0: one runs, none waits.
start_server queue0 --queue 0 --ctx-size 30000
check "10. --queue 0 serves a request" [ "$(curl -s -m 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary '{"prompt":"Once","max_tokens":3}' "$url/v1/completions")" = 200 ]
curl -sN -m 10 -H 'Content-Type: application/json' "$url/v1/completions" -o "$work/queue0.sse" \
  --data-binary '{"prompt":"Once","max_tokens":30000,"ignore_eos":true,"stream":true}' &
for _ in $(seq 50); do [ -s "$work/queue0.sse" ] && break; sleep 0.1; done
check "10. --queue 0: a second request while one runs gets 429" [ "$(curl -s -m 10 -o /dev/null -w '%{http_code}' \
  -H 'Content-Type: application/json' --data-binary '{"prompt":"Once","max_tokens":3}' "$url/v1/completions")" = 429 ]
kill -TERM $pid; wait $pid 2> /dev/null

# 11. SIGTERM while one stream runs and others wait.
start_server stop --ctx-size 30000 --queue 4
long='"max_tokens":30000,"ignore_eos":true'
curl -sN -m 30 -H 'Content-Type: application/json' --data-binary "{\"prompt\":\"Once\",\"stream\":true,$long}" \
  "$url/v1/completions" > "$work/running.sse" &
sleep 0.5
for i in 1 2; do
  curl -sN -m 30 -o "$work/waiting-stream$i.out" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\":\"Once\",\"stream\":true,$long}" "$url/v1/completions" > "$work/waiting-stream$i.status" &
  curl -s -m 30 -o "$work/waiting-plain$i.out" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\":\"Once\",$long}" "$url/v1/completions" > "$work/waiting-plain$i.status" &
done
for _ in $(seq 50); do [ -s "$work/running.sse" ] && break; sleep 0.1; done
sleep 0.5
t0=$(date +%s%N)
kill -TERM $pid
wait $pid; code=$?
t1=$(date +%s%N)
wait
echo "11. exit $code, $(((t1 - t0) / 1000000)) ms after SIGTERM"
check "11. SIGTERM: exit 0 within 2 s" [ $code -eq 0 -a $(((t1 - t0) / 1000000)) -lt 2000 ]
check "11. the running stream ends with an error event, then [DONE]" \
  [ "$(grep -v '^$' "$work/running.sse" | tail -2 | head -1 | sed 's/^data: //' | jq -r .error.code 2> /dev/null)/$(grep -v '^$' "$work/running.sse" | tail -1)" = "null/data: [DONE]" -a \
    "$(grep -v '^$' "$work/running.sse" | tail -2 | head -1 | sed 's/^data: //' | jq -r .error.message 2> /dev/null)" = "the server is shutting down" ]
check "11. waiting requests, streamed or not: 503" \
  [ "$(cat "$work"/waiting-*.status)" = 503503503503 ]
check "11. a waiting request's 503 has the error body" [ "$(jq -r .error.type "$work/waiting-plain1.out" 2> /dev/null)" = server_error ]

[ $failures -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
