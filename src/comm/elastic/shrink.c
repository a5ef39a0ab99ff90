/* shoal_comm_shrink: the live ranks of a communicator agree on a new world without the lost ones.
 *
 * Every rank keeps the listener its world was built with (the address in its registration); a process
 * that is gone has no listener, so a connection attempt to it is refused by its host at once. That is the
 * failure detector, and it needs no store (rank 0 may be the one that died). The protocol:
 *   1. revoke: the caller aborts its world (if an error has not already), so ranks still blocked in a
 *      call on it fail within one notice and call shrink too;
 *   2. coordinator: the lowest live rank of the communicator. A rank tries the ranks below it in order;
 *      refused means gone, the first that answers the link handshake is the coordinator, and the rank
 *      sends it JOIN with the registration of a fresh listener. A rank none below answers is the
 *      coordinator itself;
 *   3. the coordinator probes every rank above it (a connection it keeps open: refused, or reset later,
 *      means gone) and accepts JOINs until every rank above has joined or is gone; then it sends every
 *      member PROPOSE (new world id, the members in their old order, their registrations);
 *   4. every member builds the new world on the fresh listeners (full mesh, owners), as init does.
 * A member that dies after joining is found by the others when they build (the new communicator comes
 * back aborted, naming it: shrink it again); a coordinator that dies before it proposed is found by its
 * members (their link closes) and the next live rank takes over. A rank that is alive (its host accepts
 * the connection) but never calls shrink makes it fail at the deadline, naming it. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/async.h"
#include "comm/bootstrap/handshake.h"
#include "comm/bootstrap/sock.h"
#include "comm/bootstrap/store.h"
#include "comm/elastic/elastic.h"
#include "core/error.h"
#include "core/log.h"

#define LINK_MAGIC 0x46524853u /* "SHRF": the peer handshake's layout with another magic */
enum { LK_OK = SHOAL__HS_OK, LK_BAD_TOKEN = 1, LK_OTHER = 2, LK_WRONG_RANK = 3 };
enum { MSG_JOIN = 1, MSG_PROPOSE = 2, MSG_FAIL = 3 };
#define ANSWER_BYTES SHOAL__HS_ANSWER_BYTES
#define JOIN_FRAME_BYTES (8 + SHOAL__REG_BYTES)
#define HS_TIMEOUT_S 5.0

static const char *addr_of(const shoal_comm_t *c, int r) { return c->w->peers[c->wranks[r]].addr; }

static int gone_errno(int e) {
  return e == ECONNREFUSED || e == ECONNRESET || e == EHOSTUNREACH || e == ENETUNREACH || e == ETIMEDOUT ||
         e == EHOSTDOWN || e == ECONNABORTED;
}

/* ---- a member: find the coordinator and join ---- */

/* The link handshake with rank j as the connector. 0 and *fd_out; SHOAL_ERR_PEER_CLOSED (message set)
 * when j is gone; any other status is fatal for the shrink. */
