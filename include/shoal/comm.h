/* shoal communicators and collectives.
 *
 * A communicator is a set of ranks that exchange messages over TCP and, among
 * ranks on the same host, shared memory (SHOAL_SHM). Every call here is
 * blocking (non-blocking collectives: shoal/request.h), has a
 * deadline (SHOAL_TIMEOUT), and returns 0 or a negative shoal_status_t; on
 * error shoal_comm_errmsg() names the rank, the peer, its host:port, the
 * operation and the sequence number. After an error the communicator is
 * aborted: later calls return SHOAL_ERR_ABORTED at once (exceptions, said
 * where they are declared: shoal_comm_set_timeout's, and a call refused by the
 * thread rule below).
 *
 * Thread safety (the one rule; docs/comm.md repeats it): one thread at a
 * time per world. The communicator from shoal_comm_init and every
 * communicator split from it share one set of connections and one progress
 * engine; a call made while another thread is inside a call on any of them
 * is refused with SHOAL_ERR_UNSUPPORTED (nothing else happens: not an abort).
 * Handing a world from one thread to another between calls is fine.
 * Separate worlds (separate shoal_comm_init) are independent. Collectives on
 * one communicator must be called in the same order by all its ranks.
 *
 * Argument errors (NULL or SHOAL_IN_PLACE receive buffers, bad dtype, op,
 * root, peer...) on a valid communicator are errors of the call like any
 * other: the communicator is aborted, so the ranks that wait on this one
 * fail naming it instead of waiting for it or computing without its data (a
 * rank whose part does not depend on it, such as a broadcast root, fails at
 * its next call). A later call with an argument error of its own returns
 * SHOAL_ERR_ABORTED too; its message names the first error, then its own.
 */
#ifndef SHOAL_COMM_H
#define SHOAL_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shoal_comm shoal_comm_t;

typedef enum shoal_dtype {
  SHOAL_FLOAT32 = 0,
  SHOAL_FLOAT64 = 1,
  SHOAL_INT32 = 2,
  SHOAL_INT64 = 3,
  SHOAL_BFLOAT16 = 4, /* stored as 16 bits, reduced in float32 */
  SHOAL_FLOAT16 = 5,  /* IEEE half, stored as 16 bits, reduced in float32 */
  SHOAL_UINT8 = 6,    /* unsigned bytes (also raw data); sums and products wrap modulo 256 */
  SHOAL_INT8 = 7,
  SHOAL_INT16 = 8,
  SHOAL_DTYPE__COUNT
} shoal_dtype_t;

typedef enum shoal_redop {
  SHOAL_SUM = 0,
  SHOAL_AVG = 1, /* sum divided by the communicator size (integer types: truncated) */
  SHOAL_MIN = 2,
  SHOAL_MAX = 3,
  SHOAL_PROD = 4,
  SHOAL_BAND = 5, /* bitwise and, or, exclusive or: integer dtypes only */
  SHOAL_BOR = 6,
  SHOAL_BXOR = 7,
  SHOAL_REDOP__COUNT
} shoal_redop_t;

typedef enum shoal_algo {
  SHOAL_ALGO_AUTO = 0, /* cost model picks (or SHOAL_ALGO forces) */
  SHOAL_ALGO_RING = 1, /* pipelined chunked ring: reduce-scatter + allgather */
  SHOAL_ALGO_RHD = 2,  /* recursive halving-doubling (Rabenseifner), any rank count */
  SHOAL_ALGO_RD = 3,   /* recursive doubling: small messages */
  SHOAL_ALGO_SHM = 4,  /* one host: shared-memory reduce-scatter in place + copy-out (docs/shm.md) */
  SHOAL_ALGO_HIER = 5, /* several hosts: shm reduce, leaders' allreduce over TCP, shm broadcast */
  SHOAL_ALGO_TREES = 6, /* pipelined trees over rotated orders of the link profile, slow ranks as leaves */
  SHOAL_ALGO_RELAY = 7, /* reduction trees with relays (the partial allreduce's data plane); only when asked for */
  SHOAL_ALGO__COUNT
} shoal_algo_t;

/* Pass as the send buffer of a collective to operate in place on recvbuf. */
#define SHOAL_IN_PLACE ((const void *)1)
/* Color for shoal_comm_split: this rank joins no new communicator. */
#define SHOAL_UNDEFINED (-32766)

size_t      shoal_dtype_size(shoal_dtype_t dtype);
const char *shoal_dtype_name(shoal_dtype_t dtype);  /* "float32", ... */
const char *shoal_redop_name(shoal_redop_t op);     /* "sum", ... */
const char *shoal_algo_name(shoal_algo_t algo);     /* "ring", ... */
/* 0 if the reductions can apply op to dtype; SHOAL_ERR_UNSUPPORTED (a bitwise
 * op on a floating-point dtype) or SHOAL_ERR_INVALID (out of range), with the
 * message naming both in shoal_last_error(). A local check: nothing is aborted. */
