/* `shoal serve`: the Open Inference Protocol over HTTP/1.1 for a model trained by `shoal train`
 * (serve.h). Requests are parsed on the HTTP thread and answered by the batcher's thread. */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "serve/batcher.h"
#include "serve/oip.h"
#include "serve/serve.h"
#include "shoal/shoal.h"
#include "train/model.h"

struct shoal__server {
  shoal__server_opts_t o;
  char name[64];
  shoal__http_t *http;
  shoal__batcher_t *batcher;
  pthread_mutex_t mu;
  int draining;
  uint64_t ok, refused, overloaded;
  shoal__latwin_t lat;
  /* the replica's own service time: the seconds it was busy (an infer request arriving or not yet answered) and
   * the CPU seconds it used, per request answered, over its recent requests (the sums halved every
   * SERVICE_WINDOW answers); its cgroup's CPU limit */
  int inside;
  double busy_since, busy_end, busy_s, cpu_last, cpu_s, busy_n;
  double cpu_limit;
};

#define SERVICE_WINDOW 256

typedef struct pending {
  shoal__http_req_t *req;
  char id[256];
} pending_t;

void shoal__server_opts_init(shoal__server_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->kind = SHOAL_MODEL_MLP;
  o->rows = 28, o->cols = 28, o->nclass = 10;
  o->http.max_body = 1 << 20;
  o->http.request_timeout_s = 10;
  o->http.max_conns = 256;
  o->http.who = "shoal serve";
  o->max_batch = 32;
  o->batch_timeout_s = 0.002;
  o->max_rows = 64;
  o->max_queue = 1024;
}

int shoal__serve_load_params(shoal_model_t *m, const char *path) {
  FILE *f = NULL;
  int rc = shoal__fopen_input(path, "--params", &f);
  if (rc) return rc;
  struct stat st;
  size_t want = m->nparams * sizeof(float);
  if (fstat(fileno(f), &st) || (size_t)st.st_size != want) {
    fclose(f);
    return shoal__seterr(SHOAL_ERR_MISMATCH,
                         "--params %s: %lld bytes, but a %s model has %zu parameters (%zu bytes of float32): "
                         "another model's file (--model)?",
                         path, (long long)st.st_size, shoal_model_kind_name(m->kind), m->nparams, want);
  }
  size_t got = fread(m->params, sizeof(float), m->nparams, f);
  fclose(f);
  if (got != m->nparams) return shoal__seterr(SHOAL_ERR_IO, "--params %s: short read", path);
  return 0;
}

