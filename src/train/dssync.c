/* DS-Sync patterns (ds-sync.md §3.2) and group averaging. A pattern is a pure
 * function of (kind, seed, t): every rank computes the same partition without
 * communication. Each distinct partition gets sub-communicators from one
 * shoal_comm_split over the world (collective: all ranks see the same
 * sequence of partitions, so they agree on every cache miss); afterwards the
 * groups of a round run their allreduces concurrently, each on its own
 * communicator. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "train/sync.h"

#define CACHE_MAX 64
#define MAX_DIGITS 32

struct shoal__ds {
  shoal__ds_params_t p;
  shoal_comm_t *world;
  /* butterfly over all workers */
  int ndigits, radix[MAX_DIGITS];
  /* topo: racks (members sorted by rank) and each rack's own digits */
  int nracks;
  int *rack_start, *rack_members; /* members of rack j: rack_members[rack_start[j] .. rack_start[j+1]) */
  int (*rack_radix)[MAX_DIGITS];
  int *rack_ndigits;
  int h, b;
  /* partition -> this rank's sub-communicator */
  int ncache, next_evict, nsplits;
  struct {
    int *group_of;
    shoal_comm_t *sub; /* NULL: singleton group */
  } cache[CACHE_MAX];
  int *scratch;        /* 2n: permutation and member list */
  int *map;            /* 2n: relabeling */
  int *round;          /* n: the current round's partition */
};

double shoal__ds_random_rho(int n, int k) { return n <= 1 ? 0.0 : (double)(n - k) / ((double)k * (n - 1)); }

