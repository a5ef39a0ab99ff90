/* Policy "oasis": the primal-dual planner of planners/oasis.c in the engine's slotted mode (policies/slotted.c);
 * docs/scheduling.md. */
#include "sched/policies/slotted.h"

static int oasis_create(shoal_sched_t *s, const char *params, void **state) {
  return shoal__ps_policy_create(SHOAL__PS_OASIS, s, params, state);
}

const shoal_policy_ops_t shoal__policy_oasis = {
    "oasis",
    "OASiS primal-dual: exponential prices, per-job DP, admission by positive payoff (retry per slot)",
    "slot=3600: slot length (s); mult=1: multiplier on the price bounds U, L; force=20: admit after this many rejections; units=64: work units of the DP; estimate=0: as larr",
    oasis_create,
    shoal__ps_policy_destroy,
    shoal__ps_policy_arrive,
    shoal__ps_policy_finish,
    shoal__ps_policy_timer,
    shoal__ps_policy_schedule,
    shoal__ps_policy_stats,
    1, /* malleable */
};
