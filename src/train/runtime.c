/* The training loop behind `shoal train`: data sharding, the per-iteration
 * step of every sync strategy, per-epoch evaluation, CSV log, checkpoints.
 *
 * Data order: epoch e uses a permutation of the training set seeded by
 * (seed, e); global iteration i takes the W*b consecutive indices
 * perm[i*W*b ..] and worker w the w-th slice of b. BSP on W workers with
 * batch b therefore sees exactly the samples of one worker with batch W*b.
 * Timing: compute = forward, backward and optimizer; comm = time blocked in
 * communication (with BSP overlap only the exposed part). Evaluation,
 * logging and checkpoints are excluded from both. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "train/ckpt.h"
#include "train/elastic.h"
#include "train/gns.h"
#include "train/model.h"
#include "train/optim.h"
#include "train/straggle.h"
#include "train/sync.h"

typedef struct run {
  const shoal_train_opts_t *o;
  shoal_comm_t *world, *wcomm; /* wcomm: the workers (world minus PS servers) */
  int W, wrank;
  const shoal_dataset_t *train, *test;
  size_t ntrain, ntest;
  shoal_model_t *m;
  float *mom;                  /* momentum */
  float *xb;
  uint8_t *yb;
  uint32_t *perm;
  float *save;                 /* evaluation of the average model */
  FILE *csv;
  FILE *ilog;                  /* per-iteration log of this worker (ds-sync.md §6.4) */
  char ilog_path[4096];        /* its name */
  /* the strategy, and what the loop's phases share */
  shoal_sync_t *sync;          /* NULL: one worker alone */
  int bucket_of_layer[8];      /* bsp: the bucket a layer's gradients complete (-1: none) */
  int *racks;                  /* dssync topo: rack of each worker, when the options gave none */
  shoal__straggle_t straggle;
  shoal__elastic_t el;         /* --on-failure shrink */
  shoal__gns_t gns;            /* --gns-every */
  int S, multi;                /* servers; whether workers synchronize (several, or one with its server) */
  size_t n, in_dim;            /* parameters; floats per image */
  /* where the run stands */
  long iter;                   /* iterations done in all */
  int start_epoch;
  size_t skip_samples;         /* of start_epoch, used before this process took over (a resume, a shrink) */
  size_t gb;                   /* the global batch: workers x batch */
  double total_train;          /* seconds of training, checkpointed runs before this one included */
  double consensus;            /* the last consensus distance measured */
  int stopped, stop_req;       /* --max-iters reached; a stop request agreed on */
  shoal_train_result_t out;
} run_t;

/* One epoch's progress. */
typedef struct epoch {
  int e;
  size_t off;                  /* samples of the epoch used before this rank's first iteration of it */
  long ipe, i;                 /* iterations from off on, and the current one */
  long its, lits;              /* iterations done, and those that computed a loss (partial skips some) */
  double t_epoch, epoch_s, comm_s, loss_sum, lr;
} epoch_t;

/* What one iteration measured, for the per-iteration log. */
typedef struct step {
  double loss, compute_s, sync_s, payload;
  int gsize;
} step_t;

/* A phase's results besides 0 and a failure: every worker stops here (checkpointed, on request); this
 * worker leaves the job (asked to); the target accuracy is reached (the run ends as after its last epoch). */
enum { PHASE_STOP = 1, PHASE_LEAVE = 2, PHASE_TARGET = 3 };

static int comm_fail(shoal_comm_t *c, int rc, const char *what) {
  return shoal__seterr(rc, "train: %s: %s", what, c ? shoal_comm_errmsg(c) : "");
}

/* The longest file path taken: room in the runtime's 4096-byte names for the ".rankR" and ".tmp" it appends
 * (a name cut short would make ranks share one file, or a checkpoint its own temporary file). */
#define TRAIN_PATH_MAX 4064

static int check_opts(const shoal_train_opts_t *o, int wsize) {
  const char *paths[] = {o->csv_path, o->iter_log, o->ckpt_path, o->resume_path, o->params_out};
  const char *names[] = {"--csv", "--iter-log", "--checkpoint", "--resume", "--params-out"};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
    if (paths[i] && strlen(paths[i]) > TRAIN_PATH_MAX)
      return shoal__seterr(SHOAL_ERR_INVALID, "%s: a path of %zu bytes (at most %d)", names[i], strlen(paths[i]),
                           TRAIN_PATH_MAX);
  if (o->epochs < 1 || o->epochs > 100000) return shoal__seterr(SHOAL_ERR_INVALID, "--epochs %d: expected 1..100000", o->epochs);
  if (o->batch < 1 || o->batch > 65536) return shoal__seterr(SHOAL_ERR_INVALID, "--batch %d: expected 1..65536", o->batch);
  if (!(o->lr > 0) || !(o->lr < 100)) return shoal__seterr(SHOAL_ERR_INVALID, "--lr %g: expected (0, 100)", o->lr);
  if (!(o->compute_ms >= 0 && o->compute_ms <= 1e6))
    return shoal__seterr(SHOAL_ERR_INVALID, "--compute-ms %g: expected 0..1000000", o->compute_ms);
  if (!(o->momentum >= 0 && o->momentum < 1))
    return shoal__seterr(SHOAL_ERR_INVALID, "--momentum %g: expected [0, 1)", o->momentum);
  if (!(o->weight_decay >= 0 && o->weight_decay < 1))
    return shoal__seterr(SHOAL_ERR_INVALID, "--wd %g: expected [0, 1)", o->weight_decay);
  if (o->label && strpbrk(o->label, ",\n\r\""))
    return shoal__seterr(SHOAL_ERR_INVALID, "--label '%s': may not contain commas, quotes or line breaks (a CSV column)",
                         o->label);
  if ((unsigned)o->sync >= SHOAL_SYNC__COUNT) return shoal__seterr(SHOAL_ERR_INVALID, "sync kind %d", o->sync);
  if (o->sync == SHOAL_SYNC_PS) {
    if (wsize < 2)
      return shoal__seterr(SHOAL_ERR_INVALID,
                           "--sync ps needs at least 2 processes (--servers %d server%s plus workers); this is one "
                           "process: run it under `shoal launch -n N` (or mpirun/srun)",
                           o->servers, o->servers == 1 ? "" : "s");
    if (o->servers < 1 || o->servers >= wsize)
      return shoal__seterr(SHOAL_ERR_INVALID, "--servers %d: need 1..%d servers and at least one worker among %d ranks",
                           o->servers, wsize - 1, wsize);
    if (o->ckpt_every > 0)
      return shoal__seterr(SHOAL_ERR_INVALID, "--checkpoint-every: ps checkpoints are written at epoch ends and "
                                              "stops only (the servers' state is consistent there)");
    if (o->staleness < 0) return shoal__seterr(SHOAL_ERR_INVALID, "--staleness %d: expected >= 0", o->staleness);
  }
  /* ps: the workers agree on the iteration to stop after, and the servers checkpoint their shards at that clock */
  if (o->stop_flag && o->sync != SHOAL_SYNC_BSP && o->sync != SHOAL_SYNC_PS && wsize > 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "stopping on a signal to checkpoint: bsp and ps only (this run is --sync "
                                            "%s: its workers' models would have to be checkpointed together)",
                         shoal_sync_kind_name(o->sync));
  if (o->elastic && o->sync != SHOAL_SYNC_BSP && wsize > 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "elastic resume: bsp only (this run is --sync %s: its workers' models or "
                                            "the servers' state would have to be checkpointed together)",
                         shoal_sync_kind_name(o->sync));
  if (o->on_failure_shrink && o->sync != SHOAL_SYNC_BSP)
    return shoal__seterr(SHOAL_ERR_INVALID, "--on-failure shrink: bsp only (this run is --sync %s: a lost "
                                            "worker's model or server shard cannot be taken over from the others)",
                         shoal_sync_kind_name(o->sync));
  for (int i = 0; i < 8 && o->decay_epochs[i]; i++)
    if (o->decay_epochs[i] < 0)
      return shoal__seterr(SHOAL_ERR_INVALID, "--decay-epochs %d: expected epochs >= 1 (0 ends the list)",
                           o->decay_epochs[i]);
  if (o->grow_every < 0) return shoal__seterr(SHOAL_ERR_INVALID, "--grow-every %d: expected >= 0", o->grow_every);
  if (o->sync == SHOAL_SYNC_LOCALSGD && o->local_h < 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "--local-h %d: expected >= 1", o->local_h);
  if (o->leave_flag && (!o->on_failure_shrink || o->sync != SHOAL_SYNC_BSP))
    return shoal__seterr(SHOAL_ERR_INVALID, "leaving on request needs --sync bsp and --on-failure shrink (the others "
                                            "go on without the rank that leaves)");
  if (o->gns_every < 0) return shoal__seterr(SHOAL_ERR_INVALID, "--gns-every %d: expected >= 0", o->gns_every);
  if (o->gns_every > 0 && o->sync != SHOAL_SYNC_BSP && wsize > 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "--gns-every: bsp only (this run is --sync %s: its step's gradient is not "
                                            "the average over every worker's batch)", shoal_sync_kind_name(o->sync));
  if (!(o->target_acc >= 0 && o->target_acc <= 1))
    return shoal__seterr(SHOAL_ERR_INVALID, "--target-acc %g: expected a fraction in [0, 1]", o->target_acc);
  return 0;
}

