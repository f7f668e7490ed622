#!/usr/bin/env bash
# hedge-perplexity end to end: usage errors and the refusals (a missing file, a text shorter
# than 2 chunks, a reference of another vocabulary), then stories260K over
# tests/tools/data/stories.txt (TinyStories-style stories written for this test) at F32 and
# at each mix hedge-quantize writes, against llama.cpp's llama-perplexity on the same files.
#
# The llama.cpp figures: node-llama-cpp 3.22.1's prebuilt llama.cpp running its own
# tools/perplexity/perplexity.cpp (built against the package's libllama-common; the
# Final estimate at its defaults: -c 512, F16 KV cache, -t 1), on these same hedge-quantize
# files, 2026-11-28; --kl-divergence against the F32 file's --kl-divergence-base. Tolerances:
# F32 within 0.05% (measured 0.001%: the F16 KV cache barely moves F32 logits); the quantized
# files within 0.5% (measured at most 0.07%, Q5_K_M): the F16 KV cache and ggml-cpu's
# activation quantizer move activations by ulps, which the Q8_0 rounding of the activations
# makes into whole steps at ties (docs/model.md, hedge-quantize), about 1/50 of the
# figures' own ± uncertainty. KLD within 5% and "same top p" within 1 point: llama.cpp's
# reference log-probabilities are 16-bit steps, hedge's exact.
# usage: perplexity.sh PERPLEXITY QUANTIZE MODELS WORKDIR   (exit 77: skipped)
set -u
perplexity=$1 quantize=$2 models=$3 work=$4
text=$(dirname "$0")/data/stories.txt
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/lib.sh"

# expect CODE TEXT ARGS...: hedge-perplexity ARGS exits CODE with TEXT on stderr (stdout for 0).
expect() {
  local code=$1 want=$2; shift 2
  "$perplexity" "$@" > "$work/out" 2> "$work/err"
  local rc=$? stream=$work/err
  [ "$code" -eq 0 ] && stream=$work/out
  if [ $rc -eq "$code" ] && grep -qF -- "$want" "$stream"; then echo "ok: $* -> $code"; else
    fail "$*: expected exit $code and '$want', got $rc:"; cat "$work/out" "$work/err"; fi
}
expect 0 "usage: hedge-perplexity -m MODEL -f TEXT" --help
expect 2 "no -m MODEL" -f "$text"
expect 2 "no -f TEXT" -m x.gguf
expect 2 "unknown option --bogus" --bogus 1
expect 2 "option --ctx needs a value" -m x -f y --ctx
expect 2 "bad value for --ctx: '0'" -m x -f y --ctx 0
expect 2 "bad value for --ctx: '3'" -m x -f y --ctx 3
expect 2 "bad value for --ctx: '12x'" -m x -f y --ctx 12x
expect 2 "bad value for --chunks: '0'" -m x -f y --chunks 0
expect 2 "bad value for --threads: '-1'" -m x -f y --threads -1
expect 1 "cannot open $work/absent.gguf: No such file or directory" -m "$work/absent.gguf" -f "$text"

model=$models/stories260K.gguf
if [ ! -f "$model" ]; then echo "SKIP: $model is absent"; [ $failures -eq 0 ] || exit 1; exit 77; fi
expect 1 "cannot open $work/absent.txt: No such file or directory" -m "$model" -f "$work/absent.txt"
expect 1 "cannot open $work/absent.gguf" -m "$model" -f "$text" --reference "$work/absent.gguf"
head -c 2000 "$text" > "$work/short.txt"
expect 1 "the text makes 917 tokens: perplexity with a context of 512 needs at least 1024 (2 chunks)" \
  -m "$model" -f "$work/short.txt"
expect 1 "the text makes 6936 tokens: perplexity with a context of 4096 needs at least 8192" \
  -m "$model" -f "$text" --ctx 4096
: > "$work/empty.txt"
expect 1 "the text makes 1 tokens" -m "$model" -f "$work/empty.txt"
expect 1 "is not a GGUF" -m "$text" -f "$text"
# A reference whose vocabulary differs in one piece (the same bytes with "▁the" spelled "▁thE").
if command -v python3 > /dev/null; then
  python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); p = b"\xe2\x96\x81the"; i = d.index(p)
open(sys.argv[2], "wb").write(d[:i] + b"\xe2\x96\x81thE" + d[i + len(p):])' "$model" "$work/other-vocab.gguf"
  expect 1 "other-vocab.gguf: the reference's vocabulary differs from the model's at token" \
    -m "$model" -f "$text" --reference "$work/other-vocab.gguf"
fi

