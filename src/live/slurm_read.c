/* Parsers of Slurm's answers (slurm_read.h). */
#include "live/slurm_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/json.h"

static const char *jstr(const shoal_json_t *o, const char *k) {
  const shoal_json_t *v = shoal__json_get(o, k);
  return v && v->type == SHOAL_JSON_STR ? v->str : "";
}

static double jnum(const shoal_json_t *o, const char *k) {
  const shoal_json_t *v = shoal__json_get(o, k);
  return v && (v->type == SHOAL_JSON_NUM || v->type == SHOAL_JSON_BOOL) ? v->num : 0;
}

/* the parsed answer, or an error naming Slurm's own (slurmctld down: exit 0, "errors", empty lists) */
static int parse_answer(const char *what, const char *json, shoal_json_t **root) {
  int rc = shoal__json_parse(what, json, strlen(json), root);
  if (rc) return rc;
  const shoal_json_t *e = shoal__json_get(*root, "errors");
  if (!e || e->type != SHOAL_JSON_ARR || e->n == 0) return 0;
  const char *d = jstr(e->kids[0], "description");
  if (!*d) d = jstr(e->kids[0], "error");
  rc = shoal__seterr(SHOAL_ERR_CONNECT, "%s: Slurm reports: %s", what, *d ? d : "an error without description");
  shoal__json_free(*root);
  *root = NULL;
  return rc;
}

int shoal__slurm_gres_gpus(const char *gres) {
  int total = 0;
  for (const char *p = gres; p && (p = strstr(p, "gpu")) != NULL; p += 3) {
    if (p > gres && p[-1] != ',' && p[-1] != ':') continue; /* (a word that merely contains "gpu") */
    /* gpu[:type]:N[(...)] -- the count is the last ':' field before '(' or ',' */
    const char *end = p + strcspn(p, ",(");
    const char *colon = NULL;
    for (const char *c = p; c < end; c++)
      if (*c == ':') colon = c;
    if (colon) total += atoi(colon + 1);
  }
  return total;
}

/* "idle+DRAIN+NOT_RESPONDING", and whether new work may go there */
static void node_state(const shoal_json_t *nd, shoal_live_node_t *n) {
  const char *st = jstr(nd, "state");
  size_t k = (size_t)snprintf(n->state, sizeof n->state, "%s", st);
  int bad = strstr(st, "down") || strstr(st, "fail") || strstr(st, "future") || strstr(st, "unknown");
  const shoal_json_t *fl = shoal__json_get(nd, "state_flags");
  for (int i = 0; fl && fl->type == SHOAL_JSON_ARR && i < fl->n; i++) {
    if (fl->kids[i]->type != SHOAL_JSON_STR) continue;
    const char *f = fl->kids[i]->str;
    if (k < sizeof n->state) k += (size_t)snprintf(n->state + k, sizeof n->state - k, "+%s", f);
    if (strstr(f, "DRAIN")) bad = 1, n->drain = 1;
    if (strstr(f, "NOT_RESPONDING") || strstr(f, "FAIL") || strstr(f, "MAINT") || strstr(f, "REBOOT") ||
        strstr(f, "POWER"))
      bad = 1;
  }
  n->usable = !bad;
}

int shoal__slurm_parse_nodes(const char *json, shoal_live_nodes_t *out) {
  shoal_json_t *root = NULL;
  int rc = parse_answer("sinfo --json", json, &root);
  if (rc) return rc;
  const shoal_json_t *nodes = shoal__json_get(root, "nodes");
  int n = nodes && nodes->type == SHOAL_JSON_ARR ? nodes->n : 0;
  shoal_live_node_t *v = calloc((size_t)(n ? n : 1), sizeof *v);
  if (!v) {
    shoal__json_free(root);
    return shoal__seterr(SHOAL_ERR_NOMEM, "sinfo: out of memory");
  }
  for (int i = 0; i < n; i++) {
    const shoal_json_t *nd = nodes->kids[i];
    shoal_live_node_t *x = &v[i];
    snprintf(x->name, sizeof x->name, "%s", jstr(nd, "name"));
    node_state(nd, x);
    x->gpus = shoal__slurm_gres_gpus(jstr(nd, "gres"));
    x->cpus = (int)jnum(nd, "cpus");
    x->rack = -1;
    const shoal_json_t *parts = shoal__json_get(nd, "partitions");
    size_t k = 0;
    for (int p = 0; parts && parts->type == SHOAL_JSON_ARR && p < parts->n && k < sizeof x->partitions; p++)
      if (parts->kids[p]->type == SHOAL_JSON_STR)
        k += (size_t)snprintf(x->partitions + k, sizeof x->partitions - k, "%s%s", k ? "," : "", parts->kids[p]->str);
  }
  shoal__json_free(root);
  out->n = n;
  out->node = v;
  return 0;
}

