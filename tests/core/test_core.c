/* Core layer: status strings, configuration parsing, RNG, the config table. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "core/rng.h"

TEST(status_strings_distinct) {
  for (int s = 0; s > SHOAL_ERR__LAST; s--) {
    CHECK(strcmp(shoal_status_string(s), "unknown status") != 0);
    for (int t = s - 1; t > SHOAL_ERR__LAST; t--) CHECK(strcmp(shoal_status_string(s), shoal_status_string(t)) != 0);
  }
  CHECK(!strcmp(shoal_status_string(12345), "unknown status"));
}

TEST(config_parse_errors_name_variable) {
  long v = 7;
  setenv("SHOAL_TEST_X", "12abc", 1);
  CHECK_EQ(shoal__config_long("SHOAL_TEST_X", 1, 0, 100, &v), SHOAL_ERR_CONFIG);
  CHECK_EQ(v, 7); /* untouched on error */
  CHECK_CONTAINS(shoal_last_error(), "SHOAL_TEST_X='12abc'");
  setenv("SHOAL_TEST_X", "1000", 1);
  CHECK_EQ(shoal__config_long("SHOAL_TEST_X", 1, 0, 100, &v), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "out of range");
  setenv("SHOAL_TEST_X", "42", 1);
  CHECK_OK(shoal__config_long("SHOAL_TEST_X", 1, 0, 100, &v));
  CHECK_EQ(v, 42);
  unsetenv("SHOAL_TEST_X");
  CHECK_OK(shoal__config_long("SHOAL_TEST_X", 5, 0, 100, &v));
  CHECK_EQ(v, 5);
  double d = 0;
  setenv("SHOAL_TEST_D", "nan", 1);
  CHECK_EQ(shoal__config_double("SHOAL_TEST_D", 1, 0, 10, &d), SHOAL_ERR_CONFIG);
  setenv("SHOAL_TEST_D", "2.5", 1);
  CHECK_OK(shoal__config_double("SHOAL_TEST_D", 1, 0, 10, &d));
  CHECK_NEAR(d, 2.5, 0);
  int b = 0;
  setenv("SHOAL_TEST_B", "maybe", 1);
  CHECK_EQ(shoal__config_bool("SHOAL_TEST_B", 0, &b), SHOAL_ERR_CONFIG);
  setenv("SHOAL_TEST_B", "yes", 1);
  CHECK_OK(shoal__config_bool("SHOAL_TEST_B", 0, &b));
  CHECK_EQ(b, 1);
}

/* SHOAL_CONF_FILE as a shell reads VAR=value lines: blanks around '=', `export`, quotes, comments after a
 * blank, values of any length, the later of two assignments; unknown variables and launcher variables
 * are ignored (reported); a malformed line is an error of shoal_comm_init (shoal__config_check) naming
 * the file and line, and a value of the file that does not parse names them too. The environment wins. */
