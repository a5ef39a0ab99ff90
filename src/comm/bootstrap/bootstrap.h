/* Where a rank's settings come from (params > SHOAL_* > launcher variables >
 * defaults) and which address it advertises. */
#ifndef SHOAL_COMM_BOOTSTRAP_H
#define SHOAL_COMM_BOOTSTRAP_H

#include <netinet/in.h>

#include "comm/bootstrap/store.h"
#include "shoal/comm.h"

typedef struct shoal__boot_cfg {
  int rank, size;
  const char *rank_src; /* "params", "SHOAL_RANK", "RANK", ... */
  char master_addr[256];
  struct in_addr master_ip; /* master_addr resolved once (valid if master_ip_ok) */
  int master_ip_ok;
  int master_port;
  const char *addr_src, *port_src;
  char token[512];
  char job_id[72];      /* SHOAL_JOB_ID ("" if unset) */
  char ifname[256];
  char hostname[64];
  const char *ifname_src, *hostname_src; /* "params.ifname" or "SHOAL_SOCKET_IFNAME", and for the host name */
  char boot_id[40];
  char rack[32];        /* SHOAL_RACK, else the leaf switch of SLURM_TOPOLOGY_ADDR, else "-" (unknown) */
  double timeout_s, connect_timeout_s;
  long sockbuf;
  long rcvbuf_remote;  /* SHOAL_SOCKET_RCVBUF_REMOTE: SO_RCVBUF of sockets to peers on other hosts (0: sockbuf) */
  double emu_delay_us; /* SHOAL_EMU_DELAY_US */
  double spin_us;      /* SHOAL_SPIN_US */
  char tcp_cc[16];     /* SHOAL_TCP_CONGESTION: auto, system or an algorithm name */
  int store_fd; /* SHOAL_STORE_FD: listening socket handed over by `shoal launch` (rank 0), or -1 */
} shoal__boot_cfg_t;

int shoal__boot_resolve(const shoal_comm_params_t *p, shoal__boot_cfg_t *cfg);
/* The store's address, resolved by shoal__boot_resolve (for a world of one, which needs no store, here):
 * a host name is looked up once per rank, not at every connect. */
int shoal__boot_store_ip(const shoal__boot_cfg_t *cfg, struct in_addr *ip);
/* shoal__store_connect to cfg's store (its address, resolved once) at `port`. */
int shoal__boot_store_connect(const shoal__boot_cfg_t *cfg, int port, const shoal__authkey_t *key, shoal__deadline_t dl,
                              shoal__store_client_t *out);
/* 1 if a rank or world-size variable of any launcher family is set (environment or SHOAL_CONF_FILE):
 * the process is one rank of a world that shoal_comm_init_env would join (or refuse, naming why). */
int shoal__boot_world_given(void);
/* The store's address and the name of where it came from: given (params) > SHOAL_MASTER_ADDR > MASTER_ADDR
 * (environment) > SHOAL_MASTER_ADDR in SHOAL_CONF_FILE > 127.0.0.1 ("default"). */
const char *shoal__boot_store_addr(const char *given, const char **src);
/* Address to advertise: from the interface spec when set (spec_src names where it came from:
 * SHOAL_SOCKET_IFNAME or params.ifname), else `route` (the local address of the connection to the store).
 * desc gets "interface eth0 (...)" or "the route to the store". */
int shoal__boot_pick_addr(const char *spec, const char *spec_src, struct in_addr route, struct in_addr *out, char *desc,
                          size_t cap);

#endif
