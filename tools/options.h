/* The CLI's options: one declarative table per command, parsed, range-checked
 * and printed as --help by one module (options.c), the way git's
 * parse-options and curl's option table work.
 *
 * A command keeps its settings in one struct (its "cli"), sets their defaults,
 * and describes every option by a table entry: the spellings, the kind of
 * value, its range or choices, the help text, the field it fills and the modes
 * of the run it applies to. shoal_opts_parse() reads argv into the struct;
 * the command's run function then works from the struct alone:
 *
 *   #define SHOAL_OPTS_STRUCT tune_cli_t
 *   static const shoal_opt_t tune_opts[] = {
 *       OPT_STRING("--file", "PATH", file, "where the profile is stored", .def = "SHOAL_TUNE_FILE"),
 *       OPT_FLAG("--no-store", no_store, "measure and print, store nothing"),
 *       OPT_END};
 *   static const shoal_opts_spec_t tune_spec = {.name = "shoal tune", .usage = "...", .opts = tune_opts};
 *   ...
 *   tune_cli_t c = {0};
 *   int st = shoal_opts_parse(&tune_spec, argc, argv, &c, NULL);
 *   if (st != SHOAL_OPTS_GO) return st;      (the help was printed: 0; an error: 2)
 *
 * Every message names the option as the user spelled it and what it accepts:
 *   shoal sim: --load='x': not a number            (numbers: the library's words, core/config.h)
 *   shoal sim: --load needs a value (a number in [1e-06, 100])
 *   shoal launch: --bind 'sockets': expected core, none or auto
 *   shoal train: --ps-mode does not apply to --sync bsp (it is a setting of ps)   (modes, below)
 * --help prints the usage, then every option of the table with its help and the default (the value the
 * struct holds before parsing, so the text cannot drift from the code), then the spec's more_help. */
#ifndef SHOAL_TOOLS_OPTIONS_H
#define SHOAL_TOOLS_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum shoal_opt_kind {
  SHOAL_OPT_END = 0, /* ends a table */
  SHOAL_OPT_GROUP,   /* a heading in --help (help = the heading) */
  SHOAL_OPT_TEXT,    /* a line of --help between options (help = the text) */
  SHOAL_OPT_FLAG,    /* no value: the int field gets .set (OPT_FLAG: 1) */
  SHOAL_OPT_INT,     /* an integer in [lo, hi] into an int (1e3 is 1000; 2.5 is an error) */
  SHOAL_OPT_LONG,    /* the same into a long */
  SHOAL_OPT_COUNT,   /* the same into a size_t */
  SHOAL_OPT_U64,     /* the same into a uint64_t; lo = hi = 0: any value 0..2^64-1 */
  SHOAL_OPT_DOUBLE,  /* a decimal number in [lo, hi] into a double */
  SHOAL_OPT_BYTES,   /* a size in bytes, 8, 64K, 256M, 1G (powers of 1024), in [lo, hi], into a size_t */
  SHOAL_OPT_RATE,    /* a rate in bits/s, 1gbit, 200mbit, 500M (powers of 1000), 0 = unshaped, into a double */
  SHOAL_OPT_STRING,  /* the argument itself into a const char * */
  SHOAL_OPT_ENUM,    /* one of .choices ("stop|continue|restart"): its index into an int */
  SHOAL_OPT_CHOICE,  /* one of .choices: the argument into a const char * */
  SHOAL_OPT_LIST,    /* repeatable: each value appended to a shoal_opts_list_t */
  SHOAL_OPT_CALL,    /* .parse(name, value, field): 0, or nonzero with shoal__seterr's message */
} shoal_opt_kind_t;

#define SHOAL_OPTS_LIST_MAX 64
/* the values of a repeatable option, in the order given */
typedef struct shoal_opts_list {
  int n;
  const char *v[SHOAL_OPTS_LIST_MAX];
} shoal_opts_list_t;

typedef struct shoal_opt shoal_opt_t;
struct shoal_opt {
  shoal_opt_kind_t kind;
  const char *names;   /* every spelling, '|' between: "-n|--nranks|--np" */
  const char *meta;    /* the value in --help: "N", "FILE" (NULL: none, or the kind's own) */
  const char *help;    /* '\n' starts another line of help, aligned under the first */
  size_t off;          /* the field: its offset in the command's struct */
  double lo, hi;       /* the range of a number, a size or a rate */
  const char *choices; /* ENUM and CHOICE: "a|b|c" */
  int (*parse)(const char *name, const char *value, void *field); /* CALL */
  void (*show)(const void *field, char *buf, size_t cap);          /* CALL: the default, for --help */
  long set;            /* FLAG: the value stored */
  unsigned when;       /* the modes (bits of the spec's mode table) that must all hold for the option to apply */
  const char *def;     /* the default in --help: NULL = the field's value before parsing, "" = none shown */
  const char *expect;  /* CALL, STRING: what the value is, for "needs a value (...)" (NULL: meta) */
};