static int link_connect(shoal_comm_t *c, int j, shoal__deadline_t dl, int *fd_out) {
  struct in_addr ip;
  int port, fd, rc;
  if ((rc = shoal__sock_parse_addr(addr_of(c, j), &ip, &port))) return rc;
  shoal__deadline_t pdl = shoal__deadline_in(SHOAL__PROBE_S);
  if (pdl.at_ns > dl.at_ns) pdl = dl;
  int e = shoal__sock_try_connect(ip, port, pdl, &fd);
  if (e) {
    if (gone_errno(e))
      return shoal__seterr(SHOAL_ERR_PEER_CLOSED, "rank %d (%s) is gone: %s", j, addr_of(c, j), strerror(e));
    return shoal__seterr(SHOAL_ERR_CONNECT, "rank %d (%s): connect: %s", j, addr_of(c, j), strerror(e));
  }
  char what[128];
  snprintf(what, sizeof what, "shrink: link to rank %d (%s)", j, addr_of(c, j));
  unsigned char hello[SHOAL__HS_HELLO_BYTES], ans[SHOAL__HS_ANSWER_BYTES], verdict[SHOAL__HS_VERDICT_BYTES];
  uint8_t nc[SHOAL__NONCE_BYTES];
  shoal__hs_link_t link = {LINK_MAGIC, c->rank, j, c->id};
  rc = shoal__sock_read_all(fd, hello, sizeof hello, dl, what);
  if (rc == SHOAL_ERR_TIMEOUT) {
    rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "rank %d (%s) is alive (its host accepted the connection) but did not "
                       "take part in the shrink before the deadline (%.1f s): every live rank must call "
                       "shoal_comm_shrink", j, addr_of(c, j), c->timeout_s);
    goto close_fd;
  }
  if (rc) goto close_fd; /* closed or reset: gone (PEER_CLOSED), or an I/O error */
  if (shoal__hs_answer(&c->w->key, &link, hello, nc, ans)) {
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: not a shrink link (bad greeting)", what);
    goto close_fd;
  }
  if ((rc = shoal__sock_write_all(fd, ans, sizeof ans, dl, what)) ||
      (rc = shoal__sock_read_all(fd, verdict, sizeof verdict, dl, what)))
    goto close_fd;
  int proved;
  uint32_t st = shoal__hs_read_verdict(&c->w->key, &link, hello, nc, verdict, &proved);
  if (st != LK_OK) {
    rc = shoal__seterr(st == LK_BAD_TOKEN ? SHOAL_ERR_AUTH : SHOAL_ERR_MISMATCH, "%s: refused: %s", what,
                       st == LK_BAD_TOKEN ? "wrong SHOAL_TOKEN"
                       : st == LK_OTHER   ? "it is shrinking another communicator (the ranks must shrink the same one)"
                                          : "it does not expect this rank");
    goto close_fd;
  }
  if (!proved) {
    rc = shoal__seterr(SHOAL_ERR_AUTH, "%s: the peer failed to prove it knows SHOAL_TOKEN", what);
    goto close_fd;
  }
  *fd_out = fd;
  return 0;
close_fd:
  close(fd);
  return rc;
}

typedef struct proposal {
  uint64_t id;
  int n;
  int *old;          /* [n] old comm rank of each member, ascending */
  shoal__reg_t *regs; /* [n] */
} proposal_t;

static void proposal_free(proposal_t *p) {
  free(p->old);
  free(p->regs);
}

static int proposal_parse(const unsigned char *b, size_t len, int size, proposal_t *p) {
  if (len < 12) return shoal__seterr(SHOAL_ERR_PROTOCOL, "shrink: short proposal");
  p->id = shoal__get_u64(b);
  p->n = (int)shoal__get_u32(b + 8);
  if (p->n < 1 || p->n > size || len != 12 + (size_t)p->n * (4 + SHOAL__REG_BYTES))
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "shrink: malformed proposal (%d members)", p->n);
  p->old = malloc((size_t)p->n * sizeof *p->old);
  p->regs = malloc((size_t)p->n * sizeof *p->regs);
  if (!p->old || !p->regs) return shoal__seterr(SHOAL_ERR_NOMEM, "shrink: out of memory");
  const unsigned char *q = b + 12;
  for (int i = 0; i < p->n; i++, q += 4 + SHOAL__REG_BYTES) {
    p->old[i] = (int)shoal__get_u32(q);
    memcpy(p->regs[i], q + 4, SHOAL__REG_BYTES);
    p->regs[i][SHOAL__REG_BYTES - 1] = '\0';
  }
  return 0;
}

/* JOIN the coordinator on fd, then wait for its decision. 0 with *p; SHOAL_ERR_PEER_CLOSED when the
 * coordinator is gone (try the next); other errors are fatal (its FAIL included). The wait ends a little
 * after this rank's deadline: the coordinator, which knows which rank did not join, fails first and its
 * FAIL names that rank. */
