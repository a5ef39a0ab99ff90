/* Running the system commands of a testbed (ip, tc) with a deadline; the interruption of `up`. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "testbed.h"

volatile sig_atomic_t shoal__tb_interrupted;

int shoal__tb_check_interrupted(char *err, size_t cap) {
  return shoal__tb_interrupted ? shoal__tb_fail(err, cap, "interrupted by %s", strsignal(shoal__tb_interrupted)) : 0;
}

/* Run a command given as one string of space-separated words (none of ours
 * contains a space), capturing stderr; bounded by TB_CMD_DEADLINE_S. */
int shoal__tb_run(char *err, size_t cap, const char *fmt, ...) {
  char cmd[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char copy[1024], *argv[64];
  int argc = 0;
  snprintf(copy, sizeof copy, "%s", cmd);
  for (char *s = NULL, *t = strtok_r(copy, " ", &s); t && argc < 63; t = strtok_r(NULL, " ", &s)) argv[argc++] = t;
  argv[argc] = NULL;
  int pe[2];
  if (pipe2(pe, O_CLOEXEC)) return snprintf(err, cap, "pipe: %s", strerror(errno)), -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return snprintf(err, cap, "fork: %s", strerror(errno)), close(pe[0]), close(pe[1]), -1;
  if (pid == 0) {
    setpgid(0, 0); /* a ^C reaches us, not the half-done command */
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(pe[1], 2);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s", argv[0], strerror(errno));
    _exit(127);
  }
  close(pe[1]);
  char buf[512];
  size_t len = 0;
  double deadline = shoal__now_s() + TB_CMD_DEADLINE_S;
  int timed_out = 0;
  for (;;) {
    int left = (int)((deadline - shoal__now_s()) * 1000);
    if (left <= 0) {
      timed_out = 1;
      kill(pid, SIGKILL);
      break;
    }
    struct pollfd pf = {pe[0], POLLIN, 0};
    int pr = poll(&pf, 1, left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t k = read(pe[0], buf + len, sizeof buf - 1 - len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    len += (size_t)k;
    if (len >= sizeof buf - 1) len = sizeof buf - 2;
  }
  close(pe[0]);
  buf[len] = 0;
  while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) buf[--len] = 0;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return snprintf(err, cap, "'%s' did not finish within %g s", cmd, TB_CMD_DEADLINE_S), -1;
  if (!WIFEXITED(st) || WEXITSTATUS(st)) return snprintf(err, cap, "'%s' failed: %s", cmd, len ? buf : "(no message)"), -1;
  return 0;
}
