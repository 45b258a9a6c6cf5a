"""The Python package `ckpt` on checkpoints written by gen_checkpoints (tests/tools) at 4 and 3 ranks
through every compiled transport: steps, descriptions, whole arrays, numpy slicing against the whole
array, per-rank locals, scalars, and damage (a flipped byte in one block, a broken index).

Environment: CKPTTEST_PYDATA (the data sets' root), CKPTTEST_SETS ("name:ranks:transport[:series],...";
a series set has step 10 in segment series.0 and step 20 in series.1),
CKPT_LIBRARY and PYTHONPATH (set by ctest)."""
import os
import shutil

import numpy as np
import pytest

import ckpt

DATA = os.environ.get("CKPTTEST_PYDATA", "")
SETS = [s.split(":") for s in os.environ.get("CKPTTEST_SETS", "").split(",") if s]


def expected(step):
    """What gen_checkpoints (variant 0) stores at `step`, as global arrays."""
    t = float(step)
    gy, gx = np.meshgrid(np.arange(16), np.arange(12), indexing="ij")
    temp = np.sin(0.1 * gy + 0.01 * t) + 0.5 * gx
    z, a, b = np.meshgrid(np.arange(10), np.arange(4), np.arange(6), indexing="ij")
    dens = (1.0 + 0.25 * z + 0.125 * a + 0.0625 * b + 0.001 * t).astype(np.float32)
    ids = (1000 * step + np.arange(101) - 50).astype(np.int64)
    return {"grid/temp": temp, "grid/dens": dens, "particles/id": ids}


@pytest.fixture(params=SETS, ids=[s[0] for s in SETS])
def dataset(request):
    name, ranks, transport = request.param[:3]
    return os.path.join(DATA, name), int(ranks), transport


def is_series(path):
    return os.path.isdir(os.path.join(path, "series.0"))


def test_sets_were_configured():
    assert SETS, "CKPTTEST_SETS names no data set"
    assert {s[2] for s in SETS} >= {"posix", "mpiio", "rbio"}


def test_describes_and_reads(dataset):
    path, ranks, transport = dataset
    s = ckpt.open(path)
    assert s.steps == [10, 20]
    assert 20 in s and 15 not in s and len(s) == 2
    with pytest.raises(KeyError):
        s[15]
    c = s.latest()
    assert (c.step, c.nranks, c.transport) == (20, ranks, transport)
    if is_series(path):  # a step is a name, read from its segment
        assert ckpt.open(os.path.join(path, "ckpt.10")).steps == [10]
        assert ckpt.open(os.path.join(path, "latest")).latest()["step"].read() == 20
        with pytest.raises(ckpt.NotFoundError):
            ckpt.open(os.path.join(path, "ckpt.15"))
    assert c.variables == ["grid/temp", "grid/dens", "particles/id", "step", "time", "rank_info", "blob"]
    with pytest.raises(KeyError):
        c["nope"]
    want = expected(20)
    temp = c["grid/temp"]
    assert (temp.kind, temp.dtype, temp.shape, temp.attrs) == ("global", np.dtype(np.float64), (16, 12), {"units": "K"})
    assert len(temp.blocks) == ranks and temp.ranks == list(range(ranks))
    assert temp.min == pytest.approx(want["grid/temp"].min(), rel=1e-14)
    assert temp.max == pytest.approx(want["grid/temp"].max(), rel=1e-14)
    for name, arr in want.items():
        v = c[name]
        got = v.read()
        assert got.dtype == arr.dtype and got.shape == arr.shape
        np.testing.assert_allclose(got, arr, rtol=1e-15, atol=0)
    assert c["step"].kind == "scalar" and c["step"].read() == 20 and isinstance(c["step"].read(), np.int64)
    assert c["time"].read() == 10.0
    info = c["rank_info"]
    assert info.kind == "local" and not info.uniform
    with pytest.raises(ValueError):
        info.read()
    for r in range(ranks):
        assert info.read(rank=r).tolist() == [r, ranks, 7]
    with pytest.raises(KeyError):
        info.read(rank=ranks)
    assert c["blob"].read().tolist() == [0xA0 + i for i in range(16)]
    assert s[10]["step"].read() == 10
    c.verify()


