#!/usr/bin/env bash
# Runs the hybrid demo against a real cloud tier on loopback: starts hedge-server on a free
# port with the demo's model, waits for its `listening on URL` line (30 s at most), runs the
# demo with --cloud URL, and stops the server on every exit.
#
#   examples/hybrid_demo.sh DEMO SERVER [MODEL.gguf | --synthetic] [DEMO ARGS...]
#
# DEMO is hedge_example_hybrid_demo, SERVER hedge-server. MODEL defaults to
# ../shared/models/stories260K.gguf; when it is absent, or with --synthetic, the demo writes
# its synthetic model (--write-synthetic) to a temporary folder and both programs load it.
# Exit status: the demo's; 1 when the server does not start; 77 (and "SKIP:") when SERVER
# was not built.
set -euo pipefail
demo=$1 server=$2
shift 2
model=$(cd "$(dirname "$0")/.." && pwd)/../shared/models/stories260K.gguf
synthetic=false
if [ $# -gt 0 ]; then
  case $1 in
    --synthetic) synthetic=true; shift ;;
    -*) ;;
    *) model=$1; shift ;;
  esac
fi
if [ ! -x "$server" ]; then
  echo "SKIP: $server is not built (it needs Linux and rapidjson: scripts/deps.sh)"
  exit 77
fi

work=$(mktemp -d)
pid=
url=
# shellcheck disable=SC2317  # run by the EXIT trap
stop() {
  local status=$? server_status=0
  if [ -n "$pid" ]; then
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || server_status=$?
  fi
  # SIGTERM stops hedge-server with status 0: any other status (a sanitizer report) fails
  # the run, and its messages are shown, as they are when it never listened.
  if [ -n "$pid" ] && { [ "$server_status" -ne 0 ] || [ -z "$url" ]; }; then
    echo "hedge-server (status $server_status):" >&2
    cat "$work/server.err" >&2
    [ "$status" -ne 0 ] || status=1
  fi
  rm -rf "$work"
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if $synthetic || [ ! -f "$model" ]; then
  $synthetic || echo "$model is absent: using a synthetic model"
  model=$work/synthetic.gguf
  "$demo" --write-synthetic "$model"
  echo "synthetic model: $model (random weights: the text is noise)"
fi

: > "$work/server.out"  # the server's redirection may not have created it before the first read
"$server" -m "$model" --port 0 > "$work/server.out" 2> "$work/server.err" &
pid=$!
for _ in $(seq 300); do
  url=$(sed -n 's/^listening on //p' "$work/server.out" || true)
  [ -n "$url" ] && break
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "hedge-server did not start: it exited, or printed no 'listening on' line in 30 s" >&2
  exit 1
fi
echo "started hedge-server -m $(basename "$model") on $url (pid $pid)"
"$demo" "$model" --cloud "$url" "$@"
