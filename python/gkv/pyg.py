"""gkv.pyg: PyTorch Geometric's remote backend over a gkv job.

    import gkv, gkv.pyg
    c = gkv.Client("ip_config.txt", group="trainer", rank=0, group_size=1)
    fs, gs = gkv.pyg.FeatureStore(c), gkv.pyg.GraphStore(c)
    loader = gkv.pyg.NeighborLoader((fs, gs), num_neighbors=[10, 5],
                                    input_nodes=train_ids, batch_size=256,
                                    shuffle=True)
    for data in loader:              # torch_geometric.data.Data
        out = model(data.x, data.edge_index)[:data.batch_size]

FeatureStore   PyG's FeatureStore over the job's node tensors: the tensor
               "node/<ntype>/<name>" is TensorAttr(group_name=ntype,
               attr_name=name) (group_name None on a homogeneous graph,
               whose one node type is "_N"); get_tensor pulls the rows of
               attr.index (every row when None); multi_get_tensor checks
               every attribute first, then pulls each tensor once
               (PyG's remote-backend contract)
GraphStore     PyG's GraphStore over the partition book: one EdgeAttr per
               edge type (CSC, with its size); the structure is fixed by
               the partitioning (put/remove raise NotSupportedError), and
               get_edge_index reads a whole edge type (find_edges) only
               when asked: the sampler never does
Sampler        a torch_geometric.sampler.BaseSampler that samples through
               gkv (Client.sample_blocks on the servers, or a gkv.Partition
               in process): PyG's NodeLoader / LinkLoader take it with
               data=(FeatureStore, GraphStore); no pyg-lib or torch-sparse
NeighborLoader the node-level loader, on gkv.Loader: each batch sampled
               with its features on the servers (one request), made ahead
               by worker threads; x, y, n_id ... are the batch's own
               memory through torch.from_dlpack (no copy)
LinkNeighborLoader  PyG's LinkLoader over Sampler (edge seeds, optional
               binary negative sampling); features by multi_get_tensor

Both loaders yield Data (one node and edge type) or HeteroData, laid out as
PyG's own NeighborLoader lays them out: the seeds first in n_id, then each
hop's new nodes; edge_index[0] the sampled neighbour (source),
edge_index[1] the node it was sampled for, hop 1's edges first;
num_sampled_nodes / num_sampled_edges per hop; batch_size the number of
seeds. num_neighbors[0] is hop 1 (PyG's order; gkv's fanouts run the other
way, blocks[0] first).
"""
import json
import os

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.data import FeatureStore as _PygFeatureStore
from torch_geometric.data import GraphStore as _PygGraphStore
from torch_geometric.data import EdgeAttr, TensorAttr
from torch_geometric.data.graph_store import EdgeLayout
from torch_geometric.loader import LinkLoader
from torch_geometric.sampler import (BaseSampler, HeteroSamplerOutput,
                                     SamplerOutput)

import gkv

__all__ = ["FeatureStore", "GraphStore", "Sampler", "NeighborLoader",
           "LinkNeighborLoader", "to_data"]

_HOMO_N = "_N"


def _t(a):
    """A gkv.Array as a torch tensor over the same memory."""
    return torch.from_dlpack(a)


def _book(source):
    book = source.pbook()
    if book is None:
        raise gkv.NotSupportedError(
            "the servers serve a plain store, not a partitioned graph (GKV_ENOTSUP)")
    return book


def _homo(book):
    return book["ntypes"] == [_HOMO_N] and len(book["etypes"]) == 1


def _etuple(name):
    return tuple(name.split(":"))


def _ids(index, n, what="index"):
    """attr.index (None, an int, a slice, a list, a numpy array or a tensor
    of int64 IDs, or a bool mask) -> a C-contiguous int64 numpy array,
    checked against the tensor's n rows."""
    if index is None:
        return np.arange(n, dtype=np.int64)
    if isinstance(index, slice):
        return np.arange(n, dtype=np.int64)[index]
    if isinstance(index, int) and not isinstance(index, bool):
        index = [index]
    if isinstance(index, torch.Tensor):
        if index.is_floating_point() or index.is_complex():
            raise TypeError("%s: expected integer node IDs or a bool mask, got a "
                            "%s tensor" % (what, index.dtype))
        index = index.detach().cpu().numpy()
    a = np.asarray(index)
    if a.dtype == np.bool_:
        if a.shape != (n,):
            raise ValueError("%s: a bool mask of %d values for a tensor of %d rows"
                             % (what, a.size, n))
        return np.flatnonzero(a).astype(np.int64)
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise TypeError("%s: expected a 1-D array of integer node IDs, got %s %r"
                        % (what, a.dtype, a.shape))
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.min() < 0 or a.max() >= n:
        bad = int(a[(a < 0) | (a >= n)][0])
        raise gkv.RangeError("%s: node ID %d is outside [0, %d) (GKV_ERANGE)"
                             % (what, bad, n))
    return a


