"""The Python package's benchmark (issue 25), against C in the same run.

  (1) pull: 100,000 random 512-byte rows (f32 x 128) of a 200,000-row
      tensor, from one gkv-server process on loopback (gkv.Client.pull)
      and from an embedded store (gkv.Store.pull), against the same pull
      in C (build/gkv-bench-pypull: gkv_client_pull / gkv_tensor_pull).
      Two pairs: pull(out=) into a numpy array made once against C into a
      buffer made once; pull() returning a new gkv.Array against C into a
      buffer malloc'ed for each pull (fresh pages to fault in). C and
      Python alternate, in another order each rep; medians of --pull-reps after one warm-up; the
      rows Python got are compared with C's. Target: Python >= 0.9x C.
  (2) loader: an R-MAT graph (--scale, edge factor 16; gkv-partition
      --method range) in 2 partitions, one gkv-server process each; a
      128-wide f32 feature and an int64 label per node; batches of 1,024
      seeds (--batches of them, from a random permutation), fanouts
      [5, 10, 15] (blocks[0] first: 15, 10, 5 from the seeds), where
      'server', --workers and --prefetch. Batches/s over one epoch of
      gkv.Loader (nothing done with a batch; then again wrapping every
      array a trainer uses as a torch tensor with torch.from_dlpack) against
      gkv_loader on the same options and epochs (build/gkv-bench-pypull
      --loader), all three on epoch e in rep e, in another order each rep. Target: Python >= 0.9x C.
  (3) the GraphSAGE examples (examples/graphsage_pyg.py and
      graphsage_dgl.py: gkv-launch, one gkv-server and one trainer per
      partition) at their default sizes (20,000 nodes, 2 partitions, batches
      of 128, fanouts 10,5, 4 epochs), with rank 0's epoch times and
      batches/s as it prints them, and its test accuracy (>= 0.9 checked).

Malloc: a pull's reply (51 MB here) is received into memory malloc'ed
for it and freed after the copy; whether glibc hands that back to the
kernel (so the next pull faults ~12,000 fresh pages in) depends on the
process's heap history, and changed either path's time by 1.5-2x from run
to run. So every process of the run gets MALLOC_TRIM_THRESHOLD_ and
MALLOC_MMAP_THRESHOLD_ of 4 GiB (the script re-executes itself with them;
--default-malloc leaves glibc's defaults), and both keep their pages.

usage: python bench/python_bench.py [--build DIR] [--reps N] [--pull-reps N] [--rows N]
         [--scale N] [--batches N] [--workers W] [--prefetch K]
         [--no-pull] [--no-loader] [--no-graphsage] [--quick]
         [--default-malloc]
Prints "RESULT name key=value ..." lines and a table; exit status 1 when
a check failed. Servers are started and killed by PID here.
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import gkv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = 128


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Procs:
    """Child processes, killed by PID at the end."""

    def __init__(self):
        self.ps = []

    def start(self, argv, log, **kw):
        if log:
            kw = dict(kw, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        p = subprocess.Popen(argv, **kw)
        self.ps.append(p)
        return p

    def stop(self):
        for p in self.ps:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()


class CDriver:
    """build/gkv-bench-pypull, driven a command at a time."""

    def __init__(self, procs, argv):
        self.p = procs.start(argv, None, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        if self.ask(None) != "ready":
            raise RuntimeError("gkv-bench-pypull did not start")

    def ask(self, cmd):
        if cmd is not None:
            self.p.stdin.write(cmd + "\n")
            self.p.stdin.flush()
        line = self.p.stdout.readline().strip()
        if not line:
            raise RuntimeError("gkv-bench-pypull: no answer to %r (exit %s)"
                               % (cmd, self.p.poll()))
        return line

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        self.p.wait(30)


def start_servers(procs, work, build, argv_of, n):
    """n gkv-server processes (argv_of(i, ipc)), each on its ip_config
    line; waits until a client connects. The ip_config path."""
    ipc = os.path.join(work, "ip_config-%d.txt" % free_port())
    with open(ipc, "w") as f:
        f.writelines("127.0.0.1 %d\n" % free_port() for _ in range(n))
    ps = [procs.start(argv_of(i, ipc), os.path.join(work, "server-%d.log" % i))
          for i in range(n)]
    deadline = time.time() + 60
    while True:
        try:
            gkv.Client(ipc, group="probe", observer=True, timeout_ms=2000).close()
            return ipc
        except gkv.Error:
            if time.time() > deadline or any(p.poll() is not None for p in ps):
                raise RuntimeError("gkv-server did not start (logs in %s)" % work)
            time.sleep(0.2)


def med(v):
    return statistics.median(v)


failed = []


def check(ok, what):
    if not ok:
        failed.append(what)
        print("CHECK FAILED: " + what, file=sys.stderr)


def bench_pull(args, work, procs, results):
    n, rows = args.rows, 2 * args.rows
    path = os.path.join(work, "store")
    s = gkv.Store(path, create=True, nosync=True)
    s.create("feat", dtype="float32", row_shape=(D,), hi=rows, init="uniform",
             a=-1.0, b=1.0, seed=5)
    s.close()
    ids = np.random.default_rng(1).integers(0, rows, n).astype(np.uint64)
    idf = os.path.join(work, "ids.u64")
    ids.tofile(idf)
    drv = os.path.join(args.build, "gkv-bench-pypull")

    def measure(what, c_argv, py_pull):
        cd = CDriver(procs, [drv] + c_argv + ["--ids", idf])
        out = np.empty((n, D), np.float32)
        got = {}

        def py(key, *a):
            got.pop(key, None)      # the last result freed first, as C does
            t0 = time.perf_counter()
            got[key] = py_pull(ids, *a)
            return time.perf_counter() - t0

        steps = {"c": lambda: float(cd.ask("pull").split()[0]),
                 "c_new": lambda: float(cd.ask("pullnew").split()[0]),
                 "py": lambda: py("py"),
                 "py_out": lambda: py("py_out", out)}
        keys = list(steps)
        times = {k: [] for k in keys}
        for r in range(-1, args.pull_reps):
            # each rep in another order, so no path always follows another
            for k in keys[r % 4:] + keys[:r % 4]:
                t = steps[k]()
                if r >= 0:
                    times[k].append(t)
        a = got["py"]
        dump = os.path.join(work, "c-rows.f32")
        cd.ask("dump " + dump)
        cd.close()
        want = np.fromfile(dump, np.float32).reshape(n, D)
        check(np.array_equal(np.asarray(a), want), what + ": Python's rows differ from C's")
        check(np.array_equal(out, want), what + ": Python's out= rows differ from C's")
        mb = n * D * 4
        r = {k: med(v) for k, v in times.items()}
        print("RESULT py_pull source=%s rows=%d row_bytes=%d reps=%d c_s=%.4f "
              "c_new_s=%.4f py_s=%.4f py_out_s=%.4f ratio_out=%.2f ratio_new=%.2f "
              "target=0.9"
              % (what.replace(" ", "_"), n, D * 4, args.pull_reps, r["c"], r["c_new"],
                 r["py"], r["py_out"], r["c"] / r["py_out"], r["c_new"] / r["py"]),
              flush=True)
        results.append(("pull, %s: C, one buffer" % what, mb / r["c"] / 1e9, "GB/s", None))
        results.append(("pull, %s: Python pull(out=)" % what, mb / r["py_out"] / 1e9,
                        "GB/s", r["c"] / r["py_out"]))
        results.append(("pull, %s: C, fresh malloc" % what, mb / r["c_new"] / 1e9,
                        "GB/s", None))
        results.append(("pull, %s: Python pull() (new Array)" % what, mb / r["py"] / 1e9,
                        "GB/s", r["c_new"] / r["py"]))

    # the embedded store: both processes read it (LMDB, read-only here)
    st = gkv.Store(path, readonly=True)
    measure("embedded store", ["--store", path],
            lambda i, out=None: st.pull("feat", i, out=out) if out is not None
            else st.pull("feat", i))
    st.close()
    ipc = start_servers(procs, work, args.build, lambda i, ipc: [
        os.path.join(args.build, "gkv-server"), "--store", path, "--ip-config", ipc,
        "--keep-alive", "--nosync", "--quiet"], 1)
    c = gkv.Client(ipc, group="pybench-py", rank=0, timeout_ms=60000)
    measure("1 server", ["--ip-config", ipc],
            lambda i, out=None: c.pull("feat", i, out=out) if out is not None
            else c.pull("feat", i))
    c.close()


def bench_loader(args, work, procs, results):
    import torch
    nn = 1 << args.scale
    rng = np.random.default_rng(2)
    np.save(os.path.join(work, "feat.npy"),
            rng.standard_normal((nn, D), dtype=np.float32))
    np.save(os.path.join(work, "label.npy"), rng.integers(0, 16, nn).astype(np.int64))
    t0 = time.perf_counter()
    subprocess.run([os.path.join(args.build, "gkv-partition"), "--rmat",
                    "%d:16" % args.scale, "--seed", "5", "--parts", "2",
                    "--method", "range", "--name", "g",
                    "--node-feat", "feat=" + os.path.join(work, "feat.npy"),
                    "--node-feat", "label=" + os.path.join(work, "label.npy"),
                    os.path.join(work, "parts")], check=True, capture_output=True)
    print("loader: R-MAT scale %d in 2 partitions (%.1f s)"
          % (args.scale, time.perf_counter() - t0), flush=True)
    config = os.path.join(work, "parts", "g.json")
    ipc = start_servers(procs, work, args.build, lambda i, ipc: [
        os.path.join(args.build, "gkv-server"), "--part-config", config,
        "--part-id", str(i), "--ip-config", ipc, "--keep-alive", "--nosync",
        "--quiet"], 2)
    seeds = rng.permutation(nn)[:args.batches * 1024].astype(np.int64)
    sf = os.path.join(work, "seeds.i64")
    seeds.tofile(sf)
    fan = [5, 10, 15]
    cd = CDriver(procs, [os.path.join(args.build, "gkv-bench-pypull"),
                         "--ip-config", ipc, "--loader", "--seeds", sf,
                         "--fanouts", ",".join(map(str, fan)), "--batch-size", "1024",
                         "--feat", "node/_N/feat", "--label", "node/_N/label",
                         "--workers", str(args.workers), "--prefetch", str(args.prefetch)])
    c = gkv.Client(ipc, group="pybench-py", rank=0, timeout_ms=60000)
    ld = gkv.Loader(c, seeds, batch_size=1024, fanouts=fan, feats=["node/_N/feat"],
                    label="node/_N/label", where="server", workers=args.workers,
                    prefetch=args.prefetch)

    def py_epoch(e, wrap):
        ld.set_epoch(e)
        t0 = time.perf_counter()
        nb = fb = 0
        for b in ld:
            if wrap:
                x = torch.from_dlpack(b.feats[0])
                torch.from_dlpack(b.label)
                torch.from_dlpack(b.seeds)
                for blk in b.blocks:
                    for a in blk.nodes:
                        torch.from_dlpack(a)
                    for src, dst, eid in blk.edges:
                        torch.from_dlpack(src)
                        torch.from_dlpack(dst)
                        torch.from_dlpack(eid)
                else:
                    check(x.data_ptr() == np.asarray(b.feats[0]).ctypes.data,
                          "loader: torch tensor is not the batch's memory")
            fb += len(memoryview(b.feats[0]).cast("B"))
            nb += 1
        return time.perf_counter() - t0, nb, fb

    tc, tpy, tw = [], [], []
    for r in range(-1, args.reps):
        e = r + 1
        got = {}
        steps = [("c", lambda: cd.ask("epoch %d" % e).split()),
                 ("py", lambda: py_epoch(e, False)),
                 ("torch", lambda: py_epoch(e, True))]
        for k, fn in steps[r % 3:] + steps[:r % 3]:     # another order each rep
            got[k] = fn()
        (t, nb, fb), a, w = got["c"], got["py"], got["torch"]
        check(int(nb) == a[1] == w[1] == args.batches,
              "loader: batches C %s, Python %d, %d; expected %d" % (nb, a[1], w[1], args.batches))
        check(int(fb) == a[2] == w[2], "loader: feature bytes C %s, Python %d, %d"
              % (fb, a[2], w[2]))
        if r >= 0:
            tc.append(float(t))
            tpy.append(a[0])
            tw.append(w[0])
    cd.close()
    ld.close()
    c.close()
    bc, bp, bw = (args.batches / med(v) for v in (tc, tpy, tw))
    print("RESULT py_loader scale=%d parts=2 batches=%d batch=1024 fanouts=15,10,5 "
          "feat=%d workers=%d prefetch=%d reps=%d c_batches_s=%.1f py_batches_s=%.1f "
          "py_torch_batches_s=%.1f ratio=%.2f ratio_torch=%.2f target=0.9"
          % (args.scale, args.batches, D, args.workers, args.prefetch, args.reps,
             bc, bp, bw, bp / bc, bw / bc), flush=True)
    results.append(("loader: C gkv_loader", bc, "batches/s", None))
    results.append(("loader: Python gkv.Loader", bp, "batches/s", bp / bc))
    results.append(("loader: Python + torch.from_dlpack", bw, "batches/s", bw / bc))


def bench_graphsage(args, work, results):
    import re
    env = dict(os.environ, BUILD=os.path.abspath(args.build))
    for name in ("graphsage_pyg", "graphsage_dgl"):
        cmd = [sys.executable, os.path.join(ROOT, "examples", name + ".py"),
               "--dir", os.path.join(work, name)]
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        sys.stdout.write(p.stdout)
        if p.returncode != 0:
            sys.stdout.write(p.stderr[-3000:])
            check(False, "%s: exit status %d" % (name, p.returncode))
            continue
        ep = [(float(m.group(1)), float(m.group(2))) for m in re.finditer(
            r"epoch \d+: loss [\d.]+, ([\d.]+) s, \d+ batches, ([\d.]+) batches/s", p.stdout)]
        acc = re.findall(r"^test accuracy ([\d.]+)", p.stdout, re.M)
        if ep:
            last = ep[1:] or ep
            print("RESULT py_graphsage example=%s epochs=%d epoch_s=%.2f "
                  "batches_s=%.1f first_epoch_s=%.2f test_acc=%s job_s=%.1f"
                  % (name, len(ep), med([e[0] for e in last]), med([e[1] for e in last]),
                     ep[0][0], acc[-1] if acc else "?", dt), flush=True)
            results.append(("%s: epoch, median after the first" % name,
                            med([e[0] for e in last]), "s", None))
            results.append(("%s: batches/s, rank 0" % name,
                            med([e[1] for e in last]), "batches/s", None))
        check(bool(acc) and float(acc[-1]) >= 0.9, "%s: test accuracy %s < 0.9"
              % (name, acc[-1] if acc else "not printed"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--pull-reps", type=int, default=15,
                   help="reps of the pull part (a rep is ~0.2 s)")
    p.add_argument("--rows", type=int, default=100000)
    p.add_argument("--scale", type=int, default=17)
    p.add_argument("--batches", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--no-pull", action="store_true")
    p.add_argument("--no-loader", action="store_true")
    p.add_argument("--no-graphsage", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="--reps 2 --pull-reps 2 --rows 20000 --scale 14 --batches 8")
    p.add_argument("--default-malloc", action="store_true",
                   help="leave glibc's malloc thresholds as they are")
    args = p.parse_args()
    if not args.default_malloc and os.environ.get("MALLOC_TRIM_THRESHOLD_") is None:
        # every process of the run (this one, the C driver, the servers)
        # with the same glibc malloc settings, set before malloc starts
        os.environ.update(MALLOC_TRIM_THRESHOLD_=str(1 << 32),
                          MALLOC_MMAP_THRESHOLD_=str(1 << 32))
        os.execv(sys.executable, [sys.executable] + sys.argv)
    if args.quick:
        args.reps, args.pull_reps, args.rows, args.scale, args.batches = 2, 2, 20000, 14, 8
    if (1 << args.scale) < args.batches * 1024:
        p.error("--batches %d needs 2^scale >= %d nodes" % (args.batches, args.batches * 1024))
    print("python_bench: %s, python %s, gkv %s, %d CPUs, load %s, malloc %s"
          % (os.uname().machine, sys.version.split()[0], gkv.__version__,
             os.cpu_count(), " ".join("%.2f" % v for v in os.getloadavg()),
             "default" if args.default_malloc else "trim/mmap thresholds 4 GiB"),
          flush=True)
    results = []
    procs = Procs()
    work = tempfile.mkdtemp(prefix="gkv-pybench-")
    try:
        if not args.no_pull:
            bench_pull(args, work, procs, results)
        if not args.no_loader:
            bench_loader(args, work, procs, results)
    finally:
        procs.stop()
    if not args.no_graphsage:
        bench_graphsage(args, work, results)
    subprocess.run(["rm", "-rf", work])
    print("%-50s %12s %-10s %s" % ("", "", "", "Python/C"))
    for name, v, unit, ratio in results:
        print("%-50s %12.3f %-10s %s" % (name, v, unit,
                                         "" if ratio is None else "%.2fx" % ratio))
    print("load after: %s" % " ".join("%.2f" % v for v in os.getloadavg()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
