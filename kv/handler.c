/* handler.c - push handlers: the built-in ones (assign, add, sgd,
 * adagrad, adam), registered ones, the check of a push's input (lengths,
 * IDs, finite values) and of its results (finite rows and state). */
#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <string.h>
#include "kv/kv_int.h"

static inline int
aligned(const void *a, const void *b, size_t n)
{
    return (((uintptr_t)a | (uintptr_t)b) & (n - 1)) == 0;
}

static const char *const builtin_names[] = {
    "assign", "add", "sgd", "adagrad", "adam"
};

static void
optim_step(const kv_push *a, const kv_rec *r, unsigned char *w,
           unsigned char *const st[3], gkv_dtype sdt, uint64_t E,
           const double *g)
{
    switch (a->kind) {
    case KV_H_SGD:
        for (uint64_t j = 0; j < E; j++)
            kv__elem_store(r->dtype, w, j, kv__elem_load(r->dtype, w, j) - a->lr * g[j]);
        break;
    case KV_H_ADAGRAD:
        if (r->dtype == GKV_F32 && sdt == GKV_F32 && aligned(w, st[0], 4)) {
            /* the common case, in a loop the compiler can vectorise; the
             * same operations, so the same bits, as the general one */
            float *wv = (float *)w, *sv = (float *)st[0];
            const double lr = a->lr, eps = a->eps;
            uint64_t j = 0;
#ifdef __SSE2__
            /* two elements at a time: the same IEEE operations in the
             * same order (no fused multiply-add), so the same bits; the
             * scalar sqrt and division were most of the step */
            const __m128d vlr = _mm_set1_pd(lr), veps = _mm_set1_pd(eps);
            for (; j + 2 <= E; j += 2) {
                __m128d gv = _mm_loadu_pd(g + j);
                __m128d sd = _mm_cvtps_pd(_mm_castsi128_ps(
                    _mm_loadl_epi64((const __m128i *)(sv + j))));
                __m128 sf = _mm_cvtpd_ps(_mm_add_pd(sd, _mm_mul_pd(gv, gv)));
                __m128d wd = _mm_cvtps_pd(_mm_castsi128_ps(
                    _mm_loadl_epi64((const __m128i *)(wv + j))));
                __m128d den = _mm_add_pd(_mm_sqrt_pd(_mm_cvtps_pd(sf)), veps);

                _mm_storel_epi64((__m128i *)(sv + j), _mm_castps_si128(sf));
                wd = _mm_sub_pd(wd, _mm_div_pd(_mm_mul_pd(vlr, gv), den));
                _mm_storel_epi64((__m128i *)(wv + j),
                                 _mm_castps_si128(_mm_cvtpd_ps(wd)));
            }
#endif
            for (; j < E; j++) {
                float ss = (float)((double)sv[j] + g[j] * g[j]);
                sv[j] = ss;
                wv[j] = (float)((double)wv[j] - lr * g[j] / (sqrt((double)ss) + eps));
            }
            break;
        }
        for (uint64_t j = 0; j < E; j++) {
            double ss = kv__elem_load(sdt, st[0], j) + g[j] * g[j];
            kv__elem_store(sdt, st[0], j, ss);
            ss = kv__elem_load(sdt, st[0], j);  /* the stored value, as rounded */
            kv__elem_store(r->dtype, w, j, kv__elem_load(r->dtype, w, j) -
                           a->lr * g[j] / (sqrt(ss) + a->eps));
        }
        break;
    case KV_H_ADAM: {
        int64_t t;
        double bc1, bc2;

        memcpy(&t, st[2], 8);
        t++;
        memcpy(st[2], &t, 8);
        bc1 = 1 - pow(a->b1, (double)t);
        bc2 = 1 - pow(a->b2, (double)t);
        for (uint64_t j = 0; j < E; j++) {
            double m = a->b1 * kv__elem_load(sdt, st[0], j) + (1 - a->b1) * g[j];
            double v = a->b2 * kv__elem_load(sdt, st[1], j) + (1 - a->b2) * g[j] * g[j];
            kv__elem_store(sdt, st[0], j, m);
            kv__elem_store(sdt, st[1], j, v);
            m = kv__elem_load(sdt, st[0], j);
            v = kv__elem_load(sdt, st[1], j);
            kv__elem_store(r->dtype, w, j, kv__elem_load(r->dtype, w, j) -
                           a->lr * (m / bc1) / (sqrt(v / bc2) + a->eps));
        }
        break;
    }
    default:
        break;
    }
}

