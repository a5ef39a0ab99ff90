/* The controller's decisions without its sockets: reports in, rates out, over one topology and one
 * planner. The daemon (controller.c) and the flow-level simulator (fsim.c) both call this, so the rates
 * the simulator evaluates are the ones the testbed runs. */
#ifndef SHOAL_FLOW_CTL_H
#define SHOAL_FLOW_CTL_H

#include <stdint.h>

#include "flow/plan.h"
#include "flow/proto.h"
#include "flow/topo.h"

typedef struct shoal__fctl {
  shoal__ftopo_t topo;
  shoal__fplan_t plan;
  /* in-network feedback: the last cumulative counters of each link's qdisc */
  uint64_t *fb_bytes, *fb_drops;
  double *fb_at; /* when they were read, seconds (0: never) */
  double *fb_prev_bps; /* the rate over the interval before (-1: none), which the reports match */
  int *fi;             /* scratch: the planner's flow of each flow of a slot's reports */
  size_t capfi;
} shoal__fctl_t;

int shoal__fctl_init(shoal__fctl_t *c, const shoal__ftopo_t *topo, const shoal__fplan_cfg_t *cfg);
void shoal__fctl_free(shoal__fctl_t *c);
/* The current slot number at time t (seconds): floor(t / slot). */
int64_t shoal__fctl_slot(const shoal__fctl_t *c, double t);
/* Answer the n reports of one slot together: every report is taken into the plan first (the flows that
 * hold a plan before the others), then rates[k][i] (bytes/s, 0 = no limit) is granted for r[k].flows[i].
 * hosts[k] is report k's agent's host in the topology (-1: unknown), whose uplink carries the background
 * it reports. 0, or SHOAL_ERR_NOMEM (no rate set). */
int shoal__fctl_handle(shoal__fctl_t *c, int64_t slot, int n, const int *hosts, const shoal__fp_report_t *r,
                       uint64_t *const *rates);
/* A link's qdisc counters read at time t (seconds): cumulative bytes and drops, the queue in bytes. */
void shoal__fctl_qdisc(shoal__fctl_t *c, int link, double t, uint64_t bytes, uint64_t drops, uint64_t backlog);

#endif
