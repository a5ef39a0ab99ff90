/* The router's replica pool and forwarding thread (pool.h). The thread owns every libcurl handle; the
 * HTTP thread hands it requests through a list under the pool's mutex and wakes it. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "serve/pool.h"

#define MAX_ANSWER (16u << 20) /* a replica's answer larger than this is a failure */

typedef struct replica {
  char url[128];
  int live, draining, checking;
  int outstanding;
  int missed; /* health checks in a row without an answer */
  uint64_t answered, failed;
  double service_s; /* its measured seconds a request, as it reported with its last join (0: none) */
  double next_check;
  CURL *health;
} replica_t;

typedef struct fwd {
  shoal__http_req_t *req;
  char method[8];
  char *url_path, *body;
  size_t blen;
  int tries, rep;
  uint64_t tried[SHOAL__POOL_MAX_REPLICAS / 64];
  double deadline;
  CURL *easy;
  struct curl_slist *hdrs;
  char *ans;
  size_t alen, acap;
  char err[192];
  struct fwd *next;            /* in a waiting list */
  struct fwd *fprev, *fnext;   /* in the in-flight list */
} fwd_t;

struct shoal__pool {
  shoal__pool_opts_t o;
  shoal__latwin_t *lat;
  pthread_mutex_t mu;
  replica_t *rep[SHOAL__POOL_MAX_REPLICAS];
  fwd_t *in_head, *in_tail;     /* submitted, not yet seen by the thread */
  fwd_t *wait_head, *wait_tail; /* the thread's: waiting for a replica */
  fwd_t *flying;                /* on a replica now */
  int held, rr;
  shoal__pool_counts_t c;
  CURLM *multi;
  pthread_t thread;
  int stopping;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_NOTHING); }

static size_t on_data(char *ptr, size_t size, size_t n, void *arg) {
  fwd_t *f = arg;
  size_t len = size * n;
  if (f->alen + len + 1 > MAX_ANSWER) return 0; /* fails the transfer */
  if (f->alen + len + 1 > f->acap) {
    size_t cap = f->acap ? f->acap : 4096;
    while (cap < f->alen + len + 1) cap *= 2;
    char *a = realloc(f->ans, cap);
    if (!a) return 0;
    f->ans = a;
    f->acap = cap;
  }
  memcpy(f->ans + f->alen, ptr, len);
  f->alen += len;
  f->ans[f->alen] = 0;
  return len;
}

static size_t discard(char *ptr, size_t size, size_t n, void *arg) { return size * n; }

static void fwd_free(fwd_t *f) {
  curl_slist_free_all(f->hdrs);
  free(f->url_path);
  free(f->body);
  free(f->ans);
  free(f);
}

/* Answer and forget a request (under the mutex). */
static void finish(shoal__pool_t *p, fwd_t *f, int status, char *body, size_t len) {
  double now = shoal__now_s();
  if (status < 500) shoal__latwin_add(p->lat, now, now - shoal__http_received_at(f->req));
  p->c.answered++;
  if (status == 200) p->c.ok++;
  if (status >= 500) p->c.failed++;
  p->held--;
  shoal__http_reply(f->req, status, "application/json", body, len);
  fwd_free(f);
}

static void fail(shoal__pool_t *p, fwd_t *f, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void fail(shoal__pool_t *p, fwd_t *f, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *body = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&body, &len);
  if (m) {
    fputs("{\"error\":\"", m);
    for (const char *s = msg; *s; s++)
      if (*s == '"' || *s == '\\') fprintf(m, "\\%c", *s);
      else fputc((unsigned char)*s < 32 ? ' ' : *s, m);
    fputs("\"}", m);
    fclose(m);
  }
  finish(p, f, status, body, body ? len : 0);
}

static void fly_add(shoal__pool_t *p, fwd_t *f) {
  f->fprev = NULL;
  f->fnext = p->flying;
  if (p->flying) p->flying->fprev = f;
  p->flying = f;
}

