/* larr's re-planning and the Optimus / Tiresias slot-model baselines
 * (docs/scheduling.md): every slot's allocation within capacity, every job
 * done, re-planning never touches executed slots, Tiresias's LAS order. */
#include <string.h>

#include "../runner.h"
#include "core/error.h"
#include "ps_testutil.h"
#include "sched/ps_greedy.h"
#include "sched/ps_online.h"
#include "sched/ps_workload.h"

/* Residual capacity must equal capacity minus the usage of all schedules. */
static int residual_matches(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n,
                            const shoal__ps_sched_t *S, int T) {
  shoal__ps_cluster_t f;
  int rc = shoal__ps_cluster_init(&f, c->H, c->cap);
  for (int i = 0; i < n && !rc; i++) rc = shoal__ps_commit(&f, &jobs[i], &S[i]);
  for (int t = 0; t < T && !rc; t++)
    for (int h = 0; h < c->H && !rc; h++)
      for (int r = 0; r < SHOAL_PS_NRES; r++)
        if (fabs(shoal__ps_res(c, t, h)[r] - shoal__ps_res(&f, t, h)[r]) > 1e-6) {
          rc = shoal__seterr(SHOAL_ERR_INTERNAL, "slot %d machine %d resource %d: residual %g, recomputed %g", t, h, r,
                             shoal__ps_res(c, t, h)[r], shoal__ps_res(&f, t, h)[r]);
          break;
        }
  shoal__ps_cluster_free(&f);
  return rc;
}

/* Every policy on contended synthetic and Philly-like workloads: all jobs
 * finish, the per-slot allocations of all jobs together fit the machines,
 * each job's work is covered (ps_check_all), the reported end slots are the
 * schedules' finish slots, and no total flow is below LB_srpt. */
TEST_T(larr_replan_and_baselines_feasible_on_contended_workloads, 90) {
  for (int variant = 0; variant < 3; variant++) {
    shoal__ps_workload_params_t wp;
    shoal__ps_workload_defaults(&wp);
    wp.machines = variant == 2 ? 3 : 5;
    wp.njobs = 45;
    wp.window = 8; /* heavy: arrivals bunched, many overlapping jobs */
    wp.seed = 11 + (uint64_t)variant;
    if (variant == 1) wp.dur_lo = 1, wp.dur_hi = 25; /* wide spread of sizes, like the Philly tail */
    shoal__ps_cluster_t c;
    shoal__ps_job_t *jobs;
    CHECK_OK(shoal__ps_workload_cluster(&wp, &c));
    CHECK_OK(shoal__ps_workload_synth(&wp, &jobs));
    shoal__ps_run_params_t rp;
    shoal__ps_run_defaults(&rp);
    rp.larr.hmax = 2000;
    rp.larr.trials = 4;
    rp.replan_k = variant == 2 ? 3 : 16; /* also when the bound cuts the released set */
    double srpt, solo;
    CHECK_OK(shoal__ps_lower_bound_srpt(&c, jobs, wp.njobs, &srpt));
    CHECK_OK(shoal__ps_lower_bound_solo(&c, jobs, wp.njobs, 2000, &solo));
    printf("  variant %d: LB_srpt %.0f, LB_solo %.0f\n", variant, srpt, solo);
    const shoal__ps_pol_t pols[] = {SHOAL_PS_POL_LARR, SHOAL_PS_POL_OPTIMUS, SHOAL_PS_POL_TIRESIAS, SHOAL_PS_POL_FIFO,
                                    SHOAL_PS_POL_DRF};
    for (int k = 0; k < 5; k++) {
      shoal__ps_run_result_t r;
      shoal__ps_sched_t *S = calloc((size_t)wp.njobs, sizeof *S);
      CHECK_OK(shoal__ps_run(&c, jobs, wp.njobs, pols[k], &rp, &r, S));
      CHECK_OK(ps_check_all(&c, jobs, wp.njobs, S));
      CHECK_MSG(r.total_flow >= srpt - 1e-6, "%s flow %g below LB_srpt %g", shoal__ps_pol_name(pols[k]), r.total_flow, srpt);
      for (int i = 0; i < wp.njobs; i++) {
        CHECK(r.end[i] >= jobs[i].arrival);
        CHECK_EQ(shoal__ps_sched_finish(&jobs[i], &S[i]), r.end[i]);
      }
      if (pols[k] == SHOAL_PS_POL_LARR) {
        CHECK(r.replans > 0);
        CHECK(r.released > 0); /* the workload is contended enough to exercise re-planning */
        printf("  variant %d: larr re-plan %ld batches, %ld released, total flow %.0f\n", variant, r.replans, r.released,
               r.total_flow);
      } else {
        printf("  variant %d: %-8s total flow %.0f\n", variant, shoal__ps_pol_name(pols[k]), r.total_flow);
      }
      for (int i = 0; i < wp.njobs; i++) shoal__ps_sched_free(&S[i]);
      free(S);
      free(r.end);
    }
    free(jobs);
    shoal__ps_cluster_free(&c);
  }
}

/* shoal__ps_replan directly: committed greedy schedules from slot 0, then a
 * batch of new small jobs at slot t. Slots before t are byte-identical
 * afterwards, every job still covers its work, the residual capacity equals
 * the recomputed usage, and the new jobs are planned. */
