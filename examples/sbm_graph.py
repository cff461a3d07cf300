"""The planted-community graph the GraphSAGE examples learn, and what they
share: generating it, the train/test split, free loopback ports, the
command-line options and starting the job with gkv-launch.

A stochastic block model of C communities: each node has about deg_in
neighbours in its own community and deg_out anywhere; the label is the
community, the feature a noisy one-hot view of it (alone, a node's feature
gives its label about half the time at noise 1.0; its neighbourhood gives
it). Edges go both ways.
"""
import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time

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


def torch_threads():
    """Threads for torch's operators in a trainer: a quarter of the CPUs,
    shared by the machine's trainers (GKV_NUM_TRAINERS under gkv-launch),
    1 to 4. Its OpenMP threads spin while they wait; on a small machine
    that also runs the servers (and, under gkv-launch on one host, one
    server and one trainer per partition) more threads starve the servers:
    on 2 cores with 2 threads, batches from gkv-server processes came 10 to
    20 times slower than with 1."""
    per = max(1, int(os.environ.get("GKV_NUM_TRAINERS", 1) or 1))
    return max(1, min(4, (os.cpu_count() or 1) // 4 // per))


def add_args(p, fanout_help):
    """The options both examples take, on argparse parser p."""
    p.add_argument("--nodes", type=int, default=20000)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--deg-in", type=int, default=8)
    p.add_argument("--deg-out", type=int, default=4)
    p.add_argument("--noise", type=float, default=1.0)
    p.add_argument("--parts", type=int, default=2)
    p.add_argument("--fanouts", type=lambda s: [int(v) for v in s.split(",")],
                   default=[10, 5], help=fanout_help)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--dir", default=None,
                   help="working directory (default: a temporary one)")
    p.add_argument("--in-process", action="store_true")
    p.add_argument("--trainer", action="store_true", help=argparse.SUPPRESS)
    return p


def launch(script, argv, args, config, work):
    """Starts the job with gkv-launch (BUILD/gkv-launch; one server per
    partition), which runs 'script --trainer' with the same arguments as
    the trainer; True when every trainer exited 0."""
    build = os.environ.get("BUILD", os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..", "build"))
    ipc = os.path.join(work, "ip_config.txt")
    with open(ipc, "w") as f:
        f.writelines(ip_config_lines(args.parts))
    me = [sys.executable, os.path.abspath(script), "--trainer"] + \
        [a for a in (argv if argv is not None else sys.argv[1:])
         if a != "--in-process"]
    cmd = [os.path.join(build, "gkv-launch"), "--ip-config", ipc,
           "--part-config", config, "--num-servers", "1", "--num-trainers", "1",
           "--workspace", os.path.join(work, "launch"), "--"] + me
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    # torch.distributed's rendezvous port (gkv-launch passes MASTER_PORT on
    # to the trainers): a free one rather than 29500
    env = dict(os.environ, MASTER_PORT=ip_config_lines(1)[0].split()[1])
    rc = subprocess.run(cmd, env=env).returncode
    log = os.path.join(work, "launch", "logs", "trainer-0-0.log")
    if os.path.exists(log):
        print("-- rank 0 (%s):" % log)
        sys.stdout.write(open(log).read())
    print("job: %.1f s, gkv-launch exit status %d" % (time.perf_counter() - t0, rc))
    return rc == 0


def fit(model, opt, loader, epochs, loss_of, log=print, join=None):
    """Trains model for 'epochs' passes over loader (loss_of(batch): the
    batch's loss), printing each epoch's mean loss, time and batches/s.
    join: DistributedDataParallel's join (trainers with uneven batch
    counts), or None."""
    for epoch in range(epochs):
        model.train()
        t0, nb, total = time.perf_counter(), 0, 0.0
        with join() if join is not None else contextlib.nullcontext():
            for batch in loader:
                opt.zero_grad()
                loss = loss_of(batch)
                loss.backward()
                opt.step()
                nb += 1
                total += float(loss)
        dt = time.perf_counter() - t0
        log("epoch %d: loss %.4f, %.2f s, %d batches, %.1f batches/s"
            % (epoch, total / max(nb, 1), dt, nb, nb / dt))


def run_job(name, script, argv, args, partition, in_process):
    """What both examples' main does once parsed: partition(outdir) ->
    config, then the job (in_process(config) -> test accuracy, or under
    gkv-launch), printing whether args.target was reached; the exit
    status."""
    work = args.dir or tempfile.mkdtemp(prefix=name + "-")
    os.makedirs(work, exist_ok=True)
    config = partition(os.path.join(work, "parts"))
    if args.in_process:
        ok = in_process(config) >= args.target
    else:
        ok = launch(script, argv, args, config, work)
    print("%s: %s (target test accuracy %.2f)"
          % (name, "reached" if ok else "NOT reached", args.target))
    return 0 if ok else 1
