/* Policy "larr": the LP planner of planners/larr.c in the engine's slotted mode (policies/slotted.c);
 * docs/scheduling.md. */
#include "sched/policies/slotted.h"

static int larr_create(shoal_sched_t *s, const char *params, void **state) {
  return shoal__ps_policy_create(SHOAL__PS_LARR, s, params, state);
}

const shoal_policy_ops_t shoal__policy_larr = {
    "larr",
    "larr: per-arrival LP relaxation + randomized rounding, locality-aware workers/PSs per slot; re-plans on arrivals",
    "slot=3600: slot length (s); theta=0.125 trials=20 beta=1 sigma=0 klp=32: LP rounding; lpblocks=16: the LP plans at most this many blocks of slots, the greedy the rest, 0 = no cap (docs/scheduling.md); replan=1 replank=32 replanlp=0: re-planning on arrivals; estimate=0: >0 plans with remaining work estimated from finished jobs (prior, s)",
    larr_create,
    shoal__ps_policy_destroy,
    shoal__ps_policy_arrive,
    shoal__ps_policy_finish,
    shoal__ps_policy_timer,
    shoal__ps_policy_schedule,
    shoal__ps_policy_stats,
    1, /* malleable */
};
