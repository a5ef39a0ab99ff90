/* Internal helpers shared by the collectives (coll_*.c) and the cost model
 * (algo.c). The algorithms only use the point-to-point layer (p2p.h). */
#ifndef SHOAL_COMM_COLL_H
#define SHOAL_COMM_COLL_H

#include <stddef.h>

#include "comm/p2p/p2p.h"
#include "comm/coll/redop.h"

/* --- small utilities (coll_common.c) --- */

/* Range of block b when n elements are split into nb near-equal blocks
 * (the first n % nb blocks get one extra element). */
static inline void shoal__block(size_t n, size_t nb, size_t b, size_t *off, size_t *len) {
  size_t q = n / nb, rem = n % nb;
  *off = b * q + (b < rem ? b : rem);
  *len = q + (b < rem);
}
static inline int shoal__mod(int a, int p) { return ((a % p) + p) % p; }

/* Per-thread scratch buffers reused across calls (a 256 MiB allreduce should
 * not page-fault a fresh buffer every call). slot < SHOAL__SCRATCH_SLOTS.
 * NULL when out of memory. */
#define SHOAL__SCRATCH_SLOTS 3
void *shoal__coll_scratch(int slot, size_t bytes);

/* Argument checks common to the collectives: c non-NULL, dtype valid, the
 * byte count representable, buffers non-NULL when count > 0. Sets the
 * thread's error naming `what` and returns SHOAL_ERR_INVALID. */
int shoal__coll_check(const shoal_comm_t *c, const char *what, shoal_dtype_t dtype, size_t count,
                      size_t nblocks, const void *buf, size_t *bytes_out);

/* Post a receive / send only when there is something to move (both sides
 * compute the same lengths, so a skipped 0-byte message is skipped on both). */
int shoal__post_recv(shoal_comm_t *c, const shoal__op_t *op, int src, void *buf, size_t bytes,
                     shoal__req_t *req, char *posted);
int shoal__post_send(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *buf, size_t bytes,
                     shoal__req_t *req, char *posted);
/* shoal__waitall after a short spin of non-blocking progress (coll_common.c). */
int shoal__coll_wait(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *reqs, int n);
/* shoal__sendrecv with the same spin-then-block wait. */
int shoal__coll_sendrecv(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *sbuf, size_t sbytes, int src,
                         void *rbuf, size_t rbytes);
/* Wait for one request if it was posted. */
int shoal__wait_posted(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *req, char *posted);

/* --- the pipelined ring engine (coll_ring.c) ---
 * Runs rs_steps reduce-scatter steps then ag_steps allgather steps over p
 * blocks of `count` elements. At step s rank r sends block (r - s + shift)
 * and receives block (r - s - 1 + shift), each cut into nchunks chunks; the
 * send of chunk k at step s+1 is posted as soon as chunk k of step s has
 * arrived and been reduced, and up to `window` receives are posted ahead,
 * so the socket fills the next chunk while this one is being reduced. */
typedef struct shoal__ring {
  shoal_dtype_t dtype;
  shoal_redop_t redop;
  size_t count;         /* elements of the whole vector */
  int rs_steps, ag_steps, shift;
  const char *src;      /* step-0 sends and the local operand of reductions (may be work) */
  char *work;           /* whole-vector working buffer (the result of allreduce / allgather) */
  char *own_dst;        /* if set, the last reduce-scatter step writes the own block here */
  int avg;              /* divide the own block by p after the last reduce-scatter step */
  size_t chunk_bytes;   /* pipeline chunk size */
} shoal__ring_t;
int shoal__ring_run(shoal_comm_t *c, const shoal__op_t *op, const shoal__ring_t *ring);

/* --- allreduce algorithms (coll_allreduce.c) --- */
int shoal__allreduce_ring(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                          size_t chunk_bytes);
int shoal__allreduce_rhd(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count);
int shoal__allreduce_rd(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count);

/* --- the alpha-beta-gamma cost model (algo.c) --- */
typedef struct shoal__cost {
  double alpha_s;   /* per-message latency, s */
  double beta_s;    /* per byte on a link, s (1 / bandwidth) */
  double gamma_s;   /* per byte reduced, s (1 / reduction throughput) */
} shoal__cost_t;
/* Defaults overridden by SHOAL_ALPHA_US / SHOAL_BETA_GBPS / SHOAL_GAMMA_GBPS.
 * SHOAL_ERR_CONFIG with the variable named if one is malformed. */
int    shoal__cost_params(shoal__cost_t *out);
/* Predicted time (s) of an allreduce of `bytes` on p ranks. */
double shoal__cost_allreduce(shoal_algo_t algo, int p, double bytes, const shoal__cost_t *m);
/* The cheapest of ring/rhd/rd; times[] (may be NULL) receives each prediction. */
shoal_algo_t shoal__cost_pick(int p, size_t bytes, const shoal__cost_t *m, double times[SHOAL_ALGO__COUNT]);
/* Ring pipeline chunk: SHOAL_CHUNK_BYTES, else sqrt(block*alpha/((D-1)*beta))
 * clamped to [256 KiB, 4 MiB] (D = 2(p-1) pipeline stages). */
int    shoal__ring_chunk_bytes(int p, size_t bytes, const shoal__cost_t *m, size_t *out);
/* SHOAL_ALGO parsed (AUTO when unset); a world reads it once, at creation. */
int    shoal__algo_env(shoal_algo_t *out);
/* Resolve the algorithm of one allreduce call: explicit > forced (the
 * world's SHOAL_ALGO) > model. why receives a short reason for the log. */
int    shoal__allreduce_resolve(int p, size_t bytes, shoal_algo_t requested, shoal_algo_t forced, shoal_algo_t *out,
                                char *why, size_t why_cap);

#endif
