#!/usr/bin/env python3
"""The adversarial suite, process part (issue 14): cases that need separate processes.

MPI_Finalize orders, two jobs on one directory, a killed lock holder, disk full on a real small
filesystem (tmpfs), kills at every step of the commit protocol (killat.c, an LD_PRELOAD), and every
`ckpt` subcommand on hostile directory contents. Every case states its promise (its docstring) and
fails on a hang (every process runs under a timeout; the whole process session is killed, since Open
MPI ranks have process groups of their own), a crash, a wrong outcome or an unclear error.

  adversarial.py --mpiexec M --app adv_app --cli ckpt --killat libkillat.so --dir D [--only NAME]
                 [--kill-trials N]   (every commit-protocol step N times; CI: 1)

docs/reliability.md has the table of every case (tests/adversarial/test_api.cpp has the others).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import mpijob  # noqa: E402
from mpijob import shm_names  # noqa: E402

ARGS = None
SHM_AT_START = shm_names()  # Open MPI segments present before this script ran: never touched
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


STORE_CASES = set()


def store_case(fn):
    """A case fixed by the store module of issue 16: run with --store-cases until that lands."""
    STORE_CASES.add(fn.__name__)
    return case(fn)


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def kill_session(p):
    """SIGKILL every process of p's session (mpiexec and every rank, whatever their process groups),
    then remove the shared-memory segments that killed jobs left (a rank killed by killat, a hang)."""
    mpijob.kill_session(p, SHM_AT_START)


def run(cmd, timeout=60, env=None, check_hang=True):
    """Runs cmd in a session of its own; a timeout is a hang: the session is killed and the case fails.
    When a rank dies (killat's SIGKILL) or exits with an error, mpiexec signals the others and waits
    odls_base_sigkill_timeout (1 s) before each further signal: ~1 s of every killed run, 40 s of the kill
    sweeps. No case is about how long mpiexec waits for the survivors: 0 here."""
    e = dict(os.environ, OMPI_MCA_odls_base_sigkill_timeout="0")
    e.update(env or {})
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(p)
        out, _ = p.communicate()
        if check_hang:
            raise Fail("HANG (no exit within %d s): %s\n%s" % (timeout, " ".join(cmd), out[-2000:]))
        return None, out
    kill_session(p)  # leftovers of a rank that outlived mpiexec
    return p.returncode, out


def crashed(rc):
    return rc is not None and (rc < 0 or rc in (134, 136, 139))


def mpi(np, *args):
    return [ARGS.mpiexec, "-n", str(np), ARGS.app] + list(args)


def cli(*args, timeout=30):
    rc, out = run([ARGS.cli] + list(args), timeout=timeout)
    check(not crashed(rc), "ckpt %s crashed (rc %s): %s" % (" ".join(args), rc, out[-1500:]))
    return rc, out


def fresh(name):
    d = os.path.join(ARGS.dir, name)
    if os.path.ismount(d):
        subprocess.run(["umount", "-l", d], check=False)
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(d + ".local", ignore_errors=True)  # adv_app --levels
    os.makedirs(d)
    return d


def make_checkpoints(d, steps=2, np=2, extra=()):
    rc, out = run(mpi(np, "--dir", d, "--steps", str(steps), "--keep", "5", *extra), timeout=60)
    check(rc == 0, "adv_app run failed (rc %s): %s" % (rc, out[-1500:]))


def app_check(d, np=2, timeout=60, extra=()):
    rc, out = run(mpi(np, "--dir", d, "--mode", "check", *extra), timeout=timeout)
    check(not crashed(rc), "check crashed: " + out[-1500:])
    return rc, out


def index_files(ckpt_dir):
    """Data file names of a checkpoint, from `ckpt ls --json` of it."""
    rc, out = cli("ls", "--json", ckpt_dir)
    check(rc == 0, "ls --json %s: %s" % (ckpt_dir, out))
    j = json.loads(out)
    return sorted({b["file"] for v in j.get("variables", []) for b in v.get("blocks", [])} |
                  {f["name"] for f in j.get("files", [])})


# ---- MPI_Finalize orders -------------------------------------------------------------------------

@case
def finalize_before_runtime_destructor():
    """MPI_Finalize with a checkpoint in flight, the Runtime destroyed after it (a Runtime in main's
    scope): no crash, the checkpoint in flight commits and verifies, later calls fail cleanly."""
    d = fresh("finalize_first")
    rc, out = run(mpi(2, "--dir", d, "--mode", "finalize-first", "--flush-delay", "300"), timeout=60)
    check(rc == 0, "rc %s: %s" % (rc, out[-1500:]))
    check("in-flight ok" in out and "failed_precondition" in out, out[-1000:])
    rc, out = cli("verify", d)
    check(rc == 0, "verify after finalize-first: " + out[-800:])


@case
def finalize_after_runtime_destructor():
    """The usual order (close/destructor, then MPI_Finalize) commits and exits 0."""
    d = fresh("finalize_last")
    rc, out = run(mpi(2, "--dir", d, "--mode", "finalize-last", "--flush-delay", "100"), timeout=60)
    check(rc == 0 and "finalize-last: ok" in out, "rc %s: %s" % (rc, out[-1500:]))
    rc, out = app_check(d)
    check(rc == 0 and "check: ok step 1" in out, out[-800:])


# ---- two jobs on one directory -------------------------------------------------------------------

def wait_for_ack(ack, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if os.path.exists(ack) and open(ack).read().strip():
            return True
        time.sleep(0.1)
    return False


def start_holder(d, steps, hold_ms):
    """Job A: commits `steps` steps on d, then holds the directory for hold_ms; returns once it committed."""
    ack = d + ".ack"
    if os.path.exists(ack):
        os.unlink(ack)
    a = subprocess.Popen(mpi(2, "--dir", d, "--steps", str(steps), "--ack", ack, "--hold-ms", str(hold_ms)),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    if not wait_for_ack(ack):
        kill_session(a)
        raise Fail("job A never committed: " + a.communicate()[0][-1500:])
    return a


def committed_files(d):
    """{path: sha256} of every file of the committed checkpoints in d."""
    got = {}
    for c in sorted(n for n in os.listdir(d) if n.startswith("ckpt.") and not n.endswith(".tmp")):
        for f in sorted(os.listdir(os.path.join(d, c))):
            with open(os.path.join(d, c, f), "rb") as fh:
                got[c + "/" + f] = hashlib.sha256(fh.read()).hexdigest()
    return got


def two_jobs(name, index_format):
    """Job A holds `name`, job B is refused; A's checkpoints commit and restart, with `index_format`."""
    d = fresh(name)
    saved = os.environ.get("CKPT_INDEX_FORMAT")
    os.environ["CKPT_INDEX_FORMAT"] = str(index_format)  # both jobs and the check
    try:
        a = start_holder(d, steps=2, hold_ms=3000)
        try:
            before = committed_files(d)  # job A has committed step 1 (its ack), step 2 may follow
            rc, out = run(mpi(2, "--dir", d, "--steps", "1"), timeout=60)
            check(rc == 4 and "in use" in out and ".lock" in out, "job B: rc %s: %s" % (rc, out[-1500:]))
            after = committed_files(d)
            changed = sorted(k for k in before if before[k] != after.get(k))
            check(before and not changed, "job B changed job A's checkpoints: %s" % (changed or "none before"))
            out_a, _ = a.communicate(timeout=60)
            check(a.returncode == 0, "job A failed: " + out_a[-1500:])
        finally:
            kill_session(a)
        rc, out = app_check(d)
        check(rc == 0 and "check: ok step 2" in out, out[-800:])
    finally:
        if saved is None:
            del os.environ["CKPT_INDEX_FORMAT"]
        else:
            os.environ["CKPT_INDEX_FORMAT"] = saved
    committed = sorted(n for n in os.listdir(d) if n.startswith("ckpt.") and not n.endswith(".tmp"))
    check(committed == ["ckpt.1", "ckpt.2"], "job A's checkpoints: %s" % committed)
    return d


@case
def two_jobs_one_directory():
    """A second job on a directory a live job uses fails at once with a clear error (in use, the lock
    file), deletes nothing of the first job, whose checkpoints all commit and restart."""
    two_jobs("two_jobs", 1)


@case
def two_jobs_one_directory_index2():
    """The same with the two-level index (issue 33): job B, refused, leaves job A's sub-indices and catalogs
    alone; each of A's checkpoints has its root, catalog and one sub-index per rank, and verifies."""
    d = two_jobs("two_jobs_index2", 2)
    for step in (1, 2):
        c = os.path.join(d, "ckpt.%d" % step)
        names = set(os.listdir(c))
        check({"catalog", "index.0", "index.1"} <= names, "ckpt.%d: catalog or sub-indices missing: %s" %
              (step, sorted(names)))
        with open(os.path.join(c, "index"), "rb") as fh:
            version = int.from_bytes(fh.read(12)[8:12], "little")  # the header's version (format.md)
        check(version == 2, "ckpt.%d: the root index has version %d" % (step, version))
        rc, out = cli("verify", c)
        check(rc == 0, "ckpt verify ckpt.%d: rc %s: %s" % (step, rc, out[-800:]))


@case
def lock_of_a_killed_job_is_taken_over():
    """The lock of a job killed with SIGKILL does not block the next job: it starts and restarts."""
    d = fresh("stale_lock")
    a = start_holder(d, steps=1, hold_ms=60000)
    kill_session(a)
    a.communicate()
    check(os.path.exists(os.path.join(d, ".lock")), "no lock file left to take over")
    rc, out = app_check(d)
    check(rc == 0 and "check: ok step 1" in out, out[-800:])


# ---- disk full on a real small file system ---------------------------------------------------------

def mount_tmpfs(d):
    """Mounts a 1 MiB tmpfs on d; returns None, or the SKIP line saying why mount was refused."""
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d], capture_output=True, text=True)
    return None if r.returncode == 0 else "SKIP: cannot mount a tmpfs here (%s)" % (r.stderr.strip() or r.returncode)


