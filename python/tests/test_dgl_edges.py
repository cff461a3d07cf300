"""gkv.dgl's DistEdgeDataLoader (link prediction): each yield equals the
batch gkv.Loader makes with edge seeds (same seeds, pairs, blocks and
features, byte for byte), with DGL pair graphs where dgl is installed and
PairGraph without it; the positive pairs are the seed edges' end nodes,
the negatives keep the seed's source, excluded edges ('self',
'reverse_types') are in no block; dgl's own sampler objects give the same
yields; what gkv cannot do (exclude='reverse_id', other negative
samplers, prob, where='server') is refused naming it."""
import shutil

import numpy as np
import pytest

import gkv
from conftest import start_server

torch = pytest.importorskip("torch")
import gkv.dgl as dist  # noqa: E402

needs_dgl = pytest.mark.skipif(not dist.HAVE_DGL, reason="dgl is not installed")
EDGES = np.arange(0, 2000, 23, dtype=np.int64)      # 87 edge seeds


@pytest.fixture
def g(graph):
    """gkv.dgl over conftest's one-partition graph (gkv-server), and a
    Partition of it for find_edges."""
    config, ipc, feat = graph
    c = dist.initialize(ipc, group="pytest-dgl-edges", timeout_ms=20000)
    yield dist.DistGraph("g"), c
    dist.exit_client()


@pytest.fixture(params=["dgl", "no dgl"])
def dgl_or_not(request, monkeypatch):
    if request.param == "dgl":
        if not dist.HAVE_DGL:
            pytest.skip("dgl is not installed")
    else:
        monkeypatch.setattr(dist, "_dgl", None)
    return request.param == "dgl"


def sampler(k=3, exclude="self", **kw):
    return dist.as_edge_prediction_sampler(
        dist.NeighborSampler([3, 2]), exclude=exclude,
        negative_sampler=dist.negative_sampler.Uniform(k) if k else None, **kw)


def reference(c, **kw):
    args = dict(batch_size=16, fanouts=[3, 2], where="client", edge_seeds=True,
                num_neg=3, exclude="self", shuffle_seed=4, sample_seed=4,
                feats=["node/_N/feat"])
    args.update(kw)
    return gkv.Loader(c, EDGES, **args)


def pair_parts(pg, has_dgl, etype=None):
    """(src, dst, node IDs by ntype, eids) of a pair graph."""
    if has_dgl:
        import dgl
        s, d = pg.edges(order="eid", etype=etype)
        nodes = {t: pg.nodes[t].data[dgl.NID] for t in pg.ntypes}
        e = (pg.edges[etype].data[dgl.EID] if etype else pg.edata[dgl.EID]) \
            if dgl.EID in (pg.edges[etype].data if etype else pg.edata) else None
        return s, d, nodes, e
    return pg.src, pg.dst, pg.nodes, pg.eids


def block_eids(b, has_dgl, etype=None):
    if has_dgl:
        import dgl
        return (b.edges[etype].data[dgl.EID] if etype else b.edata[dgl.EID]).numpy()
    return b.eids[etype or b.canonical_etypes[0]].numpy()


