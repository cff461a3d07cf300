"""gkv.dgl: the names a dgl.distributed training script uses, over gkv.

    import gkv.dgl as dist              # instead of dgl.distributed
    dist.initialize("ip_config.txt")
    g = dist.DistGraph("graph")
    train = dist.node_split(g.ndata["train_mask"], g.get_partition_book())
    loader = dist.DistNodeDataLoader(g, train, dist.NeighborSampler([10, 5]),
                                     batch_size=1024, shuffle=True)
    for input_nodes, seeds, blocks in loader:
        x = g.ndata["feat"][input_nodes]      # or blocks[0].srcdata["feat"]
        ...

initialize      connects this trainer to the job's servers (a gkv.Client)
exit_client     closes the data loaders made over it, then it
DistGraph       ndata / edata (name -> DistTensor), num_nodes / num_edges,
                ntypes / etypes / canonical_etypes, sample_neighbors,
                get_partition_book, barrier
DistTensor      a tensor of the job: t[ids] pulls rows, t[ids] = rows
                pushes them (handler assign)
DistEmbedding   a trainable table; SparseAdagrad / SparseAdam apply their
                step on the servers (push with handler adagrad / adam)
node_split, edge_split
                this trainer's share of a mask or of IDs
                (gkv_pbook_node_split)
DistNodeDataLoader (NodeDataLoader)
                (input_nodes, seeds, blocks) per mini-batch, made ahead by
                a gkv.Loader (sampled on the servers with the features);
                NeighborSampler(prob='w') samples by an edge feature,
                through the client
DistEdgeDataLoader (EdgeDataLoader), as_edge_prediction_sampler,
negative_sampler.Uniform
                link prediction: (input_nodes, pair_graph, neg_pair_graph,
                blocks) per mini-batch of seed edges, made ahead by a
                gkv.Loader with edge seeds (exclude 'self' or
                'reverse_types')
convert_dgl_partitions (gkv.dgl_convert)
                a graph dgl.distributed.partition_graph split, as gkv
                partitions with the same assignment and node IDs

Blocks are DGL blocks (dgl.create_block, with dgl.NID / dgl.EID) when dgl
is importable, else CSCBlock (indptr / indices tensors per edge type).
Arrays come from gkv as gkv.Array and reach torch with torch.from_dlpack,
without a copy. PyTorch is required; dgl is not.
"""
import os
import weakref

import numpy as np

try:
    import torch
except ImportError as e:                      # pragma: no cover
    raise ImportError("gkv.dgl needs PyTorch (pip install torch)") from e

try:
    import dgl as _dgl
except ImportError:                           # DGL is optional
    _dgl = None

import gkv
from gkv import InvalidArgumentError, NotFoundError, NotSupportedError

from .dgl_convert import convert_dgl_partitions  # noqa: F401

__all__ = ["initialize", "exit_client", "DistGraph", "DistTensor",
           "DistEmbedding", "SparseAdagrad", "SparseAdam", "node_split",
           "edge_split", "NeighborSampler", "DistNodeDataLoader",
           "NodeDataLoader", "DistEdgeDataLoader", "EdgeDataLoader",
           "as_edge_prediction_sampler", "negative_sampler", "Uniform",
           "CSCBlock", "PairGraph", "PartitionBook",
           "convert_dgl_partitions", "HAVE_DGL"]

HAVE_DGL = _dgl is not None

_client = None          # the trainer's Client, set by initialize()
_loaders = weakref.WeakSet()    # the data loaders made, for exit_client


def _t(a):
    """A gkv.Array (or anything with __dlpack__) as a torch tensor, no copy."""
    return torch.from_dlpack(a)


def _ids(x, what="ids"):
    """IDs as a C-contiguous int64 CPU torch tensor (a copy only when the
    input is another dtype, a list or not contiguous)."""
    if isinstance(x, DistTensor):
        raise InvalidArgumentError("%s: a DistTensor, expected IDs (index it "
                                   "first) (GKV_EINVAL)" % what)
    if isinstance(x, torch.Tensor):
        t = x
    elif isinstance(x, np.ndarray):
        t = torch.from_numpy(x) if x.dtype != np.bool_ else torch.from_numpy(x.copy())
    elif hasattr(x, "__dlpack__"):
        t = torch.from_dlpack(x)
    else:
        t = torch.as_tensor(x)
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise InvalidArgumentError("%s: expected integer IDs, got %s (GKV_EINVAL)"
                                   % (what, t.dtype))
    return t.reshape(-1).to(device="cpu", dtype=torch.int64).contiguous()


def initialize(ip_config=None, *, token=None, token_file=None, group=None,
               rank=None, group_size=None, timeout_ms=0, **kw):
    """dgl.distributed.initialize: connects this trainer to every server
    of ip_config (a gkv.Client). Under gkv-launch every argument comes
    from its environment (GKV_IP_CONFIG, GKV_TOKEN_FILE, GKV_GROUP,
    GKV_RANK, GKV_WORLD_SIZE, GKV_NUM_SERVERS), as DGL's launch.py gives
    its trainers theirs; arguments given win. rank of group_size trainers
    in 'group' is what barriers and node_split use. DGL's other arguments
    (max_queue_size, net_type, num_worker_threads, ...) are accepted and
    ignored. Returns the Client."""
    global _client
    env = os.environ
    for k in ("max_queue_size", "net_type", "num_worker_threads",
              "use_graphbolt", "num_workers"):
        kw.pop(k, None)
    ip_config = ip_config or env.get("GKV_IP_CONFIG")
    if not ip_config:
        raise InvalidArgumentError("initialize: no ip_config given and no "
                                   "GKV_IP_CONFIG set (GKV_EINVAL)")
    if token is None and token_file is None:
        token_file = env.get("GKV_TOKEN_FILE") or None
    kw.setdefault("num_servers", int(env.get("GKV_NUM_SERVERS", 0)))
    exit_client()
    _client = gkv.Client(
        ip_config, token=token, token_file=token_file,
        group=group if group is not None else env.get("GKV_GROUP", "gkv"),
        rank=rank if rank is not None else int(env.get("GKV_RANK", 0)),
        group_size=(group_size if group_size is not None
                    else int(env.get("GKV_WORLD_SIZE", 0))),
        timeout_ms=timeout_ms, **kw)
    return _client


def _close_loaders(c):
    """Closes the data loaders gkv.dgl made over client c that are still
    alive (a client refuses to close while loaders use it)."""
    for ld in list(_loaders):
        if ld._c is c:
            ld.close()


def exit_client():
    """Closes the connection initialize() made, and first the data loaders
    made over it that are still alive (DGL scripts do not close theirs):
    iterating one afterwards raises a gkv error."""
    global _client
    if _client is not None and not _client.closed:
        _close_loaders(_client)
        _client.close()
    _client = None


