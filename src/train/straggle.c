/* Straggler injection (straggle.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "train/straggle.h"

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Uniform in (0, 1) for draw k of worker w at iteration it. */
static double uni(const shoal__straggle_t *s, int w, long it, int k) {
  uint64_t h = mix(s->seed ^ mix((uint64_t)w * 0x100000001B3ull ^ mix((uint64_t)it * 4 + (uint64_t)k)));
  return ((double)(h >> 11) + 0.5) / 9007199254740992.0;
}

int shoal__straggle_parse(const char *spec, uint64_t seed, int workers, shoal__straggle_t *out) {
  shoal__straggle_t s = {.slow_rank = -1, .seed = seed, .workers = workers};
  const char *p = spec ? spec : "";
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char item[128];
    if (n == 0 || n >= sizeof item)
      return shoal__seterr(SHOAL_ERR_INVALID, "--straggle '%s': empty or overlong item", spec);
    memcpy(item, p, n);
    item[n] = 0;
    char *f[4] = {0};
    int nf = 0;
    for (char *t = strtok(item, ":"); t && nf < 4; t = strtok(NULL, ":")) f[nf++] = t;
    char *end;
    double a = nf > 1 ? strtod(f[1], &end) : NAN, b = nf > 2 ? strtod(f[2], &end) : NAN;
    double c = nf > 3 ? strtod(f[3], &end) : b;
    if (!strcmp(f[0], "slow") && nf == 3 && a == floor(a) && a >= 0 && a < workers && b > 0 && b <= 100) {
      s.slow_rank = (int)a;
      s.slow_extra = b;
    } else if (!strcmp(f[0], "jitter") && nf == 2 && a > 0 && a <= 2) {
      s.jitter = a;
    } else if (!strcmp(f[0], "spike") && nf == 3 && a > 0 && a <= 1 && b >= 1 && b <= 1000) {
      s.spike_p = a;
      s.spike_x = b;
    } else if (!strcmp(f[0], "spike1") && (nf == 3 || nf == 4) && a > 0 && a <= 1 && b >= 1 && c >= b &&
               c <= 1000) {
      s.one_p = a;
      s.one_lo = b;
      s.one_hi = c;
    } else {
      return shoal__seterr(SHOAL_ERR_INVALID,
                           "--straggle '%.*s': expected slow:RANK:X (RANK of the %d workers, 0 < X <= 100), "
                           "jitter:SIGMA (0 < SIGMA <= 2), spike:P:X (0 < P <= 1, 1 <= X <= 1000) or "
                           "spike1:P:LO[:HI] (0 < P <= 1, 1 <= LO <= HI <= 1000)",
                           (int)n, p, workers);
    }
    s.on = 1;
    p = e ? e + 1 : p + n;
  }
  *out = s;
  return 0;
}

double shoal__straggle_factor(const shoal__straggle_t *s, int w, long it) {
  double f = 1;
  if (!s->on) return f;
  if (w == s->slow_rank) f *= 1 + s->slow_extra;
  if (s->jitter > 0) {
    double u1 = uni(s, w, it, 0), u2 = uni(s, w, it, 1);
    double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    double j = exp(s->jitter * (z + 2));
    f *= j > 1 ? j : 1;
  }
  if (s->spike_p > 0 && uni(s, w, it, 2) < s->spike_p) f *= s->spike_x;
  /* spike1: the step's draws belong to no worker (w = -1), so every worker sees the same choice */
  if (s->one_p > 0 && uni(s, -1, it, 0) < s->one_p && (int)(uni(s, -1, it, 1) * s->workers) == w)
    f *= s->one_lo + (s->one_hi - s->one_lo) * uni(s, -1, it, 2);
  return f;
}

double shoal__straggle_apply(const shoal__straggle_t *s, int w, long it, double compute_s) {
  double d = (shoal__straggle_factor(s, w, it) - 1) * compute_s;
  if (!(d > 0)) return 0;
  struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
  while (nanosleep(&ts, &ts) && errno == EINTR) {}
  return d;
}
