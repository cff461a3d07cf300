"""fork(): a gkv.Client used in a child made by os.fork() (torch DataLoader
workers with the default 'fork' context) reconnects there by itself, over
a fresh copy of nanomsg, as an observer of the same group. Every answer a
child gets is compared, byte for byte, with the parent's (itself checked
against the C tools in test_client.py / test_pyg.py); the parent keeps
working after; several children at once, a child of a child; the objects
built over a client (gkv.pyg, gkv.dgl) work in the child; a Loader made in
the parent raises a clear error there. Every child is waited for with a
timeout (a hang fails the test and the child is killed)."""
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gkv

FEAT = "node/_N/feat"
SEEDS = np.array([3, 0, 200, 17, 42], dtype=np.int64)
CHILD_TIMEOUT = 60


def blocks_bytes(blocks):
    """Every array of a list of gkv.Block, as bytes (for comparing)."""
    out = []
    for b in blocks:
        out.append((b.num_src, b.num_dst,
                    [np.asarray(n).tobytes() for n in b.nodes],
                    [[np.asarray(a).tobytes() for a in e] for e in b.edges]))
    return out


def wait(pid, timeout=CHILD_TIMEOUT):
    """The exit status of child pid; kills it and fails on a hang."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            return st
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("child %d did not exit within %ds" % (pid, timeout))


def fork_call(fn, timeout=CHILD_TIMEOUT):
    """fn() run in a child made by os.fork(): its result (pickled through a
    pipe), or the child's exception re-raised here as RuntimeError."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the child
        os.close(r)
        code = 0
        try:
            data = pickle.dumps(("ok", fn()))
        except BaseException as e:                # noqa: BLE001
            data = pickle.dumps(("err", "%s: %s" % (type(e).__name__, e)))
            code = 1
        try:
            with os.fdopen(w, "wb") as f:
                f.write(data)
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:                 # EOF once the child is gone
        data = f.read()
    st = wait(pid, timeout)
    kind, val = pickle.loads(data) if data else ("err", "no answer")
    if kind != "ok":
        raise RuntimeError("in the child: %s" % val)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st
    return val


def nn_copy():
    """(PID that loaded the nanomsg in use, copies of it mapped here)."""
    with open("/proc/self/maps") as f:
        maps = {tuple(ln.split()[3:5]) for ln in f if "nanomsg" in ln}
    return gkv._gkv._nn_loaded_by(), len(maps)


@pytest.fixture
def gclient(graph):
    """A client (a member, rank 0) of the one-partition graph's server."""
    config, ipc, feat = graph
    c = gkv.Client(ipc, group="pytest-fork", timeout_ms=20000)
    yield c, config, ipc, feat
    if not c.closed:
        c.close()


def answers(c):
    """What the tests compare: rows, one hop, blocks, the partition book."""
    return (np.asarray(c.pull(FEAT, SEEDS)).tobytes(),
            [[np.asarray(a).tobytes() for a in e]
             for e in c.sample_neighbors(SEEDS, 3, seed=11)],
            blocks_bytes(c.sample_blocks(SEEDS, [4, 2], seed=9)),
            c.pbook())


def test_child_pulls_and_samples_like_the_parent(gclient):
    c, config, ipc, feat = gclient
    want = answers(c)
    assert want[0] == feat[SEEDS].tobytes()
    assert gkv._gkv._nn_loaded_by() == os.getpid()

    def child():
        before = gkv._gkv._nn_loaded_by()         # 0: not loaded here yet
        got = answers(c)
        again = answers(c)                        # the same connection
        return before, got, again, nn_copy(), os.getpid()

    before, got, again, (loaded_by, copies), cpid = fork_call(child)
    assert before == 0
    assert loaded_by == cpid and copies == 2      # the parent's and its own
    assert got == want and again == want
    assert answers(c) == want                     # the parent still works
    assert nn_copy() == (os.getpid(), 1)


