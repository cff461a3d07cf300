"""gkv: an embeddable tensor store with graph semantics, from Python.

The objects mirror the C API (gkv.h):

  Store      the embedded store: create, list, describe tensors; pull,
             push with the handlers (assign, add, sgd, adagrad, adam),
             write-back mode
  Client     a job's servers: pull, push, create, delete, barrier, the
             partition book, sample_neighbors, sample_blocks
  Server     a gkv server on a thread of this process (tests, notebooks)
  partition  partitions a graph given as arrays (gkv_partition_write, the
             library of gkv-partition)
  Loader     mini-batches (gkv_loader.h): blocks, seeds, features and
             labels made ahead by worker threads, in place, each array a
             view into its batch (Batch)
  GpuLoader  the same batches put on a GPU (gkv_gpu_loader, when built
             with CUDA): blocks and input rows as CUDA DLPack arrays
             (GpuBatch), valid until the next batch
  Partition  one partition of a partitioned graph opened in process, with
             a sampler: the in-process answer the servers' sampling equals
  Array      what every call returns: C-contiguous CPU memory the Array
             owns, lent without a copy through __dlpack__ (DLPack 1.x and
             the legacy capsule) and the buffer protocol
  Error      the base of the exceptions, one subclass per gkv error code
             (error_classes maps "GKV_EINVAL" to InvalidArgumentError ...);
             each has .code, .name and .message

Inputs (IDs, rows, out=) are numpy arrays, torch tensors, or anything with
__dlpack__ or the buffer protocol, taken without a copy; they must be
C-contiguous and of the tensor's dtype and row shape, else
InvalidArgumentError / ShapeError is raised and nothing changes. Calls that
may block release the interpreter lock.

Worker processes: a Store used in a child after fork() reopens by itself,
and a Client reconnects by itself there (Client says how), so torch
DataLoader workers with the default 'fork' context work, as do 'spawn'
and 'forkserver' ones (a Client pickles). The child gets a fresh copy of
nanomsg (the extension loads it with dlopen; nanomsg's threads are not
copied by fork). A Loader's worker threads stay in the parent: make
loaders in the worker.
"""
import array
import os
import threading

from . import _gkv
from ._gkv import (Array, Error, Store, __c_version__, error_classes,  # noqa: F401
                   strerror)

# the exception classes: gkv.NotFoundError, gkv.ShapeError, ...
globals().update({cls.__name__: cls for cls in error_classes.values()})

__version__ = "0.1.0"
__all__ = ["Array", "Batch", "Block", "Client", "Error", "GpuBatch", "GpuLoader",
           "Loader", "Partition",
           "Server", "Store",
           "error_classes", "partition", "strerror"] + [c.__name__ for c in error_classes.values()]


class Block:
    """One block (message-flow graph) of a sampled mini-batch.

    nodes[t]: int64 Array of the block's source nodes of node type t (its
    destination nodes are the first num_dst[t] of them); edges[e]: (src,
    dst, eid) int64 Arrays of edge type e, src and dst block-local indices
    into nodes of the edge type's source / destination type, eid global
    edge IDs. blocks[-1]'s destination nodes are the seeds; blocks[0]'s
    source nodes the input nodes (DGL's order)."""

    __slots__ = ("nodes", "num_src", "num_dst", "edges")

    def __init__(self, nodes, num_src, num_dst, edges):
        self.nodes = nodes
        self.num_src = num_src
        self.num_dst = num_dst
        self.edges = edges

    def __repr__(self):
        return "gkv.Block(num_src=%r, num_dst=%r, num_edges=%r)" % (
            self.num_src, self.num_dst, tuple(len(e[0]) for e in self.edges))


def _types(book, seeds, fanouts, layers):
    """Node and edge type names to indices, by the partition book."""
    if isinstance(seeds, dict):
        for k in seeds:
            if isinstance(k, str) and k not in book["ntypes"]:
                raise InvalidArgumentError(  # noqa: F821
                    "seeds: unknown node type %r (GKV_EINVAL)" % k)
        seeds = {(book["ntypes"].index(k) if isinstance(k, str) else k): v
                 for k, v in seeds.items()}

    def row(f):
        if isinstance(f, dict):
            r = [0] * len(book["etypes"])
            for k, v in f.items():
                if isinstance(k, str):
                    if k not in book["etypes"]:
                        raise InvalidArgumentError(  # noqa: F821
                            "fanout: unknown edge type %r (GKV_EINVAL)" % k)
                    k = book["etypes"].index(k)
                r[k] = v
            return r
        return f

    fanouts = [row(f) for f in fanouts] if layers else row(fanouts)
    return seeds, fanouts