/* Exact integer sum of a and b, saturated to [lo, hi] (which hold the
 * dtype's range; a and b are in it, so a + b cannot overflow int64 unless
 * the dtype is i64). */
static inline int64_t
sat_add(int64_t a, int64_t b, int64_t lo, int64_t hi)
{
    int64_t v;

    if (__builtin_add_overflow(a, b, &v))
        return b < 0 ? INT64_MIN : INT64_MAX;
    return v < lo ? lo : v > hi ? hi : v;
}

/* Integer "add": element by element through memcpy (rows in an LMDB value
 * are only 2-byte aligned, see kv__elem_load), exact in the dtype's own width
 * (never through double, which rounds above 2^53), and saturating at its
 * limits as every integer store does (kv__elem_store clamps). So the result
 * depends neither on where LMDB put the row nor on the path (a write-back
 * copy is aligned, a stored row often not). */
#define ADD_INT(T, lo, hi) do {                                            \
        for (uint64_t j = 0; j < E; j++) {                                  \
            T w_, x_;                                                       \
            memcpy(&w_, (unsigned char *)row + j * sizeof w_, sizeof w_);   \
            memcpy(&x_, (const unsigned char *)in + j * sizeof x_, sizeof x_); \
            w_ = (T)sat_add(w_, x_, (lo), (hi));                            \
            memcpy((unsigned char *)row + j * sizeof w_, &w_, sizeof w_);   \
        }                                                                   \
    } while (0)

static void
row_add(gkv_dtype dt, void *row, const void *in, uint64_t E)
{
    switch (dt) {
    case GKV_I64: ADD_INT(int64_t, INT64_MIN, INT64_MAX); return;
    case GKV_I32: ADD_INT(int32_t, INT32_MIN, INT32_MAX); return;
    case GKV_I8:  ADD_INT(int8_t, INT8_MIN, INT8_MAX); return;
    case GKV_U8:  ADD_INT(uint8_t, 0, UINT8_MAX); return;
    default:      break;
    }
    /* floats: a typed loop only on aligned rows (see kv__elem_load) */
    if (dt == GKV_F32 && aligned(row, in, 4)) {
        float *w = row;
        const float *x = in;
        for (uint64_t j = 0; j < E; j++)
            w[j] += x[j];
    } else {
        for (uint64_t j = 0; j < E; j++)
            kv__elem_store(dt, row, j, kv__elem_load(dt, row, j) + kv__elem_load(dt, in, j));
    }
}
#undef ADD_INT

/* ---- finite inputs ------------------------------------------------------
 *
 * A NaN or an infinity pushed through add or an optimizer stays in the row
 * and, through an optimizer, in its state (adagrad's sum of squares, adam's
 * moments) for good: every later step reads it back. Such a push is
 * refused whole, before anything is applied. assign is not checked: it
 * stores what it is given (a NaN can be data, a missing value), touches no
 * state, and the next assign replaces it all; a registered handler decides
 * for itself. */

/* An element is NaN or infinite when its magnitude bits (all but the
 * sign) are above those of the dtype's largest finite value (f64: of its
 * high word). Signed compares of masked words, through memcpy (rows need
 * not be aligned), which the compiler vectorises over a block of fixed
 * length; the element itself is looked for only from the first block
 * that has one. */
