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
#include "sched/ps_greedy.h"
#include "sched/ps_larr.h"
#include "sched/ps_oasis.h"
#include "sched/ps_policy.h"
#include "sched/ps_replan.h"
#include "sim/sim.h"

int shoal_cmd_sim(int argc, char **argv);

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal sched run|lp-bound [shoal sim options]\n"
          "       shoal sched serve [options]   live controller beside Slurm (shoal sched serve --help, docs/live.md)\n"
          "       shoal sched decide-time [--machines LIST] [--jobs N] [--seed S] [--slot S] [--replank K]\n"
          "  run          = shoal sim --lower-bound: the policies on the event engine with shoal sim's metrics,\n"
          "                 plus the offline lower bound on total flow time in slots (--lb-slot S, --lb-time S)\n"
          "  lp-bound     = shoal sim --lower-bound --policy none: the lower bound of the workload alone\n"
          "                 (its horizon comes from a FIFO run to completion, not printed)\n"
          "  decide-time  decision time per arrival of larr:replan=0, larr (re-planning), greedy and oasis\n"
          "               (decide_ms_avg, decide_ms_max: wall ms per arrival, the names of shoal sim's columns;\n"
          "               decide_cpu_ms_avg: CPU ms of the same calls, decide-time only) on clusters of\n"
          "               --machines LIST (100,500,2000) x 8 GPUs preloaded to ~70%% of their GPU-slots by\n"
          "               greedy plans of Philly-like PS jobs; --jobs arrivals timed (20)\n"
          "see shoal sim --help for the workload, cluster and policy options\n");
}

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
  for (int i = 2; i < argc; i++) v[n++] = argv[i];
  int rc = shoal_cmd_sim(n, v);
  free(v);
  return rc;
}

/* CPU seconds of this process: decision times on a shared machine are
 * reported in CPU time too, since wall time includes other tenants. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* One cluster size: PS jobs from the synthetic generator (the planners' view
 * through the speed model), greedy plans committed until ~70% of the first
 * 20 slots' GPU-slots are taken, then `arrivals` jobs timed against that load
 * (not committed, so each sees the same load). */
