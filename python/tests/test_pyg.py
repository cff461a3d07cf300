"""gkv.pyg: PyG's remote backend (FeatureStore, GraphStore), the Sampler
under PyG's own NodeLoader / LinkLoader, and gkv.pyg's NeighborLoader, every
tensor compared with the C library's answer (Client.pull, find_edges,
Partition.sample_blocks of the same one-partition graph); zero copy checked
by address; bad input raises and changes nothing; and the GraphSAGE example
learning through gkv end to end."""
import importlib.util
import os
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import gkv  # noqa: E402
import gkv.pyg  # noqa: E402
from conftest import _PORTS, Proc, ip_config, start_server, tool  # noqa: E402
from torch_geometric.data import EdgeAttr, TensorAttr  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402
from torch_geometric.sampler import NodeSamplerInput  # noqa: E402

FEAT = "node/_N/feat"
N = 256


@pytest.fixture(scope="module")
def env(graph):
    config, ipc, feat = graph
    c = gkv.Client(ipc, group="pytest-pyg", timeout_ms=20000)
    p = gkv.Partition(config)
    fs, gs = gkv.pyg.FeatureStore(c), gkv.pyg.GraphStore(c)
    yield c, p, fs, gs
    c.close()
    p.close()


def pulled(c, ids, name=FEAT):
    return np.asarray(c.pull(name, np.asarray(ids, dtype=np.int64)))


def check_pyg_layout(d, blocks, c):
    """d (a Data) holds blocks in PyG's layout, and its rows are the pulls."""
    nodes0 = np.asarray(blocks[0].nodes[0])
    np.testing.assert_array_equal(d.n_id.numpy(), nodes0)
    want = []
    for b in reversed(blocks):              # hop 1 first
        want.append(np.stack([np.asarray(b.edges[0][0]), np.asarray(b.edges[0][1])]))
    np.testing.assert_array_equal(d.edge_index.numpy(), np.concatenate(want, 1))
    np.testing.assert_array_equal(
        d.e_id.numpy(), np.concatenate([np.asarray(b.edges[0][2]) for b in reversed(blocks)]))
    assert d.num_sampled_nodes == [blocks[-1].num_dst[0]] + [
        b.num_src[0] - b.num_dst[0] for b in reversed(blocks)]
    assert d.num_sampled_edges == [len(b.edges[0][0]) for b in reversed(blocks)]
    # every edge is a real edge of the graph: (n_id[row], n_id[col]) = find_edges(e_id)
    src, dst = c.find_edges(0, d.e_id.numpy())
    np.testing.assert_array_equal(d.n_id[d.edge_index[0]].numpy(), np.asarray(src))
    np.testing.assert_array_equal(d.n_id[d.edge_index[1]].numpy(), np.asarray(dst))


# ---- FeatureStore ---------------------------------------------------------------

def test_feature_store_gets_the_pulled_rows(env):
    c, p, fs, gs = env
    assert fs.get_all_tensor_attrs() == [TensorAttr(None, "feat")]
    assert len(fs) == 1
    ids = torch.tensor([5, 0, 255, 5, 17])
    got = fs.get_tensor(None, "feat", ids)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), pulled(c, ids))
    np.testing.assert_array_equal(fs.get_tensor(None, "feat", None).numpy(),
                                  pulled(c, np.arange(N)))
    # the AttrView paths a NeighborLoader's filter uses
    np.testing.assert_array_equal(fs[None, "feat", ids].numpy(), pulled(c, ids))
    np.testing.assert_array_equal(fs.view(None, "feat")[ids].numpy(), pulled(c, ids))
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[3, 9]] = True
    np.testing.assert_array_equal(fs.get_tensor(None, "feat", mask).numpy(),
                                  pulled(c, [3, 9]))
    np.testing.assert_array_equal(fs.get_tensor(None, "feat", slice(10, 14)).numpy(),
                                  pulled(c, range(10, 14)))
    assert fs.get_tensor_size(None, "feat") == (N, 4)
    assert fs.get_tensor_size(None, "feat", ids) == (5, 4)
    assert fs.get_tensor_size(None, "nope") is None


