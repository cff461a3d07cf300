#!/usr/bin/env python3
"""GraphSAGE trained through gkv with a dgl.distributed-style script (gkv.dgl).

    python examples/graphsage_dgl.py [--nodes 20000] [--parts 2] ...

1. generates the planted-community graph of examples/sbm_graph.py (the
   same one examples/graphsage_pyg.py learns: label = community, feature
   a noisy one-hot view of it) and a 60/40 train/test split of it;
2. partitions it with gkv.partition() (node/_N/x, node/_N/y and the
   masks node/_N/train_mask, node/_N/test_mask);
3. starts the servers with gkv-launch (one per partition), which runs this
   script again as the trainer (--trainer). The trainer is a DGL
   distributed script with `import gkv.dgl as dist` in place of
   dgl.distributed: dist.initialize(), dist.DistGraph, dist.node_split of
   the train mask, dist.DistNodeDataLoader yielding (input_nodes, seeds,
   blocks) sampled on the servers with their feature and label rows, and
   DGL's SAGEConv (mean) on the blocks; without dgl installed, a mean
   aggregation of the loader's CSC blocks in plain PyTorch. The trainers
   (one per machine) train one model with DistributedDataParallel (gloo,
   from the torch.distributed variables gkv-launch sets), each on its
   node_split share. It prints epoch time and batches/s, then the test
   accuracy over every trainer's share.

It exits 1 unless the test accuracy reaches --target (0.9). --in-process
serves the partitions with gkv.Server threads instead of gkv-launch (what
the test does). BUILD names the build directory holding gkv-launch.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbm_graph  # noqa: E402

import gkv  # noqa: E402
import gkv.dgl as dist  # noqa: E402


class CSCSAGEConv(torch.nn.Module):
    """SAGEConv (mean) on a gkv.dgl.CSCBlock: W_self h_dst + W_neigh mean."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc_self = torch.nn.Linear(d_in, d_out)
        self.fc_neigh = torch.nn.Linear(d_in, d_out, bias=False)

    def forward(self, block, h):
        et = block.canonical_etypes[0]
        nd = block.num_dst_nodes()
        ptr, idx = block.indptr[et], block.indices[et]
        deg = ptr[1:] - ptr[:-1]
        to = torch.repeat_interleave(torch.arange(nd), deg)
        agg = torch.zeros(nd, h.shape[1]).index_add_(0, to, h[idx])
        agg = agg / deg.clamp(min=1).unsqueeze(1)
        return self.fc_self(h[:nd]) + self.fc_neigh(agg)


