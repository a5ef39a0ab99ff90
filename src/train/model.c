/* float32 models on OpenBLAS. Activations are row-major [batch x features];
 * linear weights are [out x in] (PyTorch's layout), so the forward is
 * X * W^T and the backward dW = dY^T * X, dX = dY * W, each one sgemm.
 * Convolutions go through im2col per sample: Y_n = W [cout x cin*k*k] *
 * col_n [cin*k*k x hout*wout]. All buffers are allocated at creation:
 * a training step allocates nothing. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "train/model.h"

/* The bias+ReLU and mask+bias-gradient passes get an AVX2 clone picked at
 * load time (the build targets x86-64-v2). */
#define SHOAL_SIMD_CLONES __attribute__((target_clones("avx2,fma", "default")))

static const char *const kind_names[SHOAL_MODEL__COUNT] = {"softmax", "mlp", "cnn"};

const char *shoal_model_kind_name(shoal_model_kind_t k) {
  return (unsigned)k < SHOAL_MODEL__COUNT ? kind_names[k] : "unknown";
}

int shoal_model_kind_parse(const char *s, shoal_model_kind_t *out) {
  if (!s || !out)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_model_kind_parse: %s is NULL", !s ? "the name" : "out");
  for (int i = 0; i < SHOAL_MODEL__COUNT; i++)
    if (!strcmp(s, kind_names[i])) {
      *out = (shoal_model_kind_t)i;
      return 0;
    }
  return shoal__seterr(SHOAL_ERR_INVALID, "--model '%s': expected softmax, mlp or cnn", s);
}

static void add_linear(shoal_model_t *m, int in, int out, int relu) {
  shoal__layer_t *l = &m->layers[m->nlayers++];
  memset(l, 0, sizeof *l);
  l->type = SHOAL__LAYER_LINEAR;
  l->relu = relu;
  l->in_dim = in;
  l->out_dim = out;
  l->w_off = m->nparams;
  l->b_off = l->w_off + (size_t)in * out;
  l->nparam = (size_t)in * out + (size_t)out;
  m->nparams += l->nparam;
}

static void add_conv(shoal_model_t *m, int cin, int hin, int win, int cout, int k, int stride, int pad) {
  shoal__layer_t *l = &m->layers[m->nlayers++];
  memset(l, 0, sizeof *l);
  l->type = SHOAL__LAYER_CONV;
  l->relu = 1;
  l->cin = cin, l->hin = hin, l->win = win, l->cout = cout, l->k = k, l->stride = stride, l->pad = pad;
  l->hout = (hin + 2 * pad - k) / stride + 1;
  l->wout = (win + 2 * pad - k) / stride + 1;
  l->in_dim = cin * hin * win;
  l->out_dim = cout * l->hout * l->wout;
  l->w_off = m->nparams;
  l->b_off = l->w_off + (size_t)cout * cin * k * k;
  l->nparam = (size_t)cout * cin * k * k + (size_t)cout;
  m->nparams += l->nparam;
}

