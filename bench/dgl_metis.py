"""gkv's METIS partitioning against DGL's, on the same edges (issue 27).

The edges: an R-MAT graph (--scale, edge factor 16, seed 0; self-loops
and duplicates kept), written once by build/gkv-rmat as int64 pairs. Each
side then runs in a process of its own, one after the other (never both at
once: at scale 22 each needs about 10 GiB), so that each peak RSS is that
side's alone:

  gkv  build/gkv-partition --binary EDGES --num-nodes 2^S --parts K
       --method metis --stats OUT [--metis-ptype P --metis-ctype C
       --metis-keep N]: the whole tool (read
       the edges, METIS, number, write the CSC stores), its stats line.
  DGL  dgl.graph() of the same edges, then, with --dgl-full,
       dgl.distributed.partition_graph(g, 'graph', K, OUT,
       part_method='metis') (DGL's whole partitioner), or by default only
       dgl.metis_partition_assignment(g, K), the step partition_graph
       runs for METIS (it symmetrises the graph with GKlib's
       gk_csr_MakeSymmetric(GK_CSR_SYM_SUM), which merges duplicates and
       keeps self-loops, then calls METIS_PartGraphKway of its own
       libmetis, 64-bit idx_t, with NITER=1, NIPARTS=1, DROPEDGES=1,
       ONDISK=1, OBJTYPE=CUT, one balance constraint: nodes, UFACTOR 30).

DGL 2.1.0 aborts inside metis_partition_assignment on this graph at
scale 12 (heap corruption, with or without self-loops): use scale 14 or
more.

Both edge cuts are counted the same way, as gkv-partition counts them:
the input edges (duplicates included) whose two endpoints lie in
different parts. Balance: the largest part over the mean part (nodes).

The figures: seconds of the METIS step (gkv: assign_seconds, building
METIS's graph plus the call; DGL: metis_partition_assignment, its
symmetrising plus the call), seconds of the whole run and each process's
peak RSS (getrusage: the edges, the graph, METIS, everything), and the
ratios DGL/gkv (time: > 1 means gkv is faster) and gkv/DGL (RSS, cut).
Targets: METIS step >= 2x DGL's speed, RSS <= DGL's, cut <= 1.05x DGL's.

usage: python bench/dgl_metis.py [--build DIR] [--scale S] [--parts K]
         [--metis-ptype rb|kway] [--metis-ctype rm|shem]
         [--metis-keep N|all] [--dgl-full]
         [--only gkv|dgl] [--dir DIR]
Prints "RESULT metis_vs_dgl ..." lines and a table; exit status 0 (a
figure off its target is printed as a NOTE, not a failure), 1 on an
error. Needs dgl and torch (the project's venv, `make python-venv`).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cut_and_balance(src, dst, parts, k):
    """Edge cut over the input edges and max/mean part size (nodes)."""
    cut = 0
    step = 1 << 24
    for i in range(0, len(src), step):
        cut += int(np.count_nonzero(parts[src[i:i + step]] !=
                                    parts[dst[i:i + step]]))
    sizes = np.bincount(parts, minlength=k)
    return cut, float(sizes.max() / (len(parts) / k)), sizes.tolist()


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child_dgl(args):
    """Runs in its own process: DGL on the edge file; prints one JSON."""
    import torch
    import dgl
    n = 1 << args.scale
    t0 = time.perf_counter()
    e = np.fromfile(args.edges, dtype="<i8").reshape(-1, 2)
    src = np.ascontiguousarray(e[:, 0])
    dst = np.ascontiguousarray(e[:, 1])
    del e
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)),
                  num_nodes=n, idtype=torch.int64)
    load_s = time.perf_counter() - t0
    got = {}
    if args.dgl_full:
        import dgl.distributed.partition as dp
        inner = dp.metis_partition_assignment

        def timed(*a, **kw):
            t = time.perf_counter()
            r = inner(*a, **kw)
            got["metis_s"] = time.perf_counter() - t
            got["metis_rss"] = peak_rss()
            got["parts"] = r.numpy().copy()
            return r
        dp.metis_partition_assignment = timed
        t1 = time.perf_counter()
        dgl.distributed.partition_graph(g, "graph", args.parts, args.out,
                                        part_method="metis")
        part_s = time.perf_counter() - t1
    else:
        t1 = time.perf_counter()
        parts = dgl.metis_partition_assignment(g, args.parts)
        got["metis_s"] = part_s = time.perf_counter() - t1
        got["metis_rss"] = peak_rss()
        got["parts"] = parts.numpy()
    total_s = time.perf_counter() - t0
    rss = peak_rss()
    cut, bal, sizes = cut_and_balance(src, dst, got["parts"].astype(np.int64),
                                      args.parts)
    print("DGLRESULT " + json.dumps({
        "dgl": dgl.__version__, "torch": torch.__version__,
        "edges": int(len(src)), "load_s": load_s, "metis_s": got["metis_s"],
        "partition_s": part_s, "total_s": total_s, "metis_rss": got["metis_rss"],
        "peak_rss": rss, "edge_cut": cut, "balance": bal, "sizes": sizes,
        "full": bool(args.dgl_full)}), flush=True)


def run_dgl(args, edges, work):
    out = os.path.join(work, "dgl-out")
    cmd = [sys.executable, os.path.abspath(__file__), "--child-dgl",
           "--edges", edges, "--scale", str(args.scale),
           "--parts", str(args.parts), "--out", out]
    if args.dgl_full:
        cmd.append("--dgl-full")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    shutil.rmtree(out, ignore_errors=True)
    for line in p.stdout.splitlines():
        if line.startswith("DGLRESULT "):
            return json.loads(line[len("DGLRESULT "):])
    sys.stderr.write(p.stdout[-2000:] + p.stderr[-4000:])
    raise SystemExit("dgl_metis: the DGL run failed (exit %d)" % p.returncode)


def run_gkv(args, edges, work):
    out = os.path.join(work, "gkv-out")
    cmd = [os.path.join(args.build, "gkv-partition"), "--binary", edges,
           "--num-nodes", str(1 << args.scale), "--parts", str(args.parts),
           "--method", "metis", "--stats", "--force", out]
    for opt in ("ptype", "ctype", "keep"):
        if getattr(args, "metis_" + opt):
            cmd[-1:-1] = ["--metis-" + opt, getattr(args, "metis_" + opt)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit("dgl_metis: gkv-partition failed (exit %d)"
                         % p.returncode)
    stats = {}
    for line in p.stdout.splitlines():
        if line.startswith("stats:"):
            for kv in line.split()[1:]:
                k, _, v = kv.partition("=")
                stats[k] = v
    # the balance, from the partition config's node map
    with open(os.path.join(out, "graph.json")) as f:
        conf = json.load(f)
    nm = conf["node_map"]
    ranges = next(iter(nm.values())) if isinstance(nm, dict) else nm
    sizes = [hi - lo for lo, hi in ranges]
    shutil.rmtree(out, ignore_errors=True)
    return {"metis_s": float(stats["assign_seconds"]),
            "total_s": float(stats["seconds"]), "wall_s": wall,
            "peak_rss": int(stats["peak_rss_bytes"]),
            "edge_cut": int(stats["edge_cut"]), "edges": int(stats["edges"]),
            "balance": max(sizes) / (sum(sizes) / len(sizes)), "sizes": sizes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--metis-ptype", choices=("rb", "kway"),
                    help="gkv-partition --metis-ptype (default: its own)")
    ap.add_argument("--metis-ctype", choices=("rm", "shem"),
                    help="gkv-partition --metis-ctype (default: its own)")
    ap.add_argument("--metis-keep",
                    help="gkv-partition --metis-keep: neighbours a node "
                    "keeps in METIS's graph, or all (default: its own)")
    ap.add_argument("--dgl-full", action="store_true",
                    help="time DGL's whole partition_graph, not only its "
                    "METIS assignment")
    ap.add_argument("--only", choices=("gkv", "dgl"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "tmp"))
    ap.add_argument("--child-dgl", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--edges", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_dgl:
        return child_dgl(args)
    if not 1 <= args.scale <= 30 or args.parts < 2:
        ap.error("--scale 1..30 and --parts >= 2")
    os.makedirs(args.dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="dgl-metis-", dir=args.dir)
    try:
        edges = os.path.join(work, "edges.bin")
        subprocess.run([os.path.join(args.build, "gkv-rmat"), "--scale",
                        str(args.scale), edges], check=True)
        load = os.getloadavg()[0]
        r = {}
        if args.only != "dgl":
            r["gkv"] = run_gkv(args, edges, work)
        if args.only != "gkv":
            r["dgl"] = run_dgl(args, edges, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nMETIS, R-MAT scale %d (edge factor 16) into %d parts; load %.2f"
          % (args.scale, args.parts, load))
    print("%-4s %10s %10s %10s %10s %7s" % ("", "METIS s", "total s",
                                            "peak RSS", "edge cut", "balance"))
    for side, x in sorted(r.items()):
        print("%-4s %10.2f %10.2f %6.2f GiB %9.1f%% %7.3f"
              % (side, x["metis_s"], x["total_s"], x["peak_rss"] / 2**30,
                 100.0 * x["edge_cut"] / x["edges"], x["balance"]))
        print("RESULT metis_vs_dgl side=%s scale=%d parts=%d metis_s=%.3f "
              "total_s=%.3f peak_rss_bytes=%d edge_cut=%d edges=%d "
              "balance=%.4f%s" % (side, args.scale, args.parts, x["metis_s"],
                                   x["total_s"], x["peak_rss"], x["edge_cut"],
                                   x["edges"], x["balance"],
                                   " dgl_full=%d" % x["full"] if side == "dgl"
                                   else ""))
    if len(r) == 2:
        g, d = r["gkv"], r["dgl"]
        speed = d["metis_s"] / g["metis_s"]
        rss = g["peak_rss"] / d["peak_rss"]
        cut = g["edge_cut"] / d["edge_cut"]
        print("RESULT metis_vs_dgl ratio scale=%d metis_speed=%.2f "
              "total_speed=%.2f rss_ratio=%.2f cut_ratio=%.3f load=%.2f"
              % (args.scale, speed, d["total_s"] / g["total_s"], rss, cut,
                 load))
        for ok, what in ((speed >= 2, "METIS step %.2fx DGL's speed "
                          "(target >= 2x)" % speed),
                         (rss <= 1, "peak RSS %.2fx DGL's (target <= 1x)"
                          % rss),
                         (cut <= 1.05, "edge cut %.3fx DGL's (target <= "
                          "1.05x)" % cut)):
            if not ok:
                print("NOTE metis_vs_dgl off target: " + what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
