/* idlist.c - ID lists and number parsing for the tools. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "idlist.h"

#define IDFILE_MAX (1u << 30)   /* bytes of an @FILE we read */

int
tools__parse_u64(const char *s, uint64_t *out)
{
    unsigned long long v;
    int base = 10;
    char *end;

    /* decimal, or hex after 0x; never octal: "010" is ten */
    if (s != NULL && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        base = 16;
    }
    if (s == NULL || !isxdigit((unsigned char)*s) ||
        (base == 10 && !isdigit((unsigned char)*s)))
        return -1;
    errno = 0;
    v = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int
tools__parse_range(const char *s, uint64_t *a, uint64_t *b)
{
    const char *colon = s ? strchr(s, ':') : NULL;
    char left[32];
    size_t n;

    if (colon == NULL || (n = (size_t)(colon - s)) == 0 || n >= sizeof left)
        return -1;
    memcpy(left, s, n);
    left[n] = '\0';
    if (tools__parse_u64(left, a) != 0 || tools__parse_u64(colon + 1, b) != 0 ||
        *b <= *a)
        return -1;
    return 0;
}

int
tools__parse_dims(const char *s, uint64_t *dims, int max)
{
    int n = 0;

    if (s == NULL || *s == '\0')
        return -1;
    for (;;) {
        unsigned long long v;
        char *end;

        if (!isdigit((unsigned char)*s) || n == max)
            return -1;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || v == 0)
            return -1;
        dims[n++] = (uint64_t)v;
        if (*end == '\0')
            return n;
        if (*end != ',' && *end != 'x')
            return -1;
        s = end + 1;
    }
}

static int
add_seg(tools_idlist *l, uint64_t a, uint64_t b)
{
    if (l->nseg > 0 && l->seg[l->nseg - 1].b == a) {
        l->seg[l->nseg - 1].b = b;          /* 1,2,3 is one run */
    } else {
        if (l->nseg == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 16;
            tools_idseg *p = realloc(l->seg, cap * sizeof *p);
            if (p == NULL)
                return -1;
            l->seg = p;
            l->cap = cap;
        }
        l->seg[l->nseg++] = (tools_idseg){a, b};
    }
    l->count = b - a > UINT64_MAX - l->count ? UINT64_MAX : l->count + (b - a);
    return 0;
}

/* Parses the items of [p, end), separated by commas and whitespace; an
 * empty item between commas is an error. 'where' names the source. */
static int
parse_tokens(tools_idlist *l, const char *p, const char *end,
             const char *where, char *err, size_t err_len)
{
    const char *base = p;
    unsigned tokno = 0;
    int after_comma = 1;

    while (p < end) {
        const char *t = p;
        char tok[64];
        uint64_t a, b;
        size_t n;

        if (isspace((unsigned char)*p)) {
            p++;
            continue;
        }
        if (*p == ',') {
            if (after_comma) {
                snprintf(err, err_len, "%s: empty item at character %td",
                         where, p - base + 1);
                return 2;
            }
            after_comma = 1;
            p++;
            continue;
        }
        while (p < end && *p != ',' && !isspace((unsigned char)*p))
            p++;
        n = (size_t)(p - t);
        tokno++;
        after_comma = 0;
        if (n >= sizeof tok || memchr(t, '\0', n) != NULL) {
            snprintf(err, err_len, "%s: item %u is not an ID",
                     where, tokno);
            return 2;
        }
        memcpy(tok, t, n);
        tok[n] = '\0';
        if (strchr(tok, ':') != NULL) {
            if (tools__parse_range(tok, &a, &b) != 0) {
                snprintf(err, err_len, "%s: '%s' is not a range A:B with "
                         "A < B", where, tok);
                return 2;
            }
        } else {
            if (tools__parse_u64(tok, &a) != 0 || a == UINT64_MAX) {
                snprintf(err, err_len, "%s: '%s' is not an ID (a non-negative "
                         "integer)", where, tok);
                return 2;
            }
            b = a + 1;
        }
        if (add_seg(l, a, b) != 0) {
            snprintf(err, err_len, "out of memory");
            return 1;
        }
    }
    if (after_comma && tokno > 0) {
        snprintf(err, err_len, "%s: empty item after the last comma", where);
        return 2;
    }
    return 0;
}

static int
parse_file(tools_idlist *l, const char *path, char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL, where[300];
    size_t len = 0, cap = 0;
    int rc;

    if (f == NULL) {
        snprintf(err, err_len, "cannot read ID file '%s': %s", path,
                 strerror(errno));
        return 1;
    }
    for (;;) {
        size_t r;
        if (len == cap) {
            char *p;
            if (cap >= IDFILE_MAX) {
                snprintf(err, err_len, "ID file '%s' is over %u MiB", path,
                         IDFILE_MAX >> 20);
                free(buf);
                fclose(f);
                return 1;
            }
            cap = cap ? cap * 2 : 65536;
            if ((p = realloc(buf, cap)) == NULL) {
                snprintf(err, err_len, "out of memory");
                free(buf);
                fclose(f);
                return 1;
            }
            buf = p;
        }
        r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0)
            break;
    }
    if (ferror(f)) {
        snprintf(err, err_len, "cannot read ID file '%s': %s", path,
                 strerror(errno));
        free(buf);
        fclose(f);
        return 1;
    }
    fclose(f);
    snprintf(where, sizeof where, "ID file '%.256s'", path);
    rc = parse_tokens(l, buf ? buf : "", (buf ? buf : "") + len, where, err,
                      err_len);
    free(buf);
    return rc;
}

int
tools__idlist_parse(tools_idlist *l, const char *spec, char *err, size_t err_len)
{
    int rc;

    if (spec == NULL) {
        snprintf(err, err_len, "no IDs");
        return 2;
    }
    if (spec[0] == '@')
        rc = parse_file(l, spec + 1, err, err_len);
    else
        rc = parse_tokens(l, spec, spec + strlen(spec), "IDs", err, err_len);
    if (rc == 0 && l->count == 0) {
        snprintf(err, err_len, "%s holds no IDs", spec[0] == '@' ? spec + 1 : "the ID list");
        rc = 2;
    }
    return rc;
}

void
tools__idlist_free(tools_idlist *l)
{
    if (l != NULL) {
        free(l->seg);
        memset(l, 0, sizeof *l);
    }
}

size_t
tools__idlist_next(const tools_idlist *l, tools_idcur *c, uint64_t *out, size_t n)
{
    size_t k = 0;

    while (k < n && c->seg < l->nseg) {
        const tools_idseg *s = &l->seg[c->seg];
        uint64_t id = s->a + c->off;

        out[k++] = id;
        if (id + 1 == s->b) {
            c->seg++;
            c->off = 0;
        } else {
            c->off++;
        }
    }
    return k;
}
