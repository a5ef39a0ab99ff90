/* Parsing, checking and printing the options of a command from its table (options.h). */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "core/error.h"

/* ---- value parsers ---- */

static const char *skip_blanks(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

/* bytes as the options write them: 8, 64K, 256M, 1G */
static const char *fmt_bytes(double v, char *b, size_t cap) {
  size_t x = (size_t)v;
  if (x && x % (1u << 30) == 0) snprintf(b, cap, "%zuG", x >> 30);
  else if (x && x % (1u << 20) == 0) snprintf(b, cap, "%zuM", x >> 20);
  else if (x && x % 1024 == 0) snprintf(b, cap, "%zuK", x >> 10);
  else snprintf(b, cap, "%zu", x);
  return b;
}

/* Whole numbers: decimal digits, or a decimal number whose value is whole (1e3; train took counts so). */
int shoal_opts_integer(const char *name, const char *s, double lo, double hi, double *out) {
  if (!s || !*s) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='': empty, expected an integer", name), -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  int range = errno == ERANGE;
  if (end != s && !range && !*skip_blanks(end)) {
    if ((double)v < lo || (double)v > hi)
      return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%.0f, %.0f]", name, s, lo, hi), -1;
    *out = (double)v;
    return 0;
  }
  double d;
  const char *e;
  if (!range && !shoal__strtod_decimal(s, &d, &e) && !*skip_blanks(e)) {
    if (d < lo || d > hi) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%.0f, %.0f]", name, s, lo, hi), -1;
    if (d != floor(d)) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not an integer", name, s), -1;
    *out = d;
    return 0;
  }
  if (range) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%.0f, %.0f]", name, s, lo, hi), -1;
  return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not an integer", name, s), -1;
}

/* Any 64-bit unsigned value in digits (a seed); other forms as shoal_opts_integer within [lo, hi]. */
static int parse_u64(const char *name, const char *s, double lo, double hi, uint64_t *out) {
  int full = lo == 0 && hi == 0;
  if (s && *s && strspn(s, "0123456789") == strlen(s)) {
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno || (!full && ((double)v < lo || (double)v > hi)))
      return full ? shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [0, %llu]", name, s, (unsigned long long)UINT64_MAX), -1
                  : shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%.0f, %.0f]", name, s, lo, hi), -1;
    *out = v;
    return 0;
  }
  double d;
  if (shoal_opts_integer(name, s, full ? 0 : lo, full ? 18446744073709549568.0 : hi, &d)) return -1;
  *out = (uint64_t)d;
  return 0;
}

int shoal_opts_bytes(const char *name, const char *s, double lo, double hi, size_t *out) {
  double v, mul = 1;
  const char *e;
  if (!s || shoal__strtod_decimal(s, &v, &e)) e = NULL;
  if (e && (*e == 'K' || *e == 'k')) mul = 1024.0, e++;
  else if (e && (*e == 'M' || *e == 'm')) mul = 1024.0 * 1024, e++;
  else if (e && (*e == 'G' || *e == 'g')) mul = 1024.0 * 1024 * 1024, e++;
  if (e && (*e == 'B' || *e == 'b')) e++;
  if (!e || *e || !(v * mul >= lo) || v * mul > hi) {
    char b1[24], b2[24];
    shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': expected a size like 8, 64K, 256M in [%s, %s]", name, s ? s : "",
                  fmt_bytes(lo, b1, sizeof b1), fmt_bytes(hi, b2, sizeof b2));
    return -1;
  }
  *out = (size_t)(v * mul);
  return 0;
}

int shoal_opts_rate(const char *name, const char *s, double *out) {
  return shoal__parse_rate(name, s, out) ? -1 : 0;
}

const char *shoal_opts_rate_str(double bps, char *b, size_t cap) {
  if (bps <= 0) snprintf(b, cap, "unshaped");
  else if (bps >= 1e9 && fmod(bps, 1e8) == 0) snprintf(b, cap, "%ggbit", bps / 1e9);
  else if (bps >= 1e6) snprintf(b, cap, "%gmbit", bps / 1e6);
  else snprintf(b, cap, "%gkbit", bps / 1e3);
  return b;
}


