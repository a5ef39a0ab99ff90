/* Loaning through the cluster-manager interface (live/loan.h) on the in-memory manager: replica jobs started
 * on VC_infer's hosts, idle hosts lent to an elastic training job (grown in place), reclaimed (shrunk off, a
 * replica started there) when requests wait, given back after the hold. Worked by hand: service 1 s, SLO 4 s
 * (slack 3 s), three inference hosts. */
#include <stdio.h>
#include <string.h>

#include "../runner.h"
#include "live/loan.h"
#include "live/params.h"
#include "live/manager_mem.h"
#include "core/error.h"
#include "world.h"

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

/* an elastic training job (shoal:elastic, endless work) started on one GPU of host */
static long start_elastic(shoal_live_mem_t *m, shoal_live_manager_t *mgr, const char *host) {
  shoal_live_mem_behaviour_t b = {.work = 1e9};
  long id = shoal__live_mem_submit(m, "shoal:elastic", "train", "", "root", 1, &b);
  char node[1][SHOAL_LIVE_NAME];
  snprintf(node[0], SHOAL_LIVE_NAME, "%s", host);
  int one = 1;
  shoal_live_place_t p = {.n = 1, .node = node, .gpus = &one};
  CHECK_OK(mgr->ops->start(mgr->impl, id, &p));
  return id;
}

/* train node t0 running an elastic job (its id), three idle infer nodes i0..i2 (the clock past its start) */
static long trainer_beside_three_replica_hosts(shoal_live_mem_t **out, shoal_live_manager_t *mgr) {
  shoal_live_mem_t *m;
  CHECK_OK(shoal__live_mem_create(1000, &m));
  *mgr = shoal__live_mem_manager(m);
  CHECK_OK(shoal__live_mem_add_node(m, "t0", 1, 4, 0, "train"));
  CHECK_OK(shoal__live_mem_add_node(m, "i0", 1, 4, 0, "infer"));
  CHECK_OK(shoal__live_mem_add_node(m, "i1", 1, 4, 0, "infer"));
  CHECK_OK(shoal__live_mem_add_node(m, "i2", 1, 4, 0, "infer"));
  long train = start_elastic(m, mgr, "t0");
  shoal__live_mem_advance(m, 1001);
  *out = m;
  return train;
}

/* the controller dies and a new one starts once the old lease (1 s) has run out */
static void restart_controller(world_t *w) {
  world_crash(w);
  w->cfg.lease_ttl = 1;
  world_step(w, 2);
  CHECK_OK(world_start(w));
}

TEST(live_loan_lends_idle_replica_hosts_and_reclaims_them) {
  shoal_live_mem_t *m;
  shoal_live_manager_t mgr;
  long train = trainer_beside_three_replica_hosts(&m, &mgr);
  CHECK_MSG(running_on(m, train, "t0"), "training job: %s %s", shoal__live_mem_job(m, train)->state,
            shoal__live_mem_job(m, train)->reason);

  shoal__forecast_t *fc;
  CHECK_OK(shoal__forecast_create("off", 0.5, 0, &fc));
  shoal_live_loan_config_t c = {.infer_partition = "infer", .replica_argv = serve_argv,
                                .replica_argc = 4, .service_s = 1, .slo_s = 4, .slo_q = 0.99, .hold_s = 2,
                                .router = "http://10.0.0.9:35001"};
  shoal_live_loan_t *L;
  CHECK_OK(shoal__live_loan_create(&c, fc, &L));
  shoal_live_borrower_t bw = {.id = train, .room = 3};
  shoal__live_loan_borrowers(L, &bw, 1, NULL, NULL);
  shoal_live_loan_step_t o;
  /* no load: one replica (on i0), the idle hosts lent one per step */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1001, 0, 0, &o));
  CHECK(o.want == 1 && o.started == 1 && o.replicas == 1 && o.lent_now == 1 && o.lent == 1);
  shoal__live_mem_advance(m, 1002);
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1002, 0, 0, &o));
  CHECK(o.started == 0 && o.lent_now == 1 && o.lent == 2);
  shoal__live_mem_advance(m, 1003);
  CHECK(running_on(m, train, "t0,i1,i2"));
  CHECK(running_on(m, train + 1, "i0")); /* the replica job, told where its router is */
  CHECK_MSG(!strcmp(shoal__live_mem_job_env(m, train + 1), "SHOAL_SERVE_ROUTER=http://10.0.0.9:35001"), "env: %s",
            shoal__live_mem_job_env(m, train + 1));
  CHECK(!strcmp(shoal__live_mem_job_env(m, train), ""));
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
  shoal__live_loan_borrowers(L, &bw, 1, NULL, NULL);
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
  /* a manager that grows by a restart (Slurm): both idle hosts lent in one resize */
  shoal_live_manager_ops_t restart_grow = shrink_only;
  restart_grow.caps |= SHOAL_LIVE_CAP_GROW_RESTART;
  shoal_live_manager_t slurm_grow = {&restart_grow, mgr.impl};
  CHECK_OK(shoal__live_loan_step(L, &slurm_grow, 1014.5, 0, 0, &o));
  CHECK(o.lent_now == 2 && o.lent == 2 && o.replicas == 1);
  shoal__live_mem_advance(m, 1014.6);
  CHECK(running_on(m, train, "t0,i1,i2") || running_on(m, train, "t0,i2,i1"));
  CHECK_OK(shoal__live_loan_step(L, &slurm_grow, 1014.7, 2, 12, &o)); /* and reclaimed (a shrink in place) */
  CHECK(o.reclaimed == 2 && o.replicas == 3 && o.lent == 0);
  /* the manager does not answer: an error, nothing changed */
  shoal__live_mem_set_down(m, 1);
  CHECK(shoal__live_loan_step(L, &mgr, 1015, 5, 30, &o) != 0);
  shoal__live_mem_set_down(m, 0);
  shoal__live_loan_destroy(L);
  shoal__forecast_free(fc);
  shoal__live_mem_destroy(m);
}

