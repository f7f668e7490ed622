#!/usr/bin/env bash
# hedge-server as a gateway (--cloud) end to end over loopback, with curl and jq: a real
# hedge-server is the cloud, behind tests/tools/gateway_upstream.py, which injects a fault per
# request (500, 429, garbage, a stream cut after N events, a closed connection) and records
# every byte it receives. For each fault the client gets one complete, well-formed answer
# (one [DONE], a finish reason), and the hedge object says what happened; a card number and
# a private data class never reach the upstream. Every wait is bounded.
# usage: gateway.sh SERVER MODELS WORKDIR [OPENAI_PREFIX]   (exit 77: skipped)
set -u
server=$1 models=$2 work=$3
for tool in curl jq python3; do
  command -v $tool > /dev/null || { echo "SKIP: $tool is absent"; exit 77; }
done
model=$models/stories260K.gguf
[ -f "$model" ] || { echo "SKIP: $model is absent"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/lib.sh"
trap 'kill "${pids[@]}" 2> /dev/null; wait 2> /dev/null' EXIT

start_server cloud
cloud=$url
# scenario NAME FAULTS [CLOUDS [ARGS...]]: an upstream with that fault script in front of the
# cloud, and a gateway in front of it (CLOUDS times as its --cloud: fallbacks; default 1; ARGS:
# more of its flags); the gateway's URL in $gw, the upstream's record in $work/NAME.record.
scenario() {
  local name=$1 faults=$2 clouds=()
  python3 "$(dirname "$0")/gateway_upstream.py" "$work/$name.port" "$work/$name.record" "$cloud" "$faults" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/$name.port" ] && break; sleep 0.05; done
  for _ in $(seq "${3:-1}"); do clouds+=(--cloud "http://127.0.0.1:$(cat "$work/$name.port")"); done
  start_server "gateway-$name" "${clouds[@]}" --cloud-price 0.15,0.60 "${@:4}"
  gw=$url
}
# stream NAME BODY: the SSE body in $work/NAME.sse, the last chunk's JSON in $work/NAME.last.
stream() {
  curl -s -m 30 -N -H 'Content-Type: application/json' --data-binary "$2" "$gw/v1/chat/completions" > "$work/$1.sse"
  grep '^data: {' "$work/$1.sse" | tail -1 | sed 's/^data: //' > "$work/$1.last"
}
one_done() { [ "$(grep -c '^data: \[DONE\]' "$work/$1.sse")" -eq 1 ]; }
text_of() { grep '^data: {' "$work/$1.sse" | sed 's/^data: //' | jq -j '.choices[0].delta.content // empty'; }
last() { jq -r "$2" "$work/$1.last"; }
ask='{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":40,"temperature":0,"stream":true,"hedge":{"mode":"cloud"}}'

# The cloud answers; the answer is a cloud answer, with the gateway's headers.
scenario plain ""
curl -s -m 30 -D "$work/plain.head" -o "$work/plain.json" -H 'Content-Type: application/json' \
  --data-binary '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":20,"hedge":{"mode":"cloud"}}' \
  "$gw/v1/chat/completions"
check "x-hedge-tier: cloud0" grep -qi '^x-hedge-tier: cloud0' "$work/plain.head"
check "x-hedge-route names the mode" grep -qi '^x-hedge-route: cloud_first' "$work/plain.head"
check "the answer's hedge object: cloud0 wrote it" [ "$(jq -r '.hedge.spans[0].tier' "$work/plain.json")" = cloud0 ]
check "a non-empty answer" [ -n "$(jq -r '.choices[0].message.content' "$work/plain.json")" ]
check "/health lists the cloud's breaker" [ "$(curl -s -m 5 "$gw/health" | jq -r '.tiers[1].breaker')" = closed ]
check "/metrics has the engine's counters" grep -q 'hedge_engine_requests_total' <(curl -s -m 5 "$gw/metrics")

# A 500, then the cloud: one retry, one stream.
scenario retry "500"
stream retry "$ask"
check "500: one [DONE]" one_done retry
check "500: retried once" [ "$(last retry '.hedge.retries')" = 1 ]
check "500: a finish reason" [ "$(last retry '.choices[0].finish_reason')" != null ]

# A 429 with Retry-After: 1, then the cloud.
scenario limited "429"
start=$(date +%s%N)
stream limited "$ask"
check "429: answered by the cloud after its Retry-After" [ "$(last limited '.hedge.spans[0].tier')" = cloud0 ]
check "429: waited at least 1 s" [ $(( ($(date +%s%N) - start) / 1000000 )) -ge 1000 ]

# The cloud is down for every attempt: the edge answers, in the same stream.
scenario down "down,down,down"
stream down "$ask"
check "down: one [DONE]" one_done down
check "down: the edge answered" [ "$(last down '.hedge.spans[0].tier')" = edge ]
check "down: marked as a fallback" [ "$(last down '.hedge.fallback')" = true ]

# Garbage from the cloud, then it is down: a fault, not text; the edge answers.
scenario garbage "garbage,down,down"
stream garbage "$ask"
check "garbage: one [DONE]" one_done garbage
check "garbage: the edge answered" [ "$(last garbage '.hedge.spans[0].tier')" = edge ]

# The stream is cut after 6 events, then the cloud is down: the edge continues the same stream.
scenario cut "cut6,down,down"
stream cut "$ask"
check "cut: one [DONE]" one_done cut
check "cut: the cloud's text, then the edge's" [ "$(last cut '[.hedge.spans[].tier] | join(",")')" = "cloud0,edge" ]
full=$(text_of cut)
check "cut: the spans cover the text exactly" [ "$(last cut '.hedge.spans[-1].end')" = "$(printf %s "$full" | wc -c)" ]
check "cut: the stream ends with a finish reason" [ "$(last cut '.choices[0].finish_reason')" != null ]

# The official OpenAI client through the gateway, on a stream the cloud cuts (installed under
# PREFIX by scripts/openai-client-check.sh's rule; skipped without node, npm or the registry).
prefix=${4:-}
if [ -n "$prefix" ] && command -v node > /dev/null && command -v npm > /dev/null; then
  if [ ! -f "$prefix/node_modules/openai/package.json" ]; then
    mkdir -p "$prefix"
    timeout 180 npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error openai > "$prefix/npm.log" 2>&1 || true
  fi
  if [ -f "$prefix/node_modules/openai/package.json" ]; then
    scenario openai "cut6,down,down"
    check "the OpenAI client: one complete stream, the cloud's text then the edge's" \
      timeout 120 node "$(dirname "$0")/gateway_openai.mjs" "$gw/v1" "$prefix" "cloud0,edge"
    scenario openai_plain ""
    check "the OpenAI client: a cloud answer" timeout 120 node "$(dirname "$0")/gateway_openai.mjs" "$gw/v1" "$prefix" cloud0
    scenario openai_tools "tools"
    check "the OpenAI client: a streamed tool call, passed through" \
      timeout 120 node "$(dirname "$0")/gateway_openai.mjs" "$gw/v1" "$prefix" tools
  else
    echo "skipped: the OpenAI client (npm install openai failed)"
  fi
fi

# Privacy: a card number goes out as a placeholder; a private message never goes out.
scenario privacy ""
curl -s -m 30 -o "$work/card.json" -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"My card 4111 1111 1111 1111 was charged twice"}],"max_tokens":10,"hedge":{"mode":"cloud"}}' \
  "$gw/v1/chat/completions"
