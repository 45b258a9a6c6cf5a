#!/usr/bin/env python3
"""The evolution of a qmc_walkers run, read from its checkpoints alone (no log, no restart).

    printf 'keep: 100000\\n' > /tmp/keep.yaml
    mpiexec -n 4 qmc_walkers --mode dmc --steps 300 --walkers 250 --checkpoint-every 1 \\
        --dir /tmp/qmc --config /tmp/keep.yaml
    PYTHONPATH=<prefix>/lib/python python3 docs/examples/evolution.py /tmp/qmc docs/img/qmc_evolution.png

For every complete checkpoint: the walker population (`state/global_walkers`), the trial energy
(`state/trial_energy`, a uniform scalar) and the weighted mean local energy of the walkers, computed from
the stored arrays `walkers/weight` and `walkers/local_energy` (whatever rank count wrote them). One line
per checkpoint on stdout, as its C++ twin evolution.cpp prints it; the plot when a PNG path is given."""
import sys

import numpy as np

import ckpt


def main(root, png=None):
    s = ckpt.open(root)
    steps, population, trial, mean_e = [], [], [], []
    for c in s:  # oldest first
        w = c["walkers/weight"].read()
        e = c["walkers/local_energy"].read()
        steps.append(c.step)
        population.append(int(c["state/global_walkers"].read()))
        trial.append(float(c["state/trial_energy"].read()))
        mean_e.append(float(np.sum(w * e) / np.sum(w)))
        print(f"step {steps[-1]} walkers {population[-1]} trial_energy {trial[-1]:.12g} "
              f"mean_local_energy {mean_e[-1]:.12g}")
    if png is None:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 5.5))
    ax1.plot(steps, population, color="tab:blue")
    ax1.set_ylabel("walkers (all ranks)")
    ax1.set_title(f"qmc_walkers from its checkpoints alone ({root})")
    ax2.plot(steps, mean_e, label="weighted mean local energy", color="tab:green")
    ax2.plot(steps, trial, label="trial energy", color="tab:orange", alpha=0.8)
    ax2.set_xlabel("step (one checkpoint each)")
    ax2.set_ylabel("energy")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: evolution.py <checkpoint root> [out.png]")
    main(*sys.argv[1:])
