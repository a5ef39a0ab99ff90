/* Whose jobs and nodes: the claim a second controller sees, one controller per
 * partition (the lease), other users' jobs placed around, partitions, who may
 * submit, and jobs that can never run (refused at submit, unschedulable when
 * they arrive otherwise, without blocking anybody under any policy). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../runner.h"
#include "live/params.h"
#include "sched/policy.h"
#include "world.h"

/* every job the controller takes carries its claim */
TEST(live_jobs_carry_the_claim) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  w.cfg.id = "ctl-a";
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 5, 1);
  world_run(&w, 2, 0);
  const shoal_live_job_t *j = shoal__live_mem_job(w.m, a);
  CHECK_MSG(j && !strcmp(j->claim, "shoal-ctl=ctl-a;scope=shoal"), "claim '%s'", j ? j->claim : "?");
  world_fini(&w);
}

/* A second controller (its own journal) is refused while the first one lives; once the first is dead and its lease
 * has run out, the second takes over its claimed jobs, adopting the running one: none is lost or started twice. */
TEST(live_second_controller_refused_then_takes_over) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  w.cfg.id = "ctl-a";
  w.cfg.lease_ttl = 20;
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 100, 1), b = world_submit(&w, 2, 2, 2, 10, 1);
  world_run(&w, 4, 0);
  shoal_live_config_t second;
  char j2[160];
  world_second(&w, "ctl-b", &second, j2, sizeof j2);
  shoal_live_ctl_t *L2 = NULL;
  int rc = shoal__live_ctl_create(&second, w.mgr, &L2);
  CHECK(rc == SHOAL_ERR_ADDR_IN_USE);
  CHECK_CONTAINS(shoal_last_error(), "partition shoal is served by controller ctl-a");
  CHECK_CONTAINS(shoal_last_error(), "one controller per partition");
  world_crash(&w);
  world_step(&w, 5);
  CHECK(shoal__live_ctl_create(&second, w.mgr, &L2) == SHOAL_ERR_ADDR_IN_USE); /* its lease still runs */
  world_step(&w, 20);
  w.cfg = second;
  CHECK_OK(world_start(&w));
  world_run(&w, 200, 2);
  CHECK_LOGGED(&w, "job %ld: claimed by controller ctl-a, whose lease has run out: taken over", a);
  CHECK_LOGGED(&w, "job %ld: adopted", a);
  CHECK_EQ(world_runs(&w, a), 1);
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_completions(&w, b), 1);
  world_fini(&w);
  unlink(j2);
}

/* a job claimed by a live controller of another partition is not this one's, even if it lands in its partition */
TEST(live_job_claimed_by_a_live_controller_is_refused) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  w.cfg.id = "ctl-a";
  shoal_live_lease_t h;
  CHECK_OK(w.mgr.ops->lease(w.mgr.impl, "other", "ctl-x", "host elsewhere", 600, SHOAL_LIVE_LEASE_TAKE, &h));
  long a = world_submit(&w, 1, 1, 1, 5, 1);
  CHECK_OK(w.mgr.ops->claim(w.mgr.impl, a, "shoal-ctl=ctl-x;scope=other"));
  CHECK_OK(world_start(&w));
  world_run(&w, 10, 0);
  CHECK_LOGGED(&w, "job %ld: claimed by controller ctl-x (host elsewhere", a);
  CHECK_EQ(world_runs(&w, a), 0);
  world_fini(&w);
}

/* another user's plain job on h0: the controller places around it, never on h0 while it runs; the slot planners
 * too: their plans' capacity is the cluster's, and the node the other job holds is reserved for them in the
 * current slot (without that larr placed a job there and failed) */
