/* The learned multi-agent placer and the `marl` policy (marl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "sched/model/place.h"
#include "sched/policies/placer.h"
#include "sched/policies/marl.h"
#include "sched/policies/marl_obs.h"

static _Thread_local shoal__marl_decide_fn tls_decide;
static _Thread_local void *tls_decide_arg;

void shoal__marl_set_decider(shoal__marl_decide_fn fn, void *arg) {
  tls_decide = fn;
  tls_decide_arg = arg;
}

typedef struct {
  shoal_marl_net_t *net;              /* NULL: a decider without weights */
  int agents;
  shoal__marl_part_t *parts;
  shoal__marl_view_t *views;          /* [agents] */
  shoal_interference_t *owned;
  shoal__colo_t colo;
  const shoal_placer_ops_t *fb;       /* the fallback placer */
  void *fbstate;
  shoal__marl_decide_fn decide;
  void *decide_arg;
  float *logits;
  shoal_place_t *buf;
  shoal_place_t *cons;                /* where consolidation would put the job (a feature; the routing) */
  int ncons;
  uint8_t *want;
  /* the team reward's clock (marl_schedule) */
  double area, t_prev, queued_gpus;
  int n_prev;
  long jobs, decisions, fallbacks;
  int said;                           /* a fallback was reported */
  int spread;                         /* a job may use more machines than consolidation would give it */
  int nic_aware;                      /* the hint steers jobs that span machines off shared NICs (nic_aware) */
  int use_net;                        /* 0: the network is not asked, the job goes where the hint says */
} marl_t;

static void marl_destroy(void *state) {
  marl_t *p = state;
  if (!p) return;
  for (int a = 0; p->views && a < p->agents; a++) shoal__marl_view_fini(&p->views[a]);
  free(p->views);
  shoal__marl_parts_free(p->parts, p->agents);
  shoal__colo_fini(&p->colo);
  shoal__interference_free(p->owned);
  if (p->fb) p->fb->destroy(p->fbstate);
  shoal__marl_net_free(p->net);
  free(p->logits);
  free(p->buf);
  free(p->cons);
  free(p->want);
  free(p);
}

/* the weights (param weights=FILE, else the shipped file; none for a decider without weights) and the agents */
static int load_net(marl_t *p, shoal_sched_t *s, const char *params) {
  char path[4096];
  int rc = shoal__param_str(params, "weights", path, sizeof path);
  if (rc < 0) return shoal__seterr(SHOAL_ERR_CONFIG, "policy marl: weights: path longer than %zu bytes", sizeof path - 1);
  if (rc == 1) rc = shoal__marl_net_load(path, &p->net);
  else rc = p->decide ? 0 : shoal__marl_net_shipped(&p->net);
  if (rc) return rc;
  long agents;
  long def = p->net ? shoal__marl_net_agents(p->net) : 1;
  if ((rc = shoal__param_long("marl", params, "agents", def, 1, SHOAL_MARL_MAX_AGENTS, &agents))) return rc;
  if (agents > s->cluster->nracks) {
    if (p->net && agents == def)
      return shoal__seterr(SHOAL_ERR_CONFIG, "%s: topology: trained for %ld agents (one per group of racks); the cluster "
                           "has %d rack%s: give marl:agents=N with N <= %d", shoal__marl_net_origin(p->net), agents,
                           s->cluster->nracks, s->cluster->nracks == 1 ? "" : "s", s->cluster->nracks);
    return shoal__seterr(SHOAL_ERR_CONFIG, "policy marl: agents=%ld: the cluster has %d racks (each agent places on a "
                         "group of whole racks)", agents, s->cluster->nracks);
  }
  p->agents = (int)agents;
  return 0;
}

static int fallback_create(marl_t *p, shoal_sched_t *s, const char *params) {
  char name[32] = "consolidate";
  int rc = shoal__param_str(params, "fallback", name, sizeof name);
  if (rc == 0) snprintf(name, sizeof name, "consolidate");
  p->fb = rc < 0 ? NULL : shoal__placer_find(name);
  if (!p->fb || !strcmp(name, "marl"))
    return shoal__seterr(SHOAL_ERR_CONFIG, "policy marl: fallback=%s: expected consolidate, firstfit, loadbal or pack",
                         rc < 0 ? "(too long)" : name);
  rc = p->fb->create(s, NULL, &p->fbstate);
  if (rc) p->fb = NULL;
  return rc;
}

