/* The fluid link model the algorithms' costs are written in (algo.h):
 * concurrent flows share a host's link, each flow is also bounded by its
 * own pair's rate, and the per-pair rates come from the world's profile
 * (a measured matrix where there is one). With one rank per host and equal
 * links it gives back the classic alpha-beta formulas. */
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
  if (alpha_max) *alpha_max = amax;
  return t;
}
