/* The chooser (algo.h): prices every algorithm of the table with the link
 * model of the world's profile and picks the cheapest; explicit requests and
 * SHOAL_ALGO go first. Every rank computes the same choice: the profile's
 * values are agreed by all ranks (tune/), and the inputs (communicator,
 * size) are the same on every rank of a collective. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "core/error.h"
#include "core/log.h"

void shoal__coll_ctx(const shoal_comm_t *c, shoal__coll_ctx_t *x) {
  const shoal__world_t *w = c->w;
  memset(x, 0, sizeof *x);
  x->c = c;
  x->w = w;
  x->p = c->size;
  x->wranks = c->wranks;
  shoal__topo_layout(c, &x->layout);
  int nh;
  x->shm_ok = shoal__topo_shm_ok(c, &nh);
  x->one_host_shm = x->shm_ok && nh == 1 && w->shm_on && c->size > 1;
  shoal__cost_t shm;
  shoal__tune_class(w, 1, &shm);
  shoal__tune_class(w, 0, &x->net);
  if (x->one_host_shm) {
    x->flat = shm;
  } else if (nh > 1 && w->shm_on) { /* the slowest link class bounds a flat algorithm */
    x->flat = x->net;
    if (shm.alpha_s > x->flat.alpha_s) x->flat.alpha_s = shm.alpha_s;
    if (shm.beta_s > x->flat.beta_s) x->flat.beta_s = shm.beta_s;
  } else {
    x->flat = x->net;
  }
  x->o = shoal__tune_op_overhead(w);
}

void shoal__coll_ctx_leaders(const shoal__world_t *w, const int *wranks, int m, shoal__coll_ctx_t *x) {
  memset(x, 0, sizeof *x);
  x->w = w;
  x->p = m;
  x->wranks = wranks;
  x->layout = (shoal__layout_t){m, 1, 0};
  shoal__tune_class(w, 0, &x->net);
  x->flat = x->net;
  x->o = 0; /* inside another collective */
}

int shoal__coll_ctx_model(int p, shoal__coll_ctx_t *x) {
  memset(x, 0, sizeof *x);
  x->p = p;
  x->layout = (shoal__layout_t){p, 1, 1};
  int rc = shoal__cost_params(&x->net);
  x->flat = x->net;
  return rc;
}

#define RING_MARGIN 0.05 /* see shoal__coll_price */

int shoal__coll_price(const shoal__coll_ctx_t *x, size_t bytes, unsigned flags, shoal__choice_t *out) {
  int n = shoal__algo_count(), best = -1;
  for (int i = 0; i < SHOAL__ALGO_MAX; i++) out->t[i] = INFINITY;
  for (int i = 1; i < n; i++) {
    const shoal__coll_algo_t *a = shoal__algo((shoal_algo_t)i);
    if ((flags & SHOAL__CHOOSE_FLAT) && !(a->flags & SHOAL__ALGO_FLAT)) continue;
    out->t[i] = a->cost(x, bytes);
    if (isinf(out->t[i])) continue;
    if (best < 0 || out->t[i] < out->t[best] || (out->t[i] == out->t[best] && a->tie < shoal__algo(best)->tie))
      best = i;
  }
  if (best < 0) best = SHOAL_ALGO_RING; /* nothing applies (cannot happen: the ring runs anywhere) */
  /* The ring sends to one neighbour at a time over one link: what the link model leaves out (a rack
   * uplink shared by several flows, another job's traffic) slows it little, while the algorithms
   * with many concurrent exchanges (rhd's far partners, the trees) can lose half their rate to it
   * (measured: rhd at 0.5-0.75x the ring on 2 racks with 2:1 uplinks, priced 0.02% cheaper). Another
   * algorithm is chosen over the ring only when it is priced clearly cheaper. */
  if (best != SHOAL_ALGO_RING && !isinf(out->t[SHOAL_ALGO_RING]) &&
      out->t[SHOAL_ALGO_RING] <= out->t[best] * (1 + RING_MARGIN))
    best = SHOAL_ALGO_RING;
  out->algo = (shoal_algo_t)best;
  memset(&out->plan, 0, sizeof out->plan);
  const shoal__coll_algo_t *a = shoal__algo(out->algo);
  if (!(flags & SHOAL__CHOOSE_NOPLAN) && a->plan) return a->plan(x, bytes, &out->plan);
  return 0;
}

