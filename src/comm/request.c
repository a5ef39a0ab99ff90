/* Non-blocking collectives (include/shoal/request.h): one progress thread per
 * world runs the queued operations in issue order by calling the blocking
 * collectives, so a request is the blocking call made at issue time, moved
 * off the caller's thread. Blocking calls from other threads wait for the
 * queue to drain (shoal__async_quiesce, which shoal__op_begin calls through
 * the world's hook). A collective request that shoal_wait finds still queued
 * at the head, with nothing running, is run by the waiting thread itself (the
 * engine's place taken for it): the blocking call's path, without the two
 * thread wake-ups (engine start, waiter) a waited request otherwise costs.
 * The engine leaves a collective just issued to such a waiter for a moment
 * (WAITER_GRACE_NS), and whoever ran a collective gives the place back as it
 * marks it complete. While every collective is waited for by its issuer (a
 * binding's blocking calls), the issue does not wake the engine at all: it
 * naps instead (NAP_NS), and takes a collective no waiter came for when it
 * wakes. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/async.h"
#include "comm/comm_impl.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "shoal/request.h"

typedef enum {
  RQ_ALLREDUCE, RQ_BROADCAST, RQ_REDUCE, RQ_REDUCE_SCATTER, RQ_ALLGATHER, RQ_BARRIER, RQ_GATHER, RQ_SCATTER,
  RQ_ALLTOALL, RQ_ALLTOALLV, RQ_SEND, RQ_RECV
} rq_kind_t;
static const char *const rq_names[] = {"iallreduce", "ibroadcast", "ireduce", "ireduce_scatter", "iallgather",
                                       "ibarrier",   "igather",    "iscatter", "ialltoall",      "ialltoallv",
                                       "isend",      "irecv"};

enum { RQ_QUEUED = 0, RQ_RUNNING = 1, RQ_DONE = 2 };

struct shoal_request {
  struct shoal_request *next; /* queue link; while a point-to-point group runs, its list */
  shoal_comm_t *c;
  rq_kind_t kind;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  shoal_dtype_t dtype;
  shoal_redop_t op;
  int root;     /* broadcast, reduce, gather, scatter; the peer of isend/irecv */
  int tag;      /* isend/irecv */
  size_t *v;    /* ialltoallv: sendcounts, sdispls, recvcounts, rdispls (4 x size), copied at issue */
  int state;    /* RQ_*; under the engine's mutex */
  int detached; /* shoal_request_free'd while pending: the engine frees it */
  int status;
  void (*notify)(void *arg); /* shoal_request_notify: called once the operation finished, outside the mutex */
  void *notify_arg;
  int finished; /* the operation finished: notify taken (under the mutex) */
  uint64_t issued_ns;
  shoal__op_t p2p_op;  /* isend/irecv: the operation begun when posted */
  shoal__req_t p2p;    /* ... and its request in the point-to-point engine */
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
  int busy;    /* a thread (the engine, or a waiter in its place) is running requests */
  uintptr_t engine_tag; /* the engine's shoal__thread_tag (0 until it started) */
  int waited;           /* collectives in a row run by their waiter (run_here); 0 once the engine ran one */
  int napping;          /* the engine sleeps at most NAP_NS: an issue need not wake it */
  uint64_t active_ns;   /* when a collective last completed */
  shoal_request_t *head, *tail;
} shoal__async_t;

/* How long the engine leaves a collective just issued at the head of the queue to a waiter. A binding's
 * blocking call (torch's dist.all_reduce: issue, then wait at once) reaches shoal_wait a few microseconds
 * after the issue and runs the request itself (run_here); an engine woken by the issue would otherwise take
 * the request first in about a third of the calls (it preempts the issuing thread on its core), and the
 * call then pays two thread wake-ups (engine start, waiter). A request nobody waits for starts this much
 * later. */
#define WAITER_GRACE_NS 20000u

