/* Latency histograms: log-spaced buckets (16 per power of two from 1 us, so a
 * quantile is within 2.2% of the true value), and a window of per-second
 * histograms for "P99 over the last N seconds" and the request rate. Every
 * function is thread-safe (one mutex per histogram or window). */
#ifndef SHOAL_SERVE_HISTO_H
#define SHOAL_SERVE_HISTO_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SHOAL__HISTO_SUB 16                   /* buckets per power of two */
#define SHOAL__HISTO_BUCKETS (SHOAL__HISTO_SUB * 32) /* 1 us .. 2^32 us (71 min) */

typedef struct shoal__histo {
  uint64_t bucket[SHOAL__HISTO_BUCKETS];
  uint64_t n;
  double sum_s, max_s;
} shoal__histo_t;

void   shoal__histo_add(shoal__histo_t *h, double seconds);
void   shoal__histo_merge(shoal__histo_t *into, const shoal__histo_t *h);
/* The q-quantile (0..1) in seconds (the geometric middle of its bucket; 0 when empty). */
double shoal__histo_quantile(const shoal__histo_t *h, double q);
/* Prometheus histogram lines NAME_bucket{le="..."}, NAME_sum, NAME_count at fixed boundaries (1 ms .. 10 s). */
void   shoal__histo_prometheus(const shoal__histo_t *h, const char *name, const char *help, FILE *out);

#define SHOAL__WINDOW_SLOTS 64

/* Latencies of the last SHOAL__WINDOW_SLOTS seconds, one histogram per second of the monotonic clock,
 * plus the histogram of everything since creation. */
typedef struct shoal__latwin {
  pthread_mutex_t mu;
  shoal__histo_t total;
  shoal__histo_t slot[SHOAL__WINDOW_SLOTS];
  int64_t slot_sec[SHOAL__WINDOW_SLOTS]; /* which second each slot holds (-1: none) */
} shoal__latwin_t;

void shoal__latwin_init(shoal__latwin_t *w);
void shoal__latwin_destroy(shoal__latwin_t *w);
void shoal__latwin_add(shoal__latwin_t *w, double now_s, double latency_s);
/* Merge the slots of the seconds in (now - window_s, now] into *out (window_s <= SHOAL__WINDOW_SLOTS - 1;
 * the current, still filling second counts). rate: completions per second over the window. */
void shoal__latwin_window(shoal__latwin_t *w, double now_s, int window_s, shoal__histo_t *out, double *rate);
/* A copy of the total since creation. */
void shoal__latwin_total(shoal__latwin_t *w, shoal__histo_t *out);

#endif
