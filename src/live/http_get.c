/* One bounded HTTP GET (http_get.h). */
#include "live/http_get.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sink {
  char *b;
  size_t n, cap;
} sink_t;

static size_t keep(char *p, size_t size, size_t nm, void *arg) {
  sink_t *s = arg;
  size_t k = size * nm;
  if (s->n + k > s->cap) return 0; /* (bounded: the answers asked for are small; a longer one is not one) */
  char *nb = realloc(s->b, s->n + k + 1);
  if (!nb) return 0;
  memcpy(nb + s->n, p, k);
  s->b = nb, s->n += k, s->b[s->n] = 0;
  return k;
}

int shoal__live_http_get(const char *url, const char *abstract, double deadline_s, size_t cap, char **body,
                         shoal__live_get_fail_t *fail) {
  memset(fail, 0, sizeof *fail);
  CURL *c = curl_easy_init();
  if (!c) {
    fail->curl = -1;
    snprintf(fail->err, sizeof fail->err, "curl_easy_init failed");
    return -1;
  }
  char err[CURL_ERROR_SIZE] = "";
  sink_t s = {NULL, 0, cap};
  if (abstract) curl_easy_setopt(c, CURLOPT_ABSTRACT_UNIX_SOCKET, abstract);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(deadline_s * 1000));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  CURLcode r = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &fail->http);
  curl_easy_cleanup(c);
  fail->curl = r;
  if (r != CURLE_OK) snprintf(fail->err, sizeof fail->err, "%s", err[0] ? err : curl_easy_strerror(r));
  if (r != CURLE_OK || fail->http != 200) {
    free(s.b);
    return -1;
  }
  *body = s.b ? s.b : strdup("");
  return *body ? 0 : -1;
}
