#!/usr/bin/env bash
# hedge-server with the official OpenAI Node client (npm `openai`, installed under PREFIX on
# first use): starts the server on a free loopback port and runs scripts/openai-client-check.mjs.
# Prints "SKIP: ..." and exits 0 when node, npm, the registry or the model is absent.
# usage: scripts/openai-client-check.sh [SERVER] [MODEL] [PREFIX]
#   defaults: build/release/tools/hedge-server, ../shared/models/stories260K.gguf, build/openai-client
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
server=${1:-$root/build/release/tools/hedge-server}
model=${2:-$root/../shared/models/stories260K.gguf}
prefix=${3:-$root/build/openai-client}
for tool in node npm; do
  command -v $tool > /dev/null || { echo "SKIP: $tool is absent"; exit 0; }
done
[ -f "$model" ] || { echo "SKIP: $model is absent"; exit 0; }
if [ ! -f "$prefix/node_modules/openai/package.json" ]; then
  mkdir -p "$prefix"
  if ! timeout 180 npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error openai > "$prefix/npm.log" 2>&1; then
    echo "SKIP: npm install openai failed (no registry?):"; tail -5 "$prefix/npm.log"; exit 0
  fi
fi
echo "openai $(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$prefix/node_modules/openai/package.json")"

work=$(mktemp -d)
source "$root/tests/tools/lib.sh"
trap 'kill "${pids[@]}" 2> /dev/null; wait "${pids[@]}" 2> /dev/null; rm -rf "$work"' EXIT
start_server server
timeout 120 node "$root/scripts/openai-client-check.mjs" "$url/v1" "$prefix"
