/* gkvt_mdb.h - reading a data.mdb image in the tests that damage one
 * (64-bit LMDB 0.9, 4 KiB pages). */
#ifndef GKVT_MDB_H
#define GKVT_MDB_H

#include <stdint.h>

#define GKVT_MDB_PSIZE 4096u

/* The 8 bytes at img + off, in the machine's order. */
uint64_t gkvt_mdb_u64(const unsigned char *img, uint64_t off);
/* The record (MDB_db, 48 bytes: the depth at 6, the root page at 40) of
 * named database 'name' in data.mdb image 'img', from its newest meta
 * page and the main database's root (a leaf: three keys); a cmocka
 * failure when there is none. */
const unsigned char *gkvt_mdb_db(const unsigned char *img, const char *name);
/* The root page of named database 'name' (NULL: the main database) in
 * data.mdb image 'img' (gkvt_mdb_db). */
uint64_t gkvt_mdb_db_root(const unsigned char *img, const char *name);

#endif /* GKVT_MDB_H */
