/* Cluster description files: INI or JSON (docs/simulator.md, "Cluster file").
 *
 *   INI                                JSON
 *   [cluster]                          {"machines": 256, "gpus_per_machine": 8,
 *   machines = 256                      "racks": 16, "oversub": 2,
 *   gpus_per_machine = 8                "groups": [{"machines": 4, ...}]}
 *   racks = 16
 *   [group]        (repeatable: a group of machines of another kind, added to
 *   machines = 4    the [cluster] machines; a group starts from the [cluster]
 *                   machine keys. When groups are given and [cluster] sets no
 *                   `machines`, the cluster is the groups alone)
 *
 * racks not written in a section: min(racks inherited (default 16), that
 * section's machines); racks written and larger than the section's machines
 * is an error naming its file:line. At most 8 machine groups in all.
 *
 * Machine keys: machines, racks, gpus_per_machine, cpus_per_machine,
 * mem_gb_per_machine, nic_gbps, sockets_per_machine (0: 2 when the machine has an
 * even number of GPUs, else 1; model/gpu_slots.h). Network keys ([cluster] only): intra_gbps,
 * alpha_intra_us, alpha_inter_us, oversub. Errors name file:line and key. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "sched/model/cluster.h"
#include "sched/model/json.h"

/* Where a section's machines / racks were written (0: not in the file), and the line of every key it
 * set (a key given twice is an error: which one was meant?). */
typedef struct {
  int machines_line, racks_line;
  int key_line[11];
} where_t;

static int set_key(const char *file, int line, shoal_cluster_spec_t *sp, shoal_cluster_group_t *g, where_t *wh, int net_ok,
                   const char *key, const char *val) {
  double v;
  const char *e;
  int bad = shoal__strtod_decimal(val, &v, &e);
  if (!bad)
    while (*e == ' ' || *e == '\t') e++;
  if (bad || *e) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s = '%s': not a number", file, line, key, val);
  int is_int = v == floor(v);
  struct { const char *k; int integer; double lo, hi; } lim[] = {
      {"machines", 1, 1, 1e6},        {"racks", 1, 1, 1e6},          {"gpus_per_machine", 1, 0, SHOAL_MAX_GPUS_PER_MACHINE},
      {"cpus_per_machine", 0, 1e-3, 1e6}, {"mem_gb_per_machine", 0, 1e-3, 1e9}, {"nic_gbps", 0, 1e-6, 1e9},
      {"sockets_per_machine", 1, 0, 8},
      {"intra_gbps", 0, 1e-6, 1e9},    {"alpha_intra_us", 0, 0, 1e9}, {"alpha_inter_us", 0, 0, 1e9},
      {"oversub", 0, 1, 1e6}};
  int found = -1;
  for (int i = 0; i < (int)(sizeof lim / sizeof lim[0]); i++)
    if (!strcmp(key, lim[i].k)) found = i;
  if (found < 0)
    return shoal__seterr(SHOAL_ERR_PARSE,
                         "%s:%d: unknown key '%s' (machines, racks, gpus_per_machine, cpus_per_machine, mem_gb_per_machine, "
                         "nic_gbps, sockets_per_machine, intra_gbps, alpha_intra_us, alpha_inter_us, oversub)",
                         file, line, key);
  if (found >= 7 && !net_ok)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: '%s' belongs to [cluster], not to a [group]", file, line, key);
  if (wh->key_line[found])
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s given again (first on line %d)", file, line, key,
                         wh->key_line[found]);
  wh->key_line[found] = line;
  if ((lim[found].integer && !is_int) || v < lim[found].lo || v > lim[found].hi)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s = %s: expected %s in [%g, %g]", file, line, key, val,
                         lim[found].integer ? "an integer" : "a number", lim[found].lo, lim[found].hi);
  switch (found) {
  case 0: g->machines = (int)v; wh->machines_line = line; break;
  case 1: g->racks = (int)v; wh->racks_line = line; break;
  case 2: g->per_machine.gpus = (int)v; break;
  case 3: g->per_machine.cpus = v; break;
  case 4: g->per_machine.mem_gb = v; break;
  case 5: g->nic_gbps = v; break;
  case 6: g->sockets = (int)v; break;
  case 7: sp->net.intra_gbps = v; break;
  case 8: sp->net.alpha_intra_s = v * 1e-6; break;
  case 9: sp->net.alpha_inter_s = v * 1e-6; break;
  case 10: sp->net.oversub = v; break;
  }
  return 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

