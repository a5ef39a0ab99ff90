/* Shared memory among the ranks of one world that share a host (the host
 * group of topo.h): the group's segment (shm_segment.c), a point-to-point
 * transport over per-pair byte rings (shm_transport.c), and the waits, step
 * flags and call descriptors that the shared-memory-native collectives
 * (coll/shm_coll.c) build on (shm_sync.c). Design: docs/shm.md.
 *
 * Segment lifetime: the host group's lowest world rank creates it as an
 * anonymous memory file (memfd: it never has a name in /dev/shm); every
 * member opens it through /proc/<leader pid>/fd/<fd>, maps it and
 * acknowledges over TCP; the leader then closes its descriptor. From then on
 * only the mappings keep it alive, so a crash (even SIGKILL) leaks nothing. */
#ifndef SHOAL_COMM_SHM_H
#define SHOAL_COMM_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "comm/comm_impl.h"
#include "comm/topo.h"

#define SHOAL__SHM_LINE 128 /* two cache lines: no false sharing with the adjacent-line prefetcher */
#define SHOAL__SHM_NBUF 2   /* arena buffers per rank: steps alternate between them */

/* Per local rank, in the segment. Each field on its own line. */
typedef struct shoal__shm_ctrl {
  _Alignas(SHOAL__SHM_LINE) _Atomic uint64_t in_step;  /* last step whose input this rank published */
  _Alignas(SHOAL__SHM_LINE) _Atomic uint64_t red_step; /* last step whose slice this rank reduced */
  _Alignas(SHOAL__SHM_LINE) _Atomic uint32_t bell;     /* futex word: bumped by whoever wakes this rank */
  _Atomic uint32_t sleeping;                           /* this rank sleeps (or is about to) on bell */
  int32_t pid;
  uint64_t base;                                       /* where this rank mapped the segment (the cma test) */
} shoal__shm_ctrl_t;

/* A rank's box for tiny allreduce inputs: the step number, the descriptor and
 * the first 32 data bytes share one 64-byte cache line, so that a peer's single miss brings them
 * (Open MPI's vader has "fast boxes" for the same reason). seq is stored
 * last, with release: seeing seq == g means the whole box holds step g. */
#define SHOAL__SHM_BOX_BYTES 632
typedef struct shoal__shm_box {
  /* The step of the owner whose descriptor (and, for a tiny allreduce, data) the box holds; 0 while it
   * is being rewritten (a seqlock). Every shm step of this parity writes it, not only tiny allreduces. */
  _Alignas(SHOAL__SHM_LINE) _Atomic uint64_t seq;
  /* The call that step belongs to: op, dtype, redop, algorithm, roots, count, sequence number,
   * communicator, phase. Written before the step is published (in_step or seq, release), compared by
   * every reader after it saw the step (acquire): mismatched calls are errors, not mixed data. */
  _Atomic uint64_t desc[3];
  char data[SHOAL__SHM_BOX_BYTES];
} shoal__shm_box_t;

/* Phases of the shm collectives, part of each step's descriptor. */
enum { SHOAL__SHM_PH_ALLREDUCE = 1, SHOAL__SHM_PH_REDUCE = 2, SHOAL__SHM_PH_BCAST = 3, SHOAL__SHM_PH_BARRIER = 4 };

/* A single-producer single-consumer byte ring from one local rank to another. */
typedef struct shoal__shm_ring {
  _Alignas(SHOAL__SHM_LINE) _Atomic uint64_t tail; /* bytes written, ever (producer) */
  _Alignas(SHOAL__SHM_LINE) _Atomic uint64_t head; /* bytes read, ever (consumer) */
} shoal__shm_ring_t;

