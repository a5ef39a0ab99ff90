/* Placement primitives (see place.h and spec §5.1). */
#include "sched/model/place.h"

#include <stdlib.h>
#include <string.h>

int shoal__place_room(const shoal_cluster_t *c, const shoal_job_t *j, int m) {
  const shoal_res_t *f = &c->m[m].free, *d = &j->worker_demand;
  int room = d->gpus > 0 ? f->gpus / d->gpus : 1 << 20;
  if (d->cpus > 0) {
    int k = (int)((f->cpus + 1e-9) / d->cpus);
    if (k < room) room = k;
  }
  if (d->mem_gb > 0) {
    int k = (int)((f->mem_gb + 1e-9) / d->mem_gb);
    if (k < room) room = k;
  }
  return room < 0 ? 0 : room;
}

/* Walk machines in [lo, hi) from most free GPUs to least (ties lowest id),
 * taking min(room, left) workers on each until `workers` are placed. Returns
 * entries written or 0 if they do not all fit (or cap is too small). */
static int take_largest_first(const shoal_cluster_t *c, const shoal_job_t *j, int workers, int lo, int hi,
                              shoal_place_t *out, int cap) {
  int left = workers, n = 0;
  for (int f = c->max_gpus_per_machine; f >= 1 && left > 0; f--) {
    for (int m = shoal__cluster_next_with_free(c, f, lo); m >= 0 && m < hi && left > 0;
         m = shoal__cluster_next_with_free(c, f, m + 1)) {
      int room = shoal__place_room(c, j, m);
      if (room <= 0) continue;
      if (n == cap) return 0;
      int k = room < left ? room : left;
      out[n].machine = m;
      out[n].workers = (int16_t)k;
      out[n].ps = 0;
      n++;
      left -= k;
    }
  }
  return left > 0 ? 0 : n;
}

/* machines needed in [lo,hi) taking largest free first; INT_MAX-ish if not enough */
static int machines_needed(const shoal_cluster_t *c, const shoal_job_t *j, int workers, int lo, int hi) {
  int left = workers, n = 0;
  for (int f = c->max_gpus_per_machine; f >= 1 && left > 0; f--)
    for (int m = shoal__cluster_next_with_free(c, f, lo); m >= 0 && m < hi && left > 0;
         m = shoal__cluster_next_with_free(c, f, m + 1)) {
      int room = shoal__place_room(c, j, m);
      if (room <= 0) continue;
      left -= room < left ? room : left;
      n++;
    }
  return left > 0 ? 1 << 30 : n;
}

int shoal__place_consolidated(const shoal_cluster_t *c, const shoal_job_t *j, int workers, shoal_place_t *out, int cap) {
  if (workers <= 0 || cap <= 0 || workers * j->worker_demand.gpus > c->gpus_free) return 0;
  /* 1. one machine, best fit */
  if (workers * j->worker_demand.gpus <= c->max_gpus_per_machine) {
    int need = workers * j->worker_demand.gpus;
    for (int f = need; f <= c->max_gpus_per_machine; f++)
      for (int m = shoal__cluster_next_with_free(c, f, 0); m >= 0; m = shoal__cluster_next_with_free(c, f, m + 1))
        if (shoal__place_room(c, j, m) >= workers) {
          out[0].machine = m;
          out[0].workers = (int16_t)workers;
          out[0].ps = 0;
          return 1;
        }
  }
  /* 2. one rack, the one needing the fewest machines */
  int best_rack = -1, best_n = 1 << 30;
  for (int r = 0; r < c->nracks; r++) {
    const shoal_rack_t *rk = &c->racks[r];
    if (rk->gpus_free < workers * j->worker_demand.gpus) continue;
    int n = machines_needed(c, j, workers, rk->first, rk->first + rk->count);
    if (n < best_n) {
      best_n = n;
      best_rack = r;
    }
  }
  if (best_rack >= 0) {
    const shoal_rack_t *rk = &c->racks[best_rack];
    int n = take_largest_first(c, j, workers, rk->first, rk->first + rk->count, out, cap);
    if (n) return shoal__place_normalize(out, n);
  }
  /* 3. cluster-wide, largest free first */
  int n = take_largest_first(c, j, workers, 0, c->nmachines, out, cap);
  return n ? shoal__place_normalize(out, n) : 0;
}

int shoal__place_strict(const shoal_cluster_t *c, const shoal_job_t *j, int workers, shoal_place_t *out, int cap) {
  int g = c->max_gpus_per_machine;
  if (workers <= 0 || cap <= 0 || workers > c->gpus_free) return 0;
  if (workers <= g) {
    for (int f = workers; f <= g; f++)
      for (int m = shoal__cluster_next_with_free(c, f, 0); m >= 0; m = shoal__cluster_next_with_free(c, f, m + 1))
        if (shoal__place_room(c, j, m) >= workers) {
          out[0] = (shoal_place_t){m, (int16_t)workers, 0};
          return 1;
        }
    return 0;
  }
  int left = workers, n = 0;
  for (int m = shoal__cluster_next_with_free(c, g, 0); m >= 0 && left > 0; m = shoal__cluster_next_with_free(c, g, m + 1)) {
    if (c->m[m].cap.gpus != g) continue;
    int room = shoal__place_room(c, j, m);
    if (room < (left < g ? left : g)) continue;
    if (n == cap) return 0;
    int k = left < g ? left : g;
    out[n++] = (shoal_place_t){m, (int16_t)k, 0};
    left -= k;
  }
  return left > 0 ? 0 : n;
}

