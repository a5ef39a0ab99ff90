/* Loaning through the cluster-manager interface (live/loan.h) on the in-memory manager: replica jobs started
 * on VC_infer's hosts, idle hosts lent to an elastic training job (grown in place), reclaimed (shrunk off, a
 * replica started there) when requests wait, given back after the hold. Worked by hand: service 1 s, SLO 4 s
 * (slack 3 s), three inference hosts. */
#include <stdio.h>
#include <string.h>

#include "../runner.h"
#include "live/loan.h"
#include "live/manager_mem.h"

static const char *const serve_argv[] = {"shoal", "serve", "--model", "mlp"};

/* the job runs and holds exactly these hosts, in this order, as the manager lists it */
static int running_on(shoal_live_mem_t *m, long id, const char *nodes) {
  shoal_live_manager_t mgr = shoal__live_mem_manager(m);
  shoal_live_jobs_t jobs = {0};
  if (mgr.ops->jobs(mgr.impl, &jobs)) return 0;
  const shoal_live_job_t *j = shoal__live_jobs_find(&jobs, id);
  char held[256] = "";
  for (int u = 0; j && u < j->nuse; u++)
    snprintf(held + strlen(held), sizeof held - strlen(held), "%s%s", u ? "," : "", j->use[u].node);
  int ok = j && j->run == SHOAL_LIVE_RUNNING && !strcmp(held, nodes);
  shoal__live_jobs_free(&jobs);
  return ok;
}

