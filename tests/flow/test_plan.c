/* The flow planner against schedules worked out by hand (docs/flow.md#the-planner). Units: one link of
 * 80 Mbit/s carries 10 MB/s, i.e. 1 MB per 100 ms slot; the horizon is 10 slots, the volume factor 1.6. */
#include <math.h>
#include <string.h>

#include "../runner.h"
#include "flow/ctl.h"
#include "flow/plan.h"
#include "flow/proto.h"

#define MB 1e6

static void plan_one_link(shoal__fplan_t *p, int policy) {
  shoal__fplan_cfg_t cfg;
  shoal__fplan_cfg_default(&cfg);
  cfg.policy = policy;
  double cap = 80e6;
  CHECK_OK(shoal__fplan_init(p, &cfg, &cap, 1));
}

static double sched_at(const shoal__fplan_t *p, int f, int k) {
  return p->flow[f].sched[(p->now + k) % p->cfg.horizon];
}

TEST(plan_new_iter_fills_least_loaded_slots) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0;
  int a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1), b = shoal__fplan_flow(&p, 2, 0, 1, 2, 3, &l, 1);
  /* A: 2 MB an iteration, planned 3.2 MB: slots 0, 1, 2 whole, 0.2 MB in slot 3; it has the link now */
  double ra = shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0);
  CHECK_NEAR(sched_at(&p, a, 0), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 2), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 3), 0.2 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 4), 0, 1e-9);
  CHECK_NEAR(ra, 0.94 * 10 * MB, 1); /* the whole path, shared with job 2's flow: 94% of it */
  /* B: 1 MB, planned 1.6 MB: the empty slots 4 and 5 (load 0, earliest first), not the 0.8 MB left in slot 3 */
  double rb = shoal__fplan_report(&p, b, SHOAL__FS_NEW_ITER, 1, 1 * MB, 0, 0);
  CHECK_NEAR(sched_at(&p, b, 3), 0, 1e-9);
  CHECK_NEAR(sched_at(&p, b, 4), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 5), 0.6 * MB, 1);
  CHECK_NEAR(rb, 0.02 * 10 * MB, 1); /* waits at the floor, 2% of the path */
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 0), 1 * MB, 1);
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 3), 0.2 * MB, 1);
  /* slot 1: A sent 1 MB; what is untransmitted of its measured 2 MB, 1 MB, goes to slot 1 (the factor's
   * margin was the first plan's): slots 2 and 3 are nobody's again; A has its whole path while B's phase
   * waits on the link: paced at 94% of it */
  shoal__fplan_advance(&p, 1);
  CHECK_NEAR(p.flow[a].granted, 1 * MB, 1);
  CHECK_NEAR(shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 1 * MB, 0), 0.94 * 10 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 0), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 1), 0, 1e-6);
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 2), 0, 1e-6);
  /* slot 2: A is done (2 MB sent): its slots are freed and B, re-planned, takes the link at once */
  shoal__fplan_advance(&p, 2);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 2 * MB, 0);
  CHECK_EQ(p.flow[a].active, 0);
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 1), 0, 1e-6);
  rb = shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 1 * MB, 0.01 * MB, 0);
  CHECK_NEAR(sched_at(&p, b, 0), 0.99 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 1), 0, 1e-6);
  CHECK_NEAR(rb, 0.94 * 10 * MB, 1);
  shoal__fplan_free(&p);
}

/* Bytes a flow sends after its phase ended (the model broadcast after the last step) are a phase of their
 * own, planned from now, so a job's end does not wait behind a later job's new iteration. */
TEST(plan_bytes_after_a_phase_are_planned) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0;
  int a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1), b = shoal__fplan_flow(&p, 2, 0, 1, 2, 3, &l, 1);
  int c = shoal__fplan_flow(&p, 3, 0, 1, 4, 5, &l, 1);
  /* A: 0.5 MB, planned 0.8 in slot 0; B: 2 MB, planned 3.2: slots 1, 2, 3 whole, 0.2 in slot 4 */
  shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 0.5 * MB, 0, 0);
  shoal__fplan_report(&p, b, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0);
  CHECK_NEAR(sched_at(&p, b, 1), 1 * MB, 1);
  /* slot 1: A is done; B sent 0.2 MB, its 1.8 MB left go to slots 1 (1 MB) and 2 (0.8) */
  shoal__fplan_advance(&p, 1);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 0.5 * MB, 0.5 * MB, 0);
  CHECK_EQ(p.flow[a].active, 0);
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 0.2 * MB, 0);
  /* slot 2: B has 0.8 MB left (0.8 of this slot); A sent 0.1 MB beyond its phase: an extra phase of its
   * volume, 0.5 MB, 0.4 left: the 0.2 MB B leaves in this slot, 0.2 in the next */
  shoal__fplan_advance(&p, 2);
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 1.2 * MB, 0);
  CHECK_NEAR(sched_at(&p, b, 0), 0.8 * MB, 1);
  double ra = shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 0.5 * MB, 0.6 * MB, 0);
  CHECK_EQ(p.flow[a].active, 1);
  CHECK_NEAR(sched_at(&p, a, 0), 0.2 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 1), 0.2 * MB, 1);
  CHECK_NEAR(ra, 2 * MB, 1); /* its 0.2 MB of this slot: 2 MB/s */
  /* C starts an iteration of 1 MB, planned 1.6: the least loaded slots are 4 and 5 (slot 3 holds A's 0.2) */
  shoal__fplan_report(&p, c, SHOAL__FS_NEW_ITER, 1, 1 * MB, 0, 0);
  CHECK_NEAR(sched_at(&p, c, 1), 0, 1e-6);
  CHECK_NEAR(sched_at(&p, c, 2), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, c, 3), 0.6 * MB, 1);
  /* slot 3: A sent its 0.5 MB beyond the phase: done, its slots free */
  shoal__fplan_advance(&p, 3);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 0.5 * MB, 1.0 * MB, 0);
  CHECK_EQ(p.flow[a].active, 0);
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 0), 0, 1e-6);
  shoal__fplan_free(&p);
}

/* An extra phase starts once a flow sent 1% of its volume beyond its phase (at most 64 KiB): held at the
 * floor behind another job's plan (0.01 MB a slot here), it took 64 KiB to get planned. A few hundred
 * bytes beyond the phase (the statistics after the last step) start none. */
