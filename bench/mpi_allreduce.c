/* Open MPI anchor for bench/tcp-anchors.sh: MPI_Allreduce float32 sum over a
 * size sweep, measured exactly like `shoal bench allreduce` (warm-up; rank 0
 * picks the iteration count from its warm-up median and broadcasts it; a
 * barrier before each iteration; per-iteration time = max over ranks; p50,
 * p99, max; algbw = S/p50 with GB = 1e9; busbw = algbw * 2(n-1)/n) and
 * printed in the same columns, out-of-place then MPI_IN_PLACE.
 * Build: mpicc.openmpi -O2 bench/mpi_allreduce.c -o mpi_allreduce
 * Args:  -b MINBYTES -e MAXBYTES -f FACTOR -w WARMUP -W WARMUP_S -n ITERS(0=auto) -T TARGET_S
 *        --steps N [--step-ms MS] [--seconds S]: instead, N allreduces of -b bytes in a loop with
 *        MS of emulated compute (sleep) before each (at most S seconds), one line per step (the
 *        slowest rank's time, rank 0's clock), like `shoal bench allreduce --steps`. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static size_t parse_size(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (*e == 'K' || *e == 'k') v *= 1024;
  if (*e == 'M' || *e == 'm') v *= 1048576;
  if (*e == 'G' || *e == 'g') v *= 1073741824;
  return (size_t)v;
}

static void run(float *sb, float *rb, size_t count, int inplace, int warm, double warm_s, long fixed, double target,
                int rank,
                int n, double res[5]) {
  MPI_Comm w = MPI_COMM_WORLD;
  double *wt = calloc((size_t)warm + 1, sizeof *wt);
  for (int i = 0; i < warm; i++) {
    double t0 = MPI_Wtime();
    MPI_Allreduce(inplace ? MPI_IN_PLACE : sb, rb, (int)count, MPI_FLOAT, MPI_SUM, w);
    wt[i] = MPI_Wtime() - t0;
  }
  /* as shoal bench: rank 0 plans the timed iterations and the extra warm-up (-W) */
  qsort(wt, (size_t)warm, sizeof *wt, cmp);
  double med = warm ? wt[warm / 2] : 1e-3;
  if (med < 1e-7) med = 1e-7;
  long plan[2] = {fixed, (long)(warm_s / med)};
  if (plan[0] <= 0) plan[0] = (long)(target / med);
  if (plan[0] < 5) plan[0] = 5;
  if (plan[0] > 2000 && fixed <= 0) plan[0] = 2000;
  if (plan[1] > 10000) plan[1] = 10000;
  MPI_Bcast(plan, 2, MPI_LONG, 0, w);
  free(wt);
  for (long i = 0; i < plan[1]; i++)
    MPI_Allreduce(inplace ? MPI_IN_PLACE : sb, rb, (int)count, MPI_FLOAT, MPI_SUM, w);
  long iters = plan[0];
  double *t = calloc((size_t)iters, sizeof *t);
  for (long i = 0; i < iters; i++) {
    MPI_Barrier(w);
    double t0 = MPI_Wtime();
    MPI_Allreduce(inplace ? MPI_IN_PLACE : sb, rb, (int)count, MPI_FLOAT, MPI_SUM, w);
    t[i] = MPI_Wtime() - t0;
  }
  MPI_Allreduce(MPI_IN_PLACE, t, (int)iters, MPI_DOUBLE, MPI_MAX, w);
  qsort(t, (size_t)iters, sizeof *t, cmp);
  double S = (double)count * 4;
  res[0] = t[(size_t)ceil(0.50 * (double)iters) - 1]; /* nearest-rank percentiles */
  res[1] = t[(size_t)ceil(0.99 * (double)iters) - 1];
  res[2] = t[iters - 1];
  res[3] = S / res[0] * 1e-9;
  res[4] = res[3] * 2.0 * (n - 1) / n;
  free(t);
  (void)rank;
}

