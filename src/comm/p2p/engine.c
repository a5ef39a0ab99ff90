/* The point-to-point engine behind p2p.h: per-connection FIFO queues of
 * caller-owned requests, driven by one poll() loop over every connection of
 * the world, with header checks, deadlines and abort propagation. */
#include "comm/p2p/p2p.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_impl.h"
#include "comm/bootstrap/note.h"
#include "comm/bootstrap/sock.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

static const char *const opnames[SHOAL__OP__COUNT] = {"none",      "allreduce", "broadcast", "reduce",
                                                       "reduce_scatter", "allgather", "barrier",   "send/recv",
                                                       "split",     "internal",  "partial-allreduce",
                                                       "gather",    "scatter",   "alltoall"};

const char *shoal__opcode_name(int op) {
  if (op >= 0 && op < SHOAL__OP__COUNT) return opnames[op];
  if (op == SHOAL__WOP_ABORT) return "abort-notice";
  if (op == SHOAL__WOP_GOODBYE) return "goodbye";
  return "unknown-op";
}

/* A dtype off the wire, for messages: the public names (dtype.c), "unknown-dtype" for a byte no dtype has. */
const char *shoal__dtype_label(int dtype) {
  return dtype >= 0 && dtype < SHOAL_DTYPE__COUNT ? shoal_dtype_name((shoal_dtype_t)dtype) : "unknown-dtype";
}

size_t shoal__dtype_bytes(int dtype) { return dtype >= 0 ? shoal_dtype_size((shoal_dtype_t)dtype) : 0; }

void shoal__hdr_pack(unsigned char *h, int opcode, int dtype, int redop, uint64_t comm_id, uint32_t seq, int32_t tag,
                     uint64_t count, uint64_t bytes) {
  shoal__put_u32(h, SHOAL__WIRE_MAGIC);
  h[4] = (unsigned char)opcode;
  h[5] = (unsigned char)dtype;
  h[6] = (unsigned char)redop;
  h[7] = 0;
  shoal__put_u64(h + 8, comm_id);
  shoal__put_u32(h + 16, seq);
  shoal__put_u32(h + 20, (uint32_t)tag);
  shoal__put_u64(h + 24, count);
  shoal__put_u64(h + 32, bytes);
}

/* ---- error messages ---- */

int shoal__comm_rank(const shoal_comm_t *c) { return c->rank; }
int shoal__comm_size(const shoal_comm_t *c) { return c->size; }

static int comm_rank_of(const shoal_comm_t *c, int wrank) {
  for (int i = 0; i < c->size; i++)
    if (c->wranks[i] == wrank) return i;
  return -1;
}

static void rank_desc(const shoal_comm_t *c, char *out, size_t cap) {
  if (c->w->size != c->size || c->id != c->w->id)
    snprintf(out, cap, "rank %d (world rank %d)", c->rank, c->w->rank);
  else
    snprintf(out, cap, "rank %d", c->rank);
}

static void peer_desc(const shoal_comm_t *c, int peer, char *out, size_t cap) {
  int wr = c->wranks[peer];
  if (c->w->size != c->size || c->id != c->w->id)
    snprintf(out, cap, "peer %d (world rank %d, %s)", peer, wr, c->w->peers[wr].addr);
  else
    snprintf(out, cap, "peer %d (%s)", peer, c->w->peers[wr].addr);
}

/* dir: '<' receiving from peer, '>' sending to peer, 0 neither. */
static int vfail(shoal_comm_t *c, int status, const shoal__op_t *op, int peer, int dir, const char *fmt, va_list ap) {
  if (!c->errmsg[0] && !c->w->aborted) {
    char me[64], who[128] = "", opd[96] = "", body[640];
    rank_desc(c, me, sizeof me);
    if (peer >= 0 && peer < c->size) {
      char pd[112];
      peer_desc(c, peer, pd, sizeof pd);
      snprintf(who, sizeof who, " %s %s", dir == '<' ? "<-" : dir == '>' ? "->" : "<->", pd);
    }
    if (op && op->opcode != SHOAL__OP_NONE) {
      if (op->opcode == SHOAL__OP_SEND)
        snprintf(opd, sizeof opd, "%s tag %d: ", shoal__opcode_name(op->opcode), op->tag);
      else {
        char step[32] = ""; /* a partial allreduce's step */
        if (op->step1 > 0) snprintf(step, sizeof step, " step %lld", (long long)(op->step1 - 1));
        snprintf(opd, sizeof opd, "%s seq %u%s: ", shoal__opcode_name(op->opcode), op->seq, step);
      }
    }
    vsnprintf(body, sizeof body, fmt, ap);
    snprintf(c->errmsg, sizeof c->errmsg, "%s%s: %s%s", me, who, opd, body);
    /* failed because of the peer (it closed, left or aborted first): the launcher blames that peer */
    if (status == SHOAL_ERR_PEER_CLOSED && peer >= 0 && peer < c->size) shoal__note_lost_peer(c->w->peers[c->wranks[peer]].pid);
  } else if (!c->errmsg[0]) {
    snprintf(c->errmsg, sizeof c->errmsg, "%s", c->w->abort_msg);
  }
  c->aborted = 1;
  shoal__seterr(status, "%s", c->errmsg);
  if (!c->w->aborted) {
    SHOAL_WARN("NET", "%s", c->errmsg);
    shoal__world_abort(c->w, status, c->errmsg);
  }
  return status;
}

