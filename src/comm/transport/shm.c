/* Shared-memory segment of a host group and the shm point-to-point
 * transport (per-pair SPSC byte rings carrying the same framed stream as
 * TCP: 40-byte header then payload). See shm.h and docs/shm.md. */
#include "comm/transport/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/sock.h"
#include "comm/tune/tune.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define SEG_MAGIC 0x4d48534c414f4853ull /* "SHOALSHM" */
#define PROBE_NS 2000000ull              /* liveness probe period while waiting: 2 ms */
#define SLEEP_NS 2000000l                /* longest futex sleep: re-check deadline and peers */

typedef struct seg_hdr {
  uint64_t magic;
  uint64_t nlocal, ring_bytes, chunk_bytes, total;
  uint64_t nonce; /* the leader's random nonce, also in its message: proves the right file was opened */
} seg_hdr_t;

/* The leader's message to the other members: where and how big. name is
 * the memfd as /proc/<leader pid>/fd/<fd> ("" if creation failed). */
typedef struct seg_msg {
  char name[64];
  uint64_t ring_bytes, chunk_bytes, total, nonce;
} seg_msg_t;

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static size_t layout(shoal__shm_t *s, int set) {
  size_t off = align_up(sizeof(seg_hdr_t), SHOAL__SHM_LINE);
  size_t ctrl = off;
  off += align_up((size_t)s->nlocal * sizeof(shoal__shm_ctrl_t), 4096);
  size_t rings = off;
  off += (size_t)s->nlocal * (size_t)s->nlocal * (sizeof(shoal__shm_ring_t) + s->ring_bytes);
  off = align_up(off, 4096);
  size_t arena = off;
  off += (size_t)s->nlocal * SHOAL__SHM_NBUF * s->chunk_bytes;
  size_t result = off;
  off += SHOAL__SHM_NBUF * s->chunk_bytes;
  size_t boxes = off;
  off += (size_t)s->nlocal * SHOAL__SHM_NBUF * sizeof(shoal__shm_box_t);
  if (set) {
    char *b = s->base;
    s->ctrl = (shoal__shm_ctrl_t *)(b + ctrl);
    s->rings = b + rings;
    s->arena = b + arena;
    s->result = b + result;
    s->boxes = (shoal__shm_box_t *)(b + boxes);
  }
  return off;
}

/* ---- wake-ups ---- */

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

