/* The controller daemon's loop (controller.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "flow/controller.h"
#include "flow/ctl.h"
#include "flow/netlink.h"

typedef struct agent_conn {
  int fd;
  char peer[48];
  int host;     /* in the topology, -1: unknown */
  int hello;    /* HELLO received */
  double since; /* accepted at (monotonic s) */
  size_t have;
  unsigned char in[SHOAL__FP_HDR + SHOAL__FP_MAX_PAYLOAD];
  /* its report of the current slot, held until every agent's is in (gather) */
  int pending;
  int64_t pslot; /* the slot it came in */
  shoal__fp_report_t rep;
  shoal__fp_flow_t flows[SHOAL__FP_MAX_FLOWS];
  uint64_t rate_v[SHOAL__FP_MAX_FLOWS];
} agent_conn_t;

typedef struct server {
  const shoal__fctl_opts_t *o;
  shoal__fctl_t ctl;
  int lfd;
  agent_conn_t *ag[SHOAL__FCTL_MAX_AGENTS];
  int nag;
  FILE *log;
  shoal__qstat_t q[2 * SHOAL__FTOPO_MAX_HOSTS + 2 * SHOAL__FTOPO_MAX_RACKS];
  int qlink[2 * SHOAL__FTOPO_MAX_HOSTS + 2 * SHOAL__FTOPO_MAX_RACKS];
  int nq, fb_warned;
  int64_t slot;
  int64_t answered; /* the last slot whose gathered reports were answered */
  shoal__fp_rate_t rates[SHOAL__FP_MAX_FLOWS];
  /* the gathered reports handed to the planner */
  shoal__fp_report_t rep[SHOAL__FCTL_MAX_AGENTS];
  int rhost[SHOAL__FCTL_MAX_AGENTS], rfrom[SHOAL__FCTL_MAX_AGENTS];
  uint64_t *rrate[SHOAL__FCTL_MAX_AGENTS];
  unsigned char out[SHOAL__FP_HDR + SHOAL__FP_MAX_PAYLOAD];
} server_t;

static double wall(void) { return shoal__wall_s(); }

