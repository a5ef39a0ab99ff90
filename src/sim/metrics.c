/* Metrics (spec §6) and the per-job / timeline CSV files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sim/sim.h"

double shoal__quantile(const double *v, long n, double q) {
  if (n <= 0) return NAN;
  double pos = (double)(n - 1) * q;
  long i = (long)floor(pos);
  if (i >= n - 1) return v[n - 1];
  double f = pos - (double)i;
  return v[i] + f * (v[i + 1] - v[i]);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int shoal__metrics_compute(const shoal_workload_t *w, const shoal_sim_result_t *r, shoal_metrics_t *m) {
  return shoal__metrics_compute_window(w, r, 0, w->njobs, m);
}

int shoal__metrics_compute_window(const shoal_workload_t *w, const shoal_sim_result_t *r, long k0, long k1,
                                  shoal_metrics_t *m) {
  if (k0 < 0) k0 = 0;
  if (k1 > w->njobs) k1 = w->njobs;
  memset(m, 0, sizeof *m);
  long n = 0;
  double *jct = malloc((size_t)(w->njobs ? w->njobs : 1) * sizeof *jct);
  double *rho = malloc((size_t)(w->njobs ? w->njobs : 1) * sizeof *rho);
  if (!jct || !rho) {
    free(jct);
    free(rho);
    return shoal__seterr(SHOAL_ERR_NOMEM, "metrics: out of memory");
  }
  double sum = 0, qsum = 0, rsum = 0, tmin = INFINITY, tmax = -INFINITY;
  long nr = 0, over = 0;
  for (long i = k0; i < k1; i++) {
    const shoal_job_t *j = &w->jobs[i];
    m->preemptions += j->n_preempt;
    m->reallocations += j->n_realloc;
    if (j->state != SHOAL_JOB_DONE) {
      m->unfinished++;
      continue;
    }
    double c = j->finish - j->arrival;
    jct[n++] = c;
    sum += c;
    qsum += j->first_start - j->arrival;
    if (j->arrival < tmin) tmin = j->arrival;
    if (j->finish > tmax) tmax = j->finish;
    if (j->iso_time > 0) {
      double p = c / j->iso_time;
      rho[nr++] = p;
      rsum += p;
      over += p > 1 + 1e-9;
    }
  }
  m->jobs = n;
  if (n) {
    qsort(jct, (size_t)n, sizeof *jct, cmp_d);
    m->jct_avg = sum / (double)n;
    m->jct_p50 = shoal__quantile(jct, n, 0.5);
    m->jct_p95 = shoal__quantile(jct, n, 0.95);
    m->jct_p99 = shoal__quantile(jct, n, 0.99);
    m->queue_avg = qsum / (double)n;
    m->makespan = tmax - tmin;
  }
  if (nr) {
    qsort(rho, (size_t)nr, sizeof *rho, cmp_d);
    m->ftf_max = rho[nr - 1];
    m->ftf_avg = rsum / (double)nr;
    m->ftf_p95 = shoal__quantile(rho, nr, 0.95);
    m->ftf_over1 = (double)over / (double)nr;
  }
  double span = r->t_end - r->t_first; /* the interval busy_gpu_s covers */
  if (span > 0 && r->gpus > 0) {
    m->util = r->busy_gpu_s / (r->gpus * span);
    m->eff_util = r->eff_gpu_s / (r->gpus * span);
  }
  free(jct);
  free(rho);
  return 0;
}

int shoal__report_jobs_csv(const char *path, const shoal_workload_t *w) {
  FILE *f = fopen(path, "w");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "%s: %s", path, strerror(errno));
  fprintf(f, "id,vc,gpus,arch,ps,arrival,first_start,finish,jct,queue_delay,run_s,restart_s,preemptions,reallocations,"
             "max_machines,rho,row\n");
  for (long i = 0; i < w->njobs; i++) {
    const shoal_job_t *j = &w->jobs[i];
    int done = j->state == SHOAL_JOB_DONE;
    double jct = done ? j->finish - j->arrival : NAN;
    fprintf(f, "%d,%s,%d,%s,%d,%.6f,", j->id, w->vc_names ? w->vc_names[j->vc] : "", j->gpus,
            j->arch == SHOAL_ARCH_PS ? "ps" : "allreduce", j->ps, j->arrival);
    if (j->first_start >= 0) fprintf(f, "%.6f,", j->first_start);
    else fprintf(f, ",");
    if (done)
      fprintf(f, "%.6f,%.6f,%.6f,", j->finish, jct, j->first_start - j->arrival);
    else fprintf(f, ",,,");
    fprintf(f, "%.6f,%.6f,%d,%d,%d,", j->run_s, j->restart_s, j->n_preempt, j->n_realloc, j->max_machines);
    if (done && j->iso_time > 0) fprintf(f, "%.6f,", jct / j->iso_time);
    else fprintf(f, ",");
    fprintf(f, "%lld\n", (long long)j->row);
  }
  if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "%s: write error", path);
  return 0;
}

int shoal__report_timeline_csv(const char *path, const shoal_sim_result_t *r) {
  FILE *f = fopen(path, "w");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "%s: %s", path, strerror(errno));
  fprintf(f, "t,busy_gpus,running,waiting\n");
  for (int i = 0; i < r->ntimeline; i++)
    fprintf(f, "%.3f,%d,%d,%d\n", r->timeline[i].t, r->timeline[i].busy, r->timeline[i].running, r->timeline[i].waiting);
  if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "%s: write error", path);
  return 0;
}