/* Waking the engine at every issue costs each blocking call a futex wake and a thread switched in to
 * find the request taken by its waiter; with more ranks than cores the woken engine preempts a rank
 * running a collective. Once WAITED_RUN collectives
 * in a row ran on their waiters, the idle engine naps instead of sleeping (at most NAP_NS at a time,
 * for at most NAP_IDLE_NS after the last completion) and an issue leaves it asleep: a collective
 * nobody waits for then starts within NAP_NS, and the engine, having run it, is woken again by every
 * issue until WAITED_RUN waited ones come in a row. DDP's buckets (never waited for at issue) keep the
 * wake; a buffer broadcast between them does not reach WAITED_RUN. */
#define WAITED_RUN 4
#define NAP_NS 2000000u
#define NAP_IDLE_NS 50000000u

/* Set on the thread that runs requests (the engine; a waiter while it runs one): its blocking calls are the
 * requests themselves, so they do not wait for the queue to drain. */
static _Thread_local int runs_requests;

static void request_free(shoal_request_t *r) {
  free(r->v);
  free(r);
}

static int run_one(shoal_request_t *r) {
  shoal_comm_t *c = r->c;
  size_t *v = r->v;
  int p = c->size;
  switch (r->kind) {
  case RQ_ALLREDUCE: return shoal_allreduce(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op);
  case RQ_BROADCAST: return shoal_broadcast(c, r->recvbuf, r->count, r->dtype, r->root);
  case RQ_REDUCE: return shoal_reduce(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op, r->root);
  case RQ_REDUCE_SCATTER: return shoal_reduce_scatter(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op);
  case RQ_ALLGATHER: return shoal_allgather(c, r->sendbuf, r->recvbuf, r->count, r->dtype);
  case RQ_BARRIER: return shoal_barrier(c);
  case RQ_GATHER: return shoal_gather(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->root);
  case RQ_SCATTER: return shoal_scatter(c, r->sendbuf, r->recvbuf, r->count, r->dtype, r->root);
  case RQ_ALLTOALL: return shoal_alltoall(c, r->sendbuf, r->recvbuf, r->count, r->dtype);
  case RQ_ALLTOALLV: return shoal_alltoallv(c, r->sendbuf, v, v + p, r->recvbuf, v + 2 * p, v + 3 * p, r->dtype);
  default: break;
  }
  return shoal__seterr(SHOAL_ERR_INTERNAL, "request: unknown kind %d", (int)r->kind);
}

static int is_p2p(const shoal_request_t *r) { return r && (r->kind == RQ_SEND || r->kind == RQ_RECV); }

static void give_back(shoal__async_t *a);

/* Record r's outcome and wake its waiters. Called without the mutex. r's notify function runs first (on
 * this thread, before r is marked complete), so that notifications come in completion order even though
 * the running thread's place is given back with the completion: `release`, the caller ran r alone (a
 * collective) and gives the engine's place back in the same critical section, so that a thread woken by
 * r's completion finds nothing running (a waiter that issues its next request at once runs it itself
 * instead of finding the place still held and waiting for the engine to take the request). */
static void complete(shoal__async_t *a, shoal_request_t *r, int rc, int release) {
  char msg[sizeof r->msg];
  msg[0] = 0;
  if (rc) {
    snprintf(msg, sizeof msg, "%s", shoal_last_error()[0] ? shoal_last_error() : shoal_comm_errmsg(r->c));
    SHOAL_DEBUG("COLL", "%s request failed: %s", rq_names[r->kind], msg);
  }
  pthread_mutex_lock(&a->mu);
  void (*fn)(void *) = r->notify, *arg = r->notify_arg;
  r->finished = 1; /* a function given from now on is called at once */
  pthread_mutex_unlock(&a->mu);
  if (fn) fn(arg);
  pthread_mutex_lock(&a->mu);
  r->status = rc;
  memcpy(r->msg, msg, sizeof msg);
  r->state = RQ_DONE;
  a->pending--;
  a->active_ns = shoal__now_ns();
  if (release) {
    give_back(a);
    if (a->head) pthread_cond_signal(&a->work); /* the engine takes the next */
  }
  if (r->detached) request_free(r);
  pthread_cond_broadcast(&a->done);
  pthread_mutex_unlock(&a->mu);
}