@case
def disk_full_on_tmpfs():
    """ENOSPC on a real 1 MiB tmpfs: the checkpoint that does not fit fails with io_error naming the
    cause on every rank, leaves no temporary directory, the committed one stays and restarts, and
    the next checkpoint that fits commits. (Skipped with the reason where mount is refused.)"""
    d = fresh("disk_full")
    refused = mount_tmpfs(d)
    if refused:
        return refused
    try:
        make_checkpoints(d, steps=1)  # 4096 cells: 32 KiB
        rc, out = run(mpi(2, "--dir", d, "--steps", "2", "--cells", "400000", "--keep", "5"), timeout=60)
        check(rc != 0 and "io_error" in out and "space" in out.lower(), "big checkpoint: rc %s: %s" % (rc, out[-1500:]))
        left = [n for n in os.listdir(d) if n.endswith(".tmp")]
        check(not left, "temporary directories left behind: %s" % left)
        rc, out = app_check(d)
        check(rc == 0 and "check: ok step 1" in out, out[-800:])
        make_checkpoints(d, steps=3)
        rc, out = app_check(d)
        check(rc == 0 and "check: ok step 3" in out, out[-800:])
    finally:
        subprocess.run(["umount", "-l", d], check=False)


@case
def series_on_a_small_disk():
    """(issue 31, 7) layout series, keep 2, on a real 1 MiB tmpfs. One segment (no segment_steps) fills
    the disk: those checkpoints fail with io_error, and the next run is refused at construction with
    io_error naming the space a run needs and the ways out (before: it started, and no checkpoint could
    ever commit again - the segment holding the kept steps is removed only once a new one holds keep
    steps); the root still verifies. With segment_steps 2 the same disk takes checkpoints run after
    run: retention removes whole segments."""
    d = fresh("series_small_disk")
    refused = mount_tmpfs(d)
    if refused:
        return refused
    series = ["--layout", "series", "--transport", "posix", "--keep", "2", "--cells", "12288"]
    try:
        rc, out = run(mpi(2, "--dir", d, "--steps", "14", *series), timeout=60)
        check(rc != 0 and "io_error" in out, "the run filling the disk: rc %s: %s" % (rc, out[-1500:]))
        rc, out = run(mpi(2, "--dir", d, "--steps", "16", "--rollback", "3", *series), timeout=60)
        check(rc == 4 and "io_error" in out and "lacks the space to continue" in out and "free at least" in out
              and "lower keep" in out, "the next run: rc %s: %s" % (rc, out[-1500:]))
        rc, out = cli("verify", d)
        check(rc == 0, "ckpt verify of the full root: rc %s: %s" % (rc, out[-800:]))
    finally:
        subprocess.run(["umount", "-l", d], check=False)
    d = fresh("series_small_disk")
    refused = mount_tmpfs(d)
    if refused:
        return refused
    try:
        segmented = series + ["--segment-steps", "2"]
        rc, out = run(mpi(2, "--dir", d, "--steps", "14", *segmented), timeout=60)
        check(rc == 0, "run 1 with segment_steps 2: rc %s: %s" % (rc, out[-1500:]))
        for first, last in ((14, 28), (28, 40)):
            rc, out = run(mpi(2, "--dir", d, "--steps", str(last), "--rollback", str(first), *segmented), timeout=60)
            check(rc == 0, "a run from step %d: rc %s: %s" % (first, rc, out[-1500:]))
        rc, out = app_check(d, extra=("--layout", "series", "--cells", "12288"))
        check(rc == 0 and "check: ok step 40" in out, out[-800:])
        # keep 1000000 (keep every step): only the first checkpoint's room is asked for.
        rc, out = run(mpi(2, "--dir", d, "--steps", "41", "--rollback", "40", *segmented, "--keep", "1000000"),
                      timeout=60)
        check(rc == 0, "a run keeping every step: rc %s: %s" % (rc, out[-1500:]))
    finally:
        subprocess.run(["umount", "-l", d], check=False)


# ---- kills at every step of the commit protocol --------------------------------------------------

def commit_ops(d, extra, env):
    """The file-system operations rank 0 makes in a run, in order (killat's log), and the run's output."""
    log = os.path.join(ARGS.dir, "killat.log")
    if os.path.exists(log):
        os.unlink(log)
    e = dict(env, LD_PRELOAD=ARGS.killat, KILLAT_N="0", KILLAT_LOG=log, KILLAT_UNDER=d)
    rc, out = run(mpi(2, "--dir", d, *extra), timeout=60, env=e)
    check(rc == 0, "enumeration run failed: " + out[-1500:])
    return [l.split(" ", 2) for l in open(log).read().splitlines()], out


