/* The batching thread (batcher.h). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "serve/batcher.h"
#include "train/model.h"

typedef struct job {
  void *tag;
  float *x;
  int rows;
  double t_in;
  struct job *next;
} job_t;

struct shoal__batcher {
  shoal_model_t *m;
  int max_batch, max_queue, features, nclass;
  double timeout_s;
  shoal__batch_done_fn fn;
  void *arg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job_t *head, *tail;
  int queued, queued_rows, stopping;
  pthread_t thread;
  float *xb, *scores;
  uint64_t batches, rows;
  double *svc_s;
  uint64_t *svc_n;
};

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, double until_s) {
  double left = until_s - shoal__now_s();
  if (left <= 0) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long ns = (long long)ts.tv_nsec + (long long)(left * 1e9);
  ts.tv_sec += (time_t)(ns / 1000000000LL);
  ts.tv_nsec = (long)(ns % 1000000000LL);
  pthread_cond_timedwait(cv, mu, &ts);
}

/* Softmax of each row of the model's logits into b->scores. */
static void softmax_rows(shoal__batcher_t *b, const float *logits, int rows) {
  int C = b->nclass;
  for (int i = 0; i < rows; i++) {
    const float *z = logits + (size_t)i * C;
    float *p = b->scores + (size_t)i * C, zmax = z[0];
    for (int j = 1; j < C; j++) zmax = z[j] > zmax ? z[j] : zmax;
    double sum = 0;
    for (int j = 0; j < C; j++) sum += exp((double)(z[j] - zmax));
    for (int j = 0; j < C; j++) p[j] = (float)(exp((double)(z[j] - zmax)) / sum);
  }
}

/* One forward pass over rows stacked in b->xb: probabilities in b->scores. */
static void forward(shoal__batcher_t *b, int rows) {
  double t0 = shoal__now_s();
  shoal__model_forward(b->m, b->xb, rows);
  softmax_rows(b, b->m->layers[b->m->nlayers - 1].out, rows);
  double dt = shoal__now_s() - t0;
  pthread_mutex_lock(&b->mu);
  b->batches++;
  b->rows += (uint64_t)rows;
  b->svc_s[rows] += dt;
  b->svc_n[rows]++;
  pthread_mutex_unlock(&b->mu);
}

/* Run the jobs taken (their rows fit in max_batch, or one job larger than it, run in slices). */
static void run_jobs(shoal__batcher_t *b, job_t *jobs) {
  if (jobs && !jobs->next && jobs->rows > b->max_batch) { /* one large request: slices of max_batch rows */
    float *all = malloc((size_t)jobs->rows * b->nclass * sizeof(float));
    for (int r0 = 0; all && r0 < jobs->rows; r0 += b->max_batch) {
      int n = jobs->rows - r0 < b->max_batch ? jobs->rows - r0 : b->max_batch;
      memcpy(b->xb, jobs->x + (size_t)r0 * b->features, (size_t)n * b->features * sizeof(float));
      forward(b, n);
      memcpy(all + (size_t)r0 * b->nclass, b->scores, (size_t)n * b->nclass * sizeof(float));
    }
    b->fn(b->arg, jobs->tag, all, all ? jobs->rows : 0, b->nclass);
    free(all);
  } else {
    int rows = 0;
    for (job_t *j = jobs; j; j = j->next) {
      memcpy(b->xb + (size_t)rows * b->features, j->x, (size_t)j->rows * b->features * sizeof(float));
      rows += j->rows;
    }
    if (rows) forward(b, rows);
    rows = 0;
    for (job_t *j = jobs; j; j = j->next) {
      b->fn(b->arg, j->tag, b->scores + (size_t)rows * b->nclass, j->rows, b->nclass);
      rows += j->rows;
    }
  }
  while (jobs) {
    job_t *n = jobs->next;
    free(jobs->x);
    free(jobs);
    jobs = n;
  }
}

