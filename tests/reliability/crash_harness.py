#!/usr/bin/env python3
"""Crash consistency (issue 9): SIGKILL a checkpointing 4-rank job at random moments, then restart.

Each trial starts `crash_app` (a checkpoint every step; CKPT_TEST_FLUSH_DELAY_MS and small chunks stretch
the flush so kills land in every phase), waits until a first checkpoint is committed, sleeps a random
time, and kills the whole session with SIGKILL (Open MPI gives each rank its own process group, so
`pkill -KILL -s`), waiting until no process of it is left. The phase the kill hit is read from the
directory the job left (the last in-flight checkpoint: no temporary directory = capture/compute,
partial data = flush, all data but no index = fsync/agreement, an index in ckpt.N.tmp = commit before
the rename, ckpt.N.old / latest.tmp / a stale `latest` = rename and link). Then `crash_app --check`
(4 or 3 ranks) must find a complete checkpoint with latest(), restart() must load that very step,
and the restored data must equal what was captured for it bit for bit.

  crash_harness.py --mpiexec mpiexec --app build/tests/reliability/crash_app --transport posix \
                   --dir /tmp/crash --trials 100          # the nightly size

With --levels none|partner|xor (issue 19) the job has a node-local level (4 ranks as 4 simulated nodes,
<trial>/local/node<k>, drain_every 2, that redundancy), so kills land in the local commit, the partner
copy or parity exchange and the drain. The check then runs twice on 4 ranks (a local restart needs the
same layout): as left, and after deleting node 2's directory (a lost node: rebuilt from the partner
copy or the parity, or the drained level), each time bit for bit.
With --layout series (issue 15) the job appends every checkpoint to segments (series.<k>/: data.<rank>
and the step log `steps`); --segment-steps N rolls a segment every N checkpoints (kills land in rolls)
and --durable-every-ms N commits without fsync (a process crash keeps what was committed). The phase
is read from the step log (a torn record = commit; a new segment without records = roll).
In every mode the job acknowledges each commit it saw succeed (crash_app --ack): the step the check
restores must not be older than the newest acknowledged before the kill, and `ckpt verify <dir>`
(--cli) must pass on what the kill left.
Prints the trials, kills by phase and failures; exit status 1 if any trial failed.
"""
import argparse
import collections
import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mpijob import kill_session, shm_names  # noqa: E402


def phase_of(d):
    """Phase of the newest in-flight checkpoint, from what the killed job left in `d`."""
    names = os.listdir(d) if os.path.isdir(d) else []
    done = sorted(int(n[5:]) for n in names if re.fullmatch(r"ckpt\.\d+", n))
    tmp = sorted(int(n[5:-4]) for n in names if re.fullmatch(r"ckpt\.\d+\.tmp", n))
    if any(n.endswith(".old") for n in names) or "latest.tmp" in names:
        return "rename/link"
    link = os.path.join(d, "latest")
    if done and os.path.islink(link) and os.readlink(link) != f"ckpt.{done[-1]}":
        return "rename/link"  # renamed in, `latest` not yet replaced
    if not tmp or (done and tmp[-1] < done[-1]):
        return "capture/compute"
    t = os.path.join(d, f"ckpt.{tmp[-1]}.tmp")
    files = os.listdir(t)
    if "index" in files:
        return "commit (index written)"
    if "partner" in files or any(f.startswith("xor.") for f in files):
        return "partner copy / parity"  # the node level's redundancy data (issue 19)
    data = [f for f in files if f != "index"]
    if not data:
        return "capture/open"
    # Compare with the newest complete checkpoint: same layout every step.
    if done:
        ref = os.path.join(d, f"ckpt.{done[-1]}")
        full = all(os.path.exists(os.path.join(ref, f)) and
                   os.path.getsize(os.path.join(t, f)) >= os.path.getsize(os.path.join(ref, f)) for f in data)
        ref_files = [f for f in os.listdir(ref) if f != "index"]
        if full and len(data) == len(ref_files):
            return "fsync/agreement"
    return "flush"


def series_records(log):
    """(records, torn tail bytes) of a step log (format.md "Step log"; checksums are not checked here:
    this only names the phase). Version 2: header 40 bytes, records of 112 + pad8(n) bytes (header,
    payload, padding, trailer); version 1: header 32 bytes, records of pad8(40 + n) bytes."""
    with open(log, "rb") as f:
        b = f.read()
    if len(b) < 32 or b[:8] != b"CKPTSERI":
        return 0, len(b)
    v2 = int.from_bytes(b[8:12], "little") == 2
    magic, pos, frame, n_at = (b"CKPTREC2", 40, 56, 32) if v2 else (b"CKPTSTEP", 32, 40, 16)
    n = 0
    while pos + frame <= len(b) and b[pos:pos + 8] == magic:
        length = int.from_bytes(b[pos + n_at:pos + n_at + 8], "little")
        size = 2 * frame + (length + 7) // 8 * 8 if v2 else (frame + length + 7) // 8 * 8
        if pos + (size if v2 else frame + length) > len(b):
            break
        n += 1
        pos = min(len(b), pos + size)
    return n, len(b) - pos