/* --steps: a training-like loop of one size. */
static void steps_loop(size_t bytes, long steps, double step_ms, double seconds, int rank) {
  size_t count = bytes / 4 ? bytes / 4 : 1;
  float *buf = malloc(count * 4);
  for (size_t i = 0; i < count; i++) buf[i] = (float)((i * 7 + (size_t)rank * 13) % 17) - 8;
  if (rank == 0) printf("# Open MPI MPI_Allreduce --steps %ld: %zu B, step compute %.1f ms\n", steps, count * 4, step_ms);
  double total = 0, start = MPI_Wtime();
  long done = 0;
  for (long k = 0; k < steps; k++) {
    if (step_ms > 0) {
      struct timespec ts = {(time_t)(step_ms / 1e3), (long)(fmod(step_ms, 1e3) * 1e6)};
      nanosleep(&ts, NULL);
    }
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double tv[2] = {MPI_Wtime() - t0, rank == 0 ? MPI_Wtime() - start : 0};
    MPI_Allreduce(MPI_IN_PLACE, tv, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); /* slowest rank; rank 0's clock */
    total += tv[0], done++;
    if (rank == 0) printf("  %6ld %10.2f %12s %-6s %9.3f\n", k, tv[0] * 1e3, "-", "ompi", tv[1]), fflush(stdout);
    if (seconds > 0 && tv[1] >= seconds) break;
  }
  if (rank == 0)
    printf("# steps %ld, allreduce time %.3f s in all, mean %.2f ms, wall %.3f s\n", done, total, total / done * 1e3,
           MPI_Wtime() - start);
  free(buf);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  size_t minb = 8, maxb = 256u << 20;
  double f = 2, target = 0.2, step_ms = 0, seconds = 0;
  int warm = 5;
  double warm_s = 0.02;
  long fixed = 0, steps = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) steps = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--step-ms")) step_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else
    if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f")) f = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warm = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-W")) warm_s = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) fixed = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "-T")) target = atof(argv[i + 1]);
  }
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (steps > 0) {
    steps_loop(minb, steps, step_ms, seconds, rank);
    MPI_Finalize();
    return 0;
  }
  float *sb = malloc(maxb + 8), *rb = malloc(maxb + 8);
  for (size_t i = 0; i < maxb / 4 + 2; i++) sb[i] = (float)((i * 7 + (size_t)rank * 13) % 17) - 8, rb[i] = 0;
  if (rank == 0) {
    printf("# Open MPI MPI_Allreduce: %d ranks, float32 sum; same method as shoal bench\n", n);
    printf("# %10s %11s %8s %5s %5s | %9s %9s %9s %7s %7s %6s | %9s %9s %9s %7s %7s %6s\n", "size(B)", "count", "type",
           "redop", "algo", "p50(us)", "p99(us)", "max(us)", "algbw", "busbw", "#wrong", "p50(us)", "p99(us)",
           "max(us)", "algbw", "busbw", "#wrong");
  }
  for (size_t b = minb; b <= maxb;) {
    size_t count = b / 4;
    if (count) {
      double r0[5], r1[5];
      run(sb, rb, count, 0, warm, warm_s, fixed, target, rank, n, r0);
      run(sb, rb, count, 1, warm, warm_s, fixed, target, rank, n, r1);
      if (rank == 0) {
        printf("  %10zu %11zu %8s %5s %5s | %9.2f %9.1f %9.1f %7.3f %7.3f %6s | %9.2f %9.1f %9.1f %7.3f %7.3f %6s\n",
               count * 4, count, "float32", "sum", "ompi", r0[0] * 1e6, r0[1] * 1e6, r0[2] * 1e6, r0[3], r0[4], "n/a",
               r1[0] * 1e6, r1[1] * 1e6, r1[2] * 1e6, r1[3], r1[4], "n/a");
        fflush(stdout);
      }
    }
    size_t nb = (size_t)((double)b * f);
    b = nb > b ? nb : b + 1;
  }
  free(sb);
  free(rb);
  MPI_Finalize();
  return 0;
}
