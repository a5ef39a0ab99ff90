/* shoal config [--markdown]: the one table of SHOAL_* variables. */
#include <stdio.h>
#include <string.h>

#include "core/config.h"

int shoal_cmd_config(int argc, char **argv) {
  int md = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--markdown")) md = 1;
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: shoal config [--markdown]\n"
             "Print every SHOAL_* variable: current value, default, area and meaning.\n");
      return 0;
    } else {
      fprintf(stderr, "shoal config: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  shoal__config_print(stdout, md);
  return 0;
}
