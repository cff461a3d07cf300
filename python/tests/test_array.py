"""gkv.Array: zero copy through the buffer protocol and DLPack, owned
memory that outlives the Array object while a consumer holds it."""
import gc
import sys

import numpy as np
import pytest

import gkv


def data_ptr(a):
    return a.__array_interface__["data"][0]


@pytest.fixture
def arr(store):
    store.create("t", dtype="float32", row_shape=(3, 2), hi=50, init="uniform",
                 a=-1, b=1, seed=9)
    return store.pull("t", np.array([4, 1, 4, 49], dtype=np.int64))


def test_shape_dtype(arr):
    assert arr.shape == (4, 3, 2)
    assert arr.dtype == "float32"
    assert arr.ndim == 3 and arr.nbytes == 4 * 6 * 4 and len(arr) == 4
    assert isinstance(arr, gkv.Array)
    assert repr(arr) == "gkv.Array(shape=(4, 3, 2), dtype=float32)"


def test_buffer_protocol_is_zero_copy(arr):
    n = np.asarray(arr)
    assert data_ptr(n) == arr.ptr
    assert n.shape == (4, 3, 2) and n.dtype == np.float32
    assert n.flags.c_contiguous and n.flags.writeable
    m = memoryview(arr)
    assert m.format == "f" and m.shape == (4, 3, 2) and m.nbytes == arr.nbytes
    np.testing.assert_array_equal(n[0], n[2])      # ID 4 twice
    assert bytes(arr) == n.tobytes()               # a plain-bytes consumer


def test_dlpack_numpy_is_zero_copy(arr):
    n = np.from_dlpack(arr)
    assert data_ptr(n) == arr.ptr
    np.testing.assert_array_equal(n, np.asarray(arr))


def test_dlpack_versioned_and_legacy_capsules(arr):
    cap = arr.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    legacy = arr.__dlpack__()
    assert '"dltensor"' in repr(legacy)
    assert "dltensor" in repr(arr.__dlpack__(max_version=(0, 8)))
    assert "versioned" not in repr(arr.__dlpack__(max_version=(0, 8)))
    assert arr.__dlpack_device__() == (1, 0)
    # unconsumed capsules give their reference back when collected
    before = sys.getrefcount(arr)
    del cap, legacy
    gc.collect()
    assert sys.getrefcount(arr) <= before


def test_dlpack_refuses_a_copy_or_a_device(arr):
    with pytest.raises(BufferError):
        arr.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        arr.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        arr.__dlpack__(stream=1)
    arr.__dlpack__(dl_device=(1, 0), copy=False)


def test_memory_outlives_the_array(store):
    store.create("u", dtype="int64", hi=10, init="const", a=5)
    a = store.pull("u", np.arange(10, dtype=np.int64))
    ptr = a.ptr
    n = np.from_dlpack(a)
    m = np.asarray(a)
    del a
    gc.collect()
    assert data_ptr(n) == ptr and data_ptr(m) == ptr
    np.testing.assert_array_equal(n, np.full(10, 5))
    np.testing.assert_array_equal(m, np.full(10, 5))


def test_every_dtype_round_trips(store):
    for i, dt in enumerate(["float32", "float16", "float64", "int8", "uint8",
                            "int32", "int64"]):
        name = "d%d" % i
        store.create(name, dtype=dt, row_shape=(2,), hi=8)
        rows = (np.arange(16) % 100).astype(dt).reshape(8, 2)
        store.push(name, np.arange(8, dtype=np.int64), rows)
        got = store.pull(name, np.arange(8, dtype=np.uint64))
        assert got.dtype == dt
        np.testing.assert_array_equal(np.asarray(got), rows)
        np.testing.assert_array_equal(np.from_dlpack(got), rows)


def test_bfloat16_has_dlpack_not_a_buffer(store):
    store.create("bf", dtype="bfloat16", row_shape=(2,), hi=4)
    bits = np.array([[0x3F80, 0x4000]] * 4, dtype=np.uint16)   # 1.0, 2.0
    store.push("bf", np.arange(4, dtype=np.int64), bits)
    a = store.pull("bf", np.arange(4, dtype=np.int64))
    assert a.dtype == "bfloat16"
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(a)
    assert "dltensor" in repr(a.__dlpack__())


