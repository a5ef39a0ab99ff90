/* What the tests on the testbed's Slurm share (slurm_util.h). */
#include "slurm_util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../runner.h"

int slurm_count_lines(const char *path, const char *prefix) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += !strncmp(line, prefix, strlen(prefix));
  fclose(f);
  return n;
}

void slurm_need(void) {
  if (geteuid() != 0) shoal_test_skip("not root: network namespaces and Slurm daemons need root");
  if (access("/usr/sbin/slurmctld", X_OK) || access("/usr/sbin/slurmd", X_OK) || access("/usr/sbin/munged", X_OK) ||
      access("/usr/bin/sbatch", X_OK))
    shoal_test_skip("Slurm not installed (Debian slurmctld slurmd slurm-client munge; scripts/deps.sh test)");
}

void slurm_test_begin(const char *script, const char *tag, char *name, size_t nname, char *dir, size_t ndir) {
  slurm_need();
  if (script && access(script, X_OK)) shoal_test_skip("run from the repository root (experiments/ not found)");
  char cmd[128], out[4096];
  snprintf(cmd, sizeof cmd, "ip netns add %sp%d && ip netns del %sp%d", tag, (int)getpid(), tag, (int)getpid());
  if (shoal_test_run_cmd(cmd, out, sizeof out, 10) != 0) shoal_test_skip("cannot create a network namespace here");
  snprintf(name, nname, "%s%d", tag, (int)getpid() % 1000000);
  if (dir) snprintf(dir, ndir, "/tmp/shoal-live-%s-%d", tag, (int)getpid());
}