static double process_cpu_s(void) {
  struct timespec t;
  return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) ? 0 : (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The batcher's answer for one request: its scores as the protocol's response. */
static void on_scores(void *arg, void *tag, const float *scores, int rows, int nclass) {
  shoal__server_t *s = arg;
  pending_t *p = tag;
  size_t len = 0;
  char *body = rows ? shoal__oip_infer_response(s->name, p->id, scores, rows, nclass, &len) : NULL;
  double now = shoal__now_s(), lat = now - shoal__http_received_at(p->req);
  double cpu = process_cpu_s();
  pthread_mutex_lock(&s->mu);
  s->busy_s += now - s->busy_since, s->busy_since = now, s->busy_n += 1;
  s->cpu_s += cpu - s->cpu_last, s->cpu_last = cpu;
  if (--s->inside == 0) s->busy_end = now;
  if (s->busy_n >= SERVICE_WINDOW) s->busy_s /= 2, s->cpu_s /= 2, s->busy_n /= 2;
  pthread_mutex_unlock(&s->mu);
  if (body) {
    shoal__latwin_add(&s->lat, now, lat);
    pthread_mutex_lock(&s->mu);
    s->ok++;
    pthread_mutex_unlock(&s->mu);
    shoal__http_reply(p->req, 200, "application/json", body, len);
  } else {
    shoal__http_reply_error(p->req, 500, "out of memory for the response");
  }
  free(p);
}

static void count(shoal__server_t *s, uint64_t *what) {
  pthread_mutex_lock(&s->mu);
  (*what)++;
  pthread_mutex_unlock(&s->mu);
}

static void infer(shoal__server_t *s, shoal__http_req_t *req) {
  if (shoal__http_header(req, "Inference-Header-Content-Length")) {
    count(s, &s->refused);
    shoal__http_reply_error(req, 400, "binary tensor data is not supported: send the tensor's \"data\" as JSON");
    return;
  }
  size_t len;
  const char *body = shoal__http_body(req, &len);
  shoal__oip_input_t in;
  int rc = shoal__oip_parse_infer(body, len, s->o.rows, s->o.cols, s->o.max_rows, &in);
  if (rc) {
    count(s, &s->refused);
    shoal__http_reply_error(req, rc == SHOAL_ERR_NOMEM ? 503 : 400, "%s", shoal_last_error());
    return;
  }
  pending_t *p = malloc(sizeof *p);
  if (!p) {
    shoal__oip_input_free(&in);
    count(s, &s->overloaded);
    shoal__http_reply_error(req, 503, "out of memory");
    return;
  }
  p->req = req;
  memcpy(p->id, in.id, sizeof p->id);
  pthread_mutex_lock(&s->mu);
  int draining = s->draining;
  if (!draining && s->inside++ == 0) { /* a busy period began when this request's line arrived (or the last ended) */
    double b = shoal__http_begun_at(req);
    s->busy_since = b > s->busy_end ? b : s->busy_end;
  }
  pthread_mutex_unlock(&s->mu);
  if (draining || shoal__batcher_submit(s->batcher, p, in.x, in.rows)) {
    if (draining) free(in.x);
    else {
      pthread_mutex_lock(&s->mu);
      s->inside--;
      pthread_mutex_unlock(&s->mu);
    }
    free(p);
    count(s, &s->overloaded);
    shoal__http_reply_error(req, 503, draining ? "this replica is draining: send the request to another"
                                               : "overloaded: %d requests are waiting already", s->o.max_queue);
  }
}

static char *stats_json(shoal__server_t *s, size_t *len);
static char *metrics_text(shoal__server_t *s, size_t *len);

/* /v2/models/NAME[/versions/1][/ready|/infer|/stats] */
static void route_model(shoal__server_t *s, shoal__http_req_t *req, const char *rest, int get, int post) {
  const char *slash = strchr(rest, '/');
  size_t nlen = slash ? (size_t)(slash - rest) : strlen(rest);
  if (nlen != strlen(s->name) || strncmp(rest, s->name, nlen)) {
    count(s, &s->refused);
    shoal__http_reply_error(req, 404, "model '%.*s' not found: this server serves '%s'", (int)(nlen > 64 ? 64 : nlen),
                            rest, s->name);
    return;
  }
  const char *what = slash ? slash + 1 : "";
  if (!strncmp(what, "versions/", 9)) {
    const char *v = what + 9, *vs = strchr(v, '/');
    if (strncmp(v, "1", vs ? (size_t)(vs - v) : strlen(v)) || (vs ? vs - v : (long)strlen(v)) != 1) {
      count(s, &s->refused);
      shoal__http_reply_error(req, 404, "model '%s' has one version, 1", s->name);
      return;
    }
    what = vs ? vs + 1 : "";
  }
  size_t blen = 0;
  char *b = NULL;
  if (!*what && get) {
    b = shoal__oip_model_metadata(s->name, shoal_model_kind_name(s->o.kind), s->o.rows, s->o.cols, s->o.nclass, &blen);
    shoal__http_reply(req, 200, "application/json", b, blen);
  } else if (!strcmp(what, "ready") && get) {
    shoal__http_reply(req, 200, "application/json", strdup("{\"ready\":true}"), 14);
  } else if (!strcmp(what, "infer") && post) {
    infer(s, req);
  } else if (!strcmp(what, "stats") && get) {
    b = stats_json(s, &blen);
    shoal__http_reply(req, 200, "application/json", b, blen);
  } else if (!*what || !strcmp(what, "ready") || !strcmp(what, "infer") || !strcmp(what, "stats")) {
    count(s, &s->refused);
    shoal__http_reply_error(req, 405, "%s is not allowed on %s", shoal__http_method(req), shoal__http_url(req));
  } else {
    count(s, &s->refused);
    shoal__http_reply_error(req, 404, "no such endpoint: %s", shoal__http_url(req));
  }
}

static void on_request(void *arg, shoal__http_req_t *req) {
  shoal__server_t *s = arg;
  const char *url = shoal__http_url(req), *m = shoal__http_method(req);
  int get = !strcmp(m, "GET") || !strcmp(m, "HEAD"), post = !strcmp(m, "POST");
  size_t blen = 0;
  char *b;
  if (!strncmp(url, "/v2/models/", 11)) {
    route_model(s, req, url + 11, get, post);
  } else if (!strcmp(url, "/v2/health/live") && get) {
    shoal__http_reply(req, 200, "application/json", strdup("{\"live\":true}"), 13);
  } else if (!strcmp(url, "/v2/health/ready") && get) {
    pthread_mutex_lock(&s->mu);
    int draining = s->draining;
    pthread_mutex_unlock(&s->mu);
    if (draining) shoal__http_reply_error(req, 503, "draining");
    else shoal__http_reply(req, 200, "application/json", strdup("{\"ready\":true}"), 14);
  } else if (!strcmp(url, "/v2") && get) {
    b = shoal__oip_server_metadata(SHOAL_VERSION_STRING, &blen);
    shoal__http_reply(req, 200, "application/json", b, blen);
  } else if (!strcmp(url, "/metrics") && get) {
    b = metrics_text(s, &blen);
    shoal__http_reply(req, 200, "text/plain; version=0.0.4", b, blen);
  } else {
    count(s, &s->refused);
    if (!strcmp(url, "/v2") || !strcmp(url, "/v2/health/live") || !strcmp(url, "/v2/health/ready") ||
        !strcmp(url, "/metrics"))
      shoal__http_reply_error(req, 405, "%s is not allowed on %s", m, url);
    else
      shoal__http_reply_error(req, 404, "no such endpoint: %s (the protocol's are /v2/health/ready, "
                                        "/v2/models/%s and /v2/models/%s/infer)", url, s->name, s->name);
  }
}

void shoal__server_stats(shoal__server_t *s, shoal__server_stats_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&s->mu);
  out->ok = s->ok;
  out->refused = s->refused;
  out->overloaded = s->overloaded;
  out->busy_per_request_s = s->busy_n > 0 ? s->busy_s / s->busy_n : 0;
  out->cpu_per_request_s = s->busy_n > 0 ? s->cpu_s / s->busy_n : 0;
  out->cpu_limit = s->cpu_limit;
  double by_cpu = s->cpu_limit > 0 ? out->cpu_per_request_s / s->cpu_limit : 0;
  out->service_per_request_s = by_cpu > out->busy_per_request_s ? by_cpu : out->busy_per_request_s;
  pthread_mutex_unlock(&s->mu);
  shoal__http_counts_t hc;
  shoal__http_counts(s->http, &hc);
  out->refused += hc.too_large; /* refused by the HTTP layer before we saw them */
  shoal__batcher_counts_t bc;
  shoal__batcher_counts(s->batcher, &bc, out->service_s, out->service_n);
  out->rows = bc.rows;
  out->batches = bc.batches;
  out->queued = bc.queued;
  shoal__latwin_total(&s->lat, &out->latency);
}

