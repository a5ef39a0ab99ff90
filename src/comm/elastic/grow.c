/* New processes entering a running job: shoal_comm_grow (the members admit whoever waits at the door,
 * bootstrap/door.c) and shoal_comm_join (a new process waits there to be admitted).
 *
 * At a grow (a collective all members call, at a point of their choosing) rank 0 takes whoever is waiting
 * at the door, the members learn them by a broadcast, everyone builds a new world (members first, in their
 * order, then the newcomers) and the members agree by an allreduce on the old communicator that every one
 * of them built it; rank 0 tells the newcomers the verdict. A grow that fails leaves the old communicator
 * as it was (unless a member died: then it is aborted, as any call would leave it); a newcomer whose
 * admission failed waits at the door again. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/bootstrap/sock.h"
#include "comm/bootstrap/store.h"
#include "comm/elastic/elastic.h"
#include "core/error.h"
#include "core/log.h"

#define MAX_JOINERS 16

/* ---- members ---- */


static int my_ip(const shoal__world_t *w, struct in_addr *ip) {
  int port;
  if (shoal__sock_parse_addr(w->peers[w->rank].addr, ip, &port) == 0) return 0;
  struct in_addr lo = {htonl(INADDR_LOOPBACK)};
  char how[160];
  return shoal__boot_pick_addr(w->cfg->ifname, w->cfg->ifname_src, lo, ip, how, sizeof how);
}

int shoal_comm_grow(shoal_comm_t *c, shoal_comm_t **out) {
  if (!c || !out) return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_grow: NULL argument"));
  shoal__world_t *w = c->w;
  /* every rank of a split finds this alike (none waits for another): refused, nothing aborted */
  if (c->id != w->id || c->size != w->size)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "shoal_comm_grow: needs a world communicator (from init, join, "
                         "shrink or grow), not a split");
  uint64_t t0 = shoal__now_ns();
  int n = c->size, me = c->rank, k = 0, rc;
  int fds[MAX_JOINERS];
  shoal__reg_t *regs = calloc((size_t)(n + MAX_JOINERS), sizeof *regs);
  if (!regs) return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_NOMEM, "shoal_comm_grow: out of memory"));
  int64_t hdr[2] = {0, 0};
  if (me == 0 && !w->aborted) {
    k = shoal__door_poll(w, fds, regs + n, MAX_JOINERS);
    hdr[0] = k;
    hdr[1] = (int64_t)(shoal__auth_random_u64() | 1);
  }
  shoal_comm_t *nc = NULL;
  int lfd = -1, brc = 0, total = n;
  if ((rc = shoal_broadcast(c, hdr, 2, SHOAL_INT64, 0))) goto close_joiners;
  if (hdr[0] == 0) {
    free(regs);
    *out = NULL;
    return 0;
  }
  total = n + (int)hdr[0];
  uint64_t id = (uint64_t)hdr[1];
  struct in_addr ip;
  if ((rc = my_ip(w, &ip)) || (rc = shoal__reform_listen(w->cfg, ip, w, &lfd, regs[me]))) {
    /* this rank cannot take part: fail the communicator, so the others stop too (they would wait) */
    rc = shoal__comm_reject(c, shoal__err_prefix(rc, "rank %d: grow: ", me));
    goto close_joiners;
  }
  if ((rc = shoal_allgather(c, SHOAL_IN_PLACE, regs, SHOAL__REG_BYTES, SHOAL_UINT8)) ||
      (rc = shoal_broadcast(c, regs + n, (size_t)(total - n) * SHOAL__REG_BYTES, SHOAL_UINT8, 0))) {
    close(lfd);
    goto close_joiners;
  }
  if (me == 0) { /* each newcomer: its rank and everyone's registration */
    size_t blen = 16 + (size_t)total * SHOAL__REG_BYTES;
    unsigned char *b = malloc(blen);
    for (int i = 0; b && i < k; i++) {
      shoal__put_u64(b, id);
      shoal__put_u32(b + 8, (uint32_t)(n + i));
      shoal__put_u32(b + 12, (uint32_t)total);
      memcpy(b + 16, regs, (size_t)total * SHOAL__REG_BYTES);
      shoal__store_frame_write(fds[i], SHOAL__STORE_ADMIT, b, blen, NULL, 0, shoal__deadline_in(SHOAL__DOOR_HS_S), "door");
    }
    free(b); /* a newcomer that misses its admission makes the build fail everywhere: nobody waits forever */
  }
  brc = shoal__reform_build(w, NULL, id, me, total, regs, lfd, c->timeout_s, shoal__deadline_in(c->timeout_s), &nc);
  char mine[512];
  snprintf(mine, sizeof mine, "%s", brc ? shoal_last_error() : "");
  int32_t ok = brc == 0;
  rc = shoal_allreduce(c, SHOAL_IN_PLACE, &ok, 1, SHOAL_INT32, SHOAL_MIN);
  if (me == 0) {
    unsigned char v[4];
    shoal__put_u32(v, (uint32_t)(!rc && ok));
    for (int i = 0; i < k; i++)
      shoal__store_frame_write(fds[i], SHOAL__STORE_VERDICT, v, 4, NULL, 0, shoal__deadline_in(SHOAL__DOOR_HS_S), "door");
  }
  if (!rc && !ok)
    rc = shoal__seterr(SHOAL_ERR_CONNECT, "rank %d: grow: the communicator with the %d new rank(s) could not be "
                       "built on every rank (this rank: %s); nothing changed: this communicator is still in use",
                       me, total - n, brc ? mine : "built");
  if (rc) {
    shoal_comm_destroy(nc);
    nc = NULL;
  }
