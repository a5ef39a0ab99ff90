/* shoal flow sim: the flow-level simulator (src/flow/fsim.c) from the command line: a job file on a
 * two-tier topology (a file, or hosts/racks/rate/oversubscription as the testbed takes them), run under
 * each policy asked for, one line per job and the average JCT per policy, and each policy's average
 * against TCP's (docs/flow.md#the-simulator). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "flow/fsim.h"
#include "options.h"
#include "shoal/status.h"

#define SIM_MAX_POLICIES 8

typedef struct sim_cli {
  const char *topo, *jobs, *trace;
  int hosts, racks, per_job;
  double rate, oversub, slot_ms, eff, jitter, max_s, ramp_ms;
  shoal_opts_list_t policies;
  shoal__fsim_cfg_t cfg;
} sim_cli_t;

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT sim_cli_t
static const shoal_opt_t sim_opts[] = {
    OPT_STRING("--jobs", "FILE", jobs, "one job a line: ARRIVAL_S HOSTS|gpus=N ITERS COMPUTE_MS GRAD_BYTES\n"
               "(HOSTS: the ring's hosts in order, h0,h4; gpus=N: placed on arrival, 2 per host)", .expect = "a file"),
    OPT_GROUP("The network (a file, or uniform racks as `shoal testbed up` makes them):"),
    OPT_STRING("--topo", "FILE", topo, "hosts, racks and rates (docs/flow.md#topology-file)", .def = "", .expect = "a file"),
    OPT_INT("--hosts", "H", hosts, 1, SHOAL__FTOPO_MAX_HOSTS, "hosts, named h0..h<H-1>"),
    OPT_INT("--racks", "R", racks, 1, SHOAL__FTOPO_MAX_RACKS, "racks (hosts dealt in blocks)"),
    OPT_RATE("--rate", "RATE", rate, "every host's link, each direction (40mbit, 1gbit)"),
    OPT_DOUBLE("--oversub", "X", oversub, 1, 1000, "each rack's uplink = its hosts x RATE / X"),
    OPT_GROUP("Policies and the planner:"),
    OPT_LIST("--policy", "P", policies, "tcp (no control), equal, mlcc or greedy; repeatable", .def = "tcp, equal, mlcc"),
    OPT_DOUBLE("--slot-ms", "MS", slot_ms, 1, 10000, "slot length"),
    OPT_INT("--horizon", "K", cfg.plan.horizon, 1, SHOAL__FPLAN_MAX_K, "slots planned ahead"),
    OPT_DOUBLE("--factor", "F", cfg.plan.factor, 1, 10, "volume planned for an iteration, as a multiple of the previous one's"),
    OPT_DOUBLE("--floor", "F", cfg.plan.floor_frac, 1e-6, 1, "rate of a flow told to wait, as a fraction of its path"),
    OPT_GROUP("The model:"),
    OPT_DOUBLE("--eff", "E", eff, 0.01, 1, "TCP's goodput as a fraction of a link's rate"),
    OPT_DOUBLE("--tcp-ramp-ms", "MS", ramp_ms, 0, 1e6, "a phase's first MS ms under TCP hold a part of the share\n"
               "of the flows that sent before it (0: equal shares at once)"),
    OPT_DOUBLE("--tcp-ramp-share", "F", cfg.tcp_ramp_share, 1e-3, 1, "that part"),
    OPT_DOUBLE("--jitter", "S", jitter, 0, 2, "lognormal sigma of each compute phase (0: none)"),
    OPT_U64("--seed", "N", cfg.seed, 0, UINT64_MAX, "placement and jitter"),
    OPT_DOUBLE("--max-s", "S", max_s, 0, 1e9, "stop at this simulated time (0: when every job ends)"),
    OPT_FLAG("--per-job", per_job, "a line per job, not only the averages"),
    OPT_STRING("--trace", "FILE", trace, "a line per event (time, job, what)", .def = "", .expect = "a file"),
    OPT_END,
};

static int sim_resolve(void *cli, const shoal_opts_res_t *r) {
  sim_cli_t *c = cli;
  if (!c->jobs) return fprintf(stderr, "shoal flow sim: --jobs FILE is required\n"), 2;
  int uniform = shoal_opts_given(r, "--hosts") || shoal_opts_given(r, "--racks") || shoal_opts_given(r, "--rate") ||
                shoal_opts_given(r, "--oversub");
  if (c->topo && uniform)
    return fprintf(stderr, "shoal flow sim: --topo FILE or --hosts/--racks/--rate/--oversub, not both\n"), 2;
  if (!c->topo && !(c->rate > 0)) return fprintf(stderr, "shoal flow sim: --rate: give the links' rate (> 0)\n"), 2;
  if (!c->topo && c->racks > c->hosts)
    return fprintf(stderr, "shoal flow sim: --racks %d: more racks than the %d hosts\n", c->racks, c->hosts), 2;
  return 0;
}

static const shoal_opts_spec_t sim_spec = {
    .name = "shoal flow sim",
    .usage = "usage: shoal flow sim --jobs FILE (--topo FILE | [--hosts H] [--racks R] --rate RATE [--oversub X])\n"
             "         [--policy tcp|equal|mlcc|greedy ...] [--slot-ms MS] [--horizon K] [--factor F] [--floor F]\n"
             "         [--eff E] [--tcp-ramp-ms MS] [--tcp-ramp-share F] [--jitter S] [--seed N] [--max-s S]\n"
             "         [--per-job] [--trace FILE]\n"
             "The flow-level simulator: the jobs of FILE on the network, under each policy (the planner is the\n"
             "controller's own code); the average JCT per policy and its ratio to TCP's (docs/flow.md#the-simulator).\n",
    .opts = sim_opts,
    .resolve = sim_resolve,
};

static int policy_of(const char *s) {
  if (!strcmp(s, "tcp")) return SHOAL__FSIM_POLICY_TCP;
  return shoal__fplan_policy_parse(s);
}

static const char *policy_label(int pol) { return pol == SHOAL__FSIM_POLICY_TCP ? "tcp" : shoal__fplan_policy_name(pol); }

/* One policy's run on a fresh copy of the jobs; its average JCT (s) into *avg. 0, or 1 after the message. */
static int run_policy(const sim_cli_t *c, int pol, const shoal__fsim_job_t *jobs, int n, double *avg) {
  shoal__fsim_job_t *j = malloc((size_t)n * sizeof *j);
  if (!j) return fprintf(stderr, "shoal flow sim: out of memory\n"), 1;
  memcpy(j, jobs, (size_t)n * sizeof *j);
  shoal__fsim_cfg_t cfg = c->cfg;
  cfg.policy = pol;
  if (shoal__fsim_run(&cfg, j, n)) {
    fprintf(stderr, "shoal flow sim: %s: %s\n", policy_label(pol), shoal_last_error());
    free(j);
    return 1;
  }
  double sum = 0;
  int done = 0;
  for (int i = 0; i < n; i++) {
    double jct = j[i].end_s > 0 ? j[i].end_s - j[i].arrival_s : NAN;
    double it = j[i].iters_done ? j[i].iter_sum_s / j[i].iters_done : NAN;
    if (c->per_job) {
      printf("%-7s %5d %8.2f %9.3f %9.3f %8.1f  ", policy_label(pol), i + 1, j[i].arrival_s, j[i].start_s, jct, it * 1e3);
      for (int h = 0; h < j[i].nhosts; h++) printf("%s%s", h ? "," : "", cfg.topo.host[j[i].hosts[h]].name);
      printf("\n");
    }
    if (j[i].end_s > 0) sum += jct, done++;
  }
  *avg = done ? sum / done : NAN;
  printf("%-7s %5s %8s %9s %9.3f %8s  %d of %d jobs finished\n", policy_label(pol), "avg", "", "", *avg, "", done, n);
  free(j);
  return 0;
}

