/* The link matrix of a world's hosts (spec adaptive-comm.md A1, adapted):
 * the leader of every host (its lowest world rank) measures, towards every
 * other host, the one-way latency (median of 20 round trips of 256 bytes,
 * halved) and the bandwidth of a one-way stream (a 1 MiB lead-in, then
 * SHOAL_PROFILE_BYTES in 128 KiB messages timed at the receiver: the lead-in
 * drains a token bucket's burst and the connection's start, so the timed
 * part runs at the link's rate). In round r = 1 .. H-1 host s probes host (s + r) mod H, so
 * every host has one outgoing and one incoming flow: a full-duplex link is
 * measured in both directions at once, as the collectives use it.
 * SHOAL_PROFILE_FLOWS caps the flows that run at once (0: every host's);
 * on a real cluster every host has its own link and CPU, on one machine
 * emulating many hosts the CPUs are shared and too many flows at once
 * measure the CPU. Every rank gets the matrix (a MAX allreduce); pairs far
 * below both of their ends' best are measured again, one at a time, except
 * in the quick profile of SHOAL_TUNE=auto (half the lead-in, none measured
 * again). After a drift (the link watch) round 1 alone says which hosts'
 * links changed, and only their pairs are measured again. Those streams
 * (and round 1's repeat) take their message size from round 1's rates:
 * a pair at a fraction f of the fastest link's rate sends messages of
 * about 2f of 128 KiB (at least 16 KiB), so its stream lasts about as long
 * as the fast links' instead of 1/f times as long. The factor 2 keeps the
 * timed part past a token bucket's burst when the pair is faster than its
 * ends' round-1 figures say. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "comm/tune/tune_impl.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define PING_BYTES 256
#define NPING 20
#define STREAM_MSG (128u << 10) /* message size of the stream */
#define LEAD_MSGS 8             /* the lead-in: 1 MiB */
#define STREAM_UNIT (16u << 10) /* a re-profile's smaller messages are multiples of this */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Round trips to dst (if >= 0) while answering src's pings (if >= 0): the
 * median one-way latency to dst in *lat. */
static int ping_pairs(shoal_comm_t *c, const shoal__op_t *op, int dst, int src, double *lat) {
  unsigned char ping[PING_BYTES] = {0}, in_ping[PING_BYTES], in_pong[PING_BYTES];
  double rtt[NPING];
  shoal__req_t sp, rp, rq, sq; /* send ping, recv pong, recv ping, send pong */
  for (int it = 0; it <= NPING; it++) { /* iteration 0 warms up */
    int rc;
    uint64_t t0 = 0;
    sp.kind = rp.kind = rq.kind = sq.kind = 0;
    if (src >= 0 && (rc = shoal__irecv(c, op, src, in_ping, sizeof in_ping, &rq))) return rc;
    if (dst >= 0) {
      if ((rc = shoal__irecv(c, op, dst, in_pong, sizeof in_pong, &rp))) return rc;
      t0 = shoal__now_ns();
      if ((rc = shoal__isend(c, op, dst, ping, sizeof ping, &sp))) return rc;
    }
    int pong_sent = 0, have_rtt = 0;
    for (;;) {
      if (src >= 0 && !pong_sent && rq.state == 1) { /* answer at once */
        if ((rc = shoal__isend(c, op, src, in_ping, sizeof in_ping, &sq))) return rc;
        pong_sent = 1;
      }
      if (dst >= 0 && !have_rtt && rp.state == 1) {
        if (it) rtt[it - 1] = (double)(shoal__now_ns() - t0) * 1e-9;
        have_rtt = 1;
      }
      int done = (dst < 0 || (have_rtt && sp.state == 1)) && (src < 0 || (pong_sent && sq.state == 1));
      if (done) break;
      shoal__req_t *wait[4] = {NULL, NULL, NULL, NULL};
      if (dst >= 0) wait[0] = !have_rtt ? &rp : &sp;
      if (src >= 0) wait[1] = !pong_sent ? &rq : &sq;
      if ((rc = shoal__waitany(c, op, wait, 2))) return rc;
    }
  }
  if (dst >= 0) {
    qsort(rtt, NPING, sizeof *rtt, cmp_double);
    *lat = 0.5 * 0.5 * (rtt[NPING / 2 - 1] + rtt[NPING / 2]);
  }
  return 0;
}

