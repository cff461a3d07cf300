/* gen.h - the sampling generator of gkv_sample.h, as header-only functions
 * that compile as C (C11, gcc: graph/sample*.c, kv/util.c), as CUDA host and
 * device code (nvcc: gpu/sample.cu) and as C++ (g++: gpu/ against the
 * emulated device, gpu/emu), so the CPU sampler, the GPU sampler and the
 * tests run one copy of it. Not installed.
 *
 * The primitives (M, A, K, B, r_t, below, unit) are what graph/sample_hop.c
 * samples with. The pick functions below them (Floyd's uniform sampling
 * without replacement, uniform with replacement, and weighted sampling by
 * inverse CDF with the rejection loop and its fallback) are the GPU's:
 * they reproduce graph/sample_hop.c's picks bit for bit for a column without
 * exclusions (allowed index x = column offset x), in the order
 * gkv_sample.h specifies, with a device's means (linear scans) where the
 * CPU uses hash sets and binary searches; test/gpu_test.c checks them
 * against gkv_sample_neighbors().
 *
 * The weighted search is a linear scan that accumulates S_{i+1} = S_i + w_i
 * in the same order as graph/sample_hop.c's prefix array, so the sums are the
 * same doubles and, S being non-decreasing, the first i with S_{i+1} > t is
 * the one its binary search finds. On the device the additions and the one
 * multiplication are __dadd_rn / __dmul_rn, which nvcc never contracts into
 * fused multiply-adds, whatever --fmad says. */
#ifndef GKV_BASE_GEN_H
#define GKV_BASE_GEN_H

#include <stdint.h>

#ifdef __CUDACC__
#define GKV_GEN static inline __host__ __device__
#else
#define GKV_GEN static inline
#endif

#if defined(__CUDA_ARCH__)
#define GKV_GEN_DADD(a, b)  __dadd_rn((a), (b))
#define GKV_GEN_DMUL(a, b)  __dmul_rn((a), (b))
#else
#define GKV_GEN_DADD(a, b)  ((a) + (b))
#define GKV_GEN_DMUL(a, b)  ((a) * (b))
#endif

#define GKV_GEN_G          0x9e3779b97f4a7c15ULL
#define GKV_GEN_DOM_SAMPLE 0x474b5653414d504cULL   /* "GKVSAMPL" */

/* M(z): splitmix64's finaliser. */
GKV_GEN uint64_t
gkv_gen_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A(x, v) = M(x ^ M(v + G)). */
GKV_GEN uint64_t
gkv_gen_absorb(uint64_t x, uint64_t v)
{
    return gkv_gen_mix(x ^ gkv_gen_mix(v + GKV_GEN_G));
}

/* K for neighbour sampling at (seed, layer, etype). */
GKV_GEN uint64_t
gkv_gen_key(uint64_t seed, int layer, int etype)
{
    uint64_t k = gkv_gen_absorb(GKV_GEN_DOM_SAMPLE, seed);

    k = gkv_gen_absorb(k, (uint64_t)layer);
    return gkv_gen_absorb(k, (uint64_t)etype);
}

/* B(v) = A(K, v). */
GKV_GEN uint64_t
gkv_gen_node(uint64_t key, int64_t v)
{
    return gkv_gen_absorb(key, (uint64_t)v);
}

/* r_t = M(B(v) + (t + 1) G). */
GKV_GEN uint64_t
gkv_gen_draw(uint64_t bv, uint64_t t)
{
    return gkv_gen_mix(bv + (t + 1) * GKV_GEN_G);
}

/* floor(r n / 2^64). */
GKV_GEN uint64_t
gkv_gen_below(uint64_t r, uint64_t n)
{
#if defined(__CUDA_ARCH__)
    return __umul64hi(r, n);
#else
    __extension__ typedef unsigned __int128 gkv_gen_u128;
    return (uint64_t)(((gkv_gen_u128)r * n) >> 64);
#endif
}

/* (r >> 11) 2^-53, in [0, 1). */
GKV_GEN double
gkv_gen_unit(uint64_t r)
{
    return (double)(r >> 11) * 0x1.0p-53;
}

/* z: the number of positive weights among w[0..m). */
GKV_GEN int64_t
gkv_gen_positive(const float *w, int64_t m)
{
    int64_t z = 0;

    for (int64_t i = 0; i < m; i++)
        z += w[i] > 0.0f;
    return z;
}

/* How many picks a column of m positions gives with fanout k (-1: all);
 * z is the number of positive weights (read only when 'weighted'). */
GKV_GEN int64_t
gkv_gen_npicks(int64_t m, int64_t z, int64_t k, int replace, int weighted)
{
    int64_t n = weighted ? z : m;

    if (k < 0 || (!replace && n <= k))
        return n;
    if (replace)
        return n > 0 ? k : 0;
    return k;
}

