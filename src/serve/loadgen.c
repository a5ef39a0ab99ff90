/* The open-loop load generator (loadgen.h): one thread driving libcurl's multi interface. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "serve/loadgen.h"
#include "shoal/train.h"

#define NBODIES 256

typedef struct slot {
  CURL *e;
  size_t idx;           /* which request */
  char *ans;
  size_t alen, acap;
  struct slot *next;    /* free list */
} slot_t;

typedef struct {
  const shoal__loadgen_opts_t *o;
  char *body[NBODIES];
  size_t blen[NBODIES];
  uint8_t *labels;      /* NBODIES x rows */
  double *lat;          /* per request: latency, NAN = failed */
  short *status;        /* per request: HTTP status, 0 = none, -1 = dropped */
  double *sent_at;
  unsigned char *correct;
  slot_t *slots, *free_slots;
  CURLM *multi;
  struct curl_slist *hdrs;
  char url[512];
  double t0;
  int inflight;
} gen_t;

void shoal__loadgen_opts_init(shoal__loadgen_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->model = "mlp";
  o->rows = 1;
  o->timeout_s = 10;
  o->max_inflight = 1000;
  o->slo_s = 0.1;
  o->window_s = 10;
}

static size_t on_data(char *ptr, size_t size, size_t n, void *arg) {
  slot_t *s = arg;
  size_t len = size * n;
  if (s->alen + len + 1 > (4u << 20)) return 0;
  if (s->alen + len + 1 > s->acap) {
    size_t cap = s->acap ? s->acap : 4096;
    while (cap < s->alen + len + 1) cap *= 2;
    char *a = realloc(s->ans, cap);
    if (!a) return 0;
    s->ans = a;
    s->acap = cap;
  }
  memcpy(s->ans + s->alen, ptr, len);
  s->alen += len;
  s->ans[s->alen] = 0;
  return len;
}

/* NBODIES request bodies of `rows` test images each (UINT8 pixels), and their labels. */
static int make_bodies(gen_t *g) {
  shoal_dataset_t *d = NULL;
  int rc = shoal_dataset_load_dir(g->o->data_dir ? g->o->data_dir : SHOAL_FASHION_MNIST_DIR, "t10k", 0, &d);
  if (rc) return rc;
  int rows = g->o->rows, px = d->rows * d->cols;
  if (!(g->labels = malloc((size_t)NBODIES * rows))) rc = shoal__seterr(SHOAL_ERR_NOMEM, "loadgen: out of memory");
  for (int b = 0; b < NBODIES && !rc; b++) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return shoal__seterr(SHOAL_ERR_NOMEM, "loadgen: out of memory");
    fprintf(m, "{\"id\":\"%d\",\"inputs\":[{\"name\":\"input\",\"shape\":[%d,%d],\"datatype\":\"UINT8\",\"data\":[", b,
            rows, px);
    for (int r = 0; r < rows; r++) {
      size_t img = ((size_t)b * rows + r) % d->n;
      g->labels[b * rows + r] = d->y[img];
      for (int k = 0; k < px; k++) { /* the reader's normalization undone: the raw pixel */
        long v = lround((d->x[img * px + k] * 0.3530 + 0.2860) * 255.0);
        fprintf(m, "%s%ld", r || k ? "," : "", v < 0 ? 0 : v > 255 ? 255 : v);
      }
    }
    fprintf(m, "]}]}");
    fclose(m);
    g->body[b] = text;
    g->blen[b] = len;
  }
  shoal_dataset_destroy(d);
  return rc;
}

static int start(gen_t *g, size_t i, double now) {
  slot_t *s = g->free_slots;
  g->free_slots = s->next;
  s->idx = i;
  s->alen = 0;
  CURL *e = curl_easy_init();
  if (!e) return -1;
  int b = (int)(i % NBODIES);
  curl_easy_setopt(e, CURLOPT_URL, g->url);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(g->o->timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, g->hdrs);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, g->body[b]);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)g->blen[b]);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(e, CURLOPT_PRIVATE, s);
  s->e = e;
  curl_multi_add_handle(g->multi, e);
  g->sent_at[i] = now;
  g->inflight++;
  return 0;
}