static int marl_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"weights", "agents", "fallback", "spread", "nic", "wait", "net", NULL};
  int rc = shoal__param_check("marl", params, keys);
  if (rc) return rc;
  marl_t *p = calloc(1, sizeof *p);
  if (!p) return shoal__seterr(SHOAL_ERR_NOMEM, "marl: out of memory");
  p->decide = tls_decide;
  p->decide_arg = tls_decide_arg;
  const shoal_interference_t *im;
  int M = s->cluster->nmachines;
  long spread, nic, net; /* wait: the queue's (policy_create) */
  if ((rc = shoal__param_long("marl", params, "spread", 0, 0, 1, &spread)) ||
      (rc = shoal__param_long("marl", params, "net", 1, 0, 1, &net)) ||
      (rc = shoal__param_long("marl", params, "nic", 1, 0, 1, &nic)) ||
      (rc = load_net(p, s, params)) ||
      (rc = fallback_create(p, s, params)) ||
      (rc = shoal__marl_parts(s->cluster, p->agents, &p->parts)) || (rc = shoal__placer_model(s, &im, &p->owned)) ||
      (rc = shoal__colo_init(&p->colo, im, s->speed)))
    goto fail;
  p->spread = (int)spread;
  p->nic_aware = (int)nic;
  p->use_net = (int)net;
  p->views = calloc((size_t)p->agents, sizeof *p->views);
  p->buf = malloc((size_t)M * sizeof *p->buf);
  p->cons = malloc((size_t)M * sizeof *p->cons);
  p->want = calloc((size_t)M * SHOAL_MAX_SOCKETS, 1);
  p->logits = malloc((size_t)M * SHOAL_MAX_SOCKETS * sizeof *p->logits);
  if (!p->views || !p->buf || !p->cons || !p->want || !p->logits || !shoal__sched_slots(s)) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "marl: out of memory");
    goto fail;
  }
  for (int a = 0; a < p->agents; a++)
    if ((rc = shoal__marl_view_init(&p->views[a], &p->parts[a]))) goto fail;
  *state = p;
  return 0;
fail:
  marl_destroy(p);
  return rc;
}

/* the job goes to the fallback placer; said once per run, counted always */
static int fallback(marl_t *p, shoal_sched_t *s, shoal_job_t *j, const char *why) {
  int rc = p->fb->start(p->fbstate, s, j);
  if (rc == 1) {
    p->fallbacks++;
    if (!p->said++)
      SHOAL_WARN("SIM", "marl: job %d (%d GPUs) %s: placed by the fallback placer '%s' (said once; the count is in the "
                 "policy's stats)", j->id, j->gpus, why, p->fb->name);
  }
  return rc;
}

/* the partition of rack r */
static int part_of(const marl_t *p, int r) {
  int a = 0;
  while (a + 1 < p->agents && r >= p->parts[a + 1].rack0) a++;
  return a;
}

/* consolidation's placement of j (p->cons); a job on one machine goes, among the machines that fit it
 * as well (as many free GPUs), to the one with the least predicted interference */
static void consolidated(marl_t *p, const shoal_sched_t *s, const shoal_job_t *j) {
  const shoal_cluster_t *c = s->cluster;
  p->ncons = shoal__place_consolidated(c, j, j->gpus, p->cons, c->nmachines);
  if (p->ncons != 1 || p->cons[0].workers != j->gpus) return;
  int best = p->cons[0].machine, f = c->m[best].free.gpus;
  uint8_t want[SHOAL_MAX_SOCKETS];
  double best_cost = shoal__colo_pick_sockets(&p->colo, s->slots, j, best, j->gpus, want);
  for (int m = 0; m < c->nmachines; m++) {
    if (m == best || c->m[m].free.gpus != f || shoal__place_room(c, j, m) < j->gpus) continue;
    double cost = shoal__colo_pick_sockets(&p->colo, s->slots, j, m, j->gpus, want);
    if (cost >= 0 && (best_cost < 0 || cost < best_cost - 1e-12)) best = m, best_cost = cost;
  }
  p->cons[0].machine = best;
}

/* the NIC interference j spanning machines would suffer and cause on m */
static double nic_cost(const marl_t *p, const shoal_sched_t *s, const shoal_job_t *j, int m) {
  return shoal__colo_nic(&p->colo, s->slots, j, m) + shoal__colo_nic_imposed(&p->colo, s->slots, j, m);
}

