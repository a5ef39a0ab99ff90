/* The flow monitor of the TCP transport (docs/flow.md): every cross-host TCP connection of a world gets a
 * slot in this host's flow segment (core/flowseg.h), where the transport adds the bytes it hands to the
 * socket and applies the pacing rate the host agent wrote (a token bucket in the send path). Off unless
 * the segment exists (an agent runs on the host) or SHOAL_FLOW_MONITOR=on; a monitor that cannot start
 * logs why and the world runs without it. Included by comm_impl.h. */
#ifndef SHOAL_COMM_FLOWMON_H
#define SHOAL_COMM_FLOWMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/flowseg.h"
#include "comm/p2p/p2p.h"

typedef struct shoal__world shoal__world_t;
typedef struct shoal__conn shoal__conn_t;

typedef struct shoal__flowmon_conn {
  shoal__flowseg_flow_t *slot;
  uint64_t bytes;    /* this rank's count (the slot's copy is for the agent) */
  uint64_t applied;  /* rate in force, bytes/s (0: none) */
  double tokens;     /* the bucket, bytes */
  uint64_t last_ns;  /* its last refill */
  int lowat;         /* TCP_NOTSENT_LOWAT set (once an agent paced this connection) */
} shoal__flowmon_conn_t;

/* After the world's transports are chosen: claim slots for its cross-host TCP connections. Fails only on
 * a malformed SHOAL_FLOW_MONITOR (SHOAL_ERR_CONFIG); a segment that cannot be used is logged (WARN) and the
 * world runs unmonitored. */
int shoal__flowmon_attach(shoal__world_t *w);
/* Before the connections close: free the slots. */
void shoal__flowmon_detach(shoal__world_t *w);

/* The send path's two hooks. budget: bytes the connection may hand to its socket now (SIZE_MAX: no
 * limit); 0 with the request held (req->not_before_ns, the engine sleeps until then) while the bucket
 * refills. sent: one relaxed store per sendmsg. */
size_t shoal__flowmon_budget(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req);
static inline void shoal__flowmon_sent(shoal__flowmon_conn_t *m, size_t k) {
  m->bytes += k;
  atomic_store_explicit(&m->slot->bytes, m->bytes, memory_order_relaxed);
  if (m->applied) m->tokens -= (double)k;
}

#endif