SLICES = [np.s_[3:9, 2:7], np.s_[:, 5], np.s_[7], np.s_[-1, -3:], np.s_[::3, 1::4], np.s_[::-2, 10:2:-3],
          np.s_[..., 0], np.s_[2:2, :], np.s_[15, 11], np.s_[..., 4:5]]
SLICES_3D = [np.s_[2:9, 1, ::-1], np.s_[..., 3], np.s_[9, :, :], np.s_[-3:, 1:3, 2:6:3]]


def test_slicing_matches_numpy(dataset):
    c = ckpt.open(dataset[0]).latest()
    temp, dens = c["grid/temp"], c["grid/dens"]
    full_t, full_d = temp.read(), dens.read()
    for k in SLICES:
        got = temp[k]
        assert got.shape == full_t[k].shape, k
        np.testing.assert_array_equal(got, full_t[k], err_msg=str(k))
    for k in SLICES_3D:
        np.testing.assert_array_equal(dens[k], full_d[k], err_msg=str(k))
    ids = c["particles/id"]
    np.testing.assert_array_equal(ids[90:], ids.read()[90:])
    with pytest.raises(IndexError):
        temp[16, 0]
    with pytest.raises(IndexError):
        temp[0, 0, 0]
    with pytest.raises(TypeError):
        temp[[1, 2]]


def flip_value(directory, value):
    """Flips a byte of the first occurrence of `value` (numpy scalar) in the data files of `directory`."""
    needle = np.asarray(value).tobytes()
    for name in sorted(os.listdir(directory)):
        if name in ("index", "steps"):
            continue
        p = os.path.join(directory, name)
        data = bytearray(open(p, "rb").read())
        at = data.find(needle)
        if at >= 0:
            data[at] ^= 0x01
            open(p, "wb").write(bytes(data))
            return name
    raise AssertionError(f"{value!r} is in no data file of {directory}")


def test_damage_is_named_and_contained(dataset, tmp_path):
    path, ranks, _ = dataset
    root = tmp_path / "ckpt"
    shutil.copytree(path, root, symlinks=True)
    # The last particle id of step 20 lives in the last rank's block of particles/id.
    series = is_series(root)
    flip_value(root / ("series.1" if series else "ckpt.20"), np.int64(20000 + 100 - 50))
    c = ckpt.open(root)[20]
    ids = c["particles/id"]
    if ranks > 1:
        np.testing.assert_array_equal(ids[0:10], expected(20)["particles/id"][0:10])  # another block
    with pytest.raises(ckpt.CorruptError) as e:
        ids[100]
    assert "'particles/id'" in str(e.value) and f"rank {ranks - 1}" in str(e.value)
    np.testing.assert_allclose(c["grid/temp"].read(), expected(20)["grid/temp"], rtol=1e-15)
    with pytest.raises(ckpt.CorruptError) as e:
        c.verify()
    assert "1 bad block(s)" in str(e.value) and "particles/id" in str(e.value)
    # A damaged index: the step is no longer complete; the older one still is. (A series: a byte of
    # step 20's record header in the step log - its trailer still names it: damaged, not torn.)
    with open(root / ("series.1/steps" if series else "ckpt.20/index"), "r+b") as f:
        at = 40 + 20 if series else 20  # series: the log's header, then the record header's seq
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))
    s = ckpt.open(root)
    assert s.steps == [10]
    with pytest.raises(KeyError):
        s[20]
    with pytest.raises(ckpt.CorruptError) as e:
        ckpt.open(root / "ckpt.20")
    assert "damaged" in str(e.value) or not series, str(e.value)
    assert ckpt.open(root / "ckpt.10").steps == [10]


def test_missing_paths():
    with pytest.raises(ckpt.NotFoundError):
        ckpt.open(os.path.join(DATA, "no-such-dir"))
    with pytest.raises(KeyError):
        ckpt.open(os.path.join(DATA, "no-such-dir"))
