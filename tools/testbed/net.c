/* A testbed's network: namespaces, bridges, veth pairs and tbf shaping (docs/testbed.md).
 *
 * Layout (testbed NAME, H hosts in R racks, hosts split into racks in blocks):
 *   namespace NAME-net    the fabric: bridge br<r> per rack; with R > 1 a core
 *                         bridge brc and per rack a veth pair up<r> (in br<r>)
 *                         - dn<r> (in brc); tbf on up<r> shapes rack->core,
 *                         on dn<r> core->rack (the oversubscribed uplink)
 *   namespace NAME-h<i>   host i: eth0 = 10.90.<rack>.<index in rack + 1>/16,
 *                         veth peer h<i> in br<rack>; tbf on eth0 shapes the
 *                         host's egress, tbf on h<i> its ingress
 *   cgroup (v1 cpu)       /sys/fs/cgroup/cpu/shoal-testbed/NAME/h<i>: every
 *                         process started on the host joins it (cpu.c sets its quota)
 * No address outside the namespaces is ever configured; the root namespace
 * gets no interface at all. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../options.h"
#include "core/clock.h"
#include "testbed.h"

/* the state file of the `up` in progress: every record is written (and flushed) before what it names is made */
static FILE *state_f;
static int rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int rec(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(state_f, fmt, ap);
  va_end(ap);
  fputc('\n', state_f);
  return fflush(state_f) ? -1 : 0;
}

const char *shoal__tb_rate_str(double bps, char *b, size_t cap) { return shoal_opts_rate_str(bps, b, cap); }

/* Shape dev's egress at bps on a link that has no root qdisc yet (bps <= 0: leave it unshaped). */
static int tbf_add(char *err, size_t cap, const char *ns, const char *dev, double bps) {
  if (bps <= 0) return 0;
  /* burst: 5 ms at the rate (at least 32 kB); queue: 50 ms. A 1 ms burst lost up to
   * 80% of the rate when the 2 cores were busy: tbf refills only when its timer
   * runs, and a late timer with a small bucket leaves the link idle. The cost:
   * a message up to the burst passes an idle link at memory speed. */
  double burst = bps / 8 * 5e-3;
  if (burst < 32768) burst = 32768;
  return shoal__tb_run(err, cap, "tc -n %s qdisc add dev %s root handle 1: tbf rate %.0fbit burst %.0f latency 50ms", ns, dev, bps,
             burst);
}

/* Change a link's shaping while jobs may use it: a new qdisc, not `qdisc
 * replace` of the tbf in place, which, with packets queued at the change,
 * left it throttled for good, its backlog never sent (a host's ACKs stuck in
 * it, its peers' TCP backing off until SHOAL_TIMEOUT; about 1 change in 30
 * on the loaded 2 cores). The packets queued at the change are dropped and
 * TCP sends them again. */
static int tbf_reset(char *err, size_t cap, const char *ns, const char *dev, double bps) {
  shoal__tb_run(err, cap, "tc -n %s qdisc del dev %s root", ns, dev); /* absent: fine */
  return tbf_add(err, cap, ns, dev, bps);
}

/* The testbed's directory and state file, refusing namespaces of its name that something else left.
 * 0, or 1 after a message (nothing was made). */
static int net_prepare(const char *name, const char *dir) {
  char p[256];
  mkdir(TB_RUN_DIR, 0755);
  if (mkdir(dir, 0755)) {
    if (errno == EEXIST)
      fprintf(stderr, "shoal testbed: testbed '%s' already exists (%s); see shoal testbed status --name %s, "
                      "or remove it with shoal testbed down --name %s\n", name, dir, name, name);
    else
      fprintf(stderr, "shoal testbed: mkdir %s: %s\n", dir, strerror(errno));
    return 1;
  }
  /* namespaces of this name left by something else: refuse rather than adopt them */
  DIR *d = opendir("/run/netns");
  if (d) {
    struct dirent *e;
    size_t nl = strlen(name);
    while ((e = readdir(d)))
      if (!strncmp(e->d_name, name, nl) && e->d_name[nl] == '-') {
        fprintf(stderr, "shoal testbed: namespace %s exists but is not recorded in %s; remove it (ip netns del %s) "
                        "or use another --name\n", e->d_name, dir, e->d_name);
        closedir(d);
        rmdir(dir);
        return 1;
      }
    closedir(d);
  }
  snprintf(p, sizeof p, "%s/state", dir);
  state_f = fopen(p, "w");
  if (!state_f) {
    fprintf(stderr, "shoal testbed: %s: %s\n", p, strerror(errno));
    rmdir(dir);
    return 1;
  }
  return 0;
}

