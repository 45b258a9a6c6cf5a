#!/usr/bin/env python3
"""`ckpt ls`, `ckpt verify` and `ckpt diff` of this build on tests/data/format-v1 (checkpoints written
by the last build that wrote version 1 step logs; docs/format.md, "Versions"). Every root lists the
steps it was written with, verifies clean, and the same content read through the three roots (posix
directories, an mpiio shared file, a series root with version 1 logs) compares equal bit for bit.
Then the Python package (PYTHONPATH and CKPT_LIBRARY set by the test) reads every step of every root
and compares its global arrays with what gen_checkpoints wrote (variant 0).

    format_v1_cli.py <ckpt tool> <corpus dir> <scratch dir>
"""
import json
import os
import shutil
import subprocess
import sys


def ckpt(tool, *args, rc=0):
    p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != rc:
        sys.exit(f"ckpt {' '.join(args)}: exit {p.returncode}, want {rc}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def main():
    tool, corpus, scratch = sys.argv[1:4]
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(corpus, scratch)  # the tools write nothing, but the corpus is never touched
    root = {n: os.path.join(scratch, n) for n in ("directory", "mpiio", "series")}

    for name in ("directory", "mpiio"):
        j = json.loads(ckpt(tool, "ls", "--json", root[name]))
        assert j["latest"] == 20, j
        assert [(s["name"], s["complete"]) for s in j["steps"]] == [("ckpt.20", True), ("ckpt.10", True)], j
    j = json.loads(ckpt(tool, "ls", "--json", root["series"]))
    assert j["latest"] == 15, j
    got = [(s["name"], s["complete"], s["damaged"]) for s in j["steps"]]
    assert got == [("ckpt.20 (series.0)", False, False), ("ckpt.15", True, False), ("ckpt.10", True, False)], got
    assert "rolled back" in j["steps"][0]["reason"], j
    assert all(s["nranks"] == 2 for s in j["steps"] if s["complete"]), j

    for name in root:
        j = json.loads(ckpt(tool, "verify", "--json", root[name]))
        assert j["ok"], j
    j = json.loads(ckpt(tool, "verify", "--json", root["series"]))
    assert [c["step"] for c in j["checkpoints"]] == [15, 10] and len(j["segments"]) == 2, j

    # The same content through every layout and transport: equal bit for bit.
    for a, b in (("directory/ckpt.20", "mpiio/ckpt.20"), ("directory/ckpt.10", "series/ckpt.10"),
                 ("mpiio/ckpt.10", "series/ckpt.10")):
        j = json.loads(ckpt(tool, "diff", "--json", "--tol", "0", os.path.join(scratch, a), os.path.join(scratch, b)))
        assert j["pass"], (a, b, j)
    # Steps 10 and 20 differ (values are functions of the step): diff says so, exit 1.
    ckpt(tool, "diff", "--tol", "0", os.path.join(root["directory"], "ckpt.10"),
         os.path.join(root["directory"], "ckpt.20"), rc=1)
    python_reads(root)
    shutil.rmtree(scratch, ignore_errors=True)
    print("format-v1 corpus: ls, verify, diff and the Python package hold on every root")


def expected(step):
    """What gen_checkpoints (variant 0) stores at `step` (tests/python/test_reader.py's expected())."""
    import numpy as np
    t = float(step)
    gy, gx = np.meshgrid(np.arange(16), np.arange(12), indexing="ij")
    z, a, b = np.meshgrid(np.arange(10), np.arange(4), np.arange(6), indexing="ij")
    return {"grid/temp": np.sin(0.1 * gy + 0.01 * t) + 0.5 * gx,
            "grid/dens": (1.0 + 0.25 * z + 0.125 * a + 0.0625 * b + 0.001 * t).astype(np.float32),
            "particles/id": (1000 * step + np.arange(101) - 50).astype(np.int64)}


def python_reads(root):
    import numpy as np
    import ckpt as pyckpt
    for name, steps in (("directory", [10, 20]), ("mpiio", [10, 20]), ("series", [10, 15])):
        s = pyckpt.open(root[name])
        assert s.steps == steps, (name, s.steps)
        for step in steps:
            c = s[step]
            for var, want in expected(step).items():
                got = c[var].read()
                assert got.dtype == want.dtype and got.shape == want.shape, (name, step, var)
                # numpy's sin and the C library's may differ in the last bit (as in test_reader.py)
                np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
            assert c["step"].read() == step and c["rank_info"].read(rank=1).tolist() == [1, 2, 7]


if __name__ == "__main__":
    main()
