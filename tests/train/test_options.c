/* What a training user can get wrong on the command line: options of another
 * strategy, pattern or mode, integers that overflow, ps on one process. Each
 * must be a clear error naming the option, never silently ignored. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../runner.h"

static void expect_error(const char *args, const char *want) {
  char cmd[1024], out[4096];
  /* a data dir that does not exist: a run that got past option checking fails differently */
  snprintf(cmd, sizeof cmd, "%s train --data /nonexistent-shoal-data --epochs 1 %s", shoal_test_cli(), args);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(st != 0, "'%s' succeeded: %s", args, out);
  CHECK_MSG(strstr(out, want) != NULL, "'%s': expected \"%s\" in: %s", args, want, out);
}

TEST_T(cli_options_of_another_strategy_are_errors, 60) {
  expect_error("--ps-mode async", "--ps-mode does not apply to --sync bsp (it is a setting of ps)");
  expect_error("--servers 2", "--servers does not apply to --sync bsp");
  expect_error("--sync dssync --local-h 4", "--local-h does not apply to --sync dssync (it is a setting of localsgd)");
  expect_error("--sync localsgd --ds-k 4", "--ds-k does not apply to --sync localsgd");
  expect_error("--sync ps --bucket-kb 64", "--bucket-kb does not apply to --sync ps");
  expect_error("--consensus-every 5", "--consensus-every does not apply to --sync bsp");
  expect_error("--sync dssync --racks 0,0,1,1", "--racks applies to --ds-pattern topo only (this run: --ds-pattern butterfly)");
  expect_error("--sync dssync --ds-pattern random --bridge-period 3", "--bridge-period applies to --ds-pattern topo only");
  expect_error("--sync ps --staleness 3", "--staleness applies to --ps-mode ssp only (this run: --ps-mode sync)");
}

TEST_T(cli_options_that_need_another_are_errors, 60) {
  expect_error("--checkpoint-every 2", "--checkpoint-every needs --checkpoint FILE");
  expect_error("--decay-gamma 0.5", "--decay-gamma needs --decay-epochs");
  expect_error("--grow-every 3", "--grow-every applies with --on-failure shrink only");
}

TEST_T(cli_integers_do_not_overflow, 60) {
  expect_error("--max-iters 3000000000", "--max-iters='3000000000': out of range");
  expect_error("--max-iters 2.5", "--max-iters='2.5': not an integer");
  expect_error("--epochs 1e6", "--epochs='1e6': out of range");
  expect_error("--classes 300", "--classes='300': out of range");
}

TEST_T(cli_ps_on_one_process, 60) {
  char cmd[1024], out[4096];
  /* needs the data set: the check comes after the options, in the runtime */
  snprintf(cmd, sizeof cmd, "env -u SHOAL_WORLD_SIZE -u WORLD_SIZE %s train --sync ps --epochs 1 --train-subset 512",
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(st != 0, "succeeded: %s", out);
  CHECK_CONTAINS(out, "--sync ps needs at least 2 processes");
  CHECK_CONTAINS(out, "shoal launch -n N");
}

/* Every option the parser accepts is in --help (the list is the parser's). */
TEST_T(cli_help_lists_every_option, 30) {
  static const char *const opts[] = {
      "--batch", "--bridge-period", "--bridge-width", "--bucket-kb", "--checkpoint", "--checkpoint-every",
      "--classes", "--consensus-every", "--csv", "--data", "--decay-epochs", "--decay-gamma", "--ds-global-every",
      "--ds-k", "--ds-overlap", "--ds-pattern", "--epochs", "--grow-every", "--iter-log", "--label", "--local-h",
      "--lr", "--max-iters", "--model", "--momentum", "--no-overlap", "--on-failure", "--params-out", "--plot",
      "--preemptible", "--ps-mode", "--quiet", "--racks", "--resume", "--seed", "--servers", "--slow-worker-ms",
      "--staleness", "--straggle", "--sync", "--sync-config", "--test-subset", "--threads", "--title",
      "--train-subset", "--warmup", "--wd"};
  char cmd[1024], out[16384];
  snprintf(cmd, sizeof cmd, "%s train --help", shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 30), 0);
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    CHECK_MSG(strstr(out, opts[i]) != NULL, "--help does not mention %s", opts[i]);
}

/* --decay-epochs E drops the lr once E epochs are done (sgd_momentum_and_schedule pins the rates); an E
 * the run never reaches is said, not silently a no-op, and a list longer than the options hold is an error. */
