/* Dynamic batching: requests wait in a bounded queue; one thread takes as
 * many as fit in max_batch rows, waiting at most timeout_s after the oldest
 * arrived, runs one forward pass of the model over them and hands each its
 * class probabilities. The thread owns the model (its activation buffers). */
#ifndef SHOAL_SERVE_BATCHER_H
#define SHOAL_SERVE_BATCHER_H

#include <stdint.h>

#include "shoal/train.h"

typedef struct shoal__batcher shoal__batcher_t;

/* scores: rows x nclass probabilities (valid during the call). */
typedef void (*shoal__batch_done_fn)(void *arg, void *tag, const float *scores, int rows, int nclass);

typedef struct shoal__batcher_counts {
  uint64_t batches, rows;
  int queued;                       /* requests waiting now */
} shoal__batcher_counts_t;

/* Takes the model. */
int  shoal__batcher_start(shoal_model_t *m, int max_batch, double timeout_s, int max_queue, shoal__batch_done_fn fn,
                          void *arg, shoal__batcher_t **out);
/* Queue rows x features inputs (x is taken, malloc'ed). 0, or SHOAL_ERR_UNSUPPORTED when the queue is full
 * or stopping (x is freed then). */
int  shoal__batcher_submit(shoal__batcher_t *b, void *tag, float *x, int rows);
/* Copies counters; service arrays copied into svc_s/svc_n (max_batch + 1 entries each, may be NULL). */
void shoal__batcher_counts(shoal__batcher_t *b, shoal__batcher_counts_t *out, double *svc_s, uint64_t *svc_n);
/* Finish what is queued, stop the thread, free the model. NULL: nothing. */
void shoal__batcher_stop(shoal__batcher_t *b);

#endif