TEST(config_file_defaults_env_wins) {
  char path[] = "/tmp/shoal-conf-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *f = fdopen(fd, "w");
  char token[301];
  memset(token, 'x', 300);
  token[300] = '\0';
  fprintf(f, "# comment\nSHOAL_SPIN_US = 11\n  export SHOAL_SOCKET_BUFFER=22   # trailing comment\n"
             "SHOAL_TOKEN=\"a b#c\"\nSHOAL_TIMEOUT=7\nSHOAL_TIMEOUT=9\nSHOAL_TIMEOUTT=1\nRANK=3\nnot a line\n"
             "SHOAL_CONNECT_TIMEOUT=abc\nSHOAL_JOB_ID=%s\nSHOAL_CONF_FILE=/other\nSHOAL_LIBRARY=/x.so\n", token);
  fclose(f);
  setenv("SHOAL_CONF_FILE", path, 1);
  setenv("SHOAL_SOCKET_BUFFER", "33", 1);
  unsetenv("RANK");
  long v;
  CHECK_OK(shoal__config_long("SHOAL_SPIN_US", 0, 0, 100, &v));
  CHECK_EQ(v, 11);
  CHECK_OK(shoal__config_long("SHOAL_SOCKET_BUFFER", 0, 0, 100, &v));
  CHECK_EQ(v, 33); /* the environment wins */
  CHECK(!strcmp(shoal__config_str("SHOAL_TOKEN", ""), "a b#c"));
  CHECK_OK(shoal__config_long("SHOAL_TIMEOUT", 0, 0, 100, &v));
  CHECK_EQ(v, 9);
  CHECK(shoal__config_raw("SHOAL_TIMEOUTT") == NULL && shoal__config_raw("RANK") == NULL);
  /* read before the file (its own name; the library Python loads first): ignored there, not shown as set */
  unsetenv("SHOAL_LIBRARY");
  CHECK(shoal__config_raw("SHOAL_LIBRARY") == NULL);
  CHECK(!strcmp(shoal__config_raw("SHOAL_CONF_FILE"), path));
  CHECK_EQ(strlen(shoal__config_str("SHOAL_JOB_ID", "")), 300);
  double d;
  CHECK_EQ(shoal__config_double("SHOAL_CONNECT_TIMEOUT", 1, 0, 100, &d), SHOAL_ERR_CONFIG);
  char want[128];
  snprintf(want, sizeof want, "SHOAL_CONNECT_TIMEOUT='abc': not a number (set in %s:10)", path);
  CHECK_CONTAINS(shoal_last_error(), want);
  CHECK_EQ(shoal__config_check(), SHOAL_ERR_CONFIG);
  snprintf(want, sizeof want, "%s:9: expected VAR=value: 'not a line'", path);
  CHECK_CONTAINS(shoal_last_error(), want);
  unlink(path);
}

/* A NUL byte inside a line of SHOAL_CONF_FILE: an error naming the file, the line and the column (the value
 * was cut at it, silently); the line is not used, the others are. */
TEST(config_file_nul_byte_named) {
  char path[] = "/tmp/shoal-conf-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  static const char text[] = "SHOAL_JOB_ID=ab\0cd\nSHOAL_SPIN_US=5\n";
  CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
  close(fd);
  setenv("SHOAL_CONF_FILE", path, 1);
  unsetenv("SHOAL_JOB_ID");
  unsetenv("SHOAL_SPIN_US");
  long v;
  CHECK_OK(shoal__config_long("SHOAL_SPIN_US", 0, 0, 100, &v));
  CHECK_EQ(v, 5);
  CHECK(shoal__config_raw("SHOAL_JOB_ID") == NULL);
  CHECK_EQ(shoal__config_check(), SHOAL_ERR_CONFIG);
  char want[128];
  snprintf(want, sizeof want, "%s:1: a NUL byte at column 16", path);
  CHECK_CONTAINS(shoal_last_error(), want);
  unlink(path);
}

/* Numbers are decimal: no hex, inf or nan for real values (strtod takes them); blanks around are fine. */
TEST(config_numbers_decimal_blanks_either_side) {
  double d;
  long l;
  CHECK_EQ(shoal__parse_double("X", "0x10", 0, 100, &d), SHOAL_ERR_CONFIG);
  CHECK_EQ(shoal__parse_double("X", "inf", 0, INFINITY, &d), SHOAL_ERR_CONFIG);
  CHECK_EQ(shoal__parse_double("X", "nan", 0, 100, &d), SHOAL_ERR_CONFIG);
  CHECK_OK(shoal__parse_double("X", "\t2.5e1\t", 0, 100, &d));
  CHECK_NEAR(d, 25.0, 0);
  CHECK_OK(shoal__parse_long("X", " 42\t", 0, 100, &l));
  CHECK_EQ(l, 42);
}

