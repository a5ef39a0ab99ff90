/* The host agent's slot loop and its controller connection (agent.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "flow/agent.h"
#include "flow/netlink.h"

#define EST_SLOTS 5    /* the estimate is the best delivery rate of the last 5 slots */
#define MAX_SOCKETS 2048
#define BG_SLOTS 10    /* the background is measured every 10 slots */

typedef struct agent {
  const shoal__fagent_opts_t *o;
  shoal__flowseg_t *seg;
  double slot_s;
  int fd;            /* the controller connection, -1: none */
  int misses;        /* slots in a row without an answer */
  int paced;         /* the rates in the segment are the controller's (0: all unpaced) */
  uint64_t seq;
  unsigned char in[SHOAL__FP_HDR + SHOAL__FP_MAX_PAYLOAD];
  size_t have;
  shoal__fagent_flow_t mem[SHOAL__FLOWSEG_FLOWS];
  double est[SHOAL__FLOWSEG_FLOWS][EST_SLOTS];
  shoal__fp_flow_t flows[SHOAL__FP_MAX_FLOWS];
  int idx[SHOAL__FP_MAX_FLOWS];
  shoal__fp_rate_t rates[SHOAL__FP_MAX_FLOWS];
  shoal__tcpstat_t *socks;       /* this slot's dump */
  uint64_t (*prev_acked)[2];     /* previous dump: cookie, bytes_acked, sorted by cookie */
  int nprev;
  double bg_at;                  /* the last dump (monotonic s), 0: none yet */
  uint64_t bg_bps;               /* the background it measured */
  shoal__tcpdiag_t *diag;        /* for the flows' lookups, NULL: not open */
  uint16_t ctl_lport;            /* our end of the controller connection (not background) */
  FILE *log;
  int64_t slot;
} agent_t;

/* ---- the controller connection ---- */

static void ctl_close(agent_t *a) {
  if (a->fd >= 0) close(a->fd);
  a->fd = -1;
  a->have = 0;
}

static int wait_fd(int fd, short ev, uint64_t deadline_ns) {
  for (;;) {
    uint64_t now = shoal__now_ns();
    if (now >= deadline_ns) return 0;
    struct pollfd p = {fd, ev, 0};
    int ms = (int)((deadline_ns - now + 999999) / 1000000);
    int r = poll(&p, 1, ms);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static int send_all(int fd, const unsigned char *b, size_t n, uint64_t deadline_ns) {
  while (n) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      b += k;
      n -= (size_t)k;
    } else if (k < 0 && errno == EAGAIN) {
      if (wait_fd(fd, POLLOUT, deadline_ns) <= 0) return SHOAL_ERR_TIMEOUT;
    } else if (!(k < 0 && errno == EINTR)) {
      return SHOAL_ERR_PEER_CLOSED;
    }
  }
  return 0;
}

/* The next whole frame from the controller into a->in[0..len); its type, or a negative status. */
static int read_frame(agent_t *a, uint64_t deadline_ns, int *len) {
  for (;;) {
    int type = 0, n = shoal__fp_frame(a->in, a->have, &type);
    if (n < 0) return n;
    if (n > 0) {
      *len = n;
      return type;
    }
    if (wait_fd(a->fd, POLLIN, deadline_ns) <= 0) return SHOAL_ERR_TIMEOUT;
    ssize_t k = recv(a->fd, a->in + a->have, sizeof a->in - a->have, MSG_DONTWAIT);
    if (k == 0) return shoal__seterr(SHOAL_ERR_PEER_CLOSED, "the controller closed the connection");
    if (k < 0 && errno != EAGAIN && errno != EINTR)
      return shoal__seterr(SHOAL_ERR_PEER_CLOSED, "controller connection: %s", strerror(errno));
    if (k > 0) a->have += (size_t)k;
  }
}

static void consume(agent_t *a, int len) {
  memmove(a->in, a->in + len, a->have - (size_t)len);
  a->have -= (size_t)len;
}

