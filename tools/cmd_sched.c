/* `shoal sched`: the locality-aware PS scheduling policies of issue 5 on
 * synthetic or Philly-derived workloads, in the slot model (docs/scheduling.md).
 *   shoal sched run [options]          compare policies, ratio to the lower bound
 *   shoal sched lp-bound [options]     offline lower bound of a workload
 *   shoal sched decide-time [options]  larr decision time per arrival on a loaded cluster */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "sched/ps_greedy.h"
#include "sched/ps_larr.h"
#include "sched/ps_online.h"
#include "sched/ps_workload.h"

typedef struct {
  shoal__ps_workload_params_t w;
  shoal__ps_run_params_t r;
  char policies[256];
  const char *trace;
  double slot_s;
  int csv, header, lb, lb_horizon;
  double lb_tm_s;
  char tag[64];
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal sched run|lp-bound|decide-time [options]\n"
          "  --policy LIST     larr,greedy,oasis,fifo,drf,optimus,tiresias (default: all)\n"
          "  --machines N      machines (20), each --gpus 8, 64 CPUs, 256 GB, 50 Gb/s\n"
          "  --jobs N          jobs (100)       --window S  arrival window in slots (40)\n"
          "  --locality X      b_in / b_ex (10) --seed S    workload and rounding seed (1)\n"
          "  --dur LO,HI       standalone duration range, slots (2,10)\n"
          "  --trace CSV       Philly CSV (../shared/data/philly/philly.csv) instead of synthetic jobs\n"
          "  --slot SECONDS    slot length for --trace (3600)\n"
          "  --theta X --trials R --beta B --sigma S --klp K --lp-time S --search 0|1   larr parameters\n"
          "  --replan 0|1      larr re-plans committed jobs' remaining work on each arrival batch (1)\n"
          "  --replan-k K      most committed jobs released per batch (32)   --replan-lp 0|1  re-plan them via the LP (0: greedy)\n"
          "  --replan-key 0|1  re-plan order: remaining standalone time (0) or remaining GPU-slots (1, default)\n"
          "  --tiresias-thr T1,T2  attained GPU-slots between Tiresias's queues (4,32)\n"
          "  --oasis-mult X    multiplier on OASiS's U, L (1)   --oasis-force N  admit after N rejections (20)\n"
          "  --no-lb           skip the lower bound   --csv  CSV output   --no-header  CSV without header\n"
          "  --tag TEXT        first CSV column (sweep label)\n"
          "decide-time: --machines LIST (100,500,2000) --jobs N arrivals timed on a cluster preloaded to ~70%%\n");
}

