/* FIFO / YARN-CS (spec §5.2). Queue by arrival (ties: id). Default YARN-CS:
 * walk the queue in order and start every job that fits now (backfill: skip
 * those that do not), consolidated placement, never preempt.
 * Parameter strict=1: FIFO-strict, stop at the first job that does not fit
 * (head-of-line blocking).
 * Cost per decision: O(jobs scanned); the scan stops as soon as no waiting
 * size can fit in the free GPUs (sizes are counted in a histogram). */
#include <stdlib.h>

#include "core/error.h"
#include "sched/policy_util.h"

#define NSIZE 32 /* histogram buckets: sizes 1..NSIZE-1 exact, >= NSIZE-1 together */

typedef struct {
  int strict, oom;
  shoal_job_t **wait; /* waiting jobs in arrival order */
  int nwait, cap;
  long size_count[NSIZE];
  shoal_place_t *buf;
} fifo_t;

static int size_bucket(int g) { return g < NSIZE - 1 ? g : NSIZE - 1; }

static int fifo_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"strict", NULL};
  int rc = shoal__param_check("fifo", params, keys);
  if (rc) return rc;
  long strict;
  if ((rc = shoal__param_long("fifo", params, "strict", 0, 0, 1, &strict))) return rc;
  fifo_t *f = calloc(1, sizeof *f);
  if (!f || !(f->buf = malloc((size_t)s->cluster->nmachines * sizeof *f->buf))) {
    free(f);
    return shoal__seterr(SHOAL_ERR_NOMEM, "fifo: out of memory");
  }
  f->strict = (int)strict;
  *state = f;
  return 0;
}

static void fifo_destroy(void *state) {
  fifo_t *f = state;
  if (!f) return;
  free(f->wait);
  free(f->buf);
  free(f);
}

static void fifo_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  fifo_t *f = state;
  if (f->nwait == f->cap) {
    int nc = f->cap ? f->cap * 2 : 256;
    shoal_job_t **w = realloc(f->wait, (size_t)nc * sizeof *w);
    if (!w) {
      f->oom = 1; /* reported by schedule() */
      return;
    }
    f->wait = w;
    f->cap = nc;
  }
  f->wait[f->nwait++] = j;
  f->size_count[size_bucket(j->gpus)]++;
}

static int fifo_schedule(void *state, shoal_sched_t *s) {
  fifo_t *f = state;
  if (f->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "fifo: out of memory for the queue");
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  int min_size = 1 << 30;
  for (int b = 1; b < NSIZE; b++)
    if (f->size_count[b]) {
      min_size = b;
      break;
    }
  if (min_size > s->cluster->gpus_free) return 0;
  int k = 0, i = 0, stop = 0;
  for (; i < f->nwait; i++) {
    shoal_job_t *j = f->wait[i];
    if (!stop && s->cluster->gpus_free >= j->gpus) {
      int rc = shoal__start_requested(s, j, f->buf);
      if (rc < 0) return rc;
      if (rc == 1) {
        f->size_count[size_bucket(j->gpus)]--;
        if (s->cluster->gpus_free < min_size) {
          i++;
          break;
        }
        continue;
      }
    }
    if (f->strict) stop = 1;
    f->wait[k++] = j;
    if (stop || s->cluster->gpus_free < min_size) {
      /* nothing more can start: keep the rest as is */
      i++;
      break;
    }
  }
  for (; i < f->nwait; i++) f->wait[k++] = f->wait[i];
  f->nwait = k;
  return 0;
}

const shoal_policy_ops_t shoal__policy_fifo = {
    "fifo",
    "FIFO / YARN-CS: arrival order, start whatever fits (backfill), consolidated, no preemption",
    "strict=0: 1 = stop at the first job that does not fit (head-of-line blocking)",
    fifo_create,
    fifo_destroy,
    fifo_arrive,
    NULL,
    NULL,
    fifo_schedule,
    NULL,
};
