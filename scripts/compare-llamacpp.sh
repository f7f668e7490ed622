#!/usr/bin/env bash
# hedge against llama.cpp on the same GGUF, same machine, same thread count: the synthetic
# models of bench/model/synthetic_model.hpp (random weights in the shapes of TinyLlama-1.1B,
# Llama-3.2-1B, Qwen3-1.7B and Gemma-3-1B, with vocabularies of their real size), written
# once under $HEDGE_BENCH_MODELS (default build/models), hedge timed by hedge_bench_model's
# llama/* benchmarks and llama.cpp by the npm prebuilt of node-llama-cpp
# (scripts/llama_cpp_peer.sh bench: installed under build/llama-cpp-peer on first use; never
# a dependency of hedge, never run by CI).
#
# Both sides time the same work: a greedy decode of positions 0-63 from BOS (logits and
# argmax included) and prefills of 128 and 512 tokens (BOS, then the same pseudo-random ids)
# into an empty sequence. Runs alternate, hedge then llama.cpp, ROUNDS times per file and
# thread count, and the table reports medians: tok/s of each, hedge / llama.cpp (of wall
# time, and of each process's CPU time, which a machine shared with other work moves less), the
# bandwidth bound (read bandwidth measured by the hedge run / bytes a token reads: weights,
# norms, KV cache; see bench/model/forward_bench.cpp). Then it runs hedge-generate under
# /usr/bin/time -v for its peak resident set against the file size, and reports llama.cpp's
# resident set after decoding (its node process included).
#
# Usage: scripts/compare-llamacpp.sh [--build-dir DIR] [--models "tinyllama-1.1b"]
#                                    [--formats "q4_0 q8_0"] [--threads "1 NPROC"]
#                                    [--rounds 3] [--jobs N]
#        scripts/compare-llamacpp.sh --batch "1 2 4 8" [--models ...] [--formats ...] [--threads ...] [--rounds 3]
#        scripts/compare-llamacpp.sh --gemm [--formats "q4_0 q8_0 q4_k"] [--rows "512 64"]
#                                    [--shapes "4096x4096 11008x4096"] [--threads ...] [--rounds 3]
#   --models     any of tinyllama-1.1b llama-3.2-1b qwen3-1.7b gemma-3-1b (default tinyllama-1.1b)
#   --formats    the files' formats (default: each model's own pair, q4_0 q8_0 for
#                tinyllama-1.1b, q4_k_m q8_0 for the others; with --gemm q4_0 q8_0 q4_k)
#   --build-dir  a configured build with benchmarks and tools (default build/bench, configured
#                here with the bench preset and the tools when absent)
#   --jobs       build parallelism (default: every hardware thread)
#   --batch      batched decode instead of decode and prefill: S sessions decoding 64 tokens
#                each at once (hedge: llama/batch_decode<S>, llama::decode_batch; llama.cpp: S
#                sequences of one context, llama_cpp_peer.sh batch), aggregate tok/s per S
#                and its ratio to one session's decode (llama/decode) against the 0.9 S target
#   --gemm       the prefill GEMM alone instead of the model: Y = X W^T with ROWS activation rows
#                and an N x K weight (SHAPES), hedge's repacked GEMM at the arch arch::best runs
#                (hedge_bench_kernels' gemm/* benchmarks) against ggml's ggml_mul_mat on its CPU
#                backend in the best weight placement llama.cpp can use (plain buffer or an extra
#                buffer type such as CPU_REPACK; scripts/llama_cpp_peer.sh ggml-gemm), alternating
#                per format and round; GFLOP/s over wall time, and over the calling thread's CPU
#                time at 1 thread (where both compute on the caller alone).
# The table (markdown) goes to stdout and, with every run's raw output, to
# build/compare-llamacpp/<date>/ (build/compare-llamacpp/gemm-<date>/ with --gemm).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

