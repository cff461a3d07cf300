"""Sampling through the servers (gkv-server, the C program) equals the C
library's in-process sampler on the same graph (gkv.Partition of the
one-partition config), array by array; features and the partition book
match what gkv-partition wrote."""
import json
import os

import numpy as np
import pytest

import gkv


@pytest.fixture(scope="module")
def both(graph):
    config, ipc, feat = graph
    c = gkv.Client(ipc, group="pytest-graph", timeout_ms=20000)
    p = gkv.Partition(config)
    yield c, p, config, feat
    c.close()
    p.close()


def same_blocks(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.num_src == y.num_src and x.num_dst == y.num_dst
        for n, m in zip(x.nodes, y.nodes):
            np.testing.assert_array_equal(np.asarray(n), np.asarray(m))
        for e, f in zip(x.edges, y.edges):
            for k in range(3):
                np.testing.assert_array_equal(np.asarray(e[k]), np.asarray(f[k]))


def test_pbook(both):
    c, p, config, feat = both
    b = c.pbook()
    j = json.load(open(config))
    assert b == p.pbook()
    assert b["num_parts"] == 1 and b["graph_name"] == "g"
    assert b["ntypes"] == ["_N"] and b["etypes"] == ["_N:_E:_N"]
    assert b["num_nodes"] == [j["num_nodes"]] and b["num_edges"] == [j["num_edges"]]
    assert b["node_ranges"] == [[(0, 256)]]
    np.testing.assert_array_equal(np.asarray(c.node_owner(0, np.arange(256))),
                                  np.zeros(256, np.int32))
    with pytest.raises(gkv.InvalidArgumentError):
        c.node_owner(3, [0])


def test_features_match_the_input(both):
    c, p, config, feat = both
    orig = np.load(os.path.join(os.path.dirname(config), "mapping", "node-_N.npy"))
    got = np.asarray(c.pull("node/_N/feat", np.arange(256)))
    np.testing.assert_array_equal(got, feat[orig])


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_sample_neighbors_equals_in_process(both, seed):
    c, p, config, feat = both
    seeds = np.array([3, 200, 17, 0, 255], dtype=np.int64)
    for kw in ({}, {"replace": True}, {"dir": "out"}):
        a = c.sample_neighbors(seeds, 4, seed=seed, **kw)
        b = p.sample_neighbors(seeds, [4], seed=seed, **kw)
        assert len(a) == 1
        for k in range(3):
            np.testing.assert_array_equal(np.asarray(a[0][k]), np.asarray(b[0][k]))
        # seed by seed: every destination is a seed, at most 4 a seed
        dst = np.asarray(a[0][1]) if kw.get("dir") != "out" else np.asarray(a[0][0])
        assert set(dst.tolist()) <= set(seeds.tolist())
        assert max(np.bincount(dst, minlength=256)) <= 4


def test_sample_blocks_equals_in_process(both):
    c, p, config, feat = both
    seeds = np.arange(0, 256, 9, dtype=np.int64)
    a = c.sample_blocks(seeds, [5, 3], seed=77)
    b = p.sample_blocks({0: seeds}, [[5], {"_N:_E:_N": 3}], seed=77)
    same_blocks(a, b)
    # DGL's layout: the last block's destinations are the seeds
    last = a[-1]
    np.testing.assert_array_equal(np.asarray(last.nodes[0])[:last.num_dst[0]], seeds)
    assert a[0].num_dst[0] == a[1].num_src[0]
    # the input nodes' features, pulled by the IDs of blocks[0]
    x = np.asarray(c.pull("node/_N/feat", a[0].nodes[0]))
    assert x.shape == (a[0].num_src[0], 4)


def test_sampling_bad_input(both):
    c, p, config, feat = both
    for s in (c, p):
        with pytest.raises(gkv.InvalidArgumentError, match="int64"):
            s.sample_blocks(np.array([1, 2], np.uint64), [2])
        with pytest.raises(gkv.InvalidArgumentError, match="fanout"):
            s.sample_blocks(np.array([1, 2], np.int64), [[1, 2]])
        with pytest.raises(gkv.InvalidArgumentError, match="dir"):
            s.sample_neighbors(np.array([1], np.int64), 2, dir="sideways")
        with pytest.raises(gkv.InvalidArgumentError, match="node type"):
            s.sample_blocks({5: np.array([1], np.int64)}, [2])
        with pytest.raises(gkv.RangeError):
            s.sample_blocks(np.array([1, 256], np.int64), [2])
        with pytest.raises(gkv.RangeError, match="negative"):
            s.sample_blocks(np.array([-1], np.int64), [2])


def test_degrees_and_find_edges_equal_in_process(both):
    c, p, config, feat = both
    nodes = np.arange(256, dtype=np.int64)
    for f in ("in_degrees", "out_degrees"):
        a = np.asarray(getattr(c, f)(0, nodes))
        np.testing.assert_array_equal(a, np.asarray(getattr(p, f)(0, nodes)))
        assert a.sum() == c.pbook()["num_edges"][0]
    eids = np.array([0, 2047, 5, 5], dtype=np.int64)
    s1, d1 = c.find_edges(0, eids)
    s2, d2 = p.find_edges(0, eids)
    np.testing.assert_array_equal(np.asarray(s1), np.asarray(s2))
    np.testing.assert_array_equal(np.asarray(d1), np.asarray(d2))
    # every edge found is an in-edge of its destination: sampled with
    # fanout -1 (all neighbours) the seeds' edges are exactly theirs
    e = c.sample_neighbors(np.asarray(d1)[:1], -1)[0]
    assert 0 in np.asarray(e[2]).tolist()
    with pytest.raises(gkv.RangeError):
        c.find_edges(0, [2048])
    with pytest.raises(gkv.RangeError):
        p.in_degrees(0, [256])
