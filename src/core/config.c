/* Reading SHOAL_* variables from the environment and an optional file. */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/file.h"

/* The file's variables (SHOAL_* only), each with its line, and what was wrong with the file: the
 * logger reports every problem once (WARN) when it configures (shoal__config_problems; this file does
 * not log, since the logger reads its level here); a malformed line or an unreadable SHOAL_CONF_FILE is
 * also an error of shoal_comm_init (shoal__config_check). */
typedef struct {
  char *name, *value;
  int line;
} file_var_t;
static file_var_t *file_vars;
static int file_nvars;
static char file_path[1024];
static pthread_once_t file_once = PTHREAD_ONCE_INIT;
#define MAX_PROBLEMS 8
static char problems[MAX_PROBLEMS][320];
static int nproblems, nproblems_all;
static char fatal_problem[320];

static void problem(int fatal, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(int fatal, const char *fmt, ...) {
  char m[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  if (nproblems < MAX_PROBLEMS) snprintf(problems[nproblems++], sizeof problems[0], "%s", m);
  nproblems_all++;
  if (fatal && !fatal_problem[0]) snprintf(fatal_problem, sizeof fatal_problem, "%s", m);
}

static char *skip_space(char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

static void trim_end(char *p) {
  size_t n = strlen(p);
  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) p[--n] = '\0';
}

static int is_name(const char *p) {
  if (!(isalpha((unsigned char)*p) || *p == '_')) return 0;
  for (; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_')) return 0;
  return 1;
}

static int known_var(const char *name) {
  for (size_t i = 0; i < shoal__config_nvars; i++)
    if (!strcmp(shoal__config_vars[i].name, name)) return 1;
  return 0;
}

/* One "VAR=value" line as a shell reads it: `export ` allowed, blanks around '=', a value in single or
 * double quotes taken as is, otherwise cut at a '#' after a blank. 0, or -1 with the reason. */
static int parse_line(char *p, char **name, char **value, const char **why) {
  p = skip_space(p);
  if (!strncmp(p, "export", 6) && (p[6] == ' ' || p[6] == '\t')) p = skip_space(p + 6);
  char *eq = strchr(p, '=');
  if (!eq) return *why = "expected VAR=value", -1;
  *eq = '\0';
  trim_end(p);
  if (!is_name(p)) return *why = "not a variable name before '='", -1;
  char *v = skip_space(eq + 1);
  if (*v == '"' || *v == '\'') {
    char *close = strchr(v + 1, *v);
    if (!close) return *why = "unterminated quote", -1;
    *close = '\0';
    char *rest = skip_space(close + 1);
    if (*rest && *rest != '#') return *why = "text after the closing quote", -1;
    v++;
  } else {
    for (char *c = v; *c; c++)
      if (*c == '#' && (c == v || c[-1] == ' ' || c[-1] == '\t')) {
        *c = '\0';
        break;
      }
    trim_end(v);
  }
  *name = p;
  *value = v;
  return 0;
}

static void load_file(void) {
  const char *path = getenv("SHOAL_CONF_FILE");
  int explicit = path != NULL;
  char buf[1024];
  if (!path) {
    const char *home = getenv("HOME");
    if (!home) return;
    snprintf(buf, sizeof buf, "%s/.shoal.conf", home);
    path = buf;
  }
  if (!*path) {
    problem(1, "SHOAL_CONF_FILE is set but empty (unset it, or name a file)");
    return;
  }
  FILE *f;
  char saved[1024]; /* the caller's last error: this read happens inside whichever call came first */
  snprintf(saved, sizeof saved, "%s", shoal_last_error());
  int rc = shoal__fopen_input(path, "SHOAL_CONF_FILE", &f);
  if (rc && explicit) problem(1, "%s", shoal_last_error());
  if (saved[0]) shoal__seterr(SHOAL_ERR_CONFIG, "%s", saved);
  else shoal__clearerr();
  if (rc) return;
  snprintf(file_path, sizeof file_path, "%s", path);
  char *line = NULL;
  size_t cap = 0;
  int lineno = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    const char *nul = memchr(line, '\0', (size_t)len);
    if (nul) { /* the rest of the line would be cut off unseen */
      problem(1, "%s:%d: a NUL byte at column %d: not a text line", path, lineno, (int)(nul - line) + 1);
      continue;
    }
    line[strcspn(line, "\r\n")] = '\0';
    char *p = skip_space(line + (lineno == 1 ? shoal__utf8_bom(line, strlen(line)) : 0)), *name, *value;
    const char *why;
    if (*p == '#' || *p == '\0') continue;
    char shown[64];
    snprintf(shown, sizeof shown, "%s", p); /* parse_line cuts the line up */
    if (parse_line(p, &name, &value, &why)) {
      problem(1, "%s:%d: %s: '%s'", path, lineno, why, shown);
      continue;
    }
    if (strncmp(name, "SHOAL_", 6)) {
      problem(0, "%s:%d: %s ignored: only SHOAL_* variables are read from this file (launcher variables such as "
              "RANK come from the environment)", path, lineno, name);
      continue;
    }
    if (!known_var(name)) {
      problem(0, "%s:%d: %s ignored: not a shoal variable (`shoal config` lists them)", path, lineno, name);
      continue;
    }
    /* read before this file could be: the file's own name, and the library that the Python binding loads
     * before any of its code runs */
    if (!strcmp(name, "SHOAL_CONF_FILE") || !strcmp(name, "SHOAL_LIBRARY")) {
      problem(0, "%s:%d: %s ignored: it is read before this file, so only the environment sets it", path, lineno,
              name);
      continue;
    }
    int i = 0;
    while (i < file_nvars && strcmp(file_vars[i].name, name)) i++;
    char *v = strdup(value);
    if (!v) break;
    if (i < file_nvars) { /* as a shell would: the later assignment counts */
      problem(0, "%s:%d: %s set again (first on line %d): this line's value is used", path, lineno, name,
              file_vars[i].line);
      free(file_vars[i].value);
      file_vars[i].value = v;
      file_vars[i].line = lineno;
      continue;
    }
    file_var_t *grown = realloc(file_vars, sizeof *file_vars * (size_t)(file_nvars + 1));
    char *n = strdup(name);
    if (!grown || !n) {
      if (grown) file_vars = grown;
      free(n);
      free(v);
      break;
    }
    file_vars = grown;
    file_vars[file_nvars++] = (file_var_t){n, v, lineno};
  }
  free(line);
  fclose(f);
}

static void file_ready(void) { pthread_once(&file_once, load_file); }

int shoal__config_problems(const char **msgs, int cap) {
  file_ready();
  for (int i = 0; i < nproblems && i < cap; i++) msgs[i] = problems[i];
  return nproblems_all;
}

static const file_var_t *file_var(const char *name) {
  file_ready();
  for (int i = 0; i < file_nvars; i++)
    if (strcmp(file_vars[i].name, name) == 0) return &file_vars[i];
  return NULL;
}

const char *shoal__config_raw(const char *name) {
  const char *v = getenv(name);
  if (v) return v;
  const file_var_t *fv = file_var(name);
  return fv ? fv->value : NULL;
}

int shoal__config_check(void) {
  file_ready();
  return fatal_problem[0] ? shoal__seterr(SHOAL_ERR_CONFIG, "%s", fatal_problem) : 0;
}

/* A value of the file that does not parse: its error names the file and line too. */
int shoal__config_from_where(const char *name, int rc) {
  if (!rc || getenv(name)) return rc;
  const file_var_t *fv = file_var(name);
  if (!fv) return rc;
  char m[600];
  snprintf(m, sizeof m, "%s", shoal_last_error());
  return shoal__seterr(rc, "%s (set in %s:%d)", m, file_path, fv->line);
}

int shoal__list_has_empty(const char *s, char sep) {
  if (!*s || s[0] == sep || s[strlen(s) - 1] == sep) return 1;
  for (; *s; s++)
    if (s[0] == sep && s[1] == sep) return 1;
  return 0;
}

int shoal__strtod_decimal(const char *s, double *out, const char **end) {
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  if (e == s || errno == ERANGE || !isfinite(v)) return -1;
  for (const char *c = s; c < e; c++)
    if (strchr("xXiInN", *c)) return -1; /* hex, inf, nan */
  *out = v;
  *end = e;
  return 0;
}

int shoal__parse_long(const char *what, const char *s, long min, long max, long *out) {
  if (!s || !*s) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='': empty, expected an integer", what);
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  while (*end == ' ' || *end == '\t') end++;
  if (errno || *end != '\0')
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not an integer", what, s);
  if (v < min || v > max)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%ld, %ld]", what, s, min, max);
  *out = v;
  return 0;
}

int shoal__parse_double(const char *what, const char *s, double min, double max, double *out) {
  if (!s || !*s) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='': empty, expected a number", what);
  double v;
  const char *end;
  if (shoal__strtod_decimal(s, &v, &end)) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not a number", what, s);
  while (*end == ' ' || *end == '\t') end++;
  if (*end != '\0') return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not a number", what, s);
  if (v < min || v > max)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%g, %g]", what, s, min, max);
  *out = v;
  return 0;
}

