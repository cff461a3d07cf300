"""gkv.Loader: each batch equals what the C library's in-process sampler
and the stored rows give for its seeds and generator seed; the three
places to sample give the same batches; every array is a view into the
batch (no copy) that keeps the batch alive."""
import gc
import os

import numpy as np
import pytest

import gkv

FEAT = "node/_N/feat"


@pytest.fixture(scope="module")
def env(graph):
    config, ipc, feat = graph
    orig = np.load(os.path.join(os.path.dirname(config), "mapping", "node-_N.npy"))
    c = gkv.Client(ipc, group="pytest-loader", timeout_ms=20000)
    p = gkv.Partition(config)
    yield c, p, feat[orig]                       # rows by new ID
    c.close()
    p.close()


SEEDS = np.arange(0, 256, 3, dtype=np.int64)     # 86 seeds


def make(source, **kw):
    args = dict(batch_size=16, fanouts=[4, 3], feats=[FEAT], label=FEAT,
                sample_seed=5, shuffle_seed=9, workers=2, prefetch=3)
    args.update(kw)
    return gkv.Loader(source, SEEDS, **args)


def check_batch(b, p, rows):
    ref = p.sample_blocks(np.asarray(b.seeds), [4, 3], seed=b.sample_seed)
    assert len(b.blocks) == 2
    for x, y in zip(b.blocks, ref):
        assert x.num_src == y.num_src and x.num_dst == y.num_dst
        np.testing.assert_array_equal(np.asarray(x.nodes[0]), np.asarray(y.nodes[0]))
        for k in range(3):
            np.testing.assert_array_equal(np.asarray(x.edges[0][k]),
                                          np.asarray(y.edges[0][k]))
    inputs = np.asarray(b.blocks[0].nodes[0])
    np.testing.assert_array_equal(np.asarray(b.feats[0]), rows[inputs])
    np.testing.assert_array_equal(np.asarray(b.label), rows[np.asarray(b.seeds)])
    np.testing.assert_array_equal(
        np.asarray(b.blocks[-1].nodes[0])[:b.blocks[-1].num_dst[0]], np.asarray(b.seeds))


def test_local_batches_equal_the_sampler(env):
    c, p, rows = env
    with make(p) as ld:
        assert len(ld) == 6
        np.testing.assert_array_equal(np.asarray(ld.seeds()), SEEDS)
        seen = []
        for i, b in enumerate(ld):
            assert (b.epoch, b.index) == (0, i)
            assert b.sample_seed == gkv.Loader.batch_seed(5, 0, i)
            check_batch(b, p, rows)
            seen.append(np.asarray(b.seeds).copy())
        assert i == 5
        order = np.asarray(gkv.Loader.epoch_order(9, 0, 0, len(SEEDS)))
        np.testing.assert_array_equal(np.concatenate(seen), SEEDS[order])
        # iterating again: epoch 1, another order of the same seeds
        again = [np.asarray(b.seeds).copy() for b in ld]
        assert sorted(np.concatenate(again).tolist()) == SEEDS.tolist()
        assert not np.array_equal(np.concatenate(again), np.concatenate(seen))


@pytest.mark.parametrize("where", ["client", "server"])
def test_servers_give_the_same_batches(env, where):
    c, p, rows = env
    with make(p) as a, make(c, where=where) as b:
        for x, y in zip(a, b):
            assert (x.index, x.sample_seed) == (y.index, y.sample_seed)
            np.testing.assert_array_equal(np.asarray(x.seeds), np.asarray(y.seeds))
            np.testing.assert_array_equal(np.asarray(x.feats[0]), np.asarray(y.feats[0]))
            np.testing.assert_array_equal(np.asarray(x.label), np.asarray(y.label))
            check_batch(y, p, rows)


def test_arrays_are_views_that_keep_the_batch(env):
    c, p, rows = env
    with make(p, shuffle=False) as ld:
        b = next(iter(ld))
        f = b.feats[0]
        owner = f.owner
        assert owner is not None and b.label.owner is owner
        assert b.seeds.owner is owner and b.blocks[0].nodes[0].owner is owner
        n = np.asarray(f)
        assert n.__array_interface__["data"][0] == f.ptr
        assert np.from_dlpack(f).__array_interface__["data"][0] == f.ptr
        want = rows[np.asarray(b.blocks[0].nodes[0])].copy()
    del b, f, owner
    gc.collect()
    np.testing.assert_array_equal(n, want)      # after the loader and batch


def test_no_shuffle_drop_last(env):
    c, p, rows = env
    with make(p, shuffle=False, drop_last=True, feats=[], label=None) as ld:
        bs = list(ld)
        assert len(bs) == 5 and bs[0].feats == [] and bs[0].label is None
        np.testing.assert_array_equal(np.concatenate([np.asarray(b.seeds) for b in bs]),
                                      SEEDS[:80])


def test_bad_loaders(env):
    c, p, rows = env
    with pytest.raises(gkv.NotFoundError):
        make(p, feats=["node/_N/nope"])
    with pytest.raises(gkv.InvalidArgumentError, match="node/<node type>"):
        make(p, feats=["feat"])
    with pytest.raises(gkv.InvalidArgumentError):
        make(p, batch_size=0)
    with pytest.raises(gkv.InvalidArgumentError):
        make(p, fanouts=[[1, 2]])
    with pytest.raises(gkv.Error):
        gkv.Loader(p, np.array([1, 1], np.int64), batch_size=1, fanouts=[2])
    with pytest.raises(gkv.RangeError):
        gkv.Loader(p, np.array([1, 256], np.int64), batch_size=1, fanouts=[2])
    with pytest.raises(gkv.InvalidArgumentError, match="where"):
        make(p, where="gpu")
    ld = make(p)
    with pytest.raises(gkv.BusyError, match="loader"):
        p.close()
    ld.close()
    with pytest.raises(gkv.InvalidArgumentError, match="closed"):
        next(iter(ld))