def _the_client(client):
    c = client if client is not None else _client
    if c is None:
        raise NotSupportedError("not connected: call gkv.dgl.initialize(ip_config) "
                                "first, or pass client= (GKV_ENOTSUP)")
    return c


def _trainers(client):
    """(rank, num_trainers) of the client's group (1 trainer when alone)."""
    kw = getattr(client, "_connect_args", (None, {}))[1]
    n = int(kw.get("group_size") or 0)
    return int(kw.get("rank") or 0) if n > 0 else 0, max(n, 1)


def _only(names, what):
    """The one type of a kind, when no type is named."""
    if len(names) != 1:
        raise InvalidArgumentError("the graph has %d %s types: name one "
                                   "(GKV_EINVAL)" % (len(names), what))
    return names[0]


def _canon_str(book, etype):
    """An edge type (canonical tuple, 'src:rel:dst' or its unique relation
    name) as the canonical string of the partition book."""
    names = book["etypes"]
    if etype is None:
        return _only(names, "edge")
    s = ":".join(etype) if isinstance(etype, tuple) else str(etype)
    if s in names:
        return s
    hits = [n for n in names if n.split(":")[1] == s]
    if len(hits) == 1:
        return hits[0]
    raise InvalidArgumentError("edge type %r: %s (GKV_EINVAL)" % (
        etype, "ambiguous, give the canonical type" if hits else
        "the graph has %s" % ", ".join(names)))


def _ntype(book, ntype):
    names = book["ntypes"]
    if ntype is None:
        return _only(names, "node")
    if ntype not in names:
        raise InvalidArgumentError("node type %r: the graph has %s (GKV_EINVAL)"
                                   % (ntype, ", ".join(names)))
    return ntype


# ---- the partition book -------------------------------------------------------

class PartitionBook:
    """The part of dgl.distributed.GraphPartitionBook a trainer uses, over
    the job's partition book (ranges: the partition of an ID is the range
    holding it)."""

    def __init__(self, source):
        self._src = source
        self._b = source.pbook()
        if self._b is None:
            raise NotSupportedError("the servers serve a plain store: there is "
                                    "no partition book (GKV_ENOTSUP)")
        # this trainer's partition: its machine's under gkv-launch (machine
        # m serves partition m), else 0
        self.partid = int(os.environ.get("GKV_MACHINE", 0) or 0)

    def num_partitions(self):
        return self._b["num_parts"]

    @property
    def ntypes(self):
        return list(self._b["ntypes"])

    @property
    def etypes(self):
        return [e.split(":")[1] for e in self._b["etypes"]]

    @property
    def canonical_etypes(self):
        return [tuple(e.split(":")) for e in self._b["etypes"]]

    def metadata(self):
        b = self._b
        return [{"machine_id": p,
                 "num_nodes": sum(r[p][1] - r[p][0] for r in b["node_ranges"]),
                 "num_edges": sum(r[p][1] - r[p][0] for r in b["edge_ranges"])}
                for p in range(b["num_parts"])]

    def _ranges(self, edge, t):
        b = self._b
        i = (b["etypes"].index(_canon_str(b, t)) if edge
             else b["ntypes"].index(_ntype(b, t)))
        return i, np.asarray(b["edge_ranges" if edge else "node_ranges"][i],
                             dtype=np.int64).reshape(-1, 2)

    def _owner(self, edge, ids, t):
        i, r = self._ranges(edge, t)
        ids = _ids(ids).numpy()
        hi = r[-1, 1] if len(r) else 0
        bad = np.nonzero((ids < 0) | (ids >= hi))[0]
        if len(bad):
            raise gkv.RangeError("%s ID %d (index %d) is outside 0..%d (GKV_ERANGE)"
                                 % ("edge" if edge else "node", ids[bad[0]],
                                    bad[0], hi - 1))
        return torch.from_numpy(np.searchsorted(r[:, 1], ids, side="right"))

    def nid2partid(self, nids, ntype=None):
        return self._owner(False, nids, ntype)

    def eid2partid(self, eids, etype=None):
        return self._owner(True, eids, etype)

    def partid2nids(self, partid, ntype=None):
        lo, hi = self._ranges(False, ntype)[1][partid]
        return torch.arange(lo, hi, dtype=torch.int64)

    def partid2eids(self, partid, etype=None):
        lo, hi = self._ranges(True, etype)[1][partid]
        return torch.arange(lo, hi, dtype=torch.int64)

    def _num_nodes(self, ntype):
        return self._b["num_nodes"][self._b["ntypes"].index(ntype)]

    def _split(self, edge, t, mask=None, ids=None, num_trainers=1, rank=0):
        i = (self._b["etypes"].index(_canon_str(self._b, t)) if edge
             else self._b["ntypes"].index(_ntype(self._b, t)))
        return _t(self._src._split(edge, i, mask=mask, ids=ids,
                                   num_trainers=num_trainers, rank=rank))


# ---- tensors --------------------------------------------------------------------

_DTYPES = {torch.float32: "float32", torch.float64: "float64",
           torch.float16: "float16", torch.bfloat16: "bfloat16",
           torch.int64: "int64", torch.int32: "int32", torch.int8: "int8",
           torch.uint8: "uint8", torch.bool: "uint8"}


def _policy_name(book, part_policy, name):
    """The gkv tensor name of a DistTensor: node/<ntype>/<name> for the
    node policy ('node' or 'node:<ntype>'), edge/<canonical>/<name> for
    the edge one."""
    if part_policy is None:
        part_policy = "node"
    kind, _, t = str(part_policy).partition(":")
    if kind == "node":
        return "node/%s/%s" % (_ntype(book, t or None), name)
    if kind == "edge":
        return "edge/%s/%s" % (_canon_str(book, t or None), name)
    raise InvalidArgumentError("part_policy %r: expected 'node[:<ntype>]' or "
                               "'edge[:<etype>]' (GKV_EINVAL)" % (part_policy,))