/* Stream to dst (if >= 0) while receiving src's stream (if >= 0): the rate
 * of src's timed part in *bw (bytes/s), measured at this (receiving) end.
 * A message's completion time here is its arrival, or later when this
 * process was not running (other processes on its CPU): such delays only
 * make later completions look bunched. So the rate is the slope of the
 * lower envelope through the last completion: the largest time per message
 * from any earlier message to the last one. */
static int stream_pairs(shoal_comm_t *c, const shoal__op_t *op, int dst, int src, int nmsg, int lead, size_t smsg,
                        size_t rmsg, char *sbuf, char *rbuf, double *bw) {
  shoal__req_t *s = calloc((size_t)nmsg * 2, sizeof *s), *r = s ? s + nmsg : NULL;
  uint64_t *at = calloc((size_t)nmsg, sizeof *at);
  if (!s || !at) {
    free(s), free(at);
    return shoal__seterr(SHOAL_ERR_NOMEM, "link profile: out of memory");
  }
  int rc = 0;
  uint64_t t_post = shoal__now_ns();
  for (int k = 0; k < nmsg && src >= 0 && !rc; k++) rc = shoal__irecv(c, op, src, rbuf, rmsg, &r[k]);
  for (int k = 0; k < nmsg && dst >= 0 && !rc; k++) rc = shoal__isend(c, op, dst, sbuf, smsg, &s[k]);
  for (int seen = 0; src >= 0 && !rc && seen < nmsg;) { /* every completion's time, as soon as it is seen */
    shoal__req_t *head = &r[seen];
    rc = shoal__waitany(c, op, &head, 1);
    uint64_t now = shoal__now_ns();
    while (!rc && seen < nmsg && r[seen].state == 1) at[seen++] = now;
  }
  if (!rc && dst >= 0) rc = shoal__waitall(c, op, s, nmsg);
  if (!rc && src >= 0) {
    double per = 0; /* seconds per message */
    for (int i = lead - 1; i < nmsg - 1; i++) {
      double sl = (double)(at[nmsg - 1] - at[i]) * 1e-9 / (nmsg - 1 - i);
      if (sl > per) per = sl;
    }
    if (per <= 0) /* everything arrived at once (a link faster than this process): the whole stream's time */
      per = (double)(at[nmsg - 1] - t_post + 1) * 1e-9 / nmsg;
    *bw = (double)rmsg / per;
  }
  free(s), free(at);
  return rc;
}

/* A pair whose stream came out well below both what its sender reached
 * towards some host and what its receiver got from some host was most
 * likely measured while its processes waited for a CPU (hosts emulated on
 * few cores, a busy host): measure those pairs again, one at a time, and
 * keep the better figure. A pair that is really slower (a congested path
 * between just those two) measures slow again and stays so. Every rank has
 * the matrix, so every rank walks the same list. */
