/* libFuzzer harness: the JSON reader used for cluster files and Gavel's
 * throughput table. Run: fuzz/run.sh json [seconds]. */
#include <stdint.h>

#include "sched/model/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  shoal_json_t *j;
  if (shoal__json_parse("fuzz.json", (const char *)data, size, &j) == 0) {
    (void)shoal__json_get(j, "v100");
    shoal__json_free(j);
  }
  return 0;
}
