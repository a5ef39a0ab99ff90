/* Internal structures of worlds, communicators and connections.
 *
 * A world (one per shoal_comm_init) owns one connection per peer; every
 * communicator split from it shares the world and its connections, told
 * apart by the comm id in each message header. */
#ifndef SHOAL_COMM_IMPL_H
#define SHOAL_COMM_IMPL_H

#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/p2p/p2p.h"
#include "comm/topo.h"

/* Wire header, 40 bytes, little-endian (docs/comm.md):
 *   0 u32 magic "SHL1"   4 u8 opcode  5 u8 dtype  6 u8 redop  7 u8 flags(0)
 *   8 u64 comm id        16 u32 seq   20 i32 tag  24 u64 count  32 u64 payload bytes */
#define SHOAL__HDR_BYTES 40
#define SHOAL__WIRE_MAGIC 0x314c4853u /* bytes 'S' 'H' 'L' '1' */
/* Opcodes that exist only on the wire. */
#define SHOAL__WOP_ABORT 0xAB   /* payload: reason text; the sender aborted its communicator */
#define SHOAL__WOP_GOODBYE 0xBE /* no payload; the sender destroyed its world normally */
#define SHOAL__ABORT_TEXT_MAX 480
/* Byte 7 (flags) of an abort notice: the sender revoked its world to shrink it (it finished the world's
 * set-up, so a rank still in the set-up's last step knows every rank is past the rest of it). */
#define SHOAL__HDR_F_REVOKE 1

#include "comm/transport/transport.h"
#include "comm/transport/flowmon.h"

enum { SHOAL__CONN_OPEN = 0, SHOAL__CONN_LEFT = 1, SHOAL__CONN_CLOSED = 2 };

struct shoal__conn {
  const shoal__transport_t *tp;
  int fd;
  int zombie_fd; /* after an abort: shut down for writing, kept open (no RST) until destroy */
  int peer; /* world rank */
  int state;
  int idle_quiet; /* a message is waiting with no receive posted: do not watch until one is */
  shoal__req_t *sq_head, *sq_tail, *rq_head, *rq_tail;
  shoal__flowmon_conn_t *mon; /* its flow-segment slot (cross-host TCP, an agent on the host), else NULL */
};

typedef struct shoal__peer_info {
  char addr[64];    /* ip:port it listens on */
  char host[64];    /* SHOAL_HOSTNAME or gethostname() */
  char boot_id[40]; /* /proc/sys/kernel/random/boot_id: same host when equal */
  int pid;          /* its process id (liveness of same-host peers) */
  char rack[32];    /* its host's rack (SHOAL_RACK, ...), "-" unknown: the cost model's shared uplinks */
} shoal__peer_info_t;

/* Same host: the same host name and the same kernel boot (emulated hosts share a boot id, not a name). */
static inline int shoal__peer_same_host(const shoal__peer_info_t *a, const shoal__peer_info_t *b) {
  return !strcmp(a->host, b->host) && !strcmp(a->boot_id, b->boot_id);
}