/* ---- point-to-point groups ----
 * An isend or irecv does not run alone: the point-to-point requests at the
 * head of the queue are posted together, and those issued while they are in
 * flight join them, so that a rank may post the sends and receives of an
 * exchange in any order (two ranks that each send first would otherwise both
 * wait for a receive, once the message is larger than what the transport
 * buffers). A collective queued behind them waits until the group is done. */

/* Begin r's operation and post it to the engine; 0, or r's failure (completed). */
static int p2p_post(shoal__async_t *a, shoal_request_t *r) {
  shoal_comm_t *c = r->c;
  r->p2p_op = (shoal__op_t){.opcode = SHOAL__OP_SEND, .dtype = (uint8_t)r->dtype, .tag = r->tag, .count = r->count};
  shoal__clearerr();
  int rc = shoal__op_begin(c, &r->p2p_op);
  size_t bytes = r->count * shoal_dtype_size(r->dtype);
  if (!rc) {
    rc = r->kind == RQ_SEND ? shoal__isend(c, &r->p2p_op, r->root, r->sendbuf, bytes, &r->p2p)
                            : shoal__irecv(c, &r->p2p_op, r->root, r->recvbuf, bytes, &r->p2p);
    if (rc) rc = shoal__op_end(c, &r->p2p_op, rc);
  }
  if (rc) complete(a, r, rc, 0);
  return rc;
}

/* The point-to-point requests at the head of the queue, marked running (under the mutex). */
static shoal_request_t *p2p_take(shoal__async_t *a) {
  shoal_request_t *first = NULL, **tail = &first;
  while (is_p2p(a->head)) {
    shoal_request_t *r = a->head;
    a->head = r->next;
    if (!a->head) a->tail = NULL;
    r->state = RQ_RUNNING;
    r->next = NULL;
    *tail = r;
    tail = &r->next;
  }
  return first;
}

/* Complete the posted requests of *run that finished, failed or passed their deadline; drop them from the list. */
static void p2p_reap(shoal__async_t *a, shoal_request_t **run) {
  uint64_t now = shoal__now_ns();
  for (shoal_request_t **pp = run; *pp;) {
    shoal_request_t *r = *pp;
    int st = r->p2p.state;
    if (st == 0 && now < r->p2p_op.deadline_ns) {
      pp = &r->next;
      continue;
    }
    *pp = r->next;
    shoal__clearerr();
    /* past its deadline: the engine's wait writes the timeout message (rank, peer, bytes done) */
    int rc = st == 1 ? 0 : st < 0 ? st : shoal__waitall(r->c, &r->p2p_op, &r->p2p, 1);
    complete(a, r, shoal__op_end(r->c, &r->p2p_op, rc), 0);
  }
}

/* Run point-to-point requests, starting with `first` (running, popped), until none is in flight and the
 * queue's head is not one. The first microseconds spin (requests of one exchange are issued back to back),
 * then the engine sleeps at most 1 ms at a time, the longest a request issued meanwhile waits to join. */
static void run_p2p(shoal__async_t *a, shoal_request_t *first) {
  shoal_request_t *run = NULL, **tail = &run;
  uint64_t spin_until = shoal__now_ns() + 50000;
  for (shoal_request_t *add = first; add || run;) {
    while (add) {
      shoal_request_t *r = add;
      add = r->next;
      r->next = NULL;
      if (p2p_post(a, r)) continue;
      *tail = r;
      tail = &r->next;
    }
    if (run) {
      int wait_ms = shoal__now_ns() < spin_until ? 0 : 1;
      if (!wait_ms) sched_yield();
      int prc = shoal__progress(run->c, &run->p2p_op, wait_ms);
      if (prc < 0) { /* a failure outside the requests (a peer's hang-up): they all fail with it */
        for (shoal_request_t *r; (r = run);) {
          run = r->next;
          complete(a, r, shoal__op_end(r->c, &r->p2p_op, prc), 0);
        }
      }
      p2p_reap(a, &run);
      tail = &run;
      while (*tail) tail = &(*tail)->next;
    }
    pthread_mutex_lock(&a->mu);
    add = p2p_take(a);
    pthread_mutex_unlock(&a->mu);
  }
}