def test_child_pushes_creates_and_connects_anew(served):
    srv, c, ipc, port = served
    c.create("x", dtype="int64", hi=8, init="const", a=4)

    def child():
        c.push("x", [1, 2], np.array([7, 8], np.int64))
        c.create("made_in_child", dtype="float32", hi=2, init="const", a=1.5)
        other = gkv.Client(ipc, group="pytest-fork-new", observer=True,
                           rank=5, timeout_ms=20000)
        rows = np.asarray(other.pull("x", np.arange(8))).tolist()
        other.close()
        srv.stop()                                # the parent's: only forgotten
        c.close()
        with pytest.raises(gkv.InvalidArgumentError, match="closed"):
            c.pull("x", [0])
        return rows

    assert fork_call(child) == [4, 7, 8, 4, 4, 4, 4, 4]
    np.testing.assert_array_equal(np.asarray(c.pull("x", [0, 1, 2])), [4, 7, 8])
    np.testing.assert_array_equal(np.asarray(c.pull("made_in_child", [0, 1])),
                                  [1.5, 1.5])
    c.barrier(10000)                              # still the group's member


def test_child_reconnects_by_host_name(served, tmp_path):
    """An ip_config naming the host: the parent's connect resolved the name
    (glibc's getaddrinfo_a, whose helper thread fork() does not copy) just
    before the fork; the child's connect resolves it again and must not
    wait on that missing thread (it timed out before nnshim.c resolved
    names itself in a child)."""
    srv, c, ipc, port = served
    c.create("h", dtype="int64", hi=4, init="const", a=9)
    named = tmp_path / "ipc-named"
    named.write_text("localhost %d\n" % port)
    byname = gkv.Client(str(named), group="pytest-fork-named", observer=True,
                        rank=7, timeout_ms=5000)

    def child():
        return (np.asarray(byname.pull("h", [0, 3])).tolist(),
                np.asarray(c.pull("h", [1])).tolist())

    try:
        for _ in range(3):             # each fork right after a resolution
            assert fork_call(child) == ([9, 9], [9])
            gkv.Client(str(named), group="pytest-fork-named2", observer=True,
                       rank=8, timeout_ms=5000).close()
    finally:
        byname.close()


def test_several_children_at_once(gclient):
    c, config, ipc, feat = gclient
    want = answers(c)
    pids, pipes = [], []
    for k in range(4):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = 1
            try:
                ok = all(answers(c) == want for _ in range(3))
                code = 0 if ok else 2
            finally:
                os.write(w, bytes([code]))
                os._exit(code)
        os.close(w)
        pids.append(pid)
        pipes.append(r)
    for pid, r in zip(pids, pipes):
        st = wait(pid)
        assert os.read(r, 1) == b"\0"
        os.close(r)
        assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
    assert answers(c) == want


def test_fork_while_other_threads_call(gclient):
    """Threads of the parent in the middle of calls on the same client (its
    lock held, nanomsg busy) when it forks: the child still gets answers."""
    import threading
    c, config, ipc, feat = gclient
    want = answers(c)
    stop, errs = threading.Event(), []

    def work():
        while not stop.is_set():
            try:
                if answers(c) != want:
                    errs.append("a parent thread got a wrong answer")
            except Exception as e:              # noqa: BLE001
                errs.append(repr(e))

    ts = [threading.Thread(target=work) for _ in range(3)]
    [t.start() for t in ts]
    try:
        for _ in range(5):
            time.sleep(0.02)
            assert fork_call(lambda: answers(c)) == want
    finally:
        stop.set()
        [t.join() for t in ts]
    assert errs == []


def test_child_of_a_child(gclient):
    c, config, ipc, feat = gclient
    want = answers(c)

    def child():
        mine = answers(c)                         # reconnects in the child

        def grandchild():
            return answers(c), nn_copy(), os.getpid()

        got, (loaded_by, copies), gpid = fork_call(grandchild)
        assert loaded_by == gpid and copies == 3
        return mine, got, answers(c)

    mine, got, after = fork_call(child)
    assert mine == want and got == want and after == want


