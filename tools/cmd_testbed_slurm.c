/* `shoal testbed up --slurm`: a real Slurm (Debian's slurmctld, slurmd,
 * munge) on the emulated hosts of a testbed (docs/live.md).
 *
 * Layout, all under /run/shoal-testbed/<testbed>/slurm:
 *   munge/        munged's key, socket, pid, log and seed; munged runs as the
 *                 munge user, in the root namespaces (its socket is a file, so
 *                 every namespace reaches it)
 *   slurm.conf    + topology.conf (one switch per rack) + gres.conf
 *   dev/gpu<k>    the emulated GPUs: character devices (Slurm refuses files)
 *   ctld/         slurmctld's state, log; slurmctld runs in the fabric
 *                 namespace under its own host name <testbed>-ctl with address
 *                 10.90.255.254 on the core bridge (rack bridge with one rack)
 *   d/<node>.*    each slurmd's spool, pid and log; slurmd i runs on host i
 *                 (shoal__tb_enter: its namespaces, host name and cgroup)
 *   pids          "<what> <pid> <start time>" of every daemon started here,
 *                 written before `up` returns; `down` stops exactly these.
 * Slurm's commands need SLURM_CONF=<dir>/slurm.conf and a route to the
 * controller: run them on a host (`shoal testbed exec h0 -- squeue`, which
 * sets SLURM_CONF) or through shoal__tb_slurm_enter (shoal submit / sched serve). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "testbed.h"

#define CTL_ADDR "10.90.255.254"
#define SLURM_UP_DEADLINE_S 30.0


void shoal__tb_slurm_dir(const char *name, char *buf, size_t cap) { snprintf(buf, cap, "%s/%s/slurm", TB_RUN_DIR, name); }

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

static int write_text(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return -1;
  size_t len = strlen(text);
  ssize_t w = write(fd, text, len);
  int rc = (w == (ssize_t)len) ? 0 : -1;
  if (close(fd)) rc = -1;
  return rc;
}

static int record_pid(const char *dir, const char *what, pid_t pid) {
  char p[256];
  snprintf(p, sizeof p, "%s/pids", dir);
  FILE *f = fopen(p, "a");
  if (!f) return -1;
  fprintf(f, "%s %d %llu\n", what, (int)pid, proc_start(pid));
  return fclose(f);
}

static void redirect_out(const char *log) {
  int fd = open("/dev/null", O_RDWR);
  if (fd >= 0) dup2(fd, 0);
  int lf = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (lf >= 0) {
    dup2(lf, 1);
    dup2(lf, 2);
  }
  if (fd > 2) close(fd);
}

/* range "<name>-h[a-b]" */
static void node_range(const char *name, int a, int b, char *buf, size_t cap) {
  if (a == b) snprintf(buf, cap, "%s-h%d", name, a);
  else snprintf(buf, cap, "%s-h[%d-%d]", name, a, b);
}