int shoal_cmd_flow_sim(int argc, char **argv) {
  sim_cli_t c = {.hosts = 8, .racks = 2, .oversub = 1};
  shoal__fsim_cfg_default(&c.cfg);
  c.slot_ms = c.cfg.plan.slot_s * 1e3, c.eff = c.cfg.eff, c.ramp_ms = c.cfg.tcp_ramp_s * 1e3;
  int st = shoal_opts_parse(&sim_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  c.cfg.plan.slot_s = c.slot_ms / 1e3, c.cfg.eff = c.eff, c.cfg.jitter = c.jitter, c.cfg.max_s = c.max_s;
  c.cfg.tcp_ramp_s = c.ramp_ms / 1e3;
  const char *defaults[] = {"tcp", "equal", "mlcc"};
  int pols[SIM_MAX_POLICIES], np = 0;
  for (int i = 0; i < (c.policies.n ? c.policies.n : 3); i++) {
    const char *s = c.policies.n ? c.policies.v[i] : defaults[i];
    if (np == SIM_MAX_POLICIES) return fprintf(stderr, "shoal flow sim: at most %d --policy\n", SIM_MAX_POLICIES), 2;
    if ((pols[np++] = policy_of(s)) < -1 || (pols[np - 1] == -1 && strcmp(s, "tcp")))
      return fprintf(stderr, "shoal flow sim: --policy '%s': expected tcp, equal, mlcc or greedy\n", s), 2;
  }
  int rc = c.topo ? shoal__ftopo_read(c.topo, &c.cfg.topo)
                  : shoal__ftopo_uniform(c.hosts, c.racks, c.rate, c.oversub, &c.cfg.topo);
  if (rc) return fprintf(stderr, "shoal flow sim: %s\n", shoal_last_error()), 1;
  shoal__fsim_job_t *jobs;
  int n;
  if (shoal__fsim_read_jobs(c.jobs, &c.cfg.topo, &jobs, &n)) return fprintf(stderr, "shoal flow sim: %s\n", shoal_last_error()), 1;
  if (c.trace && *c.trace && !(c.cfg.trace = fopen(c.trace, "w"))) {
    free(jobs);
    return fprintf(stderr, "shoal flow sim: --trace %s: cannot open for writing\n", c.trace), 1;
  }
  printf("# shoal flow sim: %d jobs, %d hosts in %d racks, slot %g ms, K %d, factor %g, goodput %.0f%%\n", n,
         c.cfg.topo.nhosts, c.cfg.topo.nracks, c.slot_ms, c.cfg.plan.horizon, c.cfg.plan.factor, 100 * c.eff);
  printf("%-7s %5s %8s %9s %9s %8s  %s\n", "policy", "job", "arrive_s", "start_s", "jct_s", "iter_ms", "hosts");
  double avg[SIM_MAX_POLICIES], tcp = NAN;
  for (int p = 0; p < np && !rc; p++) {
    rc = run_policy(&c, pols[p], jobs, n, &avg[p]);
    if (pols[p] == SHOAL__FSIM_POLICY_TCP) tcp = avg[p];
  }
  for (int p = 0; p < np && !rc && !isnan(tcp); p++)
    if (pols[p] != SHOAL__FSIM_POLICY_TCP) printf("# %s: average JCT %+.1f%% against tcp\n", policy_label(pols[p]), 100 * (avg[p] / tcp - 1));
  if (c.cfg.trace) fclose(c.cfg.trace);
  free(jobs);
  return rc;
}
