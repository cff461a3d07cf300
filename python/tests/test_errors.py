"""Bad input raises a gkv.Error subclass naming what was wrong, and
changes nothing."""
import numpy as np
import pytest

import gkv


@pytest.fixture
def emb(store):
    store.create("emb", dtype="float32", row_shape=(4,), hi=10,
                 init="uniform", a=-1, b=1, seed=4)
    return store


def unchanged(store):
    return np.asarray(store.read("emb", 0, 10)).copy()


def test_error_hierarchy():
    assert issubclass(gkv.InvalidArgumentError, gkv.Error)
    assert issubclass(gkv.InvalidArgumentError, ValueError)
    assert issubclass(gkv.NotFoundError, LookupError)
    assert issubclass(gkv.RangeError, IndexError)
    assert gkv.error_classes["GKV_ESHAPE"] is gkv.ShapeError
    assert len(gkv.error_classes) == 20
    assert gkv.strerror(-1) == "no such tensor, key or row"


BAD_ROWS = [
    ("wrong dtype", lambda: np.ones((2, 4), np.float64), gkv.ShapeError, "dtype float64"),
    ("wrong shape", lambda: np.ones((2, 5), np.float32), gkv.ShapeError, r"shape \(2, 5\)"),
    ("wrong count", lambda: np.ones((3, 4), np.float32), gkv.ShapeError, r"expected \(2, 4\)"),
    ("flat", lambda: np.ones(8, np.float32), gkv.ShapeError, "shape"),
    ("non-contiguous", lambda: np.ones((4, 2), np.float32).T, gkv.InvalidArgumentError,
     "C-contiguous"),
    ("not an array", lambda: "abc", gkv.InvalidArgumentError, "str"),
    ("a list", lambda: [[1.0] * 4] * 2, gkv.InvalidArgumentError, "list"),
]


@pytest.mark.parametrize("what,rows,exc,msg", BAD_ROWS, ids=[b[0] for b in BAD_ROWS])
def test_bad_rows_change_nothing(emb, what, rows, exc, msg):
    before = unchanged(emb)
    with pytest.raises(exc, match=msg) as ei:
        emb.push("emb", [1, 2], rows(), "add")
    assert ei.value.name in ("GKV_ESHAPE", "GKV_EINVAL")
    assert ei.value.message and ei.value.code < 0
    np.testing.assert_array_equal(unchanged(emb), before)


BAD_IDS = [
    ("float IDs", np.array([1.0, 2.0]), gkv.InvalidArgumentError, "int64 or uint64"),
    ("int32 IDs", np.array([1, 2], np.int32), gkv.InvalidArgumentError, "int64 or uint64"),
    ("2-D IDs", np.array([[1, 2]], np.int64), gkv.InvalidArgumentError, "1-D"),
    ("strided IDs", np.arange(4, dtype=np.int64)[::2], gkv.InvalidArgumentError,
     "contiguous"),
    ("ID out of range", np.array([1, 10], np.int64), gkv.RangeError, "10"),
    ("negative ID", [1, -1], gkv.RangeError, "ID -1 .index 1. is negative"),
]


@pytest.mark.parametrize("what,ids,exc,msg", BAD_IDS, ids=[b[0] for b in BAD_IDS])
def test_bad_ids_change_nothing(emb, what, ids, exc, msg):
    before = unchanged(emb)
    with pytest.raises(exc, match=msg):
        emb.push("emb", ids, np.ones((2, 4), np.float32), "add")
    with pytest.raises(exc, match=msg):
        emb.pull("emb", ids)
    np.testing.assert_array_equal(unchanged(emb), before)


def test_bad_out(emb):
    with pytest.raises(gkv.ShapeError):
        emb.pull("emb", [1, 2], out=np.empty((2, 3), np.float32))
    with pytest.raises(gkv.ShapeError):
        emb.pull("emb", [1, 2], out=np.empty((2, 4), np.float64))
    ro = np.empty((2, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(gkv.InvalidArgumentError, match="writable|read-only"):
        emb.pull("emb", [1, 2], out=ro)
    with pytest.raises(gkv.InvalidArgumentError):
        emb.pull("emb", [1, 2], out=bytes(32))


def test_unknown_names_and_handlers(emb):
    before = unchanged(emb)
    with pytest.raises(gkv.NotFoundError, match="nope"):
        emb.pull("nope", [1])
    with pytest.raises(gkv.NotFoundError):
        emb.describe("nope")
    with pytest.raises(gkv.NotFoundError):
        emb.delete("nope")
    with pytest.raises(gkv.HandlerError):
        emb.push("emb", [1], np.ones((1, 4), np.float32), "no-such-handler")
    with pytest.raises(gkv.InvalidArgumentError, match="handler"):
        emb.push("emb", [1], np.ones((1, 4), np.float32), 17)
    with pytest.raises(gkv.InvalidArgumentError, match="NaN|nan|inf"):
        emb.push("emb", [1], np.full((1, 4), np.nan, np.float32), "sgd")
    np.testing.assert_array_equal(unchanged(emb), before)


def test_bad_create(store):
    with pytest.raises(gkv.InvalidArgumentError, match="dtype"):
        store.create("x", dtype="complex64", hi=3)
    with pytest.raises(gkv.InvalidArgumentError, match="hi"):
        store.create("x", dtype="float32")
    with pytest.raises(gkv.InvalidArgumentError, match="init"):
        store.create("x", dtype="float32", hi=3, init="ones")
    with pytest.raises(gkv.InvalidArgumentError):
        store.create("bad name", dtype="float32", hi=3)
    with pytest.raises(gkv.InvalidArgumentError):
        store.create("x", dtype="float32", row_shape=(1, 2, 3, 4, 5), hi=3)
    assert store.list() == []


def test_closed_store(emb):
    emb.close()
    assert emb.closed
    for call in (lambda: emb.pull("emb", [1]), lambda: emb.list(),
                 lambda: emb.push("emb", [1], np.ones((1, 4), np.float32)),
                 lambda: emb.create("y", hi=2), lambda: emb.writeback_flush()):
        with pytest.raises(gkv.InvalidArgumentError, match="closed"):
            call()
    emb.close()                                  # twice is fine