TEST_T(live_foreign_jobs_nodes_are_not_free, 60) {
  const char *pols[] = {"fifo", "larr:slot=60", "larr:slot=60:restart=1:hold=1:fit=0.5", "greedy:slot=60",
                        "oasis:slot=60"};
  for (int i = 0; i < 5; i++) {
    world_t w;
    world_init(&w, 2, 1, pols[i]);
    shoal_live_mem_behaviour_t plain = {.work = 30, .gpus_per_node = 1, .nodes = 1, .nodelist = "h0"};
    long f = shoal__live_mem_submit(w.m, "", "shoal", "other", "bob", 0, &plain);
    shoal__live_mem_advance(w.m, w.t);
    CHECK_OK(world_start(&w));
    long a = world_submit(&w, 1, 1, 1, 5, 1), b = world_submit(&w, 1, 1, 1, 5, 1);
    world_run(&w, 100, 2);
    CHECK_MSG(world_completions(&w, a) == 1 && world_completions(&w, b) == 1, "%s: %s", pols[i], world_log(&w));
    CHECK_MSG(!strcmp(world_nodes(&w, a), "h1"), "%s: a placed on %s", pols[i], world_nodes(&w, a));
    CHECK_MSG(!strcmp(world_nodes(&w, b), "h1"), "%s: b placed on %s", pols[i], world_nodes(&w, b));
    CHECK_EQ(world_runs(&w, f), 1);
    world_fini(&w);
  }
}

/* a released job whose node another user's job takes first (a higher priority) is held and placed again */
TEST(live_released_job_beaten_to_its_node_is_placed_again) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 5, 1);
  world_step(&w, 0.5); /* claimed and released on h0; the manager has not started it yet */
  const shoal_live_job_t *mj = shoal__live_mem_job(w.m, a);
  CHECK(mj && !mj->held && mj->run == SHOAL_LIVE_PENDING);
  shoal_live_mem_behaviour_t plain = {.work = 20, .gpus_per_node = 1, .nodes = 1, .nodelist = "h0", .urgent = 1};
  long f = shoal__live_mem_submit(w.m, "", "shoal", "other", "bob", 0, &plain);
  world_run(&w, 100, 1);
  CHECK_LOGGED(&w, "job %ld: its nodes were taken by jobs that are not the controller's", a);
  CHECK_MSG(!strcmp(world_nodes(&w, a), "h1"), "ran on %s", world_nodes(&w, a));
  CHECK_EQ(world_runs(&w, a), 1);
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_runs(&w, f), 1);
  shoal__live_ctl_summary(w.L);
  CHECK(world_logged(&w, "starts 1,"));
  world_fini(&w);
}

/* only the partition's nodes and jobs */
TEST(live_partition_nodes_and_jobs) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  CHECK_OK(shoal__live_mem_add_node(w.m, "g0", 4, 4, 1, "gpu"));
  CHECK_OK(world_start(&w));
  shoal_live_mem_behaviour_t b = {.work = 5, .checkpoints = 1};
  long other = shoal__live_mem_submit(w.m, "shoal:gpus=4", "gpu", "research", "ann", 1, &b);
  long mine = world_submit(&w, 1, 1, 1, 5, 1);
  world_run(&w, 50, 1);
  CHECK_EQ(world_runs(&w, other), 0);
  CHECK_EQ(world_completions(&w, mine), 1);
  CHECK_MSG(!strcmp(world_nodes(&w, mine), "h0"), "ran on %s", world_nodes(&w, mine));
  char buf[4096];
  CHECK_OK(shoal__live_ctl_status(w.L, buf, sizeof buf));
  CHECK_CONTAINS(buf, "nodes 1 with 1 GPUs");
  world_fini(&w);
}

/* who may submit: a list of accounts */
TEST(live_only_allowed_accounts) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  w.cfg.accounts = "research";
  CHECK_OK(world_start(&w));
  shoal_live_mem_behaviour_t b = {.work = 5, .checkpoints = 1};
  long bad = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "guests", "eve", 1, &b);
  long good = world_submit(&w, 1, 1, 1, 5, 1);
  world_run(&w, 50, 1);
  CHECK_LOGGED(&w, "job %ld: account 'guests' (user eve) may not submit to this controller (allowed: research)",
           bad);
  CHECK_EQ(world_runs(&w, bad), 0);
  CHECK_EQ(world_completions(&w, good), 1);
  world_fini(&w);
}

/* accounts become the policy's tenants (DRF shares between them) */
TEST(live_accounts_are_tenants) {
  world_t w;
  world_init(&w, 4, 1, "drf");
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "", 1, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "", 1, 0));
  CHECK_OK(world_start(&w));
  shoal_live_mem_behaviour_t b = {.work = 200, .checkpoints = 1, .ckpt_s = 1};
  long r[4], o[4];
  for (int i = 0; i < 4; i++) r[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "research", "ann", 1, &b);
  for (int i = 0; i < 4; i++) o[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "other", "bob", 1, &b);
  world_run(&w, 20, 0);
  int rr = 0, ro = 0;
  for (int i = 0; i < 4; i++) rr += world_runs(&w, r[i]), ro += world_runs(&w, o[i]);
  CHECK_MSG(rr == 2 && ro == 2, "research runs %d, other %d: %s", rr, ro, world_log(&w));
  world_fini(&w);
}

