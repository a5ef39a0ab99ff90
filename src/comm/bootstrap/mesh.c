/* The world's full mesh: every pair of ranks connects once and proves the
 * token with the peer handshake (handshake.h), the world id as its session;
 * a refused connection is logged with the reason. */
#include "comm/bootstrap/mesh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/bootstrap/handshake.h"
#include "comm/bootstrap/sock.h"
#include "core/error.h"
#include "core/log.h"

#define PEER_MAGIC 0x50484853u /* "SHHP" */
enum { HS_OK = SHOAL__HS_OK, HS_BAD_TOKEN = 1, HS_WRONG_WORLD = 2, HS_WRONG_RANK = 3 };

static int connect_peer(shoal__world_t *w, int j, const shoal__authkey_t *key, shoal__deadline_t dl) {
  char host[64];
  snprintf(host, sizeof host, "%s", w->peers[j].addr);
  char *colon = strrchr(host, ':');
  if (!colon) return shoal__seterr(SHOAL_ERR_PROTOCOL, "peer %d published a bad address '%s'", j, host);
  *colon = '\0';
  int port = atoi(colon + 1);
  struct in_addr ip;
  if (inet_pton(AF_INET, host, &ip) != 1)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "peer %d published a bad address '%s'", j, w->peers[j].addr);
  char what[96], ctxw[160];
  snprintf(what, sizeof what, "peer %d", j);
  snprintf(ctxw, sizeof ctxw, "rank %d -> peer %d (%s): handshake", w->rank, j, w->peers[j].addr);
  /* The peer listened before it registered, so the kernel accepts at once
   * even while the peer is busy: a refusal means it is gone. Retry briefly
   * (a few seconds), not for the whole connect deadline. */
  shoal__deadline_t cdl = shoal__deadline_in(3.0);
  if (cdl.at_ns > dl.at_ns) cdl = dl;
  int fd, rc = shoal__sock_connect(ip, port, cdl, what, &fd);
  if (rc)
    return shoal__err_prefix(rc, "rank %d: peer %d registered with the store but cannot be reached (did it die?): ",
                             w->rank, j);
  unsigned char hello[SHOAL__HS_HELLO_BYTES], ans[SHOAL__HS_ANSWER_BYTES], verdict[SHOAL__HS_VERDICT_BYTES];
  uint8_t nc[SHOAL__NONCE_BYTES];
  shoal__hs_link_t link = {PEER_MAGIC, w->rank, j, w->id};
  if ((rc = shoal__sock_read_all(fd, hello, sizeof hello, dl, ctxw))) goto close_fd;
  if (shoal__hs_answer(key, &link, hello, nc, ans)) {
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: %s is not a shoal rank (bad greeting)", ctxw, w->peers[j].addr);
    goto close_fd;
  }
  if ((rc = shoal__sock_write_all(fd, ans, sizeof ans, dl, ctxw))) goto close_fd;
  rc = shoal__sock_read_all(fd, verdict, sizeof verdict, dl, ctxw);
  if (rc == SHOAL_ERR_PEER_CLOSED) {
    rc = shoal__seterr(SHOAL_ERR_AUTH, "%s: the peer closed the connection during authentication", ctxw);
    goto close_fd;
  }
  if (rc) goto close_fd;
  int proved;
  uint32_t st = shoal__hs_read_verdict(key, &link, hello, nc, verdict, &proved);
  if (st == HS_BAD_TOKEN) {
    rc = shoal__seterr(SHOAL_ERR_AUTH, "%s: refused: wrong SHOAL_TOKEN (this rank's token differs from the peer's)",
                       ctxw);
    goto close_fd;
  }
  if (st != HS_OK) {
    rc = shoal__seterr(SHOAL_ERR_CONNECT, "%s: refused: %s", ctxw,
                       st == HS_WRONG_WORLD ? "the peer belongs to another job (different world id)"
                                            : "the peer does not expect this rank (duplicate rank numbers?)");
    goto close_fd;
  }
  if (!proved) {
    rc = shoal__seterr(SHOAL_ERR_AUTH, "%s: the peer failed to prove it knows SHOAL_TOKEN", ctxw);
    goto close_fd;
  }
  w->conns[j].fd = fd;
  return 0;
close_fd:
  close(fd);
  return rc;
}

/* The acceptor's side runs every pending handshake at once from one poll()
 * loop: a connection that opens the port and says nothing (a port scan, a
 * stray client) only holds its own slot until its own deadline. */
