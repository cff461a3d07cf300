"""Sampling by an edge feature (DGL's prob=): Client.sample_neighbors /
sample_blocks with prob equal the C library's in-process answer
(Partition sampling with the feature's values as edge_w arrays), byte for
byte, in both directions, with and without replacement; zero-weight edges
are never picked (a 0/1 mask keeps its 1 edges); gkv.dgl's
DistGraph.sample_neighbors(prob=) and DistNodeDataLoader over
NeighborSampler(prob=) give the client's answer; bad input (an unknown
feature, a row of two elements, a negative weight, a float64 edge_w, a
Partition given prob, a SERVER-mode loader with prob, two weight
sources) raises a gkv error naming it. gkv.Loader(where='client', prob=)
batches equal Client.sample_blocks with prob, byte for byte, with 1 and
2 workers and prefetch, and a LOCAL one's on the same partition equal
them; SERVER loaders refuse prob."""
import shutil

import numpy as np
import pytest

import gkv
from conftest import start_server
from test_dgl_edges import dgl_or_not  # noqa: F401 (a fixture)

torch = pytest.importorskip("torch")
import gkv.dgl as dist  # noqa: E402

ET = "_N:_E:_N"
N, E = 200, 2400


@pytest.fixture(scope="module")
def wjob(tmp_path_factory):
    """A one-partition random graph with edge features (w: float32 with a
    third zeros, m: a u8 mask, wi: int64, wide: two per edge, neg: one
    negative), served by a gkv.Server: (client, Partition, values by
    edge ID of each feature)."""
    d = tmp_path_factory.mktemp("wgraph")
    rng = np.random.default_rng(12)
    src, dst = rng.integers(0, N, E), rng.integers(0, N, E)
    w = rng.random(E).astype(np.float32) * 2
    w[rng.random(E) < 0.35] = 0
    neg = np.ones(E, np.float32)
    neg[17] = -1
    feats = {"w": w, "m": (rng.random(E) < 0.5).astype(np.uint8),
             "wi": rng.integers(0, 5, E).astype(np.int64),
             "wide": np.ones((E, 2), np.float32), "neg": neg}
    gkv.partition(str(d / "p"), (src, dst), N, 1, name="wg", csr=True,
                  node_feats={"feat": rng.standard_normal((N, 3)).astype(np.float32),
                              "label": rng.integers(0, 4, N).astype(np.int64)},
                  edge_feats=feats)
    # the server's copy and this process's (one LMDB handle per store)
    shutil.copytree(d / "p", d / "q")
    srv, ipc, _ = start_server(d, part_config=str(d / "q" / "wg.json"),
                               part_id=0, machine=0)
    c = gkv.Client(ipc, group="pytest-prob", timeout_ms=20000)
    p = gkv.Partition(str(d / "p" / "wg.json"))
    eids = np.arange(E, dtype=np.int64)
    vals = {k: np.asarray(c.pull("edge/%s/%s" % (ET, k), eids)).reshape(E, -1)[:, 0]
            .astype(np.float32) for k in ("w", "m", "wi")}
    yield c, p, ipc, vals
    c.close()
    p.close()
    srv.stop()


SEEDS = np.arange(0, N, 3, dtype=np.int64)