/* Factor n into digits <= kmax, largest first; 0 if a prime factor exceeds kmax. */
static int factor(int n, int kmax, int *radix) {
  int nd = 0;
  for (int d = kmax; d >= 2 && n > 1; d--)
    while (n % d == 0 && nd < MAX_DIGITS) {
      radix[nd++] = d;
      n /= d;
    }
  return n == 1 ? nd : 0;
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Random partition of members[0..m) into blocks of k (leftovers dealt round
 * robin, so sizes differ by at most one and no singleton appears); writes a
 * block label (base + block) per member. */
static int random_partition(const int *members, int m, int k, uint64_t seed, uint64_t t, int *label, int base,
                            int *perm) {
  uint64_t st = seed ^ (t * 0x9E3779B97F4A7C15ULL);
  for (int i = 0; i < m; i++) perm[i] = members[i];
  for (int i = m - 1; i > 0; i--) {
    int j = (int)(splitmix64(&st) % (uint64_t)(i + 1));
    int tmp = perm[i];
    perm[i] = perm[j];
    perm[j] = tmp;
  }
  int nblocks = m / k > 0 ? m / k : 1;
  for (int i = 0; i < m; i++) {
    int blk = i < nblocks * k ? i / k : (i - nblocks * k) % nblocks;
    label[perm[i]] = base + blk;
  }
  return nblocks;
}

/* Butterfly digit d among members[0..m) (member index in mixed radix): the
 * label is the member index with digit d zeroed. */
static void butterfly_round(const int *members, int m, const int *radix, int nd, int d, int *label, int base) {
  for (int i = 0; i < m; i++) {
    int rest = i, place = 1, key = 0;
    for (int e = 0; e < nd; e++) {
      int dig = rest % radix[e];
      rest /= radix[e];
      if (e != d) key += dig * place;
      place *= radix[e];
    }
    label[members[i]] = base + key;
  }
}

/* Relabel so group ids are 0..G-1 in order of smallest member (labels < 2n). */
static int canonical(int n, int *label, int *map) {
  for (int i = 0; i < 2 * n; i++) map[i] = -1;
  int g = 0;
  for (int i = 0; i < n; i++) {
    int l = label[i];
    if (map[l] < 0) map[l] = g++;
    label[i] = map[l];
  }
  return g;
}

int shoal__ds_groups(const shoal__ds_t *ds, uint64_t t, int *group_of, int *ngroups) {
  int n = ds->p.n;
  int *tmp = ds->scratch; /* 2n ints */
  int *all = tmp + n;
  for (int i = 0; i < n; i++) all[i] = i;
  switch (ds->p.kind) {
  case SHOAL_DS_FIXED:
    t = 0;
    /* fall through */
  case SHOAL_DS_RANDOM:
    random_partition(all, n, ds->p.k, ds->p.seed, t, group_of, 0, tmp);
    break;
  case SHOAL_DS_BUTTERFLY:
    if (ds->ndigits == 0)
      random_partition(all, n, ds->p.k, ds->p.seed, t, group_of, 0, tmp);
    else
      butterfly_round(all, n, ds->radix, ds->ndigits, (int)(t % (uint64_t)ds->ndigits), group_of, 0);
    break;
  case SHOAL_DS_TOPO: {
    uint64_t h = (uint64_t)ds->h;
    if (t % h == h - 1) { /* bridging round: b groups of one member per rack */
      uint64_t c = t / h;
      for (int i = 0; i < n; i++) group_of[i] = ds->b + i; /* singletons */
      for (int j = 0; j < ds->nracks; j++) {
        int m = ds->rack_start[j + 1] - ds->rack_start[j];
        for (int q = 0; q < ds->b; q++)
          group_of[ds->rack_members[ds->rack_start[j] + (int)((c * (uint64_t)ds->b + (uint64_t)q) % (uint64_t)m)]] = q;
      }
    } else {
      uint64_t local = t - t / h;
      int base = 0;
      for (int j = 0; j < ds->nracks; j++) {
        const int *mem = ds->rack_members + ds->rack_start[j];
        int m = ds->rack_start[j + 1] - ds->rack_start[j];
        if (m == 1) {
          group_of[mem[0]] = base++;
        } else if (ds->rack_ndigits[j] == 0) {
          base += random_partition(mem, m, ds->p.k, ds->p.seed + (uint64_t)j, local, group_of, base, tmp);
        } else {
          butterfly_round(mem, m, ds->rack_radix[j], ds->rack_ndigits[j],
                          (int)(local % (uint64_t)ds->rack_ndigits[j]), group_of, base);
          base += m;
        }
      }
    }
    break;
  }
  default:
    return shoal__seterr(SHOAL_ERR_INVALID, "dssync: unknown pattern %d", ds->p.kind);
  }
  /* labels are < 2n in every branch */
  *ngroups = canonical(n, group_of, ds->map);
  return 0;
}

int shoal__ds_rounds_exact(const shoal__ds_t *ds) {
  return ds->p.kind == SHOAL_DS_BUTTERFLY ? ds->ndigits : 0;
}

static void free_racks(shoal__ds_t *ds) {
  free(ds->rack_start);
  free(ds->rack_members);
  free(ds->rack_radix);
  free(ds->rack_ndigits);
}

int shoal__ds_create(shoal_comm_t *world, const shoal__ds_params_t *p, shoal__ds_t **out) {
  if (p->n < 1) return shoal__seterr(SHOAL_ERR_INVALID, "dssync: %d workers", p->n);
  if (p->k < 2) return shoal__seterr(SHOAL_ERR_INVALID, "--ds-k %d: the group size must be at least 2", p->k);
  if ((unsigned)p->kind >= SHOAL_DS__COUNT) return shoal__seterr(SHOAL_ERR_INVALID, "dssync: pattern %d", p->kind);
  if (p->kind == SHOAL_DS_TOPO && !p->rack_of)
    return shoal__seterr(SHOAL_ERR_INVALID, "--ds-pattern topo needs a rack map (--racks)");
  shoal__ds_t *ds = calloc(1, sizeof *ds);
  if (!ds) return shoal__seterr(SHOAL_ERR_NOMEM, "dssync: out of memory");
  ds->p = *p;
  ds->p.rack_of = NULL;
  ds->world = world;
  ds->scratch = malloc(2 * (size_t)p->n * sizeof(int));
  ds->map = malloc(2 * (size_t)p->n * sizeof(int));
  ds->round = malloc((size_t)p->n * sizeof(int));
  if (!ds->scratch || !ds->map || !ds->round) goto err_nomem;
  ds->ndigits = factor(p->n, p->k, ds->radix);
  if (p->kind == SHOAL_DS_TOPO) {
    int n = p->n;
    int *ids = malloc((size_t)n * sizeof *ids); /* distinct rack ids in order of appearance */
    ds->rack_start = calloc((size_t)n + 1, sizeof(int));
    ds->rack_members = malloc((size_t)n * sizeof(int));
    ds->rack_radix = calloc((size_t)n, sizeof *ds->rack_radix);
    ds->rack_ndigits = calloc((size_t)n, sizeof(int));
    if (!ids || !ds->rack_start || !ds->rack_members || !ds->rack_radix || !ds->rack_ndigits) {
      free(ids);
      goto err_nomem;
    }
    for (int i = 0; i < n; i++) {
      int j = 0;
      while (j < ds->nracks && ids[j] != p->rack_of[i]) j++;
      if (j == ds->nracks) ids[ds->nracks++] = p->rack_of[i];
    }
    int pos = 0, mmin = n;
    for (int j = 0; j < ds->nracks; j++) {
      ds->rack_start[j] = pos;
      for (int i = 0; i < n; i++)
        if (p->rack_of[i] == ids[j]) ds->rack_members[pos++] = i;
      int m = pos - ds->rack_start[j];
      ds->rack_ndigits[j] = factor(m, p->k, ds->rack_radix[j]);
      if (m < mmin) mmin = m;
    }
    ds->rack_start[ds->nracks] = pos;
    free(ids);
    /* ds-sync.md §3.2(c) defaults: h = ceil(log_k m) + 1 (a full rack average between bridges), b = 1.
     * The spec's aim, a full rack average between bridges, takes as many local rounds as the rack's
     * factorization has digits (racks of 8 with k = 3 are 2 x 2 x 2: 3 rounds, ceil(log_3 8) = 2), so
     * h - 1 is the most digits of any rack (a random rack: ceil(log_k m), as the spec's formula). */
    int need = 1;
    for (int j = 0; j < ds->nracks; j++) {
      int m = ds->rack_start[j + 1] - ds->rack_start[j], r = ds->rack_ndigits[j];
      if (m > 1 && r == 0)
        for (long v = 1; v < m; v *= p->k) r++;
      if (r > need) need = r;
    }
    ds->h = p->h > 0 ? p->h : need + 1;
    if (ds->h < 2) ds->h = 2;
    ds->b = p->b > 0 ? p->b : 1;
    if (ds->b > mmin) ds->b = mmin;
  }
  *out = ds;
  return 0;
err_nomem:
  free_racks(ds);
  free(ds->scratch);
  free(ds->map);
  free(ds->round);
  free(ds);
  return shoal__seterr(SHOAL_ERR_NOMEM, "dssync: out of memory");
}

void shoal__ds_destroy(shoal__ds_t *ds) {
  if (!ds) return;
  for (int i = 0; i < ds->ncache; i++) {
    free(ds->cache[i].group_of);
    if (ds->cache[i].sub) shoal_comm_destroy(ds->cache[i].sub);
  }
  free_racks(ds);
  free(ds->scratch);
  free(ds->map);
  free(ds->round);
  free(ds);
}

int shoal__ds_sync(shoal__ds_t *ds, uint64_t t, float *params, size_t n, int *group_size) {
  int N = ds->p.n, ng;
  int *g = ds->round; /* no allocation per round except on a cache miss */
  int rc = shoal__ds_groups(ds, t, g, &ng);
  if (rc) return rc;
  int me = shoal_comm_rank(ds->world);
  int size = 0;
  for (int i = 0; i < N; i++) size += g[i] == g[me];
  int slot = -1;
  for (int i = 0; i < ds->ncache && slot < 0; i++)
    if (!memcmp(ds->cache[i].group_of, g, (size_t)N * sizeof *g)) slot = i;
  if (slot < 0) {
    /* Every rank misses on the same t: the cache is a function of the pattern's history. */
    int *key = malloc((size_t)N * sizeof *key);
    if (!key) return shoal__seterr(SHOAL_ERR_NOMEM, "dssync: out of memory");
    memcpy(key, g, (size_t)N * sizeof *key);
    shoal_comm_t *sub = NULL;
    double t0 = shoal__now_s();
    rc = shoal_comm_split(ds->world, size > 1 ? g[me] : SHOAL_UNDEFINED, me, &sub);
    double split_ms = 1e3 * (shoal__now_s() - t0);
    ds->nsplits++;
    if (rc) {
      free(key);
      return shoal__seterr(rc, "dssync round %llu: split into %d groups: %s", (unsigned long long)t, ng,
                           shoal_comm_errmsg(ds->world));
    }
    if (ds->ncache < CACHE_MAX) {
      slot = ds->ncache++;
    } else {
      slot = ds->next_evict;
      ds->next_evict = (ds->next_evict + 1) % CACHE_MAX;
      free(ds->cache[slot].group_of);
      if (ds->cache[slot].sub) shoal_comm_destroy(ds->cache[slot].sub);
    }
    ds->cache[slot].group_of = key;
    ds->cache[slot].sub = sub;
    if (sub)
      SHOAL_DEBUG("DSSYNC", "round %llu: new partition (split %d, %.2f ms, cache slot %d): group communicator of %d "
                  "ranks, allreduce of %zu bytes runs %s (the communicator's automatic choice)",
                  (unsigned long long)t, ds->nsplits, split_ms, slot, size, n * sizeof(float),
                  shoal_algo_name(shoal_allreduce_choose(sub, n * sizeof(float))));
    else
      SHOAL_DEBUG("DSSYNC", "round %llu: new partition (split %d, %.2f ms, cache slot %d): this rank is alone",
                  (unsigned long long)t, ds->nsplits, split_ms, slot);
  }
  if (SHOAL_LOG_DEBUG <= shoal__log_level_cur && shoal__log_enabled(SHOAL_LOG_DEBUG, "DSSYNC")) {
    char mem[512];
    size_t len = 0;
    mem[0] = 0;
    for (int i = 0; i < N && len < sizeof mem - 16; i++)
      if (g[i] == g[me]) len += (size_t)snprintf(mem + len, sizeof mem - len, "%s%d", len ? "," : "", i);
    shoal__log_write(SHOAL_LOG_DEBUG, "DSSYNC", "round %llu: %d groups; rank %d in group %d of %d members {%s}",
                     (unsigned long long)t, ng, me, g[me], size, mem);
  }
  shoal_comm_t *sub = ds->cache[slot].sub;
  if (sub) {
    rc = shoal_allreduce(sub, SHOAL_IN_PLACE, params, n, SHOAL_FLOAT32, SHOAL_AVG);
    if (rc)
      return shoal__seterr(rc, "dssync round %llu: group allreduce (%d members): %s", (unsigned long long)t, size,
                           shoal_comm_errmsg(sub));
  }
  if (group_size) *group_size = size;
  return 0;
}

/* ---- the dssync strategy (include/shoal/sync.h) ----
 * Parameters averaged within the round's group after the caller's optimizer
 * step, by shoal_allreduce on the group's sub-communicator: the same
 * automatic algorithm choice as bsp on its communicator. With overlap the
 * average of step t's starting parameters runs on the communication thread
 * while the caller computes step t's gradients (ds-sync.md §3.1, option
 * `overlap`): x_{t+1} = avg_G(x_t) + (x'_{t+1} - x_t), where x'_{t+1} is the
 * caller's locally updated parameters. */

typedef struct dsstrat {
  shoal__ds_t *ds;
  int overlap;
  long global_every;
  int *racks;
  float *flat;  /* total: parameters in flight (averaged copy) */
  float *old;   /* total: the starting parameters of the step (overlap) */
  int gsize;
} dsstrat_t;

static int parse_racks(const char *v, int n, int *out) {
  const char *s = v;
  for (int i = 0; i < n; i++) {
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || x < 0 || x > 1000000 || (i < n - 1 && *end != ',') || (i == n - 1 && *end != '\0'))
      return shoal__seterr(SHOAL_ERR_INVALID, "sync config dssync: racks=%s: expected %d comma-separated rack ids (one per worker)",
                           v, n);
    out[i] = (int)x;
    s = end + 1;
  }
  return 0;
}

