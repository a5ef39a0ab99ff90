/* The shared-memory point-to-point transport: per ordered pair of same-host
 * ranks a single-producer single-consumer byte ring carrying exactly the TCP
 * stream (40-byte header then payload), so every header check works
 * unchanged; its wait hook spins, yields, then sleeps on this rank's futex
 * bell, because ring data does not wake poll() (shm.h, docs/shm.md). */
#include "comm/transport/shm.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include "comm/bootstrap/sock.h"
#include "core/clock.h"
#include "core/error.h"

#define PROBE_NS 2000000ull /* polls of the TCP sockets during shm waits: at most every 2 ms */
#define SLEEP_NS 2000000l   /* longest futex sleep: re-check deadline and peers */

static void ring_put(char *data, size_t cap, uint64_t pos, const void *src, size_t n) {
  size_t at = (size_t)(pos % cap), first = cap - at < n ? cap - at : n;
  memcpy(data + at, src, first);
  if (n > first) memcpy(data, (const char *)src + first, n - first);
}

static int shm_send_progress(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  shoal__shm_t *s = w->shm;
  int to = s->topo->w2l[conn->peer];
  shoal__shm_ring_t *r = shoal__shm_ring(s, s->topo->lrank, to);
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
  if (!moved && shoal__shm_probe_due(s, to)) { /* ring full: is the reader still there? */
    int pr = shoal__shm_probe_conn(req->comm, &req->op, conn);
    if (pr < 0) return req->state = pr;
    if (pr) return shoal__conn_broken(w, conn, req, SHOAL_ERR_PEER_CLOSED, NULL);
  }
  return 0;
}

static int shm_recv_progress(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  shoal__shm_t *s = w->shm;
  int from = s->topo->w2l[conn->peer];
  shoal__shm_ring_t *r = shoal__shm_ring(s, from, s->topo->lrank);
  const char *data = (const char *)(r + 1);
  for (int pass = 0; pass < 2; pass++) {
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    size_t avail = (size_t)(tail - head), moved = 0;
    if (req->hdr_done < SHOAL__HDR_BYTES && avail) {
      size_t n = (size_t)(SHOAL__HDR_BYTES - req->hdr_done);
      if (n > avail) n = avail;
      shoal__shm_ring_get(data, s->ring_bytes, head, req->hdr + req->hdr_done, n);
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
      shoal__shm_ring_get(data, s->ring_bytes, head + moved, (char *)req->buf + req->done, n);
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
    if (!shoal__shm_probe_due(s, from)) return 0;
    int pr = shoal__shm_probe_conn(req->comm, &req->op, conn);
    if (pr < 0) return req->state = pr;
    if (!pr) return (pr = shoal__shm_peer_moved_on(req->comm, &req->op, from, head)) ? (req->state = pr) : 0;
  }
  return shoal__conn_broken(w, conn, req, SHOAL_ERR_PEER_CLOSED, NULL);
}

static void shm_shutdown(shoal__world_t *w, shoal__conn_t *conn, int wop, const char *text) {
  /* Notices go over the TCP connection, which the peer watches and which
   * carries no payload between same-host ranks: always at a message boundary,
   * even when a shared-memory message to this peer is half written. */
  shoal__tcp_close(w, conn, wop, text, 1);
}

/* ---- the wait hook ---- */

static int conns_ready(void *arg) {
  shoal__world_t *w = arg;
  shoal__shm_t *s = w->shm;
  for (int l = 0; l < s->topo->nlocal; l++) {
    if (l == s->topo->lrank) continue;
    shoal__conn_t *cn = &w->conns[s->topo->l2w[l]];
    if (cn->fd < 0) continue;
    if (cn->sq_head) {
      shoal__shm_ring_t *r = shoal__shm_ring(s, s->topo->lrank, l);
      if (atomic_load(&r->tail) - atomic_load(&r->head) < s->ring_bytes) return 1;
    }
    if (cn->rq_head) {
      shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->topo->lrank);
      if (atomic_load(&r->tail) != atomic_load(&r->head)) return 1;
    }
  }
  return 0;
}

static _Thread_local uint64_t g_idle_since; /* start of the current spin phase of this thread's waits */
static _Thread_local uint64_t g_last_poll;
static _Thread_local uint64_t g_last_call;  /* last time the TCP sockets were polled during shm waits */

/* Requests are pending: spin, yield, then sleep on this rank's futex instead of
 * blocking in poll(), which shared-memory data does not wake. */
