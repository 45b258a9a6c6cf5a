#!/usr/bin/env python3
"""Checks of apps/amr_sedov, each run as a child mpiexec job.

  shock                  the shock radius at --tmax is within 3 % of the Sedov-Taylor radius
                         R = 1.00402 (E t^2/rho0)^(1/4) (computed here, independently of the app), and
                         the AMR run used the requested number of levels.
  restart --ranks-after R  run 4 ranks to --tmax with a checkpoint every K steps; copy one middle
                         checkpoint into a fresh directory and --restart from it on R ranks: the restored
                         state must equal the state the first run printed at that checkpoint, and the
                         final `state:` must equal the uninterrupted run's (bit for bit, also for R != 4:
                         the app does not depend on the decomposition).
  crossmesh              restart an AMR checkpoint on the uniform mesh and a uniform checkpoint on AMR;
                         both must finish with the shock within 3 %, and (with --h5) the magnitude error
                         (FLASH-X eq. 1) of density/pressure at tmax against the same-mesh run must be
                         below 0.1 and that of the tracers' density below 0.3.
  meshdiff               the cross-mesh experiment of sedov_compare.py, small: a max-level-3 run
                         checkpointed every 0.005 of time, restarted at t = 0.01 on max level 4 and,
                         as a control, on the same mesh (3 ranks); per later checkpoint the magnitude
                         error against the reference run must be finite, non-zero and bounded (density,
                         tracer density and position) on the other mesh, and exactly 0 on the same mesh.
Exit status 0 on success; every failure prints the output of the job that failed.
"""
import argparse
import math
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mpijob import check, run  # noqa: E402

XI0 = 1.00402  # cylindrical, gamma = 1.4 (apps/amr_sedov/sedov_constant.py)


def mpi(a, n):
    return [a.mpiexec, "-n", str(n), a.app]


def field(out, name):
    m = re.findall(rf"^{name}: (.*)$", out, re.M)
    if not m:
        print(out)
        sys.exit(f"FAIL: no '{name}:' line")
    return m[-1].strip()


def shock_ok(out, tmax, what):
    lines = out.strip().splitlines()
    ok = check(lines[-2].startswith("shock radius:") and lines[-1].startswith("state:"),
               f"{what}: the last two lines are 'shock radius:' and 'state:'")
    m = re.match(r"(\S+) analytic: (\S+) error: (\S+)%$", field(out, "shock radius"))
    r, r0 = float(m.group(1)), float(m.group(2))
    expect = XI0 * (tmax ** 2) ** 0.25
    ok &= check(abs(r0 - expect) < 1e-5, f"{what}: analytic radius {r0} == {expect:.6f}")
    ok &= check(abs(r - expect) / expect < 0.03, f"{what}: shock radius {r:.5f} within 3 % of {expect:.5f} "
                f"({100 * (r - expect) / expect:+.2f} %)")
    return ok


def cmd_shock(a):
    d = os.path.join(a.dir, "shock")
    shutil.rmtree(d, ignore_errors=True)
    out = run(mpi(a, 4) + ["--tmax", str(a.tmax), "--max-level", str(a.max_level), "--checkpoint-every", "100000",
                           "--dir", d, "--particles", str(a.particles)], "amr run")
    ok = shock_ok(out, a.tmax, "amr")
    m = re.search(r"levels (\d+)\.\.(\d+)", field(out, "summary"))
    ok &= check(int(m.group(2)) == a.max_level and int(m.group(1)) < a.max_level,
                f"AMR mesh spans levels {m.group(1)}..{m.group(2)} (finest = --max-level {a.max_level})")
    return ok


