/* CPU limits of a testbed's hosts: the cgroup v1 CFS quota of the host's group, or, without cgroups, a
 * daemon that stops and continues the host's processes (SIGSTOP/SIGCONT) in a duty cycle. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testbed.h"

static int is_duty_daemon(pid_t pid) {
  char p[64], comm[32] = "";
  snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  int ok = fgets(comm, sizeof comm, f) && !strncmp(comm, "shoal-duty", 10);
  fclose(f);
  return ok;
}

/* Stop the duty-cycle daemons recorded for host (or all hosts if host < 0). */
void shoal__tb_cpu_down(const char *dir, int host) {
  char p[160], line[256];
  snprintf(p, sizeof p, "%s/state", dir);
  FILE *f = fopen(p, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    int h, pid;
    if (sscanf(line, "daemon %d %d", &h, &pid) != 2 || (host >= 0 && h != host) || pid <= 1) continue;
    if (is_duty_daemon(pid)) {
      kill(pid, SIGTERM);
      for (int k = 0; k < 100 && is_duty_daemon(pid); k++) usleep(10000);
      if (is_duty_daemon(pid)) kill(pid, SIGKILL);
    }
  }
  fclose(f);
}

static volatile sig_atomic_t duty_stop;

static void on_duty_term(int s) {
  (void)s;
  duty_stop = 1;
}

/* SIGSTOP/SIGCONT duty cycle: the host's processes run `frac` of every 100 ms. */
static void duty_daemon(const char *dir, const char *ns, double frac) {
  prctl(PR_SET_NAME, "shoal-duty");
  setsid();
  signal(SIGTERM, on_duty_term);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  for (int fd = 0; fd < 3; fd++) {
    int nul = open("/dev/null", O_RDWR);
    dup2(nul, fd);
    if (nul > 2) close(nul);
  }
  pid_t *pids = calloc(4096, sizeof *pids);
  const double period = 0.1;
  struct stat st;
  char statep[160];
  snprintf(statep, sizeof statep, "%s/state", dir);
  while (!duty_stop && stat(statep, &st) == 0) { /* ends with the testbed */
    int n = shoal__tb_pids_in_netns(ns, pids, 4096);
    for (int k = 0; k < n; k++) kill(pids[k], SIGCONT);
    struct timespec on = {0, (long)(frac * period * 1e9)}, off = {0, (long)((1 - frac) * period * 1e9)};
    nanosleep(&on, NULL);
    if (duty_stop) break;
    n = shoal__tb_pids_in_netns(ns, pids, 4096);
    for (int k = 0; k < n; k++) kill(pids[k], SIGSTOP);
    nanosleep(&off, NULL);
  }
  int n = shoal__tb_pids_in_netns(ns, pids, 4096);
  for (int k = 0; k < n; k++) kill(pids[k], SIGCONT);
  _exit(0);
}

static int write_cg(const char *dir, const char *file, long v, char *err, size_t cap) {
  char p[256], b[32];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  snprintf(b, sizeof b, "%ld\n", v);
  FILE *f = fopen(p, "w");
  if (!f || fputs(b, f) < 0 || fclose(f)) {
    snprintf(err, cap, "%s: %s", p, strerror(errno));
    return -1;
  }
  return 0;
}

int shoal__tb_set_cpu(const tb_t *tb, int i, double cpus, const char *method, char *err, size_t cap) {
  const tb_host_t *h = &tb->h[i];
  char cgd[256];
  snprintf(cgd, sizeof cgd, "%s/%s", tb->cgroup, h->name);
  shoal__tb_cpu_down(tb->dir, i);
  if (tb->cgroup[0] && write_cg(cgd, "cpu.cfs_quota_us", -1, err, cap)) return -1;
  if (cpus > 0 && !strcmp(method, "cgroup")) {
    if (write_cg(cgd, "cpu.cfs_period_us", 100000, err, cap) || write_cg(cgd, "cpu.cfs_quota_us", (long)(cpus * 100000), err, cap))
      return -1;
  } else if (cpus > 0 && cpus < 1) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return shoal__tb_fail(err, cap, "fork: %s", strerror(errno));
    if (pid == 0) duty_daemon(tb->dir, h->ns, cpus);
    if (shoal__tb_record(tb->dir, err, cap, "daemon %d %d", i, (int)pid)) return -1;
  }
  return shoal__tb_record(tb->dir, err, cap, "cpu %d %g %s", i, cpus, method);
}