class FeatureStore(_PygFeatureStore):
    """FeatureStore(source): the node tensors of the job 'source' (a
    gkv.Client, or a gkv.Store holding tensors named node/<ntype>/<name>)
    as PyG's FeatureStore. Tensors are zero-copy views of the pulled rows
    (torch.from_dlpack); put_tensor creates a missing tensor (index None)
    or assigns rows (gkv's 'assign' handler); remove_tensor deletes it."""

    def __init__(self, source, part_config=None):
        super().__init__()
        self.__dict__["_src"] = source
        self.__dict__["_config"] = part_config or os.environ.get("GKV_PART_CONFIG")
        book = source.pbook() if hasattr(source, "pbook") else None
        self.__dict__["_homo"] = book is None or _homo(book)

    # names ----------------------------------------------------------------
    def _name(self, attr):
        g, a = attr.group_name, attr.attr_name
        if not isinstance(a, str) or not a or "/" in a:
            raise TypeError("attr_name: expected a tensor name without '/', got %r"
                            % (a,))
        if g is None:
            if not self._homo:
                raise ValueError("group_name: the graph has several node types; "
                                 "name one (attr_name %r)" % (a,))
            g = _HOMO_N
        if not isinstance(g, str) or "/" in g:
            raise TypeError("group_name: expected a node type name, got %r" % (g,))
        return "node/%s/%s" % (g, a)

    def _desc(self, name):
        try:
            return self._src.describe(name)
        except gkv.NotFoundError:
            return None

    @staticmethod
    def _rows(d):
        return int(d["hi"]) - int(d["lo"])

    # PyG's contract -------------------------------------------------------
    def _get_tensor(self, attr):
        return self._multi_get_tensor([attr])[0]

    def _multi_get_tensor(self, attrs):
        """One pass: every attribute's name, description and index checked
        (a bad one raises before anything is pulled), then each tensor
        pulled once for its IDs; an unknown tensor gives None (PyG raises
        KeyError naming it)."""
        plan = []
        for attr in attrs:
            name = self._name(attr)
            d = self._desc(name)
            plan.append(None if d is None else
                        (name, _ids(attr.index, self._rows(d), "index of %s" % name)
                         + int(d["lo"])))
        return [None if p is None else _t(self._src.pull(p[0], p[1])) for p in plan]

    def _put_tensor(self, tensor, attr):
        name = self._name(attr)
        t = torch.as_tensor(tensor)
        if not t.is_contiguous():
            raise ValueError("put_tensor %s: the tensor is not contiguous" % name)
        d = self._desc(name)
        if d is None:
            if attr.index is not None:
                raise gkv.NotFoundError("put_tensor %s: no such tensor to write "
                                        "rows into (GKV_ENOTFOUND)" % name)
            if t.dim() == 0:
                raise ValueError("put_tensor %s: expected rows, got a scalar" % name)
            self._src.create(name, dtype=str(t.dtype).replace("torch.", ""),
                             row_shape=tuple(t.shape[1:]), hi=len(t))
            d = self._desc(name)
        ids = _ids(attr.index, self._rows(d), "index of %s" % name) + int(d["lo"])
        if len(ids) != len(t):
            raise gkv.ShapeError("put_tensor %s: %d rows for %d IDs (GKV_ESHAPE)"
                                 % (name, len(t), len(ids)))
        self._src.push(name, ids, t, handler="assign")
        return True

    def _remove_tensor(self, attr):
        name = self._name(attr)
        if self._desc(name) is None:
            return False
        self._src.delete(name)
        return True

    def _get_tensor_size(self, attr):
        name = self._name(attr)
        d = self._desc(name)
        if d is None:
            return None
        n = self._rows(d) if attr.index is None else len(
            _ids(attr.index, self._rows(d), "index of %s" % name))
        return (n, *d["row_shape"])

    def get_all_tensor_attrs(self):
        out = []
        for name in self._list():
            parts = name.split("/")
            if len(parts) != 3 or parts[0] != "node" or "#" in parts[2]:
                continue
            out.append(TensorAttr(None if self._homo else parts[1], parts[2]))
        return out

    def _list(self):
        """The job's tensor names. Listing a job of several partitions fails
        in the C client today (each server's graph-structure tensors span
        overlapping IDs, GKV_EINVAL); then the node features the partition
        config names are listed (part_config=, or $GKV_PART_CONFIG that
        gkv-launch sets)."""
        src = self._src
        if not hasattr(src, "tensors"):
            return [d["name"] for d in src.list()]
        try:
            return [d["name"] for d in src.tensors()]
        except gkv.InvalidArgumentError:
            if not self._config:
                raise
        with open(self._config) as f:
            feats = json.load(f).get("node_feats", {})
        return sorted("node/%s/%s" % (t, n) for t, names in feats.items()
                      for n in names)

    def __len__(self):
        return len(self.get_all_tensor_attrs())