#define SCAN_BLOCK 256
#define SCAN(T, BAD) do {                                                   \
        size_t b_ = 0;                                                      \
        for (; b_ + SCAN_BLOCK <= n; b_ += SCAN_BLOCK) {                    \
            T acc_ = 0;                                                     \
            for (size_t j_ = 0; j_ < SCAN_BLOCK; j_++)                      \
                acc_ |= BAD(p, b_ + j_) ? -1 : 0;                           \
            if (acc_ != 0)                                                  \
                break;                                                      \
        }                                                                   \
        for (j = b_; j < n; j++)                                            \
            if (BAD(p, j))                                                  \
                goto found;                                                 \
    } while (0)

static inline int
bad_f32(const unsigned char *p, size_t j)
{
    int32_t w;
    memcpy(&w, p + 4 * j, 4);
    return (w & 0x7fffffff) > 0x7f7fffff;
}

static inline int
bad_f64(const unsigned char *p, size_t j)
{
    uint64_t w;
    memcpy(&w, p + 8 * j, 8);
    return (int32_t)((w >> 32) & 0x7fffffff) > 0x7fefffff;
}

static inline int
bad_f16(const unsigned char *p, size_t j)
{
    int16_t w;
    memcpy(&w, p + 2 * j, 2);
    return (int16_t)(w & 0x7fff) > 0x7bff;
}

static inline int
bad_bf16(const unsigned char *p, size_t j)
{
    int16_t w;
    memcpy(&w, p + 2 * j, 2);
    return (int16_t)(w & 0x7fff) > 0x7f7f;
}

size_t
gkv_dtype_nonfinite(gkv_dtype dt, const void *rows, size_t n,
                    const char **what)
{
    const unsigned char *p = rows;
    size_t j;
    double x;

    switch (dt) {
    case GKV_F32:  SCAN(int32_t, bad_f32); break;
    case GKV_F64:  SCAN(int32_t, bad_f64); break;
    case GKV_F16:  SCAN(int16_t, bad_f16); break;
    case GKV_BF16: SCAN(int16_t, bad_bf16); break;
    default:       break;
    }
    return SIZE_MAX;
found:
    x = kv__elem_load(dt, p, j);
    if (what != NULL)
        *what = isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf";
    return j;
}
#undef SCAN
#undef SCAN_BLOCK

/* GKV_EINVAL, naming the row and column, when push a (add or an
 * optimizer, on tensor r) carries a NaN or an infinity; else GKV_OK. */
static gkv_err
push_finite(gkv_store *s, const kv_push *a, const kv_rec *r)
{
    const char *what;
    size_t j;

    if (a->kind < KV_H_ADD || a->kind > KV_H_ADAM || !kv__dtype_is_float(r->dtype) ||
        a->n == 0 || (j = gkv_dtype_nonfinite(r->dtype, a->rows,
                                              a->n * r->row_elems,
                                              &what)) == SIZE_MAX)
        return GKV_OK;
    return kv__fail(s, GKV_EINVAL, "tensor '%s': push '%s': row %llu col %llu "
                    "is %s: refused, nothing applied", a->name,
                    builtin_names[a->kind],
                    (unsigned long long)a->ids[j / r->row_elems],
                    (unsigned long long)(j % r->row_elems), what);
}

gkv_err
kv__push_check(gkv_store *s, const kv_push *a, const kv_rec *r)
{
    if (a->n > SIZE_MAX / r->row_bytes || a->rows_len != a->n * r->row_bytes)
        return kv__len_error(s, a->name, r, a->n, a->rows_len);
    if (a->n > UINT32_MAX)
        return kv__fail(s, GKV_EINVAL, "tensor '%s': push of %zu rows; at most "
                        "%u per call", a->name, a->n, UINT32_MAX);
    for (size_t i = 0; i < a->n; i++)
        if (a->ids[i] < r->lo || a->ids[i] >= r->hi)
            return kv__range_error(s, a->name, r, a->ids[i], i);
    if (a->kind >= KV_H_SGD && a->kind <= KV_H_ADAM && !kv__dtype_is_float(r->dtype))
        return kv__fail(s, GKV_EINVAL, "tensor '%s': optimizer '%s' needs a "
                        "floating dtype, not %s", a->name,
                        builtin_names[a->kind], gkv_dtype_name(r->dtype));
    return push_finite(s, a, r);
}

