"""gkv.Loader with edge seeds: each batch's positive pairs are its seed
edges (find_edges through the last block's node IDs), negatives keep the
source, excluded edges are in no block, LOCAL and CLIENT give the same
batches, the pairs are views into the batch, SERVER and bad arguments are
refused with errors naming them."""
import numpy as np
import pytest

import gkv

EDGES = np.arange(0, 2000, 23, dtype=np.int64)      # 87 edge seeds


@pytest.fixture(scope="module")
def env(graph):
    config, ipc, feat = graph
    c = gkv.Client(ipc, group="pytest-loader-edges", timeout_ms=20000)
    p = gkv.Partition(config)
    yield c, p
    c.close()
    p.close()


def make(source, **kw):
    args = dict(batch_size=16, fanouts=[3, 2], sample_seed=11, shuffle_seed=4,
                workers=2, prefetch=2, edge_seeds=True, num_neg=3,
                exclude="self")
    args.update(kw)
    return gkv.Loader(source, EDGES, **args)


def check_batch(b, p, num_neg):
    seeds = np.asarray(b.seeds)
    assert b.seed_ntype == -1
    n = len(seeds)
    nodes = np.asarray(b.blocks[-1].nodes[0])
    ndst = b.blocks[-1].num_dst[0]
    ps, pd = np.asarray(b.pos_src), np.asarray(b.pos_dst)
    ns, nd = np.asarray(b.neg_src), np.asarray(b.neg_dst)
    assert len(ps) == len(pd) == n and len(ns) == len(nd) == n * num_neg
    for a in (ps, pd, ns, nd):
        assert a.dtype == np.int64 and ((a >= 0) & (a < ndst)).all()
    src, dst = p.find_edges(0, seeds)
    np.testing.assert_array_equal(nodes[ps], np.asarray(src))
    np.testing.assert_array_equal(nodes[pd], np.asarray(dst))
    np.testing.assert_array_equal(nodes[ns], np.repeat(np.asarray(src), num_neg))
    # exclude='self': no layer holds a seed edge
    for blk in b.blocks:
        assert not np.isin(np.asarray(blk.edges[0][2]), seeds).any()


def test_local_edge_batches(env):
    c, p = env
    with make(p) as ld:
        assert len(ld) == 6
        np.testing.assert_array_equal(np.asarray(ld.seeds()), EDGES)
        seen = []
        for i, b in enumerate(ld):
            assert (b.epoch, b.index) == (0, i)
            check_batch(b, p, 3)
            seen.append(np.asarray(b.seeds).copy())
        order = np.asarray(gkv.Loader.epoch_order(4, 0, 0, len(EDGES)))
        np.testing.assert_array_equal(np.concatenate(seen), EDGES[order])


def test_client_gives_the_local_batches(env):
    c, p = env
    with make(p, seed_etype="_E", exclude=["self"]) as a, \
            make(c, where="client", seed_etype=0,
                 exclude=gkv.EXCLUDE_SELF) as b:
        n = 0
        for x, y in zip(a, b):
            n += 1
            assert (x.index, x.sample_seed) == (y.index, y.sample_seed)
            for k in ("seeds", "pos_src", "pos_dst", "neg_src", "neg_dst"):
                np.testing.assert_array_equal(np.asarray(getattr(x, k)),
                                              np.asarray(getattr(y, k)))
            for bx, by in zip(x.blocks, y.blocks):
                np.testing.assert_array_equal(np.asarray(bx.nodes[0]),
                                              np.asarray(by.nodes[0]))
                for k in range(3):
                    np.testing.assert_array_equal(np.asarray(bx.edges[0][k]),
                                                  np.asarray(by.edges[0][k]))
            check_batch(y, p, 3)
        assert n == 6


def test_no_negatives_no_exclusion(env):
    c, p = env
    with make(p, num_neg=0, exclude=None, shuffle=False) as ld:
        b = next(iter(ld))
        assert len(b.neg_src) == 0 and len(b.neg_dst) == 0
        np.testing.assert_array_equal(np.asarray(b.seeds), EDGES[:16])
        src, dst = p.find_edges(0, EDGES[:16])
        nodes = np.asarray(b.blocks[-1].nodes[0])
        np.testing.assert_array_equal(nodes[np.asarray(b.pos_src)], np.asarray(src))
        np.testing.assert_array_equal(nodes[np.asarray(b.pos_dst)], np.asarray(dst))


def test_pairs_are_views_of_the_batch(env):
    c, p = env
    with make(p, shuffle=False) as ld:
        b = next(iter(ld))
        owner = b.seeds.owner
        for k in ("pos_src", "pos_dst", "neg_src", "neg_dst"):
            a = getattr(b, k)
            assert a.owner is owner
            assert np.asarray(a).__array_interface__["data"][0] == a.ptr
        ps = np.asarray(b.pos_src)
        want = ps.copy()
    del b, owner
    np.testing.assert_array_equal(ps, want)     # the view keeps the batch


