"""Checkpoint.rows_by_key and Variable.read(order_by=...) on the joined data sets of the tool tests
(tests/tools/gen_joined.cpp): the same 24 blocks written by 4 and by 2 ranks, stored in different row
orders, read the same in key order; keys that cannot be keys are refused naming why.

    CKPTTEST_JOINDATA=<dir holding join4, join2, joindup2> python3 -m pytest test_rows_by_key.py
"""
import os

import numpy as np
import pytest

import ckpt

DATA = os.environ.get("CKPTTEST_JOINDATA", "")


def step(name):
    path = os.path.join(DATA, name)
    if not os.path.isdir(path):
        pytest.fail(f"data set {path} missing (CKPTTEST_JOINDATA; written by the tools_gen_* tests)")
    return ckpt.open(path).latest()


def test_rows_by_key_orders_rows_whatever_the_rank_count():
    a, b = step("join4"), step("join2")
    assert (a.nranks, b.nranks) == (4, 2)
    ids_a, ids_b = a["blocks/id"].read(), b["blocks/id"].read()
    assert not np.array_equal(ids_a, ids_b)  # stored in another order
    order_a, order_b = a.rows_by_key("blocks/id"), b.rows_by_key("blocks/id")
    assert order_a.dtype == np.uint64 and len(order_a) == 24
    want = 1000 + 7 * np.arange(24)
    assert np.array_equal(ids_a[order_a], want) and np.array_equal(ids_b[order_b], want)
    assert np.array_equal(a.rows_by_key("blocks/uid"), order_a)  # the same ids as u16: the same order
    for name in ("blocks/id", "blocks/rho", "blocks/level", "blocks/pair"):
        ra, rb = a[name].read(order_by="blocks/id"), b[name].read(order_by="blocks/id")
        assert np.array_equal(ra, rb), name
        assert not np.array_equal(a[name].read(), b[name].read()), name  # by position they differ
    rho = a["blocks/rho"].read(order_by="blocks/id")
    assert rho.shape == (24, 4) and np.array_equal(rho[:, 0], want) and np.array_equal(rho[:, 3], want + 0.75)


def test_keys_that_cannot_be_keys():
    a = step("join4")
    with pytest.raises(ckpt.InvalidArgumentError, match="f64.*integer"):
        a.rows_by_key("blocks/fid")
    with pytest.raises(ckpt.InvalidArgumentError, match="one value per row"):
        a.rows_by_key("blocks/pair")
    with pytest.raises(ckpt.InvalidArgumentError, match="scalar.*joined"):
        a.rows_by_key("time")
    with pytest.raises(ckpt.NotFoundError):
        a.rows_by_key("nosuch")
    with pytest.raises(ckpt.InvalidArgumentError, match=r"not unique.*1028 \(rows \d+, \d+\)"):
        step("joindup2").rows_by_key("blocks/id")
    # order_by: only joined arrays, and only by a key whose rows are theirs.
    with pytest.raises(ValueError, match="not those of key"):
        a["tracers/x"].read(order_by="blocks/id")
    with pytest.raises(ValueError, match="needs a joined array"):
        a["time"].read(order_by="blocks/id")
