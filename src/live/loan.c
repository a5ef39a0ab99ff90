/* Loaning on a real cluster manager (loan.h): each step reads the manager's
 * nodes and jobs, classes every VC_infer host as serving (a replica job of
 * ours runs or starts there), lent (a borrower holds it) or free, and acts:
 * reclaim, stop, lend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/loan.h"

#define LOAN_MAX_HOSTS 64

struct shoal_live_loan {
  shoal_live_loan_config_t c;
  shoal__forecast_t *fc;
  double service_s;             /* the seconds a request counted with: configured, then the replicas' measured */
  shoal_live_borrower_t b[SHOAL_LIVE_LOAN_MAX_BORROWERS];
  int nb;
  shoal__speedup_fn speedup;
  void *speedup_arg;
  double last, calm;
  int seen;
  int nrep;
  char env[512];                /* SHOAL_SERVE_ROUTER=ROUTER for the replica jobs */
  struct {
    long id;
    char node[SHOAL_LIVE_NAME];
  } rep[LOAN_MAX_HOSTS];        /* our replica jobs and the host each was started on */
  int npromised;
  struct {
    long id;
    int restarts;               /* the job's restarts when it was asked to restart */
    double since;
    char node[SHOAL_LIVE_NAME];
  } promised[LOAN_MAX_HOSTS];   /* hosts lent by a restart still to come: the job's next run starts on them */
};

/* a promise is kept this long at most (the restart's checkpoint, requeue and start take seconds) */
#define LOAN_PROMISE_S 300

int shoal__live_loan_create(const shoal_live_loan_config_t *cfg, shoal__forecast_t *fc, shoal_live_loan_t **out) {
  if (!cfg->infer_partition || !*cfg->infer_partition)
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: no inference partition (VC_infer) given");
  if (!(cfg->service_s > 0 && cfg->slo_s > cfg->service_s && cfg->slo_q > 0 && cfg->slo_q < 1 && cfg->hold_s >= 0))
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: the SLO %g s at q %g must exceed the service time %g s (hold %g s)",
                         cfg->slo_s, cfg->slo_q, cfg->service_s, cfg->hold_s);
  if (cfg->react_hi > 0 && !(cfg->react_lo > 0 && cfg->react_lo < cfg->react_hi && cfg->react_hi <= 1))
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: reactive thresholds %g..%g: need 0 < low < high <= 1", cfg->react_lo,
                         cfg->react_hi);
  if (cfg->replica_argc < 1 || !cfg->replica_argv) return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: no replica command");
  if (cfg->spare < 0 || cfg->spare > LOAN_MAX_HOSTS)
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: %d spare replicas: expected 0..%d", cfg->spare, LOAN_MAX_HOSTS);
  shoal_live_loan_t *L = calloc(1, sizeof *L);
  if (!L) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning: out of memory");
  L->c = *cfg, L->fc = fc, L->service_s = cfg->service_s;
  if (!L->c.replica_name) L->c.replica_name = "shoal:serve";
  if (cfg->router && (size_t)snprintf(L->env, sizeof L->env, "SHOAL_SERVE_ROUTER=%s", cfg->router) >= sizeof L->env) {
    free(L);
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: the router's URL is too long");
  }
  *out = L;
  return 0;
}

void shoal__live_loan_destroy(shoal_live_loan_t *L) { free(L); }

void shoal__live_loan_measured(shoal_live_loan_t *L, double service_s) {
  if (service_s > 0) L->service_s = service_s;
}

void shoal__live_loan_borrowers(shoal_live_loan_t *L, const shoal_live_borrower_t *b, int n,
                                shoal__speedup_fn speedup, void *arg) {
  L->nb = n < SHOAL_LIVE_LOAN_MAX_BORROWERS ? (n > 0 ? n : 0) : SHOAL_LIVE_LOAN_MAX_BORROWERS;
  for (int k = 0; k < L->nb; k++) L->b[k] = b[k];
  L->speedup = speedup, L->speedup_arg = arg;
}

