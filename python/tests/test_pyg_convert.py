"""gkv.pyg_convert: a graph torch_geometric.distributed.Partitioner split
converts into gkv partitions with PyG's assignment kept; every feature row
and every edge's endpoints, looked up by the original IDs through the
mapping files, equal the original graph's; bad input raises a clear error
and writes nothing. Needs torch_geometric (skipped without it).

Partitioner asks METIS (pyg-lib or torch-sparse) for the assignment; where
neither is installed, ClusterData._metis is replaced by a seeded random
assignment, and the rest of Partitioner (its files) runs as shipped."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import torch_geometric.typing as pyg_typing  # noqa: E402
from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.distributed import Partitioner  # noqa: E402
from torch_geometric.loader.cluster import ClusterData  # noqa: E402

import gkv  # noqa: E402
from gkv.pyg_convert import convert_pyg_partitions  # noqa: E402

P = 3


@pytest.fixture
def no_metis(monkeypatch):
    if not (pyg_typing.WITH_METIS or pyg_typing.WITH_TORCH_SPARSE):
        gen = torch.Generator().manual_seed(7)
        monkeypatch.setattr(ClusterData, "_metis", lambda self, ei, n: torch.randint(
            0, self.num_parts, (n,), generator=gen))


def homo_graph():
    torch.manual_seed(1)
    return Data(x=torch.randn(90, 3), edge_index=torch.randint(0, 90, (2, 500)),
                edge_attr=torch.randn(500, 2), time=torch.arange(90) % 7)


def hetero_graph():
    torch.manual_seed(2)
    h = HeteroData()
    h["user"].x = torch.randn(60, 4)
    h["item"].x = torch.randn(40, 4)
    h["user", "follows", "user"].edge_index = torch.randint(0, 60, (2, 300))
    h["user", "buys", "item"].edge_index = torch.stack(
        [torch.randint(0, 60, (200,)), torch.randint(0, 40, (200,))])
    h["item", "bought_by", "user"].edge_index = torch.stack(
        [torch.randint(0, 40, (150,)), torch.randint(0, 60, (150,))])
    for et, n in ((("user", "follows", "user"), 300), (("user", "buys", "item"), 200),
                  (("item", "bought_by", "user"), 150)):
        h[et].edge_attr = torch.randn(n, 2)
    return h


def pyg_partition(tmp_path, data):
    root = tmp_path / "pyg"
    Partitioner(data, P, str(root)).generate_partition()
    return root


def views(data):
    """{ntype: {name: rows}}, {etype tuple: (src, dst, {name: rows})} of the
    original graph, the homogeneous one under gkv's type names."""
    if isinstance(data, HeteroData):
        nodes = {t: {"x": data[t].x} for t in data.node_types}
        edges = {et: (data[et].edge_index[0], data[et].edge_index[1],
                      {"edge_attr": data[et].edge_attr}) for et in data.edge_types}
    else:
        nodes = {"_N": {"x": data.x, "time": data.time}}
        edges = {("_N", "_E", "_N"): (data.edge_index[0], data.edge_index[1],
                                      {"edge_attr": data.edge_attr})}
    return nodes, edges


def pyg_maps(root, data):
    if isinstance(data, HeteroData):
        return ({t: torch.load(root / "node_map" / ("%s.pt" % t)).numpy()
                 for t in data.node_types},
                {et: torch.load(root / "edge_map" / ("%s.pt" % "__".join(et))).numpy()
                 for et in data.edge_types})
    return ({"_N": torch.load(root / "node_map.pt").numpy()},
            {("_N", "_E", "_N"): torch.load(root / "edge_map.pt").numpy()})