TEST(plan_an_extra_phase_starts_at_a_hundredth_of_the_volume) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0;
  int a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1), b = shoal__fplan_flow(&p, 2, 0, 1, 2, 3, &l, 1);
  shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0);
  shoal__fplan_report(&p, b, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0);
  /* slot 2: A's phase is over (and 136 bytes more); B's 2 MB go to slots 2 and 3 */
  shoal__fplan_advance(&p, 2);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 2 * MB + 136, 0);
  CHECK_EQ(p.flow[a].active, 0);
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 0, 0);
  /* slot 3: still 136 bytes beyond: no extra phase */
  shoal__fplan_advance(&p, 3);
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 1 * MB, 0);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 2 * MB + 136, 0);
  CHECK_EQ(p.flow[a].active, 0);
  /* slot 4: A sent 0.03 MB beyond (more than 0.02, a hundredth of 2 MB): its extra phase of 2 MB, 1.97
   * left, planned from now: the 0.5 MB B leaves of this slot, slot 5 whole, 0.47 MB in slot 6 */
  shoal__fplan_advance(&p, 4);
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 1.5 * MB, 0);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 2.03 * MB, 0);
  CHECK_EQ(p.flow[a].active, 1);
  CHECK_NEAR(sched_at(&p, a, 0), 0.5 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 1), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 2), 0.47 * MB, 1);
  shoal__fplan_free(&p);
}

/* Jobs whose volume is not known yet (their first phase) take the link in turn: the first to report holds
 * every slot's room until none of its flows sent anything over a slot (one of them pausing while it waits
 * for the other is not the end), the other waits at the floor, then takes it. Job A: flows a and a2 (the
 * two directions of a ring, here on the one link: half of it each); job B: flow b. */
TEST(plan_first_phases_take_turns) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0;
  int a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1), a2 = shoal__fplan_flow(&p, 1, 1, 0, 1, 0, &l, 1);
  int b = shoal__fplan_flow(&p, 2, 0, 1, 2, 3, &l, 1);
  CHECK_NEAR(shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 0, 0.1 * MB, 0), 5 * MB, 1);
  for (int k = 0; k < 10; k++) CHECK_NEAR(sched_at(&p, a, k), 0.5 * MB, 1);
  for (int k = 0; k < 10; k++) CHECK_NEAR(sched_at(&p, a2, k), 0.5 * MB, 1);
  CHECK_NEAR(shoal__fplan_report(&p, b, SHOAL__FS_NEW_ITER, 1, 0, 0.01 * MB, 0), 0.02 * 10 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 0), 0, 1e-9);
  /* slots 1-3: a and a2 take turns pausing; A holds the link, B waits */
  const double sa[] = {0.6, 0.6, 1.1}, sa2[] = {0.5, 1.0, 1.0};
  for (int s = 1; s <= 3; s++) {
    shoal__fplan_advance(&p, s);
    CHECK_NEAR(shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 0, sa[s - 1] * MB, 0), 5 * MB, 1);
    CHECK_NEAR(shoal__fplan_report(&p, a2, SHOAL__FS_RESCHEDULE, 1, 0, sa2[s - 1] * MB, 0), 5 * MB, 1);
    CHECK_NEAR(shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 0, 0.01 * (s + 1) * MB, 0), 0.02 * 10 * MB, 1);
    CHECK_EQ(p.flow[a].open, 1);
  }
  /* slot 4: neither sent anything over slot 3: A's phase is over, each flow's bytes its volume; B takes the link */
  shoal__fplan_advance(&p, 4);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 0, 1.1 * MB, 0);
  CHECK_EQ(p.flow[a].open, 0);
  CHECK_EQ(p.flow[a2].open, 0);
  CHECK_NEAR(p.flow[a].V, 1.1 * MB, 1);
  CHECK_NEAR(p.flow[a2].V, 1.0 * MB, 1);
  CHECK_NEAR(sched_at(&p, a2, 0), 0, 1e-9);
  CHECK_NEAR(shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 1, 0, 0.05 * MB, 0), 0.94 * 10 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 0), 1 * MB, 1);
  shoal__fplan_free(&p);
  /* a holder that claims less than the link (its agent estimates 4 MB/s): the next job claims nothing of
   * the rest, it only may send in it */
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int c = shoal__fplan_flow(&p, 3, 0, 1, 0, 1, &l, 1), d = shoal__fplan_flow(&p, 4, 0, 1, 2, 3, &l, 1);
  shoal__fplan_report(&p, c, SHOAL__FS_NEW_ITER, 1, 0, 0.1 * MB, 4 * MB);
  CHECK_NEAR(sched_at(&p, c, 5), 0.4 * MB, 1);
  CHECK_NEAR(shoal__fplan_report(&p, d, SHOAL__FS_NEW_ITER, 1, 0, 0.1 * MB, 0), 6 * MB, 1);
  for (int k = 0; k < 10; k++) CHECK_NEAR(sched_at(&p, d, k), 0, 1e-9);
  shoal__fplan_free(&p);
}

/* A 4-host ring with two hops on one link (h0->h1 and h2->h3 both cross link 0): the ring moves at its
 * slowest hop, so each hop is planned at half the link in the same slots, not one hop the whole link and
 * the other the slots after it. */
TEST(plan_hops_of_one_job_share_a_link) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0;
  int a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1), b = shoal__fplan_flow(&p, 1, 2, 3, 2, 3, &l, 1);
  /* iteration 1 makes the volumes known: 1 MB on each hop */
  shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 1 * MB, 0, 0);
  shoal__fplan_report(&p, b, SHOAL__FS_NEW_ITER, 1, 1 * MB, 0, 0);
  shoal__fplan_advance(&p, 1);
  /* iteration 2: both hops planned at once, 1.6 MB each at 0.5 MB a slot: slots 0-2 whole, 0.1 MB in slot 3 */
  shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 2, 1 * MB, 0, 0);
  for (int f = 0; f < 2; f++)
    for (int k = 0; k < 5; k++) CHECK_NEAR(sched_at(&p, f == 0 ? a : b, k), k < 3 ? 0.5 * MB : k == 3 ? 0.1 * MB : 0, 1);
  /* b's own report re-plans its untransmitted 1 MB earliest first, still at half the link */
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 2, 1 * MB, 0, 0);
  CHECK_NEAR(sched_at(&p, b, 0), 0.5 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 1), 0.5 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 2), 0, 1e-6);
  shoal__fplan_free(&p);
}