void shoal__shm_ring_bell(shoal__shm_t *s, int l) {
  shoal__shm_ctrl_t *p = &s->ctrl[l];
  /* seq_cst pairs with the sleeper's store to `sleeping` then re-check (Dekker):
   * either it sees our flag or we see it sleeping. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&p->sleeping, memory_order_relaxed)) {
    atomic_fetch_add(&p->bell, 1);
    futex(&p->bell, FUTEX_WAKE, 1, NULL);
  }
}

void shoal__shm_ring_all(shoal__shm_t *s) {
  for (int l = 0; l < s->nlocal; l++)
    if (l != s->lrank) shoal__shm_ring_bell(s, l);
}

/* Sleep on this rank's bell unless ready() already holds. */
static void bell_sleep(shoal__shm_t *s, int (*ready)(void *), void *arg, long max_ns) {
  shoal__shm_ctrl_t *me = &s->ctrl[s->lrank];
  uint32_t v = atomic_load(&me->bell);
  atomic_store(&me->sleeping, 1);
  atomic_thread_fence(memory_order_seq_cst);
  if (!ready(arg)) {
    struct timespec ts = {0, max_ns};
    futex(&me->bell, FUTEX_WAIT, v, &ts);
  }
  atomic_store(&me->sleeping, 0);
}

/* One spin of a wait that started `waited` ns ago. The first microseconds
 * stay on the core (pause: a peer running on another core answers in
 * ~100 ns); after that, or when this host has more ranks than cores, give
 * the core away (sched_yield), because the peer may be queued behind us on
 * the same core: other jobs can make any machine oversubscribed. */
static void spin_once(const shoal__shm_t *s, uint64_t waited) {
  if (s->oversub || waited > 3000) {
    sched_yield();
    return;
  }
  for (int i = 0; i < 4; i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
  }
}

/* ---- liveness ---- */

static int comm_rank_of(const shoal_comm_t *c, int wrank) {
  for (int i = 0; i < c->size; i++)
    if (c->wranks[i] == wrank) return i;
  return -1;
}

/* Look at the TCP connection of a same-host peer (still open, carrying
 * abort and goodbye notices): 0 alive; 1 hung up, said goodbye or closed;
 * < 0 it sent an abort notice (the op is failed, status returned). */
static int probe_conn(shoal_comm_t *c, const shoal__op_t *op, shoal__conn_t *conn) {
  if (conn->fd < 0) return 1;
  unsigned char h[SHOAL__HDR_BYTES];
  ssize_t k = recv(conn->fd, h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
    /* the socket looks alive; the process may not be (its socket shared with a child, say) */
    shoal__shm_t *s = c->w->shm;
    int l = s->w2l[conn->peer];
    if (l >= 0 && s->pidfd && s->pidfd[l] == -2) return 1; /* already gone when this rank looked */
    if (l >= 0 && s->pidfd && s->pidfd[l] >= 0) {
      struct pollfd pf = {s->pidfd[l], POLLIN, 0};
      if (poll(&pf, 1, 0) > 0) return 1;
    }
    return 0;
  }
  if (k < 0) return 1;
  if (k == 0) return 1;
  int rc = shoal__conn_idle_event(c, op, conn, 0);
  if (rc < 0) return rc;
  return conn->state != SHOAL__CONN_OPEN;
}

static int probe_due(shoal__shm_t *s, int l) {
  uint64_t now = shoal__now_ns();
  if (now - s->last_check_ns[l] < PROBE_NS) return 0;
  s->last_check_ns[l] = now;
  return 1;
}

/* ---- the transport ---- */

static void ring_put(char *data, size_t cap, uint64_t pos, const void *src, size_t n) {
  size_t at = (size_t)(pos % cap), first = cap - at < n ? cap - at : n;
  memcpy(data + at, src, first);
  if (n > first) memcpy(data, (const char *)src + first, n - first);
}

static void ring_get(const char *data, size_t cap, uint64_t pos, void *dst, size_t n) {
  size_t at = (size_t)(pos % cap), first = cap - at < n ? cap - at : n;
  memcpy(dst, data + at, first);
  if (n > first) memcpy((char *)dst + first, data, n - first);
}

static int shm_send_progress(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  shoal__shm_t *s = w->shm;
  int to = s->w2l[conn->peer];
  shoal__shm_ring_t *r = shoal__shm_ring(s, s->lrank, to);
  char *data = (char *)(r + 1);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  size_t space = s->ring_bytes - (size_t)(tail - head), moved = 0;
  if (req->hdr_done < SHOAL__HDR_BYTES && space) {
    size_t n = (size_t)(SHOAL__HDR_BYTES - req->hdr_done);
    if (n > space) n = space;
    ring_put(data, s->ring_bytes, tail + moved, req->hdr + req->hdr_done, n);
    req->hdr_done += (int)n;
    moved += n, space -= n;
  }
  if (req->hdr_done == SHOAL__HDR_BYTES && req->done < req->bytes && space) {
    size_t n = req->bytes - req->done;
    if (n > space) n = space;
    ring_put(data, s->ring_bytes, tail + moved, (const char *)req->buf + req->done, n);
    req->done += n;
    moved += n;
  }
  if (moved) {
    atomic_store_explicit(&r->tail, tail + moved, memory_order_release);
    shoal__shm_ring_bell(s, to);
  }
  if (req->hdr_done == SHOAL__HDR_BYTES && req->done == req->bytes) return 1;
  if (!moved && probe_due(s, to)) { /* ring full: is the reader still there? */
    int pr = probe_conn(req->comm, &req->op, conn);
    if (pr < 0) return req->state = pr;
    if (pr) return shoal__conn_broken(w, conn, req, SHOAL_ERR_PEER_CLOSED, NULL);
  }
  return 0;
}

static int shm_recv_progress(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  shoal__shm_t *s = w->shm;
  int from = s->w2l[conn->peer];
  shoal__shm_ring_t *r = shoal__shm_ring(s, from, s->lrank);
  const char *data = (const char *)(r + 1);
  for (int pass = 0; pass < 2; pass++) {
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    size_t avail = (size_t)(tail - head), moved = 0;
    if (req->hdr_done < SHOAL__HDR_BYTES && avail) {
      size_t n = (size_t)(SHOAL__HDR_BYTES - req->hdr_done);
      if (n > avail) n = avail;
      ring_get(data, s->ring_bytes, head, req->hdr + req->hdr_done, n);
      req->hdr_done += (int)n;
      moved += n, avail -= n;
      if (req->hdr_done == SHOAL__HDR_BYTES) {
        atomic_store_explicit(&r->head, head + moved, memory_order_release);
        head += moved, moved = 0;
        int rc = shoal__recv_header(w, conn, req);
        if (rc < 0) return rc;
      }
    }
    if (req->hdr_done == SHOAL__HDR_BYTES && req->done < req->bytes && avail) {
      size_t n = req->bytes - req->done;
      if (n > avail) n = avail;
      ring_get(data, s->ring_bytes, head + moved, (char *)req->buf + req->done, n);
      req->done += n;
      moved += n;
    }
    if (moved) atomic_store_explicit(&r->head, head + moved, memory_order_release);
    if (moved || req->hdr_done == SHOAL__HDR_BYTES) shoal__shm_ring_bell(s, from);
    if (req->hdr_done == SHOAL__HDR_BYTES && req->done == req->bytes) return 1;
    if (moved || tail != head) return 0;
    if (pass == 1) break; /* the probe said gone, and the second look found nothing either */
    /* nothing to read: is the writer still there? (then look at the ring once more:
     * it may have written its last bytes just before leaving) */
    if (!probe_due(s, from)) return 0;
    int pr = probe_conn(req->comm, &req->op, conn);
    if (pr < 0) return req->state = pr;
    if (!pr) return 0;
  }
  return shoal__conn_broken(w, conn, req, SHOAL_ERR_PEER_CLOSED, NULL);
}

static void shm_shutdown(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text) {
  /* Notices go over the TCP connection, which the peer watches and which
   * carries no payload between same-host ranks: always at a message boundary,
   * even when a shared-memory message to this peer is half written. */
  shoal__tcp_close(w, conn, wop, text, 1);
}

const shoal__transport_t shoal__shm_transport = {
    .name = "shm",
    .send_progress = shm_send_progress,
    .recv_progress = shm_recv_progress,
    .shutdown = shm_shutdown,
};

/* ---- waiting in shoal__progress ---- */

static int conns_ready(void *arg) {
  shoal__world_t *w = arg;
  shoal__shm_t *s = w->shm;
  for (int l = 0; l < s->nlocal; l++) {
    if (l == s->lrank) continue;
    shoal__conn_t *cn = &w->conns[s->l2w[l]];
    if (cn->fd < 0) continue;
    if (cn->sq_head) {
      shoal__shm_ring_t *r = shoal__shm_ring(s, s->lrank, l);
      if (atomic_load(&r->tail) - atomic_load(&r->head) < s->ring_bytes) return 1;
    }
    if (cn->rq_head) {
      shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->lrank);
      if (atomic_load(&r->tail) != atomic_load(&r->head)) return 1;
    }
  }
  return 0;
}