/* "a|b|c" -> "a, b or c" */
static const char *choice_list(const char *choices, char *b, size_t cap) {
  size_t n = 0, k = 0, total = 1;
  for (const char *c = choices; *c; c++) total += *c == '|';
  b[0] = 0;
  for (const char *c = choices; *c && n + 1 < cap;) {
    size_t len = strcspn(c, "|");
    k++;
    n += (size_t)snprintf(b + n, cap - n, "%s%.*s", k == 1 ? "" : k == total ? " or " : ", ", (int)len, c);
    c += len + (c[len] == '|');
  }
  return b;
}

/* index of v in "a|b|c", -1 if none */
static int choice_index(const char *choices, const char *v) {
  int i = 0;
  for (const char *c = choices; *c; i++) {
    size_t len = strcspn(c, "|");
    if (strlen(v) == len && !strncmp(c, v, len)) return i;
    c += len + (c[len] == '|');
  }
  return -1;
}

/* ---- one option ---- */

static void *field(const shoal_opt_t *o, void *cli) { return (char *)cli + o->off; }

/* What a value of o is, for "needs a value (...)". */
static const char *expected(const shoal_opt_t *o, char *b, size_t cap) {
  char c[256];
  switch (o->kind) {
  case SHOAL_OPT_INT:
  case SHOAL_OPT_LONG:
  case SHOAL_OPT_COUNT:
  case SHOAL_OPT_U64:
    if (o->kind == SHOAL_OPT_U64 && o->lo == 0 && o->hi == 0) snprintf(b, cap, "an integer >= 0");
    else snprintf(b, cap, "an integer in [%.0f, %.0f]", o->lo, o->hi);
    break;
  case SHOAL_OPT_DOUBLE: snprintf(b, cap, "a number in [%g, %g]", o->lo, o->hi); break;
  case SHOAL_OPT_BYTES: snprintf(b, cap, "a size like 8, 64K, 256M"); break;
  case SHOAL_OPT_RATE: snprintf(b, cap, "a rate like 1gbit, 200mbit, 500M or 0"); break;
  case SHOAL_OPT_ENUM:
  case SHOAL_OPT_CHOICE: snprintf(b, cap, "%s", choice_list(o->choices, c, sizeof c)); break;
  default: snprintf(b, cap, "%s", o->expect ? o->expect : o->meta ? o->meta : "a value"); break;
  }
  return b;
}

/* Store value v of option o (spelled `as`) into its field; 0, or -1 with the message set. */
static int store(const shoal_opt_t *o, const char *as, const char *v, void *cli) {
  void *f = field(o, cli);
  double d;
  char c[256];
  switch (o->kind) {
  case SHOAL_OPT_INT:
  case SHOAL_OPT_LONG:
  case SHOAL_OPT_COUNT:
    if (shoal_opts_integer(as, v, o->lo, o->hi, &d)) return -1;
    if (o->kind == SHOAL_OPT_INT) *(int *)f = (int)d;
    else if (o->kind == SHOAL_OPT_LONG) *(long *)f = (long)d;
    else *(size_t *)f = (size_t)d;
    return 0;
  case SHOAL_OPT_U64: return parse_u64(as, v, o->lo, o->hi, (uint64_t *)f);
  case SHOAL_OPT_DOUBLE: return shoal__parse_double(as, v, o->lo, o->hi, (double *)f) ? -1 : 0;
  case SHOAL_OPT_BYTES: return shoal_opts_bytes(as, v, o->lo, o->hi, (size_t *)f);
  case SHOAL_OPT_RATE: return shoal_opts_rate(as, v, (double *)f);
  case SHOAL_OPT_STRING: *(const char **)f = v; return 0;
  case SHOAL_OPT_ENUM:
  case SHOAL_OPT_CHOICE: {
    int i = choice_index(o->choices, v);
    if (i < 0)
      return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': expected %s", as, v, choice_list(o->choices, c, sizeof c)), -1;
    if (o->kind == SHOAL_OPT_ENUM) *(int *)f = i;
    else *(const char **)f = v;
    return 0;
  }
  case SHOAL_OPT_LIST: {
    shoal_opts_list_t *l = f;
    if (l->n == SHOAL_OPTS_LIST_MAX) return shoal__seterr(SHOAL_ERR_CONFIG, "%s: at most %d of them", as, SHOAL_OPTS_LIST_MAX), -1;
    l->v[l->n++] = v;
    return 0;
  }
  case SHOAL_OPT_CALL: return o->parse(as, v, f) ? -1 : 0;
  default: return 0;
  }
}

