/* Trace readers: the Philly-derived CSV and shoal's own job CSV
 * (docs/simulator.md "Workloads"). Every malformed row is an error naming the
 * file, the line and the field; nothing in the input can crash the reader
 * (fuzzed: fuzz/fuzz_trace.c). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "core/rng.h"
#include "sim/sim.h"

#define MAX_FIELDS 32

typedef struct {
  const char *p;
  size_t n;
} field_t;

typedef struct {
  const char *name;
  long line;
} where_t;

static int ferr(const where_t *w, const char *field, const field_t *f, const char *what) {
  char val[48];
  size_t n = f ? (f->n < sizeof val - 4 ? f->n : sizeof val - 4) : 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) val[k++] = isprint((unsigned char)f->p[i]) ? f->p[i] : '?';
  if (f && f->n > n) {
    memcpy(val + k, "...", 3);
    k += 3;
  }
  val[k] = 0;
  return shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: field '%s' = '%s': %s", w->name, w->line, field, val, what);
}

static int get_double(const where_t *w, const char *field, const field_t *f, double lo, double hi, double *out) {
  char buf[64];
  if (f->n == 0) return ferr(w, field, f, "empty, expected a number");
  if (f->n >= sizeof buf) return ferr(w, field, f, "too long for a number");
  memcpy(buf, f->p, f->n);
  buf[f->n] = 0;
  double v;
  const char *e;
  if (shoal__strtod_decimal(buf, &v, &e) || *e) return ferr(w, field, f, "not a finite decimal number");
  if (v < lo || v > hi) {
    char msg[96];
    snprintf(msg, sizeof msg, "out of range [%g, %g]", lo, hi);
    return ferr(w, field, f, msg);
  }
  *out = v;
  return 0;
}

static int get_int(const where_t *w, const char *field, const field_t *f, long lo, long hi, long *out) {
  char buf[32];
  if (f->n == 0) return ferr(w, field, f, "empty, expected an integer");
  if (f->n >= sizeof buf) return ferr(w, field, f, "too long for an integer");
  memcpy(buf, f->p, f->n);
  buf[f->n] = 0;
  char *e;
  errno = 0;
  long v = strtol(buf, &e, 10);
  if (e == buf || *e || errno) {
    /* accept "8.0": an integer written as a float */
    double d;
    if (get_double(w, field, f, (double)lo, (double)hi, &d) || d != floor(d)) return ferr(w, field, f, "not an integer");
    v = (long)d;
  }
  if (v < lo || v > hi) {
    char msg[96];
    snprintf(msg, sizeof msg, "out of range [%ld, %ld]", lo, hi);
    return ferr(w, field, f, msg);
  }
  *out = v;
  return 0;
}

static int get_name(const where_t *w, const char *field, const field_t *f, char *buf, size_t cap) {
  if (f->n == 0) return ferr(w, field, f, "empty");
  if (f->n >= cap) return ferr(w, field, f, "too long");
  for (size_t i = 0; i < f->n; i++) {
    unsigned char c = (unsigned char)f->p[i];
    if (!isprint(c) || c == '"') return ferr(w, field, f, "unexpected character");
  }
  memcpy(buf, f->p, f->n);
  buf[f->n] = 0;
  return 0;
}

/* days since 1970-01-01 of a civil date (Howard Hinnant's algorithm) */
static long days_from_civil(long y, long m, long d) {
  y -= m <= 2;
  long era = (y >= 0 ? y : y - 399) / 400;
  long yoe = y - era * 400;
  long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int get_timestamp(const where_t *w, const field_t *f, double *out) {
  /* YYYY-MM-DD HH:MM:SS */
  static const char pat[] = "dddd-dd-dd dd:dd:dd";
  if (f->n != 19) return ferr(w, "timestamp", f, "expected YYYY-MM-DD HH:MM:SS");
  for (int i = 0; i < 19; i++)
    if (pat[i] == 'd' ? !isdigit((unsigned char)f->p[i]) : f->p[i] != pat[i])
      return ferr(w, "timestamp", f, "expected YYYY-MM-DD HH:MM:SS");
#define NUM(a, b) strtol((char[]){f->p[a], f->p[a + 1], (b) > 2 ? f->p[a + 2] : 0, (b) > 3 ? f->p[a + 3] : 0, 0}, NULL, 10)
  long y = NUM(0, 4), mo = NUM(5, 2), d = NUM(8, 2), h = NUM(11, 2), mi = NUM(14, 2), s = NUM(17, 2);
#undef NUM
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || s > 60)
    return ferr(w, "timestamp", f, "not a valid date and time");
  *out = (double)days_from_civil(y, mo, d) * 86400.0 + h * 3600.0 + mi * 60.0 + s;
  return 0;
}

