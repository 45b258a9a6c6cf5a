#!/usr/bin/env python3
"""Reads a checkpoint written by the hdf5 transport with h5py alone and checks shapes, values and
attributes against what tests/integration/test_nm_restart.cpp wrote (4 ranks, step 10). With
--ckpt, also converts the checkpoint with `ckpt convert` and checks that both files have one layout:
the same objects, the same values and the same layout attributes (docs/format.md, "HDF5 files"), an
empty joined block's checksum included (rank 1 writes no tracer rows)."""
import argparse
import glob
import os
import subprocess

import h5py
import numpy as np

# The attributes both writers put on an object (convert adds provenance and annotations).
LAYOUT_ATTRS = ("ckpt_dtype", "ckpt_kind", "ckpt_layout", "ckpt_min", "ckpt_max", "ckpt_xxh3_by_rank",
                "ckpt_rank", "ckpt_xxh3")
ROOT_ATTRS = ("ckpt_step", "ckpt_nranks", "ckpt_format_version")

ap = argparse.ArgumentParser()
ap.add_argument("dir", help="the checkpoint directory (ckpt.10)")
ap.add_argument("--ckpt", help="the ckpt command line: also compare with `ckpt convert`'s output")
ap.add_argument("--out", help="where to write the converted file")
ap.add_argument("--transport", default="hdf5", help="the transport that wrote it: hdf5 or hdf5-sync")
a = ap.parse_args()

# Its one HDF5 file is ckpt.<id>.0.h5 (the id keeps MPI-IO base names unique, see
# transports/transport.hpp unique_file_name).
files = glob.glob(a.dir + "/*.h5")
assert len(files) == 1, files
path = files[0]
with h5py.File(path, "r") as f:
    field = f["field"][...]
    assert field.shape == (29, 11), field.shape
    i, j = np.meshgrid(np.arange(29), np.arange(11), indexing="ij")
    assert np.array_equal(field, 1.0 / (1.0 + i) + 3.0 * j), "field values differ"
    ids = f["particles/id"][...]
    assert ids.shape == (1001,) and np.array_equal(ids, np.arange(1001) * 7919), "particle ids differ"
    fa = f["field"].attrs
    assert fa["ckpt_min"] == field.min() and fa["ckpt_max"] == field.max()
    assert fa["ckpt_layout"] == "global" and fa["ckpt_dtype"] == "f64"
    assert len(fa["ckpt_xxh3_by_rank"]) == 4 and all(x != 0 for x in fa["ckpt_xxh3_by_rank"])
    assert f["particles/id"].attrs["ckpt_min"] == 0 and f["particles/id"].attrs["ckpt_max"] == 1000 * 7919
    for r in range(4):
        assert f[f"time/rank{r}"][()] == 2.5
        assert f[f"rank_tag/rank{r}"][()] == r and f[f"rank_tag/rank{r}"].attrs["ckpt_rank"] == r
    tag = f["rank_tag"]
    assert isinstance(tag, h5py.Group) and tag.attrs["ckpt_layout"] == "per_rank"
    assert tag.attrs["ckpt_min"] == 0 and tag.attrs["ckpt_max"] == 3
    assert [tag[f"rank{r}"].attrs["ckpt_xxh3"] for r in range(4)] == list(tag.attrs["ckpt_xxh3_by_rank"])
    # The joined tracers: one dataset of every rank's rows in rank order (rank r wrote (5r + 3) % 8
    # rows, rank 1 none), like a global array.
    tracers = f["tracers"]
    rows = [(5 * r + 3) % 8 for r in range(4)]
    assert isinstance(tracers, h5py.Dataset) and tracers.shape == (sum(rows), 3), tracers
    g, j = np.meshgrid(np.arange(sum(rows)), np.arange(3), indexing="ij")
    assert np.array_equal(tracers[...], 100.0 * g + j), "tracer rows differ"
    assert tracers.attrs["ckpt_kind"] == "joined" and tracers.attrs["ckpt_layout"] == "global"
    assert tracers.attrs["ckpt_min"] == 0 and tracers.attrs["ckpt_max"] == 100.0 * (sum(rows) - 1) + 2
    assert len(tracers.attrs["ckpt_xxh3_by_rank"]) == 4
    assert f.attrs["ckpt_step"] == 10 and f.attrs["ckpt_nranks"] == 4 and f.attrs["ckpt_transport"] == a.transport
print(f"h5py read {path}: field {field.shape}, particles/id {ids.shape}, tracers {tracers.shape}, attributes ok")

if a.ckpt:
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(a.dir)), "converted.h5")
    subprocess.run([a.ckpt, "convert", a.dir, "-o", out, "--force"], check=True)

    def objects(f):
        names = []
        f.visit(names.append)
        return sorted(names)

    with h5py.File(path, "r") as t, h5py.File(out, "r") as c:
        assert objects(t) == objects(c), (objects(t), objects(c))
        for name in objects(t):
            x, y = t[name], c[name]
            assert type(x) is type(y), name
            if isinstance(x, h5py.Dataset):
                assert x.shape == y.shape and x.dtype == y.dtype, name
                assert np.array_equal(x[()], y[()]), name
            for k in LAYOUT_ATTRS:
                assert (k in x.attrs) == (k in y.attrs), (name, k)
                if k in x.attrs:
                    assert np.array_equal(x.attrs[k], y.attrs[k]), (name, k, x.attrs[k], y.attrs[k])
        for k in ROOT_ATTRS:
            assert t.attrs[k] == c.attrs[k], k
        assert c.attrs["ckpt_transport"] == a.transport  # convert records the transport that wrote the checkpoint
        n = len(objects(t))
    print(f"ckpt convert wrote the same layout: {n} objects, attributes equal")