def eq(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_yields_equal_the_loader_batches(g, dgl_or_not):
    g, c = g
    ld = dist.DistEdgeDataLoader(g, torch.from_numpy(EDGES), sampler(),
                                 batch_size=16, shuffle=True, seed=4,
                                 feats=["feat"])
    assert len(ld) == 6
    with reference(c) as ref:
        n = 0
        for (inp, pos, neg, blocks), rb in zip(ld, ref):
            n += 1
            last = rb.blocks[-1]
            dst = np.asarray(last.nodes[0])[:last.num_dst[0]]
            eq(inp, rb.blocks[0].nodes[0])
            s, d, nodes, e = pair_parts(pos, dgl_or_not)
            eq(s, rb.pos_src)
            eq(d, rb.pos_dst)
            eq(nodes["_N"], dst)
            eq(e, rb.seeds)
            assert pos.num_nodes() == neg.num_nodes() == len(dst)
            s, d, nodes, e = pair_parts(neg, dgl_or_not)
            eq(s, rb.neg_src)
            eq(d, rb.neg_dst)
            eq(nodes["_N"], dst)
            assert e is None
            assert len(blocks) == 2
            for b, rbl in zip(blocks, rb.blocks):
                eq(np.sort(block_eids(b, dgl_or_not)), np.sort(np.asarray(rbl.edges[0][2])))
            eq(blocks[0].srcdata["feat"], rb.feats[0])
            # the invariants, by the graph itself
            src, dstn = (np.asarray(a) for a in c.find_edges(0, np.asarray(rb.seeds)))
            eq(dst[np.asarray(rb.pos_src)], src)
            eq(dst[np.asarray(rb.pos_dst)], dstn)
            eq(dst[np.asarray(rb.neg_src)], np.repeat(src, 3))
            for b in blocks:
                assert not np.isin(block_eids(b, dgl_or_not), rb.seeds).any()
        assert n == 6


def test_no_negative_sampler(g, dgl_or_not):
    g, c = g
    for gs in (sampler(k=0, exclude=None), dist.NeighborSampler([3, 2])):
        ld = dist.DistEdgeDataLoader(g, EDGES, gs, batch_size=16, seed=4,
                                     shuffle=False)
        with reference(c, num_neg=0, exclude=None, shuffle=False, feats=()) as ref:
            y, rb = next(iter(ld)), next(iter(ref))
        assert len(y) == 3
        inp, pos, blocks = y
        s, d, _, e = pair_parts(pos, dgl_or_not)
        eq(s, rb.pos_src)
        eq(d, rb.pos_dst)
        eq(e, EDGES[:16])
        eq(inp, rb.blocks[0].nodes[0])


@needs_dgl
def test_dgl_sampler_objects(g):
    import dgl
    g, c = g
    theirs = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler([3, 2]), exclude="self",
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(3))
    a = dist.DistEdgeDataLoader(g, EDGES, theirs, batch_size=16, seed=4,
                                shuffle=True)
    b = dist.DistEdgeDataLoader(g, EDGES, sampler(), batch_size=16, seed=4,
                                shuffle=True)
    for (i1, p1, n1, b1), (i2, p2, n2, b2) in zip(a, b):
        eq(i1, i2)
        for x, y in ((p1, p2), (n1, n2)):
            eq(torch.stack(x.edges()), torch.stack(y.edges()))
            eq(x.ndata[dgl.NID], y.ndata[dgl.NID])
        for x, y in zip(b1, b2):
            eq(x.edata[dgl.EID], y.edata[dgl.EID])


def test_bad_edge_loaders(g):
    g, c = g
    with pytest.raises(gkv.NotSupportedError, match="reverse_id"):
        dist.DistEdgeDataLoader(g, EDGES, sampler(exclude="reverse_id",
                                                  reverse_eids=torch.arange(10)),
                                batch_size=4)
    with pytest.raises(gkv.NotSupportedError, match="exclude="):
        dist.DistEdgeDataLoader(g, EDGES, sampler(exclude=lambda e: e),
                                batch_size=4)
    with pytest.raises(gkv.InvalidArgumentError, match="reverse_etypes"):
        dist.DistEdgeDataLoader(g, EDGES, sampler(exclude="reverse_types"),
                                batch_size=4)
    with pytest.raises(gkv.NotSupportedError, match="prob"):
        dist.DistEdgeDataLoader(g, EDGES, dist.as_edge_prediction_sampler(
            dist.NeighborSampler([2], prob="w")), batch_size=4)
    with pytest.raises(gkv.NotSupportedError, match="servers"):
        dist.DistEdgeDataLoader(g, EDGES, sampler(), batch_size=4,
                                where="server")
    with pytest.raises(gkv.InvalidArgumentError, match="unknown arguments bogus"):
        dist.DistEdgeDataLoader(g, EDGES, sampler(), batch_size=4, bogus=1)
    with pytest.raises(gkv.InvalidArgumentError, match="NeighborSampler"):
        dist.DistEdgeDataLoader(g, EDGES, dist.as_edge_prediction_sampler(
            object()), batch_size=4)
    with pytest.raises(gkv.RangeError):
        dist.DistEdgeDataLoader(g, np.array([1 << 20]), sampler(), batch_size=4)
    if dist.HAVE_DGL:
        import dgl
        with pytest.raises(gkv.NotSupportedError, match="GlobalUniform"):
            dist.DistEdgeDataLoader(g, EDGES, dist.as_edge_prediction_sampler(
                dist.NeighborSampler([2]), negative_sampler=dgl.dataloading
                .negative_sampler.GlobalUniform(2)), batch_size=4)


# ---- a heterogeneous graph with reverse edge types ----------------------------------

