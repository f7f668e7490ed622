#!/usr/bin/env bash
# One command to set up and pass hedge's tests on a fresh Debian machine:
# installs missing packages, builds the release preset with -Wall -Wextra -Werror,
# and runs every test with ctest (unit tests, header self-containment with g++ and
# clang++, the three package-consumption modes, the Cortex-M7 firmware build).
# Usage: ./scripts/test.sh [preset]   (release by default; also debug, asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
./scripts/deps.sh
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset"
