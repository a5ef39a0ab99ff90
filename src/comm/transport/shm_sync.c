/* Waits of the shared-memory transport and collectives: futex bells,
 * spinning, liveness probes of same-host peers, the step flags and the call
 * descriptors each step carries (shm.h, docs/shm.md). */
#include "comm/transport/shm.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm/bootstrap/sock.h"
#include "core/clock.h"
#include "core/error.h"

#define PROBE_NS 2000000ull /* liveness probe period while waiting: 2 ms */
#define SLEEP_NS 2000000l   /* longest futex sleep: re-check deadline and peers */

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
  for (int l = 0; l < s->topo->nlocal; l++)
    if (l != s->topo->lrank) shoal__shm_ring_bell(s, l);
}

void shoal__shm_bell_sleep(shoal__shm_t *s, int (*ready)(void *), void *arg, long max_ns) {
  shoal__shm_ctrl_t *me = &s->ctrl[s->topo->lrank];
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
void shoal__shm_spin_once(const shoal__shm_t *s, uint64_t waited) {
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

/* The TCP connection of a same-host peer stays open and carries abort and
 * goodbye notices; its process is watched through a pidfd. */
int shoal__shm_probe_conn(shoal_comm_t *c, const shoal__op_t *op, shoal__conn_t *conn) {
  if (conn->fd < 0) return 1;
  unsigned char h[SHOAL__HDR_BYTES];
  ssize_t k = recv(conn->fd, h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
    /* the socket looks alive; the process may not be (its socket shared with a child, say) */
    shoal__shm_t *s = c->w->shm;
    int l = s->topo->w2l[conn->peer];
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

int shoal__shm_probe_due(shoal__shm_t *s, int l) {
  uint64_t now = shoal__now_ns();
  if (now - s->last_check_ns[l] < PROBE_NS) return 0;
  s->last_check_ns[l] = now;
  return 1;
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
  for (int l = 0; l < s->topo->nlocal; l++) {
    if (l == s->topo->lrank || (f->only_l >= 0 && l != f->only_l)) continue;
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
  shoal__shm_box_t *box = shoal__shm_box(s, s->topo->lrank, (int)(g % SHOAL__SHM_NBUF));
  atomic_store_explicit(&box->seq, 0, memory_order_relaxed); /* seqlock: readers skip a box being rewritten */
  atomic_thread_fence(memory_order_release);
  for (int i = 0; i < 3; i++) atomic_store_explicit(&box->desc[i], d[i], memory_order_relaxed);
  atomic_store_explicit(&box->seq, g, memory_order_release);
}

/* Local rank l's descriptor of step g into d: 1, or 0 if its box holds another step. */
static int read_desc(const shoal__shm_t *s, int l, uint64_t g, uint64_t *d) {
  shoal__shm_box_t *box = shoal__shm_box(s, l, (int)(g % SHOAL__SHM_NBUF));
  if (atomic_load_explicit(&box->seq, memory_order_acquire) != g) return 0;
  for (int i = 0; i < 3; i++) d[i] = atomic_load_explicit(&box->desc[i], memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&box->seq, memory_order_relaxed) == g;
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
  int wr = s->topo->l2w[l];
  return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, wr),
                          "mismatch at shared-memory step %llu: this rank (world rank %d) called %s, same-host peer "
                          "(world rank %d) called %s", (unsigned long long)g, c->w->rank, want, wr, got);
}

int shoal__shm_check_desc(shoal_comm_t *c, const shoal__op_t *op, uint64_t g, int only_l) {
  shoal__shm_t *s = c->w->shm;
  for (int l = 0; l < s->topo->nlocal; l++) {
    if (l == s->topo->lrank || (only_l >= 0 && l != only_l)) continue;
    uint64_t d[3];
    if (read_desc(s, l, g, d) && (d[0] != s->cur_desc[0] || d[1] != s->cur_desc[1] || d[2] != s->cur_desc[2]))
      return desc_mismatch(c, op, g, l, d);
  }
  return 0;
}

int shoal__shm_check_box(shoal_comm_t *c, const shoal__op_t *op, uint64_t g, int l) {
  shoal__shm_t *s = c->w->shm;
  uint64_t d[3], at = atomic_load_explicit(&shoal__shm_box(s, l, (int)(g % SHOAL__SHM_NBUF))->seq,
                                           memory_order_acquire);
  if (at == g) return shoal__shm_check_desc(c, op, g, l);
  if (at > g && read_desc(s, l, at, d)) return desc_mismatch(c, op, g, l, d);
  char want[200];
  desc_str(s->cur_desc, want, sizeof want);
  int wr = s->topo->l2w[l];
  return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, wr),
                          "mismatch at shared-memory step %llu: this rank (world rank %d) called %s, same-host peer "
                          "(world rank %d) has moved on to a later step without it", (unsigned long long)g,
                          c->w->rank, want, wr);
}

/* Local rank l's latest published step on communicator c, if any: its
 * descriptor into d and 1 (the box of either parity, seqlock-read). */
static int latest_desc_on(const shoal__shm_t *s, const shoal_comm_t *c, int l, uint64_t *d) {
  uint64_t best = 0;
  for (int b = 0; b < SHOAL__SHM_NBUF; b++) {
    uint64_t g = atomic_load_explicit(&shoal__shm_box(s, l, b)->seq, memory_order_acquire), t[3];
    if (g <= s->user_step0 || g <= best) continue; /* set-up calls: their sequence numbers start again */
    if (!read_desc(s, l, g, t)) continue;
    if ((t[2] >> 32 & 0xffffff) != (c->id & 0xffffff)) continue;
    best = g;
    memcpy(d, t, sizeof t);
  }
  return best != 0;
}

int shoal__shm_peer_moved_on(shoal_comm_t *c, const shoal__op_t *op, int l, uint64_t head) {
  shoal__shm_t *s = c->w->shm;
  if (op->opcode == SHOAL__OP_SEND || op->opcode == SHOAL__OP_INTERNAL) return 0; /* no call sequence */
  uint64_t d[3];
  int32_t ahead;
  if (!latest_desc_on(s, c, l, d) || (ahead = (int32_t)((uint32_t)d[2] - op->seq)) < 0) return 0;
  /* The peer published a later call's step after writing everything it sent
   * in this one (release, then our acquire above): an empty ring now means
   * the message will never come. A step of this very call: the peer runs it
   * over the steps (no algorithm also sends ring messages under the
   * communicator's id in a call that uses them), this rank point to point. */
  shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->topo->lrank);
  if (atomic_load_explicit(&r->tail, memory_order_acquire) != head) return 0;
  char got[200];
  desc_str(d, got, sizeof got);
  int wr = s->topo->l2w[l];
  if (ahead == 0)
    return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, wr),
                            "mismatch: this rank (world rank %d) waits for a point-to-point message of %s seq %u "
                            "from the same-host peer (world rank %d), which runs %s over the shared-memory steps: "
                            "the ranks disagree on the call or its algorithm",
                            c->w->rank, shoal__opcode_name(op->opcode), op->seq, wr, got);
  return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, wr),
                          "mismatch: this rank (world rank %d) waits for a message of %s seq %u from the same-host "
                          "peer (world rank %d), which has moved on to %s without sending it: the ranks disagree on "
                          "the call (another root or peer, or a skipped call)",
                          c->w->rank, shoal__opcode_name(op->opcode), op->seq, wr, got);
}

