/* Reading SHOAL_* variables from the environment and an optional file. */
#include "core/config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/log.h"

#define MAX_FILE_VARS 128
static struct { char name[64]; char value[256]; } file_vars[MAX_FILE_VARS];
static int file_nvars;
static pthread_once_t file_once = PTHREAD_ONCE_INIT;
static char file_warn[600];      /* the first malformed line, reported once */
static atomic_int file_warned;

static void load_file(void) {
  const char *path = getenv("SHOAL_CONF_FILE");
  char buf[1024];
  if (!path) {
    const char *home = getenv("HOME");
    if (!home) return;
    snprintf(buf, sizeof buf, "%s/.shoal.conf", home);
    path = buf;
  }
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[512];
  int lineno = 0;
  while (fgets(line, sizeof line, f) && file_nvars < MAX_FILE_VARS) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || *p == '\0') continue;
    char *eq = strchr(p, '=');
    if (!eq) { /* reported after the once: logging reads this file too (SHOAL_DEBUG) */
      if (!file_warn[0]) snprintf(file_warn, sizeof file_warn, "%s:%d: ignored (expected VAR=value)", path, lineno);
      continue;
    }
    *eq = '\0';
    char *v = eq + 1;
    v[strcspn(v, "\r\n")] = '\0';
    snprintf(file_vars[file_nvars].name, sizeof file_vars[0].name, "%s", p);
    snprintf(file_vars[file_nvars].value, sizeof file_vars[0].value, "%s", v);
    file_nvars++;
  }
  fclose(f);
}

const char *shoal__config_raw(const char *name) {
  const char *v = getenv(name);
  if (v) return v;
  pthread_once(&file_once, load_file);
  if (file_warn[0] && !atomic_exchange(&file_warned, 1)) SHOAL_WARN("INIT", "%s", file_warn);
  for (int i = 0; i < file_nvars; i++)
    if (strcmp(file_vars[i].name, name) == 0) return file_vars[i].value;
  return NULL;
}

int shoal__parse_long(const char *what, const char *s, long min, long max, long *out) {
  if (!s || !*s) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='': empty, expected an integer", what);
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  while (*end == ' ') end++;
  if (errno || *end != '\0')
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not an integer", what, s);
  if (v < min || v > max)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%ld, %ld]", what, s, min, max);
  *out = v;
  return 0;
}

int shoal__parse_double(const char *what, const char *s, double min, double max, double *out) {
  if (!s || !*s) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='': empty, expected a number", what);
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  while (*end == ' ') end++;
  if (errno || *end != '\0' || isnan(v))
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not a number", what, s);
  if (v < min || v > max)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': out of range [%g, %g]", what, s, min, max);
  *out = v;
  return 0;
}

int shoal__config_long(const char *name, long def, long min, long max, long *out) {
  const char *s = shoal__config_raw(name);
  if (!s) {
    *out = def;
    return 0;
  }
  return shoal__parse_long(name, s, min, max, out);
}

int shoal__config_double(const char *name, double def, double min, double max, double *out) {
  const char *s = shoal__config_raw(name);
  if (!s) {
    *out = def;
    return 0;
  }
  return shoal__parse_double(name, s, min, max, out);
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
  return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': expected 0/1, true/false, yes/no or on/off", name, s);
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
