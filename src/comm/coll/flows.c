/* The fluid link model the algorithms' costs are written in (algo.h):
 * concurrent flows share a host's link, each flow is also bounded by its
 * own pair's rate, and the per-pair rates come from the world's profile
 * (a measured matrix where there is one), and the flows between racks share
 * their racks' uplinks (when the hosts' racks are known). With one rank per
 * host, equal links and no racks it gives back the classic alpha-beta
 * formulas. */
#include <math.h>
#include <stdlib.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"

static int host_of(const shoal__coll_ctx_t *x, int i) { return x->w ? x->w->topo->host_of[x->wranks[i]] : i; }

void shoal__ctx_link(const shoal__coll_ctx_t *x, int i, int j, double *alpha, double *beta) {
  if (!x->w) {
    *alpha = x->net.alpha_s, *beta = x->net.beta_s;
    return;
  }
  shoal__tune_link(x->w, x->wranks[i], x->wranks[j], alpha, beta);
}

/* Each rack's bytes to and from other racks over its uplink (topo.h: racks known, more than one). */
static double racks_time(const shoal__coll_ctx_t *x, const shoal__flow_t *f, int n) {
  const shoal__topo_t *tp = x->w ? x->w->topo : NULL;
  if (!tp || tp->nracks < 2) return 0;
  int R = tp->nracks;
  double *out = calloc(2 * (size_t)R, sizeof *out), *in = out ? out + R : NULL, t = 0;
  if (!out) return 0;
  for (int k = 0; k < n; k++) {
    if (f[k].bytes <= 0) continue;
    int ra = tp->rack_of[host_of(x, f[k].a)], rb = tp->rack_of[host_of(x, f[k].b)];
    if (ra != rb) out[ra] += f[k].bytes, in[rb] += f[k].bytes;
  }
  for (int r = 0; r < R; r++) {
    if (!out[r] && !in[r]) continue;
    double cap = shoal__tune_uplink_cap(x->w, r);
    if (cap > 0 && (out[r] > in[r] ? out[r] : in[r]) / cap > t) t = (out[r] > in[r] ? out[r] : in[r]) / cap;
  }
  free(out);
  return t;
}

double shoal__flows_time(const shoal__coll_ctx_t *x, const shoal__flow_t *f, int n, double *alpha_max) {
  int nh = x->w ? x->w->topo->nhosts : x->p, p = x->p;
  /* per host: bytes out and in over other hosts; per rank: link time out and in (a rank's flows are
   * serialized by its own process, whatever the links) */
  double *out = calloc((size_t)(nh + p) * 2, sizeof *out), *in = out ? out + nh : NULL;
  double *rout = in ? in + nh : NULL, *rin = rout ? rout + p : NULL;
  double t = 0, amax = 0;
  for (int k = 0; k < n; k++) {
    if (f[k].bytes <= 0 || f[k].a == f[k].b) continue;
    double a, b;
    shoal__ctx_link(x, f[k].a, f[k].b, &a, &b);
    if (a > amax) amax = a;
    if (!out) { /* no memory: each flow on its own */
      if (f[k].bytes * b > t) t = f[k].bytes * b;
      continue;
    }
    rout[f[k].a] += f[k].bytes * b, rin[f[k].b] += f[k].bytes * b;
    int ha = host_of(x, f[k].a), hb = host_of(x, f[k].b);
    if (ha != hb) out[ha] += f[k].bytes, in[hb] += f[k].bytes;
  }
  for (int r = 0; out && r < p; r++) {
    if (rout[r] > t) t = rout[r];
    if (rin[r] > t) t = rin[r];
  }
  for (int h = 0; out && h < nh; h++) {
    if (!out[h] && !in[h]) continue;
    double ob, ib;
    if (x->w) {
      shoal__tune_host_caps(x->w, h, &ob, &ib);
    } else {
      ob = ib = 1.0 / x->net.beta_s;
    }
    if (out[h] / ob > t) t = out[h] / ob;
    if (in[h] / ib > t) t = in[h] / ib;
  }
  free(out);
  double up = racks_time(x, f, n);
  if (up > t) t = up;
  if (alpha_max) *alpha_max = amax;
  return t;
}