TEST_T(cli_decay_epochs_beyond_the_run, 60) {
  expect_error("--epochs 3 --decay-epochs 2,3",
               "--decay-epochs 3: the lr drops once 3 epochs are done (from epoch 4 on), but this run ends after "
               "epoch 3: no drop in it");
  expect_error("--decay-epochs 1,2,3,4,5,6,7,8,9", "--decay-epochs '1,2,3,4,5,6,7,8,9': at most 8 epochs");
  expect_error("--decay-epochs 0", "expected a comma list of epochs >= 1");
}

/* Accepted: the run gets past option checking to reading the (missing) data. */
static void expect_accepted(const char *args) { expect_error(args, "/nonexistent-shoal-data"); }

/* --sync-config is checked in one process too (where no strategy runs), a key of it replaces the value
 * an option would give (both at once is an error naming both), and an option that only matters with
 * another one is refused without it. */
TEST_T(cli_sync_config_and_combinations, 60) {
  expect_error("--sync-config garbage", "sync config 'garbage': expected key=value");
  expect_error("--sync dssync --sync-config k=abc", "sync config dssync: k=abc: expected an integer");
  expect_error("--sync-config period=3", "'period' is not a setting of bsp");
  expect_accepted("--sync dssync --sync-config k=3");
  expect_accepted("--sync dssync --sync-config pattern=random");
  expect_accepted("--sync localsgd --sync-config period=3");
  expect_error("--sync dssync --ds-k 3 --sync-config k=4",
               "--ds-k and --sync-config k=... both set dssync's k: give one of them");
  expect_error("--sync localsgd --local-h 2 --sync-config 'seed=1;period=4'", "--local-h and --sync-config period=...");
  expect_error("--on-failure shrink --sync localsgd", "--on-failure shrink: bsp only (this run is --sync localsgd");
  expect_error("--grow-every 5", "--grow-every applies with --on-failure shrink only");
  expect_accepted("--grow-every 5 --on-failure shrink");
}

/* shoal train joins a world by the library's own rules: a lone rank variable (any launcher family) or one
 * in SHOAL_CONF_FILE is the library's error, not a run of one worker; SHOAL_JOIN takes the library's
 * boolean spellings and refuses others. */
TEST_T(cli_train_world_variables_as_the_library, 60) {
  static const char *const cases[][2] = {
      {"SHOAL_RANK=1", "SHOAL_RANK is set but SHOAL_WORLD_SIZE is not"},
      {"RANK=1", "RANK is set but WORLD_SIZE is not"},
      {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"},
      {"SHOAL_JOIN=maybe", "SHOAL_JOIN='maybe': expected 0/1"},
  };
  char cmd[1024], out[4096];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(cmd, sizeof cmd, "env -u SHOAL_CONF_FILE %s %s train --data /nonexistent-shoal-data --epochs 1",
             cases[i][0], shoal_test_cli());
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
    CHECK_MSG(st != 0, "%s: succeeded: %s", cases[i][0], out);
    CHECK_MSG(strstr(out, cases[i][1]) != NULL, "%s: expected \"%s\" in: %s", cases[i][0], cases[i][1], out);
  }
  char conf[] = "/tmp/shoal-train-conf-XXXXXX";
  int fd = mkstemp(conf);
  CHECK(fd >= 0);
  CHECK(write(fd, "SHOAL_RANK=1\n", 13) == 13);
  close(fd);
  snprintf(cmd, sizeof cmd, "SHOAL_CONF_FILE=%s %s train --data /nonexistent-shoal-data --epochs 1", conf,
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  unlink(conf);
  CHECK_MSG(st != 0 && strstr(out, "SHOAL_RANK is set but SHOAL_WORLD_SIZE is not"), "conf file: %s", out);
}

/* Logs and outputs that cannot be written (a full disk: /dev/full) fail the run naming the file and the
 * reason; they were lost with exit 0. /dev/full stays a device (a failed --params-out is removed only when
 * it is a regular file). */
TEST_T(cli_unwritable_outputs_fail_the_run, 60) {
  static const char *const outs[][2] = {{"--csv /dev/full", "--csv /dev/full: cannot write: No space left on device"},
                                        {"--iter-log /dev/full", "--iter-log /dev/full: cannot write: No space left"},
                                        {"--params-out /dev/full", "--params-out /dev/full: write failed: No space"}};
  for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s train --model softmax --train-subset 64 --test-subset 32 --epochs 1 --quiet %s",
             shoal_test_cli(), outs[k][0]);
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
    CHECK_MSG(st != 0 && strstr(out, outs[k][1]), "'%s': status %d: %s", outs[k][0], st, out);
  }
  CHECK(access("/dev/full", F_OK) == 0);
}