/* Speedups worked by hand: borrower 0 scales linearly (speedup g), borrower 1 saturates (2 - 1/g). */
static double two_speedups(void *arg, int k, int g) {
  (void)arg;
  return k == 0 ? g : 2.0 - 1.0 / g;
}

/* Several borrowers at once: each idle host goes to the borrower whose speedup rises most (within its room); a
 * reclaim shrinks the one whose speedup drops least and leaves the other alone; a restarted loan state finds
 * every borrower's lent hosts in the manager. */
TEST(live_loan_lends_to_several_borrowers_and_reclaims_each_on_its_own) {
  shoal_live_mem_t *m;
  CHECK_OK(shoal__live_mem_create(1000, &m));
  shoal_live_manager_t mgr = shoal__live_mem_manager(m);
  CHECK_OK(shoal__live_mem_add_node(m, "t0", 1, 4, 0, "train"));
  CHECK_OK(shoal__live_mem_add_node(m, "t1", 1, 4, 0, "train"));
  for (int i = 0; i < 5; i++) {
    char name[8];
    snprintf(name, sizeof name, "i%d", i);
    CHECK_OK(shoal__live_mem_add_node(m, name, 1, 4, 0, "infer"));
  }
  long t[2] = {start_elastic(m, &mgr, "t0"), start_elastic(m, &mgr, "t1")};
  shoal__live_mem_advance(m, 1001);
  shoal__forecast_t *fc;
  CHECK_OK(shoal__forecast_create("off", 0.5, 0, &fc));
  shoal_live_loan_config_t c = {.infer_partition = "infer", .replica_argv = serve_argv, .replica_argc = 4,
                                .service_s = 1, .slo_s = 4, .slo_q = 0.99, .hold_s = 100};
  shoal_live_loan_t *L;
  CHECK_OK(shoal__live_loan_create(&c, fc, &L));
  shoal_live_borrower_t bw[2] = {{.id = t[0], .room = 2}, {.id = t[1], .room = 3}};
  shoal__live_loan_borrowers(L, bw, 2, two_speedups, NULL);
  shoal_live_loan_step_t o;
  /* a replica on i0; one host lent per step: borrower 0 gains 1 a host, borrower 1 0.5 then less, so i1 and i2
   * go to borrower 0 (its room, 2), then i3 and i4 to borrower 1 */
  for (int step = 0; step < 4; step++) {
    CHECK_OK(shoal__live_loan_step(L, &mgr, 1001 + step, 0, 0, &o));
    CHECK_EQ(o.lent_now, 1);
    CHECK_EQ(o.b[step < 2 ? 0 : 1].lent_now, 1);
    shoal__live_mem_advance(m, 1002 + step);
  }
  CHECK(o.nb == 2 && o.b[0].id == t[0] && o.b[1].id == t[1] && o.b[0].lent == 2 && o.b[1].lent == 2 && o.replicas == 1);
  CHECK(running_on(m, t[0], "t0,i1,i2") && running_on(m, t[1], "t1,i3,i4"));
  /* 0.5 requests/s: two replicas wanted (P99 2.5 s under the 4 s SLO); borrower 1 (3 -> 2 GPUs loses 2/3 - 1/2) gives a host, borrower 0 (loses 1) none */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1005, 0.5, 0, &o));
  CHECK_MSG(o.want == 2 && o.reclaimed == 1 && o.b[1].reclaimed == 1 && o.b[0].reclaimed == 0 && o.replicas == 2,
            "want %d reclaimed %d (%d, %d) replicas %d", o.want, o.reclaimed, o.b[0].reclaimed, o.b[1].reclaimed,
            o.replicas);
  shoal__live_mem_advance(m, 1006);
  CHECK(running_on(m, t[0], "t0,i1,i2"));
  CHECK(running_on(m, t[1], "t1,i3") || running_on(m, t[1], "t1,i4"));
  /* restarted mid-loan: every borrower's lent hosts are found, nothing started or lent twice */
  shoal__live_loan_destroy(L);
  CHECK_OK(shoal__live_loan_create(&c, fc, &L));
  shoal__live_loan_borrowers(L, bw, 2, two_speedups, NULL);
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1006, 0.5, 0, &o));
  CHECK(o.started == 0 && o.reclaimed == 0 && o.lent_now == 0 && o.replicas == 2 && o.b[0].lent == 2 && o.b[1].lent == 1);
  /* 2 requests/s: four wanted (three give a P99 of 4.8 s); borrower 1 (2 -> 1 loses 1/2) first, then, with none lent left there, borrower 0: each in one
   * resize */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1007, 2, 0, &o));
  CHECK_MSG(o.want == 4 && o.b[1].reclaimed == 1 && o.b[0].reclaimed == 1 && o.replicas == 4 && o.lent == 1,
            "want %d reclaimed (%d, %d) replicas %d lent %d", o.want, o.b[0].reclaimed, o.b[1].reclaimed, o.replicas,
            o.lent);
  shoal__live_mem_advance(m, 1008);
  CHECK(running_on(m, t[0], "t0,i1") || running_on(m, t[0], "t0,i2"));
  CHECK(running_on(m, t[1], "t1"));
  shoal__live_loan_destroy(L);
  shoal__forecast_free(fc);
  shoal__live_mem_destroy(m);
}