TEST(plan_shared_slot_and_spare_capacity) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0;
  /* A: 0.25 MB an iteration, planned 0.4 MB in slot 0: 0.6 MB of the slot is nobody's */
  int a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1), b = shoal__fplan_flow(&p, 2, 0, 1, 2, 3, &l, 1);
  double ra = shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 0.25 * MB, 0, 0);
  CHECK_NEAR(ra, 0.94 * 10 * MB, 1); /* 0.4 own + 0.6 spare: the whole link, shared with job 2: 94% */
  /* B: 2 MB, planned 3.2: loads are 0.4 (slot 0) and 0 elsewhere: slots 1, 2, 3 whole, 0.2 in slot 4 */
  double rb = shoal__fplan_report(&p, b, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0);
  CHECK_NEAR(sched_at(&p, b, 0), 0, 1e-9);
  CHECK_NEAR(sched_at(&p, b, 1), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 4), 0.2 * MB, 1);
  CHECK_NEAR(rb, 6 * MB, 1); /* B may use the unreserved 0.6 MB of slot 0: 6 MB/s */
  /* A reports again in slot 0 (a second agent's view): its rate is its 0.4 MB + the 0.6 MB spare, the
   * whole link, paced at 94% of it */
  ra = shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 0.25 * MB, 0, 0);
  CHECK_NEAR(ra, 0.94 * 10 * MB, 1);
  shoal__fplan_free(&p);
}

/* Two racks, two jobs, each a 2-host ring across the uplinks (r0.up carries h0->h2 and h1->h3, r1.up
 * the other way). The agents report in an order that mixes the jobs; each job's two flows must still
 * get the same slots, so that no job holds one direction of its ring while waiting for the other. */
TEST(plan_a_job_is_planned_as_one_ring) {
  shoal__ftopo_t t;
  CHECK_OK(shoal__ftopo_uniform(4, 2, 40e6, 2, &t)); /* r0: h0 h1, r1: h2 h3; uplinks 40 Mbit/s (2:1) */
  shoal__fplan_cfg_t cfg;
  shoal__fplan_cfg_default(&cfg);
  shoal__fctl_t c;
  CHECK_OK(shoal__fctl_init(&c, &t, &cfg));
  /* hosts 0,1 (r0) and 2,3 (r1): job 1 = ranks 0@h0, 1@h2; job 2 = ranks 0@h1, 1@h3 */
  shoal__fp_flow_t fl[4] = {
      {.job = 1, .src_rank = 0, .dst_rank = 1, .src_ip = t.host[0].ip, .dst_ip = t.host[2].ip},
      {.job = 2, .src_rank = 1, .dst_rank = 0, .src_ip = t.host[3].ip, .dst_ip = t.host[1].ip},
      {.job = 2, .src_rank = 0, .dst_rank = 1, .src_ip = t.host[1].ip, .dst_ip = t.host[3].ip},
      {.job = 1, .src_rank = 1, .dst_rank = 0, .src_ip = t.host[2].ip, .dst_ip = t.host[0].ip},
  };
  uint64_t rates[1], *rate = rates;
  int host = -1;
  /* iteration 1 carried 1 MB on each flow (volumes become known); each report alone in its batch, the
   * order in which they are taken is the test's */
  for (int i = 0; i < 4; i++) {
    fl[i].status = SHOAL__FS_IDLE, fl[i].iter = 1, fl[i].volume = 1000000, fl[i].sent = 1000000;
    shoal__fp_report_t r = {.seq = 1, .n = 1, .flows = &fl[i]};
    CHECK_OK(shoal__fctl_handle(&c, 10, 1, &host, &r, &rate));
  }
  /* iteration 2 starts on all four in slot 11; reports arrive job 1, job 2, job 2, job 1 */
  for (int i = 0; i < 4; i++) {
    fl[i].status = SHOAL__FS_NEW_ITER, fl[i].iter = 2, fl[i].volume = 1000000, fl[i].sent = 0;
    shoal__fp_report_t r = {.seq = 2, .n = 1, .flows = &fl[i]};
    CHECK_OK(shoal__fctl_handle(&c, 11, 1, &host, &r, &rate));
    /* job 1 reported first: both its flows own slot 11 (hosts 40 Mbit/s = 0.5 MB a slot; the uplinks
     * carry job 2's flows too: 94% of the path); job 2 waits at the floor */
    if (fl[i].job == 1) CHECK_NEAR((double)rates[0], 0.94 * 5e6, 1);
    else CHECK_NEAR((double)rates[0], 0.02 * 5e6, 1);
  }
  const shoal__fplan_t *p = &c.plan;
  for (int f = 0; f < p->nflows; f++)
    for (int k = 0; k < 4; k++) {
      /* job 1's NEW_ITER: 1.6 MB at 0.5 MB a slot on both hops, slots 0-3 of both uplinks, job 2 after; the
       * second hop's own report re-planned its untransmitted 1 MB (slots 0, 1): the margin is the first plan's */
      double want = p->flow[f].job != 1 ? 0 : k < 2 ? 0.5e6 : p->flow[f].src == 1 ? 0 : k == 2 ? 0.5e6 : 0.1e6;
      /* job 2's hop on r0.up reported after its NEW_ITER: re-planned earliest first, it takes the 0.4 MB
       * job 1 leaves in slot 3 */
      if (p->flow[f].job == 2) want = p->flow[f].src == 0 && k == 3 ? 0.4e6 : 0;
      CHECK_NEAR(sched_at(p, f, k), want, 1);
    }
  for (int f = 0; f < p->nflows; f++) {
    int other = -1;
    for (int g = 0; g < p->nflows; g++)
      if (g != f && p->flow[g].job == p->flow[f].job) other = g;
    CHECK_EQ(p->flow[f].succ, other); /* the ring: each hop feeds the other */
    CHECK_EQ(p->flow[f].pred, other);
  }
  shoal__fctl_free(&c);
}

/* Two racks (h0 h1 | h2 h3), hosts and uplinks 40 Mbit/s (0.5 MB a slot), job 1 a ring h0 <-> h2, job 2 a
 * ring h1 <-> h3: both cross both uplinks. fl[0..1]: job 1's hops, fl[2..3]: job 2's. */
static void two_jobs(shoal__fctl_t *c, shoal__ftopo_t *t, shoal__fp_flow_t fl[4]) {
  CHECK_OK(shoal__ftopo_uniform(4, 2, 40e6, 2, t));
  shoal__fplan_cfg_t cfg;
  shoal__fplan_cfg_default(&cfg);
  CHECK_OK(shoal__fctl_init(c, t, &cfg));
  shoal__fp_flow_t f[4] = {
      {.job = 1, .src_rank = 0, .dst_rank = 1, .src_ip = t->host[0].ip, .dst_ip = t->host[2].ip},
      {.job = 1, .src_rank = 1, .dst_rank = 0, .src_ip = t->host[2].ip, .dst_ip = t->host[0].ip},
      {.job = 2, .src_rank = 0, .dst_rank = 1, .src_ip = t->host[1].ip, .dst_ip = t->host[3].ip},
      {.job = 2, .src_rank = 1, .dst_rank = 0, .src_ip = t->host[3].ip, .dst_ip = t->host[1].ip},
  };
  memcpy(fl, f, sizeof f);
}

