/* The tuning profile (AdapCC-style, spec adaptive-comm.md A1, adapted):
 * same-host pairs: the time T(S) of exchanging S bytes each way for a few
 * sizes, fitted as T = alpha + beta S by least squares weighted by 1/T^2
 * (relative errors, so the 64-byte point sets alpha and the large point
 * beta); between hosts: the matrix of every host pair (links.c), whose
 * medians are the net class; the shm-native allreduce fitted as T = a + b S
 * the same way, and the single-copy one (cma) where it may run; gamma from
 * timing the float32 sum kernel; the overhead of one point-to-point
 * collective. Medians over iterations; the ranks agree on the
 * MAX of each value (conservative under contention). */
#include <stdlib.h>
#include <string.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/transport/shm.h"
#include "comm/tune/tune.h"
#include "comm/tune/tune_impl.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#define NSIZES 4
static const size_t p2p_sizes[NSIZES] = {64, 4096, 256u << 10, 32u << 20}; /* the last beyond L3: DRAM-bound like real gradients */
static const int p2p_iters[NSIZES] = {30, 20, 8, 3};
#define NCOLL 4 /* 8 B sets alpha: the choice against rd for small vectors hinges on it */
static const size_t coll_sizes[NCOLL] = {8, 4096, 256u << 10, 32u << 20};
static const int coll_iters[NCOLL] = {40, 30, 10, 3};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Weighted least squares of t = a + b x with weights 1/t^2. */
static void fit(const double *x, const double *t, int n, double *a, double *b) {
  double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (int i = 0; i < n; i++) {
    double w = 1.0 / (t[i] * t[i]);
    sw += w, sx += w * x[i], st += w * t[i], sxx += w * x[i] * x[i], sxt += w * x[i] * t[i];
  }
  double d = sw * sxx - sx * sx;
  *b = d != 0 ? (sw * sxt - sx * st) / d : 0;
  *a = (st - *b * sx) / sw;
  if (*b <= 0) *b = t[n - 1] / x[n - 1]; /* noise: fall back to the largest point */
  if (*a <= 0) *a = t[0] > *b * x[0] ? t[0] - *b * x[0] : t[0] * 0.5;
}

/* One side of an exchange of S bytes each way between comm ranks a and b
 * (sendrecv, as every step of ring, rhd and rd is): T(S) = alpha + beta S
 * with beta per byte and direction on a full-duplex link, contended the
 * way a collective contends (both directions at once, all pairs at once). */
static int p2p_probe(shoal_comm_t *c, shoal__op_t *op, int a, int b, double *alpha, double *beta) {
  int peer = c->rank == a ? b : a, rc = 0;
  size_t max = p2p_sizes[NSIZES - 1];
  char *buf = malloc(2 * max);
  if (!buf) return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  memset(buf, 1, 2 * max);
  double x[NSIZES], t[NSIZES], samples[64];
  for (int k = 0; k < NSIZES && !rc; k++) {
    size_t S = p2p_sizes[k];
    op->count = S;
    for (int it = 0; it <= p2p_iters[k] && !rc; it++) { /* iteration 0 warms up */
      uint64_t t0 = shoal__now_ns();
      rc = shoal__sendrecv(c, op, peer, buf, S, peer, buf + max, S);
      if (it) samples[it - 1] = (double)(shoal__now_ns() - t0) * 1e-9;
    }
    x[k] = (double)S;
    t[k] = median(samples, p2p_iters[k]);
  }
  free(buf);
  if (rc) return rc;
  fit(x, t, NSIZES, alpha, beta);
  return 0;
}

/* A shared-memory-native allreduce of the host group (run: shm_coll.c's, or the cma algorithm's), timed
 * end to end at coll_sizes and fitted as T = a + b S. */
typedef int (*coll_run_t)(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count);

static int run_shm(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count) {
  return shoal__shm_allreduce(c, op, src, dst, count, -1);
}

static int run_cma(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count) {
  return shoal__algo_cma.run(c, op, src, dst, count, NULL);
}

static int coll_probe(shoal_comm_t *c, shoal__op_t *op, coll_run_t run, double *a, double *b) {
  char *in = malloc(coll_sizes[NCOLL - 1]), *out = malloc(coll_sizes[NCOLL - 1]);
  int rc = 0;
  if (!in || !out) {
    free(in), free(out);
    return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  }
  memset(in, 0, coll_sizes[NCOLL - 1]);
  double x[NCOLL], t[NCOLL], samples[64];
  shoal__op_t cop = *op;
  cop.dtype = SHOAL_FLOAT32;
  cop.redop = SHOAL_SUM;
  for (int k = 0; k < NCOLL && !rc; k++) {
    size_t n = coll_sizes[k] / 4;
    /* the call's count in the shared-memory descriptors, the same on every rank (op's was left by the
     * pair probe, which a rank without a same-host partner, an odd one out, did not run) */
    cop.count = n;
    for (int it = 0; it <= coll_iters[k] && !rc; it++) {
      int brc = 0; /* start together, as after a barrier or a compute phase; back to back the ranks' waits overlap */
      if (shoal__shm_barrier(c, &cop, &brc) && brc) return free(in), free(out), brc;
      uint64_t t0 = shoal__now_ns();
      rc = run(c, &cop, in, out, n);
      if (it) samples[it - 1] = (double)(shoal__now_ns() - t0) * 1e-9;
    }
    x[k] = (double)coll_sizes[k];
    t[k] = median(samples, coll_iters[k]);
  }
  free(in), free(out);
  if (!rc) fit(x, t, NCOLL, a, b);
  return rc;
}

