/* Entering a testbed's host (its cgroup, network namespace, host name and /etc/hosts) or its fabric, and
 * finding the processes on a host. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testbed.h"

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t w = write(fd, text, strlen(text));
  int e = errno;
  close(fd);
  errno = e;
  return w == (ssize_t)strlen(text) ? 0 : -1;
}

static int open_netns(const tb_t *tb, int i, char *err, size_t cap) {
  char p[128];
  snprintf(p, sizeof p, "/run/netns/%s", tb->h[i].ns);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) shoal__tb_fail(err, cap, "host %s: cannot open %s: %s", tb->h[i].name, p, strerror(errno));
  return fd;
}

/* What the testbed knows of the network, for the collectives' cost model when nothing is measured
 * (SHOAL_TUNE=off): the host's rack, its rack's uplink and its own link's rate (unless already set). */
static void set_topology_env(const tb_t *tb, const tb_host_t *h) {
  char v[64];
  snprintf(v, sizeof v, "r%d", h->rack);
  setenv("SHOAL_RACK", v, 0);
  double up = tb->up_bps[h->rack], down = tb->down_bps[h->rack];
  double link = h->egress_bps > 0 && (h->ingress_bps <= 0 || h->ingress_bps > h->egress_bps) ? h->egress_bps : h->ingress_bps;
  if (tb->nracks > 1 && up > 0) {
    snprintf(v, sizeof v, "%.6g", (down > 0 && down < up ? down : up) / 8e9);
    setenv("SHOAL_RACK_UPLINK_GBPS", v, 0);
  }
  if (link > 0) {
    snprintf(v, sizeof v, "%.6g", link / 8e9);
    setenv("SHOAL_BETA_GBPS", v, 0);
  }
}

int shoal__tb_enter(const tb_t *tb, int i, char *err, size_t cap) {
  const tb_host_t *h = &tb->h[i];
  char p[256];
  if (tb->cgroup[0]) { /* before the mount namespace changes: the cgroup tree must be visible */
    snprintf(p, sizeof p, "%s/%s/cgroup.procs", tb->cgroup, h->name);
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (write_file(p, pid)) return shoal__tb_fail(err, cap, "host %s: cannot join cgroup (%s): %s", h->name, p, strerror(errno));
  }
  int fd = open_netns(tb, i, err, cap);
  if (fd < 0) return -1;
  if (setns(fd, CLONE_NEWNET)) {
    int e = errno;
    close(fd);
    return shoal__tb_fail(err, cap, "host %s: setns(%s): %s", h->name, h->ns, strerror(e));
  }
  close(fd);
  if (unshare(CLONE_NEWUTS) || sethostname(h->ns, strlen(h->ns)))
    return shoal__tb_fail(err, cap, "host %s: own host name (UTS namespace): %s", h->name, strerror(errno));
  /* /etc/hosts naming every host of the testbed, in a private mount namespace
   * (as `ip netns exec` does with /etc/netns/NS); nothing outlives the process. */
  snprintf(p, sizeof p, "%s/hosts", tb->dir);
  if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) ||
      mount(p, "/etc/hosts", NULL, MS_BIND, NULL))
    return shoal__tb_fail(err, cap, "host %s: private /etc/hosts (%s): %s", h->name, p, strerror(errno));
  setenv("SHOAL_SOCKET_IFNAME", TB_IFNAME, 0);
  setenv("GLOO_SOCKET_IFNAME", TB_IFNAME, 0);
  set_topology_env(tb, h);
  snprintf(p, sizeof p, "%s/slurm/slurm.conf", tb->dir); /* Slurm's commands work on a host */
  if (access(p, R_OK) == 0) setenv("SLURM_CONF", p, 0);
  return 0;
}

int shoal__tb_enter_fabric(const tb_t *tb, char *err, size_t cap) {
  char p[128];
  snprintf(p, sizeof p, "/run/netns/%s", tb->fabric);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return shoal__tb_fail(err, cap, "cannot open %s: %s", p, strerror(errno));
  int rc = setns(fd, CLONE_NEWNET);
  int e = errno;
  close(fd);
  if (rc) return shoal__tb_fail(err, cap, "setns(%s): %s", tb->fabric, strerror(e));
  return 0;
}

int shoal__tb_in_netns(const tb_t *tb, int i, int (*fn)(void *), void *arg, char *err, size_t cap) {
  int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) return shoal__tb_fail(err, cap, "/proc/self/ns/net: %s", strerror(errno));
  int fd = open_netns(tb, i, err, cap);
  if (fd < 0) {
    close(self);
    return -1;
  }
  int rc = setns(fd, CLONE_NEWNET);
  close(fd);
  if (rc) {
    int e = errno;
    close(self);
    return shoal__tb_fail(err, cap, "host %s: setns: %s", tb->h[i].name, strerror(e));
  }
  rc = fn(arg);
  if (setns(self, CLONE_NEWNET)) rc = shoal__tb_fail(err, cap, "cannot return to the original network namespace: %s", strerror(errno));
  close(self);
  return rc;
}

/* pids whose network namespace is /run/netns/<ns> (not ours) */
int shoal__tb_pids_in_netns(const char *ns, pid_t *out, int cap) {
  char p[128];
  snprintf(p, sizeof p, "/run/netns/%s", ns);
  struct stat want;
  if (stat(p, &want)) return 0;
  DIR *d = opendir("/proc");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < cap) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == getpid()) continue;
    char q[64];
    struct stat st;
    snprintf(q, sizeof q, "/proc/%ld/ns/net", pid);
    if (stat(q, &st) == 0 && st.st_ino == want.st_ino && st.st_dev == want.st_dev) out[n++] = (pid_t)pid;
  }
  closedir(d);
  return n;
}

int shoal__tb_pids_in_cgroup(const char *dir, pid_t *out, int cap) {
  char p[256];
  snprintf(p, sizeof p, "%s/cgroup.procs", dir);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  int n = 0;
  long v;
  while (n < cap && fscanf(f, "%ld", &v) == 1)
    if (v > 0 && v != getpid()) out[n++] = (pid_t)v;
  fclose(f);
  return n;
}
