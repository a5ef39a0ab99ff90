/* The controller's behaviours on the in-memory manager: placing, preempting,
 * resizing, the ends of jobs (completed, cancelled, failed and retried,
 * checkpointed unasked, held or released by someone else), nodes that drain,
 * go down or stop responding, a manager that stops answering, and the summary. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runner.h"
#include "live/params.h"
#include "world.h"

TEST(live_fifo_runs_every_job_once) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 2, 2, 2, 20, 1), b = world_submit(&w, 1, 1, 1, 5, 1), c = world_submit(&w, 1, 1, 1, 5, 1);
  world_run(&w, 120, 3);
  CHECK_EQ(w.rc, 0);
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_completions(&w, b), 1);
  CHECK_EQ(world_completions(&w, c), 1);
  CHECK_EQ(world_runs(&w, a) + world_runs(&w, b) + world_runs(&w, c), 3);
  shoal__live_ctl_summary(w.L);
  CHECK(world_logged(&w, "3 jobs seen, 3 completed, 0 failed, 0 cancelled, 0 not ended"));
  CHECK(world_logged(&w, "starts 3, preemptions 0"));
  world_fini(&w);
}

/* srtf preempts a long job for a short one: checkpoint request, exit 75, requeue, resumed later */
TEST(live_preemption_checkpoints_and_resumes) {
  world_t w;
  world_init(&w, 2, 1, "srtf");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 2, 2, 2, 100, 1);
  world_run(&w, 5, 0);
  CHECK_EQ(world_runs(&w, a), 1);
  long b = world_submit(&w, 1, 1, 1, 4, 1);
  world_run(&w, 200, 2);
  CHECK_EQ(w.rc, 0);
  CHECK_LOGGED(&w, "preempt job %ld", a);
  CHECK_EQ(world_runs(&w, a), 2);
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_completions(&w, b), 1);
  shoal__live_ctl_summary(w.L);
  CHECK(world_logged(&w, "starts 3, preemptions 1, resizes 0"));
  world_fini(&w);
}

/* a job that does not checkpoint is killed after the grace and starts again from scratch */
TEST(live_job_without_checkpoint_is_killed_after_the_grace) {
  world_t w;
  world_init(&w, 1, 1, "srtf");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 50, 0);
  world_run(&w, 3, 0);
  long b = world_submit(&w, 1, 1, 1, 2, 0);
  world_run(&w, 200, 2);
  CHECK_MSG(world_logged(&w, "no exit within the 2.0 s grace: its tasks killed"), "%s", world_log(&w));
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_completions(&w, b), 1);
  world_fini(&w);
}

/* elastic grows a job into idle GPUs (a resize: checkpoint, requeue, start at the new size) */
TEST(live_elastic_resizes_into_idle_gpus) {
  world_t w;
  world_init(&w, 4, 1, "elastic:interval=5");
  CHECK_OK(world_start(&w));
  /* (a small model: growing over the 1 Gb/s links pays for it) */
  long a = world_submit_comment(&w, "shoal:gpus=1:min=1:max=4:model=cifar10-resnet:work=4000", 4000, 1);
  long b = world_submit(&w, 3, 3, 3, 6, 1);
  world_run(&w, 20, 0);
  CHECK_EQ(world_completions(&w, b), 1);
  shoal_live_mem_stats_t st;
  CHECK_OK(shoal__live_mem_stats(w.m, a, &st));
  CHECK_MSG(st.gpus == 4, "elastic gave %d GPUs: %s", st.gpus, world_log(&w));
  world_run(&w, 2000, 2);
  CHECK_EQ(world_completions(&w, a), 1);
  shoal__live_ctl_summary(w.L);
  CHECK_MSG(world_logged(&w, "resizes 1"), "%s", world_log(&w));
  world_fini(&w);
}

TEST(live_user_cancel_while_held_and_running) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 50, 1), b = world_submit(&w, 1, 1, 1, 50, 1);
  world_run(&w, 3, 0);
  CHECK_OK(shoal__live_mem_user_cancel(w.m, b)); /* held */
  world_run(&w, 2, 0);
  CHECK_OK(shoal__live_mem_user_cancel(w.m, a)); /* running */
  world_run(&w, 10, 2);
  shoal__live_ctl_summary(w.L);
  CHECK_MSG(world_logged(&w, "0 completed, 0 failed, 2 cancelled, 0 not ended"), "%s", world_log(&w));
  CHECK_EQ(world_runs(&w, b), 0);
  /* a job cancelled before it ran has no start and no JCT; one cancelled while it ran has no JCT either */
  char want[128];
  snprintf(want, sizeof want, "job %ld: CANCELLED (by the user) arrival", b);
  CHECK_LOGGED(&w, "%s", want);
  CHECK(strstr(strstr(world_log(&w), want), "start - finish") != NULL);
  CHECK(strstr(strstr(world_log(&w), want), "jct - ") != NULL);
  world_fini(&w);
}