static _Thread_local uint64_t g_idle_since; /* start of the current spin phase of this thread's waits */
static _Thread_local uint64_t g_last_poll;
static _Thread_local uint64_t g_last_call;  /* last time the TCP sockets were polled during shm waits */

int shoal__shm_progress_wait(shoal__world_t *w, int wait_ms) {
  shoal__shm_t *s = w->shm;
  if (!s || !s->base) return wait_ms;
  int pending = 0;
  for (int l = 0; l < s->nlocal && !pending; l++) {
    shoal__conn_t *cn = &w->conns[s->l2w[l]];
    pending = l != s->lrank && cn->fd >= 0 && (cn->sq_head || cn->rq_head);
  }
  if (!pending) return wait_ms;
  uint64_t now = shoal__now_ns();
  if (now - g_last_call > 200000) g_idle_since = now; /* not called for 200 us: a new wait starts spinning */
  g_last_call = now;
  if (conns_ready(w)) return 0;
  if (now - g_last_poll > PROBE_NS) { /* hang-ups or notices on a TCP socket: let p2p.c's poll handle them */
    g_last_poll = now;
    int np = 0;
    for (int i = 0; i < w->size; i++)
      if (i != w->rank && w->conns[i].fd >= 0) w->pfd[np++] = (struct pollfd){w->conns[i].fd, POLLIN | POLLRDHUP, 0};
    if (np && poll(w->pfd, (nfds_t)np, 0) > 0) return wait_ms < 1 ? wait_ms : 1;
  }
  for (int i = 0; i < w->size; i++) { /* TCP work too: do not sleep on the futex, poll it soon */
    shoal__conn_t *cn = &w->conns[i];
    if (i != w->rank && cn->tp != &shoal__shm_transport && (cn->sq_head || cn->rq_head)) {
      spin_once(s, now - g_idle_since);
      return 0;
    }
  }
  if (now - g_idle_since < s->spin_ns) {
    spin_once(s, now - g_idle_since);
    return 0;
  }
  long ns = wait_ms > 0 && (long)wait_ms * 1000000l < SLEEP_NS ? (long)wait_ms * 1000000l : SLEEP_NS;
  bell_sleep(s, conns_ready, w, ns);
  return 0;
}

ssize_t shoal__shm_peek(shoal__world_t *w, shoal__conn_t *conn, void *hdr, size_t cap) {
  shoal__shm_t *s = w->shm;
  shoal__shm_ring_t *r = shoal__shm_ring(s, s->w2l[conn->peer], s->lrank);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  size_t avail = (size_t)(tail - head);
  if (!avail) return recv(conn->fd, hdr, cap, MSG_PEEK | MSG_DONTWAIT); /* notices and hang-ups */
  if (avail > cap) avail = cap;
  ring_get((const char *)(r + 1), s->ring_bytes, head, hdr, avail);
  return (ssize_t)avail;
}

int shoal__shm_peer_gone(shoal__world_t *w, shoal__conn_t *conn) {
  shoal__shm_t *s = w->shm;
  int l = s && s->pidfd ? s->w2l[conn->peer] : -1;
  if (l < 0 || (s->pidfd[l] != -2 && (s->pidfd[l] < 0 || !probe_due(s, l)))) return 0;
  if (s->pidfd[l] == -2) return 1;
  struct pollfd pf = {s->pidfd[l], POLLIN, 0};
  return poll(&pf, 1, 0) > 0;
}