/* reactive autoscaling (the baseline): the replicas follow the last step's utilization (service 1 s, thresholds
 * 0.4..0.8); waiting requests and the SLO model are not asked */
TEST(live_loan_reactive_follows_the_utilization_only) {
  shoal_live_mem_t *m;
  CHECK_OK(shoal__live_mem_create(1000, &m));
  shoal_live_manager_t mgr = shoal__live_mem_manager(m);
  CHECK_OK(shoal__live_mem_add_node(m, "t0", 1, 4, 0, "train"));
  for (int i = 0; i < 4; i++) {
    char name[8];
    snprintf(name, sizeof name, "i%d", i);
    CHECK_OK(shoal__live_mem_add_node(m, name, 1, 4, 0, "infer"));
  }
  shoal__forecast_t *fc;
  CHECK_OK(shoal__forecast_create("off", 0.5, 0, &fc));
  shoal_live_loan_config_t c = {.infer_partition = "infer", .replica_argv = serve_argv, .replica_argc = 4,
                                .service_s = 1, .slo_s = 4, .slo_q = 0.99, .hold_s = 0, .react_lo = 0.4,
                                .react_hi = 0.8};
  shoal_live_loan_t *L;
  CHECK_OK(shoal__live_loan_create(&c, fc, &L));
  shoal_live_loan_step_t o;
  /* idle, 30 requests waiting: one replica (the SLO model would want all four hosts) */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1000, 0, 30, &o));
  CHECK_MSG(o.want == 1 && o.replicas == 1, "want %d replicas %d", o.want, o.replicas);
  shoal__live_mem_advance(m, 1001);
  /* 1.7/s on one replica: utilization 1.7, above 0.8: ceil(1.7 / 0.6) = 3 */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1001, 1.7, 0, &o));
  CHECK_MSG(o.want == 3 && o.replicas == 3, "want %d replicas %d", o.want, o.replicas);
  shoal__live_mem_advance(m, 1002);
  /* 1.5/s on three: 0.5, within the thresholds: kept */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1002, 1.5, 0, &o));
  CHECK_MSG(o.want == 3 && o.replicas == 3, "want %d replicas %d", o.want, o.replicas);
  /* 0.6/s: 0.2, below: one (hold 0: the others stop) */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1003, 0.6, 0, &o));
  CHECK_MSG(o.want == 1 && o.stopped == 2, "want %d stopped %d", o.want, o.stopped);
  shoal__live_loan_destroy(L);
  c.react_lo = 0.9;
  CHECK(shoal__live_loan_create(&c, fc, &L) == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "reactive thresholds");
  shoal__forecast_free(fc);
  shoal__live_mem_destroy(m);
}