static int fail(shoal_comm_t *c, int status, const shoal__op_t *op, int peer, int dir, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int fail(shoal_comm_t *c, int status, const shoal__op_t *op, int peer, int dir, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = vfail(c, status, op, peer, dir, fmt, ap);
  va_end(ap);
  return rc;
}

int shoal__comm_fail(shoal_comm_t *c, int status, const shoal__op_t *op, int peer, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = vfail(c, status, op, peer, 0, fmt, ap);
  va_end(ap);
  return rc;
}

static _Thread_local char thread_tag; /* its address identifies the calling thread */

uintptr_t shoal__thread_tag(void) { return (uintptr_t)&thread_tag; }

/* The last call this thread saw refused by the thread rule: the world's id and the text. It is the
 * thread's own (the world's error state belongs to the thread inside the call); shoal_comm_errmsg shows it
 * to this thread until its next call on that world is let in. */
static _Thread_local uint64_t refused_world;
static _Thread_local char refused_text[1024];

const char *shoal__thread_refusal(const shoal__world_t *w) {
  return refused_world && refused_world == w->id ? refused_text : NULL;
}

void shoal__note_refusal(const shoal__world_t *w) {
  snprintf(refused_text, sizeof refused_text, "%s", shoal_last_error());
  refused_world = w->id;
}

/* The thread rule (comm.h): a call while another thread is inside a call on the same world is refused,
 * and nothing else happens. `what`: the refused call. */
static int refuse_other_thread(shoal_comm_t *c, const char *what, const char *own) {
  char me[64];
  rank_desc(c, me, sizeof me);
  int rc = shoal__seterr(SHOAL_ERR_UNSUPPORTED, "%s: %s refused: another thread is inside a call (%s) on a "
                         "communicator of the same world; the communicators from one shoal_comm_init and its splits "
                         "share one progress engine and may be used by one thread at a time (comm.h)%s%s%s", me,
                         what, shoal__opcode_name(atomic_load(&c->w->owner_opcode)), own ? " (this call also has an "
                         "error of its own: " : "", own ? own : "", own ? ")" : "");
  shoal__note_refusal(c->w);
  return rc;
}

int shoal__comm_reject(shoal_comm_t *c, int status) {
  if (!c || !c->w) return status;
  char me[64], text[700];
  uintptr_t owner = atomic_load(&c->w->owner);
  /* the thread rule first; the progress thread of non-blocking requests calls for the application's threads */
  if (owner && owner != (uintptr_t)&thread_tag && owner != atomic_load(&c->w->async_tag)) {
    char own[400];
    snprintf(own, sizeof own, "%s", shoal_last_error()[0] ? shoal_last_error() : shoal_status_string(status));
    return refuse_other_thread(c, "the call", own);
  }
  rank_desc(c, me, sizeof me);
  if (c->aborted || c->w->aborted) { /* as every call after the abort: its own error comes second */
    char own[400];
    snprintf(own, sizeof own, "%s", shoal_last_error()[0] ? shoal_last_error() : shoal_status_string(status));
    return shoal__seterr(SHOAL_ERR_ABORTED, "%s: communicator aborted after an earlier error: %s (this call: %s)", me,
                         c->errmsg[0] ? c->errmsg : c->w->abort_msg, own);
  }
  snprintf(text, sizeof text, "%s: %s", me, shoal_last_error()[0] ? shoal_last_error() : shoal_status_string(status));
  if (!c->errmsg[0]) snprintf(c->errmsg, sizeof c->errmsg, "%s", text);
  c->aborted = 1;
  if (!c->w->aborted) {
    SHOAL_WARN("COLL", "%s (the communicator is aborted: its other ranks fail instead of waiting for this one)", text);
    shoal__world_abort(c->w, status, text);
  }
  shoal__seterr(status, "%s", text);
  return status;
}

/* ---- ops ---- */

/* Every WATCH_NS of calls, one poll() without waiting over the connections that have no receive posted:
 * an abort notice or the hang-up of a dead peer fails the next call even when that call would not wait
 * on the peer (a shared-memory send into a ring with room, a broadcast root, a reduce's other non-root),
 * which otherwise returned 0 for as long as the program ran. */
#define WATCH_NS 1000000ull
static int watch_idle(shoal_comm_t *c, const shoal__op_t *op) {
  shoal__world_t *w = c->w;
  int np = 0;
  for (int i = 0; i < w->size; i++) {
    shoal__conn_t *cn = &w->conns[i];
    if (i == w->rank || cn->fd < 0 || cn->rq_head || cn->idle_quiet) continue;
    w->pfd[np] = (struct pollfd){cn->fd, POLLRDHUP, 0};
    w->pfd_conn[np++] = i;
  }
  if (np == 0 || poll(w->pfd, (nfds_t)np, 0) <= 0) return 0;
  for (int j = 0; j < np; j++)
    if (w->pfd[j].revents & (POLLRDHUP | POLLERR | POLLHUP)) {
      int rc = shoal__conn_idle_event(c, op, &w->conns[w->pfd_conn[j]], w->pfd[j].revents);
      if (rc < 0) return rc;
    }
  return 0;
}

/* The op's start, for its deadline and the idle watch: the clock of the last timer tick (a few ms coarse, never
 * ahead of CLOCK_MONOTONIC, so a deadline is at most a tick early against a timeout of seconds). A 2-rank
 * shared-memory allreduce of a few bytes takes ~0.25 us, and the precise clock's ~25 ns read was a
 * tenth of it; the waits read the precise clock only once a tight spin found the peer not ready. */
static uint64_t now_coarse_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)) return shoal__now_ns();
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int shoal__op_begin(shoal_comm_t *c, shoal__op_t *op) {
  if (c->w->async_quiesce) c->w->async_quiesce(c->w); /* blocking calls run after pending requests (request.c) */
  uintptr_t me_t = (uintptr_t)&thread_tag, cur = 0;
  if (!atomic_compare_exchange_strong(&c->w->owner, &cur, me_t) && cur != me_t)
    return refuse_other_thread(c, shoal__opcode_name(op->opcode), NULL);
  atomic_store_explicit(&c->w->owner_opcode, op->opcode, memory_order_relaxed);
  if (refused_world == c->w->id) refused_world = 0; /* let in: the refusal is history */
  if (c->aborted || c->w->aborted) {
    atomic_store(&c->w->owner, 0);
    char me[64];
    rank_desc(c, me, sizeof me);
    return shoal__seterr(SHOAL_ERR_ABORTED, "%s: communicator aborted after an earlier error: %s", me,
                         c->errmsg[0] ? c->errmsg : c->w->abort_msg);
  }
  /* send/recv do not consume the collective sequence: ranks may make
   * different numbers of them without desynchronizing later collectives. */
  op->seq = op->opcode == SHOAL__OP_SEND ? 0 : ++c->seq;
  uint64_t now = now_coarse_ns();
  op->deadline_ns = now + (uint64_t)(c->timeout_s * 1e9);
  if (now - c->w->watched_ns >= WATCH_NS && op->opcode != SHOAL__OP_INTERNAL) { /* the user's calls */
    c->w->watched_ns = now;
    int rc = watch_idle(c, op);
    if (rc < 0) {
      atomic_store(&c->w->owner, 0);
      return rc;
    }
  }
  return 0;
}

