/* Interference in the engine (docs/learned-placement.md): co-located jobs slow
 * down by the model's terms, exactly; a model whose terms are all zero changes
 * nothing; every placer and the learned policy keep the engine's invariants,
 * and the learned policy falls back to its named heuristic, saying so, for a
 * job no agent can place. */
#include <stdio.h>

#include "sched/model/interference.h"
#include "sched/policies/marl.h"
#include "simtest.h"

/* one class "x" for every model: g_socket(x, x) = softplus(0.5), g_nic = softplus(-1) */
static const char *MODEL =
    "{\"format\": \"shoal-interference 1\", \"rank\": 0,\n"
    " \"levels\": {\"socket\": {\"classes\": [\"x\"], \"alpha\": [0.5], \"beta\": [0], \"u\": [[]], \"v\": [[]]},\n"
    "            \"nic\": {\"classes\": [\"x\"], \"alpha\": [-1], \"beta\": [0], \"u\": [[]], \"v\": [[]]}},\n"
    " \"default_class\": \"x\"}\n";
static const char *ZERO =
    "{\"format\": \"shoal-interference 1\", \"rank\": 0,\n"
    " \"levels\": {\"socket\": {\"classes\": [\"x\"], \"alpha\": [-800], \"beta\": [0], \"u\": [[]], \"v\": [[]]}},\n"
    " \"default_class\": \"x\"}\n";

static void run_with(shoal_workload_t *w, const shoal_cluster_spec_t *cs, const shoal_speed_t *sp, const char *policy,
                     const char *params, const shoal_interference_t *im, shoal_sim_result_t *r) {
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  cfg.restart_cost = 0;
  cfg.check = 1;
  cfg.interference = im;
  const shoal_policy_ops_t *ops = shoal__policy_find(policy);
  CHECK(ops != NULL);
  CHECK_OK(shoal__sim_run(w, cs, sp, ops, params, &cfg, r));
}

TEST(interference_slows_socket_sharers_exactly) {
  shoal_interference_t *im;
  CHECK_OK(shoal__interference_parse("m.json", MODEL, strlen(MODEL), &im));
  double g = log1p(exp(0.5)), s = 1 + 4 * g;
  shoal_speed_t *sp = linear_speed(1.0);
  tjob_t t[] = {{0, 4, 100, 0}, {0, 4, 200, 0}};
  for (int sockets = 1; sockets <= 2; sockets++) {
    shoal_workload_t w;
    memset(&w, 0, sizeof w);
    tiny_workload(&w, t, 2);
    shoal_cluster_spec_t cs;
    one_machine(&cs, 1, 8);
    cs.group[0].sockets = sockets;
    shoal_sim_result_t r;
    run_with(&w, &cs, sp, "fifo", NULL, im, &r);
    if (sockets == 2) { /* slots 0-3 and 4-7: a socket each, nothing shared */
      CHECK_JCT(&w, 0, 100);
      CHECK_JCT(&w, 1, 200);
    } else { /* one socket: each worker has the other job's 4 workers beside it */
      CHECK_JCT(&w, 0, 100 * s);
      CHECK_JCT(&w, 1, 100 * s + 100); /* then alone at full speed for its last 100 s of work */
    }
    shoal__sim_result_free(&r);
    shoal__workload_free(&w);
  }
  shoal__speed_destroy(sp);
  shoal__interference_free(im);
}

TEST(interference_zero_model_changes_nothing) {
  shoal_interference_t *im;
  CHECK_OK(shoal__interference_parse("z.json", ZERO, strlen(ZERO), &im));
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.synth_jobs = 300;
  o.load = 1.5;
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 8;
  cs.group[0].racks = 2;
  cs.net.oversub = 2;
  o.cluster_gpus = 64;
  o.max_gpus = 64;
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  const char *pol[][2] = {{"fifo", NULL}, {"tiresias", NULL}, {"fifo", "place=loadbal"}};
  for (int p = 0; p < 3; p++) {
    shoal_workload_t w;
    memset(&w, 0, sizeof w);
    CHECK_OK(shoal__synth_generate(&o, &w));
    CHECK_OK(shoal__workload_assign_models(&w, sp, c, &o));
    shoal_sim_result_t r0, r1;
    run_with(&w, &cs, sp, pol[p][0], pol[p][1], NULL, &r0);
    double *fin = malloc((size_t)w.njobs * sizeof *fin);
    for (long i = 0; i < w.njobs; i++) fin[i] = w.jobs[i].finish;
    run_with(&w, &cs, sp, pol[p][0], pol[p][1], im, &r1);
    for (long i = 0; i < w.njobs; i++)
      CHECK_MSG(fin[i] == w.jobs[i].finish, "%s: job %ld finished at %.17g, %.17g without the model", pol[p][0], i,
                w.jobs[i].finish, fin[i]);
    free(fin);
    shoal__sim_result_free(&r0);
    shoal__sim_result_free(&r1);
    shoal__workload_free(&w);
  }
  shoal__cluster_destroy(c);
  shoal__speed_destroy(sp);
  shoal__interference_free(im);
}

