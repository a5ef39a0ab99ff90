/* A job that already runs when the policy first hears of it: the live
 * controller, restarted on its journal, gives a job an earlier controller
 * started its recorded placement and then calls arrive() (policy.h). Every
 * policy must take it as started, let it finish, and place the jobs that
 * waited behind it, as the controller does it: assign outside a decision,
 * arrive, schedule; the finish gives the resources back before finish(). */
#include <stdlib.h>
#include <string.h>

#include "../runner.h"
#include "sched/place.h"
#include "sched/policy.h"
#include "sched/speed.h"

#define MAX_TIMERS 64

typedef struct {
  double at[MAX_TIMERS];
  int64_t tag[MAX_TIMERS];
  int n;
} timers_t;

static int on_timer(void *engine, double at, int64_t tag) {
  timers_t *t = engine;
  if (t->n == MAX_TIMERS) return -1;
  t->at[t->n] = at;
  t->tag[t->n++] = tag;
  return 0;
}

/* what a runner does after a decision: a placed job runs, an emptied one waits */
static void apply(shoal_sched_t *s) {
  for (int i = 0; i < s->nactive; i++) {
    shoal_job_t *j = s->active[i];
    if (j->alloc.n > 0 && j->state == SHOAL_JOB_WAIT) {
      j->state = SHOAL_JOB_RUN;
      j->rate = shoal_sched_rate(s, j, j->alloc.p, j->alloc.n);
      if (j->first_start < 0) j->first_start = s->now;
    } else if (j->alloc.n == 0 && j->state == SHOAL_JOB_RUN) {
      j->state = SHOAL_JOB_WAIT;
      j->rate = 0;
    }
  }
}

/* fire the due timers (earliest first) and decide, until job b runs or nothing is due */
static int run_until_started(const shoal_policy_ops_t *ops, void *st, shoal_sched_t *s, timers_t *tm, shoal_job_t *b) {
  for (int round = 0; round < 200 && b->state != SHOAL_JOB_RUN; round++) {
    if (tm->n == 0) break;
    int k = 0;
    for (int i = 1; i < tm->n; i++)
      if (tm->at[i] < tm->at[k]) k = i;
    double at = tm->at[k];
    int64_t tag = tm->tag[k];
    tm->at[k] = tm->at[--tm->n];
    tm->tag[k] = tm->tag[tm->n];
    if (at > s->now) s->now = at;
    if (ops->timer) ops->timer(st, s, tag);
    s->events |= SHOAL_EV_TIMER;
    int rc = ops->schedule(st, s);
    s->events = 0;
    if (rc) return rc;
    apply(s);
  }
  return 0;
}

static void job_init(shoal_job_t *j, int id, int gpus) {
  memset(j, 0, sizeof *j);
  j->id = id;
  j->gpus = j->max_workers = gpus;
  j->min_workers = 1;
  j->arch = SHOAL_ARCH_ALLREDUCE;
  j->sync = 1;
  j->work = 1e6;
  j->duration = 3600;
  j->worker_demand.gpus = 1;
  j->first_start = j->finish = -1;
  j->active_index = -1;
  j->state = SHOAL_JOB_WAIT;
}

TEST_T(policy_takes_an_adopted_running_job_as_started, 60) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 2;
  cs.group[0].racks = 1;
  shoal_speed_t *sp = NULL;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  for (int pi = 0; shoal__policy_at(pi); pi++) {
    const shoal_policy_ops_t *ops = shoal__policy_at(pi);
    shoal_cluster_t *c = NULL;
    CHECK_OK(shoal__cluster_create(&cs, &c));
    shoal_sched_t s;
    CHECK_OK(shoal__sched_init(&s, c, sp, 16));
    timers_t tm = {.n = 0};
    s.hooks.timer = on_timer;
    s.engine = &tm;
    s.nvcs = 1;
    s.seed = 1;
    s.events = SHOAL_EV_START;
    void *st = NULL;
    CHECK_MSG(ops->create(&s, NULL, &st) == 0, "%s: create: %s", ops->name, shoal_last_error());
    shoal_job_t a, b;
    job_init(&a, 0, 16); /* the whole cluster */
    job_init(&b, 1, 8);  /* waits until a is done */
    /* a: started by an earlier controller, adopted on its recorded placement */
    CHECK_OK(shoal__sched_add_active(&s, &a));
    shoal_place_t pa[2] = {{0, 8, 0}, {1, 8, 0}};
    CHECK_OK(shoal_sched_assign(&s, &a, pa, 2));
    apply(&s);
    if (ops->arrive) ops->arrive(st, &s, &a);
    s.events |= SHOAL_EV_ARRIVAL;
    CHECK_MSG(ops->schedule(st, &s) == 0, "%s: decision after the adoption: %s", ops->name, shoal_last_error());
    s.events = 0;
    apply(&s);
    CHECK_MSG(a.state == SHOAL_JOB_RUN && shoal__place_equal(a.alloc.p, a.alloc.n, pa, 2),
              "%s: the adopted job, alone on the cluster, did not keep its placement", ops->name);
    s.now = 10;
    CHECK_OK(shoal__sched_add_active(&s, &b));
    b.arrival = 10;
    b.t_last = 10;
    if (ops->arrive) ops->arrive(st, &s, &b);
    s.events |= SHOAL_EV_ARRIVAL;
    CHECK_MSG(ops->schedule(st, &s) == 0, "%s: decision at b's arrival: %s", ops->name, shoal_last_error());
    s.events = 0;
    apply(&s);
    /* a completes (unless the policy preempted it for b) */
    s.now = 100;
    if (a.state == SHOAL_JOB_RUN) {
      CHECK_OK(shoal_sched_assign(&s, &a, NULL, 0));
      a.state = SHOAL_JOB_DONE;
      a.finish = s.now;
      shoal__sched_remove_active(&s, &a);
      if (ops->finish) ops->finish(st, &s, &a);
      s.events |= SHOAL_EV_FINISH;
      CHECK_MSG(ops->schedule(st, &s) == 0, "%s: decision after the adopted job finished: %s", ops->name,
                shoal_last_error());
      s.events = 0;
      apply(&s);
      CHECK_MSG(a.alloc.n == 0, "%s: the finished adopted job was placed again", ops->name);
    }
    CHECK_MSG(run_until_started(ops, st, &s, &tm, &b) == 0, "%s: %s", ops->name, shoal_last_error());
    CHECK_MSG(b.state == SHOAL_JOB_RUN, "%s: the job behind the adopted one never started", ops->name);
    ops->destroy(st);
    free(a.alloc.p);
    free(b.alloc.p);
    shoal__sched_fini(&s);
    shoal__cluster_destroy(c);
  }
  shoal__speed_destroy(sp);
}