/* a failure is retried from the checkpoint --retries times, then reported failed with the job's last output line */
TEST(live_failure_retried_then_reported_with_its_output) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  w.cfg.retries = 1;
  CHECK_OK(world_start(&w));
  char out[128];
  snprintf(out, sizeof out, "/tmp/shoal-live-out-%d", (int)getpid());
  FILE *f = fopen(out, "w");
  CHECK(f != NULL);
  fprintf(f, "starting\nslurmstepd: error: execve(): nosuchprog: No such file or directory\n");
  fclose(f);
  shoal_live_mem_behaviour_t bh = {.work = 2, .fail_exit = 2, .output = out};
  long a = shoal__live_mem_submit(w.m, "shoal:gpus=1", "shoal", "research", "ann", 1, &bh);
  world_run(&w, 60, 1);
  unlink(out);
  CHECK_EQ(world_runs(&w, a), 2);
  CHECK_MSG(world_logged(&w, "requeued from its checkpoint (retry 1 of 1)"), "%s", world_log(&w));
  CHECK_MSG(world_logged(&w, "FAILED (exit 2: 'slurmstepd: error: execve(): nosuchprog: No such file or directory')"),
            "%s", world_log(&w));
  world_fini(&w);
}

/* changes outside the controller: checkpointed unasked, held by an operator, released before it was placed */
TEST(live_jobs_changed_outside_the_controller) {
  world_t w;
  world_init(&w, 3, 1, "fifo");
  long r = world_submit(&w, 1, 1, 1, 5, 1);
  CHECK_OK(shoal__live_mem_user_release(w.m, r));
  shoal__live_mem_advance(w.m, w.t);
  CHECK_OK(world_start(&w));
  long e = world_submit(&w, 1, 1, 1, 20, 1), h = world_submit(&w, 1, 1, 1, 20, 1);
  world_run(&w, 4, 0);
  CHECK_OK(shoal__live_mem_exit_now(w.m, e, 75));
  CHECK_OK(shoal__live_mem_user_requeuehold(w.m, h));
  world_run(&w, 100, 2);
  CHECK(world_logged(&w, "released outside the controller before it was placed: left to the manager"));
  CHECK(world_logged(&w, "checkpointed on its own (exit 75): requeued"));
  CHECK(world_logged(&w, "held outside the controller"));
  CHECK_EQ(world_completions(&w, e), 1);
  CHECK_EQ(world_completions(&w, h), 1);
  CHECK_EQ(world_runs(&w, e), 2);
  CHECK_EQ(world_runs(&w, h), 2);
  world_fini(&w);
}

/* a start the manager refuses is retried on the policy's placement; the job then runs once */
TEST(live_failed_start_is_retried) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  CHECK_OK(world_start(&w));
  shoal__live_mem_fail_next(w.m, "start", 1);
  long a = world_submit(&w, 1, 1, 1, 3, 1);
  world_run(&w, 30, 1);
  CHECK(world_logged(&w, "start on h0 failed (memory manager: start: injected failure); it stays held and is retried"));
  CHECK_EQ(world_runs(&w, a), 1);
  CHECK_EQ(world_completions(&w, a), 1);
  world_fini(&w);
}

/* drained and not-responding nodes get no work; their jobs move; the node comes back */
TEST(live_drained_and_unresponsive_nodes) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  w.cfg.nodes_every = 0.5;
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 60, 1);
  world_run(&w, 4, 0);
  shoal_live_mem_stats_t st;
  CHECK_OK(shoal__live_mem_stats(w.m, a, &st));
  CHECK_OK(shoal__live_mem_set_node(w.m, st.nodes, 0, 0, "mixed+DRAIN"));
  char other[8];
  snprintf(other, sizeof other, "%s", strcmp(st.nodes, "h0") ? "h0" : "h1");
  CHECK_OK(shoal__live_mem_set_node(w.m, other, 0, 0, "mixed+NOT_RESPONDING"));
  world_run(&w, 10, 0);
  CHECK_LOGGED(&w, "node %s is drained (mixed+DRAIN): no new work there", st.nodes);
  CHECK_LOGGED(&w, "node %s is not responding (mixed+NOT_RESPONDING): no new work there", other);
  CHECK_MSG(world_runs(&w, a) == 1, "ran %d times with no usable node", world_runs(&w, a));
  CHECK_OK(shoal__live_mem_set_node(w.m, other, 1, 0, "idle"));
  world_run(&w, 100, 1);
  CHECK_MSG(world_completions(&w, a) == 1, "%s", world_log(&w));
  CHECK_EQ(world_runs(&w, a), 2);
  CHECK_OK(shoal__live_mem_stats(w.m, a, &st));
  CHECK_MSG(!strcmp(st.nodes, other), "ran again on %s", st.nodes);
  shoal__live_ctl_summary(w.L);
  CHECK(world_logged(&w, "preemptions 1"));
  world_fini(&w);
}

