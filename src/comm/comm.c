/* Making communicators: shoal_comm_init (rendezvous through rank 0's store, full TCP mesh; or, for a
 * restarted rank, shoal_comm_join) and shoal_comm_split. The top of comm: a world's life is world.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/bootstrap/mesh.h"
#include "comm/bootstrap/sock.h"
#include "comm/bootstrap/store.h"
#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/siphash.h"

/* Fetch every rank's registration; on a timeout name the ranks that never came. */
static int gather_peers(shoal__world_t *w, shoal__store_client_t *sc, const shoal__boot_cfg_t *cfg,
                        const shoal__authkey_t *key, shoal__deadline_t dl) {
  char k[32], val[256];
  /* the wait ends early enough for the look at the missing ranks below to end by the deadline too: a
   * tenth of it, at most 1 s (a store that stopped answering made the call 2 s late) */
  double reserve_s = cfg->connect_timeout_s * 0.1 < 1.0 ? cfg->connect_timeout_s * 0.1 : 1.0;
  shoal__deadline_t wait_dl = {dl.at_ns - (uint64_t)(reserve_s * 1e9)};
  for (int j = 0; j < w->size; j++) {
    snprintf(k, sizeof k, "rank/%d", j);
    size_t len;
    int rc = shoal__store_get(sc, k, 1, val, sizeof val, &len, wait_dl);
    if (rc == SHOAL_ERR_TIMEOUT) {
      /* the pending GET poisons this connection: ask on a fresh one which ranks are missing, by the
       * deadline (a world of millions would take minutes of round trips) */
      char missing[256] = "";
      size_t used = 0;
      int nmiss = 0, partial = 0, listed_all = 1;
      shoal__store_client_t probe;
      if (shoal__boot_store_connect(cfg, cfg->master_port, key, dl, &probe) == 0) {
        for (int m = j; m < w->size; m++) {
          if (shoal__deadline_passed(dl)) {
            partial = 1;
            break;
          }
          char km[32], tmp[8];
          snprintf(km, sizeof km, "rank/%d", m);
          if (shoal__store_get(&probe, km, 0, tmp, sizeof tmp, NULL, dl) != SHOAL_ERR_NOT_FOUND) continue;
          nmiss++;
          if (used < sizeof missing - 16) used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", m);
          else listed_all = 0;
        }
        shoal__store_close(&probe);
      }
      if (!nmiss) snprintf(missing, sizeof missing, "%d", j), nmiss = 1;
      char count[64] = "";
      if (nmiss > 1 || partial) snprintf(count, sizeof count, "%s%d ", partial ? "at least " : "", nmiss);
      return shoal__seterr(SHOAL_ERR_TIMEOUT,
                           "rank %d: rendezvous at the store %s:%d: %srank%s %s%s did not arrive within %.1f s "
                           "(SHOAL_CONNECT_TIMEOUT); were they started with the same master address, port and token?",
                           w->rank, cfg->master_addr, cfg->master_port, count, nmiss > 1 ? "s" : "", missing,
                           listed_all && !partial ? "" : ", ...", cfg->connect_timeout_s);
    }
    if (rc == SHOAL_ERR_PEER_CLOSED)
      return shoal__err_prefix(rc, "rank %d: the rendezvous store %s:%d (rank 0) closed the connection: rank 0 "
                               "failed or gave up: ", w->rank, cfg->master_addr, cfg->master_port);
    if (rc) return rc;
    shoal__peer_info_t *p = &w->peers[j];
    p->pid = 0; /* the pid is optional (0: liveness by socket only), and so is the rack */
    snprintf(p->rack, sizeof p->rack, "-");
    if (sscanf(val, "%63s %63s %39s %d %31s", p->addr, p->host, p->boot_id, &p->pid, p->rack) < 3)
      return shoal__seterr(SHOAL_ERR_PROTOCOL, "rank %d: malformed registration of rank %d: '%s'", w->rank, j, val);
  }
  return 0;
}

