/* Log-spaced latency histogram and its per-second window (histo.h). */
#include <math.h>
#include <string.h>

#include "serve/histo.h"

static int bucket_of(double seconds) {
  double us = seconds * 1e6;
  if (!(us >= 1.0)) return 0; /* also NaN */
  int b = (int)(log2(us) * SHOAL__HISTO_SUB);
  return b >= SHOAL__HISTO_BUCKETS ? SHOAL__HISTO_BUCKETS - 1 : b;
}

/* The geometric middle of bucket b, in seconds. */
static double bucket_mid(int b) { return exp2((b + 0.5) / SHOAL__HISTO_SUB) * 1e-6; }

void shoal__histo_add(shoal__histo_t *h, double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  h->bucket[bucket_of(seconds)]++;
  h->n++;
  h->sum_s += seconds;
  if (seconds > h->max_s) h->max_s = seconds;
}

void shoal__histo_merge(shoal__histo_t *into, const shoal__histo_t *h) {
  for (int b = 0; b < SHOAL__HISTO_BUCKETS; b++) into->bucket[b] += h->bucket[b];
  into->n += h->n;
  into->sum_s += h->sum_s;
  if (h->max_s > into->max_s) into->max_s = h->max_s;
}

double shoal__histo_quantile(const shoal__histo_t *h, double q) {
  if (!h->n) return 0;
  if (q <= 0) q = 0;
  if (q >= 1) return h->max_s;
  /* the smallest bucket whose cumulative count reaches ceil(q n) */
  uint64_t want = (uint64_t)ceil(q * (double)h->n), acc = 0;
  if (want < 1) want = 1;
  for (int b = 0; b < SHOAL__HISTO_BUCKETS; b++) {
    acc += h->bucket[b];
    if (acc >= want) {
      double v = bucket_mid(b);
      return v > h->max_s ? h->max_s : v;
    }
  }
  return h->max_s;
}

void shoal__histo_prometheus(const shoal__histo_t *h, const char *name, const char *help, FILE *out) {
  static const double le[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};
  fprintf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  /* a bucket's values are below its upper edge: count it under the first boundary at or above that edge */
  uint64_t acc = 0;
  int b = 0;
  for (size_t i = 0; i < sizeof le / sizeof le[0]; i++) {
    for (; b < SHOAL__HISTO_BUCKETS && exp2((double)(b + 1) / SHOAL__HISTO_SUB) * 1e-6 <= le[i] * (1 + 1e-9); b++)
      acc += h->bucket[b];
    fprintf(out, "%s_bucket{le=\"%g\"} %llu\n", name, le[i], (unsigned long long)acc);
  }
  fprintf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)h->n, name,
          h->sum_s, name, (unsigned long long)h->n);
}

void shoal__latwin_init(shoal__latwin_t *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  for (int i = 0; i < SHOAL__WINDOW_SLOTS; i++) w->slot_sec[i] = -1;
}

void shoal__latwin_destroy(shoal__latwin_t *w) { pthread_mutex_destroy(&w->mu); }

void shoal__latwin_add(shoal__latwin_t *w, double now_s, double latency_s) {
  int64_t sec = (int64_t)floor(now_s);
  int i = (int)(sec % SHOAL__WINDOW_SLOTS);
  pthread_mutex_lock(&w->mu);
  if (w->slot_sec[i] != sec) { /* a slot reused for a newer second */
    memset(&w->slot[i], 0, sizeof w->slot[i]);
    w->slot_sec[i] = sec;
  }
  shoal__histo_add(&w->slot[i], latency_s);
  shoal__histo_add(&w->total, latency_s);
  pthread_mutex_unlock(&w->mu);
}

void shoal__latwin_window(shoal__latwin_t *w, double now_s, int window_s, shoal__histo_t *out, double *rate) {
  if (window_s < 1) window_s = 1;
  if (window_s > SHOAL__WINDOW_SLOTS - 1) window_s = SHOAL__WINDOW_SLOTS - 1;
  int64_t sec = (int64_t)floor(now_s);
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&w->mu);
  for (int64_t s = sec - window_s + 1; s <= sec; s++) {
    int i = (int)(((s % SHOAL__WINDOW_SLOTS) + SHOAL__WINDOW_SLOTS) % SHOAL__WINDOW_SLOTS);
    if (s >= 0 && w->slot_sec[i] == s) shoal__histo_merge(out, &w->slot[i]);
  }
  pthread_mutex_unlock(&w->mu);
  /* the current second is partly over: the rate is over the time the window really covers */
  double covered = (window_s - 1) + (now_s - floor(now_s));
  if (rate) *rate = covered > 0 ? (double)out->n / covered : 0;
}

void shoal__latwin_total(shoal__latwin_t *w, shoal__histo_t *out) {
  pthread_mutex_lock(&w->mu);
  *out = w->total;
  pthread_mutex_unlock(&w->mu);
}
