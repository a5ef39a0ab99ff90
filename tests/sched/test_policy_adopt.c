/* Jobs a live controller gives a policy that a simulation never does: one that already runs when the
 * policy first hears of it (the controller, restarted on its journal, gives a job an earlier controller
 * started its recorded placement, then calls arrive()), and one that ends while it waits (the user
 * cancelled it: finish() from WAIT). Every policy must take the first as started and forget the second,
 * and place the jobs behind them; the harness does what the controller does (policy.h). */
#include <stdlib.h>
#include <string.h>

#include "../runner.h"
#include "sched/model/place.h"
#include "sched/policy.h"
#include "sched/model/speed.h"

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

/* one policy on a fresh 2 x 8-GPU cluster, as a runner drives it */
typedef struct {
  const shoal_policy_ops_t *ops;
  shoal_cluster_t *c;
  shoal_sched_t s;
  timers_t tm;
  void *st;
} run_t;

static int setup(run_t *r, const shoal_policy_ops_t *ops, const shoal_speed_t *sp) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 2;
  cs.group[0].racks = 1;
  memset(r, 0, sizeof *r);
  r->ops = ops;
  if (shoal__cluster_create(&cs, &r->c) || shoal__sched_init(&r->s, r->c, sp, 16)) return -1;
  r->s.hooks.timer = on_timer;
  r->s.engine = &r->tm;
  r->s.nvcs = 1;
  r->s.seed = 1;
  r->s.events = SHOAL_EV_START;
  return ops->create(&r->s, NULL, &r->st);
}

static void teardown(run_t *r, shoal_job_t *const *jobs, int n) {
  r->ops->destroy(r->st);
  for (int i = 0; i < n; i++) free(jobs[i]->alloc.p);
  shoal__sched_fini(&r->s);
  shoal__cluster_destroy(r->c);
}

/* the events, then one decision, then what the runner does after it */
static int decide(run_t *r, unsigned events) {
  r->s.events |= events;
  int rc = r->ops->schedule(r->st, &r->s);
  r->s.events = 0;
  apply(&r->s);
  return rc;
}

static int arrive(run_t *r, shoal_job_t *j) {
  j->arrival = j->t_last = r->s.now;
  if (shoal__sched_add_active(&r->s, j)) return -1;
  if (r->ops->arrive) r->ops->arrive(r->st, &r->s, j);
  return decide(r, SHOAL_EV_ARRIVAL);
}

/* j ends now: its resources back (if any), then finish() and a decision */
static int end(run_t *r, shoal_job_t *j) {
  if (j->alloc.n && shoal_sched_assign(&r->s, j, NULL, 0)) return -1;
  j->state = SHOAL_JOB_DONE;
  j->finish = r->s.now;
  shoal__sched_remove_active(&r->s, j);
  if (r->ops->finish) r->ops->finish(r->st, &r->s, j);
  return decide(r, SHOAL_EV_FINISH);
}

TEST_T(policy_takes_an_adopted_running_job_as_started, 60) {
  shoal_speed_t *sp = NULL;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  for (int pi = 0; shoal__policy_at(pi); pi++) {
    run_t r;
    const char *name = shoal__policy_at(pi)->name;
    CHECK_MSG(setup(&r, shoal__policy_at(pi), sp) == 0, "%s: set-up: %s", name, shoal_last_error());
    shoal_job_t a, b;
    job_init(&a, 0, 16); /* the whole cluster */
    job_init(&b, 1, 8);  /* waits until a is done */
    /* a: started by an earlier controller, adopted on its recorded placement, then arrive() */
    CHECK_OK(shoal__sched_add_active(&r.s, &a));
    shoal_place_t pa[2] = {{0, 8, 0}, {1, 8, 0}};
    CHECK_OK(shoal_sched_assign(&r.s, &a, pa, 2));
    apply(&r.s);
    if (r.ops->arrive) r.ops->arrive(r.st, &r.s, &a);
    CHECK_MSG(decide(&r, SHOAL_EV_ARRIVAL) == 0, "%s: decision after the adoption: %s", name, shoal_last_error());
    CHECK_MSG(a.state == SHOAL_JOB_RUN && shoal__place_equal(a.alloc.p, a.alloc.n, pa, 2),
              "%s: the adopted job, alone on the cluster, did not keep its placement", name);
    r.s.now = 10;
    CHECK_MSG(arrive(&r, &b) == 0, "%s: decision at b's arrival: %s", name, shoal_last_error());
    /* a completes (unless the policy preempted it for b) */
    r.s.now = 100;
    if (a.state == SHOAL_JOB_RUN) {
      CHECK_MSG(end(&r, &a) == 0, "%s: decision after the adopted job finished: %s", name, shoal_last_error());
      CHECK_MSG(a.alloc.n == 0, "%s: the finished adopted job was placed again", name);
    }
    CHECK_MSG(run_until_started(r.ops, r.st, &r.s, &r.tm, &b) == 0, "%s: %s", name, shoal_last_error());
    CHECK_MSG(b.state == SHOAL_JOB_RUN, "%s: the job behind the adopted one never started", name);
    shoal_job_t *jobs[2] = {&a, &b};
    teardown(&r, jobs, 2);
  }
  shoal__speed_destroy(sp);
}

/* A job that ends while it waits (the user cancelled it before the policy started it: the live
 * controller reports it through finish() from WAIT): every policy forgets it and starts the others. */
TEST_T(policy_forgets_a_job_that_ends_while_waiting, 60) {
  shoal_speed_t *sp = NULL;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  for (int pi = 0; shoal__policy_at(pi); pi++) {
    run_t r;
    const char *name = shoal__policy_at(pi)->name;
    CHECK_MSG(setup(&r, shoal__policy_at(pi), sp) == 0, "%s: set-up: %s", name, shoal_last_error());
    shoal_job_t a, b, d;
    job_init(&a, 0, 16); /* the whole cluster */
    job_init(&b, 1, 8);  /* waits behind a; cancelled while it waits */
    job_init(&d, 2, 8);  /* waits too; starts once a is done */
    shoal_job_t *all[3] = {&a, &b, &d};
    for (int k = 0; k < 3; k++) {
      r.s.now = 10.0 * k;
      CHECK_MSG(arrive(&r, all[k]) == 0, "%s: decision at arrival %d: %s", name, k, shoal_last_error());
      CHECK_MSG(run_until_started(r.ops, r.st, &r.s, &r.tm, &a) == 0, "%s: %s", name, shoal_last_error());
    }
    /* b is cancelled while it waits (unless the policy started it: then it is not this case) */
    r.s.now = 50;
    int cancelled = b.state == SHOAL_JOB_WAIT;
    if (cancelled)
      CHECK_MSG(end(&r, &b) == 0, "%s: decision after the waiting job ended: %s", name, shoal_last_error());
    /* a (and d, if it runs) complete: d starts, b never again */
    r.s.now = 100;
    for (int k = 0; k < 3; k += 2)
      if (all[k]->state == SHOAL_JOB_RUN)
        CHECK_MSG(end(&r, all[k]) == 0, "%s: decision after job %d finished: %s", name, k, shoal_last_error());
    if (d.state == SHOAL_JOB_WAIT)
      CHECK_MSG(run_until_started(r.ops, r.st, &r.s, &r.tm, &d) == 0, "%s: %s", name, shoal_last_error());
    CHECK_MSG(d.state != SHOAL_JOB_WAIT, "%s: the job behind the cancelled one never started", name);
    CHECK_MSG(!cancelled || b.alloc.n == 0, "%s: the cancelled job was placed", name);
    teardown(&r, all, 3);
  }
  shoal__speed_destroy(sp);
}