#define HS_TIMEOUT_S 5.0 /* per accepted connection */
#define MAX_PENDING 64   /* pending handshakes; beyond, the oldest is dropped */

typedef struct pending {
  int fd;
  uint64_t deadline_ns;
  uint8_t na[SHOAL__NONCE_BYTES];
  unsigned char ans[SHOAL__HS_ANSWER_BYTES];
  size_t got;
  char src[64];
} pending_t;

static void pend_drop(shoal__world_t *w, pending_t *pd, int *np, int i, const char *why) {
  SHOAL_WARN("NET", "rank %d: refused connection from %s: %s", w->rank, pd[i].src, why);
  close(pd[i].fd);
  pd[i] = pd[--*np];
}

/* A complete answer: check it, send the verdict; on success the peer's rank, else -1 and a reason. */
static int verify_answer(shoal__world_t *w, pending_t *p, const shoal__authkey_t *key, char *why, size_t cap) {
  unsigned char verdict[SHOAL__HS_VERDICT_BYTES];
  shoal__hs_link_t l;
  int mac_ok = shoal__hs_read_answer(key, PEER_MAGIC, p->na, p->ans, &l);
  if (mac_ok < 0) {
    snprintf(why, cap, "bad magic in the answer: not a shoal rank");
    return -1;
  }
  int from = l.from, to = l.to;
  uint32_t st = HS_OK;
  if (!mac_ok) {
    st = HS_BAD_TOKEN;
    snprintf(why, cap, "wrong SHOAL_TOKEN (claims to be rank %d)", from);
  } else if (l.session != w->id) {
    st = HS_WRONG_WORLD;
    snprintf(why, cap, "rank %d of another job (world id %016llx, ours %016llx)", from, (unsigned long long)l.session,
             (unsigned long long)w->id);
  } else if (to != w->rank || from <= w->rank || from >= w->size || w->conns[from].fd >= 0) {
    st = HS_WRONG_RANK;
    snprintf(why, cap, "unexpected rank pair %d -> %d", from, to);
  }
  shoal__hs_verdict(key, st, p->na, p->ans, verdict);
  int wrc = shoal__sock_write_all(p->fd, verdict, sizeof verdict, shoal__deadline_in(1.0), "handshake");
  if (st != HS_OK) return -1;
  if (wrc) {
    snprintf(why, cap, "rank %d vanished during the handshake", from);
    return -1;
  }
  return from;
}

