/* shoal scheduling policies: public names. The policy interface itself
 * (cluster, jobs, allocations) is internal (src/sched/policy.h) because it
 * is shared by shoal's simulator and live scheduler and still evolves. */
#ifndef SHOAL_SCHED_H
#define SHOAL_SCHED_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shoal_policy_ops shoal_policy_ops_t;

/* The registered policy called name ("fifo", "srtf", "tiresias", "optimus",
 * "drf", "gavel", ...; the bare name, no ":key=value" parameters), NULL if
 * none or if name is NULL. */
const shoal_policy_ops_t *shoal_policy_find(const char *name);
/* Names / one-line summaries of the registered policies, i = 0.. ; NULL for
 * i < 0 or past the end. */
const char *shoal_policy_name(int i);
const char *shoal_policy_summary(int i);

#ifdef __cplusplus
}
#endif
#endif
