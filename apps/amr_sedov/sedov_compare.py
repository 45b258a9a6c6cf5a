#!/usr/bin/env python3
"""Magnitude error (FLASH-X eq. 1, sfocu's "mag error", the `mag_error` of `ckpt diff`) between amr_sedov
checkpoints on any meshes, read through ckpt's Python reader (any transport):

    mE = sup|a - b| / max(sup|a|, sup|b|, 1e-99)

`ckpt diff` compares global arrays element by element in their index space, which is only meaningful
on one mesh: here a block index is not a place and tracer rows are ordered by block. So the Eulerian
variables (density, pressure) are first resampled to a uniform grid - that of the finest level of
the finer mesh, coarse cells repeated (dens, pres), and that of the coarser mesh, fine cells averaged
(dens_c, pres_c) - and tracers are matched by tag; eq. (1) is then applied as `ckpt diff`
does. Tracer variables: density and temperature sampled at the tracer (pdens, ptemp) and position
(ppos, both coordinates).

  sedov_compare.py A/ckpt.120 B/ckpt.240      -> mE of dens, pres, dens_c, pres_c, pdens, ptemp, ppos
  sedov_compare.py series RUN_A RUN_B          -> the same for every pair of checkpoints at equal times
  sedov_compare.py figure --app amr_sedov --work DIR --out sedov_cross_mesh.png
        runs the cross-mesh experiment (a reference run, restarts of one of its checkpoints on other
        meshes, all continued to tmax), prints mE per later checkpoint and plots it
        (PYTHONPATH must reach python/ckpt; CKPT_LIBRARY may name libckpt).
"""
import argparse
import math
import os
import shutil
import subprocess
import sys

import numpy as np

import ckpt

GAMMA = 1.4
NB = 16  # cells per block side
NROOT = 2  # root blocks per side


def load(path):
    """One checkpoint directory -> dict of numpy arrays (block data, tree, tracers, time)."""
    c = ckpt.open(path).latest()
    d = {k: c[f"unk/{k}"].read() for k in ("dens", "momx", "momy", "ener")}
    d["level"], d["coord"] = c["grid/level"].read(), c["grid/coord"].read()
    d["time"] = float(c["run/time"].read())
    if "particles/pos" in c:
        d["ppos"], d["pprop"], d["pid"] = (c[f"particles/{k}"].read() for k in ("pos", "dens_temp", "id"))
    return d


