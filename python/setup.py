"""Builds gkv._gkv, the C extension, over the repository's build/libgkv.a.

The archive and its link flags come from the top-level Makefile (`make
build/libgkv.a`, run here when the archive is missing or stale, and `make
python-libs`, which prints the libraries libgkv needs: LMDB, nanomsg, ...
and the CUDA runtime when the build has gpu/), so the flags are written
once, in the Makefile; -lnanomsg is dropped from them (src/nnshim.c loads
nanomsg itself). The archive is linked into the extension: the
installed package needs no library path. Environment: GKV_ROOT (the
repository; default: this file's parent folder), GKV_BUILD (its build
folder; default GKV_ROOT/build), MAKE.
"""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get("GKV_ROOT", os.path.join(HERE, "..")))
BUILD = os.path.abspath(os.environ.get("GKV_BUILD", os.path.join(ROOT, "build")))
MAKE = os.environ.get("MAKE", "make")


def make(*args, capture=False):
    cmd = [MAKE, "--no-print-directory", "-s", "-C", ROOT, "BUILD=" + BUILD, *args]
    try:
        r = subprocess.run(cmd, check=True, text=True,
                           stdout=subprocess.PIPE if capture else None)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("gkv: '%s' failed (%s): run 'make deps && make' in %s first"
                 % (" ".join(cmd), e, ROOT))
    return r.stdout


if not os.path.exists(os.path.join(ROOT, "gkv.h")):
    sys.exit("gkv: %s is not the gkv repository (set GKV_ROOT)" % ROOT)
# GKV_ARCHIVE: another archive of the same objects (the tests build one
# extension over build/emu/libgkv-emu.a, whose gpu/ runs on an emulated
# device: tests/test_gpu.py)
archive = os.path.abspath(os.environ.get("GKV_ARCHIVE", os.path.join(BUILD, "libgkv.a")))
make(os.path.relpath(archive, ROOT) if archive.startswith(ROOT + os.sep) else archive)
emulated = os.path.basename(archive) == "libgkv-emu.a"
# nanomsg is not linked: python/src/nnshim.c defines the nn_* functions the
# archive calls and loads the library with dlopen (a fresh copy in each
# forked child), so -lnanomsg is left out of the Makefile's list
libs = [f for f in shlex.split(make("python-libs", capture=True))
        if f != "-lnanomsg"]
# an archive with gpu/ (built when nvcc is there) gets the GPU loader
syms = subprocess.run(["nm", "--defined-only", archive], check=True, text=True,
                      stdout=subprocess.PIPE).stdout.split()
cuda = "gkv_gpu_loader_new" in syms
if emulated:          # the emulated CUDA runtime is C++, in the archive
    libs = [f for f in libs if "cuda" not in f] + ["-lstdc++"]

src = os.path.join("src")
ext = Extension(
    "gkv._gkv",
    sources=[os.path.join(src, f) for f in
             ("module.c", "array.c", "store.c", "client.c", "server.c", "part.c",
              "partition.c", "loader.c", "nnshim.c")],
    depends=[os.path.join(src, f) for f in ("gkvpy.h", "dlpack.h")] + [archive],
    include_dirs=[ROOT] + [os.path.join(ROOT, d) for d in ("kv", "graph", "net", "loader", "gpu")],
    define_macros=[("GKV_HAVE_CUDA", "1")] if cuda else [],
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                        "-fvisibility=hidden"],
    extra_objects=[archive],
    extra_link_args=libs,
)

setup(ext_modules=[ext])