int shoal_model_create(shoal_model_kind_t kind, int rows, int cols, int nclass, int max_batch, uint64_t seed,
                       shoal_model_t **out) {
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_model_create: out is NULL");
  if ((unsigned)kind >= SHOAL_MODEL__COUNT) return shoal__seterr(SHOAL_ERR_INVALID, "model kind %d unknown", kind);
  if (rows < 1 || cols < 1 || rows > 4096 || cols > 4096 || nclass < 2 || max_batch < 1 || max_batch > (1 << 20))
    return shoal__seterr(SHOAL_ERR_INVALID, "model: bad geometry %dx%d, %d classes, batch %d", rows, cols, nclass,
                         max_batch);
  shoal_model_t *m = calloc(1, sizeof *m);
  if (!m) return shoal__seterr(SHOAL_ERR_NOMEM, "model: out of memory");
  m->kind = kind;
  m->max_batch = max_batch;
  int in = rows * cols;
  switch (kind) {
  case SHOAL_MODEL_SOFTMAX:
    add_linear(m, in, nclass, 0);
    break;
  case SHOAL_MODEL_MLP:
    add_linear(m, in, 512, 1);
    add_linear(m, 512, 256, 1);
    add_linear(m, 256, nclass, 0);
    break;
  case SHOAL_MODEL_CNN:
    add_conv(m, 1, rows, cols, 8, 3, 2, 1);
    add_conv(m, 8, m->layers[0].hout, m->layers[0].wout, 16, 3, 2, 1);
    add_linear(m, m->layers[1].out_dim, nclass, 0);
    break;
  default:
    break;
  }
  size_t colmax = 0;
  int ok = 1;
  m->params = malloc(m->nparams * sizeof(float));
  m->grads = calloc(m->nparams, sizeof(float));
  ok = m->params && m->grads;
  for (int i = 0; i < m->nlayers && ok; i++) {
    shoal__layer_t *l = &m->layers[i];
    l->out = malloc((size_t)max_batch * l->out_dim * sizeof(float));
    l->dout = malloc((size_t)max_batch * l->out_dim * sizeof(float));
    ok = l->out && l->dout;
    if (l->type == SHOAL__LAYER_CONV) {
      size_t c = (size_t)l->cin * l->k * l->k * l->hout * l->wout;
      if (c > colmax) colmax = c;
    }
  }
  if (ok && colmax) {
    m->col = malloc(colmax * sizeof(float));
    m->dcol = malloc(colmax * sizeof(float));
    ok = m->col && m->dcol;
  }
  if (!ok) {
    shoal_model_destroy(m);
    return shoal__seterr(SHOAL_ERR_NOMEM, "model: out of memory for %zu parameters, batch %d", m->nparams, max_batch);
  }
  /* PyTorch's default init: weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
  shoal_rng_t rng;
  shoal_rng_seed2(&rng, seed, 0x6d6f64656cULL);
  for (int i = 0; i < m->nlayers; i++) {
    shoal__layer_t *l = &m->layers[i];
    int fan_in = l->type == SHOAL__LAYER_LINEAR ? l->in_dim : l->cin * l->k * l->k;
    double bound = 1.0 / sqrt((double)fan_in);
    for (size_t j = 0; j < l->nparam; j++)
      m->params[l->w_off + j] = (float)((2.0 * shoal_rng_uniform(&rng) - 1.0) * bound);
  }
  *out = m;
  return 0;
}

void shoal_model_destroy(shoal_model_t *m) {
  if (!m) return;
  for (int i = 0; i < m->nlayers; i++) {
    free(m->layers[i].out);
    free(m->layers[i].dout);
  }
  free(m->col);
  free(m->dcol);
  free(m->params);
  free(m->grads);
  free(m);
}

size_t shoal_model_nparams(const shoal_model_t *m) { return m ? m->nparams : 0; }
float *shoal_model_params(shoal_model_t *m) { return m ? m->params : NULL; }
float *shoal_model_grads(shoal_model_t *m) { return m ? m->grads : NULL; }

/* col[(c*k + ky)*k + kx][oy*wout + ox] = in[c][oy*s - pad + ky][ox*s - pad + kx] (0 outside). */
static void im2col(const shoal__layer_t *l, const float *in, float *col) {
  int k = l->k, P = l->hout * l->wout;
  for (int c = 0; c < l->cin; c++)
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++) {
        float *row = col + (size_t)((c * k + ky) * k + kx) * P;
        for (int oy = 0; oy < l->hout; oy++) {
          int iy = oy * l->stride - l->pad + ky;
          float *dst = row + oy * l->wout;
          if (iy < 0 || iy >= l->hin) {
            memset(dst, 0, (size_t)l->wout * sizeof(float));
            continue;
          }
          const float *src = in + ((size_t)c * l->hin + iy) * l->win;
          for (int ox = 0; ox < l->wout; ox++) {
            int ix = ox * l->stride - l->pad + kx;
            dst[ox] = (ix >= 0 && ix < l->win) ? src[ix] : 0.0f;
          }
        }
      }
}

/* The adjoint of im2col: accumulate col into din (which the caller zeroed). */
static void col2im(const shoal__layer_t *l, const float *col, float *din) {
  int k = l->k, P = l->hout * l->wout;
  for (int c = 0; c < l->cin; c++)
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++) {
        const float *row = col + (size_t)((c * k + ky) * k + kx) * P;
        for (int oy = 0; oy < l->hout; oy++) {
          int iy = oy * l->stride - l->pad + ky;
          if (iy < 0 || iy >= l->hin) continue;
          float *dst = din + ((size_t)c * l->hin + iy) * l->win;
          const float *src = row + oy * l->wout;
          for (int ox = 0; ox < l->wout; ox++) {
            int ix = ox * l->stride - l->pad + kx;
            if (ix >= 0 && ix < l->win) dst[ix] += src[ox];
          }
        }
      }
}