class DistTensor:
    """DistTensor(shape, dtype, name=None, init_func=None, part_policy=None,
                  persistent=False, *, client=None)

    A tensor of the job, rows partitioned as the graph's nodes (or edges)
    of one type. t[ids] pulls the rows of IDs (a torch tensor viewing the
    pulled memory); t[ids] = rows pushes them (assign). A new name creates
    the tensor on the servers (zeros, or init_func(shape, dtype) written
    in slices); an existing name with the same shape and dtype attaches.
    The graph's own data are reached as DistGraph.ndata / edata."""

    def __init__(self, shape, dtype=torch.float32, name=None, init_func=None,
                 part_policy=None, persistent=False, *, client=None,
                 _full_name=None, _desc=None):
        self._c = _the_client(client)
        if _full_name is not None:
            self._name, d = _full_name, _desc
        else:
            if name is None:
                raise InvalidArgumentError("DistTensor: give it a name (anonymous "
                                           "tensors are not kept) (GKV_EINVAL)")
            if dtype not in _DTYPES:
                raise InvalidArgumentError("DistTensor %r: dtype %s has no gkv "
                                           "dtype (GKV_EINVAL)" % (name, dtype))
            shape = tuple(int(s) for s in shape)
            if not shape:
                raise gkv.ShapeError("DistTensor %r: shape () has no rows "
                                     "(GKV_ESHAPE)" % name)
            book = self._c.pbook()
            self._name = (_policy_name(book, part_policy, name) if book is not None
                          else name)
            self._c.create(self._name, dtype=_DTYPES[dtype], row_shape=shape[1:],
                           hi=shape[0])
            d = self._c.describe(self._name)
            if init_func is not None:
                step = max(1, (1 << 22) // max(1, d["row_bytes"]))
                for lo in range(0, shape[0], step):
                    hi = min(shape[0], lo + step)
                    rows = init_func((hi - lo,) + shape[1:], dtype)
                    self[torch.arange(lo, hi)] = rows
        self._desc = d
        self._bool = _full_name is None and dtype is torch.bool

    @property
    def name(self):
        return self._name

    @property
    def shape(self):
        return (self._desc["hi"],) + tuple(self._desc["row_shape"])

    @property
    def dtype(self):
        dt = getattr(torch, self._desc["dtype"])
        return torch.bool if self._bool else dt

    def __len__(self):
        return self._desc["hi"]

    def __repr__(self):
        return "gkv.dgl.DistTensor(%r, shape=%r, dtype=%s)" % (
            self._name, self.shape, self._desc["dtype"])

    def _index(self, idx):
        if isinstance(idx, slice):
            return torch.arange(*idx.indices(len(self)), dtype=torch.int64)
        if isinstance(idx, int):
            raise InvalidArgumentError("DistTensor %r: index with an ID tensor, "
                                       "not an int (GKV_EINVAL)" % self._name)
        return _ids(idx)

    def __getitem__(self, idx):
        t = _t(self._c.pull(self._name, self._index(idx)))
        return t.bool() if self._bool else t

    def __setitem__(self, idx, rows):
        ids = self._index(idx)
        if not isinstance(rows, torch.Tensor):
            rows = torch.as_tensor(rows)
        if rows.dtype == torch.bool:
            rows = rows.to(torch.uint8)
        self._c.push(self._name, ids, rows.detach().cpu().contiguous(),
                     handler="assign")


class _Data:
    """ndata / edata of one type: name -> DistTensor of the job's tensor
    "<kind>/<type>/<name>", looked up by name (describe) when indexed;
    keys() lists the job's tensors."""

    def __init__(self, g, kind, t):
        self._g, self._kind, self._t = g, kind, t
        self._prefix = "%s/%s/" % (kind, t)
        self._added = {}

    def __getitem__(self, name):
        if name in self._added:
            return self._added[name]
        full = self._prefix + name
        try:
            d = self._g._c.describe(full)
        except NotFoundError:
            raise NotFoundError("%s: no such tensor in the job (GKV_ENOTFOUND)"
                                % full) from None
        return DistTensor(None, client=self._g._c, _full_name=full, _desc=d)

    def __setitem__(self, name, value):
        if not isinstance(value, DistTensor):
            raise InvalidArgumentError("ndata/edata[%r]: assign a DistTensor "
                                       "(GKV_EINVAL)" % name)
        self._added[name] = value

    def __contains__(self, name):
        try:
            self[name]
        except NotFoundError:
            return False
        return True

    def keys(self):
        names = [d["name"][len(self._prefix):] for d in self._g._c.tensors()
                 if d["name"].startswith(self._prefix) and "#" not in d["name"]]
        return sorted(set(n for n in names if "/" not in n) | set(self._added))

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.keys())

    def items(self):
        return [(k, self[k]) for k in self.keys()]


class _TypeView:
    def __init__(self, g, kind, t):
        self._g, self._kind, self._t = g, kind, t

    @property
    def data(self):
        return _Data(self._g, self._kind, self._t)


class _TypeViews:
    def __init__(self, g, kind):
        self._g, self._kind = g, kind

    def __getitem__(self, t):
        b = self._g._book._b
        t = _ntype(b, t) if self._kind == "node" else _canon_str(b, t)
        return _TypeView(self._g, self._kind, t)


class DistGraph:
    """DistGraph(graph_name, gpb=None, part_config=None, *, client=None)

    The job's graph (the servers' partitions), as dgl.distributed.DistGraph:
    ndata / edata (the only type's tensors; g.nodes[ntype].data and
    g.edges[etype].data for a heterogeneous graph), num_nodes / num_edges,
    ntypes / etypes / canonical_etypes, sample_neighbors,
    get_partition_book, barrier. The graph_name must be the partition
    config's (checked)."""

    def __init__(self, graph_name, gpb=None, part_config=None, *, client=None):
        self._c = _the_client(client)
        self._book = PartitionBook(self._c)
        gn = self._book._b["graph_name"]
        if graph_name is not None and graph_name != gn:
            raise InvalidArgumentError("DistGraph %r: the servers serve graph %r "
                                       "(GKV_EINVAL)" % (graph_name, gn))
        self.graph_name = gn
        self.nodes = _TypeViews(self, "node")
        self.edges = _TypeViews(self, "edge")

    @property
    def client(self):
        return self._c


    @property
    def ntypes(self):
        return self._book.ntypes

    @property
    def etypes(self):
        return self._book.etypes

    @property
    def canonical_etypes(self):
        return self._book.canonical_etypes

    def is_homogeneous(self):
        return len(self.ntypes) == 1 and len(self.canonical_etypes) == 1

    def num_nodes(self, ntype=None):
        b = self._book._b
        if ntype is None:
            return sum(b["num_nodes"])
        return b["num_nodes"][b["ntypes"].index(_ntype(b, ntype))]

    def num_edges(self, etype=None):
        b = self._book._b
        if etype is None:
            return sum(b["num_edges"])
        return b["num_edges"][b["etypes"].index(_canon_str(b, etype))]

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def ndata(self):
        return _Data(self, "node", _ntype(self._book._b, None))

    @property
    def edata(self):
        return _Data(self, "edge", _canon_str(self._book._b, None))

    def get_partition_book(self):
        return self._book

    def barrier(self, timeout_ms=0):
        self._c.barrier(timeout_ms=timeout_ms)

    def rank(self):
        return _trainers(self._c)[0]

    def sample_neighbors(self, seeds, fanout, edge_dir="in", prob=None,
                         replace=False, *, seed=0):
        """One hop of neighbors of seeds (IDs, or {ntype: IDs}), fanout an
        int or {etype: int}: a DGL graph of the whole node set holding the
        sampled edges (dgl.EID: their IDs), as
        dgl.distributed.sample_neighbors; without dgl, {canonical etype:
        (src, dst, eid)} torch tensors. prob: the name of an edge feature
        (g.edata / g.edges[etype].data) whose values weigh the edges (a
        zero-weight edge is never picked; a 0/1 mask keeps its 1 edges), as
        DGL's: on a heterogeneous graph the edge types without that feature
        are sampled uniformly; or {etype: name}. Sampled on the servers
        (gkv_sample_opts.edge_w_feat)."""
        seeds = ({k: _ids(v) for k, v in seeds.items()} if isinstance(seeds, dict)
                 else _ids(seeds))
        fan = fanout
        if isinstance(fanout, dict):
            fan = {_canon_str(self._book._b, k): v for k, v in fanout.items()}
        edges = self._c.sample_neighbors(seeds, fan, seed=seed, dir=edge_dir,
                                         replace=replace,
                                         prob=_prob(self._c, self._book._b, prob))
        out = {tuple(n.split(":")): tuple(_t(a) for a in e)
               for n, e in zip(self._book._b["etypes"], edges)}
        if _dgl is None:
            return out
        if self.is_homogeneous():
            (s, d, e), = out.values()
            sg = _dgl.graph((s, d), num_nodes=self.num_nodes())
            sg.edata[_dgl.EID] = e
            return sg
        sg = _dgl.heterograph({k: (v[0], v[1]) for k, v in out.items()},
                              num_nodes_dict={t: self.num_nodes(t)
                                              for t in self.ntypes})
        for k, v in out.items():
            sg.edges[k].data[_dgl.EID] = v[2]
        return sg