close_joiners:
  for (int i = 0; i < k; i++) close(fds[i]);
  free(regs);
  if (rc) return rc;
  SHOAL_INFO("INIT", "rank %d: grow: %d new rank(s) admitted, now %d ranks (world %016llx), %.1f ms", me, total - n,
             total, (unsigned long long)nc->w->id, (double)(shoal__now_ns() - t0) * 1e-6);
  *out = nc;
  return 0;
}

/* ---- a new process ---- */

/* One try: wait at the door until admitted, build, hear the verdict. SHOAL_ERR_PEER_CLOSED: try again. */
static int join_once(const shoal__boot_cfg_t *cfg, const shoal__authkey_t *key, shoal__deadline_t dl,
                     shoal_comm_t **out) {
  shoal__store_client_t sc = {.fd = -1};
  int rc = shoal__boot_store_connect(cfg, cfg->master_port, key, dl, &sc);
  if (rc) return rc == SHOAL_ERR_PEER_CLOSED ? rc : shoal__err_prefix(rc, "the door of the job: ");
  struct sockaddr_in local;
  socklen_t ll = sizeof local;
  getsockname(sc.fd, (struct sockaddr *)&local, &ll);
  struct in_addr ip;
  char how[160];
  int lfd = -1;
  shoal__reg_t reg;
  if ((rc = shoal__boot_pick_addr(cfg->ifname, cfg->ifname_src, local.sin_addr, &ip, how, sizeof how)) ||
      (rc = shoal__reform_listen(cfg, ip, NULL, &lfd, reg)))
    goto close_client;
  size_t jl = strlen(cfg->job_id);
  unsigned char jh[1 + SHOAL__JOB_ID_MAX];
  jh[0] = (unsigned char)jl;
  memcpy(jh + 1, cfg->job_id, jl);
  char what[300];
  snprintf(what, sizeof what, "the door at %s", sc.addr);
  if ((rc = shoal__store_frame_write(sc.fd, SHOAL__STORE_ENTER, jh, 1 + jl, reg, SHOAL__REG_BYTES, dl, what)))
    goto close_listen;
  SHOAL_INFO("INIT", "waiting at %s to be admitted (registration %s)", what, reg);
  unsigned char head[16];
  int type = 0;
  size_t len = 0;
  /* the admission: read its head, then the registrations */
  unsigned char hdr8[8];
  if ((rc = shoal__sock_read_all(sc.fd, hdr8, 8, dl, what))) goto close_listen;
  type = hdr8[4];
  len = shoal__get_u32(hdr8);
  if (type == SHOAL__STORE_ERROR) { /* u32 minus the status, the reason */
    char why[600] = "";
    size_t keep = len < sizeof why - 1 ? len : sizeof why - 1;
    shoal__sock_read_all(sc.fd, why, keep, shoal__deadline_in(1.0), what);
    why[keep] = '\0';
    int st = keep >= 4 ? -(int)shoal__get_u32((unsigned char *)why) : SHOAL_ERR_CONFIG;
    if (st >= 0 || st <= SHOAL_ERR__LAST) st = SHOAL_ERR_CONFIG;
    rc = shoal__seterr(st, "%s refused this rank: %s", what, keep > 4 ? why + 4 : "");
    goto close_listen;
  }
  if (type != SHOAL__STORE_ADMIT || len < 16 || len > SHOAL__STORE_MAX_FRAME ||
      (rc = shoal__sock_read_all(sc.fd, head, 16, dl, what))) {
    if (!rc) rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: unexpected frame %d", what, type);
    goto close_listen;
  }
  uint64_t id = shoal__get_u64(head);
  int rank = (int)shoal__get_u32(head + 8), size = (int)shoal__get_u32(head + 12);
  if (size < 2 || rank < 1 || rank >= size || len != 16 + (size_t)size * SHOAL__REG_BYTES) {
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: malformed admission", what);
    goto close_listen;
  }
  shoal__reg_t *regs = malloc((size_t)size * sizeof *regs);
  if (!regs) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "join: out of memory");
    goto close_listen;
  }
  if ((rc = shoal__sock_read_all(sc.fd, regs, (size_t)size * SHOAL__REG_BYTES, dl, what))) {
    free(regs);
    goto close_listen;
  }
  for (int i = 0; i < size; i++) regs[i][SHOAL__REG_BYTES - 1] = '\0';
  shoal__log_set_rank(rank);
  shoal_comm_t *nc = NULL;
  int brc = shoal__reform_build(NULL, cfg, id, rank, size, regs, lfd, cfg->timeout_s,
                                shoal__deadline_in(cfg->timeout_s), &nc);
  lfd = -1; /* the world owns it now */
  free(regs);
  unsigned char v[8];
  rc = shoal__store_frame_read(sc.fd, &type, v, sizeof v, &len, shoal__deadline_in(cfg->timeout_s), what);
  if (!rc && (type != SHOAL__STORE_VERDICT || len != 4)) rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: no verdict", what);
  if (!rc && (!shoal__get_u32(v) || brc)) {
    SHOAL_WARN("INIT", "%s: the admission as rank %d of %d was abandoned (%s); waiting again", what, rank, size,
               brc ? shoal_last_error() : "another rank could not build the communicator");
    rc = SHOAL_ERR_PEER_CLOSED;
  }
  if (rc) {
    shoal_comm_destroy(nc);
    if (rc != SHOAL_ERR_PEER_CLOSED) rc = shoal__err_prefix(rc, "rank %d (new): ", rank);
    goto close_listen;
  }
  nc->w->joined = 1;
  SHOAL_INFO("INIT", "admitted as rank %d of %d (world %016llx)", rank, size, (unsigned long long)id);
  *out = nc;