/* While waiting in a shm collective: a same-host peer that sent this rank a point-to-point message of this
 * same call (it runs another algorithm or another collective over the rings: a broadcast's tree against
 * an allreduce) will never produce what this rank waits for. Any same-host peer, not only the one waited
 * for: no algorithm sends ring messages between same-host ranks under the communicator's id in a call
 * that uses the shm steps (the hierarchy's leaders talk under a view's own id). The library's internal
 * messages carry no call sequence: not compared. */
static int ring_check(shoal_comm_t *c, const shoal__op_t *op, int l) {
  shoal__shm_t *s = c->w->shm;
  shoal__conn_t *cn = &c->w->conns[s->topo->l2w[l]];
  shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->topo->lrank);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  unsigned char h[SHOAL__HDR_BYTES];
  if (!cn->rq_head && tail - head >= SHOAL__HDR_BYTES &&
      (shoal__shm_ring_get((const char *)(r + 1), s->ring_bytes, head, h, sizeof h), 1) &&
      shoal__get_u64(h + 8) == c->id && h[4] != SHOAL__OP_SEND && h[4] != SHOAL__OP_INTERNAL && h[4] < SHOAL__OP__COUNT &&
      shoal__get_u32(h + 16) == op->seq) { /* this very call of this communicator, over the rings: another
                                             * algorithm (a later call may legitimately follow the step this
                                             * rank has not seen yet) */
    char got[160];
    snprintf(got, sizeof got, "%s seq %u count %llu %s", shoal__opcode_name(h[4]), shoal__get_u32(h + 16),
             (unsigned long long)shoal__get_u64(h + 24), shoal__dtype_label(h[5]));
    char want[200];
    desc_str(s->cur_desc, want, sizeof want);
    return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, s->topo->l2w[l]),
                            "mismatch: this rank waits in %s, the same-host peer (world rank %d) sent a "
                            "point-to-point message of %s (another call or another algorithm)", want, s->topo->l2w[l], got);
  }
  return 0;
}

