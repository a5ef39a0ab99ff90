/* Loaning on a real cluster manager (loan.h): each step reads the manager's
 * nodes and jobs, classes every VC_infer host as serving (a replica job of
 * ours runs or starts there), lent (the training job holds it) or free, and
 * acts: reclaim, stop, lend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/loan.h"

#define LOAN_MAX_HOSTS 64

struct shoal_live_loan {
  shoal_live_loan_config_t c;
  shoal__forecast_t *fc;
  double last, calm;
  int seen;
  int nrep;
  char env[512];                /* SHOAL_SERVE_ROUTER=ROUTER for the replica jobs */
  struct {
    long id;
    char node[SHOAL_LIVE_NAME];
  } rep[LOAN_MAX_HOSTS];        /* our replica jobs and the host each was started on */
};

int shoal__live_loan_create(const shoal_live_loan_config_t *cfg, shoal__forecast_t *fc, shoal_live_loan_t **out) {
  if (!cfg->infer_partition || !*cfg->infer_partition)
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: no inference partition (VC_infer) given");
  if (!(cfg->service_s > 0 && cfg->slo_s > cfg->service_s && cfg->slo_q > 0 && cfg->slo_q < 1 && cfg->hold_s >= 0))
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: the SLO %g s at q %g must exceed the service time %g s (hold %g s)",
                         cfg->slo_s, cfg->slo_q, cfg->service_s, cfg->hold_s);
  if (cfg->replica_argc < 1 || !cfg->replica_argv) return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: no replica command");
  shoal_live_loan_t *L = calloc(1, sizeof *L);
  if (!L) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning: out of memory");
  L->c = *cfg, L->fc = fc;
  if (!L->c.replica_name) L->c.replica_name = "shoal:serve";
  if (cfg->router && (size_t)snprintf(L->env, sizeof L->env, "SHOAL_SERVE_ROUTER=%s", cfg->router) >= sizeof L->env) {
    free(L);
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: the router's URL is too long");
  }
  *out = L;
  return 0;
}

void shoal__live_loan_destroy(shoal_live_loan_t *L) { free(L); }

void shoal__live_loan_borrower(shoal_live_loan_t *L, long train_id, int lend_gpus) {
  L->c.train_id = train_id, L->c.lend_gpus = lend_gpus;
}

typedef struct hosts {
  int n;
  const char *name[LOAN_MAX_HOSTS];
  int gpus[LOAN_MAX_HOSTS];
  int serving[LOAN_MAX_HOSTS], lent[LOAN_MAX_HOSTS], busy[LOAN_MAX_HOSTS]; /* busy: any job on it */
} hosts_t;

static int host_index(const hosts_t *h, const char *name) {
  for (int i = 0; i < h->n; i++)
    if (!strcmp(h->name[i], name)) return i;
  return -1;
}

/* Our replica jobs still alive (forget the ended ones) and the hosts' classes. */
static void classify(shoal_live_loan_t *L, const shoal_live_nodes_t *nodes, const shoal_live_jobs_t *jobs, hosts_t *h,
                     const shoal_live_job_t **train) {
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
  *train = L->c.train_id > 0 ? shoal__live_jobs_find(jobs, L->c.train_id) : NULL;
  for (int i = 0; i < jobs->n; i++)
    for (int u = 0; u < jobs->job[i].nuse; u++) {
      int x = host_index(h, jobs->job[i].use[u].node);
      if (x < 0) continue;
      h->busy[x] = 1;
      if (L->c.train_id > 0 && jobs->job[i].id == L->c.train_id) h->lent[x] = 1;
    }
}

/* Resize the training job to its hosts outside VC_infer plus the VC_infer hosts marked lent in h. */
static int resize_train(shoal_live_manager_t *mgr, const shoal_live_job_t *t, const hosts_t *h) {
  char names[2 * LOAN_MAX_HOSTS][SHOAL_LIVE_NAME];
  int gpus[2 * LOAN_MAX_HOSTS], n = 0;
  for (int u = 0; u < t->nuse && n < LOAN_MAX_HOSTS; u++)
    if (host_index(h, t->use[u].node) < 0) memcpy(names[n], t->use[u].node, SHOAL_LIVE_NAME), gpus[n++] = t->use[u].gpus;
  for (int x = 0; x < h->n; x++)
    if (h->lent[x]) snprintf(names[n], SHOAL_LIVE_NAME, "%s", h->name[x]), gpus[n++] = h->gpus[x];
  if (n == 0) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "loaning: job %ld would keep no host", t->id);
  shoal_live_place_t p = {.n = n, .node = names, .gpus = gpus};
  return mgr->ops->resize(mgr->impl, t->id, &p);
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

