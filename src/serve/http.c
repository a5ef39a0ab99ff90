/* HTTP/1.1 front on libmicrohttpd (http.h).
 *
 * Slow clients: libmicrohttpd's own timeout is an idle timeout, which a client sending one byte every few
 * seconds never trips. Every connection carries the time its current request started (its opening, or the
 * end of its previous exchange); a reaper thread answers 408 to and shuts down the connections whose
 * request has not arrived whole within request_timeout_s. Writing the 408 from the reaper is safe: the
 * library writes on a connection only once a response is queued, and none is before the request arrived.
 * A kept-alive connection on which no next request began (no request line yet) is idle, not slow: it is
 * closed without a 408, because a client may send its next request on it at that very moment and would read
 * the 408 as that request's answer (a client such as libcurl resends a request on a fresh connection when a
 * reused one closes without an answer). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "serve/http.h"
#include "serve/oip.h"

typedef struct conn {
  int fd;
  double since;     /* the current request started */
  int received;     /* the current request arrived whole: no deadline while we answer it */
  int exchanges;    /* requests answered on it */
  int begun;        /* the current request's line arrived (the library parsed its URI) */
  double t_line;    /* when it arrived */
  int reaped;       /* shut down by the reaper */
  struct conn *prev, *next;
} conn_t;

enum { REQ_RECEIVING, REQ_HANDLING, REQ_SUSPENDED };

struct shoal__http_req {
  shoal__http_t *h;
  struct MHD_Connection *conn;
  conn_t *c;
  char method[16];
  char *url;
  char *body;
  size_t len, cap;
  int too_large, state, replied, queued;
  int status;
  const char *ctype;
  char *rbody;
  size_t rlen;
  double t_begun, t_recv; /* its request line arrived; it arrived whole */
  struct shoal__http_req *prev, *next; /* in h->waiting while handed to the handler and not answered */
};

struct shoal__http {
  shoal__http_opts_t o;
  struct MHD_Daemon *d;
  int listen_fd, port;
  shoal__http_handler_fn fn;
  void *arg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  conn_t *conns;
  shoal__http_req_t *waiting; /* handed to the handler, not completed (answer sent or connection gone) */
  int nwaiting, npending;      /* in that list; of them not answered yet */
  shoal__http_counts_t counts;
  pthread_t reaper;
  int reaper_on, stopping;
};

static void list_add_req(shoal__http_t *h, shoal__http_req_t *r) {
  r->prev = NULL;
  r->next = h->waiting;
  if (h->waiting) h->waiting->prev = r;
  h->waiting = r;
  h->nwaiting++;
  h->npending++;
}

static void list_del_req(shoal__http_t *h, shoal__http_req_t *r) {
  if (r->prev) r->prev->next = r->next;
  else if (h->waiting == r) h->waiting = r->next;
  else return; /* not in the list */
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
  h->nwaiting--;
  if (!r->replied) h->npending--;
}

static enum MHD_Result queue(struct MHD_Connection *conn, int status, const char *ctype, char *body, size_t len) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, body ? body : (char *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (!resp) {
    free(body);
    return MHD_NO;
  }
  if (ctype) MHD_add_response_header(resp, "Content-Type", ctype);
  enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result queue_error(struct MHD_Connection *conn, int status, const char *msg) {
  size_t len = 0;
  char *b = shoal__oip_error(msg, &len);
  return queue(conn, status, "application/json", b, b ? len : 0);
}

static int body_limit_exceeded(shoal__http_req_t *r, size_t more) {
  return r->too_large || more > r->h->o.max_body || r->len > r->h->o.max_body - more;
}

static enum MHD_Result too_large(shoal__http_t *h, struct MHD_Connection *conn) {
  char msg[160];
  snprintf(msg, sizeof msg, "the body is larger than the server's limit of %zu bytes", h->o.max_body);
  pthread_mutex_lock(&h->mu);
  h->counts.too_large++;
  pthread_mutex_unlock(&h->mu);
  return queue_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, msg);
}

/* A refused body the client is already sending is read and dropped before the 413 goes out: answering early
 * and closing with its bytes unread makes the kernel reset the connection, and the client sees the reset
 * instead of the answer. A client that sent "Expect: 100-continue" sends nothing until told, so it gets the
 * 413 at once, and so does a body declared larger than this (reading it would cost more than the answer is
 * worth; the request deadline bounds a slow one either way). */
