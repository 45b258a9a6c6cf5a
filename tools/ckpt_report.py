#!/usr/bin/env python3
"""ckpt report [RUN] [--nvtx CAPTURE]: plots from a run traced with CKPT_TRACE=RUN (trace.json +
summary.json) and/or from an NVTX capture of a run (CAPTURE/nvtx.<rank>.tsv, written by the injection
library tests/trace/nvtx_record.cpp loaded through NVTX_INJECTION64_PATH).

  timeline.png              (RUN) per rank, the application thread (checkpoint/wait calls; the gaps are
                            compute) above the flush threads (digest, write, fsync) and the commit
                            thread: capture and flush overlapping the computation
  nvtx_timeline.png         (CAPTURE) the same timeline drawn from the NVTX ranges of the "ckpt" domain,
                            threads told apart by the names ckpt gives them (nvtxNameOsThreadA), plus the
                            application's own NVTX ranges (other domains) in grey on its thread. With RUN
                            too, both pictures share one time axis (trace.json records each rank's
                            steady-clock origin), so one can be checked against the other
  bandwidth.png             (RUN) per checkpoint: perceived bandwidth (bytes / slowest rank's blocked
                            time) against raw bandwidth (bytes / time to commit) - seed 004's two figures
  io_time_distribution.png  (RUN) per rank: time blocked in checkpoint() and time its flush threads
                            spent writing, summed over the run (as seed 004's Figs. 9-11)
  overlap.json              per source and rank: flush-thread time (digest, write, fsync, commit) and the
                            part of it during which the application thread was not inside a ckpt call
                            (i.e. computing), also printed as a table
Writes into --out (default RUN, else CAPTURE) and prints the paths. Exit status 0, or 2 with one line
"ckpt report: <what>" on stderr when it cannot do its job (a usage error, a missing or unreadable input,
JSON that is not a trace, a plot that cannot be written), as every ckpt subcommand (docs/cli.md).
"""
import argparse
import collections
import glob
import json
import os
import re
import sys

plt = None  # matplotlib.pyplot, imported once the inputs are read (a bad input needs no matplotlib)


class Unusable(Exception):
    """An input the report cannot use, or a plot it cannot write: exit 2 with the message."""