/* A job consolidation spreads over machines shares each one's NIC with the other jobs there that span
 * machines (the model's largest terms). Each of its machines where that costs something is swapped, in
 * partition a, for the machine not in the placement with room for the same workers, the least such
 * interference, then the fewest free GPUs (the machine count and the split stay consolidation's). */
static void nic_aware(marl_t *p, const shoal_sched_t *s, const shoal_job_t *j, int a) {
  const shoal__marl_part_t *pt = &p->parts[a];
  const shoal_cluster_t *c = s->cluster;
  for (int k = 0; k < p->ncons; k++) {
    double cost = nic_cost(p, s, j, p->cons[k].machine);
    if (cost <= 0) continue;
    int best = -1, best_free = 0;
    for (int i = 0; i < pt->nserv; i++) {
      int m = pt->serv_m[i], in = 0;
      for (int q = 0; q < p->ncons && !in; q++) in = p->cons[q].machine == m;
      if (in || shoal__place_room(c, j, m) < p->cons[k].workers) continue;
      double mc = nic_cost(p, s, j, m);
      int f = c->m[m].free.gpus;
      if (mc < cost - 1e-12 || (best >= 0 && mc <= cost + 1e-12 && f < best_free)) best = m, cost = mc, best_free = f;
    }
    if (best >= 0) p->cons[k].machine = best;
  }
  shoal__place_normalize(p->cons, p->ncons);
}

/* the partition that holds all of consolidation's machines for j (p->cons), else the one with the most
 * free GPUs that has as many free GPUs as j needs; -1 if none */
static int route(marl_t *p, const shoal_sched_t *s, const shoal_job_t *j) {
  const shoal_cluster_t *c = s->cluster;
  consolidated(p, s, j);
  int home = p->ncons > 0 ? part_of(p, c->m[p->cons[0].machine].rack) : -1;
  for (int k = 1; k < p->ncons && home >= 0; k++)
    if (part_of(p, c->m[p->cons[k].machine].rack) != home) home = -1;
  if (home >= 0 && p->ncons > 1 && p->nic_aware) nic_aware(p, s, j, home);
  if (home >= 0) return home;
  int best = -1, best_free = -1;
  for (int a = 0; a < p->agents; a++) {
    int f = 0;
    for (int r = 0; r < p->parts[a].nrack; r++) f += s->cluster->racks[p->parts[a].rack0 + r].gpus_free;
    if (f >= j->gpus && f > best_free) best = a, best_free = f;
  }
  return best;
}

/* one socket for the next worker: the network's best, or the decider's choice */
static int decide(marl_t *p, shoal_sched_t *s, const shoal_job_t *j, int a, const shoal_marl_obs_t *o) {
  int best = -1;
  if (p->net && (best = shoal__marl_net_scores(p->net, o, p->logits)) < 0) return best; /* o has a feasible socket */
  p->decisions++;
  if (!p->decide) return best;
  shoal__marl_step_t st = {o, p->net ? p->logits : NULL, a, p->agents, j->id, p->views[a].placed, j->gpus,
                           s->now, p->area, s->nactive};
  int act = p->decide(p->decide_arg, &st);
  if (act < 0) return act;
  if (act >= o->nsock || !o->mask[act])
    return shoal__seterr(SHOAL_ERR_INVALID, "marl: action %d is not a feasible socket (%d sockets)", act, o->nsock);
  return act;
}

/* the network is not asked (net=0): j goes where the hint says */
static int place_hint(marl_t *p, shoal_sched_t *s, shoal_job_t *j) {
  p->jobs++;
  int rc = shoal_sched_assign(s, j, p->cons, p->ncons);
  if (rc == SHOAL_ERR_INFEASIBLE) return fallback(p, s, j, "got an infeasible placement");
  return rc ? rc : 1;
}