/* The CSV's header, flushed at once: a rank 0 lost before its first row must not take it along
 * (the new rank 0 appends to the file) */
static void csv_header(FILE *f) {
  fprintf(f, "label,model,sync,workers,epoch,iters,time_s,train_loss,test_acc,samples_per_s,compute_s,comm_s,"
             "consensus,lr,gns\n");
  fflush(f);
}

static int load_data(run_t *r, shoal_dataset_t **own_train, shoal_dataset_t **own_test) {
  const shoal_train_opts_t *o = r->o;
  const char *dir = o->data_dir ? o->data_dir : SHOAL_FASHION_MNIST_DIR;
  int rc;
  r->train = o->train_data;
  r->test = o->test_data;
  if (!r->train) {
    if ((rc = shoal_dataset_load_dir(dir, "train", o->nclass, own_train))) return rc;
    r->train = *own_train;
  }
  if (!r->test) {
    if ((rc = shoal_dataset_load_dir(dir, "t10k", o->nclass, own_test))) return rc;
    r->test = *own_test;
  }
  if (r->train->rows != r->test->rows || r->train->cols != r->test->cols)
    return shoal__seterr(SHOAL_ERR_MISMATCH, "%s: train images are %dx%d, test images %dx%d", dir, r->train->rows,
                         r->train->cols, r->test->rows, r->test->cols);
  r->ntrain = o->train_subset && o->train_subset < r->train->n ? o->train_subset : r->train->n;
  r->ntest = o->test_subset && o->test_subset < r->test->n ? o->test_subset : r->test->n;
  /* preloaded sets: their declared class count is checked against the options and every label used
   * against it (the IDX reader checked the sets it read itself) */
  const shoal_dataset_t *sets[2] = {r->train, r->test};
  const size_t used[2] = {r->ntrain, r->ntest};
  const char *names[2] = {"train_data", "test_data"};
  for (int i = 0; i < 2; i++) {
    const shoal_dataset_t *d = sets[i];
    if (d != (i ? o->test_data : o->train_data)) continue;
    if (d->nclass < 2 || d->nclass > 256)
      return shoal__seterr(SHOAL_ERR_INVALID, "%s: %d classes: expected 2..256", names[i], d->nclass);
    if (o->nclass && d->nclass != o->nclass)
      return shoal__seterr(SHOAL_ERR_INVALID, "%s declares %d classes but the options say %d (--classes)", names[i],
                           d->nclass, o->nclass);
    int rc2 = shoal__model_check_labels(names[i], d->y, used[i], d->nclass);
    if (rc2) return rc2;
  }
  if (r->ntrain < (size_t)r->W * (size_t)o->batch)
    return shoal__seterr(SHOAL_ERR_INVALID, "%zu training images are fewer than one global batch (%d workers x %d)",
                         r->ntrain, r->W, o->batch);
  return 0;
}

/* Rack of each worker for the topo pattern: --racks list, else by host name. */
static int rack_map(run_t *r, int **out) {
  int W = r->W;
  int *rack = malloc((size_t)W * sizeof *rack);
  if (!rack) return shoal__seterr(SHOAL_ERR_NOMEM, "train: out of memory");
  if (r->o->racks) {
    const char *s = r->o->racks;
    for (int i = 0; i < W; i++) {
      char *end;
      long v = strtol(s, &end, 10);
      if (end == s || v < 0 || v > 1000000 || (i < W - 1 && *end != ',') || (i == W - 1 && *end != '\0')) {
        free(rack);
        return shoal__seterr(SHOAL_ERR_INVALID, "--racks '%s': expected %d comma-separated rack ids (one per worker)",
                             r->o->racks, W);
      }
      rack[i] = (int)v;
      s = end + 1;
    }
  } else {
    /* The launcher's host names (SHOAL_HOSTNAME emulates hosts): one rack per host. */
    char host[256] = "";
    const char *env = shoal__config_str("SHOAL_HOSTNAME", NULL);
    if (env && *env)
      snprintf(host, sizeof host, "%s", env);
    else
      gethostname(host, sizeof host - 1);
    int64_t *h = malloc((size_t)W * sizeof *h);
    if (!h) {
      free(rack);
      return shoal__seterr(SHOAL_ERR_NOMEM, "train: out of memory");
    }
    uint64_t x = 1469598103934665603ULL;
    for (const char *p = host; *p; p++) x = (x ^ (unsigned char)*p) * 1099511628211ULL;
    h[r->wrank] = (int64_t)(x >> 1);
    int rc = shoal_allgather(r->wcomm, SHOAL_IN_PLACE, h, 1, SHOAL_INT64);
    if (rc) {
      free(h);
      free(rack);
      return comm_fail(r->wcomm, rc, "allgather of host names for the rack map");
    }
    for (int i = 0; i < W; i++) {
      int j = 0;
      while (h[j] != h[i]) j++;
      rack[i] = j;
    }
    free(h);
  }
  *out = rack;
  return 0;
}

/* Evaluate the current parameters on this worker's shard of the test set. */
static void eval_shard(run_t *r, double *stats /* [correct, loss_sum] */) {
  size_t lo = r->ntest * (size_t)r->wrank / (size_t)r->W, hi = r->ntest * (size_t)(r->wrank + 1) / (size_t)r->W;
  size_t correct = 0;
  double lsum = 0;
  size_t in_dim = (size_t)r->test->rows * r->test->cols;
  if (hi > lo) shoal_model_evaluate(r->m, r->test->x + lo * in_dim, r->test->y + lo, hi - lo, &correct, &lsum);
  stats[0] = (double)correct;
  stats[1] = lsum;
}

/* Consensus distance (1/W) sum ||x_i - xbar||^2, and leave xbar in r->save. */
static int average_model(run_t *r, double *consensus) {
  size_t n = r->m->nparams;
  const float *x = r->m->params;
  double sq = 0;
  for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
  memcpy(r->save, x, n * sizeof(float));
  int rc = shoal_allreduce(r->wcomm, SHOAL_IN_PLACE, r->save, n, SHOAL_FLOAT32, SHOAL_AVG);
  if (!rc) rc = shoal_allreduce(r->wcomm, SHOAL_IN_PLACE, &sq, 1, SHOAL_FLOAT64, SHOAL_AVG);
  if (rc) return comm_fail(r->wcomm, rc, "average of the workers' models");
  double sqbar = 0;
  for (size_t i = 0; i < n; i++) sqbar += (double)r->save[i] * r->save[i];
  *consensus = sq - sqbar > 0 ? sq - sqbar : 0;
  return 0;
}

static void swap_params(run_t *r) {
  float *t = r->m->params;
  r->m->params = r->save;
  r->save = t;
}

/* A per-worker file: PATH for worker 0, PATH.rankW for the others, written into buf (check_opts left room
 * for the suffix). */
static const char *worker_file(const char *path, int w, char *buf, size_t cap) {
  if (w > 0) snprintf(buf, cap, "%s.rank%d", path, w);
  else snprintf(buf, cap, "%s", path);
  return buf;
}