/* a step of up: stop if interrupted, else run the command */
#define STEP(...)                                                   \
  do {                                                              \
    if (shoal__tb_check_interrupted(err, cap)) return -1;           \
    if (shoal__tb_run(err, cap, __VA_ARGS__)) return -1;            \
  } while (0)

/* The fabric namespace: a bridge per rack; with several racks a core bridge and the shaped uplinks. */
static int net_fabric(const char *fab, int R, double up_bps, char *err, size_t cap) {
  rec("ns %s", fab);
  STEP("ip netns add %s", fab);
  STEP("ip -n %s link set lo up", fab);
  for (int r = 0; r < R; r++) {
    STEP("ip -n %s link add br%d type bridge", fab, r);
    STEP("ip -n %s link set br%d up", fab, r);
  }
  if (R > 1) {
    STEP("ip -n %s link add brc type bridge", fab);
    STEP("ip -n %s link set brc up", fab);
    for (int r = 0; r < R; r++) {
      STEP("ip -n %s link add up%d type veth peer name dn%d", fab, r, r);
      STEP("ip -n %s link set up%d master br%d up", fab, r, r);
      STEP("ip -n %s link set dn%d master brc up", fab, r);
      char u[16], dn[16];
      snprintf(u, sizeof u, "up%d", r);
      snprintf(dn, sizeof dn, "dn%d", r);
      if (tbf_add(err, cap, fab, u, up_bps) || tbf_add(err, cap, fab, dn, up_bps)) return -1;
      rec("uplink %d %.0f %.0f", r, up_bps, up_bps);
    }
  }
  return 0;
}

/* Host i: its namespace, its link to its rack's bridge, its address, its shaping. */
static int net_host(const char *name, const char *fab, int i, int per_rack, double rate, char *err, size_t cap) {
  int r = i / per_rack, j = i % per_rack;
  char ns[64], addr[32], hv[16];
  snprintf(ns, sizeof ns, "%s-h%d", name, i);
  snprintf(addr, sizeof addr, "10.90.%d.%d", r, j + 1);
  snprintf(hv, sizeof hv, "h%d", i);
  rec("ns %s", ns);
  STEP("ip netns add %s", ns);
  STEP("ip link add %s netns %s type veth peer name %s netns %s", TB_IFNAME, ns, hv, fab);
  STEP("ip -n %s link set %s master br%d up", fab, hv, r);
  STEP("ip -n %s addr add %s/16 dev %s", ns, addr, TB_IFNAME);
  STEP("ip -n %s link set %s up", ns, TB_IFNAME);
  STEP("ip -n %s link set lo up", ns);
  if (shoal__tb_check_interrupted(err, cap)) return -1;
  if (tbf_add(err, cap, ns, TB_IFNAME, rate) || tbf_add(err, cap, fab, hv, rate)) return -1;
  rec("host %d h%d %s %s rack %d", i, i, ns, addr, r);
  rec("rate %d %.0f %.0f", i, rate, rate);
  return 0;
}
#undef STEP

/* A cgroup per host under the testbed's, when the cgroup v1 cpu controller is there (and wanted). */
static int net_cgroups(const char *name, int H, char *err, size_t cap) {
  char p[256], cg[192];
  snprintf(p, sizeof p, "%s/cpu.cfs_quota_us", TB_CGROUP_CPU);
  if (access(p, W_OK)) return 0;
  snprintf(p, sizeof p, "%s/shoal-testbed", TB_CGROUP_CPU);
  mkdir(p, 0755);
  snprintf(cg, sizeof cg, "%s/%s", p, name);
  rec("cgroup %s", cg);
  if (mkdir(cg, 0755)) return shoal__tb_fail(err, cap, "mkdir %s: %s", cg, strerror(errno));
  for (int i = 0; i < H; i++) {
    snprintf(p, sizeof p, "%s/h%d", cg, i);
    rec("cgroup %s", p);
    if (mkdir(p, 0755)) return shoal__tb_fail(err, cap, "mkdir %s: %s", p, strerror(errno));
  }
  return 0;
}

