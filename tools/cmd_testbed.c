/* shoal testbed up|down|status|set|exec: an emulated multi-host cluster on
 * one Linux machine (network namespaces, veth, bridges, tbf; docs/testbed.md).
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
 *                         process started on the host joins it; --cpu sets
 *                         its CFS quota
 * No address outside the namespaces is ever configured; the root namespace
 * gets no interface at all. */
#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/file.h"
#include "shoal/status.h"
#include "testbed.h"

#define DEFAULT_NAME "shoal"

volatile sig_atomic_t shoal__tb_interrupted;
static void on_sig(int s) { shoal__tb_interrupted = s; }

int shoal__tb_check_interrupted(char *err, size_t cap) {
  return shoal__tb_interrupted ? shoal__tb_fail(err, cap, "interrupted by %s", strsignal(shoal__tb_interrupted)) : 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal testbed up     [--name NAME] [--hosts H] [--racks R] [--rate RATE] [--oversub X | --uplink RATE]\n"
          "                            [--topo FILE] [--no-cgroup]\n"
          "       shoal testbed up ... --slurm [--gpus G] [--cpus C]   (also Slurm: docs/live.md)\n"
          "       shoal testbed down   [--name NAME]\n"
          "       shoal testbed status [--name NAME]\n"
          "       shoal testbed set    [--name NAME] HOST [--rate RATE] [--egress RATE] [--ingress RATE]\n"
          "                            [--cpu F [--cpu-method auto|cgroup|stop]] [--delay MS]\n"
          "       shoal testbed set    [--name NAME] rK --rate RATE   (rack K's uplink, both directions)\n"
          "       shoal testbed exec   [--name NAME] HOST -- COMMAND [ARGS...]\n\n"
          "An emulated cluster on this machine: each host is a network namespace with its own host name\n"
          "and address (10.90.<rack>.<i>), linked to its rack's bridge; racks meet at a core bridge through\n"
          "an uplink of rate hosts-per-rack x RATE / oversub. Rates are tbf-shaped on egress and ingress.\n"
          "NAME (default " DEFAULT_NAME "): a lower-case letter then up to 11 letters/digits; all namespaces are\n"
          "NAME-h<i> and NAME-net. RATE: 1gbit, 200mbit, 500M (bits/s), or 0 (unshaped). Defaults: 2 hosts,\n"
          "1 rack, 1gbit, oversub 1. --topo FILE: lines 'hosts 8', 'racks 2', 'rate 1gbit', 'oversub 4',\n"
          "'uplink 500mbit' (flags given after --topo win). HOST: h3, 3 or NAME-h3.\n"
          "--cpu F: the host's processes get at most F CPUs of time (cgroup v1 CFS quota; method stop: a\n"
          "SIGSTOP/SIGCONT duty cycle of F per 100 ms; F = 0 removes the limit). --delay MS needs netem\n"
          "(absent on some kernels: then use SHOAL_EMU_DELAY_US for shoal's ranks). Needs root.\n");
}

/* A whole decimal number lo..hi (checked before any cast: 4294967298 is not 2); the error names the option. */
static int parse_count(const char *opt, const char *s, long lo, long hi, const char *unit, int *out) {
  char *e = NULL;
  errno = 0;
  long v = s ? strtol(s, &e, 10) : 0;
  if (!s || !*s || *e || errno || !isdigit((unsigned char)s[0]) || v < lo || v > hi)
    return fprintf(stderr, "shoal testbed: %s '%s': %ld..%ld%s\n", opt, s ? s : "", lo, hi, unit), -1;
  *out = (int)v;
  return 0;
}

static int parse_rate(const char *opt, const char *s, double *out) {
  if (!s) return fprintf(stderr, "shoal testbed: %s needs a rate (e.g. 1gbit, 200mbit, 0)\n", opt), -1;
  char *e;
  double v = strtod(s, &e);
  if (strpbrk(s, "xXpP")) e = (char *)s; /* decimal only: strtod also reads hex */
  double mul = 1;
  if (!strcasecmp(e, "gbit") || !strcasecmp(e, "g")) mul = 1e9;
  else if (!strcasecmp(e, "mbit") || !strcasecmp(e, "m")) mul = 1e6;
  else if (!strcasecmp(e, "kbit") || !strcasecmp(e, "k")) mul = 1e3;
  else if (!strcasecmp(e, "bit") || !*e) mul = 1;
  else e = NULL;
  if (!e || e == s || !(v >= 0) || !isfinite(v) || (v * mul > 0 && v * mul < 8000) || v * mul > 1e12)
    return fprintf(stderr, "shoal testbed: %s '%s': expected a rate like 1gbit, 200mbit, 500M or 0 (unshaped), >= 8kbit\n",
                   opt, s),
           -1;
  *out = v * mul;
  return 0;
}

