/* `shoal sched`: what the slot planners offer beyond `shoal sim`, on the same
 * engine, workloads and metrics (docs/scheduling.md).
 *   shoal sched run [shoal sim options]       = shoal sim --lower-bound: every policy on the
 *                                               event engine, plus the offline lower bound
 *   shoal sched lp-bound [shoal sim options]  the lower bound alone (no policy runs)
 *   shoal sched decide-time [options]         planner decision time per arrival on a loaded cluster */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "sched/policy.h"
#include "sched/planners/greedy.h"
#include "sched/planners/larr.h"
#include "sched/planners/oasis.h"
#include "sched/policies/slotted.h"
#include "sched/planners/replan.h"
#include "sim/sim.h"
#include "options.h"

int shoal_cmd_sim(int argc, char **argv);

/* shoal sim with extra leading options */
static int forward(int argc, char **argv, const char *const *extra, int nextra) {
  char **v = calloc((size_t)(argc + nextra + 1), sizeof *v);
  if (!v) {
    fprintf(stderr, "shoal sched: out of memory\n");
    return 1;
  }
  int n = 0;
  v[n++] = "sim";
  for (int i = 0; i < nextra; i++) v[n++] = (char *)extra[i];
  for (int i = 1; i < argc; i++) v[n++] = argv[i];
  int rc = shoal_cmd_sim(n, v);
  free(v);
  return rc;
}

static int cmd_run(int argc, char **argv) {
  const char *extra[] = {"--lower-bound"};
  return forward(argc, argv, extra, 1);
}

static int cmd_lp_bound(int argc, char **argv) {
  const char *extra[] = {"--lower-bound", "--policy", "none"};
  return forward(argc, argv, extra, 3);
}

/* CPU seconds of this process: decision times on a shared machine are
 * reported in CPU time too, since wall time includes other tenants. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* One cluster size of decide-time: the cluster, PS jobs from the synthetic generator (the planners' view
 * through the speed model), and the greedy plans committed before the timed arrivals. */
typedef struct decide {
  int machines, arrivals, replan_k;
  uint64_t seed;
  double slot_s;
  shoal_cluster_t *cl;
  shoal_speed_t *speed;
  shoal_workload_t w;
  shoal__ps_cluster_t pc;
  shoal_sched_t s;
  shoal__ps_job_t *pj;
  shoal__ps_sched_t *Spre; /* the committed plans */
  int *act;                /* the committed jobs */
  double *rate;
  int n, i, na;            /* jobs, jobs preloaded, jobs committed */
  double gpus;             /* GPU-slots taken in the first 20 slots */
  shoal__ps_replan_params_t rp;
  shoal__ps_oasis_params_t op;
} decide_t;

/* Greedy plans committed until ~70% of the first 20 slots' GPU-slots are taken; 0 or a status. */
static int decide_preload(decide_t *D) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = D->machines;
  cs.group[0].racks = D->machines >= 16 ? D->machines / 16 : 1;
  int rc;
  if ((rc = shoal__cluster_create(&cs, &D->cl)) || (rc = shoal__speed_analytic_create(&D->speed))) return rc;
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.seed = D->seed;
  o.ps_fraction = 1;
  o.cluster_gpus = D->cl->gpus_total;
  o.max_gpus = 16;
  o.synth_jobs = (long)D->machines * 8 * 16 + D->arrivals; /* enough to preload 70% of 20 slots */
  if ((rc = shoal__synth_generate(&o, &D->w)) || (rc = shoal__workload_assign_models(&D->w, D->speed, D->cl, &o)) ||
      (rc = shoal__sched_init(&D->s, D->cl, D->speed, 16)) || (rc = shoal__ps_view_cluster(D->cl, &D->pc)))
    return rc;
  int n = D->n = D->w.njobs;
  D->pj = calloc((size_t)n, sizeof *D->pj);
  D->Spre = calloc((size_t)n, sizeof *D->Spre);
  D->act = malloc(sizeof(int) * (size_t)n);
  D->rate = calloc((size_t)n, sizeof(double));
  if (!D->pj || !D->Spre || !D->act || !D->rate) return shoal__seterr(SHOAL_ERR_NOMEM, "decide-time: out of memory");
  for (int i = 0; i < n; i++) {
    shoal__ps_view(&D->s, &D->w.jobs[i], D->slot_s, 0, 0, &D->pj[i]);
    D->pj[i].id = i;
    shoal__ps_sched_init(&D->Spre[i], 0);
  }
  shoal__ps_replan_defaults(&D->rp);
  D->rp.replan_k = D->replan_k;
  D->rp.larr.hmax = 2000;
  D->rp.larr.seed = D->seed;
  shoal__ps_oasis_defaults(&D->op);
  D->op.hmax = D->op.T = 2000;
  double target = 0.7 * D->cl->gpus_total * 20;
  for (D->i = 0; D->i < n - D->arrivals && D->gpus < target; D->i++) {
    shoal__ps_sched_t S;
    if (shoal__ps_greedy(&D->pc, &D->pj[D->i], 0, 200, D->rp.larr.theta, &S)) continue;
    for (int k = 0; k < S.len; k++) {
      int W, P;
      shoal__ps_slot_totals(&S.slot[k], &W, &P);
      if (S.start + k < 20) D->gpus += W;
    }
    if ((rc = shoal__ps_commit(&D->pc, &D->pj[D->i], &S))) {
      shoal__ps_sched_free(&S);
      return rc;
    }
    D->Spre[D->i] = S;
    D->act[D->na++] = D->i;
  }
  return 0;
}

