/* cuda_runtime.h - a CPU stand-in for the part of the CUDA runtime gpu/
 * uses, so that its kernels run (and are tested) on a machine without a
 * GPU. Only for the test build (`make` builds build/test/gpu_emu_test from
 * test/gpu_test.c against it); never installed, never in libgkv.
 *
 * The .cu files of gpu/, compiled by g++ with -Igpu/emu, find this header
 * instead of the toolkit's. A kernel launch (GPU_LAUNCH in gpu_int.h)
 * runs every thread of every block on the calling thread, one at a time;
 * each emulated thread is a coroutine, so __syncthreads() works in a
 * kernel launched with GPU_LAUNCH_SYNC (a thread waits there until every
 * live thread of its block has come). Atomics are plain
 * read-modify-writes, since no two emulated threads run at once, but each
 * first lets the block's other threads run, so threads interleave at
 * every atomic.
 *
 * What it checks beyond the results (see emu.cc): launch configurations
 * (a grid or block of 0, a block of more than 1,024 threads) fail as CUDA
 * fails them; device memory sits between guard pages and is unreadable
 * from host code between launches, so a kernel reading past a buffer, or
 * host code reading a device pointer, faults at once; a copy whose device
 * side is not wholly inside one device allocation is refused with
 * cudaErrorInvalidValue and a line on stderr; a launch whose pointer
 * arguments are not device or pinned memory stops the program.
 *
 * Blocks and threads run in a scrambled order (emu.cc), so a result that
 * depends on which thread runs first differs from run to run of the
 * order. What it cannot check: interleavings between atomics (a lost
 * update from a plain read-modify-write that should be atomic goes
 * unseen), warp behaviour, and a kernel reading host memory through a
 * pointer it did not get as an argument.
 */
#ifndef GKV_GPU_EMU_CUDA_RUNTIME_H
#define GKV_GPU_EMU_CUDA_RUNTIME_H

#ifndef __cplusplus
#error "gpu/emu/cuda_runtime.h is for the C++ build of gpu/*.cu"
#endif

#include <stddef.h>
#include <stdint.h>

#define GKV_GPU_EMU 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* one block runs at a time, so a block's shared array is one static */
#define __shared__ static

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };

/* the running emulated thread's coordinates (set before each resume) */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

#define cudaHostAllocDefault  0u
#define cudaHostAllocPortable 1u
#define cudaHostAllocMapped   2u

struct cudaDeviceProp {
    char   name[256];
    size_t totalGlobalMem;
    int    multiProcessorCount;
    int    major, minor;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);

cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags);

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
                       cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                            cudaMemcpyKind k, cudaStream_t st = 0);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st = 0);

cudaError_t cudaStreamCreate(cudaStream_t *st);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t st);

/* the cudaMalloc'd pointer for a typed pointer, as CUDA's template does */
template <class T>
static inline cudaError_t
cudaMalloc(T **p, size_t n)
{
    return cudaMalloc((void **)p, n);
}

template <class T>
static inline cudaError_t
cudaHostAlloc(T **p, size_t n, unsigned flags)
{
    return cudaHostAlloc((void **)p, n, flags);
}

/* Lets the block's other threads run (an atomic calls it first), unless
 * GKV_GPU_EMU_INTERLEAVE=0. */
void gkv_emu_yield(void);

/* no two emulated threads run at once: a read-modify-write is atomic */
static inline unsigned
atomicCAS(unsigned *a, unsigned cmp, unsigned v)
{
    unsigned old;

    gkv_emu_yield();
    old = *a;
    if (old == cmp)
        *a = v;
    return old;
}

static inline unsigned long long
atomicCAS(unsigned long long *a, unsigned long long cmp, unsigned long long v)
{
    unsigned long long old;

    gkv_emu_yield();
    old = *a;
    if (old == cmp)
        *a = v;
    return old;
}

static inline unsigned long long
atomicMin(unsigned long long *a, unsigned long long v)
{
    unsigned long long old;

    gkv_emu_yield();
    old = *a;
    if (v < old)
        *a = v;
    return old;
}

/* Waits until every live thread of the block has called it. */
void __syncthreads(void);

/* Runs fn(arg) as every thread of a grid x block launch, as coroutines
 * ('sync': the kernel may call __syncthreads()). A bad configuration sets the error cudaGetLastError()
 * returns and runs nothing, as a CUDA launch does. */
void gkv_emu_launch(dim3 grid, dim3 block, cudaStream_t st, int sync,
                    void (*fn)(void *), void *arg);

/* Stops the program unless p is NULL or in memory a kernel may read
 * (device or pinned memory from this runtime): on a GPU, a kernel given
 * a pointer to ordinary host memory faults. */
void gkv_emu_check_arg(const char *kernel, int i, const void *p);

/* Checks each pointer argument of a launch of 'kernel' (others pass; a
 * struct passed by value gets an overload of its own where it is
 * defined, found by argument-dependent lookup). */
template <class T>
static inline void
gkv_emu_arg(const char *kernel, int i, T *p)
{
    gkv_emu_check_arg(kernel, i, (const void *)p);
}

template <class T>
static inline void
gkv_emu_arg(const char *, int, const T &)
{
}

template <class... A>
static inline void
gkv_emu_args(const char *kernel, const A &... a)
{
    int i = 0;

    (gkv_emu_arg(kernel, i++, a), ...);
}

template <class F>
static inline void
gkv_emu_launch_fn(dim3 grid, dim3 block, cudaStream_t st, int sync, F f)
{
    gkv_emu_launch(grid, block, st, sync, [](void *p) { (*(F *)p)(); }, &f);
}

#endif /* GKV_GPU_EMU_CUDA_RUNTIME_H */