/* The /etc/hosts every host sees (host.c mounts it over its own). */
static int net_hosts_file(const char *name, const char *dir, int H, int per_rack, char *err, size_t cap) {
  char p[256];
  snprintf(p, sizeof p, "%s/hosts", dir);
  FILE *hf = fopen(p, "w");
  if (!hf) return shoal__tb_fail(err, cap, "%s: %s", p, strerror(errno));
  fprintf(hf, "127.0.0.1\tlocalhost\n");
  for (int i = 0; i < H; i++) fprintf(hf, "10.90.%d.%d\t%s-h%d h%d\n", i / per_rack, i % per_rack + 1, name, i, i);
  if (fclose(hf)) return shoal__tb_fail(err, cap, "%s: write failed", p);
  return 0;
}

int shoal__tb_net_up(const char *name, const tb_topo_t *t, char *err, size_t cap) {
  char dir[96];
  snprintf(dir, sizeof dir, "%s/%s", TB_RUN_DIR, name);
  if (net_prepare(name, dir)) return 1;
  double t0 = shoal__now_s();
  int H = t->hosts, R = t->racks, per_rack = (H + R - 1) / R, rc = 0;
  double up_bps = t->uplink >= 0 ? t->uplink : (t->oversub > 0 && t->rate > 0 ? per_rack * t->rate / t->oversub : 0);
  char fab[64];
  snprintf(fab, sizeof fab, "%s-net", name);
  rec("testbed %s hosts %d racks %d rate %.0f", name, H, R, t->rate);
  rc = net_fabric(fab, R, up_bps, err, cap);
  for (int i = 0; i < H && !rc; i++) rc = net_host(name, fab, i, per_rack, t->rate, err, cap);
  if (!rc && t->cgroup) rc = net_cgroups(name, H, err, cap);
  if (!rc) rc = net_hosts_file(name, dir, H, per_rack, err, cap);
  if (!rc) rc = shoal__tb_check_interrupted(err, cap);
  if (!rc) rec("complete");
  fclose(state_f);
  state_f = NULL;
  if (rc) return -1;
  char rb[32], ub[32];
  printf("testbed %s: %d hosts in %d rack%s, host links %s", name, H, R, R > 1 ? "s" : "",
         shoal__tb_rate_str(t->rate, rb, sizeof rb));
  if (R > 1)
    printf(", uplinks %s (%g:1)", shoal__tb_rate_str(up_bps, ub, sizeof ub), up_bps > 0 ? per_rack * t->rate / up_bps : 0);
  printf(", up in %.2f s (shoal testbed status --name %s)\n", shoal__now_s() - t0, name);
  return 0;
}