build_dir=build/bench
models=tinyllama-1.1b
formats=""
threads="1 $(nproc)"
rounds=3
jobs=$(nproc)
gemm=0
batch=""
rows="512 64"
shapes="4096x4096 11008x4096"
while [ $# -gt 0 ]; do
  case "$1" in
    --gemm) gemm=1; shift ;;
    --rows) rows=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --formats) formats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-llamacpp.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$gemm" -eq 1 ]; then formats=${formats:-q4_0 q8_0 q4_k}; fi

# table ARGS...: the table script on stdin, after the parts every table shares (files, medians,
# number formats), run by node with ARGS as its process.argv.slice(2).
table() {
  {
    cat <<'JS'
const fs = require("node:fs");
const path = require("node:path");
const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);
JS
    cat
  } | node - "$@"
}

# model_rounds MODEL FORMAT BENCHMARKS LABEL PEER_MODE PEER_ARGS...: at each thread count, `rounds`
# rounds of hedge's model benchmarks (the alternatives BENCHMARKS, cold) and then llama.cpp's
# peer (`llama_cpp_peer.sh PEER_MODE FILE THREADS DECODE_TOKENS PEER_ARGS...`) on the same file,
# interleaved so both meet the same machine; raw output to $out/{hedge,llamacpp}-NAME-tT-rR.*.
model_rounds() {
  local model=$1 format=$2 benchmarks=$3 label=$4 mode=$5 name=$1-$2 t round
  shift 5
  for t in $threads; do
    for round in $(seq 1 "$rounds"); do
      echo "== $name, $t thread(s), round $round: hedge$label" >&2
      "$bench" --benchmark_filter="^llama/($benchmarks)/[^/]+/${model}_$format/cold/threads:$t/" \
        --benchmark_out="$out/hedge-$name-t$t-r$round.json" --benchmark_out_format=json \
        > "$out/hedge-$name-t$t-r$round.log" 2>&1 || { cat "$out/hedge-$name-t$t-r$round.log" >&2; exit 1; }
      echo "== $name, $t thread(s), round $round: llama.cpp$label" >&2
      scripts/llama_cpp_peer.sh "$mode" "$HEDGE_BENCH_MODELS/$name.gguf" "$t" "$decode_tokens" "$@" \
        > "$out/llamacpp-$name-t$t-r$round.json"
    done
  done
}
command="scripts/compare-llamacpp.sh --build-dir $build_dir --models \"$models\"${formats:+ --formats \"$formats\"} --threads \"$threads\" --rounds $rounds"
# Each file as model:format.
files=""
for model in $models; do
  case $model in
    tinyllama-1.1b) own="q4_0 q8_0" ;;
    llama-3.2-1b|qwen3-1.7b|gemma-3-1b) own="q4_k_m q8_0" ;;
    *) echo "compare-llamacpp.sh: unknown model $model" >&2; exit 2 ;;
  esac
  for format in ${formats:-$own}; do files="$files $model:$format"; done