int shoal__place_spread(const shoal_cluster_t *c, const shoal_job_t *j, int workers, shoal_rng_t *rng,
                        shoal_place_t *out, int cap) {
  if (workers <= 0 || workers > c->gpus_free) return 0;
  int *cand = malloc((size_t)c->nmachines * sizeof *cand), *room = malloc((size_t)c->nmachines * sizeof *room);
  int *slot = malloc((size_t)c->nmachines * sizeof *slot);
  int nc = 0, n = 0, left = workers;
  if (!cand || !room || !slot) goto done;
  for (int m = 0; m < c->nmachines; m++) {
    slot[m] = -1;
    int r = shoal__place_room(c, j, m);
    if (r > 0) {
      cand[nc] = m;
      room[nc++] = r;
    }
  }
  while (left > 0 && nc > 0) {
    int k = (int)shoal_rng_below(rng, (uint64_t)nc);
    int m = cand[k];
    if (slot[m] < 0) {
      if (n == cap) break;
      slot[m] = n;
      out[n++] = (shoal_place_t){m, 0, 0};
    }
    out[slot[m]].workers++;
    left--;
    if (--room[k] == 0) {
      cand[k] = cand[nc - 1];
      room[k] = room[nc - 1];
      nc--;
    }
  }
done:
  free(cand);
  free(room);
  free(slot);
  return left > 0 ? 0 : shoal__place_normalize(out, n);
}

int shoal__place_ps_job(const shoal_cluster_t *c, const shoal_job_t *j, int workers, int ps, shoal_place_t *out, int cap) {
  int n = shoal__place_consolidated(c, j, workers, out, cap);
  if (!n || ps <= 0) return n;
  /* free CPU/memory left on each worker machine after the workers */
  const shoal_res_t *pd = &j->ps_demand;
  int left = ps;
  for (int round = 0; left > 0; round++) {
    int placed = 0;
    for (int i = 0; i < n && left > 0; i++) {
      const shoal_machine_t *m = &c->m[out[i].machine];
      shoal_res_t used = shoal_job_demand(j, out[i].workers, out[i].ps + 1);
      if (used.gpus > m->free.gpus || used.cpus > m->free.cpus + 1e-9 || used.mem_gb > m->free.mem_gb + 1e-9) continue;
      out[i].ps++;
      left--;
      placed++;
    }
    if (!placed) break;
  }
  /* overflow: machines with the most free CPU (ties lowest id), one PS at a time */
  while (left > 0) {
    int best = -1, bi = -1;
    double best_cpu = -1;
    for (int m = 0; m < c->nmachines; m++) {
      int idx = -1;
      for (int i = 0; i < n; i++)
        if (out[i].machine == m) idx = i;
      shoal_res_t used = idx >= 0 ? shoal_job_demand(j, out[idx].workers, out[idx].ps + 1) : *pd;
      const shoal_machine_t *mm = &c->m[m];
      if (used.gpus > mm->free.gpus || used.cpus > mm->free.cpus + 1e-9 || used.mem_gb > mm->free.mem_gb + 1e-9) continue;
      double fc = mm->free.cpus - used.cpus;
      if (fc > best_cpu) {
        best_cpu = fc;
        best = m;
        bi = idx;
      }
    }
    if (best < 0) return 0;
    if (bi < 0) {
      if (n == cap) return 0;
      out[n++] = (shoal_place_t){best, 0, 0};
      bi = n - 1;
    }
    out[bi].ps++;
    left--;
  }
  return shoal__place_normalize(out, n);
}

static int cmp_place(const void *a, const void *b) {
  const shoal_place_t *x = a, *y = b;
  return (x->machine > y->machine) - (x->machine < y->machine);
}

int shoal__place_normalize(shoal_place_t *p, int n) {
  if (n <= 0) return 0;
  int sorted = 1;
  for (int i = 1; i < n; i++)
    if (p[i].machine <= p[i - 1].machine) sorted = 0;
  if (!sorted) qsort(p, (size_t)n, sizeof *p, cmp_place);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (p[i].workers == 0 && p[i].ps == 0) continue;
    if (k > 0 && p[k - 1].machine == p[i].machine) {
      p[k - 1].workers = (int16_t)(p[k - 1].workers + p[i].workers);
      p[k - 1].ps = (int16_t)(p[k - 1].ps + p[i].ps);
    } else p[k++] = p[i];
  }
  return k;
}

int shoal__place_ps_with_workers(shoal_place_t *p, int n) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (p[i].workers > 0 || p[i].ps == 0) continue;
    for (int s = p[i].ps; s > 0; s--) { /* each server to the worker machine with the fewest (ties: lowest id) */
      int best = -1;
      for (int m = 0; m < n; m++)
        if (p[m].workers > 0 && (best < 0 || p[m].ps < p[best].ps)) best = m;
      if (best < 0) return n; /* no workers at all: nothing to move to */
      p[best].ps++;
    }
    p[i].ps = 0;
  }
  for (int i = 0; i < n; i++)
    if (p[i].workers > 0 || p[i].ps > 0) p[k++] = p[i];
  return k;
}

int shoal__place_equal(const shoal_place_t *a, int na, const shoal_place_t *b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; i++)
    if (a[i].machine != b[i].machine || a[i].workers != b[i].workers || a[i].ps != b[i].ps) return 0;
  return 1;
}
