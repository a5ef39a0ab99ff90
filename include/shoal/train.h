/* shoal data-parallel training runtime: Fashion-MNIST (or any IDX image set),
 * float32 models on OpenBLAS, SGD with momentum, and five synchronization
 * strategies over a shoal communicator (docs/training.md).
 *
 * Every function returns 0 or a negative shoal_status_t; the detailed
 * message is in shoal_last_error(). Output parameters are written only on
 * success. A NULL pointer argument is SHOAL_ERR_INVALID unless said
 * otherwise; functions that return no status accept NULL: the destroy
 * functions and shoal_train_opts_init do nothing, shoal_model_nparams
 * returns 0, shoal_model_params and shoal_model_grads return NULL. */
#ifndef SHOAL_TRAIN_H
#define SHOAL_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/comm.h"
#include "shoal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data ---------------------------------------------------------------- */

/* An image classification set: n images of rows*cols pixels scaled to [0,1]
 * and normalized with (x - 0.2860) / 0.3530 (Fashion-MNIST's mean/std), and
 * labels in 0..nclass-1, nclass being the class count the caller declares. */
typedef struct shoal_dataset {
  size_t n;
  int rows, cols;
  int nclass;
  float *x;      /* n * rows * cols */
  uint8_t *y;    /* n */
} shoal_dataset_t;

/* Read an IDX image file and label file (gzip or plain, via zlib) of a set
 * with nclass classes (2..256; 0: SHOAL_DATASET_CLASSES). Errors name the
 * file: bad magic, truncated data, mismatched counts, and a label outside
 * 0..nclass-1 with its byte offset in the (uncompressed) label file. */
int  shoal_dataset_load_idx(const char *images_path, const char *labels_path, int nclass, shoal_dataset_t **out);
/* dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. split: "train" or "t10k". */
int  shoal_dataset_load_dir(const char *dir, const char *split, int nclass, shoal_dataset_t **out);
/* Fashion-MNIST's class count, the default. */
#define SHOAL_DATASET_CLASSES 10
void shoal_dataset_destroy(shoal_dataset_t *d);
/* The Debian package dataset-fashion-mnist's directory. */
#define SHOAL_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* ---- models -------------------------------------------------------------- */

typedef enum shoal_model_kind {
  SHOAL_MODEL_SOFTMAX = 0, /* 784-10 softmax regression */
  SHOAL_MODEL_MLP = 1,     /* 784-512-256-10, ReLU */
  SHOAL_MODEL_CNN = 2,     /* conv3x3/2 (1->8) ReLU, conv3x3/2 (8->16) ReLU, fc 784-10 */
  SHOAL_MODEL__COUNT
} shoal_model_kind_t;

const char *shoal_model_kind_name(shoal_model_kind_t k);
int shoal_model_kind_parse(const char *s, shoal_model_kind_t *out);

typedef struct shoal_model shoal_model_t;

/* A model for rows x cols inputs and nclass outputs with workspace for
 * batches of up to max_batch; parameters initialized from seed (Kaiming
 * uniform, as PyTorch's defaults). All parameters live in one contiguous
 * array (layer by layer, weights then bias), and so do their gradients. */
int    shoal_model_create(shoal_model_kind_t kind, int rows, int cols, int nclass, int max_batch,
                          uint64_t seed, shoal_model_t **out);
void   shoal_model_destroy(shoal_model_t *m);
size_t shoal_model_nparams(const shoal_model_t *m);
float *shoal_model_params(shoal_model_t *m);
float *shoal_model_grads(shoal_model_t *m);
/* Forward + backward on a batch: grads = d(mean cross-entropy)/d(params);
 * *loss = the mean loss (loss may be NULL: not wanted). No allocation. A
 * label outside 0..nclass-1 (the model's outputs) is SHOAL_ERR_INVALID
 * naming its index and value. */
int    shoal_model_train_step(shoal_model_t *m, const float *x, const uint8_t *y, int batch, double *loss);
/* Forward only: number of correct predictions and summed loss (correct and
 * loss_sum may each be NULL: not wanted; x and y may be NULL when n is 0).
 * Labels are checked as in shoal_model_train_step. */
int    shoal_model_evaluate(shoal_model_t *m, const float *x, const uint8_t *y, size_t n,
                            size_t *correct, double *loss_sum);

/* ---- training ------------------------------------------------------------ */

