/* opt.h - the command-line parser of every gkv tool.
 *
 * A tool describes its options in a table and calls tools__opt_parse()
 * once:
 *
 *   static unsigned port = 30050;
 *   static const char *store;
 *   static int create;
 *   static const struct tools_opt opts[] = {
 *       {"--store", OPT_STR, .dst = &store},
 *       {"--port", OPT_UINT, .dst = &port, .lo = 1, .hi = 65535,
 *        .bad = "is not a port in 1..65535"},
 *       {"--create", OPT_FLAG, .dst = &create},
 *       {NULL},
 *   };
 *   static const struct tools_opt_parser parser = {
 *       .prog = "gkv-thing", .opts = opts, .usage = usage,
 *       .version = "gkv-thing (gkv) " GKV_VERSION_STRING,
 *   };
 *   if ((rc = tools__opt_parse(&parser, argc, argv)) != 0)
 *       return rc;                        (2: the message is printed)
 *
 * What the command line may hold:
 *   --name VALUE, --name=VALUE   an option with a value (the value may
 *                                begin with '-': "--seed -1" is --seed's)
 *   --name                       a flag; "--name=VALUE" is an error
 *   -h, --help                   usage(stdout), then exit(0), at once
 *                                (exit(1) when stdout cannot be written;
 *                                a .shown hook chooses instead)
 *   -V, --version                the version line on stdout, exit(0);
 *                                only when the parser has a .version
 *   --                           ends the options: with .rest, parsing
 *                                stops there; without, every later
 *                                argument is an operand
 *   -                            an operand (stdin, by convention)
 *   -5, -0.5, -inf               with OPT_NEGATIVE_OPERANDS, an operand
 *                                (unless the table names it): '-' then
 *                                a digit, '.' and a digit, or "inf" or
 *                                "nan" in any case (as strtod begins a
 *                                number: "-Infinity", "-info" too)
 *   anything else                an operand when it does not begin with
 *                                '-'; otherwise an unknown option
 * A long name may also have a short alias (.alias = "-q"); a short alias
 * takes its value as the next argument only (no "-qVALUE", no bundling).
 * Arguments are handled left to right and the first error ends the parse:
 * "--help" after a bad option is not reached. With OPT_HELP_WINS the whole
 * command line is read first: -h or -V anywhere (before "--") then wins
 * over the parser's own usage errors, and otherwise the first of those is
 * printed at the end; an error of a .fn or .operand callback still ends
 * the parse at once (the callback printed it). Help after the operands
 * lets a tool with subcommands ("kvctl ls --help") show the subcommand's
 * usage: its .help hook sees what .operand collected.
 *
 * Usage errors. Each is printed to stderr as two lines,
 *   PROG: WHAT
 *   Try 'PROG --help'.
 * and tools__opt_parse() returns OPT_EXIT_USAGE (2), the exit status
 * every gkv tool gives for bad usage. WHAT is, by default:
 *   unknown option '--frobnicate'                 (of --frobnicate=1 too)
 *   unknown option '--csr=1' (--csr takes no value)
 *   option '--store' needs a value
 *   option '--store' needs a non-empty value      (unless OPT_EMPTY_OK)
 *   unexpected argument 'x'                       (no .operand callback)
 *   --port: 'abc' is not a number in 1..65535     (typed values; .bad
 *                                                  words the last part)
 * A tool whose tests pin an older wording of one of the first five may
 * give its own format (one %s, the option or argument) in .wording[].
 * With OPT_QUOTE_ARGUMENT the first two quote the argument as written and
 * say no more: "unknown option '--frobnicate=1'", "unknown option
 * '--csr=1'". A tool that prints its usage errors itself (its own "Try"
 * line) gives an .error hook: it gets WHAT and prints the two lines.
 * Whole numbers are decimal or 0x hex (tools__parse_u64: no sign, spaces
 * or trailing text). A value is stored only when it is valid.
 *
 * Ownership: string values point into argv (valid for the process's
 * life); nothing the parser allocates (a message) outlives the call, so
 * an error leaves nothing to free. The parser keeps no state between
 * calls (two parsers may run in one process); it writes only the
 * destinations its table names. */
#ifndef TOOLS_OPT_H
#define TOOLS_OPT_H

#include <stdint.h>
#include <stdio.h>

#define OPT_EXIT_USAGE 2

enum tools_opt_type {
    OPT_FLAG,       /* no value; *(int *)dst = 1 */
    OPT_BITS,       /* no value; *(unsigned *)dst |= .bits */
    OPT_STR,        /* *(const char **)dst = the value (argv memory) */
    OPT_UINT,       /* *(unsigned *)dst, within [.lo, .hi] (hi <= UINT_MAX) */
    OPT_INT,        /* *(int *)dst, within [.lo, .hi] (hi <= INT_MAX) */
    OPT_U64,        /* *(uint64_t *)dst, within [.lo, .hi] */
    OPT_DOUBLE,     /* *(double *)dst, finite, within [.dlo, .dhi] */
    OPT_FN,         /* takes a value and calls .fn: repeatable options and
                     * values only the tool can check */
};

