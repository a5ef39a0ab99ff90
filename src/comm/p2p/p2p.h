/* Internal point-to-point layer used by the collectives (coll/).
 * Implemented by the engine (engine.c), which moves bytes through the transports (transport/).
 *
 * Every message carries a header {magic, comm id, op, seq, dtype, redop,
 * tag, count of the collective, payload bytes}. The receiver checks that op,
 * seq, dtype and count match what it expects and that the payload is the
 * size it posted; otherwise the op fails with SHOAL_ERR_MISMATCH and a
 * message naming both ranks, both ops and the sequence number. Payloads go
 * straight from/to the user's buffer (no staging copy) on TCP. */
#ifndef SHOAL_COMM_P2P_H
#define SHOAL_COMM_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/comm.h"

/* Operation codes carried in the wire header. */
enum shoal__opcode {
  SHOAL__OP_NONE = 0,
  SHOAL__OP_ALLREDUCE = 1,
  SHOAL__OP_BROADCAST = 2,
  SHOAL__OP_REDUCE = 3,
  SHOAL__OP_REDUCE_SCATTER = 4,
  SHOAL__OP_ALLGATHER = 5,
  SHOAL__OP_BARRIER = 6,
  SHOAL__OP_SEND = 7, /* send/recv/sendrecv from the user */
  SHOAL__OP_SPLIT = 8,
  SHOAL__OP_INTERNAL = 9, /* bootstrap, tuning, ... */
  SHOAL__OP_PARTIAL = 10, /* partial allreduce (include/shoal/partial.h) */
  SHOAL__OP_GATHER = 11,
  SHOAL__OP_SCATTER = 12,
  SHOAL__OP_ALLTOALL = 13, /* alltoall (tag 0) and alltoallv (tag 1) */
  SHOAL__OP__COUNT
};
const char *shoal__opcode_name(int op);

/* One collective call in flight. shoal__op_begin fills seq and the deadline. */
typedef struct shoal__op {
  uint8_t  opcode;
  uint8_t  dtype;
  uint8_t  redop;
  uint8_t  algo;
  int32_t  root;
  int32_t  tag;
  uint64_t count;        /* the element count the user passed */
  uint32_t seq;          /* per-communicator sequence number */
  uint64_t deadline_ns;  /* absolute CLOCK_MONOTONIC */
  int64_t  step1;        /* a partial-allreduce step + 1, named in its errors (0: none) */
} shoal__op_t;

/* Start an op on c: fails fast with SHOAL_ERR_ABORTED if c was aborted,
 * assigns the next sequence number and the deadline. */
int  shoal__op_begin(shoal_comm_t *c, shoal__op_t *op);
/* Finish: on error, aborts c (all later calls fail fast). Returns status. */
int  shoal__op_end(shoal_comm_t *c, shoal__op_t *op, int status);
/* Seconds op has waited at now, for timeout messages: since it began (its
 * deadline is the begin plus the timeout), not since the wait that began at
 * t0, which can be later. */
double shoal__op_waited(const shoal_comm_t *c, const shoal__op_t *op, uint64_t t0, uint64_t now);

/* Nonblocking requests, progressed by shoal__wait. A request is a plain
 * struct owned by the caller (no allocation on the data path). Requests to
 * the same peer in the same direction complete in the order they were posted. */
typedef struct shoal__req {
  int      kind;        /* 0 unused, 1 send, 2 recv */
  int      peer;        /* rank in c */
  void    *buf;
  size_t   bytes;
  size_t   done;        /* payload bytes transferred so far */
  int      hdr_done;    /* header bytes transferred so far */
  int      state;       /* transport-private: 0 posted, 1 complete, < 0 failed (status) */
  unsigned char hdr[48];/* wire header (transport-private layout, docs/comm.md) */
  /* transport-private: queue link, owner and a copy of the op (for header checks) */
  struct shoal__req *next;
  shoal_comm_t *comm;
  shoal__op_t op;
  uint64_t not_before_ns; /* SHOAL_EMU_DELAY_US: a send leaves no earlier than this (0: at once) */
} shoal__req_t;

int shoal__isend(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *buf, size_t bytes,
                 shoal__req_t *req);
int shoal__irecv(shoal_comm_t *c, const shoal__op_t *op, int src, void *buf, size_t bytes,
                 shoal__req_t *req);
/* Progress until all n requests are complete or op's deadline passes. */
int shoal__waitall(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *reqs, int n);
/* Progress until at least one of the n listed requests is complete (NULL
 * entries and unused requests are skipped; none pending: returns at once). */
int shoal__waitany(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *const *reqs, int n);
/* Progress without blocking: *ndone = number of the n requests complete. */
int shoal__test(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *reqs, int n, int *ndone);
/* Progress contract the collectives rely on (added by the collectives helper):
 * shoal__waitall and shoal__test progress EVERY request posted on c (all
 * peers, both directions), not only the n listed, and return as soon as the
 * listed ones are complete. The pipelined ring waits for one chunk's receive
 * while dozens of earlier isends still drain to the other neighbour; if only
 * the listed requests progressed, every rank would sit on its left
 * neighbour's data while its own writes to the right stalled: a deadlock.
 * A completed request struct may be reused for a new isend/irecv. */

/* Send to dst and receive from src concurrently; dst or src may be -1. */
int shoal__sendrecv(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *sbuf, size_t sbytes,
                    int src, void *rbuf, size_t rbytes);

/* Accessors the collectives need from the communicator. */
int  shoal__comm_rank(const shoal_comm_t *c);
int  shoal__comm_size(const shoal_comm_t *c);
/* An argument or configuration error found by a public call on this rank
 * before it took part (shoal_last_error() holds the text): records it as c's
 * error (shoal_comm_errmsg) and aborts c's world, so that the other ranks
 * fail naming this rank instead of waiting for it or computing without its
 * data. c may be NULL (nothing to abort). Returns status. */
int  shoal__comm_reject(shoal_comm_t *c, int status);
/* The calling thread's identity for the one-thread-per-world rule (the address of a thread-local). */
uintptr_t shoal__thread_tag(void);
/* Record an error on c ("rank 2 <- peer 3 (host:port) allreduce seq 17: ..."). */
int  shoal__comm_fail(shoal_comm_t *c, int status, const shoal__op_t *op, int peer, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