static void fly_del(shoal__pool_t *p, fwd_t *f) {
  if (f->fprev) f->fprev->fnext = f->fnext;
  else p->flying = f->fnext;
  if (f->fnext) f->fnext->fprev = f->fprev;
  f->fprev = f->fnext = NULL;
}

/* The live replica for f: not draining, not tried yet if possible, fewest requests outstanding. */
static int pick(shoal__pool_t *p, fwd_t *f) {
  int best = -1, best_untried = 0;
  for (int k = 0; k < SHOAL__POOL_MAX_REPLICAS; k++) {
    int i = (p->rr + k) % SHOAL__POOL_MAX_REPLICAS;
    replica_t *r = p->rep[i];
    if (!r || !r->live || r->draining) continue;
    int untried = !(f->tried[i / 64] >> (i % 64) & 1);
    if (best < 0 || untried > best_untried || (untried == best_untried && r->outstanding < p->rep[best]->outstanding))
      best = i, best_untried = untried;
  }
  if (best >= 0) p->rr = (best + 1) % SHOAL__POOL_MAX_REPLICAS;
  return best;
}

static int start_try(shoal__pool_t *p, fwd_t *f, int i, double now) {
  replica_t *r = p->rep[i];
  char url[512];
  snprintf(url, sizeof url, "%s%s", r->url, f->url_path);
  CURL *e = curl_easy_init();
  if (!e) return -1;
  f->alen = 0;
  double left = f->deadline - now, t = left < p->o.try_timeout_s ? left : p->o.try_timeout_s;
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(t * 1000) + 1);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(e, CURLOPT_PRIVATE, f);
  if (!strcmp(f->method, "POST")) {
    if (!f->hdrs) {
      f->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
      f->hdrs = curl_slist_append(f->hdrs, "Expect:"); /* no 100-continue round trip */
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->hdrs);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, f->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)f->blen);
  }
  if (curl_multi_add_handle(p->multi, e) != CURLM_OK) {
    curl_easy_cleanup(e);
    return -1;
  }
  f->easy = e;
  f->rep = i;
  f->tries++;
  f->tried[i / 64] |= 1ULL << (i % 64);
  r->outstanding++;
  p->c.in_flight++;
  fly_add(p, f);
  return 0;
}

/* Give waiting requests to replicas; answer those past their deadline. Under the mutex. */
static void dispatch(shoal__pool_t *p, double now) {
  fwd_t *keep_head = NULL, *keep_tail = NULL, *f = p->wait_head;
  p->wait_head = p->wait_tail = NULL;
  while (f) {
    fwd_t *next = f->next;
    f->next = NULL;
    int i = now < f->deadline ? pick(p, f) : -1;
    if (now >= f->deadline) {
      p->c.in_line--;
      fail(p, f, 503, "no replica answered within the request timeout (%g s)%s%s", p->o.request_timeout_s,
           f->err[0] ? "; last: " : "", f->err);
    } else if (i >= 0 && start_try(p, f, i, now) == 0) {
      p->c.in_line--;
    } else {
      if (keep_tail) keep_tail->next = f;
      else keep_head = f;
      keep_tail = f;
    }
    f = next;
  }
  p->wait_head = keep_head;
  p->wait_tail = keep_tail;
}

static void start_health(shoal__pool_t *p, double now) {
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++) {
    replica_t *r = p->rep[i];
    if (!r || r->checking || now < r->next_check) continue;
    char url[256];
    snprintf(url, sizeof url, "%s/v2/health/ready", r->url);
    CURL *e = curl_easy_init();
    if (!e) continue;
    double t = p->o.health_every_s > 0.2 ? p->o.health_every_s : 0.2;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(t * 2000));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
    if (curl_multi_add_handle(p->multi, e) != CURLM_OK) {
      curl_easy_cleanup(e);
      continue;
    }
    r->health = e;
    r->checking = 1;
  }
}

