/* SGD step and learning-rate schedule. */
#include "train/optim.h"

/* The step streams four arrays of the whole model every iteration (17% of a
 * single-process MLP step at SSE width): an AVX2+FMA clone is picked at load
 * time on CPUs that have it, the build stays x86-64-v2. */
#define SHOAL_SIMD_CLONES __attribute__((target_clones("avx2,fma", "default")))

SHOAL_SIMD_CLONES void shoal__sgd_step(float *p, float *v, const float *g, size_t n, float lr, float mu, float wd) {
  for (size_t i = 0; i < n; i++) {
    float d = g[i] + wd * p[i];
    float u = mu * v[i] + d;
    v[i] = u;
    p[i] -= lr * u;
  }
}

SHOAL_SIMD_CLONES void shoal__sgd_step_scaled(float *p, float *v, const float *g, size_t n, float lr, float mu, float wd, float scale) {
  for (size_t i = 0; i < n; i++) {
    float d = g[i] * scale + wd * p[i];
    float u = mu * v[i] + d;
    v[i] = u;
    p[i] -= lr * u;
  }
}

double shoal__lr_at(const shoal_train_opts_t *o, long iter, int epoch) {
  double lr = o->lr;
  for (int i = 0; i < 8 && o->decay_epochs[i] > 0; i++)
    if (epoch >= o->decay_epochs[i]) lr *= o->decay_gamma;
  if (o->warmup_iters > 0 && iter < o->warmup_iters) lr *= (double)(iter + 1) / o->warmup_iters;
  return lr;
}
