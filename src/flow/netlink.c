/* Qdisc statistics and TCP_INFO over netlink (netlink.h), with libmnl. Every dump is bounded: the
 * socket has a receive timeout, and a dump that does not end within it is an error. */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/gen_stats.h>
#include <linux/inet_diag.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "core/error.h"
#include "flow/netlink.h"

#define DUMP_TIMEOUT_MS 500

static struct mnl_socket *open_nl(int bus, const char *what) {
  struct mnl_socket *nl = mnl_socket_open(bus);
  if (!nl) {
    shoal__seterr(SHOAL_ERR_SYSTEM, "%s: netlink socket: %s", what, strerror(errno));
    return NULL;
  }
  struct timeval tv = {0, DUMP_TIMEOUT_MS * 1000};
  setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    shoal__seterr(SHOAL_ERR_SYSTEM, "%s: netlink bind: %s", what, strerror(errno));
    mnl_socket_close(nl);
    return NULL;
  }
  return nl;
}

/* Send the request nlh and run cb over the answer: until the dump's end (a request with NLM_F_DUMP), or
 * over the one answer of a single request. */
static int ask(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data, const char *what) {
  unsigned seq = nlh->nlmsg_seq, portid = mnl_socket_get_portid(nl);
  int is_dump = (nlh->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
    return shoal__seterr(SHOAL_ERR_SYSTEM, "%s: netlink send: %s", what, strerror(errno));
  char buf[MNL_SOCKET_BUFFER_SIZE];
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
    if (n < 0)
      return shoal__seterr(errno == EAGAIN ? SHOAL_ERR_TIMEOUT : SHOAL_ERR_SYSTEM, "%s: netlink receive: %s", what,
                           errno == EAGAIN ? "no answer within 500 ms" : strerror(errno));
    int rc = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
    if (rc < 0 && errno == ENOENT) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "%s: no such socket", what);
    if (rc < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "%s: netlink: %s", what, strerror(errno));
    if (rc == MNL_CB_STOP || !is_dump) return 0;
  }
}

/* ---- qdiscs ---- */

typedef struct {
  shoal__qstat_t *st;
  int n;
} qdump_t;

static int stats2_cb(const struct nlattr *a, void *data) {
  shoal__qstat_t *s = data;
  int type = mnl_attr_get_type(a);
  if (type == TCA_STATS_BASIC && mnl_attr_get_payload_len(a) >= sizeof(struct gnet_stats_basic)) {
    struct gnet_stats_basic b;
    memcpy(&b, mnl_attr_get_payload(a), sizeof b);
    s->bytes = b.bytes;
    s->packets = b.packets;
  } else if (type == TCA_STATS_QUEUE && mnl_attr_get_payload_len(a) >= sizeof(struct gnet_stats_queue)) {
    struct gnet_stats_queue q;
    memcpy(&q, mnl_attr_get_payload(a), sizeof q);
    s->drops = q.drops;
    s->backlog = q.backlog;
  }
  return MNL_CB_OK;
}

static int qdisc_cb(const struct nlmsghdr *nlh, void *data) {
  qdump_t *d = data;
  const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);
  if (tcm->tcm_parent != TC_H_ROOT) return MNL_CB_OK;
  char name[IF_NAMESIZE];
  if (!if_indextoname((unsigned)tcm->tcm_ifindex, name)) return MNL_CB_OK;
  for (int i = 0; i < d->n; i++) {
    shoal__qstat_t *s = &d->st[i];
    if (strcmp(s->ifname, name)) continue;
    const struct nlattr *a;
    mnl_attr_for_each(a, nlh, sizeof *tcm) {
      if (mnl_attr_get_type(a) == TCA_STATS2) mnl_attr_parse_nested(a, stats2_cb, s);
    }
    s->found = 1;
  }
  return MNL_CB_OK;
}

int shoal__qdisc_read(shoal__qstat_t *st, int n) {
  struct mnl_socket *nl = open_nl(NETLINK_ROUTE, "qdisc statistics");
  if (!nl) return SHOAL_ERR_SYSTEM;
  char buf[256];
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_GETQDISC;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = (unsigned)time(NULL);
  struct tcmsg *tcm = mnl_nlmsg_put_extra_header(nlh, sizeof *tcm);
  tcm->tcm_family = AF_UNSPEC;
  for (int i = 0; i < n; i++) st[i].found = 0;
  qdump_t d = {st, n};
  int rc = ask(nl, nlh, qdisc_cb, &d, "qdisc statistics");
  mnl_socket_close(nl);
  return rc;
}

/* ---- TCP sockets ---- */

typedef struct {
  shoal__tcpstat_t *out;
  int cap, n;
} tdump_t;

