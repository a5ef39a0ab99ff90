/* The flow-level simulator (fsim.h): events, fluid rates, and the agents' and controller's own code at
 * every slot boundary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "core/flowseg.h"
#include "core/rng.h"
#include "flow/agent.h"
#include "flow/ctl.h"
#include "flow/fsim.h"

enum { J_QUEUED, J_COMPUTE, J_COMM, J_DONE };

typedef struct sjob {
  int phase;
  double until;     /* end of the compute phase */
  double V, sent;   /* bytes per hop this iteration, and sent so far */
  double rate;      /* bytes/s of every hop of the ring now */
  double comm_s;    /* when its communication phase began */
  double it_start;
  int iter;
  int nl, link[4 * SHOAL__FSIM_MAX_JOB_HOSTS], cnt[4 * SHOAL__FSIM_MAX_JOB_HOSTS]; /* links of its hops, hops per link */
  shoal__flowseg_flow_t *slot[SHOAL__FSIM_MAX_JOB_HOSTS]; /* hop r's slot in its source host's segment */
  double cap[SHOAL__FSIM_MAX_JOB_HOSTS];                  /* hop r's pacing rate, bytes/s (0: none) */
} sjob_t;

typedef struct sim {
  const shoal__fsim_cfg_t *cfg;
  shoal__fsim_job_t *jobs;
  sjob_t *s;
  int n;
  double t;
  int *free_gpus;
  shoal__flowseg_t *seg;          /* one per host */
  shoal__fagent_flow_t (*mem)[SHOAL__FLOWSEG_FLOWS];
  shoal__fctl_t ctl;
  int64_t slot;
  shoal_rng_t rng;
  double *cap;                    /* link capacity x eff, bytes/s */
  /* a slot's reports, one per host with flows */
  shoal__fp_flow_t (*rflows)[SHOAL__FP_MAX_FLOWS];
  int (*ridx)[SHOAL__FP_MAX_FLOWS];
  uint64_t (*rrates)[SHOAL__FP_MAX_FLOWS];
  shoal__fp_report_t *rep;
  int *rhost;
  uint64_t **rrate;
} sim_t;

void shoal__fsim_cfg_default(shoal__fsim_cfg_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->policy = SHOAL__FSIM_POLICY_TCP;
  shoal__fplan_cfg_default(&cfg->plan);
  cfg->eff = 0.95;
  cfg->tcp_ramp_s = 0.3;
  cfg->tcp_ramp_share = 0.1;
  cfg->gpus_per_host = 2;
  cfg->seed = 1;
}

static double hop_bytes(const shoal__fsim_job_t *j) {
  return j->nhosts > 1 ? 2.0 * (j->nhosts - 1) / j->nhosts * j->grad_bytes : 0;
}

/* ---- placement ---- */

/* Hosts for a job of j->gpus GPUs: whole free hosts, taken one per rack in turn from a random rack order,
 * so that rings cross the racks' uplinks as jobs of a shared cluster do. 1 if placed. */
static int place(sim_t *m, shoal__fsim_job_t *j) {
  const shoal__ftopo_t *t = &m->cfg->topo;
  int per = m->cfg->gpus_per_host, need = (j->gpus + per - 1) / per;
  if (need > SHOAL__FSIM_MAX_JOB_HOSTS || need > t->nhosts) return 0;
  int order[SHOAL__FTOPO_MAX_RACKS], taken = 0, got[SHOAL__FSIM_MAX_JOB_HOSTS];
  for (int r = 0; r < t->nracks; r++) order[r] = r;
  for (int r = t->nracks - 1; r > 0; r--) {
    int k = (int)shoal_rng_below(&m->rng, (uint64_t)r + 1), x = order[r];
    order[r] = order[k], order[k] = x;
  }
  char used[SHOAL__FTOPO_MAX_HOSTS] = {0};
  for (int progress = 1; taken < need && progress;) {
    progress = 0;
    for (int ri = 0; ri < t->nracks && taken < need; ri++)
      for (int h = 0; h < t->nhosts; h++)
        if (t->host[h].rack == order[ri] && !used[h] && m->free_gpus[h] == per) {
          used[h] = 1, got[taken++] = h, progress = 1;
          break;
        }
  }
  if (taken < need) return 0;
  j->nhosts = need;
  memcpy(j->hosts, got, (size_t)need * sizeof *got);
  return 1;
}

