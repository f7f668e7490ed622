# tests/tools/lib.sh: what the hedge-server test scripts share; sourced, after they set
# $server, $model and $work.
#   check DESCRIPTION COMMAND...   runs COMMAND: "ok: DESCRIPTION", or a failure counted
#   start_server NAME ARGS...      a hedge-server on a free port (-m $model --port 0 ARGS),
#                                  its output in $work/NAME.out and .err; sets $pid (also
#                                  appended to $pids), $url, $hostport, $host and $port; exits 1
#                                  when it prints no 'listening on' line within 30 s
#   health_ms [URL]                milliseconds of one GET /health on a new connection (9999
#                                  if not 200)
failures=0
pids=()
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {
  if "${@:2}"; then echo "ok: $1"; else fail "$1"; fi
}

start_server() {
  local name=$1; shift
  # Emptied here, not by the background job's redirection: that one may run after the loop
  # below has read a previous server's 'listening on' line from the same file.
  : > "$work/$name.out"
  "$server" -m "$model" --port 0 "$@" > "$work/$name.out" 2> "$work/$name.err" &
  pid=$!; pids+=($pid); url=
  for _ in $(seq 300); do
    url=$(sed -n 's/^listening on //p' "$work/$name.out" 2> /dev/null)
    [ -n "$url" ] && break
    kill -0 $pid 2> /dev/null || break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "FAIL: $name: no 'listening on' line"; cat "$work/$name.err"; exit 1; }
  hostport=${url#http://}; host=${hostport%:*}; port=${hostport##*:}
}

# The checks take the median of 5: on the shared 2-core CI machine one curl can wait for a core.
health_ms() {
  curl -s -m 2 -o /dev/null -w '%{http_code} %{time_total}\n' "${1:-$url}/health" |
    awk '{ if ($1 == 200) printf "%d\n", $2 * 1000; else print 9999 }'
}