class GraphStore(_PygGraphStore):
    """GraphStore(source): the edge types of the partition book of
    'source' (gkv.Client or gkv.Partition) as PyG's GraphStore. Sampling
    goes through gkv (Sampler, NeighborLoader), so nothing here reads the
    adjacency unless get_edge_index is called, which reads one whole edge
    type (COO by find_edges over its edge IDs, sorted for CSC/CSR): meant
    for small graphs and checks."""

    def __init__(self, source):
        super().__init__()
        self.__dict__["_src"] = source
        self.__dict__["_book"] = _book(source)

    def _etype(self, edge_type):
        """PyG edge type (None on a homogeneous graph, a (src, rel, dst)
        tuple, or 'src:rel:dst') -> the etype index."""
        b = self._book
        if edge_type is None:
            if not _homo(b):
                raise ValueError("edge_type: the graph has several edge types; "
                                 "name one as (src, rel, dst)")
            return 0
        key = edge_type if isinstance(edge_type, str) else ":".join(edge_type)
        if key not in b["etypes"]:
            return -1
        return b["etypes"].index(key)

    def get_all_edge_attrs(self):
        b = self._book
        out = []
        for e, name in enumerate(b["etypes"]):
            s, _, d = _etuple(name)
            size = (b["num_nodes"][b["ntypes"].index(s)],
                    b["num_nodes"][b["ntypes"].index(d)])
            out.append(EdgeAttr(None if _homo(b) else _etuple(name),
                                EdgeLayout.CSC, size=size))
        return out

    def _get_edge_index(self, edge_attr):
        e = self._etype(edge_attr.edge_type)
        if e < 0:
            return None
        m = self._book["num_edges"][e]
        src, dst = self._src.find_edges(e, np.arange(m, dtype=np.int64))
        src, dst = _t(src), _t(dst)
        layout = EdgeLayout(edge_attr.layout)
        if layout == EdgeLayout.COO:
            return src, dst
        s, d = self._book["ntypes"].index(_etuple(self._book["etypes"][e])[0]), \
            self._book["ntypes"].index(_etuple(self._book["etypes"][e])[2])
        if layout == EdgeLayout.CSC:
            n, key, other = self._book["num_nodes"][d], dst, src
        else:
            n, key, other = self._book["num_nodes"][s], src, dst
        perm = torch.argsort(key * m + torch.arange(m), stable=True) if m else key
        ptr = torch.zeros(n + 1, dtype=torch.int64)
        ptr[1:] = torch.cumsum(torch.bincount(key, minlength=n), 0)
        return (other[perm], ptr) if layout == EdgeLayout.CSC else (ptr, other[perm])

    def _put_edge_index(self, edge_index, edge_attr):
        raise gkv.NotSupportedError(
            "put_edge_index: a gkv graph's edges are fixed when it is partitioned "
            "(gkv.partition) (GKV_ENOTSUP)")

    def _remove_edge_index(self, edge_attr):
        raise gkv.NotSupportedError(
            "remove_edge_index: a gkv graph's edges are fixed when it is "
            "partitioned (gkv.partition) (GKV_ENOTSUP)")


