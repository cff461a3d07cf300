/* tools_opt_test.c - the tools' option parser (tools/common/opt.c): every
 * value type and its range, both value forms, flags, operands and "--",
 * each usage error's words and status, a tool's own wording, OPT_HELP_WINS,
 * negative operands, OPT_QUOTE_ARGUMENT and the .error and .shown hooks;
 * -h and -V in a child, since they exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gkvt.h"
#include "opt.h"

struct vals {
    const char *str;
    unsigned u;
    int i, flag;
    unsigned bits;
    uint64_t u64;
    double d;
    const char *list[8];
    int nlist;
    const char *ops[8];
    int nops;
};

static int
add_list(void *ctx, const char *v)
{
    struct vals *x = ctx;

    if (strcmp(v, "bad") == 0)
        return tools__usage_error("t", "--list: '%s' is bad", v);
    x->list[x->nlist++] = v;
    return 0;
}

static int
add_op(void *ctx, const char *v)
{
    struct vals *x = ctx;

    x->ops[x->nops++] = v;
    return 0;
}

static void
usage(FILE *f)
{
    fputs("Usage: t [options]\n", f);
}

static void
help_ops(void *ctx, FILE *f)
{
    struct vals *x = ctx;

    fprintf(f, "help for %s\n", x->nops > 0 ? x->ops[0] : "t");
}

/* Whether parse() gives the parser the .error and .shown hooks below. */
static int hooks;

/* .error: says what it saw, and a status of its own */
static int
on_error(void *ctx, const char *what)
{
    const struct vals *x = ctx;

    fprintf(stderr, "hook(%d ops): %s\n", x->nops, what);
    return 7;
}

static int
on_shown(void *ctx)
{
    (void)ctx;
    fflush(stdout);
    return 5;
}

/* Parses argv (NULL-ended, argv[0] added) with flags; the status, and
 * stderr in err (malloc'd; the caller frees). */
