/* opt.c - see opt.h. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "idlist.h"
#include "opt.h"

static const char *const default_wording[OPT_E_COUNT] = {
    [OPT_E_UNKNOWN] = "unknown option '%s'",
    [OPT_E_FLAG_VALUE] = "unknown option '%s'",     /* + " (NAME takes...)" */
    [OPT_E_NEEDS_VALUE] = "option '%s' needs a value",
    [OPT_E_EMPTY_VALUE] = "option '%s' needs a non-empty value",
    [OPT_E_OPERAND] = "unexpected argument '%s'",
};

/* One parse: the parser, and with OPT_HELP_WINS the first usage error,
 * held back until the whole command line is read. */
struct run {
    const struct tools_opt_parser *p;
    int help, version;
    int erred;              /* OPT_HELP_WINS: a usage error is held */
    char *held;             /* its message (malloc'd); NULL: out of memory */
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

/* Prints the usage error 'what' of the parse (NULL: it could not be
 * formatted), by the tool's .error hook when it has one; its status. */
static int
report(const struct tools_opt_parser *p, const char *what)
{
    if (what == NULL)
        what = "out of memory";
    if (p->error != NULL)
        return p->error(p->ctx, what);
    return tools__usage_error(p->prog, "%s", what);
}

/* A usage error of the parse: printed now (its status, which ends the
 * parse), or with OPT_HELP_WINS kept if it is the first (0: go on). The
 * message is as long as it needs: an argument is quoted whole. */
__attribute__((format(printf, 2, 3)))
static int
complain(struct run *r, const char *fmt, ...)
{
    char *msg;
    va_list ap;
    int rc;

    if ((r->p->flags & OPT_HELP_WINS) && r->erred)
        return 0;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    if (r->p->flags & OPT_HELP_WINS) {
        r->erred = 1;
        r->held = msg;
        return 0;
    }
    rc = report(r->p, msg);
    free(msg);
    return rc;
}

/* The tool's wording of error e about 'what', with 'tail' after it. */
static int
misuse(struct run *r, enum tools_opt_error e, const char *what,
       const char *tail)
{
    const struct tools_opt_parser *p = r->p;
    const char *fmt = p->wording != NULL && p->wording[e] != NULL ?
                      p->wording[e] : default_wording[e];
    char *msg;
    int rc;

    /* fmt is the tool's constant or ours, with one %s */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    if (asprintf(&msg, fmt, what) < 0)
        return complain(r, "out of memory");
#pragma GCC diagnostic pop
    rc = complain(r, "%s%s", msg, tail != NULL ? tail : "");
    free(msg);
    return rc;
}

/* Checks and stores a typed value; a usage status when it is bad. */
static int
take_value(struct run *r, const struct tools_opt *o, const char *val)
{
    uint64_t v, lo = o->lo, hi = o->hi;
    double d, dlo = o->dlo, dhi = o->dhi;
    char *end;

    if (*val == '\0' && !(o->flags & OPT_EMPTY_OK))
        return misuse(r, OPT_E_EMPTY_VALUE, o->name, NULL);
    switch (o->type) {
    case OPT_STR:
        *(const char **)o->dst = val;
        return 0;
    case OPT_FN:
        return o->fn(r->p->ctx, val);
    case OPT_DOUBLE:
        errno = 0;
        d = strtod(val, &end);
        if (end != val && *end == '\0' && errno == 0 && isfinite(d) &&
            ((dlo == 0 && dhi == 0) || (d >= dlo && d <= dhi))) {
            *(double *)o->dst = d;
            return 0;
        }
        if (o->bad != NULL)
            return complain(r, "%s: '%s' %s", o->name, val, o->bad);
        if (dlo == 0 && dhi == 0)
            return complain(r, "%s: '%s' is not a number", o->name, val);
        return complain(r, "%s: '%s' is not a number in %g..%g", o->name, val,
                        dlo, dhi);
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
        return complain(r, "%s: '%s' %s", o->name, val, o->bad);
    return complain(r, "%s: '%s' is not a number in %llu..%llu", o->name, val,
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
operand(struct run *r, const char *a)
{
    if (r->p->operand == NULL)
        return misuse(r, OPT_E_OPERAND, a, r->p->operand_hint);
    return r->p->operand(r->p->ctx, a);
}

/* "-5", "-0.5", "-.5", "-inf", "-nan": a negative number, an operand (an
 * ID, a value). */
static int
negative_number(const char *a)
{
    return a[0] == '-' && (isdigit((unsigned char)a[1]) ||
                           (a[1] == '.' && isdigit((unsigned char)a[2])) ||
                           strncasecmp(a + 1, "inf", 3) == 0 ||
                           strncasecmp(a + 1, "nan", 3) == 0);
}

/* The exit status after printing help: 1 when it could not be written
 * (a closed or full stdout), so a script does not take it as shown. */
static int
stdout_ok(void)
{
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

/* After the help or the version: exits, with the tool's .shown status */
static void
shown(struct run *r)
{
    exit(r->p->shown != NULL ? r->p->shown(r->p->ctx) : stdout_ok());
}

static void
help(struct run *r)
{
    if (r->p->help != NULL)
        r->p->help(r->p->ctx, stdout);
    else
        r->p->usage(stdout);
    shown(r);
}

static void
version(struct run *r)
{
    printf("%s\n", r->p->version);
    shown(r);
}

/* One argument that begins with '-' (not "-", not "--"), at argv[*i]. */
static int
option(struct run *r, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *eq, *val;
    const struct tools_opt *o;
    size_t n;

    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        if (!(r->p->flags & OPT_HELP_WINS))
            help(r);
        r->help = 1;
        return 0;
    }
    if (r->p->version != NULL &&
        (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0)) {
        if (!(r->p->flags & OPT_HELP_WINS))
            version(r);
        r->version = 1;
        return 0;
    }
    /* "--name=value" splits at the first '='; "-x=..." does not */
    eq = a[1] == '-' ? strchr(a, '=') : NULL;
    n = eq != NULL ? (size_t)(eq - a) : strlen(a);
    if ((o = find(r->p->opts, a, n)) == NULL) {
        char name[128];

        snprintf(name, sizeof name, "%.*s", (int)n, a);
        return misuse(r, OPT_E_UNKNOWN,
                      (r->p->flags & OPT_QUOTE_ARGUMENT) ? a : name, NULL);
    }
    if (o->type == OPT_FLAG || o->type == OPT_BITS) {
        if (eq != NULL) {
            char tail[128] = "";

            if (!(r->p->flags & OPT_QUOTE_ARGUMENT))
                snprintf(tail, sizeof tail, " (%s takes no value)", o->name);
            return misuse(r, OPT_E_FLAG_VALUE, a, tail);
        }
        if (o->type == OPT_FLAG)
            *(int *)o->dst = 1;
        else
            *(unsigned *)o->dst |= o->bits;
        return 0;
    }
    if (eq != NULL)
        val = eq + 1;
    else if (*i + 1 < argc)
        val = argv[++*i];
    else
        return misuse(r, OPT_E_NEEDS_VALUE, o->name, NULL);
    return take_value(r, o, val);
}

int
tools__opt_parse(const struct tools_opt_parser *p, int argc, char **argv)
{
    struct run r = {p, 0, 0, 0, NULL};
    int only_operands = 0, rc = 0;

    if (p->rest != NULL)
        *p->rest = -1;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];

        if (only_operands || a[0] != '-' || a[1] == '\0' ||
            ((p->flags & OPT_NEGATIVE_OPERANDS) && negative_number(a) &&
             find(p->opts, a, strlen(a)) == NULL)) {
            rc = operand(&r, a);
        } else if (strcmp(a, "--") == 0) {
            if (p->rest != NULL) {
                *p->rest = i + 1;
                break;
            }
            only_operands = 1;
        } else {
            rc = option(&r, argc, argv, &i);
        }
    }
    if (rc == 0 && r.help)
        help(&r);
    if (rc == 0 && r.version)
        version(&r);
    /* rc != 0: printed, a callback's or without OPT_HELP_WINS */
    if (rc == 0 && r.erred)
        rc = report(p, r.held);
    free(r.held);
    return rc;
}