static int write_configs(const tb_t *tb, const char *dir, int gpus, int cpus, char *err, size_t cap) {
  char p[256], nodes[64];
  size_t bufcap = 16384;
  char *b = malloc(bufcap);
  if (!b) return shoal__tb_fail(err, cap, "out of memory");
  size_t n = 0;
#define W(...) (n += (size_t)snprintf(b + n, n < bufcap ? bufcap - n : 0, __VA_ARGS__))
  W("# written by shoal testbed up --slurm; removed by shoal testbed down\n");
  W("ClusterName=%s\nSlurmctldHost=%s-ctl(%s)\n", tb->name, tb->name, CTL_ADDR);
  W("SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=%s/munge/sock\n", dir);
  W("StateSaveLocation=%s/ctld\nSlurmctldPidFile=%s/ctld/slurmctld.pid\nSlurmctldLogFile=%s/ctld/slurmctld.log\n", dir, dir,
    dir);
  W("SlurmdSpoolDir=%s/d/%%n\nSlurmdPidFile=%s/d/%%n.pid\nSlurmdLogFile=%s/d/%%n.log\nSlurmdParameters=config_overrides\n",
    dir, dir, dir);
  W("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n");
  W("AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nMpiDefault=none\n");
  W("SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSchedulerType=sched/backfill\n");
  W("SchedulerParameters=bf_interval=2,sched_min_interval=100000\nPriorityType=priority/basic\n");
  W("TopologyPlugin=topology/tree\nGresTypes=gpu\nReturnToService=2\nJobRequeue=1\nMinJobAge=86400\n");
  W("KillWait=5\nMessageTimeout=10\nSlurmdTimeout=30\nInactiveLimit=0\nWaitTime=0\n");
  W("SlurmctldDebug=info\nSlurmdDebug=info\n");
  for (int i = 0; i < tb->nhosts; i++)
    W("NodeName=%s NodeAddr=%s CPUs=%d RealMemory=4096 Gres=gpu:%d State=UNKNOWN\n", tb->h[i].ns, tb->h[i].addr, cpus,
      gpus);
  node_range(tb->name, 0, tb->nhosts - 1, nodes, sizeof nodes);
  W("PartitionName=shoal Nodes=%s Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO\n", nodes);
  snprintf(p, sizeof p, "%s/slurm.conf", dir);
  if (n >= bufcap || write_text(p, b, 0644)) goto io;
  /* topology: one leaf switch per rack, joined by a core switch */
  n = 0;
  for (int r = 0; r < tb->nracks; r++) {
    int a = -1, z = -1;
    for (int i = 0; i < tb->nhosts; i++)
      if (tb->h[i].rack == r) {
        if (a < 0) a = i;
        z = i;
      }
    if (a < 0) continue;
    node_range(tb->name, a, z, nodes, sizeof nodes);
    W("SwitchName=r%d Nodes=%s\n", r, nodes);
  }
  if (tb->nracks > 1) W("SwitchName=core Switches=r[0-%d]\n", tb->nracks - 1);
  snprintf(p, sizeof p, "%s/topology.conf", dir);
  if (write_text(p, b, 0644)) goto io;
  n = 0;
  node_range(tb->name, 0, tb->nhosts - 1, nodes, sizeof nodes);
  if (gpus == 1) W("NodeName=%s Name=gpu File=%s/dev/gpu0\n", nodes, dir);
  else W("NodeName=%s Name=gpu File=%s/dev/gpu[0-%d]\n", nodes, dir, gpus - 1);
  snprintf(p, sizeof p, "%s/gres.conf", dir);
  if (write_text(p, b, 0644)) goto io;
  /* cgroup.conf is read by slurmd even with task/none on some builds: harmless */
  snprintf(p, sizeof p, "%s/cgroup.conf", dir);
  if (write_text(p, "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n", 0644)) goto io;
#undef W
  free(b);
  return 0;
io:
  free(b);
  return shoal__tb_fail(err, cap, "%s: %s", p, strerror(errno));
}

