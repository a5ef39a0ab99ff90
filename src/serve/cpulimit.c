/* The CPUs a process may use by its cgroup's CPU limit (serve.h): a replica on a host limited to a fraction of
 * a CPU answers one request quickly while its quota lasts, and is throttled once it is spent, so its capacity
 * is that fraction over its CPU seconds a request, not the inverse of its time a request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

/* the group's limit in CPUs (v1: cpu.cfs_quota_us / cpu.cfs_period_us; v2: cpu.max), 0: none or unreadable */
static double group_limit(const char *root, const char *group, int v2) {
  char p[768], line[128];
  double lim = 0;
  if (v2) {
    snprintf(p, sizeof p, "%s%s/cpu.max", root, group);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    char quota[32] = "";
    long period = 0;
    if (fgets(line, sizeof line, f) && sscanf(line, "%31s %ld", quota, &period) == 2 && strcmp(quota, "max") && period > 0)
      lim = atof(quota) / (double)period;
    fclose(f);
    return lim > 0 ? lim : 0;
  }
  long q = 0, per = 0;
  snprintf(p, sizeof p, "%s%s/cpu.cfs_quota_us", root, group);
  FILE *f = fopen(p, "r");
  if (f) {
    if (!fgets(line, sizeof line, f) || sscanf(line, "%ld", &q) != 1) q = 0;
    fclose(f);
  }
  snprintf(p, sizeof p, "%s%s/cpu.cfs_period_us", root, group);
  if (q > 0 && (f = fopen(p, "r"))) {
    if (!fgets(line, sizeof line, f) || sscanf(line, "%ld", &per) != 1) per = 0;
    fclose(f);
  }
  return q > 0 && per > 0 ? (double)q / (double)per : 0;
}

double shoal__serve_cpu_limit(void) { return shoal__serve_cpu_limit_at("/proc/self/cgroup", "/sys/fs/cgroup"); }

double shoal__serve_cpu_limit_at(const char *proc_cgroup, const char *fs) {
  FILE *f = fopen(proc_cgroup, "r");
  if (!f) return 0;
  char line[640], group[512] = "";
  int v2 = 0;
  while (fgets(line, sizeof line, f)) { /* "ID:CONTROLLERS:PATH"; v1's cpu controller first, else v2's "0::PATH" */
    char *c = strchr(line, ':'), *g = c ? strchr(c + 1, ':') : NULL;
    if (!g) continue;
    *g++ = 0;
    g[strcspn(g, "\n")] = 0;
    const char *ctl = c + 1;
    int cpu = !strcmp(ctl, "cpu") || !strncmp(ctl, "cpu,", 4) || strstr(ctl, ",cpu,") ||
              (strlen(ctl) > 4 && !strcmp(ctl + strlen(ctl) - 4, ",cpu"));
    if (cpu) {
      snprintf(group, sizeof group, "%s", g), v2 = 0;
      break;
    }
    if (!*ctl && !group[0]) snprintf(group, sizeof group, "%s", g), v2 = 1;
  }
  fclose(f);
  if (!group[0]) return 0;
  char root[256];
  snprintf(root, sizeof root, "%s%s", fs, v2 ? "" : "/cpu");
  double lim = 0;
  for (;;) { /* the tightest limit of the group and its ancestors */
    double l = group_limit(root, strcmp(group, "/") ? group : "", v2);
    if (l > 0 && (lim == 0 || l < lim)) lim = l;
    char *slash = strrchr(group, '/');
    if (!strcmp(group, "/") || !slash) break;
    if (slash == group) snprintf(group, sizeof group, "/");
    else *slash = 0;
  }
  return lim;
}
