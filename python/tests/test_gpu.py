"""gkv.GpuLoader on the emulated device: the extension is built once more,
in a temporary folder, over build/emu/libgkv-emu.a (gpu/ compiled against
gpu/emu/, a stand-in CUDA runtime whose device memory the host can read),
and a script run with it compares each GPU batch with the CPU Loader's
batch of the same arguments, byte for byte: the blocks, the input rows.
It checks what a consumer sees: __dlpack_device__ is (2, 0) (kDLCUDA),
the DLPack capsule (legacy and versioned) carries the device buffer's
address and device, the buffer protocol is refused, and an array of a
batch the loader has moved past stops exporting. The capsule is never
given to torch (no CUDA here). Skipped when the build has no gpu/."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import BUILD, ROOT

SCRIPT = textwrap.dedent(r"""
    import ctypes, json, sys
    import numpy as np
    import gkv

    ipc = sys.argv[1]
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

    def capsule(a, versioned):
        # (data pointer, device type, device id) of the DLTensor inside
        cap = a.__dlpack__(max_version=(1, 0)) if versioned else a.__dlpack__()
        p = api.PyCapsule_GetPointer(cap, b"dltensor_versioned" if versioned
                                     else b"dltensor")
        t = p + (32 if versioned else 0)   # DLManagedTensorVersioned's dl_tensor
        data = ctypes.c_void_p.from_address(t).value
        dev = (ctypes.c_int32 * 2).from_address(t + 8)
        return data, dev[0], dev[1]

    def dev_bytes(a):
        # the emulated device's memory is not readable from the host (it
        # faults, as a real device pointer would): copied back by to_host()
        assert a.__dlpack_device__() == (2, 0)
        for v in (False, True):
            assert capsule(a, v) == (a.ptr, 2, 0), (capsule(a, v), a.ptr)
        try:
            memoryview(a)
            raise AssertionError("the buffer protocol exported device memory")
        except BufferError as e:
            assert "CUDA device 0" in str(e)
        h = a.to_host()
        assert h.__dlpack_device__() == (1, 0) and h.shape == a.shape
        return np.asarray(h).tobytes()

    c = gkv.Client(ipc, group="pytest-gpu", timeout_ms=20000)
    args = dict(batch_size=24, fanouts=[3, 2], shuffle=False, sample_seed=5)
    seeds = np.arange(0, 100, dtype=np.int64)
    cpu = gkv.Loader(c, seeds, feats=["node/_N/feat"], **args)
    want = [([[np.asarray(n).tobytes() for n in b.nodes] for b in x.blocks],
             [[[np.asarray(a).tobytes() for a in e] for e in b.edges]
              for b in x.blocks],
             np.asarray(x.feats[0]).tobytes(), np.asarray(x.seeds).tobytes())
            for x in cpu]
    cpu.close()
    g = gkv.GpuLoader(c, seeds, feat="feat", device=0, **args)
    got, stale = [], None
    for x in g:
        if stale is not None:             # the previous batch's memory is reused
            try:
                stale.__dlpack__()
                raise AssertionError("a stale device array exported")
            except BufferError as e:
                assert "next batch" in str(e)
        assert isinstance(x, gkv.GpuBatch) and x.rows_pulled > 0
        got.append(([[dev_bytes(n) for n in b.nodes] for b in x.blocks],
                    [[[dev_bytes(a) for a in e] for e in b.edges]
                     for b in x.blocks],
                    dev_bytes(x.feats[0]), np.asarray(x.seeds).tobytes()))
        stale = x.feats[0]
    assert got == want, "GPU batches differ from the CPU loader's"
    # a second epoch gives the same batches (no shuffle)
    again = [np.asarray(x.seeds).tobytes() for x in g]
    assert again == [w[3] for w in want]
    g.close()
    try:
        stale.__dlpack__()
        raise AssertionError("an array of a closed loader exported")
    except BufferError:
        pass
    # close() while an array of the last batch (and an unconsumed DLPack
    # capsule of it) lives keeps that device memory until they are gone:
    # the emulated device unmaps what cudaFree frees
    def mapped(ptr):
        for ln in open("/proc/self/maps"):
            lo, hi = (int(v, 16) for v in ln.split()[0].split("-"))
            if lo <= ptr < hi:
                return True
        return False
    g3 = gkv.GpuLoader(c, seeds, feat="feat", device=0, **args)
    x = next(iter(g3))
    keep = x.feats[0]
    cap = keep.__dlpack__()
    p = keep.ptr
    del x
    g3.close()
    assert mapped(p), "close() freed device memory that a view still held"
    try:
        next(iter(g3))
        raise AssertionError("a closed GPU loader gave a batch")
    except gkv.Error as e:
        assert "closed" in str(e)
    del keep
    assert mapped(p), "the capsule's memory was freed before the capsule"
    del cap
    assert not mapped(p), "the device memory outlived its last view"
    errs = []
    for bad in (dict(device=3), dict(feats=["node/_N/feat"])):
        try:
            gkv.GpuLoader(c, seeds, feat="feat", **dict(args, **bad))
            errs.append("accepted %r" % (bad,))
        except gkv.Error as e:
            errs.append(type(e).__name__)
    c.close()
    print(json.dumps({"batches": len(got), "errs": errs}))
""")


@pytest.fixture(scope="module")
def emu_ext(tmp_path_factory):
    """The extension over the emulated-GPU archive, in a folder of its own."""
    archive = BUILD / "emu" / "libgkv-emu.a"
    if not archive.exists():
        pytest.skip("%s is not built (make build-tests, with gpu/)" % archive)
    d = tmp_path_factory.mktemp("emu-ext")
    env = dict(os.environ, GKV_ARCHIVE=str(archive), GKV_BUILD=str(BUILD))
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext",
                        "--build-lib", str(d / "lib"), "--build-temp",
                        str(d / "tmp")], cwd=ROOT / "python", env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    for f in (ROOT / "python" / "gkv").glob("*.py"):
        (d / "lib" / "gkv" / f.name).write_text(f.read_text())
    return d / "lib"


def test_gpu_loader_batches_on_the_emulated_device(graph, emu_ext):
    config, ipc, feat = graph
    env = dict(os.environ, PYTHONPATH=str(emu_ext), GKV_GPU_EMU_DEVICES="1",
               PYTHONFAULTHANDLER="1")
    r = subprocess.run([sys.executable, "-c", SCRIPT, ipc], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["batches"] == 5
    assert out["errs"] == ["InvalidArgumentError", "InvalidArgumentError"], out


def test_gpu_loader_of_the_real_build(graph):
    """The build under test: without CUDA, or without a CUDA device, a
    GpuLoader raises NotSupportedError; with one, its arrays are CUDA's."""
    import gkv
    import numpy as np
    config, ipc, feat = graph
    c = gkv.Client(ipc, group="pytest-gpu-real", timeout_ms=20000)
    try:
        g = gkv.GpuLoader(c, np.arange(3, dtype=np.int64), feat="feat",
                          batch_size=2, fanouts=[2])
    except gkv.NotSupportedError as e:
        assert "CUDA" in str(e)
    else:
        x = next(iter(g))
        assert x.feats[0].__dlpack_device__() == (2, 0)
        g.close()
    finally:
        c.close()