/* The replicas wanted count with the replicas' own measured seconds a request once they report one, and a spare
 * replica is kept ready beyond the need (its host is not lent). Service 1 s configured, SLO 4 s, three hosts. */
TEST(live_loan_counts_with_the_measured_service_time_and_keeps_a_spare) {
  shoal_live_mem_t *m;
  shoal_live_manager_t mgr;
  long train = trainer_beside_three_replica_hosts(&m, &mgr);
  shoal__forecast_t *fc;
  CHECK_OK(shoal__forecast_create("off", 0.5, 0, &fc));
  shoal_live_loan_config_t c = {.infer_partition = "infer", .replica_argv = serve_argv, .replica_argc = 4,
                                .service_s = 1, .slo_s = 4, .slo_q = 0.99, .hold_s = 0, .spare = 1};
  shoal_live_loan_t *L;
  CHECK_OK(shoal__live_loan_create(&c, fc, &L));
  shoal_live_borrower_t bw = {.id = train, .room = 3};
  shoal__live_loan_borrowers(L, &bw, 1, NULL, NULL);
  shoal_live_loan_step_t o;
  /* idle: one replica needed and one spare; the third host is lent */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1001, 0, 0, &o));
  CHECK_MSG(o.want == 2 && o.started == 2 && o.lent_now == 1 && o.service_s == 1, "want %d started %d lent %d",
            o.want, o.started, o.lent_now);
  shoal__live_mem_advance(m, 1002);
  CHECK(running_on(m, train, "t0,i2"));
  /* 2 requests/s at the configured 1 s: at least three replicas (all hosts, the lent one reclaimed) */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1002, 2, 0, &o));
  CHECK_MSG(o.want == 3 && o.reclaimed == 1 && o.replicas == 3, "want %d reclaimed %d", o.want, o.reclaimed);
  shoal__live_mem_advance(m, 1003);
  /* the replicas measure 0.1 s a request: 2/s needs one, plus the spare; the third stops and is lent */
  shoal__live_loan_measured(L, 0.1);
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1003, 2, 0, &o));
  CHECK_MSG(o.want == 2 && o.stopped == 1 && o.service_s == 0.1, "want %d stopped %d service %g", o.want, o.stopped,
            o.service_s);
  shoal__live_mem_advance(m, 1008); /* past the stopped job's clean-up */
  shoal__live_loan_measured(L, 0); /* nothing reported: the last measurement stays */
  CHECK_OK(shoal__live_loan_step(L, &mgr, 1008, 2, 0, &o));
  CHECK(o.want == 2 && o.service_s == 0.1);
  shoal__live_loan_destroy(L);
  c.spare = -1;
  CHECK(shoal__live_loan_create(&c, fc, &L) == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "spare");
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

/* ---- loaning in the controller's round ---- */

typedef struct load {
  double rate, waiting;
  double arrived;   /* the router's running count of arrivals (< 0: not given) */
  double per_read;  /* added to it at each read */
  int fail;
} load_t;

static int scripted_load(void *arg, double *rate, double *waiting, double *service_s, double *arrived) {
  load_t *l = arg;
  if (l->fail) return shoal__seterr(SHOAL_ERR_IO, "router 127.0.0.1:1: connection refused");
  *rate = l->rate, *waiting = l->waiting, *service_s = 0;
  if (l->arrived >= 0) l->arrived += l->per_read;
  *arrived = l->arrived;
  return 0;
}

/* the nodes the job holds now, "h0,i1" (static buffer) */
static const char *holds(world_t *w, long id) {
  static char held[256];
  shoal_live_jobs_t jobs = {0};
  held[0] = 0;
  if (w->mgr.ops->jobs(w->mgr.impl, &jobs)) return "?";
  const shoal_live_job_t *j = shoal__live_jobs_find(&jobs, id);
  for (int u = 0; j && u < j->nuse; u++)
    snprintf(held + strlen(held), sizeof held - strlen(held), "%s%s", u ? "," : "", j->use[u].node);
  shoal__live_jobs_free(&jobs);
  return held;
}

/* replica jobs the manager runs */
static int replicas_running(world_t *w) {
  shoal_live_jobs_t jobs = {0};
  int n = 0;
  if (w->mgr.ops->jobs(w->mgr.impl, &jobs)) return -1;
  for (int i = 0; i < jobs.n; i++)
    n += jobs.job[i].run == SHOAL_LIVE_RUNNING && !strcmp(jobs.job[i].comment, "shoal:serve");
  shoal__live_jobs_free(&jobs);
  return n;
}

/* A controller running fifo on `train` training hosts h0.. beside `infer` idle inference hosts i0.. (partition
 * infer) it lends from, on a manager that resizes in place (slurm_resize 0) or as Slurm does (1); the load is
 * the script's. */
