/* Daemons a testbed part starts (Slurm's, per-host agents): each recorded in the part's pids file as
 * "<what> <pid> <start time>" before `up` returns, so that `down` stops exactly those (a pid since reused
 * by another process has another start time, or another command). A record's name is its command's name,
 * optionally followed by '-' and a qualifier ("slurmd-h3"). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "testbed.h"

#define MAX_DAEMONS (TB_MAX_HOSTS * 4 + 8)

/* /proc/pid/stat read into b; the text after the command's closing ')', NULL if the process is gone */
static const char *proc_stat(pid_t pid, char *b, size_t size) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(p, "r");
  if (!f) return NULL;
  size_t n = fread(b, 1, size - 1, f);
  fclose(f);
  b[n] = 0;
  return strrchr(b, ')');
}

/* start time of pid (field 22 of /proc/pid/stat), 0 if gone */
static unsigned long long proc_start(pid_t pid) {
  char b[1024];
  const char *s = proc_stat(pid, b, sizeof b);
  if (!s) return 0;
  unsigned long long v = 0;
  /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
   * priority nice threads itrealvalue starttime(22) */
  if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &v) != 1) return 0;
  return v;
}

static int is_zombie(pid_t pid) {
  char b[512];
  const char *s = proc_stat(pid, b, sizeof b);
  return !s || s[1] == 0 || s[2] == 'Z' || s[2] == 'X';
}

static int comm_is(pid_t pid, const char *want) {
  char p[64], c[32] = "";
  snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  int ok = fgets(c, sizeof c, f) && !strncmp(c, want, strlen(want));
  fclose(f);
  return ok;
}

/* The record of `what` replaces an earlier one (a daemon started again by `shoal testbed daemon`). */
int shoal__tb_daemon_record(const char *pids_file, const char *what, pid_t pid) {
  char tmp[400], line[256];
  snprintf(tmp, sizeof tmp, "%s.new", pids_file);
  FILE *in = fopen(pids_file, "r"), *f = fopen(tmp, "w");
  if (!f) {
    if (in) fclose(in);
    return -1;
  }
  size_t wl = strlen(what);
  while (in && fgets(line, sizeof line, in))
    if (strncmp(line, what, wl) || line[wl] != ' ') fputs(line, f);
  if (in) fclose(in);
  fprintf(f, "%s %d %llu\n", what, (int)pid, proc_start(pid));
  if (fclose(f)) return -1;
  return rename(tmp, pids_file);
}

pid_t shoal__tb_daemon_running(const char *pids_file, const char *what) {
  char line[256], w[64];
  int pid, found = 0;
  unsigned long long t;
  FILE *f = fopen(pids_file, "r");
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "%63s %d %llu", w, &pid, &t) == 3 && !strcmp(w, what) && pid > 1) {
      w[strcspn(w, "-")] = 0;
      found = proc_start(pid) == t && comm_is(pid, w) && !is_zombie(pid) ? pid : 0;
    }
  if (f) fclose(f);
  return found;
}

int shoal__tb_daemon_stop(const char *pids_file, const char *what, double grace_s) {
  pid_t pid = shoal__tb_daemon_running(pids_file, what);
  if (!pid) return 0;
  unsigned long long t = proc_start(pid);
  kill(pid, SIGTERM);
  double dl = shoal__now_s() + grace_s;
  for (;;) {
    waitpid(pid, NULL, WNOHANG);
    if (proc_start(pid) != t || is_zombie(pid)) return 1;
    if (shoal__now_s() > dl) {
      kill(pid, SIGKILL);
      usleep(50000);
      return 1;
    }
    usleep(20000);
  }
}

void shoal__tb_daemon_redirect(const char *log) {
  int fd = open("/dev/null", O_RDWR);
  if (fd >= 0) dup2(fd, 0);
  int lf = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (lf >= 0) {
    dup2(lf, 1);
    dup2(lf, 2);
  }
  if (fd > 2) close(fd);
}

/* Where a daemon runs: a host (i >= 0), or the fabric (i < 0) under host name `hostname` if not NULL. */
typedef struct daemon_place {
  const tb_t *tb;
  int i;
  const char *hostname;
} daemon_place_t;

static int daemon_enter(const daemon_place_t *w, char *err, size_t cap) {
  if (w->i >= 0) return shoal__tb_enter(w->tb, w->i, err, cap);
  if (shoal__tb_enter_fabric(w->tb, err, cap)) return -1;
  if (w->hostname && (unshare(CLONE_NEWUTS) || sethostname(w->hostname, strlen(w->hostname))))
    return shoal__tb_fail(err, cap, "host name %s: %s", w->hostname, strerror(errno));
  return 0;
}

