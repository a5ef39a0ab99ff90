/* `shoal train`: data-parallel training on Fashion-MNIST (docs/training.md).
 * Under `shoal launch -n N`, mpirun or srun the ranks find each other through
 * the environment (shoal_comm_init_env); without a launcher it trains in one
 * process. `shoal train --plot OUT.svg A.csv B.csv ...` draws test accuracy
 * against time for several runs. */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/bootstrap/bootstrap.h"
#include "core/config.h"
#include "core/error.h"
#include "shoal/comm.h"
#include "live/live.h"
#include "options.h"
#include "shoal/train.h"
#include "train/sync.h"

typedef struct train_cli {
  shoal_train_opts_t o;
  int preemptible, leavable;
  const char *plot, *title; /* in the table for --help; `shoal train --plot` has a table of its own */
} train_cli_t;

/* What options apply to (the bits of train_opts' .when), checked in this order */
enum { M_BSP, M_DSSYNC, M_PS, M_LOCALSGD, M_NOT_BSP, M_TOPO, M_SSP, M_SHRINK, M_CKPT, M_DECAY, M_PLOT };
#define O(c) (&((const train_cli_t *)(c))->o)
static int on_bsp(const void *c) { return O(c)->sync == SHOAL_SYNC_BSP; }
static int on_dssync(const void *c) { return O(c)->sync == SHOAL_SYNC_DSSYNC; }
static int on_ps(const void *c) { return O(c)->sync == SHOAL_SYNC_PS; }
static int on_localsgd(const void *c) { return O(c)->sync == SHOAL_SYNC_LOCALSGD; }
static int on_not_bsp(const void *c) { return O(c)->sync != SHOAL_SYNC_BSP; }
static int on_topo(const void *c) { return O(c)->ds_pattern == SHOAL_DS_TOPO; }
static int on_ssp(const void *c) { return O(c)->ps_mode == SHOAL_PS_SSP; }
static int on_shrink(const void *c) { return O(c)->on_failure_shrink; }
static int on_ckpt(const void *c) { return O(c)->ckpt_path != NULL; }
static int on_decay(const void *c) { return O(c)->decay_epochs[0] > 0; }
static int never(const void *c) { return 0; }
static void why_sync(const void *c, char *b, size_t cap, const char *of) {
  snprintf(b, cap, "does not apply to --sync %s (it is a setting of %s)", shoal_sync_kind_name(O(c)->sync), of);
}
static void not_bsp(const void *c, char *b, size_t cap) { why_sync(c, b, cap, "bsp"); }
static void not_dssync(const void *c, char *b, size_t cap) { why_sync(c, b, cap, "dssync"); }
static void not_ps(const void *c, char *b, size_t cap) { why_sync(c, b, cap, "ps"); }
static void not_localsgd(const void *c, char *b, size_t cap) { why_sync(c, b, cap, "localsgd"); }
static void is_bsp(const void *c, char *b, size_t cap) { why_sync(c, b, cap, "dssync, ps and localsgd"); }
static void not_topo(const void *c, char *b, size_t cap) {
  snprintf(b, cap, "applies to --ds-pattern topo only (this run: --ds-pattern %s)", shoal_ds_pattern_name(O(c)->ds_pattern));
}
static void not_ssp(const void *c, char *b, size_t cap) {
  snprintf(b, cap, "applies to --ps-mode ssp only (this run: --ps-mode %s)", shoal_ps_mode_name(O(c)->ps_mode));
}
static const shoal_opt_mode_t train_modes[] = {
    [M_BSP] = {on_bsp, NULL, not_bsp},
    [M_DSSYNC] = {on_dssync, NULL, not_dssync},
    [M_PS] = {on_ps, NULL, not_ps},
    [M_LOCALSGD] = {on_localsgd, NULL, not_localsgd},
    [M_NOT_BSP] = {on_not_bsp, NULL, is_bsp},
    [M_TOPO] = {on_topo, NULL, not_topo},
    [M_SSP] = {on_ssp, NULL, not_ssp},
    [M_SHRINK] = {on_shrink, "applies with --on-failure shrink only (restarted ranks enter a run that shrank)", NULL},
    [M_CKPT] = {on_ckpt, "needs --checkpoint FILE (where the checkpoints go)", NULL},
    [M_DECAY] = {on_decay, "needs --decay-epochs E1,E2,... (when the lr decays)", NULL},
    [M_PLOT] = {never, "applies with --plot only (shoal train --plot OUT.svg [--title T] RUN.csv...)", NULL},
};
#undef O
#define W(m) (1u << (m))

