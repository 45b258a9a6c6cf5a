#!/usr/bin/env python3
"""`ckpt report` draws the overlap timeline from an NVTX capture as from CKPT_TRACE, and both tell the same
story: run on the capture and the trace that trace_nvtx_4 left (fixture nvtx_capture)."""
import argparse
import json
import os
import shutil
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", required=True)
ap.add_argument("--trace", required=True)
ap.add_argument("--nvtx", required=True)
ap.add_argument("--out", required=True)
a = ap.parse_args()
shutil.rmtree(a.out, ignore_errors=True)


def report(*args):
    p = subprocess.run([a.ckpt, "report", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=100)
    print(p.stdout)
    return p


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10000


both = os.path.join(a.out, "both")
p = report(a.trace, "--nvtx", a.nvtx, "--out", both)
assert p.returncode == 0, "ckpt report RUN --nvtx CAPTURE failed"
for png in ("timeline.png", "nvtx_timeline.png", "bandwidth.png", "io_time_distribution.png"):
    assert is_png(os.path.join(both, png)), f"{png} is not a real plot"
with open(os.path.join(both, "overlap.json")) as f:
    fig = json.load(f)
assert set(fig) == {"trace", "nvtx"}, fig.keys()
assert [x["rank"] for x in fig["trace"]] == [0, 1, 2, 3] == [x["rank"] for x in fig["nvtx"]], fig
for t, n in zip(fig["trace"], fig["nvtx"]):
    # The same spans seen twice: NVTX ranges enclose the trace spans by microseconds.
    assert t["flush_ms"] > 0 and abs(t["flush_ms"] - n["flush_ms"]) <= 0.05 * t["flush_ms"] + 2, (t, n)
    assert abs(t["beside_compute_pct"] - n["beside_compute_pct"]) <= 5, (t, n)
    # CKPT_TEST_FLUSH_DELAY_MS stretches the writes while the application computes: most of the flush is beside it.
    assert n["beside_compute_pct"] > 50 and t["beside_compute_pct"] > 50, (t, n)

only = os.path.join(a.out, "nvtx-only")
p = report("--nvtx", a.nvtx, "--out", only)
assert p.returncode == 0 and is_png(os.path.join(only, "nvtx_timeline.png")), "ckpt report --nvtx alone"
assert not os.path.exists(os.path.join(only, "timeline.png")), "no trace, no trace timeline"

empty = os.path.join(a.out, "empty")
os.makedirs(empty)
p = report("--nvtx", empty)
assert p.returncode != 0 and "no nvtx.<rank>.tsv files" in p.stdout, "an empty capture is a clear error"
p = report()
assert p.returncode != 0, "ckpt report without RUN or --nvtx is an error"
print("nvtx report ok")
