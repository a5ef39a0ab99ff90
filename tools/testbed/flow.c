/* Flow scheduling on a testbed (docs/flow.md): `up --flow` starts the controller in the fabric namespace
 * and an agent on every host, recorded in <state dir>/flow/pids; `down` stops them (the agents unpace
 * their hosts' flows on the way out) and removes the hosts' flow segments. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "testbed.h"

#define FLOW_UP_DEADLINE_S 10.0

void shoal__tb_flow_dir(const char *name, char *buf, size_t cap) { snprintf(buf, cap, "%s/%s/flow", TB_RUN_DIR, name); }

/* Does log hold `what` yet? */
static int log_has(const char *log, const char *what) {
  char b[4096];
  FILE *f = fopen(log, "r");
  if (!f) return 0;
  size_t n = fread(b, 1, sizeof b - 1, f);
  fclose(f);
  b[n] = 0;
  return strstr(b, what) != NULL;
}

/* The controller: this program's `flow controller --testbed NAME` in the fabric namespace. Up once it
 * listens; its log is named in the error otherwise. */
static int start_controller(const tb_t *tb, const char *exe, const char *dir, const char *pids, const tb_flow_opts_t *o,
                            char *err, size_t cap) {
  char log[256], slot[32], port[16], csv[256];
  snprintf(log, sizeof log, "%s/controller.log", dir);
  snprintf(csv, sizeof csv, "%s/controller.csv", dir);
  snprintf(slot, sizeof slot, "%g", o->slot_ms);
  snprintf(port, sizeof port, "%d", TB_FLOW_PORT);
  char *argv[] = {"shoal", "flow", "controller", "--testbed", (char *)tb->name, "--port", port, "--slot-ms", slot,
                  "--policy", (char *)o->policy, o->log ? "--log" : NULL, csv, NULL};
  pid_t pid = shoal__tb_daemon_in_fabric(tb, pids, "shoal-controller", NULL, log, exe, argv, NULL, err, cap);
  if (pid < 0) return -1;
  double dl = shoal__now_s() + FLOW_UP_DEADLINE_S;
  while (!log_has(log, "listening on port")) {
    if (waitpid(pid, NULL, WNOHANG) == pid || shoal__now_s() > dl)
      return shoal__tb_fail(err, cap, "the flow controller did not start (log: %s)", log);
    if (shoal__tb_check_interrupted(err, cap)) return -1;
    usleep(20000);
  }
  return 0;
}

int shoal__tb_flow_up(const char *name, const tb_flow_opts_t *o, char *err, size_t cap) {
  tb_t *tb = calloc(1, sizeof *tb);
  if (!tb) return shoal__tb_fail(err, cap, "out of memory");
  char dir[160], pids[200], exe[512], ctl[64], slot[32];
  shoal__tb_flow_dir(name, dir, sizeof dir);
  snprintf(pids, sizeof pids, "%s/pids", dir);
  snprintf(ctl, sizeof ctl, "%s:%d", TB_CTL_ADDR, TB_FLOW_PORT);
  snprintf(slot, sizeof slot, "%g", o->slot_ms);
  int rc = -1;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    shoal__tb_fail(err, cap, "/proc/self/exe: %s", strerror(errno));
    goto out;
  }
  exe[n] = 0;
  if (shoal__tb_load(name, tb, err, cap)) goto out;
  if (mkdir(dir, 0755) && errno != EEXIST) {
    shoal__tb_fail(err, cap, "%s: %s", dir, strerror(errno));
    goto out;
  }
  if (start_controller(tb, exe, dir, pids, o, err, cap)) goto out;
  for (int i = 0; i < tb->nhosts; i++) {
    char what[32], log[256], csv[256];
    snprintf(what, sizeof what, "shoal-agent-%s", tb->h[i].name);
    snprintf(log, sizeof log, "%s/agent-%s.log", dir, tb->h[i].name);
    snprintf(csv, sizeof csv, "%s/agent-%s.csv", dir, tb->h[i].name);
    char *argv[] = {"shoal", "flow", "agent", "--controller", ctl, "--host", tb->h[i].ns, "--slot-ms", slot,
                    o->log ? "--log" : NULL, csv, NULL};
    if (shoal__tb_daemon_on_host(tb, i, pids, what, log, exe, argv, NULL, err, cap) < 0) goto out;
  }
  printf("testbed %s: flow scheduling up: controller at %s (policy %s, slot %g ms), an agent on each of %d hosts; "
         "logs %s/\n", name, ctl, o->policy, o->slot_ms, tb->nhosts, dir);
  rc = 0;
out:
  free(tb);
  return rc;
}

int shoal__tb_flow_down(const char *name, int quiet) {
  char dir[160];
  shoal__tb_flow_dir(name, dir, sizeof dir);
  struct stat st;
  if (stat(dir, &st)) return 0;
  int n, rc = shoal__tb_part_remove(dir, 3, &n);
  /* the hosts' flow segments: ranks of a later testbed of the same name must not find a stale one */
  tb_t *tb = calloc(1, sizeof *tb);
  char err[256];
  if (tb && shoal__tb_load(name, tb, err, sizeof err) == 0)
    for (int i = 0; i < tb->nhosts; i++) {
      char seg[96];
      snprintf(seg, sizeof seg, "/shoal-flow.%s", tb->h[i].ns);
      if (shm_unlink(seg) && errno != ENOENT) fprintf(stderr, "shoal testbed: /dev/shm%s: %s\n", seg, strerror(errno));
    }
  free(tb);
  if (!quiet && !rc) printf("testbed %s: flow scheduling stopped (%d daemons)\n", name, n);
  return rc;
}

void shoal__tb_flow_status(const char *name) {
  char dir[160], p[256];
  shoal__tb_flow_dir(name, dir, sizeof dir);
  snprintf(p, sizeof p, "%s/pids", dir);
  struct stat st;
  if (stat(p, &st)) return;
  int n, alive;
  shoal__tb_daemons_count(p, &n, &alive);
  printf("flow: %d of %d daemons running (the controller at %s:%d, an agent per host); shoal flow status --testbed %s\n",
         alive, n, TB_CTL_ADDR, TB_FLOW_PORT, name);
}