def same_edges(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for k in range(3):
            np.testing.assert_array_equal(np.asarray(x[k]), np.asarray(y[k]))


def same_blocks(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.num_src, x.num_dst) == (y.num_src, y.num_dst)
        np.testing.assert_array_equal(np.asarray(x.nodes[0]), np.asarray(y.nodes[0]))
        same_edges(x.edges, y.edges)


@pytest.mark.parametrize("feat", ["w", "m", "wi"])
@pytest.mark.parametrize("dir", ["in", "out"])
@pytest.mark.parametrize("replace", [False, True])
def test_prob_equals_the_in_process_reference(wjob, feat, dir, replace):
    c, p, _, vals = wjob
    for seed in (1, 99):
        got = c.sample_neighbors(SEEDS, 4, seed=seed, dir=dir, replace=replace,
                                 prob=feat)
        want = p.sample_neighbors(SEEDS, 4, seed=seed, dir=dir, replace=replace,
                                  edge_w=vals[feat])
        same_edges(got, want)
        e = np.asarray(got[0][2])
        assert len(e) > 0 and (vals[feat][e] > 0).all()   # no zero weight
    got = c.sample_blocks(SEEDS, [4, 3], seed=5, dir=dir, replace=replace,
                          prob=feat)
    want = p.sample_blocks(SEEDS, [4, 3], seed=5, dir=dir, replace=replace,
                           edge_w=vals[feat])
    same_blocks(got, want)
    for b in got:
        assert (vals[feat][np.asarray(b.edges[0][2])] > 0).all()


def test_prob_is_weighted_not_uniform(wjob):
    """The weighted sampler differs from the uniform one: over many seeds
    the uniform sampler picks zero-weight edges, prob never does."""
    c, _, _, vals = wjob
    uni = np.asarray(c.sample_neighbors(SEEDS, 4, seed=3)[0][2])
    assert (vals["w"][uni] == 0).any()
    wtd = np.asarray(c.sample_neighbors(SEEDS, 4, seed=3, prob="w")[0][2])
    assert not (vals["w"][wtd] == 0).any()


def test_prob_forms(wjob):
    c, _, _, _ = wjob
    want = c.sample_neighbors(SEEDS, 4, seed=8, prob="w")
    for form in (["w"], ("w",), {ET: "w"}, {"_E": "w"}, {("_N", "_E", "_N"): "w"},
                 {0: "w"}):
        same_edges(c.sample_neighbors(SEEDS, 4, seed=8, prob=form), want)
    # the client also takes the values themselves (sent with the seeds)
    _, _, _, vals = wjob
    same_edges(c.sample_neighbors(SEEDS, 4, seed=8, edge_w=vals["w"]), want)
    same_edges(c.sample_neighbors(SEEDS, 4, seed=8, edge_w={ET: vals["w"]}), want)
    same_edges(c.sample_neighbors(SEEDS, 4, seed=8,
                                  edge_w=vals["w"].reshape(E, 1)), want)
    uni = c.sample_neighbors(SEEDS, 4, seed=8)
    same_edges(c.sample_neighbors(SEEDS, 4, seed=8, prob={ET: None}), uni)
    same_edges(c.sample_neighbors(SEEDS, 4, seed=8, prob=[None]), uni)


def test_bad_prob(wjob):
    c, p, _, vals = wjob
    with pytest.raises(gkv.NotFoundError, match="edge/_N:_E:_N/nope"):
        c.sample_neighbors(SEEDS, 4, prob="nope")
    with pytest.raises(gkv.InvalidArgumentError, match="wide' .*rows of 2 elements"):
        c.sample_neighbors(SEEDS, 4, prob="wide")
    with pytest.raises(gkv.InvalidArgumentError, match=r"neg': edge \d+ has weight -1"):
        c.sample_neighbors(SEEDS, 4, prob="neg")
    with pytest.raises(gkv.InvalidArgumentError, match="prob: edge type 0: "
                       "expected an edge feature's name"):
        c.sample_neighbors(SEEDS, 4, prob=[3])
    with pytest.raises(gkv.InvalidArgumentError, match="prob: 2 values"):
        c.sample_neighbors(SEEDS, 4, prob=["w", "w"])
    with pytest.raises(gkv.InvalidArgumentError, match="edge type 'zz'"):
        c.sample_neighbors(SEEDS, 4, prob={"zz": "w"})
    with pytest.raises(gkv.InvalidArgumentError, match="edge type 4"):
        c.sample_neighbors(SEEDS, 4, prob={4: "w"})
    with pytest.raises(gkv.InvalidArgumentError, match="a key of type float"):
        c.sample_neighbors(SEEDS, 4, prob={1.5: "w"})
    with pytest.raises(gkv.InvalidArgumentError, match="one source of weights"):
        c.sample_neighbors(SEEDS, 4, prob="w", weighted=True)
    with pytest.raises(gkv.InvalidArgumentError, match="edge_w.*float32"):
        p.sample_neighbors(SEEDS, 4, edge_w=vals["w"].astype(np.float64))
    with pytest.raises(gkv.RangeError):              # shorter than the edges
        p.sample_neighbors(SEEDS, 4, edge_w=vals["w"][:10])
    with pytest.raises(gkv.NotSupportedError, match="edge_w"):
        p.sample_neighbors(SEEDS, 4, prob="w")
    # one weight per edge: (E, 2) or a 0-d array is not weights by edge ID
    for who in (c, p):
        for bad, shape in ((np.stack([vals["w"], np.ones(E, np.float32)], 1),
                            r"\(2400, 2\)"),
                           (np.ones((), np.float32), r"\(\)")):
            with pytest.raises(gkv.InvalidArgumentError, match=r"edge_w: edge "
                               r"type 0: one weight per edge \(shape \(E,\) or "
                               r"\(E, 1\)\), got shape " + shape):
                who.sample_neighbors(SEEDS, 4, edge_w=bad)
    for who in (c, p):
        with pytest.raises(gkv.InvalidArgumentError,
                           match="seeds: unknown node type 'nope'"):
            who.sample_neighbors({"nope": SEEDS}, 4)
        with pytest.raises(gkv.InvalidArgumentError,
                           match="seeds: unknown node type 'nope'"):
            who.sample_blocks({"_N": SEEDS, "nope": SEEDS}, [4])
    # a name with a NUL is not cut short at it
    with pytest.raises(gkv.InvalidArgumentError, match="prob: edge type 0: "
                       "the feature name holds a NUL"):
        c.sample_neighbors(SEEDS, 4, prob="w\0garbage")
    with pytest.raises(gkv.InvalidArgumentError, match="prob: edge type "
                       "'_E...' holds a NUL"):
        c.sample_neighbors(SEEDS, 4, prob={"_E\0x": "w"})
    # the client still works after each refusal
    same_edges(c.sample_neighbors(SEEDS, 4, seed=8, prob="w"),
               p.sample_neighbors(SEEDS, 4, seed=8, edge_w=vals["w"]))


def test_feature_of_wrong_row_count(wjob):
    """A tensor of the edge type with fewer rows than its edges."""
    c, _, _, _ = wjob
    c.create("edge/%s/short" % ET, dtype="float32", hi=10, machine=0)
    try:
        with pytest.raises(gkv.Error, match=r"'edge/_N:_E:_N/short'.* holds edges \[0, 10\)"):
            c.sample_neighbors(SEEDS, 4, prob="short")
    finally:
        c.delete("edge/%s/short" % ET)


# ---- gkv.Loader(prob=) --------------------------------------------------------------

@pytest.mark.parametrize("workers,prefetch", [(1, 1), (2, 3)])
def test_loader_prob_equals_sample_blocks(wjob, workers, prefetch):
    """gkv.Loader(where='client', prob=): every batch is Client.sample_blocks
    of its seeds with the same prob and the batch's seed, byte for byte,
    over two epochs, for 1 and 2 workers with prefetch; no zero-weight edge
    is sampled; the features are the pulled rows."""
    c, _, _, vals = wjob
    seeds = np.arange(1, N, 2, dtype=np.int64)
    with gkv.Loader(c, seeds, batch_size=24, fanouts=[4, 3], where="client",
                    feats=["node/_N/feat"], efeats=["edge/%s/w" % ET],
                    shuffle_seed=4, sample_seed=5, prob="w", workers=workers,
                    prefetch=prefetch) as ld:
        for epoch in range(2):
            ld.set_epoch(epoch)
            n = 0
            for i, b in enumerate(ld):
                n += 1
                want = c.sample_blocks(np.asarray(b.seeds), [4, 3], prob="w",
                                       seed=gkv.Loader.batch_seed(5, epoch, i))
                same_blocks(b.blocks, want)
                for blk in b.blocks:
                    assert (vals["w"][np.asarray(blk.edges[0][2])] > 0).all()
                np.testing.assert_array_equal(
                    np.asarray(b.feats[0]),
                    np.asarray(c.pull("node/_N/feat", np.asarray(want[0].nodes[0]))))
            assert n == len(ld) == 5


@pytest.mark.parametrize("feat", ["w", "m"])
def test_local_loader_prob_equals_client(wjob, feat):
    """A LOCAL gkv.Loader(prob=) on the Partition gives the CLIENT loader's
    batches over the server holding the same partition, byte for byte, and
    Partition.sample_blocks' with the feature's values as edge_w."""
    c, p, _, vals = wjob
    seeds = np.arange(0, N, 3, dtype=np.int64)
    args = dict(batch_size=20, fanouts=[3, 3], shuffle_seed=2, sample_seed=9,
                prob=feat, workers=2, prefetch=2)
    with gkv.Loader(p, seeds, **args) as lo, \
            gkv.Loader(c, seeds, where="client", **args) as cl:
        n = 0
        for i, (a, b) in enumerate(zip(lo, cl)):
            n += 1
            np.testing.assert_array_equal(np.asarray(a.seeds), np.asarray(b.seeds))
            same_blocks(a.blocks, b.blocks)
            same_blocks(a.blocks, p.sample_blocks(
                np.asarray(a.seeds), [3, 3], edge_w=vals[feat],
                seed=gkv.Loader.batch_seed(9, 0, i)))
        assert n == len(lo) == 4


def test_loader_prob_refusals(wjob):
    """prob= is refused by SERVER, never sampled uniformly; a bad feature
    is refused when the loader is made."""
    c, p, _, _ = wjob
    seeds = np.arange(10, dtype=np.int64)
    with pytest.raises(gkv.NotSupportedError, match="GKV_LOADER_SERVER"):
        gkv.Loader(c, seeds, batch_size=4, fanouts=[2], where="server", prob="w")
    with pytest.raises(gkv.InvalidArgumentError, match=r"neg': edge \d+ has weight -1"):
        gkv.Loader(p, seeds, batch_size=4, fanouts=[2], prob="neg")
    with pytest.raises(gkv.NotFoundError, match="edge/_N:_E:_N/nope"):
        gkv.Loader(p, seeds, batch_size=4, fanouts=[2], prob="nope")
    with pytest.raises(gkv.NotFoundError, match="edge/_N:_E:_N/nope"):
        gkv.Loader(c, seeds, batch_size=4, fanouts=[2], where="client", prob="nope")
    with pytest.raises(gkv.InvalidArgumentError, match="wide' has rows of 2"):
        gkv.Loader(c, seeds, batch_size=4, fanouts=[2], where="client", prob="wide")
    with pytest.raises(gkv.InvalidArgumentError, match="prob: edge type 0: "
                       "expected an edge feature's name"):
        gkv.Loader(c, seeds, batch_size=4, fanouts=[2], where="client", prob=[3])
    with pytest.raises(gkv.InvalidArgumentError, match="one source of weights"):
        gkv.Loader(c, seeds, batch_size=4, fanouts=[2], where="client",
                   prob="w", weighted=True)
    # a negative weight fails the batch that meets it, naming the edge
    with gkv.Loader(c, np.arange(N, dtype=np.int64), batch_size=N, fanouts=[-1],
                    where="client", prob="neg") as ld:
        with pytest.raises(gkv.InvalidArgumentError, match=r"neg.: edge \d+ has weight -1"):
            next(iter(ld))


# ---- gkv.dgl -----------------------------------------------------------------------

@pytest.fixture
def g(wjob):
    _, _, ipc, _ = wjob
    dist.initialize(ipc, group="pytest-prob-dgl", timeout_ms=20000)
    yield dist.DistGraph("wg")
    dist.exit_client()


def test_distgraph_sample_neighbors_prob(wjob, g):
    c, _, _, vals = wjob
    want = c.sample_neighbors(SEEDS, 5, seed=4, prob="w")
    sg = g.sample_neighbors(torch.from_numpy(SEEDS), 5, prob="w", seed=4)
    if dist.HAVE_DGL:
        s, d = sg.edges()
        e = sg.edata[dist._dgl.EID]
    else:
        (s, d, e), = sg.values()
    for x, y in zip((s, d, e), want[0]):
        np.testing.assert_array_equal(x.numpy(), np.asarray(y))
    assert (vals["w"][e.numpy()] > 0).all()
    with pytest.raises(gkv.NotFoundError, match="nope"):
        g.sample_neighbors(SEEDS, 5, prob="nope")
    with pytest.raises(gkv.InvalidArgumentError, match="prob"):
        g.sample_neighbors(SEEDS, 5, prob=1.5)


def test_node_loader_with_prob(wjob, g):
    """NeighborSampler(prob=) loads through the client: each batch equals
    Client.sample_blocks of the batch's seeds with the seed a gkv.Loader
    gives that batch, the seeds come in gkv.Loader's order, the features
    and labels are the pulled rows."""
    c, _, _, vals = wjob
    seeds = np.arange(0, N, 2, dtype=np.int64)
    sampler = dist.NeighborSampler([3, 2], prob="w")
    ld = dist.DistNodeDataLoader(g, seeds, sampler, batch_size=32, shuffle=True,
                                 feats=["feat"], label="label", seed=6)
    ref = gkv.Loader(c, seeds, batch_size=32, fanouts=[3, 2], where="client",
                     shuffle_seed=6, sample_seed=6)
    assert len(ld) == len(ref) == 4
    for epoch in range(2):
        n = 0
        ld.set_epoch(epoch)
        ref.set_epoch(epoch)
        for i, ((inp, out, blocks), rb) in enumerate(zip(ld, ref)):
            n += 1
            np.testing.assert_array_equal(out.numpy(), np.asarray(rb.seeds))
            want = c.sample_blocks(np.asarray(rb.seeds), [3, 2], prob="w",
                                   seed=gkv.Loader.batch_seed(6, epoch, i))
            np.testing.assert_array_equal(inp.numpy(), np.asarray(want[0].nodes[0]))
            for b, w in zip(blocks, want):
                if dist.HAVE_DGL:
                    s, d = b.edges()
                    e = b.edata[dist._dgl.EID]
                    assert (b.num_src_nodes(), b.num_dst_nodes()) == (
                        w.num_src[0], w.num_dst[0])
                    src = b.srcdata[dist._dgl.NID]
                else:
                    e, src = b.eids[b.canonical_etypes[0]], b.srcnodes["_N"]
                np.testing.assert_array_equal(src.numpy(), np.asarray(w.nodes[0]))
                np.testing.assert_array_equal(np.sort(e.numpy()),
                                              np.sort(np.asarray(w.edges[0][2])))
                assert (vals["w"][e.numpy()] > 0).all()
            np.testing.assert_array_equal(
                blocks[0].srcdata["feat"].numpy(),
                np.asarray(c.pull("node/_N/feat", inp.numpy())))
            np.testing.assert_array_equal(
                blocks[-1].dstdata["label"].numpy(),
                np.asarray(c.pull("node/_N/label", out.numpy())))
        assert n == 4
    ref.close()
    # iterating again starts the next epoch, as gkv.Loader's
    (i1, o1, _), = [next(iter(ld))]
    with gkv.Loader(c, seeds, batch_size=32, fanouts=[3, 2], where="client",
                    shuffle_seed=6, sample_seed=6) as ref:
        ref.set_epoch(2)
        np.testing.assert_array_equal(o1.numpy(), np.asarray(next(ref).seeds))
    # dgl's own sampler object works the same (prob read from it)
    if dist.HAVE_DGL:
        import dgl
        ld2 = dist.DistNodeDataLoader(g, seeds, dgl.dataloading.NeighborSampler(
            [3, 2], prob="w"), batch_size=32, shuffle=True, seed=6)
        (i1, o1, _), = [next(iter(ld2))]
        (i2, o2, _), = [next(iter(dist.DistNodeDataLoader(
            g, seeds, sampler, batch_size=32, shuffle=True, seed=6)))]
        np.testing.assert_array_equal(i1.numpy(), i2.numpy())
        np.testing.assert_array_equal(o1.numpy(), o2.numpy())


def seeds_of(ld):
    return [out.numpy().copy() for _, out, _ in ld]


@pytest.mark.parametrize("prob", [None, "w"])
def test_node_loader_iterates_as_gkv_loader(wjob, g, prob):
    """With prob or without, the loader is gkv.Loader's iterator: a break
    mid-epoch leaves the rest of the epoch to the next loop, after its end
    iterating starts the next epoch; the seeds are copied when it is made
    (the caller may reuse its tensor)."""
    c, _, _, _ = wjob
    keep = np.arange(0, N, 2, dtype=np.int64)
    seeds = torch.from_numpy(keep.copy())
    ld = dist.DistNodeDataLoader(g, seeds, dist.NeighborSampler([3], prob=prob),
                                 batch_size=16, shuffle=True, seed=7,
                                 where="client")
    seeds[:] = torch.arange(100, 200)             # the caller's buffer reused
    ref = gkv.Loader(c, keep, batch_size=16, fanouts=[3], where="client",
                     shuffle_seed=7, sample_seed=7)
    want = [[np.asarray(b.seeds).copy() for b in ref] for _ in range(2)]
    ref.close()
    assert len(ld) == len(want[0]) == 7
    got = []
    for k, (_, out, _) in enumerate(ld):
        got.append(out.numpy().copy())
        if k == 2:
            break
    got += seeds_of(ld)                           # the rest of epoch 0
    assert len(got) == 7
    for a, b in zip(got, want[0]):
        np.testing.assert_array_equal(a, b)
    got = seeds_of(ld)                            # epoch 1, whole
    assert len(got) == 7
    for a, b in zip(got, want[1]):
        np.testing.assert_array_equal(a, b)
    ld.set_epoch(0)                               # set_epoch starts over
    np.testing.assert_array_equal(next(iter(ld))[1].numpy(), want[0][0])


def test_neighbor_sampler_takes_dgls_positional_order(wjob, g):
    s = dist.NeighborSampler([2], "out", "w", None, True)
    assert (s.fanouts, s.edge_dir, s.prob, s.replace) == ([2], "out", "w", True)
    s = dist.NeighborSampler([2], "in", None, "m")
    assert (s.prob, s.replace) == ("m", False)
    if dist.HAVE_DGL:
        import dgl
        t = dgl.dataloading.NeighborSampler([2], "out", "w", None, True)
        assert (t.fanouts, t.edge_dir, t.prob, t.replace) == ([2], "out", "w", True)


def test_bad_node_loader_with_prob(wjob, g):
    seeds = np.arange(10, dtype=np.int64)
    with pytest.raises(gkv.NotSupportedError, match="where='server'"):
        dist.DistNodeDataLoader(g, seeds, dist.NeighborSampler([2], prob="w"),
                                batch_size=4, where="server")
    with pytest.raises(gkv.NotFoundError, match="nope"):
        dist.DistNodeDataLoader(g, seeds, dist.NeighborSampler([2], prob="nope"),
                                batch_size=4)
    with pytest.raises(gkv.InvalidArgumentError, match="wide"):
        dist.DistNodeDataLoader(g, seeds, dist.NeighborSampler([2], prob="wide"),
                                batch_size=4)
    with pytest.raises(gkv.InvalidArgumentError, match="prob or mask"):
        dist.NeighborSampler([2], prob="w", mask="m")
    with pytest.raises(gkv.NotFoundError, match="node/_N/nope"):
        dist.DistNodeDataLoader(g, seeds, dist.NeighborSampler([2], prob="w"),
                                batch_size=4, feats=["nope"])
    # bad seeds are refused when the loader is made, as gkv.Loader does
    for prob in (None, "w"):
        with pytest.raises(gkv.InvalidArgumentError, match=r"loader: seed 2 is "
                           r"given twice \(seeds\[1\] and seeds\[2\]\)"):
            dist.DistNodeDataLoader(g, np.array([1, 2, 2, 3]), dist.NeighborSampler(
                [2], prob=prob), batch_size=4, where="client")
        with pytest.raises(gkv.RangeError, match=r"loader: seeds\[1\] = %d is "
                           r"not a node of type 0 \[0, %d\)" % (N, N)):
            dist.DistNodeDataLoader(g, np.array([1, N, 2]), dist.NeighborSampler(
                [2], prob=prob), batch_size=4, where="client")
        with pytest.raises(gkv.RangeError, match=r"seeds: ID -1 \(index 0\) is "
                           r"negative"):
            dist.DistNodeDataLoader(g, np.array([-1]), dist.NeighborSampler(
                [2], prob=prob), batch_size=4, where="client")


# ---- a heterogeneous graph: the feature on one edge type ----------------------------

@pytest.fixture(scope="module")
def hjob(tmp_path_factory):
    """Users and items: u:buys:i with an edge feature w (zeros on a third),
    i:bought:u without one; one partition served by a gkv.Server, a
    Partition of a copy, w by edge ID."""
    d = tmp_path_factory.mktemp("hgraph")
    rng = np.random.default_rng(5)
    nu, ni, ne = 80, 40, 900
    s, t = rng.integers(0, nu, ne), rng.integers(0, ni, ne)
    w = rng.random(ne).astype(np.float32)
    w[rng.random(ne) < 0.35] = 0
    gkv.partition(str(d / "p"), {("u", "buys", "i"): (s, t), ("i", "bought", "u"): (t, s)},
                  {"u": nu, "i": ni}, 1, name="h", csr=True,
                  edge_feats={("u:buys:i", "w"): w})
    shutil.copytree(d / "p", d / "q")
    srv, ipc, _ = start_server(d, part_config=str(d / "q" / "h.json"),
                               part_id=0, machine=0)
    c = dist.initialize(ipc, group="pytest-prob-h", timeout_ms=20000)
    p = gkv.Partition(str(d / "p" / "h.json"))
    wv = np.asarray(c.pull("edge/u:buys:i/w", np.arange(ne, dtype=np.int64)))
    yield dist.DistGraph("h"), c, p, wv
    dist.exit_client()
    p.close()
    srv.stop()


def test_hetero_prob_weighs_the_types_that_have_it(hjob, dgl_or_not):
    """prob='w' weighs u:buys:i by w and samples i:bought:u uniformly (it has
    no w), as DGL does: the in-process answer with edge_w on buys only."""
    g, c, p, wv = hjob
    bi = p.pbook()["etypes"].index("u:buys:i")
    seeds = {"i": np.arange(40, dtype=np.int64), "u": np.arange(0, 80, 2, dtype=np.int64)}
    want = p.sample_neighbors(seeds, 3, seed=9, edge_w={"u:buys:i": wv})
    same_edges(c.sample_neighbors(seeds, 3, seed=9, prob={"buys": "w"}), want)
    sg = g.sample_neighbors(seeds, 3, prob="w", seed=9)
    for k, et in enumerate(p.pbook()["etypes"]):
        cet = tuple(et.split(":"))
        if dgl_or_not:                  # global node IDs, edges in order
            got = sg.edges(etype=cet, order="eid") + (sg.edges[cet].data[dist._dgl.EID],)
        else:
            got = sg[cet]
        for x, y in zip(got, want[k]):
            np.testing.assert_array_equal(x.numpy(), np.asarray(y))
    assert (wv[np.asarray(want[bi][2])] > 0).all()
    with pytest.raises(gkv.NotFoundError, match="no edge type has the feature"):
        g.sample_neighbors(seeds, 3, prob="nope")
    with pytest.raises(gkv.NotFoundError, match="edge/i:bought:u/w"):
        c.sample_neighbors(seeds, 3, prob="w")          # the client is literal
    # the node loader, seeds of one type, with dict inputs
    ld = dist.DistNodeDataLoader(g, {"i": seeds["i"]}, dist.NeighborSampler(
        [{"buys": 2, "bought": 2}, {"buys": 3, "bought": 0}], prob="w"),
        batch_size=16, seed=3)
    k = -1
    for k, (inp, out, blocks) in enumerate(ld):
        ids = out["i"].numpy()
        ref = c.sample_blocks({"i": ids}, [[2, 2], [3, 0]], prob={"buys": "w"},
                              seed=gkv.Loader.batch_seed(3, 0, k))
        assert set(inp) == {"u", "i"}
        for t, name in enumerate(p.pbook()["ntypes"]):
            np.testing.assert_array_equal(inp[name].numpy(), np.asarray(ref[0].nodes[t]))
        assert (wv[np.asarray(ref[-1].edges[bi][2])] > 0).all()
    assert k + 1 == len(ld) == 3


def test_loader_prob_more_than_64_edge_types(tmp_path):
    """prob= on a graph of 65 edge types is refused by name, not written
    past the 64 entries its arrays hold (it overwrote the first name, and
    crashed from about 70 types)."""
    rng = np.random.default_rng(1)
    k = 65
    edges = {("n", "r%d" % i, "n"): (rng.integers(0, 50, 100),
                                     rng.integers(0, 50, 100))
             for i in range(k)}
    ef = {("n:r%d:n" % i, "w"): rng.random(100).astype(np.float32)
          for i in range(k)}
    gkv.partition(str(tmp_path / "p"), edges, {"n": 50}, 1, name="g",
                  edge_feats=ef)
    p = gkv.Partition(str(tmp_path / "p" / "g.json"))
    assert len(p.pbook()["etypes"]) == k
    with pytest.raises(gkv.NotSupportedError, match="more than 64 edge types"):
        gkv.Loader(p, np.arange(50, dtype=np.int64), batch_size=10,
                   fanouts=[2], prob={"n:r%d:n" % (k - 1): "w"})
    # without prob= the same graph loads
    ld = gkv.Loader(p, np.arange(50, dtype=np.int64), batch_size=10,
                    fanouts=[2])
    assert sum(1 for _ in ld) == 5
    ld.close()
    p.close()
