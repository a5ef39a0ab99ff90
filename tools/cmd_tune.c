/* shoal tune: measure the links of this job (same host over shared memory,
 * other hosts over TCP), fit the alpha-beta(-gamma) model, store the
 * profile in the profile file (SHOAL_TUNE_FILE, by default
 * ~/.cache/shoal/tune; keyed by the host set) and print the per-size choice.
 * Run it on every rank, like the job itself:
 *   shoal launch -n 4 -- shoal tune
 * Later jobs on the same host set reuse the profile (SHOAL_TUNE=auto, the
 * default, or cache) and `shoal bench --explain` shows it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/tune/tune.h"
#include "core/config.h"
#include "options.h"
#include "shoal/comm.h"

typedef struct tune_cli {
  const char *file;
  int no_store;
} tune_cli_t;

#define SHOAL_OPTS_STRUCT tune_cli_t
static const shoal_opt_t tune_opts[] = {
    OPT_STRING("--file", "PATH", file, "store the fitted profile in PATH", .def = "SHOAL_TUNE_FILE", .expect = "a path"),
    OPT_FLAG("--no-store", no_store, "measure, fit and print; store nothing"),
    OPT_END,
};

static const shoal_opts_spec_t tune_spec = {
    .name = "shoal tune",
    .usage = "usage: shoal launch -n N [--hosts ...] -- shoal tune [--file PATH] [--no-store]\n"
             "Measures latency and bandwidth per link class (same host / other host), fits the alpha-beta\n"
             "model, stores it and prints the choice of allreduce algorithm per size.\n",
    .opts = tune_opts,
};

int shoal_cmd_tune(int argc, char **argv) {
  tune_cli_t t = {0};
  int st = shoal_opts_parse(&tune_spec, argc, argv, &t, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  int store = !t.no_store;
  if (t.file) setenv("SHOAL_TUNE_FILE", t.file, 1);
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
    char def[4096];
    const char *file = shoal__tune_file(def, sizeof def, NULL);
    shoal__tune_explain(c, stdout);
    if (store && *file) printf("# stored in %s\n", file);
    else printf("# not stored (--no-store, or SHOAL_TUNE_FILE set to \"\")\n");
  }
  shoal_comm_destroy(c);
  return rc ? 1 : 0;
}