static void set(shoal__fp_flow_t *f, int status, uint64_t iter, double volume, double sent) {
  f->status = (uint8_t)status, f->iter = iter, f->volume = (uint64_t)volume, f->sent = (uint64_t)sent;
}

/* The reports of one slot in the order they came: together (one batch: rates granted once every report is
 * in) or one by one, each answered as it came. rates[i] for fl[order[i]]. */
static void slot_reports(shoal__fctl_t *c, int64_t slot, shoal__fp_flow_t fl[4], const int *order, int n, int together,
                         uint64_t *rates) {
  shoal__fp_report_t r[4];
  int hosts[4];
  uint64_t *out[4];
  for (int i = 0; i < n; i++) {
    r[i] = (shoal__fp_report_t){.seq = (uint64_t)slot, .n = 1, .flows = &fl[order[i]]};
    hosts[i] = -1;
    out[i] = &rates[i];
  }
  if (together) CHECK_OK(shoal__fctl_handle(c, slot, n, hosts, r, out));
  else
    for (int i = 0; i < n; i++) CHECK_OK(shoal__fctl_handle(c, slot, 1, &hosts[i], &r[i], &out[i]));
}

/* Job 1 holds the uplinks; in slot 13 its phase ends, and job 2's agents, whose new iteration starts in
 * that slot, report before job 1's. Answered as they come, job 2 got its rate from job 1's reservation
 * that job 1's own report, a few ms later, freed: 0.1 MB of a 0.5 MB slot, and the link idled. Answered
 * together, job 1's end frees the slot first and job 2 has the whole link. Returns job 2's rates in slot
 * 13 (bytes/s, 0: no limit). */
static void phase_end_in_a_slot(int together, uint64_t job2[2]) {
  shoal__ftopo_t t;
  shoal__fctl_t c;
  shoal__fp_flow_t fl[4];
  two_jobs(&c, &t, fl);
  int all[4] = {0, 1, 2, 3};
  uint64_t rates[4];
  for (int i = 0; i < 4; i++) set(&fl[i], SHOAL__FS_IDLE, 1, 1e6, 1e6); /* volumes known: 1 MB */
  slot_reports(&c, 10, fl, all, 4, together, rates);
  /* slot 11: job 1's iteration 2 starts; job 2 still computes */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_NEW_ITER, 2, 1e6, 0);
  slot_reports(&c, 11, fl, all, 4, together, rates);
  CHECK_NEAR((double)rates[0], 0.94 * 5e6, 1); /* the uplinks carry job 2's flows too: 94% of the path */
  CHECK_NEAR((double)rates[1], 0.94 * 5e6, 1);
  /* slot 12: job 1 sent 0.1 MB: the 0.9 MB left is planned into slots 12 (0.5) and 13 (0.4) */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 2, 1e6, 0.1e6);
  slot_reports(&c, 12, fl, all, 4, together, rates);
  CHECK_NEAR(shoal__fplan_reserved(&c.plan, 8, 1), 0.4e6, 1); /* r0's uplink (link 2 x 4 hosts + 0), slot 13 */
  /* slot 13: job 2's reports (its new iteration) first, then job 1's: done */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 2, 1e6, 1e6);
  for (int i = 2; i < 4; i++) set(&fl[i], SHOAL__FS_NEW_ITER, 2, 1e6, 0.02e6);
  int order[4] = {2, 3, 0, 1};
  slot_reports(&c, 13, fl, order, 4, together, rates);
  job2[0] = rates[0], job2[1] = rates[1];
  /* either way job 1 is done and holds nothing: on r0's uplink only job 2's hop h1 -> h3 is planned */
  CHECK_EQ(c.plan.flow[0].active, 0);
  CHECK_EQ(c.plan.flow[1].active, 0);
  CHECK_NEAR(shoal__fplan_reserved(&c.plan, 8, 0), c.plan.flow[2].sched[13 % 10], 1);
  shoal__fctl_free(&c);
}

TEST(ctl_reports_of_a_slot_are_granted_together) {
  uint64_t alone[2], together[2];
  phase_end_in_a_slot(0, alone);
  phase_end_in_a_slot(1, together);
  /* one by one (what the controller did): job 2 limited to the 0.1 MB job 1's plan left in slot 13 */
  CHECK_NEAR((double)alone[0], 1e6, 1);
  CHECK_NEAR((double)alone[1], 1e6, 1);
  /* together: the link is job 2's (94% of it: job 1's flows are on it too) */
  CHECK_NEAR((double)together[0], 0.94 * 5e6, 1);
  CHECK_NEAR((double)together[1], 0.94 * 5e6, 1);
}

/* A job's first phase (volume unknown, open) ends for the whole job at the first report of the next
 * iteration by any of its hops: job 1's hop h0 -> h2 reports its last bytes of iteration 1 in slot 12
 * (its job-mate's rank has begun iteration 2 in the same slot); job 2, whose first phase started while
 * job 1 held the uplinks, must get them in slot 12, not wait at the floor for a slot in which hop
 * h0 -> h2 sends nothing. */
