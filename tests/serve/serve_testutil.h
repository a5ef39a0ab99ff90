/* Helpers of the serving tests: a model's parameters file, HTTP through libcurl, raw sockets. */
#ifndef SHOAL_TESTS_SERVE_UTIL_H
#define SHOAL_TESTS_SERVE_UTIL_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../runner.h"
#include "serve/loadgen.h"
#include "serve/serve.h"
#include "shoal/train.h"

typedef struct {
  char *b;
  size_t n;
} tbuf_t;

static size_t tbuf_add(char *p, size_t s, size_t n, void *arg) {
  tbuf_t *t = arg;
  t->b = realloc(t->b, t->n + s * n + 1);
  memcpy(t->b + t->n, p, s * n);
  t->n += s * n;
  t->b[t->n] = 0;
  return s * n;
}

/* method + URL (+ body): the status (0: no answer), the answer in *out (malloc'ed, may be NULL). */
/* expect_continue: send "Expect: 100-continue" and the body only once the server asks for it (what curl does by
 * itself for big bodies), so that a body the server refuses before reading it is never sent: without it the
 * server's early answer races the client's upload and a reset can lose it. */
static inline int http_do_expect(const char *method, const char *url, const char *body, char **out, int expect_continue) {
  CURL *e = curl_easy_init();
  tbuf_t t = {0};
  struct curl_slist *h = curl_slist_append(NULL, expect_continue ? "Expect: 100-continue" : "Expect:");
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, tbuf_add);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  if (body) curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  long code = 0;
  if (curl_easy_perform(e) == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(e);
  curl_slist_free_all(h);
  if (out) *out = t.b;
  else free(t.b);
  return (int)code;
}

static inline int http_do(const char *method, const char *url, const char *body, char **out) {
  return http_do_expect(method, url, body, out, 0);
}

/* A model with random parameters (seed) written as `shoal train --params-out` writes them. */
static inline shoal_model_t *write_params(shoal_model_kind_t kind, uint64_t seed, const char *path) {
  shoal_model_t *m = NULL;
  CHECK_OK(shoal_model_create(kind, 28, 28, 10, 64, seed, &m));
  FILE *f = fopen(path, "wb");
  CHECK(f);
  CHECK(fwrite(shoal_model_params(m), sizeof(float), shoal_model_nparams(m), f) == shoal_model_nparams(m));
  fclose(f);
  return m;
}

/* An infer body of n rows: pixel (r, k) = ((r * 7 + k * 13) % 256) / 255 as FP32. */
static inline char *infer_body(int n) {
  size_t cap = (size_t)n * 784 * 12 + 256, len = 0;
  char *b = malloc(cap);
  len += (size_t)snprintf(b, cap, "{\"id\":\"t%d\",\"inputs\":[{\"name\":\"input\",\"shape\":[%d,784],\"datatype\":\"FP32\",\"data\":[", n, n);
  for (int r = 0; r < n; r++)
    for (int k = 0; k < 784; k++)
      len += (size_t)snprintf(b + len, cap - len, "%s%.9g", r || k ? "," : "", ((r * 7 + k * 13) % 256) / 255.0);
  snprintf(b + len, cap - len, "]}]}");
  return b;
}

static inline int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

static inline shoal__server_t *start_server(const char *params, int max_batch, double batch_timeout_s, int max_queue) {
  shoal__server_opts_t o;
  shoal__server_opts_init(&o);
  o.params_path = params;
  o.http.addr = "127.0.0.1";
  o.max_batch = max_batch;
  o.batch_timeout_s = batch_timeout_s;
  o.max_queue = max_queue;
  shoal__server_t *s = NULL;
  CHECK_OK(shoal__server_start(&o, &s));
  return s;
}

/* a load generator run on a thread (pthread_create(..., loadgen_thread, &arg)) */
typedef struct {
  shoal__loadgen_opts_t o;
  shoal__loadgen_result_t res;
  int rc;
} lg_arg_t;

static inline void *loadgen_thread(void *arg) {
  lg_arg_t *a = arg;
  a->rc = shoal__loadgen_run(&a->o, &a->res);
  return NULL;
}

/* The tests' load under a change of replicas: 100 requests/s for 3 s (Poisson, seed 5) into times, sent to
 * url by a load generator on thread *t (join it, then read a->res). */
static inline void load_start(lg_arg_t *a, shoal__reqtimes_t *times, const char *url, pthread_t *t) {
  CHECK_OK(shoal__reqtimes_poisson(100, 3, 5, 0, times));
  *a = (lg_arg_t){.rc = -1};
  shoal__loadgen_opts_init(&a->o);
  a->o.url = url;
  a->o.arrivals = times;
  a->o.timeout_s = 60;
  CHECK(pthread_create(t, NULL, loadgen_thread, a) == 0);
}

#endif
