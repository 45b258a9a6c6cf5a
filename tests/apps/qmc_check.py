#!/usr/bin/env python3
"""Checks of apps/qmc_walkers, each run as a child mpiexec job.

  energy  --mode vmc|dmc   the estimate is within 3 error bars of the analytic value, computed here
                           independently of the app: VMC N (3a/2 + 3/(8a)), DMC exact 3N/2.
  restart --ranks-after R  run to N steps; run to M < N, then --restart to N on R ranks. The restored
                           state must equal the state of the run that stopped at M; on the same rank
                           count the final `state:` must equal the uninterrupted run's; on another rank
                           count the energy must agree within the error bar (and, because the app is
                           decomposition-independent, the state is checked to be identical too).
  kill                     SIGKILL the job part way (after some checkpoints are committed), restart,
                           and compare with an uninterrupted run bit for bit. The README's demo.
  evolution                checkpoint every step, then read the run back with docs/examples'
                           evolution.cpp (3 ranks, a Reader on the communicator) and evolution.py (the
                           Python package): both print the same series, and it is the run's.
Exit status 0 on success; every failure prints the output of the job that failed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mpijob import check, kill_session, run, shm_names, wait_committed  # noqa: E402


def mpi(a, n):
    return [a.mpiexec, "-n", str(n), a.app]


def field(out, name):
    m = re.findall(rf"^{name}: (.*)$", out, re.M)
    if not m:
        print(out)
        sys.exit(f"FAIL: no '{name}:' line")
    return m[-1].strip()


def energy_of(out):
    m = re.match(r"(\S+) \+- (\S+)$", field(out, "energy"))
    return float(m.group(1)), float(m.group(2))


def restored_state(out):
    m = re.search(r"^restored: step (\d+) .* state (\w+)$", out, re.M)
    if not m:
        print(out)
        sys.exit("FAIL: the run did not restore a checkpoint")
    return int(m.group(1)), m.group(2)


def cmd_energy(a):
    n, alpha = a.particles, a.alpha
    expect = n * (1.5 * alpha + 3.0 / (8.0 * alpha)) if a.mode == "vmc" else 1.5 * n
    d = os.path.join(a.dir, f"energy-{a.mode}")
    shutil.rmtree(d, ignore_errors=True)
    out = run(mpi(a, a.ranks) + ["--mode", a.mode, "--particles", str(n), "--alpha", str(alpha), "--dir", d,
                                 "--seed", str(a.seed)] + a.extra, f"{a.mode} run")
    e, err = energy_of(out)
    ok = check(0 < err < 0.05 * n, f"error bar {err:.6f} is positive and small")
    ok &= check(abs(e - expect) < 3 * err, f"{a.mode} energy {e:.6f} +- {err:.6f} vs {expect:.6f}: "
                f"{abs(e - expect) / err if err > 0 else float('inf'):.2f} sigma (< 3)")
    if a.mode == "dmc":
        vmc = n * (1.5 * alpha + 3.0 / (8.0 * alpha))
        ok &= check(abs(e - vmc) > 3 * err, f"DMC moved away from the VMC energy {vmc:.6f} (> 3 sigma)")
    return ok


def cmd_restart(a):
    base = os.path.join(a.dir, f"restart-4-to-{a.ranks_after}")
    shutil.rmtree(base, ignore_errors=True)
    common = ["--walkers", str(a.walkers), "--checkpoint-every", "1", "--seed", str(a.seed)] + a.extra
    ref = run(mpi(a, 4) + ["--steps", str(a.steps), "--dir", f"{base}/ref"] + common, "uninterrupted, 4 ranks")
    part = run(mpi(a, 4) + ["--steps", str(a.stop), "--dir", f"{base}/cont"] + common, f"to step {a.stop}, 4 ranks")
    cont = run(mpi(a, a.ranks_after) + ["--steps", str(a.steps), "--dir", f"{base}/cont", "--restart"] + common,
               f"--restart, {a.ranks_after} ranks")
    step, restored = restored_state(cont)
    ok = check(step == a.stop, f"restarted from step {step} (the last one written: {a.stop})")
    ok &= check(restored == field(part, "state"), f"restored state {restored} == state at step {a.stop} "
                f"{field(part, 'state')}")
    (e_ref, err_ref), (e, err) = energy_of(ref), energy_of(cont)
    if a.ranks_after == 4:
        ok &= check(field(cont, "state") == field(ref, "state"),
                    f"final state {field(cont, 'state')} == uninterrupted {field(ref, 'state')} (bit for bit)")
        ok &= check(field(cont, "energy") == field(ref, "energy"), "energy line identical")
    else:
        ok &= check(abs(e - e_ref) <= max(err, err_ref),
                    f"energy {e:.8f} +- {err:.8f} agrees with {e_ref:.8f} +- {err_ref:.8f} within the error bar")
        ok &= check(field(cont, "state") == field(ref, "state"),
                    f"final state {field(cont, 'state')} == uninterrupted {field(ref, 'state')} (the trajectory "
                    "does not depend on the rank count)")
    return ok


def cmd_kill(a):
    base = os.path.join(a.dir, "kill")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    common = ["--steps", str(a.steps), "--walkers", str(a.walkers), "--checkpoint-every", "1",
              "--seed", str(a.seed)] + a.extra
    ref = run(mpi(a, 4) + common + ["--dir", f"{base}/ref"], "uninterrupted, 4 ranks")
    d = f"{base}/killed"
    shm_before = shm_names()
    job = subprocess.Popen(mpi(a, 4) + common + ["--dir", d], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    # Wait until a few checkpoints are committed, then kill the whole session (mpiexec and ranks).
    newest = wait_committed(job, d, a.stop)
    kill_session(job, shm_before)
    print(f"killed with SIGKILL after checkpoint {newest} was committed")
    cont = run(mpi(a, 4) + common + ["--dir", d, "--restart"], "--restart, 4 ranks")
    step, _ = restored_state(cont)
    ok = check(step >= newest, f"restarted from step {step}")
    ok &= check(field(cont, "energy") == field(ref, "energy"),
                f"energy {field(cont, 'energy')} == uninterrupted {field(ref, 'energy')}")
    ok &= check(field(cont, "state") == field(ref, "state"),
                f"state {field(cont, 'state')} == uninterrupted {field(ref, 'state')}: the final energy matches "
                "bit for bit")
    return ok


EVOLUTION_ROW = re.compile(r"^step (\d+) walkers (\d+) trial_energy (\S+) mean_local_energy (\S+)$", re.M)


def cmd_evolution(a):
    d = os.path.join(a.dir, "evolution")
    shutil.rmtree(d, ignore_errors=True)
    keep = os.path.join(a.dir, "keep.yaml")
    with open(keep, "w") as f:
        f.write("keep: 100000\n")
    out = run(mpi(a, a.ranks) + ["--mode", a.mode, "--steps", str(a.steps), "--walkers", str(a.walkers),
                                 "--checkpoint-every", "1", "--dir", d, "--config", keep, "--seed", str(a.seed)]
              + a.extra, "run checkpointing every step")
    cxx = EVOLUTION_ROW.findall(run([a.mpiexec, "-n", "3", a.evolution, d], "evolution.cpp on 3 ranks"))
    py = EVOLUTION_ROW.findall(run([sys.executable, a.example, d], "evolution.py"))
    ok = check(len(cxx) >= a.steps and len(py) == len(cxx), f"{len(cxx)} checkpoints read by C++, {len(py)} by Python")
    steps = [int(r[0]) for r in cxx]
    ok &= check(steps == list(range(steps[0], steps[0] + len(steps))) and steps[-1] == a.steps,
                f"steps {steps[0]}..{steps[-1]}, one checkpoint each")
    ok &= check([r[:3] for r in cxx] == [r[:3] for r in py], "step, population and trial energy agree exactly")
    worst = max(abs(float(c[3]) - float(p[3])) / abs(float(p[3])) for c, p in zip(cxx, py))
    ok &= check(worst < 1e-11, f"mean local energies agree (relative difference {worst:.2e}, summation order)")
    walkers = [int(r[1]) for r in cxx]
    if a.mode == "dmc":
        ok &= check(len(set(walkers)) > 1, f"the DMC population moves: {min(walkers)}..{max(walkers)}")
    import ckpt  # the Python package (PYTHONPATH): the population is the length of the stored walker arrays
    c = ckpt.open(d).latest()
    ok &= check(c["walkers/weight"].shape[0] == walkers[-1], f"step {c.step}: {walkers[-1]} walkers stored")
    ok &= check(field(out, "energy") != "", "the run finished")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["energy", "restart", "kill", "evolution"])
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--app", required=True)
    ap.add_argument("--dir", required=True, help="scratch directory (removed and recreated per check)")
    ap.add_argument("--mode", default="dmc", choices=["vmc", "dmc"])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--ranks-after", type=int, default=4)
    ap.add_argument("--particles", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=0.4)
    ap.add_argument("--walkers", type=int, default=200)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--stop", type=int, default=30, help="restart: the step the first part stops at; "
                    "kill: the checkpoint after which the job is killed")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--evolution", help="evolution: docs/examples' evolution (C++) executable")
    ap.add_argument("--example", help="evolution: docs/examples/evolution.py")
    # Everything after "--" goes to qmc_walkers unchanged.
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    a.extra = argv[cut + 1:]
    os.makedirs(a.dir, exist_ok=True)
    ok = {"energy": cmd_energy, "restart": cmd_restart, "kill": cmd_kill, "evolution": cmd_evolution}[a.what](a)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
