/* util.c - kv/'s error detail (about stores), dtypes, half-precision
 * conversions and the counter-based generator of the initializers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/gen.h"
#include "kv/kv_int.h"

void
gkv_free(void *p)
{
    gkv__free(p);
}

/* ---- error detail: the one per-thread slot (base/err.c) -------------- */

const char *
gkv_store_errmsg(const gkv_store *s)
{
    return gkv__errmsg_about(s);
}

/* ---- dtypes ---------------------------------------------------------- */

static const struct {
    gkv_dtype dt;
    size_t size;
    const char *name;
    const char *alias;
} dtypes[] = {
    {GKV_F32, 4, "f32", "float32"},  {GKV_F16, 2, "f16", "float16"},
    {GKV_BF16, 2, "bf16", "bfloat16"}, {GKV_F64, 8, "f64", "float64"},
    {GKV_I8, 1, "i8", "int8"},       {GKV_U8, 1, "u8", "uint8"},
    {GKV_I32, 4, "i32", "int32"},    {GKV_I64, 8, "i64", "int64"},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

size_t
gkv_dtype_size(gkv_dtype dt)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].dt == dt)
            return dtypes[i].size;
    return 0;
}

const char *
gkv_dtype_name(gkv_dtype dt)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].dt == dt)
            return dtypes[i].name;
    return "?";
}

gkv_err
gkv_dtype_parse(const char *s, gkv_dtype *out)
{
    for (size_t i = 0; s != NULL && i < NDTYPES; i++)
        if (strcmp(s, dtypes[i].name) == 0 || strcmp(s, dtypes[i].alias) == 0) {
            *out = dtypes[i].dt;
            return GKV_OK;
        }
    return GKV_EINVAL;
}

/* ---- half precision -------------------------------------------------- */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float
gkv_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;

    if (exp == 0) {
        /* zero or subnormal: man x 2^-24 */
        float v = (float)man * 0x1.0p-24f;
        return sign ? -v : v;
    }
    if (exp == 31)
        return u2f(sign | 0x7f800000u | (man << 13));
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t
gkv_f32_to_f16(float f)
{
    uint32_t u = f2u(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;

    if (a >= 0x7f800000u)                       /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    if (a >= 0x477ff000u)                       /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {                      /* below 2^-14: subnormal */
        /* round to nearest even at 2^-24 granularity */
        float v = u2f(a) * 0x1.0p24f;
        float r = nearbyintf(v);
        return (uint16_t)(sign | (uint32_t)r);
    }
    /* normal: rebias, round to nearest even on the 13 dropped bits */
    uint32_t m = a + 0xc8000fffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | (m >> 13));
}

float
gkv_bf16_to_f32(uint16_t h)
{
    return u2f((uint32_t)h << 16);
}

uint16_t
gkv_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);

    if ((u & 0x7fffffffu) > 0x7f800000u)        /* nan stays nan */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- counter-based generator ----------------------------------------- */

/* splitmix64's finaliser M of base/gen.h, the sampling generator's too. */
uint64_t
kv__mix3(uint64_t seed, uint64_t row, uint64_t col)
{
    uint64_t z = gkv_gen_mix(seed + GKV_GEN_G);
    z = gkv_gen_mix(z ^ (row * 0xd6e8feb86659fd93ULL));
    return gkv_gen_mix(z ^ (col + 0x632be59bd9b4e019ULL));
}