typedef enum shoal_sync_kind {
  SHOAL_SYNC_BSP = 0,      /* bucketed gradient allreduce every iteration */
  SHOAL_SYNC_DSSYNC = 1,   /* divide-and-shuffle group parameter averaging */
  SHOAL_SYNC_PS = 2,       /* sharded parameter servers (last S ranks) */
  SHOAL_SYNC_LOCALSGD = 3, /* average parameters every H iterations */
  SHOAL_SYNC_PARTIAL = 4,  /* gradients of the workers ready in rank 0's window; the others relay (partial.h) */
  SHOAL_SYNC__COUNT
} shoal_sync_kind_t;

typedef enum shoal_ds_pattern {
  SHOAL_DS_RANDOM = 0,    /* random partition into groups of k */
  SHOAL_DS_BUTTERFLY = 1, /* hypercube digits, mixed radix <= k */
  SHOAL_DS_TOPO = 2,      /* racks: local butterfly + bridging every h rounds */
  SHOAL_DS_FIXED = 3,     /* fixed groups (negative control) */
  SHOAL_DS__COUNT
} shoal_ds_pattern_t;

typedef enum shoal_ps_mode {
  SHOAL_PS_SYNC = 0,  /* servers average all workers' gradients each iteration */
  SHOAL_PS_ASYNC = 1, /* apply each gradient as it arrives */
  SHOAL_PS_SSP = 2,   /* async, but no worker more than `staleness` clocks ahead */
  SHOAL_PS__COUNT
} shoal_ps_mode_t;

const char *shoal_sync_kind_name(shoal_sync_kind_t k);
int shoal_sync_kind_parse(const char *s, shoal_sync_kind_t *out);
const char *shoal_ds_pattern_name(shoal_ds_pattern_t p);
int shoal_ds_pattern_parse(const char *s, shoal_ds_pattern_t *out);
const char *shoal_ps_mode_name(shoal_ps_mode_t m);
int shoal_ps_mode_parse(const char *s, shoal_ps_mode_t *out);

