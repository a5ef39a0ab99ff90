/* The registry of scheduling policies. To add one: define
 * `const shoal_policy_ops_t shoal__policy_<name>` in src/sched/policies/<name>.c and
 * add ONE line to the list below (order = order in `shoal sim --help`). */
#include <string.h>

#include "shoal/sched.h"
#include "sched/policy.h"

#define POLICIES(X) \
  X(fifo)           \
  X(srtf)           \
  X(tiresias)       \
  X(optimus)        \
  X(drf)            \
  X(gavel)          \
  X(larr)           \
  X(oasis)          \
  X(greedy)         \
  X(elastic)        \
  X(marl)

#define DECLARE(n) extern const shoal_policy_ops_t shoal__policy_##n;
POLICIES(DECLARE)
#undef DECLARE

static const shoal_policy_ops_t *const registry[] = {
#define ENTRY(n) &shoal__policy_##n,
    POLICIES(ENTRY)
#undef ENTRY
};

const shoal_policy_ops_t *shoal__policy_at(int i) {
  if (i < 0 || i >= (int)(sizeof registry / sizeof registry[0])) return NULL;
  return registry[i];
}

const shoal_policy_ops_t *shoal__policy_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; shoal__policy_at(i); i++)
    if (!strcmp(registry[i]->name, name)) return registry[i];
  return NULL;
}

const shoal_policy_ops_t *shoal_policy_find(const char *name) { return shoal__policy_find(name); }
const char *shoal_policy_name(int i) { return shoal__policy_at(i) ? shoal__policy_at(i)->name : NULL; }
const char *shoal_policy_summary(int i) { return shoal__policy_at(i) ? shoal__policy_at(i)->summary : NULL; }
