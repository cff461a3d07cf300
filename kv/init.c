/* init.c - initializers: the rows a new tensor starts with (zeros,
 * constant, uniform, normal), and its first chunks. */
#include <math.h>
#include <string.h>
#include "base/gen.h"
#include "kv/kv_int.h"

/* The next 16-bit float (f16 or bf16: sign and magnitude) towards -inf. */
static uint16_t
half_down(uint16_t h)
{
    if (h == 0)
        return 0x8001;                 /* +0 -> the smallest negative */
    return (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* A uniform element stored as element i of p must be below b: the dtype's
 * rounding (to f32, f16 or bf16 from a double just below b; trunc of a
 * negative integer) can reach b. Steps it down to the dtype's largest
 * value below b. */
static void
elem_below(gkv_dtype dt, void *p, uint64_t i, double b)
{
    double x = kv__elem_load(dt, p, i);
    uint16_t h;

    if (!(x >= b))
        return;
    switch (dt) {
    case GKV_F32: {
        float f = (float)x;
        do
            f = nextafterf(f, -INFINITY);
        while ((double)f >= b);
        memcpy((unsigned char *)p + 4 * i, &f, 4);
        break;
    }
    case GKV_F64:
        x = nextafter(b, -INFINITY);
        memcpy((unsigned char *)p + 8 * i, &x, 8);
        break;
    case GKV_F16:
    case GKV_BF16:
        memcpy(&h, (unsigned char *)p + 2 * i, 2);
        do
            h = half_down(h);
        while ((dt == GKV_F16 ? gkv_f16_to_f32(h) : gkv_bf16_to_f32(h)) >= b);
        memcpy((unsigned char *)p + 2 * i, &h, 2);
        break;
    default:                           /* integers: x - 1 < b, if x has one */
        if (x > -9.2233720368547758e18)
            kv__elem_store(dt, p, i, x - 1);
        break;
    }
}

void
kv__init_rows(const kv_rec *r, uint64_t first, uint64_t n, void *dst)
{
    uint64_t E = r->row_elems;

    if (r->init == GKV_INIT_ZEROS) {
        memset(dst, 0, n * r->row_bytes);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t row = first + i;
        void *p = (unsigned char *)dst + i * r->row_bytes;

        for (uint64_t j = 0; j < E; j++) {
            double v = r->a;

            if (r->init == GKV_INIT_UNIFORM) {
                v = r->a + (r->b - r->a) * gkv_gen_unit(kv__mix3(r->seed, row, j));
                if (v >= r->b)       /* rounding can reach b; keep [a, b) */
                    v = nextafter(r->b, r->a);
                if (!kv__dtype_is_float(r->dtype))
                    v = floor(v);    /* not trunc: [-10, -5) is -10 .. -6 */
                kv__elem_store(r->dtype, p, j, v);
                elem_below(r->dtype, p, j, r->b);   /* and the dtype's */
                continue;
            } else if (r->init == GKV_INIT_NORMAL) {
                double u1 = gkv_gen_unit(kv__mix3(r->seed, row, 2 * j));
                double u2 = gkv_gen_unit(kv__mix3(r->seed, row, 2 * j + 1));
                v = r->a + r->b * sqrt(-2.0 * log1p(-u1)) * cos(2 * M_PI * u2);
            }
            kv__elem_store(r->dtype, p, j, v);
        }
    }
}


gkv_err
kv__materialize(gkv_store *s, MDB_txn *txn, const kv_rec *r)
{
    unsigned char kb[KV_KEY_LEN];

    for (uint64_t c = 0; c < r->nchunks; c++) {
        MDB_val k = {KV_KEY_LEN, kb}, d = {kv__chunk_size(r, c), NULL};
        int mrc;

        kv__key(kb, r->tid, c);
        /* a new tensor has the largest id: its keys sort after all others */
        if ((mrc = mdb_put(txn, s->st_data, &k, &d, MDB_RESERVE | MDB_APPEND)) != 0)
            return kv__fail(s, kv__from_mdb(mrc), "writing chunk %llu of tensor "
                            "id %u: %s", (unsigned long long)c, r->tid,
                            mdb_strerror(mrc));
        kv__init_rows(r, r->lo + c * r->chunk_rows, kv__chunk_nrows(r, c),
                      (unsigned char *)d.mv_data + KV_CHUNK_HDR);
        kv__chunk_seal(r, c, d.mv_data);
    }
    return GKV_OK;
}