def phase_of_series(d):
    """Phase of the newest in-flight checkpoint of a series root, from its newest segment."""
    segs = sorted(int(n[7:]) for n in (os.listdir(d) if os.path.isdir(d) else [])
                  if re.fullmatch(r"series\.\d+", n))
    if not segs:
        return "before the first segment"
    s = os.path.join(d, f"series.{segs[-1]}")
    log = os.path.join(s, "steps")
    if not os.path.exists(log):
        return "segment roll (no step log yet)"
    n, torn = series_records(log)
    if torn:
        return "commit (torn record)"
    if n == 0:
        return "segment roll (first checkpoint of a segment)"
    return "append (capture/flush/agreement)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--transport", default="posix")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--trials", type=int, default=int(os.environ.get("RELTEST_CRASH_TRIALS", "10")))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--cells", type=int, default=300000)
    ap.add_argument("--max-delay", type=float, default=0.4, help="seconds after the first commit")
    ap.add_argument("--levels", choices=["none", "partner", "xor"], default=None,
                    help="node-local level with this redundancy (4 simulated nodes)")
    ap.add_argument("--layout", choices=["directory", "series"], default=None)
    ap.add_argument("--segment-steps", type=int, default=None, help="layout series: a segment every N steps")
    ap.add_argument("--durable-every-ms", type=int, default=None, help="commit without fsync, sync every N ms")
    ap.add_argument("--cli", default=None, help="the ckpt tool: `ckpt verify <dir>` must pass after each kill")
    a = ap.parse_args()
    shm_at_start = shm_names()  # Open MPI segments that are not ours: never touched
    if "RELTEST_CRASH_TRIALS" in os.environ:
        a.trials = int(os.environ["RELTEST_CRASH_TRIALS"])
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    mpi = lambda n: [a.mpiexec, "-n", str(n)]
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    env = dict(os.environ, CKPT_TEST_FLUSH_DELAY_MS="2", CKPT_CHUNK_BYTES="256K")
    layout = {"CKPT_LAYOUT": a.layout} if a.layout else {}  # the check needs it too
    env.update(layout)
    if a.segment_steps is not None:
        env["CKPT_SEGMENT_STEPS"] = str(a.segment_steps)
    if a.durable_every_ms is not None:
        env["CKPT_DURABLE_EVERY_MS"] = str(a.durable_every_ms)
    series = a.layout == "series"
    phases = collections.Counter()
    failures = 0
    t0 = time.time()
    for t in range(a.trials):
        d = os.path.join(a.dir, f"trial{t}")
        levels = {}
        if a.levels:
            levels = dict(CKPT_LOCAL_DIR=os.path.join(d, "local"), CKPT_RANKS_PER_NODE="1", CKPT_DRAIN_EVERY="2",
                          CKPT_REDUNDANCY=a.levels)
        ack = os.path.join(a.dir, f"trial{t}.ack")
        job = subprocess.Popen(mpi(4) + [a.app, "--dir", d, "--transport", a.transport, "--cells", str(a.cells),
                                         "--ack", ack],
                               env=dict(env, **levels), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
        deadline = time.time() + 60
        armed = False
        while time.time() < deadline and job.poll() is None:
            if os.path.exists(ack) and os.path.getsize(ack) > 0:
                armed = True
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0, a.max_delay))
        alive = job.poll() is None
        kill_session(job, shm_at_start)
        with open(ack) if os.path.exists(ack) else open(os.devnull) as f:
            acked = max((int(x) for x in f.read().split()), default=None)
        if not armed or not alive:
            out = job.stdout.read().decode(errors="replace") if job.stdout else ""
            print(f"trial {t}: FAIL: the job {'never committed a checkpoint' if not armed else 'ended before the kill'}\n{out}")
            failures += 1
            continue
        phase = phase_of_series(d) if series else phase_of(d)
        if a.levels:
            phase = f"{phase_of(os.path.join(d, 'local', 'node0'))} locally, {phase} in dir"
        phases[phase] += 1
        nranks = 4 if t % 2 == 0 or a.levels else 3
        ok = True
        for lose in ([None, 2] if a.levels else [None]):
            if lose is not None:
                shutil.rmtree(os.path.join(d, "local", f"node{lose}"), ignore_errors=True)
            p = subprocess.run(mpi(nranks) + [a.app, "--dir", d, "--check", "--cells", str(a.cells)],
                               env=dict(os.environ, **levels, **layout), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=120)
            m = re.search(r"check: ok step (\d+)", p.stdout)
            this = p.returncode == 0 and m is not None
            if this and lose is None and acked is not None and int(m.group(1)) < acked:
                print(f"trial {t}: FAIL: restored step {m.group(1)}, older than step {acked}, acknowledged before the kill")
                this = False
            what = f"check on {nranks} ranks" + (f" without node {lose}" if lose is not None else "")
            print(f"trial {t}: killed in {phase}; {what}: {'ok, step ' + m.group(1) if this else 'FAIL'}")
            if not this:
                print(p.stdout)
                ok = False
                break
        if ok and a.cli:
            v = subprocess.run([a.cli, "verify", d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=120)
            if v.returncode != 0:
                print(f"trial {t}: FAIL: ckpt verify {d} exited with {v.returncode}\n{v.stdout}")
                ok = False
        if not ok:
            failures += 1
        else:
            shutil.rmtree(d, ignore_errors=True)
            os.remove(ack)
    mode = a.transport + (" levels " + a.levels if a.levels else "") + (" layout " + a.layout if a.layout else "")
    mode += (f" segment_steps {a.segment_steps}" if a.segment_steps is not None else "")
    mode += (f" durable_every_ms {a.durable_every_ms}" if a.durable_every_ms is not None else "")
    print(f"[crash {mode}] seed {seed}: trials {a.trials}, kills by phase: "
          + ", ".join(f"{k} {v}" for k, v in sorted(phases.items())) + f"; failures {failures}; {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
