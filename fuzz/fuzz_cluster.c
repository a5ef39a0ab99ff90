/* libFuzzer harness: cluster files (INI and JSON). A file that parses must
 * describe a cluster that can be built. Run: fuzz/run.sh cluster [seconds]. */
#include <stdint.h>
#include <stdlib.h>

#include "sched/model/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  if (shoal__cluster_spec_parse("fuzz.ini", (const char *)data, size, &cs) == 0) {
    long machines = 0;
    for (int i = 0; i < cs.ngroups; i++) machines += cs.group[i].machines;
    if (machines <= 4096) { /* keep each input cheap */
      shoal_cluster_t *c;
      if (shoal__cluster_create(&cs, &c)) abort(); /* validated => buildable */
      shoal__cluster_destroy(c);
    }
  }
  return 0;
}