TEST(placers_and_marl_keep_invariants) {
  shoal_interference_t *im;
  CHECK_OK(shoal__interference_shipped(&im));
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.synth_jobs = 200;
  o.load = 1.2;
  o.cluster_gpus = 64;
  o.max_gpus = 32; /* a partition of 2 racks x 2 machines x 8 GPUs holds 32 */
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 8;
  cs.group[0].racks = 4;
  cs.net.oversub = 2;
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  const char *pol[][2] = {{"fifo", "place=firstfit"}, {"fifo", "place=loadbal"}, {"fifo", "place=pack"},
                          {"fifo", "place=marl"}, {"marl", "agents=2"}, {"marl", "agents=4:fallback=pack"}};
  for (int p = 0; p < 6; p++)
    for (int with = 0; with < 2; with++) {
      shoal_workload_t w;
      memset(&w, 0, sizeof w);
      CHECK_OK(shoal__synth_generate(&o, &w));
      CHECK_OK(shoal__workload_assign_models(&w, sp, c, &o));
      shoal_sim_result_t r;
      run_with(&w, &cs, sp, pol[p][0], pol[p][1], with ? im : NULL, &r);
      CHECK_EQ(r.finished, w.njobs);
      if (!strcmp(pol[p][0], "marl")) CHECK_CONTAINS(r.policy_stats, "decisions=");
      shoal__sim_result_free(&r);
      shoal__workload_free(&w);
    }
  shoal__cluster_destroy(c);
  shoal__speed_destroy(sp);
  shoal__interference_free(im);
}

/* a decider that records, per job, the agent and the first observation's consolidation feature per server, and
 * takes the first feasible socket of a server consolidation names */
typedef struct {
  int agent[2];
  float hint[2][4];
} hint_seen_t;

static int follow_hint(void *arg, const shoal__marl_step_t *st) {
  hint_seen_t *h = arg;
  const shoal_marl_obs_t *o = st->obs;
  if (st->worker == 0 && st->job >= 0 && st->job < 2) {
    h->agent[st->job] = st->agent;
    for (int i = 0; i < o->nserv && i < 4; i++) h->hint[st->job][i] = o->xm[(size_t)i * SHOAL_MARL_FM + 6];
  }
  int first = -1;
  for (int k = 0; k < o->nsock; k++) {
    if (!o->mask[k]) continue;
    if (first < 0) first = k;
    if (o->xm[(size_t)o->sock_serv[k] * SHOAL_MARL_FM + 6] > 0) return k;
  }
  return first;
}

