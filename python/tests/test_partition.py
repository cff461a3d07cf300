"""gkv.partition() writes what gkv-partition (the C tool, the same
library) writes from files for the same graph: the same config, mapping
files and stored tensors, byte for byte."""
import filecmp
import json
import os
import subprocess

import numpy as np
import pytest

import gkv
from conftest import tool


@pytest.fixture(scope="module")
def homo():
    rng = np.random.default_rng(11)
    n, m = 300, 2000
    src = rng.integers(0, n, m).astype(np.int64)
    dst = rng.integers(0, n, m).astype(np.int64)
    feat = rng.standard_normal((n, 3)).astype(np.float32)
    efeat = rng.integers(0, 100, m).astype(np.int32)
    return n, src, dst, feat, efeat


def read_all(path):
    """Every tensor of a store: name -> (desc, rows)."""
    with gkv.Store(path, readonly=True) as s:
        return {d["name"]: (d, np.asarray(s.read(d["name"], d["lo"], d["hi"])).tobytes())
                for d in s.list(with_state=True)}


@pytest.mark.parametrize("method", ["random", "range", "metis"])
def test_same_as_the_tool(tmp_path, homo, method):
    n, src, dst, feat, efeat = homo
    with open(tmp_path / "edges.txt", "w") as f:
        for a, b in zip(src, dst):
            f.write("%d %d\n" % (a, b))
    np.save(tmp_path / "feat.npy", feat)
    np.save(tmp_path / "efeat.npy", efeat)
    subprocess.run([tool("gkv-partition"), "--input", str(tmp_path / "edges.txt"),
                    "--num-nodes", str(n), "--parts", "2", "--method", method,
                    "--seed", "3", "--csr", "--name", "g",
                    "--node-feat", "feat=%s" % (tmp_path / "feat.npy"),
                    "--edge-feat", "ef=%s" % (tmp_path / "efeat.npy"),
                    str(tmp_path / "tool")], check=True, capture_output=True)
    rep = gkv.partition(tmp_path / "py", (src, dst), n, 2, method=method, seed=3,
                        csr=True, name="g", node_feats={"feat": feat},
                        edge_feats={"ef": efeat})
    assert rep["num_nodes"] == n and rep["num_edges"] == len(src)
    a = json.load(open(tmp_path / "tool" / "g.json"))
    b = json.load(open(tmp_path / "py" / "g.json"))
    assert a == b
    for f in os.listdir(tmp_path / "tool" / "mapping"):
        assert filecmp.cmp(tmp_path / "tool" / "mapping" / f,
                           tmp_path / "py" / "mapping" / f, shallow=False)
    for p in ("part-0", "part-1"):
        ta, tb = read_all(str(tmp_path / "tool" / p)), read_all(str(tmp_path / "py" / p))
        assert sorted(ta) == sorted(tb) and "node/_N/feat" in ta
        for k in ta:
            assert ta[k] == tb[k], k


def test_heterogeneous(tmp_path):
    rng = np.random.default_rng(2)
    edges = {("user", "buys", "item"): (rng.integers(0, 50, 400), rng.integers(0, 30, 400)),
             "item:bought-by:user": (rng.integers(0, 30, 100), rng.integers(0, 50, 100))}
    edges = {k: (np.asarray(s, np.int64), np.asarray(d, np.int64))
             for k, (s, d) in edges.items()}
    feat = np.arange(30 * 2, dtype=np.float64).reshape(30, 2)
    gkv.partition(tmp_path / "h", edges, {"user": 50, "item": 30}, 1, name="h",
                  node_feats={("item", "x"): feat, "user/y": np.zeros(50, np.int8)},
                  train_masks={"user": np.ones(50, bool)}, csr=True)
    p = gkv.Partition(str(tmp_path / "h" / "h.json"))
    b = p.pbook()
    assert b["ntypes"] == ["user", "item"]
    assert b["etypes"] == ["user:buys:item", "item:bought-by:user"]
    blocks = p.sample_blocks({"item": np.array([0, 1], np.int64)},
                             [{"user:buys:item": 3, "item:bought-by:user": 0}])
    assert blocks[0].num_dst == (0, 2)
    p.close()
    orig = np.load(tmp_path / "h" / "mapping" / "node-item.npy")
    with gkv.Store(str(tmp_path / "h" / "part-0"), readonly=True) as s:
        np.testing.assert_array_equal(np.asarray(s.read("node/item/x", 0, 30)),
                                      feat[orig])


def test_bad_input_writes_nothing(tmp_path, homo):
    n, src, dst, feat, efeat = homo
    out = tmp_path / "bad"
    with pytest.raises(gkv.ShapeError, match="feat"):
        gkv.partition(out, (src, dst), n, 2, node_feats={"feat": feat[:10]})
    with pytest.raises(gkv.RangeError):
        gkv.partition(out, (src, dst), 5, 2)
    with pytest.raises(gkv.InvalidArgumentError, match="int64"):
        gkv.partition(out, (src.astype(np.int32), dst), n, 2)
    with pytest.raises(gkv.InvalidArgumentError, match="method"):
        gkv.partition(out, (src, dst), n, 2, method="best")
    with pytest.raises(gkv.InvalidArgumentError):
        gkv.partition(out, (src, dst), n, 0)
    assert not out.exists() or os.listdir(out) == []
    gkv.partition(out, (src, dst), n, 1)
    with pytest.raises(gkv.ExistsError):
        gkv.partition(out, (src, dst), n, 1)
    gkv.partition(out, (src, dst), n, 1, force=True)
