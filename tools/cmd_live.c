/* The live controller's commands (docs/live.md); the controller itself is the
 * library's (src/live/live.h):
 *   shoal submit        a job for the controller: held, its shoal parameters in its comment
 *   shoal sched serve   the controller beside Slurm
 *   shoal sched status  what a running controller does and why each job waits */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "live/board.h"
#include "live/http_get.h"
#include "live/live.h"
#include "live/manager_slurm.h"
#include "live/params.h"
#include "live/replay.h"
#include "options.h"
#include "testbed/testbed.h"

/* Slurm's commands of testbed `tb` (NULL: the host's own Slurm) */
static int enter_testbed(const char *cmd, const char *tb) {
  if (!tb) return 0;
  char err[512];
  if (shoal__tb_slurm_enter(tb, err, sizeof err)) return fprintf(stderr, "%s: --testbed %s: %s\n", cmd, tb, err), -1;
  return 0;
}

/* ---- shoal submit ---- */

typedef struct submit_cli {
  const char *tb, *name, *model, *output, *partition, *account;
  long gpus, minw, maxw, servers;
  double work;
  int leavable;
} submit_cli_t;

#define SHOAL_OPTS_STRUCT submit_cli_t
static const shoal_opt_t submit_opts[] = {
    OPT_STRING("--testbed", "NAME", tb, "the Slurm of `shoal testbed up --slurm` NAME", .expect = "a testbed name"),
    OPT_LONG("--gpus", "N", gpus, 1, SHOAL_LIVE_WORKERS_MAX, "GPUs (workers) the job asks for"),
    OPT_LONG("--min", "N", minw, 1, SHOAL_LIVE_WORKERS_MAX, "fewest workers the job runs with (elastic policies)",
             .def = "--gpus"),
    OPT_LONG("--max", "N", maxw, 1, SHOAL_LIVE_WORKERS_MAX, "most workers the job runs with (elastic policies)",
             .def = "--gpus"),
    OPT_LONG("--servers", "S", servers, 1, SHOAL_LIVE_WORKERS_MAX, "a parameter-server job with S servers (no GPU\n"
             "each; rigid: --min and --max are --gpus): the tasks are one per worker and per server, on the\n"
             "nodes the controller's plan gives them, SHOAL_PS_SERVERS=S in their environment", .def = "0: all-reduce"),
    OPT_STRING("--model", "NAME", model, "the job's model in the controller's speed model (analytic: resnet50,\n"
               "vgg16, bert-base, ... (shoal sim --help); its --throughputs table's: mlp, cnn for\n"
               "experiments/live-slurm/throughputs.json)", .def = "none: the speed model's first", .expect = "a model name"),
    OPT_DOUBLE("--work", "STEPS", work, 0, 1e15, "the job's length in worker-steps (0: unknown)", .def = "0"),
    OPT_FLAG("--leavable", leavable, "its tasks leave on request (USR2: shoal train --on-failure shrink --leavable):\n"
             "the controller shrinks it in place at an iteration boundary (a lent host reclaimed) instead of a\n"
             "checkpoint and restart; srun runs it with --no-kill and without --kill-on-bad-exit (all-reduce jobs)"),
    OPT_STRING("--partition", "NAME", partition, "Slurm partition (the controller's)", .def = "Slurm's default",
               .expect = "a partition"),
    OPT_STRING("--account", "NAME", account, "Slurm account to charge", .def = "the user's default", .expect = "an account"),
    OPT_STRING("--name", "NAME", name, "Slurm's job name"),
    OPT_STRING("--output", "FILE", output, "the job's output (appended)", .def = "Slurm's", .expect = "a file"),
    OPT_END,
};

