/* shoal tune: measure the links of this job (same host over shared memory,
 * other hosts over TCP), fit the alpha-beta(-gamma) model, store the
 * profile in SHOAL_TUNE_FILE (keyed by the host set) and print the
 * per-size choice. Run it on every rank, like the job itself:
 *   SHOAL_TUNE_FILE=~/.cache/shoal-tune shoal launch -n 4 -- shoal tune
 * Later jobs on the same host set reuse the profile (SHOAL_TUNE=cache, the
 * default) and `shoal bench --explain` shows it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/tune/tune.h"
#include "core/config.h"
#include "shoal/comm.h"

static void usage(FILE *f) {
  fprintf(f, "usage: shoal launch -n N [--hosts ...] -- shoal tune [--file PATH] [--no-store]\n"
             "  measures latency and bandwidth per link class (same host / other host), fits the\n"
             "  alpha-beta model, stores it in PATH (default: SHOAL_TUNE_FILE) and prints the choice\n"
             "  of allreduce algorithm per size.\n");
}

int shoal_cmd_tune(int argc, char **argv) {
  int store = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--file")) {
      if (i + 1 >= argc) return fprintf(stderr, "shoal tune: --file needs a value (a path)\n"), 2;
      setenv("SHOAL_TUNE_FILE", argv[++i], 1);
    } else if (!strcmp(argv[i], "--no-store")) {
      store = 0;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "shoal tune: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  setenv("SHOAL_TUNE", "off", 1); /* the profile runs below, once */
  shoal_comm_t *c;
  if (shoal_comm_init_env(&c)) {
    fprintf(stderr, "shoal tune: %s\n", shoal_last_error());
    return 1;
  }
  int rc = shoal__tune_profile(c, store);
  if (rc) {
    fprintf(stderr, "shoal tune: rank %d: %s\n", shoal_comm_rank(c), shoal_last_error());
  } else if (shoal_comm_rank(c) == 0) {
    const char *file = shoal__config_str("SHOAL_TUNE_FILE", "");
    shoal__tune_explain(c, stdout);
    if (store && file && *file) printf("# stored in %s\n", file);
    else printf("# not stored (set SHOAL_TUNE_FILE or --file)\n");
  }
  shoal_comm_destroy(c);
  return rc ? 1 : 0;
}