static const char *ckpt_name(const run_t *r, const char *path, char *buf, size_t cap) {
  return r->o->sync == SHOAL_SYNC_BSP ? path : worker_file(path, r->wrank, buf, cap);
}

typedef struct ready_arg {
  shoal_sync_t *sync;                 /* NULL: no strategy (the hook only slows the layers down) */
  const int *bucket_of_layer;
  const shoal__straggle_t *straggle;  /* NULL: off */
  int wrank;
  long iter;
  double mark;                        /* end of the compute slowed down so far */
  int rc;
} ready_arg_t;

/* A straggler computes F times as long: the compute since the last mark is stretched before its result
 * counts, so that a slow worker's gradients come late (sleeping only after the whole backward pass would
 * let the others reduce them meanwhile, and bsp would not wait for it). */
static void straggle_since_mark(ready_arg_t *a) {
  if (!a->straggle) return;
  shoal__straggle_apply(a->straggle, a->wrank, a->iter, shoal__now_s() - a->mark);
  a->mark = shoal__now_s();
}

/* Backward's hook: a layer whose gradients complete a bucket reports it. */
static void layer_ready(int layer, void *arg) {
  ready_arg_t *a = arg;
  straggle_since_mark(a);
  int b = a->bucket_of_layer[layer];
  if (a->sync && b >= 0 && !a->rc) a->rc = shoal_sync_bucket_ready(a->sync, b);
  if (a->straggle) a->mark = shoal__now_s(); /* the report is not compute */
}

/* The strategy's configuration string as the options give it; full: a
 * setting did not fit (an error, never a silently shorter configuration). */
typedef struct {
  char s[16384];
  int full;
} cfgbuf_t;

/* Append " key=value" to cfg unless the caller's sync_config sets key (its value wins). */
static void cfg_add(cfgbuf_t *cfg, const char *user, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cfg_add(cfgbuf_t *cfg, const char *user, const char *key, const char *fmt, ...) {
  if (shoal__sync_config_has(user, key) || cfg->full) return;
  size_t len = strlen(cfg->s), cap = sizeof cfg->s;
  int k = snprintf(cfg->s + len, cap - len, "%s%s=", len ? " " : "", key);
  if (k < 0 || (size_t)k >= cap - len) goto full;
  len += (size_t)k;
  va_list ap;
  va_start(ap, fmt);
  k = vsnprintf(cfg->s + len, cap - len, fmt, ap);
  va_end(ap);
  if (k < 0 || (size_t)k >= cap - len) goto full;
  return;
full:
  cfg->s[len] = '\0';
  cfg->full = 1;
}

/* The strategy (include/shoal/sync.h) for the options, with the model's
 * buckets: for bsp, whole layers of at least bucket_bytes, last layer first
 * (a suffix of layers is a contiguous range of the parameter array), so a
 * bucket is complete when backward finishes its lowest layer; for the
 * parameter-averaging strategies and ps, one flat bucket. */
static int create_sync(run_t *r, shoal_sync_t **out, int **racks_out) {
  const shoal_train_opts_t *o = r->o;
  const char *u = o->sync_config;
  cfgbuf_t cfgbuf = {"", 0}, *cfg = &cfgbuf;
  int rc;
  switch (o->sync) {
  case SHOAL_SYNC_BSP:
    cfg_add(cfg, u, "overlap", "%d", o->overlap ? 1 : 0);
    break;
  case SHOAL_SYNC_DSSYNC: {
    const char *pat = shoal_ds_pattern_name(o->ds_pattern);
    cfg_add(cfg, u, "pattern", "%s", pat);
    cfg_add(cfg, u, "k", "%d", o->ds_k);
    cfg_add(cfg, u, "seed", "%llu", (unsigned long long)(o->seed & 0x7fffffffffffffffULL));
    cfg_add(cfg, u, "global_every", "%d", o->ds_global_every);
    cfg_add(cfg, u, "overlap", "%d", o->ds_overlap ? 1 : 0);
    /* topo by the options (a pattern= in sync_config decides instead: then it gives its own h, b, racks) */
    if (o->ds_pattern == SHOAL_DS_TOPO && !shoal__sync_config_has(u, "pattern")) {
      cfg_add(cfg, u, "h", "%d", o->ds_bridge_period);
      cfg_add(cfg, u, "b", "%d", o->ds_bridge_width);
      if (!shoal__sync_config_has(u, "racks")) {
        if ((rc = rack_map(r, racks_out))) return rc;
        char list[sizeof cfg->s];
        size_t len = 0;
        for (int i = 0; i < r->W && len < sizeof list; i++)
          len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", i ? "," : "", (*racks_out)[i]);
        if (len >= sizeof list) cfg->full = 1;
        else cfg_add(cfg, u, "racks", "%s", list);
      }
    }
    break;
  }
  case SHOAL_SYNC_LOCALSGD:
    cfg_add(cfg, u, "period", "%d", o->local_h);
    break;
  case SHOAL_SYNC_PARTIAL: /* this loop pauses before it uses the communicator: the thread may run ahead */
    cfg_add(cfg, u, "ahead", "2");
    break;
  case SHOAL_SYNC_PS: {
    /* the runtime itself relies on these three: they come from the options only */
    static const char *const own[3][2] = {{"servers", "servers (--servers)"}, {"ckpt", "ckpt_path (--checkpoint)"},
                                          {"resume", "resume_path (--resume)"}};
    for (int i = 0; i < 3; i++)
      if (shoal__sync_config_has(u, own[i][0]))
        return shoal__seterr(SHOAL_ERR_INVALID, "sync config '%s': %s= is set by the option %s, not here", u,
                             own[i][0], own[i][1]);
    cfg_add(cfg, u, "servers", "%d", o->servers);
    cfg_add(cfg, u, "mode", "%s", shoal_ps_mode_name(o->ps_mode));
    cfg_add(cfg, u, "momentum", "%.17g", o->momentum);
    cfg_add(cfg, u, "wd", "%.17g", o->weight_decay);
    cfg_add(cfg, u, "slow_ms", "%.17g", o->ps_slow_worker_ms);
    if (o->ps_mode == SHOAL_PS_SSP) cfg_add(cfg, u, "staleness", "%d", o->staleness);
    const char *paths[2] = {o->ckpt_path, o->resume_path}, *keys[2] = {"ckpt", "resume"};
    for (int i = 0; i < 2; i++) {
      if (!paths[i]) continue;
      if (strpbrk(paths[i], " ;\t\n"))
        return shoal__seterr(SHOAL_ERR_INVALID, "--%s %s: with --sync ps the path may not contain spaces or ';'",
                             i ? "resume" : "checkpoint", paths[i]);
      cfg_add(cfg, u, keys[i], "%s", paths[i]);
    }
    break;
  }
  default:
    return shoal__seterr(SHOAL_ERR_INVALID, "sync kind %d", o->sync);
  }
  if (cfg->full)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config: the settings of the options for %d workers exceed %zu characters",
                         r->W, sizeof cfg->s - 1);
  if (u && strlen(cfg->s) + strlen(u) + 2 >= sizeof cfg->s)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config: %zu characters, too long", strlen(u));
  if (u) snprintf(cfg->s + strlen(cfg->s), sizeof cfg->s - strlen(cfg->s), " %s", u);
  return shoal_sync_create(r->world, shoal_sync_kind_name(o->sync), cfg->s, out);
}