int shoal__tb_net_down(const char *name, int quiet) {
  char dir[96], p[160], line[512], err[768];
  snprintf(dir, sizeof dir, "%s/%s", TB_RUN_DIR, name);
  snprintf(p, sizeof p, "%s/state", dir);
  struct stat st;
  if (stat(dir, &st)) {
    if (!quiet) fprintf(stderr, "shoal testbed: no testbed '%s' (%s does not exist)\n", name, dir);
    return 1;
  }
  char (*ns)[64] = calloc(TB_MAX_HOSTS + 2, sizeof *ns);
  char (*cg)[192] = calloc(TB_MAX_HOSTS + 4, sizeof *cg);
  int nns = 0, ncg = 0, rc = 0;
  FILE *f = fopen(p, "r");
  if (f) {
    while (fgets(line, sizeof line, f)) {
      char a[192];
      if (sscanf(line, "ns %63s", a) == 1 && nns < TB_MAX_HOSTS + 2) snprintf(ns[nns++], 64, "%s", a);
      if (sscanf(line, "cgroup %191s", a) == 1 && ncg < TB_MAX_HOSTS + 4) snprintf(cg[ncg++], 192, "%s", a);
    }
    fclose(f);
  }
  /* kill every process still on a host (by network namespace and by cgroup), bounded wait */
  pid_t *pids = calloc(4096, sizeof *pids);
  for (int round = 0; round < 300; round++) {
    int np = 0;
    for (int i = 0; i < nns; i++) np += shoal__tb_pids_in_netns(ns[i], pids + np, 4096 - np);
    for (int i = 0; i < ncg; i++) np += shoal__tb_pids_in_cgroup(cg[i], pids + np, 4096 - np);
    if (np == 0) break;
    for (int k = 0; k < np; k++) {
      kill(pids[k], SIGKILL);
      kill(pids[k], SIGCONT);
    }
    if (round == 299) fprintf(stderr, "shoal testbed: %d processes of testbed '%s' did not die within 3 s\n", np, name), rc = 1;
    usleep(10000);
  }
  free(pids);
  for (int i = nns - 1; i >= 0; i--) {
    snprintf(p, sizeof p, "/run/netns/%s", ns[i]);
    if (stat(p, &st) == 0 && shoal__tb_run(err, sizeof err, "ip netns del %s", ns[i]))
      fprintf(stderr, "shoal testbed: %s\n", err), rc = 1;
  }
  for (int i = ncg - 1; i >= 0; i--) { /* host groups were recorded after the testbed's group */
    if (rmdir(cg[i]) && errno != ENOENT) fprintf(stderr, "shoal testbed: rmdir %s: %s\n", cg[i], strerror(errno)), rc = 1;
  }
  snprintf(p, sizeof p, "%s/shoal-testbed", TB_CGROUP_CPU);
  if (ncg) rmdir(p); /* only when no other testbed uses it */
  free(ns);
  free(cg);
  snprintf(p, sizeof p, "%s/hosts", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/state", dir);
  unlink(p);
  if (rmdir(dir)) fprintf(stderr, "shoal testbed: rmdir %s: %s\n", dir, strerror(errno)), rc = 1;
  rmdir(TB_RUN_DIR); /* only when empty */
  if (!quiet && !rc) printf("testbed %s: removed\n", name);
  return rc;
}

int shoal__tb_set_uplink(tb_t *tb, int r, double up, double down, char *err, size_t cap) {
  char u[16], d[16];
  snprintf(u, sizeof u, "up%d", r);
  snprintf(d, sizeof d, "dn%d", r);
  if (up >= 0 && tbf_reset(err, cap, tb->fabric, u, up)) return -1;
  if (down >= 0 && tbf_reset(err, cap, tb->fabric, d, down)) return -1;
  if (up >= 0) tb->up_bps[r] = up;
  if (down >= 0) tb->down_bps[r] = down;
  return shoal__tb_record(tb->dir, err, cap, "uplink %d %.0f %.0f", r, tb->up_bps[r], tb->down_bps[r]);
}

int shoal__tb_set_host_rate(tb_t *tb, int i, double egress, double ingress, char *err, size_t cap) {
  tb_host_t *h = &tb->h[i];
  char hv[16];
  snprintf(hv, sizeof hv, "h%d", i);
  if (egress >= 0) {
    if (tbf_reset(err, cap, h->ns, TB_IFNAME, egress)) return -1;
    h->egress_bps = egress;
  }
  if (ingress >= 0) {
    if (tbf_reset(err, cap, tb->fabric, hv, ingress)) return -1;
    h->ingress_bps = ingress;
  }
  if (egress < 0 && ingress < 0) return 0;
  return shoal__tb_record(tb->dir, err, cap, "rate %d %.0f %.0f", i, h->egress_bps, h->ingress_bps);
}

int shoal__tb_set_delay(const tb_t *tb, int i, double ms, char *err, size_t cap) {
  const tb_host_t *h = &tb->h[i];
  if (h->egress_bps > 0) /* under the tbf */
    return shoal__tb_run(err, cap, "tc -n %s qdisc replace dev %s parent 1:1 handle 10: netem delay %gms", h->ns, TB_IFNAME, ms);
  return shoal__tb_run(err, cap, "tc -n %s qdisc replace dev %s root handle 10: netem delay %gms", h->ns, TB_IFNAME, ms);
}