static int run_of(const char *st) {
  if (!strcmp(st, "PENDING") || !strncmp(st, "REQUEUE", 7)) return SHOAL_LIVE_PENDING;
  if (!strcmp(st, "COMPLETING")) return SHOAL_LIVE_COMPLETING;
  static const char *const ended[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                                      "BOOT_FAIL", "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", NULL};
  for (int i = 0; ended[i]; i++)
    if (!strcmp(st, ended[i])) return SHOAL_LIVE_ENDED;
  return SHOAL_LIVE_RUNNING; /* RUNNING, SUSPENDED, CONFIGURING, RESIZING, SIGNALING, STAGE_OUT: it holds nodes */
}

/* allocated cores of one node of job_resources.allocated_nodes */
static int node_cpus(const shoal_json_t *an) {
  int n = 0;
  const shoal_json_t *sockets = shoal__json_get(an, "sockets");
  for (int s = 0; sockets && s < sockets->n; s++) {
    const shoal_json_t *cores = shoal__json_get(sockets->kids[s], "cores");
    for (int c = 0; cores && c < cores->n; c++)
      n += cores->kids[c]->type == SHOAL_JSON_STR && strstr(cores->kids[c]->str, "allocated") != NULL;
  }
  return n > 0 ? n : 1;
}

/* what a job holds per node: job_resources.allocated_nodes, GPUs from gres_detail (per node, same order) */
static int job_use(const shoal_json_t *o, shoal_live_job_t *x) {
  const shoal_json_t *res = shoal__json_get(o, "job_resources");
  const shoal_json_t *an = res ? shoal__json_get(res, "allocated_nodes") : NULL;
  if (!an || an->type != SHOAL_JSON_ARR || an->n == 0 || x->run == SHOAL_LIVE_PENDING || x->run == SHOAL_LIVE_ENDED)
    return 0;
  if (!(x->use = calloc((size_t)an->n, sizeof *x->use))) return shoal__seterr(SHOAL_ERR_NOMEM, "squeue: out of memory");
  const shoal_json_t *gd = shoal__json_get(o, "gres_detail");
  int per_node = shoal__slurm_gres_gpus(jstr(o, "tres_per_node"));
  for (int k = 0; k < an->n; k++) {
    shoal_live_use_t *u = &x->use[x->nuse++];
    snprintf(u->node, sizeof u->node, "%s", jstr(an->kids[k], "nodename"));
    u->cpus = node_cpus(an->kids[k]);
    if (gd && gd->type == SHOAL_JSON_ARR && k < gd->n && gd->kids[k]->type == SHOAL_JSON_STR)
      u->gpus = shoal__slurm_gres_gpus(gd->kids[k]->str);
    else u->gpus = per_node;
  }
  return 0;
}

/* held by scontrol hold/requeuehold (Slurm keeps priority 0 and the reason on a held job's ended record too) */
static int is_held(const shoal_json_t *o) {
  const char *r = jstr(o, "state_reason");
  return jnum(o, "priority") == 0 || strstr(r, "Held") != NULL || strstr(r, "held") != NULL;
}

static int read_job(const shoal_json_t *o, shoal_live_job_t *x) {
  x->id = (long)jnum(o, "job_id");
  snprintf(x->state, sizeof x->state, "%s", jstr(o, "job_state"));
  x->run = run_of(x->state);
  snprintf(x->reason, sizeof x->reason, "%s", jstr(o, "state_reason"));
  x->held = x->run == SHOAL_LIVE_PENDING || x->run == SHOAL_LIVE_ENDED ? is_held(o) : 0;
  x->exit_status = (int)jnum(o, "exit_code");
  x->restarts = (int)jnum(o, "restart_cnt");
  x->submit_time = jnum(o, "submit_time");
  x->start_time = jnum(o, "start_time");
  x->end_time = jnum(o, "end_time");
  snprintf(x->name, sizeof x->name, "%s", jstr(o, "name"));
  snprintf(x->user, sizeof x->user, "%s", jstr(o, "user_name"));
  snprintf(x->account, sizeof x->account, "%s", jstr(o, "account"));
  snprintf(x->partition, sizeof x->partition, "%s", jstr(o, "partition"));
  snprintf(x->comment, sizeof x->comment, "%s", jstr(o, "comment"));
  snprintf(x->claim, sizeof x->claim, "%s", jstr(o, "admin_comment"));
  const char *out = jstr(o, "standard_output");
  char dflt[300];
  if (!*out && *jstr(o, "current_working_directory")) { /* sbatch's default: slurm-%j.out where it was submitted */
    snprintf(dflt, sizeof dflt, "%s/slurm-%%j.out", jstr(o, "current_working_directory"));
    out = dflt;
  }
  shoal__slurm_output_path(out, x->id, x->name, x->user, x->output, sizeof x->output);
  return job_use(o, x);
}