static void health_done(shoal__pool_t *p, CURL *e, CURLcode res, long code, double now) {
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++) {
    replica_t *r = p->rep[i];
    if (!r || r->health != e) continue;
    int live = res == CURLE_OK && code == 200;
    if (live != r->live) {
      if (live) SHOAL_INFO("SERVE", "router: replica %s is ready", r->url);
      else SHOAL_WARN("SERVE", "router: replica %s is not ready: %s", r->url,
                      res != CURLE_OK ? curl_easy_strerror(res) : code == 503 ? "draining" : "bad answer");
    }
    r->live = live;
    r->missed = res == CURLE_OK ? 0 : r->missed + 1; /* an answer, even "not ready", is a process alive */
    if (p->o.drop_after > 0 && r->missed >= p->o.drop_after && !r->draining) {
      SHOAL_WARN("SERVE", "router: replica %s removed: no answer to %d health checks in a row (last: %s)", r->url,
                 r->missed, curl_easy_strerror(res));
      r->draining = 1; /* as a drop: its requests in flight end (and are retried) before it goes */
    }
    r->checking = 0;
    r->health = NULL;
    r->next_check = now + p->o.health_every_s;
    return;
  }
}

/* One try ended: the answer goes back, or the request waits for another replica. Under the mutex. */
static void try_done(shoal__pool_t *p, fwd_t *f, CURLcode res, long code, double now) {
  replica_t *r = p->rep[f->rep];
  r->outstanding--;
  p->c.in_flight--;
  f->easy = NULL;
  fly_del(p, f);
  if (res == CURLE_OK && code < 500) {
    r->answered++;
    char *a = f->ans;
    size_t len = f->alen;
    f->ans = NULL;
    finish(p, f, (int)code, a, len);
    return;
  }
  r->failed++;
  if (res != CURLE_OK) { /* refused, reset, no answer in time: not live until its check says so */
    if (r->live) SHOAL_WARN("SERVE", "router: replica %s failed a request: %s", r->url, curl_easy_strerror(res));
    r->live = 0;
    r->next_check = now;
    snprintf(f->err, sizeof f->err, "%s: %s", r->url, curl_easy_strerror(res));
  } else {
    snprintf(f->err, sizeof f->err, "%s answered %ld: %.100s", r->url, code, f->ans ? f->ans : "");
  }
  if (f->tries >= p->o.max_tries) {
    fail(p, f, 502, "no replica answered in %d tries; last: %s", f->tries, f->err);
    return;
  }
  p->c.retries++;
  p->c.in_line++;
  f->next = p->wait_head; /* first in line: it has waited longest */
  p->wait_head = f;
  if (!p->wait_tail) p->wait_tail = f;
}

static void collect(shoal__pool_t *p) {
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(p->multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL *e = msg->easy_handle;
    CURLcode res = msg->data.result;
    long code = 0;
    fwd_t *f = NULL;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&f);
    curl_multi_remove_handle(p->multi, e);
    curl_easy_cleanup(e);
    double now = shoal__now_s();
    pthread_mutex_lock(&p->mu);
    if (f) try_done(p, f, res, code, now);
    else health_done(p, e, res, code, now);
    pthread_mutex_unlock(&p->mu);
  }
}

/* Replicas dropped and idle are removed. Under the mutex. */
static void reap(shoal__pool_t *p) {
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++) {
    replica_t *r = p->rep[i];
    if (r && r->draining && !r->outstanding && !r->checking) {
      free(r);
      p->rep[i] = NULL;
    }
  }
}

static void *pool_main(void *arg) {
  shoal__pool_t *p = arg;
  for (;;) {
    double now = shoal__now_s();
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
      pthread_mutex_unlock(&p->mu);
      break;
    }
    if (p->in_head) { /* new requests join the end of the line */
      if (p->wait_tail) p->wait_tail->next = p->in_head;
      else p->wait_head = p->in_head;
      p->wait_tail = p->in_tail;
      p->in_head = p->in_tail = NULL;
    }
    start_health(p, now);
    dispatch(p, now);
    reap(p);
    pthread_mutex_unlock(&p->mu);
    int running;
    curl_multi_perform(p->multi, &running);
    collect(p);
    curl_multi_poll(p->multi, NULL, 0, 20, NULL);
  }
  return NULL;
}

