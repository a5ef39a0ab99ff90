/* The network the flow controller plans over (docs/flow.md#topology-file): hosts in racks, each host's
 * link (both directions) and each rack's uplink to the core (both directions), the links a flow between
 * two hosts crosses, and the qdiscs that give in-network feedback for some of them. Two tiers, as in the
 * testbed and in the usual leaf-spine cluster; flows are located by their hosts' IPv4 addresses. */
#ifndef SHOAL_FLOW_TOPO_H
#define SHOAL_FLOW_TOPO_H

#include <stdint.h>

#define SHOAL__FTOPO_MAX_HOSTS 256
#define SHOAL__FTOPO_MAX_RACKS 64
#define SHOAL__FTOPO_MAX_PATH 4 /* host up, rack up, rack down, host down */
#define SHOAL__FTOPO_IFNAME 16

typedef struct shoal__ftopo_host {
  char name[32];
  uint32_t ip; /* network byte order; 0 in the simulator */
  int rack;
  double up_bps, down_bps;          /* the host's link, out and in; 0: unlimited */
  char in_if[SHOAL__FTOPO_IFNAME];  /* interface whose qdisc shapes the host's ingress ("": none) */
} shoal__ftopo_host_t;

typedef struct shoal__ftopo {
  int nhosts, nracks;
  shoal__ftopo_host_t host[SHOAL__FTOPO_MAX_HOSTS];
  double rack_up_bps[SHOAL__FTOPO_MAX_RACKS], rack_down_bps[SHOAL__FTOPO_MAX_RACKS]; /* 0: unlimited */
  char up_if[SHOAL__FTOPO_MAX_RACKS][SHOAL__FTOPO_IFNAME], down_if[SHOAL__FTOPO_MAX_RACKS][SHOAL__FTOPO_IFNAME];
} shoal__ftopo_t;

/* Links are numbered: host i's uplink i, its downlink H + i, rack r's uplink 2H + r, its downlink
 * 2H + R + r. */
static inline int shoal__ftopo_nlinks(const shoal__ftopo_t *t) { return 2 * t->nhosts + 2 * t->nracks; }

/* Read a topology file. Lines (# comments, blanks ignored):
 *   rate RATE                  every host's link, each direction (default for host lines)
 *   uplink RATE                every rack's uplink, each direction
 *   uplink rK RATE             rack K's uplink
 *   host NAME IP RACK [RATE]   a host (RACK a number from 0; RATE overrides `rate` for it)
 *   feedback up|down rK IFACE  the qdisc of IFACE shapes rack K's uplink (up: rack to core) or downlink
 *   feedback in NAME IFACE     the qdisc of IFACE shapes host NAME's ingress
 * An error names FILE:LINE. 0 and *out, or a negative status. */
int shoal__ftopo_read(const char *path, shoal__ftopo_t *out);
/* A two-tier topology of H hosts in R racks (blocks of ceil(H/R)), host links at rate_bps, rack uplinks at
 * hosts-per-rack x rate / oversub; IPs 10.90.<rack>.<index+1> as on the testbed. */
int shoal__ftopo_uniform(int hosts, int racks, double rate_bps, double oversub, shoal__ftopo_t *out);

/* Host index of an IPv4 address (network order), -1 if none. */
int shoal__ftopo_host_of(const shoal__ftopo_t *t, uint32_t ip);
/* The links from host a to host b (a != b) into links[SHOAL__FTOPO_MAX_PATH]; their number. Links without
 * a limit are left out. */
int shoal__ftopo_path(const shoal__ftopo_t *t, int a, int b, int *links);
/* Capacity in bits/s of link l (0: unlimited). */
double shoal__ftopo_cap(const shoal__ftopo_t *t, int l);
/* "h3.up", "r1.down", ... into buf; buf. */
const char *shoal__ftopo_link_name(const shoal__ftopo_t *t, int l, char *buf, int cap);
/* Interface of the qdisc that shapes link l, NULL if none is known. */
const char *shoal__ftopo_link_iface(const shoal__ftopo_t *t, int l);

#endif
