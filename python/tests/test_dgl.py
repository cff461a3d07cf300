"""gkv.dgl (the dgl.distributed names over gkv) and gkv.dgl_convert (DGL's
partitions into gkv's): pulls and pushes equal the C tools' answers, the
sparse optimizers equal their arithmetic done in numpy, node_split equals
gkv_pbook_node_split (the loader's), the loader's blocks equal
Partition.sample_blocks, a DGL partition_graph output converts with its
assignment and features kept, DGL reads gkv's config. Needs torch; the
tests marked needs_dgl also dgl (skipped without it: the rest then runs
the CSC-block path)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gkv  # noqa: E402
import gkv.dgl as dist  # noqa: E402
from conftest import _PORTS, kvctl_get  # noqa: E402

needs_dgl = pytest.mark.skipif(not dist.HAVE_DGL, reason="dgl is not installed")
FEAT = "node/_N/feat"


def port_of(ipc):
    return int(open(ipc).read().split()[1])


@pytest.fixture
def job(graph):
    """gkv.dgl connected to the one-partition graph of conftest's gkv-server."""
    config, ipc, feat = graph
    c = dist.initialize(ipc, group="pytest-dgl", timeout_ms=20000)
    yield c, config, ipc, feat
    dist.exit_client()


def serve_parts(tmp_path, config, nparts):
    """gkv.Server threads serving each partition of config."""
    for _ in range(20):
        ipc = tmp_path / ("ipc-%d" % next(_PORTS))
        ipc.write_text("".join("127.0.0.1 %d\n" % next(_PORTS) for _ in range(nparts)))
        servers = []
        try:
            for m in range(nparts):
                servers.append(gkv.Server(str(ipc), part_config=config, part_id=m,
                                          machine=m))
            return servers, str(ipc)
        except gkv.BusyError:
            for s in servers:
                s.stop()
    raise RuntimeError("no free ports")


@pytest.fixture(scope="module")
def parted(tmp_path_factory):
    """A 3-partition random graph of 300 nodes with a feature and a mask,
    served in this process: (config, ipc, feat by new ID, mask by new ID)."""
    d = tmp_path_factory.mktemp("parted")
    rng = np.random.default_rng(3)
    n = 300
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    feat = rng.standard_normal((n, 5)).astype(np.float32)
    mask = (rng.random(n) < 0.3).astype(np.uint8)
    gkv.partition(str(d / "p"), (src, dst), n, 3, method="random", seed=4,
                  name="pg", node_feats={"feat": feat, "mask": mask})
    config = str(d / "p" / "pg.json")
    m = np.load(d / "p" / "mapping" / "node-_N.npy")
    inv = np.empty(n, np.int64)
    inv[m] = np.arange(n)
    servers, ipc = serve_parts(d, config, 3)
    yield config, ipc, feat[inv], mask[inv]
    for s in servers:
        s.stop()


# ---- DistGraph, DistTensor --------------------------------------------------------