/* The refusal of an adam push to ID 'id', whose step count t is
 * KV_STEP_MAX or more. */
gkv_err
kv__step_full(gkv_store *s, const kv_push *a, uint64_t id, int64_t t)
{
    return kv__fail(s, GKV_EINVAL, "tensor '%s': ID %llu has adam step count "
                    "%lld, the most a row may hold (INT64_MAX - 1): the push "
                    "is refused (restore a smaller '%s#adam_t', or "
                    "gkv_opt_reset())", a->name, (unsigned long long)id,
                    (long long)t, a->name);
}

/* ---- finite results -----------------------------------------------------
 *
 * Finite inputs can still give a result that is not finite in the dtype
 * it is stored in: adagrad's sum of squares of a gradient of 3e38
 * overflows f32, 60000 + 60000 overflows f16, lr 1e30 times a gradient of
 * 1e30 overflows an f32 row. Stored, it would poison the row or its state
 * as an infinite input would. So each step is checked right after it is
 * applied, on the row and state it has just written (still in cache), and
 * a hit fails the push whole: a direct push's transaction aborts; a
 * write-back push passes an undo log that kv__apply_run puts back. */

/* Whether any of the n elements of dtype dt at p (any alignment) is a NaN
 * or an infinity (every exponent bit set): adding the exponent's lowest
 * bit to the magnitude then carries into the sign bit, and only then. An
 * OR over every element, with no early exit, which the compiler
 * vectorises; integer dtypes have none. */
#define ANY_BAD_ONE(T, one, sign, j) do {                                   \
        T w_;                                                               \
        memcpy(&w_, p + (j) * sizeof w_, sizeof w_);                        \
        acc_ |= (T)((T)(w_ & (T)~(T)(sign)) + (T)(one));                    \
    } while (0)
/* blocks of fixed length, which -O2's vectoriser takes, then the tail */
#define ANY_BAD(T, one, sign) do {                                          \
        T acc_ = 0;                                                         \
        uint64_t j_ = 0;                                                    \
        for (; j_ + 32 <= n; j_ += 32)                                      \
            for (uint64_t k_ = 0; k_ < 32; k_++)                            \
                ANY_BAD_ONE(T, one, sign, j_ + k_);                         \
        for (; j_ < n; j_++)                                                \
            ANY_BAD_ONE(T, one, sign, j_);                                  \
        return (acc_ & (T)(sign)) != 0;                                     \
    } while (0)

static inline int
any_bad(gkv_dtype dt, const unsigned char *p, uint64_t n)
{
    switch (dt) {
    case GKV_F32:  ANY_BAD(uint32_t, 0x00800000u, 0x80000000u);
    case GKV_F64:  ANY_BAD(uint64_t, 0x0010000000000000ull, 0x8000000000000000ull);
    case GKV_F16:  ANY_BAD(uint16_t, 0x0400u, 0x8000u);
    case GKV_BF16: ANY_BAD(uint16_t, 0x0080u, 0x8000u);
    default:       return 0;
    }
}
#undef ANY_BAD
#undef ANY_BAD_ONE

/* Whether the row (at row) or a state row (sp[k]) of a step holds a NaN
 * or an infinity. */
static inline int
step_bad(const kv_rec *r, const kv_rec *st, size_t nst,
         const unsigned char *row, unsigned char *const sp[3])
{
    int bad = any_bad(r->dtype, row, r->row_elems);

    for (size_t k = 0; k < nst; k++)
        bad |= any_bad(st[k].dtype, sp[k], st[k].row_elems);
    return bad;
}

/* Copies a step's row and state rows to dst, one after the other. */
static unsigned char *
step_save(unsigned char *dst, const kv_rec *r, const kv_rec *st, size_t nst,
          const unsigned char *row, unsigned char *const sp[3])
{
    memcpy(dst, row, r->row_bytes);
    dst += r->row_bytes;
    for (size_t k = 0; k < nst; k++) {
        memcpy(dst, sp[k], st[k].row_bytes);
        dst += st[k].row_bytes;
    }
    return dst;
}