/* ---- jobs ---- */

static void mark(sim_t *m, int ji) {
  sjob_t *s = &m->s[ji];
  for (int r = 0; r < m->jobs[ji].nhosts; r++)
    if (s->slot[r]) shoal__flowseg_mark(s->slot[r], (uint64_t)s->iter);
}

static void begin_compute(sim_t *m, int ji) {
  sjob_t *s = &m->s[ji];
  double c = m->jobs[ji].compute_s, sg = m->cfg->jitter;
  if (sg > 0) c *= exp(sg * shoal_rng_normal(&m->rng) - sg * sg / 2);
  s->phase = J_COMPUTE;
  s->until = m->t + c;
  s->it_start = m->t;
  mark(m, ji);
  if (m->cfg->trace) fprintf(m->cfg->trace, "%.4f job %d iteration %d compute %.4f\n", m->t, ji, s->iter, c);
}

/* The job's hops: links, and a slot in the segment of each hop's source host. */
static int start_job(sim_t *m, int ji) {
  shoal__fsim_job_t *j = &m->jobs[ji];
  sjob_t *s = &m->s[ji];
  const shoal__ftopo_t *t = &m->cfg->topo;
  int h = j->nhosts;
  for (int r = 0; r < h; r++) m->free_gpus[j->hosts[r]] = 0;
  s->V = hop_bytes(j);
  for (int r = 0; h > 1 && r < h; r++) {
    int a = j->hosts[r], b = j->hosts[(r + 1) % h], path[SHOAL__FTOPO_MAX_PATH];
    int np = shoal__ftopo_path(t, a, b, path);
    for (int k = 0; k < np; k++) {
      int at = 0;
      while (at < s->nl && s->link[at] != path[k]) at++;
      if (at == s->nl) s->link[s->nl++] = path[k];
      s->cnt[at]++;
    }
    shoal__flowseg_flow_t *f = shoal__flowseg_claim_local(&m->seg[a]);
    if (!f) return shoal__seterr(SHOAL_ERR_NOMEM, "flow simulator: more than %d flows from host %d", SHOAL__FLOWSEG_FLOWS, a);
    f->job = (uint64_t)ji + 1;
    f->src_rank = (uint32_t)r;
    f->dst_rank = (uint32_t)((r + 1) % h);
    f->nranks = (uint32_t)h;
    f->src_ip = t->host[a].ip;
    f->dst_ip = t->host[b].ip;
    f->src_port = (uint16_t)(10000 + ji), f->dst_port = (uint16_t)r;
    atomic_store_explicit(&f->state, SHOAL__FLOWSEG_LIVE, memory_order_release);
    s->slot[r] = f;
  }
  j->start_s = m->t;
  begin_compute(m, ji);
  return 0;
}

static void end_job(sim_t *m, int ji) {
  shoal__fsim_job_t *j = &m->jobs[ji];
  sjob_t *s = &m->s[ji];
  s->phase = J_DONE;
  j->end_s = m->t;
  for (int r = 0; r < j->nhosts; r++) {
    m->free_gpus[j->hosts[r]] = m->cfg->gpus_per_host;
    if (s->slot[r]) atomic_store_explicit(&s->slot[r]->state, SHOAL__FLOWSEG_FREE, memory_order_release);
    s->slot[r] = NULL;
  }
  if (m->cfg->trace) fprintf(m->cfg->trace, "%.4f job %d done (%d iterations)\n", m->t, ji, j->iters_done);
}

static void end_comm(sim_t *m, int ji) {
  shoal__fsim_job_t *j = &m->jobs[ji];
  sjob_t *s = &m->s[ji];
  j->iter_sum_s += m->t - s->it_start;
  j->iters_done++;
  s->iter++;
  if (j->iters_done >= j->iters) end_job(m, ji);
  else begin_compute(m, ji);
}