static int ctl_connect(agent_t *a, uint64_t deadline_ns) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  char port[16];
  snprintf(port, sizeof port, "%d", a->o->ctl_port);
  if (getaddrinfo(a->o->ctl_host, port, &hints, &ai) != 0 || !ai)
    return shoal__seterr(SHOAL_ERR_NOT_FOUND, "controller %s: cannot resolve the name", a->o->ctl_host);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1, rc = 0;
  if (fd < 0) rc = shoal__seterr(SHOAL_ERR_SYSTEM, "socket: %s", strerror(errno));
  else if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS)
    rc = shoal__seterr(SHOAL_ERR_CONNECT, "controller %s:%d: %s", a->o->ctl_host, a->o->ctl_port, strerror(errno));
  freeaddrinfo(ai);
  if (!rc && wait_fd(fd, POLLOUT, deadline_ns) <= 0)
    rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "controller %s:%d: no connection within the slot", a->o->ctl_host, a->o->ctl_port);
  int err = 0;
  socklen_t el = sizeof err;
  if (!rc && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err))
    rc = shoal__seterr(SHOAL_ERR_CONNECT, "controller %s:%d: %s", a->o->ctl_host, a->o->ctl_port, strerror(err));
  if (rc) {
    if (fd >= 0) close(fd);
    return rc;
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in me;
  socklen_t ml = sizeof me;
  a->ctl_lport = getsockname(fd, (struct sockaddr *)&me, &ml) == 0 ? ntohs(me.sin_port) : 0;
  a->fd = fd;
  a->have = 0;
  /* HELLO, then WELCOME within the same deadline */
  unsigned char b[128];
  shoal__fp_hello_t h = {.slot_us = (uint32_t)llround(a->slot_s * 1e6)};
  snprintf(h.host, sizeof h.host, "%s", a->seg->host);
  int n = shoal__fp_encode_hello(b, sizeof b, &h), len = 0, type;
  if ((rc = send_all(fd, b, (size_t)n, deadline_ns)) || (type = read_frame(a, deadline_ns, &len)) < 0) {
    ctl_close(a);
    return rc ? shoal__seterr(rc, "controller %s:%d: HELLO not sent", a->o->ctl_host, a->o->ctl_port) : type;
  }
  shoal__fp_welcome_t w;
  if (type != SHOAL__FP_WELCOME || shoal__fp_decode_welcome(a->in, (size_t)len, &w)) {
    char text[SHOAL__FP_MAX_TEXT + 1] = "";
    if (type == SHOAL__FP_ERROR) shoal__fp_decode_text(a->in, (size_t)len, text, sizeof text);
    rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "controller %s:%d refused this agent: %s", a->o->ctl_host, a->o->ctl_port,
                       *text ? text : shoal_last_error());
    ctl_close(a);
    return rc;
  }
  consume(a, len);
  if (w.slot_us != h.slot_us)
    SHOAL_WARN("FLOW", "the controller's slot is %u us, this agent's %u us: the controller's is used", w.slot_us, h.slot_us);
  a->slot_s = w.slot_us / 1e6;
  atomic_store_explicit(&a->seg->slot_us, w.slot_us, memory_order_relaxed);
  SHOAL_INFO("FLOW", "connected to the controller %s:%d (policy %s, slot %u us, horizon %u)", a->o->ctl_host,
             a->o->ctl_port, w.policy, w.slot_us, w.horizon);
  return 0;
}

/* Send the report, read the rates (their seq must be the report's). 0, or a negative status. */
static int ctl_exchange(agent_t *a, const shoal__fp_report_t *r, shoal__fp_rates_t *out, uint64_t deadline_ns) {
  static unsigned char b[SHOAL__FP_HDR + SHOAL__FP_MAX_PAYLOAD];
  int n = shoal__fp_encode_report(b, sizeof b, r), rc, len = 0;
  if (n < 0) return n;
  if ((rc = send_all(a->fd, b, (size_t)n, deadline_ns)))
    return shoal__seterr(rc, "controller %s:%d: the report could not be sent", a->o->ctl_host, a->o->ctl_port);
  for (;;) {
    int type = read_frame(a, deadline_ns, &len);
    if (type < 0) return type == SHOAL_ERR_TIMEOUT ? shoal__seterr(type, "no answer from the controller within the slot") : type;
    if (type == SHOAL__FP_ERROR || type == SHOAL__FP_BYE) {
      char text[SHOAL__FP_MAX_TEXT + 1];
      shoal__fp_decode_text(a->in, (size_t)len, text, sizeof text);
      return shoal__seterr(SHOAL_ERR_PEER_CLOSED, "the controller ended the connection: %s", *text ? text : "(bye)");
    }
    if (type != SHOAL__FP_RATES) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: the controller sent frame type %d", type);
    out->rates = a->rates;
    rc = shoal__fp_decode_rates(a->in, (size_t)len, out, SHOAL__FP_MAX_FLOWS);
    consume(a, len);
    if (rc) return rc;
    if (out->seq == r->seq) return 0; /* an older answer that came late is skipped */
  }
}