/* larr with re-planning on arrival k: the whole batch (release, plan the new job, re-plan the released) on
 * copies, so every arrival sees the same load; the jobs it released added to *rel, the re-planning's wall
 * and CPU time in *dt and *dcpu. 0 or a status. */
static int decide_replan(decide_t *D, int k, shoal__ps_larr_stats_t *st, long *rel, double *dt, double *dcpu) {
  shoal__ps_cluster_t cc;
  shoal__ps_sched_t *Sc = calloc((size_t)D->n, sizeof *Sc); /* jobs past i: empty */
  int def[1], ndef = 0, nrel = 0, batch[1] = {k}, rc = 0;
  if (!Sc || (rc = shoal__ps_cluster_copy(&cc, &D->pc))) {
    free(Sc);
    return rc ? rc : shoal__seterr(SHOAL_ERR_NOMEM, "decide-time");
  }
  for (int q = 0; q < D->i && !rc; q++) rc = shoal__ps_sched_copy(&Sc[q], &D->Spre[q]);
  if (!rc) {
    double t0 = shoal__now_s(), c0 = cpu_s();
    rc = shoal__ps_replan(&cc, D->pj, Sc, D->act, D->na, batch, 1, 0, &D->rp, D->rate, st, def, &ndef, &nrel, NULL);
    *dt = shoal__now_s() - t0;
    *dcpu = cpu_s() - c0;
  }
  *rel += nrel;
  for (int q = 0; q < D->n; q++) shoal__ps_sched_free(&Sc[q]); /* the committed copies and the new job's plan */
  free(Sc);
  shoal__ps_cluster_free(&cc);
  return rc;
}

/* The timed arrivals against the preloaded cluster (not committed, so each sees the same load): a row per
 * planner (shoal sim's names: wall ms mean and max, CPU ms mean) and the phases of larr. 0 or a status. */