static void drop(server_t *s, int i, const char *why) {
  agent_conn_t *c = s->ag[i];
  if (why) {
    unsigned char b[SHOAL__FP_HDR + SHOAL__FP_MAX_TEXT];
    int n = shoal__fp_encode_text(b, sizeof b, SHOAL__FP_ERROR, why);
    if (n > 0) (void)!send(c->fd, b, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    SHOAL_WARN("FLOW", "agent %s: %s: closing its connection", c->peer, why);
  } else {
    SHOAL_INFO("FLOW", "agent %s (host %s) left", c->peer, c->host >= 0 ? s->ctl.topo.host[c->host].name : "?");
  }
  close(c->fd);
  free(c);
  s->ag[i] = s->ag[--s->nag];
}

/* Everything is answered at once and is small: a reply that does not fit the socket means the agent
 * stopped reading. */
static int reply(server_t *s, int i, const unsigned char *b, int n) {
  if (n < 0) return n;
  ssize_t k = send(s->ag[i]->fd, b, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k == n) return 0;
  return shoal__seterr(SHOAL_ERR_IO, "%s", k < 0 ? strerror(errno) : "the agent does not read its answers");
}

static int on_hello(server_t *s, int i, const unsigned char *f, int len) {
  agent_conn_t *c = s->ag[i];
  shoal__fp_hello_t h;
  int rc = shoal__fp_decode_hello(f, (size_t)len, &h);
  if (rc) return rc;
  c->hello = 1;
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  if (getpeername(c->fd, (struct sockaddr *)&a, &al) == 0) c->host = shoal__ftopo_host_of(&s->ctl.topo, a.sin_addr.s_addr);
  for (int k = 0; k < s->ctl.topo.nhosts && c->host < 0; k++)
    if (!strcmp(s->ctl.topo.host[k].name, h.host)) c->host = k;
  shoal__fp_welcome_t w = {.slot_us = (uint32_t)llround(s->o->cfg.slot_s * 1e6), .horizon = (uint32_t)s->o->cfg.horizon};
  snprintf(w.policy, sizeof w.policy, "%s", shoal__fplan_policy_name(s->o->cfg.policy));
  SHOAL_INFO("FLOW", "agent %s of host %s joined (%s in the topology)", c->peer, h.host,
             c->host >= 0 ? s->ctl.topo.host[c->host].name : "not");
  return reply(s, i, s->out, shoal__fp_encode_welcome(s->out, sizeof s->out, &w));
}

static void log_flows(server_t *s, const shoal__fp_report_t *r) {
  if (!s->log) return;
  const shoal__fplan_t *p = &s->ctl.plan;
  for (uint32_t i = 0; i < r->n; i++) {
    const shoal__fp_flow_t *f = &r->flows[i];
    for (int k = 0; k < p->nflows; k++) {
      const shoal__fplan_flow_t *g = &p->flow[k];
      if (g->job != f->job || g->src != f->src_rank || g->dst != f->dst_rank) continue;
      fprintf(s->log, "flow,%.3f,%lld,,%016llx,%u,%u,%u,%llu,%.0f,%.0f,%.0f,%.0f,%.0f,,,,,%.0f\n", wall(),
              (long long)p->now, (unsigned long long)g->job, g->src, g->dst, f->status, (unsigned long long)f->iter,
              g->V, g->sent, g->last_slot_bytes, g->rate, g->sched[p->now % p->cfg.horizon], g->wasted);
    }
  }
}

static int on_report(server_t *s, int i, const unsigned char *f, int len) {
  agent_conn_t *c = s->ag[i];
  shoal__fp_report_t r = {.flows = c->flows};
  int rc = shoal__fp_decode_report(f, (size_t)len, &r, SHOAL__FP_MAX_FLOWS);
  if (rc) return rc;
  c->rep = r;
  c->pending = 1;
  c->pslot = shoal__fctl_slot(&s->ctl, wall());
  return 0;
}

/* Answer the gathered reports of the current slot: all of them into the plan, then every agent its RATES.
 * An agent whose answer cannot be sent is dropped. */
static void answer(server_t *s) {
  int n = 0;
  for (int i = 0; i < s->nag; i++) {
    agent_conn_t *c = s->ag[i];
    if (!c->pending || c->pslot > s->slot) continue; /* one of the next slot: answered in it */
    s->rep[n] = c->rep;
    s->rhost[n] = c->host;
    s->rrate[n] = c->rate_v;
    s->rfrom[n++] = i;
  }
  if (n == 0) return;
  s->answered = s->slot;
  if (shoal__fctl_handle(&s->ctl, s->slot, n, s->rhost, s->rep, s->rrate)) {
    SHOAL_WARN("FLOW", "slot %lld not answered: %s", (long long)s->slot, shoal_last_error());
    for (int k = 0; k < n; k++) s->ag[s->rfrom[k]]->pending = 0;
    return;
  }
  for (int k = n - 1; k >= 0; k--) { /* from the end: drop() moves the last connection into i */
    int i = s->rfrom[k];
    agent_conn_t *c = s->ag[i];
    const shoal__fp_report_t *r = &c->rep;
    shoal__fp_rates_t out = {.seq = r->seq, .slot = s->ctl.plan.now, .n = r->n, .rates = s->rates};
    for (uint32_t q = 0; q < r->n; q++)
      s->rates[q] = (shoal__fp_rate_t){r->flows[q].job, r->flows[q].src_rank, r->flows[q].dst_rank, c->rate_v[q]};
    c->pending = 0;
    log_flows(s, r);
    if (reply(s, i, s->out, shoal__fp_encode_rates(s->out, sizeof s->out, &out))) drop(s, i, shoal_last_error());
  }
}

/* Are the reports of the slot in? Every agent that said HELLO has reported, or the gather window is
 * over; a report that comes after its slot was answered is answered alone. */
static int gathered(const server_t *s, double now) {
  int waiting = 0, pending = 0;
  for (int i = 0; i < s->nag; i++) {
    int in = s->ag[i]->pending && s->ag[i]->pslot <= s->slot;
    pending += in;
    waiting += s->ag[i]->hello && !in;
  }
  if (!pending) return 0;
  return !waiting || s->answered == s->slot || now >= ((double)s->slot + SHOAL__FCTL_GATHER) * s->o->cfg.slot_s;
}

/* Read what agent i sent and answer every whole frame; -1 when the connection was dropped. */
static int serve(server_t *s, int i) {
  agent_conn_t *c = s->ag[i];
  ssize_t k = recv(c->fd, c->in + c->have, sizeof c->in - c->have, MSG_DONTWAIT);
  if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
    drop(s, i, NULL);
    return -1;
  }
  if (k > 0) c->have += (size_t)k;
  for (;;) {
    int type = 0, n = shoal__fp_frame(c->in, c->have, &type), rc = 0;
    if (n == 0) return 0;
    if (n < 0) rc = n;
    else if (!c->hello) rc = type == SHOAL__FP_HELLO ? on_hello(s, i, c->in, n)
                                                     : shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: frame type %d before HELLO", type);
    else if (type == SHOAL__FP_REPORT) rc = on_report(s, i, c->in, n);
    else if (type == SHOAL__FP_BYE) {
      drop(s, i, NULL);
      return -1;
    } else rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: unexpected frame type %d from an agent", type);
    if (rc) {
      drop(s, i, shoal_last_error());
      return -1;
    }
    memmove(c->in, c->in + n, c->have - (size_t)n);
    c->have -= (size_t)n;
  }
}

