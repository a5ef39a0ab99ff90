/* The simulator's step interface for training the learned placer
 * (include/shoal/sim.h, shoal_sim_env_*): the engine runs the policy `marl`
 * on a thread of its own; the placer's decider (policies/marl.h) hands each
 * decision to the caller and waits for its action. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "sched/model/interference.h"
#include "sched/policies/marl.h"
#include "shoal/sim.h"
#include "sim/sim.h"

/* how long one side waits for the other: a decision of the engine, or the caller's action */
#define WAIT_S 3600

enum { IDLE, DECIDING, ACTED, ENDED };

struct shoal_sim_env {
  shoal_workload_t w;
  shoal_workload_opts_t wo;
  shoal_cluster_spec_t cs;
  shoal_speed_t *speed;
  shoal_interference_t *im;
  shoal_sim_config_t cfg;
  char params[4400];            /* the marl policy's */
  /* the episode */
  pthread_t thread;
  int running;                  /* a thread to join */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state, action, abort, rc;
  char err[1024];
  shoal__marl_step_t step;
  shoal_sim_result_t res;
  int have_res;
};

/* ---- configuration ---- */

typedef struct {
  char trace[4096], interference[4096], speed[16], throughputs[4096], gpu[16], weights[4096], fallback[32];
  double window_start, window_end, load_scale, load, oversub, restart_cost;
  long sample, synthetic, machines, gpus, racks, sockets, agents, seed;
} env_conf_t;

static int conf_set(env_conf_t *k, const char *key, const char *val) {
  struct { const char *name; char *str; size_t cap; double *d; long *l; double lo, hi; } t[] = {
      {"trace", k->trace, sizeof k->trace, NULL, NULL, 0, 0},
      {"interference", k->interference, sizeof k->interference, NULL, NULL, 0, 0},
      {"speed", k->speed, sizeof k->speed, NULL, NULL, 0, 0},
      {"throughputs", k->throughputs, sizeof k->throughputs, NULL, NULL, 0, 0},
      {"gpu", k->gpu, sizeof k->gpu, NULL, NULL, 0, 0},
      {"weights", k->weights, sizeof k->weights, NULL, NULL, 0, 0},
      {"fallback", k->fallback, sizeof k->fallback, NULL, NULL, 0, 0},
      {"window_start", NULL, 0, &k->window_start, NULL, 0, SHOAL__SIM_MAX_S},
      {"window_end", NULL, 0, &k->window_end, NULL, 0, SHOAL__SIM_MAX_S},
      {"load_scale", NULL, 0, &k->load_scale, NULL, 1e-3, 1e3},
      {"load", NULL, 0, &k->load, NULL, SHOAL__SIM_LOAD_MIN, SHOAL__SIM_LOAD_MAX},
      {"oversub", NULL, 0, &k->oversub, NULL, 1, 1e6},
      {"restart_cost", NULL, 0, &k->restart_cost, NULL, 0, SHOAL__SIM_RESTART_COST_MAX},
      {"sample", NULL, 0, NULL, &k->sample, 0, 1e8},
      {"synthetic", NULL, 0, NULL, &k->synthetic, 0, SHOAL__SIM_SYNTH_JOBS_MAX},
      {"machines", NULL, 0, NULL, &k->machines, 1, 1e6},
      {"gpus", NULL, 0, NULL, &k->gpus, 1, SHOAL_MAX_GPUS_PER_MACHINE},
      {"racks", NULL, 0, NULL, &k->racks, 1, 1e6},
      {"sockets", NULL, 0, NULL, &k->sockets, 0, 8},
      {"agents", NULL, 0, NULL, &k->agents, 1, SHOAL_MARL_MAX_AGENTS},
      {"seed", NULL, 0, NULL, &k->seed, 1, 9.0e15},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if (strcmp(key, t[i].name)) continue;
    if (t[i].str) {
      if (strlen(val) >= t[i].cap)
        return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: %s: longer than %zu characters", key, t[i].cap - 1);
      strcpy(t[i].str, val);
      return 0;
    }
    char *e;
    errno = 0;
    double v = strtod(val, &e);
    if (!*val || *e || errno || !(v >= t[i].lo && v <= t[i].hi) || (t[i].l && v != floor(v)))
      return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: %s=%s: expected %s in [%g, %g]", key, val,
                           t[i].l ? "an integer" : "a number", t[i].lo, t[i].hi);
    if (t[i].d) *t[i].d = v;
    else *t[i].l = (long)v;
    return 0;
  }
  return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: unknown key '%s' (trace, window_start, window_end, sample, load_scale, "
                       "synthetic, load, machines, gpus, racks, oversub, sockets, interference, speed, throughputs, "
                       "gpu, agents, weights, fallback, restart_cost, seed)", key);
}