#define SHOAL__HTTP_DRAIN_MAX (64ull << 20)

static int expects_continue(struct MHD_Connection *conn) {
  const char *e = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
  return e && !strcasecmp(e, "100-continue");
}

static shoal__http_req_t *new_req(shoal__http_t *h, struct MHD_Connection *conn, const char *url, const char *method) {
  shoal__http_req_t *r = calloc(1, sizeof *r);
  if (!r || !(r->url = strdup(url))) {
    free(r);
    return NULL;
  }
  r->h = h;
  r->conn = conn;
  snprintf(r->method, sizeof r->method, "%s", method);
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  r->c = ci ? (conn_t *)ci->socket_context : NULL;
  pthread_mutex_lock(&h->mu);
  r->t_begun = r->c && r->c->begun ? r->c->t_line : shoal__now_s();
  pthread_mutex_unlock(&h->mu);
  return r;
}

/* The request has arrived whole: hand it to the handler; answer now or suspend until the answer comes. */
static enum MHD_Result dispatch(shoal__http_t *h, shoal__http_req_t *r) {
  pthread_mutex_lock(&h->mu);
  if (r->c) r->c->received = 1;
  h->counts.requests++;
  r->state = REQ_HANDLING;
  r->t_recv = shoal__now_s();
  list_add_req(h, r);
  pthread_mutex_unlock(&h->mu);
  h->fn(h->arg, r);
  pthread_mutex_lock(&h->mu);
  if (!r->replied) { /* answered later: shoal__http_reply resumes the connection */
    r->state = REQ_SUSPENDED;
    MHD_suspend_connection(r->conn);
    pthread_mutex_unlock(&h->mu);
    return MHD_YES;
  }
  pthread_mutex_unlock(&h->mu);
  r->queued = 1;
  char *b = r->rbody;
  r->rbody = NULL;
  return queue(r->conn, r->status, r->ctype, b, r->rlen);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **req_cls) {
  shoal__http_t *h = cls;
  shoal__http_req_t *r = *req_cls;
  if (!r) { /* headers received */
    if (!(r = new_req(h, conn, url, method))) return MHD_NO;
    *req_cls = r;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
    if (declared > h->o.max_body) {
      r->too_large = 1;
      if (expects_continue(conn) || declared > SHOAL__HTTP_DRAIN_MAX) { /* refused before a byte of it is sent */
        r->queued = 1;
        return too_large(h, conn);
      }
      /* a client already uploading: read and drop the body, then answer (see SHOAL__HTTP_DRAIN_MAX) */
    }
    return MHD_YES;
  }
  if (r->queued) { /* the 413 is out: the rest of the body is dropped */
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    /* a chunked body past the limit: the rest is read and dropped (the library takes no answer in the middle
     * of a body), then 413; a body without end meets the request deadline */
    if (body_limit_exceeded(r, *upload_size)) {
      r->too_large = 1;
      free(r->body);
      r->body = NULL;
      r->len = r->cap = 0;
      *upload_size = 0;
      return MHD_YES;
    }
    if (r->len + *upload_size + 1 > r->cap) {
      size_t cap = r->cap ? r->cap : 4096;
      while (cap < r->len + *upload_size + 1) cap *= 2;
      char *b = realloc(r->body, cap);
      if (!b) return MHD_NO;
      r->body = b;
      r->cap = cap;
    }
    memcpy(r->body + r->len, upload, *upload_size);
    r->len += *upload_size;
    r->body[r->len] = 0;
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->too_large) {
    r->queued = 1;
    return too_large(h, conn);
  }
  if (r->state == REQ_RECEIVING) return dispatch(h, r);
  /* resumed after the answer came */
  pthread_mutex_lock(&h->mu);
  int ready = r->replied && !r->queued;
  char *b = r->rbody;
  r->rbody = NULL;
  if (ready) r->queued = 1;
  pthread_mutex_unlock(&h->mu);
  return ready ? queue(conn, r->status, r->ctype, b, r->rlen) : MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe) {
  shoal__http_t *h = cls;
  shoal__http_req_t *r = *req_cls;
  if (!r) return;
  pthread_mutex_lock(&h->mu);
  list_del_req(h, r);
  if (r->c) { /* the next request's time starts now */
    r->c->received = 0, r->c->begun = 0;
    r->c->exchanges++;
    r->c->since = shoal__now_s();
  }
  pthread_mutex_unlock(&h->mu);
  free(r->rbody);
  free(r->body);
  free(r->url);
  free(r);
  *req_cls = NULL;
}

