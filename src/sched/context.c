/* The scheduler context: what a policy may call (policy.h). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/gpu_slots.h"
#include "sched/model/place.h"
#include "sched/policy.h"

int shoal__sched_init(shoal_sched_t *s, shoal_cluster_t *c, const shoal_speed_t *speed, int max_active_hint) {
  memset(s, 0, sizeof *s);
  s->cluster = c;
  s->speed = speed;
  s->active_cap = max_active_hint > 16 ? max_active_hint : 16;
  s->active = malloc((size_t)s->active_cap * sizeof *s->active);
  if (!s->active) return shoal__seterr(SHOAL_ERR_NOMEM, "scheduler: out of memory");
  s->restart_cost = 30;
  return 0;
}

void shoal__sched_fini(shoal_sched_t *s) {
  shoal__slots_free(s->slots);
  s->slots = NULL;
  free(s->memo);
  s->memo = NULL;
  free(s->active);
  s->active = NULL;
  s->nactive = 0;
}

int shoal__sched_add_active(shoal_sched_t *s, shoal_job_t *j) {
  if (s->nactive == s->active_cap) {
    int nc = s->active_cap * 2;
    shoal_job_t **a = realloc(s->active, (size_t)nc * sizeof *a);
    if (!a) return shoal__seterr(SHOAL_ERR_NOMEM, "scheduler: out of memory for %d active jobs", nc);
    s->active = a;
    s->active_cap = nc;
  }
  j->active_index = s->nactive;
  s->active[s->nactive++] = j;
  return 0;
}

void shoal__sched_remove_active(shoal_sched_t *s, shoal_job_t *j) {
  int i = j->active_index;
  if (i < 0 || i >= s->nactive || s->active[i] != j) return;
  /* O(1): the last job fills the hole, so the array is in no particular
   * order (policy.h); a shift kept arrival order at O(active) per completion,
   * most of an overloaded run's time */
  shoal_job_t *last = s->active[--s->nactive];
  s->active[i] = last;
  last->active_index = i;
  j->active_index = -1;
}

static void give_all(shoal_cluster_t *c, const shoal_job_t *j, const shoal_place_t *p, int n) {
  for (int i = 0; i < n; i++) {
    shoal_res_t r = shoal_job_demand(j, p[i].workers, p[i].ps);
    shoal__cluster_give(c, p[i].machine, &r);
  }
}

static int take_all(shoal_cluster_t *c, const shoal_job_t *j, const shoal_place_t *p, int n) {
  for (int i = 0; i < n; i++) {
    shoal_res_t r = shoal_job_demand(j, p[i].workers, p[i].ps);
    int rc = shoal__cluster_take(c, p[i].machine, &r);
    if (rc) {
      give_all(c, j, p, i);
      return rc;
    }
  }
  return 0;
}

static int assign(shoal_sched_t *s, shoal_job_t *j, const shoal_place_t *p, int n, const uint8_t *want);

int shoal_sched_assign(shoal_sched_t *s, shoal_job_t *j, const shoal_place_t *p, int n) { return assign(s, j, p, n, NULL); }

int shoal_sched_assign_sockets(shoal_sched_t *s, shoal_job_t *j, const shoal_place_t *p, int n, const uint8_t *want) {
  for (int i = 0; i < n; i++) {
    if (i > 0 && p[i].machine <= p[i - 1].machine)
      return shoal__seterr(SHOAL_ERR_INVALID, "assign: job %d: a placement by socket must list each machine once, in "
                           "increasing order", j->id);
    int sum = 0;
    for (int k = 0; k < SHOAL_MAX_SOCKETS; k++) sum += want[(size_t)i * SHOAL_MAX_SOCKETS + k];
    if (p[i].machine >= 0 && p[i].machine < s->cluster->nmachines && sum > p[i].workers)
      return shoal__seterr(SHOAL_ERR_INVALID, "assign: job %d: %d workers asked by socket on machine %d, which gets %d", j->id,
                           sum, p[i].machine, p[i].workers);
  }
  if (!shoal__sched_slots(s)) return shoal__seterr(SHOAL_ERR_NOMEM, "assign: out of memory for the slot map");
  return assign(s, j, p, n, want);
}