static int marl_start(void *state, shoal_sched_t *s, shoal_job_t *j) {
  marl_t *p = state;
  if (j->gpus > s->cluster->gpus_free) return 0;
  if (j->arch == SHOAL_ARCH_PS) return fallback(p, s, j, "is a parameter-server job (the agents place all-reduce workers)");
  int a = route(p, s, j);
  if (!p->use_net && p->ncons > 0) return place_hint(p, s, j);
  if (a < 0) return fallback(p, s, j, "fits in no agent's partition");
  shoal__marl_view_t *v = &p->views[a];
  const shoal__marl_part_t *pt = &p->parts[a];
  shoal__marl_view_job(v, s, &p->colo, j, p->queued_gpus, p->cons, p->ncons > 0 ? p->ncons : 0, !p->spread);
  p->jobs++;
  shoal_marl_obs_t o;
  for (int w = 0; w < j->gpus; w++) {
    if (shoal__marl_view_step(v, s, j, &o) == 0)
      return fallback(p, s, j, "ran out of room in its partition (CPU or memory)");
    int act = decide(p, s, j, a, &o);
    if (act < 0) return act;
    shoal__marl_view_take(v, act);
  }
  /* the tentative workers as a placement by socket, machines in increasing order */
  int n = 0;
  for (int i = 0, k = 0; i < pt->nserv; i++) {
    int first = k;
    while (k < pt->nsock && pt->sock_serv[k] == i) k++;
    if (!v->t_serv[i]) continue;
    p->buf[n] = (shoal_place_t){pt->serv_m[i], v->t_serv[i], 0};
    uint8_t *w = p->want + (size_t)n * SHOAL_MAX_SOCKETS;
    memset(w, 0, SHOAL_MAX_SOCKETS);
    for (int q = first; q < k; q++) w[pt->sock_k[q]] = (uint8_t)v->t_sock[q];
    n++;
  }
  int rc = shoal_sched_assign_sockets(s, j, p->buf, n, p->want);
  if (rc == SHOAL_ERR_INFEASIBLE) return fallback(p, s, j, "got an infeasible placement");
  return rc ? rc : 1;
}

static void marl_stats(void *state, char *buf, size_t cap) {
  marl_t *p = state;
  snprintf(buf, cap, "agents=%d jobs=%ld decisions=%ld fallbacks=%ld", p->agents, p->jobs, p->decisions,
           p->fallbacks);
}

/* the spread the queue's waiting rule judges: the hint (consolidation's machines, NIC-aware with nic=1) */
static int marl_spread(void *state, shoal_sched_t *s, const shoal_job_t *j, shoal_place_t *out, int cap) {
  marl_t *p = state;
  route(p, s, j);
  int n = p->ncons < cap ? p->ncons : cap;
  memcpy(out, p->cons, (size_t)n * sizeof *out);
  return n;
}

const shoal_placer_ops_t shoal__placer_marl = {
    "marl", "the learned multi-agent placer (shipped weights; the policy `marl` takes its parameters)", marl_create,
    marl_destroy, marl_start, marl_stats, marl_spread};

/* ---- the policy: the FIFO queue with this placer, and the team reward's clock ---- */

/* wait: the queue's waiting rule (fifo.c held()), judging the placer's hint */
static int policy_create(shoal_sched_t *s, const char *params, void **state) {
  long wait;
  int rc = shoal__param_long("marl", params, "wait", 1, 0, 2, &wait);
  return rc ? rc : shoal__fifo_with_placer(s, 0, (int)wait, &shoal__placer_marl, params, state);
}

static int policy_schedule(void *state, shoal_sched_t *s) {
  marl_t *p = shoal__fifo_placer_state(state);
  p->area += p->n_prev * (s->now - p->t_prev);
  p->t_prev = s->now;
  p->n_prev = s->nactive;
  double q = 0;
  for (int i = 0; i < s->nactive; i++)
    if (s->active[i]->state == SHOAL_JOB_WAIT) q += s->active[i]->gpus;
  p->queued_gpus = q;
  return shoal__fifo_schedule(state, s);
}

const shoal_policy_ops_t shoal__policy_marl = {
    "marl",
    "learned placement: FIFO queue (backfill), one agent per group of racks places each job worker by worker "
    "(hierarchical graph network, interference-aware features; docs/learned-placement.md)",
    "weights=shipped: weights file (python/shoal/marl.py writes it); agents=the file's: agents, each on a group of "
    "whole racks; fallback=consolidate: placer for a job no agent can place (consolidate, firstfit, loadbal, pack); "
    "spread=0: 1 lets a job use more machines than consolidation would give it (0: at most as many); nic=1: the "
    "consolidation feature of a job that spans machines avoids machines whose NIC other such jobs use (0: off); "
    "wait=1: a job that fits on one machine waits rather than span machines where it would share a NIC with "
    "another job that spans machines, while it has waited less than that is predicted to cost (2: with no limit; "
    "0: never waits); net=1: 0 places each job where the consolidation hint says, without the network (the "
    "rules alone)",
    policy_create,
    shoal__fifo_destroy,
    shoal__fifo_arrive,
    NULL,
    NULL,
    policy_schedule,
    shoal__fifo_stats,
};