/* Waiting jobs in arrival order; the head waits for room (first come, first served). */
static int admit(sim_t *m) {
  for (int ji = 0; ji < m->n; ji++) {
    shoal__fsim_job_t *j = &m->jobs[ji];
    if (m->s[ji].phase != J_QUEUED || j->arrival_s > m->t + 1e-12) continue;
    if (j->nhosts == 0 && !place(m, j)) return 0;
    for (int r = 0; r < j->nhosts; r++)
      if (m->free_gpus[j->hosts[r]] < m->cfg->gpus_per_host) return 0; /* given hosts still busy */
    int rc = start_job(m, ji);
    if (rc) return rc;
  }
  return 0;
}

/* ---- rates ---- */

/* A job's weight in TCP's sharing: a phase that began less than tcp_ramp_s ago holds tcp_ramp_share of
 * the share of a flow that was sending before it (TCP's windows converge to fairness over many round
 * trips, and the queue the incumbents built is the newcomer's round trip), then an equal share. */
static double weight(const sim_t *m, const sjob_t *s) {
  return m->cfg->tcp_ramp_s > 0 && m->t < s->comm_s + m->cfg->tcp_ramp_s - 1e-12 ? m->cfg->tcp_ramp_share : 1;
}

/* Per-flow weighted max-min fair rates with every ring moving as one: progressive filling raises every
 * communicating job's rate together, each in proportion to its weight; a job stops rising at its lowest
 * pacing cap or when a link it crosses fills (a job with k hops on a link takes k shares of it, as k TCP
 * flows would). */
static void allocate(sim_t *m) {
  int nl = shoal__ftopo_nlinks(&m->cfg->topo);
  double *used = calloc((size_t)nl, sizeof *used), *k = calloc((size_t)nl, sizeof *k);
  char *frozen = calloc((size_t)m->n, 1);
  if (!used || !k || !frozen) goto out;
  int left = 0;
  for (int ji = 0; ji < m->n; ji++) {
    sjob_t *s = &m->s[ji];
    s->rate = 0;
    if (s->phase == J_COMM && s->nl > 0) left++;
    else frozen[ji] = 1;
  }
  while (left > 0) {
    memset(k, 0, (size_t)nl * sizeof *k);
    for (int ji = 0; ji < m->n; ji++)
      for (int a = 0; !frozen[ji] && a < m->s[ji].nl; a++) k[m->s[ji].link[a]] += m->s[ji].cnt[a] * weight(m, &m->s[ji]);
    double level = INFINITY;
    for (int l = 0; l < nl; l++)
      if (k[l] > 0 && (m->cap[l] - used[l]) / k[l] < level) level = (m->cap[l] - used[l]) / k[l];
    for (int ji = 0; ji < m->n; ji++) {
      if (frozen[ji]) continue;
      double w = weight(m, &m->s[ji]);
      for (int r = 0; r < m->jobs[ji].nhosts; r++)
        if (m->s[ji].cap[r] > 0 && m->s[ji].cap[r] / w < level) level = m->s[ji].cap[r] / w;
    }
    if (level < 0) level = 0;
    for (int ji = 0; ji < m->n; ji++) {
      sjob_t *s = &m->s[ji];
      if (frozen[ji]) continue;
      double w = weight(m, s);
      int stop = 0;
      for (int r = 0; r < m->jobs[ji].nhosts && !stop; r++) stop = s->cap[r] > 0 && s->cap[r] <= w * level * (1 + 1e-9);
      for (int a = 0; a < s->nl && !stop; a++) {
        int l = s->link[a];
        stop = m->cap[l] - used[l] - k[l] * level <= 1e-9 * m->cap[l];
      }
      if (!stop) continue;
      s->rate = w * level;
      frozen[ji] = 1;
      left--;
      for (int a = 0; a < s->nl; a++) used[s->link[a]] += s->cnt[a] * w * level;
    }
  }
out:
  free(used);
  free(k);
  free(frozen);
}

/* A slot boundary: the simulated agents report with the agent's code, the controller answers all of the
 * slot's reports together with its. */