/* Split one line into fields; returns the count, or -1 if more than MAX_FIELDS. */
static int split(const char *p, size_t n, field_t *f) {
  int k = 0;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || p[i] == ',') {
      if (k == MAX_FIELDS) return -1;
      size_t a = start, b = i;
      while (a < b && (p[a] == ' ' || p[a] == '\t')) a++;
      while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t')) b--;
      f[k].p = p + a;
      f[k].n = b - a;
      k++;
      start = i + 1;
    }
  }
  return k;
}

typedef struct {
  shoal_workload_t *w;
  long cap;
} jobvec_t;

static shoal_job_t *new_job(jobvec_t *v) {
  shoal_workload_t *w = v->w;
  if (w->njobs == v->cap) {
    long nc = v->cap ? v->cap * 2 : 1024;
    if (nc > 100000000) return NULL;
    shoal_job_t *j = realloc(w->jobs, (size_t)nc * sizeof *j);
    if (!j) return NULL;
    w->jobs = j;
    v->cap = nc;
  }
  shoal_job_t *j = &w->jobs[w->njobs++];
  memset(j, 0, sizeof *j);
  j->gpus = 1;
  j->min_workers = j->max_workers = 1;
  j->sync = 1;
  j->model = -1;
  j->worker_demand = (shoal_res_t){1, 4, 16};
  j->ps_demand = (shoal_res_t){0, 4, 16};
  return j;
}

/* ---------------- Philly ---------------- */

static int philly_row(const where_t *wh, field_t *f, int nf, shoal_workload_t *w, jobvec_t *v) {
  if (nf != 5)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: expected 5 fields (timestamp,duration,num_gpus,gpu_time,cluster), found %d",
                         wh->name, wh->line, nf);
  double ts = 0, dur = 0, gt = 0;
  long gpus;
  char vc[24];
  int rc;
  if ((rc = get_timestamp(wh, &f[0], &ts))) return rc;
  if ((rc = get_double(wh, "duration", &f[1], 1e-9, SHOAL__SIM_MAX_S, &dur))) return rc;
  if ((rc = get_int(wh, "num_gpus", &f[2], 1, 1000000, &gpus))) return rc;
  if ((rc = get_double(wh, "gpu_time", &f[3], 0, 1e16, &gt))) return rc;
  if (fabs(gt - dur * (double)gpus) > 1e-6 * (gt > 1 ? gt : 1)) {
    char msg[128];
    snprintf(msg, sizeof msg, "not duration x num_gpus = %.17g", dur * (double)gpus);
    return ferr(wh, "gpu_time", &f[3], msg);
  }
  if ((rc = get_name(wh, "cluster", &f[4], vc, sizeof vc))) return rc;
  shoal_job_t *j = new_job(v);
  if (!j) return shoal__seterr(SHOAL_ERR_NOMEM, "%s:%ld: out of memory", wh->name, wh->line);
  j->arrival = ts;
  j->duration = dur;
  j->gpus = (int32_t)gpus;
  j->min_workers = 1;
  j->max_workers = (int32_t)gpus;
  j->row = wh->line;
  int vi = shoal__workload_vc(w, vc);
  if (vi < 0) return shoal__seterr(SHOAL_ERR_NOMEM, "%s:%ld: out of memory", wh->name, wh->line);
  j->vc = vi;
  return 0;
}