def _prob(client, book, prob):
    """DGL's prob= as Client.sample_neighbors takes it: None; a feature name
    (one edge type: that name; several: {etype: name} for the types that
    have the tensor edge/<etype>/<name>, as DGL samples the others
    uniformly; none having it is NotFoundError); or {etype: name or None}
    by canonical names."""
    if prob is None:
        return None
    if isinstance(prob, dict):
        return {_canon_str(book, k): v for k, v in prob.items()}
    if not isinstance(prob, str):
        raise InvalidArgumentError("prob: expected an edge feature's name or "
                                   "{etype: name}, not %s (GKV_EINVAL)"
                                   % type(prob).__name__)
    ets = book["etypes"]
    if len(ets) == 1:
        return prob
    have = {d["name"] for d in client.tensors()}
    hits = {e: prob for e in ets if "edge/%s/%s" % (e, prob) in have}
    if not hits:
        raise NotFoundError("prob %r: no edge type has the feature (no tensor "
                            "edge/<etype>/%s) (GKV_ENOTFOUND)" % (prob, prob))
    return hits


# ---- learnable embeddings ------------------------------------------------------

class DistEmbedding:
    """DistEmbedding(num_embeddings, embedding_dim, name, init_func=None,
                     part_policy=None, *, client=None)

    A float32 table (num_embeddings, embedding_dim) on the servers. emb(ids)
    pulls the rows; when autograd is on they take a gradient, which
    SparseAdagrad / SparseAdam push to the servers with their handler (the
    step is applied where the rows live, duplicates averaged as DGL does).
    init_func(shape, dtype) -> rows, else zeros (as init='uniform' etc. on
    gkv.Client.create, through init=, a=, b=)."""

    def __init__(self, num_embeddings, embedding_dim, name=None, init_func=None,
                 part_policy=None, *, client=None, init=None, a=0.0, b=0.0,
                 seed=0):
        c = _the_client(client)
        if name is None:
            raise InvalidArgumentError("DistEmbedding: give it a name (GKV_EINVAL)")
        book = c.pbook()
        full = _policy_name(book, part_policy, name) if book is not None else name
        if init is not None:
            c.create(full, dtype="float32", row_shape=(int(embedding_dim),),
                     hi=int(num_embeddings), init=init, a=a, b=b, seed=seed)
            d = c.describe(full)
            self._tensor = DistTensor(None, client=c, _full_name=full, _desc=d)
        else:
            self._tensor = DistTensor((num_embeddings, embedding_dim),
                                      torch.float32, name, init_func,
                                      part_policy, client=c)
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self._trace = []

    @property
    def name(self):
        return self._tensor.name

    @property
    def weight(self):
        return self._tensor

    def __call__(self, idx, device="cpu"):
        idx = _ids(idx)
        emb = self._tensor[idx]
        if torch.is_grad_enabled():
            emb.requires_grad_(True)
            self._trace.append((idx, emb))
        return emb.to(device)

    def reset_trace(self):
        self._trace = []


class _SparseOptimizer:
    handler = None

    def __init__(self, params, lr):
        params = list(params)
        for p in params:
            if not isinstance(p, DistEmbedding):
                raise InvalidArgumentError("%s: params must be DistEmbedding "
                                           "objects, got %r (GKV_EINVAL)"
                                           % (type(self).__name__, type(p)))
        self._params, self.lr = params, float(lr)

    def _args(self):
        return {"lr": self.lr}

    def zero_grad(self):
        for p in self._params:
            p.reset_trace()

    def step(self):
        """Pushes each embedding's gradients, one push per embedding: the
        servers apply the optimizer to the rows they own."""
        with torch.no_grad():
            for p in self._params:
                ids = [i for i, e in p._trace if e.grad is not None]
                grads = [e.grad for i, e in p._trace if e.grad is not None]
                if ids:
                    p._tensor._c.push(p.name, torch.cat(ids),
                                      torch.cat(grads).to("cpu", torch.float32)
                                      .contiguous(),
                                      handler=self.handler, **self._args())
                p.reset_trace()


class SparseAdagrad(_SparseOptimizer):
    """dgl.distributed.optim.SparseAdagrad(params, lr, eps=1e-10): per row
    s += g*g; row -= lr * g / (sqrt(s) + eps), on the servers."""
    handler = "adagrad"

    def __init__(self, params, lr, eps=1e-10):
        super().__init__(params, lr)
        self.eps = float(eps)

    def _args(self):
        return {"lr": self.lr, "eps": self.eps}


class SparseAdam(_SparseOptimizer):
    """dgl.distributed.optim.SparseAdam(params, lr, betas=(0.9, 0.999),
    eps=1e-8): Adam with a per-row step count, on the servers."""
    handler = "adam"

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, lr)
        self.betas, self.eps = (float(betas[0]), float(betas[1])), float(eps)

    def _args(self):
        return {"lr": self.lr, "eps": self.eps, "beta1": self.betas[0],
                "beta2": self.betas[1]}