static int enter_fabric(const tb_t *tb, char *err, size_t cap) {
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

int shoal__tb_slurm_up(const char *name, int gpus, int cpus, char *err, size_t cap) {
  tb_t *tb = calloc(1, sizeof *tb);
  if (!tb) return shoal__tb_fail(err, cap, "out of memory");
  int rc = -1;
  char dir[160], p[320], q[320];
  if (shoal__tb_load(name, tb, err, cap)) goto out;
  if (gpus < 1 || gpus > TB_SLURM_MAX_GPUS) {
    shoal__tb_fail(err, cap, "--gpus %d: 1..%d per host", gpus, TB_SLURM_MAX_GPUS);
    goto out;
  }
  if (cpus < 1) cpus = gpus > 2 ? gpus : 2;
  const char *bins[] = {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch"};
  for (size_t k = 0; k < sizeof bins / sizeof *bins; k++)
    if (access(bins[k], X_OK)) {
      shoal__tb_fail(err, cap, "%s not found: install Debian's slurmctld slurmd slurm-client munge (scripts/deps.sh test)", bins[k]);
      goto out;
    }
  struct passwd *mu = getpwnam("munge");
  if (!mu) {
    shoal__tb_fail(err, cap, "no 'munge' user (the munge package creates it)");
    goto out;
  }
  uid_t muid = mu->pw_uid;
  gid_t mgid = mu->pw_gid;
  shoal__tb_slurm_dir(name, dir, sizeof dir);
  if (mkdir(dir, 0755)) {
    shoal__tb_fail(err, cap, errno == EEXIST ? "%s exists: Slurm already up on testbed %s" : "mkdir %s: %s", dir,
         errno == EEXIST ? name : strerror(errno));
    goto out;
  }
  double t0 = shoal__now_s();
  const char *subs[] = {"munge", "ctld", "d", "dev"};
  for (size_t k = 0; k < 4; k++) {
    snprintf(p, sizeof p, "%s/%s", dir, subs[k]);
    if (mkdir(p, 0755)) {
      shoal__tb_fail(err, cap, "mkdir %s: %s", p, strerror(errno));
      goto out;
    }
  }
  for (int g = 0; g < gpus; g++) {
    snprintf(p, sizeof p, "%s/dev/gpu%d", dir, g);
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3))) {
      shoal__tb_fail(err, cap, "mknod %s: %s", p, strerror(errno));
      goto out;
    }
  }
  /* munge key: 1 KiB of randomness, readable by munge only */
  {
    unsigned char key[1024];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, key, sizeof key) : -1;
    if (fd >= 0) close(fd);
    snprintf(p, sizeof p, "%s/munge/key", dir);
    int kf = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (got != (ssize_t)sizeof key || kf < 0 || write(kf, key, sizeof key) != (ssize_t)sizeof key) {
      if (kf >= 0) close(kf);
      shoal__tb_fail(err, cap, "cannot write the munge key %s", p);
      goto out;
    }
    close(kf);
    snprintf(q, sizeof q, "%s/munge", dir);
    if (chown(p, muid, mgid) || chown(q, muid, mgid)) {
      shoal__tb_fail(err, cap, "chown %s to munge: %s", q, strerror(errno));
      goto out;
    }
  }
  if (write_configs(tb, dir, gpus, cpus, err, cap)) goto out;
  /* the controller's name in every host's /etc/hosts */
  snprintf(p, sizeof p, "%s/hosts", tb->dir);
  FILE *hf = fopen(p, "a");
  if (!hf) {
    shoal__tb_fail(err, cap, "%s: %s", p, strerror(errno));
    goto out;
  }
  fprintf(hf, "%s\t%s-ctl\n", CTL_ADDR, name);
  fclose(hf);
  /* the controller's address, in the fabric */
  {
    if (shoal__tb_run(err, cap, "ip -n %s addr add %s/16 dev %s", tb->fabric, CTL_ADDR, tb->nracks > 1 ? "brc" : "br0"))
      goto out;
  }
  fflush(NULL);
  if (shoal__tb_check_interrupted(err, cap)) goto out;
  /* munged */
  pid_t pid = fork();
  if (pid < 0) {
    shoal__tb_fail(err, cap, "fork: %s", strerror(errno));
    goto out;
  }
  if (pid == 0) {
    setsid();
    snprintf(p, sizeof p, "%s/munge/log", dir);
    redirect_out(p);
    if (setgroups(0, NULL) || setgid(mgid) || setuid(muid)) _exit(126);
    char a1[320], a2[320], a3[320], a4[320];
    snprintf(a1, sizeof a1, "--socket=%s/munge/sock", dir);
    snprintf(a2, sizeof a2, "--key-file=%s/munge/key", dir);
    snprintf(a3, sizeof a3, "--pid-file=%s/munge/pid", dir);
    snprintf(a4, sizeof a4, "--seed-file=%s/munge/seed", dir);
    execl("/usr/sbin/munged", "munged", "-F", a1, a2, a3, a4, (char *)NULL);
    _exit(127);
  }
  if (record_pid(dir, "munged", pid)) {
    shoal__tb_fail(err, cap, "%s/pids: %s", dir, strerror(errno));
    goto out;
  }
  snprintf(p, sizeof p, "%s/munge/sock", dir);
  struct stat st;
  double dl = shoal__now_s() + 10;
  while (stat(p, &st) && shoal__now_s() < dl) {
    if (shoal__tb_check_interrupted(err, cap)) goto out;
    if (waitpid(pid, NULL, WNOHANG) == pid) {
      shoal__tb_fail(err, cap, "munged exited at start (see %s/munge/log)", dir);
      goto out;
    }
    usleep(10000);
  }
  if (stat(p, &st)) {
    shoal__tb_fail(err, cap, "munged did not create %s within 10 s", p);
    goto out;
  }
  snprintf(q, sizeof q, "%s/slurm.conf", dir);
  if (shoal__tb_check_interrupted(err, cap)) goto out;
  /* slurmctld, in the fabric namespace with its own host name */
  pid = fork();
  if (pid < 0) {
    shoal__tb_fail(err, cap, "fork: %s", strerror(errno));
    goto out;
  }
  if (pid == 0) {
    setsid();
    snprintf(p, sizeof p, "%s/ctld/out", dir);
    redirect_out(p);
    char e2[256], hn[64];
    snprintf(hn, sizeof hn, "%s-ctl", name);
    if (enter_fabric(tb, e2, sizeof e2) || unshare(CLONE_NEWUTS) || sethostname(hn, strlen(hn))) {
      fprintf(stderr, "slurmctld: %s\n", e2);
      _exit(126);
    }
    setenv("SLURM_CONF", q, 1);
    execl("/usr/sbin/slurmctld", "slurmctld", "-D", "-i", "-f", q, (char *)NULL);
    _exit(127);
  }
  if (record_pid(dir, "slurmctld", pid)) goto pidfail;
  /* one slurmd per host, on the host */
  for (int i = 0; i < tb->nhosts; i++) {
    if (shoal__tb_check_interrupted(err, cap)) goto out;
    pid = fork();
    if (pid < 0) {
      shoal__tb_fail(err, cap, "fork: %s", strerror(errno));
      goto out;
    }
    if (pid == 0) {
      setsid();
      snprintf(p, sizeof p, "%s/d/%s.out", dir, tb->h[i].ns);
      redirect_out(p);
      char e2[512];
      if (shoal__tb_enter(tb, i, e2, sizeof e2)) {
        fprintf(stderr, "slurmd: %s\n", e2);
        _exit(126);
      }
      setenv("SLURM_CONF", q, 1);
      execl("/usr/sbin/slurmd", "slurmd", "-D", "-f", q, "-N", tb->h[i].ns, (char *)NULL);
      _exit(127);
    }
    char what[64];
    snprintf(what, sizeof what, "slurmd-%s", tb->h[i].name);
    if (record_pid(dir, what, pid)) goto pidfail;
  }
  /* idle: every node answers (sinfo -h -o %T shows idle for all) */
  dl = shoal__now_s() + SLURM_UP_DEADLINE_S;
  int idle = 0;
  while (shoal__now_s() < dl) {
    if (shoal__tb_check_interrupted(err, cap)) goto out;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ip netns exec %s env SLURM_CONF=%s sinfo -h -N -o %%T 2>/dev/null", tb->fabric, q);
    FILE *f = popen(cmd, "r");
    idle = 0;
    int total = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f)) {
      total++;
      if (!strncmp(line, "idle", 4)) idle++;
    }
    if (f) pclose(f);
    if (total == tb->nhosts && idle == tb->nhosts) break;
    idle = -1;
    /* a daemon that died at start: fail now */
    int dead = 0;
    while (waitpid(-1, NULL, WNOHANG) > 0) dead++;
    if (dead) {
      shoal__tb_fail(err, cap, "a Slurm daemon exited at start (logs: %s/ctld/, %s/d/)", dir, dir);
      goto out;
    }
    usleep(100000);
  }
  if (idle != tb->nhosts) {
    shoal__tb_fail(err, cap, "the Slurm nodes were not idle within %g s (logs: %s/ctld/slurmctld.log, %s/d/)", SLURM_UP_DEADLINE_S, dir,
         dir);
    goto out;
  }
  printf("testbed %s: Slurm up in %.2f s: slurmctld %s-ctl (%s), %d slurmd (%d GPUs, %d CPUs each), partition shoal; "
         "SLURM_CONF=%s\n",
         name, shoal__now_s() - t0, name, CTL_ADDR, tb->nhosts, gpus, cpus, q);
  rc = 0;
  goto out;
