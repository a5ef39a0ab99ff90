/* Cluster construction and resource bookkeeping (see cluster.h). */
#include "sched/model/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void shoal__cluster_spec_default(shoal_cluster_spec_t *spec) {
  memset(spec, 0, sizeof *spec);
  spec->ngroups = 1;
  spec->group[0].machines = 256;
  spec->group[0].racks = 16;
  spec->group[0].per_machine.gpus = 8;
  spec->group[0].per_machine.cpus = 64;
  spec->group[0].per_machine.mem_gb = 512;
  spec->group[0].nic_gbps = 100;
  spec->net.intra_gbps = 400;
  spec->net.alpha_intra_s = 5e-6;
  spec->net.alpha_inter_s = 20e-6;
  spec->net.oversub = 1;
}

int shoal__cluster_spec_validate(const shoal_cluster_spec_t *spec) {
  if (spec->ngroups < 1 || spec->ngroups > 8) return shoal__seterr(SHOAL_ERR_INVALID, "cluster: %d machine groups (1..8)", spec->ngroups);
  long total = 0;
  for (int i = 0; i < spec->ngroups; i++) {
    const shoal_cluster_group_t *g = &spec->group[i];
    if (g->machines < 1 || g->machines > 1000000)
      return shoal__seterr(SHOAL_ERR_INVALID, "cluster group %d: machines = %d (1..1000000)", i, g->machines);
    if (g->racks < 1 || g->racks > g->machines)
      return shoal__seterr(SHOAL_ERR_INVALID, "cluster group %d: racks = %d (1..machines=%d)", i, g->racks, g->machines);
    if (g->per_machine.gpus < 0 || g->per_machine.gpus > SHOAL_MAX_GPUS_PER_MACHINE)
      return shoal__seterr(SHOAL_ERR_INVALID, "cluster group %d: gpus per machine = %d (0..%d)", i, g->per_machine.gpus,
                           SHOAL_MAX_GPUS_PER_MACHINE);
    if (!(g->per_machine.cpus > 0) || !(g->per_machine.mem_gb > 0))
      return shoal__seterr(SHOAL_ERR_INVALID, "cluster group %d: cpus and mem_gb must be > 0", i);
    if (!(g->nic_gbps > 0)) return shoal__seterr(SHOAL_ERR_INVALID, "cluster group %d: nic_gbps must be > 0", i);
    if (g->sockets < 0 || g->sockets > 8 || (g->sockets > g->per_machine.gpus && g->per_machine.gpus > 0))
      return shoal__seterr(SHOAL_ERR_INVALID, "cluster group %d: sockets per machine = %d (1..min(8, gpus per machine = %d))",
                           i, g->sockets, g->per_machine.gpus);
    total += g->machines;
  }
  if (total > 1000000) return shoal__seterr(SHOAL_ERR_INVALID, "cluster: %ld machines (max 1000000)", total);
  if (!(spec->net.intra_gbps > 0)) return shoal__seterr(SHOAL_ERR_INVALID, "cluster: intra_gbps must be > 0");
  if (!(spec->net.oversub >= 1)) return shoal__seterr(SHOAL_ERR_INVALID, "cluster: oversub must be >= 1");
  if (!(spec->net.alpha_intra_s >= 0) || !(spec->net.alpha_inter_s >= 0))
    return shoal__seterr(SHOAL_ERR_INVALID, "cluster: latencies must be >= 0");
  return 0;
}

static inline void bucket_set(shoal_cluster_t *c, int f, int m, int on) {
  uint64_t *w = &c->bucket[(size_t)f * c->words + (m >> 6)];
  if (on) *w |= 1ull << (m & 63);
  else *w &= ~(1ull << (m & 63));
}

int shoal__cluster_create(const shoal_cluster_spec_t *spec, shoal_cluster_t **out) {
  int rc = shoal__cluster_spec_validate(spec);
  if (rc) return rc;
  int nm = 0, nr = 0, maxg = 0;
  for (int i = 0; i < spec->ngroups; i++) {
    nm += spec->group[i].machines;
    nr += spec->group[i].racks;
    if (spec->group[i].per_machine.gpus > maxg) maxg = spec->group[i].per_machine.gpus;
  }
  shoal_cluster_t *c = calloc(1, sizeof *c);
  if (!c) goto fail_nomem;
  c->m = calloc((size_t)nm, sizeof *c->m);
  c->racks = calloc((size_t)nr, sizeof *c->racks);
  c->words = (nm + 63) / 64;
  c->bucket = calloc((size_t)(maxg + 1) * c->words, sizeof *c->bucket);
  if (!c->m || !c->racks || !c->bucket) goto fail_free;
  c->nmachines = nm;
  c->nracks = nr;
  c->net = spec->net;
  c->max_gpus_per_machine = maxg;
  int mi = 0, ri = 0;
  for (int gi = 0; gi < spec->ngroups; gi++) {
    const shoal_cluster_group_t *g = &spec->group[gi];
    for (int r = 0; r < g->racks; r++, ri++) {
      /* spread the group's machines over its racks as evenly as possible */
      int cnt = g->machines / g->racks + (r < g->machines % g->racks ? 1 : 0);
      shoal_rack_t *rk = &c->racks[ri];
      rk->first = mi;
      rk->count = cnt;
      rk->uplink_gbps = cnt * g->nic_gbps / spec->net.oversub;
      for (int k = 0; k < cnt; k++, mi++) {
        shoal_machine_t *m = &c->m[mi];
        m->id = mi;
        m->rack = ri;
        m->cap = g->per_machine;
        m->free = g->per_machine;
        m->nic_gbps = g->nic_gbps;
        m->sockets = g->sockets ? g->sockets : (m->cap.gpus >= 2 && m->cap.gpus % 2 == 0 ? 2 : 1);
        rk->gpus += m->cap.gpus;
        c->gpus_total += m->cap.gpus;
        bucket_set(c, m->cap.gpus, mi, 1);
      }
      rk->gpus_free = rk->gpus;
    }
  }
  c->gpus_free = c->gpus_total;
  if (c->gpus_total == 0) { /* CPU-only groups are fine (parameter servers), a cluster of them is not */
    shoal__cluster_destroy(c);
    return shoal__seterr(SHOAL_ERR_INVALID, "cluster: %d machines and no GPU (gpus_per_machine = 0 everywhere)", nm);
  }
  *out = c;
  return 0;
fail_free:
  shoal__cluster_destroy(c);
fail_nomem:
  return shoal__seterr(SHOAL_ERR_NOMEM, "cluster: out of memory for %d machines", nm);
}

