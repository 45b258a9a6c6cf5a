#!/usr/bin/env python3
"""Reads a checkpoint written by the hdf5 transport with h5py alone and checks shapes, values and
attributes against what tests/integration/test_nm_restart.cpp wrote (4 ranks, step 10)."""
import glob
import sys

import h5py
import numpy as np

# argv[1]: the checkpoint directory; its one HDF5 file is ckpt.<id>.0.h5 (the id keeps MPI-IO base
# names unique, see transports/transport.hpp unique_file_name).
files = glob.glob(sys.argv[1] + "/*.h5")
assert len(files) == 1, files
path = files[0]
with h5py.File(path, "r") as f:
    field = f["field"][...]
    assert field.shape == (29, 11), field.shape
    i, j = np.meshgrid(np.arange(29), np.arange(11), indexing="ij")
    assert np.array_equal(field, 1.0 / (1.0 + i) + 3.0 * j), "field values differ"
    ids = f["particles/id"][...]
    assert ids.shape == (1001,) and np.array_equal(ids, np.arange(1001) * 7919), "particle ids differ"
    assert f["field"].attrs["ckpt_min"] == field.min() and f["field"].attrs["ckpt_max"] == field.max()
    assert len(f["field"].attrs["ckpt_xxh3_by_rank"]) == 4
    for r in range(4):
        assert f[f"ranks/{r}/time"][()] == 2.5
        assert f[f"ranks/{r}/rank_tag"][()] == r
    assert f.attrs["ckpt_step"] == 10
print(f"h5py read {path}: field {field.shape}, particles/id {ids.shape}, attributes ok")