# ---- blocks -> PyG's layout -------------------------------------------------

def _hops(blocks, book):
    """Per node type: n_id (blocks[0]'s source nodes: the seeds first, then
    each hop's new ones) and the new nodes per hop; per edge type: (row,
    col, e_id) over hop 1 first and the edges per hop."""
    nt = len(book["ntypes"])
    L = len(blocks)
    node = [_t(blocks[0].nodes[t]) for t in range(nt)]
    nsn = [[blocks[-1].num_dst[t]] +
           [blocks[i].num_src[t] - blocks[i].num_dst[t] for i in range(L - 1, -1, -1)]
           for t in range(nt)]
    edges = []
    for e in range(len(book["etypes"])):
        parts = [blocks[i].edges[e] for i in range(L - 1, -1, -1)]
        if L == 1:
            row, col, eid = (_t(x) for x in parts[0])
        else:
            row, col, eid = (torch.cat([_t(p[k]) for p in parts]) for k in range(3))
        edges.append((row, col, eid, [len(p[0]) for p in parts]))
    return node, nsn, edges


def to_data(blocks, book, feats=None, batch_size=None, seed_ntype=0):
    """gkv blocks (Client/Partition.sample_blocks, a Batch's blocks) ->
    Data (one node and edge type) or HeteroData in PyG's layout. feats:
    {(ntype index, attr name): tensor of the rows of blocks[0]'s source
    nodes}."""
    node, nsn, edges = _hops(blocks, book)
    feats = feats or {}
    if _homo(book):
        row, col, eid, ne = edges[0]
        data = Data(edge_index=torch.stack([row, col]), n_id=node[0], e_id=eid,
                    num_sampled_nodes=nsn[0], num_sampled_edges=ne)
        data.num_nodes = len(node[0])
        for (t, name), v in feats.items():
            data[name] = v
        data.batch_size = nsn[0][0] if batch_size is None else batch_size
        return data
    data = HeteroData()
    for t, name in enumerate(book["ntypes"]):
        data[name].n_id = node[t]
        data[name].num_nodes = len(node[t])
        data[name].num_sampled_nodes = nsn[t]
    for (t, name), v in feats.items():
        data[book["ntypes"][t]][name] = v
    for e, name in enumerate(book["etypes"]):
        row, col, eid, ne = edges[e]
        et = _etuple(name)
        data[et].edge_index = torch.stack([row, col])
        data[et].e_id = eid
        data[et].num_sampled_edges = ne
    st = book["ntypes"][seed_ntype]
    data[st].batch_size = nsn[seed_ntype][0] if batch_size is None else batch_size
    return data


def _fanouts(num_neighbors, book):
    """PyG's num_neighbors (a list per hop, or {edge type: list}) -> gkv's
    fanouts (blocks[0] first: the last hop first)."""
    if isinstance(num_neighbors, dict):
        hops = {len(v) for v in num_neighbors.values()}
        if len(hops) != 1:
            raise ValueError("num_neighbors: every edge type needs the same "
                             "number of hops, got %r" % (num_neighbors,))
        L = hops.pop()
        rows = []
        for h in range(L):
            r = {}
            for k, v in num_neighbors.items():
                key = k if isinstance(k, str) else ":".join(k)
                if key not in book["etypes"]:
                    raise ValueError("num_neighbors: unknown edge type %r" % (k,))
                r[key] = int(v[h])
            rows.append(r)
        return rows[::-1]
    if not isinstance(num_neighbors, (list, tuple)) or not num_neighbors:
        raise ValueError("num_neighbors: expected a non-empty list of per-hop "
                         "fanouts, got %r" % (num_neighbors,))
    return [int(v) for v in num_neighbors][::-1]