static int store_listen(const shoal__boot_cfg_t *cfg, int *fd, int *port) {
  if (cfg->store_fd >= 0) { /* handed over by `shoal launch` */
    int acc = 0;
    socklen_t l = sizeof acc;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (getsockopt(cfg->store_fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) != 0 || !acc ||
        getsockname(cfg->store_fd, (struct sockaddr *)&a, &al) != 0 || a.sin_family != AF_INET)
      return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_STORE_FD=%d: not a listening IPv4 socket", cfg->store_fd);
    if (ntohs(a.sin_port) != cfg->master_port) { /* another port asked for (params.master_port): it wins */
      SHOAL_DEBUG("INIT", "SHOAL_STORE_FD=%d listens on port %d, the store port is %d: not used", cfg->store_fd,
                  ntohs(a.sin_port), cfg->master_port);
      goto own_socket;
    }
    /* Serve on a duplicate and leave the inherited descriptor open: a later
     * shoal_comm_init in this process, or the next program the rank's shell
     * runs (`sh -c 'prog1; prog2'`), serves the next rendezvous on it. */
    *fd = fcntl(cfg->store_fd, F_DUPFD_CLOEXEC, 0);
    if (*fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "SHOAL_STORE_FD=%d: dup: %s", cfg->store_fd, strerror(errno));
    *port = ntohs(a.sin_port);
    return 0;
  }
own_socket:;
  struct in_addr ip;
  int rc = shoal__boot_store_ip(cfg, &ip);
  if (rc) return rc;
  /* A loopback master binds loopback only; otherwise every interface. */
  if ((ntohl(ip.s_addr) >> 24) != 127) ip.s_addr = htonl(INADDR_ANY);
  return shoal__sock_listen(ip, cfg->master_port, fd, port);
}

static int init_world(const shoal_comm_params_t *params, const shoal__boot_cfg_t *cfg, shoal__world_t *w) {
  shoal__authkey_t key;
  shoal__auth_key(cfg->token, &key);
  shoal__deadline_t dl = shoal__deadline_in(cfg->connect_timeout_s);
  shoal__store_server_t *server = NULL;
  shoal__store_client_t sc = {.fd = -1};
  int listen_fd = -1, rc = 0;
  int store_port = cfg->master_port;
  shoal__boot_cfg_t c2 = *cfg;
  /* An interface named by SHOAL_SOCKET_IFNAME is checked first, on every rank: a rank that found none
   * after joining would leave the others waiting for the store until SHOAL_CONNECT_TIMEOUT. Without it the
   * address is the route to the store, known once connected. */
  struct in_addr adv;
  char how[160];
  if (cfg->ifname[0] &&
      (rc = shoal__boot_pick_addr(cfg->ifname, cfg->ifname_src, (struct in_addr){0}, &adv, how, sizeof how)))
    return shoal__err_prefix(rc, "rank %d: ", w->rank);
  if (w->rank == 0) {
    int sfd;
    if ((rc = store_listen(cfg, &sfd, &store_port))) return rc;
    if ((rc = shoal__store_server_start(sfd, &key, w->size, cfg->job_id, &server))) {
      close(sfd);
      return rc;
    }
    SHOAL_INFO("INIT", "rendezvous store listening on port %d", store_port);
    if (cfg->master_port == 0 && params && params->on_store_port) params->on_store_port(store_port, params->on_store_port_arg);
    c2.master_port = store_port;
  } else if (cfg->master_port == 0) {
    return shoal__seterr(SHOAL_ERR_CONFIG, "rank %d: master port 0 only works for rank 0 (the launcher must pass "
                         "the real port to the other ranks)", w->rank);
  }
  if ((rc = shoal__boot_store_connect(&c2, store_port, &key, dl, &sc))) {
    rc = shoal__err_prefix(rc, "rank %d: ", w->rank);
    goto stop_server;
  }
  if ((rc = shoal__store_join(&sc, w->rank, w->size, cfg->job_id, dl))) {
    rc = shoal__err_prefix(rc, "rank %d of %d: ", w->rank, w->size);
    goto close_client;
  }
  struct sockaddr_in local;
  socklen_t ll = sizeof local;
  getsockname(sc.fd, (struct sockaddr *)&local, &ll);
  if (!cfg->ifname[0] &&
      (rc = shoal__boot_pick_addr(cfg->ifname, cfg->ifname_src, local.sin_addr, &adv, how, sizeof how)))
    goto close_client;
  int lport;
  if ((rc = shoal__sock_listen(adv, 0, &listen_fd, &lport))) goto close_client; /* kernel buffers: see mesh.c */
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &adv, ip, sizeof ip);
  SHOAL_DEBUG("NET", "rank %d listens on %s:%d, chosen from %s", w->rank, ip, lport, how);
  if ((ntohl(adv.s_addr) >> 24) == 127 && w->size > 1 && strcmp(cfg->master_addr, "127.0.0.1") &&
      strcmp(cfg->master_addr, "localhost"))
    SHOAL_WARN("NET", "rank %d advertises loopback address %s although the store is at %s: ranks on other hosts "
               "cannot reach it (set SHOAL_SOCKET_IFNAME)", w->rank, ip, cfg->master_addr);
  if (w->rank == 0) {
    unsigned char idb[8];
    shoal__put_u64(idb, shoal__auth_random_u64() | 1);
    if ((rc = shoal__store_set(&sc, "world", idb, 8, dl))) goto close_listen;
  }
  char key_s[32], val[256];
  snprintf(key_s, sizeof key_s, "rank/%d", w->rank);
  snprintf(val, sizeof val, "%s:%d %s %s %d %s", ip, lport, cfg->hostname[0] ? cfg->hostname : "unknown",
           cfg->boot_id[0] ? cfg->boot_id : "unknown", (int)getpid(), cfg->rack[0] ? cfg->rack : "-");
  if ((rc = shoal__store_set(&sc, key_s, val, strlen(val), dl))) goto close_listen;
  unsigned char idb[16];
  size_t idl;
  if ((rc = shoal__store_get(&sc, "world", 1, idb, sizeof idb, &idl, dl))) goto close_listen;
  if (idl != 8) {
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "rank %d: bad world id in the store", w->rank);
    goto close_listen;
  }
  w->id = shoal__get_u64(idb);
  if ((rc = gather_peers(w, &sc, &c2, &key, dl))) goto close_listen;
  shoal__store_close(&sc);
  if ((rc = shoal__mesh_connect(w, listen_fd, &key, cfg->sockbuf, cfg->rcvbuf_remote, cfg->tcp_cc, dl)))
    goto close_listen;
  w->listen_fd = listen_fd; /* kept: shrink finds this rank there (elastic/) */
  w->cfg->master_port = store_port;
  shoal__store_server_stop(server); /* every peer has connected to rank 0, so all are done with the store */
  SHOAL_INFO("INIT", "rank %d of %d connected to all peers (world %016llx)", w->rank, w->size, (unsigned long long)w->id);
  return 0;