static int conf_parse(const char *config, env_conf_t *k) {
  memset(k, 0, sizeof *k);
  strcpy(k->interference, "shipped");
  strcpy(k->speed, "analytic");
  strcpy(k->throughputs, "../shared/data/gavel/throughputs.json");
  strcpy(k->gpu, "v100");
  strcpy(k->fallback, "consolidate");
  k->load_scale = 1, k->oversub = 1, k->restart_cost = 30, k->load = 0.8;
  k->machines = 16, k->gpus = 8, k->racks = 4, k->agents = 1, k->seed = 1;
  const char *p = config ? config : "";
  char tok[4200];
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (!*p) break;
    size_t n = strcspn(p, " \t\n");
    if (n >= sizeof tok) return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: a setting longer than %zu characters", sizeof tok);
    memcpy(tok, p, n);
    tok[n] = 0;
    p += n;
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok) return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: '%s' is not key=value", tok);
    *eq = 0;
    int rc = conf_set(k, tok, eq + 1);
    if (rc) return rc;
  }
  if (k->racks > k->machines) return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: racks=%ld > machines=%ld", k->racks, k->machines);
  if (k->sockets > k->gpus) return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: sockets=%ld > gpus=%ld", k->sockets, k->gpus);
  if (!k->trace[0] && !k->synthetic) return shoal__seterr(SHOAL_ERR_CONFIG, "sim env: give trace=FILE or synthetic=N");
  return 0;
}

static int build(shoal_sim_env_t *env, const env_conf_t *k) {
  shoal__cluster_spec_default(&env->cs);
  shoal_cluster_group_t *g = &env->cs.group[0];
  g->machines = (int)k->machines, g->racks = (int)k->racks, g->per_machine.gpus = (int)k->gpus;
  g->sockets = (int)k->sockets;
  env->cs.net.oversub = k->oversub;
  int rc;
  if (!strcmp(k->speed, "analytic")) rc = shoal__speed_analytic_create(&env->speed);
  else if (!strcmp(k->speed, "table")) rc = shoal__speed_table_create(k->throughputs, k->gpu, 1, &env->speed);
  else rc = shoal__seterr(SHOAL_ERR_CONFIG, "sim env: speed=%s: expected analytic or table", k->speed);
  if (rc) return rc;
  if (!strcmp(k->interference, "shipped")) rc = shoal__interference_shipped(&env->im);
  else if (strcmp(k->interference, "off")) rc = shoal__interference_load(k->interference, &env->im);
  if (rc) return rc;
  shoal_cluster_t *c;
  if ((rc = shoal__cluster_create(&env->cs, &c))) return rc;
  shoal__workload_opts_default(&env->wo);
  env->wo.seed = (uint64_t)k->seed;
  env->wo.cluster_gpus = c->gpus_total;
  env->wo.max_gpus = c->gpus_total;
  env->wo.window_start_s = k->window_start;
  env->wo.window_end_s = k->window_end;
  env->wo.sample = k->sample;
  env->wo.load = k->load;
  if (k->synthetic) env->wo.synth_jobs = k->synthetic;
  rc = k->trace[0] ? shoal__trace_read(k->trace, &env->wo, env->speed, &env->w) : shoal__synth_generate(&env->wo, &env->w);
  if (!rc) shoal__workload_scale_arrivals(&env->w, k->load_scale);
  if (!rc) rc = shoal__workload_assign_models(&env->w, env->speed, c, &env->wo);
  shoal__cluster_destroy(c);
  if (rc) return rc;
  shoal__sim_config_default(&env->cfg);
  env->cfg.restart_cost = k->restart_cost;
  env->cfg.seed = (uint64_t)k->seed;
  env->cfg.interference = env->im;
  snprintf(env->params, sizeof env->params, "agents=%ld:fallback=%s%s%s", k->agents, k->fallback,
           k->weights[0] ? ":weights=" : "", k->weights);
  return 0;
}

/* ---- the episode thread and the hand-over ---- */

