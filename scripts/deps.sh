#!/usr/bin/env bash
# Installs the Debian packages hedge's build, tests and benchmarks need, when missing
# (with --demo, only what scripts/demo.sh needs).
# Non-interactive (CI has no stdin); uses sudo only when not already root.
set -euo pipefail
# clang-22 (bookworm-security) is the newest clang Debian 12 ships; scripts/matrix.sh
# compiles with it beside clang-14 (the default clang) and g++ 12. qemu-system-arm runs
# the Cortex-M firmware image (board mps2-an500); qemu-user runs the AArch64 tests.
# rapidjson (header-only) is the cloud protocol layer's JSON reader and writer; libcurl is
# the default HTTP(S) transport (os/http_transport.hpp); hedge-server serves HTTP itself (os/http_server.hpp);
# curl (and jq) are real clients in the server's tests; openssl makes the HTTPS test's certificate.
packages=(cmake ninja-build g++ clang clang-22 libclang-rt-14-dev libeigen3-dev libxsimd-dev libgtest-dev
          libbenchmark-dev nlohmann-json3-dev rapidjson-dev libcurl4-openssl-dev curl jq openssl
          gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib
          g++-aarch64-linux-gnu qemu-user qemu-system-arm)
# --demo: only what scripts/demo.sh builds (the demos and hedge-server: no tests, no matrix).
if [ "${1:-}" = --demo ]; then
  packages=(cmake ninja-build g++ libxsimd-dev rapidjson-dev libcurl4-openssl-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "hedge: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo -n)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}" \
    || { "${sudo_cmd[@]}" apt-get update && "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; }
fi