/* Does `arg` (up to len characters) spell o? */
static int spells(const shoal_opt_t *o, const char *arg, size_t len) {
  for (const char *n = o->names; n && *n;) {
    size_t k = strcspn(n, "|");
    if (k == len && !strncmp(n, arg, len)) return 1;
    n += k + (n[k] == '|');
  }
  return 0;
}

static int find(const shoal_opt_t *t, const char *arg, size_t len) {
  for (int i = 0; t[i].kind != SHOAL_OPT_END; i++)
    if (t[i].kind >= SHOAL_OPT_FLAG && spells(&t[i], arg, len)) return i;
  return -1;
}

static int fail(const shoal_opts_spec_t *s, const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "%s: ", s->name);
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 2;
}

/* The message of a parser that failed, naming the option if it does not already. */
static int fail_value(const shoal_opts_spec_t *s, const char *as) {
  const char *m = shoal_last_error();
  if (strstr(m, as)) return fail(s, "%s%s", "", m);
  return fail(s, "%s: %s", as, m);
}

/* ---- the command line ---- */

static int is_help(const shoal_opt_t *t, const char *a) {
  return (!strcmp(a, "-h") || !strcmp(a, "--help")) && find(t, a, strlen(a)) < 0;
}

/* Option argv[*i]; *i moves past its value. "--name=value" is split in place (argv's strings are the
 * process's own), so that the spelling recorded is the name alone. SHOAL_OPTS_GO, or the exit status. */
static int one_option(const shoal_opts_spec_t *s, int argc, char **argv, int *i, void *cli, shoal_opts_res_t *r) {
  char *a = argv[*i], *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
  const char *v = NULL;
  if (eq) *eq = 0, v = eq + 1;
  int k = find(s->opts, a, strlen(a));
  if (k < 0) return fail(s, "unknown option '%s' (see %s --help)", a, s->name);
  const shoal_opt_t *o = &s->opts[k];
  char c[256];
  if (r->given[k]++ == 0) r->first[k] = *i;
  r->as[k] = a;
  if (o->kind == SHOAL_OPT_FLAG) {
    if (v) return fail(s, "%s takes no value (given '%s')", a, v);
    *(int *)field(o, cli) = (int)o->set;
    return SHOAL_OPTS_GO;
  }
  if (!v) {
    if (*i + 1 >= argc) return fail(s, "%s needs a value (%s)", a, expected(o, c, sizeof c));
    v = argv[++*i];
  }
  if (store(o, a, v, cli)) return fail_value(s, a);
  return SHOAL_OPTS_GO;
}

/* The words and the command, the options in between parsed. */
static int scan(const shoal_opts_spec_t *s, int argc, char **argv, void *cli, shoal_opts_res_t *r) {
  int nw = 0, i;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    int word = a[0] != '-' || !a[1];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (word && s->args == SHOAL_ARGS_COMMAND) break;
    if (word) {
      if (s->args != SHOAL_ARGS_WORDS || (s->max_words && nw >= s->max_words))
        return fail(s, "unknown argument '%s' (see %s --help)", a, s->name);
      argv[1 + nw++] = argv[i]; /* slots already read: the words gather at the front */
      continue;
    }
    if (is_help(s->opts, a)) {
      shoal_opts_help(s, cli, stdout);
      return 0;
    }
    int st = one_option(s, argc, argv, &i, cli, r);
    if (st != SHOAL_OPTS_GO) return st;
  }
  for (; i < argc && s->args == SHOAL_ARGS_WORDS; i++) { /* after "--": words too */
    if (s->max_words && nw >= s->max_words) return fail(s, "unknown argument '%s' (see %s --help)", argv[i], s->name);
    argv[1 + nw++] = argv[i];
  }
  if (i < argc && s->args == SHOAL_ARGS_NONE) return fail(s, "unknown argument '%s' (see %s --help)", argv[i], s->name);
  r->words = argv + 1;
  r->nwords = nw;
  if (s->args == SHOAL_ARGS_COMMAND || s->args == SHOAL_ARGS_AFTER_DDASH) {
    r->cmd = argv + i;
    r->ncmd = argc - i;
  }
  return SHOAL_OPTS_GO;
}