/* The step's actions in order: reclaim (free hosts first, then lent ones), stop extra replicas after the hold,
 * lend one idle host. */
static int act(shoal_live_loan_t *L, shoal_live_manager_t *mgr, hosts_t *h, const shoal_live_job_t *train,
               double dt, shoal_live_loan_step_t *o) {
  int rc = 0, have = L->nrep;
  for (int pass = 0; pass < 2 && have < o->want && !rc; pass++) /* reclaim: free hosts first, then lent ones */
    for (int x = 0; x < h->n && have < o->want && !rc; x++) {
      if (h->serving[x] || (pass == 0 && h->busy[x]) || (pass == 1 && (!h->lent[x] || !train))) continue;
      if (pass == 1) {
        h->lent[x] = 0;
        if ((rc = resize_train(mgr, train, h))) {
          h->lent[x] = 1;
          break;
        }
        o->reclaimed++;
      }
      if (!(rc = start_replica(L, mgr, h->name[x]))) h->serving[x] = h->busy[x] = 1, have++, o->started++;
    }
  if (have > o->want) L->calm += dt;
  else L->calm = 0;
  if (have > o->want && L->calm >= L->c.hold_s - 1e-9) { /* stop the extra replicas; their hosts are lent when free */
    for (int r = L->nrep - 1; r >= 0 && have > o->want && !rc; r--)
      if (!(rc = mgr->ops->stop(mgr->impl, L->rep[r].id, SHOAL_LIVE_STOP_KILL))) have--, o->stopped++;
    L->calm = 0;
  }
  /* lend what is idle, where the manager grows a job: in place one host per step (each grow restarts the job's
   * rendezvous); by a restart (Slurm) every idle host at once, one restart */
  int in_place = (mgr->ops->caps & SHOAL_LIVE_CAP_GROW) != 0, lent_gpus = 0, marked = 0;
  int can_grow = in_place || (mgr->ops->caps & SHOAL_LIVE_CAP_GROW_RESTART);
  for (int x = 0; x < h->n; x++) lent_gpus += h->lent[x] ? h->gpus[x] : 0;
  for (int x = 0; x < h->n && can_grow && train && train->run == SHOAL_LIVE_RUNNING && !rc; x++) {
    if (h->busy[x] || have < o->want) continue;
    if (L->c.lend_gpus > 0 && lent_gpus + h->gpus[x] > L->c.lend_gpus) continue;
    h->lent[x] = 2, lent_gpus += h->gpus[x], marked++; /* 2: lent by this step */
    if (in_place) break;
  }
  if (marked && (rc = resize_train(mgr, train, h))) {
    for (int x = 0; x < h->n; x++)
      if (h->lent[x] == 2) h->lent[x] = 0;
  } else if (marked) {
    for (int x = 0; x < h->n; x++)
      if (h->lent[x] == 2) h->lent[x] = 1, h->busy[x] = 1;
    o->lent_now = marked;
  }
  o->replicas = have;
  for (int x = 0; x < h->n; x++) o->lent += h->lent[x];
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
  const shoal_live_job_t *train;
  classify(L, &nodes, &jobs, &h, &train);
  shoal__forecast_observe(L->fc, rate);
  int cap = h.n > 0 ? h.n : 1;
  int by_rate = shoal__slo_replicas(shoal__forecast_next(L->fc, rate), L->c.service_s, L->c.slo_s, L->c.slo_q, cap);
  int by_queue = shoal__slo_replicas_waiting(waiting, rate, L->c.service_s, L->c.slo_s, cap);
  shoal_live_loan_step_t o = {.want = by_rate > by_queue ? by_rate : by_queue};
  if (o.want > h.n) o.want = h.n;
  rc = act(L, mgr, &h, train, L->seen ? now - L->last : 0, &o);
  L->last = now, L->seen = 1;
  if (!rc && out) *out = o;
free_views:
  shoal__live_nodes_free(&nodes);
  shoal__live_jobs_free(&jobs);
  return rc;
}