class SAGE(torch.nn.Module):
    def __init__(self, d_in, hidden, d_out, layers):
        super().__init__()
        dims = [d_in] + [hidden] * (layers - 1) + [d_out]
        if dist.HAVE_DGL:
            from dgl.nn import SAGEConv
            conv = lambda a, b: SAGEConv(a, b, "mean")  # noqa: E731
        else:
            conv = CSCSAGEConv
        self.convs = torch.nn.ModuleList(conv(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, blocks, x):
        h = x
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            h = conv(block, h)
            if i < len(self.convs) - 1:
                h = F.relu(h)
        return h


def train(g, *, fanouts, batch_size, epochs, hidden, lr, seed, classes,
          workers=2, log=print):
    """Trains on this trainer's share of the train mask; returns the test
    accuracy."""
    torch.manual_seed(seed)
    pb = g.get_partition_book()
    train_ids = dist.node_split(g.ndata["train_mask"], pb)
    test_ids = dist.node_split(g.ndata["test_mask"], pb)
    d_in = g.ndata["x"].shape[1]
    net = SAGE(d_in, hidden, classes, len(fanouts))
    ddp = torch.distributed.is_initialized()      # several trainers
    model = torch.nn.parallel.DistributedDataParallel(net) if ddp else net
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sampler = dist.NeighborSampler(fanouts)
    with dist.DistNodeDataLoader(g, train_ids, sampler, batch_size=batch_size,
                                 shuffle=True, feats=["x"], label="y",
                                 seed=seed, workers=workers) as loader:
        def loss_of(batch):
            input_nodes, seeds, blocks = batch
            out = model(blocks, blocks[0].srcdata["x"])
            return F.cross_entropy(out, blocks[-1].dstdata["y"])

        sbm_graph.fit(model, opt, loader, epochs, loss_of, log,
                      join=model.join if ddp else None)
    net.eval()
    correct = 0
    with torch.no_grad(), dist.DistNodeDataLoader(
            g, test_ids, sampler, batch_size=1024, feats=["x"], label="y",
            seed=seed + 1, workers=workers) as loader:
        for input_nodes, seeds, blocks in loader:
            pred = net(blocks, blocks[0].srcdata["x"]).argmax(1)
            correct += int((pred == blocks[-1].dstdata["y"]).sum())
    counts = torch.tensor([correct, len(test_ids)], dtype=torch.float64)
    if ddp:                                       # every trainer's share
        torch.distributed.all_reduce(counts)
    acc = float(counts[0] / counts[1].clamp(min=1))
    log("test accuracy %.4f (%d nodes, %s)" % (
        acc, int(counts[1]), "dgl.nn.SAGEConv on DGL blocks" if dist.HAVE_DGL
        else "mean aggregation on CSC blocks"))
    return acc


def partition(outdir, args):
    src, dst, x, y = sbm_graph.make_graph(args.nodes, args.classes, args.deg_in,
                                          args.deg_out, args.noise, args.seed)
    tr, te = sbm_graph.split(args.nodes, args.seed)
    train_mask = np.zeros(args.nodes, np.uint8)
    test_mask = np.zeros(args.nodes, np.uint8)
    train_mask[tr], test_mask[te] = 1, 1
    t0 = time.perf_counter()
    gkv.partition(outdir, (src, dst), args.nodes, args.parts, method="random",
                  seed=args.seed, name="sbm", force=True,
                  node_feats={"x": x, "y": y, "train_mask": train_mask,
                              "test_mask": test_mask})
    print("graph: %d nodes, %d edges, %d communities, in %d partitions (%.2f s)"
          % (args.nodes, len(src), args.classes, args.parts,
             time.perf_counter() - t0))
    return os.path.join(outdir, "sbm.json")


def run_train(args, **kw):
    dist.initialize(timeout_ms=60000, **kw)     # gkv-launch's environment
    ddp = int(os.environ.get("WORLD_SIZE", 1)) > 1 and "ip_config" not in kw
    if ddp:                 # gkv-launch gives torch.distributed's env:// too
        torch.distributed.init_process_group("gloo")
    try:
        return train(dist.DistGraph("sbm"), fanouts=args.fanouts,
                     batch_size=args.batch_size, epochs=args.epochs,
                     hidden=args.hidden, lr=args.lr, seed=args.seed,
                     classes=args.classes, workers=args.workers)
    finally:
        if ddp:             # together: rank 0 alone in it could wait forever
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
        dist.exit_client()


def in_process(config, args):
    """Serves every partition on a gkv.Server thread of this process."""
    ipc = os.path.join(os.path.dirname(config), "ip_config.txt")
    with open(ipc, "w") as f:
        f.writelines(sbm_graph.ip_config_lines(args.parts))
    servers = []
    try:
        for m in range(args.parts):
            servers.append(gkv.Server(ipc, part_config=config, part_id=m, machine=m))
        return run_train(args, ip_config=ipc, group="graphsage-dgl", rank=0,
                         group_size=1)
    finally:
        for s in servers:
            s.stop()


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    return sbm_graph.add_args(
        p, "per layer, the input layer first (default 10,5)").parse_args(argv)


def main(argv=None):
    args = parse(argv)
    torch.set_num_threads(sbm_graph.torch_threads())
    if args.trainer:
        return 0 if run_train(args) >= args.target else 1
    return sbm_graph.run_job("graphsage_dgl", __file__, argv, args, lambda d: partition(d, args),
                             lambda config: in_process(config, args))


if __name__ == "__main__":
    sys.exit(main())
