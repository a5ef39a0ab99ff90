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
#include "shoal/comm.h"
#include "live.h"
#include "shoal/train.h"
#include "train/sync.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal train [options]            (run under `shoal launch -n N` for N ranks)\n"
          "       shoal train --plot OUT.svg [--title T] RUN.csv...\n\n"
          "model and data:\n"
          "  --model softmax|mlp|cnn   (mlp: 784-512-256-10 ReLU)            [mlp]\n"
          "  --data DIR                IDX files (train-/t10k-*-ubyte[.gz])  [" SHOAL_FASHION_MNIST_DIR "]\n"
          "  --classes N               classes of the data set; a label >= N is an error  [10]\n"
          "  --train-subset N, --test-subset N   use the first N images      [all]\n"
          "optimizer (lr is for the global batch):\n"
          "  --epochs N [10]  --batch B per worker [64]  --lr X [0.05]  --momentum X [0.9]  --wd X [5e-4]\n"
          "  --warmup ITERS [0]  --decay-epochs E1,E2,... [none]  --decay-gamma X [0.1]  --seed S [1]\n"
          "            (lr *= gamma once E epochs are done: from the epoch printed as E+1 on; at most 8)\n"
          "  --max-iters N         stop after N iterations in total\n"
          "synchronization:\n"
          "  --sync bsp|dssync|ps|localsgd|partial                           [bsp]\n"
          "  bsp:      --bucket-kb K [256] (0: one bucket per layer)  --no-overlap\n"
          "  dssync:   --ds-pattern random|butterfly|topo|fixed [butterfly]  --ds-k K [2]\n"
          "            --ds-global-every P [0: off]  --bridge-period H  --bridge-width B\n"
          "            --racks 0,0,1,1 (rack of each worker; default: by host name)\n"
          "            --ds-overlap   average the step's starting parameters while computing it\n"
          "            --consensus-every N   log the consensus distance every N iterations\n"
          "  ps:       --servers S [1] (the last S ranks)  --ps-mode sync|async|ssp [sync]  --staleness s [2]\n"
          "            --slow-worker-ms MS   testing: worker 0 sleeps MS per iteration [0]\n"
          "  localsgd: --local-h H [8]\n"
          "  partial:  gradients of the workers ready in rank 0's window, the others relay (ahead=2 here)\n"
          "  --sync-config 'k=v ...'  more settings of the strategy (include/shoal/sync.h), e.g.\n"
          "            'window=faithful carry=2' for partial\n"
          "  --straggle SPEC  inject stragglers: slow:RANK:X (worker RANK's compute x (1+X)), jitter:SIGMA (lognormal),\n"
          "            spike:P:X (x X with probability P), comma list; delay = (factor - 1) x measured compute\n"
          "output:\n"
          "  --csv FILE  --label NAME  --checkpoint FILE  --resume FILE  --params-out FILE  --quiet\n"
          "  --checkpoint-every N   also checkpoint every N iterations (default: at epoch ends only)\n"
          "preemption (bsp; for schedulers such as `shoal sched serve`):\n"
          "  --preemptible   on SIGUSR1 or SIGTERM every rank stops after the same iteration, rank 0 writes\n"
          "                  --checkpoint FILE, and the run exits " SHOAL_EXIT_REQUEUE_STR " (\"checkpointed, requeue me\");\n"
          "                  a run starts from FILE when it exists, at any worker count. %%j in FILE is\n"
          "                  replaced by $SLURM_JOB_ID. A signal while the data is read or the ranks join\n"
          "                  exits " SHOAL_EXIT_REQUEUE_STR " at once (nothing trained yet)\n"
          "  --iter-log FILE   per-iteration log of every worker (FILE, FILE.rank1, ...)\n"
          "  --threads N   OpenBLAS threads per rank [1]\n"
          "failures (bsp):\n"
          "  --on-failure abort|shrink   when a rank is lost: fail [abort], or go on with the others from the\n"
          "                              newest state (run under `shoal launch --on-failure continue|restart`)\n"
          "  --grow-every N   with shrink: admit restarted ranks every N iterations [10] (0: never)\n"
          "  --leavable       with shrink: on SIGUSR2 this rank leaves the job after its current iteration (its\n"
          "                   server is reclaimed); the others shrink and go on without restarting\n"
          "goodput (bsp):\n"
          "  --gns-every N    estimate the gradient noise scale every N iterations (one more forward and backward\n"
          "                   pass over half of the batch then), printed per epoch and in the CSV's gns column\n"
          "  --target-acc P   stop after the first epoch whose test accuracy reaches P percent  [train all epochs]\n");
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out) {
  if (!v) {
    fprintf(stderr, "shoal train: %s needs a value\n", opt);
    return -1;
  }
  if (shoal__parse_double(opt, v, lo, hi, out)) {
    fprintf(stderr, "shoal train: %s\n", shoal_last_error());
    return -1;
  }
  return 0;
}

