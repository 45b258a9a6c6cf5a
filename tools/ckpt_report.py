#!/usr/bin/env python3
"""ckpt report RUN: plots from a run traced with CKPT_TRACE=RUN (trace.json + summary.json).

  timeline.png              per rank, the application thread (checkpoint/wait calls; the gaps are
                            compute) above the flush threads (digest, write, fsync) and the commit
                            thread: capture and flush overlapping the computation
  bandwidth.png             per checkpoint: perceived bandwidth (bytes / slowest rank's blocked time)
                            against raw bandwidth (bytes / time to commit) - seed 004's two figures
  io_time_distribution.png  per rank: time blocked in checkpoint() and time its flush threads spent
                            writing, summed over the run (as seed 004's Figs. 9-11)
Writes the PNGs into RUN (or --out) and prints their paths.
"""
import argparse
import collections
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"ckpt:checkpoint": "#1f77b4", "ckpt:capture": "#aec7e8", "ckpt:wait": "#7f7f7f",
          "ckpt:digest": "#ff7f0e", "ckpt:write": "#2ca02c", "ckpt:fsync": "#98df8a",
          "ckpt:commit": "#d62728", "ckpt:restart": "#9467bd"}
THREADS = ["application", "flush: digest", "flush: write", "commit"]


def load(run):
    try:
        with open(os.path.join(run, "trace.json")) as f:
            trace = json.load(f)
        with open(os.path.join(run, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"ckpt report: {run}: not a traced run ({e}); run with CKPT_TRACE={run}")
    return trace, summary


def timeline(events, nranks, out):
    spans = [e for e in events if e.get("ph") == "X"]
    t0 = min((e["ts"] for e in spans), default=0)
    fig, ax = plt.subplots(figsize=(12, 1.0 + 1.2 * nranks))
    rows = nranks * len(THREADS)
    for e in sorted(spans, key=lambda e: -e["dur"]):  # long spans first, so nested ones stay visible
        row = e["pid"] * len(THREADS) + e["tid"]
        ax.broken_barh([((e["ts"] - t0) / 1e3, max(e["dur"] / 1e3, 0.05))], (rows - row - 0.9, 0.8),
                       color=COLORS.get(e["name"], "black"))
    ax.set_yticks([rows - i - 0.5 for i in range(rows)])
    ax.set_yticklabels([f"rank {i // len(THREADS)}: {THREADS[i % len(THREADS)]}" for i in range(rows)], fontsize=7)
    ax.set_xlabel("time (ms)")
    ax.set_title("ckpt timeline: gaps on the application row are compute; flush and commit run beside it",
                 pad=22)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    ax.legend(handles, [n.replace("ckpt:", "") for n in COLORS], ncol=8, fontsize=7, loc="lower center",
              bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def bandwidth(summary, out):
    cps = summary["checkpoints"]
    steps = [c["step"] for c in cps]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(steps, [c["perceived_GBps"] for c in cps], "o-", label="perceived (bytes / max blocked)")
    ax.plot(steps, [c["raw_GBps"] for c in cps], "s-", label="raw (bytes / time to commit)")
    ax.set_yscale("log")
    ax.set_xlabel("checkpoint step")
    ax.set_ylabel("GB/s")
    ax.set_title(f"bandwidth per checkpoint ({summary['ranks']} ranks, {summary['transport']})")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def io_distribution(events, nranks, out):
    blocked = collections.defaultdict(float)
    written = collections.defaultdict(float)
    for e in events:
        if e.get("ph") != "X":
            continue
        if e["name"] == "ckpt:checkpoint":
            blocked[e["pid"]] += e["dur"] / 1e6
        elif e["name"] in ("ckpt:write", "ckpt:fsync"):
            written[e["pid"]] += e["dur"] / 1e6
    ranks = list(range(nranks))
    fig, ax = plt.subplots(figsize=(8, 4))
    w = 0.4
    ax.bar([r - w / 2 for r in ranks], [blocked[r] for r in ranks], w, label="blocked in checkpoint()")
    ax.bar([r + w / 2 for r in ranks], [written[r] for r in ranks], w, label="flush threads writing (background)")
    ax.set_xlabel("rank")
    ax.set_ylabel("seconds, whole run")
    ax.set_xticks(ranks)
    ax.set_title("per-rank I/O time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="the CKPT_TRACE directory of a run")
    ap.add_argument("--out", help="directory for the PNGs (default: RUN)")
    a = ap.parse_args()
    trace, summary = load(a.run)
    events = trace.get("traceEvents", [])
    nranks = int(summary.get("ranks", 1))
    out = a.out or a.run
    os.makedirs(out, exist_ok=True)
    paths = [os.path.join(out, n) for n in ("timeline.png", "bandwidth.png", "io_time_distribution.png")]
    timeline(events, nranks, paths[0])
    bandwidth(summary, paths[1])
    io_distribution(events, nranks, paths[2])
    for p in paths:
        print(p)


if __name__ == "__main__":
    main()