static int member_wait(shoal_comm_t *c, int j, int fd, const shoal__reg_t reg, shoal__deadline_t dl, proposal_t *p) {
  double grace = 0.2 * c->timeout_s < 2 ? 0.2 * c->timeout_s : 2;
  dl.at_ns += (uint64_t)(grace * 1e9);
  char what[128];
  snprintf(what, sizeof what, "shrink: coordinator rank %d (%s)", j, addr_of(c, j));
  int rc = shoal__store_frame_write(fd, MSG_JOIN, reg, SHOAL__REG_BYTES, NULL, 0, dl, what);
  if (rc) return rc;
  size_t cap = 12 + (size_t)c->size * (4 + SHOAL__REG_BYTES), len = 0;
  unsigned char *b = malloc(cap + 1);
  if (!b) return shoal__seterr(SHOAL_ERR_NOMEM, "shrink: out of memory");
  int type = 0;
  rc = shoal__store_frame_read(fd, &type, b, cap, &len, dl, what);
  if (rc == SHOAL_ERR_TIMEOUT)
    rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "%s: no decision before the deadline (%.1f s, and %.1f s more)", what,
                       c->timeout_s, grace);
  if (!rc && len > cap) rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: oversized message", what);
  if (!rc && type == MSG_FAIL) {
    b[len < cap ? len : cap] = '\0';
    int st = len >= 4 ? -(int)shoal__get_u32(b) : SHOAL_ERR_ABORTED;
    if (st >= 0 || st <= SHOAL_ERR__LAST) st = SHOAL_ERR_ABORTED;
    rc = shoal__seterr(st, "shrink abandoned by the coordinator, rank %d: %s", j, len >= 4 ? (char *)b + 4 : "");
  } else if (!rc && type != MSG_PROPOSE) {
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: unexpected message %d", what, type);
  } else if (!rc) {
    rc = proposal_parse(b, len, c->size, p);
  }
  free(b);
  return rc;
}

/* ---- the coordinator ---- */

enum { M_UNKNOWN = 0, M_PROBING, M_ALIVE, M_JOINED, M_GONE };

typedef struct member {
  int state;
  int probe_fd; /* the coordinator's connection to its listener: refused or reset later means gone */
  int link_fd;  /* its link after JOIN */
  uint64_t probe_until;
  shoal__reg_t reg;
  char why[160];
} member_t;

typedef struct pend {
  int fd;
  int stage; /* 0: waiting for the answer; 1: for the JOIN frame */
  int from;
  uint64_t until;
  uint8_t na[SHOAL__NONCE_BYTES];
  unsigned char buf[JOIN_FRAME_BYTES > ANSWER_BYTES ? JOIN_FRAME_BYTES : ANSWER_BYTES];
  size_t got;
  char src[64];
} pend_t;

#define MAX_PEND 64

static void mark_gone(member_t *m, const char *why) {
  if (m->probe_fd >= 0) close(m->probe_fd);
  if (m->link_fd >= 0) close(m->link_fd);
  m->probe_fd = m->link_fd = -1;
  m->state = M_GONE;
  snprintf(m->why, sizeof m->why, "%s", why);
}

static void probe_start(shoal_comm_t *c, int r, member_t *m, shoal__deadline_t dl) {
  struct in_addr ip;
  int port;
  if (shoal__sock_parse_addr(addr_of(c, r), &ip, &port)) {
    mark_gone(m, "no usable address");
    return;
  }
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons((uint16_t)port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    mark_gone(m, "socket() failed");
    return;
  }
  m->probe_fd = fd;
  uint64_t until = shoal__now_ns() + (uint64_t)(SHOAL__PROBE_S * 1e9);
  m->probe_until = until < dl.at_ns ? until : dl.at_ns;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
    m->state = M_ALIVE;
  } else if (errno == EINPROGRESS) {
    m->state = M_PROBING;
  } else {
    char why[96];
    snprintf(why, sizeof why, "connection %s", strerror(errno));
    mark_gone(m, why);
  }
}

static void pend_drop(pend_t *pd, int *np, int i) {
  close(pd[i].fd);
  pd[i] = pd[--*np];
}

