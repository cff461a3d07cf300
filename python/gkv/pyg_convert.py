"""Converting a graph that torch_geometric.distributed.Partitioner split into
gkv partitions, keeping PyG's assignment of nodes to partitions.

    python -m gkv.pyg convert PYG_ROOT OUTDIR [--name N] [--csr] [--force]

PyG's root directory holds META.json (num_parts, is_hetero, node_types,
edge_types), the assignment (homogeneous: node_map.pt and edge_map.pt, the
partition of every node and edge; heterogeneous: node_map/<ntype>.pt and
edge_map/<src>__<rel>__<dst>.pt, type by type) and per partition part_<i>/
with graph.pt (the partition's edges: edge_id, row, col, the edges whose
destination the partition owns), node_feats.pt (global_id and feats, for
each node type on a heterogeneous graph, with id the type-wise ID) and
edge_feats.pt (global_id and feats, when the graph has edge_attr). Reading
them needs torch (the .pt files); torch_geometric itself is not imported.

What is written is gkv_partition_write's output (gkv.partition, method
'given', owners = PyG's node_map): every node stays in its PyG partition
and every edge in its destination's (as in PyG). IDs: PyG numbers nodes and
edges as in the original graph (type-wise on a heterogeneous one), so a
partition's nodes are scattered; gkv renumbers them so each partition owns
a contiguous range (partition 0's nodes first, in their original order,
then partition 1's, ...; edges in CSC order within their partition), which
the config's node_map / edge_map record. mapping/node-<ntype>.npy maps PyG's
(the original) node ID to gkv's and mapping/edge-<canonical>.npy PyG's edge
ID to gkv's (<ntype> is "_N" and <canonical> "_N:_E:_N" on a homogeneous
graph): index a mapping with an original ID to get the ID to pull or
sample with. Features keep their names (x, edge_attr; time and edge_time
when present) as node/<ntype>/<name> and edge/<canonical>/<name>.
"""
import argparse
import json
import os
import sys

import numpy as np

import gkv
from gkv import NotFoundError, NotSupportedError

from .dgl_convert import _fail, _np     # shared with DGL's converter (no dgl import)

_HOMO_N = "_N"


def _load(torch, path, what):
    if not os.path.exists(path):
        _fail("PyG %s: no file %s" % (what, path), NotFoundError)
    try:
        return torch.load(path, map_location="cpu")
    except Exception as e:      # a torn or foreign file: say which
        _fail("PyG %s %s: not readable by torch.load (%s)" % (what, path, e))


class _Rows:
    """One feature, gathered from the partitions into original-ID order."""

    def __init__(self, what, n):
        self.what, self.n = what, n
        self.rows, self.seen = None, np.zeros(n, dtype=bool)

    def put(self, ids, rows):
        rows = _np(rows)
        if rows.ndim == 0 or len(rows) != len(ids):
            _fail("PyG %s: %s rows for %d IDs" % (self.what, rows.shape, len(ids)))
        if self.rows is None:
            self.rows = np.empty((self.n,) + rows.shape[1:], dtype=rows.dtype)
        elif rows.shape[1:] != self.rows.shape[1:] or rows.dtype != self.rows.dtype:
            _fail("PyG %s: rows of shape %s and dtype %s, earlier %s and %s"
                  % (self.what, rows.shape[1:], rows.dtype, self.rows.shape[1:],
                     self.rows.dtype))
        self.rows[ids] = rows
        self.seen[ids] = True

    def whole(self):
        if not self.seen.all():
            _fail("PyG %s: row %d is in no partition" % (
                self.what, int(np.argmin(self.seen))))
        r = self.rows
        return np.ascontiguousarray(r.astype(np.uint8) if r.dtype == np.bool_ else r)


def _ids(x, n, what):
    a = _np(x).astype(np.int64, copy=False).reshape(-1)
    if len(a) and (a.min() < 0 or a.max() >= n):
        _fail("PyG %s: ID %d outside 0..%d" % (
            what, int(a[(a < 0) | (a >= n)][0]), n - 1))
    return a