class _Sampling:
    """sample_neighbors and sample_blocks, shared by Client and Partition."""

    def sample_neighbors(self, seeds, fanout, *, seed=0, dir="in",
                         replace=False, weighted=False, prob=None,
                         edge_w=None):
        """One hop (gkv_sample_neighbors): per edge type (src, dst, eid),
        int64 Arrays of global IDs, seed by seed in the order given.
        seeds: int64 IDs (one node type) or {node type: IDs}; fanout: an
        int, or per edge type a list or {edge type name: int}.
        Weighted (one source of weights per call): weighted=True (the
        weights stored with the partitions); prob (Client only, DGL's
        prob=): an edge feature's name FEAT, the tensor
        "edge/<canonical etype>/FEAT" on the servers, for every edge type,
        or per edge type a list or {edge type: FEAT or None (uniform)};
        edge_w: float32 weights by edge ID (shape (E,) or (E, 1)), one
        array (a graph of one edge type), or per edge type a list or
        dict."""
        book = self.pbook()
        seeds, fanout = _types(book, seeds, fanout, False)
        return self._sample_neighbors(seeds, fanout, seed=seed, dir=dir,
                                      replace=replace, weighted=weighted,
                                      prob=prob, edge_w=edge_w)

    def sample_blocks(self, seeds, fanouts, *, seed=0, dir="in",
                      replace=False, weighted=False, prob=None, edge_w=None):
        """Multi-layer blocks (gkv_sample_blocks): a list of Block,
        blocks[i] sampled with fanouts[i]; weights as sample_neighbors."""
        book = self.pbook()
        seeds, fanouts = _types(book, seeds, fanouts, True)
        raw = self._sample_blocks(seeds, fanouts, seed=seed, dir=dir,
                                  replace=replace, weighted=weighted,
                                  prob=prob, edge_w=edge_w)
        return [Block(*b) for b in raw]


class Client(_Sampling, _gkv._Client):
    """Client(ip_config=None, *, addr=None, token=None, token_file=None,
              group='gkv', rank=0, group_size=0, timeout_ms=0,
              num_servers=0, observer=False, checksum=False,
              local_read=False, heartbeat=True, instance=None)

    Connects to every server of the ip_config file (gkv_client_connect),
    or to the one server at addr ('HOST:PORT'). token is the job's secret
    (or token_file, a file of mode 0600 holding it).

    Worker processes: used in a child made by fork() (torch DataLoader
    workers with the default context), a Client reconnects there by
    itself at its first call, with its saved connect parameters, as an
    observer of the same group (a rank of 2^31 plus 31 random bits: an
    observer needs a rank no member or other observer has; its leaving
    never stops a server, and it takes no part in barriers), over the child's own copy
    of nanomsg. The parent's connection is left alone in the child (its
    descriptors stay open there until the child exits). A Client also
    pickles as its connect parameters, so one handed to a worker started
    with 'spawn' or 'forkserver' connects there the same way. The pickle
    holds the token when one was given as token= (token_file= pickles the
    path). A Loader over the client cannot follow it into a child (its
    threads stay in the parent); make the Loader in the worker, over the
    worker's client."""

    def __init__(self, ip_config=None, **kw):
        self._connect_args = (ip_config, dict(kw))
        super().__init__(ip_config, **kw)

    def __reduce__(self):
        ip_config, kw = self._connect_args
        return (_client_in_worker, (ip_config, kw))


def _client_in_worker(ip_config, kw):
    # an observer needs a (group, rank) no member or other observer has:
    # 2^31 plus 31 random bits (gkv_client_observer_rank), in the same group
    return Client(ip_config, **dict(kw, observer=True, group_size=0,
                                    rank=_gkv._observer_rank()))


