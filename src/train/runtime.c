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
} run_t;

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
      return shoal__seterr(SHOAL_ERR_INVALID, "--checkpoint-every: ps checkpoints are written at epoch ends only "
                                              "(the servers' state is consistent there)");
    if (o->staleness < 0) return shoal__seterr(SHOAL_ERR_INVALID, "--staleness %d: expected >= 0", o->staleness);
  }
  if ((o->stop_flag || o->elastic) && o->sync != SHOAL_SYNC_BSP && wsize > 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: bsp only (this run is --sync %s: its workers' models or the servers' "
                                            "state would have to be checkpointed together)",
                         o->stop_flag ? "stopping on a signal to checkpoint" : "elastic resume", shoal_sync_kind_name(o->sync));
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
  shoal_sync_t *sync;
  const int *bucket_of_layer;
  int rc;
} ready_arg_t;

/* Backward's hook: a layer whose gradients complete a bucket reports it. */
static void layer_ready(int layer, void *arg) {
  ready_arg_t *a = arg;
  int b = a->bucket_of_layer[layer];
  if (b >= 0 && !a->rc) a->rc = shoal_sync_bucket_ready(a->sync, b);
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
static int rejoin(run_t *r, shoal_sync_t **sync, int bucket_of_layer[8], int **racks, shoal__train_pos_t *pos,
                  int valid) {
  shoal_sync_destroy(*sync);
  *sync = NULL;
  free(*racks);
  *racks = NULL;
  r->wcomm = r->world;
  r->W = shoal_comm_size(r->world);
  r->wrank = shoal_comm_rank(r->world);
  int rc = make_sync(r, sync, bucket_of_layer, racks);
  if (rc) return rc;
  r->wcomm = shoal_sync_workers(*sync);
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
static int recover(run_t *r, shoal__elastic_t *el, int rc, shoal_sync_t **sync, int bucket_of_layer[8], int **racks,
                   shoal__train_pos_t *pos, int valid) {
  if (!el->on || !shoal__elastic_recoverable(rc)) return rc;
  double t0 = shoal__now_s();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  int W0 = r->W, rank0 = r->wrank;
  fprintf(stderr, "shoal train: rank %d: communication failed at iteration %lld (wall clock %.3f): %s; shrinking\n",
          rank0, (long long)pos->iter, (double)wall.tv_sec + wall.tv_nsec * 1e-9, shoal_last_error());
  for (int attempt = 0; attempt < W0; attempt++) {
    shoal_sync_destroy(*sync);
    *sync = NULL;
    if ((rc = shoal__elastic_shrink(el, &r->world))) return rc;
    if (!(rc = rejoin(r, sync, bucket_of_layer, racks, pos, valid))) break;
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

int shoal_train_run(const shoal_train_opts_t *o, shoal_comm_t *world, shoal_train_result_t *res) {
  if (!o) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_train_run: options are NULL");
  int wsize = world ? shoal_comm_size(world) : 1, rank = world ? shoal_comm_rank(world) : 0;
  int rc = check_opts(o, wsize);
  if (rc) return rc;
  char ilog_path[4096] = ""; /* this rank's --iter-log file */
  for (int i = 0; i < 8 && o->decay_epochs[i] > 0 && rank == 0; i++)
    if (o->decay_epochs[i] >= o->epochs)
      SHOAL_WARN("TRAIN", "--decay-epochs %d: the lr drops once %d epochs are done (from epoch %d on), but this "
                 "run ends after epoch %d: no drop in it", o->decay_epochs[i], o->decay_epochs[i],
                 o->decay_epochs[i] + 1, o->epochs);
  openblas_set_num_threads(o->blas_threads > 0 ? o->blas_threads : 1);
  run_t r = {.o = o, .world = world};
  int S = o->sync == SHOAL_SYNC_PS ? o->servers : 0;
  r.W = wsize - S;
  int is_server = rank >= r.W;
  r.wrank = is_server ? -1 : rank;
  shoal_dataset_t *own_train = NULL, *own_test = NULL;
  shoal_sync_t *sync = NULL;
  int *racks = NULL;
  shoal_train_result_t out = {0};
  shoal__straggle_t straggle;
  shoal__elastic_t el = {0}; /* before the first goto out_free, which frees it */
  shoal__gns_t gns;
  shoal__gns_init(&gns, o->gns_every);
  if ((rc = shoal__straggle_parse(o->straggle, o->seed, r.W, &straggle))) goto out_free;
  if (wsize == 1 && o->sync_config && (rc = check_sync_alone(&r))) goto out_free;
  if ((rc = load_data(&r, &own_train, &own_test))) goto out_free;
  int max_batch = o->batch > 256 ? o->batch : 256;
  if ((rc = shoal_model_create(o->model, r.train->rows, r.train->cols,
                               r.train->nclass > r.test->nclass ? r.train->nclass : r.test->nclass, max_batch, o->seed,
                               &r.m)))
    goto out_free;
  r.wcomm = world;
  int multi = r.W > 1 || S > 0; /* PS with one worker still goes through its server */
  int bucket_of_layer[8];
  if (multi && (rc = make_sync(&r, &sync, bucket_of_layer, &racks))) goto out_free;
  if (sync) r.wcomm = shoal_sync_workers(sync);
  if (is_server) {
    out.is_server = 1;
    if ((rc = shoal_sync_serve(sync))) goto out_free;
    out.max_staleness = shoal_sync_max_staleness(sync);
    if (res) *res = out;
    goto out_free;
  }
  size_t n = r.m->nparams, in_dim = (size_t)r.train->rows * r.train->cols;
  r.mom = calloc(n, sizeof(float));
  r.save = malloc(n * sizeof(float));
  r.xb = malloc((size_t)o->batch * in_dim * sizeof(float));
  r.yb = malloc((size_t)o->batch);
  r.perm = malloc(r.ntrain * sizeof(uint32_t));
  if (!r.mom || !r.save || !r.xb || !r.yb || !r.perm) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "train: out of memory");
    goto out_free;
  }
  int start_epoch = 0;
  long iter = 0;
  size_t skip = 0; /* samples of start_epoch already used (mid-epoch checkpoint) */
  double resumed_s = 0;
  int joiner = world && shoal_comm_joined(world); /* a restarted rank: the others give it the state */
  if (o->resume_path && !joiner) {
    shoal__ckpt_meta_t meta = {0};
    if ((rc = resume(&r, multi, &meta))) goto out_free;
    start_epoch = (int)meta.epochs_done;
    iter = (long)meta.iters_done;
    resumed_s = meta.train_s;
    size_t gb0 = (size_t)meta.workers * meta.batch;
    skip = (size_t)meta.epoch_samples;
    /* same worker count: the epoch's remaining iterations are whole global batches of this run; another
     * count (elastic): the samples left in the epoch that do not fill a global batch are dropped, as at
     * every epoch end */
    if (skip >= r.ntrain || (meta.workers == (uint32_t)r.W && (gb0 == 0 || skip % gb0 || skip + gb0 > r.ntrain))) {
      rc = shoal__seterr(SHOAL_ERR_MISMATCH,
                         "checkpoint %s: %zu samples of epoch %d used, but an epoch has %zu here (other "
                         "--train-subset?)",
                         o->resume_path, skip, start_epoch + 1, r.ntrain);
      goto out_free;
    }
  }
  size_t skip_samples = skip; /* of start_epoch, already used */
  el.on = o->on_failure_shrink && multi;
  if (el.on) { /* every rank, and a rank that enters a running job, continue from the newest state */
    shoal__train_pos_t pos = {iter, start_epoch, (int64_t)skip_samples, resumed_s};
    rc = shoal__elastic_sync_state(r.world, !joiner, &pos, r.m->params, r.mom, n);
    if (rc && (rc = recover(&r, &el, rc, &sync, bucket_of_layer, &racks, &pos, !joiner))) goto out_free;
    iter = (long)pos.iter;
    start_epoch = (int)pos.epoch;
    skip_samples = (size_t)pos.off;
    resumed_s = pos.train_s;
  }
  if (o->csv_path && r.wrank == 0) {
    int exists = access(o->csv_path, F_OK) == 0 && o->resume_path;
    r.csv = fopen(o->csv_path, exists ? "a" : "w");
    if (!r.csv) {
      rc = shoal__seterr(SHOAL_ERR_IO, "--csv %s: cannot open for writing: %s", o->csv_path, strerror(errno));
      goto out_free;
    }
    if (!exists) csv_header(r.csv);
  }
  if (o->iter_log) {
    const char *path = worker_file(o->iter_log, r.wrank, ilog_path, sizeof ilog_path);
    if (!(r.ilog = fopen(path, "w"))) {
      rc = shoal__seterr(SHOAL_ERR_IO, "--iter-log %s: cannot open for writing: %s", path, strerror(errno));
      goto out_free;
    }
    fprintf(r.ilog, "iter,epoch,group_size,compute_ms,sync_ms,loss,lr,consensus,payload_bytes,wall_s\n");
  }
  if (r.wrank == 0 && !o->quiet)
    printf("shoal train: model %s (%zu parameters), sync %s, %d worker%s%s, batch %d per worker, %zu train / %zu "
           "test images\n",
           shoal_model_kind_name(o->model), n, shoal_sync_kind_name(o->sync), r.W, r.W > 1 ? "s" : "",
           S ? " + servers" : "", o->batch, r.ntrain, r.ntest);
  size_t gb = (size_t)r.W * o->batch;
  double total_train = resumed_s, consensus = 0;
  int stopped = 0, stop_req = 0;
  for (int e = start_epoch; e < o->epochs && !stopped && !stop_req; e++) {
    if (o->max_iters > 0 && iter >= o->max_iters) break;
    shoal_rng_t rng;
    shoal_rng_seed2(&rng, o->seed, 1000 + (uint64_t)e);
    for (size_t i = 0; i < r.ntrain; i++) r.perm[i] = (uint32_t)i;
    shoal_rng_shuffle_u32(&rng, r.perm, r.ntrain);
    double t_epoch = shoal__now_s(), comm_s = 0, loss_sum = 0, lr = 0;
    long its = 0, lits = 0; /* iterations, and those that computed a loss (partial skips some) */
    size_t off = e == start_epoch ? skip_samples : 0; /* samples of this epoch used before (resume, shrink) */
    long ipe = (long)((r.ntrain - off) / gb);
    for (long i = 0; i < ipe; i++) {
      if (o->max_iters > 0 && iter >= o->max_iters) {
        stopped = 1;
        break;
      }
      double it0 = shoal__now_s(), comm0 = comm_s, counted = 0;
      long lits0 = lits;
      int gsize = r.W;
      double payload = 0;
      const uint32_t *idx = r.perm + off + (size_t)i * gb + (size_t)r.wrank * o->batch;
      for (int j = 0; j < o->batch; j++) {
        memcpy(r.xb + (size_t)j * in_dim, r.train->x + (size_t)idx[j] * in_dim, in_dim * sizeof(float));
        r.yb[j] = r.train->y[idx[j]];
      }
      lr = shoal__lr_at(o, iter, e);
      shoal__gns_before_step(&gns, r.m, r.xb, r.yb, o->batch, iter); /* before the strategy owns the gradients */
      if (sync && ((rc = shoal_sync_set_lr(sync, lr)) || (rc = shoal_sync_begin(sync, iter)))) goto step_failed;
      /* partial: a step under way without this worker: its gradients could only be late */
      int skip_step = sync && (shoal_sync_flags(sync) & SHOAL_SYNC_F_SKIP);
      double it_loss = 0;
      if (!skip_step) {
        double tc = shoal__now_s();
        shoal__model_forward(r.m, r.xb, o->batch);
        it_loss = shoal__model_loss(r.m, r.yb, o->batch, 1, NULL);
        loss_sum += it_loss;
        lits++;
        counted = it_loss;
        ready_arg_t ra = {sync, bucket_of_layer, 0};
        shoal__model_backward(r.m, r.xb, o->batch, sync ? layer_ready : NULL, &ra);
        if (ra.rc) {
          rc = ra.rc;
          goto step_failed;
        }
        if (straggle.on) shoal__straggle_apply(&straggle, r.wrank, iter, shoal__now_s() - tc);
      }
      if (sync && (rc = shoal_sync_finish(sync))) goto step_failed;
      shoal__gns_after_step(&gns, r.m->grads, n, r.W * o->batch);
      if (!sync || !(shoal_sync_flags(sync) & SHOAL_SYNC_F_SERVER_STEP))
        shoal__sgd_step(r.m->params, r.mom, r.m->grads, n, (float)lr, (float)o->momentum, (float)o->weight_decay);
      if (sync) {
        double wait = 0;
        if ((rc = shoal_sync_end(sync)) || (rc = shoal_sync_last_step(sync, &wait, &gsize, &payload))) goto step_failed;
        comm_s += wait;
      }
      double it_s = shoal__now_s() - it0, it_sync = comm_s - comm0;
      iter++;
      its++;
      int measured = 0;
      if (o->consensus_every > 0 && multi && iter % o->consensus_every == 0 && o->sync != SHOAL_SYNC_BSP &&
          o->sync != SHOAL_SYNC_PARTIAL) {
        double t0 = shoal__now_s();
        if ((rc = average_model(&r, &consensus))) goto out_free;
        t_epoch += shoal__now_s() - t0; /* diagnostic: excluded from timing */
        measured = 1;
        SHOAL_INFO("TRAIN", "iteration %ld: consensus distance %.6g", iter, consensus);
      }
      if (r.ilog) {
        fprintf(r.ilog, "%ld,%d,%d,%.4f,%.4f,%.5f,%.6g,", iter - 1, e, gsize, 1e3 * (it_s - it_sync), 1e3 * it_sync,
                it_loss, lr);
        if (measured) fprintf(r.ilog, "%.6g", consensus);
        fprintf(r.ilog, ",%.0f,%.6f\n", payload, shoal__wall_s());
      }
      /* periodic checkpoint inside the epoch (the epoch end writes its own) */
      if (o->ckpt_path && o->ckpt_every > 0 && iter % o->ckpt_every == 0 && i + 1 < ipe &&
          (rc = save_ckpt(&r, e, iter, off + (size_t)(i + 1) * gb, total_train + shoal__now_s() - t_epoch)))
        goto out_free;
      /* a stop request (checkpoint and leave, e.g. before a preemption): every worker learns whether any
       * got one, so all stop after the same iteration; inside an epoch the checkpoint is written here, at
       * its last iteration by the epoch end below */
      if (o->stop_flag && !stop_req) {
        int32_t want = *o->stop_flag != 0;
        if (multi && (rc = shoal_allreduce(r.wcomm, SHOAL_IN_PLACE, &want, 1, SHOAL_INT32, SHOAL_MAX))) {
          rc = comm_fail(r.wcomm, rc, "agreement on a stop request");
          goto out_free;
        }
        stop_req = want != 0;
        /* the run's last iteration (end of the epoch, or max_iters): a normal end */
        if (stop_req && i + 1 < ipe && !(o->max_iters > 0 && iter >= o->max_iters)) {
          if (o->ckpt_path && (rc = save_ckpt(&r, e, iter, off + (size_t)(i + 1) * gb, total_train + shoal__now_s() - t_epoch)))
            goto out_free;
          /* nobody leaves before rank 0's checkpoint is on disk (a launcher may kill the others' peers
           * as soon as one exits) */
          if (multi && (rc = shoal_barrier(r.wcomm))) {
            rc = comm_fail(r.wcomm, rc, "barrier after the stop checkpoint");
            goto out_free;
          }
          out.stopped = 1;
          out.iters_done = iter;
          out.epochs_done = e;
          goto stop;
        }
      }
      /* asked to leave (its server is reclaimed): gone at this boundary, after the stop agreement above (which
       * needs every rank); the others' next step fails on the closed connections and they shrink and go on
       * (--on-failure shrink), losing no completed step */
      if (o->leave_flag && *o->leave_flag && multi) {
        if (!o->quiet)
          printf("shoal train: rank %d leaves the job after iteration %ld (asked to)\n", r.wrank, iter);
        fflush(stdout);
        out.left = 1;
        out.iters_done = iter;
        out.epochs_done = e;
        if (res) *res = out;
        goto out_free;
      }
      /* restarted ranks waiting to enter: admitted here, at the same iteration on every rank */
      if (el.on && o->grow_every > 0 && iter % o->grow_every == 0) {
        shoal__train_pos_t pos = {iter, e, (int64_t)(off + (size_t)(i + 1) * gb), 0};
        int grown = 0;
        double g0 = shoal__now_s();
        rc = shoal__elastic_grow(&el, &r.world, &grown);
        if (!rc && grown) rc = rejoin(&r, &sync, bucket_of_layer, &racks, &pos, 1);
        if (rc && (rc = recover(&r, &el, rc, &sync, bucket_of_layer, &racks, &pos, 1))) goto out_free;
        if (grown && r.wrank == 0 && !o->quiet) {
          struct timespec wall;
          clock_gettime(CLOCK_REALTIME, &wall);
          printf("shoal train: new rank(s) entered; continuing with %d workers from iteration %ld; admission took "
                 "%.3f s (done at wall clock %.3f)\n", r.W, iter, shoal__now_s() - g0,
                 (double)wall.tv_sec + wall.tv_nsec * 1e-9);
          fflush(stdout);
        }
        if (pos.off != (int64_t)(off + (size_t)(i + 1) * gb) || (size_t)r.W * o->batch != gb) {
          off = (size_t)pos.off; /* new shard from here: i restarts at 0 */
          iter = (long)pos.iter;
          gb = (size_t)r.W * o->batch;
          ipe = (long)((r.ntrain - off) / gb);
          i = -1;
        }
      }
      continue;
    step_failed: /* a call of the strategy failed: fail, or (--on-failure shrink) go on without the lost rank */
      loss_sum -= counted;
      lits = lits0;
      {
        shoal__train_pos_t pos = {iter, e, (int64_t)(off + (size_t)i * gb), 0};
        if ((rc = recover(&r, &el, rc, &sync, bucket_of_layer, &racks, &pos, 1))) goto out_free;
        if (pos.epoch != e) {
          rc = shoal__seterr(SHOAL_ERR_INTERNAL, "train: after a shrink in epoch %d the newest state is in epoch %lld",
                             e + 1, (long long)pos.epoch + 1);
          goto out_free;
        }
        off = (size_t)pos.off;
        iter = (long)pos.iter;
        gb = (size_t)r.W * o->batch;
        ipe = (long)((r.ntrain - off) / gb);
        i = -1;
      }
    }
    /* the strategy's thread may run ahead (partial): hand the communicator back first */
    if (sync && (rc = shoal_sync_pause(sync))) goto out_free;
    double epoch_s = shoal__now_s() - t_epoch;
    total_train += epoch_s;
  epoch_end:;
    /* Evaluation (not timed): BSP and sync PS hold one model; otherwise evaluate the workers' average. */
    double ev[2];
    int avg = multi && (o->sync == SHOAL_SYNC_DSSYNC || o->sync == SHOAL_SYNC_LOCALSGD ||
                        (o->sync == SHOAL_SYNC_PS && o->ps_mode != SHOAL_PS_SYNC));
    if (avg) {
      if ((rc = average_model(&r, &consensus))) goto out_free;
      swap_params(&r);
    }
    eval_shard(&r, ev);
    if (avg) swap_params(&r);
    double st[6] = {loss_sum, (double)lits, ev[0], ev[1], epoch_s - comm_s, comm_s};
    double tmax = epoch_s;
    if (multi && ((rc = shoal_allreduce(r.wcomm, SHOAL_IN_PLACE, st, 6, SHOAL_FLOAT64, SHOAL_SUM)) ||
                  (rc = shoal_allreduce(r.wcomm, SHOAL_IN_PLACE, &tmax, 1, SHOAL_FLOAT64, SHOAL_MAX)))) {
      rc = comm_fail(r.wcomm, rc, "epoch statistics");
      shoal__train_pos_t pos = {iter, e, (int64_t)(off + (size_t)ipe * gb), 0};
      if ((rc = recover(&r, &el, rc, &sync, bucket_of_layer, &racks, &pos, 1))) goto out_free;
      gb = (size_t)r.W * o->batch;
      if (pos.epoch == e) goto epoch_end; /* the statistics again, among the survivors */
      /* a survivor had finished this epoch already (its statistics and log line): on with the next */
      iter = (long)pos.iter;
      start_epoch = (int)pos.epoch;
      skip_samples = (size_t)pos.off;
      continue;
    }
    double loss = st[1] > 0 ? st[0] / st[1] : 0, acc = st[2] / (double)r.ntest;
    double sps = tmax > 0 ? (double)gb * (double)its / tmax : 0;
    out.epochs_done = e + 1;
    out.iters_done = iter;
    out.final_test_acc = acc;
    out.final_train_loss = loss;
    out.samples_per_s = sps;
    out.train_s = total_train;
    out.compute_s += st[4] / r.W;
    out.comm_s += st[5] / r.W;
    out.consensus = consensus;
    out.gns = shoal__gns_value(&gns);
    if (r.wrank == 0 && !o->quiet) {
      printf("epoch %3d/%d  loss %.4f  test acc %6.2f%%  %8.0f samples/s  compute %6.2f s  comm %6.2f s", e + 1,
             o->epochs, loss, 100 * acc, sps, st[4] / r.W, st[5] / r.W);
      if (avg) printf("  consensus %.3g", consensus);
      if (gns.every) printf("  gns %.0f", out.gns);
      printf("\n");
      fflush(stdout);
    }
    if (r.csv) {
      fprintf(r.csv, "%s,%s,%s,%d,%d,%ld,%.3f,%.6f,%.6f,%.1f,%.3f,%.3f,%.6g,%.6g,%.6g\n", o->label ? o->label : "run",
              shoal_model_kind_name(o->model), shoal_sync_kind_name(o->sync), r.W, e + 1, iter, total_train, loss, acc,
              sps, out.compute_s, out.comm_s, consensus, lr, out.gns);
      if (fflush(r.csv) || ferror(r.csv)) { /* a full disk: said now, not an exit 0 with the rows lost */
        rc = shoal__seterr(SHOAL_ERR_IO, "--csv %s: cannot write: %s", o->csv_path, strerror(errno ? errno : EIO));
        goto out_free;
      }
    }
    if (o->ckpt_path && !stopped) {
      if ((rc = save_ckpt(&r, e + 1, iter, 0, total_train))) goto out_free;
      /* ps: the servers write their shards; every worker's pushes up to here are applied */
      if (sync && (rc = shoal_sync_checkpoint(sync))) goto out_free;
    }
    if (o->target_acc > 0 && acc >= o->target_acc) { /* the job's goal: done (every worker sees the same acc) */
      out.reached_target = 1;
      if (r.wrank == 0 && !o->quiet)
        printf("reached the target accuracy %.2f%% after epoch %d (%.3f s of training)\n", 100 * o->target_acc, e + 1,
               total_train);
      break;
    }
    if (stop_req && e + 1 < o->epochs && !(o->max_iters > 0 && iter >= o->max_iters)) {
      if (multi && (rc = shoal_barrier(r.wcomm))) {
        rc = comm_fail(r.wcomm, rc, "barrier after the stop checkpoint");
        goto out_free;
      }
      out.stopped = 1;
      goto stop;
    }
  }
  /* Final model: one global average (dssync, localsgd), or the servers' parameters (ps). */
  if (sync && (rc = shoal_sync_final(sync))) goto out_free;
  if (multi && o->sync != SHOAL_SYNC_BSP && o->sync != SHOAL_SYNC_PARTIAL &&
      !(o->sync == SHOAL_SYNC_PS && o->ps_mode == SHOAL_PS_SYNC)) {
    double ev[2];
    eval_shard(&r, ev);
    if ((rc = shoal_allreduce(r.wcomm, SHOAL_IN_PLACE, ev, 2, SHOAL_FLOAT64, SHOAL_SUM))) {
      rc = comm_fail(r.wcomm, rc, "final evaluation");
      goto out_free;
    }
    out.final_test_acc = ev[0] / (double)r.ntest;
    if (r.wrank == 0 && !o->quiet) printf("final model (global average): test acc %.2f%%\n", 100 * out.final_test_acc);
  }
  if (o->params_out) {
    char buf[4096];
    const char *path = worker_file(o->params_out, r.wrank, buf, sizeof buf);
    FILE *f = fopen(path, "wb");
    struct stat fst;
    int regular = f && fstat(fileno(f), &fst) == 0 && S_ISREG(fst.st_mode);
    int bad = !f || fwrite(r.m->params, sizeof(float), n, f) != n;
    if (f && fclose(f)) bad = 1;
    if (bad) {
      rc = shoal__seterr(SHOAL_ERR_IO, "--params-out %s: write failed: %s", path, strerror(errno ? errno : EIO));
      if (regular) unlink(path); /* no truncated file left to be taken for the parameters (never a device) */
      goto out_free;
    }
  }
  if (el.shrinks + el.grows && r.wrank == 0 && !o->quiet)
    printf("shoal train: finished with %d workers after %d shrink%s and %d grow%s; %.3f s spent recovering\n", r.W,
           el.shrinks, el.shrinks == 1 ? "" : "s", el.grows, el.grows == 1 ? "" : "s", el.recover_s);
  if (res) *res = out;
  goto out_free;
stop:
  out.train_s = total_train;
  if (r.wrank == 0 && !o->quiet) {
    printf("stopped on request after iteration %ld (epoch %d)%s%s\n", iter, out.epochs_done + 1,
           o->ckpt_path ? ", checkpoint " : ", no checkpoint (no --checkpoint)", o->ckpt_path ? o->ckpt_path : "");
    fflush(stdout);
  }
  if (res) *res = out;
out_free:
  if (r.csv && fclose(r.csv) && !rc)
    rc = shoal__seterr(SHOAL_ERR_IO, "--csv %s: cannot write: %s", o->csv_path, strerror(errno));
  if (r.ilog && (ferror(r.ilog) | fclose(r.ilog)) && !rc) /* (both: fclose must run) */
    rc = shoal__seterr(SHOAL_ERR_IO, "--iter-log %s: cannot write: %s", ilog_path, strerror(errno ? errno : EIO));
  shoal_sync_destroy(sync);
  sync = NULL;
  shoal__elastic_free(&el);
  free(racks);
  free(r.mom);
  free(r.save);
  free(r.xb);
  free(r.yb);
  free(r.perm);
  shoal_model_destroy(r.m);
  shoal_dataset_destroy(own_train);
  shoal_dataset_destroy(own_test);
  return rc;
}
