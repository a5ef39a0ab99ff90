/* The public one-call entry point (include/shoal/sim.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "shoal/sim.h"
#include "sim/sim.h"

static int run(const shoal_sim_options_t *opt, const char *name, const char *params, shoal_sim_report_t *out) {
  const shoal_policy_ops_t *ops = shoal__policy_find(name);
  if (!ops) return shoal__seterr(SHOAL_ERR_CONFIG, "unknown policy '%s'", name);
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  int rc;
  if (opt->cluster_file && (rc = shoal__cluster_spec_load(opt->cluster_file, &cs))) return rc;
  shoal_workload_opts_t wo;
  shoal__workload_opts_default(&wo);
  if (opt->seed) wo.seed = opt->seed;
  if (opt->synthetic_jobs > 0) wo.synth_jobs = opt->synthetic_jobs;
  if (opt->load > 0) wo.load = opt->load;
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  cfg.seed = wo.seed;
  if (opt->restart_cost_s >= 0) cfg.restart_cost = opt->restart_cost_s;
  shoal_cluster_t *c = NULL;
  shoal_speed_t *sp = NULL;
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  shoal_sim_result_t r;
  memset(&r, 0, sizeof r);
  if ((rc = shoal__cluster_create(&cs, &c))) return rc;
  if ((rc = shoal__speed_analytic_create(&sp))) goto done;
  wo.cluster_gpus = c->gpus_total;
  wo.max_gpus = c->gpus_total;
  rc = opt->trace ? shoal__trace_read(opt->trace, &wo, sp, &w) : shoal__synth_generate(&wo, &w);
  if (rc) goto done;
  if ((rc = shoal__workload_assign_models(&w, sp, c, &wo))) goto done;
  if ((rc = shoal__sim_run(&w, &cs, sp, ops, params, &cfg, &r))) goto done;
  shoal_metrics_t m;
  if ((rc = shoal__metrics_compute(&w, &r, &m))) goto done;
  memset(out, 0, sizeof *out);
  out->jobs = m.jobs;
  out->unfinished = m.unfinished;
  out->jct_avg_s = m.jct_avg;
  out->jct_p50_s = m.jct_p50;
  out->jct_p95_s = m.jct_p95;
  out->jct_p99_s = m.jct_p99;
  out->makespan_s = m.makespan;
  out->queue_avg_s = m.queue_avg;
  out->gpu_util = m.util;
  out->preemptions = m.preemptions;
  out->reallocations = m.reallocations;
  out->ftf_max = m.ftf_max;
  out->ftf_avg = m.ftf_avg;
  out->wall_s = r.wall_s;
  out->events = r.events;
done:
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
  shoal__cluster_destroy(c);
  return rc;
}

int shoal_sim_run(const shoal_sim_options_t *opt, shoal_sim_report_t *out) {
  if (!opt || !out || !opt->policy) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sim_run: options, policy and output required");
  /* the same ranges as shoal sim's options; 0 (or < 0 for restart_cost_s) selects the default */
  shoal_workload_opts_t wd;
  shoal_sim_config_t cd;
  shoal__workload_opts_default(&wd);
  shoal__sim_config_default(&cd);
  if (opt->synthetic_jobs < 0 || opt->synthetic_jobs > SHOAL__SIM_SYNTH_JOBS_MAX)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sim_run: synthetic_jobs = %ld: expected 0 (default %ld) or 1..%ld",
                         opt->synthetic_jobs, wd.synth_jobs, SHOAL__SIM_SYNTH_JOBS_MAX);
  if (!(opt->load == 0 || (opt->load >= SHOAL__SIM_LOAD_MIN && opt->load <= SHOAL__SIM_LOAD_MAX)))
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sim_run: load = %g: expected 0 (default %g) or a number in [%g, %g]",
                         opt->load, wd.load, SHOAL__SIM_LOAD_MIN, SHOAL__SIM_LOAD_MAX);
  if (!(opt->restart_cost_s <= SHOAL__SIM_RESTART_COST_MAX) || isinf(opt->restart_cost_s))
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_sim_run: restart_cost_s = %g: expected < 0 (default %g) or a number in [0, %g]",
                         opt->restart_cost_s, cd.restart_cost, SHOAL__SIM_RESTART_COST_MAX);
  size_t plen = strlen(opt->policy);
  char *name = malloc(plen + 1), *params = NULL;
  if (!name) return shoal__seterr(SHOAL_ERR_NOMEM, "shoal_sim_run: out of memory");
  memcpy(name, opt->policy, plen + 1);
  char *colon = strchr(name, ':');
  if (colon) {
    *colon = 0;
    params = colon + 1;
  }
  int rc = run(opt, name, params, out);
  free(name);
  return rc;
}