/* A .fn callback's contract: 'val' is the option's value (argv memory, so
 * it may be kept). Return 0 to go on, or print the problem with
 * tools__usage_error() (or any message) and return its status, which
 * tools__opt_parse() then returns at once. */
typedef int (*tools_opt_fn)(void *ctx, const char *val);

/* One option. The table ends with an entry whose name is NULL. */
struct tools_opt {
    const char *name;       /* "--store": the long name with its dashes */
    enum tools_opt_type type;
    void *dst;              /* where the value goes (see tools_opt_type);
                             * unused by OPT_FN */
    uint64_t lo, hi;        /* OPT_UINT, OPT_INT, OPT_U64: the range; both
                             * 0 means the type's whole range */
    double dlo, dhi;        /* OPT_DOUBLE: the range (both 0: any finite) */
    unsigned bits;          /* OPT_BITS: ORed into *(unsigned *)dst */
    tools_opt_fn fn;        /* OPT_FN */
    const char *alias;      /* a short name such as "-q", or NULL */
    const char *bad;        /* typed values: the end of the error message
                             * after "--name: 'VALUE' ", e.g. "is not a
                             * port in 1..65535"; NULL: "is not a number in
                             * LO..HI" */
    unsigned flags;         /* OPT_EMPTY_OK */
};

#define OPT_EMPTY_OK 0x1u   /* an empty value ("--name=" or "") is taken */

/* The usage errors whose wording a tool may replace (see above). */
enum tools_opt_error {
    OPT_E_UNKNOWN,          /* "unknown option '%s'" */
    OPT_E_FLAG_VALUE,       /* "unknown option '%s'": %s is the whole
                             * argument, "--csr=1"; " (--csr takes no
                             * value)" follows any wording */
    OPT_E_NEEDS_VALUE,      /* "option '%s' needs a value" */
    OPT_E_EMPTY_VALUE,      /* "option '%s' needs a non-empty value" */
    OPT_E_OPERAND,          /* "unexpected argument '%s'" */
    OPT_E_COUNT
};

#define OPT_HELP_WINS         0x1u  /* see above */
#define OPT_NEGATIVE_OPERANDS 0x2u  /* "-5" is an operand, not an option */
#define OPT_QUOTE_ARGUMENT    0x4u  /* see above */

struct tools_opt_parser {
    const char *prog;               /* the tool's name, for messages */
    const struct tools_opt *opts;   /* the table, ended by {NULL} */
    void (*usage)(FILE *f);         /* -h, --help: prints to f */
    /* Instead of .usage when set: prints the help for what was parsed so
     * far (ctx is .ctx), e.g. one subcommand's. */
    void (*help)(void *ctx, FILE *f);
    unsigned flags;                 /* OPT_HELP_WINS, OPT_NEGATIVE_OPERANDS,
                                     * OPT_QUOTE_ARGUMENT */
    const char *version;            /* -V, --version prints this line; NULL:
                                     * the tool has no -V */
    /* Operands (arguments that are not options): called in order; returns
     * 0 or a usage status as .fn does. NULL: any operand is an error. */
    int (*operand)(void *ctx, const char *arg);
    void *ctx;                      /* passed to .operand and every .fn */
    /* Non-NULL: "--" ends the parse and *rest is the index of the
     * argument after it (argc when none follows), or -1 when argv had no
     * "--". NULL: "--" only makes what follows operands. */
    int *rest;
    /* Words appended to the OPT_E_OPERAND message, e.g. " (the command to
     * run goes after '--')"; NULL: none. */
    const char *operand_hint;
    /* Replacement formats for some usage errors, indexed by enum
     * tools_opt_error; a NULL entry (or a NULL table) keeps the default. */
    const char *const *wording;
    /* Prints a usage error of the parse, WHAT as above (ctx is .ctx; with
     * OPT_HELP_WINS it is called once the whole command line is read, so it
     * sees every operand and value), and returns the status that
     * tools__opt_parse() returns. NULL: tools__usage_error(.prog, WHAT). */
    int (*error)(void *ctx, const char *what);
    /* After -h or -V is printed: the exit status (e.g. flushing stdout and
     * saying why a write failed). NULL: 0, or 1 when stdout cannot be
     * written. */
    int (*shown)(void *ctx);
};

/* Parses argv[1..argc) by p's table. Returns 0, or OPT_EXIT_USAGE (or an
 * .fn's, .operand's or .error's status) after printing the problem.
 * -h/--help and -V/--version exit from here (0, or as .shown says), with
 * their text on stdout. */
int tools__opt_parse(const struct tools_opt_parser *p, int argc, char **argv);

/* Prints "PROG: MESSAGE\nTry 'PROG --help'.\n" to stderr (stdout is
 * flushed first, so the two streams keep their order on a terminal) and
 * returns OPT_EXIT_USAGE: `return tools__usage_error(prog, "...", ...);`. */
__attribute__((format(printf, 2, 3)))
int tools__usage_error(const char *prog, const char *fmt, ...);

#endif
