/* The HTTP/1.1 front of the inference server and the router, on
 * libmicrohttpd: one polling thread; a request is handed to the handler once
 * received whole, and answered exactly once, at once or later from any thread
 * (the connection is suspended meanwhile). Resources are bounded: bodies over
 * max_body are refused with 413, a request not received whole within
 * request_timeout_s (a slowloris client, an idle keep-alive connection) gets
 * 408 and is closed, at most max_conns connections are open. */
#ifndef SHOAL_SERVE_HTTP_H
#define SHOAL_SERVE_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct shoal__http shoal__http_t;
typedef struct shoal__http_req shoal__http_req_t;

typedef struct shoal__http_opts {
  const char *addr;         /* IPv4 address to listen on (NULL: 0.0.0.0) */
  int port;                 /* 0: any free port (shoal__http_port tells which) */
  size_t max_body;          /* larger bodies: 413 */
  double request_timeout_s; /* a request must arrive whole within this: else 408 and the connection closed */
  int max_conns;            /* open connections at most (more are closed at once) */
  const char *who;          /* names the server in messages ("shoal serve") */
} shoal__http_opts_t;

typedef struct shoal__http_counts {
  uint64_t requests;      /* received whole */
  uint64_t too_large;     /* refused with 413 */
  uint64_t timed_out;     /* closed with 408: not received in time */
  uint64_t connections;   /* accepted in total */
  int open;               /* open now */
} shoal__http_counts_t;

/* Called on the HTTP thread once a request is received whole; must end in exactly one shoal__http_reply
 * for it, now or later, from any thread. */
typedef void (*shoal__http_handler_fn)(void *arg, shoal__http_req_t *req);

int  shoal__http_start(const shoal__http_opts_t *o, shoal__http_handler_fn fn, void *arg, shoal__http_t **out);
int  shoal__http_port(const shoal__http_t *h);
void shoal__http_counts(shoal__http_t *h, shoal__http_counts_t *out);
/* Stop accepting connections (those open are served on). */
void shoal__http_quiesce(shoal__http_t *h);
/* Requests handed to the handler and not answered yet. */
int  shoal__http_pending(shoal__http_t *h);
/* Stop: requests still unanswered get 503; then the daemon stops. NULL: nothing. */
void shoal__http_stop(shoal__http_t *h);

const char *shoal__http_method(const shoal__http_req_t *r);
const char *shoal__http_url(const shoal__http_req_t *r);
const char *shoal__http_body(const shoal__http_req_t *r, size_t *len);
/* A request header (on the HTTP thread only, i.e. inside the handler); NULL when absent. */
const char *shoal__http_header(shoal__http_req_t *r, const char *name);
/* When it was received whole (shoal__now_s). */
double      shoal__http_received_at(const shoal__http_req_t *r);
/* When its request line arrived (shoal__now_s): its body's arrival and reading are between the two. */
double      shoal__http_begun_at(const shoal__http_req_t *r);
/* Answer: takes body (malloc'ed; NULL with len 0: no body). A second reply to a request is ignored. */
void shoal__http_reply(shoal__http_req_t *r, int status, const char *content_type, char *body, size_t len);
/* Answer {"error": message} with the status. */
void shoal__http_reply_error(shoal__http_req_t *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
