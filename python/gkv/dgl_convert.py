"""Converting a graph that dgl.distributed.partition_graph split into gkv
partitions, keeping DGL's assignment and IDs.

    python -m gkv.dgl convert DGL_CONFIG.json OUTDIR [--orig-nids F]
                              [--orig-eids F] [--name N] [--csr] [--force]

DGL's directory holds its JSON config (node_map / edge_map: each
partition's range of the homogeneous IDs, type by type) and per partition
graph.dgl (the partition's graph with halo nodes: ndata dgl.NID, the global
IDs, and inner_node; edata dgl.EID and inner_edge; dgl.NTYPE / dgl.ETYPE for
a heterogeneous graph), node_feat.dgl and edge_feat.dgl ({"<type>/<name>":
rows of the partition's own nodes or edges, in ID order}). Reading them
needs dgl.

What is written is gkv_partition_write's output (gkv.partition, method
'given'): every node of DGL's partition p goes to gkv's partition p in
DGL's order, so each node keeps its ID (type-wise: DGL's homogeneous ID
minus the start of its type's range in its partition, plus the counts of
that type in earlier partitions, the same rule gkv's config uses) and each
partition its node and edge ranges: the config's node_map and edge_map
equal DGL's. Edges belong to their destination's partition in both; within
a partition gkv numbers them in CSC order, so an edge's ID may differ from
DGL's: mapping/edge-<canonical>.npy maps DGL's edge ID (or, with orig_eids,
the original one) to gkv's. mapping/node-<ntype>.npy maps DGL's node ID to
gkv's (the identity), or the original ID when orig_nids (what
partition_graph(return_mapping=True) returned) is given.
"""
import argparse
import json
import os
import sys

import numpy as np

import gkv
from gkv import InvalidArgumentError, NotFoundError, NotSupportedError


def _np(x):
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _fail(msg, cls=InvalidArgumentError):
    raise cls(msg + " (GKV_%s)" % ("ENOTFOUND" if cls is NotFoundError else
                                   "ENOTSUP" if cls is NotSupportedError else
                                   "EINVAL"))


class _Blocks:
    """Homogeneous ID ranges -> (type index, type-wise ID), for one kind."""

    def __init__(self, maps, types, P, what):
        rows = []
        self.count = [0] * len(types)
        for ti, t in enumerate(types):
            r = maps.get(t)
            if r is None or len(r) != P:
                _fail("DGL config: %s_map[%r] has %s ranges, expected %d" % (
                    what, t, "no" if r is None else len(r), P))
            for p, (s, e) in enumerate(r):
                if e < s:
                    _fail("DGL config: %s_map[%r][%d] = [%d, %d) is reversed"
                          % (what, t, p, s, e))
                rows.append((s, e, ti, self.count[ti], p))
                self.count[ti] += e - s
        rows.sort()
        for a, b in zip(rows, rows[1:]):
            if a[1] > b[0]:
                _fail("DGL config: %s ranges overlap" % what)
        self.start = np.array([r[0] for r in rows], dtype=np.int64)
        self.end = np.array([r[1] for r in rows], dtype=np.int64)
        self.type = np.array([r[2] for r in rows], dtype=np.int64)
        self.base = np.array([r[3] for r in rows], dtype=np.int64)
        self.part = np.array([r[4] for r in rows], dtype=np.int32)
        self.what = what

    def lookup(self, h):
        """(type index, type-wise ID) of homogeneous IDs h."""
        i = np.searchsorted(self.start, h, side="right") - 1
        bad = (i < 0) | (h >= self.end[np.maximum(i, 0)])
        if bad.any():
            _fail("DGL partition: %s ID %d lies in no range of the config"
                  % (self.what, int(h[np.argmax(bad)])))
        return self.type[i], self.base[i] + (h - self.start[i])


def _load_orig(x, types, what):
    """orig_nids / orig_eids: a tensor or array (one type), {type: ...}, or
    a file (.npy, or .pt / .pth saved by torch.save)."""
    if x is None:
        return None
    if isinstance(x, (str, os.PathLike)):
        p = os.fspath(x)
        if not os.path.exists(p):
            _fail("%s: no file %s" % (what, p), NotFoundError)
        if p.endswith(".npy"):
            x = np.load(p)
        else:
            import torch
            x = torch.load(p)
    if not isinstance(x, dict):
        if len(types) != 1:
            _fail("%s: the graph has %d types, give {type: IDs}" % (what, len(types)))
        x = {types[0]: x}
    out = {}
    for k, v in x.items():
        k = ":".join(k) if isinstance(k, tuple) else k
        if k not in types:
            hits = [t for t in types if t.split(":")[1:2] == [k]]
            if len(hits) != 1:
                _fail("%s: unknown type %r" % (what, k))
            k = hits[0]
        out[k] = _np(v).astype(np.int64, copy=False)
    return out