def kill_sweep(name, extra, ops, first_step=1, stride=1, check_extra=(), prepare=None, new_timeline=False,
               verify=False, min_fired=0.0, enumeration_shows=None):
    """Kills rank 0 at each of its operations `ops` from the first_step-th on, in a fresh root that
    `prepare(d)` fills first (when given); after every kill the newest checkpoint whose commit returned
    ok (or a newer one) must restore bit for bit (restarted with `check_extra`). `new_timeline`: the run
    writes timeline 1 over timeline 0 (a roll-back): once one of its steps was acknowledged, restart()
    must find timeline 1 at that step or later - never the abandoned one; before that, either.
    `verify`: `ckpt verify` of the root must pass after every kill too. `min_fired`: the share of trials whose
    run must have been killed (a run whose operations depend on timing may end before its k-th one).
    `enumeration_shows`: a text the output of the run without kills (which counts the operations) must hold."""
    def root():
        d = fresh(name)
        if prepare:
            prepare(d)
        return d

    d = root()
    env = {"KILLAT_OPS": ops, "KILLAT_RANK": "0"}
    steps, out = commit_ops(d, extra, env)
    check(len(steps) >= first_step, "only %d operations" % len(steps))
    check(enumeration_shows is None or enumeration_shows in out,
          "the run without kills printed no %r: %s" % (enumeration_shows, out[-1500:]))
    failures = []
    trials = fired = 0
    for _ in range(ARGS.kill_trials):
        for k in range(first_step, len(steps) + 1, stride):
            d = root()
            ack = d + ".ack"
            if os.path.exists(ack):
                os.unlink(ack)
            e = dict(env, LD_PRELOAD=ARGS.killat, KILLAT_N=str(k), KILLAT_UNDER=d)
            rc, out = run(mpi(2, "--dir", d, "--ack", ack, *extra), timeout=60, env=e)
            fired += rc != 0
            acked = [int(x) for x in open(ack).read().split()] if os.path.exists(ack) else []
            rc, out = app_check(d, extra=check_extra)
            trials += 1
            what = "kill at %s #%d (%s)" % (steps[k - 1][1], k, os.path.basename(steps[k - 1][2]))
            m = re.search(r"check: ok step (\d+) timeline (\d)", out)
            if new_timeline and not m:
                failures.append("%s: %s" % (what, out.strip()[-300:]))
            elif new_timeline and acked and (int(m.group(2)) != 1 or int(m.group(1)) < acked[-1]):
                failures.append("%s: step %d of the new timeline was committed, restart found step %s of "
                                "timeline %s" % (what, acked[-1], m.group(1), m.group(2)))
            elif not new_timeline and acked and not (rc == 0 and m and int(m.group(1)) >= acked[-1]):
                failures.append("%s: step %d was committed but %s" % (what, acked[-1], out.strip()[-300:]))
            elif not new_timeline and not acked and rc not in (0, 3):
                failures.append("%s: %s" % (what, out.strip()[-300:]))
            elif verify and rc != 3:  # 3: nothing was committed yet
                vrc, vout = cli("verify", d)
                if vrc != 0:
                    failures.append("%s: ckpt verify exited with %s: %s" % (what, vrc, vout.strip()[-300:]))
    print("  %s: %d kills over %d operations (%d runs killed), %d %s" %
          (name, trials, len(steps) - first_step + 1, fired, len(failures),
           "lost, torn or mixed" if new_timeline else "lost or torn"))
    check(not failures, "\n".join(failures[:10]))
    check(fired >= min_fired * trials, "only %d of %d runs were killed" % (fired, trials))


@store_case
def kill_at_every_step_of_a_recommit():
    """SIGKILL of rank 0 at every rename/unlink/rmdir/symlink of a run that commits step 1, then
    re-commits step 1 (keep=1): the committed step 1 is never lost (ckpt.N -> ckpt.N.old ->
    ckpt.N.tmp -> ckpt.N must not leave only .old and .tmp for the next start-up to delete)."""
    if kills_skipped():
        return kills_skipped()
    kill_sweep("kill_recommit", ["--steps", "1", "--recommit", "--keep", "1", "--transport", ARGS.kill_transport],
               "rename,unlink,rmdir,symlink")


def rollback_sweep(name, first, second, check_extra=(), verify=False, transport=None):
    """Writes timeline 0 (`first`) once, then sweeps kills over a run `second` (a roll-back that writes
    timeline 1) in a fresh copy of it per trial (kill_sweep's `new_timeline`); both through `transport`
    (default: the kill sweeps' transport)."""
    transport = transport or ARGS.kill_transport
    pristine = fresh(name + "_first")  # the first timeline, written once and copied for every trial
    rc, out = run(mpi(2, "--dir", pristine, *first, "--transport", transport))
    check(rc == 0, "first timeline: " + out[-1500:])

    def first_timeline(d):
        for suffix in ("", ".local"):
            shutil.rmtree(d + suffix, ignore_errors=True)
            if os.path.exists(pristine + suffix):
                shutil.copytree(pristine + suffix, d + suffix, symlinks=True)
        os.makedirs(d, exist_ok=True)

    kill_sweep(name, second + ["--keep", "2", "--transport", transport],
               "rename,unlink,rmdir,symlink,fsync,fdatasync", stride=ARGS.stride, check_extra=check_extra,
               prepare=first_timeline, new_timeline=True, verify=verify)


@store_case
def kill_at_every_step_of_a_roll_back():
    """A run restarts from step 2 while steps 3..6 of another timeline exist and commits 3..5 with
    keep=2; SIGKILL of rank 0 at each of its rename/unlink/rmdir/symlink/fsync: once a step of the
    new timeline was acknowledged, restart() finds the new timeline at that step or later - never the
    abandoned one (its step 6 is newer); before that, either timeline (the abandon renames newest
    first, so a kill leaves a prefix of the old one)."""
    if kills_skipped():
        return kills_skipped()
    rollback_sweep("kill_rollback", ["--steps", "6", "--keep", "10"],
                   ["--steps", "5", "--rollback", "2", "--timeline", "1"])


@store_case
def kill_at_every_step_with_levels():
    """(issue 31) The node-local level (one node per rank, every 2nd checkpoint drained), 4 steps with
    keep=2: SIGKILL of rank 0 at each of its operations in `dir` and its node directory - the binding
    (.root, .owner, .run), the timeline record, local commits, drains, both levels' retention: no
    acknowledged checkpoint lost or torn."""
    if kills_skipped():
        return kills_skipped()
    # Two runs with levels per kill: every 8th operation in CI (--stride 1: every one).
    kill_sweep("kill_levels", ["--steps", "4", "--keep", "2", "--levels", "--transport", ARGS.kill_transport],
               "rename,unlink,rmdir,symlink,fsync,fdatasync", stride=1 if ARGS.stride == 1 else 2 * ARGS.stride,
               check_extra=("--levels",))


@case
def kill_at_every_step_of_coalesced_checkpoints_with_levels():
    """on_busy coalesce with a CPU budget (background_cpu 0.05) and the node-local level (every 2nd
    checkpoint drained): 10 steps of ~5 ms, checkpoint() after each without waiting, so that most are
    superseded and the launches wait for the budget; SIGKILL of rank 0 at its k-th operation in `dir` and
    its node directory, for each k a run without kills reaches: no acknowledged checkpoint lost or torn
    (features combined: coalesce x budget x levels x retention)."""
    if kills_skipped():
        return kills_skipped()
    # The operations depend on timing (which checkpoints launch): most trials, not all, reach their k-th one.
    # The run without kills must have superseded some checkpoints, or nothing here was coalesced.
    kill_sweep("kill_coalesce_levels",
               ["--steps", "10", "--keep", "2", "--levels", "--coalesce", "--transport", ARGS.kill_transport],
               "rename,unlink,rmdir,symlink,fsync,fdatasync", stride=1 if ARGS.stride == 1 else 2 * ARGS.stride,
               check_extra=("--levels",), min_fired=0.5, enumeration_shows="superseded")