/* The enums, through the library's parsers (their errors list the names) and names */
static int parse_model(const char *n, const char *v, void *f) { return shoal_model_kind_parse(v, f); }
static int parse_sync(const char *n, const char *v, void *f) { return shoal_sync_kind_parse(v, f); }
static int parse_pattern(const char *n, const char *v, void *f) { return shoal_ds_pattern_parse(v, f); }
static int parse_ps_mode(const char *n, const char *v, void *f) { return shoal_ps_mode_parse(v, f); }
static void show_model(const void *f, char *b, size_t cap) { snprintf(b, cap, "%s", shoal_model_kind_name(*(const shoal_model_kind_t *)f)); }
static void show_sync(const void *f, char *b, size_t cap) { snprintf(b, cap, "%s", shoal_sync_kind_name(*(const shoal_sync_kind_t *)f)); }
static void show_pattern(const void *f, char *b, size_t cap) { snprintf(b, cap, "%s", shoal_ds_pattern_name(*(const shoal_ds_pattern_t *)f)); }
static void show_ps_mode(const void *f, char *b, size_t cap) { snprintf(b, cap, "%s", shoal_ps_mode_name(*(const shoal_ps_mode_t *)f)); }

/* --bucket-kb K: KiB into bytes */
static int parse_bucket_kb(const char *n, const char *v, void *f) {
  double d;
  if (shoal__parse_double(n, v, 0, 1 << 22, &d)) return -1;
  *(size_t *)f = (size_t)(d * 1024);
  return 0;
}
static void show_bucket_kb(const void *f, char *b, size_t cap) { snprintf(b, cap, "%zu", *(const size_t *)f / 1024); }

/* --decay-epochs E1,E2,...: at most 8 epochs >= 1 into a 0-terminated int[8] */
static int parse_decay_epochs(const char *n, const char *v, void *f) {
  int *out = f;
  const char *s = v;
  char *end;
  for (int k = 0; *s; k++) {
    if (k == 8) return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': at most 8 epochs", n, v);
    long e = strtol(s, &end, 10);
    if (end == s || e < 1 || (*end && *end != ','))
      return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': expected a comma list of epochs >= 1", n, v);
    out[k] = (int)e;
    s = *end ? end + 1 : end;
  }
  return 0;
}