static const shoal_opts_spec_t submit_spec = {
    .name = "shoal submit",
    .usage = "usage: shoal submit [--testbed NAME] [--partition P] [--gpus N] [--min N] [--max N] [--servers S]\n"
             "                    [--model NAME] [--work STEPS] [--leavable] [--account A] [--name NAME] [--output FILE]\n"
             "                    -- COMMAND [ARGS...]\n"
             "Submits COMMAND to Slurm held (sbatch --hold) with comment\n"
             "'shoal:gpus=N:min=..:max=..[:ps=S][:model=..][:work=..][:leave=1]'\n"
             "for `shoal sched serve` to place. The batch script runs `srun COMMAND` on every node of the\n"
             "allocation (one task per node, --gres gpu:<workers on that node>, SHOAL_MASTER_ADDR = the first node);\n"
             "a USR1 to the batch script asks for a checkpoint before a preemption or resize: the job exits\n"
             SHOAL_LIVE_EXIT_REQUEUE_STR " after checkpointing (requeue me); exit 0 means finished (shoal train --preemptible\n"
             "does both). A job that can never fit the partition (more workers than its nodes have GPUs) and a\n"
             "command not found on PATH are refused. Prints the Slurm job id.\n",
    .opts = submit_opts,
    .args = SHOAL_ARGS_AFTER_DDASH,
};