class Partition(_Sampling, _gkv._Partition):
    """Partition(config, part=0, threads=1): partition 'part' of the
    partition config (gkv-partition's JSON) opened read-only in this
    process, with a sampler of 'threads' threads over it. With a
    one-partition config it samples the whole graph: the answer that
    Client.sample_blocks must equal byte for byte."""


class Server:
    """A gkv server (gkv_server_open, gkv_server_run) on a thread of this
    process, for tests and notebooks:

        with gkv.Server("ip_config.txt", store="/tmp/s", create=True):
            c = gkv.Client("ip_config.txt")

    Keyword arguments: store, part_config, part_id, machine, server_id,
    num_servers, threads, token_file, keep_alive (True), create, nosync
    (True), quiet (True), prefault (False), lease_ms, num_clients,
    writeback (names), flush_ms. A store a server of this process serves
    cannot be opened as a Store here too (one handle per process).

    The server opens its store with the fault guard (GKV_GUARD): a store
    changed under it fails requests, not the process. When a fault hits
    inside a write, the server stops with GKV_ECORRUPT (raised by stop())
    and this process keeps the store's writer lock until it exits: exit
    after it, or other writers of the store wait. gkv.Store does not
    open its store guarded."""

    def __init__(self, ip_config, **kw):
        self._s = _gkv._Server(ip_config, **kw)
        self._err = None
        self._t = threading.Thread(target=self._run, name="gkv-server", daemon=True)
        self._t.start()

    def _run(self):
        try:
            self._s.run()
        except Error as e:          # reported by stop()
            self._err = e

    @property
    def url(self):
        return self._s.url

    def stop(self):
        """Stops the server, waits for its thread and closes it."""
        if self._t is not None:
            self._s.stop()
            self._t.join()
            self._t = None
            self._s.close()
            if self._err is not None:
                raise self._err

    close = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _canon(et):
    """("user", "buys", "item") or "user:buys:item" -> the three names."""
    parts = tuple(et) if not isinstance(et, str) else tuple(et.split(":"))
    if len(parts) != 3:
        raise InvalidArgumentError(  # noqa: F821
            "edge type %r: expected (src type, relation, dst type) or "
            "'src:rel:dst' (GKV_EINVAL)" % (et,))
    return parts


def _typed(d, what):
    """{name: rows} (the only type) or {(type, name): rows} or
    {"type/name": rows} -> [(type or None, name, rows)]."""
    out = []
    for k, v in (d or {}).items():
        if isinstance(k, tuple):
            t, n = k
        elif isinstance(k, str) and "/" in k:
            t, n = k.rsplit("/", 1)
        else:
            t, n = None, k
        out.append((t, n, v))
    return out