int shoal__op_end(shoal_comm_t *c, shoal__op_t *op, int status) {
  uintptr_t me_t = (uintptr_t)&thread_tag;
  atomic_compare_exchange_strong(&c->w->owner, &me_t, 0);
  if (status == 0) return 0;
  if (!c->errmsg[0]) {
    if (c->w->aborted)
      snprintf(c->errmsg, sizeof c->errmsg, "%s", c->w->abort_msg);
    else
      fail(c, status, op, -1, 0, "%s (%s)", shoal_last_error()[0] ? shoal_last_error() : "failed",
           shoal_status_string(status));
  }
  c->aborted = 1;
  if (!c->w->aborted) shoal__world_abort(c->w, status, c->errmsg);
  shoal__seterr(status, "%s", c->errmsg);
  return status;
}

/* ---- queues ---- */

static void q_push(shoal__req_t **head, shoal__req_t **tail, shoal__req_t *r) {
  r->next = NULL;
  if (*tail)
    (*tail)->next = r;
  else
    *head = r;
  *tail = r;
}

static shoal__req_t *q_pop(shoal__req_t **head, shoal__req_t **tail) {
  shoal__req_t *r = *head;
  if (r) {
    *head = r->next;
    if (!*head) *tail = NULL;
    r->next = NULL;
  }
  return r;
}

static void q_fail_all(shoal__req_t **head, shoal__req_t **tail, int status) {
  shoal__req_t *r;
  while ((r = q_pop(head, tail)))
    if (r->state == 0) r->state = status;
}

void shoal__world_abort(shoal__world_t *w, int status, const char *msg) {
  if (w->aborted) return;
  w->aborted = 1;
  if (w->peer_revoked) w->revoking = 1; /* aborted by a revoke: so are the notices this rank passes on */
  w->abort_status = status;
  snprintf(w->abort_msg, sizeof w->abort_msg, "%s", msg);
  for (int i = 0; i < w->size; i++) {
    shoal__conn_t *cn = &w->conns[i];
    if (i == w->rank) continue;
    if (cn->fd >= 0) cn->tp->shutdown(w, cn, SHOAL__WOP_ABORT, msg);
    q_fail_all(&cn->sq_head, &cn->sq_tail, SHOAL_ERR_ABORTED);
    q_fail_all(&cn->rq_head, &cn->rq_tail, SHOAL_ERR_ABORTED);
  }
  q_fail_all(&w->self_sq_head, &w->self_sq_tail, SHOAL_ERR_ABORTED);
  q_fail_all(&w->self_rq_head, &w->self_rq_tail, SHOAL_ERR_ABORTED);
}

void shoal__world_add_waiter(shoal__world_t *w, const shoal__transport_t *tp) {
  for (int i = 0; i < w->nwaiters; i++)
    if (w->waiters[i] == tp) return;
  if (tp->wait && w->nwaiters < SHOAL__MAX_TRANSPORTS) w->waiters[w->nwaiters++] = tp;
}

void shoal__world_goodbye(shoal__world_t *w) {
  for (int i = 0; i < w->size; i++) {
    shoal__conn_t *cn = &w->conns[i];
    if (i != w->rank && cn->fd >= 0) cn->tp->shutdown(w, cn, w->aborted ? 0 : SHOAL__WOP_GOODBYE, NULL);
  }
}

/* ---- header checks ---- */

