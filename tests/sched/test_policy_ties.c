/* Ties between jobs whose keys differ only in the last bits of floating point: the spec's tie rule (by id)
 * decides, whatever product the job's work and speed came from. Through the CLI, on a trace a user would
 * write. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runner.h"

/* first_start of job `id` in DIR/jobs-POLICY.csv (-1 if absent) */
static double first_start(const char *dir, const char *policy, int id) {
  char path[512], line[512];
  snprintf(path, sizeof path, "%s/jobs-%s.csv", dir, policy);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  double fs = -1;
  while (fgets(line, sizeof line, f)) {
    int jid;
    char vc[64];
    double arrival, start;
    int gpus;
    char arch[32];
    int ps;
    if (sscanf(line, "%d,%63[^,],%d,%31[^,],%d,%lf,%lf", &jid, vc, &gpus, arch, &ps, &arrival, &start) == 7 && jid == id)
      fs = start;
  }
  fclose(f);
  return fs;
}

/* vgg16 and cifar10-resnet of 2486 s each: remaining time 2486.0000000000005 against 2486.0 before the keys
 * were rounded, and job 2 ran before job 1 */
TEST_T(srtf_equal_remaining_times_tie_by_id, 60) {
  char dir[] = "/tmp/shoal-ties-XXXXXX", path[256], cmd[1024], out[8192];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/tie.csv", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs("arrival,gpus,duration,model\n0,1,100,resnet50\n1,1,2486,vgg16\n2,1,2486,cifar10-resnet\n", f);
  fclose(f);
  const char *pols[] = {"srtf", "srtf:srgf=1"};
  for (int i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd,
             "%s sim --trace %s --machines 1 --gpus-per-machine 1 --racks 1 --restart-cost 0 --policy %s --out %s "
             "--no-progress",
             shoal_test_cli(), path, pols[i], dir);
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 40);
    CHECK_MSG(st == 0, "exit %d: %s", st, out);
    const char *name = i ? "srtf_srgf_1" : "srtf"; /* a policy's file name: its spec with : and = as _ */
    double s1 = first_start(dir, name, 1), s2 = first_start(dir, name, 2);
    CHECK_MSG(s1 >= 0 && s2 >= 0, "%s: no start of job 1 or 2 in %s/jobs-%s.csv", pols[i], dir, name);
    CHECK_MSG(s1 < s2, "%s: job 2 (start %.0f) ran before job 1 (start %.0f) although their remaining times tie", pols[i],
              s2, s1);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}