@store_case
def kill_at_every_step_of_a_roll_back_without_levels():
    """(issue 31) Timeline 0 with levels (steps 1..6, drained 2, 4, 6, node level keep 10); then a run
    without levels restarts from 2 and commits 3..5, killed at each of its operations: a restart with
    levels afterwards never restores the node level's old timeline once a new step was acknowledged
    (the run's `from` line in .timeline is synced before its first commit is published)."""
    if kills_skipped():
        return kills_skipped()
    rollback_sweep("kill_rollback_levels", ["--steps", "6", "--keep", "10", "--levels"],
                   ["--steps", "5", "--rollback", "2", "--timeline", "1"], check_extra=("--levels",))


@case
def kill_at_every_step_of_a_series():
    """(issue 31) layout series (posix), 6 steps with keep=2 and one step per segment: SIGKILL of rank 0
    at each of its operations - segment creation, step-log fsyncs, retention's segment renames and
    removals: no acknowledged checkpoint lost or torn."""
    if kills_skipped():
        return kills_skipped()
    kill_sweep("kill_series", ["--steps", "6", "--keep", "2", "--layout", "series", "--segment-steps", "1",
                               "--transport", "posix"],
               "rename,unlink,rmdir,symlink,fsync,fdatasync", stride=1 if ARGS.stride == 1 else 2 * ARGS.stride,
               check_extra=("--layout", "series"))


def kills_skipped():
    if os.environ.get("ADVTEST_SKIP_KILLS"):
        return "SKIP: ADVTEST_SKIP_KILLS is set (sanitizer runs: the LD_PRELOAD shim conflicts with TSan)"
    return None


@case
def kill_at_every_step_of_commit_and_retention():
    """SIGKILL of rank 0 at every rename/unlink/rmdir/symlink/fsync of three commits with keep=1
    (retention deletes the older ones): no acknowledged checkpoint lost, none torn, and `ckpt verify`
    of the root never fails on a half-deleted checkpoint."""
    if kills_skipped():
        return kills_skipped()
    kill_sweep("kill_retention", ["--steps", "3", "--keep", "1", "--transport", ARGS.kill_transport],
               "rename,unlink,rmdir,symlink,fsync,fdatasync", stride=ARGS.stride, verify=True)


# adv_app --incremental: pieces of 64 KiB, a full checkpoint every 4th; 2 x 8 regions of 64 KiB, each
# changing at about every 4th step.
INCREMENTAL = ["--incremental", "--cells", "131072"]


@case
def kill_at_every_step_of_an_incremental_chain():
    """(issue 36) Incremental checkpoints, 6 steps with keep=2: 1 full, 2..4 refer to the steps before,
    5 full, 6 refers to 5; retention keeps what kept steps refer to (1..3 while 4 is kept) and removes
    them after 6. SIGKILL of rank 0 at each of its operations: no acknowledged checkpoint lost or torn,
    every reference of what is left resolves, `ckpt verify` of the root passes."""
    if kills_skipped():
        return kills_skipped()
    kill_sweep("kill_incremental", ["--steps", "6", "--keep", "2", "--transport", "posix"] + INCREMENTAL,
               "rename,unlink,rmdir,symlink,fsync,fdatasync", stride=ARGS.stride, check_extra=INCREMENTAL,
               verify=True)


@case
def kill_at_every_step_of_a_roll_back_across_a_chain():
    """(issue 36) Timeline 0: an incremental chain 1..8 (5 full, 6..8 refer to it); a run restarts
    step 6 (which refers to 5) and commits 7 (full: a restart starts a new chain) and 8 (refers to
    7) of timeline 1 with keep=2: its first commit abandons 7..8 of timeline 0 and its retention
    removes 5 and 6 once nothing kept refers to them. SIGKILL of rank 0 at each of its operations:
    once a step of timeline 1 was acknowledged, restart() finds timeline 1 at that step or later;
    `ckpt verify` of the root passes after every kill."""
    if kills_skipped():
        return kills_skipped()
    rollback_sweep("kill_rollback_incremental", ["--steps", "8", "--keep", "10"] + INCREMENTAL,
                   ["--steps", "8", "--rollback", "6", "--timeline", "1"] + INCREMENTAL,
                   check_extra=INCREMENTAL + ["--rollback", "6"], verify=True, transport="posix")


# ---- every ckpt subcommand on hostile directory contents ---------------------------------------------

@case
def cli_missing_paths_and_files_where_dirs_belong():
    """ls/verify/diff/convert on a missing path or a plain file: exit 2 and a message naming it."""
    d = fresh("cli_missing")
    f = os.path.join(d, "plain")
    open(f, "w").write("x")
    for sub in (["ls"], ["verify"], ["diff", d], ["convert", "-o", os.path.join(d, "o.h5")]):
        if sub[0] == "convert" and ARGS.hdf5 != "ON":
            continue
        for p in (os.path.join(d, "missing"), f):
            args = sub[:1] + ([p] if sub[0] != "diff" else [p, d]) + sub[1:] if sub[0] != "diff" else ["diff", p, d]
            rc, out = cli(*args)
            check(rc == 2 and p in out, "ckpt %s: rc %s: %s" % (" ".join(args), rc, out[-500:]))


@store_case
def cli_fifo_index_does_not_hang():
    """A FIFO named `index` in a checkpoint: ls/verify/diff never block; ls calls it incomplete,
    verify of it exits 2 (store, issue 16 (d))."""
    d = fresh("cli_fifo_index")
    make_checkpoints(d)
    os.mkdir(os.path.join(d, "ckpt.9"))
    os.mkfifo(os.path.join(d, "ckpt.9", "index"))
    rc, out = cli("ls", "--json", d)
    check(rc == 0, out[-500:])
    j = json.loads(out)
    nine = [s for s in j["steps"] if s["step"] == 9]
    check(nine and not nine[0]["complete"], "ckpt.9 listed as %s" % nine)
    rc, out = cli("verify", os.path.join(d, "ckpt.9"))
    check(rc == 2, "verify of the FIFO index: rc %s: %s" % (rc, out[-500:]))
    rc, out = cli("diff", os.path.join(d, "ckpt.9"), os.path.join(d, "ckpt.2"))
    check(rc == 2, "diff with the FIFO index: rc %s: %s" % (rc, out[-500:]))
    rc, out = app_check(d)
    check(rc == 0 and "check: ok step 2" in out, out[-800:])


@store_case
def cli_fifo_data_file_does_not_hang():
    """A FIFO where a data file belongs: verify reports it (exit 1 or 2) without blocking; restart
    falls back to the older checkpoint (store, issue 16 (d))."""
    d = fresh("cli_fifo_data")
    make_checkpoints(d)
    c2 = os.path.join(d, "ckpt.2")
    data = [n for n in os.listdir(c2) if n != "index"]
    check(data, "no data file in ckpt.2")
    for n in data:
        os.unlink(os.path.join(c2, n))
        os.mkfifo(os.path.join(c2, n))
    rc, out = cli("verify", c2)
    check(rc in (1, 2), "verify: rc %s: %s" % (rc, out[-500:]))
    rc, out = cli("diff", c2, os.path.join(d, "ckpt.1"))
    check(rc in (1, 2), "diff: rc %s: %s" % (rc, out[-500:]))
    rc, out = app_check(d)
    check(rc == 0 and "check: ok step 1" in out, out[-800:])


