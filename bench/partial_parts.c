/* One rank of bench/partial-overhead.sh (built by the script, on the public API, under `shoal launch`):
 * the per-step cost of the partial allreduce taken apart, every rank ready at once (no straggler, no
 * training), against the plain allreduce of the same size.
 *
 *   partial_parts BYTES ITERS
 *
 * Each iteration runs, after a barrier and in a rotating order, one call of each part:
 *   allreduce  shoal_allreduce (the chooser's algorithm), avg
 *   relay      shoal_allreduce_algo(relay): the relay trees with every rank in (the partial's data plane
 *              when the set is not full)
 *   partial    a partial allreduce of BYTES, every rank arriving just before it, split in
 *     p.control  its control round (READY to rank 0, DECIDE back: shoal_partial_info_t.control_s) on the
 *                rank that was ready last (the fastest rank's: the others' also holds the ranks' skew) and
 *     p.data     the rest (the data plane), on the slowest rank
 * and times it on every rank; the iteration's time of a part is its slowest rank's. Rank 0 prints, per part,
 * the median, the 10th and 90th percentiles, algbw/busbw (bytes over the median; busbw with the
 * allreduce's 2 (p - 1) / p) and #wrong (elements off the average of 1 .. p, over every rank and
 * iteration). Every line it prints starts with "parts:" (the script reads them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shoal/comm.h"
#include "shoal/partial.h"

enum { P_ALLREDUCE, P_RELAY, P_PARTIAL, NRUN, P_CONTROL = NRUN, P_DATA, NPART };
static const char *const part_names[NPART] = {"allreduce", "relay", "partial", "p.control", "p.data"};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct bench {
  shoal_comm_t *c;
  shoal_partial_t *pa;
  double control_s;
  size_t n;
  float *src, *dst;
  long step;
  double wrong[NPART];
} bench_t;

static long count_wrong(const bench_t *b) {
  float want = (float)(shoal_comm_size(b->c) + 1) / 2;
  long w = 0;
  for (size_t i = 0; i < b->n; i++) w += b->dst[i] != want;
  return w;
}

static int run_part(bench_t *b, int part) {
  int rc = 0;
  float r = (float)(shoal_comm_rank(b->c) + 1);
  for (size_t i = 0; i < b->n; i++) b->src[i] = r, b->dst[i] = 0;
  switch (part) {
  case P_ALLREDUCE: rc = shoal_allreduce(b->c, b->src, b->dst, b->n, SHOAL_FLOAT32, SHOAL_AVG); break;
  case P_RELAY: rc = shoal_allreduce_algo(b->c, b->src, b->dst, b->n, SHOAL_FLOAT32, SHOAL_AVG, SHOAL_ALGO_RELAY); break;
  default: {
    shoal_partial_info_t info;
    rc = shoal_partial_arrive(b->pa, b->step, b->src, 0);
    if (!rc) rc = shoal_partial_allreduce(b->pa, b->step, b->dst, &info);
    if (!rc) b->control_s = info.control_s;
    break;
  }
  }
  if (!rc) b->wrong[part] += (double)count_wrong(b);
  return rc;
}

static double pct(double *v, int n, double q) {
  int i = (int)(q * (n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: shoal launch -n N -- partial_parts BYTES ITERS\n");
    return 2;
  }
  char *end;
  long bytes = strtol(argv[1], &end, 10), iters;
  if (*end || bytes < 4 || bytes > (1L << 30)) {
    fprintf(stderr, "partial_parts: BYTES '%s': expected 4 .. 1 GiB\n", argv[1]);
    return 2;
  }
  iters = strtol(argv[2], &end, 10);
  if (*end || iters < 5 || iters > 100000) {
    fprintf(stderr, "partial_parts: ITERS '%s': expected 5 .. 100000\n", argv[2]);
    return 2;
  }
  bench_t b = {0};
  if (shoal_comm_init_env(&b.c)) {
    fprintf(stderr, "partial_parts: init: %s\n", shoal_last_error());
    return 1;
  }
  int p = shoal_comm_size(b.c), rank = shoal_comm_rank(b.c), rc = 0;
  b.n = (size_t)bytes / 4;
  shoal_partial_params_t prm;
  shoal_partial_params_init(&prm);
  prm.carry = SHOAL_PARTIAL_CARRY;
  prm.min_ready = p; /* the window closes when every rank is in: every step is a full one */
  b.src = malloc(b.n * 4);
  b.dst = malloc(b.n * 4);
  double *t = calloc((size_t)NPART * (size_t)iters, sizeof *t);
  long warm = iters / 5 + 2;
  if (!b.src || !b.dst || !t) {
    fprintf(stderr, "partial_parts: out of memory\n");
    return 1;
  }
  if ((rc = shoal_partial_create(b.c, b.n, SHOAL_FLOAT32, SHOAL_AVG, &prm, &b.pa))) goto fail;
  for (long it = -warm; it < iters && !rc; it++) {
    for (int k = 0; k < NRUN && !rc; k++) {
      int part = (int)((k + (it < 0 ? 0 : it)) % NRUN);
      if ((rc = shoal_barrier(b.c))) break;
      double t0 = now_s();
      rc = run_part(&b, part);
      double took = now_s() - t0;
      if (it < 0) continue;
      t[(size_t)part * (size_t)iters + (size_t)it] = took;
      if (part == P_PARTIAL) {
        t[(size_t)P_CONTROL * (size_t)iters + (size_t)it] = -b.control_s; /* min over ranks, below */
        t[(size_t)P_DATA * (size_t)iters + (size_t)it] = took - b.control_s;
      }
    }
    b.step++;
    if (it == -1) memset(b.wrong, 0, sizeof b.wrong);
  }
  if (rc) goto fail;
  /* each iteration's slowest rank; for p.control the fastest one: the rank whose READY came last waits the
   * round trip alone, the others also wait for it (the ranks' skew, which an allreduce waits out too) */
  if ((rc = shoal_allreduce(b.c, SHOAL_IN_PLACE, t, (size_t)NPART * (size_t)iters, SHOAL_FLOAT64, SHOAL_MAX)) ||
      (rc = shoal_allreduce(b.c, SHOAL_IN_PLACE, b.wrong, NPART, SHOAL_FLOAT64, SHOAL_SUM)))
    goto fail;
  if (rank == 0) {
    double S = (double)b.n * 4, bus = 2.0 * (p - 1) / p;
    printf("parts: %d ranks, %.0f B float32 avg, %ld iterations (+%ld warm-up); the chooser picks %s\n", p, S, iters,
           warm, shoal_algo_name(shoal_allreduce_choose(b.c, (size_t)S)));
    printf("parts: %-10s %12s %10s %10s %10s %9s %9s %7s\n", "part", "size", "time_us", "p10_us", "p90_us", "algbw",
           "busbw", "#wrong");
    double med[NPART];
    for (int k = 0; k < NPART; k++) {
      double *v = t + (size_t)k * (size_t)iters;
      for (long i = 0; k == P_CONTROL && i < iters; i++) v[i] = -v[i];
      qsort(v, (size_t)iters, sizeof *v, cmp_double);
      med[k] = pct(v, (int)iters, 0.5);
      double sz = k == P_CONTROL ? 0 : S;
      if (k == P_CONTROL) b.wrong[k] = b.wrong[P_DATA] = b.wrong[P_PARTIAL];
      printf("parts: %-10s %12.0f %10.1f %10.1f %10.1f %9.3f %9.3f %7.0f\n", part_names[k], sz, med[k] * 1e6,
             pct(v, (int)iters, 0.1) * 1e6, pct(v, (int)iters, 0.9) * 1e6, sz / med[k] * 1e-9, sz / med[k] * 1e-9 * bus,
             b.wrong[k]);
    }
    printf("parts: partial - allreduce %.1f us (p.control %.1f us, p.data - allreduce %.1f us; relay - allreduce "
           "%.1f us)\n", (med[P_PARTIAL] - med[P_ALLREDUCE]) * 1e6, med[P_CONTROL] * 1e6,
           (med[P_DATA] - med[P_ALLREDUCE]) * 1e6, (med[P_RELAY] - med[P_ALLREDUCE]) * 1e6);
  }
fail:
  if (rc) fprintf(stderr, "partial_parts: rank %d: %s\n", rank, shoal_comm_errmsg(b.c));
  shoal_partial_destroy(b.pa);
  free(b.src);
  free(b.dst);
  free(t);
  shoal_comm_destroy(b.c);
  return rc ? 1 : 0;
}