static void side_desc(const shoal__world_t *w, char *out, size_t cap, int opcode, uint32_t seq, uint64_t count,
                      int dtype, int redop, int tag, uint64_t bytes, int show_redop, int show_tag, int show_bytes) {
  int n = 0;
  if (opcode == SHOAL__OP_SEND)
    n = snprintf(out, cap, "%s count %llu %s", shoal__opcode_name(opcode), (unsigned long long)count,
                 shoal__dtype_label(dtype));
  else
    n = snprintf(out, cap, "%s seq %u count %llu %s", shoal__opcode_name(opcode), seq, (unsigned long long)count,
                 shoal__dtype_label(dtype));
  if (show_redop && n < (int)cap)
    n += redop >= 0 && redop < SHOAL_REDOP__COUNT ? snprintf(out + n, cap - (size_t)n, " %s", shoal_redop_name(redop))
                                                    : snprintf(out + n, cap - (size_t)n, " redop %d", redop);
  if (show_tag && n < (int)cap) /* an allreduce's tag is its algorithm: ranks that chose differently */
    n += opcode == SHOAL__OP_ALLREDUCE && tag >= 0 && tag < SHOAL_ALGO__COUNT && w->algo_name
             ? snprintf(out + n, cap - (size_t)n, " algorithm %s", w->algo_name((shoal_algo_t)tag))
             : opcode == SHOAL__OP_BROADCAST || opcode == SHOAL__OP_REDUCE
                   ? snprintf(out + n, cap - (size_t)n, " root %d", tag)
                   : snprintf(out + n, cap - (size_t)n, " tag %d", tag);
  if (show_bytes && n < (int)cap) snprintf(out + n, cap - (size_t)n, " (%llu bytes)", (unsigned long long)bytes);
}

/* Read an abort notice's text: the part readv already put in the user's buffer, then the rest. */
static void abort_text(shoal__conn_t *conn, shoal__req_t *req, uint64_t len, char *out, size_t cap) {
  if (len >= cap) len = cap - 1;
  size_t have = req->done < len ? req->done : (size_t)len;
  if (have) memcpy(out, req->buf, have);
  while (have < len && conn->fd >= 0) {
    struct pollfd p = {conn->fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) break;
    ssize_t k = recv(conn->fd, out + have, len - have, MSG_DONTWAIT);
    if (k <= 0) break;
    have += (size_t)k;
  }
  out[have] = '\0';
}

int shoal__recv_header(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  const unsigned char *h = req->hdr;
  shoal_comm_t *c = req->comm;
  const shoal__op_t *op = &req->op;
  if (shoal__get_u32(h) != SHOAL__WIRE_MAGIC)
    return req->state = fail(c, SHOAL_ERR_PROTOCOL, op, req->peer, '<',
                             "garbage on the connection (magic 0x%08x): stream out of sync", shoal__get_u32(h));
  int opcode = h[4], dtype = h[5], redop = h[6];
  uint64_t cid = shoal__get_u64(h + 8), count = shoal__get_u64(h + 24), bytes = shoal__get_u64(h + 32);
  uint32_t seq = shoal__get_u32(h + 16);
  int32_t tag = (int32_t)shoal__get_u32(h + 20);
  if (opcode == SHOAL__WOP_ABORT) {
    if (h[7] & SHOAL__HDR_F_REVOKE) w->peer_revoked = 1;
    char text[SHOAL__ABORT_TEXT_MAX + 1];
    abort_text(conn, req, bytes, text, sizeof text);
    return req->state = fail(c, SHOAL_ERR_PEER_CLOSED, op, req->peer, '<', "peer aborted: %s", text);
  }
  if (opcode == SHOAL__WOP_GOODBYE)
    return req->state = fail(c, SHOAL_ERR_PEER_CLOSED, op, req->peer, '<',
                             "the peer left (destroyed its communicator) while this rank expected %s from it",
                             shoal__opcode_name(op->opcode));
  if (cid != c->id)
    return req->state = fail(c, SHOAL_ERR_MISMATCH, op, req->peer, '<',
                             "expected a message of communicator %016llx, got one of communicator %016llx "
                             "(%s seq %u): the ranks use communicators in different orders",
                             (unsigned long long)c->id, (unsigned long long)cid, shoal__opcode_name(opcode), seq);
  int seq_ok = op->opcode == SHOAL__OP_SEND || seq == op->seq;
  int redop_bad = redop != op->redop, tag_bad = tag != op->tag, bytes_bad = bytes != req->bytes;
  if (opcode != op->opcode || !seq_ok || dtype != op->dtype || count != op->count || redop_bad || tag_bad ||
      bytes_bad) {
    char want[160], got[160];
    side_desc(w, want, sizeof want, op->opcode, op->seq, op->count, op->dtype, op->redop, op->tag, req->bytes,
              redop_bad, tag_bad, bytes_bad);
    side_desc(w, got, sizeof got, opcode, seq, count, dtype, redop, tag, bytes, redop_bad, tag_bad, bytes_bad);
    char me[64], pd[112];
    rank_desc(c, me, sizeof me);
    peer_desc(c, req->peer, pd, sizeof pd);
    /* The spec'd format: "rank 1 <- peer 0 (addr): expected ..., got ..." (no op prefix: both ops are named). */
    if (!c->errmsg[0] && !w->aborted)
      snprintf(c->errmsg, sizeof c->errmsg, "%s <- %s: expected %s, got %s", me, pd, want, got);
    return req->state = fail(c, SHOAL_ERR_MISMATCH, op, req->peer, '<', "mismatch");
  }
  return 0;
}