pidfail:
  shoal__tb_fail(err, cap, "%s/pids: %s", dir, strerror(errno));
out:
  free(tb);
  return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)ftw;
  if (flag == FTW_DP) return rmdir(path) ? -1 : 0;
  return unlink(path) ? -1 : 0;
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

/* Stop the daemons recorded in <dir>/pids (SIGTERM, then SIGKILL after 5 s;
 * a pid whose start time changed is someone else's and left alone), then
 * remove <dir>. 0 if nothing was there. */
int shoal__tb_slurm_down(const char *name, int quiet) {
  char dir[160], p[256], line[256];
  shoal__tb_slurm_dir(name, dir, sizeof dir);
  struct stat st;
  if (stat(dir, &st)) return 0;
  int rc = 0, n = 0;
  pid_t pids[TB_MAX_HOSTS + 4];
  snprintf(p, sizeof p, "%s/pids", dir);
  FILE *f = fopen(p, "r");
  while (f && fgets(line, sizeof line, f) && n < TB_MAX_HOSTS + 4) {
    char what[64];
    int pid;
    unsigned long long t;
    if (sscanf(line, "%63s %d %llu", what, &pid, &t) != 3 || pid <= 1) continue;
    const char *comm = !strncmp(what, "slurmd", 6) ? "slurmd" : what;
    if (proc_start(pid) == t && comm_is(pid, comm)) pids[n++] = pid;
  }
  if (f) fclose(f);
  /* slurmd first (their jobs die with them), then slurmctld, munged last */
  unsigned long long starts[TB_MAX_HOSTS + 4];
  for (int k = n - 1; k >= 0; k--) starts[k] = proc_start(pids[k]), kill(pids[k], SIGTERM);
  double dl = shoal__now_s() + 5;
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
  if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS)) {
    fprintf(stderr, "shoal testbed: cannot remove %s: %s\n", dir, strerror(errno));
    rc = 1;
  }
  if (!quiet && !rc) printf("testbed %s: Slurm stopped (%d daemons)\n", name, n);
  return rc;
}