@pytest.fixture(scope="module")
def rjob(tmp_path_factory):
    """u:f:u and its reverse u:rf:u (no parallel edges), one partition served
    by a gkv.Server; a Partition of a copy for find_edges."""
    d = tmp_path_factory.mktemp("rgraph")
    rng = np.random.default_rng(3)
    pairs = np.unique(rng.integers(0, 64, (600, 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    src, dst = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
    gkv.partition(str(d / "p"), {("u", "f", "u"): (src, dst),
                                 ("u", "rf", "u"): (dst, src)},
                  {"u": 64}, 1, name="r", csr=True,
                  node_feats={("u", "x"): rng.standard_normal((64, 2)).astype(np.float32)},
                  reverse_etypes={"u:f:u": "u:rf:u"})
    shutil.copytree(d / "p", d / "q")
    srv, ipc, _ = start_server(d, part_config=str(d / "q" / "r.json"),
                               part_id=0, machine=0)
    p = gkv.Partition(str(d / "p" / "r.json"))
    yield ipc, p
    p.close()
    srv.stop()


def test_reverse_types(rjob, dgl_or_not):
    ipc, p = rjob
    c = dist.initialize(ipc, group="pytest-dgl-rev", timeout_ms=20000)
    try:
        g = dist.DistGraph("r")
        f, rf = ("u", "f", "u"), ("u", "rf", "u")
        fi, rfi = (p.pbook()["etypes"].index(":".join(e)) for e in (f, rf))
        seeds = np.arange(0, 200, 3, dtype=np.int64)
        hit = {}
        for ex in ("self", "reverse_types"):
            ld = dist.DistEdgeDataLoader(
                g, {"f": seeds}, dist.as_edge_prediction_sampler(
                    dist.NeighborSampler([8, 8]), exclude=ex,
                    reverse_etypes={"f": "rf"},
                    negative_sampler=dist.negative_sampler.Uniform(2)),
                batch_size=8, seed=2, shuffle=True, feats=["node/u/x"])
            rex = ["self", "reverse"] if ex == "reverse_types" else "self"
            hit[ex] = 0
            with gkv.Loader(c, seeds, batch_size=8, fanouts=[8, 8], where="client",
                            seed_etype="u:f:u", num_neg=2, exclude=rex,
                            reverse_etype="u:rf:u", sample_seed=2, shuffle_seed=2,
                            feats=["node/u/x"]) as ref, ld:
                for (inp, pos, neg, blocks), rb in zip(ld, ref):
                    eq(inp, rb.blocks[0].nodes[0])     # one node type: a tensor
                    s, d, nodes, e = pair_parts(pos, dgl_or_not, f)
                    eq(s, rb.pos_src)
                    eq(d, rb.pos_dst)
                    eq(e, rb.seeds)
                    s, d, _, _ = pair_parts(neg, dgl_or_not, f)
                    eq(s, rb.neg_src)
                    eq(d, rb.neg_dst)
                    x = (blocks[0].srcnodes["u"].data["x"] if dgl_or_not
                         else blocks[0].srcdata["x"])
                    eq(x, rb.feats[0])
                    # positives are the seed edges; no block holds a seed
                    # edge, and with reverse_types none of their reverses
                    nd = nodes["u"].numpy()
                    ss, sd = (np.asarray(a) for a in p.find_edges(fi, np.asarray(rb.seeds)))
                    eq(nd[s.numpy()], np.repeat(ss, 2))
                    eq(nd[pair_parts(pos, dgl_or_not, f)[0].numpy()], ss)
                    eq(nd[pair_parts(pos, dgl_or_not, f)[1].numpy()], sd)
                    rev = set(zip(sd.tolist(), ss.tolist()))
                    for b in blocks:
                        assert not np.isin(block_eids(b, dgl_or_not, f), rb.seeds).any()
                        rs, rd = p.find_edges(rfi, block_eids(b, dgl_or_not, rf))
                        hit[ex] += len(rev & set(zip(np.asarray(rs).tolist(),
                                                     np.asarray(rd).tolist())))
        assert hit["self"] > 0                 # the reverses are sampled ...
        assert hit["reverse_types"] == 0       # ... unless excluded
        with pytest.raises(gkv.NotSupportedError, match="one edge type"):
            dist.DistEdgeDataLoader(g, {"f": seeds, "rf": seeds}, sampler(),
                                    batch_size=4)
        with pytest.raises(gkv.NotFoundError, match="node/u/nope"):
            dist.DistEdgeDataLoader(g, {"f": seeds}, sampler(), batch_size=4,
                                    feats=["nope"])
    finally:
        dist.exit_client()


@pytest.fixture(scope="module")
def bjob(tmp_path_factory):
    """Users and items, u:buys:i and its reverse i:bought:u, a node feature
    per type; one partition served by a gkv.Server, a Partition of a copy."""
    d = tmp_path_factory.mktemp("bgraph")
    rng = np.random.default_rng(8)
    pairs = np.unique(np.stack([rng.integers(0, 50, 500), rng.integers(0, 30, 500)], 1),
                      axis=0)
    s, t = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
    gkv.partition(str(d / "p"), {("u", "buys", "i"): (s, t), ("i", "bought", "u"): (t, s)},
                  {"u": 50, "i": 30}, 1, name="b", csr=True,
                  node_feats={("u", "x"): rng.standard_normal((50, 2)).astype(np.float32),
                              ("i", "x"): rng.standard_normal((30, 2)).astype(np.float32)},
                  reverse_etypes={"u:buys:i": "i:bought:u"})
    shutil.copytree(d / "p", d / "q")
    srv, ipc, _ = start_server(d, part_config=str(d / "q" / "b.json"),
                               part_id=0, machine=0)
    p = gkv.Partition(str(d / "p" / "b.json"))
    yield ipc, p, len(s)
    p.close()
    srv.stop()


def test_two_node_types(bjob, dgl_or_not):
    """Seed edges from users to items: input nodes per type, the pairs'
    sources index the users and destinations the items of the last
    block's destination nodes, reverse_types leaves the bought edges of
    the seeds out."""
    ipc, p, ne = bjob
    c = dist.initialize(ipc, group="pytest-dgl-bip", timeout_ms=20000)
    try:
        g = dist.DistGraph("b")
        book = p.pbook()
        nt = book["ntypes"]
        bi, ri = book["etypes"].index("u:buys:i"), book["etypes"].index("i:bought:u")
        seeds = np.arange(0, ne, 4, dtype=np.int64)
        et = ("u", "buys", "i")
        with dist.DistEdgeDataLoader(
                g, {et: seeds}, dist.as_edge_prediction_sampler(
                    dist.NeighborSampler([4, 4]), exclude="reverse_types",
                    reverse_etypes={et: ("i", "bought", "u")},
                    negative_sampler=dist.negative_sampler.Uniform(2)),
                batch_size=10, seed=1, shuffle=True, feats=["node/u/x", "node/i/x"]) as ld, \
            gkv.Loader(c, seeds, batch_size=10, fanouts=[4, 4], where="client",
                       seed_etype="u:buys:i", num_neg=2, exclude=["self", "reverse"],
                       reverse_etype="i:bought:u", sample_seed=1, shuffle_seed=1,
                       feats=["node/u/x", "node/i/x"]) as ref:
            n = 0
            for (inp, pos, neg, blocks), rb in zip(ld, ref):
                n += 1
                assert set(inp) == {"u", "i"}
                for k, t in enumerate(nt):
                    eq(inp[t], rb.blocks[0].nodes[k])
                last = rb.blocks[-1]
                dst = {t: np.asarray(last.nodes[k])[:last.num_dst[k]]
                       for k, t in enumerate(nt)}
                s, d, nodes, e = pair_parts(pos, dgl_or_not, et)
                eq(s, rb.pos_src)
                eq(d, rb.pos_dst)
                eq(e, rb.seeds)
                for t in nt:
                    eq(nodes[t], dst[t])
                    assert pos.num_nodes(t) == len(dst[t])
                ns, nd, _, _ = pair_parts(neg, dgl_or_not, et)
                eq(ns, rb.neg_src)
                eq(nd, rb.neg_dst)
                for k, t in enumerate(nt):
                    x = (blocks[0].srcnodes[t].data["x"] if dgl_or_not
                         else blocks[0].srcdata["node/%s/x" % t])
                    eq(x, rb.feats[k])
                ss, sd = (np.asarray(a) for a in p.find_edges(bi, np.asarray(rb.seeds)))
                eq(dst["u"][s.numpy()], ss)
                eq(dst["i"][d.numpy()], sd)
                eq(dst["u"][ns.numpy()], np.repeat(ss, 2))
                pairs = set(zip(sd.tolist(), ss.tolist()))
                for b in blocks:
                    assert not np.isin(block_eids(b, dgl_or_not, et), rb.seeds).any()
                    rs, rd = p.find_edges(ri, block_eids(b, dgl_or_not, ("i", "bought", "u")))
                    assert not pairs & set(zip(np.asarray(rs).tolist(),
                                               np.asarray(rd).tolist()))
            assert n == len(ld) > 1
    finally:
        dist.exit_client()