# ---- splits -------------------------------------------------------------------------

def _split(edge, items, partition_book, t, rank, num_trainers, force_even):
    if not force_even:
        raise NotSupportedError("force_even=False is not supported: gkv splits "
                                "evenly, preferring each trainer's own "
                                "partition (GKV_ENOTSUP)")
    book = partition_book
    if book is None:
        book = PartitionBook(_the_client(None))
    elif isinstance(book, DistGraph):
        book = book.get_partition_book()
    if not isinstance(book, PartitionBook):
        raise InvalidArgumentError("partition_book: expected "
                                   "g.get_partition_book() (GKV_EINVAL)")
    if rank is None or num_trainers is None:
        r, n = _trainers(book._src) if isinstance(book._src, gkv.Client) else (0, 1)
        rank = r if rank is None else rank
        num_trainers = n if num_trainers is None else num_trainers
    if isinstance(items, DistTensor):            # a stored mask (bool as u8)
        return book._split(edge, t, mask=items[slice(None)].to(torch.uint8),
                           num_trainers=num_trainers, rank=rank)
    if isinstance(items, torch.Tensor) and items.dtype == torch.bool:
        return book._split(edge, t, mask=items.contiguous(),
                           num_trainers=num_trainers, rank=rank)
    if isinstance(items, np.ndarray) and items.dtype == np.bool_:
        return book._split(edge, t, mask=np.ascontiguousarray(items),
                           num_trainers=num_trainers, rank=rank)
    return book._split(edge, t, ids=_ids(items), num_trainers=num_trainers,
                       rank=rank)


def node_split(nodes, partition_book=None, ntype="_N", rank=None,
               force_even=True, node_trainer_ids=None, *, num_trainers=None):
    """dgl.distributed.node_split: this trainer's share of 'nodes' (a bool
    mask over every node of ntype, a DistTensor of it, or IDs), as
    gkv_pbook_node_split: balanced shares, each trainer's from its own
    partition first. rank / num_trainers default to initialize()'s rank
    and group_size. Returns sorted int64 IDs."""
    if node_trainer_ids is not None:
        raise NotSupportedError("node_trainer_ids is not supported (GKV_ENOTSUP)")
    if ntype == "_N" and partition_book is not None:
        b = (partition_book.get_partition_book() if isinstance(partition_book, DistGraph)
             else partition_book)._b
        ntype = None if len(b["ntypes"]) == 1 else ntype
    return _split(False, nodes, partition_book, ntype, rank, num_trainers,
                  force_even)


def edge_split(edges, partition_book=None, etype=None, rank=None,
               force_even=True, edge_trainer_ids=None, *, num_trainers=None):
    """dgl.distributed.edge_split: as node_split, for the edges of etype."""
    if edge_trainer_ids is not None:
        raise NotSupportedError("edge_trainer_ids is not supported (GKV_ENOTSUP)")
    return _split(True, edges, partition_book, etype, rank, num_trainers,
                  force_even)


# ---- mini-batches ---------------------------------------------------------------------

class NeighborSampler:
    """dgl.dataloading.NeighborSampler(fanouts, edge_dir='in', prob=None,
    mask=None, replace=False): fanouts per layer, the input layer first
    (each an int or {etype: int}); prob (or mask, a 0/1 feature): an edge
    feature's name weighing the edges, as DistGraph.sample_neighbors. dgl's
    own NeighborSampler is accepted as well."""

    def __init__(self, fanouts, edge_dir="in", prob=None, mask=None,
                 replace=False):
        if prob is not None and mask is not None:
            raise InvalidArgumentError("NeighborSampler: give prob or mask, "
                                       "not both (GKV_EINVAL)")
        self.fanouts, self.edge_dir, self.replace = list(fanouts), edge_dir, replace
        self.prob = prob if prob is not None else mask


def _sampling(book, graph_sampler):
    """(fanouts, edge_dir, replace, prob) of a NeighborSampler (ours or
    dgl's), fanout dicts keyed by canonical etype."""
    fanouts = getattr(graph_sampler, "fanouts", None)
    if fanouts is None:
        raise InvalidArgumentError("graph_sampler: expected a NeighborSampler "
                                   "(fanouts per layer) (GKV_EINVAL)")
    fan = []
    for f in fanouts:
        if isinstance(f, dict):
            f = {_canon_str(book, k): int(v) for k, v in f.items()}
        fan.append(f if isinstance(f, dict) else int(f))
    return (fan, getattr(graph_sampler, "edge_dir", "in"),
            bool(getattr(graph_sampler, "replace", False)),
            getattr(graph_sampler, "prob", None))


class CSCBlock:
    """A block without dgl: per canonical edge type, the in-edges of the
    destination nodes in CSC form. srcnodes[ntype] / dstnodes[ntype]: the
    global IDs (dst are the first num_dst of src, as in DGL); indptr[et]
    (num_dst + 1) and indices[et] (block-local source indices) and eids[et]
    (global edge IDs in the same order); srcdata / dstdata: dicts the
    loader fills with features and labels."""

    def __init__(self, book, blk):
        self.ntypes = list(book["ntypes"])
        self.canonical_etypes = [tuple(e.split(":")) for e in book["etypes"]]
        self.srcnodes = {t: _t(blk.nodes[i]) for i, t in enumerate(self.ntypes)}
        self.dstnodes = {t: self.srcnodes[t][:blk.num_dst[i]]
                         for i, t in enumerate(self.ntypes)}
        self.num_src = dict(zip(self.ntypes, blk.num_src))
        self.num_dst = dict(zip(self.ntypes, blk.num_dst))
        self.indptr, self.indices, self.eids = {}, {}, {}
        for et, (s, d, e) in zip(self.canonical_etypes, blk.edges):
            s, d, e = _t(s), _t(d), _t(e)
            nd = self.num_dst[et[2]]
            order = torch.argsort(d, stable=True)
            cnt = torch.bincount(d, minlength=nd)
            ptr = torch.zeros(nd + 1, dtype=torch.int64)
            torch.cumsum(cnt, 0, out=ptr[1:])
            self.indptr[et], self.indices[et], self.eids[et] = ptr, s[order], e[order]
        self.srcdata, self.dstdata = {}, {}

    def num_src_nodes(self, ntype=None):
        return self.num_src[ntype or self.ntypes[0]]

    def num_dst_nodes(self, ntype=None):
        return self.num_dst[ntype or self.ntypes[0]]

    def __repr__(self):
        return "gkv.dgl.CSCBlock(num_src=%r, num_dst=%r)" % (self.num_src, self.num_dst)