class Sampler(BaseSampler):
    """Sampler(source, num_neighbors, *, replace=False, seed=0,
    disjoint=False): PyG's BaseSampler over gkv's sampler. source: a
    gkv.Client (sampled on the servers) or a gkv.Partition (in process).
    The i-th call samples with gkv.Loader.batch_seed(seed, 0, i), so a run
    is reproducible (and checkable against Partition.sample_blocks). With
    DataLoader workers (num_workers > 0) each worker counts its own calls,
    so the samples differ from a run without workers (not the
    neighbourhoods taken whole: fanout -1)."""

    def __init__(self, source, num_neighbors, *, replace=False, seed=0):
        self.source = source
        self.book = _book(source)
        self.num_neighbors = num_neighbors
        self.fanouts = _fanouts(num_neighbors, self.book)
        self.replace = bool(replace)
        self.seed = int(seed)
        self.calls = 0

    @property
    def edge_permutation(self):
        return None

    def next_seed(self):
        s = gkv.Loader.batch_seed(self.seed, 0, self.calls)
        self.calls += 1
        return s

    def _sample(self, seeds):
        return self.source.sample_blocks(seeds, self.fanouts, seed=self.next_seed(),
                                         replace=self.replace)

    def _output(self, blocks, metadata):
        node, nsn, edges = _hops(blocks, self.book)
        if _homo(self.book):
            row, col, eid, ne = edges[0]
            return SamplerOutput(node=node[0], row=row, col=col, edge=eid,
                                 num_sampled_nodes=nsn[0], num_sampled_edges=ne,
                                 metadata=metadata)
        nts = self.book["ntypes"]
        ets = [_etuple(e) for e in self.book["etypes"]]
        return HeteroSamplerOutput(
            node={nts[t]: node[t] for t in range(len(nts))},
            row={ets[e]: edges[e][0] for e in range(len(ets))},
            col={ets[e]: edges[e][1] for e in range(len(ets))},
            edge={ets[e]: edges[e][2] for e in range(len(ets))},
            num_sampled_nodes={nts[t]: nsn[t] for t in range(len(nts))},
            num_sampled_edges={ets[e]: edges[e][3] for e in range(len(ets))},
            metadata=metadata)

    def _seeds(self, nodes, input_type):
        ids = np.ascontiguousarray(torch.as_tensor(nodes).cpu().numpy(), np.int64)
        if _homo(self.book):
            if input_type not in (None, _HOMO_N):
                raise ValueError("input_type %r: the graph has one node type"
                                 % (input_type,))
            return ids
        if input_type not in self.book["ntypes"]:
            raise ValueError("input_type %r: expected one of %r"
                             % (input_type, self.book["ntypes"]))
        return {input_type: ids}

    def sample_from_nodes(self, index, **kwargs):
        seeds = self._seeds(index.node, index.input_type)
        return self._output(self._sample(seeds), (index.input_id, index.time))

    def sample_from_edges(self, index, neg_sampling=None):
        """Seeds: the edges' end points (the unique ones, blocks over them);
        binary negative sampling draws uniform destination nodes (label 0)."""
        if index.time is not None:
            raise ValueError("temporal sampling is not supported by gkv")
        row, col = torch.as_tensor(index.row), torch.as_tensor(index.col)
        label = index.label
        if neg_sampling is not None:
            if not neg_sampling.is_binary():
                raise ValueError("neg_sampling: only the 'binary' mode is supported")
            et = index.input_type
            e = 0 if et is None else self.book["etypes"].index(":".join(et))
            s, _, d = _etuple(self.book["etypes"][e])
            nsrc = self.book["num_nodes"][self.book["ntypes"].index(s)]
            ndst = self.book["num_nodes"][self.book["ntypes"].index(d)]
            k = int(round(neg_sampling.amount * len(row)))
            g = torch.Generator().manual_seed(self.seed * 1000003 + self.calls)
            nrow = torch.randint(nsrc, (k,), generator=g)
            ncol = torch.randint(ndst, (k,), generator=g)
            if label is None:
                label = torch.ones(len(row))
            label = torch.cat([label, torch.zeros(k, dtype=label.dtype)])
            row, col = torch.cat([row, nrow]), torch.cat([col, ncol])
        if _homo(self.book):
            uniq, inv = torch.unique(torch.cat([row, col]), return_inverse=True)
            blocks = self._sample(np.ascontiguousarray(uniq.numpy(), np.int64))
            eli = inv.view(2, -1)
            return self._output(blocks, (index.input_id, eli, label, None))
        s, _, d = index.input_type
        if s == d:
            uniq, inv = torch.unique(torch.cat([row, col]), return_inverse=True)
            seeds = {s: np.ascontiguousarray(uniq.numpy(), np.int64)}
            eli = inv.view(2, -1)
        else:
            us, ir = torch.unique(row, return_inverse=True)
            ud, ic = torch.unique(col, return_inverse=True)
            seeds = {s: np.ascontiguousarray(us.numpy(), np.int64),
                     d: np.ascontiguousarray(ud.numpy(), np.int64)}
            eli = torch.stack([ir, ic])
        return self._output(self._sample(seeds), (index.input_id, eli, label, None))


