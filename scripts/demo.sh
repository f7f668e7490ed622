#!/usr/bin/env bash
# hedge's main job on a fresh Debian machine: installs missing packages,
# configures and builds the release preset, then runs the most complete
# program hedge has (see README "The two commands"): the hybrid demo, with
# hedge-server on loopback as its cloud tier (examples/hybrid_demo.sh).
# Arguments go to the demo: [MODEL.gguf | --synthetic] [--threads N].
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target hedge_example_hybrid_demo hedge-server
./examples/hybrid_demo.sh ./build/release/examples/hedge_example_hybrid_demo ./build/release/tools/hedge-server "$@"