close_listen:
  close(listen_fd);
close_client:
  if (server && sc.fd >= 0) { /* tell the ranks still waiting why, instead of just closing the store */
    char why[1024];
    shoal__put_u32((unsigned char *)why, (uint32_t)-rc);
    size_t n = (size_t)snprintf(why + 4, sizeof why - 4, "%s", shoal_last_error());
    if (n > sizeof why - 5) n = sizeof why - 5;
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", shoal_last_error());
    shoal__store_set(&sc, SHOAL__STORE_ABORT_KEY, why, 4 + n, shoal__deadline_in(1.0));
    shoal__seterr(rc, "%s", keep);
  }
  shoal__store_close(&sc);
stop_server:
  shoal__store_server_stop(server);
  return rc;
}

int shoal_comm_init(const shoal_comm_params_t *params, shoal_comm_t **out) {
  shoal_comm_params_t defaults;
  if (!params) {
    shoal_comm_params_init(&defaults);
    params = &defaults;
  }
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_init: out is NULL");
  int join = 0;
  int rc0 = shoal__config_bool("SHOAL_JOIN", 0, &join);
  if (!rc0) rc0 = shoal__config_check();
  if (!rc0) rc0 = shoal__log_check();
  if (rc0) return rc0;
  if (join) return shoal_comm_join(params, out); /* a restarted rank enters the running job (elastic/grow.c) */
  shoal__boot_cfg_t cfg;
  shoal_algo_t algo_env;
  int rc = shoal__boot_resolve(params, &cfg);
  if (rc || (rc = shoal__algo_env(&algo_env))) return rc;
  shoal__log_set_rank(cfg.rank);
  SHOAL_INFO("INIT", "rank %d of %d (from %s); store %s:%d (address from %s, port from %s); timeout %g s, "
             "connect timeout %g s", cfg.rank, cfg.size, cfg.rank_src, cfg.master_addr, cfg.master_port,
             cfg.addr_src, cfg.port_src, cfg.timeout_s, cfg.connect_timeout_s);
  shoal__world_t *w = shoal__world_new(cfg.rank, cfg.size);
  if (!w) return shoal__seterr(SHOAL_ERR_NOMEM, "shoal_comm_init: out of memory");
  *w->cfg = cfg;
  shoal__auth_key(cfg.token, &w->key);
  shoal__peer_info_t *me = &w->peers[cfg.rank];
  snprintf(me->host, sizeof me->host, "%s", cfg.hostname);
  snprintf(me->boot_id, sizeof me->boot_id, "%s", cfg.boot_id);
  snprintf(me->rack, sizeof me->rack, "%s", cfg.rack[0] ? cfg.rack : "-");
  snprintf(me->addr, sizeof me->addr, "self");
  if (cfg.size > 1) {
    if ((rc = init_world(params, &cfg, w))) {
      shoal__world_free(w);
      return rc;
    }
  } else {
    w->id = shoal__auth_random_u64() | 1;
  }
  w->emu_delay_ns = (uint64_t)(cfg.emu_delay_us * 1000.0);
  w->spin_ns = (uint64_t)(cfg.spin_us * 1000.0);
  w->algo_env = algo_env;
  if (w->emu_delay_ns) SHOAL_INFO("NET", "emulating %.0f us of one-way latency on every message", cfg.emu_delay_us);
  shoal_comm_t *c = shoal__comm_new(w, w->id, cfg.rank, cfg.size, cfg.timeout_s);
  if (!c) {
    shoal__world_free(w);
    return shoal__seterr(SHOAL_ERR_NOMEM, "shoal_comm_init: out of memory");
  }
  if ((rc = shoal__world_start(c))) {
    shoal_comm_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

int shoal_comm_init_env(shoal_comm_t **out) { return shoal_comm_init(NULL, out); }

/* ---- split ---- */

typedef struct { int key, rank; } member_t;

static int member_cmp(const void *a, const void *b) {
  const member_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Bruck allgather of each rank's (color, key): ceil(log2 n) rounds of one
 * send and one receive, any n. tmp holds blocks of ranks r, r+1, ... */
static int split_allgather(shoal_comm_t *c, shoal__op_t *op, int32_t *all, shoal__req_t *reqs) {
  int n = c->size, r = c->rank, cnt = 1, rc = 0;
  int32_t stack_tmp[2 * 64];
  int32_t *tmp = n <= 64 ? stack_tmp : malloc((size_t)n * 2 * sizeof *tmp);
  if (!tmp) return shoal__seterr(SHOAL_ERR_NOMEM, "shoal_comm_split: out of memory");
  tmp[0] = all[2 * r];
  tmp[1] = all[2 * r + 1];
  for (int dist = 1; dist < n && !rc; dist *= 2) {
    int k = dist < n - dist ? dist : n - dist;
    rc = shoal__irecv(c, op, (r + dist) % n, &tmp[2 * cnt], (size_t)k * 8, &reqs[1]);
    if (!rc) rc = shoal__isend(c, op, (r - dist + n) % n, tmp, (size_t)k * 8, &reqs[0]);
    if (!rc) rc = shoal__waitall(c, op, reqs, 2);
    cnt += k;
  }
  for (int i = 0; i < n && !rc; i++) {
    all[2 * ((r + i) % n)] = tmp[2 * i];
    all[2 * ((r + i) % n) + 1] = tmp[2 * i + 1];
  }
  if (tmp != stack_tmp) free(tmp);
  return rc;
}

int shoal_comm_split(shoal_comm_t *c, int color, int key, shoal_comm_t **out) {
  if (!c || !out) return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_split: NULL argument"));
  if (color < 0 && color != SHOAL_UNDEFINED)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID,
                                               "shoal_comm_split: color %d must be >= 0 or SHOAL_UNDEFINED", color));
  shoal__op_t op = {.opcode = SHOAL__OP_SPLIT, .dtype = SHOAL_INT32, .count = 2};
  int rc = shoal__op_begin(c, &op);
  if (rc) return rc;
  int n = c->size;
  int32_t stack_all[2 * 64];
  shoal__req_t reqs[2];
  int32_t *all = n <= 64 ? stack_all : malloc((size_t)n * 2 * sizeof *all);
  member_t *mem = malloc((size_t)n * sizeof *mem);
  if (!all || !mem) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "shoal_comm_split: out of memory");
    goto free_bufs;
  }
  all[2 * c->rank] = color;
  all[2 * c->rank + 1] = key;
  /* Bruck: log2(n) rounds of one small message each way. (A direct
   * all-to-all, n-1 messages each way in one round, measured the same at 8
   * ranks on 2 cores and scales worse.) */
  rc = split_allgather(c, &op, all, reqs);
  rc = shoal__op_end(c, &op, rc);
  uint32_t split_no = c->nsplit++;
  if (rc) goto free_bufs;
  if (color == SHOAL_UNDEFINED) {
    *out = NULL;
    goto free_bufs;
  }
  int m = 0;
  for (int p = 0; p < n; p++)
    if (all[2 * p] == color) mem[m++] = (member_t){all[2 * p + 1], p};
  qsort(mem, (size_t)m, sizeof *mem, member_cmp);
  int myrank = -1;
  for (int i = 0; i < m; i++)
    if (mem[i].rank == c->rank) myrank = i;
  uint64_t ctx[3] = {c->id, split_no, (uint64_t)(uint32_t)color};
  static const uint8_t k[16] = "shoal-comm-split";
  uint64_t id = shoal__siphash24(k, ctx, sizeof ctx) | 1;
  shoal_comm_t *nc = shoal__comm_new(c->w, id, myrank, m, c->timeout_s);
  if (!nc) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "shoal_comm_split: out of memory");
    goto free_bufs;
  }
  for (int i = 0; i < m; i++) nc->wranks[i] = c->wranks[mem[i].rank];
  *out = nc;
free_bufs:
  if (all != stack_all) free(all);
  free(mem);
  return rc;
}