static void loan_world_of(world_t *w, load_t *load, int train, int infer, int slurm_resize) {
  world_init(w, train, 1, "fifo");
  if (slurm_resize) {
    shoal__live_mem_set_slurm_resize(w->m, 1);
    w->mgr = shoal__live_mem_manager(w->m);
  }
  for (int i = 0; i < infer; i++) {
    char name[8];
    snprintf(name, sizeof name, "i%d", i);
    CHECK_OK(shoal__live_mem_add_node(w->m, name, 1, 4, 0, "infer"));
  }
  shoal_live_loan_opts_t *o = &w->cfg.loan;
  o->partition = "infer", o->replica_argv = serve_argv, o->replica_argc = 4, o->forecast = "off", o->alpha = 0.5;
  o->service_s = 1, o->slo_s = 4, o->slo_q = 0.99, o->hold_s = 2, o->every = 1;
  o->load = scripted_load, o->load_arg = load;
  load->arrived = -1; /* (the router's rate only, unless a test gives the count) */
}

static void loan_world(world_t *w, load_t *load) { loan_world_of(w, load, 1, 3, 0); }

/* The controller's round lends the idle inference hosts to its running elastic job and reclaims them when
 * requests wait; a restarted controller keeps the loans it finds in the manager. */
TEST(live_loan_in_the_controller_round) {
  world_t w;
  load_t load = {0};
  loan_world(&w, &load);
  CHECK_OK(world_start(&w));
  CHECK_LOGGED(&w, "loaning from partition infer");
  long a = world_submit(&w, 1, 1, 4, 1e7, 1); /* elastic: 1..4 workers, fifo gives it 1 */
  world_run(&w, 8, 0);
  CHECK_MSG(!strcmp(holds(&w, a), "h0,i1,i2"), "job on %s: %s", holds(&w, a), world_log(&w));
  CHECK_EQ(replicas_running(&w), 1);
  CHECK_LOGGED(&w, "loaning: job %ld borrows (up to 3 more GPUs)", a);
  /* 12 requests waiting, 2/s: both lent hosts reclaimed, a replica on each */
  load.rate = 2, load.waiting = 12;
  world_run(&w, 2, 0);
  CHECK_MSG(!strcmp(holds(&w, a), "h0"), "job on %s: %s", holds(&w, a), world_log(&w));
  CHECK_EQ(replicas_running(&w), 3);
  CHECK_LOGGED(&w, "2 reclaimed from job %ld, 2 replicas started", a);
  /* calm: after the 2 s hold the extra replicas stop and their hosts are lent again */
  load.rate = 0, load.waiting = 0;
  world_run(&w, 10, 0);
  CHECK_EQ(replicas_running(&w), 1);
  CHECK_MSG(strlen(holds(&w, a)) == strlen("h0,i1,i2"), "job on %s: %s", holds(&w, a), world_log(&w));
  /* the controller dies mid-loan: the new one adopts the job (its lent hosts are the loan's) and the replica;
   * the job is in the partition that holds both sides' hosts, where Slurm's grow moves a borrower */
  CHECK_OK(shoal__live_mem_user_set_partition(w.m, a, "all"));
  restart_controller(&w);
  world_run(&w, 4, 0);
  CHECK_LOGGED(&w, "job %ld: adopted", a);
  CHECK_EQ(replicas_running(&w), 1);
  CHECK_EQ(world_runs(&w, a), 1);
  CHECK_EQ(strlen(holds(&w, a)), strlen("h0,i1,i2"));
  /* the router does not answer: said once, nothing changes */
  load.fail = 1;
  world_run(&w, 4, 0);
  CHECK_LOGGED(&w, "loaning: the request rate cannot be read: router 127.0.0.1:1: connection refused");
  CHECK_EQ(replicas_running(&w), 1);
  world_fini(&w);
}

/* The controller counts with the requests that arrived since its last step (the router's running count), not
 * the router's rate over its 10 s window: a burst that has just begun (the window's rate still low, nothing
 * waiting yet) reclaims the lent hosts at once. */
TEST(live_loan_counts_with_the_arrivals_since_its_last_step) {
  world_t w;
  load_t load = {0};
  loan_world(&w, &load);
  load.arrived = 100, load.per_read = 0.1; /* calm: a request in 10 s (a step a second) */
  load.rate = 0.1;
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 4, 1e7, 1);
  world_run(&w, 8, 0);
  CHECK_MSG(!strcmp(holds(&w, a), "h0,i1,i2"), "job on %s: %s", holds(&w, a), world_log(&w));
  CHECK_EQ(replicas_running(&w), 1);
  /* a burst: 3 requests a second arrive; the window's rate and the waiting count have not moved yet. At 1 s a
   * request, P99 under 4 s at 3/s needs every host */
  load.per_read = 3;
  world_run(&w, 2, 0);
  CHECK_MSG(!strcmp(holds(&w, a), "h0"), "job on %s: %s", holds(&w, a), world_log(&w));
  CHECK_EQ(replicas_running(&w), 3);
  CHECK_LOGGED(&w, "loaning: 3.00 requests/s, 0 waiting");
  world_fini(&w);
}

