/* Surviving a lost rank in the training runtime: shrink, take over the newest state, admit newcomers.
 *
 * Why the state of the rank furthest ahead is consistent: in BSP a worker changes its parameters and
 * momentum only after the step's gradient allreduce completed, and that allreduce needed every worker's
 * gradient of that step, the lost one's included. So a survivor that completed step t holds exactly the
 * BSP state after t, and no survivor can be more than one step behind it (it could not have completed
 * step t's allreduce without contributing). Rolling forward to the furthest rank loses no completed work
 * and never mixes steps. */
#include "train/elastic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

int shoal__elastic_recoverable(int status) {
  return status == SHOAL_ERR_PEER_CLOSED || status == SHOAL_ERR_ABORTED || status == SHOAL_ERR_TIMEOUT ||
         status == SHOAL_ERR_MISMATCH || status == SHOAL_ERR_PROTOCOL || status == SHOAL_ERR_CONNECT;
}

static int ahead(const int64_t *a, const int64_t *b) { /* {valid, iter, epoch, off}: a strictly ahead of b */
  if (a[0] != b[0]) return a[0] > b[0];
  for (int k = 1; k < 4; k++)
    if (a[k] != b[k]) return a[k] > b[k];
  return 0;
}

int shoal__elastic_sync_state(shoal_comm_t *c, int valid, shoal__train_pos_t *pos, float *params, float *mom,
                              size_t n) {
  int size = shoal_comm_size(c), me = shoal_comm_rank(c), rc;
  int64_t *all = calloc((size_t)size * 4, sizeof *all);
  if (!all) return shoal__seterr(SHOAL_ERR_NOMEM, "train: out of memory");
  int64_t *mine = all + 4 * me;
  mine[0] = valid ? 1 : 0;
  mine[1] = valid ? pos->iter : -1;
  mine[2] = valid ? pos->epoch : -1;
  mine[3] = valid ? (int64_t)pos->off : -1;
  if ((rc = shoal_allgather(c, SHOAL_IN_PLACE, all, 4, SHOAL_INT64))) {
    free(all);
    return shoal__seterr(rc, "train: exchange of the workers' positions: %s", shoal_comm_errmsg(c));
  }
  int src = 0, same = 1;
  for (int r = 1; r < size; r++) {
    if (ahead(all + 4 * r, all + 4 * src)) src = r;
    if (memcmp(all + 4 * r, all, 4 * sizeof *all)) same = 0;
  }
  int64_t best[4];
  memcpy(best, all + 4 * src, sizeof best);
  free(all);
  if (!best[0]) return shoal__seterr(SHOAL_ERR_INVALID, "train: no worker has a state to continue from");
  if (same) return 0; /* everybody at the same point with the same bytes */
  double t = pos->train_s;
  if ((rc = shoal_broadcast(c, &t, 1, SHOAL_FLOAT64, src)) ||
      (rc = shoal_broadcast(c, params, n, SHOAL_FLOAT32, src)) || (rc = shoal_broadcast(c, mom, n, SHOAL_FLOAT32, src)))
    return shoal__seterr(rc, "train: taking over the state of rank %d: %s", src, shoal_comm_errmsg(c));
  if (!valid) pos->train_s = t;
  pos->iter = best[1];
  pos->epoch = best[2];
  pos->off = best[3];
  SHOAL_INFO("TRAIN", "rank %d: state of rank %d taken over: iteration %lld, epoch %lld, sample %lld", me, src,
             (long long)best[1], (long long)best[2], (long long)best[3]);
  return 0;
}

static void replace(shoal__elastic_t *el, shoal_comm_t **comm, shoal_comm_t *nc) {
  if (el->owned && el->owned == *comm) shoal_comm_destroy(*comm);
  *comm = el->owned = nc;
}

int shoal__elastic_shrink(shoal__elastic_t *el, shoal_comm_t **comm) {
  shoal_comm_t *nc = NULL;
  int rc = shoal_comm_shrink(*comm, &nc);
  if (rc) return rc;
  replace(el, comm, nc);
  el->shrinks++;
  return 0;
}

int shoal__elastic_grow(shoal__elastic_t *el, shoal_comm_t **comm, int *grown) {
  shoal_comm_t *nc = NULL;
  int rc = shoal_comm_grow(*comm, &nc);
  *grown = 0;
  if (rc == SHOAL_ERR_CONNECT) { /* the newcomers could not be admitted; the workers are as they were */
    SHOAL_WARN("TRAIN", "%s", shoal_last_error());
    return 0;
  }
  if (rc || !nc) return rc;
  replace(el, comm, nc);
  el->grows++;
  *grown = 1;
  return 0;
}

void shoal__elastic_free(shoal__elastic_t *el) {
  if (el->owned) shoal_comm_destroy(el->owned);
  el->owned = NULL;
}