#define SHOAL_OPTS_STRUCT train_cli_t
static const shoal_opt_t train_opts[] = {
    OPT_GROUP("model and data:"),
    OPT_CALL("--model", "softmax|mlp|cnn", o.model, shoal_model_kind_t, parse_model, "mlp: 784-512-256-10 ReLU",
             .show = show_model),
    OPT_STRING("--data", "DIR", o.data_dir, "IDX files (train-/t10k-*-ubyte[.gz])", .def = SHOAL_FASHION_MNIST_DIR,
               .expect = "a directory"),
    OPT_INT("--classes", "N", o.nclass, 2, 256, "classes of the data set; a label >= N is an error", .def = "10"),
    OPT_COUNT("--train-subset", "N", o.train_subset, 0, 1e12, "use the first N training images", .def = "all"),
    OPT_COUNT("--test-subset", "N", o.test_subset, 0, 1e12, "use the first N test images", .def = "all"),
    OPT_GROUP("optimizer (lr is for the global batch):"),
    OPT_INT("--epochs", "N", o.epochs, 1, 100000, "epochs"),
    OPT_INT("--batch", "B", o.batch, 1, 65536, "batch per worker"),
    OPT_DOUBLE("--lr", "X", o.lr, 1e-9, 100, "learning rate"),
    OPT_DOUBLE("--momentum", "X", o.momentum, 0, 0.999999, "momentum"),
    OPT_DOUBLE("--wd", "X", o.weight_decay, 0, 0.999999, "weight decay"),
    OPT_INT("--warmup", "ITERS", o.warmup_iters, 0, 1e9, "linear lr warm-up"),
    OPT_CALL("--decay-epochs", "E1,E2,...", o.decay_epochs[0], int, parse_decay_epochs,
             "lr *= gamma once E epochs are done: from the epoch printed as E+1 on; at most 8", .def = "none",
             .expect = "a comma list of epochs >= 1"),
    OPT_DOUBLE("--decay-gamma", "X", o.decay_gamma, 0, 1, "the factor of each decay", .when = W(M_DECAY)),
    OPT_U64("--seed", "S", o.seed, 0, 9e15, "seed of the initial weights and the data order"),
    OPT_INT("--max-iters", "N", o.max_iters, 0, INT_MAX, "stop after N iterations in total", .def = "none"),
    OPT_GROUP("synchronization:"),
    OPT_CALL("--sync", "bsp|dssync|ps|localsgd|partial", o.sync, shoal_sync_kind_t, parse_sync, "the strategy",
             .show = show_sync),
    OPT_CALL("--bucket-kb", "K", o.bucket_bytes, size_t, parse_bucket_kb, "bsp: gradient bucket in KiB (0: one per layer)",
             .show = show_bucket_kb, .expect = "a number in [0, 4194304]", .when = W(M_BSP)),
    OPT_FLAG_SET("--no-overlap", o.overlap, 0, "bsp: reduce after backward, not during it", .when = W(M_BSP)),
    OPT_CALL("--ds-pattern", "random|butterfly|topo|fixed", o.ds_pattern, shoal_ds_pattern_t, parse_pattern,
             "dssync: the groups", .show = show_pattern, .when = W(M_DSSYNC)),
    OPT_INT("--ds-k", "K", o.ds_k, 2, 1 << 20, "dssync: group size (random), largest radix (butterfly)", .when = W(M_DSSYNC)),
    OPT_INT("--ds-global-every", "P", o.ds_global_every, 0, 1e9, "dssync: a global average every P iterations",
            .def = "0: off", .when = W(M_DSSYNC)),
    OPT_INT("--bridge-period", "H", o.ds_bridge_period, 0, 1e6, "dssync topo: bridge period (0: ceil(log_k m) + 1)",
            .when = W(M_DSSYNC) | W(M_TOPO)),
    OPT_INT("--bridge-width", "B", o.ds_bridge_width, 0, 1e6, "dssync topo: bridge width (0: 1)",
            .when = W(M_DSSYNC) | W(M_TOPO)),
    OPT_STRING("--racks", "0,0,1,1", o.racks, "dssync topo: rack of each worker", .def = "by host name",
               .expect = "the rack of each worker, separated by commas", .when = W(M_DSSYNC) | W(M_TOPO)),
    OPT_FLAG("--ds-overlap", o.ds_overlap, "dssync: average the step's starting parameters while computing it",
             .when = W(M_DSSYNC)),
    OPT_INT("--consensus-every", "N", o.consensus_every, 0, 1e9, "log the consensus distance every N iterations",
            .def = "0: off", .when = W(M_NOT_BSP)),
    OPT_INT("--servers", "S", o.servers, 1, 4096, "ps: servers (the last S ranks)", .when = W(M_PS)),
    OPT_CALL("--ps-mode", "sync|async|ssp", o.ps_mode, shoal_ps_mode_t, parse_ps_mode, "ps: consistency",
             .show = show_ps_mode, .when = W(M_PS)),
    OPT_INT("--staleness", "s", o.staleness, 0, 1e6, "ps ssp: the bound", .when = W(M_PS) | W(M_SSP)),
    OPT_DOUBLE("--slow-worker-ms", "MS", o.ps_slow_worker_ms, 0, 1e5, "ps, testing: worker 0 sleeps MS per iteration",
               .when = W(M_PS)),
    OPT_INT("--local-h", "H", o.local_h, 1, 1e9, "localsgd: iterations between averages", .when = W(M_LOCALSGD)),
    OPT_TEXT("  partial: gradients of the workers ready in rank 0's window, the others relay (ahead=2 here)"),
    OPT_STRING("--sync-config", "'k=v ...'", o.sync_config,
               "more settings of the strategy (include/shoal/sync.h), e.g. 'window=faithful carry=2' for partial",
               .expect = "key=value settings"),
    OPT_STRING("--straggle", "SPEC", o.straggle,
               "inject stragglers: slow:RANK:X (worker RANK's compute x (1+X)), jitter:SIGMA (lognormal),\n"
               "spike:P:X (every worker x X with probability P), spike1:P:LO[:HI] (in a share P of the steps\n"
               "one random worker x U[LO,HI]), comma list; delay = (factor - 1) x measured compute",
               .expect = "slow:RANK:X, jitter:SIGMA, spike:P:X or spike1:P:LO[:HI]"),
    OPT_DOUBLE("--compute-ms", "MS", o.compute_ms, 0, 1e6,
               "emulated accelerator: every step computes MS longer, sleeping (the CPU stays free)", .def = "0"),
    OPT_GROUP("output:"),
    OPT_STRING("--csv", "FILE", o.csv_path, "per-epoch log (rank 0)", .expect = "a file"),
    OPT_STRING("--label", "NAME", o.label, "the run's name in the CSV (for plots)"),
    OPT_STRING("--checkpoint", "FILE", o.ckpt_path, "checkpoint at the end of every epoch", .expect = "a file"),
    OPT_INT("--checkpoint-every", "N", o.ckpt_every, 0, INT_MAX, "also checkpoint every N iterations",
            .def = "at epoch ends only", .when = W(M_CKPT)),
    OPT_STRING("--resume", "FILE", o.resume_path, "start from this checkpoint", .expect = "a file"),
    OPT_STRING("--params-out", "FILE", o.params_out, "the final parameters (raw float32)", .expect = "a file"),
    OPT_STRING("--iter-log", "FILE", o.iter_log, "per-iteration log of every worker (FILE, FILE.rank1, ...)",
               .expect = "a file"),
    OPT_FLAG("--quiet", o.quiet, "no per-epoch lines"),
    OPT_INT("--threads", "N", o.blas_threads, 1, 256, "OpenBLAS threads per rank"),
    OPT_GROUP("preemption (bsp, ps; for schedulers such as `shoal sched serve`):"),
    OPT_FLAG("--preemptible", preemptible,
             "on SIGUSR1 or SIGTERM every worker stops after the same iteration, rank 0 writes\n"
             "--checkpoint FILE (ps: every worker and server its own FILE.*), and the run exits " SHOAL_LIVE_EXIT_REQUEUE_STR "\n"
             "(\"checkpointed, requeue me\"); a run starts from FILE when it exists, at any worker count\n"
             "(ps: the same workers and servers). %j in FILE is replaced by $SLURM_JOB_ID.\n"
             "A signal while the data is read or the ranks join exits " SHOAL_LIVE_EXIT_REQUEUE_STR " at once (nothing trained yet)"),
    OPT_GROUP("failures (bsp):"),
    OPT_ENUM("--on-failure", "abort|shrink", o.on_failure_shrink, "abort|shrink",
             "when a rank is lost: fail, or go on with the others from the newest state\n"
             "(run under `shoal launch --on-failure continue|restart`)"),
    OPT_INT("--grow-every", "N", o.grow_every, 0, INT_MAX, "with shrink: admit restarted ranks every N iterations (0: never)",
            .when = W(M_BSP) | W(M_SHRINK)),
    OPT_FLAG("--leavable", leavable, "with shrink: on SIGUSR2 this rank leaves the job after its current iteration (its\n"
             "server is reclaimed); the others shrink and go on without restarting"),
    OPT_GROUP("goodput (bsp):"),
    OPT_INT("--gns-every", "N", o.gns_every, 0, INT_MAX, "estimate the gradient noise scale every N iterations (one more\n"
            "forward and backward pass over half of the batch then), printed per epoch and in the CSV's gns column",
            .def = "0: off"),
    OPT_DOUBLE("--target-acc", "P", o.target_acc, 0, 100,
               "stop after the first epoch whose test accuracy reaches P percent", .def = "train all epochs"),
    OPT_GROUP("plots (instead of training):"),
    OPT_STRING("--plot", "OUT.svg", plot, "draw test accuracy against time of the runs' CSV files (shoal train --plot\n"
               "OUT.svg [--title T] RUN.csv...)", .when = W(M_PLOT)),
    OPT_STRING("--title", "T", title, "the plot's title", .when = W(M_PLOT)),
    OPT_END,
};