/* Triton-like statistics: counts, latency quantiles, and the measured forward time per batch size. */
static char *stats_json(shoal__server_t *s, size_t *len) {
  shoal__server_stats_t *st = malloc(sizeof *st);
  if (!st) return NULL;
  shoal__server_stats(s, st);
  char *b = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&b, &n);
  if (!f) {
    free(st);
    return NULL;
  }
  fprintf(f, "{\"model_name\":\"%s\",\"inference_count\":%llu,\"execution_count\":%llu,\"refused\":%llu,"
             "\"overloaded\":%llu,\"service_ms_per_request\":%.3f,\"busy_ms_per_request\":%.3f,\"cpu_ms_per_request\":%.3f,\"cpu_limit\":%.3f,\"latency_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"mean\":%.3f},"
             "\"batch_stats\":[",
          s->name, (unsigned long long)st->ok, (unsigned long long)st->batches, (unsigned long long)st->refused,
          (unsigned long long)st->overloaded, 1e3 * st->service_per_request_s, 1e3 * st->busy_per_request_s,
          1e3 * st->cpu_per_request_s, st->cpu_limit, 1e3 * shoal__histo_quantile(&st->latency, 0.5),
          1e3 * shoal__histo_quantile(&st->latency, 0.9), 1e3 * shoal__histo_quantile(&st->latency, 0.99),
          1e3 * st->latency.max_s, st->latency.n ? 1e3 * st->latency.sum_s / (double)st->latency.n : 0.0);
  int first = 1;
  for (int r = 1; r <= s->o.max_batch; r++)
    if (st->service_n[r]) {
      fprintf(f, "%s{\"batch_size\":%d,\"count\":%llu,\"compute_ms\":%.4f}", first ? "" : ",", r,
              (unsigned long long)st->service_n[r], 1e3 * st->service_s[r] / (double)st->service_n[r]);
      first = 0;
    }
  fprintf(f, "]}");
  fclose(f);
  free(st);
  *len = n;
  return b;
}