static int decide_time(decide_t *D) {
  shoal__ps_oasis_est_t est;
  shoal__ps_oasis_est_init(&est);
  for (int k = 0; k < D->i; k++) shoal__ps_oasis_observe(&est, &D->pc, &D->pj[k], &D->op);
  enum { P_LARR0, P_LARR, P_GREEDY, P_OASIS, NPOL };
  /* shoal sim's names of what each row times: the planners' views here hold no placement and keep the rates
   * at the requested size (restart=0:fit=0), and greedy and oasis plan each arrival alone (replan=0) */
  static const char *const pname[NPOL] = {"larr:replan=0", "larr:restart=0:fit=0", "greedy:replan=0", "oasis"};
  double wsum[NPOL] = {0}, wmax[NPOL] = {0}, csum[NPOL] = {0};
  long rel = 0;
  int m = 0, rc = 0;
  shoal__ps_larr_stats_t st = {0}, st2 = {0};
#define TIMED(pol, call)                                        \
  do {                                                          \
    double t0_ = shoal__now_s(), c0_ = cpu_s();                 \
    call;                                                       \
    double dt_ = shoal__now_s() - t0_;                          \
    wsum[pol] += dt_;                                           \
    csum[pol] += cpu_s() - c0_;                                 \
    if (dt_ > wmax[pol]) wmax[pol] = dt_;                       \
  } while (0)
  for (int k = D->i; k < D->n && m < D->arrivals; k++, m++) {
    shoal__ps_sched_t S;
    TIMED(P_LARR0, if (!shoal__ps_larr(&D->pc, &D->pj[k], 0, &D->rp.larr, &S, &st)) shoal__ps_sched_free(&S));
    TIMED(P_GREEDY, if (!shoal__ps_greedy(&D->pc, &D->pj[k], 0, D->rp.larr.hmax, D->rp.larr.theta, &S)) shoal__ps_sched_free(&S));
    shoal__ps_oasis_observe(&est, &D->pc, &D->pj[k], &D->op);
    double mu, dt = 0, dcpu = 0;
    TIMED(P_OASIS, if (!shoal__ps_oasis(&D->pc, &D->pj[k], 0, &D->op, &est, &mu, &S)) shoal__ps_sched_free(&S));
    if ((rc = decide_replan(D, k, &st2, &rel, &dt, &dcpu))) return rc;
    wsum[P_LARR] += dt;
    csum[P_LARR] += dcpu;
    if (dt > wmax[P_LARR]) wmax[P_LARR] = dt;
  }
#undef TIMED
  if (m > 0) {
    for (int q = 0; q < NPOL; q++)
      printf("%-9d %-21s %9d %9.2f %13.2f %13.2f %17.2f\n", D->machines, pname[q], m, D->gpus / (D->cl->gpus_total * 20.0),
             1e3 * wsum[q] / m, 1e3 * wmax[q], 1e3 * csum[q] / m);
    printf("# %d machines: larr:replan=0 phases per arrival: greedy %.2f ms, LP %.2f ms (%.0f columns), rounding+repair %.2f ms;"
           " E_g - s = %.1f slots; larr re-plans %.1f of %d committed jobs per arrival (replank %d)\n",
           D->machines, 1e3 * st.t_greedy_s / m, 1e3 * st.t_lp_s / m, (double)st.lp_cols_sum / m, 1e3 * st.t_round_s / m,
           (double)st.e_g_sum / m, (double)rel / m, D->na, D->replan_k);
  }
  fflush(stdout);
  return 0;
}

static int decide_one(int machines, int arrivals, uint64_t seed, double slot_s, int replan_k) {
  decide_t D = {.machines = machines, .arrivals = arrivals, .seed = seed, .slot_s = slot_s, .replan_k = replan_k};
  int rc = decide_preload(&D);
  if (!rc) rc = decide_time(&D);
  if (D.Spre)
    for (int q = 0; q < D.n; q++) shoal__ps_sched_free(&D.Spre[q]);
  free(D.Spre);
  free(D.pj);
  free(D.act);
  free(D.rate);
  if (D.s.cluster) shoal__sched_fini(&D.s);
  shoal__ps_cluster_free(&D.pc);
  shoal__workload_free(&D.w);
  shoal__speed_destroy(D.speed);
  shoal__cluster_destroy(D.cl);
  return rc;
}

typedef struct decide_cli {
  const char *machines;
  long arrivals, seed, replan_k;
  double slot;
} decide_cli_t;

#define SHOAL_OPTS_STRUCT decide_cli_t
static const shoal_opt_t decide_opts[] = {
    OPT_STRING("--machines", "LIST", machines, "cluster sizes (x 8 GPUs), separated by commas",
               .expect = "machine counts separated by commas"),
    OPT_LONG("--jobs", "N", arrivals, 1, 100000, "arrivals timed per cluster size"),
    OPT_LONG("--seed", "S", seed, 0, 1L << 62, "seed of the synthetic jobs and of larr"),
    OPT_DOUBLE("--slot", "S", slot, 1, 1e7, "the planners' slot, seconds"),
    OPT_LONG("--replank", "K", replan_k, 0, 100000, "larr: committed jobs re-planned per arrival"),
    OPT_END,
};

