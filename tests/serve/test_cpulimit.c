/* A replica's CPU limit read from a cgroup tree built in a temporary directory: v1's cpu controller (the
 * tightest of the group and its ancestors), v2's cpu.max ("max": none), and nothing to read. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runner.h"
#include "serve/serve.h"

static void put(const char *dir, const char *rel, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')); *s++ = '/') { /* its directories */
    *s = 0;
    mkdir(p, 0755);
  }
  FILE *f = fopen(p, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
}

TEST(cpu_limit_is_the_tightest_quota_of_the_group_and_its_ancestors) {
  char d[] = "/tmp/shoal-cg-XXXXXX", proc[600], fs[600];
  CHECK(mkdtemp(d) != NULL);
  snprintf(proc, sizeof proc, "%s/proc-cgroup", d);
  snprintf(fs, sizeof fs, "%s/fs", d);
  /* v1: the host's group 0.2 CPU under a testbed group of 1.5 CPUs */
  put(d, "proc-cgroup", "3:cpuset:/\n2:cpuacct:/\n1:cpu:/tb/h5\n0::/\n");
  put(d, "fs/cpu/tb/h5/cpu.cfs_quota_us", "20000\n");
  put(d, "fs/cpu/tb/h5/cpu.cfs_period_us", "100000\n");
  put(d, "fs/cpu/tb/cpu.cfs_quota_us", "150000\n");
  put(d, "fs/cpu/tb/cpu.cfs_period_us", "100000\n");
  put(d, "fs/cpu/cpu.cfs_quota_us", "-1\n");
  put(d, "fs/cpu/cpu.cfs_period_us", "100000\n");
  CHECK_NEAR(shoal__serve_cpu_limit_at(proc, fs), 0.2, 1e-12);
  put(d, "fs/cpu/tb/cpu.cfs_quota_us", "10000\n"); /* the parent's is tighter */
  CHECK_NEAR(shoal__serve_cpu_limit_at(proc, fs), 0.1, 1e-12);
  put(d, "proc-cgroup", "4:cpu,cpuacct:/free\n");   /* a group with no quota: none */
  CHECK_NEAR(shoal__serve_cpu_limit_at(proc, fs), 0, 0);
  /* v2 only: "QUOTA PERIOD", "max" is none */
  put(d, "proc-cgroup", "0::/svc/r1\n");
  put(d, "fs/svc/r1/cpu.max", "50000 100000\n");
  put(d, "fs/svc/cpu.max", "max 100000\n");
  CHECK_NEAR(shoal__serve_cpu_limit_at(proc, fs), 0.5, 1e-12);
  put(d, "fs/svc/r1/cpu.max", "max 100000\n");
  CHECK_NEAR(shoal__serve_cpu_limit_at(proc, fs), 0, 0);
  /* nothing readable */
  snprintf(proc, sizeof proc, "%s/none", d);
  CHECK_NEAR(shoal__serve_cpu_limit_at(proc, fs), 0, 0);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf %s", d);
  CHECK(system(cmd) == 0);
}
