/* Overlap of communication and computation with a non-blocking allreduce.
 *
 *   shoal launch -n 2 -- build/examples/overlap [--compute loop|gemm] [--min BYTES] [--max BYTES] [--reps N]
 *
 * Per size, the median over reps of:
 *   comm     a blocking shoal_allreduce alone
 *   compute  a fixed amount of work alone (a dependent multiply-add loop, or an OpenBLAS sgemm),
 *            sized to take about as long as comm
 *   both     shoal_iallreduce; the same work; shoal_wait
 * hidden = (comm + compute - both) / comm: the share of the communication time the computation hid
 * (1: all of it, 0: none; the progress thread competes with the computation for the rank's CPU).
 * Uses the public API only (and cblas for gemm), like a user's program. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shoal/shoal.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile double sink;

/* Fixed work: iters dependent multiply-adds (no memory traffic, not vectorizable away). */
static volatile double loop_a = 0.9999999, loop_b = 1e-7;
static void work_loop(long iters) {
  double x = sink, a = loop_a, b = loop_b; /* loaded at run time: nothing for the compiler to fold */
  for (long i = 0; i < iters; i++) x = x * a + b;
  sink = x;
}

static float *ga, *gb, *gc;
static int gn;
static void work_gemm(long reps) {
  for (long i = 0; i < reps; i++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, gn, gn, gn, 1.0f, ga, gn, gb, gn, 0.0f, gc, gn);
  sink = gc[0];
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

static void die(shoal_comm_t *c, const char *what, int rc) {
  fprintf(stderr, "overlap: %s: %s: %s\n", what, shoal_status_string(rc), c ? shoal_comm_errmsg(c) : shoal_last_error());
  exit(1);
}

int main(int argc, char **argv) {
  size_t min = 1u << 16, max = 64u << 20;
  int reps = 9, gemm = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--min") && i + 1 < argc) min = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--compute") && i + 1 < argc) {
      const char *k = argv[++i];
      if (!strcmp(k, "gemm")) gemm = 1;
      else if (strcmp(k, "loop")) {
        fprintf(stderr, "overlap: --compute: '%s' is not loop or gemm\n", k);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: overlap [--compute loop|gemm] [--min BYTES] [--max BYTES] [--reps N]\n");
      return 2;
    }
  }
  if (reps < 1 || reps > 1000 || min < 4 || max < min || max > (1ull << 32)) {
    fprintf(stderr, "overlap: bad --reps/--min/--max\n");
    return 2;
  }
  shoal_comm_t *c;
  int rc = shoal_comm_init_env(&c);
  if (rc) die(NULL, "init", rc);
  int me = shoal_comm_rank(c), p = shoal_comm_size(c);
  float *buf = malloc(max);
  if (!buf) return 1;
  memset(buf, 0, max);
  void (*work)(long) = work_loop;
  double unit_s; /* seconds per unit of work, calibrated on rank 0 and shared (all ranks do the same work) */
  if (gemm) {
    gn = 128;
    ga = malloc(sizeof(float) * gn * gn), gb = malloc(sizeof(float) * gn * gn), gc = malloc(sizeof(float) * gn * gn);
    for (int i = 0; i < gn * gn; i++) ga[i] = gb[i] = 0.5f;
    work = work_gemm;
    work(2);
    double t = now();
    work(50);
    unit_s = (now() - t) / 50;
  } else {
    work(1000000);
    double t = now();
    work(20000000);
    unit_s = (now() - t) / 20000000;
  }
  if ((rc = shoal_broadcast(c, &unit_s, 1, SHOAL_FLOAT64, 0))) die(c, "broadcast", rc);
  if (me == 0) {
    printf("# overlap: %d ranks, compute %s (%.3g s per unit), median of %d\n", p, gemm ? "sgemm 128^3" : "loop",
           unit_s, reps);
    printf("# %12s %10s %10s %10s %10s %8s\n", "size(B)", "comm(us)", "comp(us)", "both(us)", "ideal(us)", "hidden");
  }
  double *tc = malloc(sizeof(double) * (size_t)reps), *tw = malloc(sizeof(double) * (size_t)reps),
         *tb = malloc(sizeof(double) * (size_t)reps);
  for (size_t bytes = min; bytes <= max; bytes *= 4) {
    size_t n = bytes / 4;
    for (int w = 0; w < 2; w++)
      if ((rc = shoal_allreduce(c, SHOAL_IN_PLACE, buf, n, SHOAL_FLOAT32, SHOAL_SUM))) die(c, "warm-up", rc);
    for (int r = 0; r < reps; r++) {
      if ((rc = shoal_barrier(c))) die(c, "barrier", rc);
      double t = now();
      if ((rc = shoal_allreduce(c, SHOAL_IN_PLACE, buf, n, SHOAL_FLOAT32, SHOAL_SUM))) die(c, "allreduce", rc);
      tc[r] = now() - t;
    }
    double comm = median(tc, reps);
    /* the same work on every rank: rank 0's comm time decides it */
    if ((rc = shoal_broadcast(c, &comm, 1, SHOAL_FLOAT64, 0))) die(c, "broadcast", rc);
    long units = (long)(comm / unit_s);
    if (units < 1) units = 1;
    double t0 = now(); /* re-calibrate at this size (clock ramp, caches) */
    work(units);
    double took = now() - t0;
    if (took > 0) units = (long)((double)units * comm / took);
    if (units < 1) units = 1;
    if ((rc = shoal_broadcast(c, &units, 1, SHOAL_INT64, 0))) die(c, "broadcast", rc);
    for (int r = 0; r < reps; r++) {
      if ((rc = shoal_barrier(c))) die(c, "barrier", rc);
      double t = now();
      work(units);
      tw[r] = now() - t;
      if ((rc = shoal_barrier(c))) die(c, "barrier", rc);
      t = now();
      shoal_request_t *rq;
      if ((rc = shoal_iallreduce(c, SHOAL_IN_PLACE, buf, n, SHOAL_FLOAT32, SHOAL_SUM, &rq))) die(c, "iallreduce", rc);
      work(units);
      if ((rc = shoal_wait(&rq))) die(c, "wait", rc);
      tb[r] = now() - t;
    }
    double comp = median(tw, reps), both = median(tb, reps);
    double ideal = comm > comp ? comm : comp;
    double hidden = (comm + comp - both) / comm;
    if (hidden < 0) hidden = 0;
    if (hidden > 1) hidden = 1;
    if (me == 0)
      printf("  %12zu %10.1f %10.1f %10.1f %10.1f %7.0f%%\n", bytes, comm * 1e6, comp * 1e6, both * 1e6, ideal * 1e6,
             hidden * 100);
    fflush(stdout);
  }
  free(tc), free(tw), free(tb), free(buf);
  shoal_comm_destroy(c);
  return 0;
}