int shoal__slurm_parse_jobs(const char *json, shoal_live_jobs_t *out) {
  shoal_json_t *root = NULL;
  int rc = parse_answer("squeue --json", json, &root);
  if (rc) return rc;
  const shoal_json_t *jobs = shoal__json_get(root, "jobs");
  int n = jobs && jobs->type == SHOAL_JSON_ARR ? jobs->n : 0;
  shoal_live_jobs_t v = {0, calloc((size_t)(n ? n : 1), sizeof(shoal_live_job_t))};
  if (!v.job) rc = shoal__seterr(SHOAL_ERR_NOMEM, "squeue: out of memory");
  for (int i = 0; i < n && !rc; i++) {
    rc = read_job(jobs->kids[i], &v.job[i]);
    v.n++;
  }
  shoal__json_free(root);
  if (rc) {
    shoal__live_jobs_free(&v);
    return rc;
  }
  *out = v;
  return 0;
}

int shoal__slurm_parse_shares(const char *text, shoal_live_shares_t *out) {
  int cap = 16, n = 0;
  shoal_live_share_t *v = calloc((size_t)cap, sizeof *v);
  if (!v) return shoal__seterr(SHOAL_ERR_NOMEM, "sshare: out of memory");
  for (const char *p = text; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t l = nl ? (size_t)(nl - p) : strlen(p);
    char line[512], *f[6];
    snprintf(line, sizeof line, "%.*s", (int)(l < sizeof line ? l : sizeof line - 1), p);
    p = nl ? nl + 1 : NULL;
    int k = 0;
    for (char *s = line, *bar; k < 6; s = bar + 1) {
      f[k++] = s;
      if (!(bar = strchr(s, '|'))) break;
      *bar = 0;
    }
    if (k < 6 || !*f[0]) continue;
    if (n == cap) {
      shoal_live_share_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *nv);
      if (!nv) return free(v), shoal__seterr(SHOAL_ERR_NOMEM, "sshare: out of memory");
      v = nv;
    }
    shoal_live_share_t *s = &v[n++];
    memset(s, 0, sizeof *s);
    snprintf(s->account, sizeof s->account, "%s", f[0] + strspn(f[0], " "));
    snprintf(s->user, sizeof s->user, "%s", f[1]);
    s->shares = atof(f[2]), s->norm_shares = atof(f[3]), s->usage = atof(f[4]), s->fairshare = atof(f[5]);
  }
  out->n = n;
  out->share = v;
  return 0;
}

int shoal__slurm_parse_topology(const char *text, void (*fn)(void *arg, int rack, const char *nodes), void *arg) {
  int rack = 0;
  for (const char *p = text; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t l = nl ? (size_t)(nl - p) : strlen(p);
    char line[4096];
    snprintf(line, sizeof line, "%.*s", (int)(l < sizeof line ? l : sizeof line - 1), p);
    p = nl ? nl + 1 : NULL;
    char *lv = strstr(line, "Level="), *nodes = strstr(line, "Nodes=");
    if (!lv || !nodes || atoi(lv + 6) != 0) continue;
    nodes += 6;
    nodes[strcspn(nodes, " \t")] = 0;
    if (*nodes) fn(arg, rack++, nodes);
  }
  return 0;
}

void shoal__slurm_output_path(const char *pattern, long id, const char *name, const char *user, char *buf, size_t cap) {
  size_t k = 0;
  for (const char *c = pattern; *c && k + 1 < cap; c++) {
    if (*c != '%' || !c[1]) {
      buf[k++] = *c;
      continue;
    }
    c++;
    int w = 0;
    if (*c == 'j' || *c == 'A') w = snprintf(buf + k, cap - k, "%ld", id);
    else if (*c == 'x') w = snprintf(buf + k, cap - k, "%s", name);
    else if (*c == 'u') w = snprintf(buf + k, cap - k, "%s", user);
    else if (*c == '%') w = snprintf(buf + k, cap - k, "%%");
    else w = snprintf(buf + k, cap - k, "%%%c", *c);
    k = w > 0 && k + (size_t)w < cap ? k + (size_t)w : cap - 1;
  }
  buf[k < cap ? k : cap - 1] = 0;
}
