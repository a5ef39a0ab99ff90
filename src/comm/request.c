/* Non-blocking collectives (include/shoal/request.h): one progress thread per
 * world runs the queued operations in issue order by calling the blocking
 * collectives, so a request is the blocking call made at issue time, moved
 * off the caller's thread. Blocking calls from other threads wait for the
 * queue to drain (shoal__async_quiesce, which shoal__op_begin calls through
 * the world's hook). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/async.h"
#include "comm/comm_impl.h"
#include "core/error.h"
#include "core/log.h"
#include "shoal/request.h"

typedef enum { RQ_ALLREDUCE, RQ_BROADCAST, RQ_REDUCE, RQ_REDUCE_SCATTER, RQ_ALLGATHER, RQ_BARRIER } rq_kind_t;
static const char *const rq_names[] = {"iallreduce", "ibroadcast", "ireduce", "ireduce_scatter", "iallgather",
                                       "ibarrier"};

enum { RQ_QUEUED = 0, RQ_RUNNING = 1, RQ_DONE = 2 };

struct shoal_request {
  struct shoal_request *next; /* queue link */
  shoal_comm_t *c;
  rq_kind_t kind;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  shoal_dtype_t dtype;
  shoal_redop_t op;
  int root;
  int state;    /* RQ_*; under the engine's mutex */
  int detached; /* shoal_request_free'd while pending: the engine frees it */
  int status;
  char msg[1024];
};

typedef struct shoal__async {
  pthread_mutex_t mu;
  pthread_cond_t work; /* queue non-empty or stop */
  pthread_cond_t done; /* a request completed */
  pthread_t thread;
  shoal__world_t *w;
  int stop;
  int pending; /* queued + running */
  shoal_request_t *head, *tail;
} shoal__async_t;

static int run_one(shoal_request_t *r) {
  shoal_comm_t *c = r->c;
  switch (r->kind) {
  case RQ_ALLREDUCE: return shoal_allreduce(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op);
  case RQ_BROADCAST: return shoal_broadcast(c, r->recvbuf, r->count, r->dtype, r->root);
  case RQ_REDUCE: return shoal_reduce(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op, r->root);
  case RQ_REDUCE_SCATTER: return shoal_reduce_scatter(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op);
  case RQ_ALLGATHER: return shoal_allgather(c, r->sendbuf, r->recvbuf, r->count, r->dtype);
  case RQ_BARRIER: return shoal_barrier(c);
  }
  return shoal__seterr(SHOAL_ERR_INTERNAL, "request: unknown kind %d", (int)r->kind);
}

static void *engine_main(void *arg) {
  shoal__async_t *a = arg;
  atomic_store(&a->w->async_tag, shoal__thread_tag());
  pthread_mutex_lock(&a->mu);
  for (;;) {
    while (!a->stop && !a->head) pthread_cond_wait(&a->work, &a->mu);
    if (!a->head) break; /* stop requested and nothing left */
    shoal_request_t *r = a->head;
    a->head = r->next;
    if (!a->head) a->tail = NULL;
    r->state = RQ_RUNNING;
    pthread_mutex_unlock(&a->mu);

    shoal__clearerr();
    int rc = run_one(r);
    char msg[sizeof r->msg];
    msg[0] = 0;
    if (rc) {
      snprintf(msg, sizeof msg, "%s", shoal_last_error()[0] ? shoal_last_error() : shoal_comm_errmsg(r->c));
      SHOAL_DEBUG("COLL", "%s request failed: %s", rq_names[r->kind], msg);
    }

    pthread_mutex_lock(&a->mu);
    r->status = rc;
    memcpy(r->msg, msg, sizeof msg);
    r->state = RQ_DONE;
    a->pending--;
    if (r->detached) free(r);
    pthread_cond_broadcast(&a->done);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

/* The world's engine, started on first use. */
static int engine_get(shoal__world_t *w, shoal__async_t **out) {
  if (w->async) {
    *out = w->async;
    return 0;
  }
  shoal__async_t *a = calloc(1, sizeof *a);
  if (!a) return shoal__seterr(SHOAL_ERR_NOMEM, "request: no memory for the progress engine");
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->work, NULL);
  pthread_cond_init(&a->done, NULL);
  a->w = w;
  /* signals go to the application's threads, not to the progress thread */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&a->thread, NULL, engine_main, a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->work);
    pthread_cond_destroy(&a->done);
    free(a);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "request: cannot start the progress thread: %s", strerror(e));
  }
  w->async = a;
  w->async_quiesce = shoal__async_quiesce;
  *out = a;
  return 0;
}

void shoal__async_quiesce(shoal__world_t *w) {
  shoal__async_t *a = w->async;
  if (!a || pthread_equal(pthread_self(), a->thread)) return;
  /* Bounded: every queued operation has its own deadline (SHOAL_TIMEOUT) once it runs. */
  pthread_mutex_lock(&a->mu);
  while (a->pending > 0) pthread_cond_wait(&a->done, &a->mu);
  pthread_mutex_unlock(&a->mu);
}

void shoal__async_stop(shoal__world_t *w) {
  shoal__async_t *a = w->async;
  if (!a) return;
  shoal__async_quiesce(w);
  pthread_mutex_lock(&a->mu);
  a->stop = 1;
  pthread_cond_broadcast(&a->work);
  pthread_mutex_unlock(&a->mu);
  pthread_join(a->thread, NULL);
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->work);
  pthread_cond_destroy(&a->done);
  free(a);
  w->async = NULL;
  w->async_quiesce = NULL;
  atomic_store(&w->async_tag, 0);
}

