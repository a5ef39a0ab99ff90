/* Public point-to-point calls (thin wrappers over the p2p engine) and a communicator's accessors (its
 * rank, size, error and timeout: the state the engine keeps). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "comm/comm_impl.h"
#include "comm/bootstrap/sock.h"
#include "core/error.h"

static int check_args(shoal_comm_t *c, const void *buf, size_t count, shoal_dtype_t dtype, const char *fn) {
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "%s: communicator is NULL", fn);
  if ((int)dtype < 0 || dtype >= SHOAL_DTYPE__COUNT)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: bad dtype %d", fn, (int)dtype));
  if (count && !buf)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: buffer is NULL for %zu elements", fn, count));
  if (buf == SHOAL_IN_PLACE)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: SHOAL_IN_PLACE is not a buffer (collectives "
                                               "only, as their send buffer)", fn));
  return 0;
}

static int check_peer(shoal_comm_t *c, int peer, const char *fn) {
  if (peer < 0 || peer >= c->size)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: peer %d out of range [0, %d)", fn, peer,
                                               c->size));
  return 0;
}

int shoal_send(shoal_comm_t *c, const void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag) {
  int rc = check_args(c, buf, count, dtype, "shoal_send");
  if (rc || (rc = check_peer(c, peer, "shoal_send"))) return rc;
  shoal__op_t op = {.opcode = SHOAL__OP_SEND, .dtype = (uint8_t)dtype, .tag = tag, .count = count};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  shoal__req_t r;
  rc = shoal__isend(c, &op, peer, buf, count * shoal__dtype_bytes(dtype), &r);
  if (!rc) rc = shoal__waitall(c, &op, &r, 1);
  return shoal__op_end(c, &op, rc);
}

int shoal_recv(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag) {
  int rc = check_args(c, buf, count, dtype, "shoal_recv");
  if (rc || (rc = check_peer(c, peer, "shoal_recv"))) return rc;
  shoal__op_t op = {.opcode = SHOAL__OP_SEND, .dtype = (uint8_t)dtype, .tag = tag, .count = count};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  shoal__req_t r;
  rc = shoal__irecv(c, &op, peer, buf, count * shoal__dtype_bytes(dtype), &r);
  if (!rc) rc = shoal__waitall(c, &op, &r, 1);
  return shoal__op_end(c, &op, rc);
}

int shoal_sendrecv(shoal_comm_t *c, const void *sendbuf, size_t sendcount, int dst, void *recvbuf, size_t recvcount,
                   int src, shoal_dtype_t dtype, int tag) {
  int rc = check_args(c, sendbuf, sendcount, dtype, "shoal_sendrecv");
  if (rc || (rc = check_args(c, recvbuf, recvcount, dtype, "shoal_sendrecv"))) return rc;
  if ((rc = check_peer(c, dst, "shoal_sendrecv")) || (rc = check_peer(c, src, "shoal_sendrecv"))) return rc;
  size_t es = shoal__dtype_bytes(dtype);
  /* The two directions carry different counts, so each has its own op copy. */
  shoal__op_t so = {.opcode = SHOAL__OP_SEND, .dtype = (uint8_t)dtype, .tag = tag, .count = sendcount};
  if ((rc = shoal__op_begin(c, &so))) return rc;
  shoal__op_t ro = so;
  ro.count = recvcount;
  shoal__req_t r[2];
  rc = shoal__irecv(c, &ro, src, recvbuf, recvcount * es, &r[1]);
  if (!rc) rc = shoal__isend(c, &so, dst, sendbuf, sendcount * es, &r[0]);
  if (!rc) rc = shoal__waitall(c, &so, r, 2);
  return shoal__op_end(c, &so, rc);
}

/* Is a message for (c, tag) at the head of world peer wp's stream? 1 yes,
 * 0 no or not yet, -1 something else is there (skip this peer), < -1 failure. */