/* Filters of the Philly loader (spec §1.1). Keeps row order. */
static int philly_filter(shoal_workload_t *w, const shoal_workload_opts_t *o) {
  if (w->njobs == 0) return 0;
  double t0 = INFINITY;
  for (long i = 0; i < w->njobs; i++)
    if (w->jobs[i].arrival < t0) t0 = w->jobs[i].arrival;
  long k = 0;
  for (long i = 0; i < w->njobs; i++) {
    shoal_job_t *j = &w->jobs[i];
    double rel = j->arrival - t0;
    if (o->pollux_filter && (j->duration < 60 || j->duration * j->gpus >= 1000.0 * 3600)) {
      w->dropped_filter++;
      continue;
    }
    if (rel < o->window_start_s || (o->window_end_s > 0 && rel >= o->window_end_s)) {
      w->dropped_filter++;
      continue;
    }
    if (o->max_gpus > 0 && j->gpus > o->max_gpus) {
      w->dropped_large++;
      continue;
    }
    w->jobs[k++] = *j;
  }
  w->njobs = (int)k;
  if (o->sample > 0 && o->sample < w->njobs) {
    /* seeded sample without replacement: partial Fisher-Yates over row indices */
    uint32_t *idx = malloc((size_t)w->njobs * sizeof *idx);
    if (!idx) return shoal__seterr(SHOAL_ERR_NOMEM, "sample: out of memory");
    for (long i = 0; i < w->njobs; i++) idx[i] = (uint32_t)i;
    shoal_rng_t r;
    shoal_rng_seed2(&r, o->seed, 0x5a3d1e);
    for (long i = 0; i < o->sample; i++) {
      long m = i + (long)shoal_rng_below(&r, (uint64_t)(w->njobs - i));
      uint32_t t = idx[i];
      idx[i] = idx[m];
      idx[m] = t;
    }
    char *keep = calloc((size_t)w->njobs, 1);
    if (!keep) {
      free(idx);
      return shoal__seterr(SHOAL_ERR_NOMEM, "sample: out of memory");
    }
    for (long i = 0; i < o->sample; i++) keep[idx[i]] = 1;
    k = 0;
    for (long i = 0; i < w->njobs; i++)
      if (keep[i]) w->jobs[k++] = w->jobs[i];
    w->dropped_filter += w->njobs - (int)k;
    w->njobs = (int)k;
    free(keep);
    free(idx);
  }
  return 0;
}

/* ---------------- shoal CSV ---------------- */

enum {
  C_ARRIVAL, C_GPUS, C_DURATION, C_WORK, C_MODEL, C_ARCH, C_PS, C_VC, C_MINW, C_MAXW, C_WCPU, C_WMEM, C_PCPU, C_PMEM, C_SYNC,
  C_COUNT
};
static const char *const shoal_cols[C_COUNT] = {"arrival", "gpus", "duration", "work", "model", "arch", "ps", "vc",
                                                "min_workers", "max_workers", "worker_cpus", "worker_mem_gb", "ps_cpus",
                                                "ps_mem_gb", "sync"};

static int shoal_header(const where_t *wh, field_t *f, int nf, int *col_of) {
  for (int c = 0; c < C_COUNT; c++) col_of[c] = -1;
  for (int i = 0; i < nf; i++) {
    int found = -1;
    for (int c = 0; c < C_COUNT; c++)
      if (strlen(shoal_cols[c]) == f[i].n && !memcmp(shoal_cols[c], f[i].p, f[i].n)) found = c;
    if (found < 0) return ferr(wh, "header", &f[i], "unknown column (see docs/simulator.md, shoal job CSV)");
    if (col_of[found] >= 0) return ferr(wh, "header", &f[i], "repeated column");
    col_of[found] = i;
  }
  if (col_of[C_ARRIVAL] < 0 || col_of[C_GPUS] < 0 || (col_of[C_DURATION] < 0 && col_of[C_WORK] < 0))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: header must name arrival, gpus and duration or work", wh->name, wh->line);
  return 0;
}

