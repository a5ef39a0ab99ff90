/* What the flow daemons read from the kernel over netlink (libmnl): the statistics of the root qdiscs in
 * the current network namespace (the controller's in-network feedback), and TCP_INFO of every TCP
 * socket (the agent's telemetry, the way `ss -ti` gets it: sock_diag, no access to the sockets needed). */
#ifndef SHOAL_FLOW_NETLINK_H
#define SHOAL_FLOW_NETLINK_H

#include <stddef.h>
#include <stdint.h>

typedef struct shoal__qstat {
  char ifname[16];
  int found;
  uint64_t bytes, packets, drops, backlog; /* cumulative bytes and drops; backlog: the queue now */
} shoal__qstat_t;

/* Fill st[i] for every i whose ifname has a root qdisc here (found = 1). 0, or a negative status. */
int shoal__qdisc_read(shoal__qstat_t *st, int n);

typedef struct shoal__tcpstat {
  uint32_t src_ip, dst_ip; /* network order */
  uint16_t sport, dport;   /* host order */
  uint64_t cookie;         /* the socket's kernel cookie: the same socket from one dump to the next */
  uint64_t bytes_acked;
  uint32_t wqueue;         /* bytes written but not acknowledged yet (queued or in flight) */
  uint64_t delivery_rate;  /* bytes/s */
  uint32_t rtt_us;
  uint64_t pacing_rate, max_pacing_rate; /* bytes/s */
} shoal__tcpstat_t;

/* A sock_diag netlink socket kept open for the queries below (NULL on failure, with the error). */
typedef struct shoal__tcpdiag shoal__tcpdiag_t;
shoal__tcpdiag_t *shoal__tcpdiag_open(void);
void shoal__tcpdiag_close(shoal__tcpdiag_t *d);
/* Every established IPv4 TCP socket of this network namespace, at most cap; their number, or a negative
 * status. */
int shoal__tcp_sockets(shoal__tcpdiag_t *d, shoal__tcpstat_t *out, int cap);
/* The established IPv4 TCP socket src_ip:sport -> dst_ip:dport (addresses in network order, ports in host
 * order) of this namespace into *out: a hash lookup, its cost independent of how many sockets the kernel
 * holds (a dump walks the whole established table). 0, SHOAL_ERR_NOT_FOUND, or another negative status. */
int shoal__tcp_socket(shoal__tcpdiag_t *d, uint32_t src_ip, uint16_t sport, uint32_t dst_ip, uint16_t dport,
                      shoal__tcpstat_t *out);

#endif