shoal__slots_t *shoal__sched_slots(shoal_sched_t *s) {
  if (s->slots) return s->slots;
  if (shoal__slots_create(s->cluster, &s->slots)) return NULL;
  /* the jobs that already hold machines: their workers on the lowest free slots */
  static const shoal_alloc_t none = {0, 0, 0, NULL, 0};
  for (int i = 0; i < s->nactive; i++)
    if (s->active[i]->alloc.n)
      shoal__slots_assign(s->slots, s->active[i], &none, s->active[i]->alloc.p, s->active[i]->alloc.n, NULL);
  return s->slots;
}

void shoal__sched_release(shoal_sched_t *s, shoal_job_t *j) {
  if (s->slots) shoal__slots_release(s->slots, j, &j->alloc);
}

static int assign(shoal_sched_t *s, shoal_job_t *j, const shoal_place_t *p, int n, const uint8_t *want) {
  if (j->state != SHOAL_JOB_WAIT && j->state != SHOAL_JOB_RUN && j->state != SHOAL_JOB_RESTART)
    return shoal__seterr(SHOAL_ERR_INVALID, "assign: job %d is not active", j->id);
  if (n < 0 || (n > 0 && !p)) return shoal__seterr(SHOAL_ERR_INVALID, "assign: job %d: bad placement", j->id);
  shoal_place_t stackbuf[16], *np = n <= 16 ? stackbuf : malloc((size_t)n * sizeof *np);
  if (!np) return shoal__seterr(SHOAL_ERR_NOMEM, "assign: out of memory");
  int rc = 0;
  for (int i = 0; i < n; i++) {
    if (p[i].machine < 0 || p[i].machine >= s->cluster->nmachines || p[i].workers < 0 || p[i].ps < 0) {
      rc = shoal__seterr(SHOAL_ERR_INVALID, "assign: job %d: bad entry (machine %d, %d workers, %d PSs)", j->id,
                         p[i].machine, p[i].workers, p[i].ps);
      goto done;
    }
    np[i] = p[i];
  }
  n = shoal__place_normalize(np, n);
  if (s->cluster->ps_with_workers) n = shoal__place_ps_with_workers(np, n);
  int workers = 0, ps = 0;
  for (int i = 0; i < n; i++) {
    workers += np[i].workers;
    ps += np[i].ps;
  }
  if (n > 0 && workers == 0) {
    rc = shoal__seterr(SHOAL_ERR_INVALID, "assign: job %d: placement without workers", j->id);
    goto done;
  }
  if (shoal__place_equal(np, n, j->alloc.p, j->alloc.n)) goto done;
  give_all(s->cluster, j, j->alloc.p, j->alloc.n);
  rc = take_all(s->cluster, j, np, n);
  if (rc) {
    int rc2 = take_all(s->cluster, j, j->alloc.p, j->alloc.n);
    if (rc2) rc = shoal__seterr(SHOAL_ERR_INTERNAL, "assign: job %d: cannot restore its allocation", j->id);
    goto done;
  }
  if (s->hooks.touch) s->hooks.touch(s->engine, j);
  if (s->slots) shoal__slots_assign(s->slots, j, &j->alloc, np, n, want);
  /* the job's placement array is reused when it has room (a preempted and
   * restarted job does not allocate again) */
  if (n > 0 && (!j->alloc.p || n > j->alloc.cap)) {
    shoal_place_t *mem = malloc((size_t)n * sizeof *mem);
    if (!mem) {
      give_all(s->cluster, j, np, n);
      take_all(s->cluster, j, j->alloc.p, j->alloc.n);
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "assign: out of memory");
      goto done;
    }
    free(j->alloc.p);
    j->alloc.p = mem;
    j->alloc.cap = n;
  }
  if (n > 0) memcpy(j->alloc.p, np, (size_t)n * sizeof *np);
  j->alloc.n = n;
  j->alloc.workers = workers;
  j->alloc.ps = ps;
done:
  if (np != stackbuf) free(np);
  return rc;
}

int shoal_sched_timer(shoal_sched_t *s, double at, int64_t tag) {
  if (!s->hooks.timer) return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "this runner has no timers");
  if (!(at >= s->now)) at = s->now;
  return s->hooks.timer(s->engine, at, tag);
}