def test_node_batches_have_no_pairs(env):
    c, p = env
    with gkv.Loader(p, np.arange(10, dtype=np.int64), batch_size=4,
                    fanouts=[2]) as ld:
        b = next(iter(ld))
        assert (b.pos_src, b.pos_dst, b.neg_src, b.neg_dst) == (None,) * 4


def test_bad_edge_loaders(env):
    c, p = env
    with pytest.raises(gkv.NotSupportedError, match="servers"):
        make(c, where="server")
    with pytest.raises(gkv.NotSupportedError, match="servers"):
        make(c)                                  # server is a Client's default
    with pytest.raises(gkv.InvalidArgumentError, match="num_neg"):
        make(p, num_neg=-1)
    with pytest.raises(gkv.InvalidArgumentError, match="exclude 'both'"):
        make(p, exclude="both")
    with pytest.raises(gkv.InvalidArgumentError, match="exclude bits"):
        make(p, exclude=8)
    with pytest.raises(gkv.InvalidArgumentError, match="reverse_etype"):
        make(p, exclude="reverse")               # no reverse_etype
    with pytest.raises(gkv.InvalidArgumentError, match="reverse_etype"):
        make(p, exclude="reverse", reverse_etype=0)   # the seed type itself
    with pytest.raises(gkv.InvalidArgumentError, match="seed_etype 'nope'"):
        make(p, seed_etype="nope")
    with pytest.raises(gkv.InvalidArgumentError, match="seed_etype 3"):
        make(p, seed_etype=3)
    with pytest.raises(gkv.InvalidArgumentError, match="edge seeds"):
        gkv.Loader(p, EDGES, batch_size=4, fanouts=[2], num_neg=2)
    with pytest.raises(gkv.InvalidArgumentError, match="label"):
        make(p, label="node/_N/feat")
    with pytest.raises(gkv.RangeError):
        gkv.Loader(p, np.array([0, 1 << 20], np.int64), batch_size=2,
                   fanouts=[2], edge_seeds=True)
    with pytest.raises(gkv.InvalidArgumentError, match="edge IDs must be int64"):
        gkv.Loader(p, np.array([0, 1], np.uint64), batch_size=2, fanouts=[2],
                   edge_seeds=True)


@pytest.fixture(scope="module")
def rgraph(tmp_path_factory):
    """A one-partition graph with edge type u:f:u and its reverse u:rf:u
    (no parallel edges, so a reverse edge is known by its end nodes)."""
    d = tmp_path_factory.mktemp("rgraph")
    rng = np.random.default_rng(3)
    pairs = np.unique(rng.integers(0, 64, (600, 2)), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    src, dst = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
    gkv.partition(str(d), {("u", "f", "u"): (src, dst), ("u", "rf", "u"): (dst, src)},
                  {"u": 64}, 1, name="r", csr=True,
                  reverse_etypes={"u:f:u": "u:rf:u"})
    p = gkv.Partition(str(d / "r.json"))
    yield p
    p.close()


def test_exclude_reverse(rgraph):
    p = rgraph
    f, rf = p.pbook()["etypes"].index("u:f:u"), p.pbook()["etypes"].index("u:rf:u")
    seeds = np.arange(0, 200, 3, dtype=np.int64)
    found = {}
    for ex in ("self", ["self", "reverse"]):
        hit = 0
        with gkv.Loader(p, seeds, batch_size=8, fanouts=[8, 8], seed_etype="u:f:u",
                        num_neg=2, exclude=ex, reverse_etype="rf",
                        sample_seed=2) as ld:
            for b in ld:
                s, d = (np.asarray(a) for a in p.find_edges(f, np.asarray(b.seeds)))
                rev = set(zip(d.tolist(), s.tolist()))
                nodes = np.asarray(b.blocks[-1].nodes[0])
                np.testing.assert_array_equal(nodes[np.asarray(b.pos_src)], s)
                np.testing.assert_array_equal(nodes[np.asarray(b.pos_dst)], d)
                for blk in b.blocks:
                    assert not np.isin(np.asarray(blk.edges[f][2]), b.seeds).any()
                    rs, rd = p.find_edges(rf, np.asarray(blk.edges[rf][2]))
                    hit += len(rev & set(zip(np.asarray(rs).tolist(),
                                             np.asarray(rd).tolist())))
        found[str(ex)] = hit
    assert found["self"] > 0                       # the reverses are sampled ...
    assert found[str(["self", "reverse"])] == 0    # ... unless excluded