static int any_ring_to_me(void *arg) {
  shoal__shm_t *s = arg;
  for (int l = 0; l < s->nlocal; l++) {
    if (l == s->lrank) continue;
    shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->lrank);
    if (atomic_load(&r->tail) != atomic_load(&r->head)) return 1;
  }
  return 0;
}

int shoal__shm_idle_wait(shoal__world_t *w, int wait_ms) {
  shoal__shm_t *s = w->shm;
  if (!s || !s->base || wait_ms == 0) return wait_ms;
  bell_sleep(s, any_ring_to_me, s, 1000000l);
  return 0;
}

/* ---- flag waits of the collectives ---- */

typedef struct flag_wait {
  shoal__shm_t *s;
  int field, only_l, missing;
  uint64_t want;
} flag_wait_t;

static uint64_t flag_value(const shoal__shm_t *s, int l, int field, uint64_t want) {
  const shoal__shm_ctrl_t *p = &s->ctrl[l];
  switch (field) {
  case 0: return atomic_load_explicit(&p->in_step, memory_order_acquire);
  case 1: return atomic_load_explicit(&p->red_step, memory_order_acquire);
  default: return atomic_load_explicit(&shoal__shm_box(s, l, (int)(want % SHOAL__SHM_NBUF))->seq, memory_order_acquire);
  }
}

static int flags_ready(void *arg) {
  flag_wait_t *f = arg;
  shoal__shm_t *s = f->s;
  for (int l = 0; l < s->nlocal; l++) {
    if (l == s->lrank || (f->only_l >= 0 && l != f->only_l)) continue;
    uint64_t v = flag_value(s, l, f->field, f->want);
    if (v < f->want) {
      f->missing = l;
      return 0;
    }
  }
  if (f->field == 0 && f->only_l < 0 && f->want > s->seen_all) s->seen_all = f->want;
  return 1;
}

/* ---- call descriptors ---- */

void shoal__shm_set_desc(shoal_comm_t *c, uint64_t g, const shoal__op_t *op, int phase, int root_l) {
  shoal__shm_t *s = c->w->shm;
  uint64_t d[3];
  d[0] = (uint64_t)op->opcode | (uint64_t)op->dtype << 8 | (uint64_t)op->redop << 16 | (uint64_t)op->algo << 24 |
         (uint64_t)(uint16_t)(root_l + 1) << 32 | (uint64_t)(uint16_t)(op->root + 1) << 48;
  d[1] = op->count;
  d[2] = (uint64_t)op->seq | ((uint64_t)phase & 0xff) << 56 | (c->id & 0xffffffull) << 32;
  memcpy(s->cur_desc, d, sizeof d);
  s->cur_step = g;
  _Atomic uint64_t *bd = shoal__shm_box(s, s->lrank, (int)(g % SHOAL__SHM_NBUF))->desc;
  atomic_store_explicit(&bd[3], 0, memory_order_relaxed); /* seqlock: readers skip a box being rewritten */
  atomic_thread_fence(memory_order_release);
  for (int i = 0; i < 3; i++) atomic_store_explicit(&bd[i], d[i], memory_order_relaxed);
  atomic_store_explicit(&bd[3], g, memory_order_release);
}

/* Local rank l's descriptor of step g into d: 1, or 0 if its box holds another step. */
static int read_desc(const shoal__shm_t *s, int l, uint64_t g, uint64_t *d) {
  _Atomic uint64_t *bd = shoal__shm_box(s, l, (int)(g % SHOAL__SHM_NBUF))->desc;
  if (atomic_load_explicit(&bd[3], memory_order_acquire) != g) return 0;
  for (int i = 0; i < 3; i++) d[i] = atomic_load_explicit(&bd[i], memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&bd[3], memory_order_relaxed) == g;
}

static void desc_str(const uint64_t *d, char *out, size_t cap) {
  static const char *const ph[] = {"?", "allreduce", "reduce to the host leader", "broadcast", "barrier"};
  int phase = (int)(d[2] >> 56), root_l = (int)(uint16_t)(d[0] >> 32) - 1, root = (int)(uint16_t)(d[0] >> 48) - 1;
  int opcode = (int)(d[0] & 0xff), dtype = (int)(d[0] >> 8 & 0xff), redop = (int)(d[0] >> 16 & 0xff);
  int n = snprintf(out, cap, "%s seq %u count %llu %s", shoal__opcode_name(opcode), (unsigned)(uint32_t)d[2],
                   (unsigned long long)d[1], shoal__dtype_label(dtype));
  if (n < (int)cap && (opcode == SHOAL__OP_ALLREDUCE || opcode == SHOAL__OP_REDUCE))
    n += snprintf(out + n, cap - (size_t)n, " %s", redop < SHOAL_REDOP__COUNT ? shoal_redop_name((shoal_redop_t)redop)
                                                                             : "?");
  if (n < (int)cap && root >= 0) n += snprintf(out + n, cap - (size_t)n, " root %d", root);
  if (n < (int)cap)
    n += snprintf(out + n, cap - (size_t)n, " (shm %s", phase >= 0 && phase <= 4 ? ph[phase] : "?");
  if (n < (int)cap && root_l >= 0 && phase != SHOAL__SHM_PH_ALLREDUCE)
    n += snprintf(out + n, cap - (size_t)n, " from/to local rank %d", root_l);
  if (n < (int)cap) snprintf(out + n, cap - (size_t)n, ", communicator %06llx)",
                             (unsigned long long)(d[2] >> 32 & 0xffffff));
}