/* Options given outside their modes, in the order given. */
static int check_modes(const shoal_opts_spec_t *s, const void *cli, const shoal_opts_res_t *r) {
  const shoal_opt_t *t = s->opts;
  int last = 0;
  for (;;) {
    int k = -1;
    for (int i = 0; t[i].kind != SHOAL_OPT_END; i++)
      if (r->given[i] && t[i].when && r->first[i] > last && (k < 0 || r->first[i] < r->first[k])) k = i;
    if (k < 0) return SHOAL_OPTS_GO;
    last = r->first[k];
    for (unsigned b = 0; b < 32; b++) {
      if (!(t[k].when & (1u << b)) || s->modes[b].on(cli)) continue;
      char why[512];
      if (s->modes[b].why_fn) s->modes[b].why_fn(cli, why, sizeof why);
      else snprintf(why, sizeof why, "%s", s->modes[b].why);
      return fail(s, "%s %s", r->as[k], why);
    }
  }
}

int shoal_opts_parse(const shoal_opts_spec_t *s, int argc, char **argv, void *cli, shoal_opts_res_t *res) {
  shoal_opts_res_t local;
  shoal_opts_res_t *r = res ? res : &local;
  memset(r, 0, sizeof *r);
  r->spec = s;
  int n = 0;
  while (s->opts[n].kind != SHOAL_OPT_END) n++;
  if (n > SHOAL_OPTS_MAX) {
    fprintf(stderr, "%s: internal error: %d entries in the option table, at most %d\n", s->name, n, SHOAL_OPTS_MAX);
    return 2;
  }
  int st = scan(s, argc, argv, cli, r);
  if (st != SHOAL_OPTS_GO) return st;
  if (s->resolve && (st = s->resolve(cli, r))) return st;
  return check_modes(s, cli, r);
}

int shoal_opts_given(const shoal_opts_res_t *r, const char *name) {
  int k = find(r->spec->opts, name, strlen(name));
  return k < 0 ? 0 : r->given[k];
}

const char *shoal_opts_as(const shoal_opts_res_t *r, const char *name) {
  int k = find(r->spec->opts, name, strlen(name));
  return k < 0 || !r->given[k] ? NULL : r->as[k];
}

/* ---- --help ---- */

/* The default of o as the struct holds it, "" if none is shown. */
static const char *default_of(const shoal_opt_t *o, const void *cli, char *b, size_t cap) {
  const void *f = (const char *)cli + o->off;
  b[0] = 0;
  if (o->def) {
    snprintf(b, cap, "%s", o->def);
    return b;
  }
  switch (o->kind) {
  case SHOAL_OPT_INT: snprintf(b, cap, "%d", *(const int *)f); break;
  case SHOAL_OPT_LONG: snprintf(b, cap, "%ld", *(const long *)f); break;
  case SHOAL_OPT_COUNT: snprintf(b, cap, "%zu", *(const size_t *)f); break;
  case SHOAL_OPT_U64: snprintf(b, cap, "%llu", (unsigned long long)*(const uint64_t *)f); break;
  case SHOAL_OPT_DOUBLE: snprintf(b, cap, "%g", *(const double *)f); break;
  case SHOAL_OPT_BYTES: fmt_bytes((double)*(const size_t *)f, b, cap); break;
  case SHOAL_OPT_RATE: shoal_opts_rate_str(*(const double *)f, b, cap); break;
  case SHOAL_OPT_STRING:
  case SHOAL_OPT_CHOICE:
    if (*(const char *const *)f) snprintf(b, cap, "%s", *(const char *const *)f);
    break;
  case SHOAL_OPT_ENUM: {
    int i = *(const int *)f;
    for (const char *c = o->choices; *c && i >= 0; i--) {
      size_t len = strcspn(c, "|");
      if (i == 0) snprintf(b, cap, "%.*s", (int)len, c);
      c += len + (c[len] == '|');
    }
    break;
  }
  case SHOAL_OPT_CALL:
    if (o->show) o->show(f, b, cap);
    break;
  default: break;
  }
  return b;
}

