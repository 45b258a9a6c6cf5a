#!/usr/bin/env python3
"""Turns gpu_bench CSV rows into the markdown table of docs/performance.md.

Every figure is shown with the bound it is compared with, measured in the same run on the same device
(pinned D2H/H2D/D2D peaks, the null transport, no checkpoint), the ratio and the goal of issue 13.

    python3 perf/gpu/table.py gpu_bench.csv > gpu_bench.md
"""
import csv
import sys

COLUMNS = ["device", "ranks", "metric", "mode", "bytes", "value", "unit", "bound", "ratio", "goal", "met"]


def size(b):
    b = float(b)
    if b <= 0:
        return ""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def main(path):
    with open(path, newline="") as f:
        rows = [dict(zip(COLUMNS, r)) for r in csv.reader(f) if r and not r[0].startswith("#")]
    if not rows:
        print("no rows in", path)
        return 1
    devices = sorted({r["device"] for r in rows})
    print(f"GPU benchmark (perf/gpu/run.sh) on **{', '.join(devices)}**; every bound measured in the same run.\n")
    print("| ranks | metric | mode | size | value | same-run bound | ratio | goal | met |")
    print("|---:|---|---|---:|---:|---:|---:|---|---|")
    for r in rows:
        unit = r["unit"]
        print(f"| {r['ranks']} | {r['metric']} | {r['mode']} | {size(r['bytes'])} | {float(r['value']):.4g} {unit} "
              f"| {float(r['bound']):.4g} | {float(r['ratio']):.3f} | {r['goal']} | {r['met']} |")
    missed = [r for r in rows if r["met"] == "NO"]
    print(f"\n{len(rows)} figures, {len(missed)} goals missed.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
