"""gkv.dgl's DistEdgeDataLoader (link prediction): each yield equals the
batch gkv.Loader makes with edge seeds (same seeds, pairs, blocks and
features, byte for byte), with DGL pair graphs where dgl is installed and
PairGraph without it; the positive pairs are the seed edges' end nodes,
the negatives keep the seed's source, excluded edges ('self',
'reverse_types') are in no block; dgl's own sampler objects give the same
yields, and so does DGL's keyword form (a plain NeighborSampler, the
options given to the loader); what gkv cannot do (exclude='reverse_id',
other negative samplers, prob, where='server', a device other than the
CPU, 'reverse_types' on a graph partitioned without that reverse pair) is
refused naming it, when the loader is made; exit_client() closes the
loaders made over its client."""
import re
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
    n = 0
    for (i1, p1, n1, b1), (i2, p2, n2, b2) in zip(a, b):
        n += 1
        eq(i1, i2)
        for x, y in ((p1, p2), (n1, n2)):
            eq(torch.stack(x.edges()), torch.stack(y.edges()))
            eq(x.ndata[dgl.NID], y.ndata[dgl.NID])
        for x, y in zip(b1, b2):
            eq(x.edata[dgl.EID], y.edata[dgl.EID])
    assert n == len(a) == len(b) > 0


def same_yields(a, b, has_dgl):
    """Every yield of loaders a and b alike (pairs, input nodes, block
    edges); returns how many."""
    n = 0
    for ya, yb in zip(a, b):
        n += 1
        assert len(ya) == len(yb)
        eq(ya[0], yb[0])
        for x, y in zip(ya[1:-1], yb[1:-1]):
            for u, v in zip(pair_parts(x, has_dgl), pair_parts(y, has_dgl)):
                if isinstance(u, dict):
                    for t in u:
                        eq(u[t], v[t])
                elif u is None:
                    assert v is None
                else:
                    eq(u, v)
        for x, y in zip(ya[-1], yb[-1]):
            eq(block_eids(x, has_dgl), block_eids(y, has_dgl))
    assert n == len(a) == len(b) > 0
    return n


def test_dgls_keyword_form(g, dgl_or_not):
    """DGL's DistEdgeDataLoader takes the link-prediction options as its
    own keywords, with a plain NeighborSampler: the same yields as
    as_edge_prediction_sampler's form; both at once is refused."""
    g, c = g
    kw = dict(batch_size=16, seed=4, shuffle=True)
    same_yields(dist.DistEdgeDataLoader(g, EDGES, dist.NeighborSampler([3, 2]),
                                        exclude="self", negative_sampler=dist
                                        .negative_sampler.Uniform(3), **kw),
                dist.DistEdgeDataLoader(g, EDGES, sampler(), **kw), dgl_or_not)
    same_yields(dist.DistEdgeDataLoader(g, EDGES, dist.NeighborSampler([3, 2]),
                                        exclude="self", **kw),
                dist.DistEdgeDataLoader(g, EDGES, sampler(k=0), **kw),
                dgl_or_not)
    if dgl_or_not:
        import dgl
        same_yields(dist.DistEdgeDataLoader(
            g, EDGES, dgl.dataloading.NeighborSampler([3, 2]), exclude="self",
            negative_sampler=dgl.dataloading.negative_sampler.Uniform(3), **kw),
            dist.DistEdgeDataLoader(g, EDGES, sampler(), **kw), dgl_or_not)
    with pytest.raises(gkv.InvalidArgumentError, match="exclude, negative_sampler "
                       r"given both to the loader and in as_edge_prediction_sampler"):
        dist.DistEdgeDataLoader(g, EDGES, sampler(), exclude="self",
                                negative_sampler=dist.negative_sampler.Uniform(3),
                                batch_size=4)
    with pytest.raises(gkv.NotSupportedError, match="reverse_id"):
        dist.DistEdgeDataLoader(g, EDGES, dist.NeighborSampler([2]),
                                exclude="reverse_id", reverse_eids=torch.arange(10),
                                batch_size=4)


