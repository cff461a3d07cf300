/* gpu_int.h - private declarations shared by the files of gpu/ (CUDA C++
 * translation units only). Not installed. */
#ifndef GPU_INT_H
#define GPU_INT_H

/* The host code nvcc generates for each kernel launch keeps a function-
 * local static with a dynamic initialiser (a thread-safe guard through
 * __cxa_guard_acquire) and exception tables (__gxx_personality_v0): both
 * from libstdc++, which a C program linking libgkv does not link. Neither
 * is needed here (no exceptions; the guarded value is the same whichever
 * thread sets it), so the host compiler is told to emit neither. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDA_ARCH__)
#ifdef __NVCC_DIAG_PRAGMA_SUPPORT__
#pragma nv_diag_suppress 1675     /* nvcc's front end: "unrecognized GCC pragma" */
#endif
#pragma GCC optimize ("no-threadsafe-statics")
#pragma GCC optimize ("no-exceptions")
#ifdef __NVCC_DIAG_PRAGMA_SUPPORT__
#pragma nv_diag_default 1675
#endif
#endif

#include <cuda_runtime.h>
#include "base/base.h"  /* gkv__malloc and friends, with C linkage */
#include "gpu/gkv_gpu.h"
#include "gpu/gpu_c.h"  /* gpu__fail() and the rest, with C linkage */

/* Launches kernel k on grid x block threads in stream st with the
 * arguments that follow: the <<<>>> launch under nvcc; a call of the CPU
 * emulator (gpu/emu/) in the test build that runs the kernels without a
 * GPU. A kernel that calls __syncthreads() is launched with
 * GPU_LAUNCH_SYNC (the same launch under nvcc); the emulator stops the
 * program when a GPU_LAUNCH kernel syncs. */
#ifdef GKV_GPU_EMU
#define GPU_LAUNCH(k, grid, block, st, ...) \
    (gkv_emu_args(#k, __VA_ARGS__), \
     gkv_emu_launch_fn((grid), (block), (st), 0, [=]() { k(__VA_ARGS__); }))
#define GPU_LAUNCH_SYNC(k, grid, block, st, ...) \
    (gkv_emu_args(#k, __VA_ARGS__), \
     gkv_emu_launch_fn((grid), (block), (st), 1, [=]() { k(__VA_ARGS__); }))
#else
#define GPU_LAUNCH(k, grid, block, st, ...) \
    k<<<(grid), (block), 0, (st)>>>(__VA_ARGS__)
#define GPU_LAUNCH_SYNC GPU_LAUNCH
#endif

/* Translates a CUDA error from 'what' (GKV_ENOMEM for an allocation
 * failure, else GKV_EIO), naming the error; cudaSuccess is GKV_OK. Clears
 * CUDA's sticky last error. */
gkv_err gpu__cuda(cudaError_t e, const char *what);

#endif /* GPU_INT_H */