static int desc_mismatch(shoal_comm_t *c, const shoal__op_t *op, uint64_t g, int l, const uint64_t *theirs) {
  shoal__shm_t *s = c->w->shm;
  char want[200], got[200];
  desc_str(s->cur_desc, want, sizeof want);
  desc_str(theirs, got, sizeof got);
  int wr = s->l2w[l];
  return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, wr),
                          "mismatch at shared-memory step %llu: this rank (world rank %d) called %s, same-host peer "
                          "(world rank %d) called %s", (unsigned long long)g, c->w->rank, want, wr, got);
}

int shoal__shm_check_desc(shoal_comm_t *c, const shoal__op_t *op, uint64_t g, int only_l) {
  shoal__shm_t *s = c->w->shm;
  for (int l = 0; l < s->nlocal; l++) {
    if (l == s->lrank || (only_l >= 0 && l != only_l)) continue;
    uint64_t d[3];
    if (read_desc(s, l, g, d) && (d[0] != s->cur_desc[0] || d[1] != s->cur_desc[1] || d[2] != s->cur_desc[2]))
      return desc_mismatch(c, op, g, l, d);
  }
  return 0;
}

/* While waiting in a shm collective: a peer that published this step with
 * another call's descriptor, or that sent a point-to-point message of this
 * same call (it runs another algorithm over the rings), will never produce
 * what this rank waits for. */
static int wait_check(shoal_comm_t *c, const shoal__op_t *op, int l) {
  shoal__shm_t *s = c->w->shm;
  uint64_t g = s->cur_step;
  if (g && atomic_load_explicit(&s->ctrl[l].in_step, memory_order_acquire) >= g) {
    int rc = shoal__shm_check_desc(c, op, g, l);
    if (rc) return rc;
  }
  shoal__conn_t *cn = &c->w->conns[s->l2w[l]];
  shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->lrank);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  unsigned char h[SHOAL__HDR_BYTES];
  if (!cn->rq_head && tail - head >= SHOAL__HDR_BYTES &&
      (ring_get((const char *)(r + 1), s->ring_bytes, head, h, sizeof h), 1) &&
      shoal__get_u64(h + 8) == c->id && h[4] != SHOAL__OP_SEND && h[4] < SHOAL__OP__COUNT &&
      shoal__get_u32(h + 16) == op->seq) { /* this very call of this communicator, over the rings: another
                                             * algorithm (a later call may legitimately follow the step this
                                             * rank has not seen yet) */
    char got[160];
    snprintf(got, sizeof got, "%s seq %u count %llu %s", shoal__opcode_name(h[4]), shoal__get_u32(h + 16),
             (unsigned long long)shoal__get_u64(h + 24), shoal__dtype_label(h[5]));
    char want[200];
    desc_str(s->cur_desc, want, sizeof want);
    return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, s->l2w[l]),
                            "mismatch: this rank waits in %s, the same-host peer (world rank %d) sent a "
                            "point-to-point message of %s (another call or another algorithm)", want, s->l2w[l], got);
  }
  return 0;
}

int shoal__shm_wait_flags(shoal_comm_t *c, const shoal__op_t *op, int field, uint64_t want, int only_l) {
  shoal__world_t *w = c->w;
  shoal__shm_t *s = w->shm;
  flag_wait_t f = {s, field, only_l, -1, want};
  if (field == 0 && only_l < 0 && want <= s->seen_all) return 0; /* seen already: no need to touch their lines */
  if (flags_ready(&f)) return 0;
  /* A peer on another core usually answers within a few hundred ns: check
   * the flags in a tight loop first, without reading the clock (a vDSO call
   * per check cost ~25% of a small allreduce). Not when oversubscribed:
   * there the peer may need this very core. */
  if (!s->oversub)
    for (int i = 0; i < 512; i++) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (flags_ready(&f)) return 0;
    }
  uint64_t t0 = shoal__now_ns();
  for (;;) {
    if (w->aborted) return w->abort_status ? w->abort_status : SHOAL_ERR_ABORTED;
    uint64_t now = shoal__now_ns();
    if (now - t0 < s->spin_ns) {
      spin_once(s, now - t0);
    } else {
      int l = f.missing, wr = s->l2w[l];
      if (probe_due(s, l)) {
        int pr = wait_check(c, op, l);
        if (pr < 0) return pr;
        pr = probe_conn(c, op, &w->conns[wr]);
        if (pr < 0) return pr;
        if (pr && !flags_ready(&f) && f.missing == l)
          return shoal__comm_fail(c, SHOAL_ERR_PEER_CLOSED, op, comm_rank_of(c, wr),
                                  "same-host peer (world rank %d, pid %d) %s while this rank waited for its "
                                  "shared-memory step %llu",
                                  wr, (int)s->ctrl[l].pid,
                                  w->conns[wr].state == SHOAL__CONN_LEFT ? "left (destroyed its communicator)"
                                                                         : "died or was killed",
                                  (unsigned long long)want);
      }
      if (now >= op->deadline_ns)
        return shoal__comm_fail(c, SHOAL_ERR_TIMEOUT, op, comm_rank_of(c, wr),
                                "timed out after %.1f s (SHOAL_TIMEOUT) waiting for same-host peer (world rank %d) "
                                "to reach shared-memory step %llu (it is at %llu)",
                                (double)(now - t0) * 1e-9, wr, (unsigned long long)want,
                                (unsigned long long)flag_value(s, l, field, want));
      bell_sleep(s, flags_ready, &f, SLEEP_NS);
    }
    if (flags_ready(&f)) return 0;
  }
}

