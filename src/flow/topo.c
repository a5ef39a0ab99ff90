/* The flow controller's network (topo.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "flow/topo.h"

static int rack_arg(const char *s, int *out) {
  char *e;
  if (!s || s[0] != 'r') return -1;
  long v = strtol(s + 1, &e, 10);
  if (e == s + 1 || *e || v < 0 || v >= SHOAL__FTOPO_MAX_RACKS) return -1;
  *out = (int)v;
  return 0;
}

static int find_host(const shoal__ftopo_t *t, const char *name) {
  for (int i = 0; i < t->nhosts; i++)
    if (!strcmp(t->host[i].name, name)) return i;
  return -1;
}

typedef struct {
  const char *path;
  int line;
  double rate, uplink;
  int uplink_set[SHOAL__FTOPO_MAX_RACKS];
} parse_t;

#define BAD(...) shoal__seterr(SHOAL_ERR_PARSE, __VA_ARGS__)

static int parse_host(parse_t *ps, shoal__ftopo_t *t, char **w, int nw) {
  if (nw < 4 || nw > 5) return BAD("%s:%d: expected 'host NAME IP RACK [RATE]'", ps->path, ps->line);
  if (t->nhosts >= SHOAL__FTOPO_MAX_HOSTS) return BAD("%s:%d: more than %d hosts", ps->path, ps->line, SHOAL__FTOPO_MAX_HOSTS);
  if (strlen(w[1]) >= sizeof t->host[0].name || find_host(t, w[1]) >= 0)
    return BAD("%s:%d: host name '%s' is too long or given twice", ps->path, ps->line, w[1]);
  shoal__ftopo_host_t *h = &t->host[t->nhosts];
  struct in_addr a;
  if (inet_pton(AF_INET, w[2], &a) != 1) return BAD("%s:%d: '%s' is not an IPv4 address", ps->path, ps->line, w[2]);
  if (shoal__ftopo_host_of(t, a.s_addr) >= 0) return BAD("%s:%d: address %s given twice", ps->path, ps->line, w[2]);
  char *e;
  long r = strtol(w[3], &e, 10);
  if (e == w[3] || *e || r < 0 || r >= SHOAL__FTOPO_MAX_RACKS)
    return BAD("%s:%d: rack '%s': expected 0..%d", ps->path, ps->line, w[3], SHOAL__FTOPO_MAX_RACKS - 1);
  double rate = ps->rate;
  if (nw == 5 && shoal__parse_rate("rate", w[4], &rate)) return BAD("%s:%d: %s", ps->path, ps->line, shoal_last_error());
  snprintf(h->name, sizeof h->name, "%s", w[1]);
  h->ip = a.s_addr;
  h->rack = (int)r;
  h->up_bps = h->down_bps = rate;
  if (r + 1 > t->nracks) t->nracks = (int)r + 1;
  t->nhosts++;
  return 0;
}

static int parse_feedback(parse_t *ps, shoal__ftopo_t *t, char **w, int nw) {
  if (nw != 4 || strlen(w[3]) >= SHOAL__FTOPO_IFNAME)
    return BAD("%s:%d: expected 'feedback up|down rK IFACE' or 'feedback in HOST IFACE'", ps->path, ps->line);
  int k;
  if (!strcmp(w[1], "in")) {
    if ((k = find_host(t, w[2])) < 0) return BAD("%s:%d: no host '%s' above this line", ps->path, ps->line, w[2]);
    snprintf(t->host[k].in_if, SHOAL__FTOPO_IFNAME, "%s", w[3]);
  } else if (!strcmp(w[1], "up") || !strcmp(w[1], "down")) {
    if (rack_arg(w[2], &k)) return BAD("%s:%d: '%s': expected a rack as rK", ps->path, ps->line, w[2]);
    snprintf(w[1][0] == 'u' ? t->up_if[k] : t->down_if[k], SHOAL__FTOPO_IFNAME, "%s", w[3]);
  } else {
    return BAD("%s:%d: feedback '%s': expected up, down or in", ps->path, ps->line, w[1]);
  }
  return 0;
}

static int parse_line(parse_t *ps, shoal__ftopo_t *t, char *line) {
  char *w[8];
  int nw = 0;
  char *hash = strchr(line, '#');
  if (hash) *hash = 0;
  for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
    if (nw == 8) return BAD("%s:%d: too many words", ps->path, ps->line);
    w[nw++] = tok;
  }
  if (nw == 0) return 0;
  if (!strcmp(w[0], "host")) return parse_host(ps, t, w, nw);
  if (!strcmp(w[0], "feedback")) return parse_feedback(ps, t, w, nw);
  if (!strcmp(w[0], "rate") && nw == 2) {
    if (t->nhosts) return BAD("%s:%d: 'rate' must come before the host lines it applies to", ps->path, ps->line);
    if (shoal__parse_rate("rate", w[1], &ps->rate)) return BAD("%s:%d: %s", ps->path, ps->line, shoal_last_error());
    return 0;
  }
  if (!strcmp(w[0], "uplink") && (nw == 2 || nw == 3)) {
    double v;
    int k = -1;
    if (nw == 3 && rack_arg(w[1], &k)) return BAD("%s:%d: '%s': expected a rack as rK", ps->path, ps->line, w[1]);
    if (shoal__parse_rate("uplink", w[nw - 1], &v)) return BAD("%s:%d: %s", ps->path, ps->line, shoal_last_error());
    for (int r = 0; r < SHOAL__FTOPO_MAX_RACKS; r++)
      if (k < 0 ? !ps->uplink_set[r] : r == k) {
        t->rack_up_bps[r] = t->rack_down_bps[r] = v;
        if (k >= 0) ps->uplink_set[r] = 1;
      }
    return 0;
  }
  return BAD("%s:%d: unknown line '%s' (keys: rate, uplink, host, feedback)", ps->path, ps->line, w[0]);
}

int shoal__ftopo_read(const char *path, shoal__ftopo_t *out) {
  FILE *f;
  int rc = shoal__fopen_input(path, "topology file", &f);
  if (rc) return rc;
  shoal__ftopo_t *t = calloc(1, sizeof *t);
  if (!t) {
    fclose(f);
    return shoal__seterr(SHOAL_ERR_NOMEM, "topology file %s: out of memory", path);
  }
  parse_t ps = {.path = path};
  char line[1024];
  while (!rc && fgets(line, sizeof line, f)) {
    ps.line++;
    if (!strchr(line, '\n') && !feof(f)) rc = BAD("%s:%d: line longer than %zu bytes", path, ps.line, sizeof line - 2);
    else rc = parse_line(&ps, t, line + (ps.line == 1 ? shoal__utf8_bom(line, strlen(line)) : 0));
  }
  if (!rc && ferror(f)) rc = shoal__seterr(SHOAL_ERR_IO, "topology file %s: read error", path);
  if (!rc && t->nhosts < 2) rc = BAD("%s: %d host line%s; a network needs at least 2 hosts", path, t->nhosts, t->nhosts == 1 ? "" : "s");
  for (int r = 0; !rc && r < t->nracks; r++) {
    int used = 0;
    for (int i = 0; i < t->nhosts; i++) used += t->host[i].rack == r;
    if (!used) rc = BAD("%s: rack %d has no host (racks are numbered from 0 without gaps)", path, r);
  }
  fclose(f);
  if (!rc) *out = *t;
  free(t);
  return rc;
}

int shoal__ftopo_uniform(int hosts, int racks, double rate_bps, double oversub, shoal__ftopo_t *out) {
  if (hosts < 2 || hosts > SHOAL__FTOPO_MAX_HOSTS || racks < 1 || racks > SHOAL__FTOPO_MAX_RACKS || racks > hosts ||
      !(rate_bps >= 0) || !(oversub >= 1))
    return shoal__seterr(SHOAL_ERR_INVALID, "topology: %d hosts in %d racks, rate %g, oversubscription %g: out of range",
                         hosts, racks, rate_bps, oversub);
  memset(out, 0, sizeof *out);
  int per = (hosts + racks - 1) / racks;
  out->nhosts = hosts;
  out->nracks = racks;
  for (int i = 0; i < hosts; i++) {
    shoal__ftopo_host_t *h = &out->host[i];
    snprintf(h->name, sizeof h->name, "h%d", i);
    h->rack = i / per;
    h->ip = htonl((10u << 24) | (90u << 16) | ((uint32_t)h->rack << 8) | (uint32_t)(i % per + 1));
    h->up_bps = h->down_bps = rate_bps;
  }
  if (racks > 1)
    for (int r = 0; r < racks; r++) out->rack_up_bps[r] = out->rack_down_bps[r] = per * rate_bps / oversub;
  return 0;
}

int shoal__ftopo_host_of(const shoal__ftopo_t *t, uint32_t ip) {
  for (int i = 0; i < t->nhosts; i++)
    if (t->host[i].ip == ip && ip) return i;
  return -1;
}

int shoal__ftopo_path(const shoal__ftopo_t *t, int a, int b, int *links) {
  int n = 0, H = t->nhosts, R = t->nracks;
  int ra = t->host[a].rack, rb = t->host[b].rack;
  if (t->host[a].up_bps > 0) links[n++] = a;
  if (ra != rb && t->rack_up_bps[ra] > 0) links[n++] = 2 * H + ra;
  if (ra != rb && t->rack_down_bps[rb] > 0) links[n++] = 2 * H + R + rb;
  if (t->host[b].down_bps > 0) links[n++] = H + b;
  return n;
}

double shoal__ftopo_cap(const shoal__ftopo_t *t, int l) {
  int H = t->nhosts, R = t->nracks;
  if (l < H) return t->host[l].up_bps;
  if (l < 2 * H) return t->host[l - H].down_bps;
  if (l < 2 * H + R) return t->rack_up_bps[l - 2 * H];
  return t->rack_down_bps[l - 2 * H - R];
}

const char *shoal__ftopo_link_name(const shoal__ftopo_t *t, int l, char *buf, int cap) {
  int H = t->nhosts, R = t->nracks;
  if (l < H) snprintf(buf, (size_t)cap, "%s.up", t->host[l].name);
  else if (l < 2 * H) snprintf(buf, (size_t)cap, "%s.down", t->host[l - H].name);
  else if (l < 2 * H + R) snprintf(buf, (size_t)cap, "r%d.up", l - 2 * H);
  else snprintf(buf, (size_t)cap, "r%d.down", l - 2 * H - R);
  return buf;
}

const char *shoal__ftopo_link_iface(const shoal__ftopo_t *t, int l) {
  int H = t->nhosts, R = t->nracks;
  const char *s = "";
  if (l < H) s = "";
  else if (l < 2 * H) s = t->host[l - H].in_if;
  else if (l < 2 * H + R) s = t->up_if[l - 2 * H];
  else s = t->down_if[l - 2 * H - R];
  return *s ? s : NULL;
}