/* A job that ends while it waits (the user cancelled it before the policy started it: the live
 * controller reports it through finish() from WAIT): every policy forgets it and starts the others. */
TEST_T(policy_forgets_a_job_that_ends_while_waiting, 60) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 2;
  cs.group[0].racks = 1;
  shoal_speed_t *sp = NULL;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  for (int pi = 0; shoal__policy_at(pi); pi++) {
    const shoal_policy_ops_t *ops = shoal__policy_at(pi);
    shoal_cluster_t *c = NULL;
    CHECK_OK(shoal__cluster_create(&cs, &c));
    shoal_sched_t s;
    CHECK_OK(shoal__sched_init(&s, c, sp, 16));
    timers_t tm = {.n = 0};
    s.hooks.timer = on_timer;
    s.engine = &tm;
    s.nvcs = 1;
    s.seed = 1;
    s.events = SHOAL_EV_START;
    void *st = NULL;
    CHECK_MSG(ops->create(&s, NULL, &st) == 0, "%s: create: %s", ops->name, shoal_last_error());
    shoal_job_t a, b, d;
    job_init(&a, 0, 16); /* the whole cluster */
    job_init(&b, 1, 8);  /* waits behind a; cancelled while it waits */
    job_init(&d, 2, 8);  /* waits too; starts once a is done */
    shoal_job_t *all[3] = {&a, &b, &d};
    for (int k = 0; k < 3; k++) {
      s.now = 10.0 * k;
      all[k]->arrival = all[k]->t_last = s.now;
      CHECK_OK(shoal__sched_add_active(&s, all[k]));
      if (ops->arrive) ops->arrive(st, &s, all[k]);
      s.events |= SHOAL_EV_ARRIVAL;
      CHECK_MSG(ops->schedule(st, &s) == 0, "%s: decision at arrival %d: %s", ops->name, k, shoal_last_error());
      s.events = 0;
      apply(&s);
      CHECK_MSG(run_until_started(ops, st, &s, &tm, &a) == 0, "%s: %s", ops->name, shoal_last_error());
    }
    /* b is cancelled while it waits (unless the policy started it: then it is not this case) */
    s.now = 50;
    int cancelled = b.state == SHOAL_JOB_WAIT;
    if (cancelled) {
      b.state = SHOAL_JOB_DONE;
      b.finish = s.now;
      shoal__sched_remove_active(&s, &b);
      if (ops->finish) ops->finish(st, &s, &b);
      s.events |= SHOAL_EV_FINISH;
      CHECK_MSG(ops->schedule(st, &s) == 0, "%s: decision after the waiting job ended: %s", ops->name,
                shoal_last_error());
      s.events = 0;
      apply(&s);
    }
    /* a completes: d starts, b never again */
    s.now = 100;
    for (int k = 0; k < 3; k += 2)
      if (all[k]->state == SHOAL_JOB_RUN) {
        CHECK_OK(shoal_sched_assign(&s, all[k], NULL, 0));
        all[k]->state = SHOAL_JOB_DONE;
        all[k]->finish = s.now;
        shoal__sched_remove_active(&s, all[k]);
        if (ops->finish) ops->finish(st, &s, all[k]);
        s.events |= SHOAL_EV_FINISH;
        CHECK_MSG(ops->schedule(st, &s) == 0, "%s: decision after job %d finished: %s", ops->name, k,
                  shoal_last_error());
        s.events = 0;
        apply(&s);
      }
    if (d.state == SHOAL_JOB_WAIT)
      CHECK_MSG(run_until_started(ops, st, &s, &tm, &d) == 0, "%s: %s", ops->name, shoal_last_error());
    CHECK_MSG(d.state != SHOAL_JOB_WAIT, "%s: the job behind the cancelled one never started", ops->name);
    CHECK_MSG(!cancelled || b.alloc.n == 0, "%s: the cancelled job was placed", ops->name);
    ops->destroy(st);
    free(a.alloc.p);
    free(b.alloc.p);
    free(d.alloc.p);
    shoal__sched_fini(&s);
    shoal__cluster_destroy(c);
  }
  shoal__speed_destroy(sp);
}
