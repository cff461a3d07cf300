/* msg.c - kvctl's messages: every failure is one line on stderr,
 * "kvctl: WHAT: gkv_strerror: detail", and sets the exit status. */
#include <stdarg.h>
#include <stdio.h>

#include "kvctl.h"
#include "ops.h"
#include "util.h"

const char *kvctl__usage_cmd;

static void
vput(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", tools__prog);
    vfprintf(stderr, fmt, ap);
}

int
kvctl__usage_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vput(fmt, ap);
    va_end(ap);
    if (kvctl__usage_cmd != NULL)
        fprintf(stderr, "\nTry 'kvctl %s --help'.\n", kvctl__usage_cmd);
    else
        fputs("\nTry 'kvctl --help'.\n", stderr);
    return EX_USAGE;
}

int
kvctl__fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vput(fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EX_FAIL;
}

/* ": strerror(rc) (detail)" and the end of the line */
static int
put_err(gkv_err rc, const char *detail)
{
    fprintf(stderr, ": %s", gkv_strerror(rc));
    if (detail != NULL && *detail != '\0')
        fprintf(stderr, " (%s)", detail);
    fputc('\n', stderr);
    return EX_FAIL;
}

int
kvctl__fail_gkv(const gkv_store *s, gkv_err rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vput(fmt, ap);
    va_end(ap);
    return put_err(rc, gkv_store_errmsg(s));
}

int
kvctl__fail_net(gkv_err rc, const char *fmt, ...)
{
    const char *detail = gkv_net_errmsg();
    va_list ap;

    va_start(ap, fmt);
    vput(fmt, ap);
    va_end(ap);
    if (tools__err_text(rc, detail) == NULL) {
        fprintf(stderr, ": %s\n", detail);
        return EX_FAIL;
    }
    return put_err(rc, detail);
}

int
kvctl__fail_on(struct ctx *c, gkv_err rc, const char *fmt, ...)
{
    char what[8192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return c->ops->fail(c, rc, what);
}