@case
def cli_directory_where_index_belongs():
    """A directory named `index`: ls says incomplete, verify exits 2 with a message, nothing crashes."""
    d = fresh("cli_dir_index")
    make_checkpoints(d, steps=1)
    os.makedirs(os.path.join(d, "ckpt.5", "index"))
    rc, out = cli("ls", "--json", d)
    check(rc == 0 and not [s for s in json.loads(out)["steps"] if s["step"] == 5 and s["complete"]], out[-500:])
    rc, out = cli("verify", os.path.join(d, "ckpt.5"))
    check(rc == 2 and "ckpt.5" in out, out[-500:])


@case
def cli_ls_latest_is_a_complete_checkpoint():
    """`ckpt ls --json` reports as `latest` the newest complete checkpoint, not whatever the link
    points to (here an incomplete newer directory, then a dangling link)."""
    d = fresh("cli_latest")
    make_checkpoints(d)
    os.mkdir(os.path.join(d, "ckpt.8"))
    os.unlink(os.path.join(d, "latest"))
    os.symlink("ckpt.8", os.path.join(d, "latest"))
    rc, out = cli("ls", "--json", d)
    check(rc == 0 and json.loads(out)["latest"] == 2, "latest: %s" % out[-500:])
    os.unlink(os.path.join(d, "latest"))
    os.symlink("/nonexistent/ckpt.77", os.path.join(d, "latest"))
    rc, out = cli("ls", "--json", d)
    check(rc == 0 and json.loads(out)["latest"] == 2, "dangling latest: %s" % out[-500:])


@case
def cli_latest_link_to_outside_is_not_followed():
    """A `latest` link pointing outside the root (to another job's checkpoint) is not used by ls,
    verify or the runtime's restart: nothing escapes the checkpoint directory."""
    d = fresh("cli_latest_out")
    other = fresh("cli_latest_other")
    make_checkpoints(other, steps=5)
    make_checkpoints(d, steps=1)
    os.unlink(os.path.join(d, "latest"))
    os.symlink(os.path.join(other, "ckpt.5"), os.path.join(d, "latest"))
    rc, out = cli("ls", "--json", d)
    check(rc == 0 and json.loads(out)["latest"] == 1, out[-500:])
    rc, out = cli("verify", d)
    check(rc == 0 and "ckpt.5" not in out, out[-500:])
    rc, out = app_check(d)
    check(rc == 0 and "check: ok step 1" in out, out[-800:])


@case
def cli_junk_entries():
    """Junk names (ckpt., ckpt.abc, ckpt.-3, a file named ckpt.4, a 25-digit step, a symlink named
    ckpt.6 to /) are ignored or reported, never crash ls/verify, and verify of the root passes."""
    d = fresh("cli_junk")
    make_checkpoints(d, steps=1)
    for n in ("ckpt.", "ckpt.abc", "ckpt.-3", "ckpt.9999999999999999999999999"):
        os.mkdir(os.path.join(d, n))
    open(os.path.join(d, "ckpt.4"), "w").write("junk")
    os.symlink("/", os.path.join(d, "ckpt.6"))
    rc, out = cli("ls", d)
    check(rc == 0, out[-500:])
    rc, out = cli("ls", "--json", d)
    check(rc == 0 and json.loads(out)["latest"] == 1, out[-500:])
    rc, out = cli("verify", os.path.join(d, "ckpt.1"))
    check(rc == 0, out[-500:])


@store_case
def cli_nineteen_digit_step():
    """A checkpoint of step 10^18 + 1 (19 digits) is listed by ls and verified (store, issue 16 (b))."""
    d = fresh("cli_19")
    make_checkpoints(d, steps=1)
    big = 10**18 + 1
    shutil.copytree(os.path.join(d, "ckpt.1"), os.path.join(d, "ckpt.%d" % big))
    rc, out = cli("ls", "--json", d)
    check(rc == 0 and any(s["step"] == big for s in json.loads(out)["steps"]), out[-800:])


@case
def cli_convert_refuses_to_overwrite_a_checkpoint_file():
    """`ckpt convert -o <a file inside a checkpoint> --force` is refused; the checkpoint still verifies."""
    if ARGS.hdf5 != "ON":
        return "SKIP: built without HDF5 (no convert)"
    d = fresh("cli_convert_in")
    make_checkpoints(d, steps=1)
    c1 = os.path.join(d, "ckpt.1")
    for target in (os.path.join(c1, "index"), os.path.join(c1, "new.h5"), os.path.join(d, "latest")):
        rc, out = cli("convert", c1, "-o", target, "--force")
        check(rc == 2 and "checkpoint" in out, "convert -o %s: rc %s: %s" % (target, rc, out[-500:]))
    rc, out = cli("verify", c1)
    check(rc == 0, out[-500:])


@case
def cli_convert_does_not_follow_a_planted_tmp_link():
    """A symbolic link planted at `<out>.tmp` is not followed: its target is untouched."""
    if ARGS.hdf5 != "ON":
        return "SKIP: built without HDF5 (no convert)"
    d = fresh("cli_convert_tmp")
    make_checkpoints(d, steps=1)
    victim = os.path.join(ARGS.dir, "cli_convert_victim")
    open(victim, "w").write("precious")
    out_file = os.path.join(ARGS.dir, "cli_convert_out.h5")
    for p in (out_file, out_file + ".tmp"):
        if os.path.lexists(p):
            os.unlink(p)
    os.symlink(victim, out_file + ".tmp")
    rc, out = cli("convert", os.path.join(d, "ckpt.1"), "-o", out_file)
    check(open(victim).read() == "precious", "the link's target was overwritten (rc %s: %s)" % (rc, out[-300:]))


@case
def cli_verify_transport_group_checkpoint():
    """`ckpt verify` accepts what restart reads fine: a checkpoint written with transport groups
    (posix + mpiio shared file) where some ranks have zero-length blocks."""
    d = fresh("cli_groups")
    rc, out = run(mpi(3, "--dir", d, "--steps", "1", "--groups"), timeout=60)
    check(rc == 0, "groups run: " + out[-1500:])
    rc, out = app_check(d, np=3, extra=["--groups"])
    check(rc == 0, "restart: " + out[-500:])
    rc, out = cli("verify", d)
    check(rc == 0, "verify: rc %s: %s" % (rc, out[-1500:]))


@case
def cli_report_on_hostile_input():
    """`ckpt report` on a missing directory or a checkpoint root (no trace) exits non-zero with a
    message, without a traceback."""
    d = fresh("cli_report")
    for p in (os.path.join(d, "missing"), d):
        rc, out = cli("report", p)
        check(rc != 0 and "Traceback" not in out, "report %s: rc %s: %s" % (p, rc, out[-500:]))


@case
def cli_convert_names_that_collide_in_hdf5():
    """Variables `field` and `field/x` (a dataset and a group of the same name in HDF5): convert exits
    2 naming the variable, leaves no output or temporary file, does not crash."""
    if ARGS.hdf5 != "ON":
        return "SKIP: built without HDF5 (no convert)"
    d = fresh("cli_convert_collide")
    make_checkpoints(d, steps=1, extra=("--collide",))
    out_file = os.path.join(d + ".h5")
    if os.path.exists(out_file):
        os.unlink(out_file)
    rc, out = cli("convert", os.path.join(d, "ckpt.1"), "-o", out_file)
    left = [n for n in os.listdir(os.path.dirname(out_file)) if n.startswith(os.path.basename(out_file))]
    check(rc == 2 and "field" in out and not left, "rc %s, left %s: %s" % (rc, left, out[-800:]))


# ---- options from the environment ------------------------------------------------------------------