/* The refusal of push a at ID id, whose step (of 'copies' copies of the
 * ID) left a NaN or an infinity in the row (at row) or in a state
 * companion k (at sp[k]): names the first column, where (the row or the
 * companion) and why. 'in' is the pushed row (add), g the gradient.
 * 'was' NULL when the row and state were all finite before the step;
 * else what they were (step_save), and only an element that was finite
 * counts: GKV_OK when there is none (a value already NaN or infinite,
 * assigned or left by a registered handler, is not the push's doing). */
static gkv_err
result_fail(gkv_store *s, const kv_push *a, const kv_rec *r, const kv_rec *st,
            size_t nst, uint64_t id, const unsigned char *row,
            unsigned char *const sp[3], const unsigned char *in,
            const double *g, size_t copies, const unsigned char *was)
{
    char where[GKV_NAME_MAX + 48] = "", why[160];
    uint64_t j = 0;
    size_t k = 0;
    double x = 0;

    for (j = 0; j < r->row_elems; j++) {
        /* the state first: a step reads it, so it is the cause */
        const unsigned char *w = was != NULL ? was + r->row_bytes : NULL;

        for (k = 0; k <= nst; k++) {
            const unsigned char *now = k < nst ? sp[k] : row;
            const gkv_dtype dt = k < nst ? st[k].dtype : r->dtype;
            const unsigned char *old = k < nst ? w : was;

            if (k < nst && w != NULL)
                w += st[k].row_bytes;
            if (k < nst && kv__state_is_step(a->kind, k))
                continue;
            x = kv__elem_load(dt, now, j);
            if (!isfinite(x) &&
                (old == NULL || isfinite(kv__elem_load(dt, old, j))))
                goto found;
        }
    }
    if (was != NULL)
        return GKV_OK;
    return kv__fail(s, GKV_EINVAL, "tensor '%s': push '%s': row %llu: a "
                    "result is not finite: refused, nothing applied", a->name,
                    builtin_names[a->kind], (unsigned long long)id);
found:
    if (k < nst)
        snprintf(where, sizeof where, " in its state '%s%s'", a->name,
                 kv__state_suffix(a->kind, k));
    if (a->kind == KV_H_ADD)
        snprintf(why, sizeof why, "adding %g overflows %s",
                 kv__elem_load(r->dtype, in, j), gkv_dtype_name(r->dtype));
    else if (!isfinite(g[j]))
        snprintf(why, sizeof why, "the gradients of its %zu copies sum past "
                 "f64", copies);
    else if (isnan(x))
        snprintf(why, sizeof why, "the step with gradient %g is not a "
                 "number", g[j]);
    else if (k < nst)
        snprintf(why, sizeof why, "gradient %g overflows %s", g[j],
                 gkv_dtype_name(st[k].dtype));
    else
        snprintf(why, sizeof why, "gradient %g with lr %g overflows %s", g[j],
                 a->lr, gkv_dtype_name(r->dtype));
    return kv__fail(s, GKV_EINVAL, "tensor '%s': push '%s': row %llu col %llu "
                    "would become %s%s (%s): refused, nothing applied",
                    a->name, builtin_names[a->kind], (unsigned long long)id,
                    (unsigned long long)j,
                    isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf", where, why);
}

/* How far ahead kv__apply_run asks for rows, and how many bytes of each:
 * rows spread over a large tensor miss the cache each (the row, its state,
 * the gradient, which the sort order reads out of order), and waiting for
 * them one after another was most of a write-back push. */
#define KV_PF_AHEAD 8
#define KV_PF_BYTES 256

static inline void
prefetch_row(const void *p, size_t len, int rw)
{
    const char *c = p;

    if (len > KV_PF_BYTES)
        len = KV_PF_BYTES;
    for (size_t o = 0; o < len; o += 64) {
        if (rw)
            __builtin_prefetch(c + o, 1);
        else
            __builtin_prefetch(c + o, 0);
    }
}

/* Puts back the undo entry at u (kv__apply_run): an ID, then its row and
 * its state rows as they were before the step. */
static void
undo_put(const unsigned char *u, const kv_rec *r, const kv_rec *st,
         size_t nst, uint64_t base_id, unsigned char *base,
         unsigned char *const sbase[3])
{
    uint64_t id;

    memcpy(&id, u, 8);
    u += 8;
    memcpy(base + (id - base_id) * r->row_bytes, u, r->row_bytes);
    u += r->row_bytes;
    for (size_t k = 0; k < nst; k++) {
        memcpy(sbase[k] + (id - base_id) * st[k].row_bytes, u, st[k].row_bytes);
        u += st[k].row_bytes;
    }
}

gkv_err
kv__apply_run(gkv_store *s, const kv_push *a, const kv_rec *r,
              const gkv_tensor_desc *desc, const kv_rec *st, size_t nst,
              const uint32_t *order, size_t i, size_t e, uint64_t base_id,
              unsigned char *base, unsigned char *const sbase[3], double *g,
              unsigned char *undo)
{
    size_t ue = kv__undo_entry_bytes(r, st, nst), nu = 0;   /* entries */
    unsigned char *was = NULL;
    gkv_err rc = GKV_OK;

    for (; i < e; i++) {
        uint64_t id = a->ids[order[i]];
        if (i + KV_PF_AHEAD < e) {
            const size_t q = order[i + KV_PF_AHEAD];
            const uint64_t off = a->ids[q] - base_id;

            prefetch_row(base + off * r->row_bytes, r->row_bytes, 1);
            prefetch_row(a->rows + q * r->row_bytes, r->row_bytes, 0);
            for (size_t k = 0; k < nst; k++)
                prefetch_row(sbase[k] + off * st[k].row_bytes,
                             st[k].row_bytes, 1);
        }
        unsigned char *row = base + (id - base_id) * r->row_bytes;
        const unsigned char *in = a->rows + (size_t)order[i] * r->row_bytes;
        unsigned char *sp[3] = {NULL, NULL, NULL};
        const unsigned char *prev = NULL;   /* what was, when kept */

        for (size_t k = 0; k < nst; k++)
            sp[k] = sbase[k] + (id - base_id) * st[k].row_bytes;
        if (undo != NULL) {
            /* what this step changes, to put back if the push fails; it
             * also tells a value the step made not finite from one that
             * was so (no scan of the old values needed) */
            unsigned char *u = undo + nu++ * ue;

            memcpy(u, &id, 8);
            step_save(u + 8, r, st, nst, row, sp);
            prev = u + 8;
        } else if (a->kind >= KV_H_ADD && a->kind <= KV_H_ADAM &&
                   step_bad(r, st, nst, row, sp)) {
            /* rare: a value already not finite; keep what was, so that
             * only a value the step makes not finite counts */
            if (was == NULL && (was = gkv__malloc(ue)) == NULL) {
                rc = kv__fail(s, GKV_ENOMEM, "tensor '%s': out of memory",
                              a->name);
                goto out;
            }
            step_save(was, r, st, nst, row, sp);
            prev = was;
        }
        switch (a->kind) {
        case KV_H_ASSIGN:
            memcpy(row, in, r->row_bytes);
            break;
        case KV_H_ADD:
            row_add(r->dtype, row, in, r->row_elems);
            if (any_bad(r->dtype, row, r->row_elems) &&
                (rc = result_fail(s, a, r, st, nst, id, row, sp, in, g, 1,
                                  prev)) != GKV_OK)
                goto out;
            break;
        case KV_H_CUSTOM:
            if ((rc = a->fn(a->ctx, desc, id, row, in)) != GKV_OK) {
                rc = kv__fail(s, GKV_EHANDLER, "tensor '%s': push handler "
                              "failed at ID %llu: %s", a->name,
                              (unsigned long long)id, gkv_strerror(rc));
                goto out;
            }
            break;
        default: {
            /* average (or sum) the gradients of every copy of this ID,
             * step once */
            size_t f = i;

            for (uint64_t j = 0; j < r->row_elems; j++)
                g[j] = 0;
            for (; f < e && a->ids[order[f]] == id; f++) {
                const unsigned char *gi = a->rows + (size_t)order[f] * r->row_bytes;
                if (r->dtype == GKV_F32 && aligned(gi, gi, 4)) {
                    const float *gf = (const float *)gi;
                    for (uint64_t j = 0; j < r->row_elems; j++)
                        g[j] += gf[j];
                } else {
                    for (uint64_t j = 0; j < r->row_elems; j++)
                        g[j] += kv__elem_load(r->dtype, gi, j);
                }
            }
            if (f - i > 1 && !a->dups_sum)
                for (uint64_t j = 0; j < r->row_elems; j++)
                    g[j] /= (double)(f - i);
            if (a->kind == KV_H_ADAM && nst == 3) {
                /* t + 1 must stay restorable */
                int64_t t;
                memcpy(&t, sp[2], 8);
                if (t >= KV_STEP_MAX) {
                    rc = kv__step_full(s, a, id, t);
                    goto out;
                }
            }
            optim_step(a, r, row, sp, nst ? st[0].dtype : GKV_F32,
                       r->row_elems, g);
            if (step_bad(r, st, nst, row, sp) &&
                (rc = result_fail(s, a, r, st, nst, id, row, sp, in, g, f - i,
                                  prev)) != GKV_OK)
                goto out;
            i = f - 1;
            break;
        }
        }
    }
out:
    /* a failed push changes nothing: put back, newest first, what the
     * steps so far changed (the direct push's transaction aborts) */
    while (rc != GKV_OK && undo != NULL && nu > 0) {
        nu--;
        undo_put(undo + nu * ue, r, st, nst, base_id, base, sbase);
    }
    gkv__free(was);
    return rc;
}

gkv_err
kv__handler_find(gkv_store *s, const char *h, kv_push *a)
{
    struct handler *hd;

    a->kind = KV_H_CUSTOM;
    for (int k = 0; k < (int)(sizeof builtin_names / sizeof *builtin_names); k++)
        if (strcmp(h, builtin_names[k]) == 0)
            a->kind = (enum kv_hkind)k;
    if (a->kind == KV_H_CUSTOM) {
        pthread_mutex_lock(&s->st_mu);
        for (hd = s->st_handlers; hd != NULL; hd = hd->next)
            if (strcmp(hd->name, h) == 0) {
                a->fn = hd->fn;
                a->ctx = hd->ctx;
                break;
            }
        pthread_mutex_unlock(&s->st_mu);
        if (a->fn == NULL)
            return kv__fail(s, GKV_EHANDLER, "tensor '%s': no push handler "
                            "'%.64s' (built in: assign, add, sgd, adagrad, "
                            "adam; others need gkv_handler_register)",
                            a->name, h);
    }
    return GKV_OK;
}

gkv_err
gkv_handler_register(gkv_store *s, const char *name, gkv_push_fn fn, void *ctx)
{
    struct handler *h;

    kv__clear(s);
    if (name == NULL || *name == '\0' || strlen(name) > 63 || fn == NULL)
        return kv__fail(s, GKV_EINVAL, "handler name must be 1..63 characters "
                        "and the function non-NULL");
    for (size_t k = 0; k < sizeof builtin_names / sizeof *builtin_names; k++)
        if (strcmp(name, builtin_names[k]) == 0)
            return kv__fail(s, GKV_EINVAL, "'%s' is a built-in handler", name);
    pthread_mutex_lock(&s->st_mu);
    for (h = s->st_handlers; h != NULL; h = h->next)
        if (strcmp(h->name, name) == 0)
            break;
    if (h == NULL) {
        if ((h = gkv__calloc(1, sizeof *h)) == NULL) {
            pthread_mutex_unlock(&s->st_mu);
            return kv__fail(s, GKV_ENOMEM, "out of memory registering '%s'", name);
        }
        snprintf(h->name, sizeof h->name, "%s", name);
        h->next = s->st_handlers;
        s->st_handlers = h;
    }
    h->fn = fn;
    h->ctx = ctx;
    pthread_mutex_unlock(&s->st_mu);
    return GKV_OK;
}