#define OUTLIER 0.8
static int remeasure_outliers(shoal_comm_t *c, const int *leader, int H, double *bw, int nmsg, char *buf) {
  shoal__world_t *w = c->w;
  int me = w->topo->host_of[w->rank], n = 0, rc = 0;
  double *out = calloc(2 * (size_t)H, sizeof *out), *in = out ? out + H : NULL;
  int *pairs = malloc(sizeof *pairs * (size_t)(H * H));
  if (!out || !pairs) {
    free(out), free(pairs);
    return shoal__seterr(SHOAL_ERR_NOMEM, "link profile: out of memory");
  }
  for (int i = 0; i < H; i++)
    for (int j = 0; j < H; j++) {
      double b = bw[i * H + j];
      if (i == j || !(b > 0)) continue;
      if (b > out[i]) out[i] = b;
      if (b > in[j]) in[j] = b;
    }
  for (int i = 0; i < H; i++)
    for (int j = 0; j < H; j++)
      if (i != j && bw[i * H + j] > 0 && bw[i * H + j] < OUTLIER * (out[i] < in[j] ? out[i] : in[j])) pairs[n++] = i * H + j;
  if (n) {
    double *again = malloc(sizeof *again * (size_t)n);
    if (!again) rc = shoal__seterr(SHOAL_ERR_NOMEM, "link profile: out of memory");
    for (int k = 0; !rc && k < n; k++) again[k] = -1;
    /* one pair at a time, a barrier between two: alone on the wire, as nothing else was measured */
    for (int k = 0; k < n && !rc; k++) {
      shoal__op_t op = {.opcode = SHOAL__OP_INTERNAL, .dtype = SHOAL_UINT8, .root = -1, .tag = 0x4c494e4c,
                        .count = STREAM_MSG};
      int i = pairs[k] / H, j = pairs[k] % H;
      if ((rc = shoal__op_begin(c, &op))) break;
      if (leader[me] == w->rank && (i == me || j == me)) {
        double b = -1;
        rc = stream_pairs(c, &op, i == me ? leader[j] : -1, j == me ? leader[i] : -1, nmsg, LEAD_MSGS, STREAM_MSG,
                          STREAM_MSG, buf, buf + STREAM_MSG, &b);
        if (!rc && j == me) again[k] = b;
      }
      if ((rc = shoal__op_end(c, &op, rc)) || (rc = shoal_barrier(c))) break;
    }
    if (!rc) rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, again, (size_t)n, SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD);
    for (int k = 0; !rc && k < n; k++)
      if (again[k] > bw[pairs[k]]) bw[pairs[k]] = again[k];
    if (!rc)
      SHOAL_DEBUG("TUNING", "link matrix: %d pair(s) below %.0f%% of both ends' best measured again", n, OUTLIER * 100);
    free(again);
  }
  free(out), free(pairs);
  return rc;
}

static double median_pos(const double *v, int n) {
  double *t = malloc(sizeof *t * (size_t)n);
  int m = 0;
  for (int i = 0; t && i < n; i++)
    if (v[i] > 0) t[m++] = v[i];
  double r = -1;
  if (m) {
    qsort(t, (size_t)m, sizeof *t, cmp_double);
    r = m % 2 ? t[m / 2] : 0.5 * (t[m / 2 - 1] + t[m / 2]);
  }
  free(t);
  return r;
}

/* The measurement of rounds rmin..rmax on c (collective), into m ([2 H H]: latencies, then bandwidths; -1
 * where nothing was measured), agreed by MAX. sel (NULL: every pair): only the pairs with an end i where
 * sel[i]. *G: the flows at once (SHOAL_PROFILE_FLOWS). */
typedef struct probe {
  int H, G, nsub, lead, nmsg, me;
  const int *leader;
  char *buf;
  const double *now; /* NULL: every stream in STREAM_MSG messages; else [H] round 1's rates (host h to h + 1), which
                      * size each pair's messages (shoal__tune_stream_msg) */
  double best;       /* the largest of now */
} probe_t;

size_t shoal__tune_stream_msg(double est, double best) {
  if (!(est > 0) || !(best > 0) || 2 * est >= best) return STREAM_MSG;
  size_t m = (size_t)ceil(2 * est / best * (STREAM_MSG / STREAM_UNIT)) * STREAM_UNIT;
  return m < STREAM_MSG / 8 ? STREAM_MSG / 8 : m;
}

/* The message size of the stream from host s to host d: full unless P->now gives both ends' rates. */
static size_t pair_msg(const probe_t *P, int s, int d) {
  if (!P->now) return STREAM_MSG;
  double out = P->now[s], in = P->now[(d - 1 + P->H) % P->H];
  return shoal__tune_stream_msg(out < in ? out : in, P->best);
}