SHOAL_SIMD_CLONES static void linear_forward(shoal_model_t *m, shoal__layer_t *l, const float *in, int B) {
  const float *W = m->params + l->w_off, *b = m->params + l->b_off;
  int O = l->out_dim;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, O, l->in_dim, 1.0f, in, l->in_dim, W, l->in_dim, 0.0f,
              l->out, O);
  for (int i = 0; i < B; i++) {
    float *y = l->out + (size_t)i * O;
    if (l->relu)
      for (int j = 0; j < O; j++) {
        float v = y[j] + b[j];
        y[j] = v > 0.0f ? v : 0.0f;
      }
    else
      for (int j = 0; j < O; j++) y[j] += b[j];
  }
}

static void conv_forward(shoal_model_t *m, shoal__layer_t *l, const float *in, int B) {
  const float *W = m->params + l->w_off, *b = m->params + l->b_off;
  int K = l->cin * l->k * l->k, P = l->hout * l->wout;
  for (int n = 0; n < B; n++) {
    float *y = l->out + (size_t)n * l->out_dim;
    im2col(l, in + (size_t)n * l->in_dim, m->col);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, l->cout, P, K, 1.0f, W, K, m->col, P, 0.0f, y, P);
    for (int c = 0; c < l->cout; c++) {
      float *yc = y + (size_t)c * P, bc = b[c];
      for (int p = 0; p < P; p++) {
        float v = yc[p] + bc;
        yc[p] = v > 0.0f ? v : 0.0f;
      }
    }
  }
}

void shoal__model_forward(shoal_model_t *m, const float *x, int batch) {
  const float *in = x;
  for (int i = 0; i < m->nlayers; i++) {
    shoal__layer_t *l = &m->layers[i];
    if (l->type == SHOAL__LAYER_LINEAR)
      linear_forward(m, l, in, batch);
    else
      conv_forward(m, l, in, batch);
    in = l->out;
  }
}

double shoal__model_loss(shoal_model_t *m, const uint8_t *y, int batch, int want_grad, size_t *correct) {
  shoal__layer_t *l = &m->layers[m->nlayers - 1];
  int C = l->out_dim;
  double loss = 0.0;
  size_t hits = 0;
  float inv_b = 1.0f / (float)batch;
  for (int i = 0; i < batch; i++) {
    const float *z = l->out + (size_t)i * C;
    float *dz = l->dout + (size_t)i * C;
    int arg = 0;
    float zmax = z[0];
    for (int j = 1; j < C; j++)
      if (z[j] > zmax) zmax = z[j], arg = j;
    hits += arg == y[i];
    double sum = 0.0;
    for (int j = 0; j < C; j++) sum += exp((double)(z[j] - zmax));
    double lse = log(sum) + zmax;
    loss += lse - z[y[i]];
    if (want_grad) {
      for (int j = 0; j < C; j++) dz[j] = (float)exp((double)z[j] - lse) * inv_b;
      dz[y[i]] -= inv_b;
    }
  }
  if (correct) *correct = hits;
  return loss / batch;
}

SHOAL_SIMD_CLONES static void linear_backward(shoal_model_t *m, shoal__layer_t *l, const float *in, float *din, int B) {
  const float *W = m->params + l->w_off;
  float *dW = m->grads + l->w_off, *db = m->grads + l->b_off;
  int O = l->out_dim, In = l->in_dim;
  /* Fused ReLU mask and bias gradient in one pass over dY. */
  memset(db, 0, (size_t)O * sizeof(float));
  for (int i = 0; i < B; i++) {
    float *dy = l->dout + (size_t)i * O;
    if (l->relu) {
      const float *y = l->out + (size_t)i * O;
      for (int j = 0; j < O; j++) {
        float g = y[j] > 0.0f ? dy[j] : 0.0f;
        dy[j] = g;
        db[j] += g;
      }
    } else {
      for (int j = 0; j < O; j++) db[j] += dy[j];
    }
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, In, B, 1.0f, l->dout, O, in, In, 0.0f, dW, In);
  if (din) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, In, O, 1.0f, l->dout, O, W, In, 0.0f, din, In);
}