/* 1 if the command is an existing file, or a name found on PATH (what srun would run) */
static int on_path(const char *cmd) {
  if (strchr(cmd, '/')) return access(cmd, X_OK) == 0;
  const char *path = getenv("PATH");
  for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
    const char *e = strchr(p, ':');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    char f[4096];
    snprintf(f, sizeof f, "%.*s/%s", (int)l, p, cmd);
    struct stat st;
    if (l && stat(f, &st) == 0 && S_ISREG(st.st_mode) && access(f, X_OK) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* a job that can never fit its partition is refused now, not held forever */
static int fits(shoal_live_manager_t *m, const char *partition, long gpus) {
  shoal_live_nodes_t nodes = {0, NULL};
  if (m->ops->nodes(m->impl, &nodes)) return fprintf(stderr, "shoal submit: %s\n", shoal_last_error()), 0;
  long total = 0;
  int n = 0;
  for (int i = 0; i < nodes.n; i++)
    if (!partition || shoal__live_list_has(nodes.node[i].partitions, partition)) total += nodes.node[i].gpus, n++;
  shoal__live_nodes_free(&nodes);
  if (gpus <= total) return 1;
  fprintf(stderr, "shoal submit: --gpus %ld: %s%s%s has %ld GPUs on %d nodes: the job could never run\n", gpus,
          partition ? "partition " : "the cluster", partition ? partition : "", "", total, n);
  return 0;
}

int shoal_cmd_submit(int argc, char **argv) {
  submit_cli_t c = {.name = "shoal-job", .model = "", .gpus = 1};
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&submit_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  if (res.ncmd < 1) return fprintf(stderr, "shoal submit: no command (shoal submit --gpus 2 -- shoal train ...)\n"), 2;
  shoal_live_params_t p = {.gpus = (int)c.gpus, .min = (int)(c.minw ? c.minw : c.gpus),
                           .max = (int)(c.maxw ? c.maxw : c.gpus), .work = c.work, .ps = (int)c.servers,
                           .leave = c.leavable};
  char why[256], comment[256];
  snprintf(p.model, sizeof p.model, "%s", c.model);
  if (strlen(c.model) >= sizeof p.model || shoal__live_params_check(&p, why, sizeof why))
    return fprintf(stderr, "shoal submit: %s\n", strlen(c.model) >= sizeof p.model ? "--model: name too long" : why), 2;
  if (!on_path(res.cmd[0]))
    return fprintf(stderr, "shoal submit: '%s': command not found on PATH (the job would fail with exit 2 on every node; "
                   "give its path)\n", res.cmd[0]), 2;
  shoal__live_params_format(&p, comment, sizeof comment);
  shoal_live_manager_t m;
  if (enter_testbed("shoal submit", c.tb) || shoal__live_slurm_create(&m)) return 1;
  long id = 0;
  shoal_live_submit_t req = {.name = c.name, .partition = c.partition, .account = c.account, .comment = comment,
                             .output = c.output, .argv = (const char *const *)res.cmd, .argc = res.ncmd, .hold = 1};
  int rc = fits(&m, c.partition, c.gpus) ? m.ops->submit(m.impl, &req, &id) : 2;
  if (rc == 0) printf("%ld\n", id);
  else if (rc != 2) fprintf(stderr, "shoal submit: %s\n", shoal_last_error());
  shoal__live_manager_destroy(&m);
  return rc == 0 ? 0 : rc == 2 ? 2 : 1;
}

/* ---- shoal sched serve ---- */

typedef struct serve_cli {
  const char *tb, *policy, *journal, *log, *throughputs, *gpu, *partition, *accounts, *id, *metrics, *tenants;
  double tick, grace, max_time, restart_cost, lease, oversub, shares_every;
  long until, retries;
  int raw_spread, dry_run, recover;
  /* loaning */
  const char *loan_from, *loan_router, *loan_replica, *loan_predictor, *loan_autoscale;
  int loan_spare;
  double loan_service, loan_slo, loan_q, loan_hold, loan_every, loan_alpha, loan_z, loan_react_lo, loan_react_hi;
} serve_cli_t;

static int on_table(const void *c) { return ((const serve_cli_t *)c)->throughputs != NULL; }
static int on_loan(const void *c) { return ((const serve_cli_t *)c)->loan_from != NULL; }
static const shoal_opt_mode_t serve_modes[] = {{on_table, "applies with --throughputs only (the speed table)", NULL},
                                               {on_loan, "applies with --loan-from only (loaning)", NULL}};
#define LOAN .when = 2u

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT serve_cli_t
static const shoal_opt_t serve_opts[] = {
    OPT_STRING("--testbed", "NAME", tb, "the Slurm of `shoal testbed up --slurm` NAME (racks and oversubscription\n"
               "from it too)", .expect = "a testbed name"),
    OPT_STRING("--partition", "NAME", partition, "serve this partition: its nodes, its jobs (one controller per\n"
               "partition)", .def = "every node and job", .expect = "a partition"),
    OPT_STRING("--policy", "NAME[:k=v...]", policy, "a shoal policy with its parameters (shoal sim --help lists them)",
               .expect = "a policy name"),
    OPT_STRING("--journal", "FILE", journal, "what the controller decided, a checksummed record per line; a restarted\n"
               "controller reads it and adopts the running jobs", .expect = "a file"),
    OPT_FLAG("--recover", recover, "a damaged journal: keep its valid records, adopt the rest from Slurm\n"
             "(without it the controller refuses to start, naming the damage and the running jobs)"),
    OPT_FLAG("--dry-run", dry_run, "print the decisions against the real cluster; change nothing (no journal,\n"
             "claim or Slurm command)"),
    OPT_STRING("--accounts", "A,B", accounts, "only these Slurm accounts may submit to the controller", .def = "any",
               .expect = "account names"),
    OPT_CHOICE("--tenants", "KIND", tenants, "account|user|none", "the policies' tenants (DRF's), weighed by their Slurm\n"
               "fair shares: Slurm accounts, users, or one for all"),
    OPT_DOUBLE("--shares-every", "S", shares_every, 0, 1e7, "seconds between reads of the fair shares (0: at start only)"),
    OPT_STRING("--metrics", "ADDR:PORT", metrics, "serve /metrics (Prometheus) and /status over HTTP here", .def = "no",
               .expect = "ADDR:PORT"),
    OPT_STRING("--id", "NAME", id, "the controller's identity in claims and leases", .def = "from host and journal",
               .expect = "a name"),
    OPT_DOUBLE("--tick", "S", tick, 0, 1e7, "seconds between looks at Slurm (at least 0.05)"),
    OPT_DOUBLE("--grace", "S", grace, 0, 1e7,
               "seconds a preempted job has to checkpoint and exit (" SHOAL_LIVE_EXIT_REQUEUE_STR ") before it is killed"),
    OPT_DOUBLE("--restart-cost", "S", restart_cost, 0, 1e7, "what a preemption or resize costs a job (the policies weigh it)"),
    OPT_LONG("--retries", "N", retries, 0, 1000000, "requeues of a job that failed on its own before it is reported failed"),
    OPT_DOUBLE("--lease", "S", lease, 1, 1e6, "seconds the controller's lease is good for after each renewal (another\n"
               "controller may take over that long after this one died)"),
    OPT_DOUBLE("--oversub", "R", oversub, 1, 1e6, "rack uplink oversubscription for the speed model",
               .def = "the testbed's, else 1"),
    OPT_LONG("--until-done", "N", until, 0, 1000000, "exit once N shoal jobs ended", .def = "never"),
    OPT_DOUBLE("--max-time", "S", max_time, 0, 1e7, "exit (status 3) after S seconds", .def = "never"),
    OPT_STRING("--throughputs", "FILE", throughputs, "job speeds from this table (the one `shoal sim --speed table`\n"
               "reads)", .def = "the analytic model", .expect = "a file"),
    OPT_STRING("--gpu", "TYPE", gpu, "the table's GPU type", .when = 1u, .expect = "v100, p100 or k80"),
    OPT_FLAG("--raw-spread", raw_spread, "table: keep spread/consolidated ratios > 1", .when = 1u),
    OPT_STRING("--log", "FILE", log, "the controller's log (appended)", .def = "the standard output", .expect = "a file"),
    OPT_GROUP("loaning (docs/serving.md):"),
    OPT_STRING("--loan-from", "PARTITION", loan_from, "lend the idle hosts of this partition (VC_infer: one serving\n"
               "replica job per host) to a running elastic job of --partition's; reclaim them when the\n"
               "forecast or the requests waiting at the router need them", .def = "no loaning",
               .expect = "a partition"),
    OPT_STRING("--loan-router", "URL", loan_router, "the router (shoal serve --router) whose /router/stats gives the\n"
               "request rate and the requests waiting", .expect = "http://HOST:PORT", LOAN),
    OPT_STRING("--loan-replica", "COMMAND", loan_replica, "what a replica job runs, words separated by spaces\n"
               "(shoal serve --model mlp --params FILE --port P)", .expect = "a command", LOAN),
    OPT_DOUBLE("--loan-service", "S", loan_service, 1e-6, 3600, "seconds one request takes on one replica until the\n"
               "replicas report their own measured time through the router", LOAN),
    OPT_INT("--loan-spare", "N", loan_spare, 0, 64, "replicas kept ready beyond the SLO's need (a burst is served\n"
            "while a reclaim runs; not with --loan-autoscale reactive)", LOAN),
    OPT_DOUBLE("--loan-slo", "S", loan_slo, 1e-6, 3600, "the latency SLO: --loan-quantile of the requests under S\n"
               "seconds (more than --loan-service)", LOAN),
    OPT_DOUBLE("--loan-quantile", "Q", loan_q, 0.5, 0.9999, "the SLO's quantile", LOAN),
    OPT_CHOICE("--loan-predictor", "NAME", loan_predictor, "off|ewma|holt", "the request rate's forecast (off: the\n"
               "last interval's rate)", LOAN),
    OPT_DOUBLE("--loan-alpha", "A", loan_alpha, 1e-6, 1, "the predictor's smoothing weight", LOAN),
    OPT_DOUBLE("--loan-z", "Z", loan_z, 0, 10, "headroom: standard deviations of the predictor's errors", LOAN),
    OPT_DOUBLE("--loan-hold", "S", loan_hold, 0, 1e6, "replicas above the need this long are stopped, their hosts lent",
               LOAN),
    OPT_DOUBLE("--loan-every", "S", loan_every, 0.1, 3600, "seconds between loaning steps", LOAN),
    OPT_CHOICE("--loan-autoscale", "KIND", loan_autoscale, "slo|reactive", "the replicas wanted: slo (the forecast's\n"
               "M/M/c need and the waiting requests') or reactive (threshold autoscaling on the\n"
               "last step's utilization, the baseline)", LOAN),
    OPT_DOUBLE("--loan-react-high", "U", loan_react_hi, 1e-3, 1, "reactive: add replicas above this utilization", LOAN),
    OPT_DOUBLE("--loan-react-low", "U", loan_react_lo, 1e-3, 1, "reactive: remove replicas below this utilization", LOAN),
    OPT_END,
};
#undef LOAN

static const shoal_opts_spec_t serve_spec = {
    .name = "shoal sched serve",
    .usage = "usage: shoal sched serve [--testbed NAME] [--partition P] [--policy NAME[:k=v...]] [--journal FILE] [options]\n"
             "Controller beside Slurm: places the jobs `shoal submit` left held, with a shoal policy (the simulator's\n"
             "policy objects, on the live clock), through Slurm's commands (docs/live.md). `shoal sched status` asks\n"
             "it what it does.\n",
    .opts = serve_opts,
    .modes = serve_modes,
};

static volatile sig_atomic_t serve_stop;
static void on_stop(int sig) { serve_stop = sig; }

/* the testbed's uplink oversubscription: a rack's host links over its uplink */
static double testbed_oversub(const char *name) {
  tb_t *tb = calloc(1, sizeof *tb);
  char err[256];
  double r = 1;
  if (tb && shoal__tb_load(name, tb, err, sizeof err) == 0 && tb->nracks > 1 && tb->up_bps[0] > 0 && tb->rate_bps > 0)
    r = tb->nhosts / tb->nracks * tb->rate_bps / tb->up_bps[0];
  free(tb);
  return r < 1 ? 1 : r;
}

/* ---- loaning: the router's load, the replica command ---- */

typedef struct router_load {
  char url[512];
  char *argv[64];
  int argc;
  char words[4096];
} router_load_t;

/* GET ROUTER/router/stats: {"rate": requests/s over its window, "waiting": requests held beyond one per live
 * replica, "service_s": the mean of the replicas' own measured seconds a request (0 or absent: none), "accepted"
 * and "refused": requests since its start, ...} */
static int read_router(void *arg, double *rate, double *waiting, double *service_s, double *arrived) {
  router_load_t *r = arg;
  char *body = NULL;
  shoal__live_get_fail_t f;
  if (shoal__live_http_get(r->url, NULL, 2, (size_t)1 << 16, &body, &f)) { /* (an answer is small) */
    if (f.curl < 0) return shoal__seterr(SHOAL_ERR_NOMEM, "router %s: out of memory", r->url);
    if (f.curl) return shoal__seterr(SHOAL_ERR_IO, "router %s: %s", r->url, f.err);
    return shoal__seterr(SHOAL_ERR_IO, "router %s: HTTP %ld", r->url, f.http);
  }
  json_error_t je;
  json_t *j = json_loads(body, 0, &je);
  json_t *jr = json_object_get(j, "rate"), *jw = json_object_get(j, "waiting");
  int rc = 0;
  if (!json_is_number(jr) || !json_is_number(jw))
    rc = shoal__seterr(SHOAL_ERR_PARSE, "router %s: no numbers \"rate\" and \"waiting\" in its answer", r->url);
  else *rate = json_number_value(jr), *waiting = json_number_value(jw);
  json_t *js = json_object_get(j, "service_s");
  *service_s = json_is_number(js) && json_number_value(js) > 0 ? json_number_value(js) : 0;
  json_t *ja = json_object_get(j, "accepted"), *jf = json_object_get(j, "refused");
  *arrived = json_is_integer(ja) && json_is_integer(jf) ? (double)(json_integer_value(ja) + json_integer_value(jf)) : -1;
  json_decref(j);
  free(body);
  return rc;
}

/* the loaning options into cfg->loan; 2 (said) when they do not go together */
static int loan_config(const serve_cli_t *c, router_load_t *r, shoal_live_config_t *cfg) {
  if (!c->loan_from) return 0;
  if (!c->loan_router || !c->loan_replica)
    return fprintf(stderr, "shoal sched serve: --loan-from needs --loan-router URL and --loan-replica COMMAND\n"), 2;
  if (!c->partition)
    return fprintf(stderr, "shoal sched serve: --loan-from needs --partition (the training side, VC_train)\n"), 2;
  if (!(c->loan_slo > c->loan_service))
    return fprintf(stderr, "shoal sched serve: --loan-slo %g must exceed --loan-service %g\n", c->loan_slo,
                   c->loan_service), 2;
  size_t ul = strlen(c->loan_router);
  if (strncmp(c->loan_router, "http://", 7) || ul < 8 || ul > 400)
    return fprintf(stderr, "shoal sched serve: --loan-router %s: expected http://HOST:PORT\n", c->loan_router), 2;
  snprintf(r->url, sizeof r->url, "%.*s/router/stats", (int)ul - (c->loan_router[ul - 1] == '/'), c->loan_router);
  if (strlen(c->loan_replica) >= sizeof r->words)
    return fprintf(stderr, "shoal sched serve: --loan-replica: command too long\n"), 2;
  snprintf(r->words, sizeof r->words, "%s", c->loan_replica);
  char *save = NULL;
  for (char *w = strtok_r(r->words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    if (r->argc == (int)(sizeof r->argv / sizeof r->argv[0]))
      return fprintf(stderr, "shoal sched serve: --loan-replica: more than 64 words\n"), 2;
    r->argv[r->argc++] = w;
  }
  if (!r->argc) return fprintf(stderr, "shoal sched serve: --loan-replica: an empty command\n"), 2;
  shoal_live_loan_opts_t *o = &cfg->loan;
  o->partition = c->loan_from, o->replica_argv = (const char *const *)r->argv, o->replica_argc = r->argc;
  o->router = c->loan_router;
  o->forecast = c->loan_predictor, o->alpha = c->loan_alpha, o->z = c->loan_z;
  o->service_s = c->loan_service, o->slo_s = c->loan_slo, o->slo_q = c->loan_q, o->hold_s = c->loan_hold;
  o->spare = c->loan_spare;
  if (!strcmp(c->loan_autoscale, "reactive")) {
    if (!(c->loan_react_lo < c->loan_react_hi))
      return fprintf(stderr, "shoal sched serve: --loan-react-low %g must be below --loan-react-high %g\n",
                     c->loan_react_lo, c->loan_react_hi), 2;
    o->react_lo = c->loan_react_lo, o->react_hi = c->loan_react_hi;
  }
  o->every = c->loan_every, o->load = read_router, o->load_arg = r;
  return 0;
}

static void serve_config(const serve_cli_t *c, FILE *log, shoal_live_config_t *cfg) {
  cfg->policy = c->policy, cfg->journal = c->journal, cfg->partition = c->partition, cfg->accounts = c->accounts;
  cfg->id = c->id, cfg->throughputs = c->throughputs, cfg->gpu = c->gpu, cfg->raw_spread = c->raw_spread;
  cfg->tick = c->tick > 0.05 ? c->tick : 0.05, cfg->grace = c->grace, cfg->restart_cost = c->restart_cost, cfg->retries = (int)c->retries;
  cfg->lease_ttl = c->lease, cfg->tenants = c->tenants, cfg->shares_every = c->shares_every, cfg->dry_run = c->dry_run, cfg->recover = c->recover;
  cfg->oversub = c->oversub > 0 ? c->oversub : c->tb ? testbed_oversub(c->tb) : 1;
  cfg->log = log;
}

int shoal_sched_serve(int argc, char **argv) {
  serve_cli_t c = {.policy = "fifo", .journal = "shoal-live.journal", .gpu = "v100", .tick = 0.5, .grace = 5,
                   .restart_cost = 10, .retries = 1, .lease = 60, .tenants = "account",
                   .shares_every = 30, .loan_service = 0.01, .loan_slo = 0.1, .loan_q = 0.99,
                   .loan_predictor = "holt", .loan_alpha = 0.5, .loan_hold = 30, .loan_every = 2,
                   .loan_autoscale = "slo", .loan_react_lo = 0.4, .loan_react_hi = 0.8};
  int st = shoal_opts_parse(&serve_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  shoal_live_config_t cfg;
  static router_load_t load; /* (the controller borrows the replica's words and the router's address) */
  shoal__live_config_default(&cfg);
  if ((st = loan_config(&c, &load, &cfg))) return st;
  FILE *log = stdout;
  if (c.log && !(log = fopen(c.log, "a")))
    return fprintf(stderr, "shoal sched serve: --log %s: %s\n", c.log, strerror(errno)), 1;
  serve_config(&c, log, &cfg);
  shoal_live_manager_t m = {NULL, NULL};
  shoal_live_ctl_t *L = NULL;
  shoal_live_board_t *board = NULL;
  int rc = 1;
  /* (the metrics port first: bound where the operator runs the command, before it enters a testbed) */
  if (shoal__live_board_create(c.metrics, &board)) {
    fprintf(stderr, "shoal sched serve: %s\n", shoal_last_error());
    goto out;
  }
  if (enter_testbed("shoal sched serve", c.tb) || shoal__live_slurm_create(&m)) goto out;
  if (shoal__live_ctl_create(&cfg, m, &L) || shoal__live_board_listen_id(board, shoal__live_ctl_id(L))) {
    fprintf(stderr, "shoal sched serve: %s\n", shoal_last_error());
    goto out;
  }
  shoal__live_ctl_publish(L, board);
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  rc = shoal__live_ctl_serve(L, (int)c.until, c.max_time, &serve_stop);
  if (rc && rc != SHOAL_ERR_TIMEOUT) fprintf(stderr, "shoal sched serve: %s\n", shoal_last_error());
  shoal__live_ctl_summary(L);
  rc = rc == 0 ? 0 : rc == SHOAL_ERR_TIMEOUT ? 3 : 1;
out:
  if (L) shoal__live_ctl_publish(L, NULL);
  shoal__live_board_destroy(board);
  shoal__live_ctl_destroy(L);
  shoal__live_manager_destroy(&m);
  if (log != stdout) fclose(log);
  return rc;
}

/* ---- shoal sched status ---- */

typedef struct status_cli {
  const char *tb, *journal, *id;
  int metrics;
} status_cli_t;

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT status_cli_t
static const shoal_opt_t status_opts[] = {
    OPT_STRING("--testbed", "NAME", tb, "the controller serves testbed NAME's Slurm (it runs in its namespace)",
               .expect = "a testbed name"),
    OPT_STRING("--journal", "FILE", journal, "the controller of this journal", .expect = "a file"),
    OPT_STRING("--id", "NAME", id, "the controller of this identity", .def = "the journal's", .expect = "a name"),
    OPT_FLAG("--metrics", metrics, "print its metrics (Prometheus' text format) instead"),
    OPT_END,
};

static const shoal_opts_spec_t status_spec = {
    .name = "shoal sched status",
    .usage = "usage: shoal sched status [--testbed NAME] [--journal FILE | --id NAME] [--metrics]\n"
             "What a running `shoal sched serve` does: its nodes, every job it holds or keeps waiting and why,\n"
             "the policy's last decision (asked over its status socket).\n",
    .opts = status_opts,
};

int shoal_sched_status(int argc, char **argv) {
  status_cli_t c = {.journal = "shoal-live.journal"};
  int st = shoal_opts_parse(&status_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  char id[64];
  snprintf(id, sizeof id, "%s", c.id ? c.id : "");
  if (!id[0]) { /* the identity is the journal's first record */
    shoal_live_replay_t r;
    shoal_live_journal_scan_t sc;
    if (shoal__live_replay(c.journal, &r, &sc) == 0) snprintf(id, sizeof id, "%s", r.id), shoal__live_replay_free(&r);
    if (!id[0])
      return fprintf(stderr, "shoal sched status: --journal %s: no controller's identity in it (give --id)\n", c.journal), 1;
  }
  if (enter_testbed("shoal sched status", c.tb)) return 1;
  char *body = NULL;
  if (shoal__live_board_fetch(id, c.metrics ? "/metrics" : "/status", 10, &body))
    return fprintf(stderr, "shoal sched status: %s\n", shoal_last_error()), 1;
  fputs(body, stdout);
  free(body);
  return 0;
}