int shoal__pool_start(const shoal__pool_opts_t *o, shoal__latwin_t *lat, shoal__pool_t **out) {
  pthread_once(&curl_once, curl_init);
  shoal__pool_t *p = calloc(1, sizeof *p);
  if (!p) return shoal__seterr(SHOAL_ERR_NOMEM, "router: out of memory");
  p->o = *o;
  p->lat = lat;
  pthread_mutex_init(&p->mu, NULL);
  if (!(p->multi = curl_multi_init()) || pthread_create(&p->thread, NULL, pool_main, p)) {
    if (p->multi) curl_multi_cleanup(p->multi);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "router: cannot start the forwarding thread");
  }
  *out = p;
  return 0;
}

void shoal__pool_submit(shoal__pool_t *p, shoal__http_req_t *req) {
  fwd_t *f = calloc(1, sizeof *f);
  size_t blen;
  const char *body = shoal__http_body(req, &blen);
  if (f && (!(f->url_path = strdup(shoal__http_url(req))) || !(f->body = malloc(blen + 1)))) {
    fwd_free(f);
    f = NULL;
  }
  pthread_mutex_lock(&p->mu);
  if (!f || p->held >= p->o.max_requests || p->stopping) {
    p->c.refused++;
    int held = p->held;
    pthread_mutex_unlock(&p->mu);
    if (f) fwd_free(f);
    shoal__http_reply_error(req, 503, "router overloaded: %d requests held already", held);
    return;
  }
  memcpy(f->body, body, blen);
  f->body[blen] = 0;
  f->blen = blen;
  f->req = req;
  snprintf(f->method, sizeof f->method, "%s", shoal__http_method(req));
  f->deadline = shoal__http_received_at(req) + p->o.request_timeout_s;
  if (p->in_tail) p->in_tail->next = f;
  else p->in_head = f;
  p->in_tail = f;
  p->held++;
  p->c.accepted++;
  p->c.in_line++;
  pthread_mutex_unlock(&p->mu);
  curl_multi_wakeup(p->multi);
}

int shoal__pool_url_ok(const char *url) {
  const char *h = !strncmp(url, "http://", 7) ? url + 7 : NULL;
  const char *colon = h ? strrchr(h, ':') : NULL;
  if (!colon || colon == h || strlen(url) >= sizeof ((replica_t *)0)->url) return 0;
  char *end;
  long port = strtol(colon + 1, &end, 10);
  return *end == 0 && port >= 1 && port <= 65535;
}

/* again_ok: a URL the pool holds (not draining) is no error, only its service time (> 0) is taken */
static int pool_add(shoal__pool_t *p, const char *url, int again_ok, double service_s) {
  if (!url || !shoal__pool_url_ok(url))
    return shoal__seterr(SHOAL_ERR_INVALID, "replica '%s': expected http://HOST:PORT", url ? url : "(null)");
  pthread_mutex_lock(&p->mu);
  int free_slot = -1;
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++) {
    if (p->rep[i] && !strcmp(p->rep[i]->url, url) && !p->rep[i]->draining) {
      if (again_ok && service_s > 0) p->rep[i]->service_s = service_s;
      pthread_mutex_unlock(&p->mu);
      return again_ok ? 0 : shoal__seterr(SHOAL_ERR_INVALID, "replica %s is in the pool already", url);
    }
    if (!p->rep[i] && free_slot < 0) free_slot = i;
  }
  replica_t *r = free_slot >= 0 ? calloc(1, sizeof *r) : NULL;
  if (!r) {
    pthread_mutex_unlock(&p->mu);
    return shoal__seterr(SHOAL_ERR_INVALID, "replica %s: the pool holds %d replicas at most", url,
                         SHOAL__POOL_MAX_REPLICAS);
  }
  snprintf(r->url, sizeof r->url, "%s", url);
  r->service_s = service_s > 0 ? service_s : 0;
  r->next_check = 0; /* checked at once */
  p->rep[free_slot] = r;
  pthread_mutex_unlock(&p->mu);
  curl_multi_wakeup(p->multi);
  return 0;
}