curl -s -m 30 -o "$work/private.json" -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"SECRET-DIAGNOSIS of the patient"}],"max_tokens":10,"hedge":{"mode":"cloud","data_class":"private"}}' \
  "$gw/v1/chat/completions"
check "card: answered, one redaction" [ "$(jq -r '.hedge.redactions' "$work/card.json")" = 1 ]
check "card: the upstream saw a placeholder" grep -q '<CARD_1>' "$work/privacy.record"
check "card: the number never reached the upstream" bash -c "! grep -q '4111 1111' '$work/privacy.record'"
check "private: answered on the edge" [ "$(jq -r '.hedge.mode' "$work/private.json")" = edge_only ]
check "private: the message never reached the upstream" bash -c "! grep -q 'SECRET-DIAGNOSIS' '$work/privacy.record'"
for f in "$work"/*.record; do
  check "no card number in $(basename "$f")" bash -c "! grep -q '4111 1111' '$f'"
done

# Passthrough: tools, response_format, an image part or a model the edge does not serve go to
# the cloud with every byte of the body as the client wrote it (PII in message text aside: a
# placeholder), and the cloud's chunks, tool-call deltas included, come back unchanged.
fields='"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto","temperature":0.70,"x_vendor":{"a":[1,2.50,"\u00e9"]}'
tools_ask='{"model":"stories260K","messages":[{"role":"user","content":"Weather where card 4111 1111 1111 1111 was used?"}],'"$fields"
scenario tools "tools,tools,toolcut2,echo,echo,echo,echo" 1 --cloud-model big
curl -s -m 30 -N -D "$work/tools.head" -H 'Content-Type: application/json' --data-binary "${tools_ask},\"stream\":true}" \
  "$gw/v1/chat/completions" > "$work/tools.sse"
grep '^data: {' "$work/tools.sse" | sed 's/^data: //' > "$work/tools.events"
check "tools, streamed: one [DONE]" one_done tools
check "tools, streamed: x-hedge-route says passthrough" grep -qi '^x-hedge-route: passthrough; tools' "$work/tools.head"
check "tools, streamed: the tool call's argument deltas, unchanged" \
  [ "$(jq -j '.choices[0].delta.tool_calls[0].function.arguments // empty' "$work/tools.events")" = '{"city": "Paris"}' ]
check "tools, streamed: finish_reason tool_calls" grep -q '"finish_reason": "tool_calls"' "$work/tools.events"
check "tools, streamed: the hedge object, one redaction" [ "$(jq -s 'map(.hedge // empty) | .[0].redactions' "$work/tools.events")" = 1 ]
curl -s -m 30 -o "$work/tools.json" -H 'Content-Type: application/json' --data-binary "${tools_ask}}" "$gw/v1/chat/completions"
check "tools, whole: the tool call" [ "$(jq -r '.choices[0].message.tool_calls[0].function.arguments' "$work/tools.json")" = '{"city": "Paris"}' ]
check "tools, whole: the hedge object says passthrough" [ "$(jq -r '.hedge.mode' "$work/tools.json")" = passthrough ]
check "tools, whole: its cost at the cloud's price" [ "$(jq -r '.hedge.cost > 0' "$work/tools.json")" = true ]
check "tools: every other field reached the upstream byte for byte (twice)" \
  [ "$(grep -cF "\"messages\":[{\"role\":\"user\",\"content\":\"Weather where card <CARD_1> was used?\"}],$fields" "$work/tools.record")" = 2 ]
check "tools: the cloud's model (--cloud-model) in place of the edge's" [ "$(grep -c '^{"model":"big",' "$work/tools.record")" = 2 ]
# A cut inside a tool call: the client's stream ends with an error event and one [DONE], no
# other tier continues it.
curl -s -m 30 -N -H 'Content-Type: application/json' --data-binary "${tools_ask},\"stream\":true}" \
  "$gw/v1/chat/completions" > "$work/toolcut.sse"
check "tool call cut: the two events sent, then an error event" \
  bash -c "[ \$(grep -c 'tool_calls' '$work/toolcut.sse') = 2 ] && grep -q '^data: {\"error\"' '$work/toolcut.sse'"
check "tool call cut: one [DONE]" one_done toolcut
# The cloud's answer holds the placeholder: the client sees the number (streamed and whole).
card_ask='{"messages":[{"role":"user","content":"Repeat: 4111 1111 1111 1111 please"}],"response_format":{"type":"text"}'
curl -s -m 30 -N -H 'Content-Type: application/json' --data-binary "${card_ask},\"stream\":true}" "$gw/v1/chat/completions" \
  > "$work/echo.sse"
check "response_format, streamed: the placeholder restored across chunks" \
  [ "$(text_of echo)" = 'Repeat: 4111 1111 1111 1111 please' ]
curl -s -m 30 -o "$work/echo.json" -H 'Content-Type: application/json' --data-binary "${card_ask}}" "$gw/v1/chat/completions"
check "response_format, whole: the placeholder restored" \
  [ "$(jq -r '.choices[0].message.content' "$work/echo.json")" = 'Repeat: 4111 1111 1111 1111 please' ]
# An image part, and a model the edge does not serve, reach the cloud as sent.
curl -s -m 30 -o "$work/image.json" -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}' \
  "$gw/v1/chat/completions"
check "image part: passed through" [ "$(jq -r '.choices[0].message.content' "$work/image.json")" = 'What is this?[image_url]' ]
check "image part: its bytes reached the upstream, the cloud's model added" grep -qF '{"model":"big","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}' "$work/tools.record"
curl -s -m 30 -o "$work/model.json" -H 'Content-Type: application/json' --data-binary \
  '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}' "$gw/v1/chat/completions"
check "another model: passed through, its name intact" \
  bash -c "[ \"\$(jq -r '.hedge.reason' '$work/model.json')\" = model ] && grep -qF '{\"model\":\"gpt-4o-mini\",' '$work/tools.record'"
# A private data class that needs a cloud: refused, nothing sent.
before=$(grep -c '^----' "$work/tools.record")
status=$(curl -s -m 30 -o "$work/tools-private.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"SECRET-PLAN for the tool"}],'"$fields"',"hedge":{"data_class":"private"}}' \
  "$gw/v1/chat/completions")
check "tools + private: 403 policy_refused" \
  [ "$status:$(jq -r '.error.code' "$work/tools-private.json")" = 403:policy_refused ]
check "tools + private: nothing reached the upstream" \
  bash -c "[ \$(grep -c '^----' '$work/tools.record') = $before ] && ! grep -q SECRET-PLAN '$work/tools.record'"
# Over the period budget: a request only the cloud can serve is refused, nothing sent.
scenario tools_budget "tools" 1 --budget 0.0000001
status=$(curl -s -m 30 -o "$work/tools_budget.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary "${tools_ask}}" "$gw/v1/chat/completions")
check "tools over the budget: 403 policy_refused, nothing sent" \
  bash -c "[ '$status:$(jq -r '.error.code' "$work/tools_budget.json")' = 403:policy_refused ] && [ ! -s '$work/tools_budget.record' ]"
# Fallback before the first byte: the first cloud is down, the second answers the tool call.
scenario tools_fallback "down,tools" 2
curl -s -m 30 -N -H 'Content-Type: application/json' --data-binary "${tools_ask},\"stream\":true}" \
  "$gw/v1/chat/completions" > "$work/tools_fallback.sse"
grep '^data: {' "$work/tools_fallback.sse" | sed 's/^data: //' > "$work/tools_fallback.events"
check "tools, first cloud down: the second's tool call, one [DONE]" \
  bash -c "[ \"\$(jq -j '.choices[0].delta.tool_calls[0].function.arguments // empty' '$work/tools_fallback.events')\" = '{\"city\": \"Paris\"}' ] && [ \$(grep -c '^data: \[DONE\]' '$work/tools_fallback.sse') = 1 ]"
check "tools, first cloud down: marked cloud1, a fallback" \
  [ "$(jq -s -r 'map(.hedge // empty) | .[0] | "\(.spans[0].tier) \(.fallback)"' "$work/tools_fallback.events")" = "cloud1 true" ]

# A full local queue (--queue 0: one runs, none waits; 20 ms a token) spills to the cloud where
# the policy allows (auto), and answers 429 with Retry-After where it does not (edge, private).
scenario spill "" 1 --queue 0 --token-delay-ms 20
# burst NAME HEDGE: 4 concurrent streams; their statuses in $work/NAME.codes, bodies NAME-i.sse.
burst() {
  local curls=()
  for i in 1 2 3 4; do
    curl -s -m 30 -N -D "$work/$1-$i.head" -o "$work/$1-$i.sse" -H 'Content-Type: application/json' --data-binary \
      '{"messages":[{"role":"user","content":"Once upon a time SPILL-MARK"}],"max_tokens":30,"stream":true,"hedge":'"$2"'}' \
      "$gw/v1/chat/completions" &
    curls+=($!)
  done
  wait "${curls[@]}"
  for i in 1 2 3 4; do sed -n '1s/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$work/$1-$i.head"; done | sort | tr '\n' ' ' > "$work/$1.codes"
}
tiers_of() { cat "$work/$1"-*.sse | grep '^data: {' | sed 's/^data: //' | jq -r '.hedge.spans[]?.tier' | sort -u | tr '\n' ' '; }
burst spill_auto '{"mode":"auto"}'
check "full queue, auto: all 4 answered ($(cat "$work/spill_auto.codes"))" [ "$(cat "$work/spill_auto.codes")" = "200 200 200 200 " ]
check "full queue, auto: spilled to the cloud ($(tiers_of spill_auto))" grep -q cloud0 <(tiers_of spill_auto)
before=$(grep -c SPILL-MARK "$work/spill.record")
burst spill_edge '{"mode":"edge"}'
check "full queue, edge: 429 for some ($(cat "$work/spill_edge.codes"))" grep -q 429 "$work/spill_edge.codes"
check "full queue, edge: the 429s say Retry-After" \
  bash -c "for h in '$work'/spill_edge-*.head; do grep -q '^HTTP/1.1 429' \$h && ! grep -qi '^retry-after: 1' \$h && exit 1; done; exit 0"
check "full queue, edge: the rest answered by the edge ($(tiers_of spill_edge))" [ "$(tiers_of spill_edge)" = "edge " ]
burst spill_private '{"data_class":"private"}'
check "full queue, private: 429 for some ($(cat "$work/spill_private.codes"))" grep -q 429 "$work/spill_private.codes"
check "full queue, edge and private: nothing reached the cloud" [ "$(grep -c SPILL-MARK "$work/spill.record")" = "$before" ]

# The config file: examples/gateway.json, its clouds pointed at a recording upstream; its key
# from the variable it names; flags override it; a key it does not know is an error naming it.
example=$(dirname "$0")/../../examples/gateway.json
scenario config_up "" 1
up="http://127.0.0.1:$(cat "$work/config_up.port")"
jq --arg u "$up" '.clouds |= map(.url = $u) | .chat_template = "plain"' "$example" > "$work/gateway.json"
OPENAI_API_KEY=sk-config-test start_server config --config "$work/gateway.json"
check "config: /v1/models lists each cloud's model" \
  [ "$(curl -s -m 5 "$url/v1/models" | jq -r '[.data[].id] | join(",")')" = "edge,llama-3.1-70b,gpt-4o-mini" ]
check "config: -m and --port override the file (it listens)" [ -n "$url" ]
curl -s -m 30 -o "$work/config.json" -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"hedge":{"mode":"cloud"}}' "$url/v1/chat/completions"
check "config: the first cloud's model and the key from \$OPENAI_API_KEY reach the upstream" \
  bash -c "grep -q '\"model\":\"llama-3.1-70b\"' '$work/config_up.record' && grep -q 'Authorization: Bearer sk-config-test' '$work/config_up.record'"
check "config: the key is in no log line" bash -c "! grep -q sk-config-test '$work/config.err' '$work/config.out'"
check "config: the budget's prices apply (cost > 0)" [ "$(jq -r '.hedge.cost > 0' "$work/config.json")" = true ]
jq '.router.treshold = 1' "$example" > "$work/bad.json"
"$server" --config "$work/bad.json" -m "$model" --port 0 > /dev/null 2> "$work/bad.err"; bad_status=$?
check "config: an unknown key is a usage error naming it" \
  bash -c "[ $bad_status = 2 ] && grep -q \"'router.treshold' is not a setting\" '$work/bad.err'"
jq '.clouds[1].price.output = "cheap"' "$example" > "$work/bad.json"
"$server" --config "$work/bad.json" -m "$model" --port 0 > /dev/null 2> "$work/bad.err"
check "config: a wrong type names the setting" grep -q "'clouds\[1\].price.output' must be a number" "$work/bad.err"

# 50 concurrent streams against a flapping upstream: each ends with one [DONE] or is refused with 429.
scenario flap "500,ok,down,ok,cut4,ok,500,ok,garbage,ok,down,ok,cut2,ok,500,ok"
for i in $(seq 50); do
  (curl -s -m 60 -N -o "$work/flap$i.sse" -w '%{http_code}' -H 'Content-Type: application/json' \
     --data-binary "$ask" "$gw/v1/chat/completions" > "$work/flap$i.status") &
done
wait_all=0
for i in $(seq 50); do
  for _ in $(seq 600); do [ -s "$work/flap$i.status" ] && break; sleep 0.1; done
done
lost=0
for i in $(seq 50); do
  code=$(cat "$work/flap$i.status" 2> /dev/null)
  if [ "$code" = 200 ]; then one_done "flap$i" || lost=$((lost + 1))
  elif [ "$code" != 429 ]; then lost=$((lost + 1)); fi
done
check "flapping: 50 streams, none lost or malformed" [ $lost -eq 0 ]

# Fields the gateway does not read go on to the cloud as they are (redacted as the messages are).
scenario unread ""
curl -s -m 30 -o "$work/unread.json" -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"presence_penalty":0.5,"user":"u-42","metadata":{"k":[1,2,{"z":null}]},"note":"card 4111 1111 1111 1111","hedge":{"mode":"cloud"}}' \
  "$gw/v1/chat/completions"
check "unread fields: answered by the cloud" [ "$(jq -r '.hedge.spans[0].tier' "$work/unread.json")" = cloud0 ]
check "unread fields: presence_penalty reached the cloud" grep -q '"presence_penalty":0.5' "$work/unread.record"
check "unread fields: user and metadata reached the cloud intact" \
  bash -c "grep -q '\"user\":\"u-42\"' '$work/unread.record' && grep -q '\"metadata\":{\"k\":\[1,2,{\"z\":null}\]}' '$work/unread.record'"
check "unread fields: the card number in one was redacted" bash -c "! grep -q '4111 1111' '$work/unread.record'"
check "unread fields: the hedge object stays with the gateway" bash -c "! grep -q '\"hedge\"' '$work/unread.record'"

# Speculative mode (issue 27): the gateway's model drafts, the cloud scores; greedy, the text
# is the cloud's own answer, and the hedge object reports the rounds. A 500 at a round is retried.
scenario speculate ""
spec_ask='{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":40,"temperature":0,"stream":true,"hedge":{"mode":"%s"}}'
stream spec_cloud "$(printf "$spec_ask" cloud)"
stream spec "$(printf "$spec_ask" speculative)"
check "speculative: one [DONE]" one_done spec
check "speculative: the text is the cloud's greedy answer" [ -n "$(text_of spec_cloud)" -a "$(text_of spec)" = "$(text_of spec_cloud)" ]
check "speculative: the hedge object reports rounds" [ "$(last spec '.hedge.speculation.rounds')" -gt 0 ]
check "speculative: drafts were accepted" [ "$(last spec '.hedge.speculation.accepted')" -gt 0 ]
check "speculative: the upstream scored token ids with echo" grep -q '"echo": *true' "$work/speculate.record"
curl -s -m 30 -o "$work/spec_private.json" -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"SECRET-DIAGNOSIS of the patient"}],"max_tokens":10,"hedge":{"mode":"speculative","data_class":"private"}}' \
  "$gw/v1/chat/completions"
check "speculative: a private request is answered by the edge" [ "$(jq -r '.hedge.spans[0].tier' "$work/spec_private.json")" = edge ]
check "speculative: nothing private reached the upstream" bash -c "! grep -q 'SECRET-DIAGNOSIS' '$work/speculate.record'"
scenario spec500 "500"
stream spec500 "$(printf "$spec_ask" speculative)"
check "speculative, 500: one [DONE]" one_done spec500
check "speculative, 500: retried once" [ "$(last spec500 '.hedge.retries')" = 1 ]
check "speculative, 500: the same text" [ "$(text_of spec500)" = "$(text_of spec_cloud)" ]

# SIGTERM while a cloud stream runs: the stream ends with an error event and one [DONE], the
# gateway exits 0 within 2 s.
scenario term "slow"
term_pid=${pids[-1]}
curl -s -m 30 -N -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":300,"stream":true,"hedge":{"mode":"cloud"}}' \
  "$gw/v1/chat/completions" > "$work/term.sse" &
curl_pid=$!
for _ in $(seq 100); do grep -q '"content"' "$work/term.sse" 2> /dev/null && break; sleep 0.05; done
start=$(date +%s%N)
kill -TERM "$term_pid"
wait "$term_pid"; term_status=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$curl_pid"
check "SIGTERM: the gateway exits 0 (status $term_status)" [ "$term_status" -eq 0 ]
check "SIGTERM: within 2 s ($took ms)" [ "$took" -lt 2000 ]
check "SIGTERM: the stream ends with an error event and one [DONE]" \
  bash -c "grep -q '^data: {\"error\"' '$work/term.sse' && [ \$(grep -c '^data: \[DONE\]' '$work/term.sse') -eq 1 ]"

[ $failures -eq 0 ] && echo "all gateway checks passed" || { echo "$failures gateway checks failed"; exit 1; }