TEST(ctl_first_phase_ends_for_the_whole_job_at_a_new_iteration) {
  shoal__ftopo_t t;
  shoal__fctl_t c;
  shoal__fp_flow_t fl[4];
  two_jobs(&c, &t, fl);
  int all[4] = {0, 1, 2, 3};
  uint64_t rates[4];
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_NEW_ITER, 1, 0, 0.1e6); /* job 1 starts first */
  slot_reports(&c, 10, fl, all, 2, 1, rates);
  CHECK_EQ(c.plan.flow[0].open, 1);
  CHECK_EQ(rates[0], 0);
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 1, 0, 0.6e6);
  for (int i = 2; i < 4; i++) set(&fl[i], SHOAL__FS_NEW_ITER, 1, 0, 0.01e6); /* job 2 starts: it waits */
  slot_reports(&c, 11, fl, all, 4, 1, rates);
  CHECK_NEAR((double)rates[0], 0.94 * 5e6, 1); /* job 1's turn: 94% of the path while job 2 waits */
  CHECK_NEAR((double)rates[2], 0.02 * 5e6, 1);
  CHECK_NEAR((double)rates[3], 0.02 * 5e6, 1);
  /* slot 12: job 2, then job 1's hop 0 (its last bytes: 1.1 MB), then hop 1 in iteration 2 (1.1 MB) */
  for (int i = 2; i < 4; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 1, 0, 0.02e6);
  set(&fl[0], SHOAL__FS_RESCHEDULE, 1, 0, 1.1e6);
  set(&fl[1], SHOAL__FS_IDLE, 2, 1.1e6, 0);
  slot_reports(&c, 12, fl, all, 4, 1, rates); /* rates[k] for fl[k] */
  CHECK_EQ(c.plan.flow[0].open, 0);
  CHECK_EQ(c.plan.flow[1].open, 0);
  CHECK_NEAR(c.plan.flow[1].V, 1.1e6, 1);
  CHECK_NEAR((double)rates[2], 0.94 * 5e6, 1);
  CHECK_NEAR((double)rates[3], 0.94 * 5e6, 1);
  /* the hops of a ring carry equal volumes: hop 0, whose rank has not marked iteration 2 yet, takes hop
   * 1's measured 1.1 MB; when hop 1 starts sending iteration 2 (slot 14, after a slot of compute; hop 0's
   * agent has not seen the new iteration yet) both hops are planned together, in the same slots */
  CHECK_NEAR(c.plan.flow[0].V, 1.1e6, 1);
  slot_reports(&c, 13, fl, (int[]){0, 1}, 2, 1, rates); /* computing: nothing sent in slot 12 */
  set(&fl[1], SHOAL__FS_NEW_ITER, 2, 1.1e6, 0.1e6);
  slot_reports(&c, 14, fl, (int[]){1}, 1, 1, rates);
  CHECK_EQ(c.plan.flow[0].active, 1);
  CHECK_EQ(c.plan.flow[0].iter, 2);
  double both = 0;
  for (int k = 0; k < c.plan.cfg.horizon; k++) {
    CHECK_NEAR(sched_at(&c.plan, 0, k), sched_at(&c.plan, 1, k), 1);
    both += sched_at(&c.plan, 0, k);
  }
  CHECK(both > 0); /* job 2's open phase holds the rest of the horizon */
  shoal__fctl_free(&c);
}

/* A job whose new phase starts right after its previous one (no compute between them) is not planned:
 * its flows go unpaced and reserve nothing; a job that computed between its phases is planned and waits
 * its turn. Volumes 1 MB on every hop, 0.5 MB a slot on every link. */
TEST(plan_a_job_that_computes_for_no_time_goes_unpaced) {
  shoal__ftopo_t t;
  shoal__fctl_t c;
  shoal__fp_flow_t fl[4];
  two_jobs(&c, &t, fl);
  int all[4] = {0, 1, 2, 3};
  uint64_t rates[4];
  for (int i = 0; i < 4; i++) set(&fl[i], SHOAL__FS_IDLE, 1, 1e6, 1e6);
  slot_reports(&c, 10, fl, all, 4, 1, rates);
  /* slot 11: job 1's iteration 2 starts (1.6 MB planned: slots 11-13 whole, 0.1 MB in 14); job 2 computes */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_NEW_ITER, 2, 1e6, 0);
  slot_reports(&c, 11, fl, all, 4, 1, rates);
  CHECK_NEAR((double)rates[0], 0.94 * 5e6, 1);
  /* slot 12: job 1 sent 0.5 MB (its 0.5 MB left: slot 12); job 2's iteration 2 starts after a slot of
   * compute: planned least loaded first (1.6 MB less the 0.02 sent: slots 13-15 whole, 0.08 MB in 16),
   * it waits at the floor */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 2, 1e6, 0.5e6);
  for (int i = 2; i < 4; i++) set(&fl[i], SHOAL__FS_NEW_ITER, 2, 1e6, 0.02e6);
  slot_reports(&c, 12, fl, all, 4, 1, rates);
  CHECK_NEAR((double)rates[0], 0.94 * 5e6, 1); /* its turn, with job 2 waiting: 94% of the path */
  CHECK_NEAR((double)rates[2], 0.02 * 5e6, 1);
  CHECK_NEAR((double)rates[3], 0.02 * 5e6, 1);
  CHECK_NEAR(sched_at(&c.plan, 2, 1), 0.5e6, 1);
  CHECK_NEAR(sched_at(&c.plan, 2, 4), 0.08e6, 1);
  /* slot 13: job 1 is done; job 2 (0.97 MB left) takes slot 13 and 0.47 MB of slot 14 */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 2, 1e6, 1e6);
  for (int i = 2; i < 4; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 2, 1e6, 0.03e6);
  slot_reports(&c, 13, fl, all, 4, 1, rates);
  CHECK_EQ(c.plan.flow[0].active, 0);
  CHECK_NEAR((double)rates[2], 0.94 * 5e6, 1); /* its turn: 94% of the path beside job 1's flows */
  /* slot 14: job 1's iteration 3 starts right after its last bytes of iteration 2 (0.5 MB in slot 12):
   * not planned, no limit; planned, it would be held to the 0.03 MB job 2 leaves in slot 14 and wait for
   * slot 15. Job 2 keeps its plan, and has its whole path; with job 1 unplanned it is the only planned
   * job on the uplinks: no limit either */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_NEW_ITER, 3, 1e6, 0.1e6);
  for (int i = 2; i < 4; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 2, 1e6, 0.53e6);
  slot_reports(&c, 14, fl, all, 4, 1, rates);
  for (int i = 0; i < 4; i++) CHECK_EQ(rates[i], 0);
  CHECK_EQ(c.plan.flow[0].active, 1);
  CHECK_EQ(c.plan.flow[0].iter, 3);
  CHECK_NEAR(shoal__fplan_reserved(&c.plan, 8, 0), 0.47e6, 1); /* r0's uplink: job 2's hop alone */
  /* slot 15: still unpaced mid-phase, reserving nothing */
  for (int i = 0; i < 2; i++) set(&fl[i], SHOAL__FS_RESCHEDULE, 3, 1e6, 0.4e6);
  slot_reports(&c, 15, fl, all, 2, 1, rates);
  for (int i = 0; i < 2; i++) {
    CHECK_EQ(rates[i], 0);
    for (int k = 0; k < c.plan.cfg.horizon; k++) CHECK_NEAR(sched_at(&c.plan, i, k), 0, 1e-9);
  }
  shoal__fctl_free(&c);
}

/* The ring rule: a hop that lags the hop waiting on it gets what it lags by in the current slot, ahead
 * of the least-loaded order; plain greedy leaves it to the order. Link 0 carries job 1's hop f and job
 * 2's flow o, link 1 job 1's hop s (f and s: a 2-host ring). Returns f's bytes in the current slot of
 * slot 2 and, in *later, in slot 4 (two slots on). */