shoal_shape_t shoal__shape_of(const shoal_cluster_t *c, const shoal_alloc_t *a) {
  shoal_shape_t sh = {0, 0, 0, 0, 0, 0};
  int last_rack = -1, min_local = 1 << 30;
  for (int i = 0; i < a->n; i++) {
    const shoal_place_t *p = &a->p[i];
    sh.workers += p->workers;
    sh.ps += p->ps;
    sh.machines++;
    int r = c->m[p->machine].rack;
    if (r != last_rack) sh.racks++; /* entries are sorted by machine and racks are contiguous */
    last_rack = r;
    if (p->workers > 0 && p->ps < min_local) min_local = p->ps;
  }
  sh.min_local_ps = sh.workers ? min_local : 0;
  return sh;
}

shoal_shape_t shoal__shape_consolidated(const shoal_cluster_t *c, int workers, int ps) {
  shoal_shape_t sh = {workers, ps, 1, 1, ps, 0};
  int g = c->max_gpus_per_machine > 0 ? c->max_gpus_per_machine : 1;
  sh.machines = workers <= g ? 1 : (workers + g - 1) / g;
  int per_rack = c->racks[0].count > 0 ? c->racks[0].count : 1;
  sh.racks = (sh.machines + per_rack - 1) / per_rack;
  sh.min_local_ps = sh.machines == 1 ? ps : ps / sh.machines;
  return sh;
}

double shoal_sched_rate(const shoal_sched_t *s, const shoal_job_t *j, const shoal_place_t *p, int n) {
  shoal_alloc_t a = {n, 0, 0, (shoal_place_t *)p, 0};
  shoal_shape_t sh = shoal__shape_of(s->cluster, &a);
  return s->speed->rate(s->speed, s->cluster, j, &sh);
}

/* A direct-mapped memo of consolidated rates keyed by (model, architecture,
 * workers, PSs): policies ask for the same few sizes of the same few models
 * millions of times (Optimus's marginal gains, elastic's estimates). */
#define MEMO_SLOTS 4096
struct shoal__rate_memo {
  uint64_t key[MEMO_SLOTS];
  double rate[MEMO_SLOTS];
};

double shoal_sched_rate_consolidated(const shoal_sched_t *s, const shoal_job_t *j, int workers, int ps) {
  shoal_sched_t *ms = (shoal_sched_t *)s; /* the memo is a cache: logically const */
  uint64_t key = 0;
  int cacheable = workers >= 0 && workers < (1 << 24) && ps >= 0 && ps < (1 << 24) && j->model >= 0 && j->model < 0x7fff;
  if (cacheable) {
    /* +1: key 0 marks an empty slot */
    key = ((uint64_t)(j->model & 0x7fff) << 49 | (uint64_t)(j->arch & 1) << 48 | (uint64_t)workers << 24 | (uint64_t)ps) + 1;
    if (!ms->memo) ms->memo = calloc(1, sizeof *ms->memo);
    if (ms->memo) {
      uint64_t h = key * 0x9E3779B97F4A7C15ull;
      int slot = (int)(h >> 52); /* 12 bits */
      if (ms->memo->key[slot] == key) return ms->memo->rate[slot];
      shoal_shape_t sh = shoal__shape_consolidated(s->cluster, workers, ps);
      double r = s->speed->rate(s->speed, s->cluster, j, &sh);
      ms->memo->key[slot] = key;
      ms->memo->rate[slot] = r;
      return r;
    }
  }
  shoal_shape_t sh = shoal__shape_consolidated(s->cluster, workers, ps);
  return s->speed->rate(s->speed, s->cluster, j, &sh);
}

double shoal_sched_work_done(const shoal_sched_t *s, const shoal_job_t *j) {
  return j->work - shoal_job_remaining(j, s->now);
}

double shoal_sched_held_s(const shoal_sched_t *s, const shoal_job_t *j) {
  double h = j->run_s + j->restart_s;
  if ((j->state == SHOAL_JOB_RUN || j->state == SHOAL_JOB_RESTART) && s->now > j->t_last) h += s->now - j->t_last;
  return h;
}