static int plot_main(int argc, char **argv) {
  const char *title = NULL, *out = NULL;
  const char **csv = calloc((size_t)argc, sizeof *csv);
  int n = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plot") && i + 1 < argc)
      out = argv[++i];
    else if (!strcmp(argv[i], "--title") && i + 1 < argc)
      title = argv[++i];
    else
      csv[n++] = argv[i];
  }
  int rc = out && n ? shoal_train_plot_svg(out, csv, n, title) : -1;
  if (rc) fprintf(stderr, "shoal train --plot: %s\n", out && n ? shoal_last_error() : "needs OUT.svg and CSV files");
  else printf("wrote %s (%d runs)\n", out, n);
  free(csv);
  return rc ? 1 : 0;
}

/* Options that belong to one strategy (or pattern, or mode) are errors with
 * another one rather than silently ignored. */
static int check_applies(const shoal_train_opts_t *o, const char **given, int n) {
  static const struct {
    const char *opt;
    int sync;       /* shoal_sync_kind_t, or -1: every strategy but bsp */
    int sub;        /* dssync: pattern, ps: mode (-1: any) */
  } only[] = {
      {"--bucket-kb", SHOAL_SYNC_BSP, -1},           {"--no-overlap", SHOAL_SYNC_BSP, -1},
      {"--ds-overlap", SHOAL_SYNC_DSSYNC, -1},       {"--ds-pattern", SHOAL_SYNC_DSSYNC, -1},
      {"--ds-k", SHOAL_SYNC_DSSYNC, -1},             {"--ds-global-every", SHOAL_SYNC_DSSYNC, -1},
      {"--bridge-period", SHOAL_SYNC_DSSYNC, SHOAL_DS_TOPO}, {"--bridge-width", SHOAL_SYNC_DSSYNC, SHOAL_DS_TOPO},
      {"--racks", SHOAL_SYNC_DSSYNC, SHOAL_DS_TOPO}, {"--servers", SHOAL_SYNC_PS, -1},
      {"--ps-mode", SHOAL_SYNC_PS, -1},              {"--staleness", SHOAL_SYNC_PS, SHOAL_PS_SSP},
      {"--slow-worker-ms", SHOAL_SYNC_PS, -1},       {"--local-h", SHOAL_SYNC_LOCALSGD, -1},
      {"--consensus-every", -1, -1},                 {"--grow-every", SHOAL_SYNC_BSP, -1},
  };
  for (int i = 0; i < n; i++)
    for (size_t k = 0; k < sizeof only / sizeof only[0]; k++) {
      if (strcmp(given[i], only[k].opt)) continue;
      if (only[k].sync < 0 ? o->sync == SHOAL_SYNC_BSP : (int)o->sync != only[k].sync) {
        fprintf(stderr, "shoal train: %s does not apply to --sync %s (it is a setting of %s)\n", only[k].opt,
                shoal_sync_kind_name(o->sync),
                only[k].sync < 0 ? "dssync, ps and localsgd" : shoal_sync_kind_name((shoal_sync_kind_t)only[k].sync));
        return -1;
      }
      if (only[k].sub >= 0 && o->sync == SHOAL_SYNC_DSSYNC && (int)o->ds_pattern != only[k].sub) {
        fprintf(stderr, "shoal train: %s applies to --ds-pattern topo only (this run: --ds-pattern %s)\n",
                only[k].opt, shoal_ds_pattern_name(o->ds_pattern));
        return -1;
      }
      if (only[k].sub >= 0 && o->sync == SHOAL_SYNC_PS && (int)o->ps_mode != only[k].sub) {
        fprintf(stderr, "shoal train: %s applies to --ps-mode ssp only (this run: --ps-mode %s)\n", only[k].opt,
                shoal_ps_mode_name(o->ps_mode));
        return -1;
      }
    }
  return 0;
}