@case
def env_mpiio_hint_that_crashes_mpi_is_refused():
    """CKPT_MPIIO_HINTS=cb_nodes=0 (SIGFPE inside ROMIO) or cb_nodes=-5 (SIGSEGV) with the mpiio
    transport: the job exits with a clear invalid_argument naming the variable, no signal."""
    d = fresh("env_hints")
    for bad in ("cb_nodes=0", "cb_nodes=-5", "striping_unit=0"):
        rc, out = run(mpi(2, "--dir", d, "--transport", "mpiio"), timeout=60, env={"CKPT_MPIIO_HINTS": bad})
        check(not crashed(rc) and rc == 4 and "invalid_argument" in out and "CKPT_MPIIO_HINTS" in out,
              "%s: rc %s: %s" % (bad, rc, out[-800:]))


@case
def env_unknown_or_bad_variables_are_named():
    """A bad value of a known CKPT_* variable stops the job with invalid_argument naming it; an unknown
    CKPT_* variable (a site's CKPT_ROOT, a misspelling) is one warning line on rank 0 naming it (and the
    nearest known name for a misspelling), and the job runs."""
    d = fresh("env_bad")
    for var, val in (("CKPT_KEEP", "0"), ("CKPT_CHUNK_BYTES", "1x"), ("CKPT_FSYNC", "maybe")):
        rc, out = run(mpi(2, "--dir", d), timeout=60, env={var: val})
        check(rc == 4 and "invalid_argument" in out and var in out, "%s=%s: rc %s: %s" % (var, val, rc, out[-800:]))
    for var, hint in (("CKPT_KEPE", "did you mean CKPT_KEEP?"), ("CKPT_ROOT", "docs/options.md")):
        rc, out = run(mpi(2, "--dir", d), timeout=60, env={var: "2"})
        warned = [l for l in out.splitlines() if "warning: unknown environment variable " + var in l]
        check(rc == 0 and len(warned) == 1 and hint in warned[0],
              "%s=2: rc %s, %d warning lines: %s" % (var, rc, len(warned), out[-800:]))


@case
def disk_full_on_tmpfs_mpiio():
    """ENOSPC through the mpiio transport (one shared file, collective writes) on a 1 MiB tmpfs: a
    clear io_error on every rank, no hang, the committed checkpoint restarts."""
    d = fresh("disk_full_mpiio")
    refused = mount_tmpfs(d)
    if refused:
        return refused
    try:
        make_checkpoints(d, steps=1, extra=("--transport", "mpiio"))
        rc, out = run(mpi(2, "--dir", d, "--transport", "mpiio", "--steps", "2", "--cells", "400000"), timeout=90)
        check(rc != 0 and "io_error" in out, "big checkpoint: rc %s: %s" % (rc, out[-1500:]))
        rc, out = app_check(d)
        check(rc == 0 and "check: ok step 1" in out, out[-800:])
    finally:
        subprocess.run(["umount", "-l", d], check=False)


@case
def cli_root_with_only_unfinished_checkpoints():
    """A root holding only ckpt.N.tmp / ckpt.N.old leftovers: ls exits 0 with no complete checkpoint
    and latest null; verify of the root does not pass (exit 1 or 2) and names the leftover."""
    d = fresh("cli_only_tmp")
    os.makedirs(os.path.join(d, "ckpt.5.tmp"))
    os.makedirs(os.path.join(d, "ckpt.4.old"))
    rc, out = cli("ls", "--json", d)
    check(rc == 0 and json.loads(out)["latest"] is None, out[-500:])
    rc, out = cli("verify", d)
    check(rc in (1, 2) and "ckpt.5.tmp" in out, "verify: rc %s: %s" % (rc, out[-500:]))


# ---- hostile bytes, claims, store names, exit codes (issue 31, part 6) ---------------------------------

# Sanitizer runs (.ci/sanitizers sets ADVTEST_SANITIZED): ASan reserves terabytes of shadow memory, which an
# address-space limit refuses (the sanitizer itself then stops a too large allocation), and the Python
# package cannot load a sanitized libckpt into an uninstrumented python (as python_reader in ctest).
SANITIZED = bool(os.environ.get("ADVTEST_SANITIZED"))


def cli_bytes(*args, limit_as=None, timeout=60):
    """Runs ckpt with `args` (str or bytes) and returns (rc, stdout, stderr) as bytes, stderr apart. A crash
    or a hang fails the case. limit_as: an address-space limit in bytes (RLIMIT_AS), so that a program that
    allocates what a crafted index claims fails at once instead of paging."""
    import resource

    def limit():
        if limit_as and not SANITIZED:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    cmd = [os.fsencode(ARGS.cli)] + [a if isinstance(a, bytes) else os.fsencode(a) for a in args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         preexec_fn=limit)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(p)
        raise Fail("HANG: ckpt %r" % (args,))
    check(not crashed(p.returncode), "ckpt %r crashed (rc %s): %r" % (args, p.returncode, err[-800:]))
    return p.returncode, out, err


def craft(*args):
    """adv_craft (an index rewritten with valid checksums); returns what it printed as {name: bytes}."""
    rc, out = run([ARGS.craft] + list(args), timeout=30)
    check(rc == 0, "adv_craft %s: %s" % (" ".join(args), out[-800:]))
    planted = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        if v.startswith("b'"):
            planted[k] = bytes.fromhex(v[2:-1].replace("\\x", ""))
    return planted


def python_reader(script, limit_as=None):
    """Runs `script` with the Python package (python/ckpt over this build's libckpt); (rc, output)."""
    import resource

    def limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    env = dict(os.environ, PYTHONPATH=ARGS.python, CKPT_LIBRARY=ARGS.libckpt, OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=60, preexec_fn=limit)
    return p.returncode, p.stdout.decode("utf-8", "replace")


# Bytes a terminal must never receive from ckpt: C0 controls but the newline (ESC starts an escape
# sequence; BEL ends an OSC one), DEL, and the C1 controls as UTF-8 (U+009B is the 8-bit CSI).
TERMINAL_UNSAFE = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def terminal_safe(b, what):
    m = TERMINAL_UNSAFE.search(b)
    if m:
        raise Fail("%s: byte %r passed through at %d: %r" % (what, m.group(0), m.start(), b[max(0, m.start() - 40):][:120]))
    try:
        b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Fail("%s: not UTF-8 (%s): %r" % (what, e, b[max(0, e.start - 40):][:120]))


def text_escaped(b):
    r"""docs/cli.md, "Bytes in names and annotations", text outputs: a byte that is not part of a printable
    UTF-8 character is written \xNN, a backslash \\ (the oracle of the checks, written from the doc)."""
    out = []
    for ch in b.decode("utf-8", "surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append("\\x%02x" % (o - 0xDC00))
        elif o < 0x20 or 0x7F <= o <= 0x9F:
            out.append("".join("\\x%02x" % c for c in ch.encode()))
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out).encode()


def sx(s):
    """A JSON / Python str back to the bytes it stands for (surrogateescape: docs/cli.md)."""
    return s.encode("utf-8", "surrogateescape")


