"""ckpt.Runtime in whole MPI jobs, started by this (plain, single-process) pytest as children:

- kill + restart: docs/examples/gray_scott.py on 4 ranks, SIGKILLed (the whole session: mpiexec and every
  rank) once a checkpoint is committed, restarted on 4 ranks and on 2: each ends bit for bit where an
  uninterrupted run ends; the killed job's /dev/shm files are removed (tests/support/mpijob.py);
- N -> M: rt_job.py writes every region kind at 4 ranks and restarts at 2, 3 and 4, and at 2 -> 4;
- the same checkpoints read by the reader API (ckpt.open, verify) and by the C++ tools (`ckpt verify`,
  `ckpt ls`);
- blocks that move (AMR): rt_job.py writes a joined array of blocks and their ids at 4 ranks and restarts
  them with Runtime.set_restart_keys / set_restart_rows on 4 ranks and on a sub-communicator of 3, each
  rank asking for a scrambled, overlapping set; clear_restart_rows; the refusals on every rank;
- scattered regions (AMR blocks with ghost cells, each its own allocation): rt_job.py writes them with
  Runtime.protect_scattered at 4 ranks and restarts them into new allocations by key on a sub-communicator of
  3 and by the balanced split into pieces of 2 blocks on 4, interiors equal and ghosts untouched; the reader
  and `ckpt verify` see one joined array of the interiors;
- one rank's exception inside `with ckpt.Runtime(...)` ends the job instead of hanging it;
- a program that exits without close() has its checkpoint committed at exit; one that finalizes MPI
  itself first gets a warning, not a hang.

Environment: CKPTTEST_CLI (build/tools/ckpt), CKPTTEST_TMP, MPIEXEC (default mpiexec), PYTHONPATH and
CKPT_LIBRARY (passed on to the jobs)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from mpijob import kill_session, shm_names, wait_committed  # noqa: E402

import ckpt  # noqa: E402

MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
CLI = os.environ.get("CKPTTEST_CLI", os.path.join(ROOT, "build", "tools", "ckpt"))
GRAY_SCOTT = os.path.join(ROOT, "docs", "examples", "gray_scott.py")
RT_JOB = os.path.join(HERE, "rt_job.py")
GS_ARGS = ["--n", "96", "--steps", "400", "--every", "20"]


@pytest.fixture
def scratch(request):
    root = os.environ.get("CKPTTEST_TMP") or tempfile.gettempdir()
    os.makedirs(root, exist_ok=True)
    d = tempfile.mkdtemp(prefix=f"{request.node.name[:40]}-", dir=root)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def mpi(n, script, *args):
    return [MPIEXEC, "-n", str(n), sys.executable, "-m", "mpi4py", script, *args]


def run(cmd, timeout=240, ok=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if ok:
        assert p.returncode == 0, f"{' '.join(cmd)} exited with {p.returncode}:\n{p.stdout}"
    return p


def state(out):
    m = re.search(r"^state: (\S+) step (\d+)$", out, re.M)
    assert m, out
    return m.group(1), int(m.group(2))


def test_kill_and_restart_bit_identical(scratch):
    ref = state(run(mpi(4, GRAY_SCOTT, *GS_ARGS, "--dir", f"{scratch}/ref", "--transport", "null")).stdout)
    assert ref[1] == 400
    d = f"{scratch}/run"
    shm_before = shm_names()
    job = subprocess.Popen(mpi(4, GRAY_SCOTT, *GS_ARGS, "--dir", d, "--compute-ms", "10"), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    newest = wait_committed(job, d, 100)
    kill_session(job, shm_before)
    assert job.returncode is not None and job.returncode != 0, "the job was killed, not finished"
    killed_at = max(int(x[5:]) for x in os.listdir(d) if x.startswith("ckpt.") and x[5:].isdigit())
    assert 100 <= newest <= killed_at < 400, (newest, killed_at)
    shutil.copytree(d, f"{scratch}/run2", symlinks=True)
    out = run(mpi(4, GRAY_SCOTT, *GS_ARGS, "--dir", d, "--restart")).stdout
    assert re.search(rf"^restored: step {killed_at} ", out, re.M), out
    assert state(out) == ref, "killed at step %d and restarted on 4 ranks: not bit for bit" % killed_at
    out2 = run(mpi(2, GRAY_SCOTT, *GS_ARGS, "--dir", f"{scratch}/run2", "--restart")).stdout
    assert state(out2) == ref, "restarted on 2 ranks: not bit for bit"
    # The C++ tools read what Python wrote: every kept checkpoint verifies, the fields are f64 global arrays.
    verify_all(d)
    ls = run([CLI, "ls", f"{d}/ckpt.400"]).stdout
    for name in ("u", "v"):
        assert re.search(rf"^{name}\s+f64\s+global\s+\[96, 96\]\s+4\b", ls, re.M), ls
    assert re.search(r"^step\s+i64\s+scalar\*", ls, re.M), ls


def verify_all(d):
    """`ckpt verify d`: exit status 0 and an OK line for every complete checkpoint."""
    v = run([CLI, "verify", d]).stdout
    steps = sorted(int(x[5:]) for x in os.listdir(d) if x.startswith("ckpt.") and x[5:].isdigit())
    for s in steps:
        assert re.search(rf"ckpt\.{s}: OK \(step {s}: ", v), v
    assert len(v.strip().splitlines()) == len(steps), v


@pytest.mark.parametrize("writers,readers", [(4, 2), (4, 3), (4, 4), (2, 4)])
def test_n_to_m_restart(scratch, writers, readers):
    d = f"{scratch}/nm"
    assert "write: ok" in run(mpi(writers, RT_JOB, "write", d)).stdout
    out = run(mpi(readers, RT_JOB, "restart", d)).stdout
    assert f"restart: ok 2 {readers}" in out, out
    if writers != readers:  # the per-rank local array was refused on every rank
        assert out.count("per-rank local on") == readers, out
    # The reader API and the C++ tools on the same checkpoint.
    c = ckpt.open(d).latest()
    assert (c.step, c.nranks) == (2, writers)
    assert c.variables == ["g", "j", "step", "time", "table", "mine"]
    assert c["g"].kind == "global" and c["g"].shape == (10, 3) and c["g"][9, 2] == 2029.0
    assert c["j"].kind == "joined" and c["j"].shape == (sum(r + 2 for r in range(writers)), 2)
    assert c["step"].read() == 2 and c["time"].read() == 1.0 and c["table"].uniform
    assert not c["mine"].uniform and list(c["mine"].read(rank=writers - 1)) == [(writers - 1) * 10 + 2] * 3
    c.verify()
    ls = run([CLI, "ls", d]).stdout
    assert re.search(r"^2\s+ckpt\.2\s+complete\s+%d\s+6\b" % writers, ls, re.M), ls
    ls2 = run([CLI, "ls", f"{d}/ckpt.2"]).stdout
    for pattern in (r"^g\s+f64\s+global\s+\[10, 3\]", r"^j\s+i64\s+joined\s+\[%d, 2\]" % c["j"].shape[0],
                    r"^step\s+i64\s+scalar\*", r"^table\s+i32\s+local\*", r"^mine\s+i16\s+local\s"):
        assert re.search(pattern, ls2, re.M), (pattern, ls2)
    verify_all(d)


def test_restart_rows_by_key_and_by_index(scratch):
    d = f"{scratch}/rows"
    out = run(mpi(4, RT_JOB, "rows", d)).stdout
    assert "rows: ok 4 3" in out and "FAILED" not in out, out
    # Each collective refusal was raised on every rank of its communicator, with the same message (the
    # library's), printed by the communicator's rank 0.
    for what, exc, needle, ranks in [
            ("unknown key", "NotFoundError", "key 'id' holds 999999 (asked for as row 7 on rank 1)", 4),
            ("duplicated key", "InvalidArgumentError", "key 'dup' is not unique", 4),
            ("a missing key column", "NotFoundError", "key 'nosuch' is not in checkpoint 2", 4),
            ("a float key column", "InvalidArgumentError", "a key is a joined integer array of one value per row", 4),
            ("a row out of range", "MismatchError", "restart row 18 asked for on rank 3", 4),
            ("a wrong row count", "MismatchError", "2 rows registered on rank 0, but 3 restart rows asked for", 4),
            ("ranks that disagree", "InvalidArgumentError", "set_restart_keys", 4),
            ("unknown key on 3 ranks", "NotFoundError", "no stored row of key 'id' holds -1", 3)]:
        m = re.search(rf"^refused {what}: {exc} on ranks \[(.*)\]: (.*)$", out, re.M)
        assert m and m.group(1) == ", ".join(map(str, range(ranks))) and needle in m.group(2), (what, out)
    # What the job restarted from, through the reader: 18 blocks in rank order, found again by id.
    c = ckpt.open(d).latest()
    assert c.step == 2 and c["blocks"].shape == (18, 2, 3, 4) and c["id"].kind == "joined"
    ids = c["id"].read()
    assert sorted(ids.tolist()) == sorted(11 * k - 60 for k in range(18))
    by_id = c["blocks"].read(order_by="id")
    assert np.array_equal(by_id[:, 1, 2, 3], np.sort(ids) * 1000.0 + 1.0 + 23)
    verify_all(d)


def test_scattered_blocks_move(scratch):
    d = f"{scratch}/scattered"
    out = run(mpi(4, RT_JOB, "scattered", d)).stdout
    assert "scattered: ok 4 3" in out and "FAILED" not in out, out
    # Stored as one joined array of the 18 interiors, in the writing ranks' order, without the ghosts.
    c = ckpt.open(d).latest()
    assert c.step == 2 and c["blocks"].kind == "joined" and c["blocks"].shape == (18, 2, 3, 4), c["blocks"]
    ids = c["id"].read()
    blocks = c["blocks"].read()
    for k, i in enumerate(ids.tolist()):
        assert np.array_equal(blocks[k], 1000.0 * i + 1.0 + np.arange(24.0).reshape(2, 3, 4)), (k, i)
    assert np.array_equal(c["blocks"].read(order_by="id")[:, 0, 0, 0], np.sort(ids) * 1000.0 + 1.0)
    verify_all(d)
    ls = run([CLI, "ls", f"{d}/ckpt.2"]).stdout
    assert re.search(r"^blocks\s+f64\s+joined\s+\[18, 2, 3, 4\]", ls, re.M), ls


def test_one_rank_raises_inside_with(scratch):
    p = run(mpi(2, RT_JOB, "raise-in-with", f"{scratch}/raise"), timeout=120, ok=False)
    assert p.returncode != 0, p.stdout
    assert "rank 1 fails inside the with block" in p.stdout, p.stdout


def test_exit_without_close_commits(scratch):
    d = f"{scratch}/open"
    run(mpi(2, RT_JOB, "exit-open", d), timeout=120)
    c = ckpt.open(d).latest()
    assert c.step == 1 and c["x"].read(rank=1).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    p = run(mpi(2, RT_JOB, "finalize-open", f"{scratch}/fin"), timeout=120)
    assert "not closed before MPI_Finalize" in p.stdout, p.stdout
