/* shoal's inference service: a server answering the Open Inference Protocol
 * with a model trained by `shoal train` (server.c, batching in batcher.c), and
 * a router spreading requests over live replicas (router.c). docs/serving.md. */
#ifndef SHOAL_SERVE_SERVE_H
#define SHOAL_SERVE_SERVE_H

#include <stdint.h>

#include "serve/histo.h"
#include "serve/http.h"
#include "serve/pool.h"
#include "shoal/train.h"

/* ---- the server ---------------------------------------------------------- */

#define SHOAL__SERVE_MAX_BATCH 1024

typedef struct shoal__server_opts {
  shoal_model_kind_t kind;
  const char *params_path;   /* `shoal train --params-out` file: raw float32 parameters */
  const char *name;          /* the model's name in URLs (NULL: the kind's name) */
  int rows, cols, nclass;    /* input geometry and classes (0: 28, 28, 10, Fashion-MNIST's) */
  shoal__http_opts_t http;
  int max_batch;             /* rows per forward pass, 1..SHOAL__SERVE_MAX_BATCH */
  double batch_timeout_s;    /* the oldest waiting request waits at most this for others to join its batch */
  int max_rows;              /* rows per request */
  int max_queue;             /* requests waiting for the model; more: 503 */
  int blas_threads;          /* OpenBLAS threads (0: 1) */
} shoal__server_opts_t;

/* Defaults: mlp, port 0, 1 MiB bodies, 10 s request timeout, 256 connections, batches of 32 rows,
 * 2 ms batch timeout, 64 rows per request, 1024 waiting requests. */
void shoal__server_opts_init(shoal__server_opts_t *o);

typedef struct shoal__server shoal__server_t;

typedef struct shoal__server_stats {
  uint64_t ok;          /* answered with scores */
  uint64_t refused;     /* 4xx: malformed, wrong shape, too large, unknown model or path */
  uint64_t overloaded;  /* 503: the queue was full, or draining */
  uint64_t rows, batches;
  int queued;             /* requests waiting for the model now */
  shoal__histo_t latency; /* received whole -> answered, of the answered infer requests */
  double service_s[SHOAL__SERVE_MAX_BATCH + 1]; /* summed forward time of batches of b rows */
  uint64_t service_n[SHOAL__SERVE_MAX_BATCH + 1];
  double busy_per_request_s; /* seconds busy (some infer request arriving or not answered) per request answered,
                              * over its last few hundred; 0: none yet */
  double cpu_per_request_s;  /* the process's CPU seconds per request answered, over the same requests */
  double cpu_limit;          /* the CPUs its cgroup allows (0: no limit known) */
  double service_per_request_s; /* its service time, as reported to a router: the larger of busy_per_request_s and
                              * cpu_per_request_s / cpu_limit (a limited replica's capacity is its quota over its
                              * CPU a request: it runs fast until throttled); 0: none yet */
} shoal__server_stats_t;

/* Load the parameters (the file must hold exactly the model's parameter count of float32: else an error
 * naming the file and both sizes), start the batcher and listen. */
int  shoal__server_start(const shoal__server_opts_t *o, shoal__server_t **out);
int  shoal__server_port(const shoal__server_t *s);
const char *shoal__server_model_name(const shoal__server_t *s);
/* A copy of the counters (allocates nothing; stats is large: not for the stack of a small thread). */
void shoal__server_stats(shoal__server_t *s, shoal__server_stats_t *out);
/* Not ready any more (/v2/health/ready answers 503, new infer requests 503), stop accepting connections,
 * and wait up to timeout_s for the requests already accepted to be answered: 0, or SHOAL_ERR_TIMEOUT. */
int  shoal__server_drain(shoal__server_t *s, double timeout_s);
/* Stop (after a drain, nothing is lost; otherwise what is left gets 503) and free. NULL: nothing. */
void shoal__server_stop(shoal__server_t *s);

/* The CPUs this process may use by its cgroup's CPU limit (cgroup v1's cpu controller, else v2's cpu.max; the
 * tightest of its group and their ancestors), 0 when there is none or it cannot be read (cpulimit.c). */
double shoal__serve_cpu_limit(void);
/* The same from a /proc/PID/cgroup file and a cgroup file system mounted at fs (v1's cpu controller at fs/cpu). */
double shoal__serve_cpu_limit_at(const char *proc_cgroup, const char *fs);

/* ---- a replica's place in a router (announce.c) ------------------------------ */

/* POST ROUTER/router/replicas {"add": self, "service_s": S} (add = 1; S, the replica's measured seconds a request,
 * only when service_s > 0) or {"drop": self} within timeout_s: 0, or an error naming the router and what it
 * answered. A drop the router answers 404 (it does not hold self) is done: 0. */
int shoal__serve_announce(const char *router, const char *self, int add, double service_s, double timeout_s);
/* http://ADDR:PORT, the URL a router reaches a replica listening on addr:port at: addr itself unless it is
 * 0.0.0.0 (or NULL), else the first IPv4 address of an interface that is up and not loopback, else 127.0.0.1. */
int shoal__serve_self_url(const char *addr, int port, char *out, size_t cap);

/* Read a parameters file for a model (shoal__server_start uses it; so can tests). */
int shoal__serve_load_params(shoal_model_t *m, const char *path);

/* ---- the router ----------------------------------------------------------- */

typedef struct shoal__router_opts {
  shoal__http_opts_t http;
  shoal__pool_opts_t pool;
  int window_s;            /* P50, P99 and the request rate are over the last window_s seconds */
} shoal__router_opts_t;

/* Defaults: port 0, 1 MiB bodies, 10 s request timeout for the upload, 1024 connections; a try 5 s, a
 * request 30 s, 3 tries, health every 0.25 s, a replica removed after 20 checks in a row without an answer, 4096
 * requests held; a 10 s window. */
void shoal__router_opts_init(shoal__router_opts_t *o);

typedef struct shoal__router shoal__router_t;

typedef struct shoal__router_stats {
  shoal__pool_counts_t c;
  double p50_s, p99_s, rate;   /* over the window */
  shoal__histo_t total;        /* every answered request since the start */
} shoal__router_stats_t;

int  shoal__router_start(const shoal__router_opts_t *o, shoal__router_t **out);
int  shoal__router_port(const shoal__router_t *r);
/* The replica pool: shoal__pool_add/drop/replicas on it. */
shoal__pool_t *shoal__router_pool(shoal__router_t *r);
void shoal__router_stats(shoal__router_t *r, shoal__router_stats_t *out);
/* Stop accepting, wait up to timeout_s for the accepted requests, answer the rest 503, free. NULL: nothing. */
void shoal__router_stop(shoal__router_t *r, double timeout_s);

#endif
