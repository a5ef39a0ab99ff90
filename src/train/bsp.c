/* BSP: gradients averaged every step with shoal_allreduce(AVG) (the
 * communicator's automatic algorithm choice: shared memory on one host,
 * hierarchical across hosts), one allreduce per bucket. With overlap, a
 * bucket reported ready goes to the communication thread at once while the
 * caller runs the backward of the earlier layers; buckets are reduced in
 * index order, so every rank issues the same sequence of collectives even
 * if its readiness order differs. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "train/sync.h"

typedef struct bsp {
  int overlap;
  int next;          /* next bucket to post */
  unsigned char *ready;
} bsp_t;

static int bsp_create(shoal_sync_t *s, shoal__cfg_t *cfg) {
  long ov;
  int rc = shoal__cfg_int(cfg, "overlap", 1, 0, 1, &ov);
  if (rc) return rc;
  bsp_t *b = calloc(1, sizeof *b);
  if (!b) return shoal__seterr(SHOAL_ERR_NOMEM, "sync bsp: out of memory");
  b->overlap = (int)ov;
  s->impl = b;
  s->flags = SHOAL_SYNC_F_GRADS;
  return 0;
}

static void bsp_destroy(shoal_sync_t *s) {
  bsp_t *b = s->impl;
  free(b->ready);
  free(b);
}

static int bsp_setup(shoal_sync_t *s) {
  bsp_t *b = s->impl;
  b->ready = calloc((size_t)s->nb, 1);
  return b->ready ? 0 : shoal__seterr(SHOAL_ERR_NOMEM, "sync bsp: out of memory");
}

static int allreduce_job(shoal_sync_t *s, int i) {
  int rc = shoal_allreduce(s->workers, SHOAL_IN_PLACE, s->b[i].g, s->b[i].n, SHOAL_FLOAT32, SHOAL_AVG);
  if (rc)
    return shoal__seterr(rc, "sync bsp step %ld: allreduce of bucket %d (%zu floats): %s", s->step, i, s->b[i].n,
                         shoal_comm_errmsg(s->workers));
  return 0;
}

static int bsp_begin(shoal_sync_t *s) {
  bsp_t *b = s->impl;
  b->next = 0;
  for (int i = 0; i < s->nb; i++) b->ready[i] = 0;
  return 0;
}

static int post_ready(shoal_sync_t *s, int all) {
  bsp_t *b = s->impl;
  while (b->next < s->nb && (all || b->ready[b->next])) {
    int i = b->next++;
    s->payload += (double)s->b[i].n * sizeof(float);
    int rc = shoal__sync_post(s, allreduce_job, i, b->overlap);
    if (rc) return rc;
  }
  return 0;
}

static int bsp_bucket_ready(shoal_sync_t *s, int i) {
  bsp_t *b = s->impl;
  if (b->ready[i]) return shoal__seterr(SHOAL_ERR_INVALID, "sync bsp step %ld: bucket %d reported twice", s->step, i);
  b->ready[i] = 1;
  return b->overlap ? post_ready(s, 0) : 0;
}

static int bsp_finish(shoal_sync_t *s) {
  int rc = post_ready(s, 1);
  int rc2 = shoal__sync_drain(s);
  return rc ? rc : rc2;
}

/* Every worker applied the same averaged gradients: the models differ only if
 * they started apart; worker 0's is the final one. */
static int bsp_final(shoal_sync_t *s) { return shoal__sync_broadcast_params(s, "final model"); }

const shoal__strategy_t shoal__strategy_bsp = {
    .name = "bsp",
    .keys = "overlap",
    .create = bsp_create,
    .destroy = bsp_destroy,
    .setup = bsp_setup,
    .begin = bsp_begin,
    .bucket_ready = bsp_bucket_ready,
    .finish = bsp_finish,
    .final = bsp_final,
};