done
files=${files# }

if [ "$gemm" -eq 1 ]; then
  command="scripts/compare-llamacpp.sh --gemm --build-dir $build_dir --formats \"$formats\" --rows \"$rows\" --shapes \"$shapes\" --threads \"$threads\" --rounds $rounds"
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    [ "$build_dir" = build/bench ] || { echo "compare-llamacpp.sh: $build_dir is not a configured build" >&2; exit 2; }
    cmake --preset bench > /dev/null
  fi
  cmake --build "$build_dir" -j "$jobs" --target hedge_bench_kernels >&2
  bench=$build_dir/bench/hedge_bench_kernels
  # The arch arch::best runs for these formats: the AVX-512 VNNI variants are registered only
  # where the CPU has them.
  arch=avx2
  if "$bench" --benchmark_list_tests --benchmark_filter='^gemm/q4_0/avx512vnni_repacked/' | grep -q .; then
    arch=avx512vnni
  fi
  out=build/compare-llamacpp/gemm-$(date -u +%Y%m%dT%H%M%SZ)
  mkdir -p "$out"
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  alternatives() { echo "$1" | tr ' ' '|'; }
  for round in $(seq 1 "$rounds"); do
    for format in $formats; do
      echo "== gemm $format, round $round: hedge ($arch)" >&2
      "$bench" --benchmark_filter="^gemm/$format/${arch}_repacked/($(alternatives "$rows"))x($(alternatives "$shapes"))/hot/threads:($(alternatives "$threads"))/" \
        --benchmark_min_time=0.3 --benchmark_out="$out/hedge-$format-r$round.json" --benchmark_out_format=json \
        > "$out/hedge-$format-r$round.log" 2>&1 || { cat "$out/hedge-$format-r$round.log" >&2; exit 1; }
      echo "== gemm $format, round $round: ggml" >&2
      for shape in $shapes; do
        scripts/llama_cpp_peer.sh ggml-gemm "$format" "${shape%x*}" "${shape#*x}" "$(echo "$rows" | tr ' ' ,)" \
          "$(echo "$threads" | tr ' ' ,)" 3 >> "$out/ggml-$format-r$round.jsonl"
      done
    done
  done
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  table "$out" "$formats" "$threads" "$rows" "$shapes" "$rounds" "$command" "$load_before" "$load_after" "$arch" <<'JS' | tee "$out/table.md"
const [dir, formats, threads, rows, shapes, rounds, command, loadBefore, loadAfter, arch] = process.argv.slice(2);
const files = fs.readdirSync(dir).sort();
let cpu = "";
let variant = "";
const table = [];
for (const format of formats.split(" ")) {
    const hedge = files.filter((f) => f.startsWith(`hedge-${format}-`) && f.endsWith(".json"))
        .flatMap((f) => {
            const doc = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
            cpu = doc.context.hedge_cpu_name;
            return doc.benchmarks;
        });
    const ggml = files.filter((f) => f.startsWith(`ggml-${format}-`))
        .flatMap((f) => fs.readFileSync(path.join(dir, f), "utf8").trim().split("\n").map((l) => JSON.parse(l)))
        .filter((g) => g.supported);
    for (const shape of shapes.split(" ")) {
        const [n, k] = shape.split("x").map(Number);
        for (const m of rows.split(" ").map(Number)) {
            for (const t of threads.split(" ").map(Number)) {
                const flops = 2 * m * n * k;
                const runs = hedge.filter((b) => b.name.startsWith(`gemm/${format}/${arch}_repacked/${m}x${n}x${k}/hot/threads:${t}/`));
                if (runs.length === 0 || runs.some((b) => b.error_occurred)) throw new Error(`hedge ${format} ${m}x${shape} t${t}: no result`);
                // Google Benchmark's times are per iteration, in time_unit.
                const perSecond = {ns: 1e9, us: 1e6, ms: 1e3, s: 1};
                const gflops = (b, time) => (flops * perSecond[b.time_unit]) / time / 1e9;
                const hedgeWall = median(runs.map((b) => gflops(b, b.real_time)));
                const hedgeCpu = median(runs.map((b) => gflops(b, b.cpu_time)));
                const cells = ggml.filter((g) => g.m === m && g.n === n && g.k === k && g.threads === t);
                variant = cells.length ? cells[0].variant : variant;
                const placements = [...new Set(cells.map((g) => g.placement))].map((p) => {
                    const these = cells.filter((g) => g.placement === p);
                    return {p, wall: median(these.flatMap((g) => g.gflops)), cpu: t === 1 ? median(these.flatMap((g) => g.cpu_gflops)) : NaN};
                });
                if (placements.length === 0) throw new Error(`ggml ${format} ${m}x${shape} t${t}: no result`);
                const best = placements.reduce((a, b) => (b.wall > a.wall ? b : a));
                const others = placements.filter((x) => x !== best).map((x) => `${x.p} ${f1(x.wall)}`).join(", ");
                const cpuCells = t === 1 ? `${f1(hedgeCpu)} | ${f1(best.cpu)} | ${f2(hedgeCpu / best.cpu)}` : "- | - | -";
                table.push(`| ${format} | ${m}x${n}x${k} | ${t} | ${f1(hedgeWall)} | ${f1(best.wall)} (${best.p}${others ? `; ${others}` : ""}) | ` +
                    `**${f2(hedgeWall / best.wall)}** | ${cpuCells} |`);
            }
        }
    }
}
const lines = [
    `${new Date().toISOString().slice(0, 10)}, ${cpu}, \`${command}\``,
    `hedge: gemm/<format>/${arch}_repacked (${rounds} rounds of --benchmark_min_time=0.3); ggml: ${variant}, ` +
        `3 runs per round after a warm-up, best placement (others after it); GFLOP/s = 2 M N K / time, medians; ` +
        `load average before ${loadBefore}, after ${loadAfter}`,
    "",
    "| weights | M x N x K | threads | hedge GFLOP/s | ggml GFLOP/s (placement) | hedge / ggml | hedge on CPU | ggml on CPU | ratio on CPU |",
    "|---|---|---|---|---|---|---|---|---|",
    ...table,
];
process.stdout.write(lines.join("\n") + "\n");
JS
  exit 0
fi

# The work both sides time; bench/model/forward_bench.cpp fixes the same figures.
decode_tokens=64
prefill_tokens="128 512"

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  if [ "$build_dir" != build/bench ]; then
    echo "compare-llamacpp.sh: $build_dir is not a configured build" >&2
    exit 2
  fi
  cmake --preset bench -DHEDGE_BUILD_EXAMPLES=ON > /dev/null
fi
targets="hedge_bench_model"
[ -n "$batch" ] || targets="$targets hedge-generate"  # the resident-set run
# shellcheck disable=SC2086  # targets is a list
cmake --build "$build_dir" -j "$jobs" --target $targets >&2
bench=$build_dir/bench/hedge_bench_model
generate=$build_dir/tools/hedge-generate

export HEDGE_BENCH_MODELS=${HEDGE_BENCH_MODELS:-$root/build/models}
out=build/compare-llamacpp/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

if [ -n "$batch" ]; then
  command="scripts/compare-llamacpp.sh --batch \"$batch\" --build-dir $build_dir --models \"$models\"${formats:+ --formats \"$formats\"} --threads \"$threads\" --rounds $rounds"
  for file in $files; do
    # shellcheck disable=SC2086  # batch is a list
    model_rounds "${file%%:*}" "${file#*:}" "decode|batch_decode($(echo "$batch" | tr ' ' '|'))" ", batches of $batch" \
      batch $batch
  done
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  table "$out" "$files" "$threads" "$batch" "$rounds" "$command" "$load_before" "$load_after" <<'JS' | tee "$out/table.md"
const [dir, files_, threads, batches, rounds, command, loadBefore, loadAfter] = process.argv.slice(2);
const files = fs.readdirSync(dir).sort();
let cpu = "";
const rows = [];
for (const [model, format] of files_.split(" ").map((f) => f.split(":"))) {
    const name = `${model}-${format}`;
    for (const t of threads.split(" ")) {
        const hedge = files.filter((f) => f.startsWith(`hedge-${name}-t${t}-`) && f.endsWith(".json"))
            .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")));
        const peer = files.filter((f) => f.startsWith(`llamacpp-${name}-t${t}-`))
            .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")));
        cpu = hedge[0].context.hedge_cpu_name;
        const rate = (prefix) => median(hedge.map((h) => {
            const b = h.benchmarks.find((x) => x.name.startsWith(prefix));
            if (!b || b.error_occurred) throw new Error(`${prefix} ${name} t${t}: ${b ? b.error_message : "no result"}`);
            return b.tok_per_s;
        }));
        const one = rate("llama/decode/");
        const peerOne = median(peer.map((p) => p.batch_tok_per_s["1"] ?? NaN));
        for (const s of batches.split(" ").map(Number)) {
            const aggregate = rate(`llama/batch_decode${s}/`);
            const peerAggregate = median(peer.map((p) => p.batch_tok_per_s[String(s)]));
            rows.push(`| ${model} | ${format} | ${t} | ${s} | ${f1(aggregate)} | ${f2(aggregate / one)} | ${f1(0.9 * s)} | ` +
                `${f1(peerAggregate)} | ${f2(peerAggregate / peerOne)} | **${f2(aggregate / peerAggregate)}** |`);
        }
    }
}
const lines = [
    `${new Date().toISOString().slice(0, 10)}, ${cpu}, \`${command}\``,
    `aggregate tok/s of S sessions decoding 64 tokens each at once (wall time), medians of ${rounds} interleaved ` +
        `rounds; "/ one session": over hedge's decode of one session (llama/decode) and llama.cpp's 1-sequence run; ` +
        `load average before ${loadBefore}, after ${loadAfter}`,
    "",
    "| model | weights | threads | sessions | hedge tok/s | hedge / one session | target (0.9 S) | llama.cpp tok/s | llama.cpp / one sequence | hedge / llama.cpp |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
];
process.stdout.write(lines.join("\n") + "\n");
JS
  exit 0
fi

for file in $files; do
  model=${file%%:*}
  format=${file#*:}
  name=$model-$format
  path=$HEDGE_BENCH_MODELS/$name.gguf
  # shellcheck disable=SC2086  # prefill_tokens is a list
  model_rounds "$model" "$format" "decode|prefill[0-9]+" "" bench $prefill_tokens
  echo "== $name: hedge-generate's resident set" >&2
  /usr/bin/time -v "$generate" -m "$path" -n $((decode_tokens + 8)) -t 0 --ignore-eos --threads "${threads##* }" \
    -i "Once upon a time" > /dev/null 2> "$out/rss-$name.log"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table "$out" "$files" "$threads" "$prefill_tokens" "$rounds" "$command" "$load_before" "$load_after" <<'JS' | tee "$out/table.md"
const [dir, files_, threads, prefills, rounds, command, loadBefore, loadAfter] = process.argv.slice(2);
const files = fs.readdirSync(dir).sort();
const models = files_.split(" ").map((f) => f.split(":"));
// The median, then the slowest and fastest run: how much the machine moved under the runs.
// Tokens per second of the process's CPU time (every thread's) in one hedge run.
const cpuRate = (b, tokens) => {
    if (b.time_unit !== "ms") throw new Error(`${b.name}: time unit ${b.time_unit}`);
    return tokens / (b.cpu_time / 1000);
};
const decodeTokens = 64;  // bench/model/forward_bench.cpp's decode_positions
const spread = (xs) => `${f1(median(xs))} (${f1(Math.min(...xs))}-${f1(Math.max(...xs))})`;
let cpu = "";
const decodeRows = [];
const prefillRows = [];
const memoryRows = [];
for (const [model, format] of models) {
    const name = `${model}-${format}`;
    for (const t of threads.split(" ")) {
        // Both lists in round order (the same name order), so entry i of each is round i.
        const hedge = files.filter((f) => f.startsWith(`hedge-${name}-t${t}-`) && f.endsWith(".json"))
            .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")));
        const peer = files.filter((f) => f.startsWith(`llamacpp-${name}-t${t}-`))
            .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")));
        const runs = (prefix) => hedge.map((h) => {
            const b = h.benchmarks.find((x) => x.name.startsWith(prefix));
            if (!b || b.error_occurred) throw new Error(`${prefix} ${name} t${t}: ${b ? b.error_message : "no result"}`);
            return b;
        });
        cpu = hedge[0].context.hedge_cpu_name;
        const decode = runs("llama/decode/");
        const hedgeRuns = decode.map((b) => b.tok_per_s);
        const peerRuns = peer.map((p) => p.decode_tok_per_s);
        const hedgeDecode = median(hedgeRuns);
        const peerDecode = median(peerRuns);
        const cpuRatio = median(decode.map((b) => cpuRate(b, decodeTokens))) / median(peer.map((p) => p.decode_tok_per_cpu_s));
        const bound = median(decode.map((b) => b.read_bw / b.bytes_per_token));
        // Fractions of the bound per round, against the bandwidth that round's hedge run measured.
        const ofBound = (rate, i) => (rate * decode[i].bytes_per_token) / decode[i].read_bw;
        decodeRows.push(`| ${model} | ${format} | ${t} | ${spread(hedgeRuns)} | ${spread(peerRuns)} | ${f2(hedgeDecode / peerDecode)} | ` +
            `${f1(bound)} | ${f2(median(hedgeRuns.map(ofBound)))} | ${f2(median(peerRuns.map(ofBound)))} | ` +
            `${f1(median(decode.map((b) => b.read_bw)) / 1e9)} | ${f2(cpuRatio)} |`);
        const cells = prefills.split(" ").map((p) => {
            const h = runs(`llama/prefill${p}/`).map((b) => b.tok_per_s);
            const l = peer.map((x) => x.prefill_tok_per_s[p]);
            const cpu = median(runs(`llama/prefill${p}/`).map((b) => cpuRate(b, Number(p)))) /
                median(peer.map((x) => x.prefill_tok_per_cpu_s[p]));
            return `${spread(h)} | ${spread(l)} | ${f2(median(h) / median(l))} | ${f2(cpu)}`;
        });
        prefillRows.push(`| ${model} | ${format} | ${t} | ${cells.join(" | ")} |`);
        if (t === threads.split(" ").at(-1)) {
            const log = fs.readFileSync(path.join(dir, `rss-${name}.log`), "utf8");
            const kb = Number((log.match(/Maximum resident set size \(kbytes\): (\d+)/) || [])[1]);
            const fileBytes = decode[0].file_bytes;
            memoryRows.push(`| ${model} | ${format} | ${f1(fileBytes / 1e6)} | ${f1(kb * 1024 / 1e6)} | ` +
                `${f1(median(peer.map((p) => p.rss_bytes)) / 1e6)} |`);
        }
    }
}
const lines = [
    `${new Date().toISOString().slice(0, 10)}, ${cpu}, \`${command}\``,
    `tok/s: median (slowest-fastest) of ${rounds} interleaved runs; hedge / llama.cpp: ratio of the medians; ` +
        `/ bound: median over rounds of tok/s over that round's bound; CPU time: the ratio of the medians of tok/s per ` +
        `CPU-second of each process (every thread); load average before ${loadBefore}, after ${loadAfter}`,
    "",
    "| model | weights | threads | hedge decode tok/s | llama.cpp decode tok/s | hedge / llama.cpp | bound tok/s | hedge / bound | llama.cpp / bound | read GB/s | hedge / llama.cpp, CPU time |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...decodeRows,
    "",
    "| model | weights | threads | " + prefills.split(" ").map((p) => `hedge prefill ${p} tok/s | llama.cpp prefill ${p} tok/s | hedge / llama.cpp | CPU time`).join(" | ") + " |",
    "|---|---|---|" + prefills.split(" ").map(() => "---|---|---|---|").join(""),
    ...prefillRows,
    "",
    "| model | weights | file MB | hedge-generate peak RSS MB | llama.cpp (node) RSS MB after decode |",
    "|---|---|---|---|---|",
    ...memoryRows,
];
process.stdout.write(lines.join("\n") + "\n");
JS
