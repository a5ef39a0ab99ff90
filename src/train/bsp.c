/* BSP: gradients averaged every iteration with shoal_allreduce(AVG), fused
 * into buckets of whole layers. Backward visits layers last to first, so a
 * bucket is complete as soon as its lowest layer is done; with overlap a
 * communication thread allreduces it while the main thread runs the backward
 * of the earlier layers. Only the communication thread touches the
 * communicator during an iteration (comm.h: one thread at a time); the
 * mutex hand-off orders its use against the main thread's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "train/sync.h"

#define MAX_BUCKETS 8

struct shoal__bsp {
  shoal_comm_t *comm;
  float *grads;
  int overlap;
  int nbuckets;
  struct {
    size_t off, len;
  } bucket[MAX_BUCKETS];
  int completes_at[8]; /* layer -> bucket completed when that layer is done, or -1 */
  pthread_t thread;
  int thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int posted, done, stop;
  int err;
  char errmsg[512];
};

static int allreduce_bucket(shoal__bsp_t *b, int i, char *errmsg, size_t cap) {
  int rc = shoal_allreduce(b->comm, SHOAL_IN_PLACE, b->grads + b->bucket[i].off, b->bucket[i].len, SHOAL_FLOAT32,
                           SHOAL_AVG);
  if (rc) {
    const char *m = shoal_comm_errmsg(b->comm);
    snprintf(errmsg, cap, "bsp: allreduce of bucket %d (%zu floats): %s", i, b->bucket[i].len,
             m && *m ? m : shoal_last_error());
  }
  return rc;
}

static void *comm_thread(void *arg) {
  shoal__bsp_t *b = arg;
  char msg[512];
  pthread_mutex_lock(&b->mu);
  for (;;) {
    while (!b->stop && b->done == b->posted) pthread_cond_wait(&b->cv, &b->mu);
    if (b->stop) break;
    int i = b->done;
    int skip = b->err != 0;
    pthread_mutex_unlock(&b->mu);
    int rc = skip ? 0 : allreduce_bucket(b, i, msg, sizeof msg);
    pthread_mutex_lock(&b->mu);
    if (rc && !b->err) {
      b->err = rc;
      memcpy(b->errmsg, msg, sizeof msg);
    }
    b->done++;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

int shoal__bsp_create(shoal_comm_t *comm, shoal_model_t *m, size_t bucket_bytes, int overlap, shoal__bsp_t **out) {
  shoal__bsp_t *b = calloc(1, sizeof *b);
  if (!b) return shoal__seterr(SHOAL_ERR_NOMEM, "bsp: out of memory");
  b->comm = comm;
  b->grads = m->grads;
  b->overlap = overlap;
  for (int l = 0; l < 8; l++) b->completes_at[l] = -1;
  size_t acc = 0;
  int top = m->nlayers - 1; /* highest layer of the open bucket */
  for (int l = m->nlayers - 1; l >= 0; l--) {
    acc += m->layers[l].nparam * sizeof(float);
    if (acc >= bucket_bytes || l == 0 || bucket_bytes == 0) {
      int i = b->nbuckets++;
      b->bucket[i].off = m->layers[l].w_off;
      b->bucket[i].len = m->layers[top].w_off + m->layers[top].nparam - m->layers[l].w_off;
      b->completes_at[l] = i;
      acc = 0;
      top = l - 1;
    }
  }
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  if (overlap && comm) {
    if (pthread_create(&b->thread, NULL, comm_thread, b)) {
      pthread_mutex_destroy(&b->mu);
      pthread_cond_destroy(&b->cv);
      free(b);
      return shoal__seterr(SHOAL_ERR_SYSTEM, "bsp: cannot start the communication thread");
    }
    b->thread_started = 1;
  }
  *out = b;
  return 0;
}

void shoal__bsp_destroy(shoal__bsp_t *b) {
  if (!b) return;
  if (b->thread_started) {
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
  }
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b);
}

int shoal__bsp_nbuckets(const shoal__bsp_t *b) { return b->nbuckets; }

void shoal__bsp_layer_ready(int layer, void *arg) {
  shoal__bsp_t *b = arg;
  if (!b->thread_started || b->completes_at[layer] < 0) return;
  pthread_mutex_lock(&b->mu);
  b->posted++;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

int shoal__bsp_finish(shoal__bsp_t *b, double *wait_s) {
  double t0 = shoal__now_s();
  int rc = 0;
  if (!b->comm) {
    /* single process: nothing to average */
  } else if (!b->thread_started) {
    char msg[512];
    for (int i = 0; i < b->nbuckets && !rc; i++)
      if ((rc = allreduce_bucket(b, i, msg, sizeof msg))) shoal__seterr(rc, "%s", msg);
  } else {
    pthread_mutex_lock(&b->mu);
    while (b->done < b->posted) pthread_cond_wait(&b->cv, &b->mu);
    if (b->posted != b->nbuckets && !b->err) {
      b->err = SHOAL_ERR_INTERNAL;
      snprintf(b->errmsg, sizeof b->errmsg, "bsp: %d of %d buckets posted", b->posted, b->nbuckets);
    }
    b->posted = b->done = 0;
    rc = b->err;
    if (rc) shoal__seterr(rc, "%s", b->errmsg);
    pthread_mutex_unlock(&b->mu);
  }
  if (wait_s) *wait_s = shoal__now_s() - t0;
  return rc;
}
