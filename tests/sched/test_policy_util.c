/* The pieces the incremental policies rest on, each against the plain
 * computation it replaces: the arrival-order list, the memo of consolidated
 * rates, and the slot view's per-slot maxima and worker test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runner.h"
#include "shoal/sched.h"
#include "ps_testutil.h"
#include "core/rng.h"
#include "sched/policies/common.h"
#include "sched/model/slot_plan.h"
#include "sched/model/speed.h"

TEST(policy_arrivals_list_keeps_arrival_order) {
  enum { N = 2000 };
  static shoal_job_t jobs[N];
  char in[N] = {0};
  shoal__arrivals_t q;
  shoal__arrivals_init(&q);
  shoal_rng_t g;
  shoal_rng_seed(&g, 7);
  int next = 0;
  for (int step = 0; step < 20000; step++) {
    if (next < N && shoal_rng_below(&g, 3) != 0) { /* arrive */
      jobs[next].id = next;
      CHECK_OK(shoal__arrivals_add(&q, &jobs[next]));
      in[next++] = 1;
    } else if (next > 0) { /* leave: any active job */
      int k = (int)shoal_rng_below(&g, (uint64_t)next);
      shoal__arrivals_remove(&q, &jobs[k]);
      in[k] = 0;
    }
    if (step % 97 == 0) { /* the walk sees exactly the active jobs, by id */
      int want = 0, seen = 0, last = -1;
      for (int i = 0; i < next; i++) want += in[i];
      for (int id = q.head; id >= 0; id = q.next[id]) {
        CHECK(q.job[id] == &jobs[id]);
        CHECK(in[id]);
        CHECK(id > last);
        last = id;
        seen++;
      }
      CHECK_EQ(seen, want);
      CHECK_EQ(q.n, want);
    }
  }
  shoal__arrivals_remove(&q, &jobs[0]); /* twice: a no-op */
  shoal__arrivals_free(&q);
}

TEST(policy_rate_memo_equals_the_speed_model) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 16;
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_sched_t s;
  CHECK_OK(shoal__sched_init(&s, c, sp, 16));
  shoal_rng_t g;
  shoal_rng_seed(&g, 11);
  for (int i = 0; i < 20000; i++) {
    shoal_job_t j;
    memset(&j, 0, sizeof j);
    j.model = (int16_t)shoal_rng_below(&g, (uint64_t)sp->nmodels);
    j.arch = (int8_t)shoal_rng_below(&g, 2);
    int w = 1 + (int)shoal_rng_below(&g, 64), p = j.arch == SHOAL_ARCH_PS ? (int)shoal_rng_below(&g, 9) : 0;
    shoal_shape_t sh = shoal__shape_consolidated(c, w, p);
    double direct = sp->rate(sp, c, &j, &sh);
    double memo = shoal_sched_rate_consolidated(&s, &j, w, p);
    CHECK(memcmp(&direct, &memo, sizeof direct) == 0); /* the very same bits */
  }
  shoal__sched_fini(&s);
  shoal__speed_destroy(sp);
  shoal__cluster_destroy(c);
}

TEST(ps_slot_max_and_worker_test_match_the_machines) {
  enum { H = 12, T = 30 };
  double cap[H * SHOAL_PS_NRES];
  for (int h = 0; h < H; h++) ps_set_cap(cap, h, h % 3 ? 8 : 4, 64, 256, 0);
  shoal__ps_cluster_t c;
  CHECK_OK(shoal__ps_cluster_init(&c, H, cap));
  shoal_rng_t g;
  shoal_rng_seed(&g, 5);
  shoal__ps_job_t j;
  memset(&j, 0, sizeof j);
  j.wmax = 4;
  j.work = 1;
  j.rho_in = j.rho_ex = 1;
  /* random commits and releases of one-slot schedules, checked after each */
  shoal__ps_sched_t S[64];
  int live[64] = {0};
  for (int step = 0; step < 3000; step++) {
    int k = (int)shoal_rng_below(&g, 64);
    j.dw[SHOAL_PS_GPU] = 1;
    j.dw[SHOAL_PS_CPU] = 1 + (double)shoal_rng_below(&g, 16);
    j.dw[SHOAL_PS_MEM] = 4 * (double)(1 + shoal_rng_below(&g, 16));
    if (live[k]) {
      shoal__ps_release(&c, &j, &S[k], 0);
      shoal__ps_sched_free(&S[k]);
      live[k] = 0;
    } else {
      int t = (int)shoal_rng_below(&g, T), h = (int)shoal_rng_below(&g, H);
      shoal__ps_sched_init(&S[k], t);
      shoal__ps_slot_t *sl = shoal__ps_sched_slot(&S[k], t);
      CHECK(sl != NULL);
      CHECK_OK(shoal__ps_slot_add(sl, h, 1 + (int)shoal_rng_below(&g, 4), 0));
      if (shoal__ps_sched_check(&c, &j, &S[k], 0) == 0 && shoal__ps_commit(&c, &j, &S[k]) == 0) live[k] = 1;
      else shoal__ps_sched_free(&S[k]);
    }
    int t = (int)shoal_rng_below(&g, T + 2);
    const double *mx = shoal__ps_slot_max(&c, t);
    int any = 0;
    for (int r = 0; r < SHOAL_PS_NRES; r++) {
      double m = 0;
      for (int h = 0; h < H; h++) m = fmax(m, shoal__ps_res(&c, t, h)[r]);
      CHECK_MSG(mx[r] == m, "slot %d resource %d: max %.17g, machines %.17g", t, r, mx[r], m);
    }
    for (int h = 0; h < H; h++) {
      const double *res = shoal__ps_res(&c, t, h);
      int fits = 1;
      for (int r = 0; r < SHOAL_PS_NRES; r++)
        if (j.dw[r] > 0 && floor((res[r] + 1e-9) / j.dw[r]) < 1) fits = 0;
      any |= fits;
    }
    CHECK_EQ(shoal__ps_slot_fits_worker(&c, &j, t), any);
  }
  for (int k = 0; k < 64; k++)
    if (live[k]) shoal__ps_sched_free(&S[k]);
  shoal__ps_cluster_free(&c);
}

/* The public policy lookup (include/shoal/sched.h) given NULL or
 * out-of-range arguments: NULL, never a crash (shoal_sim_run's NULL
 * arguments: tests/sim public_api_validates_options). */
TEST(public_lookup_null_and_range) {
  CHECK(shoal_policy_find(NULL) == NULL);
  CHECK(shoal_policy_find("") == NULL);
  CHECK(shoal_policy_find("fifo:strict=1") == NULL);
  CHECK(shoal_policy_find("fifo") != NULL);
  CHECK(shoal_policy_name(-1) == NULL && shoal_policy_summary(-1) == NULL);
  int n = 0;
  while (shoal_policy_name(n)) n++;
  CHECK(n > 0 && shoal_policy_summary(n) == NULL);
}
