/* The policy's tenants and their weights, from the manager's accounting (tenants.c in ctl.h).
 *
 * Tenants are the associations' accounts (or users); tenant 0 is everybody else. Their weights are the fair
 * shares the operator gave (sacctmgr ... set fairshare=N, read back with sshare), read as Slurm's fair-share tree
 * reads them one level deep: an account weighs its raw shares over all accounts' raw shares; a user weighs, summed
 * over its accounts, its shares over those of its account's users times its account's weight. An association
 * without shares of its own (root) and tenant 0 weigh as the lightest tenant that has shares. Deeper account
 * trees are flattened: a sub-account weighs its own raw shares beside the top-level accounts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/ctl.h"

static double account_shares(const shoal_live_shares_t *sh, const char *account) {
  for (int i = 0; i < sh->n; i++)
    if (!sh->share[i].user[0] && !strcmp(sh->share[i].account, account)) return sh->share[i].shares;
  return 0;
}

/* the share (0..1) of the cluster that `who` has: an account, or a user summed over its accounts */
static double weight_of(const shoal_live_shares_t *sh, const char *who, int by_user, double accounts_total) {
  if (!(accounts_total > 0)) return 0;
  if (!by_user) return account_shares(sh, who) / accounts_total;
  double w = 0;
  for (int i = 0; i < sh->n; i++) {
    const shoal_live_share_t *a = &sh->share[i];
    if (strcmp(a->user, who) || !(a->shares > 0)) continue;
    double users = 0;
    for (int k = 0; k < sh->n; k++)
      if (sh->share[k].user[0] && !strcmp(sh->share[k].account, a->account) && sh->share[k].shares > 0)
        users += sh->share[k].shares;
    w += a->shares / users * account_shares(sh, a->account) / accounts_total;
  }
  return w;
}

/* L->tenant_w from the associations; 1 if a weight changed */
static int weigh(shoal_live_ctl_t *L, const shoal_live_shares_t *sh) {
  int by_user = !strcmp(L->tenants_s, "user"), changed = 0;
  double total = 0, lightest = 0;
  for (int i = 0; i < sh->n; i++)
    if (!sh->share[i].user[0] && sh->share[i].shares > 0) total += sh->share[i].shares;
  double *w = malloc((size_t)L->ntenants * sizeof *w);
  if (!w) return 0;
  for (int u = 1; u < L->ntenants; u++) {
    w[u] = weight_of(sh, L->tenant[u], by_user, total);
    if (w[u] > 0 && (lightest == 0 || w[u] < lightest)) lightest = w[u];
  }
  for (int u = 0; u < L->ntenants; u++) {
    if (u == 0 || !(w[u] > 0)) w[u] = lightest > 0 ? lightest : 1;
    if (fabs(w[u] - L->tenant_w[u]) > 1e-9) changed = 1;
    L->tenant_w[u] = w[u];
  }
  free(w);
  return changed;
}

static void say_weights(shoal_live_ctl_t *L, const char *what) {
  char tl[512];
  size_t n = 0;
  for (int i = 1; i < L->ntenants && n < sizeof tl; i++)
    n += (size_t)snprintf(tl + n, sizeof tl - n, "%s%s %.3g", i > 1 ? ", " : "", L->tenant[i], L->tenant_w[i]);
  live_log(L, "tenants (by %s, %s from the manager's fair shares): %s; others %.3g", L->tenants_s, what, tl,
           L->tenant_w[0]);
}

int live_tenants_read(shoal_live_ctl_t *L) {
  L->ntenants = 1;
  L->tenant = calloc(1, sizeof *L->tenant);
  L->tenant_w = calloc(1, sizeof *L->tenant_w);
  if (!L->tenant || !L->tenant_w) return shoal__seterr(SHOAL_ERR_NOMEM, "live: out of memory");
  snprintf(L->tenant[0], sizeof L->tenant[0], "(other)");
  L->tenant_w[0] = 1;
  if (!strcmp(L->tenants_s, "none")) return 0;
  shoal_live_shares_t sh = {0, NULL};
  int rc = L->mgr.ops->shares(L->mgr.impl, &sh);
  if (rc) {
    if (rc != SHOAL_ERR_UNSUPPORTED) live_log(L, "fair shares not read (%s): one tenant", shoal_last_error());
    return 0;
  }
  int by_user = !strcmp(L->tenants_s, "user");
  for (int i = 0; i < sh.n; i++) {
    const char *who = by_user ? sh.share[i].user : sh.share[i].account;
    int k = 1;
    while (k < L->ntenants && strcmp(L->tenant[k], who)) k++;
    if (!*who || k < L->ntenants) continue;
    char(*nt)[32] = realloc(L->tenant, (size_t)(L->ntenants + 1) * sizeof *nt);
    if (nt) L->tenant = nt;
    double *nw = nt ? realloc(L->tenant_w, (size_t)(L->ntenants + 1) * sizeof *nw) : NULL;
    if (!nw) break;
    L->tenant_w = nw;
    L->tenant_w[L->ntenants] = 0;
    snprintf(L->tenant[L->ntenants++], sizeof L->tenant[0], "%s", who);
  }
  weigh(L, &sh);
  shoal__live_shares_free(&sh);
  L->shares_next = live_wall(L) + L->cfg.shares_every;
  if (L->ntenants > 1) say_weights(L, "weighed");
  return 0;
}

void live_tenants_refresh(shoal_live_ctl_t *L) {
  double w = live_wall(L);
  if (L->ntenants < 2 || !(L->cfg.shares_every > 0) || w < L->shares_next) return;
  L->shares_next = w + L->cfg.shares_every;
  shoal_live_shares_t sh = {0, NULL};
  if (L->mgr.ops->shares(L->mgr.impl, &sh)) return; /* (accounting away for a while: the weights stay) */
  if (weigh(L, &sh)) say_weights(L, "weighed anew");
  shoal__live_shares_free(&sh);
}