TEST(rng_deterministic_and_uniform) {
  shoal_rng_t a, b;
  shoal_rng_seed(&a, 42);
  shoal_rng_seed(&b, 42);
  for (int i = 0; i < 1000; i++) CHECK(shoal_rng_u64(&a) == shoal_rng_u64(&b));
  shoal_rng_seed2(&b, 42, 1);
  CHECK(shoal_rng_u64(&a) != shoal_rng_u64(&b));
  /* chi-square on 10 bins, 100k draws: 99.9% critical value for 9 dof is 27.9 */
  int bins[10] = {0};
  for (int i = 0; i < 100000; i++) bins[shoal_rng_below(&a, 10)]++;
  double chi = 0;
  for (int i = 0; i < 10; i++) chi += (bins[i] - 10000.0) * (bins[i] - 10000.0) / 10000.0;
  CHECK_MSG(chi < 27.9, "chi2 %.2f", chi);
  double s = 0, s2 = 0;
  for (int i = 0; i < 100000; i++) {
    double x = shoal_rng_normal(&a);
    s += x;
    s2 += x * x;
  }
  CHECK_NEAR(s / 100000, 0.0, 0.02);
  CHECK_NEAR(s2 / 100000, 1.0, 0.03);
  double e = 0;
  for (int i = 0; i < 100000; i++) e += shoal_rng_exponential(&a, 2.0);
  CHECK_NEAR(e / 100000, 0.5, 0.01);
  uint32_t p[100];
  for (uint32_t i = 0; i < 100; i++) p[i] = i;
  shoal_rng_shuffle_u32(&a, p, 100);
  int seen[100] = {0};
  for (int i = 0; i < 100; i++) seen[p[i]]++;
  for (int i = 0; i < 100; i++) CHECK_EQ(seen[i], 1);
}

TEST(deadline_counts_down) {
  shoal__deadline_t d = shoal__deadline_in(0.05);
  CHECK(!shoal__deadline_passed(d));
  CHECK(shoal__deadline_ms_left(d) <= 50);
  shoal__sleep_s(0.06);
  CHECK(shoal__deadline_passed(d));
  CHECK_EQ(shoal__deadline_ms_left(d), 0);
  shoal__deadline_t none = {0};
  CHECK_EQ(shoal__deadline_ms_left(none), -1);
}

static int in_table(const char *name) {
  for (size_t i = 0; i < shoal__config_nvars; i++)
    if (!strcmp(shoal__config_vars[i].name, name)) return 1;
  return 0;
}

/* Every SHOAL_* name quoted in the sources is in the one table, and the
 * README documents every row of the table. */
TEST(config_table_complete) {
  char out[65536];
  int st = shoal_test_run_cmd("grep -rhoE '\"SHOAL_[A-Z0-9_]+\"' src tools | sort -u", out, sizeof out, 20);
  if (st != 0) shoal_test_skip("source tree not available");
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    char name[128];
    if (sscanf(line, "\"%127[A-Z0-9_]\"", name) != 1) continue;
    if (!strncmp(name, "SHOAL_TEST", 10)) continue;
    CHECK_MSG(in_table(name), "%s is read in src/ but missing from src/core/config_table.c", name);
  }
  FILE *f = fopen("README.md", "r");
  CHECK_MSG(f != NULL, "README.md not found (run from the repository root)");
  static char readme[1 << 20];
  size_t n = fread(readme, 1, sizeof readme - 1, f);
  readme[n] = '\0';
  fclose(f);
  for (size_t i = 0; i < shoal__config_nvars; i++) {
    char quoted[128];
    snprintf(quoted, sizeof quoted, "`%s`", shoal__config_vars[i].name);
    CHECK_MSG(strstr(readme, quoted) != NULL, "README.md does not document %s", shoal__config_vars[i].name);
  }
}

