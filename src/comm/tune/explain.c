/* `shoal tune` / `shoal bench --explain`: the link model of a world and the
 * chooser's prediction for every algorithm of the table, per size. */
#include <math.h>
#include <stdio.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/tune/tune.h"

void shoal__tune_explain(shoal_comm_t *c, FILE *f) {
  const shoal__world_t *w = c->w;
  const shoal__tune_t *t = w->tune;
  shoal__coll_ctx_t x;
  shoal__coll_ctx(c, &x);
  shoal__cost_t shm, net;
  shoal__tune_class(w, 1, &shm);
  shoal__tune_class(w, 0, &net);
  fprintf(f, "# tuning: %s; host set %s; %d rank(s) on %d host(s)%s\n", shoal__tune_source(w), t ? t->key : "?",
          c->size, x.layout.nhosts, x.shm_ok ? "" : " (layout: shm/hier not applicable)");
  fprintf(f, "# link shm : alpha %8.2f us  bandwidth %7.2f GB/s%s\n", shm.alpha_s * 1e6, 1e-9 / shm.beta_s,
          t && t->v[T_SHM_A] > 0 ? " (fitted)" : " (default)");
  fprintf(f, "# link net : alpha %8.2f us  bandwidth %7.2f GB/s%s\n", net.alpha_s * 1e6, 1e-9 / net.beta_s,
          t && t->v[T_NET_A] > 0 ? " (fitted)" : " (default or SHOAL_ALPHA_US/SHOAL_BETA_GBPS)");
  fprintf(f, "# reduction: gamma %.2f GB/s%s\n", 1e-9 / shm.gamma_s, t && t->v[T_GAMMA] > 0 ? " (measured)" : "");
  double coll0 = shoal__tune_shm_allreduce_time(w, 0), coll_gb = shoal__tune_shm_allreduce_time(w, 1e9) - coll0;
  fprintf(f, "# shm allreduce fit: %.2f us + S / %.2f GB/s%s\n", coll0 * 1e6, 1.0 / coll_gb,
          t && t->v[T_COLL_A] > 0 ? " (fitted)" : " (default)");
  double cma0 = shoal__tune_cma_allreduce_time(w, 0);
  if (isfinite(cma0))
    fprintf(f, "# cma allreduce fit: %.2f us + S / %.2f GB/s (fitted)\n", cma0 * 1e6,
            1.0 / (shoal__tune_cma_allreduce_time(w, 1e9) - cma0));
  else
    fprintf(f, "# cma allreduce: not measured (only a profile of this host group's own times may pick it)\n");
  fprintf(f, "# op overhead (point-to-point algorithms, per collective): %.2f us%s\n",
          shoal__tune_op_overhead(w) * 1e6, t && t->v[T_OP_O] >= 0 ? " (measured)" : " (default)");
  const shoal__topo_t *tp = w->topo;
  for (int r = 0; tp->nracks > 1 && r < tp->nracks; r++) {
    int q0 = -1, hosts = 0; /* q0: its first world rank, whose registration names it */
    for (int h = 0; h < tp->nhosts; h++) hosts += tp->rack_of[h] == r;
    for (int q = w->size - 1; q >= 0; q--)
      if (tp->rack_of[tp->host_of[q]] == r) q0 = q;
    fprintf(f, "# rack %s: %d host(s), uplink %.3f GB/s each way%s\n", w->peers[q0].rack, hosts,
            shoal__tune_uplink_cap(w, r) * 1e-9, t && t->uplink_bps > 0 ? " (SHOAL_RACK_UPLINK_GBPS)" : " (one host link)");
  }
  int nh = t ? t->nh : 0, known = 0;
  for (int i = 0; i < nh * nh; i++) known |= t->bw[i] > 0;
  if (known) {
    char when[48];
    if (t->links_s > 0) snprintf(when, sizeof when, "measured in %.0f ms", t->links_s * 1e3);
    else snprintf(when, sizeof when, "from the cache");
    fprintf(f, "# link matrix (%s): bandwidth MB/s / one-way latency us, from row host to column host (host: its "
               "first world rank)\n# %10s", when, "");
    for (int j = 0; j < nh; j++) {
      int r0 = -1;
      for (int r = w->size - 1; r >= 0; r--)
        if (w->topo->host_of[r] == j) r0 = r;
      char col[32];
      snprintf(col, sizeof col, "h%d(r%d)", j, r0);
      fprintf(f, " %14s", col);
    }
    fprintf(f, "\n");
    for (int i = 0; i < nh; i++) {
      fprintf(f, "# h%-9d", i);
      for (int j = 0; j < nh; j++) {
        if (i == j) fprintf(f, " %14s", "-");
        else fprintf(f, " %7.1f/%-6.0f", t->bw[i * nh + j] * 1e-6, t->lat[i * nh + j] * 1e6);
      }
      fprintf(f, "\n");
    }
  }
  if (w->algo_env != SHOAL_ALGO_AUTO)
    fprintf(f, "# SHOAL_ALGO=%s forces the choice below\n", shoal_algo_name(w->algo_env));
  int n = shoal__algo_count();
  fprintf(f, "# %12s", "size(B)");
  for (int i = 1; i < n; i++) {
    char col[32];
    snprintf(col, sizeof col, "%s(us)", shoal__algo((shoal_algo_t)i)->name);
    fprintf(f, " %10s", col);
  }
  fprintf(f, "  %s\n", "model pick");
  for (size_t b = 8; b <= (256u << 20); b *= 4) {
    shoal__choice_t ch;
    if (shoal__coll_price(&x, b, SHOAL__CHOOSE_NOPLAN, &ch)) break;
    fprintf(f, "# %12zu", b);
    for (int i = 1; i < n; i++) {
      if (isinf(ch.t[i])) fprintf(f, " %10s", "-");
      else fprintf(f, " %10.1f", ch.t[i] * 1e6);
    }
    fprintf(f, "  %s\n", shoal_algo_name(ch.algo));
  }
}