typedef struct hosts {
  int n;
  const char *name[LOAN_MAX_HOSTS];
  int gpus[LOAN_MAX_HOSTS];
  int serving[LOAN_MAX_HOSTS], busy[LOAN_MAX_HOSTS]; /* busy: any job on it */
  int lent[LOAN_MAX_HOSTS];    /* 1 + the borrower that holds it, 0: none */
  int fresh[LOAN_MAX_HOSTS];   /* lent or reclaimed by this step (its borrower's resize is still to do) */
  const shoal_live_job_t *job[SHOAL_LIVE_LOAN_MAX_BORROWERS]; /* the borrowers as the manager shows them */
  int held[SHOAL_LIVE_LOAN_MAX_BORROWERS];  /* GPUs each holds, on all its hosts */
} hosts_t;

static int host_index(const hosts_t *h, const char *name) {
  for (int i = 0; i < h->n; i++)
    if (!strcmp(h->name[i], name)) return i;
  return -1;
}

/* Hosts lent by a restart still to come are busy (nothing else may start there before the borrower's next run);
 * a promise ends once that run is seen (on them or, placed anew, elsewhere), or the job is gone. */
static void keep_promises(shoal_live_loan_t *L, const shoal_live_jobs_t *jobs, double now, hosts_t *h) {
  int k = 0;
  for (int i = 0; i < L->npromised; i++) {
    const shoal_live_job_t *j = shoal__live_jobs_find(jobs, L->promised[i].id);
    int restarted = j && j->restarts > L->promised[i].restarts && j->run == SHOAL_LIVE_RUNNING;
    if (!j || restarted || now - L->promised[i].since > LOAN_PROMISE_S) continue;
    L->promised[k++] = L->promised[i];
    int x = host_index(h, L->promised[i].node);
    if (x >= 0) h->busy[x] = 1;
  }
  L->npromised = k;
}

/* Our replica jobs still alive (forget the ended ones) and the hosts' classes. */
static void classify(shoal_live_loan_t *L, const shoal_live_nodes_t *nodes, const shoal_live_jobs_t *jobs, double now,
                     hosts_t *h) {
  memset(h, 0, sizeof *h);
  for (int i = 0; i < nodes->n && h->n < LOAN_MAX_HOSTS; i++)
    if (nodes->node[i].usable && shoal__live_list_has(nodes->node[i].partitions, L->c.infer_partition))
      h->name[h->n] = nodes->node[i].name, h->gpus[h->n++] = nodes->node[i].gpus;
  int k = 0;
  for (int r = 0; r < L->nrep; r++) {
    const shoal_live_job_t *j = shoal__live_jobs_find(jobs, L->rep[r].id);
    if (!j || j->run == SHOAL_LIVE_ENDED) continue;
    L->rep[k++] = L->rep[r];
    int x = host_index(h, L->rep[r].node);
    if (x >= 0) h->serving[x] = 1, h->busy[x] = 1;
  }
  L->nrep = k;
  /* A replica job of ours the list does not hold (a controller restarted mid-loan): adopted from the manager by
   * its comment and partition, on the host it runs on. */
  for (int i = 0; i < jobs->n && L->nrep < LOAN_MAX_HOSTS; i++) {
    const shoal_live_job_t *j = &jobs->job[i];
    if (j->run != SHOAL_LIVE_RUNNING || j->nuse != 1 || strcmp(j->comment, L->c.replica_name) ||
        strcmp(j->partition, L->c.infer_partition))
      continue;
    int known = 0;
    for (int r = 0; r < L->nrep; r++) known |= L->rep[r].id == j->id;
    int x = host_index(h, j->use[0].node);
    if (known || x < 0) continue;
    L->rep[L->nrep].id = j->id;
    snprintf(L->rep[L->nrep++].node, SHOAL_LIVE_NAME, "%s", j->use[0].node);
    h->serving[x] = 1, h->busy[x] = 1;
  }
  for (int b = 0; b < L->nb; b++) {
    const shoal_live_job_t *t = shoal__live_jobs_find(jobs, L->b[b].id);
    h->job[b] = t && t->run == SHOAL_LIVE_RUNNING ? t : NULL;
  }
  for (int i = 0; i < jobs->n; i++) {
    int b = 0; /* the borrower it is, L->nb: none */
    while (b < L->nb && jobs->job[i].id != L->b[b].id) b++;
    for (int u = 0; u < jobs->job[i].nuse; u++) {
      if (b < L->nb) h->held[b] += jobs->job[i].use[u].gpus;
      int x = host_index(h, jobs->job[i].use[u].node);
      if (x < 0) continue;
      h->busy[x] = 1;
      if (b < L->nb && h->job[b]) h->lent[x] = 1 + b;
    }
  }
  keep_promises(L, jobs, now, h);
}