int shoal__shm_layout_ok(const shoal_comm_t *c, int *nhosts) {
  shoal__shm_t *s = c->w->shm;
  if (!s) return 0;
  if (s->layout_id == c->id) {
    *nhosts = s->layout_nh;
    return s->layout_ok;
  }
  int *cnt = calloc((size_t)s->nhosts, sizeof *cnt);
  if (!cnt) return 0;
  int ok = 1, nh = 0;
  for (int i = 0; i < c->size; i++) {
    int h = s->host_of[c->wranks[i]];
    if (cnt[h]++ == 0) nh++;
  }
  for (int h = 0; h < s->nhosts && ok; h++) {
    if (!cnt[h]) continue;
    int world_n = 0;
    for (int r = 0; r < c->w->size; r++) world_n += s->host_of[r] == h;
    ok = cnt[h] == world_n && (world_n == 1 || s->use_shm); /* SHOAL_SHM assumed the same everywhere */
  }
  free(cnt);
  *nhosts = nh;
  s->layout_id = c->id, s->layout_ok = ok, s->layout_nh = nh;
  return ok;
}

/* ---- attach / detach ---- */

static int same_host(const shoal__peer_info_t *a, const shoal__peer_info_t *b) {
  return !strcmp(a->host, b->host) && !strcmp(a->boot_id, b->boot_id);
}

static int map_segment(shoal__shm_t *s, int fd, size_t total, int create) {
  struct stat st;
  if (fstat(fd, &st)) return shoal__seterr(SHOAL_ERR_SYSTEM, "fstat of the shm segment: %s", strerror(errno));
  if (!create && (st.st_uid != geteuid() || (size_t)st.st_size != total || (st.st_mode & 077)))
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "shm segment: owner %u size %lld mode %o, expected owner %u size %zu "
                         "mode 0600", (unsigned)st.st_uid, (long long)st.st_size, (unsigned)(st.st_mode & 0777),
                         (unsigned)geteuid(), total);
  void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    return shoal__seterr(SHOAL_ERR_SYSTEM, "mmap of a %zu-byte shm segment: %s", total, strerror(errno));
  s->base = p;
  s->size = total;
  layout(s, 1);
  return 0;
}

/* The host group's leader: create, size, map and initialize the segment.
 * An anonymous memory file (memfd): it has no name in /dev/shm at any
 * moment, so no path (a crash, SIGKILL, a failed set-up) can leak it. The
 * members open it through /proc/<leader pid>/fd/<fd> (same user: the kernel's
 * ptrace-read check) while the leader keeps *fd_out open, until their acks. */
static int create_segment(shoal__world_t *w, shoal__shm_t *s, seg_msg_t *msg, int *fd_out) {
  char label[64];
  snprintf(label, sizeof label, "shoal-%016llx", (unsigned long long)w->id);
  size_t total = layout(s, 0);
  int fd = (int)syscall(SYS_memfd_create, label, 1u /* MFD_CLOEXEC */);
  if (fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "memfd_create(%s): %s", label, strerror(errno));
  snprintf(msg->name, sizeof msg->name, "/proc/%d/fd/%d", (int)getpid(), fd);
  msg->nonce = shoal__auth_random_u64() | 1;
  int rc = 0;
  (void)fchmod(fd, 0600);
  int fe;
  /* reserve the pages now: a tmpfs too small for the segment (e.g. a container's 64 MiB /dev/shm)
   * is a clear error here rather than a SIGBUS at the first touch of a missing page */
  if (ftruncate(fd, (off_t)total) || ((fe = posix_fallocate(fd, 0, (off_t)total)) != 0 && (errno = fe))) {
    rc = shoal__seterr(SHOAL_ERR_SYSTEM, "shm segment %s of %zu bytes: %s (is /dev/shm big enough? lower "
                       "SHOAL_SHM_RING_BYTES / SHOAL_SHM_CHUNK_BYTES or set SHOAL_SHM=0)", msg->name, total,
                       strerror(errno));
  } else if (!(rc = map_segment(s, fd, total, 1))) {
    seg_hdr_t *h = s->base;
    h->nlocal = (uint64_t)s->nlocal;
    h->ring_bytes = s->ring_bytes;
    h->chunk_bytes = s->chunk_bytes;
    h->total = total;
    h->nonce = msg->nonce;
    atomic_thread_fence(memory_order_release);
    h->magic = SEG_MAGIC;
  }
  if (rc) close(fd);
  else *fd_out = fd;
  msg->ring_bytes = s->ring_bytes;
  msg->chunk_bytes = s->chunk_bytes;
  msg->total = total;
  return rc;
}