int shoal__shm_unread_check(shoal_comm_t *c, const shoal__op_t *op) {
  shoal__shm_t *s = c->w->shm;
  if (op->opcode == SHOAL__OP_INTERNAL) return 0; /* the library's own calls: looked at in the user's next one */
  s->unread_due = 0;
  for (int l = 0; l < s->topo->nlocal; l++) {
    if (l == s->topo->lrank) continue;
    int wr = s->topo->l2w[l];
    shoal__shm_ring_t *r = shoal__shm_ring(s, l, s->topo->lrank);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    unsigned char h[SHOAL__HDR_BYTES];
    if (c->w->conns[wr].rq_head || tail - head < SHOAL__HDR_BYTES) continue; /* (the ring is FIFO: its head) */
    shoal__shm_ring_get((const char *)(r + 1), s->ring_bytes, head, h, sizeof h);
    uint32_t seq = shoal__get_u32(h + 16);
    if (shoal__get_u32(h) != SHOAL__WIRE_MAGIC || shoal__get_u64(h + 8) != s->unread_comm || h[4] >= SHOAL__OP__COUNT ||
        h[4] == SHOAL__OP_SEND || h[4] == SHOAL__OP_INTERNAL || h[4] == SHOAL__OP_PARTIAL ||
        (int32_t)(seq - s->unread_seq) > 0)
      continue; /* not a collective of that communicator, or a later call (the peer is ahead) */
    char mine[96] = "an earlier call";
    if (seq == s->unread_seq)
      snprintf(mine, sizeof mine, "%s seq %u from root %d", shoal__opcode_name(s->unread_opcode), s->unread_seq,
               s->unread_root);
    return shoal__comm_fail(c, SHOAL_ERR_MISMATCH, op, comm_rank_of(c, wr),
                            "mismatch: the same-host peer (world rank %d) sent this rank (world rank %d) a "
                            "point-to-point message of %s seq %u (%s %u) count %llu %s that no receive of this "
                            "rank took: this rank ran %s; the ranks disagree on that call (another root or peer)",
                            wr, c->w->rank, shoal__opcode_name(h[4]), seq,
                            h[4] == SHOAL__OP_BROADCAST || h[4] == SHOAL__OP_REDUCE ? "root" : "tag",
                            shoal__get_u32(h + 20), (unsigned long long)shoal__get_u64(h + 24),
                            shoal__dtype_label(h[5]), mine);
  }
  return 0;
}

/* ... and the peer waited for that published this step with another call's descriptor. */
static int wait_check(shoal_comm_t *c, const shoal__op_t *op, int l) {
  shoal__shm_t *s = c->w->shm;
  uint64_t g = s->cur_step;
  if (g && atomic_load_explicit(&s->ctrl[l].in_step, memory_order_acquire) >= g) {
    int rc = shoal__shm_check_desc(c, op, g, l);
    if (rc) return rc;
  }
  return ring_check(c, op, l);
}