static void deadline(struct timespec *ts) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += WAIT_S;
}

/* engine thread: a decision waits; hand it over and wait for the action */
static int decider(void *arg, const shoal__marl_step_t *st) {
  shoal_sim_env_t *env = arg;
  struct timespec ts;
  deadline(&ts);
  pthread_mutex_lock(&env->mu);
  env->step = *st;
  env->state = DECIDING;
  pthread_cond_broadcast(&env->cv);
  int rc = 0;
  while (env->state == DECIDING && !env->abort && rc == 0) rc = pthread_cond_timedwait(&env->cv, &env->mu, &ts);
  int act = env->abort ? shoal__seterr(SHOAL_ERR_ABORTED, "sim env: episode abandoned")
          : env->state != ACTED ? shoal__seterr(SHOAL_ERR_TIMEOUT, "sim env: no action within %d s", WAIT_S)
                                : env->action;
  pthread_mutex_unlock(&env->mu);
  return act;
}

static void *episode(void *arg) {
  shoal_sim_env_t *env = arg;
  shoal__marl_set_decider(decider, env);
  const shoal_policy_ops_t *ops = shoal__policy_find("marl");
  shoal_sim_result_t r;
  memset(&r, 0, sizeof r);
  int rc = ops ? shoal__sim_run(&env->w, &env->cs, env->speed, ops, env->params, &env->cfg, &r)
               : shoal__seterr(SHOAL_ERR_INTERNAL, "sim env: no policy marl");
  shoal__marl_set_decider(NULL, NULL);
  pthread_mutex_lock(&env->mu);
  env->rc = rc;
  if (rc) snprintf(env->err, sizeof env->err, "%s", shoal_last_error());
  else env->res = r, env->have_res = 1;
  env->state = ENDED;
  pthread_cond_broadcast(&env->cv);
  pthread_mutex_unlock(&env->mu);
  return NULL;
}

static void fill_obs(const shoal_sim_env_t *env, shoal_sim_obs_t *o) {
  const shoal__marl_step_t *st = &env->step;
  memset(o, 0, sizeof *o);
  o->agent = st->agent, o->agents = st->agents;
  o->nsockets = st->obs->nsock, o->nservers = st->obs->nserv, o->nracks = st->obs->nrack;
  o->fsocket = SHOAL_MARL_FS, o->fserver = SHOAL_MARL_FM, o->frack = SHOAL_MARL_FR, o->fjob = SHOAL_MARL_FJ;
  o->socket = st->obs->xs, o->server = st->obs->xm, o->rack = st->obs->xr, o->job = st->obs->xj;
  o->socket_server = st->obs->sock_serv, o->server_rack = st->obs->serv_rack, o->mask = st->obs->mask;
  o->logits = st->logits;
  o->job_id = st->job, o->worker = st->worker, o->workers = st->workers;
  o->now = st->now, o->area = st->area, o->jobs_in_system = st->jobs_in_system;
}

/* caller: wait until the engine decides or ends */
static int await(shoal_sim_env_t *env, shoal_sim_obs_t *obs) {
  struct timespec ts;
  deadline(&ts);
  pthread_mutex_lock(&env->mu);
  int w = 0;
  while (env->state != DECIDING && env->state != ENDED && w == 0) w = pthread_cond_timedwait(&env->cv, &env->mu, &ts);
  int st = env->state, rc = env->rc;
  if (st == DECIDING) fill_obs(env, obs);
  pthread_mutex_unlock(&env->mu);
  if (st == DECIDING) return 1;
  if (st != ENDED) return shoal__seterr(SHOAL_ERR_TIMEOUT, "sim env: the simulation decided nothing within %d s", WAIT_S);
  pthread_join(env->thread, NULL);
  env->running = 0;
  if (rc) return shoal__seterr(rc, "%s", env->err);
  return 0;
}

static void stop(shoal_sim_env_t *env) {
  if (!env->running) return;
  pthread_mutex_lock(&env->mu);
  env->abort = 1;
  pthread_cond_broadcast(&env->cv);
  pthread_mutex_unlock(&env->mu);
  pthread_join(env->thread, NULL);
  env->running = 0;
}