/* Resize borrower k to its hosts outside VC_infer plus the VC_infer hosts marked lent to it in h: in place when
 * the manager can (shrinking: `reclaiming`), else by a restart through the job's owner. */
static int resize_train(shoal_live_loan_t *L, shoal_live_manager_t *mgr, const hosts_t *h, int k, int reclaiming,
                        double now) {
  const shoal_live_job_t *t = h->job[k];
  char names[2 * LOAN_MAX_HOSTS][SHOAL_LIVE_NAME];
  int gpus[2 * LOAN_MAX_HOSTS], n = 0;
  for (int u = 0; u < t->nuse && n < LOAN_MAX_HOSTS; u++)
    if (host_index(h, t->use[u].node) < 0) memcpy(names[n], t->use[u].node, SHOAL_LIVE_NAME), gpus[n++] = t->use[u].gpus;
  for (int x = 0; x < h->n; x++)
    if (h->lent[x] == 1 + k) snprintf(names[n], SHOAL_LIVE_NAME, "%s", h->name[x]), gpus[n++] = h->gpus[x];
  if (n == 0) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "loaning: job %ld would keep no host", t->id);
  shoal_live_place_t p = {.n = n, .node = names, .gpus = gpus};
  unsigned in_place = reclaiming ? SHOAL_LIVE_CAP_SHRINK : SHOAL_LIVE_CAP_GROW;
  if ((mgr->ops->caps & in_place) || !L->c.restart) {
    int rc = mgr->ops->resize(mgr->impl, t->id, &p);
    if (rc != SHOAL_ERR_UNSUPPORTED || !L->c.restart) return rc; /* (not this job in place: by a restart) */
  }
  int rc = L->c.restart(L->c.restart_arg, t->id, &p);
  for (int x = 0; !rc && x < h->n && L->npromised < LOAN_MAX_HOSTS; x++) { /* the lent hosts it keeps or gets */
    if (h->lent[x] != 1 + k) continue;
    L->promised[L->npromised].id = t->id, L->promised[L->npromised].restarts = t->restarts;
    L->promised[L->npromised].since = now;
    snprintf(L->promised[L->npromised++].node, SHOAL_LIVE_NAME, "%s", h->name[x]);
  }
  return rc;
}

static int start_replica(shoal_live_loan_t *L, shoal_live_manager_t *mgr, const char *node) {
  if (L->nrep == LOAN_MAX_HOSTS) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "loaning: more than %d replicas", LOAN_MAX_HOSTS);
  shoal_live_submit_t req = {.name = L->c.replica_name, .partition = L->c.infer_partition, .comment = L->c.replica_name,
                             .argv = L->c.replica_argv, .argc = L->c.replica_argc, .hold = 1};
  const char *env[1] = {L->env};
  if (L->env[0]) req.env = env, req.envc = 1;
  long id;
  int rc = mgr->ops->submit(mgr->impl, &req, &id);
  if (rc) return rc;
  L->rep[L->nrep].id = id;
  snprintf(L->rep[L->nrep++].node, SHOAL_LIVE_NAME, "%s", node);
  char name[1][SHOAL_LIVE_NAME];
  int one = 1;
  snprintf(name[0], SHOAL_LIVE_NAME, "%s", node);
  shoal_live_place_t p = {.n = 1, .node = name, .gpus = &one};
  return mgr->ops->start(mgr->impl, id, &p);
}