static void *batcher_main(void *arg) {
  shoal__batcher_t *b = arg;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    while (!b->head && !b->stopping) pthread_cond_wait(&b->cv, &b->mu);
    if (!b->head) break; /* stopping with nothing left */
    /* wait for company until the batch is full or the oldest request has waited timeout_s */
    double until = b->head->t_in + b->timeout_s;
    while (b->queued_rows < b->max_batch && !b->stopping && shoal__now_s() < until) timed_wait(&b->cv, &b->mu, until);
    job_t *take = b->head, *last = b->head;
    int rows = take->rows;
    while (last->next && rows + last->next->rows <= b->max_batch) {
      last = last->next;
      rows += last->rows;
    }
    b->head = last->next;
    if (!b->head) b->tail = NULL;
    last->next = NULL;
    for (job_t *j = take; j; j = j->next) {
      b->queued--;
      b->queued_rows -= j->rows;
    }
    pthread_mutex_unlock(&b->mu);
    run_jobs(b, take);
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

int shoal__batcher_start(shoal_model_t *m, int max_batch, double timeout_s, int max_queue, shoal__batch_done_fn fn,
                         void *arg, shoal__batcher_t **out) {
  if (!m || !fn || !out || max_batch < 1 || max_batch > m->max_batch || max_queue < 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "batcher: bad arguments");
  shoal__batcher_t *b = calloc(1, sizeof *b);
  if (!b) return shoal__seterr(SHOAL_ERR_NOMEM, "batcher: out of memory");
  b->m = m;
  b->max_batch = max_batch;
  b->max_queue = max_queue;
  b->timeout_s = timeout_s;
  b->fn = fn;
  b->arg = arg;
  b->features = m->layers[0].in_dim;
  b->nclass = m->layers[m->nlayers - 1].out_dim;
  b->xb = malloc((size_t)max_batch * b->features * sizeof(float));
  b->scores = malloc((size_t)max_batch * b->nclass * sizeof(float));
  b->svc_s = calloc((size_t)max_batch + 1, sizeof(double));
  b->svc_n = calloc((size_t)max_batch + 1, sizeof(uint64_t));
  pthread_mutex_init(&b->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&b->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (!b->xb || !b->scores || !b->svc_s || !b->svc_n || pthread_create(&b->thread, NULL, batcher_main, b)) {
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b->xb), free(b->scores), free(b->svc_s), free(b->svc_n), free(b);
    return shoal__seterr(SHOAL_ERR_NOMEM, "batcher: out of memory or threads");
  }
  *out = b;
  return 0;
}

int shoal__batcher_submit(shoal__batcher_t *b, void *tag, float *x, int rows) {
  job_t *j = malloc(sizeof *j);
  pthread_mutex_lock(&b->mu);
  if (!j || b->stopping || b->queued >= b->max_queue) {
    pthread_mutex_unlock(&b->mu);
    free(j);
    free(x);
    return SHOAL_ERR_UNSUPPORTED;
  }
  *j = (job_t){tag, x, rows, shoal__now_s(), NULL};
  if (b->tail) b->tail->next = j;
  else b->head = j;
  b->tail = j;
  b->queued++;
  b->queued_rows += rows;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
  return 0;
}

void shoal__batcher_counts(shoal__batcher_t *b, shoal__batcher_counts_t *out, double *svc_s, uint64_t *svc_n) {
  pthread_mutex_lock(&b->mu);
  out->batches = b->batches;
  out->rows = b->rows;
  out->queued = b->queued;
  if (svc_s) memcpy(svc_s, b->svc_s, ((size_t)b->max_batch + 1) * sizeof(double));
  if (svc_n) memcpy(svc_n, b->svc_n, ((size_t)b->max_batch + 1) * sizeof(uint64_t));
  pthread_mutex_unlock(&b->mu);
}

void shoal__batcher_stop(shoal__batcher_t *b) {
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->stopping = 1;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  pthread_join(b->thread, NULL);
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
  shoal_model_destroy(b->m);
  free(b->xb), free(b->scores), free(b->svc_s), free(b->svc_n), free(b);
}