struct shoal__world {
  int refs; /* communicators using this world */
  int rank, size;
  uint64_t id;
  shoal__conn_t *conns;      /* [size]; conns[rank] is unused */
  shoal__peer_info_t *peers; /* [size] */
  shoal__topo_t *topo;       /* host groups (topo.c) */
  struct shoal__shm *shm;    /* this host group's shared-memory segment (transport/shm.h), or NULL */
  struct shoal__tune *tune;  /* tuning profile and the chooser's state (tune/tune.h) */
  int shm_on;                /* SHOAL_SHM, read at creation (the same on every rank) */
  /* transports with a wait hook in use on this world (p2p engine: before blocking in poll) */
  const shoal__transport_t *waiters[SHOAL__MAX_TRANSPORTS];
  int nwaiters;
  struct pollfd *pfd;        /* scratch for poll, [size]: the connections to the others, then wake_fd */
  int *pfd_conn;             /* the connection of each pfd entry; -1: wake_fd */
  int wake_fd;               /* an eventfd another thread writes to end a wait in shoal__progress (-1: none) */
  shoal__req_t *self_sq_head, *self_sq_tail, *self_rq_head, *self_rq_tail;
  uint64_t emu_delay_ns;     /* SHOAL_EMU_DELAY_US: every outgoing message is held this long */
  uint64_t spin_ns;          /* SHOAL_SPIN_US: poll without blocking this long before sleeping in poll() */
  shoal_algo_t algo_env;     /* SHOAL_ALGO, parsed once (a getenv per call was a tenth of a tiny allreduce) */
  /* the algorithm table's names (coll/algos.c, above the engine; set by world.c): the engine's mismatch
   * messages name an allreduce's algorithm, which rides in the header's tag */
  const char *(*algo_name)(shoal_algo_t algo);
  uint64_t next_release_ns;  /* earliest held send (0: none) */
  uint64_t watched_ns;       /* when a call last looked for notices and hang-ups of idle peers (engine.c) */
  int aborted;
  int revoking;      /* this rank aborts the world to shrink it: its abort notices carry SHOAL__HDR_F_REVOKE */
  int peer_revoked;  /* a peer's abort notice carried SHOAL__HDR_F_REVOKE */
  int abort_status;
  char abort_msg[768];
  /* Non-blocking requests (request.c, a layer above the engine: its thread runs collectives): its state
   * (NULL until the first request), and what it hands the engine when its progress thread starts: the
   * wait for its queue to drain that every blocking call makes first (shoal__op_begin), and the thread's
   * shoal__thread_tag (its calls on behalf of the application's threads are let in: the thread rule). */
  struct shoal__async *async;
  void (*async_quiesce)(struct shoal__world *w);
  _Atomic uintptr_t async_tag;
  /* The thread inside a call on this world (0: none): one at a time; a call
   * from another thread meanwhile is refused (shoal__op_begin). */
  _Atomic uintptr_t owner;
  _Atomic int owner_opcode;
  /* Rebuilding after a lost rank (elastic/): this rank's listener (its address is peers[rank].addr; kept
   * open for the world's lifetime: shrink reaches the survivors there, and a refused connection there
   * means the process is gone), the settings the world was made with (worlds built by shrink and grow
   * inherit them), the token's key, and on rank 0 the door new processes enter through (-1: not open). */
  int listen_fd;
  shoal__boot_cfg_t *cfg;
  shoal__authkey_t key;
  int door_fd;
  int door_warned;
  int joined; /* this rank entered through shoal_comm_join */
  shoal__flowmon_conn_t *flowmon; /* [size] the monitored connections' slots (transport/flowmon.h), or NULL */
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

/* World and communicator objects (world.c), for the code that builds worlds (comm.c, elastic/). */
shoal__world_t *shoal__world_new(int rank, int size);
/* Free a world that no communicator holds yet (a failed build). */
void shoal__world_free(shoal__world_t *w);
shoal_comm_t *shoal__comm_new(shoal__world_t *w, uint64_t id, int rank, int size, double timeout_s);
/* After the mesh: the world's owners (topology, shm segment, tuning profile), collective over the world
 * communicator c; the set-up traffic does not count (the user's first collective has sequence number 1). */
int shoal__world_start(shoal_comm_t *c);

/* p2p engine (p2p/engine.c); the services transports call are in transport/transport.h */
const char *shoal__dtype_label(int dtype);
size_t shoal__dtype_bytes(int dtype);
/* One progress pass over every connection with work, then (wait_ms != 0) poll. */
int  shoal__progress(shoal_comm_t *c, const shoal__op_t *op, int wait_ms);
/* Another thread (a compute thread handing data to a communication thread) ends the communication thread's
 * wait in shoal__progress at once, instead of that thread polling for it: shoal__wake_open makes w's wake_fd
 * (once; 0 or a negative error code), shoal__wake writes it (any thread; nothing without a wake_fd).
 * Returns whether a wait on w ends at a wake: no while a transport waits its own way (shared memory). */
int  shoal__wake_open(shoal__world_t *w);
void shoal__wake(shoal__world_t *w);
int  shoal__wake_ends_wait(const shoal__world_t *w);
/* Abort the world: notices to every peer, close, fail queued requests. */
void shoal__world_abort(shoal__world_t *w, int status, const char *msg);
/* Normal end: goodbye notices on every connection. */
void shoal__world_goodbye(shoal__world_t *w);
/* Whether world rank wr's process is stopped (SIGSTOP, a debugger): its state in /proc/<pid>/stat, when it
 * registered its pid and runs on this kernel (the same boot id). 1 and *pid, or 0 (running, or unknown). */
int  shoal__peer_stopped(const shoal__world_t *w, int wr, int *pid);
/* How long a wait goes on past its deadline unless the peer it blames is known to be stopped: time for the
 * abort notice of the rank that waits on the culprit itself (min(0.2 x the timeout, 2 s)). */
uint64_t shoal__blame_grace_ns(const shoal_comm_t *c);
/* The text of the last call of the calling thread refused on w by the thread rule, until that thread's next
 * call on w is let in; NULL when none. */
const char *shoal__thread_refusal(const shoal__world_t *w);
/* Record shoal_last_error() as the calling thread's refusal on w (the thread rule). */
void shoal__note_refusal(const shoal__world_t *w);
/* Register a transport whose wait hook the engine calls before blocking (once per transport). */
void shoal__world_add_waiter(shoal__world_t *w, const shoal__transport_t *tp);

#endif
