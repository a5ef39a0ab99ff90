/* shoal config [--markdown]: the one table of SHOAL_* variables. */
#include <stdio.h>

#include "core/config.h"
#include "options.h"

typedef struct config_cli {
  int markdown;
} config_cli_t;

#define SHOAL_OPTS_STRUCT config_cli_t
static const shoal_opt_t config_opts[] = {
    OPT_FLAG("--markdown", markdown, "a Markdown table (the one in README.md)"),
    OPT_END,
};

static const shoal_opts_spec_t config_spec = {
    .name = "shoal config",
    .usage = "usage: shoal config [--markdown]\n"
             "Print every SHOAL_* variable: current value, default, area and meaning.\n",
    .opts = config_opts,
};

int shoal_cmd_config(int argc, char **argv) {
  config_cli_t c = {0};
  int st = shoal_opts_parse(&config_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  shoal__config_print(stdout, c.markdown);
  return 0;
}