static void conv_backward(shoal_model_t *m, shoal__layer_t *l, const float *in, float *din, int B) {
  const float *W = m->params + l->w_off;
  float *dW = m->grads + l->w_off, *db = m->grads + l->b_off;
  int K = l->cin * l->k * l->k, P = l->hout * l->wout;
  memset(db, 0, (size_t)l->cout * sizeof(float));
  for (int n = 0; n < B; n++) {
    float *dy = l->dout + (size_t)n * l->out_dim;
    const float *y = l->out + (size_t)n * l->out_dim;
    for (int c = 0; c < l->cout; c++) {
      float acc = 0.0f;
      for (int p = 0; p < P; p++) {
        size_t q = (size_t)c * P + p;
        float g = y[q] > 0.0f ? dy[q] : 0.0f;
        dy[q] = g;
        acc += g;
      }
      db[c] += acc;
    }
    im2col(l, in + (size_t)n * l->in_dim, m->col);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, l->cout, K, P, 1.0f, dy, P, m->col, P, n ? 1.0f : 0.0f, dW,
                K);
    if (din) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, P, l->cout, 1.0f, W, K, dy, P, 0.0f, m->dcol, P);
      float *dx = din + (size_t)n * l->in_dim;
      memset(dx, 0, (size_t)l->in_dim * sizeof(float));
      col2im(l, m->dcol, dx);
    }
  }
}

void shoal__model_backward(shoal_model_t *m, const float *x, int batch, shoal__grad_ready_fn ready, void *arg) {
  for (int i = m->nlayers - 1; i >= 0; i--) {
    shoal__layer_t *l = &m->layers[i];
    const float *in = i ? m->layers[i - 1].out : x;
    float *din = i ? m->layers[i - 1].dout : NULL; /* no gradient for the input images */
    if (l->type == SHOAL__LAYER_LINEAR)
      linear_backward(m, l, in, din, batch);
    else
      conv_backward(m, l, in, din, batch);
    if (ready) ready(i, arg);
  }
}

int shoal__model_check_labels(const char *what, const uint8_t *y, size_t n, int nclass) {
  for (size_t i = 0; i < n; i++)
    if (y[i] >= nclass)
      return shoal__seterr(SHOAL_ERR_INVALID, "%s: label %u at index %zu is outside the %d classes 0..%d", what, y[i], i,
                           nclass, nclass - 1);
  return 0;
}

int shoal_model_train_step(shoal_model_t *m, const float *x, const uint8_t *y, int batch, double *loss) {
  if (!m || !x || !y) return shoal__seterr(SHOAL_ERR_INVALID, "train step: NULL %s", !m ? "model" : !x ? "x" : "y");
  if (batch < 1 || batch > m->max_batch)
    return shoal__seterr(SHOAL_ERR_INVALID, "train step: batch %d outside 1..%d", batch, m->max_batch);
  int rc = shoal__model_check_labels("train step", y, (size_t)batch, m->layers[m->nlayers - 1].out_dim);
  if (rc) return rc;
  shoal__model_forward(m, x, batch);
  double l = shoal__model_loss(m, y, batch, 1, NULL);
  shoal__model_backward(m, x, batch, NULL, NULL);
  if (loss) *loss = l;
  return 0;
}

int shoal_model_evaluate(shoal_model_t *m, const float *x, const uint8_t *y, size_t n, size_t *correct,
                         double *loss_sum) {
  if (!m || (n && (!x || !y)))
    return shoal__seterr(SHOAL_ERR_INVALID, "evaluate: NULL %s", !m ? "model" : !x ? "x" : "y");
  int rc = shoal__model_check_labels("evaluate", y, n, m->layers[m->nlayers - 1].out_dim);
  if (rc) return rc;
  size_t hits = 0;
  double lsum = 0.0;
  size_t in_dim = (size_t)m->layers[0].in_dim;
  for (size_t i = 0; i < n; i += (size_t)m->max_batch) {
    int b = (int)(n - i < (size_t)m->max_batch ? n - i : (size_t)m->max_batch);
    size_t h;
    shoal__model_forward(m, x + i * in_dim, b);
    lsum += shoal__model_loss(m, y + i, b, 0, &h) * b;
    hits += h;
  }
  if (correct) *correct = hits;
  if (loss_sum) *loss_sum = lsum;
  return 0;
}
