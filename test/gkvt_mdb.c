/* gkvt_mdb.c - reading a data.mdb image in the tests (gkvt_mdb.h). */
#include <string.h>
#include "gkvt.h"
#include "gkvt_mdb.h"

uint64_t
gkvt_mdb_u64(const unsigned char *img, uint64_t off)
{
    uint64_t v;

    memcpy(&v, img + off, 8);
    return v;
}

uint64_t
gkvt_mdb_db_root(const unsigned char *img, const char *name)
{
    const uint64_t ps = GKVT_MDB_PSIZE;
    uint64_t m = gkvt_mdb_u64(img, 144) > gkvt_mdb_u64(img, ps + 144) ? 0 : ps;
    uint64_t main = gkvt_mdb_u64(img, m + 128), p = main * ps;
    uint16_t lower, off, ks;

    if (name == NULL)
        return main;
    memcpy(&lower, img + p + 12, 2);
    for (unsigned i = 0; i < (lower - 16u) / 2; i++) {
        memcpy(&off, img + p + 16 + 2 * i, 2);
        memcpy(&ks, img + p + off + 6, 2);
        if (ks == strlen(name) && memcmp(img + p + off + 8, name, ks) == 0)
            return gkvt_mdb_u64(img, p + off + 8 + ks + 40);
    }
    fail_msg("no database '%s' in the image", name);
    return 0;
}
