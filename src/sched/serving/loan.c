/* Goodput-aware training allocation over a capacity that inference loans
 * and reclaims. Pollux's model: goodput = throughput x statistical
 * efficiency; workers move by marginal speedup (goodput over the job's
 * goodput on one worker), so a reclaim shrinks the job that loses least and
 * a grow feeds the job that gains most. */
#include <math.h>

#include "sched/serving/serving.h"

static double efficiency(const shoal__goodput_job_t *j, int b) {
  if (isinf(j->phi)) return 1; /* no noise scale: every sample counts (a job that trains a fixed number of epochs) */
  return (j->phi + j->b0) / (j->phi + b);
}

double shoal__goodput_at(const shoal__goodput_job_t *j, int n, int b) {
  if (n <= 0 || b <= 0) return 0;
  if (j->tput && j->ntput > 0) { /* measured: each worker steps at b0 */
    double steps = j->tput[(n < j->ntput ? n : j->ntput) - 1];
    return steps * j->b0 * efficiency(j, n * j->b0);
  }
  double t = j->t0 + j->t_sample * (double)b / n + j->t_sync * log2((double)n);
  return (double)b / t * efficiency(j, b);
}

double shoal__goodput(const shoal__goodput_job_t *j, int n, int *batch) {
  if (n <= 0) {
    if (batch) *batch = 0;
    return 0;
  }
  if (j->tput && j->ntput > 0) {
    if (batch) *batch = n * j->b0;
    return shoal__goodput_at(j, n, n * j->b0);
  }
  int best_b = 0;
  double best = -1;
  for (int b = j->b0; b > 0 && b <= j->bmax; b *= 2) {
    if (b < n) continue; /* every worker takes one sample at least */
    double g = shoal__goodput_at(j, n, b);
    if (g > best) best = g, best_b = b;
  }
  if (best_b == 0) best_b = j->bmax, best = shoal__goodput_at(j, n, j->bmax); /* n above bmax: the caller's nmax is wrong */
  if (batch) *batch = best_b;
  return best;
}

double shoal__goodput_lr(const shoal__goodput_job_t *j, int b, double lr0) {
  return lr0 * (double)b * efficiency(j, b) / j->b0;
}

static double speedup(const shoal__goodput_job_t *j, int n) {
  double one = shoal__goodput(j, 1, NULL);
  return one > 0 ? shoal__goodput(j, n, NULL) / one : 0;
}

int shoal__loan_pick_victim(int nj, const int *n, const int *step, int min_n, shoal__speedup_fn sp, void *arg) {
  int v = -1;
  double least = INFINITY;
  for (int i = 0; i < nj; i++) {
    int d = step ? step[i] : 1;
    if (n[i] - d < min_n || d <= 0) continue;
    double loss = sp(arg, i, n[i]) - sp(arg, i, n[i] - d);
    if (loss < least) least = loss, v = i;
  }
  return v;
}

int shoal__loan_pick_grower(int nj, const int *n, const int *step, const int *nmax, int except,
                            shoal__speedup_fn sp, void *arg, double *gain) {
  int w = -1;
  double most = 0;
  for (int i = 0; i < nj; i++) {
    int d = step ? step[i] : 1;
    if (i == except || d <= 0 || (nmax && n[i] + d > nmax[i])) continue;
    double g = (sp(arg, i, n[i] + d) - sp(arg, i, n[i])) / d;
    if (g > most + 1e-12) most = g, w = i;
  }
  if (gain) *gain = most;
  return w;
}

/* the goodput model as a speedup_fn over a job array */
static double goodput_speedup(void *arg, int i, int n) { return speedup(&((const shoal__goodput_job_t *)arg)[i], n); }

int shoal__loan_victim(const shoal__goodput_job_t *jobs, int nj, const int *n, int min_n) {
  return shoal__loan_pick_victim(nj, n, NULL, min_n, goodput_speedup, (void *)jobs);
}

/* The job other than `except` (and, with running_only, other than a queued one) that gains most from one
 * more worker (gain > 0), -1 if none. */
static int best_grower(const shoal__goodput_job_t *jobs, int nj, const int *n, int except, int running_only,
                       double *gain) {
  int nmax[nj > 0 ? nj : 1];
  for (int i = 0; i < nj; i++) nmax[i] = running_only && n[i] == 0 ? 0 : jobs[i].nmax;
  return shoal__loan_pick_grower(nj, n, NULL, nmax, except, goodput_speedup, (void *)jobs, gain);
}

static int sum(const int *n, int nj) {
  int s = 0;
  for (int i = 0; i < nj; i++) s += n[i];
  return s;
}

/* The job other than `except` whose speedup drops least when it loses one worker, keeping max(min_n, its
 * n_min); -1 if none. */
static int victim_above(const shoal__goodput_job_t *jobs, int nj, const int *n, int min_n, int except) {
  int v = -1;
  double least = INFINITY;
  for (int i = 0; i < nj; i++) {
    int keep = jobs[i].n_min > min_n ? jobs[i].n_min : min_n;
    if (i == except || n[i] - 1 < keep) continue;
    double loss = speedup(&jobs[i], n[i]) - speedup(&jobs[i], n[i] - 1);
    if (loss < least) least = loss, v = i;
  }
  return v;
}