/* A --sync-config key replaces the value an option gives the strategy; both at once is an error, as is
 * an option that only matters with another one. */
static int check_combinations(const shoal_train_opts_t *o, const char **given, int n) {
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
  /* options that only matter with another one */
  const struct {
    const char *opt;
    int ok;
    const char *why;
  } needs[] = {
      {"--grow-every", o->on_failure_shrink, "applies with --on-failure shrink only (restarted ranks enter a run that shrank)"},
      {"--checkpoint-every", o->ckpt_path != NULL, "needs --checkpoint FILE (where the checkpoints go)"},
      {"--decay-gamma", o->decay_epochs[0] > 0, "needs --decay-epochs E1,E2,... (when the lr decays)"},
  };
  for (int i = 0; i < n; i++) {
    for (size_t k = 0; k < sizeof needs / sizeof needs[0]; k++)
      if (!strcmp(given[i], needs[k].opt) && !needs[k].ok) {
        fprintf(stderr, "shoal train: %s %s\n", needs[k].opt, needs[k].why);
        return -1;
      }
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++)
      if (!strcmp(given[i], same[k].opt) && (int)o->sync == same[k].sync && shoal__sync_config_has(o->sync_config, same[k].key)) {
        fprintf(stderr, "shoal train: %s and --sync-config %s=... both set %s's %s: give one of them\n", same[k].opt,
                same[k].key, shoal_sync_kind_name(o->sync), same[k].key);
        return -1;
      }
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
  if (in_setup) _exit(SHOAL_EXIT_REQUEUE);
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

int shoal_cmd_train(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plot")) return plot_main(argc, argv);
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
  }
  shoal_train_opts_t o;
  shoal_train_opts_init(&o);
  const char **given = calloc((size_t)argc, sizeof *given); /* options seen, for the checks below */
  int ngiven = 0, preemptible = 0, leavable = 0;
  char ckbuf[4096];
  if (!given) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    double d;
    given[ngiven++] = a;
#define NUM(name, lo, hi, dst)                                  \
  if (!strcmp(a, name)) {                                       \
    if (parse_num(a, v, lo, hi, &d)) goto bad;                  \
    dst = d;                                                    \
    i++;                                                        \
    continue;                                                   \
  }
#define NUMI(name, lo, hi, dst)                                 \
  if (!strcmp(a, name)) {                                       \
    if (parse_num(a, v, lo, hi, &d)) goto bad;                  \
    if (d != floor(d)) {                                        \
      fprintf(stderr, "shoal train: %s %s: expected an integer\n", a, v); \
      goto bad;                                                 \
    }                                                           \
    dst = d;                                                    \
    i++;                                                        \
    continue;                                                   \
  }
#define STR(name, dst)                                          \
  if (!strcmp(a, name)) {                                       \
    if (!v) {                                                   \
      fprintf(stderr, "shoal train: %s needs a value\n", a);    \
      goto bad;                                                 \
    }                                                           \
    dst = v;                                                    \
    i++;                                                        \
    continue;                                                   \
  }
    NUMI("--epochs", 1, 100000, o.epochs)
    NUMI("--batch", 1, 65536, o.batch)
    NUM("--lr", 1e-9, 100, o.lr)
    NUM("--momentum", 0, 0.999999, o.momentum)
    NUM("--wd", 0, 0.999999, o.weight_decay)
    NUMI("--warmup", 0, 1e9, o.warmup_iters)
    NUM("--decay-gamma", 0, 1, o.decay_gamma)
    NUMI("--seed", 0, 9e15, o.seed)
    NUMI("--max-iters", 0, INT_MAX, o.max_iters)
    NUMI("--classes", 2, 256, o.nclass)
    NUMI("--train-subset", 0, 1e12, o.train_subset)
    NUMI("--test-subset", 0, 1e12, o.test_subset)
    NUMI("--ds-k", 2, 1 << 20, o.ds_k)
    NUMI("--ds-global-every", 0, 1e9, o.ds_global_every)
    NUMI("--bridge-period", 0, 1e6, o.ds_bridge_period)
    NUMI("--bridge-width", 0, 1e6, o.ds_bridge_width)
    NUMI("--consensus-every", 0, 1e9, o.consensus_every)
    NUMI("--servers", 1, 4096, o.servers)
    NUMI("--staleness", 0, 1e6, o.staleness)
    NUM("--slow-worker-ms", 0, 1e5, o.ps_slow_worker_ms)
    NUMI("--local-h", 1, 1e9, o.local_h)
    NUMI("--threads", 1, 256, o.blas_threads)
    NUMI("--grow-every", 0, INT_MAX, o.grow_every)
    NUMI("--gns-every", 0, INT_MAX, o.gns_every)
    NUM("--target-acc", 0, 100, o.target_acc)
    STR("--data", o.data_dir)
    STR("--racks", o.racks)
    STR("--csv", o.csv_path)
    STR("--iter-log", o.iter_log)
    STR("--label", o.label)
    STR("--checkpoint", o.ckpt_path)
    NUMI("--checkpoint-every", 0, INT_MAX, o.ckpt_every)
    STR("--resume", o.resume_path)
    STR("--params-out", o.params_out)
    STR("--sync-config", o.sync_config)
    STR("--straggle", o.straggle)
#undef NUM
#undef NUMI
#undef STR
    if (!strcmp(a, "--bucket-kb")) {
      if (parse_num(a, v, 0, 1 << 22, &d)) goto bad;
      o.bucket_bytes = (size_t)(d * 1024);
      i++;
    } else if (!strcmp(a, "--ds-overlap")) {
      o.ds_overlap = 1;
    } else if (!strcmp(a, "--no-overlap")) {
      o.overlap = 0;
    } else if (!strcmp(a, "--preemptible")) {
      preemptible = 1;
    } else if (!strcmp(a, "--leavable")) {
      leavable = 1;
    } else if (!strcmp(a, "--on-failure")) {
      if (!v || (strcmp(v, "abort") && strcmp(v, "shrink"))) {
        fprintf(stderr, "shoal train: --on-failure %s: expected abort or shrink\n", v ? v : "(missing)");
        goto bad;
      }
      o.on_failure_shrink = !strcmp(v, "shrink");
      i++;
    } else if (!strcmp(a, "--quiet")) {
      o.quiet = 1;
    } else if (!strcmp(a, "--decay-epochs") && v) {
      char *s = (char *)v, *end;
      for (int k = 0; *s; k++) {
        if (k == 8) {
          fprintf(stderr, "shoal train: --decay-epochs '%s': at most 8 epochs\n", v);
          goto bad;
        }
        long e = strtol(s, &end, 10);
        if (end == s || e < 1 || (*end && *end != ',')) {
          fprintf(stderr, "shoal train: --decay-epochs '%s': expected a comma list of epochs >= 1\n", v);
          goto bad;
        }
        o.decay_epochs[k] = (int)e;
        s = *end ? end + 1 : end;
      }
      i++;
    } else if ((!strcmp(a, "--model") || !strcmp(a, "--sync") || !strcmp(a, "--ds-pattern") ||
                !strcmp(a, "--ps-mode")) && v) {
      int rc = !strcmp(a, "--model")        ? shoal_model_kind_parse(v, &o.model)
               : !strcmp(a, "--sync")       ? shoal_sync_kind_parse(v, &o.sync)
               : !strcmp(a, "--ds-pattern") ? shoal_ds_pattern_parse(v, &o.ds_pattern)
                                            : shoal_ps_mode_parse(v, &o.ps_mode);
      if (rc) {
        fprintf(stderr, "shoal train: %s\n", shoal_last_error());
        goto bad;
      }
      i++;
    } else {
      fprintf(stderr, "shoal train: unknown option '%s' (see shoal train --help)\n", a);
      goto bad;
    }
  }
  if (check_applies(&o, given, ngiven) || check_combinations(&o, given, ngiven)) goto bad;
  o.target_acc /= 100; /* given in percent, as the epoch lines print it */
  free(given);
  given = NULL;
  if (o.ckpt_path) o.ckpt_path = expand_job_id(o.ckpt_path, ckbuf, sizeof ckbuf);
  if (preemptible) {
    /* handlers first: a signal while the data is read or the ranks join ends the run at once (in_setup);
     * one after that asks for a stop after the first iteration */
    in_setup = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (o.sync != SHOAL_SYNC_BSP) {
      fprintf(stderr, "shoal train: --preemptible: bsp only (this run is --sync %s)\n", shoal_sync_kind_name(o.sync));
      return 2;
    }
    if (!o.ckpt_path) {
      fprintf(stderr, "shoal train: --preemptible needs --checkpoint FILE (where the run stops and resumes)\n");
      return 2;
    }
    o.stop_flag = &stop_requested;
    o.elastic = 1;
    if (!o.resume_path && access(o.ckpt_path, F_OK) == 0) o.resume_path = o.ckpt_path;
  }
  if (leavable) {
    if (!o.on_failure_shrink) {
      fprintf(stderr, "shoal train: --leavable needs --on-failure shrink (the others go on without a rank that leaves)\n");
      return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_leave_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    o.leave_flag = &leave_requested;
  }
  shoal_comm_t *world = NULL;
  shoal_dataset_t *pre_train = NULL, *pre_test = NULL;
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
    const char *dir = o.data_dir ? o.data_dir : SHOAL_FASHION_MNIST_DIR;
    if (shoal_dataset_load_dir(dir, "train", o.nclass, &pre_train) ||
        shoal_dataset_load_dir(dir, "t10k", o.nclass, &pre_test)) {
      fprintf(stderr, "shoal train: %s\n", shoal_last_error());
      shoal_dataset_destroy(pre_train);
      return 1;
    }
    o.train_data = pre_train;
    o.test_data = pre_test;
  }
  if (launched) {
    int rc = shoal_comm_init_env(&world);
    if (rc == SHOAL_ERR_NOT_FOUND && joining) {
      /* a restarted rank that came too late: the others finished the training without it */
      fprintf(stderr, "shoal train: %s\n", shoal_last_error());
      shoal_dataset_destroy(pre_train);
      shoal_dataset_destroy(pre_test);
      return 0;
    }
    if (rc) {
      fprintf(stderr, "shoal train: joining the ranks failed: %s\n", shoal_last_error());
      return 1;
    }
  }
  shoal_train_result_t res;
  in_setup = 0;
  int rc = shoal_train_run(&o, world, &res);
  int rank = world ? shoal_comm_rank(world) : 0;
  if (rc) fprintf(stderr, "shoal train: rank %d: %s\n", rank, shoal_last_error());
  else if (res.is_server && o.ps_mode != SHOAL_PS_SYNC && !o.quiet)
    printf("server rank %d: largest staleness applied %d\n", rank, res.max_staleness);
  if (world) shoal_comm_destroy(world);
  shoal_dataset_destroy(pre_train);
  shoal_dataset_destroy(pre_test);
  return rc ? 1 : res.stopped ? SHOAL_EXIT_REQUEUE : 0;
bad:
  free(given);
  return 2;
}
