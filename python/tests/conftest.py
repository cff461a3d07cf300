"""Fixtures of the Python tests: stores in a temporary directory, servers
on loopback (in this process, gkv.Server, or the gkv-server program), a
small partitioned graph made with gkv-partition, and the C tools' answers
(kvctl) to compare with.

GKVT_BUILD names the build directory holding the tools (make test-python
sets it); GKVT_PORT_BASE the first TCP port to try (default: a range
picked from this process's ID); each server takes the next free one.
"""
import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import gkv

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GKVT_BUILD", ROOT / "build"))
_PORTS = itertools.count(int(os.environ.get("GKVT_PORT_BASE",
                                            20000 + (os.getpid() % 2000) * 16)))


def tool(name):
    p = BUILD / name
    if not p.exists():
        pytest.skip("%s is not built (make, or set GKVT_BUILD)" % p)
    return str(p)


def kvctl_get(store, name, ids, server=None):
    """The rows kvctl (the C tool) prints for IDs, as float64."""
    where = ["--server", server] if server else [str(store)]
    out = subprocess.run([tool("kvctl"), "--json", *where, "get", name,
                          ",".join(str(int(i)) for i in ids)],
                         check=True, capture_output=True, text=True).stdout
    return np.array(json.loads(out)["rows"], dtype=np.float64)


def ip_config(tmp_path, port):
    p = tmp_path / ("ipc-%d" % port)
    p.write_text("127.0.0.1 %d\n" % port)
    return str(p)


def start_server(tmp_path, **kw):
    """A gkv.Server on the next free port: (server, ip_config, port)."""
    for _ in range(50):
        port = next(_PORTS)
        ipc = ip_config(tmp_path, port)
        try:
            return gkv.Server(ipc, **kw), ipc, port
        except gkv.BusyError:           # the port is taken: the next one
            continue
    raise RuntimeError("no free port")


@pytest.fixture
def store(tmp_path):
    s = gkv.Store(str(tmp_path / "store"), create=True, nosync=True)
    yield s
    if not s.closed:
        s.close()


@pytest.fixture
def served(tmp_path):
    """A server of a plain store in this process and a client of it."""
    srv, ipc, port = start_server(tmp_path, store=str(tmp_path / "srv"),
                                  create=True)
    c = gkv.Client(ipc, group="pytest", rank=0, group_size=1, timeout_ms=20000)
    yield srv, c, ipc, port
    if not c.closed:
        c.close()
    srv.stop()


class Proc:
    """A program started for a test, killed and reaped by its PID."""

    def __init__(self, argv, log):
        self.log = open(log, "w")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.p.pid, signal.SIGKILL)
                self.p.wait()
        self.log.close()


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """An R-MAT graph of 2^8 nodes with a node feature, in one partition
    (so gkv.Partition samples the whole graph in process), served by a
    gkv-server process: (config path, ip_config, feature array)."""
    d = tmp_path_factory.mktemp("graph")
    rng = np.random.default_rng(7)
    feat = rng.standard_normal((256, 4)).astype(np.float32)
    np.save(d / "feat.npy", feat)
    subprocess.run([tool("gkv-partition"), "--rmat", "8:8", "--seed", "5",
                    "--parts", "1", "--method", "random", "--csr",
                    "--name", "g", "--node-feat", "feat=%s" % (d / "feat.npy"),
                    str(d / "parts")], check=True, capture_output=True)
    config = str(d / "parts" / "g.json")
    for _ in range(50):
        port = next(_PORTS)
        ipc = ip_config(d, port)
        proc = Proc([tool("gkv-server"), "--part-config", config, "--part-id", "0",
                     "--ip-config", ipc, "--keep-alive", "--nosync",
                     "--no-prefault"], d / ("server-%d.log" % port))
        deadline = time.time() + 20
        while time.time() < deadline and proc.p.poll() is None:
            try:
                gkv.Client(ipc, group="probe", observer=True,
                           timeout_ms=2000).close()
                break
            except gkv.Error:
                time.sleep(0.1)
        if proc.p.poll() is None:
            break
        proc.stop()                     # the port was taken: the next one
    else:
        raise RuntimeError("gkv-server did not start")
    yield config, ipc, feat
    proc.stop()