int shoal_redop_supported(shoal_dtype_t dtype, shoal_redop_t op);
/* Parse "float32"/"float"/"f32", "sum", "ring" ...; 0 or SHOAL_ERR_INVALID. */
int shoal_dtype_parse(const char *s, shoal_dtype_t *out);
int shoal_redop_parse(const char *s, shoal_redop_t *out);
int shoal_algo_parse(const char *s, shoal_algo_t *out);

/* Explicit parameters. Fields left at their init value are taken from the
 * environment (SHOAL_*, then the launchers' variables; see README). */
typedef struct shoal_comm_params {
  int rank;                   /* -1: from the environment */
  int world_size;             /* -1: from the environment */
  const char *master_addr;    /* NULL: SHOAL_MASTER_ADDR, MASTER_ADDR, 127.0.0.1 */
  int master_port;            /* -1: SHOAL_MASTER_PORT, MASTER_PORT, 29500. 0: rank 0 picks */
  const char *token;          /* NULL: SHOAL_TOKEN */
  const char *ifname;         /* NULL: SHOAL_SOCKET_IFNAME */
  const char *hostname;       /* NULL: SHOAL_HOSTNAME, else gethostname() */
  double timeout_s;           /* <= 0: SHOAL_TIMEOUT (default 300 s) */
  double connect_timeout_s;   /* <= 0: SHOAL_CONNECT_TIMEOUT (default 120 s) */
  /* When master_port is 0, rank 0 writes the port it bound here (for launchers). */
  void (*on_store_port)(int port, void *arg);
  void *on_store_port_arg;
} shoal_comm_params_t;

void shoal_comm_params_init(shoal_comm_params_t *p);

/* Join the world communicator. On failure *out is untouched and
 * shoal_last_error() holds the message. */
int  shoal_comm_init(const shoal_comm_params_t *params, shoal_comm_t **out);
/* Same, everything from the environment. */
int  shoal_comm_init_env(shoal_comm_t **out);
/* Like MPI_Comm_split: ranks with the same color form a new communicator,
 * ordered by (key, old rank). Collective over c. Reuses c's connections, so
 * it is cheap (one small allgather). color == SHOAL_UNDEFINED: *out = NULL. */
int  shoal_comm_split(shoal_comm_t *c, int color, int key, shoal_comm_t **out);
void shoal_comm_destroy(shoal_comm_t *c);

int  shoal_comm_rank(const shoal_comm_t *c);
int  shoal_comm_size(const shoal_comm_t *c);
/* The rank of this process in the world communicator c was split from. */
int  shoal_comm_world_rank(const shoal_comm_t *c);
/* Detailed message of the last error on c ("" if none). */
const char *shoal_comm_errmsg(const shoal_comm_t *c);
/* Per-communicator deadline of each blocking call, in seconds. A local
 * setting, not a call on the world: seconds outside (0, 1e7] (or NaN) is
 * SHOAL_ERR_INVALID with the message in shoal_last_error(), and changes
 * nothing (the communicator is not aborted). */
int  shoal_comm_set_timeout(shoal_comm_t *c, double seconds);

/* Collectives. sendbuf may be SHOAL_IN_PLACE (or equal to recvbuf). */
int shoal_allreduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
                    shoal_dtype_t dtype, shoal_redop_t op);
/* Same with an explicit algorithm (SHOAL_ALGO_AUTO: as shoal_allreduce). */
int shoal_allreduce_algo(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
                         shoal_dtype_t dtype, shoal_redop_t op, shoal_algo_t algo);
int shoal_broadcast(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int root);
/* recvbuf is significant at root only (may be NULL elsewhere). */
int shoal_reduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
                 shoal_dtype_t dtype, shoal_redop_t op, int root);
/* sendbuf holds size*recvcount elements; rank r receives block r. In place:
 * sendbuf = SHOAL_IN_PLACE and recvbuf holds the whole input (size*recvcount),
 * the result is left in block r of recvbuf. */
int shoal_reduce_scatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount,
                         shoal_dtype_t dtype, shoal_redop_t op);
/* recvbuf holds size*sendcount elements. In place: sendbuf = SHOAL_IN_PLACE
 * and this rank's block is already at recvbuf + rank*sendcount. */
int shoal_allgather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount,
                    shoal_dtype_t dtype);
int shoal_barrier(shoal_comm_t *c);
/* Rank r's sendcount elements land in block r of the root's recvbuf (size *
 * sendcount elements; significant at root only, may be NULL elsewhere). In
 * place at the root: sendbuf = SHOAL_IN_PLACE, its block already in place. */
int shoal_gather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype,
                 int root);
/* Block r of the root's sendbuf (size * recvcount elements; significant at
 * root only) lands in rank r's recvbuf. The root's recvbuf may be its own
 * block of sendbuf (nothing is copied then). */
int shoal_scatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                  int root);
/* Block j of sendbuf (count elements each, size blocks) goes to rank j; block
 * i of recvbuf comes from rank i. Not in place (the buffers must not overlap). */
