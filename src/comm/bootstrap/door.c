/* The door of a running job (rank 0 of its world keeps it): a listening socket at the job's master address
 * and port (where the rendezvous store was), opened on the first grow: the socket `shoal launch` hands
 * every rank (SHOAL_STORE_FD), else the master port bound again on rank 0's host. A new process
 * (shoal_comm_join, elastic/grow.c) connects there and waits, authenticated like a store client
 * (SHOAL_TOKEN, challenge-response), with its job id and the registration of its own listener. */
#include "comm/bootstrap/door.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/bootstrap/sock.h"
#include "comm/bootstrap/store.h"
#include "comm/comm_impl.h"
#include "core/error.h"
#include "core/log.h"

static int door_open(shoal__world_t *w) {
  if (w->door_fd >= 0) return 0;
  const shoal__boot_cfg_t *cfg = w->cfg;
  int fd = -1, rc = 0;
  char where[300];
  if (cfg->store_fd >= 0) { /* `shoal launch`: the store socket, still bound where the store was */
    int acc = 0;
    socklen_t l = sizeof acc;
    if (getsockopt(cfg->store_fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) != 0 || !acc)
      return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_STORE_FD=%d: not a listening socket", cfg->store_fd);
    fd = fcntl(cfg->store_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "SHOAL_STORE_FD=%d: dup: %s", cfg->store_fd, strerror(errno));
    snprintf(where, sizeof where, "the launcher's store socket (SHOAL_STORE_FD, %s:%d)", cfg->master_addr,
             cfg->master_port);
  } else {
    struct in_addr ip;
    if ((rc = shoal__boot_store_ip(cfg, &ip))) return rc;
    if ((ntohl(ip.s_addr) >> 24) != 127) ip.s_addr = htonl(INADDR_ANY);
    int port;
    if ((rc = shoal__sock_listen(ip, cfg->master_port, &fd, &port))) return rc;
    snprintf(where, sizeof where, "%s:%d on host %s (new ranks reach it with SHOAL_MASTER_ADDR naming this host)",
             (ntohl(ip.s_addr) >> 24) == 127 ? cfg->master_addr : "*", port, cfg->hostname);
  }
  shoal__sock_set_nonblock(fd);
  w->door_fd = fd;
  SHOAL_INFO("INIT", "rank 0: the door for new ranks is open at %s", where);
  return 0;
}

/* ---- the handshakes at the door: every waiting connection at once, each with its own deadline ---- */

#define DOOR_PEND 64   /* connections in handshake at once (more wait in the listener's queue) */
#define DOOR_ACCEPT 512 /* connections taken per door call: a flood ends the call, not the job */
#define FRAME_HDR 8
#define ENTER_MAX (1 + SHOAL__JOB_ID_MAX + SHOAL__REG_BYTES)

typedef struct door_conn {
  int fd;
  int stage;         /* 0: waiting for AUTH; 1: for ENTER */
  uint64_t until;    /* its handshake's deadline */
  uint8_t ns[SHOAL__NONCE_BYTES];
  unsigned char in[FRAME_HDR + ENTER_MAX];
  size_t got;
  char src[64];
} door_conn_t;

/* What became of the connections of one door call, for one summary line. */
typedef struct door_tally {
  int silent, closed, refused;
} door_tally_t;

/* One small frame on a fresh socket: it fits in the send buffer, so a stranger that does not read cannot
 * make rank 0 wait. 0, or -1 (the connection is dropped). */
static int send_frame(int fd, int type, const void *p1, size_t n1, const void *p2, size_t n2) {
  unsigned char b[FRAME_HDR + 600];
  if (n1 + n2 > sizeof b - FRAME_HDR) return -1;
  memset(b, 0, FRAME_HDR);
  shoal__put_u32(b, (uint32_t)(n1 + n2));
  b[4] = (unsigned char)type;
  if (n1) memcpy(b + FRAME_HDR, p1, n1);
  if (n2) memcpy(b + FRAME_HDR + n1, p2, n2);
  ssize_t k = send(fd, b, FRAME_HDR + n1 + n2, MSG_NOSIGNAL | MSG_DONTWAIT);
  return k == (ssize_t)(FRAME_HDR + n1 + n2) ? 0 : -1;
}

/* A refusal the newcomer is told (u32 minus the status, the reason), and logged. */
static void refuse(door_conn_t *d, int status, const char *why) {
  unsigned char st[4];
  shoal__put_u32(st, (uint32_t)-status);
  send_frame(d->fd, SHOAL__STORE_ERROR, st, 4, why, strlen(why));
  SHOAL_WARN("INIT", "rank 0: door: %s: %s", d->src, why);
}

