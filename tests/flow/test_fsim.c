/* The flow-level simulator (docs/flow.md#the-simulator) against iteration times worked out by hand: one
 * 40 Mbit/s link per host, racks joined by an uplink, TCP's goodput 95% of a link (5e6 x 0.95 = 4.75 MB/s). */
#include <math.h>
#include <string.h>

#include "../runner.h"
#include "flow/fsim.h"

/* 4 hosts in 2 racks at 40 Mbit/s, the uplinks 4:1 oversubscribed: 2 x 40 / 4 = 20 Mbit/s (2.5 MB/s). */
static void two_racks(shoal__fsim_cfg_t *c, int policy) {
  shoal__fsim_cfg_default(c);
  c->policy = policy;
  CHECK_OK(shoal__ftopo_uniform(4, 2, 40e6, 4, &c->topo));
}

static shoal__fsim_job_t ring(int a, int b, double compute_ms) {
  shoal__fsim_job_t j = {.nhosts = 2, .hosts = {a, b}, .iters = 10, .compute_s = compute_ms / 1e3, .grad_bytes = 2e6};
  return j;
}

TEST(fsim_one_job_alone_matches_the_formula) {
  shoal__fsim_cfg_t c;
  two_racks(&c, SHOAL__FSIM_POLICY_TCP);
  /* a ring of 2 hosts in one rack: each hop carries 2(h-1)/h x 2 MB = 2 MB at 4.75 MB/s */
  shoal__fsim_job_t j = ring(0, 1, 100);
  CHECK_OK(shoal__fsim_run(&c, &j, 1));
  CHECK_EQ(j.iters_done, 10);
  CHECK_NEAR(j.iter_sum_s / j.iters_done, 0.1 + 2e6 / 4.75e6, 0.01);
  /* across the racks: the uplink (2.5 MB/s x 0.95) is the bottleneck */
  shoal__fsim_job_t k = ring(0, 2, 100);
  CHECK_OK(shoal__fsim_run(&c, &k, 1));
  CHECK_NEAR(k.iter_sum_s / k.iters_done, 0.1 + 2e6 / 2.375e6, 0.02);
}

TEST(fsim_jobs_share_the_uplink) {
  shoal__fsim_cfg_t c;
  two_racks(&c, SHOAL__FSIM_POLICY_TCP);
  shoal__fsim_job_t alone = ring(0, 2, 0), both[2] = {ring(0, 2, 0), ring(1, 3, 0)};
  CHECK_OK(shoal__fsim_run(&c, &alone, 1));
  CHECK_OK(shoal__fsim_run(&c, both, 2));
  /* with no compute both rings always communicate: each gets half the uplink */
  for (int i = 0; i < 2; i++) {
    CHECK_EQ(both[i].iters_done, 10);
    CHECK_NEAR(both[i].iter_sum_s / 10, 2 * alone.iter_sum_s / 10, 0.05);
  }
  /* under a flow policy the same jobs finish, and the uplink is never given out twice: no faster than one
   * job alone, no slower than both sharing every instant by more than the slots' rounding */
  for (int pol = SHOAL__FPOL_MLCC; pol <= SHOAL__FPOL_EQUAL; pol++) {
    shoal__fsim_cfg_t p;
    two_racks(&p, pol);
    shoal__fsim_job_t pj[2] = {ring(0, 2, 0), ring(1, 3, 0)};
    CHECK_OK(shoal__fsim_run(&p, pj, 2));
    for (int i = 0; i < 2; i++) {
      CHECK_MSG(pj[i].iters_done == 10, "policy %d job %d: %d iterations", pol, i, pj[i].iters_done);
      double it = pj[i].iter_sum_s / 10;
      CHECK_MSG(it >= alone.iter_sum_s / 10 * 0.99 && it <= 2 * alone.iter_sum_s / 10 * 1.5,
                "policy %d job %d: iteration %.3f s (alone %.3f s)", pol, i, it, alone.iter_sum_s / 10);
    }
  }
}

TEST(fsim_places_arriving_jobs) {
  shoal__fsim_cfg_t c;
  shoal__fsim_cfg_default(&c);
  CHECK_OK(shoal__ftopo_uniform(8, 2, 1e9, 4, &c.topo));
  shoal__fsim_job_t j[3] = {{.arrival_s = 0, .gpus = 4, .iters = 3, .compute_s = 0.05, .grad_bytes = 1e6},
                            {.arrival_s = 0.1, .gpus = 8, .iters = 3, .compute_s = 0.05, .grad_bytes = 1e6},
                            {.arrival_s = 0.2, .gpus = 8, .iters = 3, .compute_s = 0.05, .grad_bytes = 1e6}};
  CHECK_OK(shoal__fsim_run(&c, j, 3));
  for (int i = 0; i < 3; i++) {
    CHECK_MSG(j[i].iters_done == 3 && j[i].end_s > j[i].start_s && j[i].start_s >= j[i].arrival_s,
              "job %d: %d iterations, %.3f..%.3f", i, j[i].iters_done, j[i].start_s, j[i].end_s);
    CHECK_EQ(j[i].nhosts, j[i].gpus / 2);
  }
  /* 2 + 4 + 4 hosts of 8: the third waits for the first to finish */
  CHECK(j[2].start_s >= j[0].end_s - 1e-9);
  /* a job larger than the cluster is an error, not a hang */
  shoal__fsim_job_t huge = {.gpus = 18, .iters = 1, .grad_bytes = 1};
  CHECK(shoal__fsim_run(&c, &huge, 1) < 0);
}

/* TCP's sharing as the testbed shows it: two identical jobs that start 50 ms apart. With equal shares at
 * once they collide in every step; with the ramp
 * (the job already sending keeps most of the link over the newcomer's first 300 ms) the first job
 * finishes earlier each step and the two drift apart towards taking turns. */
TEST(fsim_tcp_ramp_lets_jobs_drift_apart) {
  double it[2];
  for (int ramp = 0; ramp < 2; ramp++) {
    shoal__fsim_cfg_t c;
    two_racks(&c, SHOAL__FSIM_POLICY_TCP);
    if (!ramp) c.tcp_ramp_s = 0;
    CHECK(ramp == 0 || (c.tcp_ramp_s > 0 && c.tcp_ramp_share < 1)); /* the default model ramps */
    shoal__fsim_job_t j[2] = {ring(0, 2, 1000), ring(1, 3, 1000)};
    j[1].arrival_s = 0.05;
    CHECK_OK(shoal__fsim_run(&c, j, 2));
    it[ramp] = (j[0].iter_sum_s + j[1].iter_sum_s) / 20;
  }
  /* one phase alone: 2 MB at 2.375 MB/s, 842 ms; two colliding: 1684 */
  CHECK_MSG(it[0] > 1.0 + 1.5 * 0.842, "equal shares: %.3f s a step (collide: 2.684)", it[0]);
  /* taking turns: 1.842; the ramp's jobs drift part of the way there (the testbed's TCP: 1727-1757 ms a step
   * at 448 ms a phase, colliding 1896, taking turns 1448) */
  CHECK_MSG(it[1] < 1.0 + 1.4 * 0.842, "ramp: %.3f s a step (colliding 2.684, taking turns 1.842)", it[1]);
}