static int probe_rounds(shoal_comm_t *c, const probe_t *P, const unsigned char *sel, int rmin, int rmax, double *m) {
  shoal__world_t *w = c->w;
  int H = P->H, G = P->G, me = P->me, rc;
  const int *leader = P->leader;
  for (int i = 0; i < 2 * H * H; i++) m[i] = -1;
  shoal__op_t op = {.opcode = SHOAL__OP_INTERNAL, .dtype = SHOAL_UINT8, .root = -1, .tag = 0x4c494e4b};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  for (int r = rmin; r <= rmax && !rc && leader[me] == w->rank; r++)
    for (int g = 0; g < P->nsub && !rc; g++) {
      int d = (me + r) % H, sh = (me - r + H) % H;
      int send = me / G == g && (!sel || sel[me] || sel[d]), recv = sh / G == g && (!sel || sel[sh] || sel[me]);
      if (!send && !recv) continue;
      shoal__op_t pop = op, bop = op;
      pop.count = PING_BYTES;
      bop.count = STREAM_MSG;
      /* latency: when this host pings and is pinged by the same host (r = H/2), only the lower pings */
      int pd = send ? leader[d] : -1, ps = recv ? leader[sh] : -1;
      if (send && recv && d == sh) {
        if (me < d) ps = -1;
        else pd = -1, ps = leader[sh];
      }
      double lat = -1, bw = -1;
      if ((rc = ping_pairs(c, &pop, pd, ps, &lat))) break;
      if (pd >= 0) m[me * H + d] = lat;
      if (pd >= 0 && d == sh) m[d * H + me] = lat; /* the pair's one latency, both directions */
      if ((rc = stream_pairs(c, &bop, send ? leader[d] : -1, recv ? leader[sh] : -1, P->nmsg, P->lead,
                             pair_msg(P, me, d), pair_msg(P, sh, me), P->buf, P->buf + STREAM_MSG, &bw)))
        break;
      if (recv) m[H * H + sh * H + me] = bw;
    }
  if ((rc = shoal__op_end(c, &op, rc))) return rc;
  return shoal_allreduce_algo(c, SHOAL_IN_PLACE, m, 2 * (size_t)(H * H), SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD);
}

static int probe_init(shoal_comm_t *c, probe_t *P) {
  shoal__world_t *w = c->w;
  const shoal__topo_t *tp = w->topo;
  shoal__tune_t *t = w->tune;
  long flows, stream_bytes;
  int rc, H = tp->nhosts;
  if ((rc = shoal__config_long("SHOAL_PROFILE_FLOWS", 0, 0, 1 << 20, &flows)) ||
      (rc = shoal__config_long("SHOAL_PROFILE_BYTES", t->profile_bytes, 64L << 10, 1L << 30, &stream_bytes)))
    return rc;
  P->H = H;
  P->G = flows > 0 && flows < H ? (int)flows : H, P->nsub = (H + P->G - 1) / P->G;
  P->lead = t->profile_quick ? LEAD_MSGS / 2 : LEAD_MSGS;
  P->nmsg = P->lead + (int)((stream_bytes + STREAM_MSG - 1) / STREAM_MSG);
  P->me = tp->host_of[w->rank];
  P->now = NULL, P->best = 0;
  int *leader = malloc(sizeof *leader * (size_t)H);
  P->buf = malloc(2 * (size_t)STREAM_MSG);
  if (!leader || !P->buf) {
    free(leader), free(P->buf);
    return shoal__seterr(SHOAL_ERR_NOMEM, "link profile: out of memory");
  }
  memset(P->buf, 1, 2 * (size_t)STREAM_MSG);
  for (int r = w->size - 1; r >= 0; r--) leader[tp->host_of[r]] = r;
  P->leader = leader;
  return 0;
}

static void probe_free(probe_t *P) {
  free((void *)P->leader), free(P->buf);
}

