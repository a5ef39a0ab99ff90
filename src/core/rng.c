#include "core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void shoal_rng_seed(shoal_rng_t *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

void shoal_rng_seed2(shoal_rng_t *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull + 0x8bb84b93962eacc9ull);
  shoal_rng_seed(r, splitmix64(&x));
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t shoal_rng_u64(shoal_rng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double shoal_rng_uniform(shoal_rng_t *r) { return (double)(shoal_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t shoal_rng_below(shoal_rng_t *r, uint64_t n) {
  /* Lemire's nearly divisionless method */
  __uint128_t m = (__uint128_t)shoal_rng_u64(r) * n;
  uint64_t l = (uint64_t)m;
  if (l < n) {
    uint64_t t = -n % n;
    while (l < t) {
      m = (__uint128_t)shoal_rng_u64(r) * n;
      l = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

double shoal_rng_normal(shoal_rng_t *r) {
  /* Box-Muller; one value per call keeps the stream position simple */
  double u1 = shoal_rng_uniform(r), u2 = shoal_rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double shoal_rng_exponential(shoal_rng_t *r, double rate) {
  double u = shoal_rng_uniform(r);
  return -log1p(-u) / rate;
}

double shoal_rng_lognormal(shoal_rng_t *r, double mu, double sigma) {
  return exp(mu + sigma * shoal_rng_normal(r));
}

void shoal_rng_shuffle_u32(shoal_rng_t *r, uint32_t *a, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)shoal_rng_below(r, i);
    uint32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}
