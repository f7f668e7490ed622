#!/usr/bin/env bash
# hedge-server end to end over loopback, with curl and jq: usage errors; then, with
# ../shared/models/stories260K.gguf, a server on --port 0 and
#   - /health, /v1/models
#   - a greedy chat completion, streamed and not, whose text is hedge-generate's for the
#     same prompt and steps, and whose stream ends with usage and [DONE]
#   - completions with echo + logprobs (prompt scoring, max_tokens 0 and more)
#   - every bad request with its status and OpenAI error body
#   - 50 concurrent requests against a queue of 4: each answered 200 or 429, none lost
#   - clients that leave mid-stream, and the server still serving
#   - --parallel 4: concurrent greedy requests batched, each with its text alone
#   - /metrics counters that moved; SIGTERM stops it with status 0.
# Every request has a time limit, and the server is killed on any exit.
# usage: server.sh SERVER GENERATE MODELS WORKDIR   (exit 77: skipped)
set -u
server=$1 generate=$2 models=$3 work=$4
for tool in curl jq; do
  command -v $tool > /dev/null || { echo "SKIP: $tool is absent"; exit 77; }
done
rm -rf "$work" && mkdir -p "$work"
model=$models/stories260K.gguf
source "$(dirname "$0")/lib.sh"

# Usage errors.
"$server" --help > "$work/help.txt"; check "--help exits 0" [ $? -eq 0 ]
check "--help prints the usage" grep -q "usage: hedge-server -m MODEL" "$work/help.txt"
"$server" --port 1 2> "$work/usage.txt"; check "no -m is a usage error (2)" [ $? -eq 2 ]
"$server" -m x --port 70000 2> "$work/usage.txt"; check "a bad port is a usage error (2)" [ $? -eq 2 ]
"$server" -m "$work/absent.gguf" --port 0 2> "$work/absent.txt"; check "a missing model exits 1" [ $? -eq 1 ]

if [ ! -f "$model" ]; then
  echo "$model is absent: the server tests with a model were skipped"
  [ $failures -eq 0 ] && exit 77 || exit 1
fi

trap 'kill "${pids[@]}" 2> /dev/null; wait "${pids[@]}" 2> /dev/null' EXIT
start_server server --queue 4
echo "server at $url"

