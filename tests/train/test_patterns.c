/* DS-Sync patterns without communication (ds-sync.md §3.2, §4, §8): every
 * round is a partition, butterfly averaging is exact after L rounds, random
 * partitions contract the consensus distance at rho = (N-k)/(k(N-1)),
 * fixed groups never agree, topo bridging rounds take one member per rack. */
#include <math.h>
#include <stdlib.h>

#include "../runner.h"
#include "core/rng.h"
#include "train/sync.h"

static shoal__ds_t *make(shoal_ds_pattern_t kind, int n, int k, uint64_t seed, const int *racks, int h, int b) {
  shoal__ds_params_t p = {.kind = kind, .n = n, .k = k, .seed = seed, .rack_of = racks, .h = h, .b = b};
  shoal__ds_t *ds = NULL;
  CHECK_OK(shoal__ds_create(NULL, &p, &ds));
  return ds;
}

/* One round of pure averaging on x[n][d] (double), by the pattern's groups. */
static void average_round(const shoal__ds_t *ds, uint64_t t, int n, int d, double *x) {
  int g[256], ng;
  CHECK_OK(shoal__ds_groups(ds, t, g, &ng));
  double *sum = calloc((size_t)ng * d, sizeof *sum);
  int cnt[256] = {0};
  for (int i = 0; i < n; i++) {
    cnt[g[i]]++;
    for (int j = 0; j < d; j++) sum[(size_t)g[i] * d + j] += x[(size_t)i * d + j];
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < d; j++) x[(size_t)i * d + j] = sum[(size_t)g[i] * d + j] / cnt[g[i]];
  free(sum);
}

static double consensus(int n, int d, const double *x) {
  double xi = 0;
  for (int j = 0; j < d; j++) {
    double m = 0;
    for (int i = 0; i < n; i++) m += x[(size_t)i * d + j];
    m /= n;
    for (int i = 0; i < n; i++) xi += (x[(size_t)i * d + j] - m) * (x[(size_t)i * d + j] - m);
  }
  return xi / n;
}

TEST(ds_patterns_are_partitions) {
  int racks[12] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
  shoal_ds_pattern_t kinds[] = {SHOAL_DS_RANDOM, SHOAL_DS_BUTTERFLY, SHOAL_DS_TOPO, SHOAL_DS_FIXED};
  for (int ki = 0; ki < 4; ki++)
    for (int n = 2; n <= 12; n++) {
      shoal__ds_t *ds = make(kinds[ki], n, 2, 9, kinds[ki] == SHOAL_DS_TOPO ? racks : NULL, 0, 0);
      for (uint64_t t = 0; t < 20; t++) {
        int g[12], g2[12], ng, ng2;
        CHECK_OK(shoal__ds_groups(ds, t, g, &ng));
        CHECK_OK(shoal__ds_groups(ds, t, g2, &ng2)); /* a pure function of t */
        CHECK(!memcmp(g, g2, sizeof(int) * n) && ng == ng2);
        int size[12] = {0}, seen_max = -1;
        for (int i = 0; i < n; i++) {
          CHECK(g[i] >= 0 && g[i] < ng);
          CHECK(g[i] <= seen_max + 1); /* numbered by smallest member */
          if (g[i] > seen_max) seen_max = g[i];
          size[g[i]]++;
        }
        for (int j = 0; j < ng; j++) CHECK(size[j] >= 1);
        if (kinds[ki] == SHOAL_DS_RANDOM)
          for (int j = 0; j < ng; j++) CHECK(size[j] == n / ng || size[j] == n / ng + 1);
      }
      shoal__ds_destroy(ds);
    }
}

TEST(ds_butterfly_exact_after_log_rounds) {
  int cases[][2] = {{8, 2}, {16, 4}, {12, 4}, {9, 3}, {6, 3}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int n = cases[c][0], k = cases[c][1], d = 5;
    shoal__ds_t *ds = make(SHOAL_DS_BUTTERFLY, n, k, 1, NULL, 0, 0);
    int L = shoal__ds_rounds_exact(ds);
    int want = 0;
    for (int m = n; m > 1; want++) m = (m % k == 0) ? m / k : (m % 3 == 0 ? m / 3 : m / 2);
    CHECK_EQ(L, want); /* log_k(N) rounds when N = k^L */
    shoal_rng_t rng;
    shoal_rng_seed(&rng, 3);
    double *x = malloc(sizeof(double) * n * d), mean[5] = {0};
    for (int i = 0; i < n * d; i++) x[i] = shoal_rng_normal(&rng);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < d; j++) mean[j] += x[i * d + j] / n;
    for (int t = 0; t < L; t++) {
      CHECK(consensus(n, d, x) > 1e-6); /* not before L rounds */
      average_round(ds, (uint64_t)t, n, d, x);
    }
    CHECK(consensus(n, d, x) < 1e-24);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < d; j++) CHECK_NEAR(x[i * d + j], mean[j], 1e-12);
    free(x);
    shoal__ds_destroy(ds);
  }
}