static int decide_one(int machines, int arrivals, uint64_t seed, double slot_s, int replan_k) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = machines;
  cs.group[0].racks = machines >= 16 ? machines / 16 : 1;
  shoal_cluster_t *cl = NULL;
  shoal_speed_t *speed = NULL;
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  shoal__ps_cluster_t pc;
  memset(&pc, 0, sizeof pc);
  shoal_sched_t s;
  memset(&s, 0, sizeof s);
  shoal__ps_job_t *pj = NULL;
  shoal__ps_sched_t *Spre = NULL;
  int *act = NULL;
  double *rate = NULL;
  int rc, n = 0;
  if ((rc = shoal__cluster_create(&cs, &cl)) || (rc = shoal__speed_analytic_create(&speed))) goto out;
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.seed = seed;
  o.ps_fraction = 1;
  o.cluster_gpus = cl->gpus_total;
  o.max_gpus = 16;
  o.synth_jobs = (long)machines * 8 * 16 + arrivals; /* enough to preload 70% of 20 slots */
  if ((rc = shoal__synth_generate(&o, &w)) || (rc = shoal__workload_assign_models(&w, speed, cl, &o)) ||
      (rc = shoal__sched_init(&s, cl, speed, 16)) || (rc = shoal__ps_view_cluster(cl, &pc)))
    goto out;
  n = w.njobs;
  pj = calloc((size_t)n, sizeof *pj);
  Spre = calloc((size_t)n, sizeof *Spre);
  act = malloc(sizeof(int) * (size_t)n);
  rate = calloc((size_t)n, sizeof(double));
  if (!pj || !Spre || !act || !rate) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "decide-time: out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    shoal__ps_view(&s, &w.jobs[i], slot_s, 0, 0, &pj[i]);
    pj[i].id = i;
    shoal__ps_sched_init(&Spre[i], 0);
  }
  shoal__ps_replan_params_t rp;
  shoal__ps_replan_defaults(&rp);
  rp.replan_k = replan_k;
  rp.larr.hmax = 2000;
  rp.larr.seed = seed;
  shoal__ps_oasis_params_t op;
  shoal__ps_oasis_defaults(&op);
  op.hmax = op.T = 2000;
  double gpus = 0, target = 0.7 * cl->gpus_total * 20;
  int i = 0, na = 0;
  for (; i < n - arrivals && gpus < target; i++) {
    shoal__ps_sched_t S;
    if (shoal__ps_greedy(&pc, &pj[i], 0, 200, rp.larr.theta, &S)) continue;
    for (int k = 0; k < S.len; k++) {
      int W, P;
      shoal__ps_slot_totals(&S.slot[k], &W, &P);
      if (S.start + k < 20) gpus += W;
    }
    if ((rc = shoal__ps_commit(&pc, &pj[i], &S))) {
      shoal__ps_sched_free(&S);
      goto out;
    }
    Spre[i] = S;
    act[na++] = i;
  }
  shoal__ps_oasis_est_t est;
  shoal__ps_oasis_est_init(&est);
  for (int k = 0; k < i; k++) shoal__ps_oasis_observe(&est, &pc, &pj[k], &op);
  /* per policy (shoal sim's names): wall ms mean and max, CPU ms mean */
  enum { P_LARR0, P_LARR, P_GREEDY, P_OASIS, NPOL };
  static const char *const pname[NPOL] = {"larr:replan=0", "larr", "greedy", "oasis"};
  double wsum[NPOL] = {0}, wmax[NPOL] = {0}, csum[NPOL] = {0};
  long rel = 0;
  int m = 0;
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
  for (int k = i; k < n && m < arrivals; k++, m++) {
    shoal__ps_sched_t S;
    TIMED(P_LARR0, if (!shoal__ps_larr(&pc, &pj[k], 0, &rp.larr, &S, &st)) shoal__ps_sched_free(&S));
    TIMED(P_GREEDY, if (!shoal__ps_greedy(&pc, &pj[k], 0, rp.larr.hmax, rp.larr.theta, &S)) shoal__ps_sched_free(&S));
    shoal__ps_oasis_observe(&est, &pc, &pj[k], &op);
    double mu;
    TIMED(P_OASIS, if (!shoal__ps_oasis(&pc, &pj[k], 0, &op, &est, &mu, &S)) shoal__ps_sched_free(&S));
    /* larr with re-planning: the whole batch (release, plan the new job,
     * re-plan the released) on copies, so every arrival sees the same load */
    shoal__ps_cluster_t cc;
    shoal__ps_sched_t *Sc = calloc((size_t)n, sizeof *Sc); /* jobs past i: empty */
    int def[1], ndef = 0, nrel = 0, batch[1] = {k};
    if (!Sc || (rc = shoal__ps_cluster_copy(&cc, &pc))) {
      free(Sc);
      rc = rc ? rc : shoal__seterr(SHOAL_ERR_NOMEM, "decide-time");
      goto out;
    }
    for (int q = 0; q < i && !rc; q++) rc = shoal__ps_sched_copy(&Sc[q], &Spre[q]);
    if (!rc) TIMED(P_LARR, rc = shoal__ps_replan(&cc, pj, Sc, act, na, batch, 1, 0, &rp, 0, rate, &st2, def, &ndef, &nrel, NULL));
    rel += nrel;
    for (int q = 0; q < n; q++) shoal__ps_sched_free(&Sc[q]); /* the committed copies and the new job's plan */
    free(Sc);
    shoal__ps_cluster_free(&cc);
    if (rc) goto out;
  }