/* Rows whose argmax is the label, in an answer. */
static int count_correct(gen_t *g, slot_t *s, int *checked) {
  json_error_t je;
  json_t *j = json_loadb(s->ans ? s->ans : "", s->alen, 0, &je);
  json_t *data = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
  int rows = g->o->rows, b = (int)(s->idx % NBODIES), ok = 0;
  size_t C = json_array_size(data) / (size_t)rows;
  for (int r = 0; C > 0 && r < rows; r++) {
    size_t best = 0;
    for (size_t c = 1; c < C; c++)
      if (json_number_value(json_array_get(data, r * C + c)) > json_number_value(json_array_get(data, r * C + best)))
        best = c;
    ok += best == g->labels[b * rows + r];
  }
  *checked = C > 0 ? rows : 0;
  json_decref(j);
  return ok;
}

static void collect(gen_t *g, shoal__loadgen_result_t *res) {
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(g->multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    slot_t *s = NULL;
    long code = 0;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
    curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
    CURLcode cr = msg->data.result;
    double now = shoal__now_s() - g->t0;
    curl_multi_remove_handle(g->multi, s->e);
    curl_easy_cleanup(s->e);
    size_t i = s->idx;
    g->status[i] = (short)(cr == CURLE_OK ? code : 0);
    res->by_status[cr == CURLE_OK && code >= 100 && code < 600 ? code / 100 : 0]++;
    if (cr == CURLE_OK && code == 200) {
      g->lat[i] = now - g->o->arrivals->t[i];
      int checked = 0;
      res->rows_correct += (size_t)count_correct(g, s, &checked);
      res->rows_checked += (size_t)checked;
      g->correct[i] = 1;
    }
    s->next = g->free_slots;
    g->free_slots = s;
    g->inflight--;
  }
}

/* The replay: requests leave at their times; the loop waits on the answers meanwhile. */
static void replay(gen_t *g, shoal__loadgen_result_t *res) {
  const shoal__reqtimes_t *a = g->o->arrivals;
  size_t i = 0;
  g->t0 = shoal__now_s();
  double next_report = g->o->window_s;
  while (i < a->n || g->inflight > 0) {
    double now = shoal__now_s() - g->t0;
    for (; i < a->n && a->t[i] <= now; i++) {
      if (now - a->t[i] > res->max_lag_s) res->max_lag_s = now - a->t[i];
      if (g->inflight >= g->o->max_inflight || start(g, i, now)) g->status[i] = -1; /* dropped */
    }
    int running;
    curl_multi_perform(g->multi, &running);
    collect(g, res);
    if (g->o->progress && now >= next_report) {
      printf("loadgen: %6.0f s  sent %zu of %zu  in flight %d\n", now, i, a->n, g->inflight);
      fflush(stdout);
      next_report += g->o->window_s;
    }
    double wait = i < a->n ? a->t[i] - (shoal__now_s() - g->t0) : 0.05;
    int ms = wait <= 0 ? 0 : wait > 0.05 ? 50 : (int)(wait * 1000);
    if (ms > 0 || running) curl_multi_poll(g->multi, NULL, 0, ms, NULL);
  }
  res->duration_s = shoal__now_s() - g->t0;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Per window of scheduled time: counts, P50/P99 (failures as infinite), whether P99 met the SLO. */
static int windows(gen_t *g, shoal__loadgen_result_t *res) {
  const shoal__reqtimes_t *a = g->o->arrivals;
  FILE *f = NULL;
  if (g->o->timeline_csv && !(f = fopen(g->o->timeline_csv, "w")))
    return shoal__seterr(SHOAL_ERR_IO, "--timeline %s: %s", g->o->timeline_csv, strerror(errno));
  if (f) fprintf(f, "t_s,requests,ok,failed,rate,p50_ms,p99_ms,slo_met\n");
  double *v = malloc((a->n ? a->n : 1) * sizeof *v);
  if (!v) {
    if (f) fclose(f);
    return shoal__seterr(SHOAL_ERR_NOMEM, "loadgen: out of memory");
  }
  size_t i = 0;
  for (double w0 = 0; i < a->n; w0 += g->o->window_s) {
    size_t n = 0, ok = 0;
    for (; i < a->n && a->t[i] < w0 + g->o->window_s; i++, n++) {
      v[n] = g->status[i] == 200 ? g->lat[i] : INFINITY;
      ok += g->status[i] == 200;
    }
    if (!n) continue;
    qsort(v, n, sizeof *v, cmp_double);
    double p50 = v[(size_t)ceil(0.5 * n) - 1], p99 = v[(size_t)ceil(0.99 * n) - 1];
    int met = p99 <= g->o->slo_s;
    res->windows++;
    res->windows_met += met;
    if (f)
      fprintf(f, "%.1f,%zu,%zu,%zu,%.3f,%.3f,%.3f,%d\n", w0, n, ok, n - ok, (double)n / g->o->window_s,
              isinf(p50) ? -1 : 1e3 * p50, isinf(p99) ? -1 : 1e3 * p99, met);
  }
  free(v);
  if (f && fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "--timeline %s: %s", g->o->timeline_csv, strerror(errno));
  return 0;
}

static int write_requests(gen_t *g) {
  if (!g->o->requests_csv) return 0;
  FILE *f = fopen(g->o->requests_csv, "w");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "--requests-csv %s: %s", g->o->requests_csv, strerror(errno));
  fprintf(f, "i,t_s,sent_s,status,latency_ms\n");
  for (size_t i = 0; i < g->o->arrivals->n; i++)
    fprintf(f, "%zu,%.6f,%.6f,%d,%.3f\n", i, g->o->arrivals->t[i], g->sent_at[i], g->status[i],
            g->status[i] == 200 ? 1e3 * g->lat[i] : -1.0);
  if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "--requests-csv %s: %s", g->o->requests_csv, strerror(errno));
  return 0;
}

