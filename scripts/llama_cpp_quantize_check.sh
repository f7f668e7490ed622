#!/usr/bin/env bash
# hedge-quantize against llama.cpp's own quantizer (llama_model_quantize in node-llama-cpp
# 3.22.1's prebuilt llama.cpp, through scripts/llama_cpp_peer.sh; never a dependency of hedge,
# never run by CI). For each mix (Q4_K_M, Q5_K_M, Q8_0, Q4_0) and two F32 models:
#   - ../shared/models/stories260K.gguf: 64-wide rows, so the K-quants fall back (Q5_0, Q5_1,
#     Q8_0, F16 for the 172-wide ffn_down);
#   - a 256-wide random model made from it by scripts/gguf_tool.py widen: Q4_K, Q5_K, Q6_K
#     themselves, and attn_v / ffn_down on the layers llama.cpp bumps to Q6_K;
# both tools quantize the same file and every tensor must have the same type and bytes.
# Then llama.cpp generates 40 ids greedily after BOS and "Once upon a time" on hedge-quantize's
# stories260K outputs (and on the F32 file): those lines are written to
# tests/model/data/llama_cpp_greedy_ids.txt, which model.LlamaForward.QuantizedFilesGiveLlamaCppsGreedyIds
# holds hedge's greedy ids to. On the wide models the script reports how many of
# hedge-generate's greedy ids equal llama.cpp's.
#
# Usage: scripts/llama_cpp_quantize_check.sh [BUILD_DIR]
#   BUILD_DIR holds tools/hedge-quantize and tools/hedge-generate (default build/release).
# Exit status: 0 when every file is byte-identical to llama.cpp's, 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build/release}
models=../shared/models
out=build/quantize-check
mkdir -p "$out"
peer=scripts/llama_cpp_peer.sh
prompt="Once upon a time"
status=0

python3 scripts/gguf_tool.py widen "$models/stories260K.gguf" "$out/wide.gguf"
for model in stories260K wide; do
  source=$models/stories260K.gguf
  [ "$model" = wide ] && source=$out/wide.gguf
  for mix in Q4_K_M Q5_K_M Q8_0 Q4_0; do
    "$build/tools/hedge-quantize" "$source" "$out/hedge-$model-$mix.gguf" "$mix" > /dev/null
    "$peer" quantize "$source" "$out/llama-$model-$mix.gguf" "$mix"
    if python3 scripts/gguf_tool.py compare "$out/hedge-$model-$mix.gguf" "$out/llama-$model-$mix.gguf" \
        > "$out/compare-$model-$mix.txt"; then
      echo "$model $mix: $(tail -n 1 "$out/compare-$model-$mix.txt"), byte-identical to llama.cpp's" >&2
    else
      echo "$model $mix: differs from llama.cpp's:" >&2
      cat "$out/compare-$model-$mix.txt" >&2
      status=1
    fi
  done
done

# hedge-generate prints the prompt's 4 ids ("Once upon a time" in this vocabulary) before
# the generated ones; -n 24 positions are BOS, the prompt and 19 generated ids. Reported, not
# required: the wide model's random weights leave near-ties in the logits, llama.cpp keeps
# its KV cache in F16 where hedge-generate keeps F32, and Q4_0's embedding puts activations
# on exact Q8_0 rounding ties (docs/model.md, "Why the wide Q4_0 file's ids part").
for mix in Q8_0 Q4_0 Q4_K_M Q5_K_M; do
  ours=$("$build/tools/hedge-generate" -m "$out/hedge-wide-$mix.gguf" -i "$prompt" -n 24 -t 0 --ignore-eos \
           --print-ids 2>/dev/null | sed -n 's/^ids: //p' | cut -d' ' -f5-)
  theirs=$("$peer" generate "$out/hedge-wide-$mix.gguf" "$prompt" "$(echo "$ours" | wc -w)" 2>/dev/null)
  same=0
  read -r -a a <<< "$ours"
  read -r -a b <<< "$theirs"
  while [ "$same" -lt "${#a[@]}" ] && [ "${a[$same]}" = "${b[$same]:-}" ]; do same=$((same + 1)); done
  echo "wide $mix: the first $same of ${#a[@]} greedy ids of hedge-generate equal llama.cpp's" >&2
done

ids=tests/model/data/llama_cpp_greedy_ids.txt
{
  echo "# Greedy ids llama.cpp generates after BOS and \"$prompt\" (40 tokens), on stories260K.gguf"
  echo "# and on hedge-quantize's outputs of it, made by scripts/llama_cpp_quantize_check.sh with"
  echo "# node-llama-cpp 3.22.1's prebuilt llama.cpp:"
  echo "#   hedge-quantize ../shared/models/stories260K.gguf OUT.gguf MIX"
  echo "#   scripts/llama_cpp_peer.sh generate OUT.gguf \"$prompt\" 40"
  echo "f32 $("$peer" generate "$models/stories260K.gguf" "$prompt" 40 2>/dev/null)"
  for mix in Q8_0 Q4_0 Q4_K_M Q5_K_M; do
    echo "$(echo "$mix" | tr 'A-Z' 'a-z') $("$peer" generate "$out/hedge-stories260K-$mix.gguf" "$prompt" 40 2>/dev/null)"
  done
} > "$ids"
echo "wrote $ids" >&2
exit $status