# request NAME METHOD PATH [BODY]: the body in $work/NAME.json, the status in $status.
request() {
  local args=(-s -m 20 -X "$2" -o "$work/$1.json" -w '%{http_code}')
  [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
  status=$(curl "${args[@]}" "$url$3")
}
json() { jq -r "$2" "$work/$1.json" 2> /dev/null; }

request health GET /health
check "/health 200" [ "$status" = 200 ]
request models GET /v1/models
check "/v1/models lists the model" [ "$(json models '.data[0].id')" = stories260K.gguf ]

# Greedy chat completion, not streamed: the text is hedge-generate's continuation.
prompt="Once upon a time"
request chat POST /v1/chat/completions \
  "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"temperature\":0,\"max_tokens\":60}"
check "chat 200" [ "$status" = 200 ]
json chat '.choices[0].message.content' > "$work/chat.txt"
prompt_tokens=$(json chat '.usage.prompt_tokens')
check "chat echoes the model name" [ "$(json chat '.model')" = m ]
check "chat stops at max_tokens" [ "$(json chat '.choices[0].finish_reason')/$(json chat '.usage.completion_tokens')" = length/60 ]
steps=$((prompt_tokens + 60 - 1))
"$generate" -m "$model" -i "$prompt" -t 0 -n $steps > "$work/generate.txt" 2> /dev/null
printf '%s%s\n' "$prompt" "$(cat "$work/chat.txt")" > "$work/chat-as-generate.txt"
check "chat text equals hedge-generate -t 0 -n $steps" cmp -s "$work/generate.txt" "$work/chat-as-generate.txt"

# Streamed, with usage: the deltas add up to the same text.
curl -sN -m 20 -H 'Content-Type: application/json' "$url/v1/chat/completions" -o "$work/stream.sse" --data-binary \
  "{\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"temperature\":0,\"max_tokens\":60,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
grep '^data: {' "$work/stream.sse" | sed 's/^data: //' > "$work/stream.jsonl"
jq -j '.choices[0].delta.content // empty' "$work/stream.jsonl" > "$work/stream.txt"; echo >> "$work/stream.txt"
check "streamed chat text equals the non-streamed one" cmp -s "$work/stream.txt" "$work/chat.txt"
check "stream starts with the assistant role" [ "$(head -1 "$work/stream.jsonl" | jq -r '.choices[0].delta.role')" = assistant ]
check "stream ends with data: [DONE]" [ "$(grep -v '^$' "$work/stream.sse" | tail -1)" = "data: [DONE]" ]
check "stream's last chunk has the usage" [ "$(tail -1 "$work/stream.jsonl" | jq -r '.usage.completion_tokens')" = 60 ]

# Chat log-probs from the sampler: greedy picks the top alternative.
request chatlp POST /v1/chat/completions \
  "{\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"temperature\":0,\"max_tokens\":4,\"logprobs\":true,\"top_logprobs\":3}"
check "chat logprobs: 4 tokens with 3 alternatives each" \
  [ "$(json chatlp '[.choices[0].logprobs.content[] | .top_logprobs | length] | join(",")')" = 3,3,3,3 ]
check "chat logprobs: the greedy token is the first alternative" \
  [ "$(json chatlp '[.choices[0].logprobs.content[] | .token == .top_logprobs[0].token] | all')" = true ]

# Continuation scoring: echo + logprobs returns the prompt tokens' log-probs, the first null.
request score POST /v1/completions "{\"prompt\":\"$prompt\",\"echo\":true,\"logprobs\":2,\"max_tokens\":0}"
check "scoring 200" [ "$status" = 200 ]
check "scoring echoes the prompt" [ "$(json score '.choices[0].text')" = "$prompt" ]
check "scoring: one log-prob per prompt token, the first null, the others < 0" \
  [ "$(json score '.choices[0].logprobs as $l | ($l.token_logprobs | length) == .usage.prompt_tokens and $l.token_logprobs[0] == null and ([$l.token_logprobs[1:][] | . < 0] | all)')" = true ]
check "scoring: the tokens spell the prompt" [ "$(json score '.choices[0].logprobs.tokens | join("")')" = "$prompt" ]
request score2 POST /v1/completions "{\"prompt\":\"$prompt\",\"echo\":true,\"logprobs\":1,\"max_tokens\":5,\"temperature\":0}"
check "echo + generation: prompt then 5 tokens, offsets into the text" \
  [ "$(json score2 '.choices[0] | (.text | startswith("Once upon a time")) and (.logprobs.tokens | length) == 10 and .logprobs.text_offset[-1] < (.text | length)')" = true ]
check "echo + generation: the prompt's log-probs are those of scoring" \
  [ "$(json score2 '.choices[0].logprobs.token_logprobs[1:5]')" = "$(json score '.choices[0].logprobs.token_logprobs[1:5]')" ]

# Bad requests: status, OpenAI error body, the server still up.
bad() { # bad NAME STATUS PARAM PATH BODY
  request "$1" POST "$4" "$5"
  check "$1: $2, param $3" [ "$status/$(json "$1" '.error.type != null and (.error.message | length) > 0')/$(json "$1" '.error.param')" = "$2/true/$3" ]
}
bad malformed 400 null /v1/chat/completions '{"messages": ['
bad not-object 400 null /v1/chat/completions '[1, 2]'
bad messages-type 400 messages /v1/chat/completions '{"messages": "hi"}'
bad temperature-type 400 temperature /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}'
bad stream-type 400 stream /v1/completions '{"prompt":"x","stream":1}'
bad max-tokens-0 400 max_tokens /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":0}'
bad max-tokens-negative 400 max_tokens /v1/completions '{"prompt":"x","max_tokens":-3}'
bad n-2 400 n /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"n":2}'
bad no-prompt 400 prompt /v1/completions '{"max_tokens":3}'
bad invalid-utf8 400 null /v1/completions $'{"prompt":"caf\xc3("}'
bad deep 400 null /v1/completions "$(printf '[%.0s' $(seq 100))"
check "deep: the nesting limit is named" grep -q "nested deeper than" "$work/deep.json"
bad token-ids 400 prompt /v1/completions '{"prompt":[1, 99999999]}'
long=$(printf 'hello %.0s' $(seq 3000))
bad too-long 400 prompt /v1/completions "{\"prompt\":\"$long\"}"
check "too-long: code context_length_exceeded" [ "$(json too-long '.error.code')" = context_length_exceeded ]
head -c 100000000 /dev/zero | tr '\0' ' ' > "$work/big.json"
status=$(curl -s -m 30 -o "$work/big.json.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$work/big.json" "$url/v1/completions")
rm -f "$work/big.json"
check "a 100 MB body: 413 with an error body" [ "$status/$(jq -r .error.code "$work/big.json.out")" = 413/payload_too_large ]
request unknown GET /v1/nothing
check "unknown path: 404 with an error body" [ "$status/$(json unknown '.error.code')" = 404/not_found ]
request method GET /v1/chat/completions
check "wrong method: 405 with an error body" [ "$status/$(json method '.error.code')" = 405/method_not_allowed ]
request health GET /health
check "still healthy after the bad requests" [ "$status" = 200 ]

