#!/usr/bin/env python3
"""Runs a hedge bench binary with --benchmark_format=json and checks its output.

Usage: check_json.py BENCH_BINARY FILTER

The whole stdout must parse as one JSON document (nothing printed around it), its
context must carry the read bandwidth bound at each thread count with the loop that
reached it (bench/common/main.hpp), at least one benchmark must have run, and no
benchmark may report an error or be labelled ABOVE THE BOUND (a cold one reading
faster than the bound, bench/common/report.hpp), which this test turns into a failure.
"""
import json
import subprocess
import sys

MAX_BW_FRACTION = 1.05  # bench/common/report.hpp: max_bw_fraction


def main() -> int:
    binary, pattern = sys.argv[1], sys.argv[2]
    run = subprocess.run([binary, f"--benchmark_filter={pattern}", "--benchmark_min_time=0.05",
                          "--benchmark_format=json"], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        print(f"{binary} exited {run.returncode}:\n{run.stderr}", file=sys.stderr)
        return 1
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError as e:
        print(f"stdout is not one JSON document ({e}); it starts:\n{run.stdout[:400]}", file=sys.stderr)
        return 1
    context = report.get("context", {})
    bounds = {k: v for k, v in context.items() if k.startswith("hedge_read_bw_threads:")}
    loops = {k: v for k, v in context.items() if k.startswith("hedge_read_bw_loop_threads:")}
    if not bounds or len(loops) != len(bounds) or any(float(v) <= 0 for v in bounds.values()):
        print(f"context lacks the bound or its loop at some thread count: {context}", file=sys.stderr)
        return 1
    benchmarks = report.get("benchmarks", [])
    if not benchmarks:
        print(f"no benchmark matched {pattern!r}", file=sys.stderr)
        return 1
    failed = False
    for b in benchmarks:
        if b.get("error_occurred") or "ABOVE THE BOUND" in b.get("label", ""):
            print(f"{b['name']}: {b.get('error_message') or b.get('label')}", file=sys.stderr)
            failed = True
        elif "/cold/" in b["name"] and b.get("bw_fraction", 0.0) > MAX_BW_FRACTION:
            print(f"{b['name']}: bw_fraction {b['bw_fraction']:.3f} above the bound", file=sys.stderr)
            failed = True
        else:
            print(f"{b['name']}: bw_fraction {b.get('bw_fraction', float('nan')):.3f}")
    for key, value in sorted(bounds.items()):
        threads = key.split(":")[1]
        print(f"bound at {threads} thread(s): {float(value) * 1e-9:.2f} GB/s "
              f"({context['hedge_read_bw_loop_threads:' + threads]})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