def shown(text):
    r"""Text for a terminal (docs/cli.md, "Bytes in names and annotations"): printable UTF-8 characters as
    they are, a backslash as \\, every other byte (control characters, bytes that are not UTF-8) as \xNN."""
    out = []
    for ch in os.fsencode(text).decode("utf-8", "surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append("\\x%02x" % (o - 0xDC00))
        elif o < 0x20 or 0x7F <= o <= 0x9F:
            out.append("".join("\\x%02x" % c for c in ch.encode()))
        else:
            out.append("\\\\" if ch == "\\" else ch)
    return "".join(out)


def say(text):
    print(shown(text))


def die(text):
    """One line on stderr and exit status 2."""
    sys.stderr.write(shown("ckpt report: " + text) + "\n")
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and status 2, not usage text
        die(message)

COLORS = {"ckpt:checkpoint": "#1f77b4", "ckpt:capture": "#aec7e8", "ckpt:wait": "#7f7f7f",
          "ckpt:digest": "#ff7f0e", "ckpt:write": "#2ca02c", "ckpt:fsync": "#98df8a",
          "ckpt:commit": "#d62728", "ckpt:restart": "#9467bd", "ckpt:wait_d2h": "#bcbd22",
          "ckpt:d2h": "#17becf", "ckpt:d2d": "#9edae5", "ckpt:h2d_sync": "#c5b0d5", "app": "#c7c7c7"}
THREADS = ["application", "flush: digest", "flush: write", "commit"]


def number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def load(run):
    """trace.json and summary.json of a CKPT_TRACE directory, checked to be what the plots read."""
    try:
        with open(os.path.join(run, "trace.json"), "rb") as f:
            trace = json.loads(f.read().decode("utf-8"))
        with open(os.path.join(run, "summary.json"), "rb") as f:
            summary = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise Unusable(f"{run}: not a traced run ({e}); run with CKPT_TRACE={run}")

    def bad(what):
        return Unusable(f"{run}: not a trace of ckpt ({what})")

    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise bad("trace.json has no list of objects traceEvents")
    for e in events:
        if e.get("ph") == "X" and not (isinstance(e.get("pid"), int) and e["pid"] >= 0 and
                                       isinstance(e.get("tid"), int) and isinstance(e.get("name"), str) and
                                       number(e.get("ts")) and number(e.get("dur"))):
            raise bad(f"trace.json: a span without integer pid/tid, a name, numbers ts and dur: {e}"[:300])
        if e.get("name") == "ckpt_clock" and not (isinstance(e.get("args"), dict) and
                                                  number(e["args"].get("steady_origin_ns"))):
            raise bad("trace.json: a ckpt_clock event without args.steady_origin_ns")
    cps = summary.get("checkpoints") if isinstance(summary, dict) else None
    ranks = summary.get("ranks") if isinstance(summary, dict) else None
    if not (isinstance(ranks, int) and 1 <= ranks <= 4096) or not isinstance(summary.get("transport"), str):
        raise bad("summary.json has no ranks in 1..4096 and transport")
    if not isinstance(cps, list) or not all(isinstance(c, dict) and number(c.get("step")) and
                                            number(c.get("perceived_GBps")) and number(c.get("raw_GBps"))
                                            for c in cps):
        raise bad("summary.json has no list of checkpoints with step, perceived_GBps and raw_GBps")
    if any(e["pid"] >= ranks for e in events if e.get("ph") == "X"):
        raise bad("trace.json has spans of ranks beyond summary.json's ranks")
    return trace, summary


# A timeline is a list of bars (rank, row in THREADS, name, start_ns, end_ns) on one steady-clock axis.
APP_CALLS = ("ckpt:checkpoint", "ckpt:wait", "ckpt:restart")  # the application thread inside ckpt
FLUSH = ("ckpt:digest", "ckpt:write", "ckpt:fsync", "ckpt:commit")
NVTX_THREADS = {"ckpt flush: digest": 1, "ckpt flush: write": 2, "ckpt commit": 3}


def trace_bars(events):
    """Bars of a CKPT_TRACE trace.json: ts/dur are microseconds from each rank's steady-clock origin."""
    origin = {e["pid"]: e["args"]["steady_origin_ns"] for e in events if e.get("name") == "ckpt_clock"}
    return [(e["pid"], e["tid"], e["name"], origin.get(e["pid"], 0) + e["ts"] * 1e3,
             origin.get(e["pid"], 0) + (e["ts"] + e["dur"]) * 1e3) for e in events if e.get("ph") == "X"]


def load_nvtx(capture):
    """Bars of an NVTX capture: ckpt-domain ranges on ckpt's named threads and on the application thread
    (the one that calls checkpoint()); other domains' ranges on the application thread as "app" bars."""
    files = sorted(glob.glob(os.path.join(capture, "nvtx.*.tsv")))
    ranks = [m.group(1) for m in (re.match(r"nvtx\.(\d+)\.tsv$", os.path.basename(f)) for f in files) if m]
    if not ranks:
        raise Unusable(f"{capture}: no nvtx.<rank>.tsv files (an NVTX capture made with "
                       f"NVTX_INJECTION64_PATH=libnvtx_record.so NVTXREC_DIR={capture})")
    bars, problems = [], 0
    for rank in sorted(int(r) for r in ranks):
        threads, ranges = {}, []
        path = os.path.join(capture, f"nvtx.{rank}.tsv")
        try:
            with open(path, "rb") as f:
                for line in f.read().decode("utf-8", "surrogateescape").splitlines():
                    x = line.split("\t")
                    if x[0] == "thread" and len(x) == 3:
                        threads[int(x[1])] = x[2]
                    elif x[0] == "range" and len(x) == 11:
                        ranges.append((x[1], x[2], int(x[4]), int(x[6]), int(x[7])))
                    elif x[0] in ("open", "error"):
                        problems += 1
        except (OSError, ValueError) as e:
            raise Unusable(f"{path}: not an NVTX capture of nvtx_record ({e})")
        app = {tid for dom, name, tid, _, _ in ranges if dom == "ckpt" and name in APP_CALLS}
        for dom, name, tid, t0, t1 in ranges:
            row = 0 if tid in app else NVTX_THREADS.get(threads.get(tid))
            if row is None:
                continue
            bars.append((rank, row, name if dom == "ckpt" else "app", t0, t1))
    if problems:
        say(f"ckpt report: {capture}: {problems} ranges left open or misused (see the 'open'/'error' lines)")
    return bars


def timeline(bars, nranks, out, title, xlim_ns=None):
    t0 = xlim_ns[0] if xlim_ns else min((b[3] for b in bars), default=0)
    t1 = xlim_ns[1] if xlim_ns else max((b[4] for b in bars), default=t0 + 1)
    min_w = (t1 - t0) / 1e6 / 600  # ms: a bar is at least ~2 pixels wide, so short ranges stay visible
    fig, ax = plt.subplots(figsize=(12, 1.0 + 1.2 * nranks))
    rows = nranks * len(THREADS)
    # the application's own ranges first, then long spans before short ones, so nested ones stay visible
    for rank, tid, name, s, e in sorted(bars, key=lambda b: (b[2] != "app", -(b[4] - b[3]))):
        row = rank * len(THREADS) + tid
        h, y = (0.8, rows - row - 0.9) if name != "app" else (0.3, rows - row - 0.35)
        w = (e - s) / 1e6
        # a thin white edge tells adjacent chunks/iterations apart; not on bars it would swallow
        ax.broken_barh([((s - t0) / 1e6, max(w, min_w))], (y, h), color=COLORS.get(name, "black"),
                       edgecolor="white" if w > 4 * min_w else "none", linewidth=0.3)
    ax.set_yticks([rows - i - 0.5 for i in range(rows)])
    ax.set_yticklabels([f"rank {i // len(THREADS)}: {THREADS[i % len(THREADS)]}" for i in range(rows)], fontsize=7)
    ax.set_xlabel("time (ms)")
    if xlim_ns:
        ax.set_xlim(0, (xlim_ns[1] - t0) / 1e6)
    ax.set_title(title, pad=22)
    shown = [n for n in COLORS if any(b[2] == n for b in bars)]
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[n]) for n in shown]
    ax.legend(handles, [n.replace("ckpt:", "") if n != "app" else "app (own NVTX)" for n in shown], ncol=9,
              fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap_figures(bars, nranks):
    """Per rank: flush-thread busy time and the part of it while the application computed (its thread
    not inside checkpoint()/wait()/restart()), within the application's first..last ckpt call."""
    res = []
    for r in range(nranks):
        calls = [(b[3], b[4]) for b in bars if b[0] == r and b[2] in APP_CALLS]
        if not calls:
            continue
        lo, hi = min(c[0] for c in calls), max(c[1] for c in calls)
        blocked = union(calls)
        busy = beside = 0.0
        for b in bars:
            if b[0] != r or b[2] not in FLUSH:
                continue
            s, e = max(b[3], lo), min(b[4], hi)
            if e <= s:
                continue
            busy += e - s
            beside += (e - s) - sum(max(0, min(e, ce) - max(s, cs)) for cs, ce in blocked)
        res.append({"rank": r, "flush_ms": busy / 1e6, "beside_compute_ms": beside / 1e6,
                    "beside_compute_pct": 100 * beside / busy if busy else 0.0})
    return res


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
    ap = Parser(prog="ckpt report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", help="the CKPT_TRACE directory of a run")
    ap.add_argument("--nvtx", help="an NVTX capture of a run (nvtx.<rank>.tsv files)")
    ap.add_argument("--out", help="directory for the PNGs (default: RUN, else the --nvtx directory)")
    a = ap.parse_args()
    if not a.run and not a.nvtx:
        ap.error("give RUN, --nvtx, or both")
    try:
        report(a)
    except Unusable as e:
        die(str(e))


def report(a):
    global plt
    # Every input is read and checked before anything is written (a bad one leaves nothing behind).
    sources = {}
    if a.run:
        trace, summary = load(a.run)
        events = trace["traceEvents"]
        nranks = summary["ranks"]
        sources["trace"] = trace_bars(events)
    if a.nvtx:
        sources["nvtx"] = load_nvtx(a.nvtx)
        if not a.run:
            nranks = 1 + max((b[0] for b in sources["nvtx"]), default=0)
            if nranks > 4096:
                raise Unusable(f"{a.nvtx}: nvtx.<rank>.tsv files of {nranks} ranks; the plots take at most 4096")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError as e:
        raise Unusable(f"the plots need matplotlib ({e})")
    plt = pyplot
    out = a.out or a.run or a.nvtx
    every = [b for bars in sources.values() for b in bars]
    xlim = (min(b[3] for b in every), max(b[4] for b in every)) if every and len(sources) > 1 else None
    paths = []
    try:
        os.makedirs(out, exist_ok=True)
        if a.run:
            paths.append(os.path.join(out, "timeline.png"))
            timeline(sources["trace"], nranks, paths[-1],
                     "ckpt timeline (CKPT_TRACE): gaps on the application row are compute; flush and commit run "
                     "beside it", xlim)
            paths.append(os.path.join(out, "bandwidth.png"))
            bandwidth(summary, paths[-1])
            paths.append(os.path.join(out, "io_time_distribution.png"))
            io_distribution(events, nranks, paths[-1])
        if a.nvtx:
            paths.append(os.path.join(out, "nvtx_timeline.png"))
            timeline(sources["nvtx"], nranks, paths[-1],
                     "ckpt timeline from NVTX ranges (domain \"ckpt\"; grey: the application's own ranges)", xlim)
        figures = {src: overlap_figures(bars, nranks) for src, bars in sources.items()}
        paths.append(os.path.join(out, "overlap.json"))
        with open(paths[-1], "w") as f:
            json.dump(figures, f, indent=1)
    except (OSError, ValueError, OverflowError, MemoryError) as e:  # matplotlib: a figure too large to draw
        raise Unusable(f"cannot write {paths[-1] if paths else out} ({e})")
    say("flush-thread time beside the application's compute, per rank (ms, %):")
    for src, rows in figures.items():
        for x in rows:
            say(f"  {src:5s} rank {x['rank']}: flush {x['flush_ms']:9.1f}  beside compute "
                f"{x['beside_compute_ms']:9.1f}  {x['beside_compute_pct']:5.1f} %")
    for p in paths:
        say(p)


if __name__ == "__main__":
    main()
