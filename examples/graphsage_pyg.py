#!/usr/bin/env python3
"""GraphSAGE trained through gkv with PyTorch Geometric (gkv.pyg).

    python examples/graphsage_pyg.py [--nodes 20000] [--parts 2] ...

1. generates a graph whose labels can be learned (examples/sbm_graph.py,
   shared with graphsage_dgl.py): a stochastic block model
   of C planted communities (each node has about --deg-in neighbours in
   its own community and --deg-out in others); the label is the
   community, the feature a noisy one-hot view of it (alone, a node's
   feature gives its label only about half the time; its neighbourhood
   gives it);
2. partitions it with gkv.partition() (features "x" and labels "y" stored
   as node/_N/x, node/_N/y);
3. starts the servers with gkv-launch (one per partition, each on a
   "machine" of a loopback ip_config), which runs this script again as
   the trainers (--trainer, one per machine): each connects with the GKV_*
   variables gkv-launch sets, and together they train one PyG GraphSAGE
   (SAGEConv, mean aggregation: no pyg-lib or torch-sparse) with
   DistributedDataParallel (gloo, through the torch.distributed variables
   gkv-launch sets), each on its slice of the training nodes, in
   mini-batches from gkv.pyg.NeighborLoader (sampled with their rows on the
   servers); then they measure test accuracy, printing epoch time and
   batches/s (rank 0's output is shown at the end).

It exits 1 unless the test accuracy reaches --target (0.9). --in-process
serves the partitions with gkv.Server threads instead of gkv-launch (what
the test does). BUILD names the build directory holding gkv-launch.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbm_graph  # noqa: E402
from sbm_graph import make_graph, split  # noqa: E402

import gkv  # noqa: E402
import gkv.pyg  # noqa: E402
from torch_geometric.nn import SAGEConv  # noqa: E402


class SAGE(torch.nn.Module):
    def __init__(self, d_in, hidden, d_out, layers):
        super().__init__()
        dims = [d_in] + [hidden] * (layers - 1) + [d_out]
        self.convs = torch.nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x


def train(client, train_ids, test_ids, *, fanouts, batch_size, epochs, hidden,
          lr, seed, classes, log=print, workers=2, part_config=None, dist=None):
    """Trains on train_ids through gkv.pyg; returns the test accuracy.
    dist: torch.distributed, initialized, when several trainers share the
    work (each takes an equal slice of the IDs; DistributedDataParallel
    averages the gradients; the accuracy counts every slice)."""
    torch.manual_seed(seed)
    fs = gkv.pyg.FeatureStore(client, part_config)
    gs = gkv.pyg.GraphStore(client)
    d_in = fs.get_tensor_size(None, "x")[1]
    model = SAGE(d_in, hidden, classes, len(fanouts))
    world, rank = (dist.get_world_size(), dist.get_rank()) if dist else (1, 0)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
        train_ids = train_ids[rank::world][:len(train_ids) // world]
        test_ids = test_ids[rank::world]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with gkv.pyg.NeighborLoader((fs, gs), num_neighbors=fanouts,
                                input_nodes=train_ids, batch_size=batch_size,
                                shuffle=True, seed=seed, workers=workers) as loader:
        def loss_of(data):
            out = model(data.x, data.edge_index)[:data.batch_size]
            return F.cross_entropy(out, data.y[:data.batch_size])

        sbm_graph.fit(model, opt, loader, epochs, loss_of, log,
                      join=model.join if world > 1 else None)
    model.eval()
    correct = 0
    with torch.no_grad(), gkv.pyg.NeighborLoader(
            (fs, gs), num_neighbors=fanouts, input_nodes=test_ids,
            batch_size=1024, seed=seed + 1, workers=workers) as loader:
        for data in loader:
            pred = model(data.x, data.edge_index)[:data.batch_size].argmax(1)
            correct += int((pred == data.y[:data.batch_size]).sum())
    counts = torch.tensor([correct, len(test_ids)])
    if world > 1:
        dist.all_reduce(counts)
    acc = int(counts[0]) / int(counts[1])
    log("test accuracy %.4f (%d nodes)" % (acc, int(counts[1])))
    return acc


def partition(outdir, args):
    src, dst, x, y = make_graph(args.nodes, args.classes, args.deg_in, args.deg_out,
                                args.noise, args.seed)
    t0 = time.perf_counter()
    rep = gkv.partition(outdir, (src, dst), args.nodes, args.parts, method="random",
                        seed=args.seed, name="sbm", node_feats={"x": x, "y": y},
                        force=True)
    print("graph: %d nodes, %d edges, %d communities, in %d partitions (%.2f s)"
          % (args.nodes, len(src), args.classes, args.parts, time.perf_counter() - t0))
    return os.path.join(outdir, "sbm.json"), rep


def trainer(args):
    """Run by gkv-launch: connect with its GKV_* variables and train."""
    env = os.environ
    c = gkv.Client(env["GKV_IP_CONFIG"], token_file=env.get("GKV_TOKEN_FILE"),
                   group=env.get("GKV_GROUP", "gkv"), rank=int(env.get("GKV_RANK", 0)),
                   group_size=int(env.get("GKV_WORLD_SIZE", 1)),
                   num_servers=int(env.get("GKV_NUM_SERVERS", 0)), timeout_ms=60000)
    dist = None
    if int(env.get("WORLD_SIZE", 1)) > 1:     # gkv-launch sets torch's env://
        import torch.distributed as dist
        dist.init_process_group("gloo")
    try:
        train_ids, test_ids = split(args.nodes, args.seed)
        acc = run_train(c, train_ids, test_ids, args, dist=dist)
    finally:
        if dist is not None:    # together: rank 0 alone in it could wait forever
            dist.barrier()
            dist.destroy_process_group()
        c.close()
    return acc


def run_train(c, train_ids, test_ids, args, part_config=None, dist=None):
    return train(c, train_ids, test_ids, part_config=part_config, dist=dist,
                 fanouts=args.fanouts,
                 batch_size=args.batch_size, epochs=args.epochs, hidden=args.hidden,
                 lr=args.lr, seed=args.seed, classes=args.classes,
                 workers=args.workers)


def in_process(config, args):
    """Serves every partition on a gkv.Server thread of this process."""
    servers = []
    ipc = os.path.join(os.path.dirname(config), "ip_config.txt")
    with open(ipc, "w") as f:
        f.writelines(sbm_graph.ip_config_lines(args.parts))
    try:
        for m in range(args.parts):
            servers.append(gkv.Server(ipc, part_config=config, part_id=m, machine=m))
        c = gkv.Client(ipc, group="graphsage", rank=0, group_size=1, timeout_ms=60000)
        try:
            return run_train(c, *split(args.nodes, args.seed), args, config)
        finally:
            c.close()
    finally:
        for s in servers:
            s.stop()


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    return sbm_graph.add_args(p, "per hop, hop 1 first (default 10,5)"
                              ).parse_args(argv)


def main(argv=None):
    args = parse(argv)
    torch.set_num_threads(sbm_graph.torch_threads())
    if args.trainer:
        return 0 if trainer(args) >= args.target else 1
    return sbm_graph.run_job("graphsage_pyg", __file__, argv, args,
                             lambda d: partition(d, args)[0],
                             lambda config: in_process(config, args))


if __name__ == "__main__":
    sys.exit(main())
