/* Arrival processes (reqtimes.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "core/rng.h"
#include "core/reqtimes.h"

typedef struct {
  double *t;
  size_t n, cap, max;
} vec_t;

static int push(vec_t *v, double t, const char *what) {
  if (v->n >= v->max)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: more than %zu arrivals (shorten the duration or lower the rate)", what,
                         v->max);
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 1024;
    double *p = realloc(v->t, cap * sizeof *p);
    if (!p) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", what);
    v->t = p;
    v->cap = cap;
  }
  v->t[v->n++] = t;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static long days_from_civil(long y, long m, long d) {
  y -= m <= 2;
  long era = (y >= 0 ? y : y - 399) / 400, yoe = y - era * 400;
  long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1, doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* The first field: a timestamp or seconds. 0 and *t, or -1. */
static int parse_time(const char *s, double *t) {
  int Y, M, D, h, m, n = 0;
  double sec;
  if (sscanf(s, "%4d-%2d-%2d %2d:%2d:%lf%n", &Y, &M, &D, &h, &m, &sec, &n) == 6) {
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || !(sec >= 0 && sec < 61)) return -1;
    *t = (double)days_from_civil(Y, M, D) * 86400.0 + h * 3600.0 + m * 60.0 + sec;
    return s[n] == 0 || s[n] == ',' || s[n] == '\r' || s[n] == '\n' ? 0 : -1;
  }
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || (*end && *end != ',' && *end != '\r' && *end != '\n')) return -1;
  *t = v;
  return 0;
}

static int read_times(const char *what, const char *path, vec_t *v) {
  FILE *f;
  int rc = shoal__fopen_input(path, what, &f);
  if (rc) return rc;
  char line[4096];
  long lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: line longer than %zu bytes", path, lineno, sizeof line - 2);
      break;
    }
    const char *s = line + (lineno == 1 ? shoal__utf8_bom(line, len) : 0);
    if (lineno == 1) { /* the header */
      if (!strncmp(s, "TIMESTAMP", 9) || !strncmp(s, "timestamp", 9) || !strncmp(s, "time", 4)) continue;
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:1: expected a header whose first column is TIMESTAMP or time", path);
      break;
    }
    if (*s == '\n' || *s == '\r' || !*s) continue;
    double t;
    if (parse_time(s, &t)) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: '%.*s' is not a time (YYYY-MM-DD HH:MM:SS.frac or seconds)", path,
                         lineno, (int)(strcspn(s, ",\r\n") > 40 ? 40 : strcspn(s, ",\r\n")), s);
      break;
    }
    if ((rc = push(v, t, path))) break;
  }
  if (!rc && ferror(f)) rc = shoal__seterr(SHOAL_ERR_IO, "%s: read error", path);
  if (!rc && v->n == 0) rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: no arrivals", path);
  fclose(f);
  return rc;
}

static int check_max(size_t max, vec_t *v) {
  v->max = max ? max : 10000000;
  return 0;
}

int shoal__reqtimes_trace(const char *what, const char *path, double start_s, double duration_s, double speedup, double rate_scale,
                          uint64_t seed, size_t max, shoal__reqtimes_t *out) {
  if (!path || !out || !(speedup > 0) || !(rate_scale > 0) || !(start_s >= 0) || !(duration_s >= 0))
    return shoal__seterr(SHOAL_ERR_INVALID, "trace: speedup and rate scale must be > 0, start and duration >= 0");
  vec_t raw = {0}, v = {0};
  raw.max = 100000000;
  check_max(max, &v);
  int rc = read_times(what ? what : "request trace", path, &raw);
  if (rc) goto out;
  qsort(raw.t, raw.n, sizeof *raw.t, cmp_double); /* recorded traces are sorted; others are made so */
  double t0 = raw.t[0] + start_s, t1 = duration_s > 0 ? t0 + duration_s * speedup : INFINITY;
  shoal_rng_t rng;
  shoal_rng_seed2(&rng, seed, 0x61727269ULL);
  for (size_t i = 0; i < raw.n && !rc; i++) {
    if (raw.t[i] < t0 || raw.t[i] >= t1) continue;
    double t = (raw.t[i] - t0) / speedup;
    double gap = (i + 1 < raw.n && raw.t[i + 1] < t1 ? raw.t[i + 1] - raw.t[i] : 0) / speedup;
    double copies = floor(rate_scale), frac = rate_scale - copies;
    int k = (int)copies + (shoal_rng_uniform(&rng) < frac);
    for (int c = 0; c < k && !rc; c++) rc = push(&v, c ? t + gap * shoal_rng_uniform(&rng) : t, path);
  }
  if (!rc && v.n == 0)
    rc = shoal__seterr(SHOAL_ERR_INVALID, "%s: no arrival in the part replayed (from %g s after its first, %g s x speedup %g; 0 s: to the end)",
                       path, start_s, duration_s, speedup);
  if (!rc) {
    qsort(v.t, v.n, sizeof *v.t, cmp_double);
    out->t = v.t;
    out->n = v.n;
    v.t = NULL;
  }
out:
  free(raw.t);
  free(v.t);
  return rc;
}

int shoal__reqtimes_diurnal(double base, double amp, double period_s, double duration_s, uint64_t seed, size_t max,
                            shoal__reqtimes_t *out) {
  if (!out || !(base > 0) || !(amp >= 0 && amp <= 1) || !(period_s > 0) || !(duration_s > 0))
    return shoal__seterr(SHOAL_ERR_INVALID, "arrivals: rate and duration must be > 0, amplitude in 0..1");
  vec_t v = {0};
  check_max(max, &v);
  shoal_rng_t rng;
  shoal_rng_seed2(&rng, seed, 0x706f6973ULL);
  double peak = base * (1 + amp), t = 0;
  int rc = 0;
  for (;;) { /* thinning: Poisson at the peak rate, each kept with rate(t) / peak */
    t += shoal_rng_exponential(&rng, peak);
    if (t >= duration_s) break;
    double r = base * (1 + amp * sin(2 * M_PI * t / period_s));
    if (shoal_rng_uniform(&rng) * peak < r && (rc = push(&v, t, "arrivals"))) break;
  }
  if (rc) {
    free(v.t);
    return rc;
  }
  out->t = v.t;
  out->n = v.n;
  return 0;
}

int shoal__reqtimes_poisson(double rate, double duration_s, uint64_t seed, size_t max, shoal__reqtimes_t *out) {
  return shoal__reqtimes_diurnal(rate, 0, 1, duration_s, seed, max, out);
}

void shoal__reqtimes_free(shoal__reqtimes_t *a) {
  if (!a) return;
  free(a->t);
  a->t = NULL;
  a->n = 0;
}
