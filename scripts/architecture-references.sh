#!/usr/bin/env bash
# llama.cpp's greedy ids and logits on hedge's synthetic model of each architecture
# (tests/model/architecture_test.cpp writes the models when HEDGE_WRITE_ARCHITECTURE_MODELS
# names a folder), through the llama.cpp peer (scripts/llama_cpp_peer.sh: node-llama-cpp's
# prebuilt libllama, never a dependency). Writes tests/model/data/llama_cpp_architectures.txt.
#
#   scripts/architecture-references.sh [BUILD_DIR]   (default build/release, with hedge_test_model built)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT
# The test fails on a missing reference after writing its model: only the files matter here.
HEDGE_WRITE_ARCHITECTURE_MODELS=$models "$build/tests/hedge_test_model" --gtest_filter='LlamaCpp/Architecture.*' \
  > /dev/null 2>&1 || true
# The prompt and count of architecture_test.cpp.
prompt="1 7 21 33 45 12 60 5 19 40"
count=16
out=$root/tests/model/data/llama_cpp_architectures.txt
{
  echo "# llama.cpp's greedy ids and logits after the ids $prompt on tests/model/architecture_test.cpp's"
  echo "# synthetic model of each architecture (F32). Made with node-llama-cpp 3.22.1's prebuilt llama.cpp:"
  echo "#   scripts/architecture-references.sh"
  for model in "$models"/*.gguf; do
    echo "arch $(basename "$model" .gguf)"
    # shellcheck disable=SC2086
    "$root/scripts/llama_cpp_peer.sh" greedy-logits "$model" "$count" $prompt |
      awk 'NR == 1 { print "ids " $0; next } { print "logits " $0 }'
  done
} > "$out"
echo "wrote $out" >&2