static double gamma_probe(void) {
  size_t n = (1u << 20) / 4;
  float *a = malloc(n * 4), *b = malloc(n * 4), *d = malloc(n * 4);
  if (!a || !b || !d) {
    free(a), free(b), free(d);
    return -1;
  }
  for (size_t i = 0; i < n; i++) a[i] = (float)i, b[i] = 1.0f;
  double best = 1e9;
  for (int it = 0; it < 8; it++) {
    uint64_t t0 = shoal__now_ns();
    shoal__reduce3(d, a, b, n, SHOAL_FLOAT32, SHOAL_SUM);
    double dt = (double)(shoal__now_ns() - t0) * 1e-9;
    if (dt < best) best = dt;
  }
  free(a), free(b), free(d);
  return best / (double)(n * 4);
}

/* The overhead o of one collective on the point-to-point path: the median
 * of a 4-byte rd allreduce minus the link model's prediction for it (the
 * fitted values are in place already, o = 0). Agreed by MAX. */
static int op_probe(shoal_comm_t *c, double *o) {
  enum { ITERS = 40 };
  float x = 1.0f;
  double samples[ITERS];
  int rc;
  c->w->tune->v[T_OP_O] = 0;
  for (int it = 0; it <= ITERS; it++) { /* iteration 0 warms up */
    if ((rc = shoal_barrier(c))) return rc; /* start together, as the shm-native probe does */
    uint64_t t0 = shoal__now_ns();
    if ((rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, &x, 1, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_RD))) return rc;
    if (it) samples[it - 1] = (double)(shoal__now_ns() - t0) * 1e-9;
  }
  shoal__coll_ctx_t cx;
  shoal__choice_t ch;
  shoal__coll_ctx(c, &cx);
  shoal__coll_price(&cx, sizeof x, SHOAL__CHOOSE_NOPLAN, &ch);
  double v = median(samples, ITERS) - ch.t[SHOAL_ALGO_RD];
  if (v < 0) v = 0;
  if ((rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, &v, 1, SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD))) return rc;
  *o = v;
  return 0;
}

int shoal__tune_profile(shoal_comm_t *c, int write_cache) {
  shoal__world_t *w = c->w;
  const shoal__topo_t *s = w->topo;
  if (c->size != w->size) return shoal__seterr(SHOAL_ERR_INVALID, "tune: profile the world communicator");
  double v[SHOAL__TUNE_NVALS];
  for (int i = 0; i < SHOAL__TUNE_NVALS; i++) v[i] = -1;
  uint64_t t0 = shoal__now_ns();
  shoal__op_t op = {.opcode = SHOAL__OP_INTERNAL, .dtype = SHOAL_UINT8, .root = -1, .tag = 0x54554e45};
  int rc = shoal__op_begin(c, &op);
  if (rc) return rc;
  /* same-host pairs (0,1), (2,3), ... all at once: with more ranks than cores the
   * pairs share the cores, as the ranks of a collective do (contended bandwidth) */
  int pl = s->lrank ^ 1;
  if (w->shm && pl < s->nlocal)
    rc = p2p_probe(c, &op, s->l2w[s->lrank & ~1], s->l2w[s->lrank | 1], &v[T_SHM_A], &v[T_SHM_B]);
  if (!rc && w->shm) rc = coll_probe(c, &op, run_shm, &v[T_COLL_A], &v[T_COLL_B]);
  /* the single-copy algorithm where the host group agreed it may run (w->shm->cma_ok, the same on every
   * member) and holds two ranks: unmeasured, the chooser never picks it. With more ranks on a host it
   * measured slower than the shm row at every size (docs/shm.md), yet a profile taken under load can
   * favour its fit, so it is not timed there (the host set's key holds the rank count: a 2-rank entry
   * never serves a larger group) */
  if (!rc && w->shm && w->shm->cma_ok && s->nlocal == 2)
    rc = coll_probe(c, &op, run_cma, &v[T_CMA_A], &v[T_CMA_B]);
  if (!rc) v[T_GAMMA] = gamma_probe();
  if ((rc = shoal__op_end(c, &op, rc))) return rc;
  if ((rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, v, SHOAL__TUNE_NVALS, SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD)))
    return rc;
  memcpy(w->tune->v, v, sizeof v);
  w->tune->source = 1;
  /* between hosts: the matrix of every host pair; the net class is its medians */
  if ((rc = shoal__tune_probe_links(c))) return rc;
  if ((rc = op_probe(c, &w->tune->v[T_OP_O]))) return rc;
  shoal__tune_changed(w); /* new values: forget the last choice */
  SHOAL_DEBUG("TUNING", "profile took %.1f ms", (double)(shoal__now_ns() - t0) * 1e-6);
  SHOAL_DEBUG("TUNING", "fitted: shm alpha %.2f us, %.2f GB/s; net alpha %.2f us, %.2f GB/s; gamma %.2f GB/s; "
              "shm allreduce %.2f us + S / %.2f GB/s; cma allreduce %.2f us + S / %.2f GB/s; op overhead %.2f us",
              v[T_SHM_A] * 1e6, v[T_SHM_B] > 0 ? 1e-9 / v[T_SHM_B] : -1,
              w->tune->v[T_NET_A] * 1e6, w->tune->v[T_NET_B] > 0 ? 1e-9 / w->tune->v[T_NET_B] : -1, v[T_GAMMA] > 0 ? 1e-9 / v[T_GAMMA] : -1,
              v[T_COLL_A] * 1e6, v[T_COLL_B] > 0 ? 1e-9 / v[T_COLL_B] : -1, v[T_CMA_A] * 1e6,
              v[T_CMA_B] > 0 ? 1e-9 / v[T_CMA_B] : -1, w->tune->v[T_OP_O] * 1e6);
  return write_cache ? shoal__tune_store(c) : 0;
}
