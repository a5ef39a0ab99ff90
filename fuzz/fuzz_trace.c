/* libFuzzer harness: the trace readers (Philly CSV and shoal CSV) on any
 * bytes must return 0 or an error with a message, never crash or leak.
 * Build and run: fuzz/run.sh trace [seconds]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static shoal_speed_t *speed;
  if (!speed && shoal__speed_analytic_create(&speed)) abort();
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  /* exercise the filters too, driven by the first byte */
  if (size > 0) {
    o.pollux_filter = data[0] & 1;
    o.sample = (data[0] & 2) ? 3 : 0;
    o.max_gpus = (data[0] & 4) ? 8 : 0;
  }
  shoal_workload_t w;
  if (shoal__trace_parse("fuzz.csv", (const char *)data, size, &o, speed, &w) == 0) {
    if (w.njobs > 1 && w.jobs[0].arrival != 0) abort(); /* finalize shifts time to the first arrival */
    for (long i = 1; i < w.njobs; i++)
      if (w.jobs[i].arrival < w.jobs[i - 1].arrival) abort(); /* sorted */
    shoal__workload_free(&w);
  }
  return 0;
}
