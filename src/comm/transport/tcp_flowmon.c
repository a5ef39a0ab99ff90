/* The flow monitor of the TCP transport (flowmon.h, docs/flow.md). The send path costs one relaxed
 * store per sendmsg and one relaxed load per send_progress; everything else (claiming slots, applying
 * a new rate) happens off that path or only when the agent changed something. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "comm/comm_impl.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

/* One mapping of this host's segment per process, shared by its worlds. */
static pthread_mutex_t seg_mu = PTHREAD_MUTEX_INITIALIZER;
static shoal__flowseg_t *seg;
static int seg_refs;

enum { MON_OFF, MON_AUTO, MON_ON };

static int monitor_mode(int *mode) {
  const char *v = shoal__config_str("SHOAL_FLOW_MONITOR", "auto");
  if (!strcmp(v, "auto")) *mode = MON_AUTO;
  else if (!strcmp(v, "on") || !strcmp(v, "1")) *mode = MON_ON;
  else if (!strcmp(v, "off") || !strcmp(v, "0")) *mode = MON_OFF;
  else
    return shoal__config_from_where(
        "SHOAL_FLOW_MONITOR", shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_FLOW_MONITOR='%s': expected auto, on or off", v));
  return 0;
}

static shoal__flowseg_t *seg_get(int mode) {
  pthread_mutex_lock(&seg_mu);
  if (!seg) {
    const char *host = shoal__config_str("SHOAL_FLOW_HOST", NULL);
    if (host && !*host) host = NULL;
    int rc = shoal__flowseg_open(host, mode == MON_ON, &seg);
    if (rc && !(rc == SHOAL_ERR_NOT_FOUND && mode == MON_AUTO))
      SHOAL_WARN("NET", "flow monitor off: %s", shoal_last_error());
    if (rc) seg = NULL;
  }
  if (seg) seg_refs++;
  shoal__flowseg_t *s = seg;
  pthread_mutex_unlock(&seg_mu);
  return s;
}

static void seg_put(void) {
  pthread_mutex_lock(&seg_mu);
  if (seg && --seg_refs == 0) {
    shoal__flowseg_close(seg);
    seg = NULL;
  }
  pthread_mutex_unlock(&seg_mu);
}

static void fill_identity(shoal__world_t *w, shoal__conn_t *cn, shoal__flowseg_flow_t *f) {
  struct sockaddr_in a = {0}, b = {0};
  socklen_t al = sizeof a, bl = sizeof b;
  if (getsockname(cn->fd, (struct sockaddr *)&a, &al) == 0 && a.sin_family == AF_INET) {
    f->src_ip = a.sin_addr.s_addr;
    f->src_port = ntohs(a.sin_port);
  }
  if (getpeername(cn->fd, (struct sockaddr *)&b, &bl) == 0 && b.sin_family == AF_INET) {
    f->dst_ip = b.sin_addr.s_addr;
    f->dst_port = ntohs(b.sin_port);
  }
  f->job = w->id;
  f->src_rank = (uint32_t)w->rank;
  f->dst_rank = (uint32_t)cn->peer;
  f->nranks = (uint32_t)w->size;
}

int shoal__flowmon_attach(shoal__world_t *w) {
  int mode = MON_AUTO, rc = monitor_mode(&mode);
  if (rc) return rc;
  int remote = 0;
  for (int i = 0; i < w->size; i++)
    remote += i != w->rank && w->conns[i].fd >= 0 && w->conns[i].tp == &shoal__tcp_transport &&
              !shoal__peer_same_host(&w->peers[w->rank], &w->peers[i]);
  if (mode == MON_OFF || remote == 0) return 0;
  shoal__flowseg_t *s = seg_get(mode);
  if (!s) return 0;
  w->flowmon = calloc((size_t)w->size, sizeof *w->flowmon);
  if (!w->flowmon) {
    seg_put();
    return 0;
  }
  int claimed = 0;
  for (int i = 0; i < w->size; i++) {
    shoal__conn_t *cn = &w->conns[i];
    if (i == w->rank || cn->fd < 0 || cn->tp != &shoal__tcp_transport ||
        shoal__peer_same_host(&w->peers[w->rank], &w->peers[i]))
      continue;
    shoal__flowseg_flow_t *f = shoal__flowseg_claim(s);
    if (!f) {
      SHOAL_WARN("NET", "flow monitor: connection to rank %d not monitored: %s", i, shoal_last_error());
      continue;
    }
    fill_identity(w, cn, f);
    atomic_store_explicit(&f->state, SHOAL__FLOWSEG_LIVE, memory_order_release);
    w->flowmon[i].slot = f;
    cn->mon = &w->flowmon[i];
    claimed++;
  }
  SHOAL_DEBUG("NET", "flow monitor: %d cross-host connection%s in segment of host %s", claimed,
              claimed == 1 ? "" : "s", s->host);
  return 0;
}

void shoal__flowmon_detach(shoal__world_t *w) {
  if (!w->flowmon) return;
  for (int i = 0; i < w->size; i++) {
    shoal__flowmon_conn_t *m = &w->flowmon[i];
    if (!m->slot) continue;
    atomic_store_explicit(&m->slot->state, SHOAL__FLOWSEG_FREE, memory_order_release);
    w->conns[i].mon = NULL;
  }
  free(w->flowmon);
  w->flowmon = NULL;
  seg_put();
}

/* Enforcement is a token bucket here, not SO_MAX_PACING_RATE: TCP's own pacing schedules the next packet at
 * the rate in force when the previous one left, so a flow held at a low rate kept its pace for 220-340 ms
 * after the rate was raised again, and a flow told to wait still sent 0.8 MB/s of the 0.1 asked (the queue
 * already in the socket); with the bucket and the socket's unsent queue kept at 128 KiB
 * (TCP_NOTSENT_LOWAT), 4-18 ms and 0.15-0.22 MB/s (bench/flow-pacing.sh, docs/flow.md#enforcement). */
#define LOWAT_BYTES (128 * 1024)
#define MIN_SEND 4096.0 /* the bucket is waited on until it holds this much (or the rest of the message) */

size_t shoal__flowmon_budget(shoal__world_t *w, shoal__conn_t *conn, shoal__req_t *req) {
  shoal__flowmon_conn_t *m = conn->mon;
  uint64_t r = atomic_load_explicit(&m->slot->rate, memory_order_relaxed);
  if (!r && !m->applied) return SIZE_MAX; /* the common case without an agent: one load */
  uint64_t now = shoal__now_ns();
  if (r && (!seg || !shoal__flowseg_agent_alive(seg, now))) r = 0; /* a killed agent leaves no limit behind */
  if (r != m->applied) {
    if (r && !m->lowat) {
      int lowat = LOWAT_BYTES;
      m->lowat = setsockopt(conn->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat) == 0;
    }
    m->applied = r;
    m->tokens = MIN_SEND;
    m->last_ns = now;
    atomic_store_explicit(&m->slot->applied, r, memory_order_relaxed);
  }
  if (!r) return SIZE_MAX;
  double depth = (double)r * 0.005 > 16384 ? (double)r * 0.005 : 16384; /* 5 ms of the rate */
  m->tokens += (double)r * (double)(now - m->last_ns) / 1e9;
  if (m->tokens > depth) m->tokens = depth;
  m->last_ns = now;
  double left = (double)(SHOAL__HDR_BYTES - req->hdr_done) + (double)(req->bytes - req->done);
  double need = left < MIN_SEND ? left : MIN_SEND;
  if (m->tokens >= need) {
    req->not_before_ns = 0;
    return (size_t)m->tokens;
  }
  uint64_t at = now + (uint64_t)((need - m->tokens) / (double)r * 1e9) + 1;
  req->not_before_ns = at; /* the engine sleeps until then instead of polling a writable socket */
  if (!w->next_release_ns || at < w->next_release_ns) w->next_release_ns = at;
  return 0;
}

int shoal_comm_mark_iteration(shoal_comm_t *c, long step) {
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_mark_iteration: communicator is NULL");
  if (step < 0) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_comm_mark_iteration: step %ld is negative", step);
  shoal__world_t *w = c->w;
  if (!w->flowmon) return 0;
  for (int i = 0; i < w->size; i++)
    if (w->flowmon[i].slot) shoal__flowseg_mark(w->flowmon[i].slot, (uint64_t)step);
  return 0;
}