int shoal__conn_broken(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req, int status, const char *why) {
  shoal_comm_t *c = req->comm;
  int is_recv = req->kind == 2;
  size_t hdr_part = (size_t)req->hdr_done;
  if (!is_recv && status == SHOAL_ERR_PEER_CLOSED && conn->fd >= 0 && !conn->rq_head) {
    /* A send hit a reset: the peer may have aborted and exited; its notice
     * can still be queued on our read side (readable after an RST). */
    unsigned char h[SHOAL__HDR_BYTES];
    if (recv(conn->fd, h, sizeof h, MSG_PEEK | MSG_DONTWAIT) == (ssize_t)sizeof h &&
        shoal__get_u32(h) == SHOAL__WIRE_MAGIC && h[4] == SHOAL__WOP_ABORT) {
      if (h[7] & SHOAL__HDR_F_REVOKE) w->peer_revoked = 1;
      char text[SHOAL__ABORT_TEXT_MAX + 1];
      shoal__req_t tmp = {0};
      if (recv(conn->fd, h, sizeof h, MSG_DONTWAIT) == (ssize_t)sizeof h)
        abort_text(conn, &tmp, shoal__get_u64(h + 32), text, sizeof text);
      else
        snprintf(text, sizeof text, "(reason lost)");
      conn->state = SHOAL__CONN_CLOSED;
      return req->state = fail(c, status, &req->op, req->peer, '>', "peer aborted: %s", text);
    }
  }
  if (status == SHOAL_ERR_PEER_CLOSED && !why) {
    if (conn->state == SHOAL__CONN_LEFT)
      why = "the peer left (destroyed its communicator) before sending it";
    else
      why = req->hdr_done > 0 && req->hdr_done < SHOAL__HDR_BYTES + 1 && req->done < req->bytes
                ? "connection closed by the peer mid-message: it died, was killed, or aborted"
                : "connection closed by the peer: it died or was killed";
  }
  conn->state = SHOAL__CONN_CLOSED;
  return req->state = fail(c, status, &req->op, req->peer, is_recv ? '<' : '>', "%s (%zu of %zu bytes %s%s)", why,
                           req->done, req->bytes, is_recv ? "received" : "sent",
                           hdr_part < SHOAL__HDR_BYTES ? ", header incomplete" : "");
}

/* A connection with no request posted became readable or hung up. */
int shoal__conn_idle_event(shoal_comm_t *c, const shoal__op_t *op, shoal__conn_t *conn, short revents) {
  shoal__world_t *w = c->w;
  int peer = comm_rank_of(c, conn->peer);
  char pd[128];
  if (peer >= 0)
    peer_desc(c, peer, pd, sizeof pd);
  else
    snprintf(pd, sizeof pd, "world rank %d (%s)", conn->peer, w->peers[conn->peer].addr);
  unsigned char h[SHOAL__HDR_BYTES];
  ssize_t k = recv(conn->fd, h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (k < 0) {
    if (errno == EAGAIN || errno == EINTR) return 0;
    conn->state = SHOAL__CONN_CLOSED;
    return fail(c, SHOAL_ERR_PEER_CLOSED, op, -1, 0, "%s: connection reset: it died or was killed", pd);
  }
  if (k == 0) {
    if (conn->state == SHOAL__CONN_LEFT) {
      conn->idle_quiet = 1; /* it said goodbye: only an error if we need it again */
      return 0;
    }
    conn->state = SHOAL__CONN_CLOSED;
    return fail(c, SHOAL_ERR_PEER_CLOSED, op, -1, 0,
                "%s closed its connection without shutting down: it died or was killed", pd);
  }
  if (k < SHOAL__HDR_BYTES) {
    if (revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      conn->state = SHOAL__CONN_CLOSED;
      return fail(c, SHOAL_ERR_PEER_CLOSED, op, -1, 0, "%s closed its connection mid-message: it died", pd);
    }
    return 0;
  }
  if (shoal__get_u32(h) == SHOAL__WIRE_MAGIC && h[4] == SHOAL__WOP_ABORT) {
    if (h[7] & SHOAL__HDR_F_REVOKE) w->peer_revoked = 1;
    uint64_t len = shoal__get_u64(h + 32);
    char text[SHOAL__ABORT_TEXT_MAX + 1];
    shoal__req_t tmp = {0};
    recv(conn->fd, h, sizeof h, MSG_DONTWAIT);
    abort_text(conn, &tmp, len, text, sizeof text);
    return fail(c, SHOAL_ERR_PEER_CLOSED, op, -1, 0, "%s aborted: %s", pd, text);
  }
  if (shoal__get_u32(h) == SHOAL__WIRE_MAGIC && h[4] == SHOAL__WOP_GOODBYE) {
    recv(conn->fd, h, sizeof h, MSG_DONTWAIT);
    conn->state = SHOAL__CONN_LEFT;
    return 0;
  }
  conn->idle_quiet = 1; /* an early message for a receive not posted yet */
  return 0;
}

/* ---- progress ---- */

static int drive(shoal__world_t *w, shoal__conn_t *cn) {
  while (cn->sq_head) {
    uint64_t nb = cn->sq_head->not_before_ns;
    if (nb && nb > shoal__now_ns()) { /* emulated latency: not yet */
      if (!w->next_release_ns || nb < w->next_release_ns) w->next_release_ns = nb;
      break;
    }
    int rc = cn->tp->send_progress(w, cn, cn->sq_head);
    if (rc < 0) return rc;
    if (rc == 0) break;
    shoal__req_t *r = q_pop(&cn->sq_head, &cn->sq_tail);
    r->state = 1;
  }
  while (cn->rq_head) {
    int rc = cn->tp->recv_progress(w, cn, cn->rq_head);
    if (rc < 0) return rc;
    if (rc == 0) break;
    shoal__req_t *r = q_pop(&cn->rq_head, &cn->rq_tail);
    r->state = 1;
  }
  return 0;
}

static int self_match(shoal__world_t *w) {
  while (w->self_sq_head && w->self_rq_head) {
    shoal__req_t *s = q_pop(&w->self_sq_head, &w->self_sq_tail);
    shoal__req_t *r = q_pop(&w->self_rq_head, &w->self_rq_tail);
    memcpy(r->hdr, s->hdr, SHOAL__HDR_BYTES);
    r->hdr_done = SHOAL__HDR_BYTES;
    size_t n = s->bytes < r->bytes ? s->bytes : r->bytes;
    if (n && r->buf != s->buf) memmove(r->buf, s->buf, n);
    r->done = n;
    s->done = s->bytes;
    s->hdr_done = SHOAL__HDR_BYTES;
    s->state = 1;
    int rc = shoal__recv_header(w, NULL, r);
    if (rc < 0) return rc;
    r->state = 1;
  }
  return 0;
}

int shoal__wake_open(shoal__world_t *w) {
  if (w->wake_fd >= 0) return 0;
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "eventfd: %s", strerror(errno));
  w->wake_fd = fd;
  return 0;
}

