#!/usr/bin/env python3
"""A traced run (CKPT_TRACE) writes a Chrome trace and an I/O summary that agree with the run, and
`ckpt report` turns them into three PNG plots."""
import argparse
import json
import os
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--mpiexec", required=True)
ap.add_argument("--app", required=True)
ap.add_argument("--ckpt", required=True)
ap.add_argument("--dir", required=True)
a = ap.parse_args()
shutil.rmtree(a.dir, ignore_errors=True)
os.makedirs(a.dir)
trace = os.path.join(a.dir, "trace")
env = dict(os.environ, CKPT_TRACE=trace)
p = subprocess.run([a.mpiexec, "-n", "4", a.app, "--cells", "400000", "--steps", "30", "--every", "10",
                    "--dir", os.path.join(a.dir, "ckpt")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True, timeout=240)
print(p.stdout)
assert p.returncode == 0, "traced run failed"
assert "ckpt I/O summary" in p.stdout, "rank 0 prints the summary table"

with open(os.path.join(trace, "trace.json")) as f:
    t = json.load(f)
spans = [e for e in t["traceEvents"] if e.get("ph") == "X"]
names = {e["name"] for e in spans}
for n in ("ckpt:checkpoint", "ckpt:capture", "ckpt:digest", "ckpt:write", "ckpt:fsync", "ckpt:commit", "ckpt:wait"):
    assert n in names, f"no {n} span in the trace"
assert {e["pid"] for e in spans} == {0, 1, 2, 3}, "every rank's events are there"
per_rank_ckpt = [sum(1 for e in spans if e["name"] == "ckpt:checkpoint" and e["pid"] == r) for r in range(4)]
assert per_rank_ckpt == [3, 3, 3, 3], per_rank_ckpt

with open(os.path.join(trace, "summary.json")) as f:
    s = json.load(f)
assert s["ranks"] == 4 and s["transport"] == "posix"
# The resolved options of the run, as YAML: the trace directory absolute, every option present.
assert "\ntrace: " in s["options"] and "\ntransport: posix\n" in s["options"], s["options"]
assert [c["step"] for c in s["checkpoints"]] == [10, 20, 30]
for c in s["checkpoints"]:
    assert c["ok"] and c["bytes"] == 400000 * 8 + 4 * 16, c  # the rod plus two 8-byte scalars per rank
    assert 0 < c["blocked_mean_s"] <= c["blocked_max_s"] and c["committed_s"] >= c["durable_max_s"] > 0, c
    assert c["files"] == 4 and c["perceived_GBps"] > 0 and c["raw_GBps"] > 0, c

p = subprocess.run([a.ckpt, "report", trace], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
print(p.stdout)
assert p.returncode == 0, "ckpt report failed"
for png in ("timeline.png", "bandwidth.png", "io_time_distribution.png"):
    path = os.path.join(trace, png)
    with open(path, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10000, f"{png} is not a real plot"
p = subprocess.run([a.ckpt, "report", a.dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
assert p.returncode != 0 and "not a traced run" in p.stdout, "a directory without a trace is a clear error"
print("trace and report ok")
