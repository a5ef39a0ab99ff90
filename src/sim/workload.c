/* Workload bookkeeping and the trace-row -> job mapping (spec §2). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "sim/sim.h"

void shoal__workload_opts_default(shoal_workload_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->ps_ratio = 0.5;
  o->load = 0.8;
  o->synth_jobs = 1000;
  o->cluster_gpus = 2048;
}

int shoal__workload_parse_window(const char *what, const char *v, shoal_workload_opts_t *o) {
  char *e;
  double a = strtod(v, &e), b = 0;
  int ok = *e == ':' && a >= 0;
  if (ok) b = strtod(e + 1, &e), ok = !*e && b > a;
  if (!ok) return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': expected A:B, seconds after the first submission, 0 <= A < B", what, v);
  o->window_start_s = a;
  o->window_end_s = b;
  return 0;
}

void shoal__workload_scale_arrivals(shoal_workload_t *w, double x) {
  if (!(x > 0) || x == 1) return;
  for (long i = 0; i < w->njobs; i++) w->jobs[i].arrival /= x;
  size_t l = strlen(w->source);
  if (l < sizeof w->source) snprintf(w->source + l, sizeof w->source - l, "; arrivals x1/%g (load x%g)", x, x);
}

void shoal__workload_free(shoal_workload_t *w) {
  if (!w) return;
  if (w->jobs)
    for (long i = 0; i < w->njobs; i++) free(w->jobs[i].alloc.p);
  free(w->jobs);
  free(w->vc_names);
  memset(w, 0, sizeof *w);
}

static void job_defaults(shoal_job_t *j) {
  memset(j, 0, sizeof *j);
  j->gpus = 1;
  j->min_workers = 1;
  j->max_workers = 1;
  j->sync = 1;
  j->model = -1;
  /* per-worker CPU and memory: 4 cores and 16 GB per GPU (a quarter to an
   * eighth of a typical 8-GPU server); a PS: 4 cores, 16 GB, no GPU */
  j->worker_demand = (shoal_res_t){1, 4, 16};
  j->ps_demand = (shoal_res_t){0, 4, 16};
}

int shoal__workload_alloc(shoal_workload_t *w, long njobs) {
  memset(w, 0, sizeof *w);
  if (njobs < 0 || njobs > 100000000) return shoal__seterr(SHOAL_ERR_INVALID, "workload: %ld jobs (max 1e8)", njobs);
  w->jobs = malloc((size_t)(njobs ? njobs : 1) * sizeof *w->jobs);
  if (!w->jobs) return shoal__seterr(SHOAL_ERR_NOMEM, "workload: out of memory for %ld jobs", njobs);
  for (long i = 0; i < njobs; i++) job_defaults(&w->jobs[i]);
  w->njobs = (int)njobs;
  return 0;
}

int shoal__workload_vc(shoal_workload_t *w, const char *name) {
  for (int i = 0; i < w->nvcs; i++)
    if (!strcmp(w->vc_names[i], name)) return i;
  if ((w->nvcs & (w->nvcs - 1)) == 0) { /* grow at powers of two */
    int nc = w->nvcs ? w->nvcs * 2 : 16;
    char(*v)[24] = realloc(w->vc_names, (size_t)nc * sizeof *v);
    if (!v) return -1;
    w->vc_names = v;
  }
  snprintf(w->vc_names[w->nvcs], sizeof w->vc_names[0], "%s", name);
  return w->nvcs++;
}

void shoal__workload_reset(shoal_workload_t *w) {
  for (long i = 0; i < w->njobs; i++) {
    shoal_job_t *j = &w->jobs[i];
    free(j->alloc.p);
    memset(&j->alloc, 0, sizeof j->alloc);
    j->state = SHOAL_JOB_FUTURE;
    j->work_done = 0;
    j->rate = 0;
    j->t_last = j->arrival;
    j->first_start = -1;
    j->finish = -1;
    j->run_s = j->restart_s = j->gpu_s = 0;
    j->restart_until = 0;
    j->n_preempt = j->n_realloc = 0;
    j->max_machines = 0;
    j->version = 0;
    j->iso_time = 0;
    j->active_index = -1;
    j->touched = 0;
    memset(j->pkey, 0, sizeof j->pkey);
    memset(j->pint, 0, sizeof j->pint);
  }
}

/* arrival order, ties by trace row (then by position: a stable sort) */
typedef struct {
  double arrival;
  int64_t row;
  long i;
} order_t;

static int cmp_order(const void *a, const void *b) {
  const order_t *x = a, *y = b;
  if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
  if (x->row != y->row) return x->row < y->row ? -1 : 1;
  return (x->i > y->i) - (x->i < y->i);
}

static int cmp_job(const void *a, const void *b) {
  const shoal_job_t *x = a, *y = b;
  if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
  return (x->row > y->row) - (x->row < y->row);
}