def test_device_is_cpu_only(g):
    g, c = g
    for dev in (None, "cpu", torch.device("cpu")):
        dist.DistEdgeDataLoader(g, EDGES, sampler(), batch_size=16,
                                device=dev).close()
        dist.DistNodeDataLoader(g, np.arange(40), dist.NeighborSampler([2]),
                                batch_size=16, device=dev).close()
    for dev in ("cuda", torch.device("cuda", 0), "cuda:0"):
        msg = r"device=%s: gkv.dgl's loaders give CPU tensors" % re.escape(repr(dev))
        with pytest.raises(gkv.NotSupportedError, match="DistEdgeDataLoader: " + msg):
            dist.DistEdgeDataLoader(g, EDGES, sampler(), batch_size=16, device=dev)
        with pytest.raises(gkv.NotSupportedError, match="DistNodeDataLoader: " + msg):
            dist.DistNodeDataLoader(g, np.arange(40), dist.NeighborSampler([2]),
                                    batch_size=16, device=dev)


def test_exit_client_closes_the_loaders(graph):
    """DGL scripts end with exit_client() and never close their loaders:
    it closes those made over its client (one of them mid-epoch, one
    closed already), then the client; initialize() again does the same
    with the client it replaces."""
    _, ipc, _ = graph
    for again in (False, True):
        c = dist.initialize(ipc, group="pytest-dgl-exit", timeout_ms=20000)
        g = dist.DistGraph("g")
        node = dist.DistNodeDataLoader(g, np.arange(50), dist.NeighborSampler([2]),
                                       batch_size=16)
        edge = dist.DistEdgeDataLoader(g, EDGES, sampler(), batch_size=16)
        done = dist.DistEdgeDataLoader(g, EDGES, sampler(), batch_size=16)
        done.close()
        it = iter(edge)
        next(it)
        if again:
            c2 = dist.initialize(ipc, group="pytest-dgl-exit", timeout_ms=20000)
            assert c.closed and not c2.closed
        else:
            dist.exit_client()
            assert c.closed and dist._client is None
        with pytest.raises(gkv.Error):
            next(iter(node))
        with pytest.raises(gkv.Error):
            next(it)
        if again:               # the new client's loaders work, and close
            g2 = dist.DistGraph("g")
            ld = dist.DistNodeDataLoader(g2, np.arange(50), dist.NeighborSampler([2]),
                                         batch_size=16)
            assert len(next(iter(ld))[1]) == 16
            dist.exit_client()
            assert c2.closed


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
        with pytest.raises(gkv.InvalidArgumentError, match="reverse_etypes gives "
                           "u:f:u as the reverse of u:f:u, but the graph was "
                           "partitioned with u:rf:u as its reverse"):
            dist.DistEdgeDataLoader(g, {"f": seeds}, dist.NeighborSampler([2]),
                                    exclude="reverse_types",
                                    reverse_etypes={"f": "f"}, batch_size=4)
    finally:
        dist.exit_client()


def test_reverse_types_without_reverse_partitions(tmp_path):
    """exclude='reverse_types' on a graph partitioned without reverse edge
    types is refused when the loader is made, saying to partition with
    them (not at the first batch, nor asking for reverse_eids)."""
    rng = np.random.default_rng(3)
    s, t = rng.integers(0, 30, 200), rng.integers(0, 30, 200)
    gkv.partition(str(tmp_path / "p"), {("u", "f", "u"): (s, t),
                                        ("u", "rf", "u"): (t, s)},
                  {"u": 30}, 1, name="r", csr=True)
    srv, ipc, _ = start_server(tmp_path, part_config=str(tmp_path / "p" / "r.json"),
                               part_id=0, machine=0)
    try:
        dist.initialize(ipc, group="pytest-dgl-norev", timeout_ms=20000)
        g = dist.DistGraph("r")
        with pytest.raises(gkv.InvalidArgumentError, match=re.escape(
                "exclude='reverse_types': the graph was partitioned without "
                "reverse edge types, so gkv does not know the reverse of each "
                "u:f:u edge: partition it with reverse_etypes={'u:f:u': "
                "'u:rf:u'}")):
            dist.DistEdgeDataLoader(g, {"f": np.arange(20)}, dist.NeighborSampler(
                [2]), exclude="reverse_types", reverse_etypes={"f": "rf"},
                negative_sampler=dist.negative_sampler.Uniform(1), batch_size=8)
        # 'self' needs no reverse types
        ld = dist.DistEdgeDataLoader(g, {"f": np.arange(20)}, dist.NeighborSampler(
            [2]), exclude="self", batch_size=8)
        pos = next(iter(ld))[1]
        assert len(pos.edges(etype="f")[0] if dist.HAVE_DGL else pos.src) == 8
    finally:
        dist.exit_client()
        srv.stop()


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