static void ds_strat_destroy(shoal_sync_t *s) {
  dsstrat_t *d = s->impl;
  shoal__ds_destroy(d->ds);
  free(d->racks);
  free(d->flat);
  free(d->old);
  free(d);
}

static int ds_strat_create(shoal_sync_t *s, shoal__cfg_t *cfg) {
  int n = shoal_comm_size(s->comm);
  long k, h, b, seed, ge, ov;
  shoal_ds_pattern_t kind = SHOAL_DS_BUTTERFLY;
  const char *pat = shoal__cfg_str(cfg, "pattern");
  int rc = 0;
  if (pat && shoal_ds_pattern_parse(pat, &kind))
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config dssync: pattern=%s: expected random, butterfly, topo or fixed",
                         pat);
  if ((rc = shoal__cfg_int(cfg, "k", 2, 2, 1 << 20, &k)) || (rc = shoal__cfg_int(cfg, "h", 0, 0, 1000000, &h)) ||
      (rc = shoal__cfg_int(cfg, "b", 0, 0, 1000000, &b)) ||
      (rc = shoal__cfg_int(cfg, "seed", 1, 0, 0x7fffffffffffffffL, &seed)) ||
      (rc = shoal__cfg_int(cfg, "global_every", 0, 0, 1000000000L, &ge)) ||
      (rc = shoal__cfg_int(cfg, "overlap", 0, 0, 1, &ov)))
    return rc;
  const char *racks = shoal__cfg_str(cfg, "racks");
  int given_h = shoal__cfg_str(cfg, "h") != NULL, given_b = shoal__cfg_str(cfg, "b") != NULL;
  if (kind != SHOAL_DS_TOPO && (racks || given_h || given_b)) /* given at all, even as 0 */
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config dssync: %s applies to pattern=topo only (pattern is %s)",
                         racks ? "racks" : given_h ? "h" : "b", shoal_ds_pattern_name(kind));
  dsstrat_t *d = calloc(1, sizeof *d);
  if (!d) return shoal__seterr(SHOAL_ERR_NOMEM, "sync dssync: out of memory");
  s->impl = d;
  d->overlap = (int)ov;
  d->global_every = ge;
  if (racks) {
    if (!(d->racks = malloc((size_t)n * sizeof(int)))) return shoal__seterr(SHOAL_ERR_NOMEM, "sync dssync: out of memory");
    if ((rc = parse_racks(racks, n, d->racks))) return rc;
  }
  if (kind == SHOAL_DS_TOPO && !racks)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config dssync: pattern=topo needs racks=ID,ID,... (one per worker)");
  shoal__ds_params_t p = {.kind = kind, .n = n, .k = (int)k, .h = (int)h, .b = (int)b, .seed = (uint64_t)seed,
                          .rack_of = d->racks};
  if ((rc = shoal__ds_create(s->comm, &p, &d->ds))) return rc;
  if (n > 1 && n <= k && kind != SHOAL_DS_TOPO && shoal_comm_rank(s->comm) == 0)
    SHOAL_WARN("DSSYNC",
               "%d workers with group size k=%ld: every round is one group of all workers, i.e. a global parameter "
               "average each step with no shuffling and no traffic saved; DS-Sync needs more workers than k "
               "(or pattern=topo with racks)",
               n, k);
  s->flags = SHOAL_SYNC_F_PARAMS;
  return 0;
}

