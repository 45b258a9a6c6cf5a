#!/usr/bin/env python3
"""Tests of the `ckpt` command line on real checkpoints written by gen_checkpoints.

    cli_test.py --ckpt <ckpt binary> --data <scratch dir> <case> [case options]

Case `gen` writes a data set (run by CTest as a fixture); every other case reads the data sets
`from4` (4 ranks, variant 0), `from2` (2 ranks, variant 0) and `other2` (2 ranks, variant 1), all
posix, plus `mpiio3` (3 ranks, mpiio, variant 0) and with HDF5 `h5x2` (2 ranks, hdf5 transport, rows
split, variant 0), and works in a directory of its own under --data. See gen_checkpoints.cpp for the content.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np

ARGS = None


def ckpt(*args, rc=0):
    """Runs the tool; checks its exit status; returns (stdout, stderr)."""
    cmd = [ARGS.ckpt] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if p.returncode != rc:
        raise AssertionError(f"{' '.join(cmd)}: exit {p.returncode}, expected {rc}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p.stdout, p.stderr


def ckpt_json(*args, rc=0):
    out, _ = ckpt(*args, "--json", rc=rc)
    return json.loads(out)


def one_line_error(err, *needles):
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    assert lines[0].startswith("ckpt "), lines[0]


def data(name):
    return os.path.join(ARGS.data, name)


def workdir(case):
    d = data("case-" + case)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def split(n, rank, np_):
    base, extra = divmod(n, np_)
    start = rank * base + min(rank, extra)
    return start, base + (1 if rank < extra else 0)


# ---- expected content (mirrors gen_checkpoints.cpp) -------------------------------------------------

def temp(step, variant=0):
    t = np.empty((16, 12))
    for jj in range(16):
        for xx in range(12):
            t[jj, xx] = math.sin(0.1 * jj + 0.01 * step) + 0.5 * xx  # libm sin, as the C++ side
    if variant == 1:
        t[3, 5] += 1e-3
    return t


def dens(step):
    k, a, b = np.meshgrid(np.arange(10.0), np.arange(4.0), np.arange(6.0), indexing="ij")
    return (1.0 + 0.25 * k + 0.125 * a + 0.0625 * b + 0.001 * step).astype(np.float32)


def ids(step):
    return 1000 * step + np.arange(101, dtype=np.int64) - 50


# ---- cases ---------------------------------------------------------------------------------------------

def case_gen():
    out = data(ARGS.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(ARGS.data, exist_ok=True)
    cmd = [ARGS.mpiexec, ARGS.np_flag, str(ARGS.np), ARGS.gen, out, str(ARGS.variant),
           ARGS.transport] + ARGS.layout.split("+")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    if ARGS.layout.split("+")[0] == "directory":
        assert os.path.isfile(os.path.join(out, "ckpt.20", "index")), os.listdir(out)
    else:  # one segment per step, no checkpoint directory
        names = sorted(n for n in os.listdir(out) if not n.startswith("."))
        assert names == ["series.0", "series.1"], os.listdir(out)


def case_ls():
    out, _ = ckpt("ls", data("from4"))
    assert "2 complete, 0 incomplete, latest -> ckpt.20" in out, out
    rows = [l.split() for l in out.splitlines()[2:]]
    assert [r[0] for r in rows] == ["20", "10"], out
    assert all(r[2] == "complete" and r[3] == "4" and r[4] == "7" for r in rows), out

    out, _ = ckpt("ls", data("from4/ckpt.20"))
    assert "step 20, 4 ranks, transport posix" in out, out
    line = next(l for l in out.splitlines() if l.startswith("grid/temp "))
    f = line.split()
    assert f[1:4] == ["f64", "global", "[16,"] and f[4] == "12]" and f[5] == "4", line
    assert "attribute units = K" in out, out
    line = next(l for l in out.splitlines() if l.startswith("particles/id "))
    assert line.split()[-2:] == ["19950", "20050"], line
    line = next(l for l in out.splitlines() if l.startswith("rank_info "))
    assert "local " in line and "per rank [3]" in line, line
    line = next(l for l in out.splitlines() if l.startswith("step "))
    assert "scalar*" in line and line.split()[-2:] == ["20", "20"], line

    # The `latest` link is a checkpoint too.
    out, _ = ckpt("ls", data("from4/latest"))
    assert "step 20, 4 ranks" in out, out

    # -l: one row per block (7 variables x 4 ranks), each with a checksum.
    out, _ = ckpt("ls", "-l", data("from4/ckpt.20"))
    block_rows = [l for l in out.splitlines() if re.match(r"^\s+\d+\s+\S+\s+\d+\s+\d+\s+\[", l)]
    assert len(block_rows) == 28, out
    assert all(re.search(r"0x[0-9a-f]{16}$", l) for l in block_rows), block_rows
    assert "ranks -> files:" in out, out


def ls_table(text):
    """The variable rows of a `ckpt ls <checkpoint>` listing: name -> its columns (2+ spaces apart)."""
    lines = text.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("variable "))
    rows = {}
    for l in lines[at + 1:]:
        if not l.strip() or l.startswith(" ") or l.startswith("*"):
            continue
        f = re.split(r"\s{2,}", l.strip())
        rows[f[0]] = f[1:]
    return rows


def case_ls_index2():
    """`ckpt ls` of a version-2 checkpoint reads its root index only, and says per variable what the
    one-level listing of the same content says (shape of a local array aside: per rank); -l reads every
    sub-index; a damaged sub-index leaves the root's listing whole and fails -l and verify."""
    v2 = data("v2from4/ckpt.20")
    assert os.path.isfile(os.path.join(v2, "catalog")), os.listdir(v2)
    assert all(os.path.isfile(os.path.join(v2, f"index.{r}")) for r in range(4)), os.listdir(v2)
    out, _ = ckpt("ls", v2)
    assert "step 20, 4 ranks, transport posix" in out, out
    assert "4 sub-indices" in out and "the root index only" in out, out
    assert "attribute units = K" in out, out
    one, _ = ckpt("ls", data("from4/ckpt.20"))
    want, got = ls_table(one), ls_table(out)
    assert sorted(want) == sorted(got), (one, out)
    for name, w in want.items():
        g = got[name]
        # dtype, kind, blocks, bytes, min, max
        assert [w[0], w[1]] + w[3:] == [g[0], g[1]] + g[3:], (name, w, g)
        assert g[2] == (w[2] if w[1].startswith(("global", "joined")) or w[2] == "-" else "per rank"), (name, w, g)
    # -l: every block, from the sub-indices.
    out, _ = ckpt("ls", "-l", v2)
    block_rows = [l for l in out.splitlines() if re.match(r"^\s+\d+\s+\S+\s+\d+\s+\d+\s+\[", l)]
    assert len(block_rows) == 28, out
    # Damage in a sub-index: not seen by the root's listing, seen by -l and verify.
    d = workdir("ls_index2")
    c = os.path.join(d, "ckpt.20")
    shutil.copytree(v2, c)
    sub = os.path.join(c, "index.1")
    b = bytearray(open(sub, "rb").read())
    b[len(b) // 2] ^= 0x20
    open(sub, "wb").write(bytes(b))
    out, _ = ckpt("ls", c)
    assert ls_table(out) == got, out
    _, err = ckpt("ls", "-l", c, rc=2)
    one_line_error(err, "corrupt checkpoint", "sub-index 1")
    # The root's listing reads each step's root and catalog only (complete+, with the footnote); -l and
    # --json read the sub-indices and find the damage.
    out, _ = ckpt("ls", d)
    assert re.search(r"^20\s+ckpt\.20\s+complete\+\s+4\s", out, re.M), out
    assert "two-level index: its root and catalog checked" in out, out
    out, _ = ckpt("ls", "-l", d)
    assert re.search(r"^20\s+ckpt\.20\s+damaged\s.*sub-index 1", out, re.M), out
    assert ckpt_json("ls", d)["steps"][0]["damaged"] is True
    out, _ = ckpt("ls", data("v2from4"))
    assert re.search(r"^20\s+ckpt\.20\s+complete\+\s+4\s+7\s", out, re.M), out
    out, err = ckpt("verify", c, rc=2)
    assert "sub-index 1" in out + err, out + err
    # The catalog of another commit (step 10's): the root's hash does not name it - refused as latest() does.
    shutil.copy(os.path.join(data("v2from4/ckpt.10"), "catalog"), os.path.join(c, "catalog"))
    _, err = ckpt("ls", c, rc=2)
    one_line_error(err, "corrupt checkpoint", "catalog")
    # A damaged root is refused as any damaged index is.
    root = os.path.join(c, "index")
    b = bytearray(open(root, "rb").read())
    b[len(b) // 2] ^= 0x20
    open(root, "wb").write(bytes(b))
    _, err = ckpt("ls", c, rc=2)
    one_line_error(err, "corrupt checkpoint")


def case_ls_json():
    root = ckpt_json("ls", data("from4"))
    assert root["latest"] == 20
    assert [(s["step"], s["complete"]) for s in root["steps"]] == [(20, True), (10, True)], root
    assert root["steps"][0]["nranks"] == 4 and root["steps"][0]["variables"] == 7

    j = ckpt_json("ls", "-l", data("from4/ckpt.20"))
    assert j["step"] == 20 and j["nranks"] == 4 and j["transport"] == "posix", j
    assert len(j["files"]) == 4 and sorted(f["writer"] for f in j["files"]) == [0, 1, 2, 3], j["files"]
    assert len(j["rank_files"]) == 4
    v = {x["name"]: x for x in j["variables"]}
    assert set(v) == {"grid/temp", "grid/dens", "particles/id", "step", "time", "rank_info", "blob"}, v.keys()

    t = v["grid/temp"]
    assert (t["dtype"], t["kind"], t["shape"], t["blocks"], t["bytes"]) == ("f64", "global", [16, 12], 4, 16 * 12 * 8), t
    ref = temp(20)
    assert math.isclose(t["min"], ref.min(), rel_tol=1e-15) and math.isclose(t["max"], ref.max(), rel_tol=1e-15), t
    assert t["attrs"] == {"units": "K"}
    starts = sorted((b["rank"], b["start"], b["count"]) for b in t["block_list"])
    assert starts == [(r, [0, 3 * r], [16, 3]) for r in range(4)], starts

    d = v["grid/dens"]
    assert d["dtype"] == "f32" and d["shape"] == [10, 4, 6]
    assert d["min"] == float(dens(20).min()) and d["max"] == float(dens(20).max()), d
    counts = sorted((b["rank"], b["start"][0], b["count"][0]) for b in d["block_list"])
    assert counts == [(r,) + split(10, r, 4) for r in range(4)], counts

    p = v["particles/id"]
    assert (p["dtype"], p["min"], p["max"]) == ("i64", 19950, 20050), p
    assert [b["count"] for b in p["block_list"]] == [[26], [25], [25], [25]], p["block_list"]

    s = v["step"]
    assert (s["kind"], s["uniform"], s["shape"], s["min"], s["max"]) == ("scalar", True, None, 20, 20), s
    assert (v["time"]["min"], v["time"]["max"]) == (10.0, 10.0)
    r = v["rank_info"]
    assert (r["kind"], r["uniform"], r["min"], r["max"]) == ("local", False, 0, 7), r
    b = v["blob"]
    assert (b["dtype"], b["uniform"], b["min"], b["bytes"]) == ("bytes", True, None, 64), b


def case_verify_good():
    out, _ = ckpt("verify", data("from4/ckpt.20"))
    assert "OK (step 20: 28 blocks in 4 files" in out, out
    out, _ = ckpt("verify", data("from4"))  # a root: every committed checkpoint
    assert out.count(": OK (") == 2, out
    j = ckpt_json("verify", data("from2"))
    assert j["ok"] is True and [c["step"] for c in j["checkpoints"]] == [20, 10], j
    assert all(c["problems"] == [] and c["blocks"] == 14 for c in j["checkpoints"]), j


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def case_verify_corrupt():
    w = workdir("corrupt")
    meta = ckpt_json("ls", "-l", data("from4/ckpt.20"))
    blk = next(b for v in meta["variables"] if v["name"] == "grid/temp" for b in v["block_list"] if b["rank"] == 2)

    # 1. One flipped byte inside a block's payload.
    c1 = os.path.join(w, "payload", "ckpt.20")
    shutil.copytree(data("from4/ckpt.20"), c1)
    flip(os.path.join(c1, blk["file"]), blk["offset"] + 7)
    out, _ = ckpt("verify", c1, rc=1)
    bad = [l for l in out.splitlines() if l.startswith("BAD")]
    assert len(bad) == 1, out
    for needle in ("variable 'grid/temp'", "block of rank 2", blk["file"], f"at offset {blk['offset']}", "checksum mismatch"):
        assert needle in bad[0], (needle, bad[0])
    assert "FAILED" in out, out
    j = ckpt_json("verify", c1, rc=1)
    probs = j["checkpoints"][0]["problems"]
    assert [(p["variable"], p["rank"], p["file"], p["offset"]) for p in probs] == \
        [("grid/temp", 2, blk["file"], blk["offset"])], probs
    # diff reads the same block: a corrupt checkpoint is an error (2), not a difference.
    _, err = ckpt("diff", data("from4/ckpt.20"), c1, rc=2)
    one_line_error(err, "checksum mismatch", "grid/temp")
    # the root holding it fails too
    ckpt("verify", os.path.dirname(c1), rc=1)

    # 2. A damaged data-file header.
    c2 = os.path.join(w, "header", "ckpt.20")
    shutil.copytree(data("from4/ckpt.20"), c2)
    victim = next(f for f in meta["files"] if f["writer"] == 1)["name"]
    flip(os.path.join(c2, victim), 20)
    out, _ = ckpt("verify", c2, rc=1)
    bad = [l for l in out.splitlines() if l.startswith("BAD")]
    assert len(bad) == 1 and victim in bad[0] and "header checksum" in bad[0], out

    # 3. A truncated data file: every block of that file past the cut is named.
    c3 = os.path.join(w, "trunc", "ckpt.20")
    shutil.copytree(data("from4/ckpt.20"), c3)
    f3 = os.path.join(c3, blk["file"])
    os.truncate(f3, blk["offset"] + 8)
    out, _ = ckpt("verify", c3, rc=1)
    assert "truncated" in out and "variable 'grid/temp', block of rank 2" in out, out

    # 4. A damaged index: the checkpoint is unusable (2), one line.
    c4 = os.path.join(w, "index", "ckpt.20")
    shutil.copytree(data("from4/ckpt.20"), c4)
    flip(os.path.join(c4, "index"), 40)
    _, err = ckpt("verify", c4, rc=2)
    one_line_error(err, "corrupt checkpoint", "index checksum mismatch")
    _, err = ckpt("ls", c4, rc=2)
    one_line_error(err, "corrupt checkpoint")


def case_incomplete():
    w = workdir("incomplete")
    for s in ("ckpt.10", "ckpt.20"):
        shutil.copytree(data("from4/" + s), os.path.join(w, s))
    # A crash before the commit: ckpt.30.tmp (data, no index); a committed name without an index;
    # a directory whose index describes another step.
    shutil.copytree(data("from4/ckpt.20"), os.path.join(w, "ckpt.30.tmp"), ignore=shutil.ignore_patterns("index"))
    shutil.copytree(data("from4/ckpt.20"), os.path.join(w, "ckpt.40"), ignore=shutil.ignore_patterns("index"))
    shutil.copytree(data("from4/ckpt.20"), os.path.join(w, "ckpt.50"))

    j = ckpt_json("ls", w)
    st = {s["name"]: s for s in j["steps"]}
    assert [s["name"] for s in j["steps"]] == ["ckpt.50", "ckpt.40", "ckpt.30.tmp", "ckpt.20", "ckpt.10"], j
    assert not st["ckpt.50"]["complete"] and "describes step 20" in st["ckpt.50"]["reason"]
    assert not st["ckpt.40"]["complete"] and "no index" in st["ckpt.40"]["reason"]
    assert not st["ckpt.30.tmp"]["complete"] and "never committed" in st["ckpt.30.tmp"]["reason"]
    assert st["ckpt.20"]["complete"] and st["ckpt.10"]["complete"]
    out, _ = ckpt("ls", w)
    assert "2 complete, 3 incomplete" in out, out
    assert re.search(r"^40\s+ckpt\.40\s+incomplete .*no index", out, re.M), out

    _, err = ckpt("ls", os.path.join(w, "ckpt.40"), rc=2)
    one_line_error(err, "incomplete checkpoint", "no index")
    _, err = ckpt("verify", os.path.join(w, "ckpt.40"), rc=2)
    one_line_error(err, "incomplete checkpoint")
    _, err = ckpt("verify", os.path.join(w, "ckpt.30.tmp"), rc=2)
    one_line_error(err, "never committed")
    _, err = ckpt("diff", os.path.join(w, "ckpt.30.tmp"), data("from4/ckpt.20"), rc=2)
    one_line_error(err, "never committed")

    # The root: committed checkpoints are verified, the .tmp is skipped, the broken ones count as bad.
    j = ckpt_json("verify", w, rc=1)
    res = {c["path"].split("/")[-1]: c["ok"] for c in j["checkpoints"]}
    assert res == {"ckpt.50": False, "ckpt.40": False, "ckpt.20": True, "ckpt.10": True}, res
    assert len(j["skipped"]) == 1 and "ckpt.30.tmp" in j["skipped"][0]
    # diff and convert of a root take its newest complete checkpoint (ckpt.20, not 40 or 50).
    j = ckpt_json("diff", w, data("from4"), "--tol", "0")
    assert j["pass"] and j["a"]["step"] == 20, j

    # Missing paths and empty roots.
    _, err = ckpt("ls", data("no-such-dir"), rc=2)
    one_line_error(err, "no-such-dir", "No such file")
    _, err = ckpt("verify", data("no-such-dir"), rc=2)
    one_line_error(err, "No such file")
    _, err = ckpt("diff", data("from4"), data("no-such-dir"), rc=2)
    one_line_error(err, "No such file")
    _, err = ckpt("convert", data("no-such-dir"), "-o", os.path.join(w, "x.h5"), rc=2)
    one_line_error(err)
    empty = os.path.join(w, "empty")
    os.makedirs(empty)
    out, _ = ckpt("ls", empty)
    assert "0 complete, 0 incomplete" in out, out
    _, err = ckpt("verify", empty, rc=2)
    one_line_error(err, "no committed checkpoint")
    _, err = ckpt("diff", empty, data("from4"), rc=2)
    one_line_error(err, "no complete checkpoint")
    ckpt("frobnicate", rc=2)  # unknown subcommand: usage error


def case_diff_nm():
    # Same content written by 4 and by 2 ranks: global arrays and uniform values compare equal.
    j = ckpt_json("diff", data("from4/ckpt.20"), data("from2/ckpt.20"), "--tol", "0")
    assert j["pass"] is True and j["a"]["nranks"] == 4 and j["b"]["nranks"] == 2, j
    v = {x["name"]: x for x in j["variables"]}
    for name, n in (("grid/temp", 192), ("grid/dens", 240), ("particles/id", 101), ("step", 1), ("time", 1), ("blob", 16)):
        assert v[name]["result"] == "equal", v[name]
        assert v[name]["compared"] == n and v[name]["differing"] == 0, v[name]
        if name != "blob":
            assert v[name]["mag_error"] == 0 and v[name]["max_abs"] == 0 and v[name]["rel_l2"] == 0, v[name]
    assert v["rank_info"]["result"] == "skipped" and not v["rank_info"]["fails"], v["rank_info"]
    out, _ = ckpt("diff", data("from4"), data("from2"), "--tol", "0")  # roots: their latest
    assert "tolerance 0 on the magnitude error: PASS" in out, out
    # Same rank count: per-rank variables are compared rank by rank.
    j = ckpt_json("diff", data("from2/ckpt.20"), data("other2/ckpt.20"))
    assert {x["name"]: x["result"] for x in j["variables"]}["rank_info"] == "equal", j
    # Two steps of one run differ everywhere but in blob and rank_info.
    j = ckpt_json("diff", data("from4/ckpt.10"), data("from4/ckpt.20"), "--tol", "1e-9", rc=1)
    res = {x["name"]: x["result"] for x in j["variables"]}
    assert res == {"grid/temp": "differs", "grid/dens": "differs", "particles/id": "differs", "step": "differs",
                   "time": "differs", "rank_info": "equal", "blob": "equal"}, res
    s = next(x for x in j["variables"] if x["name"] == "step")
    assert s["max_abs"] == 10 and s["mag_error"] == 0.5, s  # |10-20| / max(10, 20)


def case_diff_differs():
    a, b = data("from4/ckpt.20"), data("other2/ckpt.20")
    j = ckpt_json("diff", a, b, "--tol", "1e-6", rc=1)
    assert j["pass"] is False
    v = {x["name"]: x for x in j["variables"]}
    t = v["grid/temp"]
    ta, tb = temp(20, 0), temp(20, 1)
    want_me = np.abs(ta - tb).max() / max(np.abs(ta).max(), np.abs(tb).max(), 1e-99)
    want_l2 = np.sqrt(((ta - tb) ** 2).sum()) / max(np.sqrt((ta ** 2).sum()), np.sqrt((tb ** 2).sum()))
    assert t["result"] == "differs" and t["differing"] == 1 and t["compared"] == 192 and t["fails"], t
    assert math.isclose(t["max_abs"], 1e-3, rel_tol=1e-9), t
    assert math.isclose(t["mag_error"], want_me, rel_tol=1e-9), (t, want_me)
    assert math.isclose(t["rel_l2"], want_l2, rel_tol=1e-9), (t, want_l2)
    assert all(x["result"] == "equal" for n, x in v.items() if n not in ("grid/temp", "rank_info")), v
    out, _ = ckpt("diff", a, b, "--tol", "1e-6", rc=1)
    line = next(l for l in out.splitlines() if l.startswith("grid/temp"))
    assert "differs" in line and "FAIL" in line, line
    assert "PASS" not in out and out.rstrip().endswith("FAIL"), out
    # A looser tolerance passes; without --tol diff only reports (exit 0).
    ckpt("diff", a, b, "--tol", "1e-2")
    ckpt("diff", a, b)
    # --var picks variables.
    j = ckpt_json("diff", a, b, "--var", "grid/dens", "--var", "step", "--tol", "0")
    assert [x["name"] for x in j["variables"]] == ["grid/dens", "step"] and j["pass"], j
    j = ckpt_json("diff", "--var", "grid/temp", a, b, "--tol", "0", rc=1)  # options before A B
    assert [x["name"] for x in j["variables"]] == ["grid/temp"] and not j["pass"], j
    _, err = ckpt("diff", a, b, "--var", "nosuch", rc=2)
    one_line_error(err, "no variable 'nosuch'")


def case_diff_key():
    """Joined arrays of the same blocks written by 4 and by 2 ranks (gen_joined.cpp): their rows are stored
    in different orders, so row by row they differ; matched by the key blocks/id they are equal."""
    a, b = data("join4/ckpt.20"), data("join2/ckpt.20")
    j = ckpt_json("diff", a, b, "--tol", "0", rc=1)  # by position: the orders differ
    v = {x["name"]: x for x in j["variables"]}
    assert j["key"] is None and v["blocks/rho"]["result"] == "differs" and v["blocks/rho"]["fails"], v
    j = ckpt_json("diff", a, b, "--tol", "0", "--key", "blocks/id")
    assert j["pass"] is True and j["a"]["nranks"] == 4 and j["b"]["nranks"] == 2, j
    assert j["key"]["name"] == "blocks/id" and j["key"]["in_both"] == 24, j["key"]
    assert j["key"]["only_in_a"] == [] and j["key"]["only_in_b"] == [] and j["key"]["problem"] is None, j["key"]
    v = {x["name"]: x for x in j["variables"]}
    for name, n in (("blocks/id", 24), ("blocks/rho", 96), ("blocks/level", 24), ("blocks/uid", 24),
                    ("blocks/fid", 24), ("blocks/pair", 48)):
        assert v[name]["result"] == "equal" and v[name]["by_key"], v[name]
        assert v[name]["compared"] == n and v[name]["differing"] == 0, v[name]
    assert v["time"]["result"] == "equal" and not v["time"]["by_key"], v["time"]
    # tracers/x: a joined array whose rows are not the blocks' (a balanced split of 10 rows): by position.
    assert v["tracers/x"]["result"] == "equal" and not v["tracers/x"]["by_key"], v["tracers/x"]
    assert v["tracers/x"]["compared"] == 10, v["tracers/x"]
    out, _ = ckpt("diff", a, b, "--tol", "0", "--key", "blocks/id")
    assert "key 'blocks/id': 24 value(s) in both" in out and out.rstrip().endswith("PASS"), out
    assert re.search(r"^blocks/rho .* equal \[by key\]$", out, re.M), out
    assert re.search(r"^tracers/x .* equal \[rows not those of key 'blocks/id': by position\]$", out, re.M), out
    # The same id as an unsigned 16-bit key matches the same way.
    j = ckpt_json("diff", a, b, "--tol", "0", "--key", "blocks/uid")
    assert j["pass"] is True and j["key"]["in_both"] == 24, j
    # One value changed: found through the key, the rest equal.
    j = ckpt_json("diff", a, data("joindiff2/ckpt.20"), "--tol", "0", "--key", "blocks/id", rc=1)
    v = {x["name"]: x for x in j["variables"]}
    assert v["blocks/rho"]["differing"] == 1 and v["blocks/rho"]["fails"], v["blocks/rho"]
    assert math.isclose(v["blocks/rho"]["max_abs"], 1e-3, rel_tol=1e-6), v["blocks/rho"]
    assert all(x["result"] == "equal" for n, x in v.items() if n != "blocks/rho"), v
    ckpt("diff", a, data("joindiff2/ckpt.20"), "--tol", "1e-2", "--key", "blocks/id")
    # A block missing (id 1049) and one added (9999): named, the common rows compared, FAIL.
    j = ckpt_json("diff", a, data("joinmiss2/ckpt.20"), "--tol", "0", "--key", "blocks/id", rc=1)
    assert j["key"]["only_in_a"] == [1049] and j["key"]["only_in_b"] == [9999] and j["key"]["in_both"] == 23, j
    v = {x["name"]: x for x in j["variables"]}
    assert v["blocks/rho"]["compared"] == 92 and v["blocks/rho"]["differing"] == 0, v["blocks/rho"]
    assert v["blocks/rho"]["fails"] and "1 only in A (1049)" in v["blocks/rho"]["note"], v["blocks/rho"]
    out, _ = ckpt("diff", a, data("joinmiss2/ckpt.20"), "--tol", "0", "--key", "blocks/id", rc=1)
    assert "23 value(s) in both, 1 only in A (1049), 1 only in B (9999)" in out and out.rstrip().endswith("FAIL"), out
    # --key with --var: only the variables asked for; the key itself need not be one of them.
    j = ckpt_json("diff", a, b, "--tol", "0", "--key", "blocks/id", "--var", "blocks/rho")
    assert [x["name"] for x in j["variables"]] == ["blocks/rho"] and j["pass"], j


def case_diff_key_hostile():
    """Keys that cannot be keys: exit 2 with one line naming why; a key value held twice: every variable
    matched through it is incompatible (not compared) and the diff fails, naming the value."""
    a, b = data("join4/ckpt.20"), data("join2/ckpt.20")
    _, err = ckpt("diff", a, b, "--key", "nosuch", rc=2)
    one_line_error(err, "--key", "no variable 'nosuch'")
    _, err = ckpt("diff", a, b, "--key", "blocks/fid", rc=2)
    one_line_error(err, "blocks/fid", "f64", "integer")
    _, err = ckpt("diff", a, b, "--key", "blocks/pair", rc=2)
    one_line_error(err, "blocks/pair", "one value per row")
    _, err = ckpt("diff", a, b, "--key", "time", rc=2)
    one_line_error(err, "'time'", "scalar", "joined")
    _, err = ckpt("diff", data("from4/ckpt.20"), data("from2/ckpt.20"), "--key", "particles/id", rc=2)
    one_line_error(err, "particles/id", "global", "joined")  # a global array is not a key
    j = ckpt_json("diff", a, data("joindup2/ckpt.20"), "--tol", "0", "--key", "blocks/id", rc=1)
    assert j["key"]["duplicates_in_b"] == 1 and j["key"]["duplicates_in_a"] == 0, j["key"]
    assert "not unique in B" in j["key"]["problem"] and "1028 (2 rows)" in j["key"]["problem"], j["key"]
    v = {x["name"]: x for x in j["variables"]}
    for name in ("blocks/id", "blocks/rho", "blocks/level"):
        assert v[name]["result"] == "incompatible" and v[name]["fails"] and v[name]["by_key"], v[name]
        assert "1028 (2 rows)" in v[name]["note"], v[name]
    out, _ = ckpt("diff", a, data("joindup2/ckpt.20"), "--tol", "0", "--key", "blocks/id", rc=1)
    assert "key 'blocks/id' is not unique in B" in out.splitlines()[2], out
    # A checkpoint without the key: exit 2 naming the side.
    _, err = ckpt("diff", a, data("from2/ckpt.20"), "--key", "blocks/id", rc=2)
    one_line_error(err, "no variable 'blocks/id' in B")


def case_convert():
    import h5py
    w = workdir("convert")
    fa, fb, fc = (os.path.join(w, n) for n in ("a.h5", "b.h5", "c.h5"))
    out, _ = ckpt("convert", data("from4/ckpt.20"), "-o", fa)
    assert fa in out, out
    ckpt("convert", data("from2"), "-o", fb)  # a root: its newest checkpoint
    ckpt("convert", data("other2/ckpt.20"), "-o", fc)
    _, err = ckpt("convert", data("from4/ckpt.20"), "-o", fa, rc=2)
    one_line_error(err, "exists")
    ckpt("convert", data("from4/ckpt.20"), "-o", fa, "--force")

    with h5py.File(fa, "r") as f, h5py.File(fb, "r") as g, h5py.File(fc, "r") as h:
        assert f.attrs["ckpt_step"] == 20 and f.attrs["ckpt_nranks"] == 4 and g.attrs["ckpt_nranks"] == 2
        assert f.attrs["ckpt_transport"] == "posix"
        t = f["grid/temp"]
        assert t.shape == (16, 12) and t.dtype == np.float64
        assert np.allclose(t[()], temp(20), rtol=1e-15, atol=0), t[()]
        assert t.attrs["ckpt_min"] == t[()].min() and t.attrs["ckpt_max"] == t[()].max()
        assert t.attrs["ckpt_dtype"] == "f64" and t.attrs["ckpt_kind"] == "global" and t.attrs["ckpt_layout"] == "global"
        assert t.attrs["units"] == "K"
        sums = t.attrs["ckpt_xxh3_by_rank"]
        assert len(sums) == 4 and all(x != 0 for x in sums), sums
        d = f["grid/dens"]
        assert d.shape == (10, 4, 6) and d.dtype == np.float32 and np.array_equal(d[()], dens(20))
        assert d.attrs["ckpt_min"] == float(dens(20).min())
        p = f["particles/id"]
        assert p.dtype == np.int64 and np.array_equal(p[()], ids(20)) and p.attrs["ckpt_min"] == 19950
        # Every other variable, uniform or not: a group with one dataset per rank (the transport's layout).
        st = f["step"]
        assert isinstance(st, h5py.Group) and st.attrs["ckpt_layout"] == "per_rank" and st.attrs["ckpt_kind"] == "scalar"
        assert sorted(st.keys()) == ["rank0", "rank1", "rank2", "rank3"]
        assert all(st[f"rank{r}"].shape == () and st[f"rank{r}"][()] == 20 for r in range(4))
        assert st.attrs["ckpt_min"] == 20 and st.attrs["ckpt_max"] == 20
        assert f["time/rank3"][()] == 10.0
        assert np.array_equal(f["blob/rank0"][()], np.arange(0xA0, 0xB0, dtype=np.uint8))
        assert f["blob"].attrs["ckpt_dtype"] == "bytes" and "ckpt_min" not in f["blob"].attrs
        ri = f["rank_info"]
        assert isinstance(ri, h5py.Group) and ri.attrs["ckpt_layout"] == "per_rank"
        assert sorted(ri.keys()) == ["rank0", "rank1", "rank2", "rank3"]
        for r in range(4):
            x = ri[f"rank{r}"]
            assert list(x[()]) == [r, 4, 7] and x.attrs["ckpt_rank"] == r and x.attrs["ckpt_xxh3"] != 0
            assert x.attrs["ckpt_min"] == min(r, 4) and x.attrs["ckpt_max"] == 7
            assert x.attrs["ckpt_xxh3"] == ri.attrs["ckpt_xxh3_by_rank"][r]
        # The same content from 2 ranks: the same arrays; different content: one element differs.
        for name in ("grid/temp", "grid/dens", "particles/id"):
            assert np.array_equal(f[name][()], g[name][()]), name
            assert len(g[name].attrs["ckpt_xxh3_by_rank"]) == 2
        assert np.array_equal(h["grid/dens"][()], f["grid/dens"][()])
        assert np.count_nonzero(h["grid/temp"][()] != f["grid/temp"][()]) == 1
    # Readable without ckpt code by the HDF5 tools too.
    if shutil.which("h5dump"):
        p = subprocess.run(["h5dump", "-H", fa], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and 'DATASET "temp"' in p.stdout, p.stdout + p.stderr


def case_transports():
    """The same content written by other transports and decompositions reads and compares equal."""
    sets = ["mpiio3"] + (["h5x2"] if ARGS.hdf5 else [])
    for name in sets:
        j = ckpt_json("ls", data(name + "/ckpt.20"))
        assert j["transport"] == {"mpiio3": "mpiio", "h5x2": "hdf5"}[name], j["transport"]
        assert j["nranks"] == {"mpiio3": 3, "h5x2": 2}[name]
        j = ckpt_json("verify", data(name))
        assert j["ok"] and all(c["problems"] == [] for c in j["checkpoints"]), j
        j = ckpt_json("diff", data("from4/ckpt.20"), data(name + "/ckpt.20"), "--tol", "0")
        v = {x["name"]: x for x in j["variables"]}
        assert j["pass"], j
        for n, count in (("grid/temp", 192), ("grid/dens", 240), ("particles/id", 101), ("step", 1), ("time", 1)):
            assert v[n]["result"] == "equal" and v[n]["compared"] == count, v[n]
        # A different content through another transport is still found.
        j = ckpt_json("diff", data("other2/ckpt.20"), data(name + "/ckpt.20"), "--tol", "0", rc=1)
        assert [x["name"] for x in j["variables"] if x["fails"]] == ["grid/temp"], j
    # A damaged block in the shared mpiio file is named with its writer rank.
    w = workdir("transports")
    c = os.path.join(w, "ckpt.20")
    shutil.copytree(data("mpiio3/ckpt.20"), c)
    meta = ckpt_json("ls", "-l", c)
    blk = next(b for v in meta["variables"] if v["name"] == "particles/id" for b in v["block_list"] if b["rank"] == 1)
    flip(os.path.join(c, blk["file"]), blk["offset"])
    out, _ = ckpt("verify", c, rc=1)
    assert "variable 'particles/id', block of rank 1" in out, out


def case_series():
    """Layout series: steps are names (<root>/ckpt.<step>, <root>/latest), each in its own segment."""
    root = data("series4")
    out, _ = ckpt("ls", root)
    assert "2 complete, 0 incomplete, latest -> ckpt.20" in out, out
    rows = [l.split() for l in out.splitlines()[2:]]
    assert [r[:3] for r in rows] == [["20", "ckpt.20", "complete"], ["10", "ckpt.10", "complete"]], out
    out, _ = ckpt("ls", "-l", root)
    assert out.count("grid/temp") == 2, out
    j = ckpt_json("ls", root)
    assert j["latest"] == 20 and [(s["step"], s["name"], s["complete"]) for s in j["steps"]] == \
        [(20, "ckpt.20", True), (10, "ckpt.10", True)], j
    # One step by its name; `latest` is the newest step.
    for name, step, seg in (("ckpt.10", 10, "series.0"), ("ckpt.20", 20, "series.1"), ("latest", 20, "series.1")):
        out, _ = ckpt("ls", os.path.join(root, name))
        assert f"step {step}, 4 ranks, transport posix" in out and "attribute layout = series" in out, out
        assert f"data in {os.path.join(root, seg)}" in out, out
        j = ckpt_json("ls", "-l", os.path.join(root, name))
        assert j["step"] == step and j["path"] == os.path.join(root, name), j
        assert j["data_dir"] == os.path.join(root, seg), j
        assert sorted(f["name"] for f in j["files"]) == ["data.0", "data.1", "data.2", "data.3"], j["files"]
        assert sum(len(v["block_list"]) for v in j["variables"]) == 28
    _, err = ckpt("ls", os.path.join(root, "ckpt.15"), rc=2)
    one_line_error(err, "no checkpoint of step 15")
    # verify: the root (every step), one step, latest.
    out, _ = ckpt("verify", root)
    assert out.count(": OK (step") == 2 and "28 blocks in 4 files" in out, out
    # ... and each segment's bytes between the steps' streams.
    for seg in ("series.0", "series.1"):
        assert f"{os.path.join(root, seg)}: OK (segment: the bytes between the streams of 4 data files)" in out, out
    out, _ = ckpt("verify", os.path.join(root, "ckpt.10"))
    assert "ckpt.10: OK (step 10: 28 blocks in 4 files" in out, out
    j = ckpt_json("verify", os.path.join(root, "latest"))
    assert j["ok"] and j["checkpoints"][0]["step"] == 20, j
    # diff: the same content as the directory run (4 and 2 ranks), two steps of the series.
    j = ckpt_json("diff", root, data("from4"), "--tol", "0")
    assert j["pass"] and j["a"]["step"] == 20 and j["a"]["path"] == os.path.join(root, "ckpt.20"), j
    assert all(v["result"] == "equal" for v in j["variables"]), j
    j = ckpt_json("diff", os.path.join(root, "ckpt.10"), data("from2/ckpt.10"), "--tol", "0")
    assert j["pass"] and {v["name"]: v["result"] for v in j["variables"]}["grid/temp"] == "equal", j
    j = ckpt_json("diff", os.path.join(root, "ckpt.10"), os.path.join(root, "latest"), "--tol", "1e-9", rc=1)
    res = {x["name"]: x["result"] for x in j["variables"]}
    assert res["grid/temp"] == "differs" and res["step"] == "differs" and res["blob"] == "equal", res
    # convert: one step, and the root (its newest step); h5py reads what the directory run converts to.
    if ARGS.hdf5:
        import h5py
        w = workdir("series")
        f10, f20 = os.path.join(w, "s10.h5"), os.path.join(w, "s20.h5")
        ckpt("convert", os.path.join(root, "ckpt.10"), "-o", f10)
        ckpt("convert", root, "-o", f20)
        with h5py.File(f10, "r") as f, h5py.File(f20, "r") as g:
            assert f.attrs["ckpt_step"] == 10 and g.attrs["ckpt_step"] == 20 and g.attrs["ckpt_nranks"] == 4
            assert np.allclose(f["grid/temp"][()], temp(10), rtol=1e-15, atol=0)
            assert np.array_equal(g["particles/id"][()], ids(20)) and np.array_equal(g["grid/dens"][()], dens(20))
            assert g["step/rank3"][()] == 20 and g.attrs["ckpt_source"] == os.path.join(root, "ckpt.20")
        # Never into a segment, nor under a name of the root's.
        for bad in ("series.1/x.h5", "series.7", "ckpt.30"):
            _, err = ckpt("convert", root, "-o", os.path.join(root, bad), rc=2)
            one_line_error(err, "refusing")
    # Steps 10, 20, then 15 (two per segment): step 20's record is abandoned, listed, never read.
    rb = data("series4rb")
    j = ckpt_json("ls", rb)
    assert j["latest"] == 15, j
    st = [(s["step"], s["complete"]) for s in j["steps"]]
    assert st == [(20, False), (15, True), (10, True)], j
    assert "rolled back" in j["steps"][0]["reason"] and j["steps"][0]["name"] == "ckpt.20 (series.0)", j
    out, _ = ckpt("ls", rb)
    assert "2 complete, 1 incomplete, latest -> ckpt.15" in out, out
    j = ckpt_json("verify", rb)
    assert j["ok"] and [c["step"] for c in j["checkpoints"]] == [15, 10], j
    assert [(s["path"], s["ok"], s["files"]) for s in j["segments"]] == \
        [(os.path.join(rb, "series.0"), True, 4), (os.path.join(rb, "series.1"), True, 4)], j
    assert len(j["skipped"]) == 1 and "ckpt.20" in j["skipped"][0], j
    _, err = ckpt("ls", os.path.join(rb, "ckpt.20"), rc=2)
    one_line_error(err, "no checkpoint of step 20")
    j = ckpt_json("diff", os.path.join(rb, "latest"), root, rc=0)
    assert j["a"]["step"] == 15 and j["b"]["step"] == 20, j
    # One layout per root (format.md): a root holding both kinds is refused by ls and verify, listing
    # it or naming a step of it, whichever kind came second (exit 2, failed_precondition).
    w = workdir("mixed")
    series_plus_dir, dir_plus_series = os.path.join(w, "s"), os.path.join(w, "d")
    shutil.copytree(root, series_plus_dir)
    shutil.copytree(os.path.join(data("from4"), "ckpt.10"), os.path.join(series_plus_dir, "ckpt.10"))
    shutil.copytree(data("from4"), dir_plus_series, symlinks=True)
    os.makedirs(os.path.join(dir_plus_series, "series.3"))
    for mixed in (series_plus_dir, dir_plus_series):
        for cmd in ("ls", "verify"):
            _, err = ckpt(cmd, mixed, rc=2)
            one_line_error(err, "holds both checkpoint directories", "series segments")
    _, err = ckpt("ls", os.path.join(series_plus_dir, "latest"), rc=2)  # a name of the series' steps
    one_line_error(err, "holds both checkpoint directories")
    # A checkpoint directory given by its own path is self-contained: still read.
    ckpt("verify", os.path.join(series_plus_dir, "ckpt.10"))


def case_series_damage():
    w = workdir("series-damage")
    # 1. A flipped byte in a block of step 20 (segment series.1): verify names the block, 1.
    r1 = os.path.join(w, "payload")
    shutil.copytree(data("series4"), r1)
    meta = ckpt_json("ls", "-l", os.path.join(r1, "ckpt.20"))
    blk = next(b for v in meta["variables"] if v["name"] == "grid/temp" for b in v["block_list"] if b["rank"] == 2)
    flip(os.path.join(r1, "series.1", blk["file"]), blk["offset"] + 7)
    out, _ = ckpt("verify", os.path.join(r1, "ckpt.20"), rc=1)
    bad = [l for l in out.splitlines() if l.startswith("BAD")]
    assert len(bad) == 1, out
    for needle in ("variable 'grid/temp'", "block of rank 2", "series.1/" + blk["file"], f"at offset {blk['offset']}",
                   "checksum mismatch"):
        assert needle in bad[0], (needle, bad[0])
    j = ckpt_json("verify", r1, rc=1)
    assert {c["step"]: c["ok"] for c in j["checkpoints"]} == {20: False, 10: True}, j
    _, err = ckpt("diff", data("from4/ckpt.20"), r1, rc=2)
    one_line_error(err, "checksum mismatch", "grid/temp")
    ckpt("diff", data("from4/ckpt.10"), os.path.join(r1, "ckpt.10"), "--tol", "0")  # the other segment
    # 2. A damaged data-file header of the segment of step 10.
    r2 = os.path.join(w, "header")
    shutil.copytree(data("series4"), r2)
    flip(os.path.join(r2, "series.0", "data.1"), 20)
    out, _ = ckpt("verify", os.path.join(r2, "ckpt.10"), rc=1)
    assert "data.1" in out and "header checksum" in out, out
    ckpt("verify", os.path.join(r2, "ckpt.20"))
    # 3. A torn tail (a commit that did not finish): listed, skipped by verify, never read.
    r3 = os.path.join(w, "torn")
    shutil.copytree(data("series4"), r3)
    with open(os.path.join(r3, "series.1", "steps"), "ab") as f:
        f.write(b"CKPTSTEP" + bytes(13))
    j = ckpt_json("ls", r3)
    assert j["latest"] == 20 and [(s["name"], s["complete"]) for s in j["steps"]] == \
        [("ckpt.20", True), ("series.1", False), ("ckpt.10", True)], j
    assert "did not finish" in j["steps"][1]["reason"], j
    j = ckpt_json("verify", r3)
    assert j["ok"] and len(j["checkpoints"]) == 2 and any("series.1" in s for s in j["skipped"]), j
    # 4. Step 20's record cut in half: step 20 is gone, step 10 is the latest.
    r4 = os.path.join(w, "cut")
    shutil.copytree(data("series4"), r4)
    log = os.path.join(r4, "series.1", "steps")
    os.truncate(log, 40 + (os.path.getsize(log) - 40) // 2)  # 40: a version-2 log's header
    out, _ = ckpt("ls", r4)
    assert "1 complete, 1 incomplete, latest -> ckpt.10" in out and "did not finish" in out, out
    j = ckpt_json("diff", r4, data("from4/ckpt.10"), "--tol", "0")
    assert j["pass"] and j["a"]["step"] == 10, j
    _, err = ckpt("verify", os.path.join(r4, "ckpt.20"), rc=2)
    one_line_error(err, "no checkpoint of step 20", "series.1: bytes 40..", "a commit that did not finish")
    # ... and the root verifies clean: step 20's stream stays in series.1/data.<rank>, not checked.
    j = ckpt_json("verify", r4)
    assert j["ok"] and [c["step"] for c in j["checkpoints"]] == [10] and len(j["segments"]) == 1, j
    # 5. The bytes between two streams of a segment (series4rb: steps 10 and 20 in series.0, 20 rolled
    # back) and the data header's padding are zero: verify of the root reports a flip there, naming the
    # file and the offset; the steps themselves still verify.
    rb = data("series4rb")
    ends = {f["name"]: f["bytes"] for f in ckpt_json("ls", "-l", os.path.join(rb, "ckpt.10"))["files"]}
    assert ends["data.1"] % 4096 != 0, ends
    for what, at, needle in (("gap", ends["data.1"] + 3, "after the stream of step 10"),
                             ("gap-last", (ends["data.1"] + 4095) // 4096 * 4096 - 1, "after the stream of step 10"),
                             ("header-padding", 100, "of the data header's padding")):
        r5 = os.path.join(w, what)
        shutil.copytree(rb, r5)
        flip(os.path.join(r5, "series.0", "data.1"), at)
        out, _ = ckpt("verify", r5, rc=1)
        bad = [l for l in out.splitlines() if l.startswith("BAD")]
        assert len(bad) == 1, out
        for n in (os.path.join(r5, "series.0", "data.1"), needle, f"1 byte(s)", f"first at offset {at}"):
            assert n in bad[0], (n, bad[0])
        assert out.count(": OK (step") == 2 and f"{os.path.join(r5, 'series.0')}: FAILED (segment: 1 problem" in out, out
        j = ckpt_json("verify", r5, rc=1)
        assert [s["ok"] for s in j["segments"]] == [False, True] and j["segments"][0]["problems"][0]["file"] == "data.1"
        # Verify of the step alone answers for the same bytes (its record's streams are in series.0):
        # the same line, exit 1; the step of the other segment is untouched.
        out, _ = ckpt("verify", os.path.join(r5, "ckpt.10"), rc=1)
        assert [l for l in out.splitlines() if l.startswith("BAD")] == bad, out
        ckpt("verify", os.path.join(r5, "ckpt.15"))
    # 6. A roll-back and a torn tail in one segment: series4rb with step 20's record (the last of
    # series.0, rolled back) cut: its stream stays behind step 10's, never read, and the root verifies clean.
    r6 = os.path.join(w, "rollback-torn")
    shutil.copytree(rb, r6)
    log = os.path.join(r6, "series.0", "steps")
    with open(log, "rb") as f:
        raw = f.read()
    second = raw.index(b"CKPTREC2", raw.index(b"CKPTREC2") + 8)
    os.truncate(log, second + 50)
    j = ckpt_json("verify", r6)
    assert j["ok"] and [c["step"] for c in j["checkpoints"]] == [15, 10] and len(j["segments"]) == 2, j
    assert any("series.0" in s and "did not finish" in s for s in j["skipped"]), j
    # 7. A data file replaced by a link to a copy of itself (all its bytes there) and one by a FIFO:
    # verify says what each is (not a size the link's target happens to have), exit 1, no hang.
    r7 = os.path.join(w, "not-regular")
    shutil.copytree(data("series4"), r7)
    seg = os.path.join(r7, "series.1")
    shutil.move(os.path.join(seg, "data.2"), os.path.join(w, "data.2.elsewhere"))
    os.symlink(os.path.join(w, "data.2.elsewhere"), os.path.join(seg, "data.2"))
    os.unlink(os.path.join(seg, "data.3"))
    os.mkfifo(os.path.join(seg, "data.3"))
    out, _ = ckpt("verify", os.path.join(r7, "ckpt.20"), rc=1)
    for n, what in (("data.2", "a symbolic link"), ("data.3", "a FIFO")):
        assert f"BAD  data file {os.path.join(seg, n)} is not a regular file ({what})" in out, out
    assert "truncated" not in out, out
    # 8. A flipped byte in the first record of a segment (series4rb's series.0: steps 10 and 20): step
    # 10 is damaged - listed as such, not as a commit that did not finish - and the record after it
    # is still read (step 20's, rolled back by 15); verify of the root says so, exit 1.
    r8 = os.path.join(w, "damaged-record")
    shutil.copytree(rb, r8)
    flip(os.path.join(r8, "series.0", "steps"), 40 + 56 + 10)  # log header, record header, then its index
    j = ckpt_json("ls", r8)
    st = {s["name"]: s for s in j["steps"]}
    assert j["latest"] == 15, j
    assert not st["ckpt.10"]["complete"] and st["ckpt.10"]["damaged"], j
    assert "damaged" in st["ckpt.10"]["reason"] and "did not finish" not in st["ckpt.10"]["reason"], j
    assert "ckpt.20 (series.0)" in st and "rolled back" in st["ckpt.20 (series.0)"]["reason"], j
    out, _ = ckpt("ls", r8)
    assert re.search(r"^10\s+ckpt\.10\s+damaged ", out, re.M) and "(1 damaged)" in out, out
    out, _ = ckpt("verify", r8, rc=1)
    assert "ckpt.15: OK" in out or ": OK (step 15" in out, out
    _, err = ckpt("verify", os.path.join(r8, "ckpt.10"), rc=2)
    one_line_error(err, "damaged")


def case_segment_paths():
    """A segment of a series root, or a file in one, is neither a root nor a checkpoint: every subcommand
    refuses it (exit 2, one line) and names the root to give instead."""
    root = data("series4")
    w = workdir("segment-paths")
    cases = [(os.path.join(root, "series.0"), "is segment 0"),
             (os.path.join(root, "series.1") + "/", "is segment 1"),
             (os.path.join(root, "series.1", "data.2"), "is a file of segment 1"),
             (os.path.join(root, "series.0", "steps"), "is a file of segment 0")]
    for path, what in cases:
        needle = f"{path} {what} of the series root {root}; give the root"
        for cmd, args in (("ls", [path]), ("ls", ["-l", path, "--json"]), ("verify", [path]),
                          ("diff", [path, root]), ("diff", [os.path.join(root, "ckpt.10"), path]),
                          ("convert", [path, "-o", os.path.join(w, "x.h5")])):
            out, err = ckpt(cmd, *args, rc=2)
            assert out == "", out
            one_line_error(err, f"ckpt {cmd}: ", needle)
        assert not os.path.exists(os.path.join(w, "x.h5"))
    # Not a segment: a regular file named series.3 in a directory root, a missing one, the root itself.
    plain = os.path.join(w, "dirroot")
    shutil.copytree(data("from4"), plain)
    open(os.path.join(plain, "series.3"), "w").close()
    _, err = ckpt("verify", os.path.join(plain, "series.3"), rc=2)
    one_line_error(err, "not a directory")
    ckpt("verify", plain)
    _, err = ckpt("ls", os.path.join(root, "series.9"), rc=2)
    one_line_error(err, "No such file or directory")
    ckpt("ls", root)


def case_convert_unavailable():
    w = workdir("convert-unavailable")
    _, err = ckpt("convert", data("from4/ckpt.20"), "-o", os.path.join(w, "a.h5"), rc=2)
    one_line_error(err, "built without HDF5")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--np-flag", default="-n", help="pass as --np-flag=-n")
    ap.add_argument("--gen")
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--variant", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--transport", default="posix")
    ap.add_argument("--layout", default="directory", help="directory, series or series+rollback")
    ap.add_argument("--hdf5", type=int, default=0, help="1 when the build has HDF5 (data set h5x2 exists)")
    ap.add_argument("case")
    ARGS = ap.parse_args()
    globals()["case_" + ARGS.case]()
    print(f"cli_test {ARGS.case}: passed")


if __name__ == "__main__":
    main()