# 50 clients at once against a queue of 4: every one answered 200 or 429.
for i in $(seq 50); do
  curl -s -m 60 -o "$work/c$i.json" -D "$work/c$i.headers" -w '%{http_code}\n' -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"seed\":$i}" "$url/v1/completions" \
    > "$work/c$i.status" &
done
wait $(jobs -p | grep -v "^$pid$") 2> /dev/null
ok=$(cat "$work"/c*.status | grep -c '^200$'); busy=$(cat "$work"/c*.status | grep -c '^429$')
echo "50 concurrent: $ok answered, $busy refused with 429"
check "50 concurrent: all 200 or 429, none lost" [ $((ok + busy)) -eq 50 ]
refused=$(grep -l '^429$' "$work"/c*.status | head -1)
if [ -n "$refused" ]; then
  check "429s carry the rate-limit error body" [ "$(jq -r .error.code "${refused%status}json")" = rate_limit_exceeded ]
  check "429s carry Retry-After" grep -qi '^Retry-After: 1' "${refused%status}headers"
fi
answered=$(grep -l '^200$' "$work"/c*.status | head -1)
check "200s carry text" [ -n "$answered" ] && [ "$(jq -r '.choices[0].text | length > 0' "${answered%status}json")" = true ]

# Clients that leave mid-stream: the stream is cut, the server serves the next one.
for i in 1 2 3; do
  curl -sN -m 20 -H 'Content-Type: application/json' "$url/v1/completions" --data-binary \
    '{"prompt":"Once upon a time","max_tokens":2000,"stream":true}' 2> /dev/null | head -c 300 > /dev/null
done
curl -sN -m 0.05 -H 'Content-Type: application/json' "$url/v1/completions" --data-binary \
  '{"prompt":"Once upon a time","max_tokens":2000,"stream":true}' > /dev/null 2>&1
request after-cut POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3}'
check "serving after clients left mid-stream" [ "$status/$(json after-cut '.usage.completion_tokens')" = 200/3 ]

# Metrics moved.
curl -s -m 10 "$url/metrics" > "$work/metrics.txt"
metric() { sed -n "s/^$1 //p" "$work/metrics.txt" | head -1; }
check "metrics: chat 200s counted" [ "$(metric 'hedge_requests_total{endpoint="\/v1\/chat\/completions",status="200"}')" -ge 4 ]
check "metrics: 400s counted" [ "$(metric 'hedge_requests_total{endpoint="\/v1\/completions",status="400"}')" -ge 4 ]
check "metrics: 413 counted" [ "$(metric 'hedge_requests_total{endpoint="\/v1\/completions",status="413"}')" = 1 ]
check "metrics: generated tokens" [ "$(metric hedge_generated_tokens_total)" -gt 100 ]
check "metrics: time to first token observed" [ "$(metric hedge_time_to_first_token_seconds_count)" -gt 10 ]
check "metrics: queue depth 0 at rest" [ "$(metric hedge_queue_depth)" = 0 ]
echo "cancelled generations: $(metric hedge_requests_cancelled_total)"