static int slot_boundary(sim_t *m) {
  const shoal__ftopo_t *t = &m->cfg->topo;
  int n = 0;
  for (int h = 0; h < t->nhosts; h++) {
    shoal__fp_report_t *r = &m->rep[n];
    *r = (shoal__fp_report_t){.seq = (uint64_t)m->slot, .flows = m->rflows[h]};
    shoal__fagent_collect(&m->seg[h], m->mem[h], r, m->ridx[h]);
    if (r->n == 0) continue;
    m->rhost[n] = h;
    m->rrate[n++] = m->rrates[h];
  }
  int rc = n ? shoal__fctl_handle(&m->ctl, m->slot, n, m->rhost, m->rep, m->rrate) : 0;
  if (rc) return rc;
  for (int k = 0; k < n; k++)
    for (uint32_t i = 0; i < m->rep[k].n; i++)
      atomic_store_explicit(&m->seg[m->rhost[k]].flow[m->ridx[m->rhost[k]][i]].rate, m->rrate[k][i], memory_order_relaxed);
  for (int ji = 0; ji < m->n; ji++)
    for (int r = 0; r < m->jobs[ji].nhosts; r++)
      if (m->s[ji].slot[r]) m->s[ji].cap[r] = (double)atomic_load_explicit(&m->s[ji].slot[r]->rate, memory_order_relaxed);
  return 0;
}

/* The fluid model has no socket buffer: bytes handed to the socket are bytes delivered. */
static void advance(sim_t *m, double to) {
  double dt = to - m->t;
  for (int ji = 0; ji < m->n && dt > 0; ji++) {
    sjob_t *s = &m->s[ji];
    if (s->phase != J_COMM) continue;
    double x = s->rate * dt;
    if (s->sent + x > s->V) x = s->V - s->sent;
    s->sent += x;
    for (int r = 0; r < m->jobs[ji].nhosts; r++)
      if (s->slot[r]) atomic_fetch_add_explicit(&s->slot[r]->bytes, (uint64_t)llround(x), memory_order_relaxed);
  }
  m->t = to;
}

static double next_event(const sim_t *m, int policy_on) {
  double next = INFINITY;
  for (int ji = 0; ji < m->n; ji++) {
    const sjob_t *s = &m->s[ji];
    const shoal__fsim_job_t *j = &m->jobs[ji];
    if (s->phase == J_QUEUED && j->arrival_s > m->t + 1e-12 && j->arrival_s < next) next = j->arrival_s;
    if (s->phase == J_COMPUTE && s->until < next) next = s->until;
    if (s->phase == J_COMM && s->rate > 0 && m->t + (s->V - s->sent) / s->rate < next) next = m->t + (s->V - s->sent) / s->rate;
    double ramp_end = s->comm_s + m->cfg->tcp_ramp_s;
    if (s->phase == J_COMM && m->cfg->tcp_ramp_s > 0 && ramp_end > m->t + 1e-12 && ramp_end < next) next = ramp_end;
  }
  double T = m->cfg->plan.slot_s;
  if (policy_on && (double)(m->slot + 1) * T < next) next = (double)(m->slot + 1) * T;
  return next;
}

/* Events due at the current time; 1 if something changed. */
static int fire(sim_t *m) {
  int changed = 0;
  for (int ji = 0; ji < m->n; ji++) {
    sjob_t *s = &m->s[ji];
    if (s->phase == J_COMPUTE && s->until <= m->t + 1e-12) {
      s->phase = J_COMM;
      s->sent = 0;
      s->comm_s = m->t;
      changed = 1;
    }
    if (s->phase == J_COMM && isinf(s->rate)) s->sent = s->V; /* only unlimited links: no time */
    if (s->phase == J_COMM && s->sent >= s->V - 1e-6 * (s->V + 1)) {
      end_comm(m, ji);
      changed = 1;
    }
  }
  return changed;
}