/* The matrix changed: the net class is its medians, the chooser prices again. */
static void links_changed(shoal__world_t *w, uint64_t t0) {
  shoal__tune_t *t = w->tune;
  int H = t->nh;
  double ml = median_pos(t->lat, H * H), mb = median_pos(t->bw, H * H);
  if (ml > 0) t->v[T_NET_A] = ml;
  if (mb > 0) t->v[T_NET_B] = 1.0 / mb;
  t->links_s = (double)(shoal__now_ns() - t0) * 1e-9;
  t->links_gen++;
  shoal__tune_changed(w);
}

int shoal__tune_probe_links(shoal_comm_t *c) {
  shoal__world_t *w = c->w;
  shoal__tune_t *t = w->tune;
  int H = w->topo->nhosts, rc;
  if (H < 2 || !t || c->size != w->size) return 0;
  probe_t P;
  if ((rc = probe_init(c, &P))) return rc;
  double *m = malloc(sizeof *m * 2 * (size_t)(H * H));
  if (!m) {
    probe_free(&P);
    return shoal__seterr(SHOAL_ERR_NOMEM, "link profile: out of memory");
  }
  uint64_t t0 = shoal__now_ns();
  if ((rc = probe_rounds(c, &P, NULL, 1, H - 1, m))) goto out;
  /* the quick profile (the default's) keeps a pair's figure from its round: a pair that shared a rack uplink
   * with the round's other flows measures what the algorithms with many flows at once will get */
  if (!t->profile_quick && (rc = remeasure_outliers(c, P.leader, H, m + H * H, P.nmsg, P.buf))) goto out;
  memcpy(t->lat, m, sizeof *m * (size_t)(H * H));
  memcpy(t->bw, m + H * H, sizeof *m * (size_t)(H * H));
  links_changed(w, t0);
  SHOAL_INFO("TUNING", "link matrix of %d hosts measured in %.0f ms (%d flows at once, %d messages of %u bytes per "
             "flow): median latency %.1f us, median bandwidth %.1f MB/s", H, t->links_s * 1e3, P.G, P.nmsg, STREAM_MSG,
             t->v[T_NET_A] * 1e6, 1e-6 / t->v[T_NET_B]);
out:
  free(m);
  probe_free(&P);
  return rc;
}

/* A pair measured again is "changed" beyond this factor either way, after the round's common factor. */
#define CHANGED 1.3
#define COMMON 2.0 /* the widest common factor of a round taken for the CPU */

static int beyond(double ratio) {
  return ratio > CHANGED || ratio * CHANGED < 1;
}

int shoal__tune_moved_hosts(int H, const double *before, const double *now, unsigned char *sel) {
  double *ratio = malloc(sizeof *ratio * 2 * (size_t)H), *sorted = ratio ? ratio + H : NULL;
  if (!ratio) return shoal__seterr(SHOAL_ERR_NOMEM, "link profile: out of memory");
  int m = 0, n = 0;
  for (int h = 0; h < H; h++) {
    double b = before[h * H + (h + 1) % H], a = now[h];
    ratio[h] = b > 0 && a > 0 ? a / b : 0;
    if (ratio[h] > 0) sorted[m++] = ratio[h];
  }
  /* the round's common factor: every flow of round 1 runs at once, so a busy CPU (hosts emulated on few cores,
   * a busy machine) slows them all alike; within COMMON either way it is taken for the CPU, not the links, and
   * divided out. Beyond it most links moved: compared as measured (then half the hosts or more are flagged). */
  double common = 1;
  if (m) {
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
    common = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
    if (common > COMMON || common * COMMON < 1) common = 1;
  }
  for (int h = 0; h < H; h++) {
    int pv = (h - 1 + H) % H;
    sel[h] = ratio[h] > 0 && ratio[pv] > 0 && beyond(ratio[h] / common) && beyond(ratio[pv] / common);
    n += sel[h]; /* both of its links' pairs: this host */
  }
  for (int h = 0; h < H && !n; h++) /* one pair only: either end */
    if (ratio[h] > 0 && beyond(ratio[h] / common)) sel[h] = sel[(h + 1) % H] = 1;
  n = 0;
  for (int h = 0; h < H; h++) n += sel[h];
  free(ratio);
  return n;
}