/* a node that goes down fails its job (NODE_FAIL): retried elsewhere */
TEST(live_node_down_job_retried_elsewhere) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  w.cfg.nodes_every = 0.5;
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 40, 1);
  world_run(&w, 4, 0);
  CHECK_OK(shoal__live_mem_set_node(w.m, world_nodes(&w, a), 0, 1, "down+NOT_RESPONDING"));
  world_run(&w, 100, 1);
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_MSG(world_logged(&w, "NODE_FAIL"), "%s", world_log(&w));
  world_fini(&w);
}

/* the manager does not answer for 60 s: said, nothing done meanwhile, nothing lost after */
TEST(live_manager_down_for_a_minute) {
  world_t w;
  world_init(&w, 2, 1, "srtf");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 40, 1), b = world_submit(&w, 1, 1, 1, 40, 1);
  world_run(&w, 4, 0);
  int starts = shoal__live_mem_calls(w.m, "start");
  shoal__live_mem_set_down(w.m, 1);
  long c = world_submit(&w, 1, 1, 1, 5, 1);
  world_run(&w, 60, 0);
  CHECK_EQ(w.rc, 0);
  CHECK_MSG(world_logged(&w, "manager does not answer"), "%s", world_log(&w));
  shoal__live_mem_set_down(w.m, 0);
  CHECK_EQ(shoal__live_mem_calls(w.m, "start"), starts);
  world_run(&w, 200, 3);
  CHECK(world_logged(&w, "manager answers again after"));
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_completions(&w, b), 1);
  CHECK_EQ(world_completions(&w, c), 1);
  world_fini(&w);
}

/* a few seconds without the manager (a slurmctld restart): when it began, when it ended, what was retried */
TEST(live_manager_down_for_seconds_is_logged) {
  world_t w;
  world_init(&w, 2, 1, "srtf");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 20, 1);
  world_run(&w, 2, 0);
  shoal__live_mem_set_down(w.m, 1);
  long c = world_submit(&w, 1, 1, 1, 5, 1);
  world_run(&w, 3, 0);
  CHECK_MSG(world_logged(&w, "the memory manager does not answer (memory manager: jobs: the manager does not answer "
                         "(down)) since "), "%s", world_log(&w));
  CHECK_LOGGED(&w, "its jobs are read again every tick, no decision is taken until it answers; 0 of its actions "
               "failed since the last good read");
  CHECK_EQ(world_runs(&w, c), 0);
  shoal__live_mem_set_down(w.m, 0);
  world_run(&w, 60, 2);
  CHECK_LOGGED(&w, "the memory manager answers again after 3.0 s (");
  CHECK_LOGGED(&w, "): 6 reads of its jobs retried; 0 failed actions are retried now; no decision was taken meanwhile");
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_completions(&w, c), 1);
  world_fini(&w);
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* a read of the jobs that answers, but late (a slurmctld restart shorter than its clients' retries): said, with
 * its times, at most once a minute with how many there were; a read under 3 s is not slow */
TEST(live_manager_slow_read_is_logged) {
  world_t w;
  world_init(&w, 2, 1, "srtf");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 40, 1);
  world_run(&w, 2, 0);
  shoal__live_mem_slow_next(w.m, "jobs", 1, 2.5);
  world_run(&w, 1, 0);
  CHECK_MSG(!world_logged(&w, "slow or restarting"), "%s", world_log(&w));
  shoal__live_mem_slow_next(w.m, "jobs", 1, 8);
  world_run(&w, 1, 0);
  CHECK_LOGGED(&w, "reading the memory manager's jobs took 8.0 s (");
  CHECK_LOGGED(&w, "): the memory manager slow or restarting; no decision was taken meanwhile; slow reads since the "
               "last such line: 1");
  shoal__live_mem_slow_next(w.m, "jobs", 1, 4);
  world_run(&w, 1, 0);
  CHECK_EQ(count_of(world_log(&w), "slow or restarting"), 1);
  world_run(&w, 60, 0);
  shoal__live_mem_slow_next(w.m, "jobs", 1, 5);
  world_run(&w, 1, 0);
  CHECK_LOGGED(&w, "reading the memory manager's jobs took 5.0 s (");
  CHECK_LOGGED(&w, "slow reads since the last such line: 2");
  CHECK_EQ(count_of(world_log(&w), "slow or restarting"), 2);
  CHECK_EQ(world_completions(&w, a), 1);
  world_fini(&w);
}

