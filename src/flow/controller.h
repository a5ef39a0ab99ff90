/* The controller daemon (docs/flow.md#the-controller): the emulated switch. One thread, one poll loop:
 * it accepts agents (at most SHOAL__FCTL_MAX_AGENTS), gathers the agents' REPORTs of a slot and answers them
 * together with RATES from the planner (ctl.h), and at every slot boundary reads the qdiscs named in the topology for in-network
 * feedback. Every connection has an input bound (one frame) and a deadline for its HELLO; a connection
 * that breaks the protocol is sent ERROR and closed, naming its address and the reason. */
#ifndef SHOAL_FLOW_CONTROLLER_H
#define SHOAL_FLOW_CONTROLLER_H

#include <signal.h>

#include "flow/plan.h"
#include "flow/topo.h"

#define SHOAL__FCTL_MAX_AGENTS 256
#define SHOAL__FCTL_HELLO_S 2.0 /* an agent must say HELLO within this long after connecting */
/* The reports of a slot are answered together when every agent's is in, or this far into the slot (as a
 * fraction of it): the agents wait for their answer until 0.9 of the slot. */
#define SHOAL__FCTL_GATHER 0.4

typedef struct shoal__fctl_opts {
  char listen_addr[64]; /* "0.0.0.0" or an address of this host */
  int port;             /* 0: any (printed) */
  const shoal__ftopo_t *topo;
  shoal__fplan_cfg_t cfg;
  int feedback;         /* read the topology's qdiscs each slot */
  double duration_s;    /* stop after this long (0: until a signal) */
  const char *log_path; /* per-slot CSV of links and flows, or NULL */
  volatile sig_atomic_t *stop;
  void (*on_listen)(int port, void *arg); /* told the bound port (stdout of the CLI, a test) */
  void *arg;
} shoal__fctl_opts_t;

/* Run until *stop or the duration. 0, or a negative status (the port cannot be bound, a log cannot be
 * written). */
int shoal__fctl_run(const shoal__fctl_opts_t *o);

#endif