static double ring_lag_now(int policy, double *later) {
  shoal__fplan_cfg_t cfg;
  shoal__fplan_cfg_default(&cfg);
  cfg.policy = policy;
  double caps[2] = {80e6, 80e6};
  shoal__fplan_t p;
  CHECK_OK(shoal__fplan_init(&p, &cfg, caps, 2));
  int l0 = 0, l1 = 1;
  int f = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l0, 1), s = shoal__fplan_flow(&p, 1, 1, 0, 1, 0, &l1, 1);
  int o = shoal__fplan_flow(&p, 2, 0, 1, 5, 6, &l0, 1);
  shoal__fplan_report(&p, f, SHOAL__FS_IDLE, 1, 2 * MB, 2 * MB, 0); /* iteration 1: volumes known */
  shoal__fplan_report(&p, s, SHOAL__FS_IDLE, 1, 2 * MB, 2 * MB, 0);
  shoal__fplan_advance(&p, 1);
  /* o: 0.5 MB at most 4 MB/s (its agent's estimate): planned 0.8 MB = 0.4 in slots 1 and 2 */
  shoal__fplan_report(&p, o, SHOAL__FS_NEW_ITER, 1, 0.5 * MB, 0, 4 * MB);
  CHECK_NEAR(sched_at(&p, o, 1), 0.4 * MB, 1);
  /* job 1 (via f): the job's links are least loaded from slot 3: f and s planned in slots 3, 4, 5 and
   * 0.2 MB in 6; f may use the 0.6 MB o leaves in slot 1 (spare: 6 MB/s) */
  CHECK_NEAR(shoal__fplan_report(&p, f, SHOAL__FS_NEW_ITER, 2, 2 * MB, 0, 0), 6 * MB, 1);
  CHECK_NEAR(sched_at(&p, s, 2), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, s, 5), 0.2 * MB, 1);
  /* s reports: nothing lags it; its untransmitted 2 MB re-planned on its free link from now: slots 1, 2 */
  CHECK_EQ(shoal__fplan_report(&p, s, SHOAL__FS_RESCHEDULE, 2, 2 * MB, 0, 0), 0);
  CHECK_NEAR(sched_at(&p, s, 0), 1 * MB, 1);
  /* slot 2: s was granted 1 MB and holds 1 MB now, f was granted nothing: f lags by 2 MB */
  shoal__fplan_advance(&p, 2);
  CHECK_NEAR(p.flow[s].granted, 1 * MB, 1);
  double r = shoal__fplan_report(&p, f, SHOAL__FS_RESCHEDULE, 2, 2 * MB, 0.6 * MB, 0);
  CHECK_NEAR(r, 6 * MB, 1); /* either way it sends 0.6 MB now (under greedy, as spare) */
  double now = sched_at(&p, f, 0);
  *later = sched_at(&p, f, 2);
  shoal__fplan_free(&p);
  return now;
}

TEST(plan_ring_rule_sends_the_lag_now) {
  double later;
  /* f has 1.4 MB untransmitted. mlcc: 0.6 MB (the room o leaves) reserved now, the other 0.8 MB in slot 3
   * (the next, empty), nothing in 4. A re-plan is earliest first under greedy too, so it does the same:
   * the lag rule only says it first */
  for (int pol = SHOAL__FPOL_MLCC; pol <= SHOAL__FPOL_GREEDY; pol++) {
    CHECK_NEAR(ring_lag_now(pol, &later), 0.6 * MB, 1);
    CHECK_NEAR(later, 0, 1e-6);
  }
}

/* A ring whose first hop runs at a tenth of the link (a slow host): under mlcc the hop after it
 * reserves what that hop delivers (x1.25), not the whole link; greedy keeps reserving the link. */
static double reserved_after_slow_hop(int policy) {
  shoal__fplan_t p;
  plan_one_link(&p, policy);
  shoal__fplan_cfg_t cfg = p.cfg;
  shoal__fplan_free(&p);
  double caps[2] = {80e6, 80e6};
  CHECK_OK(shoal__fplan_init(&p, &cfg, caps, 2));
  int l0 = 0, l1 = 1;
  int slow = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l0, 1), next = shoal__fplan_flow(&p, 1, 1, 0, 1, 0, &l1, 1);
  shoal__fplan_report(&p, slow, SHOAL__FS_IDLE, 1, 5 * MB, 5 * MB, 0);
  shoal__fplan_report(&p, next, SHOAL__FS_IDLE, 1, 5 * MB, 5 * MB, 0);
  double sent_slow = 0, sent_next = 0;
  for (int64_t t = 1; t <= 6; t++) {
    shoal__fplan_advance(&p, t);
    int st = t == 1 ? SHOAL__FS_NEW_ITER : SHOAL__FS_RESCHEDULE;
    shoal__fplan_report(&p, slow, st, 2, 5 * MB, sent_slow, 0);
    shoal__fplan_report(&p, next, st, 2, 5 * MB, sent_next, 0);
    sent_slow += 0.1 * MB; /* the slow hop moves 0.1 MB a slot, the next one forwards it */
    sent_next += 0.1 * MB;
  }
  double r = shoal__fplan_reserved(&p, 1, 0);
  shoal__fplan_free(&p);
  return r;
}

TEST(plan_ring_rule_reserves_what_the_slow_hop_delivers) {
  CHECK_NEAR(reserved_after_slow_hop(SHOAL__FPOL_MLCC), 0.125 * MB, 1);
  CHECK_NEAR(reserved_after_slow_hop(SHOAL__FPOL_GREEDY), 1 * MB, 1);
}

/* A 2-host ring (hop a on link 0, hop b on link 1; 4 MB a hop an iteration) whose hop b moved nothing over
 * a slot while its grant was the whole link: b waits on the bytes a brings (the second half of a 2-rank
 * allreduce), it is not a slow hop. a keeps its plan at the link's rate; capped by b's delivery (the
 * floor) it would leave its next slots to job 2's flow o, get the floor there and give b nothing to
 * forward: the ring throttling itself in a circle. */