/* A complete answer: verify, send the verdict. The sender's rank, or -1. */
static int pend_verify(shoal_comm_t *c, member_t *mem, pend_t *p) {
  shoal__hs_link_t l;
  int mac_ok = shoal__hs_read_answer(&c->w->key, LINK_MAGIC, p->na, p->buf, &l);
  if (mac_ok < 0) return -1;
  int from = l.from, to = l.to;
  unsigned char verdict[SHOAL__HS_VERDICT_BYTES];
  uint32_t st = LK_OK;
  if (!mac_ok)
    st = LK_BAD_TOKEN;
  else if (l.session != c->id)
    st = LK_OTHER;
  else if (to != c->rank || from <= c->rank || from >= c->size || mem[from].state == M_JOINED)
    st = LK_WRONG_RANK;
  shoal__hs_verdict(&c->w->key, st, p->na, p->buf, verdict);
  int wrc = shoal__sock_write_all(p->fd, verdict, sizeof verdict, shoal__deadline_in(1.0), "shrink: verdict");
  if (st != LK_OK) {
    SHOAL_WARN("NET", "rank %d: shrink: refused connection from %s (claims rank %d): %s", c->rank, p->src, from,
               st == LK_BAD_TOKEN ? "wrong SHOAL_TOKEN"
               : st == LK_OTHER   ? "it shrinks another communicator"
                                  : "unexpected rank");
    return -1;
  }
  return wrc ? -1 : from;
}

static void list_ranks(const member_t *mem, int n, int state, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (int r = 0; r < n && used + 16 < cap; r++)
    if (mem[r].state == state || (state == M_ALIVE && mem[r].state == M_PROBING))
      used += (size_t)snprintf(out + used, cap - used, "%s%d", used ? ", " : "", r);
}

static void send_fail(member_t *mem, int n, int status, const char *text) {
  unsigned char st[4];
  shoal__put_u32(st, (uint32_t)-status);
  for (int r = 0; r < n; r++)
    if (mem[r].state == M_JOINED)
      shoal__store_frame_write(mem[r].link_fd, MSG_FAIL, st, 4, text, strlen(text), shoal__deadline_in(1.0), "shrink");
}

/* The coordinator's state while it waits for the ranks above it. */
typedef struct coord {
  shoal_comm_t *c;
  member_t *mem;
  shoal__deadline_t dl;
  pend_t *pd; /* handshakes in progress on this rank's listener */
  int np;
  struct pollfd *pf; /* one poll's set: the listener, the handshakes, the members' probes and links */
  int *pf_who;       /* -1: the listener; PEND_BASE + i: handshake i; else the member's rank */
  int k;
} coord_t;

#define PEND_BASE 1000000

/* Fails the shrink at the deadline, naming the ranks alive that did not join. 0 before it. */
static int coord_deadline(coord_t *x, uint64_t now) {
  if (now < x->dl.at_ns) return 0;
  char alive[256];
  list_ranks(x->mem, x->c->size, M_ALIVE, alive, sizeof alive);
  int rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "rank(s) %s alive (their hosts accept connections) but did not join "
                         "the shrink within %.1f s: every live rank must call shoal_comm_shrink", alive,
                         x->c->timeout_s);
  send_fail(x->mem, x->c->size, rc, shoal_last_error());
  /* the ranks whose link is verified but whose JOIN is not read yet are told too (they read a decision
   * next) */
  unsigned char st[4];
  shoal__put_u32(st, (uint32_t)-rc);
  const char *text = shoal_last_error();
  for (int i = 0; i < x->np; i++)
    if (x->pd[i].stage == 1)
      shoal__store_frame_write(x->pd[i].fd, MSG_FAIL, st, 4, text, strlen(text), shoal__deadline_in(1.0), "shrink");
  return rc;
}

/* Probes and handshakes past their time are over; the poll set of what is left. The time of the next of
 * their deadlines (or the shrink's). */