static const shoal_opts_spec_t train_spec = {
    .name = "shoal train",
    .usage = "usage: shoal train [options]            (run under `shoal launch -n N` for N ranks)\n"
             "       shoal train --plot OUT.svg [--title T] RUN.csv...\n"
             "Data-parallel training on Fashion-MNIST (docs/training.md).\n",
    .opts = train_opts,
    .modes = train_modes,
    .col = 26,
};

typedef struct plot_cli {
  const char *out, *title;
} plot_cli_t;

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT plot_cli_t
static const shoal_opt_t plot_opts[] = {
    OPT_STRING("--plot", "OUT.svg", out, "the SVG file to write", .expect = "an SVG file"),
    OPT_STRING("--title", "T", title, "the plot's title"),
    OPT_END,
};

static const shoal_opts_spec_t plot_spec = {
    .name = "shoal train --plot",
    .usage = "usage: shoal train --plot OUT.svg [--title T] RUN.csv...\n"
             "Draw test accuracy against time for several runs (their --csv files).\n",
    .opts = plot_opts,
    .args = SHOAL_ARGS_WORDS,
};

static int plot_main(int argc, char **argv) {
  plot_cli_t p = {0};
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&plot_spec, argc, argv, &p, &res);
  if (st != SHOAL_OPTS_GO) return st;
  int n = res.nwords;
  int rc = p.out && n ? shoal_train_plot_svg(p.out, (const char **)res.words, n, p.title) : -1;
  if (rc) fprintf(stderr, "shoal train --plot: %s\n", p.out && n ? shoal_last_error() : "needs OUT.svg and CSV files");
  else printf("wrote %s (%d runs)\n", p.out, n);
  return rc ? 1 : 0;
}