typedef struct shoal__shm {
  const shoal__topo_t *topo; /* the host group: members (nlocal), this rank's slot (lrank), l2w/w2l */
  void *base;
  size_t size;
  size_t ring_bytes;       /* data bytes of each pair's ring */
  size_t chunk_bytes;      /* bytes of each arena buffer */
  shoal__shm_ctrl_t *ctrl; /* [nlocal] */
  char *rings;             /* nlocal*nlocal slots of (ring header + ring_bytes) */
  char *arena;             /* [nlocal][NBUF][chunk_bytes] inputs */
  char *result;            /* [NBUF][chunk_bytes] reduced chunks */
  shoal__shm_box_t *boxes; /* [nlocal][NBUF] tiny-allreduce boxes */
  uint64_t step;           /* steps done by this rank (identical on every member) */
  uint64_t user_step0;     /* steps of the world's set-up (topology, tuning), whose calls reuse sequence numbers */
  uint64_t cur_desc[3];    /* descriptor of this rank's current step (cur_step), see shoal__shm_box_t */
  uint64_t cur_step;
  uint64_t seen_all;       /* every member's in_step is known to be >= this (saves re-reading their lines) */
  /* The last collective this rank ran point to point over the rings (a broadcast's tree): a same-host peer's
   * message of it or of an earlier call still unread in a ring once every member published a later step
   * is a mismatch (the sender computed another root or peer). Looked at once, then unread_due = 0. */
  uint64_t unread_comm;
  uint32_t unread_seq;
  int unread_opcode, unread_root, unread_due;
  uint64_t spin_ns;        /* spin (yielding) this long before sleeping on the futex */
  size_t nt_bytes;         /* allreduces this big copy results out with non-temporal stores (0: never) */
  uint64_t *last_check_ns; /* [nlocal] rate limit of the liveness probes */
  int *pidfd;              /* [nlocal] pidfd of each same-host peer (-1: none, -2: gone already) */
  int oversub;             /* more ranks on this host than cores: spin with sched_yield, not pause */
  /* Cross-memory attach (the cma allreduce, coll/allreduce_cma.c): every pair of the group may
   * process_vm_readv/writev each other, tested and agreed at attach; the local buffer of its pieces. */
  int cma_ok;
  size_t cma_piece;        /* bytes per peer and piece */
  char *cma_tmp;           /* [nlocal - 1][cma_piece] */
} shoal__shm_t;

#define SHOAL__SHM_CMA_MAXLOCAL 64 /* larger host groups run without cma */

extern const shoal__transport_t shoal__shm_transport;

/* Called once by shoal_comm_init on the new world communicator (after the
 * topology), collectively: when SHOAL_SHM is on and this rank shares its host,
 * maps the host group's segment (w->shm) and switches the same-host
 * connections to the shm transport. Internal traffic only (op INTERNAL). */
int  shoal__shm_attach(shoal_comm_t *c);
/* Called when the world is freed: unmaps (the memory file is already closed). */
void shoal__shm_detach(shoal__world_t *w);

static inline shoal__shm_ring_t *shoal__shm_ring(const shoal__shm_t *s, int from, int to) {
  size_t slot = sizeof(shoal__shm_ring_t) + s->ring_bytes;
  return (shoal__shm_ring_t *)(s->rings + ((size_t)from * (size_t)s->topo->nlocal + (size_t)to) * slot);
}
/* Copy n bytes at stream position pos out of a ring's data (wrapping). */
static inline void shoal__shm_ring_get(const char *data, size_t cap, uint64_t pos, void *dst, size_t n) {
  size_t at = (size_t)(pos % cap), first = cap - at < n ? cap - at : n;
  memcpy(dst, data + at, first);
  if (n > first) memcpy((char *)dst + first, data, n - first);
}
static inline char *shoal__shm_in(const shoal__shm_t *s, int l, int b) {
  return s->arena + ((size_t)l * SHOAL__SHM_NBUF + (size_t)b) * s->chunk_bytes;
}
static inline char *shoal__shm_out(const shoal__shm_t *s, int b) { return s->result + (size_t)b * s->chunk_bytes; }
static inline shoal__shm_box_t *shoal__shm_box(const shoal__shm_t *s, int l, int b) {
  return s->boxes + (size_t)l * SHOAL__SHM_NBUF + (size_t)b;
}

/* Wake local rank l if it sleeps on its bell. */
void shoal__shm_ring_bell(shoal__shm_t *s, int l);
/* Wake every other local rank that sleeps. */
void shoal__shm_ring_all(shoal__shm_t *s);

/* Record the descriptor of this rank's step g (op, phase, root_l) in its box
 * of parity g; call before publishing the step. */
void shoal__shm_set_desc(shoal_comm_t *c, uint64_t g, const shoal__op_t *op, int phase, int root_l);
/* The same, inline, for the tiny-allreduce box, which it leaves at seq 0: the caller writes the data and
 * then seq = g (one cache-line transfer to each reader for seq, descriptor and up to 32 data bytes). */