void shoal__wake(shoal__world_t *w) {
  uint64_t one = 1;
  if (w->wake_fd >= 0) {
    ssize_t k = write(w->wake_fd, &one, sizeof one); /* fails only when the count is full: a wake is pending */
    (void)k;
  }
}

int shoal__wake_ends_wait(const shoal__world_t *w) {
  return w->wake_fd >= 0 && w->nwaiters == 0;
}

int shoal__progress(shoal_comm_t *c, const shoal__op_t *op, int wait_ms) {
  shoal__world_t *w = c->w;
  if (w->aborted) return w->abort_status ? w->abort_status : SHOAL_ERR_ABORTED;
  /* transports whose data does not wake poll() wait their own way first (shared memory: spin, yield,
   * sleep on a futex) and say whether to block in poll() at all */
  for (int i = 0; i < w->nwaiters && wait_ms != 0; i++) wait_ms = w->waiters[i]->wait(w, wait_ms, 0);
  if (wait_ms == 0) {
    for (int i = 0; i < w->size; i++) {
      shoal__conn_t *cn = &w->conns[i];
      if ((cn->sq_head || cn->rq_head) && cn->fd >= 0) {
        int rc = drive(w, cn);
        if (rc < 0) return rc;
      }
    }
    return 0;
  }
  int np = 0;
  uint64_t release = w->next_release_ns;
  w->next_release_ns = 0;
  for (int i = 0; i < w->size; i++) {
    shoal__conn_t *cn = &w->conns[i];
    if (i == w->rank || cn->fd < 0) continue;
    short ev = 0;
    if (cn->sq_head && !(cn->sq_head->not_before_ns && release)) ev |= POLLOUT;
    if (cn->rq_head) ev |= POLLIN;
    if (!cn->rq_head && !cn->idle_quiet) ev |= POLLRDHUP;
    if (!ev) continue;
    w->pfd[np] = (struct pollfd){cn->fd, ev, 0};
    w->pfd_conn[np++] = i;
  }
  if (w->wake_fd >= 0) { /* the connections take at most size - 1 entries */
    w->pfd[np] = (struct pollfd){w->wake_fd, POLLIN, 0};
    w->pfd_conn[np++] = -1;
  }
  int pr;
  if (release) { /* sleep no longer than the first held send, with ns precision */
    uint64_t now = shoal__now_ns(), until = now + (uint64_t)wait_ms * 1000000u;
    if (release < until) until = release > now ? release : now;
    struct timespec ts = {(time_t)((until - now) / 1000000000u), (long)((until - now) % 1000000000u)};
    pr = ppoll(w->pfd, (nfds_t)np, &ts, NULL);
  } else {
    pr = poll(w->pfd, (nfds_t)np, wait_ms);
  }
  if (pr < 0) return errno == EINTR ? 0 : fail(c, SHOAL_ERR_SYSTEM, op, -1, 0, "poll: %s", strerror(errno));
  if (release) /* held sends whose time came: drive them (and everything else; cheap) */
    for (int i = 0; i < w->size; i++) {
      shoal__conn_t *cn = &w->conns[i];
      if (i != w->rank && cn->fd >= 0 && cn->sq_head) {
        int rc = drive(w, cn);
        if (rc < 0) return rc;
      }
    }
  for (int j = 0; j < np && pr > 0; j++) {
    if (!w->pfd[j].revents) continue;
    pr--;
    if (w->pfd_conn[j] < 0) { /* woken: drain the count; the caller looks at what changed */
      uint64_t n;
      if (read(w->wake_fd, &n, sizeof n) < 0) n = 0;
      continue;
    }
    shoal__conn_t *cn = &w->conns[w->pfd_conn[j]];
    if (cn->fd < 0) continue;
    int rc = 0;
    short re = w->pfd[j].revents;
    if (!cn->rq_head && (re & (POLLRDHUP | POLLERR | POLLHUP))) {
      /* hang-up with no receive posted: an abort notice, a goodbye, or death */
      rc = shoal__conn_idle_event(c, op, cn, re);
      if (rc < 0) return rc;
      if (cn->state == SHOAL__CONN_LEFT && cn->sq_head)
        return shoal__conn_broken(w, cn, cn->sq_head, SHOAL_ERR_PEER_CLOSED,
                                  "the peer left (destroyed its communicator) while this rank was sending to it");
    }
    if (cn->fd >= 0 && (cn->sq_head || cn->rq_head)) rc = drive(w, cn);
    if (rc < 0) return rc;
    if (w->aborted) return w->abort_status;
  }
  return 0;
}

static int post_check(shoal_comm_t *c, const shoal__op_t *op, int peer, const char *what) {
  if (c->w->aborted || c->aborted)
    return shoal__seterr(SHOAL_ERR_ABORTED, "communicator aborted after an earlier error: %s",
                         c->errmsg[0] ? c->errmsg : c->w->abort_msg);
  if (peer < 0 || peer >= c->size)
    return fail(c, SHOAL_ERR_INVALID, op, -1, 0, "%s: peer %d out of range [0, %d)", what, peer, c->size);
  return 0;
}