/* Loaning admits a borrower its journal knows from another partition; a tagged job there that it never had
 * (pending, or running on a host of that partition) is someone else's, before and after a restart. */
TEST(live_loan_leaves_foreign_tagged_jobs_alone) {
  world_t w;
  load_t load = {0};
  loan_world(&w, &load);
  CHECK_OK(shoal__live_mem_add_node(w.m, "x0", 1, 4, 0, "all"));
  shoal_live_params_t p = {.gpus = 1, .min = 1, .max = 4, .work = 1e7};
  snprintf(p.model, sizeof p.model, "resnet50");
  char c[256];
  CHECK_OK(shoal__live_params_format(&p, c, sizeof c));
  shoal_live_mem_behaviour_t b = {.work = 1e7};
  long pending = shoal__live_mem_submit(w.m, c, "all", "research", "ann", 1, &b);
  long running = shoal__live_mem_submit(w.m, c, "all", "research", "ann", 1, &b);
  char x0[1][SHOAL_LIVE_NAME] = {"x0"};
  int one = 1;
  shoal_live_place_t place = {.n = 1, .node = x0, .gpus = &one};
  CHECK_OK(w.mgr.ops->start(w.mgr.impl, running, &place));
  CHECK_OK(world_start(&w));
  for (int restart = 0; restart < 2; restart++) {
    world_run(&w, 6, 0);
    CHECK_EQ(world_runs(&w, pending), 0);
    CHECK_EQ(world_runs(&w, running), 1);
    CHECK_MSG(!strcmp(holds(&w, running), "x0"), "foreign job on %s: %s", holds(&w, running), world_log(&w));
    CHECK_MSG(!world_loggedf(&w, "job %ld", pending) && !world_loggedf(&w, "job %ld", running), "%s",
              world_log(&w));
    CHECK_EQ(replicas_running(&w), 1);
    restart_controller(&w);
  }
  world_fini(&w);
}

/* Several elastic jobs borrow at once in the controller's round; a restarted controller adopts all of them from
 * its journal (each moved by the grow to the partition holding both sides) with their lent hosts, and reclaims
 * from each. */
TEST(live_loan_several_borrowers_through_a_restart) {
  world_t w;
  load_t load = {0};
  loan_world_of(&w, &load, 2, 4, 0);
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 3, 1e7, 1), b = world_submit(&w, 1, 1, 3, 1e7, 1); /* room 2 each */
  world_run(&w, 10, 0);
  CHECK_EQ(replicas_running(&w), 1);
  char ha[256], hb[256];
  snprintf(ha, sizeof ha, "%s", holds(&w, a));
  snprintf(hb, sizeof hb, "%s", holds(&w, b));
  /* three idle hosts: each job got some, within its room */
  CHECK_MSG(strstr(ha, ",i") && strstr(hb, ",i") && strlen(ha) + strlen(hb) == strlen("h0,i1,i2") + strlen("h1,i3"),
            "a on %s, b on %s: %s", ha, hb, world_log(&w));
  CHECK_LOGGED(&w, "loaning: job %ld borrows (up to 2 more GPUs)", a);
  CHECK_LOGGED(&w, "loaning: job %ld borrows (up to 2 more GPUs)", b);
  /* the controller dies mid-loan; the new one adopts both with their lent hosts */
  CHECK_OK(shoal__live_mem_user_set_partition(w.m, a, "all"));
  CHECK_OK(shoal__live_mem_user_set_partition(w.m, b, "all"));
  restart_controller(&w);
  world_run(&w, 4, 0);
  CHECK_LOGGED(&w, "job %ld: adopted", a);
  CHECK_LOGGED(&w, "job %ld: adopted", b);
  CHECK_EQ(world_runs(&w, a), 1);
  CHECK_EQ(world_runs(&w, b), 1);
  CHECK_EQ(replicas_running(&w), 1);
  CHECK_MSG(!strcmp(holds(&w, a), ha) && !strcmp(holds(&w, b), hb), "a on %s, b on %s: %s", holds(&w, a),
            holds(&w, b), world_log(&w));
  /* requests wait: every lent host reclaimed, from each job */
  load.rate = 2, load.waiting = 12;
  world_run(&w, 2, 0);
  CHECK_EQ(replicas_running(&w), 4);
  CHECK_MSG(!strcmp(holds(&w, a), "h0") || !strcmp(holds(&w, a), "h1"), "a on %s", holds(&w, a));
  CHECK_MSG(!strcmp(holds(&w, b), "h0") || !strcmp(holds(&w, b), "h1"), "b on %s", holds(&w, b));
  CHECK_LOGGED(&w, "reclaimed from job %ld", a);
  CHECK_LOGGED(&w, "reclaimed from job %ld", b);
  world_fini(&w);
}