# ---- loaders ----------------------------------------------------------------

def _source(data):
    """data: (FeatureStore, GraphStore) of gkv.pyg, a gkv.Client or a
    gkv.Partition -> (source, feature store or None)."""
    if isinstance(data, tuple) and len(data) == 2:
        fs, gs = data
        if not isinstance(fs, FeatureStore) or not isinstance(gs, GraphStore):
            raise TypeError("data: expected (gkv.pyg.FeatureStore, gkv.pyg.GraphStore), "
                            "got (%s, %s)" % (type(fs).__name__, type(gs).__name__))
        return gs._src, fs
    if isinstance(data, (gkv.Client, gkv.Partition)):
        return data, (FeatureStore(data) if isinstance(data, gkv.Client) else None)
    raise TypeError("data: expected (FeatureStore, GraphStore), a gkv.Client or a "
                    "gkv.Partition, got %s" % type(data).__name__)


def _input_nodes(input_nodes, book):
    """PyG's input_nodes -> (node type index, int64 IDs)."""
    t = None
    if isinstance(input_nodes, str):
        t, input_nodes = input_nodes, None
    elif isinstance(input_nodes, tuple) and len(input_nodes) == 2 and \
            isinstance(input_nodes[0], str):
        t, input_nodes = input_nodes
    if t is None:
        if len(book["ntypes"]) != 1:
            raise ValueError("input_nodes: the graph has several node types; "
                             "give (node type, IDs or mask)")
        ti = 0
    elif t in book["ntypes"]:
        ti = book["ntypes"].index(t)
    else:
        raise ValueError("input_nodes: unknown node type %r" % (t,))
    return ti, _ids(input_nodes, book["num_nodes"][ti], "input_nodes")