static int shoal_row(const where_t *wh, field_t *f, int nf, int nhead, const int *col, const shoal_speed_t *speed,
                     shoal_workload_t *w, jobvec_t *v) {
  if (nf != nhead) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: expected %d fields, found %d", wh->name, wh->line, nhead, nf);
  shoal_job_t tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.sync = 1;
  tmp.model = -1;
  tmp.worker_demand = (shoal_res_t){1, 4, 16};
  tmp.ps_demand = (shoal_res_t){0, 4, 16};
  tmp.row = wh->line;
  double d;
  long l;
  int rc;
  field_t empty = {"", 0};
#define FIELD(c) (col[c] >= 0 ? &f[col[c]] : &empty)
#define HAVE(c) (col[c] >= 0 && f[col[c]].n > 0)
  if ((rc = get_double(wh, "arrival", FIELD(C_ARRIVAL), 0, SHOAL__SIM_MAX_S, &tmp.arrival))) return rc;
  if ((rc = get_int(wh, "gpus", FIELD(C_GPUS), 1, 32767, &l))) return rc;
  tmp.gpus = (int32_t)l;
  if (HAVE(C_DURATION)) {
    if ((rc = get_double(wh, "duration", FIELD(C_DURATION), 1e-9, SHOAL__SIM_MAX_S, &tmp.duration))) return rc;
  }
  if (HAVE(C_WORK)) {
    if ((rc = get_double(wh, "work", FIELD(C_WORK), 1e-9, 1e18, &tmp.work))) return rc;
  }
  if (!(tmp.duration > 0) && !(tmp.work > 0))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: field 'duration'/'work': one of them must be given", wh->name, wh->line);
  if (HAVE(C_ARCH)) {
    const field_t *a = FIELD(C_ARCH);
    if (a->n == 9 && !memcmp(a->p, "allreduce", 9)) tmp.arch = SHOAL_ARCH_ALLREDUCE;
    else if (a->n == 2 && !memcmp(a->p, "ps", 2)) tmp.arch = SHOAL_ARCH_PS;
    else return ferr(wh, "arch", a, "expected allreduce or ps");
  }
  if (HAVE(C_PS)) {
    if ((rc = get_int(wh, "ps", FIELD(C_PS), 0, 32767, &l))) return rc;
    tmp.ps = (int32_t)l;
  } else if (tmp.arch == SHOAL_ARCH_PS) {
    tmp.ps = (tmp.gpus + 1) / 2;
  }
  if (tmp.arch == SHOAL_ARCH_PS && tmp.ps < 1) return ferr(wh, "ps", FIELD(C_PS), "a ps job needs at least one PS");
  if (tmp.arch == SHOAL_ARCH_ALLREDUCE && tmp.ps != 0) return ferr(wh, "ps", FIELD(C_PS), "an allreduce job has no PSs");
  tmp.min_workers = tmp.max_workers = tmp.gpus;
  if (HAVE(C_MINW)) {
    if ((rc = get_int(wh, "min_workers", FIELD(C_MINW), 1, tmp.gpus, &l))) return rc;
    tmp.min_workers = (int32_t)l;
  }
  if (HAVE(C_MAXW)) {
    if ((rc = get_int(wh, "max_workers", FIELD(C_MAXW), tmp.gpus, 32767, &l))) return rc;
    tmp.max_workers = (int32_t)l;
  }
  if (HAVE(C_SYNC)) {
    if ((rc = get_int(wh, "sync", FIELD(C_SYNC), 0, 1, &l))) return rc;
    tmp.sync = (int8_t)l;
  }
  if (HAVE(C_WCPU) && (rc = get_double(wh, "worker_cpus", FIELD(C_WCPU), 0, 1e6, &tmp.worker_demand.cpus))) return rc;
  if (HAVE(C_WMEM) && (rc = get_double(wh, "worker_mem_gb", FIELD(C_WMEM), 0, 1e9, &tmp.worker_demand.mem_gb))) return rc;
  if (HAVE(C_PCPU) && (rc = get_double(wh, "ps_cpus", FIELD(C_PCPU), 0, 1e6, &tmp.ps_demand.cpus))) return rc;
  if (HAVE(C_PMEM) && (rc = get_double(wh, "ps_mem_gb", FIELD(C_PMEM), 0, 1e9, &tmp.ps_demand.mem_gb))) return rc;
  char name[64];
  if (HAVE(C_MODEL)) {
    if ((rc = get_name(wh, "model", FIELD(C_MODEL), name, sizeof name))) return rc;
    if (speed) {
      int mi = shoal__speed_find_model(speed, name);
      if (mi < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown to the %s speed model (e.g. '%s')", speed->name, speed->models[0].name);
        return ferr(wh, "model", FIELD(C_MODEL), msg);
      }
      tmp.model = (int16_t)mi;
    }
  }
  snprintf(name, sizeof name, "default");
  if (HAVE(C_VC) && (rc = get_name(wh, "vc", FIELD(C_VC), name, 24))) return rc;
#undef FIELD
#undef HAVE
  (void)d;
  int vi = shoal__workload_vc(w, name);
  shoal_job_t *j = vi < 0 ? NULL : new_job(v);
  if (!j) return shoal__seterr(SHOAL_ERR_NOMEM, "%s:%ld: out of memory", wh->name, wh->line);
  tmp.vc = vi;
  *j = tmp;
  return 0;
}