static int ds_strat_setup(shoal_sync_t *s) {
  dsstrat_t *d = s->impl;
  if (d->overlap || s->nb > 1) d->flat = malloc(s->total * sizeof(float));
  if (d->overlap) d->old = malloc(s->total * sizeof(float));
  if ((d->overlap || s->nb > 1) && (!d->flat || (d->overlap && !d->old)))
    return shoal__seterr(SHOAL_ERR_NOMEM, "sync dssync: out of memory");
  return 0;
}

/* Average buf (s->total floats) in the group of round s->step. */
static int group_average(shoal_sync_t *s, float *buf) {
  dsstrat_t *d = s->impl;
  int gs = 1;
  int rc = shoal__ds_sync(d->ds, (uint64_t)s->step, buf, s->total, &gs);
  if (rc) return rc;
  d->gsize = gs;
  return 0;
}

static int overlap_job(shoal_sync_t *s, int arg) {
  (void)arg;
  dsstrat_t *d = s->impl;
  return group_average(s, d->flat);
}

static int ds_strat_begin(shoal_sync_t *s) {
  dsstrat_t *d = s->impl;
  if (!d->overlap) return 0;
  shoal__sync_gather(s, 0, d->old);
  memcpy(d->flat, d->old, s->total * sizeof(float));
  return shoal__sync_post(s, overlap_job, 0, 1);
}

