#!/usr/bin/env bash
# hedge's main job on a fresh Debian machine: installs missing packages,
# configures and builds the release preset, then runs the most complete
# program hedge has (see README "The two commands").
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target hedge_example_hybrid_demo
./build/release/examples/hedge_example_hybrid_demo "$@"