static int issue(shoal_comm_t *c, rq_kind_t kind, const void *sendbuf, void *recvbuf, size_t count,
                 shoal_dtype_t dtype, shoal_redop_t op, int root, shoal_request_t **req) {
  const char *what = rq_names[kind];
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "%s: communicator is NULL", what);
  if (!req) return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: request pointer is NULL", what));
  /* An argument error aborts the communicator, as in the blocking calls: the
   * other ranks then fail naming this one instead of waiting for a call this
   * rank never makes. */
  if (kind != RQ_BARRIER) {
    if (shoal_dtype_size(dtype) == 0)
      return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: invalid dtype %d", what, (int)dtype));
    if ((const void *)recvbuf == SHOAL_IN_PLACE)
      return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: SHOAL_IN_PLACE is for the send buffer, not "
                                                 "the receive buffer", what));
    if (count > 0 && !recvbuf && kind != RQ_REDUCE)
      return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: buffer is NULL with count %zu", what, count));
  }
  if ((kind == RQ_ALLREDUCE || kind == RQ_REDUCE || kind == RQ_REDUCE_SCATTER) && (unsigned)op >= SHOAL_REDOP__COUNT)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: invalid reduction %d", what, (int)op));
  if ((kind == RQ_BROADCAST || kind == RQ_REDUCE) && (root < 0 || root >= c->size))
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: root %d out of range (communicator of %d ranks)",
                                               what, root, c->size));
  if (c->aborted || c->w->aborted)
    return shoal__seterr(SHOAL_ERR_ABORTED, "%s: rank %d: communicator aborted after an earlier error: %s", what,
                         c->rank, c->errmsg[0] ? c->errmsg : c->w->abort_msg);
  shoal_request_t *r = calloc(1, sizeof *r);
  if (!r) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: no memory for the request", what);
  shoal__async_t *a;
  int rc = engine_get(c->w, &a);
  if (rc) {
    free(r);
    return rc;
  }
  *r = (shoal_request_t){.c = c, .kind = kind, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                         .dtype = dtype, .op = op, .root = root, .state = RQ_QUEUED};
  pthread_mutex_lock(&a->mu);
  if (a->tail)
    a->tail->next = r;
  else
    a->head = r;
  a->tail = r;
  a->pending++;
  pthread_cond_signal(&a->work);
  pthread_mutex_unlock(&a->mu);
  *req = r;
  return 0;
}

int shoal_iallreduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                     shoal_redop_t op, shoal_request_t **req) {
  return issue(c, RQ_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1, req);
}

int shoal_ibroadcast(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int root, shoal_request_t **req) {
  return issue(c, RQ_BROADCAST, NULL, buf, count, dtype, SHOAL_SUM, root, req);
}

int shoal_ireduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                  shoal_redop_t op, int root, shoal_request_t **req) {
  return issue(c, RQ_REDUCE, sendbuf, recvbuf, count, dtype, op, root, req);
}

int shoal_ireduce_scatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                          shoal_redop_t op, shoal_request_t **req) {
  return issue(c, RQ_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, -1, req);
}

int shoal_iallgather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype,
                     shoal_request_t **req) {
  return issue(c, RQ_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, SHOAL_SUM, -1, req);
}

int shoal_ibarrier(shoal_comm_t *c, shoal_request_t **req) {
  return issue(c, RQ_BARRIER, NULL, NULL, 0, SHOAL_UINT8, SHOAL_SUM, -1, req);
}

/* Complete: hand the status and message to the caller's thread, free. */
static int finish(shoal_request_t **req) {
  shoal_request_t *r = *req;
  int rc = r->status;
  if (rc) shoal__seterr(rc, "%s", r->msg);
  free(r);
  *req = NULL;
  return rc;
}

int shoal_test(shoal_request_t **req, int *done) {
  if (!req || !*req || !done) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_test: NULL request or output");
  shoal__async_t *a = (*req)->c->w->async;
  pthread_mutex_lock(&a->mu);
  int st = (*req)->state;
  pthread_mutex_unlock(&a->mu);
  if (st != RQ_DONE) {
    *done = 0;
    return 0;
  }
  *done = 1;
  return finish(req);
}

int shoal_wait(shoal_request_t **req) {
  if (!req || !*req) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_wait: NULL request");
  shoal__async_t *a = (*req)->c->w->async;
  pthread_mutex_lock(&a->mu);
  while ((*req)->state != RQ_DONE) pthread_cond_wait(&a->done, &a->mu);
  pthread_mutex_unlock(&a->mu);
  return finish(req);
}

int shoal_waitall(int n, shoal_request_t **reqs) {
  if (n < 0 || (n > 0 && !reqs)) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_waitall: %d requests, array NULL", n);
  int first = 0;
  char msg[1024] = "";
  for (int i = 0; i < n; i++) {
    if (!reqs[i]) continue;
    int rc = shoal_wait(&reqs[i]);
    if (rc && !first) {
      first = rc;
      snprintf(msg, sizeof msg, "%s", shoal_last_error());
    }
  }
  if (first) shoal__seterr(first, "%s", msg);
  return first;
}

void shoal_request_free(shoal_request_t *r) {
  if (!r) return;
  shoal__async_t *a = r->c->w->async;
  pthread_mutex_lock(&a->mu);
  int st = r->state;
  if (st != RQ_DONE) r->detached = 1;
  pthread_mutex_unlock(&a->mu);
  if (st == RQ_DONE) free(r);
}

int shoal_comm_pending(const shoal_comm_t *c) {
  if (!c || !c->w->async) return 0;
  shoal__async_t *a = c->w->async;
  pthread_mutex_lock(&a->mu);
  int n = a->pending;
  pthread_mutex_unlock(&a->mu);
  return n;
}