static int make_sync(run_t *r, shoal_sync_t **out, int bucket_of_layer[8], int **racks_out) {
  const shoal_train_opts_t *o = r->o;
  shoal_sync_t *s = NULL;
  int rc = create_sync(r, &s, racks_out);
  if (rc) return rc;
  shoal_model_t *m = r->m;
  for (int l = 0; l < 8; l++) bucket_of_layer[l] = -1;
  if (o->sync == SHOAL_SYNC_BSP) {
    size_t acc = 0;
    int top = m->nlayers - 1; /* highest layer of the open bucket */
    for (int l = m->nlayers - 1; l >= 0 && rc >= 0; l--) {
      acc += m->layers[l].nparam * sizeof(float);
      if (acc >= o->bucket_bytes || l == 0 || o->bucket_bytes == 0) {
        size_t off = m->layers[l].w_off, len = m->layers[top].w_off + m->layers[top].nparam - off;
        rc = shoal_sync_add_bucket(s, m->params + off, m->grads + off, len);
        bucket_of_layer[l] = rc;
        acc = 0;
        top = l - 1;
      }
    }
  } else {
    rc = shoal_sync_add_bucket(s, m->params, m->grads, m->nparams);
  }
  if (rc < 0) {
    shoal_sync_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* One process trains without a strategy; the strategy's settings (sync_config) are still checked, on a
 * communicator of this process alone, so that a bad one is an error at every world size. */
static int check_sync_alone(const run_t *r) {
  shoal_comm_t *self = NULL;
  if (!r->world) { /* no world given: a private one, loopback, on a port of its own (not the job's) */
    shoal_comm_params_t p;
    shoal_comm_params_init(&p);
    p.rank = 0;
    p.world_size = 1;
    p.master_addr = "127.0.0.1";
    p.master_port = 0;
    int rc = shoal_comm_init(&p, &self);
    if (rc) return rc;
  }
  run_t t = *r;
  t.world = t.wcomm = self ? self : r->world;
  t.W = 1;
  t.wrank = 0;
  shoal_sync_t *s = NULL;
  int *racks = NULL;
  int rc = create_sync(&t, &s, &racks);
  shoal_sync_destroy(s);
  free(racks);
  if (self) shoal_comm_destroy(self);
  return rc;
}

static shoal__ckpt_meta_t ckpt_meta(const run_t *r, int epochs_done, long iters, size_t epoch_samples, double train_s) {
  const shoal_train_opts_t *o = r->o;
  return (shoal__ckpt_meta_t){.model_kind = (uint32_t)o->model, .sync_kind = (uint32_t)o->sync,
                              .workers = (uint32_t)r->W, .epochs_done = (uint32_t)epochs_done,
                              .iters_done = (uint64_t)iters, .seed = o->seed, .nparams = r->m->nparams,
                              .batch = (uint32_t)o->batch,
                              .ranks = (uint32_t)(r->world ? shoal_comm_size(r->world) : 1), .train_s = train_s,
                              .epoch_samples = (uint64_t)epoch_samples};
}

/* This worker's checkpoint (bsp: rank 0 only, all ranks hold the same bytes). */
static int save_ckpt(run_t *r, int epochs_done, long iters, size_t epoch_samples, double train_s) {
  if (r->o->sync == SHOAL_SYNC_BSP && r->wrank != 0) return 0;
  char buf[4096];
  shoal__ckpt_meta_t meta = ckpt_meta(r, epochs_done, iters, epoch_samples, train_s);
  return shoal__ckpt_save(ckpt_name(r, r->o->ckpt_path, buf, sizeof buf), &meta, r->m->params, r->mom);
}

/* Check the checkpoint against this run before reading anything (rank 0's
 * file, which every strategy writes), load this worker's file, and check
 * that all workers resume from the same iteration. Collective over the
 * workers: every worker reaches the exchange even if its own load failed. */
static int resume(run_t *r, int multi, shoal__ckpt_meta_t *out) {
  const shoal_train_opts_t *o = r->o;
  const char *base = o->resume_path;
  shoal__ckpt_meta_t m0 = {0}, want = ckpt_meta(r, 0, 0, 0, 0), meta = {0};
  int other_size_ok = o->elastic && o->sync == SHOAL_SYNC_BSP; /* bsp ranks hold one model: any worker count resumes */
  int rc = shoal__ckpt_peek(base, &m0);
  if (!rc) {
    char diff[1024] = "";
    size_t len = 0;
#define DIFF(cond, ...)                                                               \
  if (cond) len += (size_t)snprintf(diff + len, sizeof diff - (len < sizeof diff ? len : sizeof diff), __VA_ARGS__)
    DIFF(m0.sync_kind != want.sync_kind, "; it was written by --sync %s and this run is --sync %s",
         shoal_sync_kind_name((shoal_sync_kind_t)m0.sync_kind), shoal_sync_kind_name(o->sync));
    DIFF(m0.model_kind != want.model_kind, "; it holds --model %s and this run is --model %s",
         shoal_model_kind_name((shoal_model_kind_t)m0.model_kind), shoal_model_kind_name(o->model));
    DIFF(!other_size_ok && (m0.workers != want.workers || m0.ranks != want.ranks),
         "; it was written by %u workers (%u ranks) and this run has %u workers (%u ranks)", m0.workers, m0.ranks,
         want.workers, want.ranks);
    DIFF(m0.seed != want.seed, "; it was written with --seed %llu and this run has --seed %llu",
         (unsigned long long)m0.seed, (unsigned long long)want.seed);
    DIFF(m0.batch != want.batch, "; it was written with --batch %u and this run has --batch %u", m0.batch, want.batch);
#undef DIFF
    if (len)
      rc = shoal__seterr(SHOAL_ERR_MISMATCH, "--resume %s: cannot continue this run%s (resume with the same settings)",
                         base, diff);
  }
  if (!rc) {
    char buf[4096];
    const char *path = ckpt_name(r, base, buf, sizeof buf);
    rc = shoal__ckpt_load(path, &meta, r->m->params, r->mom, r->m->nparams);
  }
  if (!multi) {
    if (!rc) *out = meta;
    return rc;
  }
  /* {ok, iterations, epochs} of every worker */
  int64_t *all = calloc(3 * (size_t)r->W, sizeof *all);
  if (!all) return shoal__seterr(SHOAL_ERR_NOMEM, "train: out of memory");
  char mine[1024];
  snprintf(mine, sizeof mine, "%s", rc ? shoal_last_error() : "");
  int64_t *me = all + 3 * (size_t)r->wrank;
  me[0] = rc ? 0 : 1;
  me[1] = rc ? -1 : (int64_t)meta.iters_done;
  me[2] = rc ? -1 : (int64_t)meta.epochs_done;
  int crc = shoal_allgather(r->wcomm, SHOAL_IN_PLACE, all, 3, SHOAL_INT64);
  if (crc) {
    free(all);
    return comm_fail(r->wcomm, crc, "exchange of the checkpoint positions");
  }
  if (rc) {
    free(all);
    return shoal__seterr(rc, "%s", mine);
  }
  for (int w = 0; w < r->W && !rc; w++) {
    char buf[4096];
    const char *path = o->sync == SHOAL_SYNC_BSP ? base : worker_file(base, w, buf, sizeof buf);
    if (!all[3 * w])
      rc = shoal__seterr(SHOAL_ERR_MISMATCH, "--resume %s: worker %d could not read its checkpoint %s", base, w, path);
    else if (all[3 * w + 1] != me[1])
      rc = shoal__seterr(SHOAL_ERR_MISMATCH,
                         "--resume %s: the workers' checkpoints are from different points: this worker (%d) is at "
                         "iteration %lld (epoch %lld) and worker %d's %s at iteration %lld (epoch %lld); resume "
                         "from one checkpoint written by all workers together",
                         base, r->wrank, (long long)me[1], (long long)me[2], w, path, (long long)all[3 * w + 1],
                         (long long)all[3 * w + 2]);
  }
  free(all);
  if (!rc) *out = meta;
  return rc;
}

/* The workers changed (shrink or grow): the strategy on the new communicator, the newest state from the
 * worker furthest ahead (valid 0: this rank has none yet), and this rank's place in the data. */
static int rejoin(run_t *r, shoal__train_pos_t *pos, int valid) {
  shoal_sync_destroy(r->sync);
  r->sync = NULL;
  free(r->racks);
  r->racks = NULL;
  r->wcomm = r->world;
  r->W = shoal_comm_size(r->world);
  r->wrank = shoal_comm_rank(r->world);
  int rc = make_sync(r, &r->sync, r->bucket_of_layer, &r->racks);
  if (rc) return rc;
  r->wcomm = shoal_sync_workers(r->sync);
  if ((rc = shoal__elastic_sync_state(r->world, valid, pos, r->m->params, r->mom, r->m->nparams))) return rc;
  if (r->wrank == 0 && r->o->csv_path && !r->csv && (r->csv = fopen(r->o->csv_path, "a"))) { /* rank 0 was lost */
    fseek(r->csv, 0, SEEK_END);
    if (ftell(r->csv) == 0) csv_header(r->csv); /* it was lost before anything reached the file */
  }
  return 0;
}

/* A call on the workers' communicator failed with rc. With --on-failure shrink: shrink (again if another
 * rank is lost meanwhile), take over the newest state; 0 and *pos the point to continue from. valid 0: this
 * rank has no state yet (it entered the job and lost a worker while it was receiving the state). */
static int recover(run_t *r, int rc, shoal__train_pos_t *pos, int valid) {
  shoal__elastic_t *el = &r->el;
  if (!el->on || !shoal__elastic_recoverable(rc)) return rc;
  double t0 = shoal__now_s();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  int W0 = r->W, rank0 = r->wrank;
  fprintf(stderr, "shoal train: rank %d: communication failed at iteration %lld (wall clock %.3f): %s; shrinking\n",
          rank0, (long long)pos->iter, (double)wall.tv_sec + wall.tv_nsec * 1e-9, shoal_last_error());
  for (int attempt = 0; attempt < W0; attempt++) {
    shoal_sync_destroy(r->sync);
    r->sync = NULL;
    if ((rc = shoal__elastic_shrink(el, &r->world))) return rc;
    if (!(rc = rejoin(r, pos, valid))) break;
    if (!shoal__elastic_recoverable(rc)) return rc;
    fprintf(stderr, "shoal train: rank %d: failed again while recovering: %s; shrinking again\n", rank0,
            shoal_last_error());
  }
  if (rc) return rc;
  double took = shoal__now_s() - t0;
  el->recover_s += took;
  clock_gettime(CLOCK_REALTIME, &wall);
  if (r->wrank == 0 && !r->o->quiet) {
    printf("shoal train: lost %d worker%s; continuing with %d from iteration %lld (epoch %lld, sample %lld of it); "
           "recovery took %.3f s (done at wall clock %.3f)\n",
           W0 - r->W, W0 - r->W == 1 ? "" : "s", r->W, (long long)pos->iter, (long long)pos->epoch + 1,
           (long long)pos->off, took, (double)wall.tv_sec + wall.tv_nsec * 1e-9);
    fflush(stdout);
  }
  return 0;
}

/* ---- the training loop, by phase: set-up, the start position, the outputs, each epoch (its steps, its
 * elastic events, its evaluation and checkpoint), the end ---- */

/* Set-up: stragglers, data, model, strategy. A server's work ends in it (*served). */
static int setup(run_t *r, shoal_dataset_t **own_train, shoal_dataset_t **own_test, int is_server, int *served) {
  const shoal_train_opts_t *o = r->o;
  int wsize = r->world ? shoal_comm_size(r->world) : 1, rc;
  if ((rc = shoal__straggle_parse(o->straggle, o->seed, r->W, &r->straggle))) return rc;
  if (wsize == 1 && o->sync_config && (rc = check_sync_alone(r))) return rc;
  if ((rc = load_data(r, own_train, own_test))) return rc;
  int max_batch = o->batch > 256 ? o->batch : 256;
  if ((rc = shoal_model_create(o->model, r->train->rows, r->train->cols,
                               r->train->nclass > r->test->nclass ? r->train->nclass : r->test->nclass, max_batch,
                               o->seed, &r->m)))
    return rc;
  r->wcomm = r->world;
  r->multi = r->W > 1 || r->S > 0; /* PS with one worker still goes through its server */
  if (r->multi && (rc = make_sync(r, &r->sync, r->bucket_of_layer, &r->racks))) return rc;
  if (r->sync) r->wcomm = shoal_sync_workers(r->sync);
  if (is_server) {
    *served = 1;
    r->out.is_server = 1;
    if ((rc = shoal_sync_serve(r->sync))) return rc;
    r->out.max_staleness = shoal_sync_max_staleness(r->sync);
    return 0;
  }
  r->n = r->m->nparams;
  r->in_dim = (size_t)r->train->rows * r->train->cols;
  r->mom = calloc(r->n, sizeof(float));
  r->save = malloc(r->n * sizeof(float));
  r->xb = malloc((size_t)o->batch * r->in_dim * sizeof(float));
  r->yb = malloc((size_t)o->batch);
  r->perm = malloc(r->ntrain * sizeof(uint32_t));
  if (!r->mom || !r->save || !r->xb || !r->yb || !r->perm)
    return shoal__seterr(SHOAL_ERR_NOMEM, "train: out of memory");
  return 0;
}

/* Where training starts: the beginning, a checkpoint (--resume), or (--on-failure shrink) the newest state
 * among the ranks, which a rank entering a running job receives. */
static int start_position(run_t *r) {
  const shoal_train_opts_t *o = r->o;
  size_t skip = 0; /* samples of start_epoch already used (mid-epoch checkpoint) */
  double resumed_s = 0;
  int rc, joiner = r->world && shoal_comm_joined(r->world); /* a restarted rank: the others give it the state */
  if (o->resume_path && !joiner) {
    shoal__ckpt_meta_t meta = {0};
    if ((rc = resume(r, r->multi, &meta))) return rc;
    r->start_epoch = (int)meta.epochs_done;
    r->iter = (long)meta.iters_done;
    resumed_s = meta.train_s;
    size_t gb0 = (size_t)meta.workers * meta.batch;
    skip = (size_t)meta.epoch_samples;
    /* same worker count: the epoch's remaining iterations are whole global batches of this run; another
     * count (elastic): the samples left in the epoch that do not fill a global batch are dropped, as at
     * every epoch end */
    if (skip >= r->ntrain || (meta.workers == (uint32_t)r->W && (gb0 == 0 || skip % gb0 || skip + gb0 > r->ntrain)))
      return shoal__seterr(SHOAL_ERR_MISMATCH, "checkpoint %s: %zu samples of epoch %d used, but an epoch has %zu "
                           "here (other --train-subset?)", o->resume_path, skip, r->start_epoch + 1, r->ntrain);
  }
  r->skip_samples = skip;
  r->el.on = o->on_failure_shrink && r->multi;
  if (r->el.on) { /* every rank, and a rank that enters a running job, continue from the newest state */
    shoal__train_pos_t pos = {r->iter, r->start_epoch, (int64_t)r->skip_samples, resumed_s};
    rc = shoal__elastic_sync_state(r->world, !joiner, &pos, r->m->params, r->mom, r->n);
    if (rc && (rc = recover(r, rc, &pos, !joiner))) return rc;
    r->iter = (long)pos.iter;
    r->start_epoch = (int)pos.epoch;
    r->skip_samples = (size_t)pos.off;
    resumed_s = pos.train_s;
  }
  r->total_train = resumed_s;
  r->gb = (size_t)r->W * o->batch;
  return 0;
}

/* The outputs: rank 0's CSV (appended to when resuming), every worker's --iter-log, the opening line. */
static int open_outputs(run_t *r) {
  const shoal_train_opts_t *o = r->o;
  if (o->csv_path && r->wrank == 0) {
    int exists = access(o->csv_path, F_OK) == 0 && o->resume_path;
    r->csv = fopen(o->csv_path, exists ? "a" : "w");
    if (!r->csv)
      return shoal__seterr(SHOAL_ERR_IO, "--csv %s: cannot open for writing: %s", o->csv_path, strerror(errno));
    if (!exists) csv_header(r->csv);
  }
  if (o->iter_log) {
    const char *path = worker_file(o->iter_log, r->wrank, r->ilog_path, sizeof r->ilog_path);
    if (!(r->ilog = fopen(path, "w")))
      return shoal__seterr(SHOAL_ERR_IO, "--iter-log %s: cannot open for writing: %s", path, strerror(errno));
    fprintf(r->ilog, "iter,epoch,group_size,compute_ms,sync_ms,loss,lr,consensus,payload_bytes,wall_s\n");
  }
  if (r->wrank == 0 && !o->quiet)
    printf("shoal train: model %s (%zu parameters), sync %s, %d worker%s%s, batch %d per worker, %zu train / %zu "
           "test images\n",
           shoal_model_kind_name(o->model), r->n, shoal_sync_kind_name(o->sync), r->W, r->W > 1 ? "s" : "",
           r->S ? " + servers" : "", o->batch, r->ntrain, r->ntest);
  return 0;
}

/* The step of iteration ep->i: this worker's batch, forward, backward (its buckets handed to the strategy as
 * they complete), the strategy's synchronization and the optimizer. A failure is the strategy's (a lost
 * rank: the caller may recover); *counted is the loss it added to the epoch's sum meanwhile. */
static int train_step(run_t *r, epoch_t *ep, step_t *st, double *counted) {
  const shoal_train_opts_t *o = r->o;
  shoal_sync_t *sync = r->sync;
  double it0 = shoal__now_s(), comm0 = ep->comm_s;
  int rc;
  st->gsize = r->W;
  st->payload = 0;
  st->loss = 0;
  const uint32_t *idx = r->perm + ep->off + (size_t)ep->i * r->gb + (size_t)r->wrank * o->batch;
  for (int j = 0; j < o->batch; j++) {
    memcpy(r->xb + (size_t)j * r->in_dim, r->train->x + (size_t)idx[j] * r->in_dim, r->in_dim * sizeof(float));
    r->yb[j] = r->train->y[idx[j]];
  }
  ep->lr = shoal__lr_at(o, r->iter, ep->e);
  shoal__gns_before_step(&r->gns, r->m, r->xb, r->yb, o->batch, r->iter); /* before the strategy owns the gradients */
  if (sync && ((rc = shoal_sync_set_lr(sync, ep->lr)) || (rc = shoal_sync_begin(sync, r->iter)))) return rc;
  /* partial: a step under way without this worker: its gradients could only be late */
  int skip_step = sync && (shoal_sync_flags(sync) & SHOAL_SYNC_F_SKIP);
  if (!skip_step) {
    double tc = shoal__now_s();
    if (o->compute_ms > 0) shoal__sleep_s(o->compute_ms / 1e3); /* the emulated accelerator */
    shoal__model_forward(r->m, r->xb, o->batch);
    st->loss = shoal__model_loss(r->m, r->yb, o->batch, 1, NULL);
    ep->loss_sum += st->loss;
    ep->lits++;
    *counted = st->loss;
    ready_arg_t ra = {sync, r->bucket_of_layer, r->straggle.on ? &r->straggle : NULL, r->wrank, r->iter, tc, 0};
    straggle_since_mark(&ra); /* the emulated accelerator's share and the forward pass */
    shoal__model_backward(r->m, r->xb, o->batch, sync || ra.straggle ? layer_ready : NULL, &ra);
    if (ra.rc) return ra.rc;
    straggle_since_mark(&ra); /* backward's tail after its last layer */
  }
  if (sync && (rc = shoal_sync_finish(sync))) return rc;
  shoal__gns_after_step(&r->gns, r->m->grads, r->n, r->W * o->batch);
  if (!sync || !(shoal_sync_flags(sync) & SHOAL_SYNC_F_SERVER_STEP))
    shoal__sgd_step(r->m->params, r->mom, r->m->grads, r->n, (float)ep->lr, (float)o->momentum,
                    (float)o->weight_decay);
  if (sync) {
    double wait = 0;
    if ((rc = shoal_sync_end(sync)) || (rc = shoal_sync_last_step(sync, &wait, &st->gsize, &st->payload))) return rc;
    ep->comm_s += wait;
  }
  double it_s = shoal__now_s() - it0;
  st->sync_s = ep->comm_s - comm0;
  st->compute_s = it_s - st->sync_s;
  r->iter++;
  ep->its++;
  return 0;
}

/* The samples of the epoch used once iteration ep->i is done. */
static size_t used_after(const run_t *r, const epoch_t *ep) { return ep->off + (size_t)(ep->i + 1) * r->gb; }

/* The epoch goes on from pos, with the workers there are now: its iterations restart at 0 from pos. */
static void epoch_reshard(run_t *r, epoch_t *ep, const shoal__train_pos_t *pos) {
  ep->off = (size_t)pos->off;
  r->iter = (long)pos->iter;
  r->gb = (size_t)r->W * r->o->batch;
  ep->ipe = (long)((r->ntrain - ep->off) / r->gb);
  ep->i = -1;
}

/* The step's strategy call failed: fail, or (--on-failure shrink) go on without the lost rank. */
static int step_recover(run_t *r, epoch_t *ep, int rc) {
  shoal__train_pos_t pos = {r->iter, ep->e, (int64_t)(ep->off + (size_t)ep->i * r->gb), 0};
  if ((rc = recover(r, rc, &pos, 1))) return rc;
  if (pos.epoch != ep->e)
    return shoal__seterr(SHOAL_ERR_INTERNAL, "train: after a shrink in epoch %d the newest state is in epoch %lld",
                         ep->e + 1, (long long)pos.epoch + 1);
  epoch_reshard(r, ep, &pos);
  return 0;
}

/* The consensus distance every --consensus-every iterations (parameter averaging and ps), and the step's
 * row of the per-iteration log. */
static int step_log(run_t *r, epoch_t *ep, const step_t *st) {
  const shoal_train_opts_t *o = r->o;
  int measured = 0, rc;
  if (o->consensus_every > 0 && r->multi && r->iter % o->consensus_every == 0 && o->sync != SHOAL_SYNC_BSP &&
      o->sync != SHOAL_SYNC_PARTIAL) {
    double t0 = shoal__now_s();
    if ((rc = average_model(r, &r->consensus))) return rc;
    ep->t_epoch += shoal__now_s() - t0; /* diagnostic: excluded from timing */
    measured = 1;
    SHOAL_INFO("TRAIN", "iteration %ld: consensus distance %.6g", r->iter, r->consensus);
  }
  if (r->ilog) {
    fprintf(r->ilog, "%ld,%d,%d,%.4f,%.4f,%.5f,%.6g,", r->iter - 1, ep->e, st->gsize, 1e3 * st->compute_s,
            1e3 * st->sync_s, st->loss, ep->lr);
    if (measured) fprintf(r->ilog, "%.6g", r->consensus);
    fprintf(r->ilog, ",%.0f,%.6f\n", st->payload, shoal__wall_s());
  }
  return 0;
}

/* A stop request (checkpoint and leave, e.g. before a preemption): every worker learns whether any got one,
 * so all stop after the same iteration; inside an epoch the checkpoint is written here (PHASE_STOP), at its
 * last iteration by the epoch's end. */
static int step_stop_request(run_t *r, epoch_t *ep) {
  const shoal_train_opts_t *o = r->o;
  int rc;
  int32_t want = *o->stop_flag != 0;
  if (r->multi && (rc = shoal_allreduce(r->wcomm, SHOAL_IN_PLACE, &want, 1, SHOAL_INT32, SHOAL_MAX)))
    return comm_fail(r->wcomm, rc, "agreement on a stop request");
  r->stop_req = want != 0;
  /* the run's last iteration (end of the epoch, or max_iters): a normal end */
  if (!r->stop_req || ep->i + 1 >= ep->ipe || (o->max_iters > 0 && r->iter >= o->max_iters)) return 0;
  if (o->ckpt_path &&
      (rc = save_ckpt(r, ep->e, r->iter, used_after(r, ep), r->total_train + shoal__now_s() - ep->t_epoch)))
    return rc;
  /* ps: every worker has had its reply for this iteration (the agreement above follows each worker's step), so
   * the servers' shards hold exactly the pushes up to here: they are written at this clock */
  if (o->ckpt_path && o->sync == SHOAL_SYNC_PS && r->sync && (rc = shoal_sync_checkpoint(r->sync))) return rc;
  /* nobody leaves before rank 0's checkpoint is on disk (a launcher may kill the others' peers as soon as one
   * exits) */
  if (r->multi && (rc = shoal_barrier(r->wcomm))) return comm_fail(r->wcomm, rc, "barrier after the stop checkpoint");
  r->out.stopped = 1;
  r->out.iters_done = r->iter;
  r->out.epochs_done = ep->e;
  return PHASE_STOP;
}

/* Restarted ranks waiting to enter: admitted every --grow-every iterations, at the same iteration on every
 * rank; the epoch goes on resharded among the workers there are then. */
static int step_grow(run_t *r, epoch_t *ep) {
  shoal__train_pos_t pos = {r->iter, ep->e, (int64_t)used_after(r, ep), 0};
  int grown = 0;
  double g0 = shoal__now_s();
  int rc = shoal__elastic_grow(&r->el, &r->world, &grown);
  if (!rc && grown) rc = rejoin(r, &pos, 1);
  if (rc && (rc = recover(r, rc, &pos, 1))) return rc;
  if (grown && r->wrank == 0 && !r->o->quiet) {
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    printf("shoal train: new rank(s) entered; continuing with %d workers from iteration %ld; admission took %.3f s "
           "(done at wall clock %.3f)\n", r->W, r->iter, shoal__now_s() - g0,
           (double)wall.tv_sec + wall.tv_nsec * 1e-9);
    fflush(stdout);
  }
  if (pos.off != (int64_t)used_after(r, ep) || (size_t)r->W * r->o->batch != r->gb) epoch_reshard(r, ep, &pos);
  return 0;
}

/* After a step: its log row, the periodic checkpoint, a stop request, leaving on request (PHASE_LEAVE), the
 * door for restarted ranks. */
static int after_step(run_t *r, epoch_t *ep, const step_t *st) {
  const shoal_train_opts_t *o = r->o;
  int rc;
  if ((rc = step_log(r, ep, st))) return rc;
  /* periodic checkpoint inside the epoch (the epoch end writes its own) */
  if (o->ckpt_path && o->ckpt_every > 0 && r->iter % o->ckpt_every == 0 && ep->i + 1 < ep->ipe &&
      (rc = save_ckpt(r, ep->e, r->iter, used_after(r, ep), r->total_train + shoal__now_s() - ep->t_epoch)))
    return rc;
  if (o->stop_flag && !r->stop_req && (rc = step_stop_request(r, ep))) return rc;
  /* asked to leave (its server is reclaimed): gone at this boundary, after the stop agreement above (which
   * needs every rank); the others' next step fails on the closed connections and they shrink and go on
   * (--on-failure shrink), losing no completed step */
  if (o->leave_flag && *o->leave_flag && r->multi) {
    if (!o->quiet) printf("shoal train: rank %d leaves the job after iteration %ld (asked to)\n", r->wrank, r->iter);
    fflush(stdout);
    r->out.left = 1;
    r->out.iters_done = r->iter;
    r->out.epochs_done = ep->e;
    return PHASE_LEAVE;
  }
  if (r->el.on && o->grow_every > 0 && r->iter % o->grow_every == 0) return step_grow(r, ep);
  return 0;
}

/* The epoch's iterations. 0, a failure, PHASE_STOP or PHASE_LEAVE. */
static int epoch_steps(run_t *r, epoch_t *ep) {
  const shoal_train_opts_t *o = r->o;
  int rc;
  for (ep->i = 0; ep->i < ep->ipe; ep->i++) {
    if (o->max_iters > 0 && r->iter >= o->max_iters) {
      r->stopped = 1;
      break;
    }
    double counted = 0;
    long lits0 = ep->lits;
    step_t st;
    if ((rc = train_step(r, ep, &st, &counted))) {
      ep->loss_sum -= counted;
      ep->lits = lits0;
      if ((rc = step_recover(r, ep, rc))) return rc;
      continue;
    }
    if ((rc = after_step(r, ep, &st))) return rc;
  }
  return 0;
}

/* Evaluation (not timed): BSP and sync PS hold one model; otherwise the workers' average is evaluated
 * (*avg). ev: this worker's shard's correct answers and loss sum. */
static int evaluate(run_t *r, double ev[2], int *avg) {
  const shoal_train_opts_t *o = r->o;
  int rc;
  *avg = r->multi && (o->sync == SHOAL_SYNC_DSSYNC || o->sync == SHOAL_SYNC_LOCALSGD ||
                      (o->sync == SHOAL_SYNC_PS && o->ps_mode != SHOAL_PS_SYNC));
  if (*avg) {
    if ((rc = average_model(r, &r->consensus))) return rc;
    swap_params(r);
  }
  eval_shard(r, ev);
  if (*avg) swap_params(r);
  return 0;
}

/* The epoch's line, CSV row and checkpoint, from the workers' summed statistics st (loss sum, losses,
 * correct answers, test loss sum, compute and communication seconds) and the slowest epoch time tmax.
 * PHASE_TARGET: the target accuracy is reached; PHASE_STOP: a stop request was agreed on during the epoch
 * (checkpointed now). */
static int epoch_report(run_t *r, const epoch_t *ep, const double st[6], double tmax, int avg) {
  const shoal_train_opts_t *o = r->o;
  shoal_train_result_t *out = &r->out;
  int e = ep->e, rc;
  double loss = st[1] > 0 ? st[0] / st[1] : 0, acc = st[2] / (double)r->ntest;
  double sps = tmax > 0 ? (double)r->gb * (double)ep->its / tmax : 0;
  out->epochs_done = e + 1;
  out->iters_done = r->iter;
  out->final_test_acc = acc;
  out->final_train_loss = loss;
  out->samples_per_s = sps;
  out->train_s = r->total_train;
  out->compute_s += st[4] / r->W;
  out->comm_s += st[5] / r->W;
  out->consensus = r->consensus;
  out->gns = shoal__gns_value(&r->gns);
  if (r->wrank == 0 && !o->quiet) {
    printf("epoch %3d/%d  loss %.4f  test acc %6.2f%%  %8.0f samples/s  compute %6.2f s  comm %6.2f s", e + 1,
           o->epochs, loss, 100 * acc, sps, st[4] / r->W, st[5] / r->W);
    if (avg) printf("  consensus %.3g", r->consensus);
    if (r->gns.every) printf("  gns %.0f", out->gns);
    printf("\n");
    fflush(stdout);
  }
  if (r->csv) {
    fprintf(r->csv, "%s,%s,%s,%d,%d,%ld,%.3f,%.6f,%.6f,%.1f,%.3f,%.3f,%.6g,%.6g,%.6g\n", o->label ? o->label : "run",
            shoal_model_kind_name(o->model), shoal_sync_kind_name(o->sync), r->W, e + 1, r->iter, r->total_train, loss,
            acc, sps, out->compute_s, out->comm_s, r->consensus, ep->lr, out->gns);
    if (fflush(r->csv) || ferror(r->csv)) /* a full disk: said now, not an exit 0 with the rows lost */
      return shoal__seterr(SHOAL_ERR_IO, "--csv %s: cannot write: %s", o->csv_path, strerror(errno ? errno : EIO));
  }
  if (o->ckpt_path && !r->stopped) {
    if ((rc = save_ckpt(r, e + 1, r->iter, 0, r->total_train))) return rc;
    /* ps: the servers write their shards; every worker's pushes up to here are applied */
    if (r->sync && (rc = shoal_sync_checkpoint(r->sync))) return rc;
  }
  if (o->target_acc > 0 && acc >= o->target_acc) { /* the job's goal: done (every worker sees the same acc) */
    out->reached_target = 1;
    if (r->wrank == 0 && !o->quiet)
      printf("reached the target accuracy %.2f%% after epoch %d (%.3f s of training)\n", 100 * o->target_acc, e + 1,
             r->total_train);
    return PHASE_TARGET;
  }
  if (r->stop_req && e + 1 < o->epochs && !(o->max_iters > 0 && r->iter >= o->max_iters)) {
    if (r->multi && (rc = shoal_barrier(r->wcomm))) return comm_fail(r->wcomm, rc, "barrier after the stop checkpoint");
    out->stopped = 1;
    return PHASE_STOP;
  }
  return 0;
}

/* Epoch e: its data order, its steps, then its evaluation and statistics (again among the survivors if a
 * rank is lost meanwhile, or on with the next epoch if a survivor had finished this one), its report. 0, a
 * failure, or a PHASE_*. */
static int run_epoch(run_t *r, int e) {
  const shoal_train_opts_t *o = r->o;
  shoal_rng_t rng;
  shoal_rng_seed2(&rng, o->seed, 1000 + (uint64_t)e);
  for (size_t i = 0; i < r->ntrain; i++) r->perm[i] = (uint32_t)i;
  shoal_rng_shuffle_u32(&rng, r->perm, r->ntrain);
  epoch_t ep = {.e = e, .t_epoch = shoal__now_s()};
  ep.off = e == r->start_epoch ? r->skip_samples : 0; /* samples of this epoch used before (resume, shrink) */
  ep.ipe = (long)((r->ntrain - ep.off) / r->gb);
  int rc = epoch_steps(r, &ep);
  if (rc) return rc;
  /* the strategy's thread may run ahead (partial): hand the communicator back first */
  if (r->sync && (rc = shoal_sync_pause(r->sync))) return rc;
  ep.epoch_s = shoal__now_s() - ep.t_epoch;
  r->total_train += ep.epoch_s;
  for (;;) {
    double ev[2];
    int avg;
    if ((rc = evaluate(r, ev, &avg))) return rc;
    double st[6] = {ep.loss_sum, (double)ep.lits, ev[0], ev[1], ep.epoch_s - ep.comm_s, ep.comm_s};
    double tmax = ep.epoch_s;
    if (!r->multi || (!(rc = shoal_allreduce(r->wcomm, SHOAL_IN_PLACE, st, 6, SHOAL_FLOAT64, SHOAL_SUM)) &&
                      !(rc = shoal_allreduce(r->wcomm, SHOAL_IN_PLACE, &tmax, 1, SHOAL_FLOAT64, SHOAL_MAX))))
      return epoch_report(r, &ep, st, tmax, avg);
    rc = comm_fail(r->wcomm, rc, "epoch statistics");
    shoal__train_pos_t pos = {r->iter, e, (int64_t)(ep.off + (size_t)ep.ipe * r->gb), 0};
    if ((rc = recover(r, rc, &pos, 1))) return rc;
    r->gb = (size_t)r->W * o->batch;
    if (pos.epoch == e) continue; /* the statistics again, among the survivors */
    /* a survivor had finished this epoch already (its statistics and log line): on with the next */
    r->iter = (long)pos.iter;
    r->start_epoch = (int)pos.epoch;
    r->skip_samples = (size_t)pos.off;
    return 0;
  }
}

/* The end: the final model (one global average for dssync and localsgd, the servers' parameters for ps)
 * evaluated, --params-out written, the elastic summary. */
static int finish(run_t *r) {
  const shoal_train_opts_t *o = r->o;
  int rc;
  if (r->sync && (rc = shoal_sync_final(r->sync))) return rc;
  if (r->multi && o->sync != SHOAL_SYNC_BSP && o->sync != SHOAL_SYNC_PARTIAL &&
      !(o->sync == SHOAL_SYNC_PS && o->ps_mode == SHOAL_PS_SYNC)) {
    double ev[2];
    eval_shard(r, ev);
    if ((rc = shoal_allreduce(r->wcomm, SHOAL_IN_PLACE, ev, 2, SHOAL_FLOAT64, SHOAL_SUM)))
      return comm_fail(r->wcomm, rc, "final evaluation");
    r->out.final_test_acc = ev[0] / (double)r->ntest;
    if (r->wrank == 0 && !o->quiet)
      printf("final model (global average): test acc %.2f%%\n", 100 * r->out.final_test_acc);
  }
  if (o->params_out) {
    char buf[4096];
    const char *path = worker_file(o->params_out, r->wrank, buf, sizeof buf);
    FILE *f = fopen(path, "wb");
    struct stat fst;
    int regular = f && fstat(fileno(f), &fst) == 0 && S_ISREG(fst.st_mode);
    int bad = !f || fwrite(r->m->params, sizeof(float), r->n, f) != r->n;
    if (f && fclose(f)) bad = 1;
    if (bad) {
      rc = shoal__seterr(SHOAL_ERR_IO, "--params-out %s: write failed: %s", path, strerror(errno ? errno : EIO));
      if (regular) unlink(path); /* no truncated file left to be taken for the parameters (never a device) */
      return rc;
    }
  }
  const shoal__elastic_t *el = &r->el;
  if (el->shrinks + el->grows && r->wrank == 0 && !o->quiet)
    printf("shoal train: finished with %d workers after %d shrink%s and %d grow%s; %.3f s spent recovering\n", r->W,
           el->shrinks, el->shrinks == 1 ? "" : "s", el->grows, el->grows == 1 ? "" : "s", el->recover_s);
  return 0;
}

/* Stopped on request: the line that says so. */
static void report_stop(run_t *r) {
  const shoal_train_opts_t *o = r->o;
  r->out.train_s = r->total_train;
  if (r->wrank == 0 && !o->quiet) {
    printf("stopped on request after iteration %ld (epoch %d)%s%s\n", r->iter, r->out.epochs_done + 1,
           o->ckpt_path ? ", checkpoint " : ", no checkpoint (no --checkpoint)", o->ckpt_path ? o->ckpt_path : "");
    fflush(stdout);
  }
}

/* Close the outputs (a write that failed at the end is the run's error when it had none) and free. */
static int teardown(run_t *r, int rc, shoal_dataset_t *own_train, shoal_dataset_t *own_test) {
  const shoal_train_opts_t *o = r->o;
  if (r->csv && fclose(r->csv) && !rc)
    rc = shoal__seterr(SHOAL_ERR_IO, "--csv %s: cannot write: %s", o->csv_path, strerror(errno));
  if (r->ilog && (ferror(r->ilog) | fclose(r->ilog)) && !rc) /* (both: fclose must run) */
    rc = shoal__seterr(SHOAL_ERR_IO, "--iter-log %s: cannot write: %s", r->ilog_path, strerror(errno ? errno : EIO));
  shoal_sync_destroy(r->sync);
  r->sync = NULL;
  shoal__elastic_free(&r->el);
  free(r->racks);
  free(r->mom);
  free(r->save);
  free(r->xb);
  free(r->yb);
  free(r->perm);
  shoal_model_destroy(r->m);
  shoal_dataset_destroy(own_train);
  shoal_dataset_destroy(own_test);
  return rc;
}

int shoal_train_run(const shoal_train_opts_t *o, shoal_comm_t *world, shoal_train_result_t *res) {
  if (!o) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_train_run: options are NULL");
  int wsize = world ? shoal_comm_size(world) : 1, rank = world ? shoal_comm_rank(world) : 0;
  int rc = check_opts(o, wsize);
  if (rc) return rc;
  for (int i = 0; i < 8 && o->decay_epochs[i] > 0 && rank == 0; i++)
    if (o->decay_epochs[i] >= o->epochs)
      SHOAL_WARN("TRAIN", "--decay-epochs %d: the lr drops once %d epochs are done (from epoch %d on), but this "
                 "run ends after epoch %d: no drop in it", o->decay_epochs[i], o->decay_epochs[i],
                 o->decay_epochs[i] + 1, o->epochs);
  openblas_set_num_threads(o->blas_threads > 0 ? o->blas_threads : 1);
  run_t *r = calloc(1, sizeof *r);
  if (!r) return shoal__seterr(SHOAL_ERR_NOMEM, "train: out of memory");
  r->o = o;
  r->world = world;
  r->S = o->sync == SHOAL_SYNC_PS ? o->servers : 0;
  r->W = wsize - r->S;
  int is_server = rank >= r->W, served = 0;
  r->wrank = is_server ? -1 : rank;
  shoal__gns_init(&r->gns, o->gns_every);
  shoal_dataset_t *own_train = NULL, *own_test = NULL;
  if ((rc = setup(r, &own_train, &own_test, is_server, &served)) || served) goto out;
  if ((rc = start_position(r)) || (rc = open_outputs(r))) goto out;
  for (int e = r->start_epoch; e < o->epochs && !r->stopped && !r->stop_req; e++) {
    if (o->max_iters > 0 && r->iter >= o->max_iters) break;
    if ((rc = run_epoch(r, e))) break;
  }
  if (rc == PHASE_STOP) {
    /* ps: the servers end once every worker is done (they write their shards first) */
    rc = r->sync && o->sync == SHOAL_SYNC_PS ? shoal_sync_final(r->sync) : 0;
    if (!rc) report_stop(r);
  } else if (rc == PHASE_LEAVE) {
    rc = 0;
  } else if (!rc || rc == PHASE_TARGET) {
    rc = finish(r);
  }
out:
  if (!rc && res) *res = r->out;
  rc = teardown(r, rc, own_train, own_test);
  free(r);
  return rc;
}