/* A mode of a run that some options belong to ("--sync ps", "a Philly trace"). After the whole command
 * line is read (and the spec's resolve hook ran), every option given whose modes do not hold is an error:
 * "shoal CMD: OPTION " + why (e.g. "applies to --speed table only (the speed model is analytic)"). */
typedef struct shoal_opt_mode {
  int (*on)(const void *cli);                                /* does the mode hold for this run? */
  const char *why;                                           /* the reason when it does not, or: */
  void (*why_fn)(const void *cli, char *buf, size_t cap);    /* ... the reason made from the run */
} shoal_opt_mode_t;

/* What a command takes besides its options. */
typedef enum shoal_opts_args {
  SHOAL_ARGS_NONE = 0,   /* nothing: a word is an error */
  SHOAL_ARGS_WORDS,      /* words anywhere among the options (at most max_words; 0: any number) */
  SHOAL_ARGS_COMMAND,    /* a command after the options: from "--" or the first word on, none of it parsed */
  SHOAL_ARGS_AFTER_DDASH /* a command after "--" only; a word before it is an error */
} shoal_opts_args_t;

struct shoal_opts_res;

typedef struct shoal_opts_spec {
  const char *name;              /* "shoal sim": the prefix of every message */
  const char *usage;             /* the usage line(s) and a short description, printed first by --help */
  const shoal_opt_t *opts;       /* the table, ended by OPT_END */
  const shoal_opt_mode_t *modes; /* indexed by the bit numbers of .when */
  shoal_opts_args_t args;
  int max_words;
  int col;                       /* --help: the column the help text starts at (0: 24) */
  /* after the options are read, before the modes are checked: settings made from others (a scenario's,
   * a trace found). 0, or 2 after printing an error. */
  int (*resolve)(void *cli, const struct shoal_opts_res *res);
  void (*more_help)(FILE *f);    /* more --help after the table (lists made at run time: policies...) */
} shoal_opts_spec_t;

#define SHOAL_OPTS_MAX 128 /* options in one table */

/* What was on the command line besides the values now in the struct. */
typedef struct shoal_opts_res {
  const shoal_opts_spec_t *spec;
  unsigned short given[SHOAL_OPTS_MAX]; /* per table entry: how many times it was given */
  int first[SHOAL_OPTS_MAX];            /* per table entry: the argv index where it was first given */
  const char *as[SHOAL_OPTS_MAX];       /* per table entry: how it was spelled (the last time) */
  char **words;                         /* SHOAL_ARGS_WORDS: the words, in order (argv's slots, reused) */
  int nwords;
  char **cmd;                           /* SHOAL_ARGS_COMMAND / _AFTER_DDASH: the command and its arguments */
  int ncmd;
} shoal_opts_res_t;

/* Returned by shoal_opts_parse when the command goes on; anything else is the exit status to return
 * (0 after --help, 2 after an error on stderr). */
#define SHOAL_OPTS_GO (-1)

/* Parse argv[1..argc-1] (argv[0] is the command's name) into cli, whose fields hold the defaults. res may
 * be NULL when the command needs neither the words nor what was given. argv's slots may be reordered. */
int shoal_opts_parse(const shoal_opts_spec_t *spec, int argc, char **argv, void *cli, shoal_opts_res_t *res);

/* The --help text of spec, defaults taken from cli (as the command initialised it). */
void shoal_opts_help(const shoal_opts_spec_t *spec, const void *cli, FILE *f);

/* How many times the option spelled `name` (any of its spellings) was given. */
int shoal_opts_given(const shoal_opts_res_t *res, const char *name);
/* How it was spelled on the command line, or NULL if it was not given. */
const char *shoal_opts_as(const shoal_opts_res_t *res, const char *name);

/* The value parsers, for values read elsewhere too (a topology file): 0, or -1 with shoal__seterr's
 * message naming `name` and what is accepted. */
int shoal_opts_integer(const char *name, const char *s, double lo, double hi, double *out);
int shoal_opts_bytes(const char *name, const char *s, double lo, double hi, size_t *out);
int shoal_opts_rate(const char *name, const char *s, double *out);
/* A rate as the options write it: "1gbit", "200mbit", "unshaped" for 0. */
const char *shoal_opts_rate_str(double bps, char *buf, size_t cap);