/* A same-host peer other than the one waited for that died (not one that left after its last call), or
 * that sent this rank a message of this call over the rings: the op fails at once even though it does not
 * wait for that peer, as a TCP hang-up fails any op (docs/comm.md); the wait would otherwise notice it
 * only once the awaited peer fails too, or at the deadline. */
static int others_alive(shoal_comm_t *c, const shoal__op_t *op, int waiting_l, uint64_t want) {
  shoal__world_t *w = c->w;
  shoal__shm_t *s = w->shm;
  for (int l = 0; l < s->topo->nlocal; l++) {
    if (l == s->topo->lrank || l == waiting_l || !shoal__shm_probe_due(s, l)) continue;
    int wr = s->topo->l2w[l];
    /* (not in the library's own calls: a peer done with a tuning step may already probe its links) */
    int pr = op->opcode == SHOAL__OP_INTERNAL ? 0 : ring_check(c, op, l);
    if (pr < 0) return pr;
    pr = shoal__shm_probe_conn(c, op, &w->conns[wr]);
    if (pr < 0) return pr;
    if (pr && w->conns[wr].state != SHOAL__CONN_LEFT)
      return shoal__comm_fail(c, SHOAL_ERR_PEER_CLOSED, op, comm_rank_of(c, wr),
                              "same-host peer (world rank %d, pid %d) died or was killed while this rank waited for "
                              "world rank %d's shared-memory step %llu", wr, (int)s->ctrl[l].pid,
                              s->topo->l2w[waiting_l], (unsigned long long)want);
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
  uint64_t t0 = shoal__now_ns(), deadline = op->deadline_ns;
  int graced = 0;
  for (;;) {
    if (w->aborted) return w->abort_status ? w->abort_status : SHOAL_ERR_ABORTED;
    uint64_t now = shoal__now_ns();
    if (now - t0 < s->spin_ns) {
      shoal__shm_spin_once(s, now - t0);
    } else {
      int l = f.missing, wr = s->topo->l2w[l];
      if (shoal__shm_probe_due(s, l)) {
        int pr = wait_check(c, op, l);
        if (pr < 0) return pr;
        pr = shoal__shm_probe_conn(c, op, &w->conns[wr]);
        if (pr < 0) return pr;
        if (pr && !flags_ready(&f) && f.missing == l)
          return shoal__comm_fail(c, SHOAL_ERR_PEER_CLOSED, op, comm_rank_of(c, wr),
                                  "same-host peer (world rank %d, pid %d) %s while this rank waited for its "
                                  "shared-memory step %llu",
                                  wr, (int)s->ctrl[l].pid,
                                  w->conns[wr].state == SHOAL__CONN_LEFT ? "left (destroyed its communicator)"
                                                                         : "died or was killed",
                                  (unsigned long long)want);
        if ((pr = others_alive(c, op, l, want))) return pr;
      }
      if (now >= deadline) { /* a stopped peer is blamed at once; else the grace (engine.c, deadline_reached) */
        int pid = 0, stopped = shoal__peer_stopped(w, wr, &pid);
        if (!stopped && !graced) {
          graced = 1;
          deadline += shoal__blame_grace_ns(c);
          continue;
        }
        char why[128] = "";
        if (stopped) snprintf(why, sizeof why, "; world rank %d's process (pid %d) is stopped (SIGSTOP or a debugger)",
                              wr, pid);
        return shoal__comm_fail(c, SHOAL_ERR_TIMEOUT, op, comm_rank_of(c, wr),
                                "timed out after %.1f s (SHOAL_TIMEOUT) waiting for same-host peer (world rank %d) "
                                "to reach shared-memory step %llu (it is at %llu)%s",
                                shoal__op_waited(c, op, t0, now), wr, (unsigned long long)want,
                                (unsigned long long)flag_value(s, l, field, want), why);
      }
      shoal__shm_bell_sleep(s, flags_ready, &f, SLEEP_NS);
    }
    if (flags_ready(&f)) return 0;
  }
}

