/* Training on after a lost rank (`shoal train --on-failure shrink`, docs/training.md "Surviving a lost
 * rank"): the workers shrink their communicator, take the newest consistent state from the worker that is
 * furthest ahead, and re-shard the data; restarted processes enter at a grow and receive the same state.
 * runtime.c calls these at its failure points and between iterations. */
#ifndef SHOAL_TRAIN_ELASTIC_H
#define SHOAL_TRAIN_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/comm.h"

/* Where a run is: after `iter` completed iterations, the next one is in epoch `epoch` starting at sample
 * `off` of that epoch's order. */
typedef struct shoal__train_pos {
  int64_t iter, epoch, off;
  double train_s; /* training time so far (a newcomer takes it over) */
} shoal__train_pos_t;

typedef struct shoal__elastic {
  int on;                /* --on-failure shrink */
  shoal_comm_t *owned;   /* the newest communicator, when recovery made it (destroyed at the end) */
  int shrinks, grows;    /* done so far */
  double recover_s;      /* time spent shrinking and taking over the state */
} shoal__elastic_t;

/* Can a failure with this status be survived by shrinking (it came from the communicator)? */
int shoal__elastic_recoverable(int status);

/* Every rank of c: the rank furthest ahead (most iterations, then the later position) gives its
 * parameters, momentum and position to all (ranks at the same position hold the same bytes in BSP: no
 * copy then). valid 0: this rank has no state yet (a newcomer). */
int shoal__elastic_sync_state(shoal_comm_t *c, int valid, shoal__train_pos_t *pos, float *params, float *mom,
                              size_t n);

/* Shrink *comm (a call on it failed) and replace it by the survivors' communicator; the one replaced is
 * destroyed if recovery had made it (the caller's own stays with the caller). */
int shoal__elastic_shrink(shoal__elastic_t *el, shoal_comm_t **comm);

/* Admit the processes waiting to enter (shoal_comm_grow): *grown 1 and *comm replaced when some did. */
int shoal__elastic_grow(shoal__elastic_t *el, shoal_comm_t **comm, int *grown);

/* Destroy what recovery made. */
void shoal__elastic_free(shoal__elastic_t *el);

#endif