/* ---- telemetry ---- */

static int cookie_cmp(const void *x, const void *y) {
  uint64_t a = (*(const uint64_t(*)[2])x)[0], b = (*(const uint64_t(*)[2])y)[0];
  return a < b ? -1 : a > b;
}

/* TCP_INFO of one reported flow into its report entry and its estimate. */
static void flow_info(agent_t *a, shoal__fp_flow_t *f, int seg_i, const shoal__tcpstat_t *t) {
  /* the monitor counts bytes handed to the socket, which can hold megabytes: what is not acknowledged
   * yet has not crossed the network (progress and the end of the phase are told by the wire) */
  f->sent = f->sent > t->wqueue ? f->sent - t->wqueue : 0;
  f->rtt_us = t->rtt_us;
  f->delivered_bps = t->delivery_rate;
  double *e = a->est[seg_i];
  memmove(e + 1, e, (EST_SLOTS - 1) * sizeof *e);
  e[0] = (double)t->delivery_rate - a->o->bias_bps / 8;
  double best = 0;
  for (int k = 0; k < EST_SLOTS; k++) best = e[k] > best ? e[k] : best;
  f->e_bps = a->o->estimate ? (uint64_t)best : 0;
}

/* The host's background rate: bytes acknowledged per second on TCP sockets that are no flow of the
 * segment (the controller connection and loopback excluded), between two dumps of every socket. */
static void background(agent_t *a) {
  int n = shoal__tcp_sockets(a->diag, a->socks, MAX_SOCKETS);
  if (n < 0) { /* the rest of a dump cut short would answer the next query: a new socket next slot */
    SHOAL_DEBUG("FLOW", "background not measured this slot: %s", shoal_last_error());
    shoal__tcpdiag_close(a->diag);
    a->diag = NULL;
    return;
  }
  static uint64_t cur[MAX_SOCKETS][2];
  double bg = 0, now = shoal__now_s();
  for (int s = 0; s < n; s++) {
    const shoal__tcpstat_t *t = &a->socks[s];
    cur[s][0] = t->cookie;
    cur[s][1] = t->bytes_acked;
    int mine = 0;
    for (uint32_t i = 0; i < a->seg->nflows && !mine; i++)
      mine = a->seg->flow[i].src_port == t->sport && a->seg->flow[i].dst_port == t->dport &&
             atomic_load_explicit(&a->seg->flow[i].state, memory_order_relaxed) == SHOAL__FLOWSEG_LIVE;
    if (mine || t->sport == a->ctl_lport || (ntohl(t->dst_ip) >> 24) == 127) continue;
    uint64_t key[2] = {t->cookie, 0};
    uint64_t(*old)[2] = a->nprev ? bsearch(key, a->prev_acked, (size_t)a->nprev, sizeof *a->prev_acked, cookie_cmp) : NULL;
    if (old && t->bytes_acked > (*old)[1]) bg += (double)(t->bytes_acked - (*old)[1]);
  }
  if (a->bg_at > 0 && now > a->bg_at) a->bg_bps = (uint64_t)(bg / (now - a->bg_at));
  a->bg_at = now;
  memcpy(a->prev_acked, cur, (size_t)n * sizeof *cur);
  a->nprev = n;
  qsort(a->prev_acked, (size_t)n, sizeof *a->prev_acked, cookie_cmp);
}

/* TCP_INFO into the report's flows (one lookup per flow, every slot) and the host's background rate (a
 * dump of every socket, every BG_SLOTS slots, on the same netlink socket: a dump walks the kernel's whole
 * established table, 1.3 ms of CPU with no socket in it on the testbed's machine, which at 10 slots a second
 * was most of the agent's cost). */
static uint64_t telemetry(agent_t *a, shoal__fp_report_t *r) {
  if (!a->diag && !(a->diag = shoal__tcpdiag_open())) {
    SHOAL_DEBUG("FLOW", "telemetry skipped this slot: %s", shoal_last_error());
    return a->bg_bps;
  }
  for (uint32_t i = 0; i < r->n; i++) {
    const shoal__flowseg_flow_t *s = &a->seg->flow[a->idx[i]];
    shoal__tcpstat_t t;
    int rc = shoal__tcp_socket(a->diag, r->flows[i].src_ip, s->src_port, r->flows[i].dst_ip, s->dst_port, &t);
    if (rc == 0) flow_info(a, &r->flows[i], a->idx[i], &t);
    else if (rc != SHOAL_ERR_NOT_FOUND) { /* a broken netlink socket: a new one next slot */
      SHOAL_DEBUG("FLOW", "telemetry skipped this slot: %s", shoal_last_error());
      shoal__tcpdiag_close(a->diag);
      a->diag = NULL;
      break;
    }
  }
  if (a->diag && (a->slot % BG_SLOTS == 0 || a->bg_at == 0)) background(a);
  return a->bg_bps;
}