static int open_segment(shoal__shm_t *s, const seg_msg_t *msg) {
  s->ring_bytes = (size_t)msg->ring_bytes;
  s->chunk_bytes = (size_t)msg->chunk_bytes;
  size_t total = layout(s, 0);
  if (total != msg->total)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "shm segment %s: size %llu, expected %zu", msg->name,
                         (unsigned long long)msg->total, total);
  int fd = open(msg->name, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return shoal__seterr(SHOAL_ERR_SYSTEM, "open(%s), the host leader's shared-memory file: %s (ranks of one host "
                         "must share a pid namespace and user; else set SHOAL_SHM=0 or distinct SHOAL_HOSTNAME)",
                         msg->name, strerror(errno));
  int rc = map_segment(s, fd, total, 0);
  close(fd);
  if (!rc && (((seg_hdr_t *)s->base)->magic != SEG_MAGIC || ((seg_hdr_t *)s->base)->nonce != msg->nonce)) {
    munmap(s->base, s->size);
    s->base = NULL;
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "shm segment %s: bad magic", msg->name);
  }
  return rc;
}

/* Exchange over TCP: leader -> members (segment message), members -> leader
 * (1-byte status), then the leader unlinks. */
static int setup_group(shoal_comm_t *c, shoal__shm_t *s, shoal__op_t *op) {
  shoal__world_t *w = c->w;
  int n = s->nlocal, rc = 0;
  seg_msg_t msg;
  memset(&msg, 0, sizeof msg);
  shoal__req_t *reqs = calloc((size_t)n, sizeof *reqs);
  unsigned char *acks = calloc((size_t)n, 1);
  if (!reqs || !acks) {
    free(reqs), free(acks);
    return shoal__seterr(SHOAL_ERR_NOMEM, "shm setup: out of memory");
  }
  op->count = sizeof msg;
  if (s->lrank == 0) {
    int seg_fd = -1;
    int made = create_segment(w, s, &msg, &seg_fd);
    if (made) msg.name[0] = '\0'; /* tells the members that creation failed */
    for (int l = 1; l < n && !rc; l++) rc = shoal__isend(c, op, s->l2w[l], &msg, sizeof msg, &reqs[l]);
    if (!rc) rc = shoal__waitall(c, op, reqs + 1, n - 1);
    op->count = 1;
    for (int l = 1; l < n && !rc; l++) rc = shoal__irecv(c, op, s->l2w[l], &acks[l], 1, &reqs[l]);
    if (!rc) rc = shoal__waitall(c, op, reqs + 1, n - 1);
    if (seg_fd >= 0) close(seg_fd); /* every member mapped it (or failed); only the mappings keep it */
    if (made) rc = made;
    for (int l = 1; l < n && !rc; l++)
      if (acks[l]) rc = shoal__seterr(SHOAL_ERR_SYSTEM, "rank %d: same-host rank %d could not map the shm segment",
                                      w->rank, s->l2w[l]);
  } else {
    int leader = s->l2w[0];
    rc = shoal__irecv(c, op, leader, &msg, sizeof msg, &reqs[0]);
    if (!rc) rc = shoal__waitall(c, op, reqs, 1);
    if (!rc) {
      int mapped = msg.name[0] ? open_segment(s, &msg)
                               : shoal__seterr(SHOAL_ERR_SYSTEM, "rank %d: the host leader (rank %d) could not create "
                                               "the shm segment", w->rank, leader);
      acks[0] = mapped != 0;
      op->count = 1;
      rc = shoal__isend(c, op, leader, &acks[0], 1, &reqs[0]);
      if (!rc) rc = shoal__waitall(c, op, reqs, 1);
      if (!rc) rc = mapped;
    }
  }
  free(reqs);
  free(acks);
  return rc;
}