/* an account with three times the fair shares of another gets three times the GPUs under DRF; a change of the
 * shares is read on the next --shares-every and weighs the next decisions */
TEST(live_fair_shares_weigh_tenants) {
  world_t w;
  world_init(&w, 4, 1, "drf");
  w.cfg.shares_every = 5;
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "", 3, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "", 1, 0));
  CHECK_OK(world_start(&w));
  CHECK_LOGGED(&w, "tenants (by account, weighed from the manager's fair shares and usage): research 0.75, other 0.25; others 0.25");
  shoal_live_mem_behaviour_t b = {.work = 30, .checkpoints = 1, .ckpt_s = 1};
  long r[8], o[8];
  for (int i = 0; i < 8; i++) o[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "other", "bob", 1, &b);
  for (int i = 0; i < 8; i++) r[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "research", "ann", 1, &b);
  world_run(&w, 5, 0);
  int rr = 0, ro = 0;
  for (int i = 0; i < 8; i++) rr += world_runs(&w, r[i]), ro += world_runs(&w, o[i]);
  CHECK_MSG(rr == 3 && ro == 1, "research runs %d, other %d: %s", rr, ro, world_log(&w));
  /* the operator turns the shares around: the GPUs the first four jobs give back go 3:1 the other way */
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "", 1, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "", 3, 0));
  world_run(&w, 40, 0);
  CHECK_LOGGED(&w, "tenants (by account, weighed anew from the manager's fair shares and usage): research 0.25, other 0.75");
  rr = ro = 0;
  for (int i = 0; i < 8; i++) rr += world_runs(&w, r[i]), ro += world_runs(&w, o[i]);
  CHECK_MSG(rr == 4 && ro == 4, "research runs %d, other %d after the swap: %s", rr, ro, world_log(&w));
  world_fini(&w);
}

/* users as tenants: a user's weight is its share of its account's users times its account's share */
TEST(live_fair_shares_weigh_users) {
  world_t w;
  world_init(&w, 1, 1, "drf");
  w.cfg.tenants = "user";
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "", 3, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "ann", 2, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "cid", 1, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "", 1, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "bob", 1, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "cid", 1, 0));
  CHECK_OK(world_start(&w));
  /* ann 2/3 x 3/4 = 0.5; cid 1/3 x 3/4 + 1/2 x 1/4 = 0.375; bob 1/2 x 1/4 = 0.125 */
  CHECK_LOGGED(&w, "tenants (by user, weighed from the manager's fair shares and usage): ann 0.5, cid 0.375, bob 0.125; "
               "others 0.125");
  world_fini(&w);
}

/* equal shares, but research has used exactly its share (decayed effective usage 0.5 of 0.5) and other nothing:
 * Slurm's factor 2^(-U/S) halves research's weight, so other gets twice the GPUs */
TEST(live_fair_share_usage_weighs_tenants) {
  world_t w;
  world_init(&w, 3, 1, "drf");
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "", 1, 0.5));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "", 1, 0));
  CHECK_OK(world_start(&w));
  CHECK_LOGGED(&w, "tenants (by account, weighed from the manager's fair shares and usage): research 0.25, other 0.5; "
               "others 0.25");
  shoal_live_mem_behaviour_t b = {.work = 200, .checkpoints = 1, .ckpt_s = 1};
  long r[4], o[4];
  /* research's jobs first: with equal weights it would get 2 of the 3 GPUs (ties go to the older job) */
  for (int i = 0; i < 4; i++) r[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "research", "ann", 1, &b);
  for (int i = 0; i < 4; i++) o[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "other", "bob", 1, &b);
  world_run(&w, 5, 0);
  int rr = 0, ro = 0;
  for (int i = 0; i < 4; i++) rr += world_runs(&w, r[i]), ro += world_runs(&w, o[i]);
  CHECK_MSG(rr == 1 && ro == 2, "research runs %d, other %d: %s", rr, ro, world_log(&w));
  world_fini(&w);
}

