/* Policy "greedy": the exact greedy of planners/greedy.c in the engine's slotted mode (policies/slotted.c);
 * docs/scheduling.md. */
#include "sched/policies/slotted.h"

static int greedy_create(shoal_sched_t *s, const char *params, void **state) {
  return shoal__ps_policy_create(SHOAL__PS_GREEDY, s, params, state);
}

const shoal_policy_ops_t shoal__policy_greedy = {
    "greedy",
    "exact single-job greedy: most work in every slot from arrival (locality-aware)",
    "slot=3600: slot length (s); theta=0.125: price base of the last-slot trim; replan=0 replank=32: re-planning as larr (ablation); estimate=0: as larr",
    greedy_create,
    shoal__ps_policy_destroy,
    shoal__ps_policy_arrive,
    shoal__ps_policy_finish,
    shoal__ps_policy_timer,
    shoal__ps_policy_schedule,
    shoal__ps_policy_stats,
    1, /* malleable */
};