/* A --sync-config key replaces the value an option gives the strategy: both at once is an error. */
static int check_sync_config(const shoal_train_opts_t *o, const shoal_opts_res_t *res) {
  static const struct {
    const char *opt;
    int sync;
    const char *key;
  } same[] = {
      {"--no-overlap", SHOAL_SYNC_BSP, "overlap"},        {"--ds-pattern", SHOAL_SYNC_DSSYNC, "pattern"},
      {"--ds-k", SHOAL_SYNC_DSSYNC, "k"},                 {"--ds-global-every", SHOAL_SYNC_DSSYNC, "global_every"},
      {"--ds-overlap", SHOAL_SYNC_DSSYNC, "overlap"},     {"--bridge-period", SHOAL_SYNC_DSSYNC, "h"},
      {"--bridge-width", SHOAL_SYNC_DSSYNC, "b"},         {"--racks", SHOAL_SYNC_DSSYNC, "racks"},
      {"--local-h", SHOAL_SYNC_LOCALSGD, "period"},       {"--ps-mode", SHOAL_SYNC_PS, "mode"},
      {"--staleness", SHOAL_SYNC_PS, "staleness"},        {"--slow-worker-ms", SHOAL_SYNC_PS, "slow_ms"},
      {"--momentum", SHOAL_SYNC_PS, "momentum"},          {"--wd", SHOAL_SYNC_PS, "wd"},
  };
  for (size_t k = 0; k < sizeof same / sizeof same[0]; k++)
    if (shoal_opts_given(res, same[k].opt) && (int)o->sync == same[k].sync &&
        shoal__sync_config_has(o->sync_config, same[k].key)) {
      fprintf(stderr, "shoal train: %s and --sync-config %s=... both set %s's %s: give one of them\n", same[k].opt,
              same[k].key, shoal_sync_kind_name(o->sync), same[k].key);
      return -1;
    }
  return 0;
}

static volatile int stop_requested, leave_requested;
static void on_leave_signal(int sig) {
  (void)sig;
  leave_requested = 1;
}
/* 1 while a --preemptible run reads its data and joins the others: nothing has been trained since the
 * checkpoint it resumed from (or since the start), so a stop request ends the process at once with the
 * requeue status instead of waiting for the first iteration (reading Fashion-MNIST takes seconds on a
 * slow node, longer than a scheduler's grace) */
static volatile sig_atomic_t in_setup;
static void on_stop_signal(int sig) {
  (void)sig;
  if (in_setup) _exit(SHOAL_LIVE_EXIT_REQUEUE);
  stop_requested = 1;
}

/* FILE with %j replaced by $SLURM_JOB_ID (the same path in every run of a requeued job) */
static const char *expand_job_id(const char *path, char *buf, size_t cap) {
  const char *p = strstr(path, "%j");
  if (!p) return path;
  const char *id = getenv("SLURM_JOB_ID");
  snprintf(buf, cap, "%.*s%s%s", (int)(p - path), path, id && *id ? id : "nojob", p + 2);
  return buf;
}

/* --preemptible: stop handlers (a signal while the data is read or the ranks join ends the run at once,
 * in_setup; one after that asks for a stop after the current iteration), the checkpoint to stop at and
 * resume from. 0, or 2 after an error. */