static int progress_wait(shoal__world_t *w, int wait_ms) {
  shoal__shm_t *s = w->shm;
  if (!s) return wait_ms;
  int pending = 0;
  for (int l = 0; l < s->topo->nlocal && !pending; l++) {
    shoal__conn_t *cn = &w->conns[s->topo->l2w[l]];
    pending = l != s->topo->lrank && cn->fd >= 0 && (cn->sq_head || cn->rq_head);
  }
  if (!pending) return wait_ms;
  uint64_t now = shoal__now_ns();
  if (now - g_last_call > 200000) g_idle_since = now; /* not called for 200 us: a new wait starts spinning */
  g_last_call = now;
  if (conns_ready(w)) return 0;
  if (now - g_last_poll > PROBE_NS) { /* hang-ups or notices on a TCP socket: let the engine's poll handle them */
    g_last_poll = now;
    int np = 0;
    for (int i = 0; i < w->size; i++)
      if (i != w->rank && w->conns[i].fd >= 0) w->pfd[np++] = (struct pollfd){w->conns[i].fd, POLLIN | POLLRDHUP, 0};
    if (np && poll(w->pfd, (nfds_t)np, 0) > 0) return wait_ms < 1 ? wait_ms : 1;
  }
  for (int i = 0; i < w->size; i++) { /* TCP work too: do not sleep on the futex, poll it soon */
    shoal__conn_t *cn = &w->conns[i];
    if (i != w->rank && cn->tp != &shoal__shm_transport && (cn->sq_head || cn->rq_head)) {
      shoal__shm_spin_once(s, now - g_idle_since);
      return 0;
    }
  }
  if (now - g_idle_since < s->spin_ns) {
    shoal__shm_spin_once(s, now - g_idle_since);
    return 0;
  }
  long ns = wait_ms > 0 && (long)wait_ms * 1000000l < SLEEP_NS ? (long)wait_ms * 1000000l : SLEEP_NS;
  shoal__shm_bell_sleep(s, conns_ready, w, ns);
  return 0;
}

/* The ring first, then the socket (notices and hang-ups) when the ring is empty. */
static ssize_t shm_peek(shoal__world_t *w, shoal__conn_t *conn, void *hdr, size_t cap) {
  shoal__shm_t *s = w->shm;
  shoal__shm_ring_t *r = shoal__shm_ring(s, s->topo->w2l[conn->peer], s->topo->lrank);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  size_t avail = (size_t)(tail - head);
  if (!avail) return recv(conn->fd, hdr, cap, MSG_PEEK | MSG_DONTWAIT); /* notices and hang-ups */
  if (avail > cap) avail = cap;
  shoal__shm_ring_get((const char *)(r + 1), s->ring_bytes, head, hdr, avail);
  return (ssize_t)avail;
}

/* Its pidfd, checked at most every 2 ms. */
static int shm_peer_gone(shoal__world_t *w, shoal__conn_t *conn) {
  shoal__shm_t *s = w->shm;
  int l = s && s->pidfd ? s->topo->w2l[conn->peer] : -1;
  if (l < 0 || (s->pidfd[l] != -2 && (s->pidfd[l] < 0 || !shoal__shm_probe_due(s, l)))) return 0;
  if (s->pidfd[l] == -2) return 1;
  struct pollfd pf = {s->pidfd[l], POLLIN, 0};
  return poll(&pf, 1, 0) > 0;
}

static int any_ring_to_me(void *arg) {
  shoal__shm_t *s = arg;
  for (int l = 0; l < s->topo->nlocal; l++) {
    if (l == s->topo->lrank) continue;
    shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->topo->lrank);
    if (atomic_load(&r->tail) != atomic_load(&r->head)) return 1;
  }
  return 0;
}

/* No request posted (recv_any): sleep up to 1 ms until a ring to this rank has data. */
static int idle_wait(shoal__world_t *w, int wait_ms) {
  shoal__shm_t *s = w->shm;
  if (!s || wait_ms == 0) return wait_ms;
  shoal__shm_bell_sleep(s, any_ring_to_me, s, 1000000l);
  return 0;
}

static int shm_wait(shoal__world_t *w, int wait_ms, int idle) {
  return idle ? idle_wait(w, wait_ms) : progress_wait(w, wait_ms);
}

const shoal__transport_t shoal__shm_transport = {
    .name = "shm",
    .send_progress = shm_send_progress,
    .recv_progress = shm_recv_progress,
    .shutdown = shm_shutdown,
    .peek = shm_peek,
    .peer_gone = shm_peer_gone,
    .wait = shm_wait,
};