TEST(plan_a_waiting_hop_does_not_cap_its_ring_to_the_floor) {
  shoal__fplan_cfg_t cfg;
  shoal__fplan_cfg_default(&cfg);
  double caps[2] = {80e6, 80e6};
  shoal__fplan_t p;
  CHECK_OK(shoal__fplan_init(&p, &cfg, caps, 2));
  int l0 = 0, l1 = 1;
  int a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l0, 1), b = shoal__fplan_flow(&p, 1, 1, 0, 1, 0, &l1, 1);
  int o = shoal__fplan_flow(&p, 2, 0, 1, 5, 6, &l0, 1);
  shoal__fplan_report(&p, a, SHOAL__FS_IDLE, 1, 4 * MB, 4 * MB, 0);
  shoal__fplan_report(&p, b, SHOAL__FS_IDLE, 1, 4 * MB, 4 * MB, 0);
  shoal__fplan_report(&p, o, SHOAL__FS_IDLE, 1, 2 * MB, 2 * MB, 0);
  /* slot 1: job 1's iteration 2, 6.4 MB a hop planned at 1 MB a slot (slots 1-6, 0.4 MB in 7): a's turn
   * beside job 2's flow is 94% of the link, b alone on link 1 has no limit */
  shoal__fplan_advance(&p, 1);
  CHECK_NEAR(shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 2, 4 * MB, 0, 0), 0.94 * 10 * MB, 1);
  CHECK_NEAR(sched_at(&p, b, 6), 0.4 * MB, 1);
  CHECK_EQ(shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 2, 4 * MB, 0, 0), 0);
  /* slot 2: both hops moved 1 MB */
  shoal__fplan_advance(&p, 2);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 2, 4 * MB, 1 * MB, 0);
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 2, 4 * MB, 1 * MB, 0);
  /* slot 3: a moved another 1 MB, b nothing (it waits on a's bytes); a has 2 MB left: 1 MB now (what it
   * lags b's grants by) and 1 MB in slot 4, not 0.02 MB (the floor) in each slot ahead */
  shoal__fplan_advance(&p, 3);
  shoal__fplan_report(&p, b, SHOAL__FS_RESCHEDULE, 2, 4 * MB, 1 * MB, 0);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 2, 4 * MB, 2 * MB, 0);
  CHECK_NEAR(sched_at(&p, a, 0), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, a, 1), 1 * MB, 1);
  for (int k = 2; k < p.cfg.horizon; k++) CHECK_NEAR(sched_at(&p, a, k), 0, 1e-6);
  /* job 2's iteration (3.2 MB planned) goes after a's: slots 5-7 whole, 0.2 MB in slot 8 */
  shoal__fplan_report(&p, o, SHOAL__FS_NEW_ITER, 2, 2 * MB, 0, 0);
  CHECK_NEAR(sched_at(&p, o, 1), 0, 1e-6);
  for (int k = 2; k < 5; k++) CHECK_NEAR(sched_at(&p, o, k), 1 * MB, 1);
  CHECK_NEAR(sched_at(&p, o, 5), 0.2 * MB, 1);
  shoal__fplan_free(&p);
}

/* Two 4-host rings across two racks (two hops of each on each uplink, as in ME2): job 1 is h0,h4,h1,h5
 * and h5's links carry a quarter of an uplink (0.25 MB a slot each way), job 2 is h2,h6,h3,h7. Links: 0
 * r0's uplink, 1 r1's (1 MB a slot), 2 into h5, 3 out of h5. Under mlcc job 1's hops are planned at its
 * slowest hop's rate, and job 2's two hops on an uplink split what job 1 leaves of it. */
static void two_rings(shoal__fplan_t *p, int policy, int fl[8]) {
  shoal__fplan_cfg_t cfg;
  shoal__fplan_cfg_default(&cfg);
  cfg.policy = policy;
  double caps[4] = {80e6, 80e6, 20e6, 20e6};
  CHECK_OK(shoal__fplan_init(p, &cfg, caps, 4));
  static const int hs[8][2] = {{0, 4}, {4, 1}, {1, 5}, {5, 0}, {2, 6}, {6, 3}, {3, 7}, {7, 2}};
  static const int paths[8][2] = {{0, -1}, {1, -1}, {0, 2}, {3, 1}, {0, -1}, {1, -1}, {0, -1}, {1, -1}};
  for (int i = 0; i < 8; i++) {
    fl[i] = shoal__fplan_flow(p, i < 4 ? 1 : 2, (uint32_t)i % 4, (uint32_t)(i + 1) % 4, hs[i][0], hs[i][1], paths[i],
                              paths[i][1] < 0 ? 1 : 2);
    shoal__fplan_report(p, fl[i], SHOAL__FS_IDLE, 1, 1 * MB, 1 * MB, 0); /* iteration 1: 1 MB a hop */
  }
  shoal__fplan_advance(p, 1);
  shoal__fplan_report(p, fl[0], SHOAL__FS_NEW_ITER, 2, 1 * MB, 0, 0);
}

TEST(plan_a_ring_moves_at_its_slowest_hop) {
  shoal__fplan_t p;
  int fl[8];
  two_rings(&p, SHOAL__FPOL_MLCC, fl);
  /* job 1: 1.6 MB a hop at 0.25 MB a slot (h5's rate) on every hop: slots 0-5, 0.1 MB in slot 6; r0's
   * uplink holds 0.5 MB of a slot for it, not the 0.75 of a fast hop planned at half the uplink */
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 8; k++) CHECK_NEAR(sched_at(&p, fl[i], k), k < 6 ? 0.25 * MB : k == 6 ? 0.1 * MB : 0, 1);
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 0), 0.5 * MB, 1);
  /* job 2 (its ring's rate: half an uplink, 0.5 MB a slot): least loaded first, slots 7-9 whole and
   * 0.1 MB in slot 6 (room 0.8 MB for its two hops on each uplink) */
  shoal__fplan_report(&p, fl[4], SHOAL__FS_NEW_ITER, 2, 1 * MB, 0, 0);
  for (int i = 4; i < 8; i++) {
    CHECK_NEAR(sched_at(&p, fl[i], 7), 0.5 * MB, 1);
    CHECK_NEAR(sched_at(&p, fl[i], 6), 0.1 * MB, 1);
    CHECK_NEAR(sched_at(&p, fl[i], 0), 0, 1e-6);
  }
  /* re-planned from now, each of job 2's hops on r0's uplink gets half of the 0.5 MB job 1 leaves in a
   * slot (1 MB in slots 0-3), not the first to report all of it: the uplink is full and both hops move */
  shoal__fplan_report(&p, fl[4], SHOAL__FS_RESCHEDULE, 2, 1 * MB, 0, 0);
  shoal__fplan_report(&p, fl[6], SHOAL__FS_RESCHEDULE, 2, 1 * MB, 0, 0);
  for (int k = 0; k < 5; k++) {
    CHECK_NEAR(sched_at(&p, fl[4], k), k < 4 ? 0.25 * MB : 0, 1);
    CHECK_NEAR(sched_at(&p, fl[6], k), k < 4 ? 0.25 * MB : 0, 1);
  }
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 0), 1 * MB, 1);
  shoal__fplan_free(&p);
  /* greedy (no ring rule): job 1's fast hops are planned at half the uplink, beside a hop at a quarter */
  two_rings(&p, SHOAL__FPOL_GREEDY, fl);
  CHECK_NEAR(sched_at(&p, fl[0], 0), 0.5 * MB, 1);
  CHECK_NEAR(shoal__fplan_reserved(&p, 0, 0), 0.75 * MB, 1);
  shoal__fplan_free(&p);
}

/* Feedback after an iteration ends mid-slot: the reports of the slot after show the new iteration's bytes
 * only; the end of the previous one (its volume minus what had been reported) is the flow's, not
 * background that would shrink the link for the next slots. */
