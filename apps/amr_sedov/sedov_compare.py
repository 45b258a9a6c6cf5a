#!/usr/bin/env python3
"""Magnitude error (FLASH-X eq. 1, sfocu's "mag error") between two amr_sedov checkpoints written with
the hdf5 transport, on any meshes: both are resampled (piecewise constant) to the uniform grid of the
finer one's finest level. Tracers are matched by tag.

    mE = sup|a - b| / max(sup|a|, sup|b|, 1e-99)

  sedov_compare.py A/ckpt.120 B/ckpt.120          -> dens, pres, pdens, ptemp and the two times
  sedov_compare.py --plot out.png --label L RUN_A RUN_B   -> mE over the checkpoints both runs have
"""
import argparse
import glob
import os
import re
import sys

import h5py
import numpy as np

GAMMA = 1.4


def load(path):
    """Checkpoint directory or its .h5 file -> dict of arrays."""
    if os.path.isdir(path):
        path = sorted(glob.glob(os.path.join(path, "ckpt.*.h5")))[0]
    with h5py.File(path, "r") as f:
        d = {k: f[f"unk/{k}"][...] for k in ("dens", "momx", "momy", "ener")}
        d["level"], d["coord"] = f["grid/level"][...], f["grid/coord"][...]
        d["time"] = float(f["run/time/rank0"][()])
        if "particles" in f:
            d["pid"], d["pprop"] = f["particles/id"][...], f["particles/dens_temp"][...]
    return d


def uniform(d, level):
    """Block data -> images of density and pressure at `level` (2 root blocks of 16 cells per side)."""
    n = 2 * 16 * 2 ** (level - 1)
    pres_blocks = (GAMMA - 1) * (d["ener"] - 0.5 * (d["momx"] ** 2 + d["momy"] ** 2) / d["dens"])
    out = {"dens": np.zeros((n, n)), "pres": np.zeros((n, n))}
    for b, (lev, (bi, bj)) in enumerate(zip(d["level"], d["coord"])):
        f = 2 ** (level - lev)  # finest cells per cell of this block
        for name, blk in (("dens", d["dens"][b]), ("pres", pres_blocks[b])):
            img = np.kron(blk, np.ones((f, f)))
            out[name][bj * 16 * f:(bj + 1) * 16 * f, bi * 16 * f:(bi + 1) * 16 * f] = img
    return out


def mag_error(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), np.max(np.abs(b)), 1e-99))


def compare(path_a, path_b):
    a, b = load(path_a), load(path_b)
    level = int(max(a["level"].max(), b["level"].max()))
    ua, ub = uniform(a, level), uniform(b, level)
    out = {"dens": mag_error(ua["dens"], ub["dens"]), "pres": mag_error(ua["pres"], ub["pres"])}
    if "pid" in a and "pid" in b:
        oa, ob = np.argsort(a["pid"][:, 1]), np.argsort(b["pid"][:, 1])
        if np.array_equal(a["pid"][oa, 1], b["pid"][ob, 1]):
            out["pdens"] = mag_error(a["pprop"][oa, 0], b["pprop"][ob, 0])
            out["ptemp"] = mag_error(a["pprop"][oa, 1], b["pprop"][ob, 1])
    out["time_a"], out["time_b"] = a["time"], b["time"]
    return out


def steps(run):
    return sorted(int(m.group(1)) for x in os.listdir(run) if (m := re.fullmatch(r"ckpt\.(\d+)", x)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--plot", help="a and b are run directories: plot mE over their common checkpoints")
    ap.add_argument("--label", action="append", default=[], help="curve label (with --plot; repeat with --pair)")
    ap.add_argument("--pair", nargs=2, action="append", default=[], help="another pair of runs for the plot")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    if not a.plot:
        for k, v in compare(a.a, a.b).items():
            print(f"{k:6s} {v:.6g}")
        return 0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pairs = [(a.a, a.b)] + [tuple(p) for p in a.pair]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for n, (ra, rb) in enumerate(pairs):
        label = a.label[n] if n < len(a.label) else f"{ra} vs {rb}"
        common = sorted(set(steps(ra)) & set(steps(rb)))
        rows = [(s, compare(f"{ra}/ckpt.{s}", f"{rb}/ckpt.{s}")) for s in common]
        for line in rows:
            print(label, line[0], {k: round(v, 6) for k, v in line[1].items()})
        x = [s for s, _ in rows]
        for ax, keys in ((axes[0], ("dens", "pres")), (axes[1], ("pdens", "ptemp"))):
            for k in keys:
                if all(k in r for _, r in rows):
                    ax.semilogy(x, [max(r[k], 1e-17) for _, r in rows], marker="o", ms=3, label=f"{k}: {label}")
    axes[0].set_title("Eulerian variables")
    axes[1].set_title("Lagrangian (tracer) variables")
    for ax in axes:
        ax.set_xlabel("checkpoint (step)")
        ax.set_ylabel("magnitude error, eq. (1)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(a.title or "cross-mesh restart vs same-mesh run")
    fig.tight_layout()
    fig.savefig(a.plot, dpi=110)
    print(f"wrote {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