def _feat_key(key, types, what):
    """'<type>/<name>' of a DGL feature file -> (type, name)."""
    t, _, n = key.rpartition("/")
    if not t or not n:
        _fail("DGL %s feature %r: expected '<type>/<name>'" % (what, key))
    if t in types:
        return t, n
    hits = [x for x in types if x.split(":")[1:2] == [t]]   # a relation name
    if len(hits) != 1:
        _fail("DGL %s feature %r: unknown type %r" % (what, key, t))
    return hits[0], n


def convert_dgl_partitions(part_config, outdir, *, orig_nids=None,
                           orig_eids=None, name=None, csr=False, force=False,
                           threads=0):
    """Writes the graph of DGL partition config 'part_config' as gkv
    partitions in outdir (see the module's text), with every node feature
    and edge feature of DGL's files. Returns gkv.partition's report."""
    try:
        import dgl
        from dgl.data.utils import load_tensors
    except ImportError as e:
        raise NotSupportedError("reading DGL's partitions (graph.dgl, "
                                "node_feat.dgl) needs dgl (GKV_ENOTSUP)") from e
    part_config = os.fspath(part_config)
    if not os.path.exists(part_config):
        _fail("DGL config %s: no such file" % part_config, NotFoundError)
    with open(part_config) as f:
        try:
            conf = json.load(f)
        except ValueError as e:
            _fail("DGL config %s: not JSON (%s)" % (part_config, e))
    for k in ("num_parts", "node_map", "edge_map", "ntypes", "etypes"):
        if k not in conf:
            _fail("DGL config %s: no %r (not written by partition_graph?)"
                  % (part_config, k))
    P = int(conf["num_parts"])
    ntypes = [t for t, _ in sorted(conf["ntypes"].items(), key=lambda kv: kv[1])]
    etypes = [t for t, _ in sorted(conf["etypes"].items(), key=lambda kv: kv[1])]
    for et in etypes:
        if len(et.split(":")) != 3:
            _fail("DGL config: edge type %r is not canonical ('src:rel:dst'); "
                  "re-partition with DGL >= 1.0" % et)
    base = os.path.dirname(os.path.abspath(part_config))
    nb = _Blocks(conf["node_map"], ntypes, P, "node")
    eb = _Blocks(conf["edge_map"], etypes, P, "edge")
    src = [np.full(c, -1, dtype=np.int64) for c in eb.count]
    dst = [np.full(c, -1, dtype=np.int64) for c in eb.count]
    nfeat, efeat = {}, {}
    for p in range(P):
        pc = conf.get("part-%d" % p)
        if not isinstance(pc, dict) or "part_graph" not in pc:
            _fail("DGL config: no part-%d entry with part_graph" % p)
        path = os.path.join(base, pc["part_graph"])
        if not os.path.exists(path):
            _fail("DGL partition %d: no file %s" % (p, path), NotFoundError)
        g = dgl.load_graphs(path)[0][0]
        for k in ("inner_edge", dgl.EID):
            if k not in g.edata:
                _fail("DGL partition %d: %s has no edge data %r" % (p, path, k))
        inner = _np(g.edata["inner_edge"]).astype(bool)
        u, v = (_np(x) for x in g.edges())
        nid = _np(g.ndata[dgl.NID])
        hu, hv, he = nid[u[inner]], nid[v[inner]], _np(g.edata[dgl.EID])[inner]
        et, eid = eb.lookup(he)
        st, sid = nb.lookup(hu)
        dt, did = nb.lookup(hv)
        for e, name_e in enumerate(etypes):
            sel = et == e
            s_t, _, d_t = name_e.split(":")
            if (st[sel] != ntypes.index(s_t)).any() or \
                    (dt[sel] != ntypes.index(d_t)).any():
                _fail("DGL partition %d: an edge of %s joins nodes of other "
                      "types" % (p, name_e))
            src[e][eid[sel]] = sid[sel]
            dst[e][eid[sel]] = did[sel]
        for kind, types, acc in (("node_feats", ntypes, nfeat),
                                 ("edge_feats", etypes, efeat)):
            fp = pc.get(kind)
            if not fp:
                continue
            fp = os.path.join(base, fp)
            if not os.path.exists(fp):
                _fail("DGL partition %d: no file %s" % (p, fp), NotFoundError)
            for key, rows in load_tensors(fp).items():
                t, n = _feat_key(key, types, kind[:4])
                acc.setdefault((t, n), [None] * P)[p] = _np(rows)
    for e, et in enumerate(etypes):
        if (src[e] < 0).any():
            _fail("DGL partitions: edge %d of %s is in no partition's inner "
                  "edges" % (int(np.argmax(src[e] < 0)), et))

    def whole(acc, blocks, types, what):
        out = {}
        for (t, n), parts in acc.items():
            ti = types.index(t)
            for p, r in enumerate(parts):
                want = int(((blocks.type == ti) & (blocks.part == p)).astype(int)
                           @ (blocks.end - blocks.start))
                if (r is None and want) or (r is not None and len(r) != want):
                    _fail("DGL partition %d: %s feature %s/%s has %s rows, "
                          "expected %d" % (p, what, t, n,
                                           "no" if r is None else len(r), want))
            rows = np.concatenate([r for r in parts if r is not None])
            if rows.dtype == np.bool_:
                rows = rows.astype(np.uint8)
            out[(t, n)] = np.ascontiguousarray(rows)
        return out

    node_feats = whole(nfeat, nb, ntypes, "node")
    edge_feats = whole(efeat, eb, etypes, "edge")
    owners = {t: np.repeat(nb.part[nb.type == ti],
                           (nb.end - nb.start)[nb.type == ti]).astype(np.int32)
              for ti, t in enumerate(ntypes)}
    # the ranges were sorted by start; DGL lays them out partition by
    # partition, so within a type they are in partition order (checked)
    for t, o in owners.items():
        if len(o) and (np.diff(o) < 0).any():
            _fail("DGL config: the ranges of node type %s are not in "
                  "partition order" % t)
    homo = ntypes == ["_N"] and etypes == ["_N:_E:_N"]
    name = name or conf.get("graph_name", "graph")
    if homo:
        rep = gkv.partition(outdir, (src[0], dst[0]), nb.count[0], P,
                            method="given", owners=owners["_N"], name=name,
                            node_feats={n: r for (t, n), r in node_feats.items()},
                            edge_feats={n: r for (t, n), r in edge_feats.items()},
                            csr=csr, force=force, threads=threads)
    else:
        rep = gkv.partition(outdir, {tuple(et.split(":")): (src[e], dst[e])
                                     for e, et in enumerate(etypes)},
                            dict(zip(ntypes, nb.count)), P, method="given",
                            owners=owners, name=name, node_feats=node_feats,
                            edge_feats=edge_feats, csr=csr, force=force,
                            threads=threads)
    # mappings from the original IDs, when DGL's are given
    outdir = os.fspath(outdir)
    with open(os.path.join(outdir, name + ".json")) as f:
        mp = json.load(f)["mapping"]
    for kind, orig, types, counts in (("node", orig_nids, ntypes, nb.count),
                                      ("edge", orig_eids, etypes, eb.count)):
        orig = _load_orig(orig, types, "orig_%sids" % kind[0])
        for t, o in (orig or {}).items():
            n = counts[types.index(t)]
            if len(o) != n or (n and (o.min() < 0 or o.max() >= n)) or \
                    len(np.unique(o)) != n:
                _fail("orig_%sids[%s]: expected a permutation of 0..%d"
                      % (kind[0], t, n - 1))
            path = os.path.join(outdir, mp[kind][t])
            m = np.load(path)
            out = np.empty_like(m)
            out[o] = m
            np.save(path, out)
    return rep


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m gkv.dgl",
        description="Tools for DGL users of gkv.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="convert DGL partitions (partition_graph's "
                       "output) into gkv partitions with the same assignment")
    c.add_argument("config", help="DGL's partition config, <graph_name>.json")
    c.add_argument("outdir", help="the gkv partition directory to write")
    c.add_argument("--orig-nids", help="partition_graph's orig_nids (.npy, or "
                   ".pt from torch.save; a dict per node type)")
    c.add_argument("--orig-eids", help="partition_graph's orig_eids (likewise)")
    c.add_argument("--name", help="graph name (default: DGL's)")
    c.add_argument("--csr", action="store_true", help="also store out-edges")
    c.add_argument("--force", action="store_true", help="replace outdir")
    a = ap.parse_args(argv)
    try:
        rep = convert_dgl_partitions(a.config, a.outdir, orig_nids=a.orig_nids,
                                     orig_eids=a.orig_eids, name=a.name,
                                     csr=a.csr, force=a.force)
    except gkv.Error as e:
        print("gkv.dgl convert: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