def partition(outdir, edges, num_nodes, num_parts, *, method="random", seed=0,
              name="graph", weights=None, node_feats=None, edge_feats=None,
              train_masks=None, reverse_etypes=None, csr=False, force=False,
              balance_edges=False, threads=0, owners=None):
    """Partitions a graph into outdir (gkv_partition_write, what
    gkv-partition does from files): one store per partition and the JSON
    config <name>.json, which gkv-server --part-config and gkv.Partition
    take. Returns the report (counts, edge cut, bytes, seconds) as a dict.

    Homogeneous: edges = (src, dst), int64 arrays; num_nodes an int;
    weights a float32 array; node_feats {name: rows}, edge_feats
    {name: rows}, train_masks a bool array, rows indexed by the original IDs.
    Heterogeneous: edges = {(src_type, rel, dst_type): (src, dst)};
    num_nodes {ntype: count}; weights {etype: w}; node_feats
    {(ntype, name): rows} (or "ntype/name"); edge_feats {(etype, name):
    rows} with etype canonical "src:rel:dst"; train_masks {ntype: mask};
    reverse_etypes {etype: reverse etype}. Features are stored as
    node/<ntype>/<name> and edge/<canonical>/<name>.
    method: random, range, metis or given (owners: the partition of each
    node, an int32 array, or {ntype: array} for a heterogeneous graph;
    nodes keep their order within a partition); csr also stores out-edges
    (sampling with dir='out'); force replaces a partition already in
    outdir."""
    if isinstance(edges, dict):
        nn = dict(num_nodes)
        ets = [(_canon(k), v) for k, v in edges.items()]
        w = {":".join(_canon(k)): v for k, v in (weights or {}).items()}
        masks = list((train_masks or {}).items())
        homo = False
    else:
        nn = {"_N": num_nodes}
        ets = [(("_N", "_E", "_N"), edges)]
        w = {"_N:_E:_N": weights} if weights is not None else {}
        masks = [("_N", train_masks)] if train_masks is not None else []
        homo = True
    etypes = [(s, r, d, src, dst, w.get("%s:%s:%s" % (s, r, d)))
              for (s, r, d), (src, dst) in ets]
    feats = []
    for is_edge, d in ((0, node_feats), (1, edge_feats)):
        for t, n, rows in _typed(d, "feature"):
            if t is None:
                if not homo:
                    raise InvalidArgumentError(  # noqa: F821
                        "feature %r: name its type, {(type, name): rows} "
                        "(GKV_EINVAL)" % n)
                t = "_N:_E:_N" if is_edge else "_N"
            feats.append((is_edge, ":".join(_canon(t)) if is_edge and ":" in t else t,
                          n, rows))
    rev = [(":".join(_canon(a)), ":".join(_canon(b)))
           for a, b in (reverse_etypes or {}).items()]
    if owners is not None:
        owners = [owners] if homo else [owners[t] for t in nn]
    return _gkv._partition(os.fspath(outdir), [(k, int(v)) for k, v in nn.items()],
                           etypes, feats, masks, rev, method=method,
                           num_parts=num_parts, seed=seed, csr=csr, force=force,
                           balance_edges=balance_edges, threads=threads, name=name,
                           owners=owners)


class Batch:
    """One mini-batch of a Loader; every array is a view into the batch's
    own memory (no copy), which lives while any of them does.

    epoch, index, sample_seed: which batch, and the generator seed it was
    sampled with; seeds: the seed IDs (int64), of node type seed_ntype;
    blocks: list of Block (blocks[-1]'s destinations are the seeds,
    blocks[0]'s sources the input nodes); feats[f]: the rows of the f-th
    feature tensor for blocks[0]'s source nodes of its type, shape
    (nodes, *row_shape); label: the seeds' rows of the label tensor, or
    None; efeats[f][i]: the rows of the f-th edge feature for blocks[i]'s
    edges of its type.

    Edge seeds (Loader(edge_seeds=True)): seeds are the batch's edge IDs
    (seed_ntype -1), and pos_src, pos_dst (one per seed edge, seeds[i]
    being pair i) and neg_src, neg_dst (negative j of pair i at
    i * num_neg + j) are int64 indices into blocks[-1].nodes[t] of the
    seed edge type's source / destination node type (its destination
    nodes, DGL's pair graph). Node seeds: all four None."""

    __slots__ = ("epoch", "index", "sample_seed", "seeds", "seed_ntype",
                 "blocks", "feats", "label", "efeats", "pos_src", "pos_dst",
                 "neg_src", "neg_dst")

    def __init__(self, raw):
        (self.epoch, self.index, self.sample_seed, self.seeds, self.seed_ntype,
         blocks, self.feats, self.label, self.efeats, self.pos_src,
         self.pos_dst, self.neg_src, self.neg_dst) = raw
        self.blocks = [Block(*b) for b in blocks]

    def __repr__(self):
        return "gkv.Batch(epoch=%d, index=%d, seeds=%d)" % (
            self.epoch, self.index, len(self.seeds))