static void gen_free(gen_t *g) {
  for (int b = 0; b < NBODIES; b++) free(g->body[b]);
  if (g->slots)
    for (int k = 0; k < g->o->max_inflight; k++) free(g->slots[k].ans);
  free(g->slots), free(g->labels), free(g->lat), free(g->status), free(g->sent_at), free(g->correct);
  curl_slist_free_all(g->hdrs);
  if (g->multi) curl_multi_cleanup(g->multi);
}

int shoal__loadgen_run(const shoal__loadgen_opts_t *o, shoal__loadgen_result_t *res) {
  if (!o || !res || !o->url || !o->arrivals || !o->arrivals->n || o->rows < 1 || o->max_inflight < 1 ||
      !(o->timeout_s > 0) || !(o->window_s > 0))
    return shoal__seterr(SHOAL_ERR_INVALID, "loadgen: a URL, arrivals, rows >= 1, positive limits are needed");
  curl_global_init(CURL_GLOBAL_NOTHING);
  gen_t g = {.o = o};
  shoal__loadgen_result_t r = {0};
  size_t n = o->arrivals->n;
  snprintf(g.url, sizeof g.url, "%s/v2/models/%s/infer", o->url, o->model);
  int rc = make_bodies(&g);
  g.lat = malloc(n * sizeof *g.lat);
  g.status = calloc(n, sizeof *g.status);
  g.sent_at = calloc(n, sizeof *g.sent_at);
  g.correct = calloc(n, 1);
  g.slots = calloc((size_t)o->max_inflight, sizeof *g.slots);
  g.multi = curl_multi_init();
  g.hdrs = curl_slist_append(curl_slist_append(NULL, "Content-Type: application/json"), "Expect:");
  if (!rc && (!g.lat || !g.status || !g.sent_at || !g.correct || !g.slots || !g.multi || !g.hdrs))
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "loadgen: out of memory for %zu requests", n);
  if (!rc) {
    for (int k = 0; k < o->max_inflight; k++) {
      g.slots[k].next = g.free_slots;
      g.free_slots = &g.slots[k];
    }
    curl_multi_setopt(g.multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)o->max_inflight);
    replay(&g, &r);
    r.requests = n;
    for (size_t i = 0; i < n; i++) {
      r.ok += g.status[i] == 200;
      r.dropped += g.status[i] == -1;
      if (g.status[i] == 200) shoal__histo_add(&r.latency, g.lat[i]);
    }
    r.failed = n - r.ok;
    rc = windows(&g, &r);
    if (!rc) rc = write_requests(&g);
  }
  gen_free(&g);
  if (!rc) *res = r;
  return rc;
}
