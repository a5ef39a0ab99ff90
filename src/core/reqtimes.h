/* Request arrival processes for the load generator: a recorded trace
 * (time- and rate-scaled), Poisson, and a diurnal (sinusoidal rate) Poisson
 * process. Each gives sorted arrival times in seconds from 0. */
#ifndef SHOAL_CORE_REQTIMES_H
#define SHOAL_CORE_REQTIMES_H

#include <stddef.h>
#include <stdint.h>

typedef struct shoal__reqtimes {
  double *t; /* sorted, seconds from the start */
  size_t n;
} shoal__reqtimes_t;

/* A trace CSV with a header whose first column is the arrival: a timestamp "YYYY-MM-DD HH:MM:SS[.frac]" (the
 * Azure LLM inference traces' TIMESTAMP) or seconds. The part [start_s, start_s + duration_s x speedup) of it
 * (trace seconds from its first arrival; duration_s 0: to the end) is replayed speedup times faster, with
 * rate_scale times as many requests (< 1: each kept with that probability; > 1: extra copies placed at
 * random between an arrival and the next). Errors name `what` (the option that gave the file, NULL: "request
 * trace"), the file and line. At most max arrivals. */
int shoal__reqtimes_trace(const char *what, const char *path, double start_s, double duration_s, double speedup, double rate_scale,
                          uint64_t seed, size_t max, shoal__reqtimes_t *out);
/* Poisson arrivals of `rate` per second for duration_s. */
int shoal__reqtimes_poisson(double rate, double duration_s, uint64_t seed, size_t max, shoal__reqtimes_t *out);
/* Poisson arrivals of rate base x (1 + amp sin(2 pi t / period_s)), 0 <= amp <= 1, for duration_s. */
int shoal__reqtimes_diurnal(double base, double amp, double period_s, double duration_s, uint64_t seed, size_t max,
                            shoal__reqtimes_t *out);
void shoal__reqtimes_free(shoal__reqtimes_t *a);

#endif