class GpuBatch:
    """One mini-batch of a GpuLoader. blocks (list of Block) and feats (per
    node type: the input nodes' feature rows, or None for a type without
    the feature) are device memory: Arrays whose __dlpack_device__ is
    (2, device) (kDLCUDA), exported through __dlpack__ only (no buffer
    protocol), e.g. torch.from_dlpack(x) on that device. They are the
    loader's until its next batch (the memory is reused then, and the
    Arrays stop exporting): clone a tensor to keep it. seeds and label
    are host copies. rows_cached / rows_pulled: the input rows read from
    device caches / brought from the batch."""

    __slots__ = ("epoch", "index", "sample_seed", "seeds", "seed_ntype",
                 "blocks", "feats", "label", "rows_cached", "rows_pulled")

    def __init__(self, raw):
        (self.epoch, self.index, self.sample_seed, self.seeds, self.seed_ntype,
         blocks, self.feats, self.label, self.rows_cached,
         self.rows_pulled) = raw
        self.blocks = [Block(*b) for b in blocks]

    def __repr__(self):
        return "gkv.GpuBatch(epoch=%d, index=%d, seeds=%d)" % (
            self.epoch, self.index, len(self.seeds))


_WHERE = {"local": 0, "client": 1, "server": 2}
_EXCLUDE = {"self": _gkv.EXCLUDE_SELF, "reverse": _gkv.EXCLUDE_REVERSE}
EXCLUDE_SELF = _gkv.EXCLUDE_SELF
EXCLUDE_REVERSE = _gkv.EXCLUDE_REVERSE


def _etype_index(book, et, what):
    """An edge type given by name (canonical or relation) or index."""
    if isinstance(et, str):
        names = book["etypes"]
        if et in names:
            return names.index(et)
        rel = [i for i, n in enumerate(names) if n.split(":")[1:2] == [et]]
        if len(rel) == 1:
            return rel[0]
        raise InvalidArgumentError(  # noqa: F821
            "%s %r: not one of the graph's edge types %r (GKV_EINVAL)"
            % (what, et, names))
    if not isinstance(et, int) or isinstance(et, bool):
        raise InvalidArgumentError(  # noqa: F821
            "%s %r: expected an edge type name or index (GKV_EINVAL)" % (what, et))
    return et


def _exclude(ex):
    """exclude=None, 'self', 'reverse', a list of them or flags -> flags."""
    if ex is None:
        return 0
    if isinstance(ex, int) and not isinstance(ex, bool):
        return ex
    if isinstance(ex, str):
        ex = [ex]
    flags = 0
    for e in ex:
        if e not in _EXCLUDE:
            raise InvalidArgumentError(  # noqa: F821
                "exclude %r: expected 'self', 'reverse', a list of them or "
                "EXCLUDE_* flags (GKV_EINVAL)" % (e,))
        flags |= _EXCLUDE[e]
    return flags