static int
parse(struct vals *x, unsigned flags, int with_ops, int *rest,
      const char *const *wording, char **err, const char *const *args)
{
    const struct tools_opt opts[] = {
        {"--str", OPT_STR, .dst = &x->str},
        {"--u", OPT_UINT, .dst = &x->u, .lo = 1, .hi = 10},
        {"--i", OPT_INT, .dst = &x->i, .lo = 0, .hi = 5,
         .bad = "is not a small count"},
        {"--u64", OPT_U64, .dst = &x->u64},
        {"--d", OPT_DOUBLE, .dst = &x->d, .dlo = 0.5, .dhi = 2},
        {"--flag", OPT_FLAG, .dst = &x->flag, .alias = "-f"},
        {"--bit", OPT_BITS, .dst = &x->bits, .bits = 4},
        {"--list", OPT_FN, .fn = add_list, .flags = OPT_EMPTY_OK},
        {NULL},
    };
    const struct tools_opt_parser p = {
        .prog = "t", .opts = opts, .usage = usage, .version = "t 1.0",
        .operand = with_ops ? add_op : NULL, .ctx = x, .rest = rest,
        .flags = flags, .wording = wording, .help = with_ops ? help_ops : NULL,
        .error = hooks ? on_error : NULL, .shown = hooks ? on_shown : NULL,
    };
    char *argv[16] = {"t"};
    int argc = 1, rc, fd = fileno(stderr), save;
    FILE *tmp = tmpfile();
    long n;

    for (; args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    assert_non_null(tmp);
    fflush(stderr);
    save = dup(fd);
    dup2(fileno(tmp), fd);
    rc = tools__opt_parse(&p, argc, argv);
    fflush(stderr);
    dup2(save, fd);
    close(save);
    n = ftell(tmp);
    *err = calloc(1, (size_t)n + 1);
    rewind(tmp);
    assert_int_equal(fread(*err, 1, (size_t)n, tmp), (size_t)n);
    fclose(tmp);
    return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void
test_values_and_forms(void **state)
{
    struct vals x = {0};
    char *err;

    (void)state;
    assert_int_equal(parse(&x, 0, 0, NULL, NULL, &err,
                           ARGS("--str", "a b", "--u=7", "--i", "5", "--u64",
                                "0x10", "--d=1.5", "-f", "--bit", "--list",
                                "x", "--list=", "--seed-like")), 2);
    assert_string_equal(x.str, "a b");
    assert_int_equal(x.u, 7);
    assert_int_equal(x.i, 5);
    assert_int_equal(x.u64, 16);
    assert_true(x.d == 1.5);
    assert_int_equal(x.flag, 1);
    assert_int_equal(x.bits, 4);
    assert_int_equal(x.nlist, 2);
    assert_string_equal(x.list[1], "");
    assert_non_null(strstr(err, "t: unknown option '--seed-like'\n"
                                "Try 't --help'.\n"));
    free(err);
    /* a value may begin with '-' */
    memset(&x, 0, sizeof x);
    assert_int_equal(parse(&x, 0, 0, NULL, NULL, &err,
                           ARGS("--str", "-x")), 0);
    assert_string_equal(x.str, "-x");
    assert_string_equal(err, "");
    free(err);
}

static void
test_usage_errors(void **state)
{
    static const struct {
        const char *args[4];
        const char *says;
    } cases[] = {
        {{"--u", "0"}, "t: --u: '0' is not a number in 1..10\n"},
        {{"--u", "11"}, "--u: '11' is not a number in 1..10"},
        {{"--u", "+3"}, "--u: '+3' is not"},
        {{"--u", " 3"}, "--u: ' 3' is not"},
        {{"--u", "3x"}, "--u: '3x' is not"},
        {{"--i", "9"}, "--i: '9' is not a small count"},
        {{"--u64", "18446744073709551616"}, "--u64: '1844"},
        {{"--d", "nan"}, "--d: 'nan' is not a number in 0.5..2"},
        {{"--d", "3"}, "--d: '3' is not a number in 0.5..2"},
        {{"--str"}, "option '--str' needs a value"},
        {{"--str="}, "option '--str' needs a non-empty value"},
        {{"--flag=1"}, "unknown option '--flag=1' (--flag takes no value)"},
        {{"--nope=1"}, "unknown option '--nope'"},
        {{"-x"}, "unknown option '-x'"},
        {{"-5"}, "unknown option '-5'"},
        {{"stray"}, "unexpected argument 'stray'"},
        {{"--list", "bad"}, "--list: 'bad' is bad"},
    };

    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct vals x = {0};
        const char *a[5] = {NULL};
        char *err;

        for (int j = 0; j < 4 && cases[k].args[j] != NULL; j++)
            a[j] = cases[k].args[j];
        assert_int_equal(parse(&x, 0, 0, NULL, NULL, &err, a), 2);
        if (strstr(err, cases[k].says) == NULL)
            fail_msg("case %zu: want '%s' in '%s'", k, cases[k].says, err);
        assert_non_null(strstr(err, "Try 't --help'."));
        free(err);
    }
}

static void
test_operands_and_rest(void **state)
{
    struct vals x = {0};
    static const char *const wording[OPT_E_COUNT] = {
        [OPT_E_NEEDS_VALUE] = "option %s needs a value",
    };
    char *err;
    int rest;

    (void)state;
    assert_int_equal(parse(&x, 0, 1, NULL, NULL, &err,
                           ARGS("a", "--flag", "-", "--", "--str", "-h")), 0);
    assert_int_equal(x.nops, 4);
    assert_string_equal(x.ops[1], "-");
    assert_string_equal(x.ops[3], "-h");
    assert_null(x.str);
    free(err);
    memset(&x, 0, sizeof x);
    assert_int_equal(parse(&x, 0, 0, &rest, NULL, &err,
                           ARGS("--flag", "--", "cmd", "--str")), 0);
    assert_int_equal(rest, 3);
    assert_int_equal(x.flag, 1);
    assert_null(x.str);
    free(err);
    assert_int_equal(parse(&x, 0, 0, &rest, NULL, &err, ARGS("--flag")), 0);
    assert_int_equal(rest, -1);
    free(err);
    /* negative numbers as operands, only when asked */
    memset(&x, 0, sizeof x);
    assert_int_equal(parse(&x, OPT_NEGATIVE_OPERANDS, 1, NULL, NULL, &err,
                           ARGS("-5", "-.5", "-x")), 2);
    assert_int_equal(x.nops, 2);
    assert_non_null(strstr(err, "unknown option '-x'"));
    free(err);
    /* ... and what strtod() reads as one: -inf, -nan in any case */
    memset(&x, 0, sizeof x);
    assert_int_equal(parse(&x, OPT_NEGATIVE_OPERANDS, 1, NULL, NULL, &err,
                           ARGS("-inf", "-NaN", "-Infinity", "-i")), 2);
    assert_int_equal(x.nops, 3);
    assert_string_equal(x.ops[1], "-NaN");
    assert_non_null(strstr(err, "unknown option '-i'"));
    free(err);
    /* a tool's own wording */
    assert_int_equal(parse(&x, 0, 0, NULL, wording, &err, ARGS("--str")), 2);
    assert_non_null(strstr(err, "t: option --str needs a value\n"));
    free(err);
}

/* Runs parse() in a child; its exit status and stdout. */
static int
child(unsigned flags, int with_ops, char *out, size_t cap,
      const char *const *args)
{
    int pfd[2], st;
    pid_t pid;
    ssize_t n, got = 0;

    assert_int_equal(pipe(pfd), 0);
    if ((pid = fork()) == 0) {
        struct vals x = {0};
        char *err;

        dup2(pfd[1], 1);
        close(pfd[0]);
        _exit(100 + parse(&x, flags, with_ops, NULL, NULL, &err, args));
    }
    close(pfd[1]);
    while ((n = read(pfd[0], out + got, cap - 1 - (size_t)got)) > 0)
        got += n;
    out[got] = '\0';
    close(pfd[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void
test_help_and_version(void **state)
{
    char out[256];

    (void)state;
    assert_int_equal(child(0, 0, out, sizeof out, ARGS("--flag", "-h")), 0);
    assert_string_equal(out, "Usage: t [options]\n");
    assert_int_equal(child(0, 0, out, sizeof out, ARGS("-V", "--bogus")), 0);
    assert_string_equal(out, "t 1.0\n");
    /* in order, the first error wins ... */
    assert_int_equal(child(0, 0, out, sizeof out, ARGS("--bogus", "-h")),
                     102);
    assert_string_equal(out, "");
    /* ... unless help wins; then a subcommand's help sees the operands */
    assert_int_equal(child(OPT_HELP_WINS, 1, out, sizeof out,
                           ARGS("ls", "--bogus", "--help", "--str")), 0);
    assert_string_equal(out, "help for ls\n");
    assert_int_equal(child(OPT_HELP_WINS, 0, out, sizeof out,
                           ARGS("--bogus", "--u", "0")), 102);
    assert_string_equal(out, "");
}

static void
test_help_wins_holds_the_first_error(void **state)
{
    struct vals x = {0};
    char *err;

    (void)state;
    assert_int_equal(parse(&x, OPT_HELP_WINS, 0, NULL, NULL, &err,
                           ARGS("--u", "0", "--bogus", "--str", "s")), 2);
    assert_string_equal(err, "t: --u: '0' is not a number in 1..10\n"
                             "Try 't --help'.\n");
    assert_string_equal(x.str, "s");           /* read to the end */
    free(err);
}

static void
test_quote_argument(void **state)
{
    struct vals x = {0};
    char arg[3001], *err;

    (void)state;
    assert_int_equal(parse(&x, OPT_QUOTE_ARGUMENT, 0, NULL, NULL, &err,
                           ARGS("--nope=1")), 2);
    assert_string_equal(err, "t: unknown option '--nope=1'\n"
                             "Try 't --help'.\n");
    free(err);
    assert_int_equal(parse(&x, OPT_QUOTE_ARGUMENT, 0, NULL, NULL, &err,
                           ARGS("--flag=1")), 2);
    assert_string_equal(err, "t: unknown option '--flag=1'\n"
                             "Try 't --help'.\n");
    free(err);
    /* a long argument is quoted whole, held or not */
    memset(arg, 'a', sizeof arg - 1);
    arg[0] = arg[1] = '-';
    arg[sizeof arg - 1] = '\0';
    for (unsigned f = 0; f <= OPT_HELP_WINS; f += OPT_HELP_WINS) {
        assert_int_equal(parse(&x, OPT_QUOTE_ARGUMENT | f, 0, NULL, NULL,
                               &err, ARGS(arg)), 2);
        assert_int_equal(strlen(err), strlen("t: unknown option ''\n"
                                             "Try 't --help'.\n") +
                                      strlen(arg));
        free(err);
    }
}

static void
test_error_and_shown_hooks(void **state)
{
    struct vals x = {0};
    char out[256], *err;

    (void)state;
    hooks = 1;
    /* held: the hook sees every operand; at once: those so far */
    assert_int_equal(parse(&x, OPT_HELP_WINS, 1, NULL, NULL, &err,
                           ARGS("ls", "--bogus", "a")), 7);
    assert_string_equal(err, "hook(2 ops): unknown option '--bogus'\n");
    free(err);
    memset(&x, 0, sizeof x);
    assert_int_equal(parse(&x, 0, 1, NULL, NULL, &err,
                           ARGS("ls", "--u", "0", "a")), 7);
    assert_string_equal(err,
                        "hook(1 ops): --u: '0' is not a number in 1..10\n");
    free(err);
    /* .shown chooses the exit status after -h and -V */
    assert_int_equal(child(0, 0, out, sizeof out, ARGS("-V")), 5);
    assert_string_equal(out, "t 1.0\n");
    assert_int_equal(child(OPT_HELP_WINS, 1, out, sizeof out,
                           ARGS("ls", "--bogus", "-h")), 5);
    assert_string_equal(out, "help for ls\n");
    hooks = 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_forms),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_operands_and_rest),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_help_wins_holds_the_first_error),
        cmocka_unit_test(test_quote_argument),
        cmocka_unit_test(test_error_and_shown_hooks),
    };

    return cmocka_run_group_tests_name("tools_opt", tests, NULL, NULL);
}
