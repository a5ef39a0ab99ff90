/* Bounded command runner (command.h). The child gets its own process group so
 * that the deadline kills whatever it started too (a shell's children, a
 * wrapper's exec). SIGPIPE from writing the input to a child that stopped
 * reading is blocked for the writing thread and consumed, never delivered. */
#include "core/command.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"

typedef struct sink {
  char *b;
  size_t n, cap, max, dropped;
} sink_t;

static int sink_read(sink_t *s, int fd) {
  char tmp[8192];
  ssize_t k = read(fd, tmp, sizeof tmp);
  if (k < 0) return errno == EINTR || errno == EAGAIN ? 1 : 0;
  if (k == 0) return 0;
  size_t take = (size_t)k;
  if (s->n + take > s->max) {
    s->dropped += s->n + take - s->max;
    take = s->max > s->n ? s->max - s->n : 0;
  }
  if (s->n + take + 1 > s->cap) {
    size_t nc = s->cap ? s->cap : 4096;
    while (nc < s->n + take + 1) nc *= 2;
    char *nb = realloc(s->b, nc);
    if (!nb) {
      s->dropped += take;
      return 1;
    }
    s->b = nb, s->cap = nc;
  }
  memcpy(s->b + s->n, tmp, take);
  s->n += take;
  s->b[s->n] = 0;
  return 1;
}

static char *sink_take(sink_t *s) {
  if (!s->b) s->b = calloc(1, 1);
  return s->b;
}

/* write what the child still takes of the input; -1 when it closed its end */
static ssize_t write_nopipe(int fd, const char *p, size_t n) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  ssize_t w = write(fd, p, n);
  if (w < 0 && errno == EPIPE) {
    struct timespec zero = {0, 0};
    sigtimedwait(&block, NULL, &zero); /* the pending SIGPIPE this write raised */
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return w;
}

static void child_exec(const char *const *argv, int in, int out, int err) {
  setpgid(0, 0);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  signal(SIGPIPE, SIG_DFL);
  execvp(argv[0], (char *const *)argv);
  dprintf(2, "cannot run %s: %s", argv[0], strerror(errno));
  _exit(127);
}

typedef struct run {
  pid_t pid;
  int fin, fout, ferr; /* parent's ends, -1 once closed */
  const char *input;
  size_t in_left;
  sink_t out, err;
} run_t;

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* one poll round over the open pipes; -1 when the deadline passed */
static int pump(run_t *r, shoal__deadline_t dl) {
  struct pollfd pf[3];
  int n = 0, iin = -1, iout = -1, ierr = -1;
  if (r->fin >= 0) iin = n, pf[n++] = (struct pollfd){r->fin, POLLOUT, 0};
  if (r->fout >= 0) iout = n, pf[n++] = (struct pollfd){r->fout, POLLIN, 0};
  if (r->ferr >= 0) ierr = n, pf[n++] = (struct pollfd){r->ferr, POLLIN, 0};
  int left = shoal__deadline_ms_left(dl);
  if (left == 0) return -1;
  int pr = poll(pf, (nfds_t)n, left);
  if (pr < 0) return errno == EINTR ? 0 : -1;
  if (iin >= 0 && pf[iin].revents) {
    ssize_t w = r->in_left ? write_nopipe(r->fin, r->input, r->in_left) : 0;
    if (w > 0) r->input += w, r->in_left -= (size_t)w;
    if (w < 0 && errno != EINTR && errno != EAGAIN) r->in_left = 0;
    if (r->in_left == 0) close_fd(&r->fin);
  }
  if (iout >= 0 && pf[iout].revents && !sink_read(&r->out, r->fout)) close_fd(&r->fout);
  if (ierr >= 0 && pf[ierr].revents && !sink_read(&r->err, r->ferr)) close_fd(&r->ferr);
  return 0;
}

