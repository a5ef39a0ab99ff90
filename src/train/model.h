/* Internal model structure: a chain of layers (linear or convolution, each
 * with an optional fused ReLU) ending in softmax cross-entropy. Parameters of
 * all layers are one contiguous array in layer order, so a suffix of layers
 * is a contiguous range: the BSP buckets (bsp.c) rely on it. */
#ifndef SHOAL_TRAIN_MODEL_H
#define SHOAL_TRAIN_MODEL_H

#include <stddef.h>

#include "shoal/train.h"

enum { SHOAL__LAYER_LINEAR = 0, SHOAL__LAYER_CONV = 1 };

typedef struct shoal__layer {
  int type;
  int relu;               /* ReLU fused into the bias add of the forward */
  int in_dim, out_dim;    /* features per sample (conv: C*H*W, NCHW) */
  int cin, hin, win, cout, hout, wout, k, stride, pad; /* conv geometry */
  size_t w_off, b_off;    /* offsets of weight and bias in the parameter array */
  size_t nparam;          /* weight + bias */
  float *out;             /* max_batch * out_dim activations */
  float *dout;            /* max_batch * out_dim gradient of the loss wrt out */
} shoal__layer_t;

struct shoal_model {
  shoal_model_kind_t kind;
  int nlayers;
  shoal__layer_t layers[4];
  int max_batch;
  size_t nparams;
  float *params, *grads;
  float *col;             /* conv: im2col buffer of the largest conv layer (one sample) */
  float *dcol;
};

/* Called after layer l's parameter gradients are final during backward
 * (layers are visited last to first). */
typedef void (*shoal__grad_ready_fn)(int layer, void *arg);

/* Forward on batch inputs x; the logits are in layers[nlayers-1].out. */
void shoal__model_forward(shoal_model_t *m, const float *x, int batch);
/* 0, or SHOAL_ERR_INVALID naming `what`, the first label >= nclass and its index. */
int shoal__model_check_labels(const char *what, const uint8_t *y, size_t n, int nclass);
/* Softmax cross-entropy on the logits (every y[i] < the output count: the
 * caller checks, shoal__model_check_labels): mean loss; writes d(loss)/d(logits)
 * into the last layer's dout when want_grad. correct (optional) counts hits. */
double shoal__model_loss(shoal_model_t *m, const uint8_t *y, int batch, int want_grad, size_t *correct);
/* Backward from the last layer's dout; calls ready(l) as each layer is done. */
void shoal__model_backward(shoal_model_t *m, const float *x, int batch, shoal__grad_ready_fn ready, void *arg);

#endif
