/* Training runtime, single process: IDX reader errors, finite-difference
 * checks of every layer and model, the optimizer, checkpoints (bit-exact
 * resume) and a short training run that must reach a fixed accuracy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "../runner.h"
#include "core/rng.h"
#include "shoal/train.h"
#include "train/ckpt.h"
#include "train/model.h"
#include "train/optim.h"

static const char *fmnist(void) {
  const char *dir = SHOAL_FASHION_MNIST_DIR;
  char p[512];
  snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
  if (access(p, R_OK)) shoal_test_skip("dataset-fashion-mnist is not installed");
  return dir;
}

static void write_gz(const char *path, const void *data, size_t n) {
  gzFile g = gzopen(path, "wb");
  CHECK(g);
  CHECK(gzwrite(g, data, (unsigned)n) == (int)n);
  gzclose(g);
}

TEST(idx_reader_errors_name_the_file) {
  char dir[] = "/tmp/shoal-idx-XXXXXX";
  CHECK(mkdtemp(dir));
  char img[600], lab[600];
  snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
  snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", dir);
  /* A valid 2-image 2x3 set first. */
  unsigned char ih[16 + 12] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 255, 10, 20, 30, 40, 1, 2, 3, 4, 5, 6};
  unsigned char lh[8 + 2] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 7};
  write_gz(img, ih, sizeof ih);
  write_gz(lab, lh, sizeof lh);
  shoal_dataset_t *d = NULL;
  CHECK_OK(shoal_dataset_load_dir(dir, "train", 0, &d));
  CHECK_EQ(d->n, 2);
  CHECK_EQ(d->rows, 2);
  CHECK_EQ(d->cols, 3);
  CHECK_EQ(d->nclass, 10);
  CHECK_EQ(d->y[1], 7);
  CHECK_NEAR(d->x[1], (1.0 - 0.2860) / 0.3530, 1e-5);
  shoal_dataset_destroy(d);
  /* A corrupt label byte (200) is outside the declared classes: file and offset named. */
  unsigned char bad[8 + 2] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 200};
  write_gz(lab, bad, sizeof bad);
  d = NULL;
  CHECK_EQ(shoal_dataset_load_dir(dir, "train", 0, &d), SHOAL_ERR_PARSE);
  CHECK(d == NULL);
  CHECK_CONTAINS(shoal_last_error(), lab);
  CHECK_CONTAINS(shoal_last_error(), "label 200 at byte offset 9 (item 1)");
  /* declared 3 classes: label 7 is outside too; 256 classes accept 200 */
  write_gz(lab, lh, sizeof lh);
  CHECK_EQ(shoal_dataset_load_dir(dir, "train", 3, &d), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "outside the 3 classes 0..2");
  write_gz(lab, bad, sizeof bad);
  CHECK_OK(shoal_dataset_load_dir(dir, "train", 256, &d));
  CHECK_EQ(d->nclass, 256);
  shoal_dataset_destroy(d);
  write_gz(lab, lh, sizeof lh);
  /* Bad magic: a label file where an image file should be. */
  write_gz(img, lh, sizeof lh);
  d = NULL;
  CHECK_EQ(shoal_dataset_load_dir(dir, "train", 0, &d), SHOAL_ERR_PARSE);
  CHECK(d == NULL);
  CHECK_CONTAINS(shoal_last_error(), img);
  CHECK_CONTAINS(shoal_last_error(), "bad magic");
  /* Truncated data (plain, not gzip: zlib reads both). */
  snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
  unlink(img);
  snprintf(img, sizeof img, "%s/train-images-idx3-ubyte", dir);
  FILE *f = fopen(img, "wb");
  CHECK(f);
  fwrite(ih, 1, sizeof ih - 4, f);
  fclose(f);
  CHECK_EQ(shoal_dataset_load_dir(dir, "train", 0, &d), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), img);
  CHECK_CONTAINS(shoal_last_error(), "truncated");
  /* Counts disagree. */
  f = fopen(img, "wb");
  fwrite(ih, 1, sizeof ih, f);
  fclose(f);
  lh[7] = 3;
  write_gz(lab, lh, sizeof lh);
  CHECK_EQ(shoal_dataset_load_dir(dir, "train", 0, &d), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), lab);
  /* Missing file. */
  CHECK_EQ(shoal_dataset_load_dir("/nonexistent-dir", "t10k", 0, &d), SHOAL_ERR_NOT_FOUND);
  CHECK_CONTAINS(shoal_last_error(), "/nonexistent-dir/t10k-images-idx3-ubyte.gz");
  unlink(img);
  unlink(lab);
  rmdir(dir);
}

