/* Multi-process helpers shared by the test files. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int shoal_test_fork_ranks(int n, int (*fn)(int rank, void *arg), void *arg, double timeout_s, int *statuses) {
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  int ok = 0;
  fflush(NULL);
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* ranks never outlive the test that forked them */
      int rc = fn(r, arg);
      fflush(NULL);
      _exit(rc);
    }
    pids[r] = pid;
    if (statuses) statuses[r] = -1;
  }
  int left = n;
  double end = now_s() + timeout_s;
  while (left > 0) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < n; r++)
        if (pids[r] == pid) {
          if (statuses) statuses[r] = st;
          if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
          pids[r] = 0;
          left--;
        }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (now_s() > end) {
      for (int r = 0; r < n; r++)
        if (pids[r] > 0) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], NULL, 0);
          pids[r] = 0;
        }
      break;
    }
    usleep(2000);
  }
  free(pids);
  return ok;
}

int shoal_test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

const char *shoal_test_cli(void) {
  const char *b = getenv("SHOAL_BIN");
  return b && *b ? b : "build/shoal";
}

int shoal_test_run_cmd(const char *cmd, char *out, size_t cap, double timeout_s) {
  int pfd[2];
  if (pipe(pfd)) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    close(pfd[0]);
    close(pfd[1]);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  setpgid(pid, pid);
  close(pfd[1]);
  size_t used = 0;
  double end = now_s() + timeout_s;
  int status = -1, done = 0;
  for (;;) {
    int ms = (int)((end - now_s()) * 1000);
    if (ms <= 0) {
      kill(-pid, SIGKILL);
      break;
    }
    struct pollfd p = {pfd[0], POLLIN, 0};
    int pr = poll(&p, 1, ms > 100 ? 100 : ms);
    if (pr > 0) {
      char tmp[4096];
      ssize_t r = read(pfd[0], tmp, sizeof tmp);
      if (r <= 0) {
        done = 1;
        break;
      }
      size_t k = (size_t)r;
      if (cap && used + k > cap - 1) k = cap - 1 - used;
      if (out && k) memcpy(out + used, tmp, k);
      used += k;
    }
  }
  close(pfd[0]);
  if (out && cap) out[used < cap ? used : cap - 1] = '\0';
  if (!done) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  /* the pipe closed: wait for the exit, bounded */
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (now_s() > end) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(2000);
  }
  return status;
}