static int parse(int argc, char **argv, opts_t *o) {
  shoal__ps_workload_defaults(&o->w);
  shoal__ps_run_defaults(&o->r);
  snprintf(o->policies, sizeof o->policies, "larr,greedy,oasis,fifo,drf,optimus,tiresias");
  o->trace = NULL;
  o->slot_s = 3600;
  o->csv = 0;
  o->header = 1;
  o->lb = 1;
  o->lb_tm_s = 60;
  o->tag[0] = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                       \
  do {                                                                               \
    if (!v) return shoal__seterr(SHOAL_ERR_INVALID, "shoal sched: %s needs a value", a); \
    i++;                                                                             \
  } while (0)
    char *end = NULL;
    if (!strcmp(a, "--csv")) o->csv = 1;
    else if (!strcmp(a, "--no-header")) o->header = 0;
    else if (!strcmp(a, "--no-lb")) o->lb = 0;
    else if (!strcmp(a, "--policy")) { NEED(); snprintf(o->policies, sizeof o->policies, "%s", v); }
    else if (!strcmp(a, "--trace")) { NEED(); o->trace = v; }
    else if (!strcmp(a, "--tag")) { NEED(); snprintf(o->tag, sizeof o->tag, "%s", v); }
    else if (!strcmp(a, "--tiresias-thr")) {
      NEED();
      int k = 0;
      char buf[128];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *sv2 = NULL, *tk = strtok_r(buf, ",", &sv2); tk && k < 3; tk = strtok_r(NULL, ",", &sv2)) o->r.tir_thr[k++] = atof(tk);
      if (k < 1) return shoal__seterr(SHOAL_ERR_INVALID, "shoal sched: --tiresias-thr '%s': expected T1[,T2[,T3]]", v);
      for (int q = k; q < 4; q++) o->r.tir_thr[q] = INFINITY;
      o->r.tir_nq = k + 1;
    } else if (!strcmp(a, "--dur")) {
      NEED();
      if (sscanf(v, "%d,%d", &o->w.dur_lo, &o->w.dur_hi) != 2) return shoal__seterr(SHOAL_ERR_INVALID, "shoal sched: --dur '%s': expected LO,HI", v);
    } else {
      NEED();
      double x = strtod(v, &end);
      if (!end || *end || end == v) return shoal__seterr(SHOAL_ERR_INVALID, "shoal sched: %s '%s': not a number", a, v);
      if (!strcmp(a, "--machines")) o->w.machines = (int)x;
      else if (!strcmp(a, "--gpus")) o->w.gpus = (int)x;
      else if (!strcmp(a, "--jobs")) o->w.njobs = (int)x;
      else if (!strcmp(a, "--window")) o->w.window = (int)x;
      else if (!strcmp(a, "--locality")) o->w.locality = x;
      else if (!strcmp(a, "--seed")) o->w.seed = (uint64_t)x, o->r.larr.seed = (uint64_t)x;
      else if (!strcmp(a, "--slot")) o->slot_s = x;
      else if (!strcmp(a, "--theta")) o->r.larr.theta = x;
      else if (!strcmp(a, "--trials")) o->r.larr.trials = (int)x;
      else if (!strcmp(a, "--beta")) o->r.larr.beta = x;
      else if (!strcmp(a, "--sigma")) o->r.larr.sigma = (int)x;
      else if (!strcmp(a, "--klp")) o->r.larr.k_lp = (int)x;
      else if (!strcmp(a, "--lp-time")) o->r.larr.lp_tm_lim_s = x;
      else if (!strcmp(a, "--search")) o->r.larr.search = (int)x;
      else if (!strcmp(a, "--replan")) o->r.replan = (int)x;
      else if (!strcmp(a, "--replan-k")) o->r.replan_k = (int)x;
      else if (!strcmp(a, "--replan-lp")) o->r.replan_lp = (int)x;
      else if (!strcmp(a, "--replan-key")) o->r.replan_key = (int)x;
      else if (!strcmp(a, "--oasis-mult")) o->r.oasis.mult = x;
      else if (!strcmp(a, "--oasis-force")) o->r.oasis_force_after = (int)x;
      else if (!strcmp(a, "--lb-time")) o->lb_tm_s = x;
      else return shoal__seterr(SHOAL_ERR_INVALID, "shoal sched: unknown option %s", a);
    }
#undef NEED
  }
  if (o->w.machines < 1 || o->w.njobs < 1 || o->w.window < 1 || !(o->w.locality >= 1) || o->r.larr.trials < 1 ||
      !(o->r.larr.theta > 0) || !(o->r.larr.beta > 0) || o->r.larr.sigma < 0 || o->r.larr.k_lp < 0)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal sched: out-of-range option (machines %d, jobs %d, window %d, locality %g, trials %d, theta %g, beta %g)",
                         o->w.machines, o->w.njobs, o->w.window, o->w.locality, o->r.larr.trials, o->r.larr.theta, o->r.larr.beta);
  /* horizons: long enough for the slowest policy at this load */
  int h = o->w.window + o->w.njobs * o->w.dur_hi + 50;
  o->r.larr.hmax = h;
  o->r.oasis.hmax = h;
  o->r.oasis.T = h;
  o->r.max_slots = 50 * h;
  return 0;
}

static int load(const opts_t *o, shoal__ps_cluster_t *c, shoal__ps_job_t **jobs) {
  int rc = shoal__ps_workload_cluster(&o->w, c);
  if (rc) return rc;
  rc = o->trace ? shoal__ps_workload_philly(&o->w, o->trace, o->slot_s, jobs) : shoal__ps_workload_synth(&o->w, jobs);
  if (rc) shoal__ps_cluster_free(c);
  return rc;
}