static inline void shoal__shm_set_desc_fast(shoal__shm_t *s, uint64_t comm_id, uint64_t g, const shoal__op_t *op,
                                            shoal__shm_box_t *box) {
  uint64_t d0 = (uint64_t)op->opcode | (uint64_t)op->dtype << 8 | (uint64_t)op->redop << 16 |
                (uint64_t)op->algo << 24 | (uint64_t)(uint16_t)0 << 32 | (uint64_t)(uint16_t)(op->root + 1) << 48;
  uint64_t d2 = (uint64_t)op->seq | (uint64_t)SHOAL__SHM_PH_ALLREDUCE << 56 | (comm_id & 0xffffffull) << 32;
  s->cur_desc[0] = d0, s->cur_desc[1] = op->count, s->cur_desc[2] = d2, s->cur_step = g;
  atomic_store_explicit(&box->seq, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&box->desc[0], d0, memory_order_relaxed);
  atomic_store_explicit(&box->desc[1], (uint64_t)op->count, memory_order_relaxed);
  atomic_store_explicit(&box->desc[2], d2, memory_order_relaxed);
}
/* After seeing a peer's box at step g (acquire): does its descriptor differ from mine? */
static inline int shoal__shm_desc_differs(const shoal__shm_t *s, shoal__shm_box_t *box) {
  return atomic_load_explicit(&box->desc[0], memory_order_relaxed) != s->cur_desc[0] ||
         atomic_load_explicit(&box->desc[1], memory_order_relaxed) != s->cur_desc[1] ||
         atomic_load_explicit(&box->desc[2], memory_order_relaxed) != s->cur_desc[2];
}
/* Compare the descriptors of step g of every other local rank (only_l >= 0:
 * that one) with this rank's: 0, or SHOAL_ERR_MISMATCH naming both ranks and
 * both calls. A peer whose box already holds a later step is skipped. */
int  shoal__shm_check_desc(shoal_comm_t *c, const shoal__op_t *op, uint64_t g, int only_l);
/* A tiny allreduce at step g saw local rank l's box at seq >= g with another
 * descriptor or a later step (l ran ahead into other calls: another call at
 * step g published nothing there for this one): SHOAL_ERR_MISMATCH naming both
 * ranks and both calls; 0 if it holds step g and the same call after all. */
int  shoal__shm_check_box(shoal_comm_t *c, const shoal__op_t *op, uint64_t g, int l);

/* The rings after a point-to-point collective (shoal__shm_note_p2p): unread_due set, every other member
 * has published a step of this call (so it is done with the earlier ones and everything it sent in them is
 * in the rings): 0, or SHOAL_ERR_MISMATCH naming the peer whose message of that call or an earlier one no
 * receive of this rank took. Clears unread_due. */
int  shoal__shm_unread_check(shoal_comm_t *c, const shoal__op_t *op);
static inline int shoal__shm_unread(shoal_comm_t *c, const shoal__op_t *op) {
  return c->w->shm->unread_due ? shoal__shm_unread_check(c, op) : 0;
}

/* Wait until flag[l] >= want for every local rank l in mask (NULL: all but
 * me), field = 0 for in_step, 1 for red_step, 2 for the seq of box b =
 * want % NBUF. Yields, then sleeps on the
 * futex; checks the deadline and the peers' connections (a dead or aborted
 * peer fails the op naming it). */
int  shoal__shm_wait_flags(shoal_comm_t *c, const shoal__op_t *op, int field, uint64_t want, int only_l);

/* ---- inside the shm transport (shm_*.c) ---- */
/* Liveness of same-host peer conn while waiting: 0 alive; 1 hung up, said
 * goodbye or its process exited; < 0 it sent an abort notice (the op is
 * failed, status returned). */
int  shoal__shm_probe_conn(shoal_comm_t *c, const shoal__op_t *op, shoal__conn_t *conn);
/* This rank waits for a point-to-point message of call op from same-host peer
 * l and found l's ring empty at stream position head: 0, or (l has published
 * a step of a later call of the same communicator, so the message will never
 * come) SHOAL_ERR_MISMATCH naming both ranks and both calls. */
int  shoal__shm_peer_moved_on(shoal_comm_t *c, const shoal__op_t *op, int l, uint64_t head);
/* Rate limit of the probes: 1 when local rank l is due (every 2 ms). */
int  shoal__shm_probe_due(shoal__shm_t *s, int l);
/* One spin of a wait that started `waited` ns ago (pause, then sched_yield). */
void shoal__shm_spin_once(const shoal__shm_t *s, uint64_t waited);
/* Sleep on this rank's bell (at most max_ns) unless ready(arg) already holds. */
void shoal__shm_bell_sleep(shoal__shm_t *s, int (*ready)(void *), void *arg, long max_ns);

#endif