/* d's AUTH frame: the store's challenge-response. 0: proved, AUTH_OK sent; -1: refused or dropped. */
static int on_auth(shoal__world_t *w, door_conn_t *d, int type, const unsigned char *p, size_t n) {
  if (type != SHOAL__STORE_AUTH || n != SHOAL__NONCE_BYTES + 8) {
    SHOAL_WARN("INIT", "rank 0: door: %s: no authentication answer: dropped", d->src);
    return -1;
  }
  if (shoal__get_u64(p + SHOAL__NONCE_BYTES) != shoal__auth_mac(&w->key, 'C', d->ns, p, NULL, 0)) {
    static const char why[] = "wrong SHOAL_TOKEN (this job and the new rank were given different tokens)";
    send_frame(d->fd, SHOAL__STORE_AUTH_FAIL, why, sizeof why - 1, NULL, 0);
    SHOAL_WARN("INIT", "rank 0: door: %s: wrong token: refused", d->src);
    return -1;
  }
  unsigned char ok[8];
  shoal__put_u64(ok, shoal__auth_mac(&w->key, 'A', p, d->ns, NULL, 0));
  return send_frame(d->fd, SHOAL__STORE_AUTH_OK, ok, 8, NULL, 0);
}

/* d's ENTER frame: its job id checked, its registration into reg. 0, or -1 (refused). */
static int on_enter(shoal__world_t *w, door_conn_t *d, int type, const unsigned char *p, size_t n, shoal__reg_t reg) {
  if (type != SHOAL__STORE_ENTER || n < 1 || n != 1u + p[0] + SHOAL__REG_BYTES || p[0] > SHOAL__JOB_ID_MAX) {
    SHOAL_WARN("INIT", "rank 0: door: %s: not a new rank (frame %d of %zu bytes): dropped", d->src, type, n);
    return -1;
  }
  char job[SHOAL__JOB_ID_MAX + 1];
  memcpy(job, p + 1, p[0]);
  job[p[0]] = '\0';
  if (strcmp(job, w->cfg->job_id)) {
    char why[400];
    snprintf(why, sizeof why, "this door belongs to job '%s' and the new rank to job '%s' (SHOAL_JOB_ID): "
             "two jobs on one port?", w->cfg->job_id, job);
    refuse(d, SHOAL_ERR_CONFIG, why);
    return -1;
  }
  memcpy(reg, p + 1 + p[0], SHOAL__REG_BYTES);
  reg[SHOAL__REG_BYTES - 1] = '\0';
  return 0;
}

/* Bytes arrived on d. 1: the handshake goes on; 0: a newcomer entered (its registration in reg); -1: the
 * connection is over (closed, refused or malformed; counted in t). */
