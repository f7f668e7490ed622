#!/usr/bin/env bash
# hedge's main job on a fresh Debian machine: installs only the packages the demo needs
# (scripts/deps.sh --demo), builds the demo and hedge-server (build/demo, no tests), then runs
# hedge-server as a hybrid gateway between a local edge model and a cloud (another
# hedge-server, slowed and priced as a cloud) with a mixed workload sent through the OpenAI
# API: examples/gateway_demo.cpp, which prints each request's route and tiers, survives a
# cloud outage, trips the circuit breaker, runs out of budget, and prints a summary and the
# path of a latency plot. Then the engine in process with its verifier and hand-offs
# (examples/hybrid_demo.sh). Exits non-zero if any request was lost.
# Arguments go to the gateway demo: [--cloud-model CLOUD.gguf | --cloud URL] [--quick].
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh --demo
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEDGE_BUILD_TESTS=OFF -DHEDGE_BUILD_BENCH=OFF \
  -DHEDGE_BUILD_EXAMPLES=ON > /dev/null
cmake --build build/demo -j "$(nproc)" --target hedge_example_gateway_demo hedge_example_hybrid_demo hedge-server
model=../shared/models/stories260K.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -f "$model" ]; then
  echo "$model is absent: the demo writes a synthetic model (random weights: the text is noise)"
  model=$work/synthetic.gguf
  ./build/demo/examples/hedge_example_hybrid_demo --write-synthetic "$model"
fi
mkdir -p build/demo/out
./build/demo/examples/hedge_example_gateway_demo ./build/demo/tools/hedge-server "$model" \
  --svg build/demo/out/gateway-demo.svg "$@"
echo
echo "=== the engine in process: verification and hand-offs token by token (examples/hybrid_demo.sh) ==="
./examples/hybrid_demo.sh ./build/demo/examples/hedge_example_hybrid_demo ./build/demo/tools/hedge-server "$model"
