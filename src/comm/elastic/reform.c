/* What shrink and grow share: a fresh listener and its registration, and building a world from the
 * members' registrations (the same full mesh and owners as shoal_comm_init, without the store). */
#include "comm/elastic/elastic.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/bootstrap/mesh.h"
#include "comm/coll/algo.h"
#include "comm/bootstrap/sock.h"
#include "core/error.h"
#include "core/log.h"

/* The kernel may hand a fresh listener the port a lost rank of the old world listened on (it is free once
 * that process is gone). Shrink's coordinator would then take the connection that port accepts for the
 * lost rank being alive and wait for it until the deadline; so a port an old peer advertised on this
 * address is held aside (the kernel then offers another) and released once a clean one is bound. */
#define REFORM_HELD_MAX 8

static int was_a_peers(const shoal__world_t *was, const char *addr) {
  for (int r = 0; was && r < was->size; r++)
    if (r != was->rank && !strcmp(was->peers[r].addr, addr)) return 1;
  return 0;
}

int shoal__reform_listen(const shoal__boot_cfg_t *cfg, struct in_addr ip, const shoal__world_t *was, int *fd_out,
                         shoal__reg_t reg) {
  int fd, port, rc, held[REFORM_HELD_MAX], nheld = 0;
  char ip_s[INET_ADDRSTRLEN], addr[64];
  inet_ntop(AF_INET, &ip, ip_s, sizeof ip_s);
  for (;;) {
    if ((rc = shoal__sock_listen(ip, 0, &fd, &port))) goto close_held; /* kernel buffers: see mesh.c */
    snprintf(addr, sizeof addr, "%s:%d", ip_s, port);
    if (!was_a_peers(was, addr)) break;
    if (nheld == REFORM_HELD_MAX) {
      close(fd);
      rc = shoal__seterr(SHOAL_ERR_ADDR_IN_USE, "listen %s: the kernel offered %d ports in a row that ranks of "
                         "the old world listened on", ip_s, REFORM_HELD_MAX + 1);
      goto close_held;
    }
    held[nheld++] = fd;
  }
  memset(reg, 0, SHOAL__REG_BYTES);
  snprintf(reg, SHOAL__REG_BYTES, "%s %s %s %d %s", addr, cfg->hostname[0] ? cfg->hostname : "unknown",
           cfg->boot_id[0] ? cfg->boot_id : "unknown", (int)getpid(), cfg->rack[0] ? cfg->rack : "-");
  *fd_out = fd;
close_held:
  while (nheld > 0) close(held[--nheld]);
  return rc;
}

static int parse_reg(const shoal__reg_t reg, shoal__peer_info_t *p) {
  char tmp[SHOAL__REG_BYTES + 1];
  memcpy(tmp, reg, SHOAL__REG_BYTES);
  tmp[SHOAL__REG_BYTES] = '\0';
  p->pid = 0;
  snprintf(p->rack, sizeof p->rack, "-");
  struct in_addr ip;
  int port;
  if (sscanf(tmp, "%63s %63s %39s %d %31s", p->addr, p->host, p->boot_id, &p->pid, p->rack) < 3 ||
      shoal__sock_parse_addr(p->addr, &ip, &port))
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "malformed registration '%s'", tmp);
  return 0;
}

int shoal__reform_build(shoal__world_t *tmpl, const shoal__boot_cfg_t *cfg, uint64_t id, int rank, int n,
                        shoal__reg_t *regs, int lfd, double timeout_s, shoal__deadline_t dl, shoal_comm_t **out) {
  if (!cfg) cfg = tmpl->cfg;
  shoal__world_t *w = shoal__world_new(rank, n);
  if (!w) {
    close(lfd);
    return shoal__seterr(SHOAL_ERR_NOMEM, "out of memory");
  }
  *w->cfg = *cfg;
  shoal__auth_key(cfg->token, &w->key);
  w->listen_fd = lfd;
  w->id = id;
  w->emu_delay_ns = (uint64_t)(cfg->emu_delay_us * 1000.0);
  w->spin_ns = (uint64_t)(cfg->spin_us * 1000.0);
  int rc = 0;
  if (tmpl)
    w->algo_env = tmpl->algo_env;
  else if ((rc = shoal__algo_env(&w->algo_env))) {
    shoal__world_free(w);
    return rc;
  }
  for (int i = 0; i < n && !rc; i++) rc = parse_reg(regs[i], &w->peers[i]);
  if (rc) {
    shoal__world_free(w);
    return rc;
  }
  shoal_comm_t *c = shoal__comm_new(w, id, rank, n, timeout_s);
  if (!c) {
    shoal__world_free(w);
    return shoal__seterr(SHOAL_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < n; i++) c->wranks[i] = i;
  if (tmpl && tmpl->rank == 0 && rank == 0 && tmpl->door_fd >= 0) {
    w->door_fd = tmpl->door_fd;
    tmpl->door_fd = -1;
  }
  shoal__log_set_rank(rank);
  if (n > 1) rc = shoal__mesh_connect(w, lfd, &w->key, cfg->sockbuf, cfg->rcvbuf_remote, cfg->tcp_cc, dl);
  if (!rc) rc = shoal__world_start(c);
  if (rc) {
    /* the members are agreed on; one of them failed (died) while the world was being built: the
     * communicator exists, aborted, so that its first call reports it and shrink can run on it */
    char text[700];
    snprintf(text, sizeof text, "rank %d of the new communicator (world %016llx): %s", rank, (unsigned long long)id,
             shoal_last_error());
    if (!c->errmsg[0]) snprintf(c->errmsg, sizeof c->errmsg, "%s", text);
    c->aborted = 1;
    if (!w->aborted) shoal__world_abort(w, rc, text);
    shoal__seterr(rc, "%s", text);
  }
  *out = c;
  return rc;
}

static _Thread_local char reform_tag; /* its address identifies the calling thread */

int shoal__reform_own(shoal__world_t *w, const char *what) {
  uintptr_t me = (uintptr_t)&reform_tag, cur = 0;
  if (atomic_compare_exchange_strong(&w->owner, &cur, me) || cur == me) return 0;
  int rc = shoal__seterr(SHOAL_ERR_UNSUPPORTED, "rank %d: %s refused: another thread is inside a call on a "
                         "communicator of the same world (comm.h: one thread at a time per world)", w->rank, what);
  shoal__note_refusal(w);
  return rc;
}

void shoal__reform_release(shoal__world_t *w) {
  uintptr_t me = (uintptr_t)&reform_tag;
  atomic_compare_exchange_strong(&w->owner, &me, 0);
}
