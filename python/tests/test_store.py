"""gkv.Store against the C library's answers: what kvctl (the C tool)
reads from the same store, and the handlers' documented arithmetic."""
import os

import numpy as np
import pytest

import gkv
from conftest import kvctl_get

IDS = np.array([7, 3, 7, 0], dtype=np.int64)


def test_create_describe_list(store):
    d = store.create("node/emb", dtype="float32", row_shape=(4,), lo=10, hi=110,
                     init="normal", b=0.1, seed=42, hot=True)
    assert d["name"] == "node/emb" and d["dtype"] == "float32"
    assert d["row_shape"] == (4,) and (d["lo"], d["hi"]) == (10, 110)
    assert d["row_bytes"] == 16 and d["hot"] and not d["is_state"]
    assert store.describe("node/emb") == d
    store.create("a", dtype=np.int64, hi=5)
    assert [t["name"] for t in store.list()] == ["a", "node/emb"]
    with pytest.raises(gkv.ExistsError):
        store.create("a", dtype="int64", hi=5)
    store.delete("a")
    assert [t["name"] for t in store.list()] == ["node/emb"]


def test_pull_equals_kvctl(store):
    store.create("emb", dtype="float32", row_shape=(3,), hi=100,
                 init="normal", b=1, seed=3)
    got = np.asarray(store.pull("emb", IDS))
    ref = kvctl_get(store.path, "emb", IDS)
    np.testing.assert_array_equal(got, ref.astype(np.float32))
    r = np.asarray(store.read("emb", 2, 9))
    np.testing.assert_array_equal(r, kvctl_get(store.path, "emb", range(2, 9))
                                  .astype(np.float32))


def test_pull_into_out(store):
    store.create("emb", dtype="float64", row_shape=(2,), hi=10, init="const", a=2.5)
    out = np.zeros((4, 2))
    assert store.pull("emb", IDS, out=out) is out
    np.testing.assert_array_equal(out, np.full((4, 2), 2.5))


def test_push_assign_then_pull_and_kvctl(store):
    store.create("emb", dtype="float32", row_shape=(2,), hi=10)
    rows = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], dtype=np.float32)
    store.push("emb", IDS, rows)                  # last copy of 7 wins
    want = {7: [5, 6], 3: [3, 4], 0: [7, 8]}
    got = np.asarray(store.pull("emb", [7, 3, 0]))
    np.testing.assert_array_equal(got, [want[7], want[3], want[0]])
    np.testing.assert_array_equal(kvctl_get(store.path, "emb", [7, 3, 0]), got)


def test_push_add_sums_duplicates(store):
    store.create("c", dtype="int32", hi=10, init="const", a=1)
    store.push("c", IDS, np.array([10, 20, 30, 40], dtype=np.int32), "add")
    np.testing.assert_array_equal(np.asarray(store.pull("c", [7, 3, 0, 1])),
                                  [41, 21, 41, 1])


def test_sgd_adagrad_adam_match_the_formulas(store):
    g = np.array([[1, -2], [0.5, 0.5], [3, 1], [2, 2]], dtype=np.float32)
    uniq = [7, 3, 0]
    # DGL's sparse optimizers: one step per ID on the mean of its copies
    gm = {7: (g[0] + g[2]) / 2, 3: g[1], 0: g[3]}
    for h in ("sgd", "adagrad", "adam"):
        name = "w_" + h
        store.create(name, dtype="float32", row_shape=(2,), hi=10,
                     init="uniform", a=-1, b=1, seed=1)
        w0 = np.asarray(store.pull(name, uniq)).astype(np.float64)
        store.push(name, IDS, g, h, lr=0.1)
        w1 = np.asarray(store.pull(name, uniq)).astype(np.float64)
        for i, u in enumerate(uniq):
            gg = gm[u].astype(np.float64)
            if h == "sgd":
                want = w0[i] - 0.1 * gg
            elif h == "adagrad":
                want = w0[i] - 0.1 * gg / (np.sqrt(gg * gg) + 1e-10)
            else:
                m = 0.1 * gg
                v = 0.001 * gg * gg
                want = w0[i] - 0.1 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-8)
            np.testing.assert_allclose(w1[i], want, rtol=1e-5, atol=1e-6)
        states = [t["name"] for t in store.list(with_state=True) if t["is_state"]]
        assert any(s.startswith(name + "#") for s in states) or h == "sgd"


def test_dups_sum(store):
    store.create("w", dtype="float64", hi=4)
    store.push("w", [1, 1], np.array([1.0, 3.0]), "sgd", lr=1, dups_sum=True)
    assert np.asarray(store.pull("w", [1]))[0] == -4.0


def test_write_and_writeback(store):
    store.create("w", dtype="float32", row_shape=(2,), hi=8)
    store.write("w", 2, np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(np.asarray(store.read("w", 0, 6))[:, 0],
                                  [0, 0, 1, 1, 1, 0])
    store.writeback_start("w", interval_ms=1000)
    store.push("w", [0], np.full((1, 2), 9, np.float32), "add")
    np.testing.assert_array_equal(np.asarray(store.pull("w", [0])), [[9, 9]])
    store.writeback_flush()
    np.testing.assert_array_equal(kvctl_get(store.path, "w", [0]), [[9, 9]])
    store.writeback_stop("w")
    with pytest.raises(gkv.NotFoundError):
        store.writeback_stop("w")


def test_reopen_readonly(tmp_path):
    p = str(tmp_path / "s")
    with gkv.Store(p, create=True) as s:
        s.create("x", dtype="uint8", hi=3, init="const", a=7)
    with gkv.Store(p, readonly=True) as s:
        np.testing.assert_array_equal(np.asarray(s.pull("x", [0, 2])), [7, 7])
        with pytest.raises(gkv.ReadOnlyError):
            s.push("x", [0], np.zeros(1, np.uint8))
    with pytest.raises(gkv.NoStoreError):
        gkv.Store(str(tmp_path / "none"))


def test_store_reopens_after_fork(store):
    store.create("x", dtype="int64", hi=4, init="const", a=3)
    pid = os.fork()
    if pid == 0:
        try:
            ok = list(np.asarray(store.pull("x", [1, 2]))) == [3, 3]
            store.push("x", [1], np.array([5], dtype=np.int64))
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, st = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(st) == 0
    np.testing.assert_array_equal(np.asarray(store.pull("x", [1])), [5])


def test_opt_reset_verify_stat(store):
    store.create("w", dtype="float32", row_shape=(2,), hi=10)
    store.push("w", [1], np.ones((1, 2), np.float32), "adam")
    names = [t["name"] for t in store.list(with_state=True)]
    assert "w#adam_m" in names and "w#adam_t" in names
    t = np.asarray(store.pull("w#adam_t", [1, 2]))
    np.testing.assert_array_equal(t, [1, 0])     # one step for row 1
    store.opt_reset("w", "adam")
    assert [t["name"] for t in store.list(with_state=True)] == ["w"]
    r = store.verify()
    assert r["chunks_checked"] >= 1
    st = store.stat()
    assert st["ntensors"] == 1 and st["page_size"] > 0
    with pytest.raises(gkv.InvalidArgumentError):
        store.opt_reset("w", "rmsprop")
