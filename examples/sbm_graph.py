"""The planted-community graph the GraphSAGE examples learn, and what they
share: generating it, the train/test split, free loopback ports.

A stochastic block model of C communities: each node has about deg_in
neighbours in its own community and deg_out anywhere; the label is the
community, the feature a noisy one-hot view of it (alone, a node's feature
gives its label about half the time at noise 1.0; its neighbourhood gives
it). Edges go both ways.
"""
import socket

import numpy as np


def make_graph(n, classes, deg_in, deg_out, noise, seed):
    """(src, dst, x, y): int64 edges, float32 features (n, classes), int64
    labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n).astype(np.int64)
    d = deg_in + deg_out
    src = np.repeat(np.arange(n, dtype=np.int64), d)
    dst = rng.integers(0, n, (n, d))            # deg_out: anywhere
    for c in range(classes):                    # deg_in: in the community
        members = np.flatnonzero(y == c)
        dst[members, :deg_in] = members[rng.integers(0, len(members),
                                                     (len(members), deg_in))]
    dst = dst.reshape(-1).astype(np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    x = rng.normal(0.0, noise, (n, classes)).astype(np.float32)
    x[np.arange(n), y] += 1.0
    return src, dst, x, y


def split(n, seed, train_frac=0.6):
    """Train and test node IDs, sorted (in gkv's IDs: any split of them is
    random, as partitioning relabels nodes)."""
    perm = np.random.default_rng(seed + 7).permutation(n).astype(np.int64)
    k = int(n * train_frac)
    return np.sort(perm[:k]), np.sort(perm[k:])


def ip_config_lines(count):
    """count 'HOST PORT' lines of free loopback ports."""
    lines = []
    for _ in range(count):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            lines.append("127.0.0.1 %d\n" % s.getsockname()[1])
    return lines