static uint64_t coord_poll_set(coord_t *x, uint64_t now) {
  int n = x->c->size, me = x->c->rank;
  member_t *mem = x->mem;
  uint64_t until = x->dl.at_ns;
  for (int r = me + 1; r < n; r++) {
    if (mem[r].state == M_PROBING && now >= mem[r].probe_until) {
      char why[96];
      snprintf(why, sizeof why, "its host did not answer a connection within %.0f s", SHOAL__PROBE_S);
      mark_gone(&mem[r], why);
    }
    if (mem[r].state == M_PROBING && mem[r].probe_until < until) until = mem[r].probe_until;
  }
  for (int i = x->np - 1; i >= 0; i--)
    if (now >= x->pd[i].until) pend_drop(x->pd, &x->np, i);
  for (int i = 0; i < x->np; i++)
    if (x->pd[i].until < until) until = x->pd[i].until;
  struct pollfd *pf = x->pf;
  int *who = x->pf_who, k = 0;
  pf[k] = (struct pollfd){x->c->w->listen_fd, POLLIN, 0}, who[k++] = -1;
  for (int i = 0; i < x->np; i++) pf[k] = (struct pollfd){x->pd[i].fd, POLLIN, 0}, who[k++] = PEND_BASE + i;
  for (int r = me + 1; r < n; r++) {
    if (mem[r].state == M_PROBING) pf[k] = (struct pollfd){mem[r].probe_fd, POLLOUT, 0}, who[k++] = r;
    if (mem[r].state == M_ALIVE) pf[k] = (struct pollfd){mem[r].probe_fd, POLLIN | POLLRDHUP, 0}, who[k++] = r;
    if (mem[r].state == M_JOINED) pf[k] = (struct pollfd){mem[r].link_fd, POLLIN | POLLRDHUP, 0}, who[k++] = r;
  }
  x->k = k;
  return until;
}