static double speedup_of(void *arg, int k, int g) {
  const shoal_live_loan_t *L = arg;
  return L->speedup ? L->speedup(L->speedup_arg, k, g) : g;
}

/* Resize every borrower whose hosts this step changed (h->fresh), once each, and count it in o; a reclaimed
 * host gets a replica. On an error the borrower's hosts go back as they were and the rest is left for the next
 * step (which reads the manager again). */
static int resize_changed(shoal_live_loan_t *L, shoal_live_manager_t *mgr, hosts_t *h, int reclaiming, double now,
                          shoal_live_loan_step_t *o) {
  int rc = 0;
  for (int k = 0; k < L->nb && !rc; k++) {
    int any = 0;
    for (int x = 0; x < h->n; x++) any |= h->fresh[x] == 1 + k;
    if (!any) continue;
    int failed = resize_train(L, mgr, h, k, reclaiming, now);
    for (int x = 0; x < h->n; x++) {
      if (h->fresh[x] != 1 + k) continue;
      if (failed && reclaiming) {
        h->lent[x] = 1 + k, h->held[k] += h->gpus[x];
      } else if (failed) {
        h->lent[x] = 0, h->busy[x] = 0, h->held[k] -= h->gpus[x];
      } else if (!reclaiming) {
        o->lent_now++, o->b[k].lent_now++;
      } else {
        o->reclaimed++, o->b[k].reclaimed++;
        if (!rc && !(rc = start_replica(L, mgr, h->name[x]))) h->serving[x] = 1, o->started++;
      }
    }
    if (failed) rc = failed;
  }
  memset(h->fresh, 0, sizeof h->fresh);
  return rc;
}

/* Reclaim: free hosts first, then lent ones, each from the borrower whose speedup drops least. */
static int reclaim(shoal_live_loan_t *L, shoal_live_manager_t *mgr, hosts_t *h, double now, int *have,
                   shoal_live_loan_step_t *o) {
  int rc = 0;
  for (int x = 0; x < h->n && *have < o->want && !rc; x++) {
    if (h->serving[x] || h->busy[x]) continue;
    if (!(rc = start_replica(L, mgr, h->name[x]))) h->serving[x] = h->busy[x] = 1, (*have)++, o->started++;
  }
  int step[SHOAL_LIVE_LOAN_MAX_BORROWERS], pick[SHOAL_LIVE_LOAN_MAX_BORROWERS], taking = 0;
  while (!rc && *have + taking < o->want) {
    for (int k = 0; k < L->nb; k++) {
      step[k] = 0, pick[k] = -1;
      for (int x = 0; x < h->n; x++)
        if (h->lent[x] == 1 + k && !h->serving[x]) step[k] = h->gpus[x], pick[k] = x;
    }
    int v = shoal__loan_pick_victim(L->nb, h->held, step, 1, speedup_of, L);
    if (v < 0) break;
    int x = pick[v];
    h->lent[x] = 0, h->fresh[x] = 1 + v, h->held[v] -= h->gpus[x], taking++;
  }
  int before = o->started;
  if (!rc) rc = resize_changed(L, mgr, h, 1, now, o);
  *have += o->started - before;
  return rc;
}

/* Lend idle hosts, each to the borrower whose speedup rises most within its room: in place one host per step
 * (each grow restarts the job's rendezvous); by a restart (Slurm) every idle host at once, one restart each. */
