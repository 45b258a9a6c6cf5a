#!/usr/bin/env python3
"""The `ckpt` tools on joined arrays written by test_joined.cpp (fixtures joined_from4, joined_from2).

    joined_cli_test.py --ckpt <ckpt binary> --data <test-tmp/joined> --hdf5 ON|OFF

Both data sets hold the same arrays (rows depend only on the global row), written by 4 and by 2 ranks
with uneven row counts and empty ranks: ls shows the joined kind and the row total, verify passes,
diff compares them equal across rank counts, and convert writes one dataset of every rank's rows.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ARGS = None


def ckpt(*args, rc=0):
    cmd = [ARGS.ckpt] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert rc is None or p.returncode == rc, f"{' '.join(cmd)}: exit {p.returncode}, expected {rc}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def value(step, row, col):
    return step * 1000.0 + row + 0.125 * col


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--hdf5", default="OFF")
    ARGS = ap.parse_args()
    a, b = os.path.join(ARGS.data, "from4", "ckpt.2"), os.path.join(ARGS.data, "from2", "ckpt.2")

    j = json.loads(ckpt("ls", "-l", a, "--json"))
    v = {x["name"]: x for x in j["variables"]}
    pos = v["walkers/pos"]
    assert (pos["kind"], pos["shape"], pos["blocks"], pos["bytes"]) == ("joined", [11, 3], 4, 11 * 3 * 8), pos
    # 11 rows split quadratically over 4 ranks: rank 0 holds none.
    rows = [(blk["rank"], blk["start"], blk["count"]) for blk in pos["block_list"]]
    assert rows == [(0, [0, 0], [0, 3]), (1, [0, 0], [2, 3]), (2, [2, 0], [4, 3]), (3, [6, 0], [5, 3])], rows
    assert (pos["min"], pos["max"]) == (value(2, 0, 0), value(2, 10, 2)), pos
    assert v["walkers/id"]["shape"] == [11], v["walkers/id"]
    out = ckpt("ls", a)
    line = next(l for l in out.splitlines() if l.startswith("walkers/pos "))
    assert "joined" in line and "[11, 3]" in line, line

    assert "OK (step 2" in ckpt("verify", a), a
    d = json.loads(ckpt("diff", a, b, "--tol", "0", "--json"))
    res = {x["name"]: (x["result"], x["compared"]) for x in d["variables"]}
    assert d["pass"] and res == {"walkers/pos": ("equal", 33), "walkers/id": ("equal", 11)}, d
    d = json.loads(ckpt("diff", os.path.join(ARGS.data, "from4", "ckpt.1"), b, "--json", rc=None))
    assert {x["name"]: x["result"] for x in d["variables"]}["walkers/pos"] == "incompatible", d

    if ARGS.hdf5 in ("1", "ON"):
        import h5py
        import numpy as np
        with tempfile.TemporaryDirectory() as w:
            f = os.path.join(w, "j.h5")
            ckpt("convert", a, "-o", f)
            with h5py.File(f, "r") as h:
                p = h["walkers/pos"]
                assert p.shape == (11, 3) and p.attrs["ckpt_kind"] == "joined", (p.shape, dict(p.attrs))
                want = np.array([[value(2, r, c) for c in range(3)] for r in range(11)])
                assert np.array_equal(p[()], want), p[()]
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
