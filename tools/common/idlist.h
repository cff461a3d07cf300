/* idlist.h - helpers shared by the tools: ID lists and number parsing.
 *
 * An ID list is what a person types after `kvctl STORE get NAME`:
 *   1,5,9          single IDs, in the order given (duplicates kept)
 *   10:20          a half-open range: 10, 11, ..., 19
 *   1,5,10:20      both, mixed
 *   @FILE          IDs (or ranges) from FILE, separated by whitespace,
 *                  newlines or commas
 * Ranges are kept as ranges, so `0:1000000000` costs nothing until it is
 * walked. */
#ifndef TOOLS_IDLIST_H
#define TOOLS_IDLIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct tools_idseg {
    uint64_t a, b;           /* IDs [a, b), b > a */
} tools_idseg;

typedef struct tools_idlist {
    tools_idseg *seg;        /* in the order given; malloc'd */
    size_t nseg, cap;
    uint64_t count;          /* IDs in all segments (saturates at UINT64_MAX) */
} tools_idlist;

/* A cursor for walking a list: zero-initialise it. */
typedef struct tools_idcur {
    size_t seg;
    uint64_t off;
} tools_idcur;

/* Parses 'spec' (see above) into *l, which the caller zero-initialises and
 * later frees with tools__idlist_free() (also after an error). Returns 0 on
 * success, 2 when the text is not an ID list (err says where), 1 when an
 * @FILE cannot be read (err says why). An empty list is an error (2). */
int  tools__idlist_parse(tools_idlist *l, const char *spec, char *err,
                         size_t err_len);
void tools__idlist_free(tools_idlist *l);

/* Copies up to 'n' next IDs into out; returns how many (0 at the end). */
size_t tools__idlist_next(const tools_idlist *l, tools_idcur *c, uint64_t *out,
                          size_t n);

/* Parses a whole string as a decimal (or 0x hex) unsigned 64-bit number:
 * no sign, no spaces, no trailing text. 0 on success, -1 otherwise. */
int  tools__parse_u64(const char *s, uint64_t *out);

/* Parses "A:B" into a < b. 0 on success, -1 otherwise. */
int  tools__parse_range(const char *s, uint64_t *a, uint64_t *b);

/* Parses "D1[,D2...]" (also 'x' between dims: "4x8") into at most 'max'
 * dims, each >= 1. Returns the number of dims, or -1. */
int  tools__parse_dims(const char *s, uint64_t *dims, int max);

#endif