TEST(marl_sees_and_routes_to_consolidation) {
  /* 2 racks of one 8-GPU machine, 2 agents: job 0 (6 GPUs) on machine 0; job 1 (2 GPUs) fits machine 0 best
   * (2 free, against 8): it goes to agent 0, not to the partition with the most free GPUs, and sees
   * consolidation's 2 workers on its server */
  shoal_speed_t *sp = linear_speed(0.9);
  tjob_t t[] = {{0, 6, 100, 0}, {10, 2, 50, 0}};
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  tiny_workload(&w, t, 2);
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 2;
  cs.group[0].racks = 2;
  hint_seen_t h;
  memset(&h, 0, sizeof h);
  shoal__marl_set_decider(follow_hint, &h);
  shoal_sim_result_t r;
  run_with(&w, &cs, sp, "marl", "agents=2", NULL, &r);
  shoal__marl_set_decider(NULL, NULL);
  CHECK_EQ(r.finished, 2);
  CHECK_EQ(h.agent[0], 0);
  CHECK(fabs(h.hint[0][0] - 1.0f) < 1e-6); /* all 6 workers on its one server */
  CHECK_EQ(h.agent[1], 0);
  CHECK(fabs(h.hint[1][0] - 1.0f) < 1e-6);
  CHECK_EQ(w.jobs[1].max_machines, 1);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* a decider that spreads: the first feasible socket of a server the job does not use yet, else the first */
static int spread_out(void *arg, const shoal__marl_step_t *st) {
  (void)arg;
  const shoal_marl_obs_t *o = st->obs;
  int first = -1;
  for (int k = 0; k < o->nsock; k++) {
    if (!o->mask[k]) continue;
    if (first < 0) first = k;
    if (o->xm[(size_t)o->sock_serv[k] * SHOAL_MARL_FM + 1] == 0) return k; /* none of its workers there */
  }
  return first;
}

TEST(marl_keeps_consolidations_machine_count) {
  /* 4 idle 8-GPU machines: a 4-GPU job fits on one, a 12-GPU job on two. A decider that spreads every worker
   * to a new server gets them on 4 machines each with spread=1; the mask (spread=0) keeps them to 1 and 2;
   * net=0 does not ask it at all (consolidation's 1 and 2 even with spread=1). */
  shoal_speed_t *sp = linear_speed(0.9);
  tjob_t t[] = {{0, 4, 100, 0}, {200, 12, 100, 0}};
  const char *params[] = {"wait=0", "spread=1:wait=0", "spread=1:wait=0:net=0"};
  for (int run = 0; run < 3; run++) {
    shoal_workload_t w;
    memset(&w, 0, sizeof w);
    tiny_workload(&w, t, 2);
    shoal_cluster_spec_t cs;
    one_machine(&cs, 4, 8);
    shoal__marl_set_decider(spread_out, NULL);
    shoal_sim_result_t r;
    run_with(&w, &cs, sp, "marl", params[run], NULL, &r);
    shoal__marl_set_decider(NULL, NULL);
    CHECK_EQ(r.finished, 2);
    CHECK_EQ(w.jobs[0].max_machines, run == 1 ? 4 : 1);
    CHECK_EQ(w.jobs[1].max_machines, run == 1 ? 4 : 2);
    CHECK_CONTAINS(r.policy_stats, run == 2 ? "decisions=0" : "decisions=16");
    shoal__sim_result_free(&r);
    shoal__workload_free(&w);
  }
  shoal__speed_destroy(sp);
}

TEST(waiting_rule_holds_rather_than_share_a_nic) {
  /* 3 8-GPU machines. Job 0 (12 GPUs) spans machines 0 and 1 (8 + 4), job 1 (6) takes machine 2. Job 2 (5)
   * fits on a machine but none has 5 free GPUs: it would span machine 1 (beside job 0, which spans: a NIC
   * term g each way) and machine 2. Spreading is predicted to cost 2g times its run time D.
   * Rule off: it starts at once (t = 2) over two machines. No limit (2): it waits for job 1 to end (t = 101)
   * and runs on one. Bounded (1): the same when D = 1000 (2gD > 99 s), but when D = 100 it waits only 2gD
   * (63 s, a time with no arrival or finish: the hold's timer walks the queue) and then spreads. One rule,
   * the FIFO queue's: the learned policy's wait=, and the FIFO's hold= with consolidation and with the
   * learned placer. */
  shoal_interference_t *im;
  CHECK_OK(shoal__interference_parse("m.json", MODEL, strlen(MODEL), &im));
  shoal_speed_t *sp = linear_speed(0.9);
  double g = log1p(exp(-1));
  static const char *const policy[][2] = {{"marl", "wait=%d"}, {"fifo", "hold=%d"}, {"fifo", "place=marl:hold=%d"}};
  for (int q = 0; q < 3; q++)
    for (int d = 100; d <= 1000; d *= 10)
      for (int wait = 0; wait < 3; wait++) {
        tjob_t t[] = {{0, 12, 1000, 0}, {1, 6, 100, 0}, {2, 5, d, 0}};
        shoal_workload_t w;
        memset(&w, 0, sizeof w);
        tiny_workload(&w, t, 3);
        shoal_cluster_spec_t cs;
        one_machine(&cs, 3, 8);
        hint_seen_t h;
        shoal__marl_set_decider(follow_hint, &h);
        shoal_sim_result_t r;
        char params[32];
        snprintf(params, sizeof params, policy[q][1], wait);
        run_with(&w, &cs, sp, policy[q][0], params, im, &r);
        shoal__marl_set_decider(NULL, NULL);
        CHECK_EQ(r.finished, 3);
        CHECK_EQ(w.jobs[0].max_machines, 2);
        int waits_for_machine = wait == 2 || (wait == 1 && d == 1000);
        CHECK_MSG(w.jobs[2].max_machines == (waits_for_machine ? 1 : 2), "%s:%s D %d: %d machines", policy[q][0],
                  params, d, w.jobs[2].max_machines);
        if (waits_for_machine) CHECK(w.jobs[2].first_start >= 101);
        else CHECK_NEAR(w.jobs[2].first_start, wait ? 2 + 2 * g * d : 2, 1e-6);
        if (wait) CHECK(strstr(r.policy_stats, "holds=") && !strstr(r.policy_stats, "holds=0"));
        else CHECK(!strstr(r.policy_stats, "holds="));
        shoal__sim_result_free(&r);
        shoal__workload_free(&w);
      }
  shoal__speed_destroy(sp);
  shoal__interference_free(im);
}

TEST(marl_falls_back_when_no_agent_can_place) {
  /* 4 racks of one 8-GPU machine, 4 agents: a 16-GPU job fits in no agent's partition */
  shoal_speed_t *sp = linear_speed(0.9);
  tjob_t t[] = {{0, 16, 100, 0}, {10, 2, 50, 0}};
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  tiny_workload(&w, t, 2);
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 4;
  cs.group[0].racks = 4;
  shoal_sim_result_t r;
  run_with(&w, &cs, sp, "marl", "agents=4:fallback=firstfit", NULL, &r);
  CHECK_EQ(r.finished, 2);
  CHECK_CONTAINS(r.policy_stats, "fallbacks=1");
  CHECK_EQ(w.jobs[0].max_machines, 2); /* first-fit: machines 0 and 1 */
  shoal__sim_result_free(&r);
  /* weights trained for more agents than the cluster has racks: refused naming the file */
  cs.group[0].machines = 2;
  cs.group[0].racks = 1;
  const shoal_policy_ops_t *ops = shoal__policy_find("marl");
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  int rc = shoal__sim_run(&w, &cs, sp, ops, "agents=2", &cfg, &r);
  CHECK(rc == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "agents=2");
  rc = shoal__sim_run(&w, &cs, sp, ops, "fallback=marl", &cfg, &r);
  CHECK(rc == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "fallback=marl");
  rc = shoal__sim_run(&w, &cs, sp, ops, "weights=/nonexistent.weights", &cfg, &r);
  CHECK(rc == SHOAL_ERR_NOT_FOUND); /* a missing file, named */
  CHECK_CONTAINS(shoal_last_error(), "/nonexistent.weights");
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* shoal sim's interference flags: a model file that cannot be read or parsed, a socket count out of range
 * (flag or cluster file) are refused naming the option, file and line; on, interference slows the FIFO's
 * jobs and summary.json names the model; a model whose terms are all zero gives the run without one. */
TEST_T(cli_interference_flags, 60) {
  char cmd[1024], out[8192], dir[] = "/tmp/shoal-interf-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char bad[1100], zero[1100], ini[1100];
  snprintf(bad, sizeof bad, "%s/bad.json", dir);
  snprintf(zero, sizeof zero, "%s/zero.json", dir);
  snprintf(ini, sizeof ini, "%s/c.ini", dir);
  FILE *f = fopen(bad, "w");
  CHECK(f && fputs("{\"format\": \"shoal-interference 1\", \"rank\": 1,\n \"levels\": {\"disk\": {}}}\n", f) >= 0 && !fclose(f));
  CHECK((f = fopen(zero, "w")) && fputs(ZERO, f) >= 0 && !fclose(f));
  CHECK((f = fopen(ini, "w")) && fputs("[cluster]\nmachines = 2\nsockets_per_machine = 9\n", f) >= 0 && !fclose(f));
  const char *base = "--synthetic 60 --load 2 --machines 2 --policy fifo --no-progress";
  char badarg[1200];
  snprintf(badarg, sizeof badarg, "--interference %s", bad);
  struct { const char *args, *want; } refused[] = {
      {"--interference /nonexistent.json", "--interference: interference model /nonexistent.json: cannot open"},
      {badarg, "bad.json:2: levels: unknown level 'disk'"},
      {"--sockets-per-machine 9", "--sockets-per-machine"},
      {"--sockets-per-machine 8 --gpus-per-machine 4", "sockets per machine = 8"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    snprintf(cmd, sizeof cmd, "%s sim %s %s 2>&1", shoal_test_cli(), base, refused[i].args);
    CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0, "%s accepted: %s", refused[i].args, out);
    CHECK_CONTAINS(out, refused[i].want);
  }
  snprintf(cmd, sizeof cmd, "%s sim --cluster %s --synthetic 10 --policy fifo 2>&1", shoal_test_cli(), ini);
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "c.ini:3: sockets_per_machine = 9: expected an integer in [0, 8]");
  /* off, shipped, all-zero: the average JCT column of the CSV row; summary.json names the model when on */
  double jct[3];
  const char *model[3] = {"off", "shipped", zero};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "%s sim %s --sockets-per-machine 1 --interference %s --csv --no-header --out %s/o%d 2>&1",
             shoal_test_cli(), base, model[i], dir, i);
    CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 30) == 0, "%s: %s", model[i], out);
    CHECK(sscanf(out, "-,fifo,%*d,%*d,%lf,", &jct[i]) == 1);
    snprintf(cmd, sizeof cmd, "grep -c '\"interference\"' %s/o%d/summary.json", dir, i);
    shoal_test_run_cmd(cmd, out, sizeof out, 10);
    CHECK_MSG(atoi(out) == (i > 0), "%s: summary.json names the model %s times", model[i], out);
  }
  CHECK_MSG(jct[1] > jct[0], "interference on: average JCT %g, off %g", jct[1], jct[0]);
  CHECK_MSG(jct[2] == jct[0], "all-zero model: average JCT %g, off %g", jct[2], jct[0]);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  shoal_test_run_cmd(cmd, out, sizeof out, 10);
}