/* Take the head of the queue to run it (under the mutex): the world's running thread is now the caller's. */
static shoal_request_t *take_head(shoal__async_t *a) {
  shoal_request_t *r = a->head;
  a->head = r->next;
  if (!a->head) a->tail = NULL;
  r->state = RQ_RUNNING;
  r->next = NULL;
  a->busy = 1;
  atomic_store(&a->w->async_tag, shoal__thread_tag());
  return r;
}

/* Under the mutex: nothing runs; the engine's tag is the running thread's again (the thread rule lets its
 * calls in: comm_impl.h). */
static void give_back(shoal__async_t *a) {
  a->busy = 0;
  atomic_store(&a->w->async_tag, a->engine_tag);
}

/* The idle engine's sleep (under the mutex): a nap while issuers wait for their collectives, else until
 * woken. */
static void engine_sleep(shoal__async_t *a) {
  uint64_t now = shoal__now_ns();
  if (a->waited < WAITED_RUN || now - a->active_ns > NAP_IDLE_NS) {
    a->napping = 0;
    pthread_cond_wait(&a->work, &a->mu);
    return;
  }
  a->napping = 1;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += NAP_NS;
  if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
  pthread_cond_timedwait(&a->work, &a->mu, &ts);
  a->napping = 0;
}

static void *engine_main(void *arg) {
  shoal__async_t *a = arg;
  runs_requests = 1;
  pthread_mutex_lock(&a->mu);
  a->engine_tag = shoal__thread_tag();
  if (!a->busy) atomic_store(&a->w->async_tag, a->engine_tag);
  for (;;) {
    /* a waiter running a request in the engine's place signals `work` when it is done */
    while (!a->stop && (!a->head || a->busy)) engine_sleep(a);
    if (!a->head || a->busy) break; /* stop requested (after the queue drained) */
    if (!a->stop && !is_p2p(a->head) && shoal__now_ns() - a->head->issued_ns < WAITER_GRACE_NS) {
      /* a collective issued moments ago: its waiter's, if one comes. Yield the core meanwhile (the
       * waiter may be queued behind this thread on it); no timer: a timed wait's wake-up would land in
       * the middle of the collective the waiter runs, preempting a rank */
      pthread_mutex_unlock(&a->mu);
      sched_yield();
      pthread_mutex_lock(&a->mu);
      continue;
    }
    shoal_request_t *r = take_head(a);
    if (!is_p2p(r)) a->waited = 0;
    pthread_mutex_unlock(&a->mu);

    if (is_p2p(r)) {
      run_p2p(a, r);
      pthread_mutex_lock(&a->mu);
      give_back(a);
    } else {
      shoal__clearerr();
      complete(a, r, run_one(r), 1);
      pthread_mutex_lock(&a->mu);
    }
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
  pthread_condattr_t monotonic;
  pthread_condattr_init(&monotonic);
  pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC); /* the engine's naps */
  pthread_cond_init(&a->work, &monotonic);
  pthread_condattr_destroy(&monotonic);
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
  if (!a || runs_requests || pthread_equal(pthread_self(), a->thread)) return;
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

/* Argument errors found at issue; the blocking call finds the rest when the request runs. */
static int issue_check(shoal_comm_t *c, const shoal_request_t *t) {
  const char *what = rq_names[t->kind];
  rq_kind_t k = t->kind;
  if (k == RQ_BARRIER) return 0;
  if (shoal_dtype_size(t->dtype) == 0) return shoal__seterr(SHOAL_ERR_INVALID, "%s: invalid dtype %d", what, (int)t->dtype);
  if ((const void *)t->recvbuf == SHOAL_IN_PLACE)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: SHOAL_IN_PLACE is for the send buffer, not the receive buffer", what);
  int recv_needed = k != RQ_REDUCE && k != RQ_GATHER && k != RQ_SEND && k != RQ_ALLTOALLV;
  if (t->count > 0 && !t->recvbuf && recv_needed)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: buffer is NULL with count %zu", what, t->count);
  if (k == RQ_SEND && t->count > 0 && (!t->sendbuf || t->sendbuf == SHOAL_IN_PLACE))
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: buffer is %s with count %zu", what,
                         t->sendbuf ? "the in-place marker" : "NULL", t->count);
  if ((k == RQ_ALLREDUCE || k == RQ_REDUCE || k == RQ_REDUCE_SCATTER) && (unsigned)t->op >= SHOAL_REDOP__COUNT)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: invalid reduction %d", what, (int)t->op);
  int rooted = k == RQ_BROADCAST || k == RQ_REDUCE || k == RQ_GATHER || k == RQ_SCATTER;
  if ((rooted || k == RQ_SEND || k == RQ_RECV) && (t->root < 0 || t->root >= c->size))
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: %s %d out of range (communicator of %d ranks)", what,
                         rooted ? "root" : "peer", t->root, c->size);
  return 0;
}