static int head_matches(shoal_comm_t *c, const shoal__op_t *op, int p, int wp, int tag) {
  shoal__conn_t *cn = &c->w->conns[wp];
  unsigned char h[SHOAL__HDR_BYTES];
  ssize_t k = cn->tp->peek(c->w, cn, h, sizeof h);
  if (k < (ssize_t)sizeof h) {
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (cn->tp->peer_gone && cn->tp->peer_gone(c->w, cn))
        return shoal__comm_fail(c, SHOAL_ERR_PEER_CLOSED, op, p, "the peer's process (world rank %d) died or was "
                                "killed while this rank waited for a message from any peer", wp);
      return 0;
    }
    if (k > 0) return 0;
    int rc = shoal__conn_idle_event(c, op, cn, POLLRDHUP);
    return rc < 0 ? rc : -1;
  }
  if (shoal__get_u32(h) == SHOAL__WIRE_MAGIC && (h[4] == SHOAL__WOP_ABORT || h[4] == SHOAL__WOP_GOODBYE)) {
    int rc = shoal__conn_idle_event(c, op, cn, POLLIN);
    return rc < 0 ? rc : 0;
  }
  if (shoal__get_u32(h) == SHOAL__WIRE_MAGIC && h[4] == SHOAL__OP_SEND && shoal__get_u64(h + 8) == c->id &&
      (int32_t)shoal__get_u32(h + 20) == tag)
    return 1;
  return -1;
}

int shoal_recv_any(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int tag, int *src) {
  int rc = check_args(c, buf, count, dtype, "shoal_recv_any");
  if (rc) return rc;
  shoal__op_t op = {.opcode = SHOAL__OP_SEND, .dtype = (uint8_t)dtype, .tag = tag, .count = count};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  shoal__world_t *w = c->w;
  int from = -1;
  for (;;) {
    /* a message to self already queued? */
    for (shoal__req_t *s = w->self_sq_head; s && from < 0; s = s->next)
      if (s->comm == c && s->op.tag == tag) from = c->rank;
    int np = 0;
    for (int p = 0; p < c->size && from < 0; p++) {
      int wp = c->wranks[p];
      if (wp == w->rank || w->conns[wp].fd < 0 || w->conns[wp].rq_head) continue;
      int m = head_matches(c, &op, p, wp, tag);
      if (m < -1) return shoal__op_end(c, &op, m);
      if (m == 1) from = p;
      if (m == 0) {
        w->pfd[np] = (struct pollfd){w->conns[wp].fd, POLLIN | POLLRDHUP, 0};
        np++;
      }
    }
    if (from >= 0) break;
    int left = shoal__deadline_ms_left((shoal__deadline_t){op.deadline_ns});
    if (left == 0) {
      rc = shoal__comm_fail(c, SHOAL_ERR_TIMEOUT, &op, -1,
                            "recv_any: no message with tag %d from any peer within %.1f s (SHOAL_TIMEOUT)", tag,
                            c->timeout_s);
      return shoal__op_end(c, &op, rc);
    }
    for (int i = 0; i < w->nwaiters && left != 0; i++) /* data that does not wake poll (shared memory) */
      left = w->waiters[i]->wait(w, left, 1);
    if (poll(w->pfd, (nfds_t)np, left) < 0 && errno != EINTR)
      return shoal__op_end(c, &op, shoal__comm_fail(c, SHOAL_ERR_SYSTEM, &op, -1, "poll: %s", strerror(errno)));
  }
  shoal__req_t r;
  rc = shoal__irecv(c, &op, from, buf, count * shoal__dtype_bytes(dtype), &r);
  if (!rc) rc = shoal__waitall(c, &op, &r, 1);
  rc = shoal__op_end(c, &op, rc);
  if (!rc && src) *src = from;
  return rc;
}

/* ---- accessors ---- */

int shoal_comm_rank(const shoal_comm_t *c) { return c ? c->rank : -1; }
int shoal_comm_size(const shoal_comm_t *c) { return c ? c->size : -1; }
int shoal_comm_world_rank(const shoal_comm_t *c) { return c ? c->w->rank : -1; }
/* A communicator's own error, else its world's abort (an error on a split or another communicator of the
 * world aborted it: calls on c return SHOAL_ERR_ABORTED, and this names why). */
const char *shoal_comm_errmsg(const shoal_comm_t *c) {
  if (!c) return "";
  const char *refused = c->w ? shoal__thread_refusal(c->w) : NULL; /* this thread's call refused (comm.h) */
  if (refused) return refused;
  return !c->errmsg[0] && c->w && c->w->aborted ? c->w->abort_msg : c->errmsg;
}

int shoal_comm_set_timeout(shoal_comm_t *c, double seconds) {
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_set_timeout: communicator is NULL");
  if (!(seconds > 0) || seconds > 1e7)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_set_timeout: %g s is not in (0, 1e7]", seconds);
  c->timeout_s = seconds;
  return 0;
}