static void on_accept(server_t *s) {
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  int fd = accept4(s->lfd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno != EAGAIN && errno != EINTR) SHOAL_WARN("FLOW", "accept: %s", strerror(errno));
    return;
  }
  char peer[48], ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  snprintf(peer, sizeof peer, "%s:%d", ip, ntohs(a.sin_port));
  agent_conn_t *c = s->nag < SHOAL__FCTL_MAX_AGENTS ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    unsigned char b[128];
    int n = shoal__fp_encode_text(b, sizeof b, SHOAL__FP_ERROR, "too many agents on this controller");
    if (n > 0) (void)!send(fd, b, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    SHOAL_WARN("FLOW", "agent %s refused: %d agents connected already (at most %d)", peer, s->nag, SHOAL__FCTL_MAX_AGENTS);
    close(fd);
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->fd = fd;
  c->host = -1;
  c->since = shoal__now_s();
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  s->ag[s->nag++] = c;
}

/* A slot boundary: the planner's clock, the qdiscs, the links' log line. */
static void tick(server_t *s, int64_t slot) {
  shoal__fplan_advance(&s->ctl.plan, slot);
  s->slot = slot;
  if (s->nq > 0) {
    int rc = shoal__qdisc_read(s->q, s->nq);
    if (rc && !s->fb_warned++) SHOAL_WARN("FLOW", "in-network feedback unavailable: %s", shoal_last_error());
    for (int k = 0; !rc && k < s->nq; k++) {
      if (!s->q[k].found && !s->fb_warned++)
        SHOAL_WARN("FLOW", "feedback: no qdisc on interface %s here (is the controller in the fabric namespace?)", s->q[k].ifname);
      if (s->q[k].found) shoal__fctl_qdisc(&s->ctl, s->qlink[k], shoal__now_s(), s->q[k].bytes, s->q[k].drops, s->q[k].backlog);
    }
  }
  if (!s->log) return;
  const shoal__fplan_t *p = &s->ctl.plan;
  char name[48];
  for (int l = 0; l < p->nlinks; l++) {
    const shoal__fplan_link_t *L = &p->link[l];
    if (shoal__ftopo_cap(&s->ctl.topo, l) <= 0) continue;
    fprintf(s->log, "link,%.3f,%lld,%s,,,,,,,,%.0f,,%.0f,%.0f,%.0f,%.0f,%llu,\n", wall(), (long long)slot,
            shoal__ftopo_link_name(&s->ctl.topo, l, name, sizeof name), L->shoal_bytes, shoal__fplan_reserved(p, l, 0),
            L->avail, L->bg, L->backlog, (unsigned long long)L->drops);
  }
  fflush(s->log);
}

