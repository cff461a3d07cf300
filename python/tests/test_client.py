"""gkv.Client and gkv.Server against the C library's answers: what kvctl
(the C tool) reads through the same server, push then pull."""
import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

import gkv
from conftest import kvctl_get, start_server

IDS = np.array([5, 1, 5, 99], dtype=np.int64)


def test_create_pull_push_delete(served):
    srv, c, ipc, port = served
    d = c.create("emb", dtype="float32", row_shape=(3,), hi=100, init="normal",
                 b=1, seed=8)
    assert d["row_shape"] == (3,) and d["hi"] == 100
    assert [t["name"] for t in c.tensors()] == ["emb"]
    assert c.describe("emb")["dtype"] == "float32"
    assert c.nservers() == 1 and c.pbook() is None
    got = np.asarray(c.pull("emb", IDS))
    np.testing.assert_array_equal(
        got, kvctl_get(None, "emb", IDS, server="127.0.0.1:%d" % port)
        .astype(np.float32))
    c.push("emb", IDS, np.ones((4, 3), np.float32), "add")
    after = np.asarray(c.pull("emb", [5, 1, 99]))
    np.testing.assert_allclose(after, got[[0, 1, 3]] + [[2], [1], [1]], rtol=1e-6)
    out = np.empty((2, 3), np.float32)
    assert c.pull("emb", [1, 99], out=out) is out
    np.testing.assert_array_equal(out, after[1:])
    c.push("emb", [0], np.ones((1, 3), np.float32), "adam", lr=0.1)
    c.delete("emb")
    c.delete("emb")                                  # idempotent
    assert c.tensors() == []


def test_client_errors_change_nothing(served):
    srv, c, ipc, port = served
    c.create("t", dtype="int64", hi=10, init="const", a=4)
    with pytest.raises(gkv.NotFoundError):
        c.pull("nope", [1])
    with pytest.raises(gkv.RangeError):
        c.push("t", [1, 10], np.ones(2, np.int64))
    with pytest.raises(gkv.ShapeError, match="dtype"):
        c.push("t", [1], np.ones(1, np.float32))
    with pytest.raises(gkv.InvalidArgumentError, match="contiguous"):
        c.push("t", [1, 2], np.ones(4, np.int64)[::2])
    with pytest.raises(gkv.NotSupportedError):
        c.sample_neighbors(np.array([1]), 2)
    np.testing.assert_array_equal(np.asarray(c.pull("t", np.arange(10))),
                                  np.full(10, 4))
    with pytest.raises(gkv.InvalidArgumentError, match="not both"):
        gkv.Client(ipc, addr="127.0.0.1:1")
    with pytest.raises(gkv.FormatError):
        gkv.Client(os.devnull)
    c.close()
    assert c.closed
    with pytest.raises(gkv.InvalidArgumentError, match="closed"):
        c.pull("t", [1])


def test_barrier_and_addr(served):
    srv, c, ipc, port = served
    c.barrier(timeout_ms=5000)              # a group of one passes at once
    with gkv.Client(addr="127.0.0.1:%d" % port, group="obs", observer=True) as o:
        c.create("x", dtype="uint8", hi=4, init="const", a=9)
        np.testing.assert_array_equal(np.asarray(o.pull("x", [0, 3])), [9, 9])


def test_token(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret-s3cret-s3cret-0123\n")
    os.chmod(tok, 0o600)
    srv, ipc, port = start_server(tmp_path, store=str(tmp_path / "st"),
                                  create=True, token_file=str(tok))
    try:
        with gkv.Client(ipc, token_file=str(tok)) as c:
            c.create("x", dtype="int32", hi=2)
        with pytest.raises(gkv.PermissionDeniedError):
            gkv.Client(ipc, token="wrong-wrong-wrong-wrong", timeout_ms=3000)
    finally:
        srv.stop()


def test_calls_release_the_gil(served):
    """A thread spinning in Python keeps running while the main thread
    waits in a call: the call released the interpreter lock."""
    srv, c, ipc, port = served
    c.create("big", dtype="float32", row_shape=(256,), hi=20000)
    ids = np.arange(20000, dtype=np.int64)
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0)

    t = threading.Thread(target=spin)
    t.start()
    try:
        n0 = len(ticks)
        for _ in range(5):
            c.pull("big", ids)
        moved = len(ticks) - n0
    finally:
        stop.set()
        t.join()
    assert moved > 0


def test_threads_share_a_client(served):
    srv, c, ipc, port = served
    c.create("w", dtype="int64", hi=64)
    errs = []

    def work(k):
        try:
            for _ in range(20):
                c.push("w", [k], np.ones(1, np.int64), "add")
        except Exception as e:                  # noqa: BLE001
            errs.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert errs == []
    np.testing.assert_array_equal(np.asarray(c.pull("w", [0, 1, 2, 3])), [20] * 4)


def _worker_pull(c, q):
    try:
        q.put(np.asarray(c.pull("x", [0, 1, 2])).tolist())
    except BaseException as e:                  # noqa: BLE001
        q.put(repr(e))


def test_client_pickles_to_spawned_workers(served):
    srv, c, ipc, port = served
    c.create("x", dtype="int64", hi=4, init="const", a=6)
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker_pull, args=(c, q)) for _ in range(2)]
    [p.start() for p in ps]
    try:
        got = [q.get(timeout=60) for _ in ps]
    finally:
        for p in ps:
            p.join(10)
            if p.exitcode is None:
                p.kill()
                p.join()
    assert got == [[6, 6, 6]] * 2
    assert [p.exitcode for p in ps] == [0, 0]
    # the workers were observers: the server and this client go on
    np.testing.assert_array_equal(np.asarray(c.pull("x", [3])), [6])


def test_server_stop_and_url(tmp_path):
    srv, ipc, port = start_server(tmp_path, store=str(tmp_path / "s"), create=True)
    assert srv.url == "tcp://127.0.0.1:%d" % port
    srv.stop()
    srv.stop()
    with pytest.raises(gkv.TimedOutError):
        gkv.Client(ipc, timeout_ms=500)


def test_client_opt_reset(served):
    srv, c, ipc, port = served
    c.create("w", dtype="float32", row_shape=(2,), hi=10, init="const", a=1)
    c.push("w", [3], np.ones((1, 2), np.float32), "adagrad", lr=0.5)
    w1 = np.asarray(c.pull("w", [3]))
    np.testing.assert_allclose(w1, [[0.5, 0.5]], rtol=1e-6)   # 1 - 0.5 * 1/1
    c.opt_reset("w")
    c.push("w", [3], np.ones((1, 2), np.float32), "adagrad", lr=0.5)
    np.testing.assert_allclose(np.asarray(c.pull("w", [3])), [[0.0, 0.0]],
                               atol=1e-6)                     # fresh state again
    with pytest.raises(gkv.NotFoundError):
        c.opt_reset("nope")
