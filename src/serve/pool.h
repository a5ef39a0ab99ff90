/* The router's replica pool: the replicas' addresses and health, and the
 * forwarding of requests to them on one thread driving libcurl's multi
 * interface. An accepted request is answered exactly once: with a replica's
 * answer (2xx-4xx), or, when replicas fail it (connection refused or reset,
 * no answer in time, 5xx), after trying others, waiting for a live one while
 * none is, until its deadline. */
#ifndef SHOAL_SERVE_POOL_H
#define SHOAL_SERVE_POOL_H

#include <stdint.h>

#include "serve/histo.h"
#include "serve/http.h"

typedef struct shoal__pool shoal__pool_t;

typedef struct shoal__pool_opts {
  double try_timeout_s;     /* one try on one replica */
  double request_timeout_s; /* a request's whole life in the router: tries and waiting for a replica */
  int max_tries;            /* tries per request */
  double health_every_s;    /* readiness check of every replica (GET /v2/health/ready) */
  int drop_after;           /* health checks in a row without an answer (refused, reset, timed out) after which a
                             * replica is removed, as if dropped (a killed replica never says goodbye); 0: never */
  int max_requests;         /* held at once (waiting and in flight): more are answered 503 at once */
} shoal__pool_opts_t;

#define SHOAL__POOL_MAX_REPLICAS 256

typedef struct shoal__replica_info {
  char url[128];
  int live, draining;
  int outstanding;
  int missed; /* health checks in a row without an answer */
  uint64_t answered, failed;
  double service_s; /* its measured seconds a request, as it last reported (0: none) */
} shoal__replica_info_t;

typedef struct shoal__pool_counts {
  uint64_t accepted, answered, ok, failed, retries, refused;
  int in_line;   /* held, on no replica: not yet sent, back from a failed try, or no replica live */
  int in_flight; /* on a replica now */
  int waiting;   /* held and not being served: every held request but one per live replica holding any (pool.c) */
  int live;      /* replicas live and not draining */
  double service_s; /* the mean of the live replicas' reported seconds a request (0: none reported) */
} shoal__pool_counts_t;

int  shoal__pool_start(const shoal__pool_opts_t *o, shoal__latwin_t *lat, shoal__pool_t **out);
/* Forward req (method, path, body) to a replica; its answer goes to shoal__http_reply. */
void shoal__pool_submit(shoal__pool_t *p, shoal__http_req_t *req);
/* url: http://HOST:PORT. Add: checked at once, used once ready. 0, or SHOAL_ERR_INVALID (bad URL, already
 * there, too many). */
int  shoal__pool_add(shoal__pool_t *p, const char *url);
/* As add, but a URL the pool holds (not draining) is no error and changes nothing but its service time: a
 * replica's join, which it repeats so that a router that removed it (missed health checks) or restarted takes it
 * back. service_s > 0: the replica's own measured seconds a request (shoal__pool_counts averages them). */
int  shoal__pool_join(shoal__pool_t *p, const char *url, double service_s);
/* 1 if the pool takes url as a replica: http://HOST:PORT, port 1-65535, shorter than a replica's URL field
 * (a replica checks the URL it advertises with this before it asks a router to add it). */
int  shoal__pool_url_ok(const char *url);
/* Drain: no new requests go to it; removed once its requests are answered. 0 or SHOAL_ERR_NOT_FOUND. */
int  shoal__pool_drop(shoal__pool_t *p, const char *url);
/* Replicas (up to max) into out; returns how many there are. */
int  shoal__pool_replicas(shoal__pool_t *p, shoal__replica_info_t *out, int max);
void shoal__pool_counts(shoal__pool_t *p, shoal__pool_counts_t *out);
/* Answer what is left with 503 and stop. NULL: nothing. */
void shoal__pool_stop(shoal__pool_t *p);

#endif