close_listen:
  if (lfd >= 0) close(lfd);
close_client:
  shoal__store_close(&sc);
  return rc;
}

int shoal_comm_join(const shoal_comm_params_t *params, shoal_comm_t **out) {
  shoal_comm_params_t defaults;
  if (!params) {
    shoal_comm_params_init(&defaults);
    params = &defaults;
  }
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_join: out is NULL");
  shoal__boot_cfg_t cfg;
  int rc = shoal__boot_resolve(params, &cfg);
  if (rc) return rc;
  if (cfg.master_port == 0)
    return shoal__seterr(SHOAL_ERR_CONFIG, "join: master port 0: a new rank needs the job's real port");
  shoal__authkey_t key;
  shoal__auth_key(cfg.token, &key);
  shoal__deadline_t dl = shoal__deadline_in(cfg.connect_timeout_s);
  SHOAL_INFO("INIT", "joining the running job at %s:%d (deadline %.0f s, SHOAL_CONNECT_TIMEOUT)", cfg.master_addr,
             cfg.master_port, cfg.connect_timeout_s);
  for (;;) {
    rc = join_once(&cfg, &key, dl, out);
    if (rc != SHOAL_ERR_PEER_CLOSED) break;
    if (shoal__deadline_ms_left(dl) == 0) {
      rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "join: not admitted to the job at %s:%d within %.1f s "
                         "(SHOAL_CONNECT_TIMEOUT): its ranks admit new ones when they call shoal_comm_grow",
                         cfg.master_addr, cfg.master_port, cfg.connect_timeout_s);
      break;
    }
    shoal__sleep_s(0.2);
  }
  return rc;
}

int shoal_comm_joined(const shoal_comm_t *c) { return c && c->w->joined; }