typedef struct shoal_train_opts {
  shoal_model_kind_t model;
  shoal_sync_kind_t sync;
  const char *data_dir;        /* NULL: SHOAL_FASHION_MNIST_DIR */
  const shoal_dataset_t *train_data, *test_data; /* preloaded (tests); NULL: load from data_dir. A preloaded
                                  set's nclass must be 2..256 and equal nclass below (unless that is 0), and
                                  every label of the images used below it: else SHOAL_ERR_INVALID naming the
                                  set, the index and the label */
  size_t train_subset;         /* 0: all; else the first n training images */
  size_t test_subset;          /* 0: all */
  int nclass;                  /* classes of the data set (0: SHOAL_DATASET_CLASSES, or a preloaded set's own) */
  int epochs;
  int batch;                   /* per worker */
  double lr;                   /* for the global batch (workers * batch) */
  double momentum;
  double weight_decay;
  int warmup_iters;            /* linear warm-up from lr/warmup_iters to lr */
  int decay_epochs[8];         /* lr *= decay_gamma once E epochs are done, i.e. from the epoch printed
                                  (1-based) as E+1 on, for each E (0-terminated; negative: SHOAL_ERR_INVALID;
                                  E >= epochs: no drop in this run, a warning) */
  double decay_gamma;
  uint64_t seed;
  int max_iters;               /* > 0: stop after this many iterations in total (tests) */
  /* bsp */
  size_t bucket_bytes;         /* bucket size; 0: one bucket per layer */
  int overlap;                 /* allreduce buckets on a thread during backward */
  /* dssync */
  shoal_ds_pattern_t ds_pattern;
  int ds_k;                    /* group size (random), max radix (butterfly) */
  int ds_global_every;         /* P > 0: global average every P iterations */
  int ds_overlap;              /* average x_t in the group while computing step t (ds-sync.md §3.1 option) */
  int ds_bridge_period;        /* topo: h (0: ceil(log_k m) + 1) */
  int ds_bridge_width;         /* topo: b (0: 1) */
  const char *racks;           /* topo: "0,0,1,1" rack of each worker; NULL: by host name */
  int consensus_every;         /* > 0: measure the consensus distance every n iterations */
  /* ps */
  int servers;
  shoal_ps_mode_t ps_mode;
  int staleness;
  double ps_slow_worker_ms;    /* tests: worker 0 sleeps this long per iteration */
  /* localsgd */
  int local_h;
  /* output */
  const char *csv_path;        /* per-epoch log (rank 0); NULL: none */
  const char *iter_log;        /* per-iteration log of every worker (r > 0: PATH.rankR); NULL: none */
  const char *ckpt_path;       /* save at the end of every epoch (bsp: rank 0; others: every worker,
                                  FILE.rankR; ps servers FILE.serverS); NULL: none */
  int ckpt_every;              /* > 0: also every n iterations inside an epoch (not ps) */
  const char *resume_path;     /* resume from this checkpoint; NULL: start fresh */
  const char *params_out;      /* final parameters (raw float32), worker r > 0 to PATH.rankR; NULL: none */
  const char *label;           /* run name in the CSV (for plots) */
  int quiet;                   /* no per-epoch lines on stdout */
  int blas_threads;            /* OpenBLAS threads (default 1) */
  /* preemption (bsp or a single process) */
  const volatile int *stop_flag; /* non-NULL: once *stop_flag is nonzero on any worker (set it from a signal
                                    handler), the workers agree at the end of an iteration (one 4-byte allreduce
                                    per iteration), rank 0 writes ckpt_path, and shoal_train_run returns 0 with
                                    res->stopped = 1; a stop in the last iteration of the run (the last epoch's
                                    last, or iteration max_iters) is a normal end: stopped = 0 */
  int elastic;                 /* bsp: --resume from a checkpoint written by another number of workers; training
                                  continues at the same sample of the same epoch (the global batch is this run's
                                  workers x batch) */
  const char *sync_config;     /* more key=value settings for the strategy (shoal/sync.h); NULL: none. A key
                                  given here replaces the value the fields above would give it (k replaces
                                  ds_k, period local_h, ...); ps's servers, ckpt and resume come from the
                                  fields only (here: SHOAL_ERR_INVALID). Checked in a single process too,
                                  where no strategy runs: an unknown key or bad value is an error at every
                                  world size */
  const char *straggle;        /* straggler injection: "slow:R:X", "jitter:S", "spike:P:X", comma list (NULL: off) */
  /* surviving a lost rank (bsp; docs/training.md) */
  int on_failure_shrink;       /* 1: when a rank is lost the others shrink the communicator, take over the
                                  newest state and go on with fewer workers, instead of failing (bsp only,
                                  at every world size: another sync is SHOAL_ERR_INVALID) */
  int grow_every;              /* with on_failure_shrink: every n iterations admit the processes waiting to
                                  enter (restarted ranks, shoal_comm_join); 0: never (default 10); not read
                                  without on_failure_shrink (shoal train refuses --grow-every then) */
  /* goodput (docs/training.md) */
  int gns_every;               /* > 0: estimate the gradient noise scale every n iterations (an extra forward and
                                  backward pass over half of the worker's batch; bsp or a single process) */
  double target_acc;           /* > 0: stop at the end of the first epoch whose test accuracy reaches this
                                  fraction (res->reached_target = 1); 0: train all epochs */
  const volatile int *leave_flag; /* non-NULL (bsp, on_failure_shrink): once *leave_flag is nonzero on a worker, it
                                  leaves the job after its current iteration (shoal_train_run returns 0 with
                                  res->left = 1, nothing written); the others shrink and go on without it */
  double compute_ms;           /* emulated accelerator time added to every step's compute (a sleep before the
                                  forward pass: the CPU stays free, as when a GPU computes), >= 0; stragglers
                                  (straggle) scale it with the rest of the compute */
} shoal_train_opts_t;

void shoal_train_opts_init(shoal_train_opts_t *o);

typedef struct shoal_train_result {
  int epochs_done;
  long iters_done;
  double final_test_acc;    /* of the final (globally averaged) model */
  double final_train_loss;  /* mean over the last epoch */
  double samples_per_s;     /* global training samples per second, last epoch */
  double train_s;           /* total training time, evaluation excluded */
  double compute_s, comm_s; /* this rank's split of train_s */
  double consensus;         /* last measured consensus distance (dssync/localsgd/ps async), else 0 */
  int max_staleness;        /* ps: largest staleness applied by this server rank (servers only) */
  int is_server;
  int stopped;              /* 1: stopped on stop_flag after writing its checkpoint (not finished) */
  double gns;               /* the gradient noise scale estimate (gns_every > 0), 0 while unknown */
  int reached_target;       /* 1: stopped because the test accuracy reached target_acc */
  int left;                 /* 1: this worker left the job on leave_flag */
} shoal_train_result_t;

/* Train on `world` (NULL: single process). All ranks call it with the same
 * options. For ps, the last `servers` ranks are servers. res may be NULL
 * (the result is not wanted). */
int shoal_train_run(const shoal_train_opts_t *o, shoal_comm_t *world, shoal_train_result_t *res);

/* ---- plots --------------------------------------------------------------- */

/* One SVG with test accuracy against wall time, one line per CSV log. title may be NULL: "test accuracy
 * vs training time". */
int shoal_train_plot_svg(const char *svg_path, const char *const *csv_paths, int ncsv, const char *title);

#ifdef __cplusplus
}
#endif
#endif