int shoal__parse_rate(const char *what, const char *s, double *out) {
  double v = 0, mul = 1;
  const char *e = NULL;
  if (s && !shoal__strtod_decimal(s, &v, &e)) {
    if (!strcasecmp(e, "gbit") || !strcasecmp(e, "g")) mul = 1e9;
    else if (!strcasecmp(e, "mbit") || !strcasecmp(e, "m")) mul = 1e6;
    else if (!strcasecmp(e, "kbit") || !strcasecmp(e, "k")) mul = 1e3;
    else if (!strcasecmp(e, "bit") || !*e) mul = 1;
    else e = NULL;
  }
  if (!e || !(v >= 0) || (v * mul > 0 && v * mul < 8000) || v * mul > 1e12)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': expected a rate like 1gbit, 200mbit, 500M or 0 (unshaped), >= 8kbit",
                         what, s ? s : "");
  *out = v * mul;
  return 0;
}

int shoal__config_long(const char *name, long def, long min, long max, long *out) {
  const char *s = shoal__config_raw(name);
  if (!s) {
    *out = def;
    return 0;
  }
  return shoal__config_from_where(name, shoal__parse_long(name, s, min, max, out));
}

int shoal__config_double(const char *name, double def, double min, double max, double *out) {
  const char *s = shoal__config_raw(name);
  if (!s) {
    *out = def;
    return 0;
  }
  return shoal__config_from_where(name, shoal__parse_double(name, s, min, max, out));
}