static int issue(shoal_comm_t *c, shoal_request_t t, shoal_request_t **req) {
  const char *what = rq_names[t.kind];
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "%s: communicator is NULL", what);
  if (!req) return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: request pointer is NULL", what));
  /* An argument error aborts the communicator, as in the blocking calls: the
   * other ranks then fail naming this one instead of waiting for a call this
   * rank never makes. */
  int rc = issue_check(c, &t);
  if (rc) return shoal__comm_reject(c, rc);
  if (c->aborted || c->w->aborted)
    return shoal__seterr(SHOAL_ERR_ABORTED, "%s: rank %d: communicator aborted after an earlier error: %s", what,
                         c->rank, c->errmsg[0] ? c->errmsg : c->w->abort_msg);
  shoal_request_t *r = calloc(1, sizeof *r);
  if (!r) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: no memory for the request", what);
  shoal__async_t *a;
  if ((rc = engine_get(c->w, &a))) {
    free(r);
    return rc;
  }
  *r = t;
  r->c = c;
  r->state = RQ_QUEUED;
  r->issued_ns = shoal__now_ns();
  pthread_mutex_lock(&a->mu);
  if (a->tail)
    a->tail->next = r;
  else
    a->head = r;
  a->tail = r;
  a->pending++;
  /* a napping engine is left asleep for a collective its issuer will wait for (see NAP_NS); it wakes
   * for anything queued behind another request or a point-to-point one */
  if (!a->napping || is_p2p(r) || a->head != r || a->busy) pthread_cond_signal(&a->work);
  pthread_mutex_unlock(&a->mu);
  *req = r;
  return 0;
}

int shoal_iallreduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                     shoal_redop_t op, shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                                    .dtype = dtype, .op = op, .root = -1}, req);
}

int shoal_ibroadcast(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int root, shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_BROADCAST, .recvbuf = buf, .count = count, .dtype = dtype,
                                    .root = root}, req);
}

int shoal_ireduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                  shoal_redop_t op, int root, shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                                    .dtype = dtype, .op = op, .root = root}, req);
}

int shoal_ireduce_scatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                          shoal_redop_t op, shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                                    .count = recvcount, .dtype = dtype, .op = op, .root = -1}, req);
}

int shoal_iallgather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype,
                     shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_ALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = sendcount,
                                    .dtype = dtype, .root = -1}, req);
}

int shoal_ibarrier(shoal_comm_t *c, shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_BARRIER, .dtype = SHOAL_UINT8, .root = -1}, req);
}

int shoal_igather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype, int root,
                  shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_GATHER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = sendcount,
                                    .dtype = dtype, .root = root}, req);
}

int shoal_iscatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                   int root, shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = recvcount,
                                    .dtype = dtype, .root = root}, req);
}