/* racks of a section: as written (at most its machines), else the inherited
 * value capped at its machines. */
static int fix_racks(const char *file, shoal_cluster_group_t *g, const where_t *wh, const char *section) {
  if (!wh->racks_line) {
    if (g->racks > g->machines) g->racks = g->machines;
    return 0;
  }
  if (g->racks > g->machines)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s:%d: racks = %d: more than the %d machines of %s", file, wh->racks_line,
                         g->racks, g->machines, section);
  return 0;
}

static int finish(const char *file, shoal_cluster_spec_t *tmp, shoal_cluster_group_t *base, const where_t *bw,
                  const where_t *gw, int ngroups, shoal_cluster_spec_t *spec) {
  int rc, with_base = ngroups == 0 || bw->machines_line > 0, any = ngroups > 0;
  for (int k = 0; k < 10; k++) any |= bw->key_line[k] != 0;
  if (!any) /* an empty file (or one of comments) is not the default cluster by accident */
    return shoal__seterr(SHOAL_ERR_PARSE, "%s: no settings (e.g. machines = 16); without --cluster the default "
                         "cluster is used", file);
  shoal_cluster_group_t groups[8];
  int n = 0;
  if (with_base) {
    if ((rc = fix_racks(file, base, bw, "[cluster]"))) return rc;
    groups[n++] = *base;
  }
  for (int i = 0; i < ngroups; i++) {
    char sec[32];
    snprintf(sec, sizeof sec, "group %d", i + 1);
    if ((rc = fix_racks(file, &tmp->group[i], &gw[i], sec))) return rc;
    if (n == 8)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s: %d machine groups ([cluster] machines and %d groups): at most 8", file,
                           ngroups + 1, ngroups);
    groups[n++] = tmp->group[i];
  }
  memcpy(tmp->group, groups, sizeof groups[0] * (size_t)n);
  tmp->ngroups = n;
  rc = shoal__cluster_spec_validate(tmp);
  if (rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", shoal_last_error());
    return shoal__seterr(rc, "%s: %s", file, msg);
  }
  *spec = *tmp;
  return 0;
}

static int load_ini(const char *file, char *text, shoal_cluster_spec_t *spec) {
  shoal_cluster_spec_t tmp = *spec;
  shoal_cluster_group_t base = spec->group[0];
  shoal_cluster_group_t *cur = &base;
  where_t bw = {0}, gw[8], *cw = &bw;
  int ngroups = 0, in_cluster = 1, line = 0;
  char *save = NULL;
  for (char *ln = text; ln; ln = save) {
    save = strchr(ln, '\n');
    if (save) *save++ = 0;
    line++;
    char *hash = strpbrk(ln, "#;");
    if (hash) *hash = 0;
    char *s = trim(ln);
    if (!*s) continue;
    if (*s == '[') {
      char *end = strchr(s, ']');
      if (!end || trim(end + 1)[0]) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: malformed section header", file, line);
      *end = 0;
      char *name = trim(s + 1);
      if (!strcmp(name, "cluster")) {
        in_cluster = 1;
        cur = &base;
        cw = &bw;
      } else if (!strcmp(name, "group")) {
        if (ngroups == 8) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: more than 8 [group] sections", file, line);
        tmp.group[ngroups] = base; /* a group inherits the [cluster] machine keys given so far */
        gw[ngroups] = (where_t){0};
        cw = &gw[ngroups];
        cur = &tmp.group[ngroups++];
        in_cluster = 0;
      } else
        return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: unknown section [%s] (expected [cluster] or [group])", file, line, name);
      continue;
    }
    char *eq = strchr(s, '=');
    if (!eq) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: expected key = value", file, line);
    *eq = 0;
    char *key = trim(s), *val = trim(eq + 1);
    if (!*val) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s: missing value", file, line, key);
    int rc = set_key(file, line, &tmp, cur, cw, in_cluster, key, val);
    if (rc) return rc;
  }
  return finish(file, &tmp, &base, &bw, gw, ngroups, spec);
}