void shoal__cluster_destroy(shoal_cluster_t *c) {
  if (!c) return;
  free(c->m);
  free(c->racks);
  free(c->bucket);
  free(c);
}

/* capacities are compared with a small tolerance so that sums of fractional
 * CPU demands never fail on rounding */
#define RES_EPS 1e-9

int shoal__cluster_take(shoal_cluster_t *c, int mi, const shoal_res_t *r) {
  if (mi < 0 || mi >= c->nmachines) return shoal__seterr(SHOAL_ERR_INVALID, "cluster: machine %d out of range", mi);
  shoal_machine_t *m = &c->m[mi];
  if (r->gpus > m->free.gpus || r->cpus > m->free.cpus + RES_EPS || r->mem_gb > m->free.mem_gb + RES_EPS)
    return shoal__seterr(SHOAL_ERR_INFEASIBLE, "machine %d: need %d GPU %.2f CPU %.2f GB, free %d GPU %.2f CPU %.2f GB", mi,
                         r->gpus, r->cpus, r->mem_gb, m->free.gpus, m->free.cpus, m->free.mem_gb);
  if (r->gpus) {
    bucket_set(c, m->free.gpus, mi, 0);
    m->free.gpus -= r->gpus;
    bucket_set(c, m->free.gpus, mi, 1);
    c->racks[m->rack].gpus_free -= r->gpus;
    c->gpus_free -= r->gpus;
  }
  m->free.cpus -= r->cpus;
  m->free.mem_gb -= r->mem_gb;
  if (m->free.cpus < 0) m->free.cpus = 0;
  if (m->free.mem_gb < 0) m->free.mem_gb = 0;
  return 0;
}

void shoal__cluster_give(shoal_cluster_t *c, int mi, const shoal_res_t *r) {
  shoal_machine_t *m = &c->m[mi];
  if (r->gpus) {
    bucket_set(c, m->free.gpus, mi, 0);
    m->free.gpus += r->gpus;
    bucket_set(c, m->free.gpus, mi, 1);
    c->racks[m->rack].gpus_free += r->gpus;
    c->gpus_free += r->gpus;
  }
  m->free.cpus += r->cpus;
  m->free.mem_gb += r->mem_gb;
  /* snap back to capacity when everything is returned (no drift) */
  if (m->free.cpus > m->cap.cpus - RES_EPS) m->free.cpus = m->cap.cpus;
  if (m->free.mem_gb > m->cap.mem_gb - RES_EPS) m->free.mem_gb = m->cap.mem_gb;
}

int shoal__cluster_next_with_free(const shoal_cluster_t *c, int f, int from) {
  if (f < 0 || f > c->max_gpus_per_machine || from >= c->nmachines) return -1;
  if (from < 0) from = 0;
  const uint64_t *b = &c->bucket[(size_t)f * c->words];
  int w = from >> 6;
  uint64_t word = b[w] & (~0ull << (from & 63));
  for (;;) {
    if (word) {
      int m = (w << 6) + __builtin_ctzll(word);
      return m < c->nmachines ? m : -1;
    }
    if (++w >= c->words) return -1;
    word = b[w];
  }
}

int shoal__cluster_best_fit(const shoal_cluster_t *c, int n) {
  if (n < 0) n = 0;
  for (int f = n; f <= c->max_gpus_per_machine; f++) {
    int m = shoal__cluster_next_with_free(c, f, 0);
    if (m >= 0) return m;
  }
  return -1;
}

void shoal__cluster_describe(const shoal_cluster_t *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%d machines, %d GPUs (up to %d per machine), %d racks, oversubscription %g", c->nmachines,
           c->gpus_total, c->max_gpus_per_machine, c->nracks, c->net.oversub);
}