/* "cost model (measured): ring 12.0 us, rhd 14.1 us, ..." */
static void model_reason(const shoal__coll_ctx_t *x, const shoal__choice_t *ch, char *out, size_t cap) {
  int n = snprintf(out, cap, "cost model (%s):", shoal__tune_source(x->w));
  for (int i = 1; i < shoal__algo_count() && n > 0 && (size_t)n < cap; i++)
    if (!isinf(ch->t[i]))
      n += snprintf(out + n, cap - (size_t)n, " %s %.1f us,", shoal__algo((shoal_algo_t)i)->name, ch->t[i] * 1e6);
  if (n > 0 && (size_t)n < cap && out[n - 1] == ',') out[n - 1] = '\0';
}

int shoal__coll_choose(shoal_comm_t *c, size_t bytes, shoal_algo_t requested, unsigned flags, shoal__choice_t *out) {
  shoal__coll_ctx_t x;
  shoal_algo_t pick = requested;
  const char *why = "requested by the caller";
  if (pick == SHOAL_ALGO_AUTO && !(flags & SHOAL__CHOOSE_FLAT) && c->w->algo_env != SHOAL_ALGO_AUTO) {
    pick = c->w->algo_env;
    why = "forced by SHOAL_ALGO";
  }
  for (int i = 0; i < SHOAL__ALGO_MAX; i++) out->t[i] = INFINITY;
  memset(&out->plan, 0, sizeof out->plan);
  out->cached = 0;
  if (pick != SHOAL_ALGO_AUTO) {
    shoal__coll_ctx(c, &x);
    const shoal__coll_algo_t *a = shoal__algo(pick);
    if (!a) return shoal__seterr(SHOAL_ERR_INVALID, "allreduce: invalid algorithm %d", (int)pick);
    int rc = a->applies ? a->applies(&x) : 0;
    if (!rc && a->plan && !(flags & SHOAL__CHOOSE_NOPLAN)) rc = a->plan(&x, bytes, &out->plan);
    if (rc && requested == SHOAL_ALGO_AUTO) { /* say where the algorithm came from */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", shoal_last_error());
      return shoal__seterr(rc, "%s (SHOAL_ALGO=%s forces it on this world)", msg, a->name);
    }
    if (rc) return rc;
    out->algo = pick;
    snprintf(out->why, sizeof out->why, "%s", why);
    return 0;
  }
  shoal__tune_t *tn = c->w->tune;
  struct shoal__tune_pick *slot = NULL;
  if (tn) {
    size_t nslots = sizeof tn->picks / sizeof tn->picks[0];
    slot = &tn->picks[(c->id * 0x9E3779B97F4A7C15ull ^ bytes * 0xff51afd7ed558ccdull) >> 32 & (nslots - 1)];
  }
  if (slot && slot->valid && slot->comm == c->id && slot->bytes == bytes) {
    /* the same size again (every training step): the model's answer has not changed. Nothing here
     * formats text or builds the context unless the algorithm has a plan: a tiny shared-memory
     * allreduce takes well under a microsecond, and a snprintf of the reason was a tenth of it
     * (shoal__choice_why writes the reason when a log line needs it). */
    out->algo = slot->algo;
    out->t[out->algo] = slot->t;
    out->cached = 1;
    out->why[0] = '\0';
    const shoal__coll_algo_t *a = shoal__algo(out->algo); /* its parameters: read again (SHOAL_CHUNK_BYTES) */
    if (!a->plan || (flags & SHOAL__CHOOSE_NOPLAN)) return 0;
    shoal__coll_ctx(c, &x);
    return a->plan(&x, bytes, &out->plan);
  }
  shoal__coll_ctx(c, &x);
  int rc = shoal__coll_price(&x, bytes, flags, out);
  if (rc) return rc;
  model_reason(&x, out, out->why, sizeof out->why);
  if (!(flags & SHOAL__CHOOSE_QUIET))
    SHOAL_DEBUG("TUNING", "allreduce %zu B on %d ranks -> %s (%s)", bytes, c->size, shoal_algo_name(out->algo),
                out->why);
  if (slot) *slot = (struct shoal__tune_pick){1, c->id, bytes, out->algo, out->t[out->algo]};
  return 0;
}

const char *shoal__choice_why(const shoal_comm_t *c, shoal__choice_t *ch) {
  if (ch->cached && !ch->why[0])
    snprintf(ch->why, sizeof ch->why, "cost model (%s), as for the last call of this size", shoal__tune_source(c->w));
  return ch->why;
}

void shoal__plan_describe(shoal_algo_t a, const shoal__coll_ctx_t *x, const shoal__plan_t *plan, char *out,
                          size_t cap) {
  const shoal__coll_algo_t *alg = shoal__algo(a);
  out[0] = '\0';
  if (alg && alg->describe) alg->describe(x, plan, out, cap);
  else if (plan->chunk_bytes) snprintf(out, cap, "chunk %zu B", plan->chunk_bytes);
}