def cmd_restart(a):
    base = os.path.join(a.dir, f"restart-4-to-{a.ranks_after}")
    shutil.rmtree(base, ignore_errors=True)
    common = ["--tmax", str(a.tmax), "--max-level", str(a.max_level), "--checkpoint-every", str(a.every),
              "--particles", str(a.particles)]
    env = {"AMR_SEDOV_DIGESTS": "1", "CKPT_KEEP": "1000"}
    ref = run(mpi(a, 4) + common + ["--dir", f"{base}/ref"], "uninterrupted, 4 ranks", env)
    written = {int(s): st for s, st in re.findall(r"^checkpoint: step (\d+) .* state (\w+)$", ref, re.M)}
    steps = sorted(written)
    ok = check(len(steps) >= 3, f"the reference run wrote {len(steps)} checkpoints")
    mid = steps[len(steps) // 2 - 1]
    os.makedirs(f"{base}/cont")
    shutil.copytree(f"{base}/ref/ckpt.{mid}", f"{base}/cont/ckpt.{mid}")
    cont = run(mpi(a, a.ranks_after) + common + ["--dir", f"{base}/cont", "--restart"],
               f"--restart from step {mid}, {a.ranks_after} ranks")
    m = re.search(r"^restored: step (\d+) .* state (\w+)$", cont, re.M)
    ok &= check(m is not None and int(m.group(1)) == mid, f"restarted from step {mid}")
    ok &= check(m is not None and m.group(2) == written[mid],
                f"restored state {m.group(2) if m else None} == state written at step {mid} {written[mid]}")
    ok &= check(field(cont, "state") == field(ref, "state"),
                f"final state {field(cont, 'state')} == uninterrupted {field(ref, 'state')} (bit for bit)")
    ok &= check(field(cont, "shock radius") == field(ref, "shock radius"), "shock radius line identical")
    return ok


def cmd_crossmesh(a):
    base = os.path.join(a.dir, "crossmesh")
    shutil.rmtree(base, ignore_errors=True)
    common = ["--tmax", str(a.tmax), "--max-level", str(a.max_level), "--checkpoint-every", str(a.every),
              "--particles", str(a.particles)] + (["--transport", "hdf5"] if a.h5 else [])
    env = {"CKPT_KEEP": "1000"}
    ok = True
    for src, dst in (("amr", "uniform"), ("uniform", "amr")):
        d_ref, d_x = f"{base}/{src}-ref", f"{base}/{src}-to-{dst}"
        ref = run(mpi(a, 4) + common + ["--mesh", src, "--dir", d_ref], f"{src} run", env)
        steps = sorted(int(x.split(".")[1]) for x in os.listdir(d_ref) if re.fullmatch(r"ckpt\.\d+", x))
        mid = steps[len(steps) // 2 - 1]
        os.makedirs(d_x)
        shutil.copytree(f"{d_ref}/ckpt.{mid}", f"{d_x}/ckpt.{mid}")
        x = run(mpi(a, 3) + common + ["--mesh", dst, "--dir", d_x, "--restart"],
                f"{src} checkpoint {mid} -> {dst} mesh, 3 ranks", env)
        ok &= check(re.search(rf"^cross-mesh restart: {src} checkpoint .*-> {dst} mesh", x, re.M) is not None,
                    f"{src} -> {dst}: the app converted the mesh")
        ok &= shock_ok(x, a.tmax, f"{src} -> {dst}")
        if a.h5:
            final = max(int(s.split(".")[1]) for s in os.listdir(d_x) if re.fullmatch(r"ckpt\.\d+", s))
            final_ref = max(steps)
            sys.path.insert(0, a.compare_dir)
            import sedov_compare
            me = sedov_compare.compare(f"{d_ref}/ckpt.{final_ref}", f"{d_x}/ckpt.{final}")
            print("      magnitude errors at tmax: " + sedov_compare.describe(me))
            ok &= check(me["dens"] < 0.1 and me["pres"] < 0.1, f"{src} -> {dst}: mE of dens and pres < 0.1")
            if "pdens" in me:
                ok &= check(me["pdens"] < 0.3, f"{src} -> {dst}: mE of the tracers' density < 0.3")
    return ok


def cmd_meshdiff(a):
    sys.path.insert(0, a.compare_dir)
    import sedov_compare
    import ckpt
    work = os.path.join(a.dir, "meshdiff")
    lines = []
    finer, coarser = "max level 3 -> 4", "max level 3 -> 2"
    res = sedov_compare.experiment(a.app, work, a.mpiexec, ranks=4, max_level=3, tmax=0.03, ck_dt=0.005,
                                   restart_at=0.01, particles=256,
                                   variants={finer: ["--max-level", "4"], coarser: ["--max-level", "2"],
                                             "same mesh": []},
                                   log=lambda s: (print("      " + s), lines.append(s)))
    ok = check(all(len(rows) == 4 for rows in res.values()),
               f"4 checkpoints after the restart in each run ({[len(rows) for rows in res.values()]})")
    # Bounds: about twice what this size measures (dens 0.3-0.45, pdens 0.2-0.3, ppos 2e-3-6e-3).
    bounds = {"dens": 0.8, "pdens": 0.6, "ppos": 0.02}
    for name in (finer, coarser):
        for t, me in res[name]:
            for k, bound in bounds.items():
                ok &= check(math.isfinite(me[k]) and 0 < me[k] < bound,
                            f"{name}, t = {t:.3f}: 0 < mE({k}) = {me[k]:.3g} < {bound}")
            ok &= check(not me["same_tree"], f"{name}, t = {t:.3f}: the meshes differ")
    for name in (finer, coarser):  # the conversion is conservative: mass and energy kept to round-off
        m = [re.search(r"mass (\S+) -> (\S+), energy (\S+) -> (\S+)$", x) for x in lines
             if x.startswith(f"{name}: cross-mesh restart:")]
        ok &= check(len(m) == 1 and m[0] is not None, f"{name}: the app converted the mesh")
        if len(m) == 1 and m[0] is not None:
            v = [float(x) for x in m[0].groups()]
            ok &= check(abs(v[1] - v[0]) <= 1e-12 * abs(v[0]) and abs(v[3] - v[2]) <= 1e-12 * abs(v[2]),
                        f"{name}: mass {v[0]:.15g} -> {v[1]:.15g}, energy {v[2]:.15g} -> {v[3]:.15g} (1e-12)")
    for n, want in ((0, 4), (1, 2)):  # restart{n} is the n-th variant's run
        last = ckpt.open(os.path.join(work, f"restart{n}")).latest()
        got = int(last["grid/level"].read().max())
        ok &= check(got == want, f"the restart on max level {want} ends with finest level {got}")
    for t, me in res["same mesh"]:
        ok &= check(all(me[k] == 0 for k in sedov_compare.METRICS) and me["same_tree"],
                    f"same mesh, t = {t:.3f}: every mE is exactly 0 and the meshes are equal")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["shock", "restart", "crossmesh", "meshdiff"])
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--app", required=True)
    ap.add_argument("--compare-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                          "..", "..", "apps", "amr_sedov"))
    ap.add_argument("--dir", required=True, help="scratch directory (removed and recreated per check)")
    ap.add_argument("--ranks-after", type=int, default=4)
    ap.add_argument("--tmax", type=float, default=0.05)
    ap.add_argument("--max-level", type=int, default=3)
    ap.add_argument("--every", type=int, default=40)
    ap.add_argument("--particles", type=int, default=400)
    ap.add_argument("--h5", action="store_true", help="crossmesh: write with the hdf5 transport and compare")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    ok = {"shock": cmd_shock, "restart": cmd_restart, "crossmesh": cmd_crossmesh, "meshdiff": cmd_meshdiff}[a.what](a)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