/* ---- the slot ---- */

static void unpace_all(agent_t *a) {
  for (uint32_t i = 0; i < a->seg->nflows; i++) atomic_store_explicit(&a->seg->flow[i].rate, 0, memory_order_relaxed);
  a->paced = 0;
}

static void log_slot(agent_t *a, const shoal__fp_report_t *r, int answered) {
  if (!a->log) return;
  double t = shoal__wall_s();
  for (uint32_t i = 0; i < r->n; i++) {
    const shoal__fp_flow_t *f = &r->flows[i];
    const shoal__flowseg_flow_t *s = &a->seg->flow[a->idx[i]];
    fprintf(a->log, "%.3f,%lld,%s,%016llx,%u,%u,%u,%llu,%llu,%llu,%llu,%llu,%u,%llu,%d\n", t, (long long)a->slot,
            a->seg->host, (unsigned long long)f->job, f->src_rank, f->dst_rank, f->status, (unsigned long long)f->iter,
            (unsigned long long)f->volume, (unsigned long long)f->sent,
            (unsigned long long)atomic_load_explicit(&s->rate, memory_order_relaxed),
            (unsigned long long)atomic_load_explicit(&s->applied, memory_order_relaxed), f->rtt_us,
            (unsigned long long)f->delivered_bps, answered);
  }
}

/* One slot: report, rates (or the fallback). */
static void slot_step(agent_t *a, uint64_t deadline_ns) {
  shoal__fp_report_t r = {.seq = ++a->seq, .flows = a->flows};
  shoal__fagent_collect(a->seg, a->mem, &r, a->idx);
  r.background_bps = telemetry(a, &r);
  atomic_store_explicit(&a->seg->background_bps, r.background_bps, memory_order_relaxed);
  int rc = 0, answered = 0;
  if (a->fd < 0) rc = ctl_connect(a, deadline_ns);
  shoal__fp_rates_t rates = {0};
  if (!rc && (rc = ctl_exchange(a, &r, &rates, deadline_ns)) == 0) {
    for (uint32_t i = 0; i < r.n && i < rates.n; i++) {
      if (rates.rates[i].job != r.flows[i].job || rates.rates[i].src_rank != r.flows[i].src_rank ||
          rates.rates[i].dst_rank != r.flows[i].dst_rank)
        continue;
      atomic_store_explicit(&a->seg->flow[a->idx[i]].rate, rates.rates[i].rate, memory_order_relaxed);
    }
    for (uint32_t i = 0; i < a->seg->nflows; i++) /* flows not in the report: no limit */
      if (!a->mem[i].reported) atomic_store_explicit(&a->seg->flow[i].rate, 0, memory_order_relaxed);
    atomic_store_explicit(&a->seg->ctl_contact_ns, shoal__now_ns(), memory_order_relaxed);
    a->misses = 0;
    a->paced = 1;
    answered = 1;
  }
  if (rc) {
    /* a closed or refused connection: the controller is gone, fall back now; a slow one: after 2 slots */
    int gone = rc != SHOAL_ERR_TIMEOUT;
    /* said once per outage: a controller that stays away is retried every slot, quietly */
    if (a->misses++ == 0) SHOAL_WARN("FLOW", "%s%s", shoal_last_error(), a->paced && gone ? "; flows unpaced" : "");
    else if (a->misses == 2 && a->paced && !gone) SHOAL_WARN("FLOW", "no answer for 2 slots; flows unpaced");
    ctl_close(a);
    if (gone || a->misses >= 2) unpace_all(a);
  }
  log_slot(a, &r, answered);
}