/* an account created while the controller runs becomes a tenant at the next reading of the shares, with its own
 * weight: its jobs get its share (3 of 4 GPUs at twice research's weight), not the others' (2 of 4) */
TEST(live_fair_share_new_account_is_a_tenant) {
  world_t w;
  world_init(&w, 4, 1, "drf");
  w.cfg.shares_every = 5;
  CHECK_OK(shoal__live_mem_set_share(w.m, "research", "", 1, 0));
  CHECK_OK(shoal__live_mem_set_share(w.m, "other", "", 1, 0));
  CHECK_OK(world_start(&w));
  CHECK_OK(shoal__live_mem_set_share(w.m, "late", "", 2, 0));
  world_run(&w, 6, 0);
  CHECK_LOGGED(&w, "new tenants: late (their jobs arriving from now on count under them)");
  CHECK_LOGGED(&w, "tenants (by account, weighed anew from the manager's fair shares and usage): research 0.25, "
               "other 0.25, late 0.5");
  shoal_live_mem_behaviour_t b = {.work = 200, .checkpoints = 1, .ckpt_s = 1};
  long r[4], l[4];
  for (int i = 0; i < 4; i++) l[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "late", "eve", 1, &b);
  for (int i = 0; i < 4; i++) r[i] = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "research", "ann", 1, &b);
  world_run(&w, 5, 0);
  int rr = 0, rl = 0;
  for (int i = 0; i < 4; i++) rr += world_runs(&w, r[i]), rl += world_runs(&w, l[i]);
  CHECK_MSG(rr == 1 && rl == 3, "research runs %d, late %d: %s", rr, rl, world_log(&w));
  world_fini(&w);
}

/* unknown model, unreadable parameters, more workers than the cluster has: unschedulable, said, others go on */
TEST(live_impossible_jobs_are_unschedulable) {
  world_t w;
  world_init(&w, 2, 2, "fifo");
  CHECK_OK(world_start(&w));
  long big = world_submit(&w, 100, 100, 100, 5, 1);
  long model = world_submit_comment(&w, "shoal:gpus=1:model=nosuchnet", 5, 1);
  long bad = world_submit_comment(&w, "shoal:gpus=two", 5, 1);
  long zero = world_submit_comment(&w, "shoal:gpus=1:model=resnet50:work=0", 5, 1);
  long ok = world_submit(&w, 4, 4, 4, 5, 1);
  world_run(&w, 60, 2);
  CHECK_LOGGED(&w, "job %ld: unschedulable: asks for 100 workers; the 2 nodes here have 4 GPUs", big);
  CHECK_LOGGED(&w, "job %ld: unschedulable: model 'nosuchnet' is not in the analytic speed model (resnet50", model);
  CHECK_LOGGED(&w, "job %ld: unschedulable: its parameters do not read: gpus='two' is not a count", bad);
  CHECK_EQ(world_completions(&w, zero), 1);
  CHECK_EQ(world_completions(&w, ok), 1);
  CHECK_EQ(world_runs(&w, big) + world_runs(&w, model) + world_runs(&w, bad), 0);
  char buf[8192];
  CHECK_OK(shoal__live_ctl_status(w.L, buf, sizeof buf));
  CHECK_CONTAINS(buf, "unschedulable");
  CHECK_CONTAINS(buf, "asks for 100 workers");
  world_fini(&w);
}

/* every policy: a job that can never fit does not keep the others (rigid and elastic) from running and growing */
TEST_T(live_every_policy_goes_around_an_impossible_job, 120) {
  for (int i = 0; shoal__policy_at(i); i++) {
    const shoal_policy_ops_t *ops = shoal__policy_at(i);
    world_t w;
    world_init(&w, 4, 1, ops->name);
    CHECK_OK(world_start(&w));
    long big = world_submit(&w, 100, 100, 100, 50, 1);
    long a = world_submit(&w, 1, 1, 4, 40, 1), b = world_submit(&w, 2, 1, 2, 20, 1);
    world_run(&w, 400, 2);
    CHECK_MSG(world_completions(&w, a) == 1 && world_completions(&w, b) == 1, "policy %s: jobs blocked: %s", ops->name,
              world_log(&w));
    CHECK_EQ(world_runs(&w, big), 0);
    world_fini(&w);
  }
}
