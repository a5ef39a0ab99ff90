/* The per-host flow segment: what the monitor in comm's TCP transport and the host agent of src/flow
 * share (docs/flow.md). Both layers include this header; core owns the layout so neither includes the
 * other.
 *
 * One POSIX shared-memory object per host, "/shoal-flow.<host>" (/dev/shm/shoal-flow.<host>), <host> the
 * host name (gethostname(), per emulated host on the testbed). The ranks of every job on the host write one
 * slot per cross-host TCP connection: cumulative bytes handed to the socket and the job's iteration marks;
 * the agent reads them each time slot and writes back a pacing rate per slot, which the rank applies with
 * a token bucket in its send path. Single writer per field: counters are written by the owning rank only, rates and the
 * agent's fields by the agent only, so relaxed atomics suffice; claiming and freeing slots and the
 * initialization of a fresh object happen under flock() on the object.
 *
 * Liveness in both directions: the agent writes agent_beat_ns every slot and a rank stops pacing (applies
 * no limit) when the beat is older than SHOAL__FLOWSEG_STALE_SLOTS slots, so a killed agent leaves no flow
 * paced; slots of ranks that died (kill -9) are freed by the next opener that looks (the agent each few
 * slots, every rank when it claims). */
#ifndef SHOAL_CORE_FLOWSEG_H
#define SHOAL_CORE_FLOWSEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SHOAL__FLOWSEG_MAGIC 0x574c4653u /* bytes 'S' 'F' 'L' 'W' */
#define SHOAL__FLOWSEG_VERSION 1u
#define SHOAL__FLOWSEG_FLOWS 256
#define SHOAL__FLOWSEG_STALE_SLOTS 2 /* a beat older than this many slots: the agent is gone */

enum { SHOAL__FLOWSEG_FREE = 0, SHOAL__FLOWSEG_LIVE = 1 };

/* One cross-host TCP connection of a rank. 128 bytes. */
typedef struct shoal__flowseg_flow {
  _Atomic uint32_t state; /* FREE or LIVE; the identity below is written before LIVE is stored */
  uint32_t gen;           /* claims of this slot so far: a reused slot is a new flow */
  uint64_t job;           /* job key (the world id): every flow of one job carries it */
  int32_t pid;            /* the rank's process */
  uint32_t src_rank, dst_rank, nranks;
  uint32_t src_ip, dst_ip;     /* IPv4, network byte order */
  uint16_t src_port, dst_port; /* host byte order */
  uint32_t pad0;
  /* written by the rank */
  _Atomic uint64_t bytes;      /* cumulative bytes handed to the socket (headers and payload) */
  _Atomic uint64_t iter;       /* the job's iteration on this rank (shoal_comm_mark_iteration) */
  _Atomic uint64_t iter_bytes; /* bytes when iter was marked */
  _Atomic uint64_t prev_iter_bytes; /* bytes of the previous complete iteration (its volume) */
  _Atomic uint64_t applied;    /* pacing rate in effect on the socket, bytes/s (0: none) */
  /* written by the agent */
  _Atomic uint64_t rate;       /* pacing rate to apply, bytes/s (0: none) */
  char pad[128 - 96];
} shoal__flowseg_flow_t;

typedef struct shoal__flowseg {
  uint32_t magic, version;
  uint32_t nflows;
  _Atomic uint32_t slot_us;          /* the agent's slot length */
  _Atomic int32_t agent_pid;         /* 0: no agent */
  uint32_t pad0;
  _Atomic uint64_t agent_beat_ns;    /* CLOCK_MONOTONIC of the agent's last slot, 0: none */
  _Atomic uint64_t ctl_contact_ns;   /* the agent's last reply from the controller, 0: never */
  _Atomic uint64_t agent_slots;      /* slots the agent ran */
  _Atomic uint64_t background_bps;   /* bytes/s of TCP sockets on this host that are not shoal flows */
  char ctl_addr[64];                 /* the controller the agent talks to (status) */
  char host[64];
  char pad[1024 - 184];
  shoal__flowseg_flow_t flow[SHOAL__FLOWSEG_FLOWS];
} shoal__flowseg_t;

_Static_assert(sizeof(shoal__flowseg_flow_t) == 128, "flow slot layout");
_Static_assert(sizeof(shoal__flowseg_t) == 1024 + 128 * SHOAL__FLOWSEG_FLOWS, "segment layout");

/* The object name of host's segment into name (cap >= 96): "/shoal-flow.<host>", characters other than
 * letters, digits, '.', '-' and '_' replaced by '_'. host NULL: this host (gethostname()). */
void shoal__flowseg_name(const char *host, char *name, size_t cap);
/* Map host's segment read-write. create != 0: create it when missing (mode 0666 so that ranks of any user
 * and the agent share it), and (re)initialize an object of the wrong size, magic or version. create == 0
 * and no object: SHOAL_ERR_NOT_FOUND. Frees the slots of processes that no longer exist. 0 and *out, or a
 * negative status with a message naming the object. */
int shoal__flowseg_open(const char *host, int create, shoal__flowseg_t **out);
/* Map an existing segment read-only (status); SHOAL_ERR_NOT_FOUND when there is none. */
int shoal__flowseg_open_ro(const char *host, const shoal__flowseg_t **out);
void shoal__flowseg_close(const shoal__flowseg_t *seg);
/* Remove host's object (testbed down). 0, or SHOAL_ERR_NOT_FOUND. */
int shoal__flowseg_unlink(const char *host);

/* Claim a free slot for the calling process (under the object's lock); NULL when all are taken. The
 * caller fills the identity then stores LIVE in state. */
shoal__flowseg_flow_t *shoal__flowseg_claim(shoal__flowseg_t *seg);
/* A segment in this process's memory (the flow simulator's hosts): initialize, claim without a lock. */
void shoal__flowseg_init_local(shoal__flowseg_t *seg, const char *host);
shoal__flowseg_flow_t *shoal__flowseg_claim_local(shoal__flowseg_t *seg);
/* Free slots whose process is gone; the number freed. */
int shoal__flowseg_reap(shoal__flowseg_t *seg);
/* Mark the start of iteration step (>= 0) on a flow: the bytes of the iteration before become its volume,
 * the counter now is where this one starts. Written by the flow's owner (the rank, or the simulator). */
static inline void shoal__flowseg_mark(shoal__flowseg_flow_t *f, uint64_t step) {
  uint64_t b = atomic_load_explicit(&f->bytes, memory_order_relaxed);
  uint64_t last = atomic_load_explicit(&f->iter_bytes, memory_order_relaxed);
  if (atomic_load_explicit(&f->iter, memory_order_relaxed))
    atomic_store_explicit(&f->prev_iter_bytes, b - last, memory_order_relaxed);
  atomic_store_explicit(&f->iter_bytes, b, memory_order_relaxed);
  atomic_store_explicit(&f->iter, step + 1, memory_order_release); /* 0 means never marked */
}

/* 1 if the agent's beat is recent (within SHOAL__FLOWSEG_STALE_SLOTS slots of now_ns), else 0. */
int shoal__flowseg_agent_alive(const shoal__flowseg_t *seg, uint64_t now_ns);

#endif
