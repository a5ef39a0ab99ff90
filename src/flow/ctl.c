/* Reports in, rates out (ctl.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "flow/ctl.h"

int shoal__fctl_init(shoal__fctl_t *c, const shoal__ftopo_t *topo, const shoal__fplan_cfg_t *cfg) {
  memset(c, 0, sizeof *c);
  c->topo = *topo;
  int nl = shoal__ftopo_nlinks(topo);
  double *cap = malloc((size_t)nl * sizeof *cap);
  c->fb_bytes = calloc((size_t)nl, sizeof *c->fb_bytes);
  c->fb_drops = calloc((size_t)nl, sizeof *c->fb_drops);
  c->fb_at = calloc((size_t)nl, sizeof *c->fb_at);
  c->fb_prev_bps = malloc((size_t)nl * sizeof *c->fb_prev_bps);
  if (!cap || !c->fb_bytes || !c->fb_drops || !c->fb_at || !c->fb_prev_bps) {
    free(cap);
    shoal__fctl_free(c);
    return shoal__seterr(SHOAL_ERR_NOMEM, "flow controller: out of memory");
  }
  /* links without a limit get a nominal capacity: no path includes them (shoal__ftopo_path) */
  for (int l = 0; l < nl; l++) c->fb_prev_bps[l] = -1;
  for (int l = 0; l < nl; l++) cap[l] = shoal__ftopo_cap(topo, l) > 0 ? shoal__ftopo_cap(topo, l) : 1e12;
  int rc = shoal__fplan_init(&c->plan, cfg, cap, nl);
  free(cap);
  if (rc) shoal__fctl_free(c);
  return rc;
}

void shoal__fctl_free(shoal__fctl_t *c) {
  if (c->plan.link) shoal__fplan_free(&c->plan);
  free(c->fb_bytes);
  free(c->fb_drops);
  free(c->fb_at);
  free(c->fb_prev_bps);
  free(c->fi);
  c->fi = NULL;
  c->capfi = 0;
  c->fb_bytes = c->fb_drops = NULL;
  c->fb_at = c->fb_prev_bps = NULL;
}

int64_t shoal__fctl_slot(const shoal__fctl_t *c, double t) { return (int64_t)floor(t / c->plan.cfg.slot_s); }

/* The planner's flow of report flow f, -1 when the flow is not in the topology (left alone). */
static int flow_of(shoal__fctl_t *c, const shoal__fp_flow_t *f) {
  int a = shoal__ftopo_host_of(&c->topo, f->src_ip), b = shoal__ftopo_host_of(&c->topo, f->dst_ip);
  if (a < 0 || b < 0 || a == b) return -1;
  int path[SHOAL__FTOPO_MAX_PATH];
  int n = shoal__ftopo_path(&c->topo, a, b, path);
  int fi = shoal__fplan_flow(&c->plan, f->job, f->src_rank, f->dst_rank, a, b, path, n);
  return fi < 0 ? -1 : fi;
}

int shoal__fctl_handle(shoal__fctl_t *c, int64_t slot, int n, const int *hosts, const shoal__fp_report_t *r,
                       uint64_t *const *rates) {
  size_t total = 0;
  for (int k = 0; k < n; k++) total += r[k].n;
  if (total > c->capfi) {
    int *fi = realloc(c->fi, total * sizeof *fi);
    if (!fi) return shoal__seterr(SHOAL_ERR_NOMEM, "flow controller: out of memory for %zu flows", total);
    c->fi = fi;
    c->capfi = total;
  }
  shoal__fplan_advance(&c->plan, slot);
  size_t at = 0;
  for (int k = 0; k < n; k++) {
    if (hosts[k] >= 0 && c->topo.host[hosts[k]].up_bps > 0)
      shoal__fplan_background(&c->plan, hosts[k], (double)r[k].background_bps);
    for (uint32_t i = 0; i < r[k].n; i++) c->fi[at++] = flow_of(c, &r[k].flows[i]);
  }
  /* fi x 2 + 1 for a flow that holds a plan (decided before any report is taken: one report may end or
   * start its job-mates' phases) */
  for (size_t q = 0; q < at; q++)
    if (c->fi[q] >= 0) c->fi[q] = 2 * c->fi[q] + (c->plan.flow[c->fi[q]].active || c->plan.flow[c->fi[q]].open);
  /* the flows that hold a plan (a phase under way) first: a phase that ended frees its slots before the
   * flows starting one are planned around them; then the rest, in the order the reports came */
  for (int pass = 0; pass < 2; pass++) {
    at = 0;
    for (int k = 0; k < n; k++)
      for (uint32_t i = 0; i < r[k].n; i++, at++) {
        if (c->fi[at] < 0 || (c->fi[at] & 1) != (pass == 0)) continue;
        const shoal__fp_flow_t *f = &r[k].flows[i];
        shoal__fplan_take(&c->plan, c->fi[at] / 2, f->status, f->iter, (double)f->volume, (double)f->sent,
                          (double)f->e_bps);
      }
  }
  at = 0;
  for (int k = 0; k < n; k++)
    for (uint32_t i = 0; i < r[k].n; i++, at++) {
      double rate = c->fi[at] >= 0 ? shoal__fplan_grant(&c->plan, c->fi[at] / 2) : 0;
      rates[k][i] = rate > 0 ? (uint64_t)ceil(rate) : 0;
    }
  return 0;
}

void shoal__fctl_qdisc(shoal__fctl_t *c, int link, double t, uint64_t bytes, uint64_t drops, uint64_t backlog) {
  /* The agents' reports that arrive during slot s measure their flows over slot s - 1; at this tick (the
   * start of s + 1) those are complete, and the qdisc interval they match is the previous one. */
  double dt = c->fb_at[link] > 0 ? t - c->fb_at[link] : 0;
  double bps = dt > 0 && bytes >= c->fb_bytes[link] ? 8.0 * (double)(bytes - c->fb_bytes[link]) / dt : -1;
  if (c->fb_prev_bps[link] >= 0 && dt > 0) shoal__fplan_feedback(&c->plan, link, c->fb_prev_bps[link], (double)backlog, drops);
  c->fb_prev_bps[link] = bps;
  c->fb_bytes[link] = bytes;
  c->fb_drops[link] = drops;
  c->fb_at[link] = t;
}
