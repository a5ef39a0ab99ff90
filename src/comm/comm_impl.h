/* Internal structures of communicators and connections (comm.c, p2p.c, tcp.c).
 *
 * A world (one per shoal_comm_init) owns one connection per peer; every
 * communicator split from it shares the world and its connections, told
 * apart by the comm id in each message header. */
#ifndef SHOAL_COMM_IMPL_H
#define SHOAL_COMM_IMPL_H

#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

#include "comm/async.h"
#include "comm/p2p/p2p.h"

/* Wire header, 40 bytes, little-endian (docs/comm.md):
 *   0 u32 magic "SHL1"   4 u8 opcode  5 u8 dtype  6 u8 redop  7 u8 flags(0)
 *   8 u64 comm id        16 u32 seq   20 i32 tag  24 u64 count  32 u64 payload bytes */
#define SHOAL__HDR_BYTES 40
#define SHOAL__WIRE_MAGIC 0x314c4853u /* bytes 'S' 'H' 'L' '1' */
/* Opcodes that exist only on the wire. */
#define SHOAL__WOP_ABORT 0xAB   /* payload: reason text; the sender aborted its communicator */
#define SHOAL__WOP_GOODBYE 0xBE /* no payload; the sender destroyed its world normally */
#define SHOAL__ABORT_TEXT_MAX 480

typedef struct shoal__world shoal__world_t;
typedef struct shoal__conn shoal__conn_t;

/* Per-peer transport. A shared-memory transport fills the same slots. */
typedef struct shoal__transport {
  const char *name;
  /* Move bytes of req (the head of conn's queue). 1: req complete; 0: would
   * block; < 0: failed (status; the message is already recorded). */
  int  (*send_progress)(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req);
  int  (*recv_progress)(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req);
  /* Best-effort notice (abort/goodbye) then close. */
  void (*shutdown)(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text);
} shoal__transport_t;

extern const shoal__transport_t shoal__tcp_transport;
/* Send an abort or goodbye notice (wop; none when 0 or !boundary) and close the
 * write side: the TCP transport's shutdown, also used by transports whose
 * notices travel over the pair's TCP connection. */
void shoal__tcp_close(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text, int boundary);

enum { SHOAL__CONN_OPEN = 0, SHOAL__CONN_LEFT = 1, SHOAL__CONN_CLOSED = 2 };

struct shoal__conn {
  const shoal__transport_t *tp;
  int fd;
  int zombie_fd; /* after an abort: shut down for writing, kept open (no RST) until destroy */
  int peer; /* world rank */
  int state;
  int idle_quiet; /* a message is waiting with no receive posted: do not watch until one is */
  shoal__req_t *sq_head, *sq_tail, *rq_head, *rq_tail;
};

typedef struct shoal__peer_info {
  char addr[64];    /* ip:port it listens on */
  char host[64];    /* SHOAL_HOSTNAME or gethostname() */
  char boot_id[40]; /* /proc/sys/kernel/random/boot_id: same host when equal */
  int pid;          /* its process id (liveness of same-host peers) */
} shoal__peer_info_t;

struct shoal__world {
  int refs; /* communicators using this world */
  int rank, size;
  uint64_t id;
  shoal__conn_t *conns;      /* [size]; conns[rank] is unused */
  shoal__peer_info_t *peers; /* [size] */
  struct shoal__shm *shm;    /* host groups, shm segment, tuning (shm.h); set by shoal__shm_attach */
  struct pollfd *pfd;        /* scratch for poll, [size] */
  int *pfd_conn;
  shoal__req_t *self_sq_head, *self_sq_tail, *self_rq_head, *self_rq_tail;
  uint64_t emu_delay_ns;     /* SHOAL_EMU_DELAY_US: every outgoing message is held this long */
  uint64_t spin_ns;          /* SHOAL_SPIN_US: poll without blocking this long before sleeping in poll() */
  shoal_algo_t algo_env;     /* SHOAL_ALGO, parsed once (a getenv per call was a tenth of a tiny allreduce) */
  uint64_t next_release_ns;  /* earliest held send (0: none) */
  int aborted;
  int abort_status;
  char abort_msg[768];
  struct shoal__async *async; /* progress thread of non-blocking requests (request.c); NULL until the first */
  /* The thread inside a call on this world (0: none): one at a time; a call
   * from another thread meanwhile is refused (shoal__op_begin). */
  _Atomic uintptr_t owner;
  _Atomic int owner_opcode;
};

struct shoal_comm {
  shoal__world_t *w;
  uint64_t id;
  int rank, size;
  int *wranks; /* comm rank -> world rank */
  uint32_t seq;
  uint32_t nsplit; /* splits made from this comm: part of a child's id */
  double timeout_s;
  int aborted;
  char errmsg[1024];
};

/* p2p.c */
void shoal__hdr_pack(unsigned char *h, int opcode, int dtype, int redop, uint64_t comm_id, uint32_t seq, int32_t tag,
                     uint64_t count, uint64_t bytes);
/* Called by a transport once a receive's header is complete: 0 to go on
 * with the payload, or a failure status (message recorded, world aborted). */
int  shoal__recv_header(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req);
/* Called by a transport on a broken connection: records the failure. */
int  shoal__conn_broken(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req, int status, const char *why);
/* Abort the world: notices to every peer, close, fail queued requests. */
void shoal__world_abort(shoal__world_t *w, int status, const char *msg);
void shoal__world_goodbye(shoal__world_t *w);
const char *shoal__dtype_label(int dtype);
size_t shoal__dtype_bytes(int dtype);
/* A connection with no receive posted is readable or hung up: consume a
 * goodbye, fail on an abort notice or an unannounced close, else note an
 * early message. 0 or a failure status. */
int  shoal__conn_idle_event(shoal_comm_t *c, const shoal__op_t *op, shoal__conn_t *conn, short revents);
/* One progress pass over every connection with work, then (wait_ms != 0) poll. */
int  shoal__progress(shoal_comm_t *c, const shoal__op_t *op, int wait_ms);

#endif