static void req_init(shoal_comm_t *c, const shoal__op_t *op, int kind, int peer, void *buf, size_t bytes,
                     shoal__req_t *req) {
  memset(req, 0, offsetof(shoal__req_t, hdr));
  req->kind = kind;
  req->peer = peer;
  req->buf = buf;
  req->bytes = bytes;
  req->next = NULL;
  req->comm = c;
  req->op = *op;
  req->not_before_ns = 0;
}

int shoal__isend(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *buf, size_t bytes, shoal__req_t *req) {
  int rc = post_check(c, op, dst, "send");
  if (rc) { /* a failed post is a failed request: waitall on it reports the error, never garbage */
    req->kind = 1;
    req->state = rc;
    req->next = NULL;
    return rc;
  }
  shoal__world_t *w = c->w;
  req_init(c, op, 1, dst, (void *)buf, bytes, req);
  shoal__hdr_pack(req->hdr, op->opcode, op->dtype, op->redop, c->id, op->seq, op->tag, op->count, bytes);
  int wd = c->wranks[dst];
  if (wd == w->rank) {
    q_push(&w->self_sq_head, &w->self_sq_tail, req);
    return self_match(w);
  }
  shoal__conn_t *cn = &w->conns[wd];
  if (cn->fd < 0) return req->state = fail(c, SHOAL_ERR_PEER_CLOSED, op, dst, '>', "the connection is closed");
  int was_empty = cn->sq_head == NULL;
  q_push(&cn->sq_head, &cn->sq_tail, req);
  if (w->emu_delay_ns) { /* emulated one-way latency: held, the progress loop releases it */
    req->not_before_ns = shoal__now_ns() + w->emu_delay_ns;
    return 0;
  }
  if (was_empty) { /* eager: most small messages leave right here */
    rc = cn->tp->send_progress(w, cn, req);
    if (rc < 0) return rc;
    if (rc == 1) {
      q_pop(&cn->sq_head, &cn->sq_tail);
      req->state = 1;
    }
  }
  return 0;
}

int shoal__irecv(shoal_comm_t *c, const shoal__op_t *op, int src, void *buf, size_t bytes, shoal__req_t *req) {
  int rc = post_check(c, op, src, "receive");
  if (rc) {
    req->kind = 2;
    req->state = rc;
    req->next = NULL;
    return rc;
  }
  shoal__world_t *w = c->w;
  req_init(c, op, 2, src, buf, bytes, req);
  int ws = c->wranks[src];
  if (ws == w->rank) {
    q_push(&w->self_rq_head, &w->self_rq_tail, req);
    return self_match(w);
  }
  shoal__conn_t *cn = &w->conns[ws];
  if (cn->fd < 0) return req->state = fail(c, SHOAL_ERR_PEER_CLOSED, op, src, '<', "the connection is closed");
  cn->idle_quiet = 0;
  q_push(&cn->rq_head, &cn->rq_tail, req);
  return 0;
}

static int reqs_status(shoal__world_t *w, shoal__req_t *reqs, int n, int *ndone) {
  int done = 0;
  for (int i = 0; i < n; i++) {
    if (reqs[i].kind == 0 || reqs[i].state == 1) {
      done++;
      continue;
    }
    if (reqs[i].state < 0) return w->aborted && w->abort_status ? w->abort_status : reqs[i].state;
  }
  *ndone = done;
  return 0;
}

double shoal__op_waited(const shoal_comm_t *c, const shoal__op_t *op, uint64_t t0, uint64_t now) {
  if (op->deadline_ns) {
    double since = c->timeout_s - ((double)op->deadline_ns - (double)now) * 1e-9;
    if (since > (double)(now - t0) * 1e-9) return since;
  }
  return (double)(now - t0) * 1e-9;
}

/* ---- blame at the deadline ---- */

int shoal__peer_stopped(const shoal__world_t *w, int wr, int *pid) {
  const shoal__peer_info_t *p = &w->peers[wr], *me = &w->peers[w->rank];
  if (wr == w->rank || p->pid <= 0 || strcmp(p->boot_id, me->boot_id) || !strcmp(p->boot_id, "unknown")) return 0;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", p->pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t k = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (k <= 0) return 0;
  buf[k] = '\0';
  const char *end = strrchr(buf, ')'); /* "pid (comm) S ...": the command may hold anything */
  if (!end || end[1] != ' ' || (end[2] != 'T' && end[2] != 't')) return 0;
  *pid = p->pid;
  return 1;
}

uint64_t shoal__blame_grace_ns(const shoal_comm_t *c) {
  double g = 0.2 * c->timeout_s < 2 ? 0.2 * c->timeout_s : 2;
  return (uint64_t)(g * 1e9);
}

/* A pending request whose peer's process is stopped, if any (its pid in *pid). */
static shoal__req_t *stopped_pending(shoal_comm_t *c, shoal__req_t *const *list, shoal__req_t *reqs, int n, int *pid) {
  for (int i = 0; i < n; i++) {
    shoal__req_t *r = list ? list[i] : &reqs[i];
    if (r && r->kind != 0 && r->state == 0 && shoal__peer_stopped(c->w, c->wranks[r->peer], pid)) return r;
  }
  return NULL;
}

/* The deadline passed with requests pending (list: the waitany's, else the n of reqs). A peer whose process
 * is stopped is blamed at once. Otherwise the first time (*graced 0) the wait goes on for the grace
 * (shoal__blame_grace_ns): the rank at the end of the chain, which waits on the stopped or lost process
 * itself, fails first and its abort notice, naming that process, reaches the ranks waiting on it. 1: wait
 * on; else the failure, naming the peer. */