class Loader(_gkv._Loader):
    """Loader(source, seeds=None, *, batch_size, fanouts, feats=(),
              label=None, efeats=(), where=None, seed_ntype=0,
              seed_mask=None, num_trainers=1, rank=0, shuffle=True,
              drop_last=False, shuffle_seed=0, sample_seed=0, dir='in',
              replace=False, weighted=False, prefetch=0, workers=0,
              sampler_threads=0, pinned=False, edge_seeds=False,
              seed_etype=None, num_neg=0, exclude=None, reverse_etype=None,
              prob=None)

    Mini-batches made ahead by worker threads (gkv_loader_new): iterate it
    for one epoch's Batch objects; iterating again starts the next epoch
    (set_epoch(e) chooses one). source is a gkv.Partition (a one-partition
    config: sampled in this process, where='local') or a gkv.Client
    (where='server': each batch sampled on the servers in one request, the
    default; or 'client': hop by hop through them). The three give the same
    batches. seeds: int64 node IDs of type seed_ntype, or None with
    seed_mask, a uint8 mask tensor's name split among num_trainers (DGL's
    node_split). fanouts: one per layer (an int, or per edge type a list
    or {edge type: int}), blocks[0] first as in Client.sample_blocks.
    feats: tensor names "node/<ntype>/<name>" (rows of the input nodes),
    label: a tensor name (rows of the seeds), efeats: "edge/<canonical
    etype>/<name>" (rows of each block's edges). The source must stay
    open while the loader is (close() of it refuses).

    Edge seeds (edge_seeds=True, or a seed_etype given): seeds are edge
    IDs of edge type seed_etype (name or index, default 0), or seed_mask an
    edge mask ("edge/<canonical etype>/<name>", DGL's edge_split); each
    batch samples the blocks of its edges' end nodes with num_neg uniform
    negatives per edge, leaving out of every layer the edges in exclude:
    None, "self" (the batch's edges), "reverse" (their reverse edges, of
    edge type reverse_etype), a list of those, or EXCLUDE_* flags. Batch
    has the pairs (pos_src ...). Not with where='server' (NotSupportedError);
    no label.

    prob: sampling probabilities from a stored edge feature (DGL's prob= or
    a 0/1 mask=): a feature name for every edge type, or per edge type a
    list or {edge type: name or None}, as Client.sample_blocks takes it;
    the tensor "edge/<canonical etype>/<name>", one element
    per edge, and a zero never sampled. where='client': each batch is
    Client.sample_blocks' with that prob; 'local' (a Partition): the
    feature read from the partition's store when the loader is made, the
    same batches; 'server' raises NotSupportedError.

    Processes: the worker threads stay in the process that made the
    loader; in a child made by fork() its calls raise NotSupportedError.
    Make loaders in the worker process, over the worker's Client (the
    threads use clones of it, each an observer with a rank of its own)."""

    def __init__(self, source, seeds=None, *, batch_size, fanouts, feats=(),
                 label=None, efeats=(), where=None, seed_ntype=0,
                 seed_mask=None, num_trainers=1, rank=0, shuffle=True,
                 drop_last=False, shuffle_seed=0, sample_seed=0, dir="in",
                 replace=False, weighted=False, prefetch=0, workers=0,
                 sampler_threads=0, pinned=False, edge_seeds=False,
                 seed_etype=None, num_neg=0, exclude=None, reverse_etype=None,
                 prob=None, _gpu=None):
        if where is None:
            where = "local" if isinstance(source, _gkv._Partition) else "server"
        if where not in _WHERE:
            raise InvalidArgumentError(  # noqa: F821
                "where %r: expected 'local', 'client' or 'server' (GKV_EINVAL)"
                % (where,))
        book = source.pbook()
        if book is None:
            raise NotSupportedError(  # noqa: F821
                "the servers serve a plain store: nothing to sample (GKV_ENOTSUP)")
        if isinstance(seed_ntype, str):
            seed_ntype = book["ntypes"].index(seed_ntype)
        edge_seeds = bool(edge_seeds) or seed_etype is not None
        if not edge_seeds and (num_neg or exclude or reverse_etype is not None):
            raise InvalidArgumentError(  # noqa: F821
                "num_neg, exclude and reverse_etype are for edge seeds: give "
                "edge_seeds=True or seed_etype (GKV_EINVAL)")
        seed_etype = _etype_index(book, seed_etype or 0, "seed_etype")
        ex = _exclude(exclude)
        if reverse_etype is None:
            if ex & _gkv.EXCLUDE_REVERSE:
                raise InvalidArgumentError(  # noqa: F821
                    "exclude 'reverse' needs reverse_etype (GKV_EINVAL)")
            reverse_etype = 0
        reverse_etype = _etype_index(book, reverse_etype, "reverse_etype")
        rows = _types(book, {}, fanouts, True)[1]
        ne = len(book["etypes"])
        for r in rows:
            if not isinstance(r, int) and len(r) != ne:
                raise InvalidArgumentError(  # noqa: F821
                    "fanouts: layer %r has %d values, expected an int or one "
                    "per edge type (%d) (GKV_EINVAL)" % (r, len(r), ne))
        nfan = 1 if all(isinstance(r, int) for r in rows) else ne
        flat = []
        for r in rows:
            flat += [r] if nfan == 1 else ([r] * ne if isinstance(r, int) else list(r))
        fan = array.array("i", flat)

        def typed(names, kind):
            out = []
            for n in names:
                if isinstance(n, tuple):
                    out.append(n)
                    continue
                parts = n.split("/")
                types = book["ntypes"] if kind == "node" else book["etypes"]
                if len(parts) < 3 or parts[0] != kind or parts[1] not in types:
                    raise InvalidArgumentError(  # noqa: F821
                        "%r: expected '%s/<%s type>/<name>' of a type the graph "
                        "has (GKV_EINVAL)" % (n, kind, kind))
                out.append((types.index(parts[1]), n))
            return out

        flags = ((0 if shuffle else _gkv.LOADER_NO_SHUFFLE) |
                 (_gkv.LOADER_DROP_LAST if drop_last else 0) |
                 (_gkv.LOADER_PINNED if pinned else 0))
        dirs = {"in": 0, "out": 1}
        if dir not in dirs:
            raise InvalidArgumentError(  # noqa: F821
                "dir %r: expected 'in' or 'out' (GKV_EINVAL)" % (dir,))
        super().__init__(source, _WHERE[where], seeds, seed_ntype, seed_mask,
                         num_trainers, rank, batch_size=batch_size, flags=flags,
                         shuffle_seed=shuffle_seed, fanouts=fan, nfan=nfan,
                         nlayers=len(rows), dir=dirs[dir],
                         sample_flags=(1 if replace else 0) | (2 if weighted else 0),
                         sample_seed=sample_seed, feats=typed(feats, "node"),
                         label=label, efeats=typed(efeats, "edge"),
                         prefetch=prefetch, workers=workers,
                         sampler_threads=sampler_threads,
                         edge_seeds=edge_seeds, seed_etype=seed_etype,
                         num_neg=num_neg, exclude=ex,
                         reverse_etype=reverse_etype, prob=prob,
                         **(_gpu(book) if _gpu is not None else {}))
        self._epoch = 0
        self._ended = False

    def __iter__(self):
        if self._ended:
            self.set_epoch(self._epoch + 1)
        return self

    def __next__(self):
        raw = self._next()
        if raw is None:
            self._ended = True
            raise StopIteration
        return self._batch(raw)

    _batch = Batch

    def set_epoch(self, epoch):
        """Starts epoch 'epoch', dropping what is left of the current one."""
        super().set_epoch(epoch)
        self._epoch = epoch
        self._ended = False

    def __len__(self):
        return self.num_batches()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class GpuLoader(Loader):
    """GpuLoader(client, seeds=None, *, feat=None, device=0, **Loader's)

    The GPU loader (gkv_gpu_loader, gpu/gkv_gpu.h): the batches of a Loader
    with the same arguments (client a gkv.Client; where 'server' or
    'client'), each put on CUDA device 'device': its blocks, and the rows
    of tensor "node/<ntype>/<feat>" of every node type that has one for
    the input nodes (feat None: blocks only). Iterating yields GpuBatch,
    whose device arrays are valid until the next batch: the loader writes
    the next one into the same device memory, on CUDA's legacy default
    stream, when next() is called. Work queued on another stream (a
    non-blocking torch.cuda.Stream) that still reads a batch must be
    synchronised before next() (torch.cuda.current_stream().synchronize()
    or an event): the loader does not wait for streams it is not told of.
    close() stops the loader and gives its client back at once; while
    arrays of its last batch (or tensors made from them) are alive, their
    device memory is kept until the last of them is gone, so a tensor
    never reads freed memory. Needs gkv built
    with CUDA (gkv._gkv.HAVE_CUDA); the loader's own feats= are not taken
    (feat= instead); len() and seeds() are the CPU Loader's only
    (NotSupportedError). Without a CUDA device it raises NotSupportedError.
    Like any CUDA user, make it in the process that uses it: a child made
    by fork() cannot use its parent's CUDA context."""

    def __init__(self, client, seeds=None, *, feat=None, device=0, **kw):
        if kw.get("feats"):
            raise InvalidArgumentError(  # noqa: F821
                "GpuLoader: give feat= (one feature name), not feats= (GKV_EINVAL)")

        def formats(book):
            out = []
            for t in book["ntypes"]:
                try:
                    d = client.describe("node/%s/%s" % (t, feat)) if feat else None
                except NotFoundError:  # noqa: F821
                    d = None
                out.append(None if d is None else
                           (_gkv._dtype_code(d["dtype"]), tuple(d["row_shape"])))
            return dict(gpu_device=int(device), gpu_feat=feat, gpu_formats=out)

        if int(device) < 0:
            raise InvalidArgumentError(  # noqa: F821
                "GpuLoader: device must be >= 0 (GKV_EINVAL)")
        super().__init__(client, seeds, _gpu=formats, **kw)

    _batch = GpuBatch
