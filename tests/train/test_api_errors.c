/* What a caller of the training API can get wrong: labels outside the
 * classes, NULL arguments, stop requests. Each must be a clear error (or a
 * documented result), never a crash or heap corruption. The data sets are
 * built in memory, so no data set needs to be installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>

#include "../runner.h"
#include "shoal/train.h"
#include "train_testutil.h"

/* n images of 4x4 pixels with labels i % nlab, declaring nclass classes. */
static shoal_dataset_t *synth(size_t n, int nclass, int nlab) {
  shoal_dataset_t *d = calloc(1, sizeof *d);
  CHECK(d);
  d->n = n;
  d->rows = d->cols = 4;
  d->nclass = nclass;
  d->x = calloc(n * 16, sizeof(float));
  d->y = calloc(n, 1);
  CHECK(d->x && d->y);
  for (size_t i = 0; i < n; i++) {
    d->y[i] = (uint8_t)(i % (size_t)nlab);
    d->x[i * 16 + d->y[i] % 16] = 1.0f;
  }
  return d;
}

static void synth_opts(shoal_train_opts_t *o, const shoal_dataset_t *tr, const shoal_dataset_t *te) {
  shoal_train_opts_init(o);
  o->model = SHOAL_MODEL_SOFTMAX;
  o->train_data = tr;
  o->test_data = te;
  o->epochs = 1;
  o->batch = 8;
  o->quiet = 1;
}