/* "  -n, --nranks N" */
static int left_column(const shoal_opt_t *o, char *b, size_t cap) {
  size_t n = (size_t)snprintf(b, cap, "  ");
  for (const char *s = o->names; *s && n < cap;) {
    size_t k = strcspn(s, "|");
    n += (size_t)snprintf(b + n, cap - n, "%s%.*s", s == o->names ? "" : ", ", (int)k, s);
    s += k + (s[k] == '|');
  }
  if (o->meta && n < cap) n += (size_t)snprintf(b + n, cap - n, " %s", o->meta);
  return (int)(n < cap ? n : cap - 1);
}

static void help_entry(const shoal_opt_t *o, const void *cli, int col, FILE *f) {
  char left[256], def[256];
  int n = left_column(o, left, sizeof left);
  fputs(left, f);
  if (n + 1 >= col) fprintf(f, "\n%*s", col, "");
  else fprintf(f, "%*s", col - n, "");
  const char *h = o->help ? o->help : "";
  size_t last = 0; /* the length of the help's last line */
  for (;;) {
    size_t k = strcspn(h, "\n");
    fprintf(f, "%.*s", (int)k, h);
    last = k;
    if (!h[k]) break;
    h += k + 1;
    fprintf(f, "\n%*s", col, "");
  }
  default_of(o, cli, def, sizeof def);
  if (def[0] && last && col + last + strlen(def) + 11 > 112) fprintf(f, "\n%*s(default %s)", col, "", def);
  else if (def[0]) fprintf(f, "%s(default %s)", last ? " " : "", def);
  fputc('\n', f);
}

void shoal_opts_help(const shoal_opts_spec_t *s, const void *cli, FILE *f) {
  int col = s->col ? s->col : 24;
  fputs(s->usage, f);
  if (s->opts[0].kind != SHOAL_OPT_GROUP) fprintf(f, "\noptions:\n");
  for (const shoal_opt_t *o = s->opts; o->kind != SHOAL_OPT_END; o++) {
    if (o->kind == SHOAL_OPT_GROUP) fprintf(f, "\n%s\n", o->help);
    else if (o->kind == SHOAL_OPT_TEXT) fprintf(f, "%s\n", o->help);
    else help_entry(o, cli, col, f);
  }
  if (s->more_help) s->more_help(f);
}

/* ---- sub-commands ---- */

static void dispatch_help(const char *usage, const shoal_subcmd_t *subs, const char *more, FILE *f) {
  fputs(usage, f);
  fprintf(f, "\nsub-commands (each answers --help):\n");
  for (const shoal_subcmd_t *c = subs; c->name; c++) fprintf(f, "  %-12s %s\n", c->name, c->help);
  if (more) fputs(more, f);
}

int shoal_opts_dispatch(const char *name, const char *usage, const shoal_subcmd_t *subs, const char *more, int argc,
                        char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    dispatch_help(usage, subs, more, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const shoal_subcmd_t *c = subs; c->name; c++)
    if (!strcmp(argv[1], c->name)) return c->run(argc - 1, argv + 1);
  fprintf(stderr, "%s: unknown sub-command '%s' (", name, argv[1]);
  for (const shoal_subcmd_t *c = subs; c->name; c++) fprintf(stderr, "%s%s", c == subs ? "" : ", ", c->name);
  fprintf(stderr, "; see %s --help)\n", name);
  return 2;
}