static int agent_start(agent_t *a, const shoal__fagent_opts_t *o) {
  const char *host = o->host[0] ? o->host : shoal__config_str("SHOAL_FLOW_HOST", NULL);
  int rc = shoal__flowseg_open(host && *host ? host : NULL, 1, &a->seg);
  if (rc) return rc;
  int32_t other = atomic_load_explicit(&a->seg->agent_pid, memory_order_relaxed);
  if (other && other != (int32_t)getpid()) {
    rc = shoal__seterr(SHOAL_ERR_CONFIG, "another agent (pid %d) serves host %s: stop it first", (int)other, a->seg->host);
    shoal__flowseg_close(a->seg);
    return rc;
  }
  atomic_store_explicit(&a->seg->agent_pid, (int32_t)getpid(), memory_order_relaxed);
  atomic_store_explicit(&a->seg->slot_us, (uint32_t)llround(a->slot_s * 1e6), memory_order_relaxed);
  snprintf(a->seg->ctl_addr, sizeof a->seg->ctl_addr, "%s:%d", o->ctl_host, o->ctl_port);
  atomic_store_explicit(&a->seg->ctl_contact_ns, 0, memory_order_relaxed);
  unpace_all(a);
  return 0;
}

static void agent_stop(agent_t *a) {
  if (a->fd >= 0) {
    unsigned char b[64];
    int n = shoal__fp_encode_text(b, sizeof b, SHOAL__FP_BYE, "agent stopping");
    if (n > 0) send_all(a->fd, b, (size_t)n, shoal__now_ns() + 100000000u);
    ctl_close(a);
  }
  unpace_all(a);
  atomic_store_explicit(&a->seg->agent_beat_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&a->seg->agent_pid, 0, memory_order_relaxed);
  shoal__flowseg_close(a->seg);
}

/* Sleep until the next slot boundary of the wall clock (agents and the controller agree on slots
 * without talking about them); 0, or 1 when stopped. */
static int sleep_to_slot(agent_t *a, double *boundary) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  double t = (double)now.tv_sec + now.tv_nsec * 1e-9;
  double next = (floor(t / a->slot_s) + 1) * a->slot_s + 0.001;
  struct timespec ts = {(time_t)next, (long)((next - floor(next)) * 1e9)};
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
    if (a->o->stop && *a->o->stop) return 1;
  *boundary = next;
  a->slot = (int64_t)floor(next / a->slot_s);
  return a->o->stop && *a->o->stop;
}

int shoal__fagent_run(const shoal__fagent_opts_t *o) {
  agent_t *a = calloc(1, sizeof *a);
  if (!a) return shoal__seterr(SHOAL_ERR_NOMEM, "flow agent: out of memory");
  a->o = o;
  a->fd = -1;
  a->slot_s = o->slot_s;
  a->socks = malloc(MAX_SOCKETS * sizeof *a->socks);
  a->prev_acked = malloc(MAX_SOCKETS * sizeof *a->prev_acked);
  int rc = !a->socks || !a->prev_acked ? shoal__seterr(SHOAL_ERR_NOMEM, "flow agent: out of memory") : 0;
  if (!rc && o->log_path && !(a->log = fopen(o->log_path, "w")))
    rc = shoal__seterr(SHOAL_ERR_IO, "--log %s: cannot open for writing: %s", o->log_path, strerror(errno));
  if (!rc && a->log) fprintf(a->log, "t,slot,host,job,src,dst,status,iter,volume,sent,rate,applied,rtt_us,delivery_Bps,answered\n");
  if (!rc && (rc = agent_start(a, o)) == 0) {
    SHOAL_INFO("FLOW", "agent of host %s: slot %.0f ms, controller %s:%d", a->seg->host, a->slot_s * 1e3, o->ctl_host, o->ctl_port);
    double t0 = shoal__now_s(), boundary = 0;
    while (!sleep_to_slot(a, &boundary) && !(o->duration_s > 0 && shoal__now_s() - t0 >= o->duration_s)) {
      atomic_store_explicit(&a->seg->agent_beat_ns, shoal__now_ns(), memory_order_relaxed);
      atomic_fetch_add_explicit(&a->seg->agent_slots, 1, memory_order_relaxed);
      if (a->slot % 10 == 0) shoal__flowseg_reap(a->seg);
      /* the answer must come before the next slot begins */
      slot_step(a, shoal__now_ns() + (uint64_t)(a->slot_s * 0.9e9));
      if (a->log) fflush(a->log);
    }
    agent_stop(a);
  }
  if (a->log && fclose(a->log) != 0 && !rc)
    rc = shoal__seterr(SHOAL_ERR_IO, "--log %s: cannot write: %s", o->log_path, strerror(errno));
  shoal__tcpdiag_close(a->diag);
  free(a->socks);
  free(a->prev_acked);
  free(a);
  return rc;
}