static int start_child(run_t *r, const char *const *argv) {
  int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
  if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (pin[i] >= 0) close(pin[i]);
      if (pout[i] >= 0) close(pout[i]);
      if (perr[i] >= 0) close(perr[i]);
    }
    return shoal__seterr(SHOAL_ERR_SYSTEM, "%s: pipe: %s", argv[0], strerror(e));
  }
  fflush(NULL);
  r->pid = fork();
  if (r->pid < 0) {
    int e = errno;
    for (int i = 0; i < 2; i++) close(pin[i]), close(pout[i]), close(perr[i]);
    return shoal__seterr(SHOAL_ERR_SYSTEM, "%s: fork: %s", argv[0], strerror(e));
  }
  if (r->pid == 0) child_exec(argv, pin[0], pout[1], perr[1]);
  setpgid(r->pid, r->pid); /* (also here: no race with the kill below) */
  close(pin[0]), close(pout[1]), close(perr[1]);
  r->fin = pin[1], r->fout = pout[0], r->ferr = perr[0];
  fcntl(r->fin, F_SETFL, O_NONBLOCK);
  if (r->in_left == 0) close_fd(&r->fin);
  return 0;
}

/* reap the child by the deadline; 1 if it had to be killed */
static int reap(run_t *r, shoal__deadline_t dl, int *status) {
  for (;;) {
    pid_t w = waitpid(r->pid, status, WNOHANG);
    if (w == r->pid) return 0;
    if (w < 0 && errno != EINTR) {
      *status = -1;
      return 0;
    }
    if (shoal__deadline_passed(dl)) break;
    shoal__sleep_s(0.002);
  }
  kill(-r->pid, SIGKILL);
  while (waitpid(r->pid, status, 0) < 0 && errno == EINTR) {
  }
  return 1;
}

int shoal__command_run(const char *const *argv, const char *input, double deadline_s, size_t max_out,
                       shoal_command_result_t *res) {
  if (!argv || !argv[0] || !res) return shoal__seterr(SHOAL_ERR_INVALID, "command: no program");
  run_t r = {.fin = -1, .fout = -1, .ferr = -1, .input = input ? input : "", .in_left = input ? strlen(input) : 0};
  r.out.max = max_out ? max_out : ((size_t)64 << 20);
  r.err.max = 16384;
  int rc = start_child(&r, argv);
  if (rc) return rc;
  shoal__deadline_t dl = shoal__deadline_in(deadline_s);
  int timed_out = 0;
  while (r.fout >= 0 || r.ferr >= 0 || r.fin >= 0)
    if (pump(&r, dl) < 0) {
      timed_out = 1;
      break;
    }
  int status = 0;
  if (timed_out) kill(-r.pid, SIGKILL);
  timed_out |= reap(&r, dl, &status);
  kill(-r.pid, SIGKILL); /* whatever it left running in its group */
  close_fd(&r.fin), close_fd(&r.fout), close_fd(&r.ferr);
  char *out = sink_take(&r.out), *err = sink_take(&r.err);
  size_t el = strlen(err);
  while (el && (err[el - 1] == '\n' || err[el - 1] == ' ' || err[el - 1] == '\r')) err[--el] = 0;
  if (timed_out) {
    rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "%s did not finish within %g s (killed)%s%s", argv[0], deadline_s,
                       el ? ": " : "", err);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !strncmp(err, "cannot run ", 11)) {
    rc = shoal__seterr(SHOAL_ERR_SYSTEM, "%s", err);
  }
  if (rc) {
    free(out), free(err);
    return rc;
  }
  if (r.out.dropped) {
    char *ne = malloc(el + 96);
    if (ne) {
      snprintf(ne, el + 96, "%s%s(output beyond %zu bytes dropped)", err, el ? "; " : "", r.out.max);
      free(err), err = ne;
    }
  }
  res->status = status;
  res->out = out;
  res->out_len = r.out.n;
  res->err = err;
  return 0;
}

int shoal__command_ok(const shoal_command_result_t *res) {
  return res && WIFEXITED(res->status) && WEXITSTATUS(res->status) == 0;
}

void shoal__command_result_free(shoal_command_result_t *res) {
  if (!res) return;
  free(res->out);
  free(res->err);
  res->out = res->err = NULL;
}

void shoal__command_describe_status(int status, char *buf, size_t cap) {
  if (WIFSIGNALED(status)) snprintf(buf, cap, "killed by signal %d", WTERMSIG(status));
  else snprintf(buf, cap, "exit %d", WEXITSTATUS(status));
}
