/* The policy's tenants and their weights, from the manager's accounting (tenants.c in ctl.h).
 *
 * Tenants are the associations' accounts (or users); tenant 0 is everybody else. A tenant's weight is the share
 * the operator gave it (sacctmgr ... set fairshare=N, read back with sshare) times Slurm's fair-share factor of
 * its decayed usage, F = 2^(-U/S) (S its share among its siblings: sshare's NormShares; U its effective usage:
 * sshare's EffectvUsage, its usage decayed by PriorityDecayHalfLife over its parent's): a tenant that used nothing weighs its share, one
 * that used exactly its share half of it, one that used twice its share a quarter. Only the ratios matter to the
 * policy. The classic factor is computed from the usage rather than read from sshare's FairShare column because
 * Slurm's default Fair Tree algorithm puts a rank there (and nothing on account lines), not a measure.
 * The tree is read one level deep: an account's share is its raw shares over all accounts' raw shares; a user
 * weighs, summed over its accounts, its shares over those of its account's users (times its own factor) times its
 * account's weight. An association without shares of its own (root) and tenant 0 weigh as the lightest tenant
 * that has a weight. Deeper account trees are flattened: a sub-account weighs its own raw shares beside the
 * top-level accounts.
 *
 * The policy is given TENANT_ROOM tenants from the start (those beyond the associations hold no job), so that an
 * association created while the controller runs becomes a tenant at the next reading: the jobs that arrive from
 * then on count under it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/ctl.h"

#define TENANT_ROOM 64

static const shoal_live_share_t *account_row(const shoal_live_shares_t *sh, const char *account) {
  for (int i = 0; i < sh->n; i++)
    if (!sh->share[i].user[0] && !strcmp(sh->share[i].account, account)) return &sh->share[i];
  return NULL;
}

/* share x 2^(-U/S): Slurm's classic fair-share factor weighing the share (0 without a share); S is sshare's
 * NormShares when it gives one (among all the parent's children, users directly in it too), else `share` */
static double decayed(double share, const shoal_live_share_t *row) {
  if (!(share > 0)) return 0;
  double s = row->norm_shares > 0 ? row->norm_shares : share;
  return share * pow(2, -(row->usage > 0 ? row->usage : 0) / s);
}

static double account_weight(const shoal_live_shares_t *sh, const char *account, double accounts_total) {
  const shoal_live_share_t *a = account_row(sh, account);
  if (!a || !(accounts_total > 0)) return 0;
  return decayed(a->shares / accounts_total, a);
}

double live_tenant_weight(const shoal_live_shares_t *sh, const char *who, int by_user) {
  double accounts_total = 0;
  for (int i = 0; i < sh->n; i++)
    if (!sh->share[i].user[0] && sh->share[i].shares > 0) accounts_total += sh->share[i].shares;
  if (!by_user) return account_weight(sh, who, accounts_total);
  double w = 0;
  for (int i = 0; i < sh->n; i++) {
    const shoal_live_share_t *a = &sh->share[i];
    if (strcmp(a->user, who) || !(a->shares > 0)) continue;
    double users = 0;
    for (int k = 0; k < sh->n; k++)
      if (sh->share[k].user[0] && !strcmp(sh->share[k].account, a->account) && sh->share[k].shares > 0)
        users += sh->share[k].shares;
    w += decayed(a->shares / users, a) * account_weight(sh, a->account, accounts_total);
  }
  return w;
}

/* L->tenant_w from the associations; 1 if a weight moved by 5% or more (usage moves them a little every reading) */
static int weigh(shoal_live_ctl_t *L, const shoal_live_shares_t *sh) {
  int by_user = !strcmp(L->tenants_s, "user"), changed = 0;
  double lightest = 0;
  double *w = malloc((size_t)L->ntenants * sizeof *w);
  if (!w) return 0;
  for (int u = 1; u < L->ntenants; u++) {
    w[u] = live_tenant_weight(sh, L->tenant[u], by_user);
    if (w[u] > 0 && (lightest == 0 || w[u] < lightest)) lightest = w[u];
  }
  for (int u = 0; u < L->tenant_room; u++) {
    double x = u > 0 && u < L->ntenants && w[u] > 0 ? w[u] : lightest > 0 ? lightest : 1;
    if (u < L->ntenants && fabs(x - L->tenant_w[u]) > 0.05 * L->tenant_w[u]) changed = 1;
    L->tenant_w[u] = x;
  }
  free(w);
  return changed;
}

static void say_weights(shoal_live_ctl_t *L, const char *what) {
  char tl[512];
  size_t n = 0;
  for (int i = 1; i < L->ntenants && n < sizeof tl; i++)
    n += (size_t)snprintf(tl + n, sizeof tl - n, "%s%s %.3g", i > 1 ? ", " : "", L->tenant[i], L->tenant_w[i]);
  live_log(L, "tenants (by %s, %s from the manager's fair shares and usage): %s; others %.3g", L->tenants_s, what,
           tl, L->tenant_w[0]);
}

/* the associations not yet tenants become tenants (while there is room); their names logged into `added` */
static void add_tenants(shoal_live_ctl_t *L, const shoal_live_shares_t *sh, char *added, size_t cap) {
  int by_user = !strcmp(L->tenants_s, "user");
  size_t n = 0;
  added[0] = 0;
  for (int i = 0; i < sh->n; i++) {
    const char *who = by_user ? sh->share[i].user : sh->share[i].account;
    int k = 1;
    while (k < L->ntenants && strcmp(L->tenant[k], who)) k++;
    if (!*who || k < L->ntenants) continue;
    if (L->ntenants == L->tenant_room) {
      live_log(L, "tenant %s not added: the policy has room for %d tenants; its jobs count as others", who,
               L->tenant_room - 1);
      continue;
    }
    snprintf(L->tenant[L->ntenants++], sizeof L->tenant[0], "%s", who);
    if (n < cap) n += (size_t)snprintf(added + n, cap - n, "%s%s", n ? ", " : "", who);
  }
}

int live_tenants_read(shoal_live_ctl_t *L) {
  L->ntenants = 1;
  L->tenant_room = 1;
  L->tenant = calloc(TENANT_ROOM, sizeof *L->tenant);
  L->tenant_w = calloc(TENANT_ROOM, sizeof *L->tenant_w);
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
  char added[512];
  L->tenant_room = TENANT_ROOM;
  add_tenants(L, &sh, added, sizeof added);
  weigh(L, &sh);
  shoal__live_shares_free(&sh);
  L->shares_next = live_wall(L) + L->cfg.shares_every;
  if (L->ntenants > 1) say_weights(L, "weighed");
  return 0;
}

void live_tenants_refresh(shoal_live_ctl_t *L) {
  double w = live_wall(L);
  if (L->tenant_room < 2 || !(L->cfg.shares_every > 0) || w < L->shares_next) return;
  L->shares_next = w + L->cfg.shares_every;
  shoal_live_shares_t sh = {0, NULL};
  if (L->mgr.ops->shares(L->mgr.impl, &sh)) return; /* (accounting away for a while: the weights stay) */
  char added[512];
  add_tenants(L, &sh, added, sizeof added);
  if (added[0]) live_log(L, "new tenants: %s (their jobs arriving from now on count under them)", added);
  if (weigh(L, &sh) || added[0]) say_weights(L, "weighed anew");
  shoal__live_shares_free(&sh);
}