static int listen_on(server_t *s) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->o->port)};
  if (inet_pton(AF_INET, s->o->listen_addr, &a.sin_addr) != 1)
    return shoal__seterr(SHOAL_ERR_CONFIG, "--listen %s: not an IPv4 address", s->o->listen_addr);
  int one = 1;
  s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->lfd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "socket: %s", strerror(errno));
  setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->lfd, 64) != 0)
    return shoal__seterr(errno == EADDRINUSE ? SHOAL_ERR_ADDR_IN_USE : SHOAL_ERR_SYSTEM, "--listen %s:%d: %s",
                         s->o->listen_addr, s->o->port, strerror(errno));
  socklen_t al = sizeof a;
  getsockname(s->lfd, (struct sockaddr *)&a, &al);
  if (s->o->on_listen) s->o->on_listen(ntohs(a.sin_port), s->o->arg);
  return 0;
}

static void loop(server_t *s) {
  const shoal__fctl_opts_t *o = s->o;
  double t0 = shoal__now_s(), T = o->cfg.slot_s;
  struct pollfd pfd[1 + SHOAL__FCTL_MAX_AGENTS];
  while (!(o->stop && *o->stop) && !(o->duration_s > 0 && shoal__now_s() - t0 >= o->duration_s)) {
    double now = wall();
    int64_t slot = shoal__fctl_slot(&s->ctl, now);
    if (slot > s->slot) {
      answer(s); /* the last slot's reports: a late agent's answer is late, not lost */
      tick(s, slot);
    }
    int pending = 0;
    for (int i = 0; i < s->nag; i++) pending += s->ag[i]->pending;
    double until = pending && s->answered < slot ? ((double)slot + SHOAL__FCTL_GATHER) * T : (double)(slot + 1) * T;
    int ms = (int)ceil((until - now) * 1e3);
    pfd[0] = (struct pollfd){s->lfd, POLLIN, 0};
    for (int i = 0; i < s->nag; i++) pfd[1 + i] = (struct pollfd){s->ag[i]->fd, POLLIN, 0};
    int n = s->nag;
    if (poll(pfd, (nfds_t)(1 + n), ms < 1 ? 1 : ms) < 0 && errno != EINTR) {
      SHOAL_WARN("FLOW", "poll: %s", strerror(errno));
      shoal__sleep_s(0.01);
    }
    for (int i = n - 1; i >= 0; i--) /* from the end: drop() moves the last connection into i */
      if (pfd[1 + i].revents) serve(s, i);
    for (int i = s->nag - 1; i >= 0; i--)
      if (!s->ag[i]->hello && shoal__now_s() - s->ag[i]->since > SHOAL__FCTL_HELLO_S) drop(s, i, "no HELLO within 2 s");
    if (shoal__fctl_slot(&s->ctl, wall()) == s->slot && gathered(s, wall())) answer(s);
    if (pfd[0].revents & POLLIN) on_accept(s);
  }
}

int shoal__fctl_run(const shoal__fctl_opts_t *o) {
  server_t *s = calloc(1, sizeof *s);
  if (!s) return shoal__seterr(SHOAL_ERR_NOMEM, "flow controller: out of memory");
  s->o = o;
  s->lfd = -1;
  int rc = shoal__fctl_init(&s->ctl, o->topo, &o->cfg);
  if (!rc && o->log_path && !(s->log = fopen(o->log_path, "w")))
    rc = shoal__seterr(SHOAL_ERR_IO, "--log %s: cannot open for writing: %s", o->log_path, strerror(errno));
  if (!rc && s->log)
    fprintf(s->log, "kind,t,slot,link,job,src,dst,status,iter,volume,sent,slot_bytes,rate,resv,avail,bg,backlog,drops,wasted\n");
  for (int l = 0; !rc && o->feedback && l < shoal__ftopo_nlinks(o->topo); l++) {
    const char *ifn = shoal__ftopo_link_iface(o->topo, l);
    if (!ifn) continue;
    snprintf(s->q[s->nq].ifname, sizeof s->q[s->nq].ifname, "%s", ifn);
    s->qlink[s->nq++] = l;
  }
  if (!rc) rc = listen_on(s);
  if (!rc) {
    s->slot = shoal__fctl_slot(&s->ctl, wall()) - 1;
    s->answered = s->slot;
    loop(s);
  }
  while (s->nag > 0) drop(s, s->nag - 1, NULL);
  if (s->lfd >= 0) close(s->lfd);
  if (s->log && fclose(s->log) != 0 && !rc) rc = shoal__seterr(SHOAL_ERR_IO, "--log %s: cannot write", o->log_path);
  shoal__fctl_free(&s->ctl);
  free(s);
  return rc;
}