TEST(idx_reads_fashion_mnist) {
  const char *dir = fmnist();
  shoal_dataset_t *d;
  CHECK_OK(shoal_dataset_load_dir(dir, "t10k", 0, &d));
  CHECK_EQ(d->n, 10000);
  CHECK_EQ(d->rows, 28);
  CHECK_EQ(d->cols, 28);
  CHECK_EQ(d->nclass, 10);
  size_t count[10] = {0};
  for (size_t i = 0; i < d->n; i++) count[d->y[i]]++;
  for (int c = 0; c < 10; c++) CHECK_EQ(count[c], 1000); /* the test set is balanced */
  shoal_dataset_destroy(d);
}

/* Loss in double precision of the float forward, for finite differences. */
static double loss_of(shoal_model_t *m, const float *x, const uint8_t *y, int b) {
  shoal__model_forward(m, x, b);
  return shoal__model_loss(m, y, b, 0, NULL);
}

/* Central differences on sampled parameters of every layer against backward. */
static void gradcheck(shoal_model_kind_t kind, int rows, int cols) {
  const int B = 3;
  shoal_model_t *m;
  CHECK_OK(shoal_model_create(kind, rows, cols, 10, B, 7, &m));
  shoal_rng_t rng;
  shoal_rng_seed(&rng, 11);
  float *x = malloc(sizeof(float) * B * rows * cols);
  uint8_t y[B];
  for (int i = 0; i < B * rows * cols; i++) x[i] = (float)shoal_rng_normal(&rng);
  for (int i = 0; i < B; i++) y[i] = (uint8_t)shoal_rng_below(&rng, 10);
  double l0;
  CHECK_OK(shoal_model_train_step(m, x, y, B, &l0));
  CHECK_NEAR(l0, loss_of(m, x, y, B), 1e-6);
  float *g = malloc(m->nparams * sizeof(float));
  memcpy(g, m->grads, m->nparams * sizeof(float));
  int bad = 0, checked = 0;
  for (int li = 0; li < m->nlayers; li++) {
    shoal__layer_t *l = &m->layers[li];
    for (int s = 0; s < 40; s++) {
      /* half weights, half biases */
      size_t j = s % 2 ? l->b_off + shoal_rng_below(&rng, l->nparam - (l->b_off - l->w_off))
                       : l->w_off + shoal_rng_below(&rng, l->b_off - l->w_off);
      float keep = m->params[j];
      const float eps = 2e-3f;
      m->params[j] = keep + eps;
      double lp = loss_of(m, x, y, B);
      m->params[j] = keep - eps;
      double lm = loss_of(m, x, y, B);
      m->params[j] = keep;
      double num = (lp - lm) / (2.0 * eps), ana = g[j];
      checked++;
      if (fabs(num - ana) > 2e-3 + 3e-2 * fmax(fabs(num), fabs(ana))) {
        bad++;
        fprintf(stderr, "%s layer %d param %zu: numeric %.6g analytic %.6g\n", shoal_model_kind_name(kind), li, j, num,
                ana);
      }
    }
  }
  /* ReLU kinks can spoil a rare central difference; a wrong backward spoils most. */
  CHECK_MSG(bad <= checked / 40, "%d of %d finite-difference checks failed", bad, checked);
  free(g);
  free(x);
  shoal_model_destroy(m);
}

TEST(gradcheck_softmax) { gradcheck(SHOAL_MODEL_SOFTMAX, 28, 28); }
TEST(gradcheck_mlp) { gradcheck(SHOAL_MODEL_MLP, 28, 28); }
TEST(gradcheck_cnn) { gradcheck(SHOAL_MODEL_CNN, 12, 10); }