int shoal_sim_env_create(const char *config, shoal_sim_env_t **out) {
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "sim env: out required");
  env_conf_t *k = malloc(sizeof *k);
  shoal_sim_env_t *env = calloc(1, sizeof *env);
  if (!k || !env) {
    free(k);
    free(env);
    return shoal__seterr(SHOAL_ERR_NOMEM, "sim env: out of memory");
  }
  pthread_mutex_init(&env->mu, NULL);
  pthread_cond_init(&env->cv, NULL);
  int rc = conf_parse(config, k);
  if (!rc) rc = build(env, k);
  free(k);
  if (rc) {
    shoal_sim_env_destroy(env);
    return rc;
  }
  *out = env;
  return 0;
}

int shoal_sim_env_reset(shoal_sim_env_t *env, uint64_t seed, shoal_sim_obs_t *obs) {
  if (!env || !obs) return shoal__seterr(SHOAL_ERR_INVALID, "sim env: env and obs required");
  stop(env);
  if (env->have_res) shoal__sim_result_free(&env->res);
  env->have_res = 0;
  shoal_cluster_t *c;
  int rc = shoal__cluster_create(&env->cs, &c);
  if (rc) return rc;
  shoal_workload_opts_t wo = env->wo;
  if (seed) wo.seed = seed;
  rc = shoal__workload_assign_models(&env->w, env->speed, c, &wo);
  shoal__cluster_destroy(c);
  if (rc) return rc;
  env->state = IDLE, env->abort = 0, env->rc = 0;
  if ((rc = pthread_create(&env->thread, NULL, episode, env)))
    return shoal__seterr(SHOAL_ERR_SYSTEM, "sim env: cannot start the episode's thread: %s", strerror(rc));
  env->running = 1;
  return await(env, obs);
}

int shoal_sim_env_step(shoal_sim_env_t *env, int action, shoal_sim_obs_t *obs) {
  if (!env || !obs) return shoal__seterr(SHOAL_ERR_INVALID, "sim env: env and obs required");
  pthread_mutex_lock(&env->mu);
  int st = env->state;
  if (st == DECIDING) {
    if (action < 0 || action >= env->step.obs->nsock || !env->step.obs->mask[action]) {
      int n = env->step.obs->nsock;
      pthread_mutex_unlock(&env->mu);
      return shoal__seterr(SHOAL_ERR_INVALID, "sim env: action %d is not a socket with mask 1 (0..%d)", action, n - 1);
    }
    env->action = action;
    env->state = ACTED;
    pthread_cond_broadcast(&env->cv);
  }
  pthread_mutex_unlock(&env->mu);
  if (st != DECIDING) return shoal__seterr(SHOAL_ERR_INVALID, "sim env: no decision is waiting (call reset)");
  return await(env, obs);
}

int shoal_sim_env_report(shoal_sim_env_t *env, shoal_sim_report_t *out, double *area_out) {
  if (!env || !out) return shoal__seterr(SHOAL_ERR_INVALID, "sim env: env and out required");
  if (!env->have_res) return shoal__seterr(SHOAL_ERR_INVALID, "sim env: no finished episode");
  shoal_metrics_t m;
  int rc = shoal__metrics_compute(&env->w, &env->res, &m);
  if (rc) return rc;
  memset(out, 0, sizeof *out);
  out->jobs = m.jobs, out->unfinished = m.unfinished;
  out->jct_avg_s = m.jct_avg, out->jct_p50_s = m.jct_p50, out->jct_p95_s = m.jct_p95, out->jct_p99_s = m.jct_p99;
  out->makespan_s = m.makespan, out->queue_avg_s = m.queue_avg, out->gpu_util = m.util;
  out->preemptions = m.preemptions, out->reallocations = m.reallocations;
  out->ftf_max = m.ftf_max, out->ftf_avg = m.ftf_avg;
  out->wall_s = env->res.wall_s, out->events = env->res.events;
  if (area_out) {
    double a = 0;
    for (long i = 0; i < env->w.njobs; i++)
      if (env->w.jobs[i].finish >= 0) a += env->w.jobs[i].finish - env->w.jobs[i].arrival;
    *area_out = a;
  }
  return 0;
}

void shoal_sim_env_destroy(shoal_sim_env_t *env) {
  if (!env) return;
  stop(env);
  if (env->have_res) shoal__sim_result_free(&env->res);
  shoal__workload_free(&env->w);
  shoal__speed_destroy(env->speed);
  shoal__interference_free(env->im);
  pthread_mutex_destroy(&env->mu);
  pthread_cond_destroy(&env->cv);
  free(env);
}