static const char *rate_str(double bps, char *b, size_t cap) {
  if (bps <= 0) snprintf(b, cap, "unshaped");
  else if (bps >= 1e9 && fmod(bps, 1e8) == 0) snprintf(b, cap, "%ggbit", bps / 1e9);
  else if (bps >= 1e6) snprintf(b, cap, "%gmbit", bps / 1e6);
  else snprintf(b, cap, "%gkbit", bps / 1e3);
  return b;
}

/* ---- state file ---- */

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

static int append_state(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int append_state(const char *dir, const char *fmt, ...) {
  char p[160];
  snprintf(p, sizeof p, "%s/state", dir);
  FILE *f = fopen(p, "a");
  if (!f) return fprintf(stderr, "shoal testbed: %s: %s\n", p, strerror(errno)), -1;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  return fclose(f) ? -1 : 0;
}

/* ---- processes on a host ---- */

/* pids whose network namespace is /run/netns/<ns> (not ours) */
static int pids_in_netns(const char *ns, pid_t *out, int cap) {
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

static int pids_in_cgroup(const char *dir, pid_t *out, int cap) {
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
static void stop_daemons(const char *dir, int host) {
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

/* ---- down (also the rollback of an interrupted up) ---- */

static int tb_down(const char *name, int quiet) {
  char dir[96], p[160], line[512], err[768];
  int slurm_rc = shoal__tb_slurm_down(name, quiet); /* its daemons first, by their recorded pids */
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
  stop_daemons(dir, -1); /* SIGCONT the hosts' processes on their way out */
  /* kill every process still on a host (by network namespace and by cgroup), bounded wait */
  pid_t *pids = calloc(4096, sizeof *pids);
  for (int round = 0; round < 300; round++) {
    int np = 0;
    for (int i = 0; i < nns; i++) np += pids_in_netns(ns[i], pids + np, 4096 - np);
    for (int i = 0; i < ncg; i++) np += pids_in_cgroup(cg[i], pids + np, 4096 - np);
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
  return rc | slurm_rc;
}

/* ---- up ---- */

typedef struct topo {
  int hosts, racks, cgroup;
  double rate, oversub, uplink; /* uplink < 0: from oversub */
} topo_t;

static int read_topo(const char *path, topo_t *t) {
  FILE *f;
  if (shoal__fopen_input(path, "--topo", &f)) return fprintf(stderr, "shoal testbed: %s\n", shoal_last_error()), -1;
  char *line = NULL;
  size_t lcap = 0;
  int ln = 0, rc = 0, settings = 0;
  while (!rc && getline(&line, &lcap, f) >= 0) { /* whole lines: a long comment is a comment to its end */
    ln++;
    char k[32], v[64], extra[8];
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    int m = sscanf(line, "%31s %63s %7s", k, v, extra);
    if (m <= 0) continue;
    settings++;
    char *e = NULL;
    long n = 0;
    if (m != 2) rc = -1;
    else if (!strcmp(k, "hosts")) n = strtol(v, &e, 10), rc = (*e || n < 1 || n > TB_MAX_HOSTS), t->hosts = rc ? 0 : (int)n;
    else if (!strcmp(k, "racks")) n = strtol(v, &e, 10), rc = (*e || n < 1 || n > TB_MAX_RACKS), t->racks = rc ? 0 : (int)n;
    else if (!strcmp(k, "rate")) rc = parse_rate("rate", v, &t->rate);
    else if (!strcmp(k, "uplink")) rc = parse_rate("uplink", v, &t->uplink);
    else if (!strcmp(k, "oversub")) /* as --oversub: 1..1000 (inf would leave the uplinks unshaped) */
      t->oversub = strtod(v, &e), t->uplink = -1, rc = (*e || !(t->oversub >= 1) || t->oversub > 1000);
    else rc = -1;
    if (rc) fprintf(stderr, "shoal testbed: %s:%d: expected 'hosts N' (1..%d), 'racks R' (1..%d), 'rate RATE', 'oversub X' (1..1000) or 'uplink RATE'\n",
                    path, ln, TB_MAX_HOSTS, TB_MAX_RACKS);
  }
  free(line);
  fclose(f);
  if (!rc && !settings) return fprintf(stderr, "shoal testbed: --topo %s: no settings in it (e.g. 'hosts 4')\n", path), -1;
  return rc ? -1 : 0;
}

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

/* `up` failed or was interrupted part-way: what exists is taken down; the exit status is 128 + the signal
 * that interrupted it, else 1 */
static int roll_back(const char *what, const char *name, const char *err) {
  fprintf(stderr, "shoal testbed: %s %s: %s; rolling back\n", what, name, err);
  tb_down(name, 1);
  return shoal__tb_interrupted ? 128 + shoal__tb_interrupted : 1;
}

static int tb_up(const char *name, const topo_t *t) {
  if (geteuid() != 0) return fprintf(stderr, "shoal testbed: up needs root (network namespaces, tc)\n"), 1;
  if (t->racks > t->hosts) return fprintf(stderr, "shoal testbed: %d racks for %d hosts\n", t->racks, t->hosts), 2;
  char dir[96], p[256], err[768];
  snprintf(dir, sizeof dir, "%s/%s", TB_RUN_DIR, name);
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
  double t0 = shoal__now_s();
  int H = t->hosts, R = t->racks, per_rack = (H + R - 1) / R;
  double up_bps = t->uplink >= 0 ? t->uplink : (t->oversub > 0 && t->rate > 0 ? per_rack * t->rate / t->oversub : 0);
  char fab[64];
  snprintf(fab, sizeof fab, "%s-net", name);
#define STEP(...)                                             \
  do {                                                        \
    if (shoal__tb_interrupted) goto interrupted;              \
    if (shoal__tb_run(err, sizeof err, __VA_ARGS__)) goto failed; \
  } while (0)
  rec("testbed %s hosts %d racks %d rate %.0f", name, H, R, t->rate);
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
      if (tbf_add(err, sizeof err, fab, u, up_bps) || tbf_add(err, sizeof err, fab, dn, up_bps)) goto failed;
      rec("uplink %d %.0f %.0f", r, up_bps, up_bps);
    }
  }
  for (int i = 0; i < H; i++) {
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
    if (shoal__tb_interrupted) goto interrupted;
    if (tbf_add(err, sizeof err, ns, TB_IFNAME, t->rate) || tbf_add(err, sizeof err, fab, hv, t->rate)) goto failed;
    rec("host %d h%d %s %s rack %d", i, i, ns, addr, r);
    rec("rate %d %.0f %.0f", i, t->rate, t->rate);
  }
  snprintf(p, sizeof p, "%s/cpu.cfs_quota_us", TB_CGROUP_CPU);
  if (t->cgroup && access(p, W_OK) == 0) {
    char cg[192];
    snprintf(p, sizeof p, "%s/shoal-testbed", TB_CGROUP_CPU);
    mkdir(p, 0755);
    snprintf(cg, sizeof cg, "%s/%s", p, name);
    rec("cgroup %s", cg);
    if (mkdir(cg, 0755)) {
      snprintf(err, sizeof err, "mkdir %s: %s", cg, strerror(errno));
      goto failed;
    }
    for (int i = 0; i < H; i++) {
      snprintf(p, sizeof p, "%s/h%d", cg, i);
      rec("cgroup %s", p);
      if (mkdir(p, 0755)) {
        snprintf(err, sizeof err, "mkdir %s: %s", p, strerror(errno));
        goto failed;
      }
    }
  }
  snprintf(p, sizeof p, "%s/hosts", dir);
  FILE *hf = fopen(p, "w");
  if (!hf) {
    snprintf(err, sizeof err, "%s: %s", p, strerror(errno));
    goto failed;
  }
  fprintf(hf, "127.0.0.1\tlocalhost\n");
  for (int i = 0; i < H; i++) fprintf(hf, "10.90.%d.%d\t%s-h%d h%d\n", i / per_rack, i % per_rack + 1, name, i, i);
  if (fclose(hf)) {
    snprintf(err, sizeof err, "%s: write failed", p);
    goto failed;
  }
  if (shoal__tb_interrupted) goto interrupted;
  rec("complete");
  fclose(state_f);
  state_f = NULL;
  char rb[32], ub[32];
  printf("testbed %s: %d hosts in %d rack%s, host links %s", name, H, R, R > 1 ? "s" : "", rate_str(t->rate, rb, sizeof rb));
  if (R > 1) printf(", uplinks %s (%g:1)", rate_str(up_bps, ub, sizeof ub), up_bps > 0 ? per_rack * t->rate / up_bps : 0);
  printf(", up in %.2f s (shoal testbed status --name %s)\n", shoal__now_s() - t0, name);
  return 0;
#undef STEP
interrupted:
  shoal__tb_check_interrupted(err, sizeof err);
failed:
  fclose(state_f);
  state_f = NULL;
  return roll_back("up", name, err);
}

/* ---- status ---- */

static int tb_status(const char *name) {
  tb_t *tb = calloc(1, sizeof *tb);
  char err[512];
  if (shoal__tb_load(name, tb, err, sizeof err)) {
    fprintf(stderr, "shoal testbed: %s\n", err);
    DIR *d = opendir(TB_RUN_DIR);
    if (d) {
      struct dirent *e;
      int first = 1;
      while ((e = readdir(d)))
        if (e->d_name[0] != '.') fprintf(stderr, "%s%s", first ? "testbeds here: " : ", ", e->d_name), first = 0;
      if (!first) fputc('\n', stderr);
      closedir(d);
    }
    free(tb);
    return 1;
  }
  char b1[32], b2[32];
  printf("testbed %s: %d hosts, %d rack%s, created with host links %s; fabric namespace %s; state %s/state\n", tb->name,
         tb->nhosts, tb->nracks, tb->nracks > 1 ? "s" : "", rate_str(tb->rate_bps, b1, sizeof b1), tb->fabric, tb->dir);
  printf("%-5s %-16s %-12s %-4s %-10s %-10s %-12s %s\n", "host", "namespace", "address", "rack", "egress", "ingress", "cpu",
         "procs");
  pid_t *pids = calloc(4096, sizeof *pids);
  for (int i = 0; i < tb->nhosts; i++) {
    const tb_host_t *h = &tb->h[i];
    char cpu[32];
    if (h->cpu > 0) snprintf(cpu, sizeof cpu, "%g(%s)", h->cpu, h->cpu_method);
    else snprintf(cpu, sizeof cpu, "-");
    printf("%-5s %-16s %-12s %-4d %-10s %-10s %-12s %d\n", h->name, h->ns, h->addr, h->rack,
           rate_str(h->egress_bps, b1, sizeof b1), rate_str(h->ingress_bps, b2, sizeof b2), cpu,
           pids_in_netns(h->ns, pids, 4096));
  }
  free(pids);
  for (int r = 0; tb->nracks > 1 && r < tb->nracks; r++)
    printf("rack r%d uplink: rack->core %s, core->rack %s\n", r, rate_str(tb->up_bps[r], b1, sizeof b1),
           rate_str(tb->down_bps[r], b2, sizeof b2));
  if (tb->cgroup[0]) printf("cgroup: %s/h<i>\n", tb->cgroup);
  shoal__tb_slurm_status(name);
  free(tb);
  return 0;
}

/* ---- set ---- */

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
    int n = pids_in_netns(ns, pids, 4096);
    for (int k = 0; k < n; k++) kill(pids[k], SIGCONT);
    struct timespec on = {0, (long)(frac * period * 1e9)}, off = {0, (long)((1 - frac) * period * 1e9)};
    nanosleep(&on, NULL);
    if (duty_stop) break;
    n = pids_in_netns(ns, pids, 4096);
    for (int k = 0; k < n; k++) kill(pids[k], SIGSTOP);
    nanosleep(&off, NULL);
  }
  int n = pids_in_netns(ns, pids, 4096);
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

static int tb_set(const char *name, int argc, char **argv) {
  if (argc < 1) return fprintf(stderr, "shoal testbed set: which host? (shoal testbed set h1 --rate 200mbit)\n"), 2;
  tb_t *tb = calloc(1, sizeof *tb);
  char err[768];
  int rc = 0;
  if (shoal__tb_load(name, tb, err, sizeof err)) {
    fprintf(stderr, "shoal testbed: %s\n", err);
    free(tb);
    return 1;
  }
  const char *target = argv[0];
  int host = shoal__tb_host_index(tb, target), rack = -1;
  if (host < 0 && (target[0] == 'r')) {
    const char *s = !strncmp(target, "rack", 4) ? target + 4 : target + 1;
    int v = shoal__tb_index(s);
    if (v >= 0 && v < tb->nracks) rack = v;
  }
  if (host < 0 && rack < 0) {
    fprintf(stderr, "shoal testbed set: '%s' is neither a host (h0..h%d) nor a rack (r0..r%d) of testbed '%s'\n", target,
            tb->nhosts - 1, tb->nracks - 1, name);
    free(tb);
    return 2;
  }
  double eg = -1, in = -1, cpu = -1, delay = -1, v;
  const char *method = "auto";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--rate")) {
      if (parse_rate(a, val, &v)) goto bad;
      eg = in = v, i++;
    } else if (!strcmp(a, "--egress")) {
      if (parse_rate(a, val, &eg)) goto bad;
      i++;
    } else if (!strcmp(a, "--ingress")) {
      if (parse_rate(a, val, &in)) goto bad;
      i++;
    } else if (!strcmp(a, "--cpu") || !strcmp(a, "--delay")) {
      char *e = NULL;
      v = val ? strtod(val, &e) : -1;
      if (!val || *e || !(v >= 0) || (a[2] == 'c' && v > 1024) || (a[2] == 'd' && v > 10000)) {
        fprintf(stderr, "shoal testbed set: %s '%s': expected %s\n", a, val ? val : "", a[2] == 'c' ? "a CPU fraction like 0.25 (0: no limit)" : "milliseconds (0..10000)");
        goto bad;
      }
      if (a[2] == 'c') cpu = v;
      else delay = v;
      i++;
    } else if (!strcmp(a, "--cpu-method")) {
      if (!val || (strcmp(val, "auto") && strcmp(val, "cgroup") && strcmp(val, "stop"))) {
        fprintf(stderr, "shoal testbed set: --cpu-method '%s': expected auto, cgroup or stop\n", val ? val : "");
        goto bad;
      }
      method = val, i++;
    } else {
      fprintf(stderr, "shoal testbed set: unknown option '%s' (try shoal testbed --help)\n", a);
      goto bad;
    }
  }
  if (eg < 0 && in < 0 && cpu < 0 && delay < 0) {
    fprintf(stderr, "shoal testbed set: nothing to set (--rate, --egress, --ingress, --cpu, --delay)\n");
    goto bad;
  }
  if (rack < 0 && cpu >= 0) { /* checked before anything is applied: a refused command changes nothing */
    if (!strcmp(method, "auto")) method = tb->cgroup[0] ? "cgroup" : "stop";
    if (!strcmp(method, "cgroup") && !tb->cgroup[0]) {
      fprintf(stderr, "shoal testbed set: --cpu-method cgroup: testbed '%s' has no cgroup (cgroup v1 cpu controller "
                      "missing at up, or --no-cgroup); use --cpu-method stop\n", name);
      goto bad;
    }
    if (cpu > 0 && cpu < 0.01) {
      fprintf(stderr, "shoal testbed set: --cpu %g: at least 0.01\n", cpu);
      goto bad;
    }
  }
  if (rack >= 0) {
    if (tb->nracks < 2) {
      fprintf(stderr, "shoal testbed set: rack r%d: this testbed has one rack, so no uplink to set\n", rack);
      goto bad;
    }
    if (cpu >= 0 || delay >= 0) {
      fprintf(stderr, "shoal testbed set: rack r%d: a rack takes only --rate/--egress/--ingress (its uplink); --cpu and "
              "--delay are per host\n", rack);
      goto bad;
    }
    char u[16], d[16];
    snprintf(u, sizeof u, "up%d", rack);
    snprintf(d, sizeof d, "dn%d", rack);
    if (eg >= 0 && tbf_reset(err, sizeof err, tb->fabric, u, eg)) goto failed;
    if (in >= 0 && tbf_reset(err, sizeof err, tb->fabric, d, in)) goto failed;
    append_state(tb->dir, "uplink %d %.0f %.0f", rack, eg >= 0 ? eg : tb->up_bps[rack], in >= 0 ? in : tb->down_bps[rack]);
    free(tb);
    return 0;
  }
  tb_host_t *h = &tb->h[host];
  char hv[16];
  snprintf(hv, sizeof hv, "h%d", host);
  if (eg >= 0) {
    if (tbf_reset(err, sizeof err, h->ns, TB_IFNAME, eg)) goto failed;
    h->egress_bps = eg;
  }
  if (in >= 0) {
    if (tbf_reset(err, sizeof err, tb->fabric, hv, in)) goto failed;
    h->ingress_bps = in;
  }
  if (eg >= 0 || in >= 0) append_state(tb->dir, "rate %d %.0f %.0f", host, h->egress_bps, h->ingress_bps);
  if (delay >= 0) {
    int r2 = h->egress_bps > 0 ? shoal__tb_run(err, sizeof err, "tc -n %s qdisc replace dev %s parent 1:1 handle 10: netem delay %gms",
                                     h->ns, TB_IFNAME, delay)
                               : shoal__tb_run(err, sizeof err, "tc -n %s qdisc replace dev %s root handle 10: netem delay %gms", h->ns,
                                     TB_IFNAME, delay);
    if (r2) {
      fprintf(stderr, "shoal testbed set: --delay needs the netem qdisc, which this kernel lacks (%s).\n"
                      "For shoal's ranks use the user-space delay instead: SHOAL_EMU_DELAY_US=%g\n", err, delay * 1000);
      rc = 1;
    }
  }
  if (cpu >= 0) {
    char cgd[256];
    snprintf(cgd, sizeof cgd, "%s/%s", tb->cgroup, h->name);
    stop_daemons(tb->dir, host);
    if (tb->cgroup[0] && write_cg(cgd, "cpu.cfs_quota_us", -1, err, sizeof err)) goto failed;
    if (cpu > 0 && !strcmp(method, "cgroup")) {
      if (write_cg(cgd, "cpu.cfs_period_us", 100000, err, sizeof err) ||
          write_cg(cgd, "cpu.cfs_quota_us", (long)(cpu * 100000), err, sizeof err))
        goto failed;
    } else if (cpu > 0 && cpu < 1) {
      fflush(NULL);
      pid_t pid = fork();
      if (pid < 0) {
        snprintf(err, sizeof err, "fork: %s", strerror(errno));
        goto failed;
      }
      if (pid == 0) duty_daemon(tb->dir, h->ns, cpu);
      append_state(tb->dir, "daemon %d %d", host, (int)pid);
    }
    append_state(tb->dir, "cpu %d %g %s", host, cpu, method);
  }
  free(tb);
  return rc;
failed:
  fprintf(stderr, "shoal testbed set: %s\n", err);
  free(tb);
  return 1;
bad:
  free(tb);
  return 2;
}