static char *metrics_text(shoal__server_t *s, size_t *len) {
  shoal__server_stats_t *st = malloc(sizeof *st);
  if (!st) return NULL;
  shoal__server_stats(s, st);
  shoal__http_counts_t hc;
  shoal__http_counts(s->http, &hc);
  char *b = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&b, &n);
  if (!f) {
    free(st);
    return NULL;
  }
  fprintf(f, "# TYPE shoal_serve_requests_total counter\n");
  fprintf(f, "shoal_serve_requests_total{outcome=\"ok\"} %llu\n", (unsigned long long)st->ok);
  fprintf(f, "shoal_serve_requests_total{outcome=\"refused\"} %llu\n", (unsigned long long)st->refused);
  fprintf(f, "shoal_serve_requests_total{outcome=\"overloaded\"} %llu\n", (unsigned long long)st->overloaded);
  fprintf(f, "# TYPE shoal_serve_connections_timed_out_total counter\nshoal_serve_connections_timed_out_total %llu\n",
          (unsigned long long)hc.timed_out);
  fprintf(f, "# TYPE shoal_serve_batches_total counter\nshoal_serve_batches_total %llu\n",
          (unsigned long long)st->batches);
  fprintf(f, "# TYPE shoal_serve_rows_total counter\nshoal_serve_rows_total %llu\n", (unsigned long long)st->rows);
  shoal__histo_prometheus(&st->latency, "shoal_serve_latency_seconds", "received -> answered, infer requests", f);
  fclose(f);
  free(st);
  *len = n;
  return b;
}

int shoal__server_start(const shoal__server_opts_t *o, shoal__server_t **out) {
  if (!o || !out || !o->params_path) return shoal__seterr(SHOAL_ERR_INVALID, "shoal serve: --params FILE is needed");
  if (o->max_batch < 1 || o->max_batch > SHOAL__SERVE_MAX_BATCH)
    return shoal__seterr(SHOAL_ERR_INVALID, "--max-batch %d: expected 1..%d", o->max_batch, SHOAL__SERVE_MAX_BATCH);
  shoal__server_t *s = calloc(1, sizeof *s);
  if (!s) return shoal__seterr(SHOAL_ERR_NOMEM, "shoal serve: out of memory");
  s->o = *o;
  if (!s->o.rows) s->o.rows = 28, s->o.cols = 28;
  if (!s->o.nclass) s->o.nclass = 10;
  snprintf(s->name, sizeof s->name, "%s", o->name ? o->name : shoal_model_kind_name(o->kind));
  pthread_mutex_init(&s->mu, NULL);
  shoal__latwin_init(&s->lat);
  s->cpu_limit = shoal__serve_cpu_limit(), s->cpu_last = process_cpu_s();
  shoal_model_t *m = NULL;
  openblas_set_num_threads(o->blas_threads > 0 ? o->blas_threads : 1);
  int rc = shoal_model_create(o->kind, s->o.rows, s->o.cols, s->o.nclass, o->max_batch, 1, &m);
  if (!rc) rc = shoal__serve_load_params(m, o->params_path);
  if (!rc) rc = shoal__batcher_start(m, o->max_batch, o->batch_timeout_s, o->max_queue, on_scores, s, &s->batcher);
  if (rc) {
    shoal_model_destroy(m);
    goto out_free;
  }
  if ((rc = shoal__http_start(&s->o.http, on_request, s, &s->http))) {
    shoal__batcher_stop(s->batcher);
    goto out_free;
  }
  *out = s;
  return 0;
out_free:
  shoal__latwin_destroy(&s->lat);
  pthread_mutex_destroy(&s->mu);
  free(s);
  return rc;
}

int shoal__server_port(const shoal__server_t *s) { return shoal__http_port(s->http); }
const char *shoal__server_model_name(const shoal__server_t *s) { return s->name; }

int shoal__server_drain(shoal__server_t *s, double timeout_s) {
  pthread_mutex_lock(&s->mu);
  s->draining = 1;
  pthread_mutex_unlock(&s->mu);
  shoal__http_quiesce(s->http);
  shoal__deadline_t d = shoal__deadline_in(timeout_s);
  while (shoal__http_pending(s->http) > 0) {
    if (shoal__deadline_passed(d))
      return shoal__seterr(SHOAL_ERR_TIMEOUT, "shoal serve: %d requests still unanswered after %g s of draining",
                           shoal__http_pending(s->http), timeout_s);
    shoal__sleep_s(0.005);
  }
  return 0;
}

void shoal__server_stop(shoal__server_t *s) {
  if (!s) return;
  shoal__batcher_stop(s->batcher); /* answers what is queued */
  shoal__http_stop(s->http);
  shoal__latwin_destroy(&s->lat);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