static int setup(sim_t *m, const shoal__fsim_cfg_t *cfg, shoal__fsim_job_t *jobs, int n) {
  const shoal__ftopo_t *t = &cfg->topo;
  int nl = shoal__ftopo_nlinks(t);
  m->cfg = cfg;
  m->jobs = jobs;
  m->n = n;
  m->s = calloc((size_t)n, sizeof *m->s);
  m->free_gpus = calloc((size_t)t->nhosts, sizeof *m->free_gpus);
  m->seg = calloc((size_t)t->nhosts, sizeof *m->seg);
  m->mem = calloc((size_t)t->nhosts, sizeof *m->mem);
  m->cap = calloc((size_t)nl, sizeof *m->cap);
  size_t nh = (size_t)t->nhosts;
  m->rflows = calloc(nh, sizeof *m->rflows);
  m->ridx = calloc(nh, sizeof *m->ridx);
  m->rrates = calloc(nh, sizeof *m->rrates);
  m->rep = calloc(nh, sizeof *m->rep);
  m->rhost = calloc(nh, sizeof *m->rhost);
  m->rrate = calloc(nh, sizeof *m->rrate);
  if (!m->s || !m->free_gpus || !m->seg || !m->mem || !m->cap || !m->rflows || !m->ridx || !m->rrates || !m->rep ||
      !m->rhost || !m->rrate)
    return shoal__seterr(SHOAL_ERR_NOMEM, "flow simulator: out of memory");
  shoal_rng_seed(&m->rng, cfg->seed);
  for (int h = 0; h < t->nhosts; h++) {
    m->free_gpus[h] = cfg->gpus_per_host;
    shoal__flowseg_init_local(&m->seg[h], t->host[h].name);
  }
  for (int l = 0; l < nl; l++) m->cap[l] = shoal__ftopo_cap(t, l) > 0 ? shoal__ftopo_cap(t, l) / 8 * cfg->eff : INFINITY;
  for (int ji = 0; ji < n; ji++) {
    shoal__fsim_job_t *j = &jobs[ji];
    j->start_s = j->end_s = j->iter_sum_s = 0;
    j->iters_done = 0;
    if (j->nhosts == 0) j->gpus = j->gpus > 0 ? j->gpus : cfg->gpus_per_host;
    if (j->nhosts == 0 && (j->gpus + cfg->gpus_per_host - 1) / cfg->gpus_per_host > t->nhosts)
      return shoal__seterr(SHOAL_ERR_INVALID, "flow simulator: job %d asks for %d GPUs, the cluster has %d", ji, j->gpus,
                           t->nhosts * cfg->gpus_per_host);
    for (int r = 0; r < j->nhosts; r++)
      if (j->hosts[r] < 0 || j->hosts[r] >= t->nhosts)
        return shoal__seterr(SHOAL_ERR_INVALID, "flow simulator: job %d: host %d is not in the topology", ji, j->hosts[r]);
    if (j->iters < 1) return shoal__seterr(SHOAL_ERR_INVALID, "flow simulator: job %d has %d iterations", ji, j->iters);
  }
  if (cfg->policy != SHOAL__FSIM_POLICY_TCP) {
    shoal__fplan_cfg_t pc = cfg->plan;
    pc.policy = cfg->policy;
    return shoal__fctl_init(&m->ctl, t, &pc);
  }
  return 0;
}

int shoal__fsim_run(const shoal__fsim_cfg_t *cfg, shoal__fsim_job_t *jobs, int n) {
  sim_t m = {0};
  int rc = setup(&m, cfg, jobs, n), policy_on = cfg->policy != SHOAL__FSIM_POLICY_TCP;
  if (!rc) rc = admit(&m);
  if (!rc) allocate(&m);
  while (!rc) {
    double next = next_event(&m, policy_on);
    int running = 0;
    for (int ji = 0; ji < n; ji++) running += m.s[ji].phase != J_DONE;
    if (!running || (cfg->max_s > 0 && next > cfg->max_s)) break;
    if (!isfinite(next)) {
      rc = shoal__seterr(SHOAL_ERR_INTERNAL, "flow simulator: stuck at %.3f s with %d jobs left", m.t, running);
      break;
    }
    advance(&m, next);
    int changed = fire(&m);
    if ((rc = admit(&m))) break;
    if (policy_on && m.t >= (double)(m.slot + 1) * cfg->plan.slot_s - 1e-12) {
      m.slot = (int64_t)floor(m.t / cfg->plan.slot_s + 1e-9);
      if ((rc = slot_boundary(&m))) break;
      changed = 1;
    }
    (void)changed;
    allocate(&m);
  }
  if (policy_on && m.ctl.plan.link) shoal__fctl_free(&m.ctl);
  free(m.s);
  free(m.free_gpus);
  free(m.seg);
  free(m.mem);
  free(m.cap);
  free(m.rflows);
  free(m.ridx);
  free(m.rrates);
  free(m.rep);
  free(m.rhost);
  free(m.rrate);
  return rc;
}