def to_block(book, blk):
    """A gkv.Block as a DGL block (dgl.create_block; srcdata/dstdata[dgl.NID]
    the global node IDs, edata[dgl.EID] the global edge IDs), or a CSCBlock
    without dgl."""
    if _dgl is None:
        return CSCBlock(book, blk)
    nts, ets = book["ntypes"], [tuple(e.split(":")) for e in book["etypes"]]
    homo = len(nts) == 1 and len(ets) == 1
    edges = [tuple(_t(a) for a in e) for e in blk.edges]
    if homo:
        b = _dgl.create_block((edges[0][0], edges[0][1]),
                              num_src_nodes=blk.num_src[0],
                              num_dst_nodes=blk.num_dst[0])
        nodes = _t(blk.nodes[0])
        b.srcdata[_dgl.NID] = nodes
        b.dstdata[_dgl.NID] = nodes[:blk.num_dst[0]]
        b.edata[_dgl.EID] = edges[0][2]
        return b
    b = _dgl.create_block({et: (e[0], e[1]) for et, e in zip(ets, edges)},
                          num_src_nodes=dict(zip(nts, blk.num_src)),
                          num_dst_nodes=dict(zip(nts, blk.num_dst)))
    for i, t in enumerate(nts):
        nodes = _t(blk.nodes[i])
        b.srcnodes[t].data[_dgl.NID] = nodes
        b.dstnodes[t].data[_dgl.NID] = nodes[:blk.num_dst[i]]
    for et, e in zip(ets, edges):
        b.edges[et].data[_dgl.EID] = e[2]
    return b


def _cpu_only(who, device):
    """DGL's device= of a distributed loader: None or 'cpu' only."""
    if device is not None and str(device) != "cpu":
        raise NotSupportedError(
            "%s: device=%r: gkv.dgl's loaders give CPU tensors (DGL's "
            "distributed loaders take only 'cpu' as well): give None or 'cpu' "
            "and move the batch with .to(device) (GKV_ENOTSUP)" % (who, device))


class _DataLoader:
    """What both data loaders do with their loader (self._loader); each
    is kept in _loaders (weakly) so exit_client can close it."""

    def _track(self, c):
        self._c = c
        _loaders.add(self)

    def __len__(self):
        return len(self._loader)

    def set_epoch(self, epoch):
        self._loader.set_epoch(epoch)

    def close(self):
        self._loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class DistNodeDataLoader(_DataLoader):
    """DistNodeDataLoader(g, nodes, graph_sampler, *, batch_size,
                          shuffle=False, drop_last=False, feats=(),
                          label=None, where=None, prefetch=0,
                          workers=0, seed=0, device=None)

    dgl.dataloading.DistNodeDataLoader over a gkv.Loader: each iteration
    yields (input_nodes, seeds, blocks), torch tensors viewing the batch
    (no copy) and DGL blocks (CSCBlock without dgl), sampled on the
    servers ahead of the trainer (where='server', the default; 'client':
    hop by hop through them, the same batches). nodes: IDs (node_split's
    result) or {ntype: IDs}. feats: names of g.ndata tensors fetched with
    each batch into blocks[0].srcdata[name]; label: a name whose seed rows
    go into blocks[-1].dstdata[name] (both with the batch, in the same
    request). device: None or 'cpu' (the batches are CPU tensors; others
    are NotSupportedError). Iterating it after a break goes on with the
    epoch's remaining batches; after the epoch's end, with the next epoch
    (set_epoch(e) chooses one), as gkv.Loader. exit_client() closes it.

    A sampler with prob (an edge feature weighing the edges) samples
    through the client (where='client', the default then: a gkv.Loader
    with prob=, its batches made ahead by its workers as without prob): a
    server-side batch request cannot carry the feature's name, so
    where='server' with prob is NotSupportedError. The seeds are copied
    and checked (in range, none twice) when the loader is made, with
    prob as without."""

    def __init__(self, g, nodes, graph_sampler, *, batch_size, shuffle=False,
                 drop_last=False, feats=(), label=None, where=None,
                 prefetch=0, workers=0, seed=0, device=None, **kw):
        if not isinstance(g, DistGraph):
            raise InvalidArgumentError("DistNodeDataLoader: g must be a "
                                       "gkv.dgl.DistGraph (GKV_EINVAL)")
        _cpu_only("DistNodeDataLoader", device)
        kw.pop("num_workers", None)
        if kw:
            raise InvalidArgumentError("DistNodeDataLoader: unknown arguments %s "
                                       "(GKV_EINVAL)" % ", ".join(sorted(kw)))
        book = g._book._b
        if isinstance(nodes, dict):
            if len(nodes) != 1:
                raise NotSupportedError("DistNodeDataLoader: seeds of one node "
                                        "type per loader (GKV_ENOTSUP)")
            (self._ntype, nodes), = nodes.items()
            self._ntype = _ntype(book, self._ntype)
        else:
            self._ntype = _ntype(book, None)
        fan, edge_dir, replace, prob = _sampling(book, graph_sampler)
        self._feats = list(feats)
        self._label = label
        pre = "node/%s/" % self._ntype
        self._book = book
        if prob is not None and where not in (None, "client"):
            raise NotSupportedError(
                "DistNodeDataLoader: a sampler with prob=%r samples "
                "through the client (where='client'), not where=%r: a "
                "server-side batch request cannot carry an edge feature "
                "(GKV_ENOTSUP)" % (prob, where))
        self._loader = gkv.Loader(
            g._c, _ids(nodes, "nodes"), batch_size=batch_size, fanouts=fan,
            feats=[self._full(n) for n in self._feats],
            label=pre + label if label is not None else None,
            where=where or ("server" if prob is None else "client"),
            seed_ntype=self._ntype, shuffle=shuffle, drop_last=drop_last,
            shuffle_seed=seed, sample_seed=seed, dir=edge_dir, replace=replace,
            prefetch=prefetch, workers=workers,
            prob=None if prob is None else _prob(g._c, book, prob))
        self._track(g._c)

    def _full(self, n):
        return n if n.startswith("node/") else "node/%s/%s" % (self._ntype, n)


    def __iter__(self):
        nts = self._book["ntypes"]
        homo = len(nts) == 1 or _dgl is None
        for b in self._loader:
            blocks = [to_block(self._book, x) for x in b.blocks]
            for name, f in zip(self._feats, b.feats):
                t = self._full(name).split("/")[1]
                where = blocks[0].srcdata if homo else blocks[0].srcnodes[t].data
                where[name] = _t(f)
            if self._label is not None:
                where = (blocks[-1].dstdata if homo
                         else blocks[-1].dstnodes[self._ntype].data)
                where[self._label] = _t(b.label)
            seeds = _t(b.seeds)
            first = b.blocks[0]
            if len(nts) == 1:
                input_nodes = _t(first.nodes[0])
            else:
                input_nodes = {t: _t(first.nodes[k]) for k, t in enumerate(nts)}
                seeds = {self._ntype: seeds}
            yield input_nodes, seeds, blocks