static int deadline_reached(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *const *list, shoal__req_t *reqs,
                            int n, int *graced, uint64_t *deadline, double waited) {
  int pid = 0;
  shoal__req_t *stopped = stopped_pending(c, list, reqs, n, &pid);
  if (!stopped && !*graced) {
    *graced = 1;
    *deadline += shoal__blame_grace_ns(c);
    return 1;
  }
  char pending[256] = "", why[128] = "";
  size_t used = 0;
  shoal__req_t *first = stopped;
  for (int i = 0; i < n; i++) {
    shoal__req_t *r = list ? list[i] : &reqs[i];
    if (!r || r->kind == 0 || r->state != 0) continue;
    if (!first) first = r;
    if (used < sizeof pending - 16)
      used += (size_t)snprintf(pending + used, sizeof pending - used, "%s%s %d", used ? ", " : "",
                               r->kind == 1 ? "send to" : "receive from", r->peer);
  }
  if (!first) return 0;
  if (stopped)
    snprintf(why, sizeof why, "; world rank %d's process (pid %d) is stopped (SIGSTOP or a debugger)",
             c->wranks[stopped->peer], pid);
  int recv = first->kind == 2;
  return fail(c, SHOAL_ERR_TIMEOUT, op, first->peer, recv ? '<' : '>',
              "timed out after %.1f s (SHOAL_TIMEOUT) waiting to %s this peer (%zu of %zu bytes done); pending: %s%s",
              waited, recv ? "receive from" : "send to", first->done, first->bytes, pending, why);
}

int shoal__waitall(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *reqs, int n) {
  shoal__world_t *w = c->w;
  uint64_t t0 = shoal__now_ns();
  uint64_t deadline = op->deadline_ns ? op->deadline_ns : t0 + (uint64_t)(c->timeout_s * 1e9);
  int ndone = 0;
  int rc = reqs_status(w, reqs, n, &ndone);
  if (rc) return rc;
  if (ndone == n) return 0;
  rc = shoal__progress(c, op, 0);
  /* SHOAL_SPIN_US: spin (yielding the CPU) before sleeping in poll(), for
   * dedicated cores. Off by default: on this 2-vCPU VM, shared with other
   * jobs, spinning made an 8-byte ping-pong slower (8 -> 22 us one way). */
  uint64_t spin_until = w->spin_ns ? t0 + w->spin_ns : 0;
  int graced = 0;
  for (;;) {
    if (rc < 0) return w->aborted && w->abort_status ? w->abort_status : rc;
    rc = reqs_status(w, reqs, n, &ndone);
    if (rc) return rc;
    if (ndone == n) return 0;
    uint64_t now = shoal__now_ns();
    if (now >= deadline &&
        (rc = deadline_reached(c, op, NULL, reqs, n, &graced, &deadline, shoal__op_waited(c, op, t0, now))) != 1)
      return rc;
    rc = 0;
    if (now < spin_until) {
      sched_yield();
      rc = shoal__progress(c, op, 0);
      continue;
    }
    uint64_t left_ms = (deadline - now + 999999) / 1000000;
    rc = shoal__progress(c, op, left_ms > 1000000 ? 1000000 : (int)left_ms);
  }
}

int shoal__waitany(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *const *reqs, int n) {
  shoal__world_t *w = c->w;
  uint64_t t0 = shoal__now_ns();
  uint64_t deadline = op->deadline_ns ? op->deadline_ns : t0 + (uint64_t)(c->timeout_s * 1e9);
  int pending = 0, rc = 0, graced = 0;
  for (int i = 0; i < n; i++) { /* only the requests pending now count: the callers list their heads */
    shoal__req_t *r = reqs[i];
    if (!r || r->kind == 0 || r->state == 1) continue;
    if (r->state < 0) return w->aborted && w->abort_status ? w->abort_status : r->state;
    pending++;
  }
  if (!pending) return 0;
  for (int pass = 0;; pass++) {
    int still = 0;
    for (int i = 0; i < n; i++) {
      shoal__req_t *r = reqs[i];
      if (!r || r->kind == 0) continue;
      if (r->state < 0) return w->aborted && w->abort_status ? w->abort_status : r->state;
      still += r->state == 0;
    }
    if (still < pending) return 0; /* one of those pending at entry completed */
    if (rc < 0) return w->aborted && w->abort_status ? w->abort_status : rc;
    uint64_t now = shoal__now_ns();
    if (now >= deadline &&
        (rc = deadline_reached(c, op, reqs, NULL, n, &graced, &deadline, shoal__op_waited(c, op, t0, now))) != 1)
      return rc;
    uint64_t left_ms = (deadline - now + 999999) / 1000000;
    rc = shoal__progress(c, op, pass == 0 ? 0 : left_ms > 1000000 ? 1000000 : (int)left_ms);
  }
}

int shoal__test(shoal_comm_t *c, const shoal__op_t *op, shoal__req_t *reqs, int n, int *ndone) {
  int rc = shoal__progress(c, op, 0);
  if (rc < 0) return rc;
  int d = 0;
  rc = reqs_status(c->w, reqs, n, &d);
  if (rc) return rc;
  *ndone = d;
  return 0;
}

int shoal__sendrecv(shoal_comm_t *c, const shoal__op_t *op, int dst, const void *sbuf, size_t sbytes, int src,
                    void *rbuf, size_t rbytes) {
  shoal__req_t r[2];
  r[0].kind = r[1].kind = 0;
  int rc;
  if (src >= 0 && (rc = shoal__irecv(c, op, src, rbuf, rbytes, &r[1]))) return rc;
  if (dst >= 0 && (rc = shoal__isend(c, op, dst, sbuf, sbytes, &r[0]))) return rc;
  return shoal__waitall(c, op, r, 2);
}
