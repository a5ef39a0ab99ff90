/* TCP transport: nonblocking sockets driven by the p2p engine's poll loop. Header and
 * payload leave in one sendmsg (no copy of the payload) and arrive in one
 * readv straight into the user's buffer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/comm_impl.h"

static int broken_errno(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req, int e, const char *what) {
  char why[128];
  if (e == EPIPE || e == ECONNRESET)
    return shoal__conn_broken(w, conn, req, SHOAL_ERR_PEER_CLOSED, "connection reset by the peer: it died or aborted");
  snprintf(why, sizeof why, "%s: %s", what, strerror(e));
  return shoal__conn_broken(w, conn, req, SHOAL_ERR_IO, why);
}

static int tcp_send_progress(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  for (;;) {
    struct iovec iov[2];
    int n = 0;
    if (req->hdr_done < SHOAL__HDR_BYTES)
      iov[n++] = (struct iovec){req->hdr + req->hdr_done, (size_t)(SHOAL__HDR_BYTES - req->hdr_done)};
    if (req->done < req->bytes) iov[n++] = (struct iovec){(char *)req->buf + req->done, req->bytes - req->done};
    if (n == 0) return 1;
    size_t budget = conn->mon ? shoal__flowmon_budget(w, conn, req) : SIZE_MAX; /* the agent's pacing */
    if (budget == 0) return 0;
    for (int i = 0; i < n; i++) {
      if (iov[i].iov_len > budget) iov[i].iov_len = budget;
      budget -= iov[i].iov_len;
    }
    struct msghdr m = {0};
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)n;
    ssize_t k = sendmsg(conn->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return 0;
      return broken_errno(w, conn, req, errno, "send");
    }
    if (conn->mon) shoal__flowmon_sent(conn->mon, (size_t)k);
    size_t left = (size_t)k;
    if (req->hdr_done < SHOAL__HDR_BYTES) {
      size_t h = (size_t)(SHOAL__HDR_BYTES - req->hdr_done);
      if (left < h) h = left;
      req->hdr_done += (int)h;
      left -= h;
    }
    req->done += left;
  }
}

static int tcp_recv_progress(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  for (;;) {
    struct iovec iov[2];
    int n = 0;
    if (req->hdr_done < SHOAL__HDR_BYTES)
      iov[n++] = (struct iovec){req->hdr + req->hdr_done, (size_t)(SHOAL__HDR_BYTES - req->hdr_done)};
    if (req->done < req->bytes) iov[n++] = (struct iovec){(char *)req->buf + req->done, req->bytes - req->done};
    if (n == 0) return 1;
    ssize_t k = readv(conn->fd, iov, n);
    if (k == 0) return shoal__conn_broken(w, conn, req, SHOAL_ERR_PEER_CLOSED, NULL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return 0;
      return broken_errno(w, conn, req, errno, "recv");
    }
    size_t left = (size_t)k;
    if (req->hdr_done < SHOAL__HDR_BYTES) {
      size_t h = (size_t)(SHOAL__HDR_BYTES - req->hdr_done);
      if (left < h) h = left;
      req->hdr_done += (int)h;
      left -= h;
      req->done += left;
      if (req->hdr_done == SHOAL__HDR_BYTES) {
        int rc = shoal__recv_header(w, conn, req);
        if (rc < 0) return rc;
      }
    } else {
      req->done += left;
    }
  }
}

void shoal__tcp_close(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text, int boundary) {
  if (conn->fd < 0) return;
  if (boundary && wop) {
    unsigned char msg[SHOAL__HDR_BYTES + SHOAL__ABORT_TEXT_MAX];
    size_t tl = text ? strlen(text) : 0;
    if (tl > SHOAL__ABORT_TEXT_MAX) tl = SHOAL__ABORT_TEXT_MAX;
    shoal__hdr_pack(msg, wop, 0, 0, w->id, 0, 0, 0, tl);
    if (wop == SHOAL__WOP_ABORT && w->revoking) msg[7] = SHOAL__HDR_F_REVOKE;
    if (tl) memcpy(msg + SHOAL__HDR_BYTES, text, tl);
    ssize_t k = send(conn->fd, msg, SHOAL__HDR_BYTES + tl, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)k;
  }
  shutdown(conn->fd, SHUT_WR);
  if (wop == SHOAL__WOP_ABORT) {
    /* Keep the socket open until destroy: closing it with unread data would
     * send an RST, which can destroy the notice before the peer reads it.
     * Our FIN after the notice is what wakes peers blocked sending to us. */
    conn->zombie_fd = conn->fd;
    conn->fd = -1;
    conn->state = SHOAL__CONN_CLOSED;
    return;
  }
  /* Drain what the peer already sent so close() sends FIN, not RST (an RST
   * could destroy our notice before the peer reads it). Bounded. */
  char sink[4096];
  for (int i = 0; i < 256; i++) {
    ssize_t r = recv(conn->fd, sink, sizeof sink, MSG_DONTWAIT);
    if (r <= 0) break;
  }
  close(conn->fd);
  conn->fd = -1;
  conn->state = SHOAL__CONN_CLOSED;
}

static void tcp_shutdown(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text) {
  /* A notice only at a message boundary: mid-message it would be read as payload. */
  shoal__tcp_close(w, conn, wop, text, !conn->sq_head || conn->sq_head->hdr_done == 0);
}

static ssize_t tcp_peek(shoal__world_t *w, shoal__conn_t *conn, void *buf, size_t cap) {
  (void)w;
  return recv(conn->fd, buf, cap, MSG_PEEK | MSG_DONTWAIT);
}

const shoal__transport_t shoal__tcp_transport = {
    .name = "tcp",
    .send_progress = tcp_send_progress,
    .recv_progress = tcp_recv_progress,
    .shutdown = tcp_shutdown,
    .peek = tcp_peek,
    .peer_gone = NULL, /* the socket is the process's: a hang-up says it */
    .wait = NULL,      /* poll() on the socket wakes for its data */
};