/* A command of sub-commands (shoal sched, shoal testbed): argv[1] names one, which runs with argv + 1 (its own
 * name as argv[0]). None: the usage on stderr, exit 2; -h or --help: on stdout, exit 0. */
typedef struct shoal_subcmd {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help; /* one line */
} shoal_subcmd_t;
/* usage: printed first; subs: ended by {NULL}; the sub-commands' lines follow, then more (may be NULL). */
int shoal_opts_dispatch(const char *name, const char *usage, const shoal_subcmd_t *subs, const char *more, int argc,
                        char **argv);

/* ---- table entries ----
 * Before a table: #define SHOAL_OPTS_STRUCT <the command's struct type>. The field names below are of
 * that struct (a nested one: o.epochs); the field's type is checked against the kind at compile time.
 * Trailing arguments set more members: OPT_INT(..., .when = 1u << M_PS, .def = "none"). */
#define SHOAL_OPTS_FIELD_(f, T) \
  (offsetof(SHOAL_OPTS_STRUCT, f) + 0 * sizeof(&((SHOAL_OPTS_STRUCT *)0)->f == (T *)0))
#define OPT_END {.kind = SHOAL_OPT_END}
#define OPT_GROUP(text) {.kind = SHOAL_OPT_GROUP, .help = (text)}
#define OPT_TEXT(text) {.kind = SHOAL_OPT_TEXT, .help = (text)}
#define OPT_FLAG(nm, f, hl, ...) OPT_FLAG_SET(nm, f, 1, hl, __VA_ARGS__)
/* a flag that stores v (--no-overlap: 0) */
#define OPT_FLAG_SET(nm, f, v, hl, ...) \
  {.kind = SHOAL_OPT_FLAG, .names = (nm), .off = SHOAL_OPTS_FIELD_(f, int), .set = (v), .help = (hl), __VA_ARGS__}
#define OPT_INT(nm, mt, f, l, h, hl, ...)                                                                   \
  {.kind = SHOAL_OPT_INT, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, int), .lo = (l), .hi = (h), \
   .help = (hl), __VA_ARGS__}
#define OPT_LONG(nm, mt, f, l, h, hl, ...)                                                                     \
  {.kind = SHOAL_OPT_LONG, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, long), .lo = (l), .hi = (h), \
   .help = (hl), __VA_ARGS__}
#define OPT_COUNT(nm, mt, f, l, h, hl, ...)                                                                      \
  {.kind = SHOAL_OPT_COUNT, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, size_t), .lo = (l), .hi = (h), \
   .help = (hl), __VA_ARGS__}
#define OPT_U64(nm, mt, f, l, h, hl, ...)                                                                        \
  {.kind = SHOAL_OPT_U64, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, uint64_t), .lo = (l), .hi = (h), \
   .help = (hl), __VA_ARGS__}
#define OPT_DOUBLE(nm, mt, f, l, h, hl, ...)                                                                       \
  {.kind = SHOAL_OPT_DOUBLE, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, double), .lo = (l), .hi = (h), \
   .help = (hl), __VA_ARGS__}
#define OPT_BYTES(nm, mt, f, l, h, hl, ...)                                                                       \
  {.kind = SHOAL_OPT_BYTES, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, size_t), .lo = (l), .hi = (h), \
   .help = (hl), __VA_ARGS__}
#define OPT_RATE(nm, mt, f, hl, ...) \
  {.kind = SHOAL_OPT_RATE, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, double), .help = (hl), __VA_ARGS__}
#define OPT_STRING(nm, mt, f, hl, ...)                                                                  \
  {.kind = SHOAL_OPT_STRING, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, const char *), \
   .help = (hl), __VA_ARGS__}
#define OPT_ENUM(nm, mt, f, ch, hl, ...) \
  {.kind = SHOAL_OPT_ENUM, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, int), .choices = (ch), .help = (hl), __VA_ARGS__}
#define OPT_CHOICE(nm, mt, f, ch, hl, ...)                                                               \
  {.kind = SHOAL_OPT_CHOICE, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, const char *), \
   .choices = (ch), .help = (hl), __VA_ARGS__}
#define OPT_LIST(nm, mt, f, hl, ...)                                                                     \
  {.kind = SHOAL_OPT_LIST, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, shoal_opts_list_t), .help = (hl), \
   __VA_ARGS__}
/* T: the field's type, as the parser takes it */
#define OPT_CALL(nm, mt, f, T, fn, hl, ...)                                                                       \
  {.kind = SHOAL_OPT_CALL, .names = (nm), .meta = (mt), .off = SHOAL_OPTS_FIELD_(f, T), .parse = (fn), .help = (hl), \
   __VA_ARGS__}

#endif