def test_grandchild_of_an_unused_child(gclient):
    """The child never touched the client: its grandchild still reconnects."""
    c, config, ipc, feat = gclient
    want = answers(c)
    assert fork_call(lambda: fork_call(lambda: answers(c))) == want


def test_child_that_closed_the_library_file(gclient):
    """A child that closed every descriptor it did not know (as daemons
    do), the library file's among them, and opened another file that took
    its number: the copy is made from the library all the same."""
    c, config, ipc, feat = gclient
    want = answers(c)

    def child():
        fds = [int(f) for f in os.listdir("/proc/self/fd")
               if "libnanomsg" in os.path.realpath("/proc/self/fd/" + f)]
        assert len(fds) == 1
        os.close(fds[0])
        other = os.open("/etc/hostname", os.O_RDONLY)
        assert other == fds[0]
        return answers(c)

    assert fork_call(child) == want


def test_store_and_client_in_the_child(store, served):
    srv, c, ipc, port = served
    store.create("s", dtype="int64", hi=4, init="const", a=3)
    c.create("r", dtype="int64", hi=4, init="const", a=6)

    def child():
        store.push("s", [0], np.array([30], np.int64))
        c.push("r", [0], np.array([60], np.int64))
        return (np.asarray(store.pull("s", [0, 1])).tolist(),
                np.asarray(c.pull("r", [0, 1])).tolist())

    assert fork_call(child) == ([30, 3], [60, 6])
    np.testing.assert_array_equal(np.asarray(store.pull("s", [0])), [30])
    np.testing.assert_array_equal(np.asarray(c.pull("r", [0])), [60])


def test_parent_loader_in_child_raises_clearly(gclient):
    c, config, ipc, feat = gclient
    loader = gkv.Loader(c, np.arange(32, dtype=np.int64), batch_size=8,
                        fanouts=[2], feats=[FEAT], shuffle=False)
    first = [np.asarray(b.seeds).tobytes() for b in loader]

    def child():
        with pytest.raises(gkv.NotSupportedError, match="forked child"):
            iter(loader).__next__()
        loader.close()                            # forgets the parent's
        # loaders made in the child: over the parent's client, which
        # reconnected here as an observer of a random rank above 2^31, and
        # over a client of the child's own (the loaders' worker threads
        # use clones of either)
        mine = gkv.Loader(c, np.arange(32, dtype=np.int64), batch_size=8,
                          fanouts=[2], feats=[FEAT], shuffle=False)
        got = [np.asarray(b.seeds).tobytes() for b in mine]
        mine.close()
        own = gkv.Client(ipc, group="pytest-fork", observer=True, rank=1000,
                         timeout_ms=20000)
        mine = gkv.Loader(own, np.arange(32, dtype=np.int64), batch_size=8,
                          fanouts=[2], feats=[FEAT], shuffle=False)
        assert [np.asarray(b.seeds).tobytes() for b in mine] == got
        mine.close()
        own.close()
        return got, answers(c)

    try:
        got, ans = fork_call(child)
        assert got == first and ans == answers(c)
        assert [np.asarray(b.seeds).tobytes() for b in loader] == first
    finally:
        loader.close()


def test_child_exits_cleanly_through_interpreter_exit(tmp_path):
    """A child that returns normally (atexit, module teardown, the
    parent's objects freed) exits promptly, and the parent after it."""
    script = textwrap.dedent("""
        import os, sys, numpy as np, gkv
        sys.path.insert(0, %r)
        from conftest import start_server
        from pathlib import Path
        srv, ipc, port = start_server(Path(%r), store=%r, create=True)
        c = gkv.Client(ipc, group="exit", rank=0, group_size=1, timeout_ms=20000)
        c.create("x", dtype="int64", hi=4, init="const", a=2)
        unused = gkv.Client(ipc, group="exit2", observer=True, timeout_ms=20000)
        pid = os.fork()
        if pid == 0:
            assert np.asarray(c.pull("x", [1])).tolist() == [2]
            sys.exit(0)          # the interpreter's own exit, in the child
        _, st = os.waitpid(pid, 0)
        assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st
        assert np.asarray(c.pull("x", [1])).tolist() == [2]
        print("ok")
    """) % (os.path.dirname(os.path.abspath(__file__)), str(tmp_path),
            str(tmp_path / "store"))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