TEST_T(labels_outside_the_classes_are_errors, 60) {
  shoal_model_t *m = NULL;
  CHECK_OK(shoal_model_create(SHOAL_MODEL_SOFTMAX, 4, 4, 3, 8, 1, &m));
  float x[8 * 16] = {0};
  uint8_t y[8] = {0, 1, 2, 0, 1, 2, 0, 1};
  double loss = -7;
  CHECK_OK(shoal_model_train_step(m, x, y, 8, &loss));
  CHECK(loss > 0);
  y[5] = 3; /* the model has 3 outputs */
  loss = -7;
  CHECK_EQ(shoal_model_train_step(m, x, y, 8, &loss), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "label 3 at index 5 is outside the 3 classes 0..2");
  CHECK(loss == -7);
  y[5] = 255;
  size_t correct = 77;
  double lsum = -7;
  CHECK_EQ(shoal_model_evaluate(m, x, y, 8, &correct, &lsum), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "label 255 at index 5");
  CHECK(correct == 77 && lsum == -7);
  /* the outputs are optional (train.h): NULL means not wanted */
  y[5] = 2;
  CHECK_OK(shoal_model_train_step(m, x, y, 8, NULL));
  CHECK_OK(shoal_model_evaluate(m, x, y, 8, NULL, &lsum));
  CHECK_OK(shoal_model_evaluate(m, x, y, 8, &correct, NULL));
  CHECK(correct <= 8 && lsum > 0);
  CHECK_OK(shoal_model_evaluate(m, NULL, NULL, 0, &correct, &lsum));
  CHECK(correct == 0 && lsum == 0);
  shoal_model_destroy(m);

  /* preloaded sets: labels up to 9 in a set that declares 5 classes */
  shoal_dataset_t *bad = synth(64, 5, 10), *good = synth(64, 5, 5);
  shoal_train_opts_t o;
  shoal_train_result_t r;
  memset(&r, 0x5a, sizeof r);
  synth_opts(&o, bad, good);
  CHECK_EQ(shoal_train_run(&o, NULL, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "train_data: label 5 at index 5 is outside the 5 classes 0..4");
  CHECK_EQ(r.epochs_done, 0x5a5a5a5a);
  synth_opts(&o, good, bad);
  CHECK_EQ(shoal_train_run(&o, NULL, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "test_data: label 5 at index 5");
  /* the options' class count must agree with the sets' */
  synth_opts(&o, good, good);
  o.nclass = 10;
  CHECK_EQ(shoal_train_run(&o, NULL, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "train_data declares 5 classes but the options say 10");
  o.nclass = 5;
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_EQ(r.epochs_done, 1);
  o.decay_epochs[0] = -1;
  CHECK_EQ(shoal_train_run(&o, NULL, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "--decay-epochs -1: expected epochs >= 1");
  o.decay_epochs[0] = 0;
  o.nclass = 0; /* 0: the sets' own count */
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  shoal_dataset_destroy(bad);
  shoal_dataset_destroy(good);
}

TEST_T(null_arguments_are_errors, 30) {
  shoal_dataset_t *d = (shoal_dataset_t *)&d; /* untouched on failure */
  CHECK_EQ(shoal_dataset_load_dir("/nonexistent", "t10k", 10, NULL), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "shoal_dataset_load_dir: out is NULL");
  CHECK_EQ(shoal_dataset_load_dir(NULL, "t10k", 10, &d), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_dataset_load_dir("/nonexistent", NULL, 10, &d), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_dataset_load_idx(NULL, NULL, 0, &d), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "images_path is NULL");
  CHECK(d == (shoal_dataset_t *)&d);
  shoal_dataset_destroy(NULL);
  CHECK_EQ(shoal_model_create(SHOAL_MODEL_SOFTMAX, 28, 28, 10, 4, 1, NULL), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "shoal_model_create: out is NULL");
  CHECK_EQ(shoal_model_nparams(NULL), 0);
  CHECK(shoal_model_params(NULL) == NULL && shoal_model_grads(NULL) == NULL);
  shoal_model_destroy(NULL);
  shoal_model_kind_t k = SHOAL_MODEL_CNN;
  CHECK_EQ(shoal_model_kind_parse(NULL, &k), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_model_kind_parse("mlp", NULL), SHOAL_ERR_INVALID);
  CHECK_EQ(k, SHOAL_MODEL_CNN);
  shoal_sync_kind_t s = SHOAL_SYNC_PS;
  CHECK_EQ(shoal_sync_kind_parse(NULL, &s), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_sync_kind_parse("bsp", NULL), SHOAL_ERR_INVALID);
  CHECK_EQ(s, SHOAL_SYNC_PS);
  shoal_ds_pattern_t p = SHOAL_DS_TOPO;
  CHECK_EQ(shoal_ds_pattern_parse(NULL, &p), SHOAL_ERR_INVALID);
  shoal_ps_mode_t pm = SHOAL_PS_SSP;
  CHECK_EQ(shoal_ps_mode_parse(NULL, &pm), SHOAL_ERR_INVALID);
  CHECK(p == SHOAL_DS_TOPO && pm == SHOAL_PS_SSP);
  CHECK_EQ(shoal_model_train_step(NULL, NULL, NULL, 1, NULL), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_model_evaluate(NULL, NULL, NULL, 1, NULL, NULL), SHOAL_ERR_INVALID);
  shoal_train_result_t r;
  CHECK_EQ(shoal_train_run(NULL, NULL, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "shoal_train_run: options are NULL");
  CHECK_EQ(shoal_train_plot_svg(NULL, NULL, 1, NULL), SHOAL_ERR_INVALID);
  const char *paths[1] = {NULL};
  CHECK_EQ(shoal_train_plot_svg("/tmp/x.svg", paths, 1, NULL), SHOAL_ERR_INVALID);
  /* res may be NULL: the run's result is not wanted */
  shoal_dataset_t *tr = synth(32, 3, 3);
  shoal_train_opts_t o;
  synth_opts(&o, tr, tr);
  CHECK_OK(shoal_train_run(&o, NULL, NULL));
  /* a path with no room for the ".rankR"/".tmp" the runtime appends is refused (cut, ranks would share one
   * file and a checkpoint would be its own temporary file, deleted on a failed write) */
  static char longp[4096];
  memset(longp, 'a', 4090);
  longp[0] = '/', longp[4090] = '\0';
  o.ckpt_path = longp;
  CHECK_EQ(shoal_train_run(&o, NULL, NULL), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "--checkpoint: a path of 4090 bytes (at most 4064)");
  o.ckpt_path = NULL;
  o.iter_log = longp;
  CHECK_EQ(shoal_train_run(&o, NULL, NULL), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "--iter-log: a path of 4090 bytes");
  shoal_dataset_destroy(tr);
}

/* A stop request in the run's last iteration is a normal end, whether the run
 * ends at its last epoch's end or at max_iters inside an epoch. */
TEST_T(stop_in_the_last_iteration_is_a_normal_end, 60) {
  shoal_dataset_t *tr = synth(64, 3, 3);
  volatile int flag = 1;
  shoal_train_opts_t o;
  shoal_train_result_t r;
  synth_opts(&o, tr, tr);
  o.stop_flag = &flag;
  o.epochs = 2;
  o.max_iters = 1; /* 8 iterations per epoch: the run ends after the first */
  memset(&r, 0, sizeof r);
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_EQ(r.stopped, 0);
  CHECK_EQ(r.iters_done, 1);
  CHECK_EQ(r.epochs_done, 1);
  o.max_iters = 0; /* the same run ended by epochs: 1 epoch of 1 iteration */
  o.epochs = 1;
  o.train_subset = 8;
  memset(&r, 0, sizeof r);
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_EQ(r.stopped, 0);
  CHECK_EQ(r.iters_done, 1);
  /* not the last iteration: a stop */
  o.train_subset = 0;
  o.max_iters = 3;
  memset(&r, 0, sizeof r);
  CHECK_OK(shoal_train_run(&o, NULL, &r));
  CHECK_EQ(r.stopped, 1);
  CHECK_EQ(r.iters_done, 1);
  shoal_dataset_destroy(tr);
}

/* sync_config on 2 ranks: its keys replace the ones the options give (no "given twice" for a key the
 * caller set once) and a bad value is an error on every rank; in one process it is checked as well. */
static int g_port;
static const char *const cfgs[] = {"k=3", "pattern=random", "k=abc", "garbage"};

static int cfg_rank(int rank, void *arg) {
  (void)arg;
  shoal_comm_t *c = train_test_join(rank, 2, g_port);
  if (!c) return 10;
  shoal_dataset_t *tr = synth(64, 3, 3);
  shoal_train_opts_t o;
  synth_opts(&o, tr, tr);
  o.sync = SHOAL_SYNC_DSSYNC;
  for (int i = 0; i < 4; i++) {
    o.sync_config = cfgs[i];
    int rc = shoal_train_run(&o, c, NULL);
    if ((rc != 0) != (i >= 2)) {
      fprintf(stderr, "rank %d: sync_config '%s': rc %d: %s\n", rank, cfgs[i], rc, shoal_last_error());
      return 11 + i;
    }
  }
  shoal_dataset_destroy(tr);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(sync_config_keys_replace_the_options, 90) {
  shoal_dataset_t *tr = synth(64, 3, 3);
  shoal_train_opts_t o;
  synth_opts(&o, tr, tr);
  o.sync = SHOAL_SYNC_DSSYNC;
  for (int i = 0; i < 4; i++) {
    o.sync_config = cfgs[i];
    int rc = shoal_train_run(&o, NULL, NULL);
    CHECK_MSG((rc != 0) == (i >= 2), "one process, sync_config '%s': rc %d: %s", cfgs[i], rc, shoal_last_error());
    if (rc) CHECK_EQ(rc, SHOAL_ERR_INVALID);
  }
  shoal_dataset_destroy(tr);
  g_port = shoal_test_free_port();
  int st[2];
  int ok = shoal_test_fork_ranks(2, cfg_rank, NULL, 60, st);
  for (int i = 0; i < 2; i++) CHECK_MSG(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0, "rank %d: status %d", i, st[i]);
  CHECK_EQ(ok, 2);
}