/* One status line. */
void shoal__tb_slurm_status(const char *name) {
  char dir[160], p[256], line[256];
  shoal__tb_slurm_dir(name, dir, sizeof dir);
  snprintf(p, sizeof p, "%s/pids", dir);
  FILE *f = fopen(p, "r");
  if (!f) return;
  int n = 0, alive = 0;
  while (fgets(line, sizeof line, f)) {
    char what[64];
    int pid;
    unsigned long long t;
    if (sscanf(line, "%63s %d %llu", what, &pid, &t) != 3) continue;
    n++;
    if (proc_start(pid) == t) alive++;
  }
  fclose(f);
  printf("slurm: %d of %d daemons running (munged, slurmctld %s-ctl at %s, slurmd per host); SLURM_CONF=%s/slurm.conf\n",
         alive, n, name, CTL_ADDR, dir);
}

/* Make Slurm's commands work from this process and its children: join the
 * fabric namespace (where the controller listens) and set SLURM_CONF. */
int shoal__tb_slurm_enter(const char *name, char *err, size_t cap) {
  tb_t *tb = calloc(1, sizeof *tb);
  if (!tb) return shoal__tb_fail(err, cap, "out of memory");
  int rc = -1;
  char dir[160], p[256];
  struct stat st;
  if (shoal__tb_load(name, tb, err, cap)) goto out;
  shoal__tb_slurm_dir(name, dir, sizeof dir);
  snprintf(p, sizeof p, "%s/slurm.conf", dir);
  if (stat(p, &st)) {
    shoal__tb_fail(err, cap, "testbed %s has no Slurm (%s missing; start it with shoal testbed up --slurm)", name, p);
    goto out;
  }
  if (enter_fabric(tb, err, cap)) goto out;
  setenv("SLURM_CONF", p, 1);
  rc = 0;
out:
  free(tb);
  return rc;
}