/* The im2col convolution equals a direct loop convolution (with bias, ReLU). */
TEST(conv_forward_matches_direct) {
  shoal_model_t *m;
  const int H = 9, Wd = 7, B = 2;
  CHECK_OK(shoal_model_create(SHOAL_MODEL_CNN, H, Wd, 10, B, 3, &m));
  shoal_rng_t rng;
  shoal_rng_seed(&rng, 5);
  float x[B * H * Wd];
  for (int i = 0; i < B * H * Wd; i++) x[i] = (float)shoal_rng_normal(&rng);
  shoal__model_forward(m, x, B);
  for (int li = 0; li < 2; li++) {
    shoal__layer_t *l = &m->layers[li];
    const float *in = li ? m->layers[0].out : x;
    const float *W = m->params + l->w_off, *bias = m->params + l->b_off;
    for (int n = 0; n < B; n++)
      for (int co = 0; co < l->cout; co++)
        for (int oy = 0; oy < l->hout; oy++)
          for (int ox = 0; ox < l->wout; ox++) {
            double acc = bias[co];
            for (int ci = 0; ci < l->cin; ci++)
              for (int ky = 0; ky < l->k; ky++)
                for (int kx = 0; kx < l->k; kx++) {
                  int iy = oy * l->stride - l->pad + ky, ix = ox * l->stride - l->pad + kx;
                  if (iy < 0 || iy >= l->hin || ix < 0 || ix >= l->win) continue;
                  acc += (double)W[((co * l->cin + ci) * l->k + ky) * l->k + kx] *
                         in[(size_t)n * l->in_dim + ((size_t)ci * l->hin + iy) * l->win + ix];
                }
            double want = acc > 0 ? acc : 0;
            double got = l->out[(size_t)n * l->out_dim + ((size_t)co * l->hout + oy) * l->wout + ox];
            CHECK_NEAR(got, want, 1e-4);
          }
  }
  shoal_model_destroy(m);
}

TEST(sgd_momentum_and_schedule) {
  float p[2] = {1.0f, -2.0f}, v[2] = {0, 0}, g[2] = {0.5f, 0.25f};
  shoal__sgd_step(p, v, g, 2, 0.1f, 0.9f, 0.01f);
  /* v = g + wd*p; p -= lr*v */
  CHECK_NEAR(v[0], 0.5 + 0.01, 1e-7);
  CHECK_NEAR(p[0], 1.0 - 0.1 * 0.51, 1e-7);
  float v0 = v[1], p1 = p[1];
  shoal__sgd_step(p, v, g, 2, 0.1f, 0.9f, 0.01f);
  CHECK_NEAR(v[1], 0.9 * v0 + 0.25 + 0.01 * p1, 1e-6);
  shoal_train_opts_t o;
  shoal_train_opts_init(&o);
  o.lr = 0.4;
  o.warmup_iters = 4;
  o.decay_epochs[0] = 2;
  o.decay_epochs[1] = 3;
  o.decay_gamma = 0.5;
  CHECK_NEAR(shoal__lr_at(&o, 0, 0), 0.1, 1e-12);
  CHECK_NEAR(shoal__lr_at(&o, 3, 0), 0.4, 1e-12);
  CHECK_NEAR(shoal__lr_at(&o, 100, 1), 0.4, 1e-12);
  CHECK_NEAR(shoal__lr_at(&o, 100, 2), 0.2, 1e-12);
  CHECK_NEAR(shoal__lr_at(&o, 100, 5), 0.1, 1e-12);
}