# Chat formats (--chat-template): with stories260K's vocabulary no marker is a token, so a
# rendered chat is its text sent as a completion prompt, token for token.
# Continuous batching (--parallel 4): four greedy requests at once, each with its own prompt,
# length and stop, streamed and not, give the texts they give alone on a one-slot server,
# and run together: with an emulated 40 ms pass, /metrics shows 4 running at once, and the
# four take about one request's time, not four.
main_url=$url main_pid=$pid
batch_body() { # batch_body N STREAM
  local prompts=("Once upon a time" "The cat" "Lily and Tom went to the park" "One day")
  local lengths=(40 25 33 18)
  jq -cn --arg p "${prompts[$1]}" --argjson n "${lengths[$1]}" --argjson s "$2" \
    '{messages: [{role: "user", content: $p}], temperature: 0, max_tokens: $n, stream: $s, stop: (if $n == 25 then ["."] else null end)}'
}
batch_text() { # batch_text FILE: the reply's text, streamed or not
  if grep -q '^data: ' "$1"; then grep '^data: {' "$1" | sed 's/^data: //' | jq -j '.choices[0].delta.content // empty'
  else jq -j '.choices[0].message.content' "$1"; fi
}
for n in 0 1 2 3; do
  stream=$([ $((n % 2)) -eq 1 ] && echo true || echo false)
  curl -sN -m 20 -H 'Content-Type: application/json' "$url/v1/chat/completions" -o "$work/alone$n.out" \
    --data-binary "$(batch_body $n $stream)"
  batch_text "$work/alone$n.out" > "$work/alone$n.txt"
done
start_server batched --parallel 4 --token-delay-ms 40
batch_start=$(date +%s%N)
batch_pids=()
for n in 0 1 2 3; do
  stream=$([ $((n % 2)) -eq 1 ] && echo true || echo false)
  curl -sN -m 30 -H 'Content-Type: application/json' "$url/v1/chat/completions" -o "$work/batched$n.out" \
    --data-binary "$(batch_body $n $stream)" & batch_pids+=($!)
done
most_running=0
for _ in $(seq 40); do
  running=$(curl -s -m 2 "$url/metrics" | sed -n 's/^hedge_requests_running //p')
  [ "${running:-0}" -gt $most_running ] && most_running=$running
  [ $most_running -ge 4 ] && break
  sleep 0.05
done
wait "${batch_pids[@]}"
batch_ms=$(( ($(date +%s%N) - batch_start) / 1000000 ))
for n in 0 1 2 3; do
  batch_text "$work/batched$n.out" > "$work/batched$n.txt"
  check "batched request $n: its text alone ($(wc -c < "$work/alone$n.txt") bytes)" \
    [ -s "$work/alone$n.txt" ] && cmp -s "$work/alone$n.txt" "$work/batched$n.txt"
done
check "batched: 4 requests running at once (most seen: $most_running)" [ "$most_running" -ge 4 ]
# Alone, the longest (40 tokens) takes 40 x 40 ms = 1.6 s and the four 4.6 s one after another.
check "batched: the four in $batch_ms ms, under 3.2 s (4.6 s one after another)" [ $batch_ms -lt 3200 ]
kill $pid; wait $pid 2> /dev/null
url=$main_url pid=$main_pid

chat_format() { # chat_format NAME TEXT
  local main_pid=$pid
  start_server "$1" --chat-template "$1"
  local pid2=$pid
  pid=$main_pid
  request "$1" POST /v1/chat/completions \
    '{"messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"Hi"}],"max_tokens":1}'
  request "$1-text" POST /v1/completions "$(jq -cn --arg p "$2" '{prompt: $p, max_tokens: 1}')"
  check "$1: the rendered chat is its text" \
    [ "$(json "$1" .usage.prompt_tokens)" = "$(json "$1-text" .usage.prompt_tokens)" -a "$(json "$1" .usage.prompt_tokens)" -gt 10 ]
  kill $pid2; wait $pid2 2> /dev/null
  url=$main_url
}
chat_format chatml $'<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'
chat_format llama2 $'[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi [/INST]'
"$server" -m "$model" --chat-template jinja 2> /dev/null; check "an unknown --chat-template is a usage error" [ $? -eq 2 ]

# SIGTERM: the server stops and exits 0.
kill -TERM $pid
for _ in $(seq 100); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
if kill -0 $pid 2> /dev/null; then fail "still running 10 s after SIGTERM"; else wait $pid; check "SIGTERM: exit 0" [ $? -eq 0 ]; fi
trap - EXIT
[ $failures -eq 0 ] || { echo "$failures check(s) failed; server log:"; cat "$work/server.err"; exit 1; }
echo "all checks passed"