static int json_keys(const char *file, const shoal_json_t *o, shoal_cluster_spec_t *tmp, shoal_cluster_group_t *g, where_t *wh,
                     int net_ok) {
  int groups_line = 0;
  for (int i = 0; i < o->n; i++) {
    const shoal_json_t *k = o->kids[i];
    if (net_ok && !strcmp(k->key, "groups")) {
      if (groups_line)
        return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: groups given again (first on line %d)", file, k->line, groups_line);
      groups_line = k->line;
      continue;
    }
    if (k->type != SHOAL_JSON_NUM)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s: expected a number", file, k->line, k->key);
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", k->num);
    int rc = set_key(file, k->line, tmp, g, wh, net_ok, k->key, buf);
    if (rc) return rc;
  }
  return 0;
}

static int load_json(const char *file, const char *text, size_t len, shoal_cluster_spec_t *spec) {
  shoal_json_t *j = NULL;
  int rc = shoal__json_parse(file, text, len, &j);
  if (rc) return rc;
  shoal_cluster_spec_t tmp = *spec;
  shoal_cluster_group_t base = spec->group[0];
  int ngroups = 0;
  where_t bw = {0}, gw[8];
  if (j->type != SHOAL_JSON_OBJ) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: expected an object", file, j->line);
    goto done;
  }
  if ((rc = json_keys(file, j, &tmp, &base, &bw, 1))) goto done;
  const shoal_json_t *gs = shoal__json_get(j, "groups");
  if (gs) {
    if (gs->type != SHOAL_JSON_ARR || gs->n > 8) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: groups: expected an array of at most 8 objects", file, gs->line);
      goto done;
    }
    for (int i = 0; i < gs->n; i++) {
      if (gs->kids[i]->type != SHOAL_JSON_OBJ) {
        rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: groups[%d]: expected an object", file, gs->kids[i]->line, i);
        goto done;
      }
      tmp.group[i] = base;
      gw[i] = (where_t){0};
      if ((rc = json_keys(file, gs->kids[i], &tmp, &tmp.group[i], &gw[i], 0))) goto done;
    }
    ngroups = gs->n;
  }
  rc = finish(file, &tmp, &base, &bw, gw, ngroups, spec);
done:
  shoal__json_free(j);
  return rc;
}

int shoal__cluster_spec_parse(const char *name, const char *data, size_t len, shoal_cluster_spec_t *spec) {
  if (len > (1 << 20)) return shoal__seterr(SHOAL_ERR_PARSE, "%s: larger than 1 MiB, not a cluster file", name);
  if (memchr(data, 0, len)) return shoal__seterr(SHOAL_ERR_PARSE, "%s: contains NUL bytes, not a text file", name);
  char *text = malloc(len + 1);
  if (!text) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", name);
  memcpy(text, data, len);
  text[len] = 0;
  size_t i = 0;
  memset(text, ' ', shoal__utf8_bom(text, len));
  while (i < len && isspace((unsigned char)text[i])) i++;
  int rc = (i < len && text[i] == '{') ? load_json(name, text, len, spec) : load_ini(name, text, spec);
  free(text);
  return rc;
}

int shoal__cluster_spec_load(const char *path, shoal_cluster_spec_t *spec) {
  FILE *f;
  int frc = shoal__fopen_input(path, "cluster file", &f);
  if (frc) return SHOAL_ERR_IO; /* also a missing file, as before (the message says which) */
  char *text = malloc((1 << 20) + 1);
  if (!text) {
    fclose(f);
    return SHOAL_ERR_NOMEM;
  }
  size_t n = fread(text, 1, (1 << 20) + 1, f);
  fclose(f);
  int rc = shoal__cluster_spec_parse(path, text, n, spec);
  free(text);
  return rc;
}
