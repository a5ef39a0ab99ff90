/* A memory-bandwidth-bound job for the co-location measurements
 * (experiments/interference/measure.sh): the STREAM triad a[i] = b[i] + s*c[i]
 * over three arrays far beyond the last-level cache, repeated for a fixed
 * time, then the average rate (bytes read + written per second) printed as
 * "GB/s X". With -t 0 it runs until SIGTERM or SIGINT (a background
 * co-runner), at most 900 s. With -l every pass over the arrays is a line
 * "pass END_S SECONDS" (END_S: the wall clock, Unix seconds, when it ended), so
 * that its rate can be split by what ran beside it at the time (the toggled
 * measurement).
 * Build: cc -O2 membw.c -o membw    Run: membw [-t SECONDS] [-m MiB per array] [-l] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }

int main(int argc, char **argv) {
  double secs = 5, mib = 512;
  int opt, per_pass = 0;
  while ((opt = getopt(argc, argv, "t:m:l")) != -1) {
    if (opt == 'l') {
      per_pass = 1;
      continue;
    }
    if (opt == '?') return 2;
    char *end;
    double v = strtod(optarg, &end);
    if (*end || v < 0 || (opt == 'm' && (v < 1 || v > 8192)) || (opt == 't' && v > 900)) {
      fprintf(stderr, "membw: -%c %s: expected %s\n", opt, optarg, opt == 'm' ? "1..8192 MiB" : "0..900 s");
      return 2;
    }
    if (opt == 't') secs = v;
    else if (opt == 'm') mib = v;
    else return 2;
  }
  if (optind != argc) {
    fprintf(stderr, "usage: membw [-t SECONDS] [-m MiB per array] [-l]\n");
    return 2;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  size_t n = (size_t)(mib * 1048576.0 / sizeof(double));
  double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
  if (!a || !b || !c) {
    fprintf(stderr, "membw: out of memory for 3 x %.0f MiB\n", mib);
    return 1;
  }
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
  double limit = secs > 0 ? secs : 900, t0 = now(), t = t0, bytes = 0;
  while (!stop && t - t0 < limit) {
    double pass0 = t;
    for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5 * c[i];
    bytes += 3.0 * (double)n * sizeof(double);
    t = now();
    if (per_pass) printf("pass %.6f %.6f\n", clock_s(CLOCK_REALTIME), t - pass0);
  }
  /* keep the result alive so the loop is not optimized away */
  printf("GB/s %.3f (check %.1f)\n", bytes / (t - t0) / 1e9, a[n / 2]);
  free(a);
  free(b);
  free(c);
  return 0;
}