/* E[Xi_{t+1}] = rho Xi_t: mean one-round ratio over 400 seeded trials within 10%. */
TEST(ds_random_partition_contracts_at_rho) {
  int cases[][2] = {{16, 2}, {16, 4}, {64, 4}, {10, 3}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int n = cases[c][0], k = cases[c][1], d = 1;
    shoal__ds_t *ds = make(SHOAL_DS_RANDOM, n, k, 77, NULL, 0, 0);
    shoal_rng_t rng;
    shoal_rng_seed(&rng, 4);
    double *x = malloc(sizeof(double) * n * d), ratio = 0;
    const int trials = 400;
    for (int tr = 0; tr < trials; tr++) {
      for (int i = 0; i < n * d; i++) x[i] = shoal_rng_normal(&rng);
      double before = consensus(n, d, x);
      average_round(ds, (uint64_t)tr, n, d, x);
      ratio += consensus(n, d, x) / before;
    }
    ratio /= trials;
    double rho = shoal__ds_random_rho(n, k);
    if (n % k == 0) /* the spec's formula assumes equal groups of k */
      CHECK_MSG(fabs(ratio - rho) <= 0.1 * rho, "N=%d k=%d: measured %.4f, rho %.4f", n, k, ratio, rho);
    else
      CHECK_MSG(ratio < 1.0 && ratio > 0.05, "N=%d k=%d: measured %.4f", n, k, ratio);
    /* Rounds to cut RMS disagreement 10^3 about 2 ln(1e-3) / ln(rho) (spec table: 16,2 -> 17.2; 16,4 -> 7.8). */
    free(x);
    shoal__ds_destroy(ds);
  }
}

TEST(ds_fixed_groups_never_agree) {
  int n = 8, d = 3;
  shoal__ds_t *ds = make(SHOAL_DS_FIXED, n, 2, 5, NULL, 0, 0);
  shoal_rng_t rng;
  shoal_rng_seed(&rng, 8);
  double x[24];
  for (int i = 0; i < n * d; i++) x[i] = shoal_rng_normal(&rng);
  for (int t = 0; t < 100; t++) average_round(ds, (uint64_t)t, n, d, x);
  CHECK(consensus(n, d, x) > 1e-3);
  shoal__ds_destroy(ds);
}

TEST(ds_topo_bridges_one_member_per_rack) {
  int racks[16];
  for (int i = 0; i < 16; i++) racks[i] = i / 8;
  shoal__ds_t *ds = make(SHOAL_DS_TOPO, 16, 2, 1, racks, 4, 2);
  for (uint64_t t = 0; t < 40; t++) {
    int g[16], ng;
    CHECK_OK(shoal__ds_groups(ds, t, g, &ng));
    int crosses = 0, size[16] = {0};
    for (int i = 0; i < 16; i++) size[g[i]]++;
    for (int i = 0; i < 16; i++)
      for (int j = i + 1; j < 16; j++)
        if (g[i] == g[j] && racks[i] != racks[j]) crosses++;
    if (t % 4 == 3) { /* bridging: b = 2 groups of one member per rack, the rest alone */
      int pairs = 0, singles = 0;
      for (int j = 0; j < ng; j++) pairs += size[j] == 2, singles += size[j] == 1;
      CHECK_EQ(pairs, 2);
      CHECK_EQ(singles, 12);
      CHECK_EQ(crosses, 2);
    } else {
      CHECK_EQ(crosses, 0); /* local rounds stay in the rack */
    }
  }
  /* Full bridges (b = m) after a full local butterfly: exact consensus in 4 rounds (spec §4 table). */
  shoal__ds_t *full = make(SHOAL_DS_TOPO, 16, 2, 1, racks, 4, 8);
  double x[16];
  shoal_rng_t rng;
  shoal_rng_seed(&rng, 2);
  for (int i = 0; i < 16; i++) x[i] = shoal_rng_normal(&rng);
  for (int t = 0; t < 4; t++) average_round(full, (uint64_t)t, 16, 1, x);
  CHECK(consensus(16, 1, x) < 1e-24);
  shoal__ds_destroy(full);
  shoal__ds_destroy(ds);
  /* Default bridge period: the local rounds before the first bridge average every rack exactly (the
   * spec's aim), also where a rack's factorization is longer than ceil(log_k m) (8 = 2 x 2 x 2, k = 3). */
  static const struct { int m, k; } cases[] = {{8, 3}, {4, 2}, {8, 2}, {8, 4}, {9, 3}, {6, 3}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    int m = cases[ci].m, n = 2 * m, rk[18];
    for (int i = 0; i < n; i++) rk[i] = i / m;
    shoal__ds_t *dd = make(SHOAL_DS_TOPO, n, cases[ci].k, 1, rk, 0, 0);
    double v[18];
    for (int i = 0; i < n; i++) v[i] = (double)(i * i % 7) + 0.25 * i;
    double mean[2] = {0, 0};
    for (int i = 0; i < n; i++) mean[rk[i]] += v[i] / m;
    int bridged = 0;
    for (uint64_t t = 0; t < 12 && !bridged; t++) {
      int g[18], ng, cross = 0;
      CHECK_OK(shoal__ds_groups(dd, t, g, &ng));
      for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) cross |= g[i] == g[j] && rk[i] != rk[j];
      if (cross) { /* the first bridge: every rack holds its mean by now */
        bridged = 1;
        for (int i = 0; i < n; i++)
          CHECK_MSG(fabs(v[i] - mean[rk[i]]) < 1e-12, "racks of %d, k=%d: worker %d holds %g before the first "
                    "bridge (round %d), its rack's mean is %g", m, cases[ci].k, i, v[i], (int)t, mean[rk[i]]);
      } else {
        average_round(dd, t, n, 1, v);
      }
    }
    CHECK_MSG(bridged, "racks of %d, k=%d: no bridge in 12 rounds", m, cases[ci].k);
    shoal__ds_destroy(dd);
  }
  /* Topology needs racks. */
  shoal__ds_params_t p = {.kind = SHOAL_DS_TOPO, .n = 4, .k = 2};
  shoal__ds_t *bad = NULL;
  CHECK_EQ(shoal__ds_create(NULL, &p, &bad), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "--racks");
}
