/* Policy "oasis" (issue 5): the slot planner of ps_oasis.c behind the policy interface
 * through the adapter ps_policy.c; docs/scheduling.md. */
#include "sched/ps_policy.h"

static int oasis_create(shoal_sched_t *s, const char *params, void **state) {
  return shoal__ps_policy_create(SHOAL_PS_POL_OASIS, s, params, state);
}

const shoal_policy_ops_t shoal__policy_oasis = {
    "oasis",
    "OASiS primal-dual: exponential prices, per-job DP, admission by positive payoff (retry per slot)",
    "slot=3600: slot length (s); theta=0.125 trials=20 beta=1 sigma=0 klp=32: larr; mult=1 force=20 units=64: oasis",
    oasis_create,
    shoal__ps_policy_destroy,
    shoal__ps_policy_arrive,
    shoal__ps_policy_finish,
    shoal__ps_policy_timer,
    shoal__ps_policy_schedule,
};