static pid_t daemon_start(const daemon_place_t *w, const char *pids_file, const char *what, const char *log,
                          const char *path, char *const argv[], char *const env[], char *err, size_t cap) {
  fflush(NULL);
  if (shoal__tb_check_interrupted(err, cap)) return -1;
  pid_t pid = fork();
  if (pid < 0) return shoal__tb_fail(err, cap, "fork: %s", strerror(errno));
  if (pid == 0) {
    setsid();
    shoal__tb_daemon_redirect(log);
    char e2[512];
    if (daemon_enter(w, e2, sizeof e2)) {
      fprintf(stderr, "%s: %s\n", argv[0], e2); /* into the log */
      _exit(126);
    }
    for (int k = 0; env && env[k]; k++) putenv(env[k]);
    execv(path, argv);
    _exit(127);
  }
  if (shoal__tb_daemon_record(pids_file, what, pid)) return shoal__tb_fail(err, cap, "%s: %s", pids_file, strerror(errno));
  return pid;
}

pid_t shoal__tb_daemon_on_host(const tb_t *tb, int i, const char *pids_file, const char *what, const char *log,
                               const char *path, char *const argv[], char *const env[], char *err, size_t cap) {
  daemon_place_t w = {tb, i, NULL};
  return daemon_start(&w, pids_file, what, log, path, argv, env, err, cap);
}

pid_t shoal__tb_daemon_in_fabric(const tb_t *tb, const char *pids_file, const char *what, const char *hostname,
                                 const char *log, const char *path, char *const argv[], char *const env[], char *err,
                                 size_t cap) {
  daemon_place_t w = {tb, -1, hostname};
  return daemon_start(&w, pids_file, what, log, path, argv, env, err, cap);
}

int shoal__tb_daemons_stop(const char *pids_file, double grace_s) {
  char line[256];
  int n = 0;
  pid_t pids[MAX_DAEMONS];
  FILE *f = fopen(pids_file, "r");
  while (f && fgets(line, sizeof line, f) && n < MAX_DAEMONS) {
    char what[64];
    int pid;
    unsigned long long t;
    if (sscanf(line, "%63s %d %llu", what, &pid, &t) != 3 || pid <= 1) continue;
    what[strcspn(what, "-")] = 0; /* the command's name */
    if (proc_start(pid) == t && comm_is(pid, what)) pids[n++] = pid;
  }
  if (f) fclose(f);
  /* the last started first (Slurm: the slurmd, whose jobs die with them, then slurmctld, munged last) */
  unsigned long long starts[MAX_DAEMONS];
  for (int k = n - 1; k >= 0; k--) starts[k] = proc_start(pids[k]), kill(pids[k], SIGTERM);
  double dl = shoal__now_s() + grace_s;
  for (;;) {
    int alive = 0;
    for (int k = 0; k < n; k++) {
      waitpid(pids[k], NULL, WNOHANG); /* our own children when down follows up in one process */
      if (pids[k] && proc_start(pids[k]) == starts[k] && !is_zombie(pids[k])) alive++;
      else pids[k] = 0;
    }
    if (!alive) break;
    if (shoal__now_s() > dl) {
      for (int k = 0; k < n; k++)
        if (pids[k]) kill(pids[k], SIGKILL);
      usleep(50000);
      break;
    }
    usleep(20000);
  }
  return n;
}

void shoal__tb_daemons_count(const char *pids_file, int *recorded, int *alive) {
  char line[256];
  *recorded = *alive = 0;
  FILE *f = fopen(pids_file, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    char what[64];
    int pid;
    unsigned long long t;
    if (sscanf(line, "%63s %d %llu", what, &pid, &t) != 3) continue;
    ++*recorded;
    if (proc_start(pid) == t) ++*alive;
  }
  fclose(f);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)ftw;
  if (flag == FTW_DP) return rmdir(path) ? -1 : 0;
  return unlink(path) ? -1 : 0;
}

int shoal__tb_part_remove(const char *dir, double grace_s, int *stopped) {
  char p[256];
  snprintf(p, sizeof p, "%s/pids", dir);
  *stopped = shoal__tb_daemons_stop(p, grace_s);
  if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0) return 0;
  fprintf(stderr, "shoal testbed: cannot remove %s: %s\n", dir, strerror(errno));
  return 1;
}