static int tcp_cb(const struct nlmsghdr *nlh, void *data) {
  tdump_t *d = data;
  const struct inet_diag_msg *m = mnl_nlmsg_get_payload(nlh);
  if (d->n >= d->cap || m->idiag_family != AF_INET) return MNL_CB_OK;
  shoal__tcpstat_t *t = &d->out[d->n];
  memset(t, 0, sizeof *t);
  t->src_ip = m->id.idiag_src[0];
  t->dst_ip = m->id.idiag_dst[0];
  t->sport = ntohs(m->id.idiag_sport);
  t->dport = ntohs(m->id.idiag_dport);
  t->cookie = (uint64_t)m->id.idiag_cookie[0] | (uint64_t)m->id.idiag_cookie[1] << 32;
  t->wqueue = m->idiag_wqueue;
  const struct nlattr *a;
  mnl_attr_for_each(a, nlh, sizeof *m) {
    if (mnl_attr_get_type(a) != INET_DIAG_INFO) continue;
    struct tcp_info ti;
    memset(&ti, 0, sizeof ti);
    size_t len = mnl_attr_get_payload_len(a); /* an older kernel's tcp_info is shorter: the rest stays 0 */
    memcpy(&ti, mnl_attr_get_payload(a), len < sizeof ti ? len : sizeof ti);
    t->bytes_acked = ti.tcpi_bytes_acked;
    t->delivery_rate = ti.tcpi_delivery_rate;
    t->rtt_us = ti.tcpi_rtt;
    t->pacing_rate = ti.tcpi_pacing_rate;
    t->max_pacing_rate = ti.tcpi_max_pacing_rate;
  }
  d->n++;
  return MNL_CB_OK;
}

/* The sock_diag request for established IPv4 TCP sockets with their TCP_INFO, into buf (256 bytes):
 * every socket (flags NLM_F_REQUEST | NLM_F_DUMP) or one by its addresses (NLM_F_REQUEST; set its id). */
static struct inet_diag_req_v2 *tcp_request(char *buf, unsigned flags, struct nlmsghdr **nlh) {
  *nlh = mnl_nlmsg_put_header(buf);
  (*nlh)->nlmsg_type = SOCK_DIAG_BY_FAMILY;
  (*nlh)->nlmsg_flags = (uint16_t)flags;
  (*nlh)->nlmsg_seq = (unsigned)time(NULL);
  struct inet_diag_req_v2 *req = mnl_nlmsg_put_extra_header(*nlh, sizeof *req);
  req->sdiag_family = AF_INET;
  req->sdiag_protocol = IPPROTO_TCP;
  req->idiag_states = 1u << 1; /* TCP_ESTABLISHED (include/net/tcp_states.h, not a uapi header) */
  req->idiag_ext = 1u << (INET_DIAG_INFO - 1);
  return req;
}

shoal__tcpdiag_t *shoal__tcpdiag_open(void) {
  return (shoal__tcpdiag_t *)open_nl(NETLINK_SOCK_DIAG, "TCP_INFO of the host's sockets");
}

void shoal__tcpdiag_close(shoal__tcpdiag_t *d) {
  if (d) mnl_socket_close((struct mnl_socket *)d);
}

/* One socket by its addresses: the kernel looks it up in its hash (inet_diag_find_one_icsk) instead of
 * walking every bucket of the established table as a dump does (the table is the whole kernel's, not this
 * namespace's: about 1.3 ms of CPU per dump here with no socket at all). */
int shoal__tcp_socket(shoal__tcpdiag_t *d, uint32_t src_ip, uint16_t sport, uint32_t dst_ip, uint16_t dport,
                      shoal__tcpstat_t *out) {
  char buf[256];
  struct nlmsghdr *nlh;
  struct inet_diag_req_v2 *req = tcp_request(buf, NLM_F_REQUEST, &nlh);
  req->id.idiag_src[0] = src_ip;
  req->id.idiag_dst[0] = dst_ip;
  req->id.idiag_sport = htons(sport);
  req->id.idiag_dport = htons(dport);
  req->id.idiag_cookie[0] = req->id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  tdump_t t = {out, 1, 0};
  int rc = ask((struct mnl_socket *)d, nlh, tcp_cb, &t, "TCP_INFO of a socket");
  if (rc) return rc;
  return t.n == 1 ? 0 : shoal__seterr(SHOAL_ERR_NOT_FOUND, "TCP_INFO of a socket: no such socket");
}

int shoal__tcp_sockets(shoal__tcpdiag_t *d, shoal__tcpstat_t *out, int cap) {
  char buf[256];
  struct nlmsghdr *nlh;
  tcp_request(buf, NLM_F_REQUEST | NLM_F_DUMP, &nlh);
  tdump_t t = {out, cap, 0};
  int rc = ask((struct mnl_socket *)d, nlh, tcp_cb, &t, "TCP_INFO of the host's sockets");
  return rc ? rc : t.n;
}