static const shoal_opts_spec_t decide_spec = {
    .name = "shoal sched decide-time",
    .usage = "usage: shoal sched decide-time [--machines LIST] [--jobs N] [--seed S] [--slot S] [--replank K]\n"
             "Decision time per arrival of larr:replan=0, larr (re-planning, without the restart cost and fitted\n"
             "rates), greedy:replan=0 and oasis (decide_ms_avg,\n"
             "decide_ms_max: wall ms per arrival, the names of shoal sim's columns; decide_cpu_ms_avg: CPU ms of\n"
             "the same calls) on clusters of --machines x 8 GPUs preloaded to ~70% of their GPU-slots by greedy\n"
             "plans of Philly-like PS jobs.\n",
    .opts = decide_opts,
};

static int cmd_decide(int argc, char **argv) {
  decide_cli_t c = {.machines = "100,500,2000", .arrivals = 20, .seed = 1, .replan_k = 32, .slot = 3600};
  int st = shoal_opts_parse(&decide_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  char mlist[256];
  if (strlen(c.machines) >= sizeof mlist || shoal__list_has_empty(c.machines, ',')) {
    fprintf(stderr, "shoal sched decide-time: --machines '%s': expected machine counts separated by commas (e.g. 100,500)\n",
            c.machines);
    return 2;
  }
  snprintf(mlist, sizeof mlist, "%s", c.machines);
  long h[64];
  int nh = 0;
  for (char *sv = NULL, *tok = strtok_r(mlist, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (nh == 64 || shoal__parse_long("--machines", tok, 1, 100000, &h[nh++])) {
      fprintf(stderr, "shoal sched decide-time: %s\n", nh == 64 ? "--machines: at most 64 sizes" : shoal_last_error());
      return 2;
    }
  }
  /* the names of shoal sim's decision-cost columns: wall ms per decision
   * (here: per arrival), plus the CPU time of the same calls */
  printf("%-9s %-21s %9s %9s %13s %13s %17s\n", "machines", "policy", "arrivals", "gpu_load", "decide_ms_avg", "decide_ms_max",
         "decide_cpu_ms_avg");
  for (int k = 0; k < nh; k++)
    if (decide_one((int)h[k], (int)c.arrivals, (uint64_t)c.seed, c.slot, (int)c.replan_k)) {
      fprintf(stderr, "shoal sched: %s\n", shoal_last_error());
      return 1;
    }
  return 0;
}

int shoal_sched_serve(int argc, char **argv);  /* cmd_live.c */
int shoal_sched_status(int argc, char **argv); /* cmd_live.c */

static const shoal_subcmd_t sched_subs[] = {
    {"run", cmd_run, "= shoal sim --lower-bound: the policies with shoal sim's metrics, plus the offline lower bound"},
    {"lp-bound", cmd_lp_bound, "= shoal sim --lower-bound --policy none: the lower bound of the workload alone"},
    {"serve", shoal_sched_serve, "the live controller beside Slurm (docs/live.md)"},
    {"status", shoal_sched_status, "what a running controller does, and why each job waits"},
    {"decide-time", cmd_decide, "decision time per arrival of the slot planners on a loaded cluster"},
    {NULL, NULL, NULL},
};

int shoal_cmd_sched(int argc, char **argv) {
  return shoal_opts_dispatch("shoal sched",
                             "usage: shoal sched run|lp-bound [shoal sim options]\n"
                             "       shoal sched serve [options]\n"
                             "       shoal sched status [--journal FILE] [--metrics]\n"
                             "       shoal sched decide-time [options]\n"
                             "What the slot planners offer beyond shoal sim, on the same engine, workloads and metrics\n"
                             "(docs/scheduling.md).\n",
                             sched_subs,
                             "\nrun and lp-bound take shoal sim's options (the lower bound's slot --lb-slot S, its LP time\n"
                             "--lb-time S; lp-bound's horizon comes from a FIFO run to completion, not printed): see\n"
                             "shoal sim --help.\n",
                             argc, argv);
}
