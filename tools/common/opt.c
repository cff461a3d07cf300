/* opt.c - see opt.h. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "idlist.h"
#include "opt.h"

static const char *const default_wording[OPT_E_COUNT] = {
    [OPT_E_UNKNOWN] = "unknown option '%s'",
    [OPT_E_FLAG_VALUE] = "unknown option '%s'",     /* + " (NAME takes...)" */
    [OPT_E_NEEDS_VALUE] = "option '%s' needs a value",
    [OPT_E_EMPTY_VALUE] = "option '%s' needs a non-empty value",
    [OPT_E_OPERAND] = "unexpected argument '%s'",
};

static void
vusage_error(const char *prog, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
}

int
tools__usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vusage_error(prog, fmt, ap);
    va_end(ap);
    return OPT_EXIT_USAGE;
}

/* The tool's wording of error e about 'what', with 'tail' after it. */
static int
misuse(const struct tools_opt_parser *p, enum tools_opt_error e,
       const char *what, const char *tail)
{
    const char *fmt = p->wording != NULL && p->wording[e] != NULL ?
                      p->wording[e] : default_wording[e];
    char msg[512];

    /* fmt is the tool's constant or ours, with one %s */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(msg, sizeof msg, fmt, what);
#pragma GCC diagnostic pop
    return tools__usage_error(p->prog, "%s%s", msg, tail != NULL ? tail : "");
}

/* Checks and stores a typed value; a usage status when it is bad. */
static int
take_value(const struct tools_opt_parser *p, const struct tools_opt *o,
           const char *val)
{
    uint64_t v, lo = o->lo, hi = o->hi;
    double d, dlo = o->dlo, dhi = o->dhi;
    char *end;

    if (*val == '\0' && !(o->flags & OPT_EMPTY_OK))
        return misuse(p, OPT_E_EMPTY_VALUE, o->name, NULL);
    switch (o->type) {
    case OPT_STR:
        *(const char **)o->dst = val;
        return 0;
    case OPT_FN:
        return o->fn(p->ctx, val);
    case OPT_DOUBLE:
        errno = 0;
        d = strtod(val, &end);
        if (end != val && *end == '\0' && errno == 0 && isfinite(d) &&
            ((dlo == 0 && dhi == 0) || (d >= dlo && d <= dhi))) {
            *(double *)o->dst = d;
            return 0;
        }
        if (o->bad != NULL)
            return tools__usage_error(p->prog, "%s: '%s' %s", o->name, val,
                                      o->bad);
        if (dlo == 0 && dhi == 0)
            return tools__usage_error(p->prog, "%s: '%s' is not a number",
                                      o->name, val);
        return tools__usage_error(p->prog, "%s: '%s' is not a number in "
                                  "%g..%g", o->name, val, dlo, dhi);
    default:
        break;
    }
    if (lo == 0 && hi == 0)
        hi = o->type == OPT_UINT ? UINT_MAX : o->type == OPT_INT ? INT_MAX :
             UINT64_MAX;
    if (tools__parse_u64(val, &v) == 0 && v >= lo && v <= hi) {
        if (o->type == OPT_UINT)
            *(unsigned *)o->dst = (unsigned)v;
        else if (o->type == OPT_INT)
            *(int *)o->dst = (int)v;
        else
            *(uint64_t *)o->dst = v;
        return 0;
    }
    if (o->bad != NULL)
        return tools__usage_error(p->prog, "%s: '%s' %s", o->name, val, o->bad);
    return tools__usage_error(p->prog, "%s: '%s' is not a number in "
                              "%llu..%llu", o->name, val,
                              (unsigned long long)lo, (unsigned long long)hi);
}

/* The option named by a[0..n), long name or alias; NULL when none. */
static const struct tools_opt *
find(const struct tools_opt *t, const char *a, size_t n)
{
    for (; t->name != NULL; t++)
        if ((strlen(t->name) == n && strncmp(t->name, a, n) == 0) ||
            (t->alias != NULL && strlen(t->alias) == n &&
             strncmp(t->alias, a, n) == 0))
            return t;
    return NULL;
}

static int
operand(const struct tools_opt_parser *p, const char *a)
{
    if (p->operand == NULL)
        return misuse(p, OPT_E_OPERAND, a, p->operand_hint);
    return p->operand(p->ctx, a);
}

/* The exit status after printing help: 1 when it could not be written
 * (a closed or full stdout), so a script does not take it as shown. */
static int
stdout_ok(void)
{
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

int
tools__opt_parse(const struct tools_opt_parser *p, int argc, char **argv)
{
    int only_operands = 0, rc;

    if (p->rest != NULL)
        *p->rest = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq, *val = NULL;
        const struct tools_opt *o;
        size_t n;

        if (only_operands || a[0] != '-' || a[1] == '\0') {
            if ((rc = operand(p, a)) != 0)
                return rc;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            if (p->rest != NULL) {
                *p->rest = i + 1;
                return 0;
            }
            only_operands = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            p->usage(stdout);
            exit(stdout_ok());
        }
        if (p->version != NULL &&
            (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0)) {
            printf("%s\n", p->version);
            exit(stdout_ok());
        }
        /* "--name=value" splits at the first '='; "-x=..." does not */
        eq = a[1] == '-' ? strchr(a, '=') : NULL;
        n = eq != NULL ? (size_t)(eq - a) : strlen(a);
        if ((o = find(p->opts, a, n)) == NULL) {
            char name[128];

            snprintf(name, sizeof name, "%.*s", (int)n, a);
            return misuse(p, OPT_E_UNKNOWN, name, NULL);
        }
        if (o->type == OPT_FLAG || o->type == OPT_BITS) {
            if (eq != NULL) {
                char tail[128];

                snprintf(tail, sizeof tail, " (%s takes no value)", o->name);
                return misuse(p, OPT_E_FLAG_VALUE, a, tail);
            }
            if (o->type == OPT_FLAG)
                *(int *)o->dst = 1;
            else
                *(unsigned *)o->dst |= o->bits;
            continue;
        }
        if (eq != NULL)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else
            return misuse(p, OPT_E_NEEDS_VALUE, o->name, NULL);
        if ((rc = take_value(p, o, val)) != 0)
            return rc;
    }
    return 0;
}