@case
def cli_hostile_bytes_in_every_output():
    """Names and annotations are bytes: with terminal escapes, C1 controls, bytes that are not UTF-8, a
    newline and a NUL in the transport, a checkpoint attribute, every variable's annotation and a data file's
    name (an index with valid checksums), ls/verify/diff (text and --json), convert (HDF5 attributes) and the
    Python package exit as on clean input, pass no control byte to a terminal, print the documented escapes,
    and --json, HDF5 and Python give back the exact bytes."""
    d = fresh("cli_hostile")
    make_checkpoints(d, steps=1)
    c1 = os.path.join(d, "ckpt.1")
    planted = craft("hostile", c1)
    h, fname = planted["hostile"], planted["file"]
    for args in (["ls", d], ["ls", "-l", d], ["ls", "-l", c1], ["verify", d], ["verify", c1], ["diff", c1, c1],
                 ["diff", "--tol", "0", c1, c1]):
        for js in (False, True):
            a = args[:1] + (["--json"] if js else []) + args[1:]
            rc, out, err = cli_bytes(*a)
            check(rc == 0 and not err, "ckpt %s: rc %s: %r" % (" ".join(a), rc, (out + err)[-600:]))
            terminal_safe(out, "ckpt %s stdout" % " ".join(a))
            if not js:
                if a[0] == "ls" and a[-1] == c1:
                    for want in (b"posix" + h, b"note" + h, b"v" + h + b"\0z", fname):
                        check(text_escaped(want) in out, "ls -l: %r not printed as %r" % (want, text_escaped(want)))
                continue
            j = json.loads(out.decode("utf-8"))
            if a[0] == "ls" and a[-1] == c1:
                check(sx(j["transport"]) == b"posix" + h, "ls --json transport: %r" % j["transport"])
                check(sx(j["files"][0]["name"]) == fname, "ls --json file: %r" % j["files"][0]["name"])
                check({sx(k): sx(v) for k, v in j["attrs"].items()}.get(b"k" + h) == b"v" + h, "ls --json attrs")
                attrs = {sx(k): sx(v) for k, v in j["variables"][0]["attrs"].items()}
                check(attrs.get(b"note" + h) == b"v" + h + b"\0z", "ls --json annotation: %r" % attrs)
            if a[0] == "diff":
                check(sx(j["a"]["transport"]) == b"posix" + h, "diff --json transport: %r" % j["a"])
    if ARGS.hdf5 == "ON":
        out_h5 = os.path.join(ARGS.dir, "cli_hostile.h5")
        rc, out, err = cli_bytes("convert", c1, "-o", out_h5, "--force")
        check(rc == 0 and not err, "convert: rc %s: %r" % (rc, (out + err)[-600:]))
        terminal_safe(out, "convert stdout")
        rc, out = python_reader(
            "import h5py\n"
            "f = h5py.File(%r, 'r')\n"
            "key = lambda k: k.encode('utf-8', 'surrogateescape') if isinstance(k, str) else bytes(k)\n"
            "val = lambda v: (v.encode('utf-8', 'surrogateescape') if isinstance(v, str)\n"
            "                 else bytes(v) if isinstance(v, bytes) else v.tobytes())\n"
            "attrs = {key(k): v for k, v in f.attrs.items()}\n"
            "assert val(attrs[b'ckpt_transport']) == b'posix' + %r, attrs\n"
            "assert val(attrs[b'ckpt_attr.k' + %r]) == b'v' + %r, attrs\n"
            "va = {key(k): v for k, v in f['field'].attrs.items()}\n"
            "assert val(va[b'note' + %r]) == b'v' + %r + b'\\0z', va\n"
            "print('hdf5 ok')\n" % (out_h5, h, h, h, h, h))
        check(rc == 0 and "hdf5 ok" in out, "HDF5 attributes: " + out[-1500:])
    if SANITIZED:
        return
    rc, out = python_reader(
        "import ckpt\n"
        "c = ckpt.open(%r).latest()\n"
        "b = lambda x: x.encode('utf-8', 'surrogateescape')\n"
        "assert b(c.transport) == b'posix' + %r, repr(c.transport)\n"
        "v = c['field']\n"
        "a = {b(k): b(x) for k, x in v.attrs.items()}\n"
        "assert a[b'note' + %r].startswith(b'v' + %r), a\n"
        "assert v.read().size > 0\n"
        "print('python ok', repr(v))\n" % (c1, h, h, h))
    check(rc == 0 and "python ok" in out, "Python package: " + out[-1500:])


@case
def cli_block_claiming_more_than_its_file():
    """A crafted index (valid checksums) whose block claims 1 TiB of a file of a few KiB: convert and diff
    exit 2 with one line naming the variable and the file, without allocating the claim (they run under a
    4 GiB address-space limit); verify reports the block (exit 1); the Python package raises CorruptError,
    not MemoryError."""
    d = fresh("cli_claim")
    make_checkpoints(d, steps=1)
    c1 = os.path.join(d, "ckpt.1")
    craft("claim", c1, "field")
    lim = 4 << 30
    runs = [["diff", c1, c1], ["diff", "--var", "field", "--tol", "0", c1, c1]]
    if ARGS.hdf5 == "ON":
        runs.append(["convert", c1, "-o", os.path.join(ARGS.dir, "cli_claim.h5"), "--force"])
    for a in runs:
        rc, out, err = cli_bytes(*a, limit_as=lim)
        lines = err.decode("utf-8", "replace").splitlines()
        check(rc == 2 and len(lines) == 1 and "'field'" in lines[0] and "holds" in lines[0],
              "ckpt %s: rc %s: %r" % (" ".join(a), rc, (out + err)[-800:]))
    left = [n for n in os.listdir(ARGS.dir) if n.startswith("cli_claim.h5")]
    check(not left, "convert left %s" % left)
    rc, out, err = cli_bytes("verify", c1, limit_as=lim)
    check(rc == 1 and b"'field'" in out, "verify: rc %s: %r" % (rc, (out + err)[-800:]))
    if SANITIZED:
        return
    rc, out = python_reader(
        "import ckpt\n"
        "v = ckpt.open(%r).latest()['field']\n"
        "try:\n"
        "    v.read()\n"
        "except ckpt.CorruptError as e:\n"
        "    print('refused:', e)\n" % c1, limit_as=lim)
    check(rc == 0 and "refused:" in out and "field" in out, "Python read of the claim: " + out[-1200:])


@case
def cli_convert_refuses_every_name_the_store_owns():
    """`ckpt convert -o <root>/<name>` is refused (exit 2, nothing written) for every name the store owns in a
    checkpoint root - latest, latest.tmp, .lock, .root, .owner (node binding), ckpt.N and its .tmp/.old/.del/.abandoned forms, series.K and
    series.K.del - also in a root whose job has not committed yet (only .lock); the root then goes on
    committing and verifies."""
    if ARGS.hdf5 != "ON":
        return "SKIP: built without HDF5 (no convert)"
    d = fresh("cli_store_names")
    make_checkpoints(d, steps=1)
    c1 = os.path.join(d, "ckpt.1")
    fresh_root = fresh("cli_store_names_new")
    open(os.path.join(fresh_root, ".lock"), "w").close()
    names = ["latest", "latest.tmp", ".lock", ".root", ".owner", ".timeline", ".run", "ckpt.7", "ckpt.7.tmp",
             "ckpt.7.old", "ckpt.7.del", "ckpt.7.abandoned", "series.3", "series.3.del"]
    for root in (d, fresh_root):
        for n in names:
            target = os.path.join(root, n)
            existed = os.path.lexists(target)
            rc, out, err = cli_bytes("convert", c1, "-o", target, "--force")
            lines = err.decode().splitlines()
            check(rc == 2 and len(lines) == 1 and "belongs to the checkpoint store" in lines[0],
                  "convert -o %s: rc %s: %r" % (target, rc, (out + err)[-500:]))
            check(existed == os.path.lexists(target), "convert -o %s changed it" % target)
    make_checkpoints(d, steps=2)
    rc, out, err = cli_bytes("verify", d)
    check(rc == 0, "verify after: rc %s: %r" % (rc, out[-500:]))