/* Streams sized from round 1's rates from here on (both ends of every pair compute the same sizes: every
 * rank has the agreed figures). A pair with no figure keeps full messages. */
static void use_rates(probe_t *P, const double *now) {
  P->now = now, P->best = 0;
  for (int h = 0; h < P->H; h++)
    if (now[h] > P->best) P->best = now[h];
}

/* Round 1 (every host to the next, at once) measured REPEATS times, each pair's best kept: a pair measured
 * while its processes waited for a CPU comes out slower, never faster. now[h]: host h to h + 1. */
#define REPEATS 2
static int ring_best(shoal_comm_t *c, probe_t *P, double *m, double *now) {
  int H = P->H, rc;
  for (int h = 0; h < H; h++) now[h] = -1;
  for (int k = 0; k < REPEATS; k++) {
    if (k) use_rates(P, now); /* the repeats after the first: each pair's messages sized from its rate */
    if ((rc = probe_rounds(c, P, NULL, 1, 1, m))) return rc;
    for (int h = 0; h < H; h++) {
      double b = m[H * H + h * H + (h + 1) % H];
      if (b > now[h]) now[h] = b;
    }
  }
  return 0;
}

int shoal__tune_reprobe_links(shoal_comm_t *c, int *nsuspects) {
  shoal__world_t *w = c->w;
  shoal__tune_t *t = w->tune;
  int H = w->topo->nhosts, rc, n = 0;
  *nsuspects = 0;
  if (H < 2 || !t || c->size != w->size || t->nh != H) return 0;
  if (H == 2) return (*nsuspects = H), shoal__tune_probe_links(c); /* round 1 is the whole matrix */
  for (int i = 0; i < H; i++) /* a host pair never measured: the whole matrix */
    if (!(t->bw[i * H + (i + 1) % H] > 0)) return (*nsuspects = H), shoal__tune_probe_links(c);
  probe_t P;
  if ((rc = probe_init(c, &P))) return rc;
  double *m = malloc(sizeof *m * (4 * (size_t)(H * H) + (size_t)H)), *m2 = m ? m + 2 * H * H : NULL;
  double *ring = m ? m2 + 2 * H * H : NULL;
  unsigned char *sel = calloc((size_t)H, 1);
  uint64_t t0 = shoal__now_ns();
  if (!m || !sel) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "link profile: out of memory");
    goto out;
  }
  /* where: round 1, every host's link out (to the next host) and in (from the one before) at once */
  if ((rc = ring_best(c, &P, m, ring))) goto out;
  for (int h = 0; h < H; h++) /* the pairs' best figures, kept below if measured again */
    m[H * H + h * H + (h + 1) % H] = ring[h];
  if ((n = shoal__tune_moved_hosts(H, t->bw, ring, sel)) < 0) {
    rc = n;
    goto out;
  }
  *nsuspects = n;
  if (!n) goto out; /* nothing moved: the matrix stays */
  if (2 * n >= H) { /* most hosts: the whole matrix */
    free(m), free(sel), probe_free(&P);
    return shoal__tune_probe_links(c);
  }
  /* their pairs: round 1 is measured already; a pair that round 1 found slow streams fewer bytes */
  use_rates(&P, ring);
  if ((rc = probe_rounds(c, &P, sel, 2, H - 1, m2))) goto out;
  for (int i = 0; i < H; i++)
    for (int j = 0; j < H; j++) {
      if (i == j || !(sel[i] || sel[j])) continue;
      int k = i * H + j;
      double lat = j == (i + 1) % H ? m[k] : m2[k], bw = j == (i + 1) % H ? m[H * H + k] : m2[H * H + k];
      if (lat > 0) t->lat[k] = lat;
      if (bw > 0) t->bw[k] = bw;
    }
  links_changed(w, t0);
  SHOAL_INFO("TUNING", "link matrix: the pairs of %d host(s) whose links changed measured again in %.0f ms", n,
             t->links_s * 1e3);
out:
  free(m), free(sel);
  probe_free(&P);
  return rc;
}
