/* The gradient noise scale B_noise = tr(Sigma) / |G|^2 (McCandlish et al.,
 * "An Empirical Model of Large-Batch Training", appendix A; what Pollux calls
 * the noise scale behind its statistical efficiency), estimated while
 * training from the squared norms of two gradients of the same step taken
 * over different batch sizes: a small one (half of this worker's batch,
 * computed for the purpose) and the step's own (the workers' average under
 * bsp). E|g_B|^2 = |G|^2 + tr(Sigma)/B gives both unknowns; each is smoothed
 * with an exponential moving average before the ratio, as Pollux does. */
#ifndef SHOAL_TRAIN_GNS_H
#define SHOAL_TRAIN_GNS_H

#include <stddef.h>

#include "shoal/train.h"

typedef struct shoal__gns {
  int every;          /* measure every n iterations (0: off) */
  double decay;       /* moving-average weight of the past */
  double g2, trs;     /* smoothed |G|^2 and tr(Sigma) */
  double small_sq;    /* this step's small-batch squared norm, waiting for the big one */
  int small_b, pending;
  long samples;       /* measurements taken */
} shoal__gns_t;

void shoal__gns_init(shoal__gns_t *g, int every);
/* Fold one pair of squared gradient norms over batches b_small < b_big into the estimate. */
void shoal__gns_add(shoal__gns_t *g, double small_sq, double b_small, double big_sq, double b_big);
/* B_noise, or 0 while it is unknown (no measurement yet, or |G|^2 not positive yet). */
double shoal__gns_value(const shoal__gns_t *g);
/* Pollux's statistical efficiency of a batch of m samples relative to m0: (B_noise + m0) / (B_noise + m). */
double shoal__gns_efficiency(double gns, double m0, double m);
/* Training hooks. Before a step, when the iteration is a measured one: the gradient of the first half of
 * the worker's batch (x, y: batch rows), its squared norm kept. After the step's gradient is final (for bsp
 * the workers' average over b_big = W x batch samples): the pair folded in. */
void shoal__gns_before_step(shoal__gns_t *g, shoal_model_t *m, const float *x, const uint8_t *y, int batch, long iter);
void shoal__gns_after_step(shoal__gns_t *g, const float *grads, size_t n, int b_big);

#endif