TEST(live_loan_needs_its_own_partition) {
  world_t w;
  load_t load = {0};
  loan_world(&w, &load);
  w.cfg.loan.partition = "shoal";
  CHECK(world_start(&w) == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "must serve another partition");
  w.cfg.loan.partition = "infer", w.cfg.loan.forecast = "crystal";
  CHECK(world_start(&w) != 0);
  CHECK_CONTAINS(shoal_last_error(), "loaning:");
  world_fini(&w);
}

/* On a manager that resizes as Slurm does (no resize in place: its shrink kills the dropped tasks and fails the
 * step, losing the work since the last checkpoint), the controller's round grows a borrower by the controller's
 * own checkpoint-and-restart, and reclaims by a checkpoint at the job's iteration boundary and a restart on its
 * own hosts: no run end is taken for a failure (no retry), and the job's progress is never lost. */
TEST(live_loan_restarts_through_the_controller_without_failures_or_lost_work) {
  world_t w;
  load_t load = {0};
  loan_world(&w, &load);
  shoal__live_mem_set_slurm_resize(w.m, 1);
  w.mgr = shoal__live_mem_manager(w.m);
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 4, 1e7, 1); /* elastic, checkpointing (1 s), 1..4 workers */
  world_run(&w, 10, 0);
  CHECK_MSG(!strcmp(holds(&w, a), "h0,i1,i2") || !strcmp(holds(&w, a), "h0,i2,i1"), "job on %s: %s", holds(&w, a),
            world_log(&w));
  CHECK_LOGGED(&w, "loaning: job %ld checkpoints and restarts on h0", a);
  CHECK_EQ(replicas_running(&w), 1);
  world_run(&w, 3, 0);
  shoal_live_mem_stats_t before, after;
  CHECK_OK(shoal__live_mem_stats(w.m, a, &before));
  CHECK(before.gpus == 3 && before.progress > 0);
  /* 12 requests waiting, 2/s: both lent hosts reclaimed; the job checkpoints and goes on on h0 alone */
  load.rate = 2, load.waiting = 12;
  world_run(&w, 8, 0);
  CHECK_MSG(!strcmp(holds(&w, a), "h0"), "job on %s: %s", holds(&w, a), world_log(&w));
  CHECK_EQ(replicas_running(&w), 3);
  CHECK_LOGGED(&w, "2 reclaimed from job %ld", a);
  CHECK_OK(shoal__live_mem_stats(w.m, a, &after));
  CHECK_MSG(after.progress >= before.progress, "progress %.1f after the reclaim, %.1f before: work lost",
            after.progress, before.progress);
  CHECK_MSG(!world_logged(&w, "(retry "), "a loan's restart taken for a failure: %s", world_log(&w));
  world_fini(&w);
}

/* Two borrowers on a manager that resizes as Slurm does: each grows by the controller's checkpoint-and-restart;
 * then one more replica is wanted, and the host comes back from one borrower only, at its iteration boundary
 * (checkpoint, restart on its own hosts): its progress is not lost, the other borrower keeps its hosts and its
 * run (not restarted), and no run's end is taken for a failure. Then every lent host is reclaimed. */