/* ---- exec ---- */

static int tb_exec(const char *name, int argc, char **argv) {
  if (argc < 1) return fprintf(stderr, "shoal testbed exec: which host? (shoal testbed exec h0 -- hostname)\n"), 2;
  tb_t *tb = calloc(1, sizeof *tb);
  char err[768];
  if (shoal__tb_load(name, tb, err, sizeof err)) {
    fprintf(stderr, "shoal testbed exec: %s\n", err);
    free(tb);
    return 1;
  }
  int host = shoal__tb_host_index(tb, argv[0]);
  if (host < 0) {
    fprintf(stderr, "shoal testbed exec: '%s' is not a host of testbed '%s' (h0..h%d)\n", argv[0], name, tb->nhosts - 1);
    free(tb);
    return 2;
  }
  int i = 1;
  if (i < argc && !strcmp(argv[i], "--")) i++;
  if (i >= argc) {
    free(tb);
    return fprintf(stderr, "shoal testbed exec: no command (shoal testbed exec %s -- COMMAND ARGS)\n", argv[0]), 2;
  }
  if (shoal__tb_enter(tb, host, err, sizeof err)) {
    fprintf(stderr, "shoal testbed exec: %s\n", err);
    free(tb);
    return 1;
  }
  free(tb);
  execvp(argv[i], argv + i);
  fprintf(stderr, "shoal testbed exec: cannot run '%s': %s\n", argv[i], strerror(errno));
  return 127;
}