def test_graph_and_tensor_pulls(job):
    c, config, ipc, feat = job
    g = dist.DistGraph("g")
    book = c.pbook()
    assert g.num_nodes() == book["num_nodes"][0] == 256
    assert g.num_edges() == g.num_edges("_E") == book["num_edges"][0]
    assert g.ntypes == ["_N"] and g.etypes == ["_E"]
    assert g.canonical_etypes == [("_N", "_E", "_N")]
    t = g.ndata["feat"]
    assert "feat" in g.ndata and "nope" not in g.ndata
    assert t.shape == (256, 4) and t.dtype == torch.float32 and len(t) == 256
    ids = torch.tensor([5, 0, 255, 5, 17])
    rows = t[ids]
    assert isinstance(rows, torch.Tensor) and rows.shape == (5, 4)
    want = kvctl_get(None, FEAT, ids.tolist(), server="127.0.0.1:%d" % port_of(ipc))
    np.testing.assert_array_equal(rows.numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(t[2:9].numpy(), t[torch.arange(2, 9)].numpy())
    np.testing.assert_array_equal(t[np.array([3, 4])].numpy(), t[[3, 4]].numpy())


def test_arrays_reach_torch_without_a_copy(job):
    c = job[0]
    a = c.pull(FEAT, np.arange(10))
    assert dist._t(a).data_ptr() == a.ptr


def test_tensor_push_and_create(job):
    c, config, ipc, feat = job
    server = "127.0.0.1:%d" % port_of(ipc)
    t = dist.DistTensor((256, 3), torch.float32, "pushed",
                        init_func=lambda shape, dt: torch.ones(shape, dtype=dt))
    assert t.name == "node/_N/pushed"
    np.testing.assert_array_equal(kvctl_get(None, t.name, [0, 255], server=server),
                                  np.ones((2, 3)))
    t[torch.tensor([1, 7])] = torch.tensor([[1.5, 2, 3], [4, 5, 6.25]])
    np.testing.assert_array_equal(kvctl_get(None, t.name, [1, 7, 8], server=server),
                                  [[1.5, 2, 3], [4, 5, 6.25], [1, 1, 1]])
    again = dist.DistTensor((256, 3), torch.float32, "pushed")     # attaches
    np.testing.assert_array_equal(again[[7]].numpy(), [[4, 5, 6.25]])
    m = dist.DistTensor((256,), torch.bool, "flags")
    m[[3]] = torch.tensor([True])
    assert m.dtype == torch.bool and m[[2, 3]].tolist() == [False, True]
    with pytest.raises(gkv.ExistsError):      # same name, other shape
        dist.DistTensor((256, 4), torch.float32, "pushed")
    c.delete("node/_N/pushed")
    c.delete("node/_N/flags")


def test_tensor_bad_input_changes_nothing(job):
    c, config, ipc, feat = job
    t = dist.DistGraph("g").ndata["feat"]
    before = t[torch.arange(4)].clone()
    with pytest.raises(gkv.InvalidArgumentError, match="integer IDs"):
        t[torch.tensor([0.5])]
    with pytest.raises(gkv.InvalidArgumentError, match="integer IDs"):
        t[torch.tensor([True, False])]
    with pytest.raises(gkv.ShapeError):
        t[torch.arange(2)] = torch.zeros(2, 3)
    with pytest.raises(gkv.ShapeError, match="dtype float64"):
        t[torch.arange(2)] = torch.zeros(2, 4, dtype=torch.float64)
    with pytest.raises(gkv.RangeError):
        t[torch.tensor([0, 256])] = torch.zeros(2, 4)
    with pytest.raises(gkv.InvalidArgumentError, match="not an int"):
        t[3]
    np.testing.assert_array_equal(t[torch.arange(4)].numpy(), before.numpy())
    with pytest.raises(gkv.NotFoundError, match="node/_N/nope"):
        dist.DistGraph("g").ndata["nope"]
    with pytest.raises(gkv.InvalidArgumentError, match="serve graph 'g'"):
        dist.DistGraph("other")
    with pytest.raises(gkv.InvalidArgumentError, match="part_policy"):
        dist.DistTensor((256, 2), torch.float32, "x", part_policy="bogus")
    with pytest.raises(gkv.InvalidArgumentError, match="edge type"):
        dist.DistGraph("g").num_edges("nope")


def test_not_connected_is_a_clear_error(monkeypatch):
    dist.exit_client()
    with pytest.raises(gkv.NotSupportedError, match="initialize"):
        dist.DistGraph("g")
    monkeypatch.delenv("GKV_IP_CONFIG", raising=False)
    with pytest.raises(gkv.InvalidArgumentError, match="GKV_IP_CONFIG"):
        dist.initialize()


def test_sample_neighbors_equals_the_sampler(job):
    c, config, ipc, feat = job
    g = dist.DistGraph("g")
    p = gkv.Partition(config)
    seeds = torch.tensor([1, 9, 30, 77])
    got = g.sample_neighbors(seeds, 3, seed=11)
    (s, d, e), = p.sample_neighbors(seeds.numpy(), 3, seed=11)
    if dist.HAVE_DGL:
        assert got.num_nodes() == 256
        gs, gd = got.edges(order="eid")
        ge = got.edata[dist._dgl.EID]
    else:
        gs, gd, ge = got[("_N", "_E", "_N")]
    for x, y in ((gs, s), (gd, d), (ge, e)):
        np.testing.assert_array_equal(x.numpy(), np.asarray(y))
    p.close()
    # prob= names an edge feature the servers hold (test_dgl_prob.py)
    with pytest.raises(gkv.NotFoundError, match="edge/_N:_E:_N/w"):
        g.sample_neighbors(seeds, 3, prob="w")


# ---- DistEmbedding and the sparse optimizers ------------------------------------------

def test_embedding_adagrad_and_adam_on_the_servers(job):
    c, config, ipc, feat = job
    server = "127.0.0.1:%d" % port_of(ipc)
    rng = np.random.default_rng(1)
    init = rng.standard_normal((256, 4)).astype(np.float32)
    for opt_cls in (dist.SparseAdagrad, dist.SparseAdam):
        name = "emb_" + opt_cls.handler
        emb = dist.DistEmbedding(256, 4, name, init_func=lambda shape, dt: torch.from_numpy(
            init[:shape[0]] if shape[0] == 256 else init[:shape[0]]))
        opt = (opt_cls([emb], lr=0.1) if opt_cls is dist.SparseAdagrad
               else opt_cls([emb], lr=0.1, betas=(0.8, 0.9), eps=1e-6))
        ref = init.astype(np.float64).copy()
        s = np.zeros_like(ref)
        m, v, t = np.zeros_like(ref), np.zeros_like(ref), np.zeros(256)
        ids = np.array([3, 7, 3, 200, 3])            # duplicates: averaged
        w = rng.standard_normal((5, 4)).astype(np.float32)
        for step in range(2):
            rows = emb(torch.from_numpy(ids))
            np.testing.assert_allclose(rows.detach().numpy(), ref[ids], rtol=1e-6,
                                       atol=1e-6)
            (rows * torch.from_numpy(w)).sum().backward()
            opt.step()
            for u in np.unique(ids):
                g = w[ids == u].astype(np.float64).mean(0)
                if opt_cls is dist.SparseAdagrad:
                    s[u] += g * g
                    ref[u] -= 0.1 * g / (np.sqrt(s[u]) + 1e-10)
                else:
                    t[u] += 1
                    m[u] = 0.8 * m[u] + 0.2 * g
                    v[u] = 0.9 * v[u] + 0.1 * g * g
                    ref[u] -= 0.1 * (m[u] / (1 - 0.8 ** t[u])) / (
                        np.sqrt(v[u] / (1 - 0.9 ** t[u])) + 1e-6)
            got = kvctl_get(None, emb.name, [3, 7, 200, 0], server=server)
            np.testing.assert_allclose(got, ref[[3, 7, 200, 0]], rtol=1e-5, atol=1e-6)
        assert emb._trace == []
        with torch.no_grad():                         # no trace without autograd
            emb(torch.tensor([1]))
        assert emb._trace == []
        c.delete(emb.name)
    with pytest.raises(gkv.InvalidArgumentError, match="DistEmbedding"):
        dist.SparseAdagrad([torch.zeros(2)], lr=0.1)


# ---- node_split ----------------------------------------------------------------------------

def c_split(c, num_trainers, rank):
    """gkv_pbook_node_split's answer, through the C loader's seed_mask."""
    with gkv.Loader(c, None, seed_mask="node/_N/mask", num_trainers=num_trainers,
                    rank=rank, batch_size=8, fanouts=[1], shuffle=False) as ld:
        return np.asarray(ld.seeds()).copy()


def test_node_split_equals_the_c_split(parted):
    config, ipc, feat, mask = parted
    c = dist.initialize(ipc, group="pytest-split", timeout_ms=20000)
    try:
        g = dist.DistGraph("pg")
        pb = g.get_partition_book()
        assert pb.num_partitions() == 3
        assert g.ndata.keys() == ["feat", "mask"]          # three servers' lists
        np.testing.assert_array_equal(g.ndata["feat"][torch.arange(300)].numpy(), feat)
        for nt in (1, 2, 3, 5):
            seen = []
            for r in range(nt):
                want = c_split(c, nt, r)
                got = dist.node_split(g.ndata["mask"], pb, rank=r, num_trainers=nt)
                np.testing.assert_array_equal(got.numpy(), want)
                got2 = dist.node_split(torch.from_numpy(mask.astype(bool)), pb,
                                       rank=r, num_trainers=nt)
                np.testing.assert_array_equal(got2.numpy(), want)
                got3 = dist.node_split(np.flatnonzero(mask)[::-1].copy(), pb,
                                       rank=r, num_trainers=nt)
                np.testing.assert_array_equal(got3.numpy(), want)
                seen.append(want)
            np.testing.assert_array_equal(np.sort(np.concatenate(seen)),
                                          np.flatnonzero(mask))
        # the default: initialize()'s rank of its group (alone: everything)
        np.testing.assert_array_equal(dist.node_split(g.ndata["mask"], pb).numpy(),
                                      np.flatnonzero(mask))
        es = dist.edge_split(torch.ones(g.num_edges(), dtype=torch.bool), pb,
                             rank=1, num_trainers=2)
        assert len(es) == g.num_edges() // 2 or len(es) == (g.num_edges() + 1) // 2
        with pytest.raises(gkv.InvalidArgumentError):
            dist.node_split(torch.ones(5, dtype=torch.bool), pb)   # wrong length
        with pytest.raises(gkv.RangeError):
            dist.node_split(torch.tensor([0, 300]), pb)
        with pytest.raises(gkv.InvalidArgumentError):
            dist.node_split(torch.ones(300, dtype=torch.bool), pb, rank=3,
                            num_trainers=3)
        with pytest.raises(gkv.NotSupportedError):
            dist.node_split(torch.ones(300, dtype=torch.bool), pb, force_even=False)
        # the partition book's answers equal the ranges
        ranges = c.pbook()["node_ranges"][0]
        owner = pb.nid2partid(torch.arange(300)).numpy()
        np.testing.assert_array_equal(owner, np.asarray(c.node_owner(0, np.arange(300))))
        for p, (lo, hi) in enumerate(ranges):
            np.testing.assert_array_equal(pb.partid2nids(p).numpy(), np.arange(lo, hi))
        with pytest.raises(gkv.RangeError):
            pb.nid2partid(torch.tensor([300]))
    finally:
        dist.exit_client()


# ---- the node data loader -----------------------------------------------------------------

def check_block(blk, ref, book):
    """A loader block (DGL block or CSCBlock) against a gkv.Block."""
    nodes = np.asarray(ref.nodes[0])
    s, d, e = (np.asarray(a) for a in ref.edges[0])
    if dist.HAVE_DGL and not isinstance(blk, dist.CSCBlock):
        assert blk.is_block
        assert blk.num_src_nodes() == ref.num_src[0]
        assert blk.num_dst_nodes() == ref.num_dst[0]
        np.testing.assert_array_equal(blk.srcdata[dist._dgl.NID].numpy(), nodes)
        np.testing.assert_array_equal(blk.dstdata[dist._dgl.NID].numpy(),
                                      nodes[:ref.num_dst[0]])
        bs, bd = blk.edges(order="eid")
        np.testing.assert_array_equal(bs.numpy(), s)
        np.testing.assert_array_equal(bd.numpy(), d)
        np.testing.assert_array_equal(blk.edata[dist._dgl.EID].numpy(), e)
        return
    et = ("_N", "_E", "_N")
    np.testing.assert_array_equal(blk.srcnodes["_N"].numpy(), nodes)
    ptr, idx, eid = (x.numpy() for x in (blk.indptr[et], blk.indices[et], blk.eids[et]))
    assert len(ptr) == ref.num_dst[0] + 1 and ptr[0] == 0 and ptr[-1] == len(s)
    order = np.argsort(d, kind="stable")
    np.testing.assert_array_equal(idx, s[order])
    np.testing.assert_array_equal(eid, e[order])
    np.testing.assert_array_equal(np.diff(ptr), np.bincount(d, minlength=ref.num_dst[0]))


@pytest.mark.parametrize("where", ["server", "client"])
def test_loader_blocks_equal_the_sampler(job, where):
    c, config, ipc, feat = job
    g = dist.DistGraph("g")
    p = gkv.Partition(config)
    orig = np.load(os.path.join(os.path.dirname(config), "mapping", "node-_N.npy"))
    rows = feat[np.argsort(orig)]                     # by new ID
    seeds = torch.arange(0, 256, 5)
    n = 0
    with dist.DistNodeDataLoader(g, seeds, dist.NeighborSampler([4, 3]),
                                 batch_size=16, shuffle=True, feats=["feat"],
                                 label="feat", where=where, seed=7,
                                 workers=2) as ld:
        assert len(ld) == 4
        for i, (inp, out, blocks) in enumerate(ld):
            ref = p.sample_blocks(out.numpy(), [4, 3],
                                  seed=gkv.Loader.batch_seed(7, 0, i))
            assert len(blocks) == 2
            for b, r in zip(blocks, ref):
                check_block(b, r, c.pbook())
                check_block(dist.CSCBlock(c.pbook(), r), r, c.pbook())
            np.testing.assert_array_equal(inp.numpy(), np.asarray(ref[0].nodes[0]))
            np.testing.assert_array_equal(blocks[0].srcdata["feat"].numpy(),
                                          rows[inp.numpy()])
            np.testing.assert_array_equal(blocks[-1].dstdata["feat"].numpy(),
                                          rows[out.numpy()])
            n += len(out)
    assert n == len(seeds)
    p.close()


def test_loader_bad_input(job):
    g = dist.DistGraph("g")
    with pytest.raises(gkv.InvalidArgumentError, match="NeighborSampler"):
        dist.DistNodeDataLoader(g, torch.arange(4), object(), batch_size=2)
    with pytest.raises(gkv.InvalidArgumentError, match="unknown arguments"):
        dist.DistNodeDataLoader(g, torch.arange(4), dist.NeighborSampler([2]),
                                batch_size=2, bogus=1)
    with pytest.raises(gkv.InvalidArgumentError, match="DistGraph"):
        dist.DistNodeDataLoader(None, torch.arange(4), dist.NeighborSampler([2]),
                                batch_size=2)
    with pytest.raises(gkv.Error):
        dist.DistNodeDataLoader(g, torch.arange(4), dist.NeighborSampler([2]),
                                batch_size=2, feats=["nope"])


# ---- partitioning with a given assignment (no dgl needed) --------------------------------

def test_partition_given_keeps_ids(tmp_path):
    rng = np.random.default_rng(5)
    n = 40
    src, dst = rng.integers(0, n, 200), rng.integers(0, n, 200)
    owners = np.repeat(np.array([0, 1, 2], np.int32), [7, 20, 13])
    f = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    gkv.partition(str(tmp_path / "a"), (src, dst), n, 3, method="given",
                  owners=owners, node_feats={"f": f})
    conf = json.load(open(tmp_path / "a" / "graph.json"))
    assert conf["node_map"]["_N"] == [[0, 7], [7, 27], [27, 40]]
    assert conf["part_method"] == "given"
    np.testing.assert_array_equal(np.load(tmp_path / "a" / "mapping" / "node-_N.npy"),
                                  np.arange(n))
    with gkv.Store(str(tmp_path / "a" / "part-1"), readonly=True) as s:
        np.testing.assert_array_equal(np.asarray(s.pull("node/_N/f", np.arange(7, 27))),
                                      f[7:27])
    # owners out of order: nodes move, keeping their order within a partition
    o2 = (np.arange(n) % 3).astype(np.int32)
    gkv.partition(str(tmp_path / "b"), (src, dst), n, 3, method="given", owners=o2)
    m = np.load(tmp_path / "b" / "mapping" / "node-_N.npy")
    np.testing.assert_array_equal(m[np.argsort(o2, kind="stable")], np.arange(n))
    for bad, msg in ((owners + 1, "expected a partition 0..2"),
                     (owners[:-1], "one per node"),
                     (owners.astype(np.int64), "int32")):
        with pytest.raises(gkv.InvalidArgumentError, match=msg):
            gkv.partition(str(tmp_path / "c"), (src, dst), n, 3, method="given",
                          owners=bad)
    with pytest.raises(gkv.InvalidArgumentError, match="owners of the nodes are missing"):
        gkv.partition(str(tmp_path / "c"), (src, dst), n, 3, method="given")
    with pytest.raises(gkv.InvalidArgumentError, match="for method given only"):
        gkv.partition(str(tmp_path / "c"), (src, dst), n, 3, method="random",
                      owners=owners)
    assert not (tmp_path / "c").exists()


# ---- DGL's partitions into gkv's, and DGL reading gkv's config ----------------------------

def dgl_partition(tmp_path, hetero, method):
    import dgl
    torch.manual_seed(2)
    if hetero:
        g = dgl.heterograph({
            ("user", "follows", "user"): (torch.randint(0, 60, (300,)),
                                          torch.randint(0, 60, (300,))),
            ("user", "buys", "item"): (torch.randint(0, 60, (200,)),
                                       torch.randint(0, 40, (200,))),
            ("item", "bought_by", "user"): (torch.randint(0, 40, (150,)),
                                            torch.randint(0, 60, (150,)))})
        g.nodes["user"].data["feat"] = torch.randn(60, 3)
        g.nodes["item"].data["feat"] = torch.randn(40, 2)
        g.nodes["user"].data["train_mask"] = torch.rand(60) < 0.5
        g.edges["buys"].data["w"] = torch.rand(200)
    else:
        g = dgl.rand_graph(120, 700)
        g.ndata["feat"] = torch.randn(120, 4)
        g.ndata["train_mask"] = torch.rand(120) < 0.3
        g.edata["w"] = torch.rand(700)
    out = tmp_path / "dglparts"
    on, oe = dgl.distributed.partition_graph(g, "toy", 3, str(out),
                                             part_method=method,
                                             return_mapping=True)
    return g, str(out / "toy.json"), on, oe


def as_dict(x, key):
    return x if isinstance(x, dict) else {key: x}


@needs_dgl
@pytest.mark.parametrize("hetero,method", [(False, "metis"), (False, "random"),
                                           (True, "random")])
def test_convert_keeps_dgl_assignment_and_features(tmp_path, hetero, method):
    g, dconf, on, oe = dgl_partition(tmp_path, hetero, method)
    out = tmp_path / "gkv"
    dist.convert_dgl_partitions(dconf, str(out), orig_nids=on, orig_eids=oe)
    mine, theirs = json.load(open(out / "toy.json")), json.load(open(dconf))
    assert mine["node_map"] == theirs["node_map"]
    assert mine["edge_map"] == theirs["edge_map"]
    assert mine["num_parts"] == 3
    on = as_dict(on, "_N")
    oe = as_dict(oe, "_N:_E:_N")
    oe = {(":".join(k) if isinstance(k, tuple) else k): v for k, v in oe.items()}
    for nt in g.ntypes:
        m = np.load(out / mine["mapping"]["node"][nt])
        # DGL's IDs are kept: the mapping from the original IDs equals DGL's
        inv = np.empty_like(m)
        inv[on[nt].numpy()] = np.arange(len(m))
        np.testing.assert_array_equal(m, inv)
    def rng(kind, t, p):
        r = mine[kind + "_map"][t]
        lo = sum(hi - lo for lo, hi in r[:p])
        return np.arange(lo, lo + r[p][1] - r[p][0])

    for p in range(3):
        with gkv.Store(str(out / mine["part-%d" % p]["node_feats"]), readonly=True) as s:
            for nt in g.ntypes:
                inv = np.argsort(np.load(out / mine["mapping"]["node"][nt]))
                ids = rng("node", nt, p)
                for name, want in g.nodes[nt].data.items():
                    got = np.asarray(s.pull("node/%s/%s" % (nt, name), ids))
                    w = want.numpy()[inv[ids]]
                    np.testing.assert_array_equal(got, w.astype(got.dtype))
            for cet in g.canonical_etypes:
                key = ":".join(cet)
                einv = np.argsort(np.load(out / mine["mapping"]["edge"][key]))
                eids = rng("edge", key, p)
                for name, want in g.edges[cet].data.items():
                    got = np.asarray(s.pull("edge/%s/%s" % (key, name), eids))
                    np.testing.assert_array_equal(got, want.numpy()[einv[eids]])
        # each gkv edge joins the nodes of its original edge
        part = gkv.Partition(str(out / "toy.json"), p)
        for k, cet in enumerate(g.canonical_etypes):
            key = ":".join(cet)
            einv = np.argsort(np.load(out / mine["mapping"]["edge"][key]))
            eids = rng("edge", key, p)
            src, dst = (np.asarray(a) for a in part.find_edges(k, eids))
            os_, od = (x.numpy() for x in g.edges(etype=cet, order="eid"))
            nm_s = np.load(out / mine["mapping"]["node"][cet[0]])
            nm_d = np.load(out / mine["mapping"]["node"][cet[2]])
            np.testing.assert_array_equal(src, nm_s[os_[einv[eids]]])
            np.testing.assert_array_equal(dst, nm_d[od[einv[eids]]])
        part.close()


@needs_dgl
def test_convert_command_and_bad_input(tmp_path):
    g, dconf, on, oe = dgl_partition(tmp_path, False, "random")
    np.save(tmp_path / "on.npy", on.numpy())
    torch.save(oe, tmp_path / "oe.pt")
    run = [sys.executable, "-m", "gkv.dgl", "convert", dconf, str(tmp_path / "out"),
           "--orig-nids", str(tmp_path / "on.npy"), "--orig-eids",
           str(tmp_path / "oe.pt"), "--name", "renamed"]
    r = subprocess.run(run, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["num_nodes"] == 120
    conf = json.load(open(tmp_path / "out" / "renamed.json"))
    assert conf["graph_name"] == "renamed"
    again = subprocess.run(run, capture_output=True, text=True)     # exists
    assert again.returncode == 1 and "gkv.dgl convert:" in again.stderr
    r = subprocess.run([sys.executable, "-m", "gkv.dgl", "convert",
                        str(tmp_path / "none.json"), str(tmp_path / "o2")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no such file" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(gkv.InvalidArgumentError, match="not JSON"):
        dist.convert_dgl_partitions(str(bad), str(tmp_path / "o3"))
    conf = json.load(open(dconf))
    del conf["node_map"]
    bad.write_text(json.dumps(conf))
    with pytest.raises(gkv.InvalidArgumentError, match="node_map"):
        dist.convert_dgl_partitions(str(bad), str(tmp_path / "o3"))
    conf = json.load(open(dconf))
    conf["node_map"]["_N"] = conf["node_map"]["_N"][:2]
    (tmp_path / "dglparts" / "short.json").write_text(json.dumps(conf))
    with pytest.raises(gkv.InvalidArgumentError, match="expected 3"):
        dist.convert_dgl_partitions(str(tmp_path / "dglparts" / "short.json"),
                                    str(tmp_path / "o3"))
    with pytest.raises(gkv.InvalidArgumentError, match="permutation"):
        dist.convert_dgl_partitions(dconf, str(tmp_path / "o4"),
                                    orig_nids=torch.zeros(120, dtype=torch.int64))
    os.remove(tmp_path / "dglparts" / "part1" / "graph.dgl")
    with pytest.raises(gkv.NotFoundError, match="graph.dgl"):
        dist.convert_dgl_partitions(dconf, str(tmp_path / "o5"))
    assert not (tmp_path / "o3").exists() and not (tmp_path / "o5").exists()


@needs_dgl
@pytest.mark.parametrize("hetero", [False, True])
def test_dgl_load_partition_book_reads_gkv_config(tmp_path, hetero):
    import dgl
    rng = np.random.default_rng(9)
    if hetero:
        edges = {("user", "buys", "item"): (rng.integers(0, 30, 90), rng.integers(0, 20, 90)),
                 ("item", "bought_by", "user"): (rng.integers(0, 20, 80),
                                                 rng.integers(0, 30, 80))}
        nn = {"user": 30, "item": 20}
    else:
        edges, nn = (rng.integers(0, 50, 300), rng.integers(0, 50, 300)), 50
    gkv.partition(str(tmp_path / "p"), edges, nn, 3, method="random", name="gg")
    config = str(tmp_path / "p" / "gg.json")
    part = gkv.Partition(config, 1)
    book = part.pbook()
    gpb, name, ntypes, etypes = dgl.distributed.load_partition_book(config, 1)
    assert name == "gg" and gpb.num_partitions() == 3 and gpb.partid == 1
    assert sorted(ntypes, key=ntypes.get) == book["ntypes"]
    assert [":".join(k) for k in sorted(etypes, key=etypes.get)] == book["etypes"]
    for t, nt in enumerate(book["ntypes"]):
        ids = torch.arange(book["num_nodes"][t])
        want = np.searchsorted([hi for lo, hi in book["node_ranges"][t]], ids.numpy(),
                               side="right")
        np.testing.assert_array_equal(gpb.nid2partid(ids, nt).numpy(), want)
        for p in range(3):
            lo, hi = book["node_ranges"][t][p]
            np.testing.assert_array_equal(gpb.partid2nids(p, nt).numpy(),
                                          np.arange(lo, hi))
    for e, et in enumerate(book["etypes"]):
        cet = tuple(et.split(":"))
        ids = torch.arange(book["num_edges"][e])
        want = np.searchsorted([hi for lo, hi in book["edge_ranges"][e]], ids.numpy(),
                               side="right")
        np.testing.assert_array_equal(gpb.eid2partid(ids, cet).numpy(), want)
    meta = gpb.metadata()
    assert [m["num_nodes"] for m in meta] == [
        sum(book["node_ranges"][t][p][1] - book["node_ranges"][t][p][0]
            for t in range(len(book["ntypes"]))) for p in range(3)]
    part.close()


# ---- the example ------------------------------------------------------------------

def test_graphsage_dgl_example_learns(tmp_path, capsys):
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "examples", "graphsage_dgl.py")
    spec = importlib.util.spec_from_file_location("graphsage_dgl", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = mod.parse(["--nodes", "3000", "--epochs", "4", "--seed", "1",
                      "--dir", str(tmp_path)])
    config = mod.partition(os.path.join(str(tmp_path), "parts"), args)
    acc = mod.in_process(config, args)
    out = capsys.readouterr().out
    assert "batches/s" in out and "epoch 3" in out
    assert ("dgl.nn.SAGEConv" if dist.HAVE_DGL else "CSC blocks") in out
    assert acc >= 0.9, out


# ---- a heterogeneous graph ----------------------------------------------------------------

def test_hetero_graph_and_loader(tmp_path):
    rng = np.random.default_rng(12)
    edges = {("user", "buys", "item"): (rng.integers(0, 40, 200), rng.integers(0, 30, 200)),
             ("item", "bought_by", "user"): (rng.integers(0, 30, 150),
                                             rng.integers(0, 40, 150)),
             ("user", "follows", "user"): (rng.integers(0, 40, 100),
                                           rng.integers(0, 40, 100))}
    uf = rng.standard_normal((40, 3)).astype(np.float32)
    itf = rng.standard_normal((30, 2)).astype(np.float32)
    gkv.partition(str(tmp_path / "h"), edges, {"user": 40, "item": 30}, 1,
                  method="random", name="shop",
                  node_feats={("user", "feat"): uf, ("item", "feat"): itf})
    config = str(tmp_path / "h" / "shop.json")
    um = np.argsort(np.load(tmp_path / "h" / "mapping" / "node-user.npy"))
    im = np.argsort(np.load(tmp_path / "h" / "mapping" / "node-item.npy"))
    shutil.copytree(tmp_path / "h", tmp_path / "ref")   # one handle a store
    p = gkv.Partition(str(tmp_path / "ref" / "shop.json"))
    servers, ipc = serve_parts(tmp_path, config, 1)
    try:
        dist.initialize(ipc, group="pytest-hetero", timeout_ms=20000)
        g = dist.DistGraph("shop", part_config=config)
        assert sorted(g.ntypes) == ["item", "user"] and not g.is_homogeneous()
        assert g.num_nodes("user") == 40 and g.num_nodes() == 70
        assert g.num_edges("buys") == 200 and g.num_edges(("user", "follows", "user")) == 100
        assert ("item", "bought_by", "user") in g.canonical_etypes
        assert g.nodes["item"].data.keys() == ["feat"]
        np.testing.assert_array_equal(g.nodes["item"].data["feat"][[0, 29]].numpy(),
                                      itf[im[[0, 29]]])
        with pytest.raises(gkv.InvalidArgumentError, match="2 node types"):
            g.ndata
        with pytest.raises(gkv.InvalidArgumentError, match="node type 'shop'"):
            g.nodes["shop"]
        fan = [{"buys": 2, "bought_by": 3, "follows": 2}, {"buys": 2, "bought_by": 2,
                                                          "follows": 1}]
        ut = g.ntypes.index("user")
        with dist.DistNodeDataLoader(g, {"user": torch.arange(0, 40, 3)},
                                     dist.NeighborSampler(fan), batch_size=5,
                                     feats=["feat"], label="feat", seed=3) as ld:
            for i, (inp, seeds, blocks) in enumerate(ld):
                canon = [{et: f[et.split(":")[1]] for et in p.pbook()["etypes"]}
                         for f in fan]
                ref = p.sample_blocks({ut: seeds["user"].numpy()}, canon,
                                      seed=gkv.Loader.batch_seed(3, 0, i))
                for t, nt in enumerate(p.pbook()["ntypes"]):
                    np.testing.assert_array_equal(inp[nt].numpy(),
                                                  np.asarray(ref[0].nodes[t]))
                for blk, r in zip(blocks, ref):
                    for e, et in enumerate(p.pbook()["etypes"]):
                        cet = tuple(et.split(":"))
                        s, d, eid = (np.asarray(a) for a in r.edges[e])
                        if dist.HAVE_DGL:
                            bs, bd = blk.edges(etype=cet, order="eid")
                            np.testing.assert_array_equal(bs.numpy(), s)
                            np.testing.assert_array_equal(bd.numpy(), d)
                            np.testing.assert_array_equal(
                                blk.edges[cet].data[dist._dgl.EID].numpy(), eid)
                        else:
                            assert blk.indptr[cet][-1] == len(s)
                src0 = (blocks[0].srcnodes["user"].data["feat"] if dist.HAVE_DGL
                        else blocks[0].srcdata["feat"])
                np.testing.assert_array_equal(src0.numpy(), uf[um[inp["user"].numpy()]])
                lab = (blocks[-1].dstnodes["user"].data["feat"] if dist.HAVE_DGL
                       else blocks[-1].dstdata["feat"])
                np.testing.assert_array_equal(lab.numpy(), uf[um[seeds["user"].numpy()]])
        with pytest.raises(gkv.NotSupportedError, match="one node type"):
            dist.DistNodeDataLoader(g, {"user": torch.arange(2), "item": torch.arange(2)},
                                    dist.NeighborSampler([1]), batch_size=2)
    finally:
        dist.exit_client()
        p.close()
        for s in servers:
            s.stop()
