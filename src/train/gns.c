/* Gradient noise scale estimator (gns.h). */
#include "train/gns.h"
#include "train/model.h"

void shoal__gns_init(shoal__gns_t *g, int every) {
  *g = (shoal__gns_t){0};
  g->every = every;
  g->decay = 0.9;
}

void shoal__gns_add(shoal__gns_t *g, double small_sq, double b_small, double big_sq, double b_big) {
  if (!(b_big > b_small) || !(b_small > 0)) return;
  /* unbiased for |G|^2 and tr(Sigma) (McCandlish et al., A.1) */
  double g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small);
  double trs = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big);
  if (g->samples == 0) {
    g->g2 = g2, g->trs = trs;
  } else {
    g->g2 = g->decay * g->g2 + (1 - g->decay) * g2;
    g->trs = g->decay * g->trs + (1 - g->decay) * trs;
  }
  g->samples++;
}

double shoal__gns_value(const shoal__gns_t *g) {
  return g->samples && g->g2 > 0 && g->trs > 0 ? g->trs / g->g2 : 0;
}

double shoal__gns_efficiency(double gns, double m0, double m) {
  if (!(gns > 0) || !(m > 0)) return 1;
  return (gns + m0) / (gns + m);
}

static double sq_norm(const float *v, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)v[i] * v[i];
  return s;
}

void shoal__gns_before_step(shoal__gns_t *g, shoal_model_t *m, const float *x, const uint8_t *y, int batch, long iter) {
  g->pending = 0;
  if (g->every <= 0 || iter % g->every || batch < 2) return;
  int half = batch / 2;
  shoal__model_forward(m, x, half);
  shoal__model_loss(m, y, half, 1, NULL);
  shoal__model_backward(m, x, half, NULL, NULL);
  g->small_sq = sq_norm(m->grads, m->nparams);
  g->small_b = half;
  g->pending = 1;
}

void shoal__gns_after_step(shoal__gns_t *g, const float *grads, size_t n, int b_big) {
  if (!g->pending) return;
  g->pending = 0;
  shoal__gns_add(g, g->small_sq, g->small_b, sq_norm(grads, n), b_big);
}