TEST(cli_config_prints_table) {
  char out[65536], cmd[512];
  snprintf(cmd, sizeof cmd, "%s config", shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 20), 0);
  CHECK_CONTAINS(out, "SHOAL_TIMEOUT");
  snprintf(cmd, sizeof cmd, "%s nosuchcommand", shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "unknown command 'nosuchcommand'");
  /* a bad log level or subsystem is reported, naming the variable (logging has no call to fail) */
  snprintf(cmd, sizeof cmd, "SHOAL_DEBUG=LOUD SHOAL_DEBUG_SUBSYS=NET,FOO %s config 2>&1", shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 20), 0);
  CHECK_CONTAINS(out, "SHOAL_DEBUG=LOUD is not a log level");
  CHECK_CONTAINS(out, "SHOAL_DEBUG_SUBSYS: unknown subsystem 'FOO'");
  snprintf(cmd, sizeof cmd, "SHOAL_DEBUG=info SHOAL_DEBUG_SUBSYS=^coll,NET %s config 2>&1", shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 20), 0);
  CHECK_MSG(strstr(out, "WARN INIT") == NULL, "valid SHOAL_DEBUG values reported: %s", out);
  /* the logger reads SHOAL_CONF_FILE like every other variable; a malformed line is reported */
  char conf[] = "/tmp/shoal-test-conf-XXXXXX";
  int fd = mkstemp(conf);
  CHECK(fd >= 0);
  const char text[] = "SHOAL_DEBUG=LOUD\nnot a setting\n";
  CHECK_EQ(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  snprintf(cmd, sizeof cmd, "env -u SHOAL_DEBUG SHOAL_CONF_FILE=%s %s config 2>&1", conf, shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  unlink(conf);
  CHECK_EQ(st, 0);
  CHECK_CONTAINS(out, "SHOAL_DEBUG=LOUD is not a log level");
  CHECK_CONTAINS(out, ":2: expected VAR=value: 'not a setting'");
}

/* A named input that is not a regular file is refused at once: a FIFO would block the open (or the read)
 * forever, a device such as /dev/zero reads without end, a directory reads as nothing. */
TEST(fopen_input_regular_files_only) {
  FILE *f = NULL;
  char fifo[64];
  snprintf(fifo, sizeof fifo, "/tmp/shoal-fifo-%d", (int)getpid());
  CHECK(mkfifo(fifo, 0600) == 0);
  CHECK_EQ(shoal__fopen_input(fifo, "trace", &f), SHOAL_ERR_IO);
  CHECK_CONTAINS(shoal_last_error(), "a FIFO (expected a regular file)");
  unlink(fifo);
  CHECK_EQ(shoal__fopen_input("/tmp", "trace", &f), SHOAL_ERR_IO);
  CHECK_CONTAINS(shoal_last_error(), "trace /tmp: a directory");
  CHECK_EQ(shoal__fopen_input("/dev/zero", "trace", &f), SHOAL_ERR_IO);
  CHECK_EQ(shoal__fopen_input("/nonexistent-shoal-file", "trace", &f), SHOAL_ERR_NOT_FOUND);
  CHECK(f == NULL); /* set only on success */
  char path[] = "/tmp/shoal-regular-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, "x\n", 2) == 2);
  close(fd);
  CHECK_OK(shoal__fopen_input(path, "trace", &f));
  CHECK(f && fgetc(f) == 'x');
  CHECK_EQ(shoal__utf8_bom("\xEF\xBB\xBF" "arrival", 10), 3); /* a byte order mark, skipped by the readers */
  CHECK_EQ(shoal__utf8_bom("\xEF\xBB", 2), 0);
  CHECK_EQ(shoal__utf8_bom("arrival", 7), 0);
  fclose(f);
  unlink(path);
}

/* The whole-file reader keeps shoal__fopen_input's refusals (a FIFO is refused at once, not read forever),
 * reads exactly up to its cap and no further, and ends the text with a NUL; outputs are set only on success. */
TEST(file_read_all_regular_files_within_cap) {
  char *buf = NULL;
  size_t len = 7;
  char fifo[64];
  snprintf(fifo, sizeof fifo, "/tmp/shoal-fifo-all-%d", (int)getpid());
  CHECK(mkfifo(fifo, 0600) == 0);
  CHECK_EQ(shoal__file_read_all(fifo, "weights file", 1024, &buf, &len), SHOAL_ERR_IO);
  CHECK_CONTAINS(shoal_last_error(), "weights file /tmp/shoal-fifo-all-");
  CHECK_CONTAINS(shoal_last_error(), ": a FIFO (expected a regular file)");
  unlink(fifo);
  CHECK_EQ(shoal__file_read_all("/nonexistent-shoal-file", "trace", 1024, &buf, &len), SHOAL_ERR_NOT_FOUND);
  CHECK(buf == NULL && len == 7);
  char path[] = "/tmp/shoal-readall-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  static char big[200000];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
  CHECK(write(fd, big, sizeof big) == (ssize_t)sizeof big);
  close(fd);
  CHECK_OK(shoal__file_read_all(path, "trace", sizeof big, &buf, &len)); /* exactly the cap: read */
  CHECK(len == sizeof big && !memcmp(buf, big, len) && buf[len] == 0);
  free(buf);
  buf = NULL;
  CHECK_EQ(shoal__file_read_all(path, "trace", sizeof big - 1, &buf, &len), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "trace /tmp/shoal-readall-");
  CHECK_CONTAINS(shoal_last_error(), ": larger than 199999 bytes");
  CHECK_EQ(shoal__file_read_all(path, "model", (size_t)1 << 20, &buf, &len), 0);
  free(buf);
  buf = NULL;
  CHECK((fd = open(path, O_WRONLY | O_TRUNC)) >= 0);
  close(fd);
  CHECK_OK(shoal__file_read_all(path, "trace", 16, &buf, &len)); /* empty: an empty text */
  CHECK(len == 0 && buf && buf[0] == 0);
  free(buf);
  unlink(path);
}

/* Every command and sub-command answers -h and --help: usage on stdout, exit 0, every option of its table
 * listed (the options module prints them from the table) and nothing started. */
TEST_T(cli_every_command_answers_help, 60) {
  static const char *const cmds[] = {
      "config", "tune", "selftest", "bench", "bench allreduce", "launch", "train", "train --plot x", "sim",
      "sched", "sched run", "sched lp-bound", "sched decide-time", "sched serve", "submit", "testbed",
      "testbed up", "testbed down", "testbed status", "testbed set", "testbed exec", "serve", "loadgen"};
  static char out[1 << 16];
  char cmd[512];
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    for (int k = 0; k < 2; k++) {
      snprintf(cmd, sizeof cmd, "%s %s %s 2>/dev/null", shoal_test_cli(), cmds[i], k ? "-h" : "--help");
      int st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
      CHECK_MSG(st == 0, "shoal %s %s: status %d: %s", cmds[i], k ? "-h" : "--help", st, out);
      CHECK_MSG(strncmp(out, "usage: ", 7) == 0, "shoal %s --help: no usage first: %s", cmds[i], out);
    }
}

/* The options module: --name=value as --name value; a flag given a value, a value missing, an unknown
 * option and an option outside its modes are errors (exit 2) naming the option and what it accepts. */
TEST_T(cli_options_parse_and_name_what_they_accept, 60) {
  static const struct {
    const char *args, *want;
  } bad[] = {
      {"sim --csv=1", "shoal sim: --csv takes no value (given '1')"},
      {"sim --load", "shoal sim: --load needs a value (a number in [1e-06, 100])"},
      {"sim --bogus", "shoal sim: unknown option '--bogus' (see shoal sim --help)"},
      {"sim --synthetic 1e9", "shoal sim: --synthetic='1e9': out of range [1, 100000000]"},
      {"sim --synthetic 2.5", "shoal sim: --synthetic='2.5': not an integer"},
      {"sim --arrivals often", "shoal sim: --arrivals 'often': expected bursty or poisson"},
      {"sim --synthetic 5 --gpu k80", "shoal sim: --gpu applies to --speed table only (the speed model is analytic)"},
      {"bench allreduce --seconds 3", "shoal bench: --seconds applies with --steps only"},
      {"launch -n 2 --per-host 1 -- true", "shoal launch: --per-host needs --testbed"},
      {"testbed up --rate=fast", "shoal testbed up: --rate 'fast': expected a rate like 1gbit"},
  };
  static char out[1 << 16];
  char cmd[512];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", shoal_test_cli(), bad[i].args);
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 2, "shoal %s: status %d: %s", bad[i].args, st, out);
    CHECK_MSG(strstr(out, bad[i].want) != NULL, "shoal %s: expected \"%s\" in: %s", bad[i].args, bad[i].want, out);
  }
  /* the same run spelled both ways prints the same rows */
  static char out2[1 << 16];
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 20 --machines 2 --policy fifo --csv --no-progress | cut -d, -f1-16",
           shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 30), 0);
  snprintf(cmd, sizeof cmd, "%s sim --synthetic=20 --machines=2 --policy=fifo --csv --no-progress | cut -d, -f1-16",
           shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out2, sizeof out2, 30), 0);
  CHECK_MSG(strcmp(out, out2) == 0, "--name=value differs from --name value:\n%s\n%s", out, out2);
}