int shoal_ialltoall(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                    shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_ALLTOALL, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                                    .dtype = dtype, .root = -1}, req);
}

int shoal_ialltoallv(shoal_comm_t *c, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                     void *recvbuf, const size_t *recvcounts, const size_t *rdispls, shoal_dtype_t dtype,
                     shoal_request_t **req) {
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "ialltoallv: communicator is NULL");
  if (!sendcounts || !sdispls || !recvcounts || !rdispls)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "ialltoallv: a count or displacement array is NULL"));
  size_t p = (size_t)c->size, *v = malloc(4 * p * sizeof *v);
  if (!v) return shoal__seterr(SHOAL_ERR_NOMEM, "ialltoallv: no memory for the counts of %zu ranks", p);
  memcpy(v, sendcounts, p * sizeof *v);
  memcpy(v + p, sdispls, p * sizeof *v);
  memcpy(v + 2 * p, recvcounts, p * sizeof *v);
  memcpy(v + 3 * p, rdispls, p * sizeof *v);
  int rc = issue(c, (shoal_request_t){.kind = RQ_ALLTOALLV, .sendbuf = sendbuf, .recvbuf = recvbuf, .dtype = dtype,
                                      .root = -1, .v = v}, req);
  if (rc) free(v);
  return rc;
}

int shoal_isend(shoal_comm_t *c, const void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag,
                shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_SEND, .sendbuf = buf, .count = count, .dtype = dtype, .root = peer,
                                    .tag = tag}, req);
}

int shoal_irecv(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int peer, int tag,
                shoal_request_t **req) {
  return issue(c, (shoal_request_t){.kind = RQ_RECV, .recvbuf = buf, .count = count, .dtype = dtype, .root = peer,
                                    .tag = tag}, req);
}

/* Complete: hand the status and message to the caller's thread, free. */
static int finish(shoal_request_t **req) {
  shoal_request_t *r = *req;
  int rc = r->status;
  if (rc) shoal__seterr(rc, "%s", r->msg);
  request_free(r);
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

/* r, a collective still queued at the head with nothing running, run on this thread in the engine's place
 * (under the mutex, released and taken again); 0 when r is not such a request. Point-to-point requests run
 * in groups (run_p2p): always the engine's. */
static int run_here(shoal__async_t *a, shoal_request_t *r) {
  if (r->state != RQ_QUEUED || a->head != r || a->busy || a->stop || is_p2p(r)) return 0;
  take_head(a);
  if (a->waited < WAITED_RUN) a->waited++;
  pthread_mutex_unlock(&a->mu);
  runs_requests++;
  shoal__clearerr();
  complete(a, r, run_one(r), 1);
  runs_requests--;
  pthread_mutex_lock(&a->mu);
  return 1;
}

int shoal_wait(shoal_request_t **req) {
  if (!req || !*req) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_wait: NULL request");
  shoal__async_t *a = (*req)->c->w->async;
  pthread_mutex_lock(&a->mu);
  run_here(a, *req);
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
  if (st == RQ_DONE) request_free(r);
}

int shoal_request_notify(shoal_request_t *r, void (*fn)(void *arg), void *arg) {
  if (!r || !fn) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_request_notify: NULL request or function");
  shoal__async_t *a = r->c->w->async;
  pthread_mutex_lock(&a->mu);
  if (r->notify) {
    pthread_mutex_unlock(&a->mu);
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_request_notify: the %s request has a function already",
                         rq_names[r->kind]);
  }
  int done = r->finished;
  if (!done) r->notify = fn, r->notify_arg = arg;
  pthread_mutex_unlock(&a->mu);
  if (done) fn(arg);
  return 0;
}

int shoal_comm_pending(const shoal_comm_t *c) {
  if (!c || !c->w->async) return 0;
  shoal__async_t *a = c->w->async;
  pthread_mutex_lock(&a->mu);
  int n = a->pending;
  pthread_mutex_unlock(&a->mu);
  return n;
}