int shoal_alltoall(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype);
/* The same with per-rank counts and displacements, in elements (arrays of
 * size entries): sendcounts[j] elements at sendbuf + sdispls[j] go to rank j,
 * recvcounts[i] from rank i land at recvbuf + rdispls[i]. recvcounts[i] on
 * this rank must equal sendcounts[me] on rank i (else SHOAL_ERR_MISMATCH). */
int shoal_alltoallv(shoal_comm_t *c, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                    void *recvbuf, const size_t *recvcounts, const size_t *rdispls, shoal_dtype_t dtype);
/* Point to point. Messages between a pair are delivered in order; the tag
 * must match (a mismatch is an error, not a reordering). */
int shoal_send(shoal_comm_t *c, const void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag);
int shoal_recv(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag);
/* Receive the next message with this tag from whichever peer sends first
 * (parameter servers). *src receives the sender's rank. */
int shoal_recv_any(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int tag, int *src);
/* Send to one peer and receive from another at once (no deadlock in rings). */
int shoal_sendrecv(shoal_comm_t *c, const void *sendbuf, size_t sendcount, int dst,
                   void *recvbuf, size_t recvcount, int src, shoal_dtype_t dtype, int tag);

/* The algorithm the cost model picks for an allreduce of `bytes` on c. */
shoal_algo_t shoal_allreduce_choose(const shoal_comm_t *c, size_t bytes);

/* Surviving a lost rank (docs/comm.md, "Shrink and grow").
 *
 * shoal_comm_shrink: after a rank of c died (a call on c failed naming it), every live rank of c calls
 * this; they agree on a new communicator of the live ranks, in their old order, and *out gets it (a new
 * world: its own connections; c stays aborted, destroy it). Ranks may have noticed the loss in different
 * calls: shrink first aborts c (if an error has not), so a rank still blocked in a call on c fails at
 * once and can call shrink too. A rank is lost when its host refuses a connection to it (the process is
 * gone) or does not answer one within 5 s (the host or the network is gone); a rank that is alive but
 * never calls shrink makes it fail at c's deadline, naming it. No store is needed: rank 0 may be the one
 * lost. Shrink works on any communicator (world or split); the result is a world communicator. If
 * another rank dies while the new communicator is being built, *out is still set, already aborted with
 * an error naming it: shrink it again. Also usable without a failure (every rank alive: the same ranks
 * on new connections).
 *
 * shoal_comm_grow: collective over a world communicator c that is healthy. Admits the processes waiting
 * at the job's door (shoal_comm_join) right now: *out gets a new world communicator with c's ranks first
 * (same ranks) and the new ones after them, or NULL when nobody was waiting (keep using c). The door is
 * kept by rank 0 at the master address and port (SHOAL_MASTER_ADDR/PORT): on the socket `shoal launch`
 * gives every rank (SHOAL_STORE_FD), so it survives the loss of rank 0; otherwise rank 0 binds the master
 * port on its own host, so after rank 0 died new processes must be pointed at the host of the new rank 0
 * (logged at INFO). A grow that fails returns an error and leaves c in use, unless a rank of c died
 * (then c is aborted, as by any call; shrink it) or the error was one rank's own (a NULL argument: an
 * argument error aborts c as any call's does, so that the others do not wait). A split communicator is
 * refused with SHOAL_ERR_UNSUPPORTED on every rank alike, and nothing is aborted.
 *
 * shoal_comm_join: instead of shoal_comm_init, in a new process (a restarted rank): authenticate at the
 * door of the running job (the same SHOAL_MASTER_ADDR, SHOAL_MASTER_PORT, SHOAL_TOKEN and SHOAL_JOB_ID
 * as its ranks; rank and world size are not used) and wait until its ranks call shoal_comm_grow, within
 * SHOAL_CONNECT_TIMEOUT; if rank 0 ends the job (destroys the communicator that holds the door, without
 * an error) while it waits, it fails with SHOAL_ERR_NOT_FOUND ("the job has finished"). shoal_comm_init
 * joins this way too when SHOAL_JOIN=1 (set by `shoal launch --on-failure restart` for the ranks it
 * restarts). shoal_comm_joined says whether c's world was entered that way (the rank has no state yet
 * and must receive it, e.g. the model, from the others). */
int shoal_comm_shrink(shoal_comm_t *c, shoal_comm_t **out);
int shoal_comm_grow(shoal_comm_t *c, shoal_comm_t **out);
int shoal_comm_join(const shoal_comm_params_t *params, shoal_comm_t **out);
int shoal_comm_joined(const shoal_comm_t *c);

/* Flow scheduling between jobs (docs/flow.md): the training loop marks the start of each iteration
 * (step = its number, >= 0) so that the host agent knows where the job is; shoal_sync_begin does it for
 * every strategy. A local call on c's world: no communication; 0 without a flow monitor.
 * SHOAL_ERR_INVALID for a NULL c or a negative step. */
int shoal_comm_mark_iteration(shoal_comm_t *c, long step);

#ifdef __cplusplus
}
#endif
#endif