static int accept_all(shoal__world_t *w, int listen_fd, const shoal__authkey_t *key, shoal__deadline_t dl) {
  int need = w->size - 1 - w->rank, np = 0, rc = 0;
  if (need <= 0) return 0;
  pending_t *pd = calloc(MAX_PENDING, sizeof *pd);
  struct pollfd *pf = calloc(MAX_PENDING + 1, sizeof *pf);
  if (!pd || !pf) {
    free(pd), free(pf);
    return shoal__seterr(SHOAL_ERR_NOMEM, "rank %d: out of memory", w->rank);
  }
  shoal__sock_set_nonblock(listen_fd);
  while (need > 0) {
    uint64_t now = shoal__now_ns();
    for (int i = np - 1; i >= 0; i--)
      if (now >= pd[i].deadline_ns) pend_drop(w, pd, &np, i, "no valid answer to the greeting within the handshake "
                                                              "timeout (5 s)");
    if (now >= dl.at_ns) {
      char missing[256] = "";
      size_t used = 0;
      int nmiss = 0;
      for (int j = w->rank + 1; j < w->size && used < sizeof missing - 16; j++)
        if (w->conns[j].fd < 0) {
          used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", j);
          nmiss++;
        }
      rc = shoal__seterr(SHOAL_ERR_TIMEOUT,
                         "rank %d: rank%s %s registered with the store but did not connect to %s within "
                         "SHOAL_CONNECT_TIMEOUT (died, firewall, or a wrong SHOAL_SOCKET_IFNAME?)",
                         w->rank, nmiss > 1 ? "s" : "", missing, w->peers[w->rank].addr);
      break;
    }
    uint64_t until = dl.at_ns;
    for (int i = 0; i < np; i++)
      if (pd[i].deadline_ns < until) until = pd[i].deadline_ns;
    int ms = (int)((until - now + 999999) / 1000000);
    pf[0] = (struct pollfd){listen_fd, POLLIN, 0};
    for (int i = 0; i < np; i++) pf[1 + i] = (struct pollfd){pd[i].fd, POLLIN, 0};
    int pr = poll(pf, (nfds_t)(1 + np), ms > 1000 ? 1000 : ms);
    if (pr < 0 && errno != EINTR) {
      rc = shoal__seterr(SHOAL_ERR_SYSTEM, "rank %d: poll: %s", w->rank, strerror(errno));
      break;
    }
    if (pr <= 0) continue;
    /* pending handshakes, from the back (pend_drop moves the last one into the hole) */
    for (int i = np - 1; i >= 0; i--) {
      if (!pf[1 + i].revents) continue;
      pending_t *p = &pd[i];
      ssize_t k = recv(p->fd, p->ans + p->got, sizeof p->ans - p->got, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (k <= 0) {
        pend_drop(w, pd, &np, i, k == 0 ? "closed before answering the greeting" : "connection error");
        continue;
      }
      p->got += (size_t)k;
      if (p->got < sizeof p->ans) continue;
      char why[256];
      int peer = verify_answer(w, p, key, why, sizeof why);
      if (peer < 0) {
        pend_drop(w, pd, &np, i, why);
        continue;
      }
      w->conns[peer].fd = p->fd;
      pd[i] = pd[--np];
      need--;
    }
    if (pf[0].revents & POLLIN) {
      for (;;) { /* every queued connection: a scan must not starve a rank behind it */
        struct sockaddr_in from;
        socklen_t al = sizeof from;
        int fd = accept4(listen_fd, (struct sockaddr *)&from, &al, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        if (np == MAX_PENDING) pend_drop(w, pd, &np, 0, "too many connections waiting for a handshake");
        pending_t *p = &pd[np];
        memset(p, 0, sizeof *p);
        p->fd = fd;
        shoal__sock_addr_str(&from, p->src, sizeof p->src);
        shoal__sock_tune(fd, 0);
        uint64_t hd = shoal__now_ns() + (uint64_t)(HS_TIMEOUT_S * 1e9);
        p->deadline_ns = hd < dl.at_ns ? hd : dl.at_ns;
        unsigned char hello[SHOAL__HS_HELLO_BYTES];
        shoal__hs_hello(PEER_MAGIC, p->na, hello);
        np++;
        if (send(fd, hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof hello)
          pend_drop(w, pd, &np, np - 1, "cannot send the greeting");
      }
    }
  }
  for (int i = 0; i < np; i++) close(pd[i].fd);
  free(pd);
  free(pf);
  return rc;
}

int shoal__mesh_connect(shoal__world_t *w, int listen_fd, const shoal__authkey_t *key, long sockbuf,
                        long rcvbuf_remote, const char *cc, shoal__deadline_t dl) {
  int rc;
  for (int j = 0; j < w->rank; j++)
    if ((rc = connect_peer(w, j, key, dl))) return rc;
  if ((rc = accept_all(w, listen_fd, key, dl))) return rc;
  char used[32] = "";
  for (int j = 0; j < w->size; j++) {
    if (j == w->rank) continue;
    shoal__sock_set_nonblock(w->conns[j].fd);
    shoal__sock_tune(w->conns[j].fd, sockbuf);
    /* Across hosts the receive window is the only brake on a peer that sends before this rank posts the
     * receive: with 4 MiB a peer already in its next collective pushed a whole message onto links the
     * current collective was using, and took half their bandwidth from it (docs/comm.md). Set after the
     * handshake, it holds only on a socket that began with the kernel's buffers: one accepted from a
     * listener at 4 MiB kept a window of ~4 MB over the 128 KiB, the first large messages overran the
     * buffer and the sender waited out a 200 ms retransmission timeout. So the listeners (comm.c, reform.c)
     * keep the kernel's buffers, and every peer socket, accepted or connected, is sized here. */
    if (rcvbuf_remote > 0 && !shoal__peer_same_host(&w->peers[w->rank], &w->peers[j]))
      shoal__sock_set_rcvbuf(w->conns[j].fd, rcvbuf_remote);
    if ((rc = shoal__sock_congestion(w->conns[j].fd, cc, used, sizeof used))) return rc;
  }
  if (used[0]) SHOAL_DEBUG("NET", "rank %d: peer sockets use TCP congestion control %s (SHOAL_TCP_CONGESTION=%s)",
                           w->rank, used, cc);
  return 0;
}