int shoal__config_bool(const char *name, int def, int *out) {
  const char *s = shoal__config_raw(name);
  if (!s) {
    *out = def;
    return 0;
  }
  if (!strcasecmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) {
    *out = 1;
    return 0;
  }
  if (!strcasecmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) {
    *out = 0;
    return 0;
  }
  return shoal__config_from_where(
      name, shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': expected 0/1, true/false, yes/no or on/off", name, s));
}

const char *shoal__config_str(const char *name, const char *def) {
  const char *s = shoal__config_raw(name);
  return s ? s : def;
}

void shoal__config_print(FILE *f, int markdown) {
  if (markdown) {
    fprintf(f, "| variable | default | area | meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; i < shoal__config_nvars; i++) {
      const shoal__config_var_t *v = &shoal__config_vars[i];
      fprintf(f, "| `%s` | %s | %s | %s |\n", v->name, v->def[0] ? v->def : "(unset)", v->area, v->help);
    }
    return;
  }
  fprintf(f, "%-26s %-18s %-14s %s\n", "# variable", "value", "default", "meaning");
  for (size_t i = 0; i < shoal__config_nvars; i++) {
    const shoal__config_var_t *v = &shoal__config_vars[i];
    const char *cur = shoal__config_raw(v->name);
    fprintf(f, "%-26s %-18s %-14s [%s] %s\n", v->name, cur ? cur : "-", v->def[0] ? v->def : "-", v->area,
            v->help);
  }
}