def uniform(d, level):
    """Block data -> images of density and pressure on the uniform grid of `level`: a coarser block's
    cells are repeated (piecewise constant), a finer block's averaged (as the regrid's restriction)."""
    n = NROOT * NB * 2 ** (level - 1)
    pres_blocks = (GAMMA - 1) * (d["ener"] - 0.5 * (d["momx"] ** 2 + d["momy"] ** 2) / d["dens"])
    out = {"dens": np.full((n, n), np.nan), "pres": np.full((n, n), np.nan)}
    for b, (lev, (bi, bj)) in enumerate(zip(d["level"], d["coord"])):
        for name, blk in (("dens", d["dens"][b]), ("pres", pres_blocks[b])):
            if lev <= level:
                f = 2 ** (level - int(lev))  # cells of `level` per cell of this block, per side
                img = np.kron(blk, np.ones((f, f)))
            else:
                f = 2 ** (int(lev) - level)  # cells of this block per cell of `level`, per side
                img = blk.reshape(NB // f, f, NB // f, f).mean(axis=(1, 3))
            w = img.shape[0]  # cells of `level` under the block, per side
            out[name][bj * w:(bj + 1) * w, bi * w:(bi + 1) * w] = img
    if np.isnan(out["dens"]).any():
        raise ValueError("the blocks do not cover the domain")
    return out


METRICS = ("dens", "pres", "dens_c", "pres_c", "pdens", "ptemp", "ppos")


def mag_error(a, b):
    """Eq. (1), as `ckpt diff` computes it (0 when equal)."""
    diff = float(np.max(np.abs(a - b)))
    return 0.0 if diff == 0 else diff / max(float(np.max(np.abs(a))), float(np.max(np.abs(b))), 1e-99)


def compare_loaded(a, b):
    """mE between two loaded checkpoints. dens, pres: on the uniform grid of the finest level of the
    finer mesh (coarse cells repeated); dens_c, pres_c: of the coarser mesh (fine cells averaged)."""
    out = {}
    for suffix, pick in (("", max), ("_c", min)):
        level = int(pick(a["level"].max(), b["level"].max()))
        ua, ub = uniform(a, level), uniform(b, level)
        out["dens" + suffix], out["pres" + suffix] = (mag_error(ua[k], ub[k]) for k in ("dens", "pres"))
    if "pid" in a and "pid" in b:
        oa, ob = np.argsort(a["pid"][:, 1], kind="stable"), np.argsort(b["pid"][:, 1], kind="stable")
        if not np.array_equal(a["pid"][oa, 1], b["pid"][ob, 1]):
            raise ValueError("the two checkpoints hold different tracers")
        out["pdens"] = mag_error(a["pprop"][oa, 0], b["pprop"][ob, 0])
        out["ptemp"] = mag_error(a["pprop"][oa, 1], b["pprop"][ob, 1])
        out["ppos"] = mag_error(a["ppos"][oa], b["ppos"][ob])
    out["time_a"], out["time_b"] = a["time"], b["time"]
    out["same_tree"] = bool(np.array_equal(a["level"], b["level"]) and np.array_equal(a["coord"], b["coord"]))
    return out


def describe(me):
    """One line: every mE, and whether the two meshes were the same."""
    return "  ".join(f"{k} {v:.3e}" for k, v in me.items() if k in METRICS) + \
        ("  (same mesh)" if me["same_tree"] else "  (meshes differ)")


def compare(path_a, path_b):
    """mE of every compared variable between two checkpoint directories, and their times."""
    return compare_loaded(load(path_a), load(path_b))


def series(run_a, run_b, after=-1.0):
    """[(time, mE dict)] for the checkpoints of two runs at equal times (relative 1e-9) later than `after`."""
    def by_time(run):
        s = ckpt.open(run)
        return {float(s[st]["run/time"].read()): os.path.join(run, f"ckpt.{st}") for st in s.steps}
    ta, tb = by_time(run_a), by_time(run_b)
    rows = []
    for t in sorted(ta):
        match = [u for u in tb if abs(u - t) <= 1e-9 * max(t, 1e-30)]
        if match and t > after * (1 + 1e-9):
            rows.append((t, compare(ta[t], tb[match[0]])))
    return rows


def run_app(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, CKPT_KEEP="100000"))
    if p.returncode != 0:
        sys.stdout.write(p.stdout + p.stderr)
        raise RuntimeError(f"{what} failed ({p.returncode}): {' '.join(cmd)}")
    return p.stdout


def experiment(app, work, mpiexec="mpiexec", ranks=4, max_level=4, tmax=0.05, ck_dt=0.0025, restart_at=0.02,
               particles=1024, variants=None, log=print):
    """The cross-mesh experiment. A reference AMR run at `max_level` checkpoints every `ck_dt` of
    simulated time; its checkpoint at `restart_at` is restarted, on `ranks` - 1 ranks, once per
    variant (name -> extra amr_sedov options: another maximum level, other refinement cutoffs, or
    none: the same mesh, the control), and every run continues to `tmax`. Returns {variant: [(time,
    mE dict)]} for the checkpoints after the restart, each against the reference run's at that time."""
    if variants is None:
        variants = {f"max level {max_level} -> {max_level + 1}": ["--max-level", str(max_level + 1)],
                    f"max level {max_level} -> {max_level - 1}": ["--max-level", str(max_level - 1)],
                    "cutoffs 0.8/0.2 -> 0.9/0.6": ["--refine-cutoff", "0.9", "--derefine-cutoff", "0.6"]}
    shutil.rmtree(work, ignore_errors=True)
    common = ["--tmax", repr(tmax), "--checkpoint-dt", repr(ck_dt), "--particles", str(particles)]
    ref = os.path.join(work, "reference")
    out = run_app([mpiexec, "-n", str(ranks), app] + common + ["--max-level", str(max_level), "--dir", ref],
                  "reference run")
    log(f"reference: {[x for x in out.splitlines() if x.startswith('summary:')][0]}")
    s = ckpt.open(ref)
    start = [st for st in s.steps if abs(float(s[st]["run/time"].read()) - restart_at) <= 1e-9 * restart_at]
    if not start:
        raise RuntimeError(f"the reference run has no checkpoint at t = {restart_at}")
    results = {}
    for n, (name, extra) in enumerate(variants.items()):
        d = os.path.join(work, f"restart{n}")
        os.makedirs(d)
        shutil.copytree(os.path.join(ref, f"ckpt.{start[0]}"), os.path.join(d, f"ckpt.{start[0]}"))
        opts = extra if "--max-level" in extra else ["--max-level", str(max_level)] + extra
        out = run_app([mpiexec, "-n", str(max(ranks - 1, 1)), app] + common + opts + ["--dir", d, "--restart"],
                      f"restart '{name}'")
        for line in out.splitlines():
            if line.startswith(("cross-mesh restart:", "summary:")):
                log(f"{name}: {line}")
        results[name] = series(ref, d, after=restart_at)
        for t, me in results[name]:
            log(f"  t = {t:.4f}  {describe(me)}")
    return results