NodeDataLoader = DistNodeDataLoader


# ---- link prediction ---------------------------------------------------------------

class Uniform:
    """dgl.dataloading.negative_sampler.Uniform(k): k negative pairs
    (u, v') per seed edge (u, v), v' uniform over the nodes of v's type.
    dgl's own (Uniform, PerSourceUniform) is accepted as well."""

    def __init__(self, k):
        self.k = int(k)


negative_sampler = type("negative_sampler", (), {
    "__doc__": "dgl.dataloading.negative_sampler's names gkv samples by",
    "Uniform": Uniform, "PerSourceUniform": Uniform})


class EdgePredictionSampler:
    """What as_edge_prediction_sampler returns: a NeighborSampler with the
    link-prediction options (dgl's own is accepted as well)."""

    def __init__(self, sampler, exclude=None, reverse_eids=None,
                 reverse_etypes=None, negative_sampler=None,
                 prefetch_labels=None):
        self.sampler, self.exclude = sampler, exclude
        self.reverse_eids, self.reverse_etypes = reverse_eids, reverse_etypes
        self.negative_sampler = negative_sampler


def as_edge_prediction_sampler(sampler, exclude=None, reverse_eids=None,
                               reverse_etypes=None, negative_sampler=None,
                               prefetch_labels=None):
    """dgl.dataloading.as_edge_prediction_sampler: sampler (a
    NeighborSampler) over the end nodes of seed edges, with exclude None,
    'self' or 'reverse_types' (reverse_etypes {etype: its reverse etype})
    and negative_sampler Uniform(k) or None."""
    return EdgePredictionSampler(sampler, exclude, reverse_eids,
                                 reverse_etypes, negative_sampler,
                                 prefetch_labels)


def _edge_sampling(book, graph_sampler, etype):
    """(neighbor sampler, num_neg, exclude, reverse_etype) of an edge
    prediction sampler (ours or dgl's), or of a plain NeighborSampler (no
    negatives, nothing excluded)."""
    if not hasattr(graph_sampler, "negative_sampler"):
        return graph_sampler, None, None, None
    ns, num_neg = graph_sampler.negative_sampler, None
    if ns is not None:
        if (type(ns).__name__ not in ("Uniform", "PerSourceUniform")
                or not isinstance(getattr(ns, "k", None), int)):
            raise NotSupportedError(
                "negative_sampler %s: gkv samples Uniform(k) negatives (the "
                "seed's source, a uniform node of its destination type) "
                "(GKV_ENOTSUP)" % type(ns).__name__)
        num_neg = ns.k
    ex, rev = graph_sampler.exclude, None
    if ex == "reverse_types":
        rmap = graph_sampler.reverse_etypes or {}
        rmap = {_canon_str(book, k): v for k, v in rmap.items()}
        if etype not in rmap:
            raise InvalidArgumentError(
                "exclude='reverse_types': reverse_etypes names no reverse of "
                "%s (GKV_EINVAL)" % etype)
        ex, rev = ["self", "reverse"], _canon_str(book, rmap[etype])
        paired = book["reverse_etypes"].get(etype)
        if paired is None:
            raise InvalidArgumentError(
                "exclude='reverse_types': the graph was partitioned without "
                "reverse edge types, so gkv does not know the reverse of each "
                "%s edge: partition it with reverse_etypes={%r: %r} "
                "(gkv.partition, gkv-partition --reverse-etypes %s=%s) "
                "(GKV_EINVAL)" % (etype, etype, rev, etype, rev))
        if paired != rev:
            raise InvalidArgumentError(
                "exclude='reverse_types': reverse_etypes gives %s as the "
                "reverse of %s, but the graph was partitioned with %s as its "
                "reverse (GKV_EINVAL)" % (rev, etype, paired))
    elif ex == "reverse_id":
        raise NotSupportedError(
            "exclude='reverse_id' (reverse edges in the same edge type, by "
            "reverse_eids) is not supported: gkv excludes the reverse edges "
            "of another edge type; partition with reverse_etypes and use "
            "exclude='reverse_types' (GKV_ENOTSUP)")
    elif ex not in (None, "self"):
        raise NotSupportedError("exclude=%r: gkv excludes None, 'self' or "
                                "'reverse_types' (GKV_ENOTSUP)" % (ex,))
    return graph_sampler.sampler, num_neg, ex, rev


class PairGraph:
    """A pair graph without dgl: the seed edges (or their negatives) between
    the batch's compacted nodes, those of blocks[-1]'s destination nodes.
    nodes[ntype]: their global IDs; etype: the canonical seed edge type;
    src, dst: local indices (into nodes[etype[0]] / nodes[etype[2]]);
    eids: the seed edges' global IDs (None for negatives)."""

    def __init__(self, nodes, etype, src, dst, eids):
        self.nodes, self.etype = nodes, etype
        self.ntypes, self.canonical_etypes = list(nodes), [etype]
        self.src, self.dst, self.eids = src, dst, eids

    def edges(self, etype=None):
        return self.src, self.dst

    def num_nodes(self, ntype=None):
        return len(self.nodes[ntype or self.ntypes[0]])

    def num_edges(self, etype=None):
        return len(self.src)

    def __repr__(self):
        return "gkv.dgl.PairGraph(%s, num_edges=%d)" % (":".join(self.etype),
                                                        len(self.src))


def _pair_graph(book, blk, etype, src, dst, eids):
    """The pairs (src, dst local to blocks[-1]'s destination nodes) as a
    DGL graph of those nodes (ndata[dgl.NID] their global IDs,
    edata[dgl.EID] the seed edges' IDs), every edge type of the graph
    present as in DGL's, or a PairGraph without dgl."""
    nts = book["ntypes"]
    nodes = {t: _t(blk.nodes[i])[:blk.num_dst[i]] for i, t in enumerate(nts)}
    if _dgl is None:
        return PairGraph(nodes, etype, src, dst, eids)
    ets = [tuple(e.split(":")) for e in book["etypes"]]
    if len(nts) == 1 and len(ets) == 1:
        g = _dgl.graph((src, dst), num_nodes=blk.num_dst[0])
        g.ndata[_dgl.NID] = nodes[nts[0]]
        if eids is not None:
            g.edata[_dgl.EID] = eids
        return g
    empty = torch.zeros(0, dtype=torch.int64)
    g = _dgl.heterograph({et: (src, dst) if et == etype else (empty, empty)
                          for et in ets},
                         num_nodes_dict={t: len(nodes[t]) for t in nts})
    for t in nts:
        g.nodes[t].data[_dgl.NID] = nodes[t]
    if eids is not None:
        g.edges[etype].data[_dgl.EID] = eids
    return g


