/* Reduction trees with relays: the data plane of the partial allreduce
 * (include/shoal/partial.h, partial.c) and of the "relay" row of the
 * allreduce table (allreduce_relay.c), where every rank contributes.
 *
 * P trees over rotated orders of the ranks, in a heap layout of fanout k
 * (the children of position i are k i + 1 .. k i + k; k = 1 makes a chain).
 * Tree m reduces slice m of the vector (P near-equal slices) to its root,
 * rank m, which broadcasts it. The broadcast tree puts rank (m + i) mod p at
 * position i. The reduction tree is the same for k >= 2; for chains it puts
 * rank (m - i) mod p at position i, so that the reduction flows m+1 -> m+2
 * -> ... -> m and the broadcast m -> m+1 -> ...: both phases use only the
 * link from each rank to the next, like a ring (a chain whose reduction ran
 * the other way switched every rank's outgoing link between the phases and
 * stalled for tens of ms on the testbed's shaped links). P = p chains load
 * every rank like a ring (2 (p-1)/p S sent); P = 1 binary tree has depth
 * lg p (3 S through an interior rank).
 *
 * Relay flags of rank i in tree m for the set of ranks that contribute
 * (has_local), as in AdapCC (spec adaptive-comm A4):
 *   active_below(i) = has_local(i) or any active_below(child)
 *   recv_from(i)    = children c with active_below(c)   (pruned subtrees send nothing)
 *   has_kernel(i)   = |recv_from(i)| + has_local(i) >= 2 (else one input is forwarded as is)
 *   has_send(i)     = active_below(i) and i is not the root
 * Every rank, contributing or not, receives the broadcast. A tree with no
 * contributor at all broadcasts nothing: every rank writes zeros there. */
#ifndef SHOAL_COMM_COLL_RELAY_H
#define SHOAL_COMM_COLL_RELAY_H

#include <stddef.h>

#include "comm/coll/algo.h"

#define SHOAL__RELAY_MAX_FANOUT 8

typedef struct shoal__relay_shape {
  int p;      /* ranks */
  int ntrees; /* 1 .. p */
  int fanout; /* 1 .. SHOAL__RELAY_MAX_FANOUT */
} shoal__relay_shape_t;

/* Position of rank r in reduction tree m, and the rank at position i. */
static inline int shoal__relay_pos(const shoal__relay_shape_t *s, int m, int r) {
  int d = s->fanout == 1 ? m - r : r - m;
  return (d % s->p + s->p) % s->p;
}
static inline int shoal__relay_rank(const shoal__relay_shape_t *s, int m, int i) {
  int r = s->fanout == 1 ? m - i : m + i;
  return (r % s->p + s->p) % s->p;
}
/* Parent of rank r in reduction tree m (-1 at the root); its children (returns how many). */
int shoal__relay_parent(const shoal__relay_shape_t *s, int m, int r);
int shoal__relay_children(const shoal__relay_shape_t *s, int m, int r, int out[SHOAL__RELAY_MAX_FANOUT]);
/* The same in broadcast tree m (same root). */
int shoal__relay_bcast_parent(const shoal__relay_shape_t *s, int m, int r);
int shoal__relay_bcast_children(const shoal__relay_shape_t *s, int m, int r, int out[SHOAL__RELAY_MAX_FANOUT]);
/* Depth of the trees (edges from the root to the deepest rank). */
int shoal__relay_depth(const shoal__relay_shape_t *s);

/* The flags of rank r in tree m for the contributors has_local[p]. */
typedef struct shoal__relay_flags {
  int has_local, active_below, has_kernel, has_send;
  int nrecv;
  int recv_from[SHOAL__RELAY_MAX_FANOUT]; /* ranks, in child order */
} shoal__relay_flags_t;
/* active_below of every rank of tree m (out[p], by rank). */
void shoal__relay_active_below(const shoal__relay_shape_t *s, int m, const unsigned char *has_local, unsigned char *out);
int  shoal__relay_flags(const shoal__relay_shape_t *s, int m, const unsigned char *has_local, int r,
                        shoal__relay_flags_t *out);

/* Predicted seconds of an allreduce of `bytes` with every rank contributing
 * (two pipelined phases, the busiest rank's bytes over the link), and the
 * pipeline chunk it would use. */
double shoal__relay_cost(const shoal__coll_ctx_t *x, size_t bytes, const shoal__relay_shape_t *s, size_t *chunk);
/* The shape for `bytes`: ntrees/fanout as given (0: the cheapest of P = p
 * chains, one binary tree and two binary trees by shoal__relay_cost), and its
 * chunk. 0 or SHOAL_ERR_INVALID naming the bad value. */
int shoal__relay_pick(const shoal__coll_ctx_t *x, size_t bytes, int ntrees, int fanout, shoal__relay_shape_t *out,
                      size_t *chunk);

/* One reduce-and-broadcast over the trees. */
typedef struct shoal__relay_job {
  const void *contrib;            /* this rank's data (count elements); unused unless has_local[rank] */
  void *dst;                      /* the result (count elements); may be contrib */
  size_t count;
  shoal_dtype_t dtype;
  shoal_redop_t redop;            /* AVG: reduced as SUM, divided by divisor at the roots */
  const unsigned char *has_local; /* [p]: nonzero where the rank contributes */
  double divisor;
  shoal__relay_shape_t shape;
  size_t chunk_bytes;
} shoal__relay_job_t;
/* Every rank of c calls it with the same has_local, shape and chunk, inside
 * a begun op (the messages carry op). */
int shoal__relay_run(shoal_comm_t *c, const shoal__op_t *op, const shoal__relay_job_t *job);

#endif
