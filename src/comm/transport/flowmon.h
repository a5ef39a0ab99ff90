/* The flow monitor of the TCP transport (docs/flow.md): every cross-host TCP connection of a world gets a
 * slot in this host's flow segment (core/flowseg.h), where the transport adds the bytes it hands to the
 * socket and applies the pacing rate the host agent wrote (SO_MAX_PACING_RATE). Off unless the segment
 * exists (an agent runs on the host) or SHOAL_FLOW_MONITOR=on; a monitor that cannot start logs why and
 * the world runs without it. Included by comm_impl.h. */
#ifndef SHOAL_COMM_FLOWMON_H
#define SHOAL_COMM_FLOWMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/flowseg.h"

typedef struct shoal__world shoal__world_t;
typedef struct shoal__conn shoal__conn_t;

typedef struct shoal__flowmon_conn {
  shoal__flowseg_flow_t *slot;
  uint64_t bytes;   /* this rank's count (the slot's copy is for the agent) */
  uint64_t applied; /* pacing rate set on the socket, bytes/s (0: none) */
} shoal__flowmon_conn_t;

/* After the world's transports are chosen: claim slots for its cross-host TCP connections. Fails only on
 * a malformed SHOAL_FLOW_MONITOR (SHOAL_ERR_CONFIG); a segment that cannot be used is logged (WARN) and the
 * world runs unmonitored. */
int shoal__flowmon_attach(shoal__world_t *w);
/* Before the connections close: free the slots. */
void shoal__flowmon_detach(shoal__world_t *w);
/* Apply a changed rate (or drop the limit when the agent is gone). */
void shoal__flowmon_apply(shoal__conn_t *conn, shoal__flowmon_conn_t *m, uint64_t rate);

/* The send path's two hooks: one relaxed load when nothing changed, one relaxed store per sendmsg. */
static inline void shoal__flowmon_pace(shoal__conn_t *conn, shoal__flowmon_conn_t *m) {
  uint64_t r = atomic_load_explicit(&m->slot->rate, memory_order_relaxed);
  if (r != m->applied || r) shoal__flowmon_apply(conn, m, r);
}
static inline void shoal__flowmon_sent(shoal__flowmon_conn_t *m, size_t k) {
  m->bytes += k;
  atomic_store_explicit(&m->slot->bytes, m->bytes, memory_order_relaxed);
}

#endif
