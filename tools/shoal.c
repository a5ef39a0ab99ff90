/* The shoal CLI: one binary, one subcommand per area (tools/cmd_*.c). A
 * subcommand whose file is not in this build is reported as such. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shoal/shoal.h"
#include "core/log.h"

typedef int (*cmd_fn)(int argc, char **argv);
/* Weak so that the dispatcher links whatever subcommands exist. */
#define DECL(n) int shoal_cmd_##n(int argc, char **argv) __attribute__((weak));
DECL(config) DECL(launch) DECL(bench) DECL(tune) DECL(sim) DECL(sched) DECL(train) DECL(selftest) DECL(testbed) DECL(submit) DECL(serve) DECL(loadgen) DECL(flow)
#undef DECL

static const struct {
  const char *name;
  cmd_fn fn;
  const char *help;
} cmds[] = {
  {"launch", shoal_cmd_launch, "start N ranks of a program (like torchrun/mpirun)"},
  {"bench", shoal_cmd_bench, "collective benchmarks with nccl-tests columns"},
  {"tune", shoal_cmd_tune, "measure links and fit the cost model"},
  {"train", shoal_cmd_train, "data-parallel training on Fashion-MNIST"},
  {"sim", shoal_cmd_sim, "trace-driven cluster scheduling simulator"},
  {"sched", shoal_cmd_sched, "online worker/parameter-server scheduling experiments"},
  {"selftest", shoal_cmd_selftest, "run every collective once with a correctness check"},
  {"submit", shoal_cmd_submit, "submit a job to Slurm for shoal sched serve to place (docs/live.md)"},
  {"serve", shoal_cmd_serve, "inference server (Open Inference Protocol over HTTP) and its router"},
  {"loadgen", shoal_cmd_loadgen, "open-loop load generator: a request trace or Poisson/diurnal arrivals"},
  {"testbed", shoal_cmd_testbed, "an emulated multi-host cluster on this machine (namespaces, tc)"},
  {"flow", shoal_cmd_flow, "flow scheduling between jobs: host agents, controller, status (docs/flow.md)"},
  {"config", shoal_cmd_config, "print every SHOAL_* variable with its value and default"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: shoal COMMAND [options]   (shoal COMMAND --help for details)\n\ncommands:\n");
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    fprintf(f, "  %-9s %s%s\n", cmds[i].name, cmds[i].help, cmds[i].fn ? "" : " (not in this build)");
  fprintf(f, "\nshoal %s\n", SHOAL_VERSION_STRING);
}

/* Started with standard input, output or error closed, the first descriptors opened (the launcher's store
 * socket, a data file) would take their numbers and later be written to as output: /dev/null holds them. */
static void hold_standard_fds(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) != fd) return;
}

/* Output that could not be written (a full disk, /dev/full) is an error, not an exit 0 with rows lost. */
static int output_written(const char *cmd, int rc) {
  if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
  fprintf(stderr, "shoal %s: writing the standard output: %s\n", cmd, strerror(errno ? errno : EIO));
  return rc ? rc : 1;
}

int main(int argc, char **argv) {
  hold_standard_fds();
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
    printf("shoal %s\n", SHOAL_VERSION_STRING);
    return 0;
  }
  shoal__log_init();
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    if (strcmp(argv[1], cmds[i].name)) continue;
    if (!cmds[i].fn) {
      fprintf(stderr, "shoal: '%s' is not in this build\n", argv[1]);
      return 2;
    }
    return output_written(argv[1], cmds[i].fn(argc - 1, argv + 1));
  }
  fprintf(stderr, "shoal: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