def check(out, conf_name, root, data):
    conf = json.load(open(out / conf_name))
    assert conf["num_parts"] == P and conf["part_method"] == "given"
    nodes, edges = views(data)
    nmap, emap = pyg_maps(root, data)

    def owned(kind, t, p):      # gkv's type-wise IDs partition p owns
        r = conf[kind + "_map"][t]
        lo = sum(hi - lo for lo, hi in r[:p])
        return np.arange(lo, lo + r[p][1] - r[p][0])

    def part_of(kind, t, n):    # partition of every gkv ID of type t
        o = np.empty(n, dtype=np.int64)
        for p in range(P):
            o[owned(kind, t, p)] = p
        return o

    m = {t: np.load(out / conf["mapping"]["node"][t]) for t in nodes}
    em = {et: np.load(out / conf["mapping"]["edge"][":".join(et)]) for et in edges}
    for t in nodes:             # PyG's assignment kept, IDs a permutation
        assert sorted(m[t]) == list(range(len(nmap[t])))
        np.testing.assert_array_equal(part_of("node", t, len(m[t]))[m[t]], nmap[t])
    for et in edges:
        assert sorted(em[et]) == list(range(len(emap[et])))
        np.testing.assert_array_equal(
            part_of("edge", ":".join(et), len(em[et]))[em[et]], emap[et])
    for p in range(P):
        with gkv.Store(str(out / conf["part-%d" % p]["node_feats"]), readonly=True) as s:
            for t, fs in nodes.items():
                ids = owned("node", t, p)
                orig = np.argsort(m[t])[ids]
                for name, rows in fs.items():
                    got = np.asarray(s.pull("node/%s/%s" % (t, name), ids))
                    want = rows.numpy()[orig]
                    np.testing.assert_array_equal(got, want.reshape(got.shape))
            for et, (_, _, fs) in edges.items():
                key = ":".join(et)
                ids = owned("edge", key, p)
                orig = np.argsort(em[et])[ids]
                for name, rows in fs.items():
                    got = np.asarray(s.pull("edge/%s/%s" % (key, name), ids))
                    np.testing.assert_array_equal(got, rows.numpy()[orig])
        part = gkv.Partition(str(out / conf_name), p)
        for k, (et, (s0, d0, _)) in enumerate(edges.items()):
            assert conf["etypes"][":".join(et)] == k
            ids = owned("edge", ":".join(et), p)
            orig = np.argsort(em[et])[ids]
            src, dst = (np.asarray(a) for a in part.find_edges(k, ids))
            np.testing.assert_array_equal(src, m[et[0]][s0.numpy()[orig]])
            np.testing.assert_array_equal(dst, m[et[2]][d0.numpy()[orig]])
        part.close()


def test_convert_homogeneous(tmp_path, no_metis):
    data = homo_graph()
    root = pyg_partition(tmp_path, data)
    rep = convert_pyg_partitions(root, tmp_path / "gkv", name="toy")
    assert rep["num_nodes"] == 90 and rep["num_edges"] == 500
    check(tmp_path / "gkv", "toy.json", root, data)


def test_convert_heterogeneous(tmp_path, no_metis):
    data = hetero_graph()
    root = pyg_partition(tmp_path, data)
    rep = convert_pyg_partitions(str(root), str(tmp_path / "gkv"), csr=True)
    assert rep["num_nodes"] == 100 and rep["num_edges"] == 650
    check(tmp_path / "gkv", "graph.json", root, data)


def test_convert_command_and_bad_input(tmp_path, no_metis):
    data = homo_graph()
    root = pyg_partition(tmp_path, data)
    out = tmp_path / "out"
    run = [sys.executable, "-m", "gkv.pyg", "convert", str(root), str(out),
           "--name", "renamed"]
    r = subprocess.run(run, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["num_edges"] == 500
    check(out, "renamed.json", root, data)
    again = subprocess.run(run, capture_output=True, text=True)     # exists
    assert again.returncode == 1 and "gkv.pyg convert:" in again.stderr
    r = subprocess.run([sys.executable, "-m", "gkv.pyg", "convert",
                        str(tmp_path / "none"), str(tmp_path / "o2")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no such directory" in r.stderr
    bad = tmp_path / "o3"
    with pytest.raises(gkv.NotFoundError, match="no META.json"):
        convert_pyg_partitions(tmp_path, bad)           # the wrong root
    meta = json.load(open(root / "META.json"))
    (root / "META.json").write_text("{not json")
    with pytest.raises(gkv.InvalidArgumentError, match="not JSON"):
        convert_pyg_partitions(root, bad)
    (root / "META.json").write_text(json.dumps({"is_hetero": False}))
    with pytest.raises(gkv.InvalidArgumentError, match="num_parts"):
        convert_pyg_partitions(root, bad)
    (root / "META.json").write_text(json.dumps(meta))
    nm = torch.load(root / "node_map.pt")
    torch.save(nm[:-1], root / "node_map.pt")           # a node short
    with pytest.raises(gkv.InvalidArgumentError, match="outside 0..88"):
        convert_pyg_partitions(root, bad)
    torch.save((nm + 1) % P, root / "node_map.pt")      # another assignment
    with pytest.raises(gkv.InvalidArgumentError, match="destination"):
        convert_pyg_partitions(root, bad)
    torch.save(nm, root / "node_map.pt")
    os.remove(root / "part_1" / "graph.pt")
    with pytest.raises(gkv.NotFoundError, match="part_1.graph.pt"):
        convert_pyg_partitions(root, bad)
    (root / "part_1" / "graph.pt").write_text("not a torch file")
    with pytest.raises(gkv.InvalidArgumentError, match="torch.load"):
        convert_pyg_partitions(root, bad)
    assert not bad.exists()
