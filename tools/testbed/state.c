/* The state file of a testbed: reading it, recording in it; testbed names and host/rack numbers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testbed.h"

int shoal__tb_fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return -1;
}

int shoal__tb_name_ok(const char *name) {
  size_t l = strlen(name);
  if (l < 1 || l > 12 || name[0] < 'a' || name[0] > 'z') return 0;
  for (size_t i = 0; i < l; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9'))) return 0;
  return 1;
}

int shoal__tb_load(const char *name, tb_t *tb, char *err, size_t cap) {
  memset(tb, 0, sizeof *tb);
  if (!shoal__tb_name_ok(name))
    return shoal__tb_fail(err, cap, "testbed name '%s': expected a lower-case letter then up to 11 letters or digits", name);
  snprintf(tb->name, sizeof tb->name, "%s", name);
  snprintf(tb->dir, sizeof tb->dir, "%s/%s", TB_RUN_DIR, name);
  snprintf(tb->fabric, sizeof tb->fabric, "%s-net", name);
  char path[160];
  snprintf(path, sizeof path, "%s/state", tb->dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return shoal__tb_fail(err, cap, "no testbed '%s' (%s does not exist; start one with shoal testbed up)", name, path);
    return shoal__tb_fail(err, cap, "%s: %s", path, strerror(errno));
  }
  char line[512];
  int ln = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    char k[32] = "", a[160] = "", b[64] = "", c[64] = "";
    double x = 0, y = 0;
    int i = 0, r = 0;
    if (sscanf(line, "%31s", k) != 1 || k[0] == '#') continue;
    if (!strcmp(k, "testbed")) {
      if (sscanf(line, "testbed %*s hosts %d racks %d rate %lf", &tb->nhosts, &tb->nracks, &tb->rate_bps) != 3 ||
          tb->nhosts < 1 || tb->nhosts > TB_MAX_HOSTS || tb->nracks < 1 || tb->nracks > TB_MAX_RACKS) {
        bad = ln; /* the lines after it cannot be checked against it */
        break;
      }
    } else if (!strcmp(k, "host")) {
      if (sscanf(line, "host %d %15s %47s %15s rack %d", &i, a, b, c, &r) != 5 || i < 0 || i >= tb->nhosts ||
          r < 0 || r >= tb->nracks) {
        if (!bad) bad = ln;
        continue;
      }
      tb_host_t *h = &tb->h[i];
      snprintf(h->name, sizeof h->name, "%s", a);
      snprintf(h->ns, sizeof h->ns, "%s", b);
      snprintf(h->addr, sizeof h->addr, "%s", c);
      h->rack = r;
    } else if (!strcmp(k, "rate")) { /* rate <host> <egress> <ingress> */
      if (sscanf(line, "rate %d %lf %lf", &i, &x, &y) != 3 || i < 0 || i >= tb->nhosts) bad = bad ? bad : ln;
      else tb->h[i].egress_bps = x, tb->h[i].ingress_bps = y;
    } else if (!strcmp(k, "uplink")) { /* uplink <rack> <up> <down> */
      if (sscanf(line, "uplink %d %lf %lf", &r, &x, &y) != 3 || r < 0 || r >= tb->nracks) bad = bad ? bad : ln;
      else tb->up_bps[r] = x, tb->down_bps[r] = y;
    } else if (!strcmp(k, "cpu")) { /* cpu <host> <fraction> <method> */
      if (sscanf(line, "cpu %d %lf %7s", &i, &x, a) != 3 || i < 0 || i >= tb->nhosts) bad = bad ? bad : ln;
      else tb->h[i].cpu = x, snprintf(tb->h[i].cpu_method, sizeof tb->h[i].cpu_method, "%s", a);
    } else if (!strcmp(k, "cgroup")) {
      if (sscanf(line, "cgroup %159s", a) == 1 && !tb->cgroup[0]) snprintf(tb->cgroup, sizeof tb->cgroup, "%s", a);
    } else if (!strcmp(k, "complete")) {
      tb->complete = 1;
    }
  }
  fclose(f);
  if (bad) return shoal__tb_fail(err, cap, "%s:%d: malformed line", path, bad);
  if (tb->nhosts < 1) return shoal__tb_fail(err, cap, "%s: no 'testbed' line (interrupted up? run shoal testbed down --name %s)", path, name);
  if (tb->complete)
    for (int i = 0; i < tb->nhosts; i++)
      if (!tb->h[i].name[0]) return shoal__tb_fail(err, cap, "%s: no 'host %d' line (the state was edited?)", path, i);
  if (!tb->complete)
    return shoal__tb_fail(err, cap, "testbed '%s' is incomplete (an interrupted up?); remove it with shoal testbed down --name %s", name,
                name);
  return 0;
}

int shoal__tb_index(const char *s) {
  size_t n = strlen(s);
  return n >= 1 && n <= 3 && strspn(s, "0123456789") == n ? (int)strtol(s, NULL, 10) : -1;
}

/* "h3", "3" or "NAME-h3": nothing else (no sign, no blank, NAME- only before h) */
int shoal__tb_host_index(const tb_t *tb, const char *spec) {
  const char *s = spec;
  size_t nl = strlen(tb->name);
  if (!strncmp(s, tb->name, nl) && s[nl] == '-') {
    s += nl + 1;
    if (s[0] != 'h') return -1;
  }
  if (s[0] == 'h') s++;
  int v = shoal__tb_index(s);
  return v < tb->nhosts ? v : -1;
}

int shoal__tb_record(const char *dir, char *err, size_t cap, const char *fmt, ...) {
  char p[160];
  snprintf(p, sizeof p, "%s/state", dir);
  FILE *f = fopen(p, "a");
  if (!f) return shoal__tb_fail(err, cap, "%s: %s", p, strerror(errno));
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  return fclose(f) ? shoal__tb_fail(err, cap, "%s: write failed", p) : 0;
}