/* Events on the members' probes (connected: alive; any event later: gone) and links (closed: gone). */
static void coord_members(coord_t *x) {
  for (int i = 0; i < x->k; i++) {
    int r = x->pf_who[i];
    if (!x->pf[i].revents || r < 0 || r >= PEND_BASE) continue;
    member_t *m = &x->mem[r];
    if (m->state == M_PROBING) {
      int err = 0;
      socklen_t el = sizeof err;
      getsockopt(m->probe_fd, SOL_SOCKET, SO_ERROR, &err, &el);
      if (err) {
        char why[96];
        snprintf(why, sizeof why, "connection %s", strerror(err));
        mark_gone(m, why);
      } else {
        m->state = M_ALIVE;
      }
    } else if (m->state == M_ALIVE) { /* nothing is ever sent on a probe: any event is its end */
      mark_gone(m, "its listener closed (the process ended)");
    } else if (m->state == M_JOINED) {
      char b;
      ssize_t got = recv(m->link_fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
      if (got <= 0 && !(got < 0 && (errno == EAGAIN || errno == EINTR)))
        mark_gone(m, "it left the shrink after joining (died?)");
    }
  }
}

/* Handshake q's bytes arrived: its answer verified (then it waits for the JOIN), or its JOIN read (the
 * rank joined). 1 while it goes on, 0 when it is over (dropped or joined: the caller takes it out). */
static int coord_pend_step(coord_t *x, pend_t *q) {
  size_t want = q->stage == 0 ? ANSWER_BYTES : JOIN_FRAME_BYTES;
  ssize_t got = recv(q->fd, q->buf + q->got, want - q->got, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
  if (got <= 0) return 0;
  q->got += (size_t)got;
  if (q->got < want) return 1;
  if (q->stage == 0) {
    q->from = pend_verify(x->c, x->mem, q);
    if (q->from < 0) return 0;
    q->stage = 1;
    q->got = 0;
    return 1;
  }
  if (shoal__get_u32(q->buf) != SHOAL__REG_BYTES || q->buf[4] != MSG_JOIN) return 0;
  member_t *m = &x->mem[q->from];
  if (m->probe_fd >= 0) close(m->probe_fd);
  m->probe_fd = -1;
  m->link_fd = q->fd;
  q->fd = -1; /* the member's link now */
  memcpy(m->reg, q->buf + 8, SHOAL__REG_BYTES);
  m->reg[SHOAL__REG_BYTES - 1] = '\0';
  m->state = M_JOINED;
  return 0;
}

/* The pending handshakes with events, from the back (pend_drop moves the last one into the hole). */
static void coord_pending(coord_t *x) {
  for (int i = x->k - 1; i >= 0; i--) {
    int w = x->pf_who[i];
    if (!x->pf[i].revents || w < PEND_BASE) continue;
    pend_t *q = &x->pd[w - PEND_BASE];
    if (coord_pend_step(x, q)) continue;
    if (q->fd >= 0)
      pend_drop(x->pd, &x->np, w - PEND_BASE);
    else
      *q = x->pd[--x->np];
  }
}

/* New connections on this rank's listener: each gets the link greeting and becomes a pending handshake
 * (the oldest one makes room when MAX_PEND are pending). */
static void coord_accept(coord_t *x) {
  for (;;) {
    struct sockaddr_in from;
    socklen_t al = sizeof from;
    int fd = accept4(x->c->w->listen_fd, (struct sockaddr *)&from, &al, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    if (x->np == MAX_PEND) pend_drop(x->pd, &x->np, 0);
    pend_t *q = &x->pd[x->np];
    memset(q, 0, sizeof *q);
    q->fd = fd;
    q->from = -1;
    shoal__sock_addr_str(&from, q->src, sizeof q->src);
    shoal__sock_tune(fd, 0);
    uint64_t hd = shoal__now_ns() + (uint64_t)(HS_TIMEOUT_S * 1e9);
    q->until = hd < x->dl.at_ns ? hd : x->dl.at_ns;
    unsigned char hello[SHOAL__HS_HELLO_BYTES];
    shoal__hs_hello(LINK_MAGIC, q->na, hello);
    x->np++;
    if (send(fd, hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof hello)
      pend_drop(x->pd, &x->np, x->np - 1);
  }
}

/* The decision: this rank and every rank that joined, in their old order, in *p and sent to every member. */
static int coord_propose(coord_t *x, const shoal__reg_t myreg, proposal_t *p) {
  int n = x->c->size, me = x->c->rank;
  member_t *mem = x->mem;
  int m = 1;
  for (int r = me + 1; r < n; r++) m += mem[r].state == M_JOINED;
  p->id = shoal__auth_random_u64() | 1;
  p->n = m;
  p->old = malloc((size_t)m * sizeof *p->old);
  p->regs = malloc((size_t)m * sizeof *p->regs);
  size_t blen = 12 + (size_t)m * (4 + SHOAL__REG_BYTES);
  unsigned char *b = malloc(blen);
  if (!p->old || !p->regs || !b) {
    free(b);
    int rc = shoal__seterr(SHOAL_ERR_NOMEM, "shrink: out of memory");
    send_fail(mem, n, rc, shoal_last_error());
    return rc;
  }
  int i = 0;
  p->old[i] = me;
  memcpy(p->regs[i++], myreg, SHOAL__REG_BYTES);
  for (int r = me + 1; r < n; r++)
    if (mem[r].state == M_JOINED) {
      p->old[i] = r;
      memcpy(p->regs[i++], mem[r].reg, SHOAL__REG_BYTES);
    }
  shoal__put_u64(b, p->id);
  shoal__put_u32(b + 8, (uint32_t)m);
  for (int j = 0; j < m; j++) {
    shoal__put_u32(b + 12 + (size_t)j * (4 + SHOAL__REG_BYTES), (uint32_t)p->old[j]);
    memcpy(b + 16 + (size_t)j * (4 + SHOAL__REG_BYTES), p->regs[j], SHOAL__REG_BYTES);
  }
  /* a member that died since it joined misses its copy: the others find it gone while they build */
  for (int r = me + 1; r < n; r++)
    if (mem[r].state == M_JOINED)
      shoal__store_frame_write(mem[r].link_fd, MSG_PROPOSE, b, blen, NULL, 0, shoal__deadline_in(2.0), "shrink");
  free(b);
  return 0;
}

/* Wait until every rank above this one joined or is gone; then propose. *p gets the decision. */
static int coordinate(shoal_comm_t *c, const shoal__reg_t myreg, member_t *mem, shoal__deadline_t dl, proposal_t *p) {
  int n = c->size, me = c->rank, rc = 0;
  coord_t x = {.c = c, .mem = mem, .dl = dl};
  x.pd = calloc(MAX_PEND, sizeof *x.pd);
  x.pf = calloc((size_t)(1 + MAX_PEND + n), sizeof *x.pf);
  x.pf_who = calloc((size_t)(1 + MAX_PEND + n), sizeof *x.pf_who);
  if (!x.pd || !x.pf || !x.pf_who) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "shrink: out of memory");
    goto out;
  }
  for (int r = me + 1; r < n; r++) probe_start(c, r, &mem[r], dl);
  shoal__sock_set_nonblock(c->w->listen_fd);
  for (;;) {
    int open = 0;
    for (int r = me + 1; r < n; r++) open += mem[r].state != M_JOINED && mem[r].state != M_GONE;
    if (!open) break;
    uint64_t now = shoal__now_ns();
    if ((rc = coord_deadline(&x, now))) goto out;
    uint64_t until = coord_poll_set(&x, now);
    int ms = (int)((until > now ? until - now : 0) / 1000000) + 1;
    int pr = poll(x.pf, (nfds_t)x.k, ms > 1000 ? 1000 : ms);
    if (pr < 0 && errno != EINTR) {
      rc = shoal__seterr(SHOAL_ERR_SYSTEM, "poll: %s", strerror(errno));
      send_fail(mem, n, rc, shoal_last_error());
      goto out;
    }
    if (pr <= 0) continue;
    coord_members(&x);
    coord_pending(&x);
    if (x.pf[0].revents & POLLIN) coord_accept(&x);
  }
  rc = coord_propose(&x, myreg, p);
out:
  for (int j = 0; j < x.np; j++) close(x.pd[j].fd);
  free(x.pd);
  free(x.pf);
  free(x.pf_who);
  return rc;
}

/* This rank's advertised IP: the one of its registration (a world of one from init has none: the
 * interface SHOAL_SOCKET_IFNAME names, else loopback). */
static int my_ip(const shoal__world_t *w, struct in_addr *ip) {
  int port;
  if (shoal__sock_parse_addr(w->peers[w->rank].addr, ip, &port) == 0) return 0;
  struct in_addr lo = {htonl(INADDR_LOOPBACK)};
  char how[160];
  return shoal__boot_pick_addr(w->cfg->ifname, w->cfg->ifname_src, lo, ip, how, sizeof how);
}

/* The coordinator: the lowest rank that answers; gone ones are skipped, a coordinator that dies before its
 * decision hands over to the next; none below this rank: this rank coordinates. The decision in *p. */
static int find_coordinator(shoal_comm_t *c, member_t *mem, const shoal__reg_t myreg, shoal__deadline_t dl,
                            proposal_t *p, int *coord) {
  int me = c->rank, rc = 0;
  for (int j = 0; j < me && *coord < 0; j++) {
    int fd = -1;
    rc = link_connect(c, j, dl, &fd);
    if (rc == 0) {
      rc = member_wait(c, j, fd, myreg, dl, p);
      close(fd);
      if (rc == 0) *coord = j;
    }
    if (rc == SHOAL_ERR_PEER_CLOSED) {
      SHOAL_DEBUG("NET", "rank %d: shrink: %s", me, shoal_last_error());
      mark_gone(&mem[j], shoal_last_error());
      rc = 0;
      continue;
    }
    if (rc) break;
  }
  if (!rc && *coord < 0) {
    for (int j = 0; j < me; j++) mem[j].state = M_GONE;
    *coord = me;
    rc = coordinate(c, myreg, mem, dl, p);
  }
  return rc;
}

int shoal_comm_shrink(shoal_comm_t *c, shoal_comm_t **out) {
  if (!c || !out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_shrink: NULL argument");
  shoal__world_t *w = c->w;
  if (w->async) shoal__async_quiesce(w);
  int rc = shoal__reform_own(w, "shoal_comm_shrink");
  if (rc) return rc;
  uint64_t t0 = shoal__now_ns();
  shoal__deadline_t dl = shoal__deadline_in(c->timeout_s);
  /* revoke: the ranks still inside a call on this world fail at once and come here too */
  if (!w->aborted) {
    char text[160];
    snprintf(text, sizeof text, "rank %d: shrink: this rank is rebuilding the communicator without its lost ranks "
             "(shoal_comm_shrink)", c->rank);
    w->revoking = 1;
    shoal__world_abort(w, SHOAL_ERR_ABORTED, text);
  }
  if (!c->errmsg[0]) snprintf(c->errmsg, sizeof c->errmsg, "%s", w->abort_msg);
  c->aborted = 1;
  int n = c->size, me = c->rank;
  if (n > 1 && w->listen_fd < 0) {
    shoal__reform_release(w);
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "rank %d: shrink: this world has no listener", me);
  }
  struct in_addr ip;
  int lfd = -1;
  shoal__reg_t myreg;
  if ((rc = my_ip(w, &ip)) || (rc = shoal__reform_listen(w->cfg, ip, w, &lfd, myreg))) {
    shoal__reform_release(w);
    return shoal__err_prefix(rc, "rank %d: shrink: ", me);
  }
  member_t *mem = calloc((size_t)n, sizeof *mem);
  if (!mem) {
    close(lfd);
    shoal__reform_release(w);
    return shoal__seterr(SHOAL_ERR_NOMEM, "shrink: out of memory");
  }
  for (int r = 0; r < n; r++) mem[r].probe_fd = mem[r].link_fd = -1;
  proposal_t p = {0};
  int coord = -1;
  rc = find_coordinator(c, mem, myreg, dl, &p, &coord);
  for (int r = 0; r < n; r++) {
    if (mem[r].probe_fd >= 0) close(mem[r].probe_fd);
    if (mem[r].link_fd >= 0) close(mem[r].link_fd);
  }
  free(mem);
  int newrank = -1;
  for (int i = 0; !rc && i < p.n; i++)
    if (p.old[i] == me) newrank = i;
  if (!rc && newrank < 0) rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "shrink: the decision leaves this rank out");
  if (rc) {
    proposal_free(&p);
    close(lfd);
    shoal__reform_release(w);
    return shoal__err_prefix(rc, "rank %d: shrink: ", me);
  }
  shoal_comm_t *nc = NULL;
  int brc = shoal__reform_build(w, NULL, p.id, newrank, p.n, p.regs, lfd, c->timeout_s, dl, &nc);
  shoal__reform_release(w);
  if (!nc) {
    proposal_free(&p);
    return shoal__err_prefix(brc, "rank %d: shrink: ", me);
  }
  char lost[256] = "";
  size_t used = 0;
  for (int r = 0, i = 0; r < n && used + 16 < sizeof lost; r++) {
    if (i < p.n && p.old[i] == r) {
      i++;
      continue;
    }
    used += (size_t)snprintf(lost + used, sizeof lost - used, "%s%d", used ? ", " : "", r);
  }
  SHOAL_INFO("INIT", "rank %d: shrink: %d of %d ranks left (lost: %s; coordinator rank %d): now rank %d of %d, "
             "world %016llx, %.1f ms%s", me, p.n, n, lost[0] ? lost : "none", coord, newrank, p.n,
             (unsigned long long)p.id, (double)(shoal__now_ns() - t0) * 1e-6,
             brc ? "; a member failed while it was built: the new communicator is aborted" : "");
  proposal_free(&p);
  *out = nc;
  return 0;
}