int shoal__alloc_goodput(const shoal__goodput_job_t *jobs, int nj, int capacity, int *n, int *batch) {
  int before[nj > 0 ? nj : 1];
  for (int i = 0; i < nj; i++) before[i] = n[i];
  int total = sum(n, nj), v, w;
  while (total > capacity && (v = victim_above(jobs, nj, n, 0, -1)) >= 0) n[v]--, total--;
  while (total > capacity && (v = shoal__loan_victim(jobs, nj, n, 0)) >= 0) n[v]--, total--; /* floors above capacity */
  for (int i = 0; i < nj; i++) { /* floors, in index (arrival) order */
    int top = jobs[i].n_min < jobs[i].nmax || jobs[i].nmax <= 0 ? jobs[i].n_min : jobs[i].nmax;
    while (n[i] < top) {
      if (total < capacity) n[i]++, total++;
      else if ((v = victim_above(jobs, nj, n, 1, i)) >= 0) n[v]--, n[i]++;
      else break;
    }
  }
  while (total < capacity && (w = best_grower(jobs, nj, n, -1, 0, NULL)) >= 0) n[w]++, total++;
  /* Move a worker from the running job that loses least to the job that gains most (a queued job gains a
   * speedup of 1) while the gain is larger: each move raises the sum of speedups, so this ends; a running
   * job keeps one worker, so no job is stopped to start another. */
  for (int moves = 0; moves < 4 * capacity; moves++) {
    double gain;
    if ((v = victim_above(jobs, nj, n, 1, -1)) < 0) break;
    if ((w = best_grower(jobs, nj, n, v, 0, &gain)) < 0) break;
    double loss = speedup(&jobs[v], n[v]) - speedup(&jobs[v], n[v] - 1);
    if (gain <= loss + 1e-12) break;
    n[v]--, n[w]++;
  }
  int changed = 0;
  for (int i = 0; i < nj; i++) {
    shoal__goodput(&jobs[i], n[i], &batch[i]);
    changed += n[i] != before[i];
  }
  return changed;
}

int shoal__loan_grow(const shoal__goodput_job_t *jobs, int nj, int extra, int running_only, int *n, int *batch) {
  int given = 0, w;
  while (given < extra && (w = best_grower(jobs, nj, n, -1, running_only, NULL)) >= 0) n[w]++, given++;
  for (int i = 0; i < nj; i++) shoal__goodput(&jobs[i], n[i], &batch[i]);
  return given;
}

int shoal__alloc_loaning(const shoal__goodput_job_t *jobs, int nj, int stable, int capacity, int *n, int *batch) {
  int before[nj > 0 ? nj : 1];
  for (int i = 0; i < nj; i++) before[i] = n[i];
  if (stable > capacity) stable = capacity;
  shoal__alloc_goodput(jobs, nj, stable, n, batch);
  /* A job left queued by the stable part takes no loaned worker: a reclaim would stop it again. */
  shoal__loan_grow(jobs, nj, capacity - stable, 1, n, batch);
  int changed = 0;
  for (int i = 0; i < nj; i++) changed += n[i] != before[i];
  return changed;
}

int shoal__loan_reclaim(const shoal__goodput_job_t *jobs, int nj, int count, int *n, int *batch) {
  int taken = 0, v;
  while (taken < count && (v = victim_above(jobs, nj, n, 1, -1)) >= 0) n[v]--, taken++;
  while (taken < count) { /* stops: every one loses a speedup of 1; the one with the most work left */
    v = -1;
    for (int i = 0; i < nj; i++)
      if (n[i] == 1 && jobs[i].n_min < 1 && (v < 0 || jobs[i].left_s > jobs[v].left_s)) v = i;
    if (v < 0) break;
    n[v] = 0, taken++;
  }
  while (taken < count && (v = shoal__loan_victim(jobs, nj, n, 1)) >= 0) n[v]--, taken++; /* below the floors: the SLO first */
  for (int i = 0; i < nj; i++) shoal__goodput(&jobs[i], n[i], &batch[i]);
  return taken;
}

int shoal__alloc_fifo(const shoal__goodput_job_t *jobs, int nj, int capacity, int strict, int *n, int *batch) {
  int changed = 0, total = sum(n, nj);
  for (int i = nj - 1; i >= 0 && total > capacity; i--)
    if (n[i] > 0) total -= n[i], n[i] = 0, changed++;
  for (int i = 0; i < nj; i++) {
    if (n[i] == 0 && jobs[i].n_req > 0 && total + jobs[i].n_req <= capacity) {
      n[i] = jobs[i].n_req, total += n[i], changed++;
    } else if (n[i] == 0 && jobs[i].n_req > 0 && strict) {
      break; /* strict: no job passes a waiting one */
    }
  }
  for (int i = 0; i < nj; i++) batch[i] = n[i] ? jobs[i].b0 : 0;
  return changed;
}