/* Floyd: k distinct positions of [0, m) (k < m) into out[0 .. k), in the
 * order chosen, each pick checked against the earlier ones (graph/sample_hop.c
 * uses a hash set instead above 64 picks: the same picks). */
GKV_GEN void
gkv_gen_floyd(uint64_t bv, int64_t m, int64_t k, int64_t *out)
{
    int64_t t = 0;

    for (int64_t j = m - k; j < m; j++, t++) {
        int64_t x = (int64_t)gkv_gen_below(gkv_gen_draw(bv, (uint64_t)t),
                                           (uint64_t)j + 1);
        for (int64_t q = 0; q < t; q++)
            if (out[q] == x) {
                x = j;
                break;
            }
        out[t] = x;
    }
}

/* Uniform picks of a column of m positions into out[0 .. npicks) as
 * column offsets, in pick order. */
GKV_GEN void
gkv_gen_uniform(uint64_t bv, int64_t m, int64_t k, int replace, int64_t *out)
{
    if (k < 0 || (!replace && m <= k)) {
        for (int64_t i = 0; i < m; i++)
            out[i] = i;
    } else if (replace) {
        if (m > 0)
            for (int64_t t = 0; t < k; t++)
                out[t] = (int64_t)gkv_gen_below(gkv_gen_draw(bv, (uint64_t)t),
                                                (uint64_t)m);
    } else {
        gkv_gen_floyd(bv, m, k, out);
    }
}

/* Is x among p[0..n)? */
GKV_GEN int
gkv_gen_among(const int64_t *p, int64_t n, int64_t x)
{
    for (int64_t q = 0; q < n; q++)
        if (p[q] == x)
            return 1;
    return 0;
}

/* One weighted draw: the first i with S_{i+1} > t, where S sums the
 * weights w[0..m) in order, skipping (as weight 0) the nch positions in
 * chosen[] when chosen is not NULL; none (by rounding): the last i >= 1 of
 * positive (unskipped) weight, else 0. */
GKV_GEN int64_t
gkv_gen_wsearch(const float *w, int64_t m, double t, const int64_t *chosen,
                int64_t nch)
{
    double s = 0.0;

    for (int64_t i = 0; i < m; i++) {
        double wi = chosen != NULL && gkv_gen_among(chosen, nch, i)
                    ? 0.0 : (double)w[i];
        s = GKV_GEN_DADD(s, wi);
        if (s > t)
            return i;
    }
    for (int64_t i = m - 1; i > 0; i--)
        if (w[i] > 0.0f && !(chosen != NULL && gkv_gen_among(chosen, nch, i)))
            return i;
    return 0;
}

/* The sum S_m of w[0..m) (skipping chosen[] as above). */
GKV_GEN double
gkv_gen_wsum(const float *w, int64_t m, const int64_t *chosen, int64_t nch)
{
    double s = 0.0;

    for (int64_t i = 0; i < m; i++) {
        double wi = chosen != NULL && gkv_gen_among(chosen, nch, i)
                    ? 0.0 : (double)w[i];
        s = GKV_GEN_DADD(s, wi);
    }
    return s;
}

/* Weighted picks of a column of m positions with weights w[0..m) (finite,
 * >= 0; z of them positive) into out[0 .. npicks) as column offsets, in
 * pick order. */
GKV_GEN void
gkv_gen_weighted(uint64_t bv, const float *w, int64_t m, int64_t z, int64_t k,
                 int replace, int64_t *out)
{
    double T = gkv_gen_wsum(w, m, (const int64_t *)0, 0);

    if (k < 0 || (!replace && z <= k)) {
        int64_t n = 0;
        for (int64_t i = 0; i < m; i++)
            if (w[i] > 0.0f)
                out[n++] = i;
    } else if (replace) {
        if (z > 0)
            for (int64_t t = 0; t < k; t++)
                out[t] = gkv_gen_wsearch(w, m, GKV_GEN_DMUL(gkv_gen_unit(
                    gkv_gen_draw(bv, (uint64_t)t)), T), (const int64_t *)0, 0);
    } else {
        int64_t nch = 0, t = 0, lim = 8 * k + 32;
        while (nch < k && t < lim) {
            int64_t i = gkv_gen_wsearch(w, m, GKV_GEN_DMUL(gkv_gen_unit(
                gkv_gen_draw(bv, (uint64_t)t++)), T), (const int64_t *)0, 0);
            if (!gkv_gen_among(out, nch, i))
                out[nch++] = i;
        }
        while (nch < k) {
            double Tr = gkv_gen_wsum(w, m, out, nch);
            out[nch] = gkv_gen_wsearch(w, m, GKV_GEN_DMUL(gkv_gen_unit(
                gkv_gen_draw(bv, (uint64_t)t++)), Tr), out, nch);
            nch++;
        }
    }
}

#endif /* GKV_BASE_GEN_H */