/* status and metrics say what runs, what waits and why, and the last decision */
TEST(live_status_and_metrics) {
  world_t w;
  world_init(&w, 1, 2, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 2, 2, 2, 100, 1);
  long b = world_submit(&w, 1, 1, 1, 10, 1);
  world_run(&w, 4, 0);
  char buf[16384];
  CHECK_OK(shoal__live_ctl_status(w.L, buf, sizeof buf));
  char want[64];
  snprintf(want, sizeof want, "%-8ld ann", a);
  CHECK_CONTAINS(buf, want);
  CHECK_CONTAINS(buf, "running");
  CHECK_CONTAINS(buf, "h0:2");
  CHECK_CONTAINS(buf, "needs 1 GPU; 0 free of 2 usable");
  snprintf(want, sizeof want, "start %ld", a);
  CHECK_CONTAINS(buf, want);
  CHECK_OK(shoal__live_ctl_metrics(w.L, buf, sizeof buf));
  CHECK_CONTAINS(buf, "shoal_live_jobs{state=\"running\"} 1\n");
  CHECK_CONTAINS(buf, "shoal_live_jobs{state=\"waiting\"} 1\n");
  CHECK_CONTAINS(buf, "shoal_live_utilization 1.0000\n");
  CHECK_CONTAINS(buf, "# TYPE shoal_live_decision_seconds summary\n");
  CHECK_CONTAINS(buf, "shoal_live_decisions_total 1\n");
  (void)b;
  world_fini(&w);
}

/* a wrong policy (name or parameter) is refused before anything is written; its message says it once */
TEST(live_bad_policy_writes_no_journal) {
  world_t w;
  world_init(&w, 1, 1, "nosuch");
  CHECK(world_start(&w) != 0);
  struct stat st;
  CHECK_MSG(stat(w.journal, &st) != 0, "a journal was created");
  world_fini(&w);
  world_init(&w, 1, 1, "tiresias:nosuch=1");
  CHECK(world_start(&w) != 0);
  CHECK_MSG(stat(w.journal, &st) != 0, "a journal was created");
  const char *log = world_log(&w);
  CHECK_CONTAINS(log, "policy tiresias: unknown parameter 'nosuch'");
  CHECK_MSG(strstr(log, "policy tiresias: policy tiresias") == NULL, "said twice: %s", log);
  world_fini(&w);
}

/* --dry-run: decisions said, nothing changed: no action, no claim, no lease, no journal */
TEST(live_dry_run_changes_nothing) {
  world_t w;
  world_init(&w, 2, 1, "srtf");
  w.cfg.dry_run = 1;
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 2, 2, 2, 100, 1);
  world_run(&w, 3, 0);
  long b = world_submit(&w, 1, 1, 1, 4, 1);
  world_run(&w, 3, 0);
  CHECK_LOGGED(&w, "dry-run: would start job %ld on h0,h1", a);
  CHECK_LOGGED(&w, "dry-run: preempt job %ld", a);
  CHECK_LOGGED(&w, "dry-run: would start job %ld on", b);
  CHECK_EQ(shoal__live_mem_calls(w.m, "start"), 0);
  CHECK_EQ(shoal__live_mem_calls(w.m, "stop"), 0);
  CHECK_EQ(shoal__live_mem_calls(w.m, "claim"), 0);
  CHECK_EQ(shoal__live_mem_calls(w.m, "lease"), 0);
  CHECK_EQ(shoal__live_mem_calls(w.m, "hold"), 0);
  CHECK_EQ(world_runs(&w, a), 0);
  struct stat st;
  CHECK_MSG(stat(w.journal, &st) != 0, "a dry run wrote a journal");
  world_fini(&w);
}

/* the learned placer drives the controller as it drives the simulator: its network places every worker (no
 * job left to the fallback placer), every job runs once; a weights file it cannot read is refused up front */
