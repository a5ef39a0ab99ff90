/* Internal helpers shared by the collectives (coll/). The point-to-point
 * algorithms only use the point-to-point layer (p2p.h); the shared-memory
 * ones the host group's segment (transport/shm.h). */
#ifndef SHOAL_COMM_COLL_H
#define SHOAL_COMM_COLL_H

#include <stddef.h>

#include "comm/p2p/p2p.h"
#include "comm/coll/redop.h"
#include "comm/coll/model.h"

/* --- small utilities (common.c) --- */

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

/* --- the pipelined ring engine (ring.c) ---
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

/* Ring pipeline chunk: SHOAL_CHUNK_BYTES, else sqrt(block*alpha/((D-1)*beta))
 * clamped to [256 KiB, 4 MiB] (D = 2(p-1) pipeline stages) with the TCP
 * link defaults (SHOAL_ALPHA_US, ...). 0 or a configuration error. */
int shoal__ring_chunk_bytes(int p, size_t bytes, const shoal__cost_t *m, size_t *out);
int shoal__ring_chunk_default(int p, size_t bytes, size_t *out);

/* --- MPICH's fold for non-powers of two (fold.c), shared by rhd and rd ---
 * Of the first 2(p - p') ranks (p' = 2^floor(lg p)), each even rank hands
 * its vector to the odd rank above it and sits out, then gets the result
 * back. */
int shoal__pof2_floor(int p);
/* Real rank of a rank numbered in the folded power-of-two group. */
int shoal__unfold_rank(int newrank, int rem);
/* Returns the rank's number in the power-of-two group in *newrank, or -1 if
 * it sits out. *srcp becomes dst once dst holds this rank's (folded)
 * contribution. */
int shoal__fold_in(shoal_comm_t *c, const shoal__op_t *op, const char **srcp, char *dst, char *tmp, size_t count,
                   int *newrank);
int shoal__fold_out(shoal_comm_t *c, const shoal__op_t *op, char *dst, size_t count);

/* --- shared-memory-native collectives of one host group (shm_coll.c) ---
 * c must pass shoal__topo_shm_ok with the segment mapped (or hold one rank
 * per host: then they copy). root_l < 0: every rank gets the result
 * (allreduce); else only local rank root_l does (reduce to the host
 * leader). AVG divides only when root_l < 0. */
int shoal__shm_allreduce(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                         int root_l);
/* Barrier of a one-host communicator over the step flags: returns 1 and
 * *rc when it handled the call (c inside one host, shared memory on). */
int shoal__shm_barrier(shoal_comm_t *c, const shoal__op_t *op, int *rc);
/* A collective of c that ran point to point (a broadcast's tree over the rings, which a rank that believes
 * it is the root ends without reading anything) is done: the same-host rings are looked at for messages
 * of it no receive took at the next call over the shm steps (all of them, then), and now if this rank
 * received nothing in it (those already there). No-op without same-host peers. */
int shoal__shm_note_p2p(shoal_comm_t *c, const shoal__op_t *op, int received_nothing);
/* Broadcast bytes from local rank root_l to the host group. */
int shoal__shm_bcast(shoal_comm_t *c, const shoal__op_t *op, void *buf, size_t bytes, int root_l);

#endif