def convert_pyg_partitions(root, outdir, *, name="graph", csr=False,
                           force=False, threads=0):
    """Writes the graph of PyG partition directory 'root' (what
    torch_geometric.distributed.Partitioner(data, num_parts, root)
    .generate_partition() wrote) as gkv partitions in outdir, named 'name'
    (<outdir>/<name>.json), with every node and edge feature of PyG's
    files; see the module's text for how IDs map. Returns gkv.partition's
    report."""
    try:
        import torch
    except ImportError as e:
        raise NotSupportedError("reading PyG's partitions (graph.pt, "
                                "node_feats.pt) needs torch (GKV_ENOTSUP)") from e
    root = os.fspath(root)
    if not os.path.isdir(root):
        _fail("PyG partition root %s: no such directory" % root, NotFoundError)
    mpath = os.path.join(root, "META.json")
    if not os.path.exists(mpath):
        _fail("PyG partition root %s: no META.json (not written by "
              "Partitioner?)" % root, NotFoundError)
    with open(mpath) as f:
        try:
            meta = json.load(f)
        except ValueError as e:
            _fail("PyG %s: not JSON (%s)" % (mpath, e))
    if not isinstance(meta, dict):
        _fail("PyG %s: not a JSON object" % mpath)
    for k in ("num_parts", "is_hetero"):
        if k not in meta:
            _fail("PyG %s: no %r (not written by Partitioner?)" % (mpath, k))
    P = meta["num_parts"]
    if not isinstance(P, int) or P < 1:
        _fail("PyG %s: num_parts %r, expected a positive integer" % (mpath, P))
    hetero = bool(meta["is_hetero"])
    if hetero:
        for k in ("node_types", "edge_types"):
            if not meta.get(k):
                _fail("PyG %s: heterogeneous, but no %r" % (mpath, k))
        ntypes = list(meta["node_types"])
        etuples = [tuple(t) for t in meta["edge_types"]]
        for t in ntypes + [x for et in etuples for x in et]:
            if not isinstance(t, str) or not t or ":" in t or "/" in t:
                _fail("PyG %s: type name %r (gkv needs names without ':' "
                      "or '/')" % (mpath, t), NotSupportedError)
        for et in etuples:
            if len(et) != 3 or et[0] not in ntypes or et[2] not in ntypes:
                _fail("PyG %s: edge type %r is not (src, rel, dst) of its "
                      "node types" % (mpath, list(et)))
        nfile = {t: os.path.join(root, "node_map", t + ".pt") for t in ntypes}
        efile = {et: os.path.join(root, "edge_map", "__".join(et) + ".pt")
                 for et in etuples}
    else:
        ntypes, etuples = [_HOMO_N], [(_HOMO_N, "_E", _HOMO_N)]
        nfile = {_HOMO_N: os.path.join(root, "node_map.pt")}
        efile = {etuples[0]: os.path.join(root, "edge_map.pt")}
    etypes = [":".join(et) for et in etuples]

    owners, emap = {}, {}
    for t in ntypes:
        o = _np(_load(torch, nfile[t], "node map"))
        if o.ndim != 1 or (len(o) and (o.min() < 0 or o.max() >= P)):
            _fail("PyG node map %s: expected a partition 0..%d per node"
                  % (nfile[t], P - 1))
        owners[t] = o.astype(np.int32)
    for et in etuples:
        e = _np(_load(torch, efile[et], "edge map"))
        if e.ndim != 1:
            _fail("PyG edge map %s: expected one partition per edge" % efile[et])
        emap[et] = e.astype(np.int64)
    nn = {t: len(owners[t]) for t in ntypes}
    ne = {et: len(emap[et]) for et in etuples}
    eoff, off = {}, 0                  # graph.pt's edge_id: homogeneous IDs
    for et in etuples:
        eoff[et], off = off, off + ne[et]
    src = {et: np.full(ne[et], -1, dtype=np.int64) for et in etuples}
    dst = {et: np.full(ne[et], -1, dtype=np.int64) for et in etuples}
    nfeat, efeat = {}, {}

    def feats(d, acc, t, n, ids, what):
        for fname, rows in (d.get("feats") or {}).items():
            if rows is not None:
                acc.setdefault((t, fname), _Rows("%s %s/%s" % (what, t, fname), n)
                               ).put(ids, rows)

    for p in range(P):
        pdir = os.path.join(root, "part_%d" % p)
        if not os.path.isdir(pdir):
            _fail("PyG partition %d: no directory %s" % (p, pdir), NotFoundError)
        g = _load(torch, os.path.join(pdir, "graph.pt"), "partition %d graph" % p)
        nf = _load(torch, os.path.join(pdir, "node_feats.pt"),
                   "partition %d node features" % p)
        ef = _load(torch, os.path.join(pdir, "edge_feats.pt"),
                   "partition %d edge features" % p)
        if not hetero:
            g, nf, ef = {etuples[0]: g}, {_HOMO_N: nf}, {etuples[0]: ef}
        for name_d, d in (("graph.pt", g), ("node_feats.pt", nf),
                          ("edge_feats.pt", ef)):
            if not isinstance(d, dict):
                _fail("PyG partition %d: %s holds a %s, expected a dict"
                      % (p, name_d, type(d).__name__))
        for et, cet in zip(etuples, etypes):
            ge = g.get(et)
            if ge is None:
                continue
            for k in ("edge_id", "row", "col"):
                if k not in ge:
                    _fail("PyG partition %d: graph.pt has no %r for %s" % (p, k, cet))
            eid = _ids(_np(ge["edge_id"]).astype(np.int64) - eoff[et], ne[et],
                       "partition %d edge_id of %s" % (p, cet))
            r = _ids(ge["row"], nn[et[0]], "partition %d row of %s" % (p, cet))
            c = _ids(ge["col"], nn[et[2]], "partition %d col of %s" % (p, cet))
            if not (len(eid) == len(r) == len(c)):
                _fail("PyG partition %d: edge_id, row and col of %s differ in "
                      "length" % (p, cet))
            if (emap[et][eid] != p).any() or (owners[et[2]][c] != p).any():
                _fail("PyG partition %d: an edge of %s is not its destination "
                      "partition's in the edge map (gkv keeps edges with their "
                      "destination)" % (p, cet))
            src[et][eid], dst[et][eid] = r, c
            e = ef.get(et) or {}
            if e.get("feats"):
                ids = eid if "global_id" not in e else _ids(
                    e["global_id"], ne[et], "partition %d edge global_id" % p)
                feats(e, efeat, cet, ne[et], ids, "edge feature")
            if e.get("edge_time") is not None:
                efeat.setdefault((cet, "edge_time"), _Rows(
                    "edge feature %s/edge_time" % cet, ne[et])).put(eid, e["edge_time"])
        for t in ntypes:
            d = nf.get(t)
            if d is None:
                continue
            if "global_id" not in d:
                _fail("PyG partition %d: node_feats.pt has no 'global_id' for %s"
                      % (p, t))
            ids = _ids(d["id"] if hetero else d["global_id"], nn[t],
                       "partition %d node IDs of %s" % (p, t))
            if (owners[t][ids] != p).any():
                _fail("PyG partition %d: node features of %s for nodes the node "
                      "map puts elsewhere" % (p, t))
            feats(d, nfeat, t, nn[t], ids, "node feature")
            if d.get("time") is not None and (t, "time") not in nfeat:
                tm = _np(d["time"])                 # every node's, in each part
                nfeat[(t, "time")] = _Rows("node feature %s/time" % t, nn[t])
                nfeat[(t, "time")].put(np.arange(nn[t]), tm)
    for et, cet in zip(etuples, etypes):
        if (src[et] < 0).any():
            _fail("PyG partitions: edge %d of %s is in no partition's graph.pt"
                  % (int(np.argmax(src[et] < 0)), cet))
    node_feats = {k: r.whole() for k, r in nfeat.items()}
    edge_feats = {k: r.whole() for k, r in efeat.items()}
    if not hetero:
        return gkv.partition(outdir, (src[etuples[0]], dst[etuples[0]]), nn[_HOMO_N],
                             P, method="given", owners=owners[_HOMO_N], name=name,
                             node_feats={n: r for (t, n), r in node_feats.items()},
                             edge_feats={n: r for (t, n), r in edge_feats.items()},
                             csr=csr, force=force, threads=threads)
    return gkv.partition(outdir, {et: (src[et], dst[et]) for et in etuples}, nn, P,
                         method="given", owners=owners, name=name,
                         node_feats=node_feats, edge_feats=edge_feats, csr=csr,
                         force=force, threads=threads)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m gkv.pyg",
        description="Tools for PyG users of gkv.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="convert PyG partitions (Partitioner's "
                       "output) into gkv partitions with the same assignment")
    c.add_argument("root", help="PyG's partition directory (holding META.json)")
    c.add_argument("outdir", help="the gkv partition directory to write")
    c.add_argument("--name", default="graph",
                   help="graph name: OUTDIR/NAME.json (default: graph)")
    c.add_argument("--csr", action="store_true", help="also store out-edges")
    c.add_argument("--force", action="store_true", help="replace outdir")
    a = ap.parse_args(argv)
    try:
        rep = convert_pyg_partitions(a.root, a.outdir, name=a.name, csr=a.csr,
                                     force=a.force)
    except gkv.Error as e:
        print("gkv.pyg convert: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