class DistEdgeDataLoader(_DataLoader):
    """DistEdgeDataLoader(g, eids, graph_sampler, *, batch_size,
                          shuffle=False, drop_last=False, feats=(),
                          where='client', prefetch=0, workers=0, seed=0,
                          device=None, exclude=None, reverse_eids=None,
                          reverse_etypes=None, negative_sampler=None)

    dgl.dataloading.DistEdgeDataLoader for link prediction over a
    gkv.Loader with edge seeds: each iteration yields (input_nodes,
    pair_graph, neg_pair_graph, blocks) ((input_nodes, pair_graph, blocks)
    when the sampler has no negative sampler). eids: edge IDs (edge_split's
    result) or {etype: IDs} of one edge type. graph_sampler:
    as_edge_prediction_sampler(NeighborSampler(fanouts),
    negative_sampler=Uniform(k), exclude=None | 'self' | 'reverse_types',
    reverse_etypes={etype: reverse}) (gkv's or dgl's), or a plain
    NeighborSampler: alone (no negatives, nothing excluded), or with
    exclude, reverse_eids, reverse_etypes and negative_sampler given to
    the loader, as DGL's DistEdgeDataLoader takes them (the same as
    as_edge_prediction_sampler with them; both at once is
    InvalidArgumentError). exclude='reverse_types' needs the graph
    partitioned with that pair as reverse_etypes (checked here). The pair graphs hold the seed edges and the negatives
    (k per seed edge, with its source) over blocks[-1]'s destination nodes,
    as DGL graphs (dgl.NID, dgl.EID) or PairGraph without dgl; excluded
    edges are in no block. feats: g.ndata names (or 'node/<ntype>/<name>')
    fetched into blocks[0].srcdata[name] (srcnodes[ntype].data[name] with
    several node types; CSCBlock.srcdata['node/<ntype>/<name>'] then).
    Sampled hop by hop through the servers (where
    'client'; 'server' cannot carry the excluded edges: NotSupportedError);
    a sampler with prob is NotSupportedError here. device: None or 'cpu',
    as DistNodeDataLoader. exit_client() closes it."""

    def __init__(self, g, eids, graph_sampler, *, batch_size, shuffle=False,
                 drop_last=False, feats=(), where="client", prefetch=0,
                 workers=0, seed=0, device=None, exclude=None,
                 reverse_eids=None, reverse_etypes=None, negative_sampler=None,
                 **kw):
        if not isinstance(g, DistGraph):
            raise InvalidArgumentError("DistEdgeDataLoader: g must be a "
                                       "gkv.dgl.DistGraph (GKV_EINVAL)")
        _cpu_only("DistEdgeDataLoader", device)
        for k in ("num_workers", "use_ddp"):
            kw.pop(k, None)
        if kw:
            raise InvalidArgumentError("DistEdgeDataLoader: unknown arguments %s "
                                       "(GKV_EINVAL)" % ", ".join(sorted(kw)))
        lp = {k: v for k, v in (("exclude", exclude),
                                ("reverse_eids", reverse_eids),
                                ("reverse_etypes", reverse_etypes),
                                ("negative_sampler", negative_sampler))
              if v is not None}
        if lp:          # DGL's own form: a plain sampler, the options here
            if hasattr(graph_sampler, "negative_sampler"):
                raise InvalidArgumentError(
                    "DistEdgeDataLoader: %s given both to the loader and in "
                    "as_edge_prediction_sampler(...): give them in one place "
                    "(GKV_EINVAL)" % ", ".join(sorted(lp)))
            graph_sampler = as_edge_prediction_sampler(graph_sampler, **lp)
        book = self._book = g._book._b
        if isinstance(eids, dict):
            if len(eids) != 1:
                raise NotSupportedError("DistEdgeDataLoader: seed edges of one "
                                        "edge type per loader (GKV_ENOTSUP)")
            (et, eids), = eids.items()
            self._etype = _canon_str(book, et)
        else:
            self._etype = _canon_str(book, None)
        sampler, num_neg, ex, rev = _edge_sampling(book, graph_sampler,
                                                   self._etype)
        fan, edge_dir, replace, prob = _sampling(book, sampler)
        if prob is not None:
            raise NotSupportedError("DistEdgeDataLoader: prob=%r is not "
                                    "supported with edge seeds (GKV_ENOTSUP)"
                                    % (prob,))
        self._neg = num_neg is not None
        self._feats = [n if n.startswith("node/") else
                       "node/%s/%s" % (_ntype(book, None), n) for n in feats]
        self._names = [n.split("/")[2] for n in self._feats]
        self._loader = gkv.Loader(
            g._c, _ids(eids, "eids"), batch_size=batch_size, fanouts=fan,
            feats=self._feats, where=where, seed_etype=self._etype,
            num_neg=num_neg or 0, exclude=ex, reverse_etype=rev,
            shuffle=shuffle, drop_last=drop_last, shuffle_seed=seed,
            sample_seed=seed, dir=edge_dir, replace=replace,
            prefetch=prefetch, workers=workers)
        self._track(g._c)

    def __iter__(self):
        nts = self._book["ntypes"]
        et = tuple(self._etype.split(":"))
        for b in self._loader:
            blocks = [to_block(self._book, x) for x in b.blocks]
            for name, full, f in zip(self._names, self._feats, b.feats):
                if len(nts) == 1:
                    blocks[0].srcdata[name] = _t(f)
                elif _dgl is None:      # one dict for every type
                    blocks[0].srcdata[full] = _t(f)
                else:
                    blocks[0].srcnodes[full.split("/")[1]].data[name] = _t(f)
            first, last = b.blocks[0], b.blocks[-1]
            input_nodes = (_t(first.nodes[0]) if len(nts) == 1 else
                           {t: _t(first.nodes[k]) for k, t in enumerate(nts)})
            pair = _pair_graph(self._book, last, et, _t(b.pos_src),
                               _t(b.pos_dst), _t(b.seeds))
            if not self._neg:
                yield input_nodes, pair, blocks
                continue
            neg = _pair_graph(self._book, last, et, _t(b.neg_src),
                              _t(b.neg_dst), None)
            yield input_nodes, pair, neg, blocks


EdgeDataLoader = DistEdgeDataLoader


def _main(argv=None):
    from .dgl_convert import main
    return main(argv)


if __name__ == "__main__":
    raise SystemExit(_main())