# figure FILE KEY: a number of the JSON line.
figure() { tail -n 1 "$1" | sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p"; }
# within GOT WANT FRACTION: |GOT / WANT - 1| <= FRACTION
within() { awk -v g="$1" -v w="$2" -v f="$3" 'BEGIN { d = g / w - 1; if (d < 0) d = -d; exit !(d <= f) }'; }
# points GOT WANT POINTS: |GOT - WANT| <= POINTS
points() { awk -v g="$1" -v w="$2" -v p="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= p) }'; }

declare -A llama_cpp=([F32]=4.7837 [Q8_0]=4.7850 [Q4_0]=5.1221 [Q4_K_M]=4.8771 [Q5_K_M]=4.8157)
declare -A tolerance=([F32]=0.0005 [Q8_0]=0.005 [Q4_0]=0.005 [Q4_K_M]=0.005 [Q5_K_M]=0.005)
for mix in F32 Q8_0 Q4_0 Q4_K_M Q5_K_M; do
  file=$model
  if [ $mix != F32 ]; then
    file=$work/stories-$mix.gguf
    "$quantize" "$model" "$file" $mix > /dev/null || { fail "hedge-quantize $mix"; continue; }
  fi
  "$perplexity" -m "$file" -f "$text" > "$work/$mix.out" 2> "$work/$mix.err"
  check "$mix: exit 0" [ $? -eq 0 ]
  check "$mix: a 'perplexity: X +/- E' line" grep -qE '^perplexity: [0-9]+\.[0-9]{4} \+/- [0-9]+\.[0-9]{5}$' "$work/$mix.out"
  check "$mix: the running estimate on stderr" grep -qE '^\[1\][0-9.]+,\[2\].*\[13\][0-9.]+,$' "$work/$mix.err"
  ppl=$(figure "$work/$mix.out" perplexity)
  check "$mix: perplexity $ppl within ${tolerance[$mix]} of llama.cpp's ${llama_cpp[$mix]}" \
    within "$ppl" "${llama_cpp[$mix]}" "${tolerance[$mix]}"
  check "$mix: 13 chunks of 512, 3315 tokens scored" grep -q '"tokens":6936,"context":512,"chunks":13,"scored":3315' "$work/$mix.out"
done
# Threads and --chunks: the same figures, and fewer chunks.
"$perplexity" -m "$model" -f "$text" --threads 2 > "$work/threads.out" 2> /dev/null
check "2 threads: the figure of 1" within "$(figure "$work/threads.out" perplexity)" "$(figure "$work/F32.out" perplexity)" 0.00001
"$perplexity" -m "$model" -f "$text" --chunks 2 --ctx 128 > "$work/chunks.out" 2> /dev/null
check "--chunks 2 --ctx 128: 2 chunks, 126 tokens scored" grep -q '"context":128,"chunks":2,"scored":126' "$work/chunks.out"

# Against the F32 reference: llama.cpp's --kl-divergence figures.
declare -A kld=([Q8_0]=0.000789 [Q4_0]=0.082252 [Q4_K_M]=0.018488 [Q5_K_M]=0.014820)
declare -A same_top=([Q8_0]=0.98492 [Q4_0]=0.84917 [Q4_K_M]=0.93152 [Q5_K_M]=0.93514)
for mix in Q8_0 Q4_0 Q4_K_M Q5_K_M; do
  [ -f "$work/stories-$mix.gguf" ] || continue
  "$perplexity" -m "$work/stories-$mix.gguf" --reference "$model" -f "$text" > "$work/$mix-kl.out" 2> "$work/$mix-kl.err"
  check "$mix vs F32: exit 0" [ $? -eq 0 ]
  check "$mix vs F32: llama.cpp's lines" grep -q '^Mean    KLD *: ' "$work/$mix-kl.out"
  got=$(figure "$work/$mix-kl.out" kl_divergence)
  check "$mix vs F32: KLD $got within 5% of llama.cpp's ${kld[$mix]}" within "$got" "${kld[$mix]}" 0.05
  got=$(figure "$work/$mix-kl.out" same_top)
  check "$mix vs F32: same top $got within 0.01 of llama.cpp's ${same_top[$mix]}" points "$got" "${same_top[$mix]}" 0.01
  check "$mix vs F32: the reference's perplexity is F32's" \
    within "$(figure "$work/$mix-kl.out" reference_perplexity)" "$(figure "$work/F32.out" perplexity)" 0.000001
done
"$perplexity" -m "$model" --reference "$model" -f "$text" --chunks 2 > "$work/self.out" 2> /dev/null
check "a model against itself: KLD 0, same top 1" grep -q '"kl_divergence":0,.*"same_top":1,' "$work/self.out"
[ $failures -eq 0 ] && echo "all perplexity checks passed" || { echo "$failures perplexity checks failed"; exit 1; }