static int cmd_run(const opts_t *o) {
  shoal__ps_cluster_t c;
  shoal__ps_job_t *jobs;
  int rc = load(o, &c, &jobs), n = o->w.njobs;
  if (rc) return rc;
  char list[256];
  snprintf(list, sizeof list, "%s", o->policies);
  shoal__ps_pol_t pols[SHOAL_PS_POL__N];
  int np = 0;
  for (char *sv = NULL, *tok = strtok_r(list, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    if (np == SHOAL_PS_POL__N) return shoal__seterr(SHOAL_ERR_INVALID, "shoal sched: too many policies");
    if ((rc = shoal__ps_pol_parse(tok, &pols[np++]))) goto out;
  }
  shoal__ps_run_result_t res[SHOAL_PS_POL__N];
  double wall[SHOAL_PS_POL__N];
  int maxspan = 0;
  for (int k = 0; k < np; k++) {
    double t0 = shoal__now_s();
    if ((rc = shoal__ps_run(&c, jobs, n, pols[k], &o->r, &res[k], NULL))) {
      for (int q = 0; q < k; q++) free(res[q].end);
      goto out;
    }
    wall[k] = shoal__now_s() - t0;
    if (res[k].makespan > maxspan) maxspan = (int)res[k].makespan;
  }
  double lb = NAN, lbs = NAN;
  if (o->lb) {
    /* horizon: 1.5x the longest makespan seen (assumes the optimum ends by then) */
    int r2 = shoal__ps_lower_bound(&c, jobs, n, maxspan + maxspan / 2 + 1, o->lb_tm_s, &lb, &lbs);
    if (r2) {
      fprintf(stderr, "shoal sched: lower bound LP failed (%s): using max(LB_solo, LB_srpt)\n", shoal_last_error());
      double srpt = 0;
      if ((rc = shoal__ps_lower_bound_solo(&c, jobs, n, maxspan + 1, &lbs)) ||
          (rc = shoal__ps_lower_bound_srpt(&c, jobs, n, &srpt))) {
        for (int q = 0; q < np; q++) free(res[q].end);
        goto out;
      }
      lb = fmax(lbs, srpt);
    }
  }
  if (o->csv) {
    if (o->header)
      printf("tag,policy,machines,jobs,locality,seed,total_flow,mean_flow,p95_flow,makespan,lb,lb_solo,ratio_lb,decide_ms_mean,decide_ms_max,coloc_share,deferrals,rejections,forced,wall_s\n");
    for (int k = 0; k < np; k++) {
      shoal__ps_run_result_t *r = &res[k];
      printf("%s,%s,%d,%d,%g,%llu,%.0f,%.3f,%.0f,%.0f,%.2f,%.0f,%.4f,%.3f,%.3f,%.3f,%ld,%ld,%ld,%.2f\n", o->tag[0] ? o->tag : "-",
             shoal__ps_pol_name(pols[k]), o->w.machines, n, o->w.locality, (unsigned long long)o->w.seed, r->total_flow,
             r->mean_flow, r->p95_flow, r->makespan, lb, lbs, r->total_flow / lb, r->decide_ms_mean, r->decide_ms_max,
             r->job_slots ? (double)r->coloc_slots / r->job_slots : 0, r->deferrals, r->rejections, r->forced, wall[k]);
    }
  } else {
    printf("%d jobs (%s) on %d machines x %d GPUs, locality %gx, seed %llu; lower bound %.1f (LB_solo %.0f)\n", n,
           o->trace ? o->trace : "synthetic", o->w.machines, o->w.gpus, o->w.locality, (unsigned long long)o->w.seed, lb, lbs);
    printf("%-7s %10s %9s %8s %8s %8s %11s %11s %7s %6s %6s\n", "policy", "total_flow", "mean_flow", "p95", "makespan",
           "vs_LB", "decide_ms", "max_ms", "coloc", "defer", "reject");
    for (int k = 0; k < np; k++) {
      shoal__ps_run_result_t *r = &res[k];
      printf("%-7s %10.0f %9.2f %8.0f %8.0f %8.3f %11.3f %11.3f %7.3f %6ld %6ld\n", shoal__ps_pol_name(pols[k]),
             r->total_flow, r->mean_flow, r->p95_flow, r->makespan, r->total_flow / lb, r->decide_ms_mean, r->decide_ms_max,
             r->job_slots ? (double)r->coloc_slots / r->job_slots : 0, r->deferrals, r->rejections);
      if (pols[k] == SHOAL_PS_POL_LARR)
        printf("        larr: %ld LP solves (%ld failed -> greedy), %ld/%ld trials ok, %ld rounded schedules chosen over greedy\n",
               r->larr.lp_solves, r->larr.lp_fail, r->larr.trials_ok, r->larr.trials, r->larr.chose_rounded);
    }
  }
  for (int k = 0; k < np; k++) free(res[k].end);
out:
  free(jobs);
  shoal__ps_cluster_free(&c);
  return rc;
}

static int cmd_bound(const opts_t *o) {
  shoal__ps_cluster_t c;
  shoal__ps_job_t *jobs;
  int rc = load(o, &c, &jobs);
  if (rc) return rc;
  double lb, lbs;
  rc = shoal__ps_lower_bound(&c, jobs, o->w.njobs, o->r.larr.hmax, o->lb_tm_s, &lb, &lbs);
  if (!rc) printf("lower bound on total flow: %.2f slots (LB_solo %.0f), %d jobs, %d machines\n", lb, lbs, o->w.njobs, o->w.machines);
  free(jobs);
  shoal__ps_cluster_free(&c);
  return rc;
}

/* Preload H machines by committing greedy schedules of synthetic jobs until
 * ~70% of the GPU-slots of the first 20 slots are taken, then time larr on
 * `njobs` further arrivals (not committed, so each sees the same load). */
/* CPU seconds of this process: decision times on a shared machine are
 * reported in CPU time too, since wall time includes other tenants. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmd_decide(const opts_t *o, const char *mlist) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", mlist);
  printf("%-9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "machines", "arrivals", "gpu_load", "larr_ms", "larr_cpu", "larr_max",
         "replan_ms", "rpl_cpu", "rpl_max", "greedy_ms", "oasis_ms");
  for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
    shoal__ps_workload_params_t w = o->w;
    w.machines = atoi(tok);
    w.window = 10;
    w.njobs = w.machines * 8 + o->w.njobs;
    shoal__ps_cluster_t c;
    shoal__ps_job_t *jobs;
    int rc = shoal__ps_workload_cluster(&w, &c);
    if (rc || (rc = shoal__ps_workload_synth(&w, &jobs))) return rc;
    double gpus = 0, target = 0.7 * w.machines * w.gpus * 20;
    shoal__ps_sched_t *Spre = calloc((size_t)w.njobs, sizeof *Spre);
    int *act = malloc(sizeof(int) * (size_t)w.njobs), na = 0;
    double *rate = calloc((size_t)w.njobs, sizeof(double));
    if (!Spre || !act || !rate) {
      free(Spre), free(act), free(rate), free(jobs);
      shoal__ps_cluster_free(&c);
      return shoal__seterr(SHOAL_ERR_NOMEM, "decide-time");
    }
    for (int q = 0; q < w.njobs; q++) shoal__ps_sched_init(&Spre[q], 0);
    int i = 0;
    for (; i < w.njobs - o->w.njobs && gpus < target; i++) {
      jobs[i].arrival = 0;
      shoal__ps_sched_t S;
      if (shoal__ps_greedy(&c, &jobs[i], 0, 200, 16, &S)) continue;
      for (int k = 0; k < S.len; k++) {
        int W, P;
        shoal__ps_slot_totals(&S.slot[k], &W, &P);
        if (S.start + k < 20) gpus += W;
      }
      shoal__ps_commit(&c, &jobs[i], &S);
      Spre[i] = S;
      act[na++] = i;
    }
    shoal__ps_oasis_est_t est;
    shoal__ps_oasis_est_init(&est);
    for (int k = 0; k < i; k++) shoal__ps_oasis_observe(&est, &c, &jobs[k], &o->r.oasis);
    double tl = 0, tlmax = 0, tg = 0, to = 0, tcpu = 0, tr = 0, trmax = 0, trcpu = 0;
    long rel = 0;
    int m = 0;
    shoal__ps_larr_stats_t st = {0}, st2 = {0};
    for (int k = i; k < w.njobs && m < o->w.njobs; k++, m++) {
      jobs[k].arrival = 0;
      shoal__ps_sched_t S;
      double t0 = shoal__now_s(), c0 = cpu_s();
      if (!shoal__ps_larr(&c, &jobs[k], 0, &o->r.larr, &S, &st)) shoal__ps_sched_free(&S);
      double dt = shoal__now_s() - t0;
      tcpu += cpu_s() - c0;
      tl += dt;
      if (dt > tlmax) tlmax = dt;
      t0 = shoal__now_s();
      if (!shoal__ps_greedy(&c, &jobs[k], 0, o->r.larr.hmax, 16, &S)) shoal__ps_sched_free(&S);
      tg += shoal__now_s() - t0;
      shoal__ps_oasis_observe(&est, &c, &jobs[k], &o->r.oasis);
      double mu;
      t0 = shoal__now_s();
      if (!shoal__ps_oasis(&c, &jobs[k], 0, &o->r.oasis, &est, &mu, &S)) shoal__ps_sched_free(&S);
      to += shoal__now_s() - t0;
      /* larr with re-planning: the whole batch (release, plan the new job,
       * re-plan the released) on copies, so every arrival sees the same load */
      shoal__ps_cluster_t cc;
      shoal__ps_sched_t *Sc = calloc((size_t)w.njobs, sizeof *Sc);
      int def[1], ndef = 0, nrel = 0, batch[1] = {k};
      if (!Sc || (rc = shoal__ps_cluster_copy(&cc, &c))) {
        free(Sc);
        rc = rc ? rc : shoal__seterr(SHOAL_ERR_NOMEM, "decide-time");
        break;
      }
      for (int q = 0; q < w.njobs && !rc; q++) rc = shoal__ps_sched_copy(&Sc[q], &Spre[q]);
      t0 = shoal__now_s();
      c0 = cpu_s();
      if (!rc) rc = shoal__ps_replan(&cc, jobs, Sc, act, na, batch, 1, 0, &o->r, rate, &st2, def, &ndef, &nrel);
      dt = shoal__now_s() - t0;
      trcpu += cpu_s() - c0;
      tr += dt;
      if (dt > trmax) trmax = dt;
      rel += nrel;
      for (int q = 0; q < w.njobs; q++) shoal__ps_sched_free(&Sc[q]);
      free(Sc);
      shoal__ps_cluster_free(&cc);
      if (rc) break;
    }
    if (!rc) {
      printf("%-9d %9d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", w.machines, m, gpus / (w.machines * w.gpus * 20.0),
             1e3 * tl / m, 1e3 * tcpu / m, 1e3 * tlmax, 1e3 * tr / m, 1e3 * trcpu / m, 1e3 * trmax, 1e3 * tg / m, 1e3 * to / m);
      printf("          larr phases per arrival: greedy %.2f ms, LP %.2f ms (%.0f columns), rounding+repair %.2f ms; E_g - s = %.1f slots;"
             " re-plan: %d committed jobs, %.1f released per arrival (--replan-k %d)\n",
             1e3 * st.t_greedy_s / m, 1e3 * st.t_lp_s / m, (double)st.lp_cols_sum / m, 1e3 * st.t_round_s / m,
             (double)st.e_g_sum / m, na, (double)rel / m, o->r.replan_k);
    }
    for (int q = 0; q < w.njobs; q++) shoal__ps_sched_free(&Spre[q]);
    free(Spre);
    free(act);
    free(rate);
    fflush(stdout);
    free(jobs);
    shoal__ps_cluster_free(&c);
    if (rc) return rc;
  }
  return 0;
}

int shoal_cmd_sched(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  opts_t o;
  const char *mlist = "100,500,2000";
  /* decide-time takes a machine list */
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[1], "decide-time") && !strcmp(argv[i], "--machines")) {
      mlist = argv[i + 1];
      argv[i + 1] = "1";
    }
  int rc = parse(argc - 1, argv + 1, &o);
  if (!rc) {
    if (!strcmp(argv[1], "run")) rc = cmd_run(&o);
    else if (!strcmp(argv[1], "lp-bound")) rc = cmd_bound(&o);
    else if (!strcmp(argv[1], "decide-time")) {
      if (o.w.njobs == 100) o.w.njobs = 20;
      rc = cmd_decide(&o, mlist);
    } else {
      fprintf(stderr, "shoal sched: unknown subcommand '%s'\n", argv[1]);
      usage(stderr);
      return 2;
    }
  }
  if (rc) {
    fprintf(stderr, "shoal sched: %s\n", shoal_last_error());
    return 1;
  }
  return 0;
}