static int door_read(shoal__world_t *w, door_conn_t *d, shoal__reg_t reg, door_tally_t *t) {
  for (;;) {
    if (d->got >= FRAME_HDR && (shoal__get_u32(d->in) > ENTER_MAX || d->in[5] || d->in[6] || d->in[7])) {
      SHOAL_WARN("INIT", "rank 0: door: %s: malformed frame (not a shoal rank?): dropped", d->src);
      t->refused++;
      return -1;
    }
    size_t want = d->got < FRAME_HDR ? FRAME_HDR : FRAME_HDR + shoal__get_u32(d->in);
    if (d->got >= FRAME_HDR && d->got == want) break; /* a whole frame */
    ssize_t k = recv(d->fd, d->in + d->got, want - d->got, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
    if (k <= 0) {
      t->closed++;
      return -1;
    }
    d->got += (size_t)k;
  }
  int type = d->in[4], rc;
  size_t n = d->got - FRAME_HDR;
  d->got = 0;
  if (d->stage == 0) rc = on_auth(w, d, type, d->in + FRAME_HDR, n);
  else rc = on_enter(w, d, type, d->in + FRAME_HDR, n, reg);
  if (rc) {
    t->refused++;
    return -1;
  }
  return d->stage++ == 0 ? 1 : 0;
}

/* A new connection at the door: its challenge, its deadline. 0, or -1 (dropped). */
static int door_greet(door_conn_t *d, int fd, const struct sockaddr_in *a, uint64_t until) {
  memset(d, 0, sizeof *d);
  d->fd = fd;
  d->until = until;
  shoal__sock_addr_str(a, d->src, sizeof d->src);
  shoal__sock_tune(fd, 0);
  shoal__auth_random(d->ns, sizeof d->ns);
  unsigned char ch[4 + SHOAL__NONCE_BYTES];
  shoal__put_u32(ch, SHOAL__STORE_MAGIC);
  memcpy(ch + 4, d->ns, SHOAL__NONCE_BYTES);
  return send_frame(fd, SHOAL__STORE_CHALLENGE, ch, sizeof ch, NULL, 0);
}

/* Serve everyone waiting at the door now, all handshakes at once, for at most SHOAL__DOOR_SERVE_S: up to max
 * newcomers that entered (their connections in fds, registrations in regs). Connections still silent at
 * their deadline and those beyond the call's bounds are dropped (a newcomer among them tries again). */
static int door_serve_all(shoal__world_t *w, int *fds, shoal__reg_t *regs, int max) {
  door_conn_t pend[DOOR_PEND];
  struct pollfd pf[DOOR_PEND + 1];
  door_tally_t t = {0};
  int np = 0, k = 0, accepted = 0, listening = 1;
  uint64_t end = shoal__now_ns() + (uint64_t)(SHOAL__DOOR_SERVE_S * 1e9);
  for (;;) {
    while (listening && np < DOOR_PEND && k + np < max && accepted < DOOR_ACCEPT) {
      struct sockaddr_in a;
      socklen_t al = sizeof a;
      int fd = accept4(w->door_fd, (struct sockaddr *)&a, &al, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        listening = 0; /* nobody else waiting now; looked at again once the handshakes are done */
        break;
      }
      accepted++;
      if (door_greet(&pend[np], fd, &a, end)) {
        close(fd);
        t.closed++;
      } else {
        np++;
      }
    }
    uint64_t now = shoal__now_ns();
    if (!np || now >= end) break;
    int n = 0;
    for (int i = 0; i < np; i++) pf[n++] = (struct pollfd){pend[i].fd, POLLIN, 0};
    if (k + np < max && accepted < DOOR_ACCEPT) pf[n++] = (struct pollfd){w->door_fd, POLLIN, 0};
    int ms = (int)((end - now + 999999) / 1000000);
    if (poll(pf, (nfds_t)n, ms) < 0 && errno != EINTR) break;
    if (n > np && (pf[np].revents & POLLIN)) listening = 1;
    for (int i = np - 1; i >= 0; i--) { /* from the back: a finished one is replaced by the last */
      if (!pf[i].revents) continue;
      int rc = door_read(w, &pend[i], regs[k], &t);
      if (rc == 1) continue;
      if (rc == 0) {
        SHOAL_INFO("INIT", "rank 0: a new rank is waiting at the door: %s", regs[k]);
        fds[k++] = pend[i].fd;
      } else {
        close(pend[i].fd);
      }
      pend[i] = pend[--np];
    }
  }
  t.silent += np;
  for (int i = 0; i < np; i++) close(pend[i].fd);
  if (t.silent || t.closed)
    SHOAL_WARN("INIT", "rank 0: door: %d connection(s) gave no answer within %.1f s and %d closed before the "
               "handshake: dropped (strangers at the job's port?)%s", t.silent, SHOAL__DOOR_SERVE_S, t.closed,
               accepted >= DOOR_ACCEPT ? "; more were left waiting" : "");
  return k;
}

int shoal__door_poll(shoal__world_t *w, int *fds, shoal__reg_t *regs, int max) {
  if (door_open(w)) {
    if (!w->door_warned)
      SHOAL_WARN("INIT", "rank 0: cannot open the door for new ranks: %s; new ranks cannot enter this job",
                 shoal_last_error());
    w->door_warned = 1;
    return 0;
  }
  return door_serve_all(w, fds, regs, max);
}

void shoal__door_finish(shoal__world_t *w) {
  if (w->rank != 0 || w->aborted || w->door_fd < 0) return;
  /* whoever waits now would wait for nothing: tell them */
  int fds[DOOR_PEND];
  shoal__reg_t *regs = malloc(DOOR_PEND * sizeof *regs);
  if (!regs) return;
  int k = door_serve_all(w, fds, regs, DOOR_PEND);
  static const char why[] = "the job has finished: there is nothing to join";
  unsigned char st[4];
  shoal__put_u32(st, (uint32_t)-SHOAL_ERR_NOT_FOUND);
  for (int i = 0; i < k; i++) {
    send_frame(fds[i], SHOAL__STORE_ERROR, st, 4, why, sizeof why - 1);
    close(fds[i]);
  }
  free(regs);
}