#undef TIMED
  if (m > 0) {
    for (int q = 0; q < NPOL; q++)
      printf("%-9d %-14s %9d %9.2f %13.2f %13.2f %17.2f\n", machines, pname[q], m, gpus / (cl->gpus_total * 20.0),
             1e3 * wsum[q] / m, 1e3 * wmax[q], 1e3 * csum[q] / m);
    printf("# %d machines: larr:replan=0 phases per arrival: greedy %.2f ms, LP %.2f ms (%.0f columns), rounding+repair %.2f ms;"
           " E_g - s = %.1f slots; larr re-plans %.1f of %d committed jobs per arrival (replank %d)\n",
           machines, 1e3 * st.t_greedy_s / m, 1e3 * st.t_lp_s / m, (double)st.lp_cols_sum / m, 1e3 * st.t_round_s / m,
           (double)st.e_g_sum / m, (double)rel / m, na, replan_k);
  }
  fflush(stdout);
out:
  if (Spre)
    for (int q = 0; q < n; q++) shoal__ps_sched_free(&Spre[q]);
  free(Spre);
  free(pj);
  free(act);
  free(rate);
  if (s.cluster) shoal__sched_fini(&s);
  shoal__ps_cluster_free(&pc);
  shoal__workload_free(&w);
  shoal__speed_destroy(speed);
  shoal__cluster_destroy(cl);
  return rc;
}

/* 0, a negative shoal_status_t, or 1 when -h / --help was given */
static int cmd_decide(int argc, char **argv) {
  char mlist[256] = "100,500,2000";
  long arrivals = 20, seed = 1, rk = 32;
  double slot = 3600;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1; /* usage on stdout, exit 0 */
    if (!v) return shoal__seterr(SHOAL_ERR_INVALID, "decide-time: %s needs a value", a);
    i++;
    int rc = 0;
    if (!strcmp(a, "--machines")) {
      if (strlen(v) >= sizeof mlist || shoal__list_has_empty(v, ','))
        return shoal__seterr(SHOAL_ERR_INVALID, "decide-time: --machines '%s': expected machine counts "
                             "separated by commas (e.g. 100,500)", v);
      snprintf(mlist, sizeof mlist, "%s", v);
    }
    else if (!strcmp(a, "--jobs")) rc = shoal__parse_long(a, v, 1, 100000, &arrivals);
    else if (!strcmp(a, "--seed")) rc = shoal__parse_long(a, v, 0, 1L << 62, &seed);
    else if (!strcmp(a, "--replank")) rc = shoal__parse_long(a, v, 0, 100000, &rk);
    else if (!strcmp(a, "--slot")) rc = shoal__parse_double(a, v, 1, 1e7, &slot);
    else return shoal__seterr(SHOAL_ERR_INVALID, "decide-time: unknown option %s", a);
    if (rc) return rc;
  }
  /* the names of shoal sim's decision-cost columns: wall ms per decision
   * (here: per arrival), plus the CPU time of the same calls */
  printf("%-9s %-14s %9s %9s %13s %13s %17s\n", "machines", "policy", "arrivals", "gpu_load", "decide_ms_avg", "decide_ms_max",
         "decide_cpu_ms_avg");
  for (char *sv = NULL, *tok = strtok_r(mlist, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    long h;
    int rc = shoal__parse_long("--machines", tok, 1, 100000, &h);
    if (rc || (rc = decide_one((int)h, (int)arrivals, (uint64_t)seed, slot, (int)rk))) return rc;
  }
  return 0;
}

int shoal_sched_serve(int argc, char **argv);

int shoal_cmd_sched(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "run")) {
    const char *extra[] = {"--lower-bound"};
    return forward(argc, argv, extra, 1);
  }
  if (!strcmp(argv[1], "lp-bound")) {
    const char *extra[] = {"--lower-bound", "--policy", "none"};
    return forward(argc, argv, extra, 3);
  }
  if (!strcmp(argv[1], "serve")) return shoal_sched_serve(argc, argv); /* cmd_live.c */
  if (!strcmp(argv[1], "decide-time")) {
    int rc = cmd_decide(argc, argv);
    if (rc == 1) {
      usage(stdout);
      return 0;
    }
    if (rc) {
      fprintf(stderr, "shoal sched: %s\n", shoal_last_error());
      return 1;
    }
    return 0;
  }
  fprintf(stderr, "shoal sched: unknown subcommand '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