TEST(live_loan_reclaims_from_one_of_two_borrowers_without_lost_work) {
  world_t w;
  load_t load = {0};
  loan_world_of(&w, &load, 2, 3, 1);
  CHECK_OK(world_start(&w));
  long id[2] = {world_submit(&w, 1, 1, 2, 1e7, 1), world_submit(&w, 1, 1, 2, 1e7, 1)}; /* room 1 each */
  world_run(&w, 12, 0);
  CHECK_EQ(replicas_running(&w), 1);
  char held[2][256];
  for (int k = 0; k < 2; k++) {
    snprintf(held[k], sizeof held[k], "%s", holds(&w, id[k]));
    CHECK_MSG(strstr(held[k], ",i") != NULL, "job %ld on %s, not grown: %s", id[k], held[k], world_log(&w));
    CHECK_LOGGED(&w, "loaning: job %ld checkpoints and restarts on", id[k]);
  }
  world_run(&w, 3, 0);
  shoal_live_mem_stats_t before[2], after[2];
  for (int k = 0; k < 2; k++) CHECK_OK(shoal__live_mem_stats(w.m, id[k], &before[k]));
  CHECK(before[0].gpus == 2 && before[1].gpus == 2 && before[0].progress > 0 && before[1].progress > 0);
  /* 0.5 requests/s: two replicas (P99 2.5 s under the 4 s SLO): one lent host back, from one borrower */
  load.rate = 0.5;
  world_run(&w, 8, 0);
  CHECK_EQ(replicas_running(&w), 2);
  int from = world_loggedf(&w, "1 reclaimed from job %ld", id[0]) ? 0 : 1, other = 1 - from;
  CHECK_MSG(world_loggedf(&w, "1 reclaimed from job %ld", id[from]), "no reclaim logged: %s", world_log(&w));
  CHECK_MSG(!world_loggedf(&w, "reclaimed from job %ld", id[other]), "both borrowers shrunk: %s", world_log(&w));
  CHECK_MSG(strchr(holds(&w, id[from]), ',') == NULL, "job %ld still on %s: %s", id[from], holds(&w, id[from]),
            world_log(&w));
  CHECK_MSG(!strcmp(holds(&w, id[other]), held[other]), "job %ld moved from %s to %s: %s", id[other], held[other],
            holds(&w, id[other]), world_log(&w));
  for (int k = 0; k < 2; k++) CHECK_OK(shoal__live_mem_stats(w.m, id[k], &after[k]));
  CHECK_MSG(after[from].progress >= before[from].progress, "progress %.1f after the reclaim, %.1f before: work lost",
            after[from].progress, before[from].progress);
  CHECK_EQ(after[from].runs, before[from].runs + 1); /* the reclaim's restart on its own host */
  CHECK_EQ(after[other].runs, before[other].runs);   /* the other borrower was not touched */
  CHECK(after[other].progress > before[other].progress);
  /* requests wait: the other lent host is reclaimed too, from the other borrower */
  load.rate = 2, load.waiting = 12;
  world_run(&w, 8, 0);
  CHECK_EQ(replicas_running(&w), 3);
  CHECK_LOGGED(&w, "reclaimed from job %ld", id[other]);
  for (int k = 0; k < 2; k++) {
    CHECK_MSG(strchr(holds(&w, id[k]), ',') == NULL, "job %ld still on %s", id[k], holds(&w, id[k]));
    shoal_live_mem_stats_t now;
    CHECK_OK(shoal__live_mem_stats(w.m, id[k], &now));
    CHECK_MSG(now.progress >= after[k].progress, "job %ld: progress %.1f, %.1f before: work lost", id[k], now.progress,
              after[k].progress);
  }
  CHECK_MSG(!world_logged(&w, "(retry "), "a loan's restart taken for a failure: %s", world_log(&w));
  world_fini(&w);
}

/* On a manager that resizes as Slurm does, a borrower whose tasks leave on request (leave=1: `shoal submit
 * --leavable`) gives a lent host back in place at its iteration boundary: the same run goes on (no restart, no
 * work lost); a borrower without it is shrunk by a restart (the test above). */
TEST(live_loan_reclaims_in_place_from_a_borrower_that_leaves_on_request) {
  world_t w;
  load_t load = {0};
  loan_world_of(&w, &load, 1, 3, 1);
  CHECK_OK(world_start(&w));
  long a = world_submit_comment(&w, "shoal:gpus=1:min=1:max=4:leave=1", 1e7, 1);
  world_run(&w, 12, 0);
  CHECK_EQ(replicas_running(&w), 1);
  CHECK_MSG(!strcmp(holds(&w, a), "h0,i1,i2"), "job on %s: %s", holds(&w, a), world_log(&w));
  world_run(&w, 3, 0);
  shoal_live_mem_stats_t before, after;
  CHECK_OK(shoal__live_mem_stats(w.m, a, &before));
  load.rate = 2, load.waiting = 12;
  world_run(&w, 2, 0);
  CHECK_EQ(replicas_running(&w), 3);
  CHECK_MSG(!strcmp(holds(&w, a), "h0"), "job on %s: %s", holds(&w, a), world_log(&w));
  CHECK_LOGGED(&w, "2 reclaimed from job %ld", a);
  CHECK_OK(shoal__live_mem_stats(w.m, a, &after));
  CHECK_EQ(after.runs, before.runs); /* in place: the same run */
  CHECK(after.progress > before.progress);
  CHECK_MSG(!world_loggedf(&w, "loaning: job %ld checkpoints and restarts on h0\n", a), "shrunk by a restart: %s",
            world_log(&w));
  world_fini(&w);
}