TEST(plan_feedback_counts_the_end_of_an_iteration) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0, a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1);
  shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0);
  shoal__fplan_advance(&p, 1);
  shoal__fplan_report(&p, a, SHOAL__FS_RESCHEDULE, 1, 2 * MB, 1.5 * MB, 0);
  shoal__fplan_advance(&p, 2);
  /* the last 0.5 MB went in slot 1, then iteration 2 began (0.1 MB of it sent) */
  shoal__fplan_report(&p, a, SHOAL__FS_IDLE, 2, 2 * MB, 0.1 * MB, 0);
  CHECK_NEAR(p.flow[a].last_slot_bytes, 0.6 * MB, 1);
  /* the qdisc saw those 0.6 MB as frames (x 1.046) in the slot: no background, the whole link usable */
  shoal__fplan_advance(&p, 3);
  shoal__fplan_feedback(&p, 0, 0.6 * MB * 1.046 * 8 / 0.1, 0, 0);
  CHECK_NEAR(p.link[0].bg, 0, 1e-6);
  CHECK_NEAR(p.link[0].avail, 10 * MB, 1);
  shoal__fplan_free(&p);
}

/* A flow that holds all the planner may hand out on its link goes unlimited even when background feedback
 * took part of the link away: a limit at what is left would only keep the link idle whenever the estimate
 * is wrong (a report read late against the qdisc). A flow of another job, with nothing left, waits at the
 * floor. */
TEST(plan_lone_flow_is_not_held_under_a_background_estimate) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_MLCC);
  int l = 0, a = shoal__fplan_flow(&p, 1, 0, 1, 0, 1, &l, 1);
  /* 2 MB/s that no flow reported, in two slots: 1 MB/s of background (smoothed by half), 9 MB/s left */
  shoal__fplan_advance(&p, 1);
  shoal__fplan_feedback(&p, 0, 16e6, 0, 0);
  shoal__fplan_advance(&p, 2);
  shoal__fplan_feedback(&p, 0, 16e6, 0, 0);
  CHECK_NEAR(p.link[0].avail, 9 * MB, 1);
  /* job 1 plans 2 MB: the whole 0.9 MB of this slot is its own; no limit (before: 9 MB/s) */
  CHECK_EQ(shoal__fplan_report(&p, a, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0), 0);
  int b = shoal__fplan_flow(&p, 2, 0, 1, 2, 3, &l, 1);
  CHECK_NEAR(sched_at(&p, a, 0), 0.9 * MB, 1);
  /* job 2 starts in the same slot: nothing left to it, the floor (2% of the link) */
  CHECK_NEAR(shoal__fplan_report(&p, b, SHOAL__FS_NEW_ITER, 1, 2 * MB, 0, 0), 0.2 * MB, 1);
  shoal__fplan_free(&p);
}

TEST(plan_equal_share_and_feedback) {
  shoal__fplan_t p;
  plan_one_link(&p, SHOAL__FPOL_EQUAL);
  int l = 0, f[3];
  for (int i = 0; i < 3; i++) f[i] = shoal__fplan_flow(&p, (uint64_t)i + 1, 0, 1, 2 * i, 2 * i + 1, &l, 1);
  /* one flow with traffic: the whole link (no limit); three: a third each, whatever they do */
  CHECK_EQ(shoal__fplan_report(&p, f[0], SHOAL__FS_NEW_ITER, 1, MB, 0, 0), 0);
  shoal__fplan_report(&p, f[1], SHOAL__FS_IDLE, 1, MB, 0, 0);
  shoal__fplan_report(&p, f[2], SHOAL__FS_IDLE, 1, MB, 0, 0);
  CHECK_NEAR(shoal__fplan_report(&p, f[0], SHOAL__FS_RESCHEDULE, 1, MB, 0, 0), 10 * MB / 3, 1);
  /* feedback: the qdisc carried 40 Mbit/s while the flows reported nothing, two slots in a row: 5 MB/s
   * of background, smoothed by half: 2.5 MB/s; the 3 flows share the 7.5 MB/s left */
  shoal__fplan_advance(&p, 1);
  shoal__fplan_advance(&p, 2);
  shoal__fplan_feedback(&p, 0, 40e6, 0, 0);
  CHECK_NEAR(p.link[0].avail, 10 * MB, 1); /* one slot of it is no background yet */
  shoal__fplan_advance(&p, 3);
  shoal__fplan_feedback(&p, 0, 40e6, 0, 0);
  CHECK_NEAR(p.link[0].avail, 7.5 * MB, 1);
  shoal__fplan_report(&p, f[0], SHOAL__FS_RESCHEDULE, 1, MB, 0, 0); /* all three still reporting */
  shoal__fplan_report(&p, f[2], SHOAL__FS_IDLE, 1, MB, 0, 0);
  CHECK_NEAR(shoal__fplan_report(&p, f[1], SHOAL__FS_RESCHEDULE, 1, MB, 0, 0), 2.5 * MB, 1);
  /* a queue of 1 MB (50 ms of the link is 0.5 MB): the excess 0.5 MB is drained over a slot */
  shoal__fplan_feedback(&p, 0, 40e6, 1 * MB, 3);
  CHECK_NEAR(p.link[0].avail, 10 * MB - 3.75 * MB - 5 * MB, 1);
  CHECK_EQ(p.link[0].drops, 3);
  /* flows that stop reporting are forgotten after SHOAL__FPLAN_FORGET_SLOTS slots */
  shoal__fplan_advance(&p, 3 + SHOAL__FPLAN_FORGET_SLOTS + 1);
  CHECK_EQ(p.nflows, 0);
  shoal__fplan_free(&p);
}

TEST(plan_rejects_bad_settings) {
  shoal__fplan_t p;
  shoal__fplan_cfg_t cfg;
  shoal__fplan_cfg_default(&cfg);
  double cap = 1e6;
  cfg.horizon = SHOAL__FPLAN_MAX_K + 1;
  CHECK_EQ(shoal__fplan_init(&p, &cfg, &cap, 1), SHOAL_ERR_INVALID);
  shoal__fplan_cfg_default(&cfg);
  cfg.factor = 0.5;
  CHECK_EQ(shoal__fplan_init(&p, &cfg, &cap, 1), SHOAL_ERR_INVALID);
  shoal__fplan_cfg_default(&cfg);
  cap = 0;
  CHECK_EQ(shoal__fplan_init(&p, &cfg, &cap, 1), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal__fplan_policy_parse("mlcc"), SHOAL__FPOL_MLCC);
  CHECK_EQ(shoal__fplan_policy_parse("fair"), -1);
}