def test_torch_zero_copy_both_ways(store):
    torch = pytest.importorskip("torch")
    store.create("e", dtype="float32", row_shape=(4,), hi=20, init="normal",
                 b=1, seed=2)
    a = store.pull("e", torch.arange(20))           # IDs from a torch tensor
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.ptr
    np.testing.assert_array_equal(t.numpy(), np.asarray(a))
    # a torch tensor as rows and as out=, no copy
    out = torch.empty(3, 4)
    r = store.pull("e", torch.tensor([1, 2, 3]), out=out)
    assert r is out
    np.testing.assert_array_equal(out.numpy(), np.asarray(a)[1:4])
    store.push("e", torch.tensor([0]), torch.ones(1, 4))
    np.testing.assert_array_equal(np.asarray(store.pull("e", [0])), np.ones((1, 4)))


class DLPackOnly:
    """An array with __dlpack__ and no buffer protocol (as a torch or JAX
    tensor is to gkv): numpy's capsule, versioned when asked."""

    def __init__(self, a, legacy=False):
        self.a = a
        self.legacy = legacy
        self.asked = None

    def __dlpack__(self, **kw):
        if self.legacy and kw:
            raise TypeError("__dlpack__() takes no keyword arguments")
        self.asked = kw
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.mark.parametrize("legacy", [False, True], ids=["versioned", "legacy"])
def test_dlpack_inputs(store, legacy):
    if not legacy and np.lib.NumpyVersion(np.__version__) < "2.0.0":
        # numpy 1.x (what torch 2.2 needs beside it) makes legacy capsules only
        pytest.skip("numpy %s makes no versioned DLPack capsule" % np.__version__)
    store.create("e", dtype="float32", row_shape=(2,), hi=10)
    ids = DLPackOnly(np.array([1, 4], dtype=np.int64), legacy)
    rows = DLPackOnly(np.array([[1, 2], [3, 4]], dtype=np.float32), legacy)
    store.push("e", ids, rows)
    assert (ids.asked == {}) == legacy
    if not legacy:
        assert ids.asked["max_version"] == (1, 0)
    np.testing.assert_array_equal(np.asarray(store.pull("e", [1, 4])),
                                  [[1, 2], [3, 4]])
    out = np.zeros((2, 2), np.float32)
    store.pull("e", DLPackOnly(np.array([4, 1], np.int64), legacy),
               out=DLPackOnly(out, legacy))
    np.testing.assert_array_equal(out, [[3, 4], [1, 2]])   # filled in place


def test_dlpack_input_refusals(store):
    store.create("e", dtype="float32", row_shape=(2,), hi=10)
    with pytest.raises(gkv.InvalidArgumentError, match="C-contiguous"):
        store.push("e", [1, 2], DLPackOnly(np.ones((2, 4), np.float32)[:, ::2]))
    with pytest.raises(gkv.ShapeError, match="dtype float64"):
        store.push("e", [1, 2], DLPackOnly(np.ones((2, 2))))
    ro = np.zeros((1, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(gkv.InvalidArgumentError, match="read-only|readonly|__dlpack__"):
        store.pull("e", [1], out=DLPackOnly(ro))
    np.testing.assert_array_equal(np.asarray(store.read("e", 0, 10)),
                                  np.zeros((10, 2)))


def test_array_as_input(store):
    """An Array goes back in without a copy (the buffer protocol)."""
    store.create("a", dtype="int64", hi=10, init="const", a=2)
    store.create("b", dtype="int64", hi=10)
    ids = store.pull("a", np.arange(3, dtype=np.int64))          # [2, 2, 2]
    store.push("b", ids, store.pull("a", [5, 6, 7]), "add")
    np.testing.assert_array_equal(np.asarray(store.pull("b", [2])), [6])


def test_no_leak_in_a_loop(store):
    """Arrays, capsules and borrowed inputs give their memory back."""
    import resource
    store.create("e", dtype="float32", row_shape=(64,), hi=1000)
    ids = np.arange(1000, dtype=np.int64)

    def rss_kb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def run(k):
        for _ in range(k):
            a = store.pull("e", ids)                # 256 KB each
            np.from_dlpack(a)
            a.__dlpack__(max_version=(1, 0))
            a.__dlpack__()
            store.push("e", DLPackOnly(ids), a)

    run(50)
    before = rss_kb()
    run(400)                                        # 100 MB if leaked
    assert rss_kb() - before < 20000