/* ---- job files ---- */

static int parse_hosts(const shoal__ftopo_t *t, char *w, shoal__fsim_job_t *j, const char *path, int line) {
  if (!strncmp(w, "gpus=", 5)) {
    char *e;
    long g = strtol(w + 5, &e, 10);
    if (e == w + 5 || *e || g < 1 || g > SHOAL__FSIM_MAX_JOB_HOSTS * 8)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: '%s': expected gpus=N, N 1..%d", path, line, w, SHOAL__FSIM_MAX_JOB_HOSTS * 8);
    j->gpus = (int)g;
    return 0;
  }
  for (char *save = NULL, *h = strtok_r(w, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
    int k = -1;
    for (int i = 0; i < t->nhosts && k < 0; i++)
      if (!strcmp(t->host[i].name, h)) k = i;
    if (k < 0) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: host '%s' is not in the topology", path, line, h);
    for (int r = 0; r < j->nhosts; r++)
      if (j->hosts[r] == k) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: host '%s' twice in one job", path, line, h);
    if (j->nhosts == SHOAL__FSIM_MAX_JOB_HOSTS)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: more than %d hosts in one job", path, line, SHOAL__FSIM_MAX_JOB_HOSTS);
    j->hosts[j->nhosts++] = k;
  }
  return 0;
}

static int parse_job(const shoal__ftopo_t *t, char *text, shoal__fsim_job_t *j, const char *path, int line) {
  char *w[6];
  int nw = 0;
  for (char *save = NULL, *tok = strtok_r(text, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
    if (nw == 6) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: too many fields", path, line);
    w[nw++] = tok;
  }
  if (nw != 5)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: expected 'ARRIVAL_S HOSTS|gpus=N ITERS COMPUTE_MS GRAD_BYTES'", path, line);
  char *e[4];
  double arr = strtod(w[0], &e[0]), it = strtod(w[2], &e[1]), c = strtod(w[3], &e[2]), g = strtod(w[4], &e[3]);
  if (*e[0] || !(arr >= 0 && arr < 1e9) || *e[1] || !(it >= 1 && it <= 1e7) || it != floor(it) || *e[2] ||
      !(c >= 0 && c <= 1e7) || *e[3] || !(g >= 0 && g <= 1e13))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: a value out of range (arrival >= 0 s, iterations 1..1e7, compute 0..1e7 ms, "
                         "gradient bytes 0..1e13)", path, line);
  memset(j, 0, sizeof *j);
  j->arrival_s = arr;
  j->iters = (int)it;
  j->compute_s = c / 1e3;
  j->grad_bytes = g;
  return parse_hosts(t, w[1], j, path, line);
}

int shoal__fsim_read_jobs(const char *path, const shoal__ftopo_t *topo, shoal__fsim_job_t **out, int *n) {
  FILE *f;
  int rc = shoal__fopen_input(path, "job file", &f);
  if (rc) return rc;
  shoal__fsim_job_t *jobs = NULL;
  int nj = 0, cap = 0, line = 0;
  char buf[4096];
  while (!rc && fgets(buf, sizeof buf, f)) {
    line++;
    char *hash = strchr(buf, '#');
    if (hash) *hash = 0;
    if (strspn(buf, " \t\r\n") == strlen(buf)) continue;
    if (nj == cap) {
      cap = cap ? 2 * cap : 16;
      shoal__fsim_job_t *nj2 = realloc(jobs, (size_t)cap * sizeof *jobs);
      if (!nj2) {
        rc = shoal__seterr(SHOAL_ERR_NOMEM, "job file %s: out of memory", path);
        break;
      }
      jobs = nj2;
    }
    rc = parse_job(topo, buf, &jobs[nj], path, line);
    if (!rc) nj++;
  }
  fclose(f);
  if (!rc && nj == 0) rc = shoal__seterr(SHOAL_ERR_PARSE, "job file %s: no job", path);
  if (rc) {
    free(jobs);
    return rc;
  }
  *out = jobs;
  *n = nj;
  return 0;
}