static int lend(shoal_live_loan_t *L, shoal_live_manager_t *mgr, hosts_t *h, double now, shoal_live_loan_step_t *o) {
  int in_place = (mgr->ops->caps & SHOAL_LIVE_CAP_GROW) != 0;
  if (!in_place && !(mgr->ops->caps & SHOAL_LIVE_CAP_GROW_RESTART) && !L->c.restart) return 0;
  int lent_gpus[SHOAL_LIVE_LOAN_MAX_BORROWERS] = {0}, step[SHOAL_LIVE_LOAN_MAX_BORROWERS], nmax[SHOAL_LIVE_LOAN_MAX_BORROWERS];
  for (int x = 0; x < h->n; x++)
    if (h->lent[x]) lent_gpus[h->lent[x] - 1] += h->gpus[x];
  for (int x = 0; x < h->n; x++) {
    if (h->busy[x]) continue;
    for (int k = 0; k < L->nb; k++) {
      step[k] = h->gpus[x];
      nmax[k] = h->job[k] ? h->held[k] + L->b[k].room - lent_gpus[k] : -1;
    }
    int w = shoal__loan_pick_grower(L->nb, h->held, step, nmax, -1, speedup_of, L, NULL);
    for (int k = 0; w < 0 && k < L->nb; k++) /* no speedup rises: the first with room (an idle host helps nobody) */
      if (h->held[k] + step[k] <= nmax[k]) w = k;
    if (w < 0) continue;
    h->lent[x] = 1 + w, h->fresh[x] = 1 + w, h->busy[x] = 1, h->held[w] += h->gpus[x], lent_gpus[w] += h->gpus[x];
    if (in_place) break;
  }
  return resize_changed(L, mgr, h, 0, now, o);
}

/* The step's actions in order: reclaim, stop extra replicas after the hold, lend idle hosts. */
static int act(shoal_live_loan_t *L, shoal_live_manager_t *mgr, hosts_t *h, double now, double dt,
               shoal_live_loan_step_t *o) {
  int have = L->nrep;
  int rc = reclaim(L, mgr, h, now, &have, o);
  if (have > o->want) L->calm += dt;
  else L->calm = 0;
  if (have > o->want && L->calm >= L->c.hold_s - 1e-9) { /* stop the extra replicas; their hosts are lent when free */
    for (int r = L->nrep - 1; r >= 0 && have > o->want && !rc; r--)
      if (!(rc = mgr->ops->stop(mgr->impl, L->rep[r].id, SHOAL_LIVE_STOP_KILL))) have--, o->stopped++;
    L->calm = 0;
  }
  if (!rc && have >= o->want) rc = lend(L, mgr, h, now, o);
  o->replicas = have;
  o->nb = L->nb;
  for (int k = 0; k < L->nb; k++) o->b[k].id = L->b[k].id;
  for (int x = 0; x < h->n; x++)
    if (h->lent[x]) o->lent++, o->b[h->lent[x] - 1].lent++;
  return rc;
}

int shoal__live_loan_step(shoal_live_loan_t *L, shoal_live_manager_t *mgr, double now, double rate, double waiting,
                          shoal_live_loan_step_t *out) {
  shoal_live_nodes_t nodes = {0};
  shoal_live_jobs_t jobs = {0};
  int rc = mgr->ops->nodes(mgr->impl, &nodes);
  if (!rc) rc = mgr->ops->jobs(mgr->impl, &jobs);
  if (rc) goto free_views;
  hosts_t h;
  classify(L, &nodes, &jobs, now, &h);
  shoal__forecast_observe(L->fc, rate);
  int cap = h.n > 0 ? h.n : 1;
  double svc = L->service_s;
  int by_rate = shoal__slo_replicas(shoal__forecast_next(L->fc, rate), svc, L->c.slo_s, L->c.slo_q, cap);
  int by_queue = shoal__slo_replicas_waiting(waiting, rate, svc, L->c.slo_s, cap), spare = L->c.spare;
  if (L->c.react_hi > 0) /* the baseline: the last step's utilization only */
    by_rate = shoal__reactive_replicas(rate, svc, L->nrep, L->c.react_lo, L->c.react_hi, cap), by_queue = 0, spare = 0;
  shoal_live_loan_step_t o = {.want = (by_rate > by_queue ? by_rate : by_queue) + spare, .service_s = svc};
  if (o.want > h.n) o.want = h.n;
  rc = act(L, mgr, &h, now, L->seen ? now - L->last : 0, &o);
  L->last = now, L->seen = 1;
  if (!rc && out) *out = o;
free_views:
  shoal__live_nodes_free(&nodes);
  shoal__live_jobs_free(&jobs);
  return rc;
}
