/* The open-loop load generator: requests leave at the times of an arrival
 * process (reqtimes.h) whether or not earlier ones were answered; each is a
 * real Open Inference Protocol request carrying Fashion-MNIST test images,
 * and each answer is checked against the images' labels. Latency is measured
 * from the scheduled arrival (no coordinated omission). */
#ifndef SHOAL_SERVE_LOADGEN_H
#define SHOAL_SERVE_LOADGEN_H

#include <stddef.h>
#include <stdint.h>

#include "core/reqtimes.h"
#include "serve/histo.h"

typedef struct shoal__loadgen_opts {
  const char *url;           /* http://HOST:PORT of a replica or the router */
  const char *model;         /* the model's name in the path */
  const shoal__reqtimes_t *arrivals;
  int rows;                  /* images per request */
  double timeout_s;          /* a request unanswered after this is a failure */
  int max_inflight;          /* arrivals while this many are unanswered are dropped (counted as failures) */
  double slo_s;              /* latency SLO: a window meets it when its P99 (failures count as infinite) is under */
  double window_s;           /* windows of scheduled arrival time for the timeline and the SLO attainment */
  const char *data_dir;      /* IDX test set (t10k) of the images; NULL: Fashion-MNIST's */
  const char *timeline_csv;  /* one row per window; NULL: none */
  const char *requests_csv;  /* one row per request; NULL: none */
  int progress;              /* a line per window on stdout */
} shoal__loadgen_opts_t;

void shoal__loadgen_opts_init(shoal__loadgen_opts_t *o);

typedef struct shoal__loadgen_result {
  size_t requests, ok, failed, dropped, rows_correct, rows_checked;
  uint64_t by_status[6];   /* [0] no HTTP answer (refused, reset, timeout); [k] kxx */
  shoal__histo_t latency;  /* of the answered (200) requests, from their scheduled arrival */
  double duration_s;       /* first arrival to the last answer */
  double max_lag_s;        /* how late a request left after its scheduled time, at worst */
  int windows, windows_met;
} shoal__loadgen_result_t;

int shoal__loadgen_run(const shoal__loadgen_opts_t *o, shoal__loadgen_result_t *res);

#endif
