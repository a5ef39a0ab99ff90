/* The bounded command runner: input in, output and error out, the exit status, a program that is not there, and
 * a program (with a child of its own) that outlives its deadline: killed, group and all. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "core/command.h"

TEST(command_input_output_status) {
  const char *argv[] = {"sh", "-c", "cat; echo oops >&2; exit 3", NULL};
  shoal_command_result_t r;
  CHECK_OK(shoal__command_run(argv, "hello\n", 10, 0, &r));
  CHECK(!strcmp(r.out, "hello\n"));
  CHECK(!strcmp(r.err, "oops"));
  CHECK(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3);
  CHECK(!shoal__command_ok(&r));
  shoal__command_result_free(&r);
}

TEST(command_not_found) {
  const char *argv[] = {"shoal-no-such-program", NULL};
  shoal_command_result_t r;
  CHECK(shoal__command_run(argv, NULL, 10, 0, &r) == SHOAL_ERR_SYSTEM);
  CHECK_CONTAINS(shoal_last_error(), "cannot run shoal-no-such-program");
}

TEST(command_deadline_kills_the_group) {
  char pidfile[64], cmd[160];
  snprintf(pidfile, sizeof pidfile, "/tmp/shoal-cmd-%d", (int)getpid());
  snprintf(cmd, sizeof cmd, "sleep 30 & echo $! > %s; wait", pidfile);
  const char *argv[] = {"sh", "-c", cmd, NULL};
  shoal_command_result_t r;
  CHECK(shoal__command_run(argv, NULL, 0.5, 0, &r) == SHOAL_ERR_TIMEOUT);
  CHECK_CONTAINS(shoal_last_error(), "did not finish within 0.5 s");
  FILE *f = fopen(pidfile, "r");
  int pid = 0;
  CHECK(f && fscanf(f, "%d", &pid) == 1);
  fclose(f);
  unlink(pidfile);
  /* gone, or a zombie nobody reaped yet (the runner may be its subreaper): not running */
  char st[64], line[256] = "";
  snprintf(st, sizeof st, "/proc/%d/stat", pid);
  for (int i = 0; i < 50; i++) {
    FILE *p = fopen(st, "r");
    line[0] = 0;
    if (p) {
      if (!fgets(line, sizeof line, p)) line[0] = 0;
      fclose(p);
    }
    const char *close_paren = strrchr(line, ')');
    if (!p || (close_paren && close_paren[2] == 'Z')) break;
    usleep(20000);
  }
  const char *close_paren = strrchr(line, ')');
  CHECK_MSG(!line[0] || (close_paren && close_paren[2] == 'Z'), "the command's child %d outlived the deadline: %s", pid, line);
}

TEST(command_output_bounded) {
  const char *argv[] = {"sh", "-c", "head -c 100000 /dev/zero", NULL};
  shoal_command_result_t r;
  CHECK_OK(shoal__command_run(argv, NULL, 10, 1000, &r));
  CHECK_EQ(r.out_len, 1000);
  CHECK_CONTAINS(r.err, "output beyond 1000 bytes dropped");
  shoal__command_result_free(&r);
}