TEST(checkpoint_roundtrip_and_corruption) {
  char path[] = "/tmp/shoal-ckpt-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  float p[5] = {1, 2, 3, 4, 5}, v[5] = {-1, -2, -3, -4, -5}, p2[5], v2[5];
  shoal__ckpt_meta_t meta = {.model_kind = 1, .workers = 4, .epochs_done = 3, .iters_done = 99, .seed = 7,
                             .nparams = 5}, m2;
  CHECK_OK(shoal__ckpt_save(path, &meta, p, v));
  CHECK_OK(shoal__ckpt_load(path, &m2, p2, v2, 5));
  CHECK(!memcmp(p, p2, sizeof p) && !memcmp(v, v2, sizeof v));
  CHECK_EQ(m2.iters_done, 99);
  CHECK_EQ(shoal__ckpt_load(path, &m2, p2, v2, 6), SHOAL_ERR_MISMATCH);
  FILE *f = fopen(path, "r+b");
  fseek(f, 60, SEEK_SET);
  fputc(0x55, f);
  fclose(f);
  CHECK_EQ(shoal__ckpt_load(path, &m2, p2, v2, 5), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), path);
  CHECK_CONTAINS(shoal_last_error(), "CRC");
  unlink(path);
}

static shoal_dataset_t *g_train, *g_test;
static void load_fmnist(void) {
  const char *dir = fmnist();
  CHECK_OK(shoal_dataset_load_dir(dir, "train", 0, &g_train));
  CHECK_OK(shoal_dataset_load_dir(dir, "t10k", 0, &g_test));
}

static void small_opts(shoal_train_opts_t *o) {
  shoal_train_opts_init(o);
  o->train_data = g_train;
  o->test_data = g_test;
  o->train_subset = 4096;
  o->test_subset = 2000;
  o->quiet = 1;
}

static float *read_params(const char *path, size_t n) {
  float *p = malloc(n * sizeof(float));
  FILE *f = fopen(path, "rb");
  CHECK(f && p);
  CHECK_EQ(fread(p, sizeof(float), n, f), n);
  fclose(f);
  return p;
}

TEST_T(resume_is_bit_exact_single_process, 60) {
  load_fmnist();
  char a[] = "/tmp/shoal-resA-XXXXXX", b[] = "/tmp/shoal-resB-XXXXXX", ck[] = "/tmp/shoal-resC-XXXXXX";
  close(mkstemp(a));
  close(mkstemp(b));
  close(mkstemp(ck));
  shoal_train_opts_t o;
  small_opts(&o);
  o.train_subset = 2048;
  o.epochs = 2;
  o.warmup_iters = 10;
  o.decay_epochs[0] = 1;
  o.params_out = a;
  shoal_train_result_t r;
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  o.epochs = 1;
  o.ckpt_path = ck;
  o.params_out = NULL;
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  o.epochs = 2;
  o.ckpt_path = NULL;
  o.resume_path = ck;
  o.params_out = b;
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_EQ(r.epochs_done, 2);
  shoal_model_t *m;
  CHECK_OK(shoal_model_create(SHOAL_MODEL_MLP, 28, 28, 10, 1, 1, &m));
  size_t n = shoal_model_nparams(m);
  shoal_model_destroy(m);
  float *pa = read_params(a, n), *pb = read_params(b, n);
  CHECK(!memcmp(pa, pb, n * sizeof(float)));
  /* A different seed must not resume from this checkpoint. */
  o.seed = 2;
  CHECK_EQ(shoal_train_run(&o, NULL, &r), SHOAL_ERR_MISMATCH);
  CHECK_CONTAINS(shoal_last_error(), ck);
  free(pa);
  free(pb);
  unlink(a);
  unlink(b);
  unlink(ck);
}

/* A broken forward or backward cannot reach these accuracies. */
TEST_T(short_training_reaches_accuracy, 90) {
  load_fmnist();
  shoal_train_opts_t o;
  small_opts(&o);
  o.train_subset = 6000;
  o.epochs = 2;
  shoal_train_result_t r;
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_MSG(r.final_test_acc >= 0.78, "mlp: %.4f", r.final_test_acc);
  CHECK(r.final_train_loss < 0.8);
  o.model = SHOAL_MODEL_SOFTMAX;
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_MSG(r.final_test_acc >= 0.74, "softmax: %.4f", r.final_test_acc);
  o.model = SHOAL_MODEL_CNN;
  o.train_subset = 3000;
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_MSG(r.final_test_acc >= 0.70, "cnn: %.4f", r.final_test_acc);
}