int shoal_cmd_testbed(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *sub = argv[1], *name = DEFAULT_NAME;
  int slurm = 0, slurm_gpus = 1, slurm_cpus = 0;
  topo_t t = {.hosts = 2, .racks = 1, .cgroup = 1, .rate = 1e9, .oversub = 1, .uplink = -1};
  int flag_uplink = 0, flag_oversub = 0; /* given on the command line: one of them */
  /* options before the positional arguments; exec stops at its host */
  int i = 2;
  char **rest = NULL;
  int nrest = 0;
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  for (; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--name")) {
      if (!v) return fprintf(stderr, "shoal testbed: --name needs a value\n"), free(pos), 2;
      name = v, i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--hosts")) {
      if (parse_count(a, v, 1, TB_MAX_HOSTS, "", &t.hosts)) return free(pos), 2;
      i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--racks")) {
      if (parse_count(a, v, 1, TB_MAX_RACKS, "", &t.racks)) return free(pos), 2;
      i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--rate")) {
      if (parse_rate(a, v, &t.rate)) return free(pos), 2;
      i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--uplink")) {
      if (parse_rate(a, v, &t.uplink)) return free(pos), 2;
      if (flag_oversub) return fprintf(stderr, "shoal testbed: --uplink and --oversub both set the uplink: give one\n"), free(pos), 2;
      flag_uplink = 1, i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--oversub")) {
      char *e = NULL;
      t.oversub = v ? strtod(v, &e) : 0;
      if (!v || *e || !(t.oversub >= 1) || t.oversub > 1000)
        return fprintf(stderr, "shoal testbed: --oversub '%s': a ratio >= 1 (4 = 4:1)\n", v ? v : ""), free(pos), 2;
      if (flag_uplink) return fprintf(stderr, "shoal testbed: --uplink and --oversub both set the uplink: give one\n"), free(pos), 2;
      t.uplink = -1, flag_oversub = 1, i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--topo")) {
      if (!v) return fprintf(stderr, "shoal testbed: --topo needs a file\n"), free(pos), 2;
      if (read_topo(v, &t)) return free(pos), 2;
      i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--slurm")) {
      slurm = 1;
    } else if (!strcmp(sub, "up") && (!strcmp(a, "--gpus") || !strcmp(a, "--cpus"))) {
      int v2;
      if (parse_count(a, v, 1, a[2] == 'g' ? TB_SLURM_MAX_GPUS : 64, " per host", &v2)) return free(pos), 2;
      if (a[2] == 'g') slurm_gpus = v2;
      else slurm_cpus = v2;
      i++;
    } else if (!strcmp(sub, "up") && !strcmp(a, "--no-cgroup")) {
      t.cgroup = 0;
    } else if (!strcmp(sub, "set") || !strcmp(sub, "exec")) {
      rest = argv + i, nrest = argc - i;
      break;
    } else {
      fprintf(stderr, "shoal testbed %s: unknown argument '%s' (try shoal testbed --help)\n", sub, a);
      free(pos);
      return 2;
    }
  }
  free(pos);
  if (!shoal__tb_name_ok(name))
    return fprintf(stderr, "shoal testbed: --name '%s': a lower-case letter then up to 11 letters or digits\n", name), 2;
  if (!strcmp(sub, "up")) {
    /* a signal part-way through either part rolls back what exists */
    struct sigaction sa, old[3];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
    sigaction(SIGHUP, &sa, &old[2]);
    int rc = tb_up(name, &t);
    char err[768];
    if (!rc && slurm && shoal__tb_slurm_up(name, slurm_gpus, slurm_cpus, err, sizeof err)) {
      rc = roll_back("up --slurm", name, err);
    }
    for (int k = 0; k < 3; k++) sigaction(k == 0 ? SIGINT : k == 1 ? SIGTERM : SIGHUP, &old[k], NULL);
    return rc;
  }
  if (!strcmp(sub, "down")) return tb_down(name, 0);
  if (!strcmp(sub, "status")) return tb_status(name);
  if (!strcmp(sub, "set")) return tb_set(name, nrest, rest);
  if (!strcmp(sub, "exec")) return tb_exec(name, nrest, rest);
  fprintf(stderr, "shoal testbed: unknown subcommand '%s' (up, down, status, set, exec)\n", sub);
  return 2;
}