def test_multi_get_is_one_checked_pass(env):
    c, p, fs, gs = env
    a = [TensorAttr(None, "feat", torch.tensor([1, 2])),
         TensorAttr(None, "feat", torch.arange(100, 110)),
         TensorAttr(None, "feat", None)]
    got = fs.multi_get_tensor(a)
    for attr, t in zip(a, got):
        ids = np.arange(N) if attr.index is None else attr.index.numpy()
        np.testing.assert_array_equal(t.numpy(), pulled(c, ids))
    with pytest.raises(KeyError, match="nope"):
        fs.multi_get_tensor([a[0], TensorAttr(None, "nope", torch.tensor([0]))])
    with pytest.raises(ValueError, match="not fully specified"):
        fs.multi_get_tensor([TensorAttr(None, "feat")])
    # a bad index anywhere raises before anything is pulled
    with pytest.raises(gkv.RangeError, match="256"):
        fs.multi_get_tensor([a[0], TensorAttr(None, "feat", torch.tensor([0, 256]))])
    with pytest.raises(TypeError, match="float"):
        fs.get_tensor(None, "feat", torch.tensor([0.5]))
    with pytest.raises(ValueError, match="bool mask"):
        fs.get_tensor(None, "feat", torch.zeros(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="group_name"):
        fs.get_tensor(7, "feat", torch.tensor([0]))


def test_feature_store_put_update_remove(tmp_path):
    srv, ipc, port = start_server(tmp_path, store=str(tmp_path / "srv"), create=True)
    c = gkv.Client(ipc, group="pytest-pyg-put", rank=0, group_size=1, timeout_ms=20000)
    try:
        fs = gkv.pyg.FeatureStore(c)
        x = torch.arange(40, dtype=torch.float32).view(10, 4)
        assert fs.put_tensor(x, None, "emb", None)
        np.testing.assert_array_equal(pulled(c, np.arange(10), "node/_N/emb"), x.numpy())
        assert fs.get_all_tensor_attrs() == [TensorAttr(None, "emb")]
        rows = -torch.ones(2, 4)
        assert fs.put_tensor(rows, None, "emb", torch.tensor([7, 2]))
        want = x.numpy().copy()
        want[[7, 2]] = -1
        np.testing.assert_array_equal(fs.get_tensor(None, "emb", None).numpy(), want)
        fs[None, "emb", torch.tensor([0])] = torch.full((1, 4), 9.0)
        want[0] = 9
        np.testing.assert_array_equal(pulled(c, np.arange(10), "node/_N/emb"), want)
        # bad rows change nothing
        with pytest.raises(gkv.ShapeError):
            fs.put_tensor(torch.zeros(3, 4), None, "emb", torch.tensor([1, 2]))
        with pytest.raises(gkv.Error):
            fs.put_tensor(torch.zeros(2, 5), None, "emb", torch.tensor([1, 2]))
        with pytest.raises(ValueError, match="contiguous"):
            fs.put_tensor(torch.zeros(4, 2).t(), None, "emb", torch.tensor([1, 2]))
        with pytest.raises(gkv.RangeError):
            fs.put_tensor(torch.zeros(1, 4), None, "emb", torch.tensor([10]))
        with pytest.raises(gkv.NotFoundError):
            fs.put_tensor(torch.zeros(1, 4), None, "absent", torch.tensor([0]))
        np.testing.assert_array_equal(pulled(c, np.arange(10), "node/_N/emb"), want)
        assert fs.remove_tensor(None, "emb", None)
        assert not fs.remove_tensor(None, "emb", None)
        with pytest.raises(KeyError):
            fs.get_tensor(None, "emb", None)
    finally:
        c.close()
        srv.stop()


def test_feature_store_over_an_embedded_store(store):
    fs = gkv.pyg.FeatureStore(store)
    x = torch.arange(12, dtype=torch.int64).view(6, 2)
    assert fs.put_tensor(x, None, "h", None)
    assert fs.get_all_tensor_attrs() == [TensorAttr(None, "h")]
    got = fs.get_tensor(None, "h", torch.tensor([5, 1]))
    np.testing.assert_array_equal(got.numpy(), np.asarray(store.pull("node/_N/h", [5, 1])))
    assert got.dtype == torch.int64


# ---- GraphStore -----------------------------------------------------------------

def test_graph_store(env):
    c, p, fs, gs = env
    b = c.pbook()
    m = b["num_edges"][0]
    attrs = gs.get_all_edge_attrs()
    assert attrs == [EdgeAttr(None, "csc", size=(N, N))]
    src, dst = gs.get_edge_index(None, "coo")
    s, d = c.find_edges(0, np.arange(m))
    np.testing.assert_array_equal(src.numpy(), np.asarray(s))
    np.testing.assert_array_equal(dst.numpy(), np.asarray(d))
    row, colptr = gs.get_edge_index(None, "csc")
    assert colptr[-1] == m and len(row) == m
    # CSC back to COO: the same multiset of edges, grouped by destination
    back = np.repeat(np.arange(N), np.diff(colptr.numpy()))
    np.testing.assert_array_equal(back, np.sort(np.asarray(d), kind="stable"))
    order = np.argsort(np.asarray(d), kind="stable")
    np.testing.assert_array_equal(row.numpy(), np.asarray(s)[order])
    np.testing.assert_array_equal(np.diff(colptr.numpy()),
                                  np.asarray(c.in_degrees(0, np.arange(N))))
    rowptr, col = gs.get_edge_index(None, "csr")
    np.testing.assert_array_equal(np.diff(rowptr.numpy()),
                                  np.asarray(c.out_degrees(0, np.arange(N))))
    order = np.argsort(np.asarray(s), kind="stable")
    np.testing.assert_array_equal(col.numpy(), np.asarray(d)[order])
    with pytest.raises(KeyError):
        gs.get_edge_index(("a", "b", "c"), "coo")
    with pytest.raises(gkv.NotSupportedError, match="fixed"):
        gs.put_edge_index((src, dst), None, "coo")
    with pytest.raises(gkv.NotSupportedError):
        gs.remove_edge_index(None, "coo")
    assert gs.get_all_edge_attrs() == attrs


# ---- Sampler under PyG's loaders --------------------------------------------------

def test_sampler_equals_the_in_process_sampler(env):
    c, p, fs, gs = env
    s = gkv.pyg.Sampler(c, [4, 3], seed=11)
    seeds = torch.tensor([3, 200, 17, 0, 255])
    for i in range(2):
        out = s.sample_from_nodes(NodeSamplerInput(None, seeds))
        ref = p.sample_blocks(seeds.numpy(), [3, 4], seed=gkv.Loader.batch_seed(11, 0, i))
        assert out.node.tolist() == np.asarray(ref[0].nodes[0]).tolist()
        assert out.node[:5].tolist() == seeds.tolist()
        want = np.concatenate([np.asarray(b.edges[0][0]) for b in reversed(ref)])
        np.testing.assert_array_equal(out.row.numpy(), want)
        want = np.concatenate([np.asarray(b.edges[0][1]) for b in reversed(ref)])
        np.testing.assert_array_equal(out.col.numpy(), want)
        assert out.num_sampled_edges == [len(b.edges[0][0]) for b in reversed(ref)]
    with pytest.raises(ValueError, match="input_type"):
        s.sample_from_nodes(NodeSamplerInput(None, seeds, input_type="user"))
    with pytest.raises(ValueError, match="num_neighbors"):
        gkv.pyg.Sampler(c, [])


def test_pyg_node_loader_over_the_stores(env):
    """PyG's own NodeLoader with data=(FeatureStore, GraphStore): features
    come by multi_get_tensor, the structure by gkv's sampler."""
    c, p, fs, gs = env
    s = gkv.pyg.Sampler(c, [5, 2], seed=3)
    loader = NodeLoader((fs, gs), s, input_nodes=torch.arange(0, 64), batch_size=16)
    n = 0
    for i, d in enumerate(loader):
        seeds = torch.arange(16 * i, 16 * i + 16)
        ref = p.sample_blocks(seeds.numpy(), [2, 5], seed=gkv.Loader.batch_seed(3, 0, i))
        assert d.batch_size == 16
        check_pyg_layout(d, ref, c)
        np.testing.assert_array_equal(d.feat.numpy(), pulled(c, d.n_id))
        n += 1
    assert n == 4


# ---- NeighborLoader on gkv.Loader -------------------------------------------------

def test_neighbor_loader_batches(env):
    c, p, fs, gs = env
    train = torch.arange(0, N, 3)
    loader = gkv.pyg.NeighborLoader((fs, gs), num_neighbors=[4, 3], input_nodes=train,
                                    batch_size=16, shuffle=True, seed=9)
    assert len(loader) == 6
    seen = []
    with loader:
        for b in loader.loader:             # each batch against the C sampler
            d = loader.to_data(b)
            ref = p.sample_blocks(np.asarray(b.seeds), [3, 4], seed=b.sample_seed)
            check_pyg_layout(d, ref, c)
            assert d.batch_size == len(b.seeds)
            np.testing.assert_array_equal(d.n_id[:d.batch_size].numpy(), np.asarray(b.seeds))
            np.testing.assert_array_equal(d.feat.numpy(), pulled(c, d.n_id))
            # zero copy: the tensors are the batch's memory
            assert d.feat.data_ptr() == b.feats[0].ptr
            assert d.n_id.data_ptr() == b.blocks[0].nodes[0].ptr
            seen.append(np.asarray(b.seeds).copy())
        assert sorted(np.concatenate(seen).tolist()) == train.tolist()
        again = [d.n_id[:d.batch_size].numpy().copy() for d in loader]   # epoch 1
        assert sorted(np.concatenate(again).tolist()) == train.tolist()


def test_neighbor_loader_one_layer_is_all_views(env):
    c, p, fs, gs = env
    with gkv.pyg.NeighborLoader(c, [5], input_nodes=None, batch_size=64) as loader:
        b = next(iter(loader.loader))
        d = loader.to_data(b)
        assert d.e_id.data_ptr() == b.blocks[0].edges[0][2].ptr
        assert d.feat.data_ptr() == b.feats[0].ptr
        assert d.batch_size == 64 and d.num_nodes == len(d.n_id)
        assert len(loader) == 4


def test_neighbor_loader_bad_input(env):
    c, p, fs, gs = env
    with pytest.raises(ValueError, match="num_neighbors"):
        gkv.pyg.NeighborLoader((fs, gs), num_neighbors=[], batch_size=4)
    with pytest.raises(gkv.RangeError, match="input_nodes"):
        gkv.pyg.NeighborLoader((fs, gs), [2], input_nodes=torch.tensor([0, 256]))
    with pytest.raises(TypeError, match="float"):
        gkv.pyg.NeighborLoader((fs, gs), [2], input_nodes=torch.tensor([0.0]))
    with pytest.raises(TypeError, match="data"):
        gkv.pyg.NeighborLoader((gs, fs), [2])
    with pytest.raises(TypeError, match="unsupported"):
        gkv.pyg.NeighborLoader((fs, gs), [2], time_attr="t")
    with pytest.raises(ValueError, match="directional"):
        gkv.pyg.NeighborLoader((fs, gs), [2], disjoint=True)
    with pytest.raises(ValueError, match="node type"):
        gkv.pyg.NeighborLoader((fs, gs), [2], input_nodes=("user", None))
    with pytest.raises(gkv.Error):
        gkv.pyg.NeighborLoader((fs, gs), [2], node_attrs=["nope"])
    # the client still works
    np.testing.assert_array_equal(fs.get_tensor(None, "feat", torch.tensor([1])).numpy(),
                                  pulled(c, [1]))


def test_link_neighbor_loader(env):
    c, p, fs, gs = env
    s, d = c.find_edges(0, np.arange(40))
    eli = torch.stack([torch.from_dlpack(s), torch.from_dlpack(d)])
    loader = gkv.pyg.LinkNeighborLoader((fs, gs), [3, 2], edge_label_index=eli,
                                        batch_size=8, neg_sampling_ratio=1.0, seed=4)
    n = 0
    for data in loader:
        k = data.edge_label_index.size(1)
        assert k == 16 and data.edge_label.tolist() == [1.0] * 8 + [0.0] * 8
        ends = data.n_id[data.edge_label_index]
        np.testing.assert_array_equal(ends[:, :8].numpy(),
                                      eli[:, data.input_id].numpy())
        np.testing.assert_array_equal(data.feat.numpy(), pulled(c, data.n_id))
        src, dst = c.find_edges(0, data.e_id.numpy())
        np.testing.assert_array_equal(data.n_id[data.edge_index[0]].numpy(), np.asarray(src))
        np.testing.assert_array_equal(data.n_id[data.edge_index[1]].numpy(), np.asarray(dst))
        n += 1
    assert n == 5


# ---- heterogeneous ----------------------------------------------------------------

@pytest.fixture(scope="module")
def hetero(tmp_path_factory):
    d = tmp_path_factory.mktemp("hetero")
    rng = np.random.default_rng(3)
    nu, ni = 40, 30
    buys = (rng.integers(0, nu, 200), rng.integers(0, ni, 200))
    follows = (rng.integers(0, nu, 100), rng.integers(0, nu, 100))
    ux = rng.standard_normal((nu, 3)).astype(np.float32)
    ix = rng.standard_normal((ni, 2)).astype(np.float32)
    gkv.partition(str(d / "parts"),
                  {("user", "buys", "item"): buys, ("user", "follows", "user"): follows,
                   ("item", "bought-by", "user"): (buys[1], buys[0])},
                  {"user": nu, "item": ni}, 1, name="h",
                  node_feats={("user", "x"): ux, ("item", "x"): ix})
    config = str(d / "parts" / "h.json")
    proc, ipc = serve_process(d, config)
    c = gkv.Client(ipc, group="pytest-pyg-h", timeout_ms=20000)
    p = gkv.Partition(config)
    yield c, p
    c.close()
    p.close()
    proc.stop()


def serve_process(d, config):
    """A gkv-server process serving the one partition of config (a
    gkv.Partition of it is open in this process: one store handle each)."""
    for _ in range(50):
        port = next(_PORTS)
        ipc = ip_config(d, port)
        proc = Proc([tool("gkv-server"), "--part-config", config, "--part-id", "0",
                     "--ip-config", ipc, "--keep-alive", "--nosync", "--no-prefault"],
                    d / ("server-%d.log" % port))
        deadline = time.time() + 20
        while time.time() < deadline and proc.p.poll() is None:
            try:
                gkv.Client(ipc, group="probe", observer=True, timeout_ms=2000).close()
                return proc, ipc
            except gkv.Error:
                time.sleep(0.1)
        proc.stop()                     # the port was taken: the next one
    raise RuntimeError("gkv-server did not start")


def test_hetero_neighbor_loader(hetero):
    c, p = hetero
    fs, gs = gkv.pyg.FeatureStore(c), gkv.pyg.GraphStore(c)
    book = c.pbook()
    assert sorted((a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()) == \
        [("item", "x"), ("user", "x")]
    assert [a.edge_type for a in gs.get_all_edge_attrs()] == \
        [tuple(e.split(":")) for e in book["etypes"]]
    with pytest.raises(ValueError, match="group_name"):
        fs.get_tensor(None, "x", torch.tensor([0]))
    with gkv.pyg.NeighborLoader((fs, gs), [3, 2], input_nodes=("item", torch.arange(30)),
                                batch_size=10) as loader:
        for b in loader.loader:
            d = loader.to_data(b)
            ref = p.sample_blocks({1 if book["ntypes"][1] == "item" else 0:
                                   np.asarray(b.seeds)}, [2, 3], seed=b.sample_seed)
            assert d["item"].batch_size == 10
            for t, nt in enumerate(book["ntypes"]):
                np.testing.assert_array_equal(d[nt].n_id.numpy(),
                                              np.asarray(ref[0].nodes[t]))
                np.testing.assert_array_equal(
                    d[nt].x.numpy(), pulled(c, d[nt].n_id, "node/%s/x" % nt))
            for e, et in enumerate(book["etypes"]):
                s, r, t = et.split(":")
                ei = d[(s, r, t)].edge_index
                want = np.concatenate([np.stack([np.asarray(x.edges[e][0]),
                                                 np.asarray(x.edges[e][1])])
                                       for x in reversed(ref)], 1)
                np.testing.assert_array_equal(ei.numpy(), want)
                src, dst = c.find_edges(e, d[(s, r, t)].e_id.numpy())
                np.testing.assert_array_equal(d[s].n_id[ei[0]].numpy(), np.asarray(src))
                np.testing.assert_array_equal(d[t].n_id[ei[1]].numpy(), np.asarray(dst))


# ---- the example ------------------------------------------------------------------

def test_graphsage_example_learns(tmp_path, capsys):
    path = Path(__file__).resolve().parents[2] / "examples" / "graphsage_pyg.py"
    spec = importlib.util.spec_from_file_location("graphsage_pyg", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = mod.parse(["--nodes", "3000", "--epochs", "4", "--seed", "1",
                      "--dir", str(tmp_path)])
    config, rep = mod.partition(os.path.join(str(tmp_path), "parts"), args)
    acc = mod.in_process(config, args)
    out = capsys.readouterr().out
    assert "batches/s" in out and "epoch 3" in out
    assert acc >= 0.9, out


def test_hetero_link_loader(hetero):
    c, p = hetero
    fs, gs = gkv.pyg.FeatureStore(c), gkv.pyg.GraphStore(c)
    et = ("user", "buys", "item")
    e = c.pbook()["etypes"].index("user:buys:item")
    s, d = c.find_edges(e, np.arange(24))
    eli = torch.stack([torch.from_dlpack(s), torch.from_dlpack(d)])
    n = 0
    for data in gkv.pyg.LinkNeighborLoader((fs, gs), [2, 2], edge_label_index=(et, eli),
                                           batch_size=8, seed=2):
        local = data[et].edge_label_index
        np.testing.assert_array_equal(data["user"].n_id[local[0]].numpy(),
                                      eli[0, data[et].input_id].numpy())
        np.testing.assert_array_equal(data["item"].n_id[local[1]].numpy(),
                                      eli[1, data[et].input_id].numpy())
        for nt in ("user", "item"):
            np.testing.assert_array_equal(
                data[nt].x.numpy(), pulled(c, data[nt].n_id, "node/%s/x" % nt))
        n += 1
    assert n == 3
    with pytest.raises(ValueError, match="edge type"):
        gkv.pyg.LinkNeighborLoader((fs, gs), [2], edge_label_index=eli)