TEST(live_loan_lends_idle_replica_hosts_and_reclaims_them) {
  shoal_live_mem_t *m;
  CHECK_OK(shoal__live_mem_create(1000, &m));
  shoal_live_manager_t mgr = shoal__live_mem_manager(m);
  CHECK_OK(shoal__live_mem_add_node(m, "t0", 1, 4, 0, "train"));
  CHECK_OK(shoal__live_mem_add_node(m, "i0", 1, 4, 0, "infer"));
  CHECK_OK(shoal__live_mem_add_node(m, "i1", 1, 4, 0, "infer"));
  CHECK_OK(shoal__live_mem_add_node(m, "i2", 1, 4, 0, "infer"));
  shoal_live_mem_behaviour_t b = {.work = 1e9};
  long train = shoal__live_mem_submit(m, "shoal:elastic", "train", "", "root", 1, &b);
  char t0[1][SHOAL_LIVE_NAME] = {"t0"};
  int one = 1;
  shoal_live_place_t p = {.n = 1, .node = t0, .gpus = &one};
  CHECK_OK(mgr.ops->start(mgr.impl, train, &p));
  shoal__live_mem_advance(m, 1001);
  CHECK_MSG(running_on(m, train, "t0"), "training job: %s %s", shoal__live_mem_job(m, train)->state,
            shoal__live_mem_job(m, train)->reason);

  shoal__forecast_t *fc;
  CHECK_OK(shoal__forecast_create("off", 0.5, 0, &fc));
  shoal_live_loan_config_t c = {.infer_partition = "infer", .train_id = train, .replica_argv = serve_argv,
                                .replica_argc = 4, .service_s = 1, .slo_s = 4, .slo_q = 0.99, .hold_s = 2};
  shoal_live_loan_t *L;
  CHECK_OK(shoal__live_loan_create(&c, fc, &L));
  shoal_live_loan_step_t o;
  /* no load: one replica (on i0), the idle hosts lent one per step */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1001, 0, 0, &o));
  CHECK(o.want == 1 && o.started == 1 && o.replicas == 1 && o.lent_now == 1 && o.lent == 1);
  shoal__live_mem_advance(m, 1002);
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1002, 0, 0, &o));
  CHECK(o.started == 0 && o.lent_now == 1 && o.lent == 2);
  shoal__live_mem_advance(m, 1003);
  CHECK(running_on(m, train, "t0,i1,i2"));
  CHECK(running_on(m, train + 1, "i0")); /* the replica job */
  /* 12 requests waiting, 2/s arriving: 1 x (12/3 + 2) = 6 replicas, three hosts: both lent hosts reclaimed */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1003, 2, 12, &o));
  CHECK(o.want == 3 && o.reclaimed == 2 && o.started == 2 && o.replicas == 3 && o.lent == 0);
  shoal__live_mem_advance(m, 1004);
  CHECK(running_on(m, train, "t0"));
  CHECK(running_on(m, train + 2, "i1") && running_on(m, train + 3, "i2"));
  /* calm: the extra replicas stay for the hold (2 s), then stop; their hosts are lent once free */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1004, 0, 0, &o));
  CHECK(o.want == 1 && o.stopped == 0 && o.replicas == 3);
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1005, 0, 0, &o));
  CHECK(o.stopped == 2 && o.replicas == 1);
  shoal__live_mem_advance(m, 1008); /* past the stopped jobs' clean-up */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1008, 0, 0, &o));
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1009, 0, 0, &o));
  CHECK(o.lent == 2 && o.replicas == 1);
  shoal__live_mem_advance(m, 1010);
  CHECK(running_on(m, train, "t0,i2,i1") || running_on(m, train, "t0,i1,i2"));
  CHECK(running_on(m, train + 1, "i0"));
  /* the controller restarts mid-loan (a new loan state, nothing in memory): the running replica is adopted from
   * the manager, not started twice, and the lent hosts stay lent */
  shoal__live_loan_destroy(L);
  CHECK_OK(shoal__live_loan_create(&c, fc, &L));
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1010, 0, 0, &o));
  CHECK(o.started == 0 && o.reclaimed == 0 && o.replicas == 1 && o.lent == 2);
  /* a manager that only shrinks in place (Slurm): replicas come and go, nothing is lent */
  shoal_live_manager_ops_t shrink_only = *mgr.ops;
  shrink_only.caps &= ~(unsigned)SHOAL_LIVE_CAP_GROW;
  shoal_live_manager_t slurm_like = {&shrink_only, mgr.impl};
  CHECK_OK(shoal__live_loan_step(L, &slurm_like, 1010.5, 2, 12, &o)); /* both lent hosts reclaimed */
  CHECK(o.reclaimed == 2 && o.replicas == 3 && o.lent == 0);
  shoal__live_mem_advance(m, 1011);
  CHECK_OK(shoal__live_loan_step(L, &slurm_like, 1011, 0, 0, &o));
  CHECK_OK(shoal__live_loan_step(L, &slurm_like, 1012.5, 0, 0, &o)); /* 2 s calm: stopped */
  CHECK(o.stopped == 2 && o.replicas == 1);
  shoal__live_mem_advance(m, 1014);
  CHECK_OK(shoal__live_loan_step(L, &slurm_like, 1014, 0, 0, &o));
  CHECK(o.lent_now == 0 && o.lent == 0);
  CHECK(running_on(m, train, "t0"));
  /* the manager does not answer: an error, nothing changed */
  shoal__live_mem_set_down(m, 1);
  CHECK(shoal__live_loan_step(L, &mgr, 1015, 5, 30, &o) != 0);
  shoal__live_mem_set_down(m, 0);
  shoal__live_loan_destroy(L);
  shoal__forecast_free(fc);
  shoal__live_mem_destroy(m);
}

TEST(live_loan_refuses_bad_settings) {
  shoal__forecast_t *fc;
  CHECK_OK(shoal__forecast_create("off", 0.5, 0, &fc));
  shoal_live_loan_config_t c = {.infer_partition = "", .replica_argv = serve_argv, .replica_argc = 4,
                                .service_s = 1, .slo_s = 4, .slo_q = 0.99};
  shoal_live_loan_t *L;
  CHECK(shoal__live_loan_create(&c, fc, &L) == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "no inference partition");
  c.infer_partition = "infer", c.slo_s = 1;
  CHECK(shoal__live_loan_create(&c, fc, &L) == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "must exceed the service time");
  shoal__forecast_free(fc);
}
