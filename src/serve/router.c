/* `shoal serve --router`: the Open Inference Protocol's endpoints forwarded to a pool of replicas
 * (pool.h), replicas added and dropped while it runs, P50/P99 and the request rate (serve.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "serve/oip.h"
#include "serve/serve.h"
#include "shoal/shoal.h"

struct shoal__router {
  shoal__router_opts_t o;
  shoal__http_t *http;
  shoal__pool_t *pool;
  shoal__latwin_t lat;
};

void shoal__router_opts_init(shoal__router_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->http.max_body = 1 << 20;
  o->http.request_timeout_s = 10;
  o->http.max_conns = 1024;
  o->http.who = "shoal serve --router";
  o->pool.try_timeout_s = 5;
  o->pool.request_timeout_s = 30;
  o->pool.max_tries = 3;
  o->pool.health_every_s = 0.25;
  o->pool.drop_after = 20;
  o->pool.max_requests = 4096;
  o->window_s = 10;
}

void shoal__router_stats(shoal__router_t *r, shoal__router_stats_t *out) {
  memset(out, 0, sizeof *out);
  shoal__pool_counts(r->pool, &out->c);
  shoal__histo_t w;
  shoal__latwin_window(&r->lat, shoal__now_s(), r->o.window_s, &w, &out->rate);
  out->p50_s = shoal__histo_quantile(&w, 0.5);
  out->p99_s = shoal__histo_quantile(&w, 0.99);
  shoal__latwin_total(&r->lat, &out->total);
}

static char *replicas_json(shoal__router_t *r, size_t *len) {
  shoal__replica_info_t *ri = calloc(SHOAL__POOL_MAX_REPLICAS, sizeof *ri);
  if (!ri) return NULL;
  int n = shoal__pool_replicas(r->pool, ri, SHOAL__POOL_MAX_REPLICAS);
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++)
    json_array_append_new(a, json_pack("{s:s,s:b,s:b,s:i,s:i,s:I,s:I,s:f}", "url", ri[i].url, "live", ri[i].live,
                                       "draining", ri[i].draining, "outstanding", ri[i].outstanding, "missed_checks",
                                       ri[i].missed, "answered", (json_int_t)ri[i].answered, "failed",
                                       (json_int_t)ri[i].failed, "service_s", ri[i].service_s));
  free(ri);
  char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  if (s) *len = strlen(s);
  return s;
}

static char *stats_json(shoal__router_t *r, size_t *len) {
  shoal__router_stats_t st;
  shoal__router_stats(r, &st);
  json_t *j = json_pack("{s:f,s:f,s:f,s:i,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:i,s:f,s:f,s:f}", "p50_ms", 1e3 * st.p50_s,
                        "p99_ms", 1e3 * st.p99_s, "rate", st.rate, "waiting", st.c.waiting, "in_line", st.c.in_line,
                        "window_s", r->o.window_s, "accepted",
                        (json_int_t)st.c.accepted, "answered", (json_int_t)st.c.answered, "ok", (json_int_t)st.c.ok,
                        "failed", (json_int_t)st.c.failed, "retries", (json_int_t)st.c.retries, "refused",
                        (json_int_t)st.c.refused, "in_flight", st.c.in_flight, "live_replicas", st.c.live,
                        "total_p50_ms", 1e3 * shoal__histo_quantile(&st.total, 0.5), "total_p99_ms",
                        1e3 * shoal__histo_quantile(&st.total, 0.99), "service_s", st.c.service_s);
  char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
  json_decref(j);
  if (s) *len = strlen(s);
  return s;
}

static char *metrics_text(shoal__router_t *r, size_t *len) {
  shoal__router_stats_t st;
  shoal__router_stats(r, &st);
  char *b = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&b, &n);
  if (!f) return NULL;
  fprintf(f, "# TYPE shoal_router_requests_total counter\n");
  fprintf(f, "shoal_router_requests_total{outcome=\"ok\"} %llu\n", (unsigned long long)st.c.ok);
  fprintf(f, "shoal_router_requests_total{outcome=\"failed\"} %llu\n", (unsigned long long)st.c.failed);
  fprintf(f, "shoal_router_requests_total{outcome=\"refused\"} %llu\n", (unsigned long long)st.c.refused);
  fprintf(f, "# TYPE shoal_router_retries_total counter\nshoal_router_retries_total %llu\n",
          (unsigned long long)st.c.retries);
  fprintf(f, "# TYPE shoal_router_live_replicas gauge\nshoal_router_live_replicas %d\n", st.c.live);
  fprintf(f, "# TYPE shoal_router_in_flight gauge\nshoal_router_in_flight %d\n", st.c.in_flight);
  fprintf(f, "# HELP shoal_router_waiting held requests beyond one per live replica holding any\n");
  fprintf(f, "# TYPE shoal_router_waiting gauge\nshoal_router_waiting %d\n", st.c.waiting);
  fprintf(f, "# HELP shoal_router_latency_window_seconds P50/P99 over the last %d s\n", r->o.window_s);
  fprintf(f, "# TYPE shoal_router_latency_window_seconds gauge\n");
  fprintf(f, "shoal_router_latency_window_seconds{quantile=\"0.5\"} %.6f\n", st.p50_s);
  fprintf(f, "shoal_router_latency_window_seconds{quantile=\"0.99\"} %.6f\n", st.p99_s);
  fprintf(f, "# TYPE shoal_router_request_rate gauge\nshoal_router_request_rate %.3f\n", st.rate);
  shoal__histo_prometheus(&st.total, "shoal_router_latency_seconds", "received -> answered, by a replica", f);
  fclose(f);
  *len = n;
  return b;
}

/* POST /router/replicas {"add": URL[, "service_s": S]} or {"drop": URL}; an add of a URL held already only takes
 * its service time (replicas repeat their joins with their measured seconds a request) */