TEST_T(larr_replan_never_touches_executed_work, 60) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 31);
  int released_total = 0;
  for (int inst = 0; inst < 40; inst++) {
    shoal__ps_cluster_t c;
    int H = 2 + (int)shoal_rng_below(&g, 3), n0 = 3 + (int)shoal_rng_below(&g, 4), nn = 1 + (int)shoal_rng_below(&g, 2);
    int n = n0 + nn, t = 1 + (int)shoal_rng_below(&g, 3);
    CHECK_OK(ps_tiny_cluster(H, &c));
    shoal__ps_job_t jobs[8];
    shoal__ps_sched_t S[8], before[8];
    int active[8], batch[2], def[8], ndef, nrel;
    for (int i = 0; i < n; i++) {
      ps_tiny_job(&g, i, 0, &jobs[i]);
      if (i < n0) jobs[i].work *= 3; /* long committed jobs */
      else jobs[i].arrival = t;      /* short new ones */
      shoal__ps_sched_init(&S[i], jobs[i].arrival);
    }
    for (int i = 0; i < n0; i++) {
      shoal__ps_sched_t G;
      CHECK_OK(shoal__ps_greedy(&c, &jobs[i], 0, 200, 0.125, &G));
      CHECK_OK(shoal__ps_commit(&c, &jobs[i], &G));
      shoal__ps_sched_free(&S[i]);
      S[i] = G;
      active[i] = i;
    }
    for (int i = 0; i < n; i++) CHECK_OK(shoal__ps_sched_copy(&before[i], &S[i]));
    for (int q = 0; q < nn; q++) batch[q] = n0 + q;
    shoal__ps_run_params_t rp;
    shoal__ps_run_defaults(&rp);
    rp.larr.hmax = 200;
    rp.larr.trials = 4;
    rp.replan_k = 1 + inst % 4;
    double rate[8] = {0};
    shoal__ps_larr_stats_t st = {0};
    CHECK_OK(shoal__ps_replan(&c, jobs, S, active, n0, batch, nn, t, &rp, rate, &st, def, &ndef, &nrel));
    CHECK_EQ(ndef, 0);
    CHECK(nrel <= rp.replan_k);
    released_total += nrel;
    for (int i = 0; i < n; i++) {
      /* executed slots (< t) unchanged */
      for (int k = 0; k < before[i].len && before[i].start + k < t; k++) {
        const shoal__ps_slot_t *a = &before[i].slot[k];
        CHECK(k < S[i].len);
        const shoal__ps_slot_t *b = &S[i].slot[k];
        CHECK_EQ(a->n, b->n);
        for (int e = 0; e < a->n; e++) {
          CHECK_EQ(a->pl[e].h, b->pl[e].h);
          CHECK_EQ(a->pl[e].w, b->pl[e].w);
          CHECK_EQ(a->pl[e].p, b->pl[e].p);
        }
      }
      CHECK(shoal__ps_sched_finish(&jobs[i], &S[i]) >= 0); /* still covers its work */
    }
    CHECK_OK(ps_check_all(&c, jobs, n, S));
    CHECK_OK(residual_matches(&c, jobs, n, S, 250));
    for (int i = 0; i < n; i++) shoal__ps_sched_free(&S[i]), shoal__ps_sched_free(&before[i]);
    shoal__ps_cluster_free(&c);
  }
  CHECK(released_total > 0);
}

/* Tiresias is least-attained-service first: a short job arriving while a
 * long job holds the only machine preempts it at once (the long job has
 * left queue 0), where FIFO makes it wait; Optimus shares the machine. */
TEST(larr_tiresias_preempts_by_attained_service) {
  double cap[SHOAL_PS_NRES] = {4, 16, 64, 20};
  shoal__ps_cluster_t c;
  CHECK_OK(shoal__ps_cluster_init(&c, 1, cap));
  shoal__ps_job_t jobs[2];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < 2; i++) {
    shoal__ps_job_t *j = &jobs[i];
    j->id = i;
    j->wmax = 3;
    j->dw[0] = 1, j->dw[1] = 2, j->dw[2] = 4, j->dw[3] = 1;
    j->dp[1] = 1, j->dp[2] = 4, j->dp[3] = 2;
    j->kappa = 0.5;
    j->rho_in = 10, j->rho_ex = 5;
  }
  jobs[0].arrival = 0, jobs[0].work = 3 * 10 * 10; /* 10 slots alone */
  jobs[1].arrival = 4, jobs[1].work = 3 * 10 * 1;  /* 1 slot alone */
  shoal__ps_run_params_t rp;
  shoal__ps_run_defaults(&rp);
  rp.tir_nq = 2;
  rp.tir_thr[0] = 6; /* 2 slots of 3 GPUs */
  shoal__ps_run_result_t r;
  CHECK_OK(shoal__ps_run(&c, jobs, 2, SHOAL_PS_POL_TIRESIAS, &rp, &r, NULL));
  CHECK_EQ(r.end[1], 4);  /* runs in its arrival slot */
  CHECK_EQ(r.end[0], 10); /* preempted for exactly one slot */
  free(r.end);
  CHECK_OK(shoal__ps_run(&c, jobs, 2, SHOAL_PS_POL_FIFO, &rp, &r, NULL));
  CHECK_EQ(r.end[0], 9);
  CHECK_EQ(r.end[1], 10);
  free(r.end);
  shoal__ps_sched_t S[2];
  CHECK_OK(shoal__ps_run(&c, jobs, 2, SHOAL_PS_POL_OPTIMUS, &rp, &r, S));
  CHECK_OK(ps_check_all(&c, jobs, 2, S));
  int W, P;
  shoal__ps_slot_totals(&S[1].slot[0], &W, &P);
  CHECK(W >= 1); /* the newcomer gets a worker in its arrival slot */
  CHECK(r.end[1] <= 6);
  free(r.end);
  for (int i = 0; i < 2; i++) shoal__ps_sched_free(&S[i]);
  shoal__ps_cluster_free(&c);
}