int shoal__shm_attach(shoal_comm_t *c) {
  shoal__world_t *w = c->w;
  int use, rc;
  long ring, chunk, spin_us, nt;
  if ((rc = shoal__config_bool("SHOAL_SHM", 1, &use)) ||
      (rc = shoal__config_long("SHOAL_SHM_NT_BYTES", 16L << 20, 0, 1L << 40, &nt)) ||
      (rc = shoal__config_long("SHOAL_SHM_RING_BYTES", 256 << 10, 4096, 1L << 30, &ring)) ||
      (rc = shoal__config_long("SHOAL_SHM_CHUNK_BYTES", 512 << 10, 4096, 1L << 30, &chunk)) ||
      (rc = shoal__config_long("SHOAL_SHM_SPIN_US", 50, 0, 10000000, &spin_us)))
    return rc;
  shoal__shm_t *s = calloc(1, sizeof *s);
  if (!s) return shoal__seterr(SHOAL_ERR_NOMEM, "shm: out of memory");
  s->host_of = malloc((size_t)w->size * sizeof *s->host_of);
  s->w2l = malloc((size_t)w->size * sizeof *s->w2l);
  s->l2w = malloc((size_t)w->size * sizeof *s->l2w);
  s->last_check_ns = calloc((size_t)w->size, sizeof *s->last_check_ns);
  s->pidfd = malloc((size_t)w->size * sizeof *s->pidfd);
  if (s->pidfd)
    for (int i = 0; i < w->size; i++) s->pidfd[i] = -1;
  if (!s->host_of || !s->w2l || !s->l2w || !s->last_check_ns || !s->pidfd) {
    w->shm = s;
    shoal__shm_detach(w);
    return shoal__seterr(SHOAL_ERR_NOMEM, "shm: out of memory");
  }
  for (int r = 0; r < w->size; r++) {
    int h = -1;
    for (int q = 0; q < r && h < 0; q++)
      if (same_host(&w->peers[q], &w->peers[r])) h = s->host_of[q];
    s->host_of[r] = h >= 0 ? h : s->nhosts++;
  }
  for (int r = 0; r < w->size; r++) {
    s->w2l[r] = -1;
    if (s->host_of[r] == s->host_of[w->rank]) {
      if (r == w->rank) s->lrank = s->nlocal;
      s->w2l[r] = s->nlocal;
      s->l2w[s->nlocal++] = r;
    }
  }
  /* n^2 rings: cap their total at 64 MiB for large host groups (a ring of 16 KiB still streams) */
  size_t ring_cap = ((size_t)64 << 20) / ((size_t)s->nlocal * (size_t)s->nlocal);
  if ((size_t)ring > ring_cap) ring = (long)(ring_cap > 16384 ? ring_cap : 16384);
  s->ring_bytes = align_up((size_t)ring, 4096);
  s->chunk_bytes = align_up((size_t)chunk, 4096);
  s->spin_ns = (uint64_t)spin_us * 1000;
  s->nt_bytes = (size_t)nt;
  s->use_shm = use;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  s->oversub = cores > 0 && s->nlocal > cores;
  w->shm = s;
  SHOAL_DEBUG("INIT", "rank %d: %d host(s); %d rank(s) on this host (%s)%s", w->rank, s->nhosts, s->nlocal,
              w->peers[w->rank].host, use ? "" : "; SHOAL_SHM=0: TCP between them");
  uint32_t seq0 = c->seq; /* setup traffic does not count: users' seq numbers start at 1 */
  if (w->size > 1) {
    shoal__op_t op = {.opcode = SHOAL__OP_INTERNAL, .dtype = SHOAL_UINT8, .root = -1, .tag = 0x5348};
    if ((rc = shoal__op_begin(c, &op))) return rc;
    if (use && s->nlocal > 1) rc = setup_group(c, s, &op);
    if ((rc = shoal__op_end(c, &op, rc))) return rc;
    if (use && s->nlocal > 1) {
      s->ctrl[s->lrank].pid = (int32_t)getpid();
      for (int l = 0; l < s->nlocal; l++)
        if (l != s->lrank) {
          w->conns[s->l2w[l]].tp = &shoal__shm_transport;
          int pid = w->peers[s->l2w[l]].pid;
#ifdef SYS_pidfd_open
          s->pidfd[l] = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1; /* -1 on old kernels: socket only */
          if (s->pidfd[l] < 0 && errno == ESRCH) s->pidfd[l] = -2; /* exited (and reaped) already */
#else
          (void)pid;
#endif
        }
      SHOAL_INFO("INIT", "rank %d: shared memory with %d same-host rank(s), %zu-byte segment (unlinked)", w->rank,
                 s->nlocal - 1, s->size);
    }
  }
  rc = shoal__tune_init(c);
  c->seq = seq0;
  return rc;
}

void shoal__shm_detach(shoal__world_t *w) {
  shoal__shm_t *s = w->shm;
  if (!s) return;
  if (s->base) munmap(s->base, s->size);
  free(s->host_of);
  free(s->w2l);
  free(s->l2w);
  free(s->last_check_ns);
  for (int l = 0; s->pidfd && l < s->nlocal; l++)
    if (s->pidfd[l] >= 0) close(s->pidfd[l]);
  free(s->pidfd);
  shoal__tune_free(s);
  free(s);
  w->shm = NULL;
}