TEST(live_marl_places_every_job) {
  world_t w;
  world_init(&w, 4, 2, "marl");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 4, 4, 4, 40, 1), b = world_submit(&w, 1, 1, 1, 10, 1);
  long c = world_submit(&w, 2, 2, 2, 20, 1), d = world_submit(&w, 1, 1, 1, 10, 1);
  world_run(&w, 200, 4);
  CHECK_EQ(w.rc, 0);
  long ids[] = {a, b, c, d};
  for (int i = 0; i < 4; i++) {
    CHECK_EQ(world_completions(&w, ids[i]), 1);
    CHECK_EQ(world_runs(&w, ids[i]), 1);
  }
  shoal__live_ctl_summary(w.L);
  CHECK_LOGGED(&w, "policy stats: holds=0 agents=1 jobs=4 decisions=8 fallbacks=0");
  world_fini(&w);
  world_init(&w, 2, 2, "marl:weights=/nonexistent/marl.weights");
  CHECK(world_start(&w) != 0);
  struct stat st;
  CHECK_MSG(stat(w.journal, &st) != 0, "a journal was created");
  CHECK_CONTAINS(world_log(&w), "/nonexistent/marl.weights");
  world_fini(&w);
}

/* The README's jobs (shoal train's mlp and cnn) with the speed table the README's controller reads: scheduled by
 * their own speeds; under the analytic model (a GPU zoo without them) they are unschedulable, said so. */
TEST(live_readme_models_with_the_testbed_table) {
  world_t w;
  world_init(&w, 2, 1, "tiresias:thresholds=100/800");
  w.cfg.throughputs = "experiments/live-slurm/throughputs.json";
  w.cfg.gpu = "testbed";
  CHECK_OK(world_start(&w));
  long a = world_submit_comment(&w, "shoal:gpus=2:min=1:max=4:model=mlp:work=200", 10, 1);
  long b = world_submit_comment(&w, "shoal:gpus=1:model=cnn:work=100", 5, 1);
  world_run(&w, 120, 2);
  CHECK_MSG(world_completions(&w, a) == 1 && world_completions(&w, b) == 1, "%s", world_log(&w));
  CHECK_MSG(!world_logged(&w, "unschedulable"), "%s", world_log(&w));
  world_fini(&w);
  world_init(&w, 1, 1, "fifo");
  CHECK_OK(world_start(&w));
  long c = world_submit_comment(&w, "shoal:gpus=1:model=mlp", 5, 1);
  world_run(&w, 5, 0);
  CHECK_LOGGED(&w, "job %ld: unschedulable: model 'mlp' is not in the analytic speed model (resnet50", c);
  world_fini(&w);
}

/* A job whose comment has ps=S is a parameter-server job for the policy; its start names its servers, beside its
 * workers (the live cluster runs servers only there: docs/design.md); the job runs once and completes. */
TEST(live_ps_job_starts_with_its_servers_beside_its_workers) {
  world_t w;
  world_init(&w, 3, 1, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit_comment(&w, "shoal:gpus=2:min=2:max=2:ps=3:model=resnet50:work=20", 20, 1);
  world_run(&w, 120, 1);
  CHECK_EQ(w.rc, 0);
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_runs(&w, a), 1);
  /* 2 workers on 2 nodes, 3 servers: 2 on the first node, 1 on the second */
  CHECK_LOGGED(&w, "start job %ld on h0,h1 (2 workers; servers: 2 on h0, 1 on h1)", a);
  world_fini(&w);
}

/* The comment's ps= and the manager's layout= read back as written; a ps job that asks to be elastic is refused
 * with the reason (it resumes only with the same workers and servers). */
TEST(live_params_ps_and_layout) {
  shoal_live_params_t p;
  char why[256], c[512];
  CHECK_OK(shoal__live_params_parse("shoal:gpus=2:ps=1:model=mlp:layout=h0/1/0,h1/1/1", &p, why, sizeof why));
  CHECK(p.gpus == 2 && p.min == 2 && p.max == 2 && p.ps == 1);
  CHECK_MSG(!strcmp(p.layout, "h0/1/0,h1/1/1"), "layout %s", p.layout);
  CHECK_OK(shoal__live_params_format(&p, c, sizeof c));
  CHECK_MSG(!strcmp(c, "shoal:gpus=2:min=2:max=2:ps=1:model=mlp:layout=h0/1/0,h1/1/1"), "comment %s", c);
  CHECK_EQ(shoal__live_params_parse("shoal:gpus=2:min=1:max=4:ps=1", &p, why, sizeof why), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(why, "a parameter-server job runs at its requested size only");
  CHECK_EQ(shoal__live_params_parse("shoal:gpus=2:ps=0", &p, why, sizeof why), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(why, "ps='0' is not a count");
}