static int setup_preemption(shoal_train_opts_t *o) {
  in_setup = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (o->sync != SHOAL_SYNC_BSP && o->sync != SHOAL_SYNC_PS) {
    fprintf(stderr, "shoal train: --preemptible: bsp and ps only (this run is --sync %s)\n",
            shoal_sync_kind_name(o->sync));
    return 2;
  }
  if (!o->ckpt_path) {
    fprintf(stderr, "shoal train: --preemptible needs --checkpoint FILE (where the run stops and resumes)\n");
    return 2;
  }
  o->stop_flag = &stop_requested;
  o->elastic = o->sync == SHOAL_SYNC_BSP; /* bsp resumes at any worker count; ps at its own (the servers' state) */
  if (!o->resume_path && access(o->ckpt_path, F_OK) == 0) o->resume_path = o->ckpt_path;
  return 0;
}

/* The world this process is a rank of (none without a launcher), the data read first where a stop request
 * or the others must not wait for it. SHOAL_OPTS_GO, or the exit status. */
static int join_world(shoal_train_opts_t *o, int preemptible, shoal_comm_t **world, shoal_dataset_t **pre_train,
                      shoal_dataset_t **pre_test) {
  /* a rank of a world when the library sees any rank or size variable (it refuses an incomplete pair) */
  int launched = shoal__boot_world_given(), join = 0;
  if (shoal__config_bool("SHOAL_JOIN", 0, &join)) {
    fprintf(stderr, "shoal train: %s\n", shoal_last_error());
    return 2;
  }
  int joining = join && launched;
  if (joining || preemptible) {
    /* a restarted rank: read the data before entering, so that the others do not wait for it; a
     * preemptible run: read it while a stop request can still end the process at once */
    const char *dir = o->data_dir ? o->data_dir : SHOAL_FASHION_MNIST_DIR;
    if (shoal_dataset_load_dir(dir, "train", o->nclass, pre_train) ||
        shoal_dataset_load_dir(dir, "t10k", o->nclass, pre_test)) {
      fprintf(stderr, "shoal train: %s\n", shoal_last_error());
      return 1;
    }
    o->train_data = *pre_train;
    o->test_data = *pre_test;
  }
  if (launched) {
    int rc = shoal_comm_init_env(world);
    if (rc == SHOAL_ERR_NOT_FOUND && joining) {
      /* a restarted rank that came too late: the others finished the training without it */
      fprintf(stderr, "shoal train: %s\n", shoal_last_error());
      return 0;
    }
    if (rc) {
      fprintf(stderr, "shoal train: joining the ranks failed: %s\n", shoal_last_error());
      return 1;
    }
  }
  return SHOAL_OPTS_GO;
}

int shoal_cmd_train(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--plot") || !strncmp(argv[i], "--plot=", 7)) return plot_main(argc, argv);
  train_cli_t c = {0};
  shoal_train_opts_init(&c.o);
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&train_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  shoal_train_opts_t *o = &c.o;
  if (check_sync_config(o, &res)) return 2;
  o->target_acc /= 100; /* given in percent, as the epoch lines print it */
  char ckbuf[4096];
  if (o->ckpt_path) o->ckpt_path = expand_job_id(o->ckpt_path, ckbuf, sizeof ckbuf);
  if (c.preemptible && setup_preemption(o)) return 2;
  if (c.leavable) {
    if (!o->on_failure_shrink) {
      fprintf(stderr, "shoal train: --leavable needs --on-failure shrink (the others go on without a rank that leaves)\n");
      return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_leave_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    o->leave_flag = &leave_requested;
  }
  shoal_comm_t *world = NULL;
  shoal_dataset_t *pre_train = NULL, *pre_test = NULL;
  if ((st = join_world(o, c.preemptible, &world, &pre_train, &pre_test)) != SHOAL_OPTS_GO) {
    shoal_dataset_destroy(pre_train);
    shoal_dataset_destroy(pre_test);
    return st;
  }
  shoal_train_result_t res_run;
  in_setup = 0;
  int rc = shoal_train_run(o, world, &res_run);
  int rank = world ? shoal_comm_rank(world) : 0;
  if (rc) fprintf(stderr, "shoal train: rank %d: %s\n", rank, shoal_last_error());
  else if (res_run.is_server && o->ps_mode != SHOAL_PS_SYNC && !o->quiet)
    printf("server rank %d: largest staleness applied %d\n", rank, res_run.max_staleness);
  if (world) shoal_comm_destroy(world);
  shoal_dataset_destroy(pre_train);
  shoal_dataset_destroy(pre_test);
  return rc ? 1 : res_run.stopped ? SHOAL_LIVE_EXIT_REQUEUE : 0;
}