static int ds_strat_end(shoal_sync_t *s) {
  dsstrat_t *d = s->impl;
  int rc;
  if (d->overlap) {
    if ((rc = shoal__sync_drain(s))) return rc;
    for (int i = 0; i < s->nb; i++) {
      float *p = s->b[i].p;
      const float *a = d->flat + s->b[i].off, *o = d->old + s->b[i].off;
      for (size_t j = 0; j < s->b[i].n; j++) p[j] += a[j] - o[j];
    }
  } else if (s->nb == 1) {
    if ((rc = group_average(s, s->b[0].p))) return rc;
  } else {
    shoal__sync_gather(s, 0, d->flat);
    if ((rc = group_average(s, d->flat))) return rc;
    shoal__sync_scatter(s, 0, d->flat);
  }
  s->gsize = d->gsize;
  if (d->gsize > 1) s->payload += (double)s->total * sizeof(float);
  if (d->global_every > 0 && (s->step + 1) % d->global_every == 0) {
    if ((rc = shoal__sync_average_params(s, "periodic global average"))) return rc;
    s->gsize = shoal_comm_size(s->workers);
  }
  return 0;
}

static int ds_strat_final(shoal_sync_t *s) { return shoal__sync_average_params(s, "final global average"); }

const shoal__strategy_t shoal__strategy_dssync = {
    .name = "dssync",
    .keys = "pattern, k, h, b, racks, seed, global_every, overlap",
    .create = ds_strat_create,
    .destroy = ds_strat_destroy,
    .setup = ds_strat_setup,
    .begin = ds_strat_begin,
    .end = ds_strat_end,
    .final = ds_strat_final,
};