static void change_replicas(shoal__router_t *r, shoal__http_req_t *req) {
  size_t len;
  const char *body = shoal__http_body(req, &len);
  json_error_t je;
  json_t *j = json_loadb(body, len, 0, &je);
  const char *add = json_string_value(json_object_get(j, "add")), *drop = json_string_value(json_object_get(j, "drop"));
  json_t *svc = json_object_get(j, "service_s");
  int rc;
  if (!j)
    rc = shoal__seterr(SHOAL_ERR_PARSE, "the body is not JSON: line %d column %d: %s", je.line, je.column, je.text);
  else if (!add == !drop)
    rc = shoal__seterr(SHOAL_ERR_INVALID, "expected {\"add\": \"http://HOST:PORT\"} or {\"drop\": \"http://HOST:PORT\"}");
  else if (svc && !(json_is_number(svc) && json_number_value(svc) >= 0 && json_number_value(svc) < 3600))
    rc = shoal__seterr(SHOAL_ERR_INVALID, "\"service_s\": expected the replica's seconds a request, 0 to 3600");
  else
    rc = add ? shoal__pool_join(r->pool, add, svc ? json_number_value(svc) : 0) : shoal__pool_drop(r->pool, drop);
  if (rc)
    shoal__http_reply_error(req, rc == SHOAL_ERR_NOT_FOUND ? 404 : 400, "%s", shoal_last_error());
  else
    shoal__http_reply(req, 200, "application/json", strdup("{}"), 2);
  json_decref(j);
}

static void reply_text(shoal__http_req_t *req, const char *ctype, char *b, size_t len) {
  if (b) shoal__http_reply(req, 200, ctype, b, len);
  else shoal__http_reply_error(req, 503, "out of memory");
}

static void on_request(void *arg, shoal__http_req_t *req) {
  shoal__router_t *r = arg;
  const char *url = shoal__http_url(req), *m = shoal__http_method(req);
  int get = !strcmp(m, "GET"), post = !strcmp(m, "POST");
  size_t len = 0;
  if (!strncmp(url, "/v2/models/", 11)) {
    shoal__pool_submit(r->pool, req);
  } else if (!strcmp(url, "/v2/health/live") && get) {
    shoal__http_reply(req, 200, "application/json", strdup("{\"live\":true}"), 13);
  } else if (!strcmp(url, "/v2/health/ready") && get) {
    shoal__pool_counts_t c;
    shoal__pool_counts(r->pool, &c);
    if (c.live) shoal__http_reply(req, 200, "application/json", strdup("{\"ready\":true}"), 14);
    else shoal__http_reply_error(req, 503, "no live replica");
  } else if (!strcmp(url, "/v2") && get) {
    char *b = shoal__oip_server_metadata(SHOAL_VERSION_STRING, &len);
    reply_text(req, "application/json", b, len);
  } else if (!strcmp(url, "/router/replicas") && (get || post)) {
    if (post) change_replicas(r, req);
    else {
      char *b = replicas_json(r, &len);
      reply_text(req, "application/json", b, len);
    }
  } else if (!strcmp(url, "/router/stats") && get) {
    char *b = stats_json(r, &len);
    reply_text(req, "application/json", b, len);
  } else if (!strcmp(url, "/metrics") && get) {
    char *b = metrics_text(r, &len);
    reply_text(req, "text/plain; version=0.0.4", b, len);
  } else {
    shoal__http_reply_error(req, 404, "no such endpoint: %s %s (the router serves /v2/..., /router/replicas, "
                                      "/router/stats, /metrics)", m, url);
  }
}

int shoal__router_start(const shoal__router_opts_t *o, shoal__router_t **out) {
  if (!o || !out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal__router_start: NULL argument");
  if (o->pool.max_tries < 1 || o->pool.try_timeout_s <= 0 || o->pool.request_timeout_s <= 0 || o->window_s < 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "router: tries, timeouts and the window must be positive");
  shoal__router_t *r = calloc(1, sizeof *r);
  if (!r) return shoal__seterr(SHOAL_ERR_NOMEM, "router: out of memory");
  r->o = *o;
  shoal__latwin_init(&r->lat);
  int rc = shoal__pool_start(&r->o.pool, &r->lat, &r->pool);
  if (!rc && (rc = shoal__http_start(&r->o.http, on_request, r, &r->http))) shoal__pool_stop(r->pool);
  if (rc) {
    shoal__latwin_destroy(&r->lat);
    free(r);
    return rc;
  }
  *out = r;
  return 0;
}

int shoal__router_port(const shoal__router_t *r) { return shoal__http_port(r->http); }
shoal__pool_t *shoal__router_pool(shoal__router_t *r) { return r->pool; }

void shoal__router_stop(shoal__router_t *r, double timeout_s) {
  if (!r) return;
  shoal__http_quiesce(r->http);
  shoal__deadline_t d = shoal__deadline_in(timeout_s);
  while (shoal__http_pending(r->http) > 0 && !shoal__deadline_passed(d)) shoal__sleep_s(0.01);
  shoal__pool_stop(r->pool); /* answers the rest 503 */
  shoal__http_stop(r->http);
  shoal__latwin_destroy(&r->lat);
  free(r);
}