int shoal__trace_parse(const char *name, const char *text, size_t len, const shoal_workload_opts_t *o,
                       const shoal_speed_t *speed, shoal_workload_t *out) {
  shoal_workload_opts_t def;
  if (!o) {
    shoal__workload_opts_default(&def);
    o = &def;
  }
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  jobvec_t v = {&w, 0};
  where_t wh = {name, 0};
  field_t f[MAX_FIELDS];
  int format = 0, nhead = 0, col[C_COUNT];
  int rc = 0;
  size_t pos = shoal__utf8_bom(text, len);
  { /* one allocation for every row (growing by doubling copied the jobs
     * over and over: most of reading the Philly trace) */
    long lines = 1;
    for (const char *q = text; (q = memchr(q, '\n', len - (size_t)(q - text))) != NULL; q++) lines++;
    if (lines <= 100000000 && (w.jobs = malloc((size_t)lines * sizeof *w.jobs)) != NULL) v.cap = lines;
  }
  while (pos < len) {
    const char *ln = text + pos;
    const char *nl = memchr(ln, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - ln) : len - pos;
    pos += n + (nl ? 1 : 0);
    wh.line++;
    if (n && ln[n - 1] == '\r') n--;
    if (memchr(ln, 0, n)) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: NUL byte: not a text file", name, wh.line);
      goto fail;
    }
    size_t k = 0;
    while (k < n && (ln[k] == ' ' || ln[k] == '\t')) k++;
    if (k == n || ln[k] == '#') continue; /* blank lines and comments */
    int nf = split(ln, n, f);
    if (nf < 0) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%ld: more than %d fields", name, wh.line, MAX_FIELDS);
      goto fail;
    }
    if (!format) {
      static const char *philly[5] = {"timestamp", "duration", "num_gpus", "gpu_time", "cluster"};
      int is_philly = nf == 5;
      for (int i = 0; i < nf && i < 5 && is_philly; i++)
        if (f[i].n != strlen(philly[i]) || memcmp(f[i].p, philly[i], f[i].n)) is_philly = 0;
      if (is_philly) format = 'p';
      else {
        if ((rc = shoal_header(&wh, f, nf, col))) {
          char msg[512];
          snprintf(msg, sizeof msg, "%s", shoal_last_error());
          rc = shoal__seterr(rc, "%s (expected the Philly header timestamp,duration,num_gpus,gpu_time,cluster or a shoal job CSV header)",
                             msg);
          goto fail;
        }
        format = 's';
        nhead = nf;
      }
      continue;
    }
    rc = format == 'p' ? philly_row(&wh, f, nf, &w, &v) : shoal_row(&wh, f, nf, nhead, col, speed, &w, &v);
    if (rc) goto fail;
  }
  if (!format) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: empty: no header line", name);
    goto fail;
  }
  if (w.njobs == 0) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: a header and no job", name);
    goto fail;
  }
  if (format == 'p' && (rc = philly_filter(&w, o))) goto fail;
  if (format == 's' && o->max_gpus > 0) {
    long k = 0;
    for (long i = 0; i < w.njobs; i++) {
      if (w.jobs[i].gpus > o->max_gpus) w.dropped_large++;
      else w.jobs[k++] = w.jobs[i];
    }
    w.njobs = (int)k;
  }
  shoal__workload_finalize(&w);
  snprintf(w.source, sizeof w.source, "%s (%s format, %d jobs kept, %d filtered, %d larger than the cluster)", name,
           format == 'p' ? "Philly" : "shoal", w.njobs, w.dropped_filter, w.dropped_large);
  *out = w;
  return 0;
fail:
  free(w.jobs);
  free(w.vc_names);
  return rc;
}

int shoal__trace_read(const char *path, const shoal_workload_opts_t *o, const shoal_speed_t *speed, shoal_workload_t *w) {
  char *buf;
  size_t len;
  int rc = shoal__file_read_all(path, "trace", (size_t)16 << 30, &buf, &len);
  if (rc) return rc == SHOAL_ERR_NOT_FOUND ? SHOAL_ERR_IO : rc; /* a missing file is an I/O error here, as before */
  rc = shoal__trace_parse(path, buf, len, o, speed, w);
  free(buf);
  return rc;
}

int shoal__trace_write_shoal(const char *path, const shoal_workload_t *w, const shoal_speed_t *speed) {
  FILE *f = fopen(path, "w");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "%s: %s", path, strerror(errno));
  fprintf(f, "arrival,gpus,duration,work,model,arch,ps,vc,min_workers,max_workers,worker_cpus,worker_mem_gb,ps_cpus,ps_mem_gb,sync\n");
  for (long i = 0; i < w->njobs; i++) {
    const shoal_job_t *j = &w->jobs[i];
    const char *model = speed && j->model >= 0 && j->model < speed->nmodels ? speed->models[j->model].name : "";
    char dur[32] = "";
    if (j->duration > 0) snprintf(dur, sizeof dur, "%.17g", j->duration);
    fprintf(f, "%.17g,%d,%s,%.17g,%s,%s,%d,%s,%d,%d,%.17g,%.17g,%.17g,%.17g,%d\n", j->arrival, j->gpus, dur, j->work,
            model, j->arch == SHOAL_ARCH_PS ? "ps" : "allreduce", j->ps, w->vc_names ? w->vc_names[j->vc] : "default",
            j->min_workers, j->max_workers, j->worker_demand.cpus, j->worker_demand.mem_gb, j->ps_demand.cpus,
            j->ps_demand.mem_gb, j->sync);
  }
  if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "%s: write error", path);
  return 0;
}