def plot(results, out, title, restart_at):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, (name, rows) in enumerate(results.items()):
        c = colors[n % len(colors)]
        for ax, key, style in ((axes[0], "dens", "-"), (axes[0], "dens_c", "--"), (axes[1], "pdens", "-"),
                               (axes[1], "ppos", "--")):
            pts = [(t, me[key]) for t, me in rows if me.get(key, 0) > 0]  # exact zeros cannot be drawn
            if pts:
                ax.semilogy(*zip(*pts), style, color=c, marker="o", ms=3, label=f"{key}: {name}")
    axes[0].set_title("Eulerian density: on the finer mesh's grid (dens), the coarser's (dens_c)", fontsize=10)
    axes[1].set_title("Lagrangian tracers: density at the tracer (pdens), position (ppos)", fontsize=10)
    for ax in axes:
        ax.axvline(restart_at, color="gray", lw=1)
        ax.text(restart_at, 1.5e-5, " restart", color="gray", fontsize=8, va="bottom")
        ax.set_xlabel("time of the checkpoint")
        ax.set_ylim(1e-5, 2.0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right", ncol=2)
    axes[0].set_ylabel("magnitude error, eq. (1), vs the run on the original mesh")
    fig.suptitle(title + "\n(points at exactly 0 are not drawn)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    f = sub.add_parser("figure", help="run the cross-mesh experiment and plot it")
    f.add_argument("--app", required=True, help="the amr_sedov executable")
    f.add_argument("--mpiexec", default="mpiexec")
    f.add_argument("--work", required=True, help="scratch directory (removed first)")
    f.add_argument("--out", required=True, help="PNG to write")
    f.add_argument("--ranks", type=int, default=4)
    f.add_argument("--max-level", type=int, default=4)
    f.add_argument("--tmax", type=float, default=0.05)
    f.add_argument("--checkpoint-dt", type=float, default=0.0025)
    f.add_argument("--restart-at", type=float, default=0.02)
    f.add_argument("--particles", type=int, default=1024)
    s = sub.add_parser("series", help="mE per pair of checkpoints at equal times of two runs")
    s.add_argument("run_a")
    s.add_argument("run_b")
    if len(sys.argv) > 1 and sys.argv[1] not in ("figure", "series", "-h", "--help"):
        a, b = sys.argv[1:3] if len(sys.argv) == 3 else ap.error("expected A B, series, or figure")
        for k, v in compare(a, b).items():
            print(f"{k:9s} {v:.6g}")
        return 0
    a = ap.parse_args()
    if a.cmd == "series":
        for t, me in series(a.run_a, a.run_b):
            print(f"t = {t:.6g}  {describe(me)}")
        return 0
    if a.cmd != "figure":
        ap.error("expected A B, series, or figure")
    res = experiment(a.app, a.work, a.mpiexec, a.ranks, a.max_level, a.tmax, a.checkpoint_dt, a.restart_at,
                     a.particles)
    plot(res, a.out, f"amr_sedov cross-mesh restart at t = {a.restart_at} from a max-level-{a.max_level} run "
                     f"({a.particles} tracers)", a.restart_at)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