@case
def cli_exit_codes_on_bad_input():
    """Every subcommand holds its documented exit status (docs/cli.md) on bad input - missing, empty, plain,
    binary and wrong-kind paths, unknown options, missing or extra arguments, a bad --tol (nan, inf, -1, abc),
    JSON that is not a trace - with exactly one line on stderr, "ckpt <command>: <what>", nothing on stdout,
    and no traceback or usage text: a table of subcommand x bad input."""
    d = fresh("cli_exit")
    make_checkpoints(d, steps=2)
    c1, c2 = os.path.join(d, "ckpt.1"), os.path.join(d, "ckpt.2")
    w = fresh("cli_exit_inputs")
    missing, empty_dir, plain, binary = (os.path.join(w, n) for n in ("missing", "empty", "plain", "binary"))
    os.mkdir(empty_dir)
    open(plain, "w").write("not a checkpoint\n")
    open(binary, "wb").write(bytes(range(256)) * 4)
    traces = {"empty": (b"", b""), "binary": (bytes(range(256)), bytes(range(256))), "list": (b"[]", b"[]"),
              "object": (b"{}", b"{}"), "wrong": (b'{"traceEvents": 5}', b'{"ranks": "x"}'),
              "events": (b'{"traceEvents": [{"ph": "X", "name": 3}]}', b'{"ranks": 1, "checkpoints": []}'),
              "no_summary": (b'{"traceEvents": []}', None)}
    for name, (trace, summary) in traces.items():
        os.mkdir(os.path.join(w, "trace_" + name))
        open(os.path.join(w, "trace_" + name, "trace.json"), "wb").write(trace)
        if summary is not None:
            open(os.path.join(w, "trace_" + name, "summary.json"), "wb").write(summary)
    out_h5 = os.path.join(w, "out.h5")
    table = [
        ([], 2, "ckpt"), (["frobnicate"], 2, "ckpt"), (["--frob"], 2, "ckpt"),
        (["ls"], 2, "ckpt ls"), (["ls", missing], 2, "ckpt ls"), (["ls", plain], 2, "ckpt ls"),
        (["ls", binary], 2, "ckpt ls"), (["ls", "--frob", c1], 2, "ckpt ls"), (["ls", c1, c2], 2, "ckpt ls"),
        (["ls", empty_dir], 0, None), (["ls", c1], 0, None),
        (["verify"], 2, "ckpt verify"), (["verify", missing], 2, "ckpt verify"), (["verify", plain], 2, "ckpt verify"),
        (["verify", binary], 2, "ckpt verify"), (["verify", empty_dir], 2, "ckpt verify"),
        (["verify", "-x", c1], 2, "ckpt verify"), (["verify", c1], 0, None),
        (["diff", c1], 2, "ckpt diff"), (["diff", c1, missing], 2, "ckpt diff"), (["diff", binary, c1], 2, "ckpt diff"),
        (["diff", "--tol", "nan", c1, c2], 2, "ckpt diff"), (["diff", "--tol", "inf", c1, c2], 2, "ckpt diff"),
        (["diff", "--tol", "-1", c1, c2], 2, "ckpt diff"), (["diff", "--tol", "abc", c1, c2], 2, "ckpt diff"),
        (["diff", "--tol", "", c1, c2], 2, "ckpt diff"), (["diff", "--tol", c1, c2], 2, "ckpt diff"),
        (["diff", "--var", "nope", c1, c2], 2, "ckpt diff"), (["diff", c1, c2, c1], 2, "ckpt diff"),
        (["diff", c1, c2], 0, None), (["diff", "--tol", "0", c1, c1], 0, None),
        (["diff", "--tol", "0", c1, c2], 1, None),
        (["report"], 2, "ckpt report"), (["report", missing], 2, "ckpt report"), (["report", plain], 2, "ckpt report"),
        (["report", empty_dir], 2, "ckpt report"), (["report", d], 2, "ckpt report"),
        (["report", "--frob", d], 2, "ckpt report"), (["report", "--nvtx", empty_dir], 2, "ckpt report"),
    ] + [(["report", os.path.join(w, "trace_" + n)], 2, "ckpt report") for n in traces]
    if ARGS.hdf5 == "ON":
        table += [(["convert", c1], 2, "ckpt convert"), (["convert", missing, "-o", out_h5], 2, "ckpt convert"),
                  (["convert", binary, "-o", out_h5], 2, "ckpt convert"),
                  (["convert", c1, "-o", os.path.join(c1, "x.h5")], 2, "ckpt convert"),
                  (["convert", c1, "-o", os.path.join(d, "latest.tmp")], 2, "ckpt convert"),
                  (["convert", c1, "-o", os.path.join(missing, "x.h5")], 2, "ckpt convert")]
    bad = []
    for args, want, prefix in table:
        rc, out, err = cli_bytes(*args)
        lines = err.decode("utf-8", "replace").splitlines()
        if rc != want:
            bad.append("ckpt %s: exit %s, want %s: %r" % (" ".join(args), rc, want, (out + err)[-300:]))
        elif prefix and (len(lines) != 1 or not lines[0].startswith(prefix + ": ") or out):
            bad.append("ckpt %s: want one line '%s: ...' on stderr and nothing on stdout, got stderr %r stdout %r"
                       % (" ".join(args), prefix, err[-300:], out[-200:]))
    check(not bad, "%d of %d rows:\n      " % (len(bad), len(table)) + "\n      ".join(bad))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--killat", required=True)
    ap.add_argument("--craft", required=True, help="adv_craft (crafted indexes)")
    ap.add_argument("--python", required=True, help="the directory holding the Python package ckpt")
    ap.add_argument("--libckpt", required=True, help="libckpt, for the Python package")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--hdf5", default="OFF", help="ON/1 when the build has HDF5 (CMake passes CKPT_HAVE_HDF5)")
    ap.add_argument("--only", default="")
    ap.add_argument("--kill-trials", type=int, default=1)
    ap.add_argument("--stride", type=int, default=4, help="kill_retention: every stride-th operation (1: all)")
    ap.add_argument("--kill-transport", default="posix",
                    help="transport of the kill sweeps (CI: posix; the nightly size runs each transport with --stride 1)")
    ap.add_argument("--store-cases", action="store_true", help="also the cases of the store module (issue 16)")
    ARGS = ap.parse_args()
    # CMake passes CKPT_HAVE_HDF5 (1 or 0); by hand ON/OFF: every spelling of true means ON.
    ARGS.hdf5 = "ON" if ARGS.hdf5.upper() in ("1", "ON", "TRUE", "YES") else "OFF"
    os.makedirs(ARGS.dir, exist_ok=True)
    failed = ran = 0
    for fn in CASES:
        if (ARGS.only and ARGS.only not in fn.__name__) or (fn.__name__ in STORE_CASES and not ARGS.store_cases):
            continue
        t0 = time.time()
        ran += 1
        try:
            note = fn()
            state = note if note else "ok"
        except Fail as e:
            state = "FAIL: %s" % e
            failed += 1
        except Exception as e:  # a bug of the case itself is a failure too
            state = "FAIL (%s): %s" % (type(e).__name__, e)
            failed += 1
        print("%-52s %5.1fs  %s" % (fn.__name__, time.time() - t0, state))
        print("    promise: " + " ".join(fn.__doc__.split()))
        sys.stdout.flush()
    print("%d cases run, %d failed" % (ran, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
