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

/* The main database's root page in image img. */
static uint64_t
main_root(const unsigned char *img)
{
    const uint64_t ps = GKVT_MDB_PSIZE;
    uint64_t m = gkvt_mdb_u64(img, 144) > gkvt_mdb_u64(img, ps + 144) ? 0 : ps;

    return gkvt_mdb_u64(img, m + 128);
}

const unsigned char *
gkvt_mdb_db(const unsigned char *img, const char *name)
{
    uint64_t p = main_root(img) * GKVT_MDB_PSIZE;
    uint16_t lower, off, ks;

    memcpy(&lower, img + p + 12, 2);
    for (unsigned i = 0; i < (lower - 16u) / 2; i++) {
        memcpy(&off, img + p + 16 + 2 * i, 2);
        memcpy(&ks, img + p + off + 6, 2);
        if (ks == strlen(name) && memcmp(img + p + off + 8, name, ks) == 0)
            return img + p + off + 8 + ks;
    }
    fail_msg("no database '%s' in the image", name);
    return NULL;
}

uint64_t
gkvt_mdb_db_root(const unsigned char *img, const char *name)
{
    if (name == NULL)
        return main_root(img);
    return gkvt_mdb_u64(gkvt_mdb_db(img, name), 40);
}