void shoal__workload_finalize(shoal_workload_t *w) {
  if (w->njobs <= 0) return;
  /* sort small keys, then move every job once, in place (sorting the jobs
   * themselves copied ~300-byte records log n times) */
  order_t *o = malloc((size_t)w->njobs * sizeof *o);
  if (o) {
    for (long i = 0; i < w->njobs; i++) o[i] = (order_t){w->jobs[i].arrival, w->jobs[i].row, i};
    qsort(o, (size_t)w->njobs, sizeof *o, cmp_order);
    /* position i takes the job at o[i].i: follow each cycle of the
     * permutation once (o[i].i = -1 marks a filled position) */
    for (long i = 0; i < w->njobs; i++) {
      if (o[i].i < 0 || o[i].i == i) continue;
      shoal_job_t tmp = w->jobs[i];
      long k = i;
      while (o[k].i != i) {
        long from = o[k].i;
        w->jobs[k] = w->jobs[from];
        o[k].i = -1;
        k = from;
      }
      w->jobs[k] = tmp;
      o[k].i = -1;
    }
    free(o);
  } else { /* out of memory for the keys: sort the jobs themselves */
    qsort(w->jobs, (size_t)w->njobs, sizeof *w->jobs, cmp_job);
  }
  double t0 = w->jobs[0].arrival;
  for (long i = 0; i < w->njobs; i++) {
    w->jobs[i].id = (int32_t)i;
    w->jobs[i].arrival -= t0;
  }
  shoal__workload_reset(w);
}

/* splitmix64 of (seed, row, salt): the documented per-row hash */
static uint64_t row_hash(uint64_t seed, int64_t row, uint64_t salt) {
  uint64_t z = seed ^ ((uint64_t)row * 0x9e3779b97f4a7c15ull) ^ (salt * 0xbf58476d1ce4e5b9ull);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int shoal__workload_assign_models(shoal_workload_t *w, const shoal_speed_t *speed, const shoal_cluster_t *c,
                                  const shoal_workload_opts_t *o) {
  int *single = malloc((size_t)speed->nmodels * sizeof *single), *multi = malloc((size_t)speed->nmodels * sizeof *multi);
  int ns = 0, nmul = 0;
  if (!single || !multi) {
    free(single);
    free(multi);
    return shoal__seterr(SHOAL_ERR_NOMEM, "workload: out of memory");
  }
  /* types that exist for a size: all at 1 GPU; those measured at >= 2 GPUs otherwise */
  for (int i = 0; i < speed->nmodels; i++) {
    single[ns++] = i;
    if (speed->models[i].max_gpus >= 2) multi[nmul++] = i;
  }
  int rc = 0;
  for (long i = 0; i < w->njobs; i++) {
    shoal_job_t *j = &w->jobs[i];
    if (j->model < 0) {
      int *set = j->gpus > 1 && nmul ? multi : single;
      int n = j->gpus > 1 && nmul ? nmul : ns;
      j->model = (int16_t)set[row_hash(o->seed, j->row, 1) % (uint64_t)n];
      double u = (double)(row_hash(o->seed, j->row, 2) >> 11) * 0x1.0p-53;
      if (u < o->ps_fraction) {
        j->arch = SHOAL_ARCH_PS;
        int p = (int)ceil(o->ps_ratio * j->gpus);
        j->ps = p < 1 ? 1 : (p > j->gpus ? j->gpus : p);
      }
      if (j->max_workers < j->gpus) j->max_workers = j->gpus;
    } else if (j->model >= speed->nmodels) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "row %lld: model index %d unknown to the %s speed model", (long long)j->row, j->model,
                         speed->name);
      break;
    }
    /* its rate alone and consolidated: work from a duration, or a given work's run time */
    shoal_shape_t sh = shoal__shape_consolidated(c, j->gpus, j->arch == SHOAL_ARCH_PS ? j->ps : 0);
    double r = speed->rate(speed, c, j, &sh);
    if (!(j->work > 0)) {
      if (!(r > 0) || !(j->duration > 0)) {
        rc = shoal__seterr(SHOAL_ERR_PARSE, "row %lld: cannot derive work (duration %g s, speed %g steps/s of model %s)",
                           (long long)j->row, j->duration, r, speed->models[j->model].name);
        break;
      }
      j->work = j->duration * r; /* alone and consolidated it finishes in exactly `duration` */
    } else if (!(r > 0) || j->work / r > SHOAL__SIM_MAX_S) { /* given as work: a finite run, as durations */
      rc = shoal__seterr(SHOAL_ERR_PARSE, "row %lld: work %g steps takes %g s alone at %d GPUs (speed %g steps/s of "
                         "model %s), more than %g s", (long long)j->row, j->work, r > 0 ? j->work / r : INFINITY,
                         j->gpus, r, speed->models[j->model].name, SHOAL__SIM_MAX_S);
      break;
    }
  }
  free(single);
  free(multi);
  return rc;
}
