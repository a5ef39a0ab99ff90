/* The host agent (docs/flow.md#the-agent): once per slot it reads the host's flow segment, decides what
 * each flow is doing (NEW_ITER, RESCHEDULE, IDLE), adds TCP_INFO telemetry, asks the controller for the
 * slot's rates and writes them into the segment, where the ranks' transports apply them. A controller
 * that does not answer two slots in a row, or whose connection closes, leaves every flow unpaced until it
 * answers again; an agent that stops leaves them unpaced too (its beat goes stale). */
#ifndef SHOAL_FLOW_AGENT_H
#define SHOAL_FLOW_AGENT_H

#include <signal.h>
#include <stdint.h>

#include "core/flowseg.h"
#include "flow/proto.h"

typedef struct shoal__fagent_opts {
  char ctl_host[256];   /* the controller's address (IPv4 or a name) */
  int ctl_port;
  char host[64];        /* segment host name ("": SHOAL_FLOW_HOST, else gethostname()) */
  double slot_s;        /* slot length (the controller's must match: WELCOME says it) */
  int estimate;         /* send e_f = max over the last slots of (delivery rate - bias), else 0 (line rate) */
  double bias_bps;      /* bits/s subtracted from the delivery rate in the estimate */
  double duration_s;    /* stop after this long (0: until a signal) */
  const char *log_path; /* one CSV line per flow and slot, or NULL */
  volatile sig_atomic_t *stop; /* set by the caller's signal handler */
} shoal__fagent_opts_t;

/* Run until *stop or the duration. 0, or a negative status (a segment that cannot be made, another live
 * agent on the same host, a log that cannot be written). */
int shoal__fagent_run(const shoal__fagent_opts_t *o);

/* ---- the per-slot reading of the segment (agent_flows.c) ---- */

/* What the agent remembers of a slot of the segment between two slots. */
typedef struct shoal__fagent_flow {
  uint32_t gen;        /* the slot's claim this memory belongs to */
  uint64_t started;    /* the iteration whose first bytes were reported as NEW_ITER (0: none) */
  uint64_t last_bytes; /* the counter at the previous slot */
  int reported;        /* in the last report */
} shoal__fagent_flow_t;

/* Bytes of a new iteration (beyond its mark) after which the iteration counts as started: small control
 * messages at the start of a step do not start the flow's communication phase. */
#define SHOAL__FAGENT_START_BYTES 65536

/* Build this slot's report from the segment: flows that ever carried bytes, with their status, iteration,
 * previous volume and bytes sent in the current iteration; idx[i] = segment slot of report flow i. */
void shoal__fagent_collect(const shoal__flowseg_t *seg, shoal__fagent_flow_t *mem, shoal__fp_report_t *r, int *idx);

#endif