int shoal__pool_add(shoal__pool_t *p, const char *url) { return pool_add(p, url, 0, 0); }

int shoal__pool_join(shoal__pool_t *p, const char *url, double service_s) { return pool_add(p, url, 1, service_s); }

int shoal__pool_drop(shoal__pool_t *p, const char *url) {
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++)
    if (p->rep[i] && !p->rep[i]->draining && url && !strcmp(p->rep[i]->url, url)) {
      p->rep[i]->draining = 1;
      pthread_mutex_unlock(&p->mu);
      curl_multi_wakeup(p->multi);
      return 0;
    }
  pthread_mutex_unlock(&p->mu);
  return shoal__seterr(SHOAL_ERR_NOT_FOUND, "replica %s is not in the pool", url ? url : "(null)");
}

int shoal__pool_replicas(shoal__pool_t *p, shoal__replica_info_t *out, int max) {
  int n = 0;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++) {
    replica_t *r = p->rep[i];
    if (!r) continue;
    if (n < max) {
      shoal__replica_info_t *o = &out[n];
      snprintf(o->url, sizeof o->url, "%s", r->url);
      o->live = r->live, o->draining = r->draining, o->outstanding = r->outstanding, o->missed = r->missed;
      o->answered = r->answered, o->failed = r->failed, o->service_s = r->service_s;
    }
    n++;
  }
  pthread_mutex_unlock(&p->mu);
  return n;
}

/* "waiting" is the queue of the model the loaning policy sizes replicas by (sched/serving/slo.c: M/M/c, each
 * replica serving one request at a time in the measured service time; the simulator's backlog is the same
 * queue as a fluid): a live replica holding requests serves one of them, every other held request waits, in the
 * router's line or behind another on a replica. Not up to a replica's batch capacity: the router does not know
 * it (a replica's --max-batch, in rows, and a request's rows vary), a batch's compute grows with its rows, and
 * the policy's service time is per request; counted so, a burst that two replicas batching 32 rows take at once
 * would read 0 waiting however long their batches grow. The requests on a replica
 * that is not live (a failed try marked it) are counted as waiting: they are retried elsewhere or stuck. */
void shoal__pool_counts(shoal__pool_t *p, shoal__pool_counts_t *out) {
  pthread_mutex_lock(&p->mu);
  *out = p->c;
  out->live = 0;
  int serving = 0, measured = 0;
  double service = 0;
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++) {
    const replica_t *r = p->rep[i];
    if (!r) continue;
    out->live += r->live && !r->draining;
    if (r->live && !r->draining && r->service_s > 0) service += r->service_s, measured++;
    serving += r->live && r->outstanding > 0; /* a draining replica still serves what it holds */
  }
  out->waiting = p->held - serving;
  out->service_s = measured ? service / measured : 0;
  pthread_mutex_unlock(&p->mu);
}

void shoal__pool_stop(shoal__pool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_mutex_unlock(&p->mu);
  curl_multi_wakeup(p->multi);
  pthread_join(p->thread, NULL);
  /* what is left: in flight (their handles), waiting, submitted */
  pthread_mutex_lock(&p->mu);
  while (p->flying) {
    fwd_t *f = p->flying;
    fly_del(p, f);
    curl_multi_remove_handle(p->multi, f->easy);
    curl_easy_cleanup(f->easy);
    fail(p, f, 503, "the router is shutting down");
  }
  for (int i = 0; i < SHOAL__POOL_MAX_REPLICAS; i++) {
    replica_t *r = p->rep[i];
    if (r && r->health) {
      curl_multi_remove_handle(p->multi, r->health);
      curl_easy_cleanup(r->health);
    }
    free(r);
    p->rep[i] = NULL;
  }
  fwd_t *lists[2] = {p->wait_head, p->in_head};
  for (int l = 0; l < 2; l++)
    for (fwd_t *f = lists[l]; f;) {
      fwd_t *next = f->next;
      fail(p, f, 503, "the router is shutting down");
      f = next;
    }
  pthread_mutex_unlock(&p->mu);
  curl_multi_cleanup(p->multi);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
