/* SGD with momentum and weight decay (PyTorch's update rule, dampening 0),
 * and the learning-rate schedule: linear warm-up, then step decay. */
#ifndef SHOAL_TRAIN_OPTIM_H
#define SHOAL_TRAIN_OPTIM_H

#include <stddef.h>

#include "shoal/train.h"

/* v = mu*v + (g + wd*p); p -= lr*v, over n elements. */
void shoal__sgd_step(float *p, float *v, const float *g, size_t n, float lr, float mu, float wd);
/* v = mu*v + (g*scale + wd*p); p -= lr*v (parameter servers apply g/W). */
void shoal__sgd_step_scaled(float *p, float *v, const float *g, size_t n, float lr, float mu, float wd, float scale);
/* The learning rate of iteration `iter` (0-based, global) in epoch `epoch` (0-based). */
double shoal__lr_at(const shoal_train_opts_t *o, long iter, int epoch);

#endif