class NeighborLoader:
    """NeighborLoader(data, num_neighbors, *, input_nodes=None,
                      batch_size=1, shuffle=False, drop_last=False,
                      replace=False, node_attrs=None, transform=None,
                      where=None, seed=0, workers=2, prefetch=4)

    PyG's NeighborLoader over gkv.Loader. data: (FeatureStore,
    GraphStore), a gkv.Client or a gkv.Partition. input_nodes: None (every
    node of the only type), IDs, a bool mask, a node type name, or (node
    type, IDs or mask). node_attrs: the attr names fetched with each batch
    for every sampled node (default: every node tensor of the feature
    store, of each type), as data.<attr> (data[ntype].<attr>), no copy.
    where: 'server' (each batch sampled with its rows on the servers in
    one request; the default for a Client), 'client' or 'local' (a
    Partition). seed: sampling and shuffling seed (batch i of epoch e is
    sampled with gkv.Loader.batch_seed(seed, e, i)). Iterating again starts
    the next epoch. workers and prefetch are gkv.Loader's worker threads
    and batches made ahead; PyG's num_workers, persistent_workers and
    pin_memory are accepted and ignored (no worker processes are needed);
    disjoint, non-directional subgraphs and temporal sampling are
    refused."""

    def __init__(self, data, num_neighbors, *, input_nodes=None, batch_size=1,
                 shuffle=False, drop_last=False, replace=False, node_attrs=None,
                 transform=None, where=None, seed=0, workers=2, prefetch=4,
                 **kwargs):
        unknown = set(kwargs) - {"directed", "num_workers", "persistent_workers",
                                 "pin_memory", "subgraph_type", "disjoint"}
        if unknown:
            raise TypeError("NeighborLoader: unsupported argument(s) %s"
                            % ", ".join(sorted(unknown)))
        if kwargs.get("disjoint") or kwargs.get("subgraph_type", "directional") \
                not in ("directional", None) or kwargs.get("directed") is False:
            raise ValueError("NeighborLoader: only directional (directed, "
                             "non-disjoint) sampling is supported")
        src, fs = _source(data)
        self.source = src
        self.book = book = _book(src)
        self.num_neighbors = num_neighbors
        fan = _fanouts(num_neighbors, book)
        self.seed_ntype, seeds = _input_nodes(input_nodes, book)
        feats = []
        if node_attrs is None:
            attrs = fs.get_all_tensor_attrs() if fs is not None else []
            node_attrs = [a.attr_name if a.group_name is None else
                          (a.group_name, a.attr_name) for a in attrs]
        for a in node_attrs:
            t, name = (a if isinstance(a, tuple) else (book["ntypes"][0]
                                                       if len(book["ntypes"]) == 1
                                                       else None, a))
            if t not in book["ntypes"]:
                raise ValueError("node_attrs: %r needs a node type, (type, name)" % (a,))
            feats.append((book["ntypes"].index(t), "node/%s/%s" % (t, name), name))
        self._names = [(t, n) for t, _, n in feats]
        self.transform = transform
        self.batch_size = batch_size
        self.loader = gkv.Loader(src, seeds, batch_size=batch_size, fanouts=fan,
                                 feats=[(t, full) for t, full, _ in feats],
                                 where=where, seed_ntype=self.seed_ntype,
                                 shuffle=shuffle, drop_last=drop_last,
                                 shuffle_seed=seed, sample_seed=seed,
                                 replace=replace, workers=workers,
                                 prefetch=prefetch)

    def to_data(self, batch):
        """One gkv.Batch -> Data / HeteroData (its arrays without a copy)."""
        feats = {k: _t(a) for k, a in zip(self._names, batch.feats)}
        data = to_data(batch.blocks, self.book, feats, len(batch.seeds),
                       self.seed_ntype)
        return data if self.transform is None else self.transform(data)

    def __iter__(self):
        for b in self.loader:
            yield self.to_data(b)

    def __len__(self):
        return len(self.loader)

    def set_epoch(self, epoch):
        self.loader.set_epoch(epoch)

    def close(self):
        self.loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LinkNeighborLoader(LinkLoader):
    """LinkNeighborLoader(data, num_neighbors, *, edge_label_index=None,
                          edge_label=None, neg_sampling=None,
                          neg_sampling_ratio=None, batch_size=1,
                          shuffle=False, replace=False, seed=0, ...)

    PyG's LinkLoader over Sampler: data is (FeatureStore, GraphStore); each
    batch samples blocks around the seed edges' end points through gkv and
    takes the rows of every node tensor with one multi_get_tensor. Yields
    Data / HeteroData with edge_label_index (local indices) and
    edge_label. edge_label_index: (2, n) IDs, or (edge type, (2, n)) on a
    heterogeneous graph; None: every edge of the only edge type (read with
    find_edges). Other keyword arguments go to torch's DataLoader."""

    def __init__(self, data, num_neighbors, *, edge_label_index=None,
                 edge_label=None, neg_sampling=None, neg_sampling_ratio=None,
                 replace=False, seed=0, **kwargs):
        if not (isinstance(data, tuple) and len(data) == 2):
            raise TypeError("data: expected (gkv.pyg.FeatureStore, gkv.pyg.GraphStore)")
        src, fs = _source(data)
        gs = data[1]
        homo = _homo(gs._book)
        if edge_label_index is None:
            if len(gs._book["etypes"]) != 1:
                raise ValueError("edge_label_index: the graph has several edge "
                                 "types; give (edge type, index)")
            edge_label_index = (None if homo else _etuple(gs._book["etypes"][0]), None)
        elif isinstance(edge_label_index, torch.Tensor):
            if not homo:
                raise ValueError("edge_label_index: the graph has several edge "
                                 "types; give (edge type, index)")
            edge_label_index = (None, edge_label_index)
        if neg_sampling is None and neg_sampling_ratio is not None:
            neg_sampling = dict(mode="binary", amount=neg_sampling_ratio)
        sampler = Sampler(src, num_neighbors, replace=replace, seed=seed)
        kwargs.pop("directed", None)
        super().__init__(data, sampler, edge_label_index=edge_label_index,
                         edge_label=edge_label, neg_sampling=neg_sampling,
                         **kwargs)


def _main(argv=None):
    """python -m gkv.pyg convert ROOT OUTDIR: PyG Partitioner output as gkv
    partitions (gkv.pyg_convert)."""
    from .pyg_convert import main
    return main(argv)


if __name__ == "__main__":
    raise SystemExit(_main())
