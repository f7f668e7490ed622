#!/usr/bin/env bash
# Cross-tier speculation against cloud-only decoding of the same requests (hedge-speculate),
# swept over the cloud's round trip (1, 20, 100 ms), its decode speed (a 5 or 20 ms forward
# pass), the draft/target pair (stories260K quantized to Q8_0 or Q4_0 as the draft, the F32
# file served by hedge-server as the target) and an edge that drafts slower than the cloud
# decodes (30 ms a token, as a phone's would). The cloud is hedge-server on loopback with
# --round-trip-ms and --token-delay-ms (one delay per forward pass; a scoring pass is one).
# Writes build/speculative-sweep/results.jsonl, table.md (the table docs/engine.md quotes)
# and speedup.svg, and prints the table. Needs a release build (./scripts/test.sh does one).
# Usage: ./scripts/speculative-sweep.sh [TOKENS] [RUNS]   (default 64 tokens, 3 runs each)
set -euo pipefail
cd "$(dirname "$0")/.."
tokens="${1:-64}"
runs="${2:-3}"
bin=build/release/tools
model=../shared/models/stories260K.gguf
out=build/speculative-sweep
[ -x "$bin/hedge-speculate" ] && [ -x "$bin/hedge-server" ] || { echo "build first: cmake --build --preset release"; exit 1; }
[ -f "$model" ] || { echo "$model is absent (../shared)"; exit 1; }
mkdir -p "$out"
: > "$out/results.jsonl"
port=$((20000 + RANDOM % 20000))
run_point() {  # rtt delay quantize draft_delay
  "$bin/hedge-server" -m "$model" --port "$port" --round-trip-ms "$1" --token-delay-ms "$2" > "$out/server.log" 2>&1 &
  local server=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/health" && break; sleep 0.1; done
  "$bin/hedge-speculate" -m "$model" --url "http://127.0.0.1:$port" --quantize "$3" --draft-delay-ms "$4" \
    -n "$tokens" --runs "$runs" --label "$1,$2,$3,$4" | tee -a "$out/results.jsonl"
  kill "$server"; wait "$server" 2> /dev/null || true
}
for rtt in 1 20 100; do
  for delay in 5 20; do
    for q in q8_0 q4_0; do run_point "$rtt" "$delay" "$q" 0; done
  done
  run_point "$rtt" 20 q8_0 30
done
python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl")]
lines = ["| round trip ms | cloud pass ms | draft | edge ms/token | cloud-only ms | speculative ms | speed-up | acceptance | rounds | scored / generated | cost ratio | same output |",
         "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
for r in rows:
    rtt, delay, q, dd = r["label"].split(",")
    lines.append(f"| {rtt} | {delay} | {q} | {dd} | {r['cloud_only_ms']:.0f} | {r['speculative_ms']:.0f} | {r['speedup']:.2f}x | "
                 f"{r['acceptance']:.2f} | {r['rounds']} | {r['scored_positions']} / {r['cloud_generated']} | "
                 f"{r['cost_speculative'] / r['cost_cloud_only']:.2f} | {'yes' if r['same_output'] else 'NO'} |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
# Speed-up against round trip, one line per (cloud pass, draft, edge pace).
series = {}
for r in rows:
    rtt, delay, q, dd = r["label"].split(",")
    series.setdefault(f"{q} draft, {delay} ms cloud pass, edge {dd} ms/token", []).append((int(rtt), r["speedup"]))
W, H, L, B = 640, 360, 60, 40
xs = [1, 20, 100]
top = max(3.5, max(s for v in series.values() for _, s in v) * 1.1)
X = lambda rtt: L + (W - L - 230) * xs.index(rtt) / (len(xs) - 1)
Y = lambda s: H - B - (H - B - 20) * s / top
colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<line x1="{L}" y1="{Y(1)}" x2="{W-230}" y2="{Y(1)}" stroke="#999" stroke-dasharray="4"/>',
       f'<text x="{W-228}" y="{Y(1)+4}" fill="#666">1x: cloud-only</text>',
       f'<line x1="{L}" y1="{H-B}" x2="{W-230}" y2="{H-B}" stroke="black"/><line x1="{L}" y1="20" x2="{L}" y2="{H-B}" stroke="black"/>',
       f'<text x="{(L+W-230)/2}" y="{H-8}" text-anchor="middle">cloud round trip (ms)</text>',
       f'<text x="14" y="{H/2}" transform="rotate(-90 14 {H/2})" text-anchor="middle">speed-up over cloud-only</text>']
for x in xs: svg.append(f'<text x="{X(x)}" y="{H-B+14}" text-anchor="middle">{x}</text>')
for t in range(0, int(top) + 1): svg.append(f'<text x="{L-6}" y="{Y(t)+4}" text-anchor="end">{t}x</text>')
for i, (name, pts) in enumerate(sorted(series.items())):
    c = colors[i % len(colors)]
    pts.sort()
    svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{" ".join(f"{X(a)},{Y(b)}" for a, b in pts)}"/>')
    svg.append(f'<text x="{W-222}" y="{40 + 16*i}" fill="{c}">{name}</text>')
svg.append("</svg>")
open(f"{out}/speedup.svg", "w").write("\n".join(svg))
print(f"plot: {out}/speedup.svg")
EOF