# ---- torch DataLoader workers (the default 'fork' context) ------------------------

class _RowsAndBlocks:
    """A Dataset whose items are pulled and sampled through a gkv.Client."""

    def __init__(self, c):
        self.c = c

    def __len__(self):
        return 12

    def __getitem__(self, i):
        import torch
        ids = np.array([i, 100 + i, 200 + i], np.int64)
        rows = torch.from_dlpack(self.c.pull(FEAT, ids))
        b = self.c.sample_blocks(ids, [3, 2], seed=i)
        return rows, torch.from_dlpack(b[0].nodes[0]), torch.tensor(os.getpid())


def _batches(loader):
    return [tuple(t.numpy().tobytes() for t in batch[:2]) for batch in loader]


def test_torch_dataloader_fork_workers(gclient):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    c, config, ipc, feat = gclient
    ds = _RowsAndBlocks(c)
    want = _batches(DataLoader(ds, batch_size=None, num_workers=0))
    dl = DataLoader(ds, batch_size=None, num_workers=2,
                    timeout=CHILD_TIMEOUT)
    assert dl.multiprocessing_context is None     # torch's default: fork
    got = list(dl)
    assert [tuple(t.numpy().tobytes() for t in b[:2]) for b in got] == want
    workers = {int(b[2]) for b in got}
    assert len(workers) == 2 and os.getpid() not in workers
    assert _batches(DataLoader(ds, batch_size=None, num_workers=0)) == want


def test_pyg_loaders_with_fork_workers(gclient):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    import gkv.pyg
    from torch_geometric.loader import NodeLoader
    c, config, ipc, feat = gclient
    fs, gs = gkv.pyg.FeatureStore(c), gkv.pyg.GraphStore(c)

    def fields(loader, *names):
        return [tuple(getattr(d, n).numpy().tobytes() for n in names)
                for d in loader]

    def run(num_workers):
        # all neighbours (-1): the same batches whichever worker samples
        return fields(NodeLoader((fs, gs), gkv.pyg.Sampler(c, [-1, -1]),
                                 input_nodes=torch.arange(0, 48), batch_size=8,
                                 num_workers=num_workers,
                                 timeout=CHILD_TIMEOUT if num_workers else 0),
                      "n_id", "edge_index", "feat")

    want = run(0)
    assert len(want) == 6
    assert run(2) == want

    eli = torch.tensor([[0, 5, 9, 17], [1, 2, 3, 4]])

    def run_link(num_workers):
        return fields(gkv.pyg.LinkNeighborLoader(
            (fs, gs), [-1], edge_label_index=eli, batch_size=2,
            num_workers=num_workers, timeout=CHILD_TIMEOUT if num_workers else 0),
            "n_id", "feat", "edge_label_index")

    want = run_link(0)
    assert len(want) == 2
    assert run_link(2) == want


def test_dgl_objects_in_the_child(graph):
    pytest.importorskip("torch")
    import gkv.dgl as dist
    config, ipc, feat = graph
    dist.initialize(ipc, group="pytest-fork-dgl", timeout_ms=20000)
    try:
        g = dist.DistGraph("g")
        ids = np.array([7, 1, 250], np.int64)

        def ask():
            import torch
            t = torch.as_tensor(ids)
            sg = g.sample_neighbors(t, 2)
            return (g.ndata["feat"][t].numpy().tobytes(), g.num_nodes(),
                    [x.numpy().tobytes() for x in sg.edges()]
                    if hasattr(sg, "edges") else repr(sg))

        want = ask()
        assert want[0] == feat[ids].tobytes()
        assert fork_call(ask) == want
        assert ask() == want
    finally:
        dist.exit_client()