/* The request line arrived: the connection's next request began (returns the request's initial context: none). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  shoal__http_t *h = cls;
  (void)uri;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  pthread_mutex_lock(&h->mu);
  conn_t *c = ci ? ci->socket_context : NULL;
  if (c) c->begun = 1, c->t_line = shoal__now_s();
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx, enum MHD_ConnectionNotificationCode code) {
  shoal__http_t *h = cls;
  pthread_mutex_lock(&h->mu);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_t *c = calloc(1, sizeof *c);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (c) {
      c->fd = ci ? ci->connect_fd : -1;
      c->since = shoal__now_s();
      c->next = h->conns;
      if (h->conns) h->conns->prev = c;
      h->conns = c;
    }
    *socket_ctx = c;
    h->counts.connections++;
    h->counts.open++;
  } else {
    conn_t *c = *socket_ctx;
    if (c) {
      if (c->prev) c->prev->next = c->next;
      else h->conns = c->next;
      if (c->next) c->next->prev = c->prev;
      free(c);
    }
    *socket_ctx = NULL;
    h->counts.open--;
  }
  pthread_mutex_unlock(&h->mu);
}

/* The reaper: 408 and shutdown for the connections whose request is past its deadline. */
static void *reaper_main(void *arg) {
  shoal__http_t *h = arg;
  pthread_mutex_lock(&h->mu);
  while (!h->stopping) {
    double now = shoal__now_s();
    for (conn_t *c = h->conns; c; c = c->next) {
      if (c->received || c->reaped || c->fd < 0 || now - c->since < h->o.request_timeout_s) continue;
      if (c->exchanges > 0 && !c->begun) { /* idle between requests: closed without an answer */
        shutdown(c->fd, SHUT_RDWR);
        c->reaped = 1;
        continue;
      }
      char body[128], msg[384];
      int bl = snprintf(body, sizeof body, "{\"error\":\"the request did not arrive whole within %g s\"}",
                        h->o.request_timeout_s);
      int n = snprintf(msg, sizeof msg,
                       "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nConnection: close\r\n"
                       "Content-Length: %d\r\n\r\n%s", bl, body);
      (void)!send(c->fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
      shutdown(c->fd, SHUT_RDWR); /* the library sees the end and closes it */
      c->reaped = 1;
      h->counts.timed_out++;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

/* Our own listening socket: a clear error for a taken port or a bad address, and port 0 told back. */
static int open_listener(const shoal__http_opts_t *o, int *fd_out, int *port_out) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
  const char *addr = o->addr ? o->addr : "0.0.0.0";
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: --addr '%s' is not an IPv4 address", o->who, addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
  if (fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "%s: socket: %s", o->who, strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 128)) {
    int e = errno;
    close(fd);
    return shoal__seterr(e == EADDRINUSE ? SHOAL_ERR_ADDR_IN_USE : SHOAL_ERR_SYSTEM, "%s: cannot listen on %s:%d: %s",
                         o->who, addr, o->port, strerror(e));
  }
  socklen_t sl = sizeof sa;
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  *fd_out = fd;
  *port_out = ntohs(sa.sin_port);
  return 0;
}

int shoal__http_start(const shoal__http_opts_t *o, shoal__http_handler_fn fn, void *arg, shoal__http_t **out) {
  if (!o || !fn || !out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal__http_start: NULL argument");
  shoal__http_t *h = calloc(1, sizeof *h);
  if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", o->who);
  h->o = *o;
  h->fn = fn;
  h->arg = arg;
  pthread_mutex_init(&h->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &ca);
  pthread_condattr_destroy(&ca);
  int rc = open_listener(o, &h->listen_fd, &h->port);
  if (rc) goto out_free;
  h->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, on_access, h,
                          MHD_OPTION_LISTEN_SOCKET, h->listen_fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_conns,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(o->request_timeout_s * 4 + 1),
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                          MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_END);
  if (!h->d) {
    rc = shoal__seterr(SHOAL_ERR_SYSTEM, "%s: the HTTP daemon (libmicrohttpd) did not start: %s", o->who,
                       strerror(errno ? errno : EINVAL));
    close(h->listen_fd);
    goto out_free;
  }
  if (pthread_create(&h->reaper, NULL, reaper_main, h)) {
    MHD_stop_daemon(h->d);
    close(h->listen_fd);
    rc = shoal__seterr(SHOAL_ERR_SYSTEM, "%s: cannot start a thread", o->who);
    goto out_free;
  }
  h->reaper_on = 1;
  *out = h;
  return 0;
out_free:
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  free(h);
  return rc;
}

int shoal__http_port(const shoal__http_t *h) { return h->port; }

void shoal__http_counts(shoal__http_t *h, shoal__http_counts_t *out) {
  pthread_mutex_lock(&h->mu);
  *out = h->counts;
  pthread_mutex_unlock(&h->mu);
}

void shoal__http_quiesce(shoal__http_t *h) {
  int fd = MHD_quiesce_daemon(h->d);
  if (fd >= 0 && fd == h->listen_fd) {
    close(h->listen_fd);
    h->listen_fd = -1;
  }
}

int shoal__http_pending(shoal__http_t *h) {
  pthread_mutex_lock(&h->mu);
  int n = h->npending;
  pthread_mutex_unlock(&h->mu);
  return n;
}

void shoal__http_stop(shoal__http_t *h) {
  if (!h) return;
  /* whatever is still unanswered gets 503, so that no connection stays suspended */
  pthread_mutex_lock(&h->mu);
  shoal__http_req_t *todo[256];
  int n = 0;
  for (shoal__http_req_t *r = h->waiting; r && n < 256; r = r->next)
    if (!r->replied) todo[n++] = r;
  pthread_mutex_unlock(&h->mu);
  for (int i = 0; i < n; i++) shoal__http_reply_error(todo[i], 503, "%s is shutting down", h->o.who);
  /* the answers are queued: give them time to leave before the connections are closed */
  for (int i = 0; i < 200; i++) {
    pthread_mutex_lock(&h->mu);
    int left = h->nwaiting;
    pthread_mutex_unlock(&h->mu);
    if (!left) break;
    shoal__sleep_s(0.01);
  }
  pthread_mutex_lock(&h->mu);
  h->stopping = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  if (h->reaper_on) pthread_join(h->reaper, NULL);
  MHD_stop_daemon(h->d);
  if (h->listen_fd >= 0) close(h->listen_fd);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

const char *shoal__http_method(const shoal__http_req_t *r) { return r->method; }
const char *shoal__http_url(const shoal__http_req_t *r) { return r->url; }
double shoal__http_received_at(const shoal__http_req_t *r) { return r->t_recv; }

double shoal__http_begun_at(const shoal__http_req_t *r) { return r->t_begun; }

const char *shoal__http_body(const shoal__http_req_t *r, size_t *len) {
  if (len) *len = r->len;
  return r->body ? r->body : "";
}

const char *shoal__http_header(shoal__http_req_t *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

void shoal__http_reply(shoal__http_req_t *r, int status, const char *content_type, char *body, size_t len) {
  shoal__http_t *h = r->h;
  pthread_mutex_lock(&h->mu);
  if (r->replied) {
    pthread_mutex_unlock(&h->mu);
    free(body);
    return;
  }
  r->replied = 1; /* (before the count: list_del_req counts the unanswered by this flag) */
  r->status = status;
  r->ctype = content_type;
  r->rbody = body;
  r->rlen = body ? len : 0;
  h->npending--;
  if (r->state == REQ_SUSPENDED) MHD_resume_connection(r->conn);
  pthread_mutex_unlock(&h->mu);
}

void shoal__http_reply_error(shoal__http_req_t *r, int status, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t len = 0;
  char *b = shoal__oip_error(msg, &len);
  shoal__http_reply(r, status, "application/json", b, b ? len : 0);
}
