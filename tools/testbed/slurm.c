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
 *                 (shoal__tb_daemon_on_host: its namespaces, host name and cgroup)
 *   pids          "<what> <pid> <start time>" of every daemon started here,
 *                 written before `up` returns; `down` stops exactly these (daemon.c).
 * Slurm's commands need SLURM_CONF=<dir>/slurm.conf and a route to the
 * controller: run them on a host (`shoal testbed exec h0 -- squeue`, which
 * sets SLURM_CONF) or through shoal__tb_slurm_enter (shoal submit / sched serve). */
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include "core/clock.h"
#include "testbed.h"

#define CTL_ADDR TB_CTL_ADDR
#define SLURM_UP_DEADLINE_S 30.0

void shoal__tb_slurm_dir(const char *name, char *buf, size_t cap) { snprintf(buf, cap, "%s/%s/slurm", TB_RUN_DIR, name); }

static int write_text(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return -1;
  size_t len = strlen(text);
  ssize_t w = write(fd, text, len);
  int rc = (w == (ssize_t)len) ? 0 : -1;
  if (close(fd)) rc = -1;
  return rc;
}

/* range "<name>-h[a-b]" */
static void node_range(const char *name, int a, int b, char *buf, size_t cap) {
  if (a == b) snprintf(buf, cap, "%s-h%d", name, a);
  else snprintf(buf, cap, "%s-h[%d-%d]", name, a, b);
}

static int write_configs(const tb_t *tb, const char *dir, int gpus, int cpus, int accounting, char *err, size_t cap) {
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
  W("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\nMpiDefault=none\n");
  if (accounting) {
    char acct[1024];
    shoal__tb_acct_slurm_conf(dir, acct, sizeof acct);
    W("%s", acct);
  } else {
    W("AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nPriorityType=priority/basic\n");
  }
  W("SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSchedulerType=sched/backfill\n");
  W("SchedulerParameters=bf_interval=2,sched_min_interval=100000\n");
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

/* What up --slurm builds, from its steps below. */
typedef struct slurm_up {
  const tb_t *tb;
  int gpus, cpus, accounting;
  uid_t muid;
  gid_t mgid;
  char dir[160];  /* <testbed>/slurm */
  char conf[320]; /* its slurm.conf */
  char pids[320]; /* the daemons started */
} slurm_up_t;

/* Debian's binaries and the munge user are there. */
static int slurm_check(slurm_up_t *S, char *err, size_t cap) {
  const char *bins[] = {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch"};
  for (size_t k = 0; k < sizeof bins / sizeof *bins; k++)
    if (access(bins[k], X_OK))
      return shoal__tb_fail(err, cap, "%s not found: install Debian's slurmctld slurmd slurm-client munge (scripts/deps.sh test)",
                            bins[k]);
  struct passwd *mu = getpwnam("munge");
  if (!mu) return shoal__tb_fail(err, cap, "no 'munge' user (the munge package creates it)");
  S->muid = mu->pw_uid;
  S->mgid = mu->pw_gid;
  return 0;
}

/* The directories, the emulated GPUs (character devices: Slurm refuses files) and munge's key (1 KiB of
 * randomness, readable by munge only). */
static int slurm_files(slurm_up_t *S, const char *name, char *err, size_t cap) {
  char p[320], q[320];
  if (mkdir(S->dir, 0755))
    return shoal__tb_fail(err, cap, errno == EEXIST ? "%s exists: Slurm already up on testbed %s" : "mkdir %s: %s", S->dir,
                          errno == EEXIST ? name : strerror(errno));
  const char *subs[] = {"munge", "ctld", "d", "dev"};
  for (size_t k = 0; k < 4; k++) {
    snprintf(p, sizeof p, "%s/%s", S->dir, subs[k]);
    if (mkdir(p, 0755)) return shoal__tb_fail(err, cap, "mkdir %s: %s", p, strerror(errno));
  }
  for (int g = 0; g < S->gpus; g++) {
    snprintf(p, sizeof p, "%s/dev/gpu%d", S->dir, g);
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3))) return shoal__tb_fail(err, cap, "mknod %s: %s", p, strerror(errno));
  }
  unsigned char key[1024];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, key, sizeof key) : -1;
  if (fd >= 0) close(fd);
  snprintf(p, sizeof p, "%s/munge/key", S->dir);
  int kf = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (got != (ssize_t)sizeof key || kf < 0 || write(kf, key, sizeof key) != (ssize_t)sizeof key) {
    if (kf >= 0) close(kf);
    return shoal__tb_fail(err, cap, "cannot write the munge key %s", p);
  }
  close(kf);
  snprintf(q, sizeof q, "%s/munge", S->dir);
  if (chown(p, S->muid, S->mgid) || chown(q, S->muid, S->mgid))
    return shoal__tb_fail(err, cap, "chown %s to munge: %s", q, strerror(errno));
  return 0;
}

/* The configuration, the controller's name in every host's /etc/hosts and its address in the fabric. */
static int slurm_configure(slurm_up_t *S, const char *name, char *err, size_t cap) {
  char p[320];
  if (write_configs(S->tb, S->dir, S->gpus, S->cpus, S->accounting, err, cap)) return -1;
  snprintf(p, sizeof p, "%s/hosts", S->tb->dir);
  FILE *hf = fopen(p, "a");
  if (!hf) return shoal__tb_fail(err, cap, "%s: %s", p, strerror(errno));
  fprintf(hf, "%s\t%s-ctl\n", CTL_ADDR, name);
  fclose(hf);
  return shoal__tb_run(err, cap, "ip -n %s addr add %s/16 dev %s", S->tb->fabric, CTL_ADDR, S->tb->nracks > 1 ? "brc" : "br0");
}

/* munged, as the munge user in the root namespaces (its socket is a file: every namespace reaches it),
 * until its socket exists. */
static int slurm_munged(slurm_up_t *S, char *err, size_t cap) {
  char p[320];
  fflush(NULL);
  if (shoal__tb_check_interrupted(err, cap)) return -1;
  pid_t pid = fork();
  if (pid < 0) return shoal__tb_fail(err, cap, "fork: %s", strerror(errno));
  if (pid == 0) {
    setsid();
    snprintf(p, sizeof p, "%s/munge/log", S->dir);
    shoal__tb_daemon_redirect(p);
    if (setgroups(0, NULL) || setgid(S->mgid) || setuid(S->muid)) _exit(126);
    char a1[320], a2[320], a3[320], a4[320];
    snprintf(a1, sizeof a1, "--socket=%s/munge/sock", S->dir);
    snprintf(a2, sizeof a2, "--key-file=%s/munge/key", S->dir);
    snprintf(a3, sizeof a3, "--pid-file=%s/munge/pid", S->dir);
    snprintf(a4, sizeof a4, "--seed-file=%s/munge/seed", S->dir);
    execl("/usr/sbin/munged", "munged", "-F", a1, a2, a3, a4, (char *)NULL);
    _exit(127);
  }
  if (shoal__tb_daemon_record(S->pids, "munged", pid)) return shoal__tb_fail(err, cap, "%s: %s", S->pids, strerror(errno));
  snprintf(p, sizeof p, "%s/munge/sock", S->dir);
  struct stat st;
  double dl = shoal__now_s() + 10;
  while (stat(p, &st) && shoal__now_s() < dl) {
    if (shoal__tb_check_interrupted(err, cap)) return -1;
    if (waitpid(pid, NULL, WNOHANG) == pid) return shoal__tb_fail(err, cap, "munged exited at start (see %s/munge/log)", S->dir);
    usleep(10000);
  }
  if (stat(p, &st)) return shoal__tb_fail(err, cap, "munged did not create %s within 10 s", p);
  return 0;
}

/* slurmctld, in the fabric namespace with its own host name <testbed>-ctl. */
static int slurm_ctld(slurm_up_t *S, const char *name, char *err, size_t cap) {
  char log[320], host[64], env[340];
  snprintf(log, sizeof log, "%s/ctld/out", S->dir);
  snprintf(host, sizeof host, "%s-ctl", name);
  snprintf(env, sizeof env, "SLURM_CONF=%s", S->conf);
  char *const argv[] = {"slurmctld", "-D", "-i", "-f", S->conf, NULL};
  char *const envv[] = {env, NULL};
  return shoal__tb_daemon_in_fabric(S->tb, S->pids, "slurmctld", host, log, "/usr/sbin/slurmctld", argv, envv, err, cap) < 0
             ? -1
             : 0;
}

/* slurmd on host i. */
static int slurm_slurmd(slurm_up_t *S, int i, char *err, size_t cap) {
  char env[340];
  snprintf(env, sizeof env, "SLURM_CONF=%s", S->conf);
  const char *ns = S->tb->h[i].ns;
  char log[400], what[64];
  snprintf(log, sizeof log, "%s/d/%s.out", S->dir, ns);
  snprintf(what, sizeof what, "slurmd-%s", S->tb->h[i].name);
  char *const argv[] = {"slurmd", "-D", "-f", S->conf, "-N", (char *)ns, NULL};
  char *const envv[] = {env, NULL};
  return shoal__tb_daemon_on_host(S->tb, i, S->pids, what, log, "/usr/sbin/slurmd", argv, envv, err, cap) < 0 ? -1 : 0;
}

/* One slurmd per host, on the host. */
static int slurm_slurmds(slurm_up_t *S, char *err, size_t cap) {
  for (int i = 0; i < S->tb->nhosts; i++)
    if (shoal__tb_check_interrupted(err, cap) || slurm_slurmd(S, i, err, cap)) return -1;
  return 0;
}

/* Until every node answers idle (sinfo -h -N -o %T), a daemon dies at start, or the deadline. */
static int slurm_wait_idle(slurm_up_t *S, char *err, size_t cap) {
  double dl = shoal__now_s() + SLURM_UP_DEADLINE_S;
  int idle = 0, n = S->tb->nhosts;
  while (shoal__now_s() < dl) {
    if (shoal__tb_check_interrupted(err, cap)) return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ip netns exec %s env SLURM_CONF=%s sinfo -h -N -o %%T 2>/dev/null", S->tb->fabric, S->conf);
    FILE *f = popen(cmd, "r");
    idle = 0;
    int total = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f)) {
      total++;
      if (!strncmp(line, "idle", 4)) idle++;
    }
    if (f) pclose(f);
    if (total == n && idle == n) break;
    idle = -1;
    /* a daemon that died at start: fail now */
    int dead = 0;
    while (waitpid(-1, NULL, WNOHANG) > 0) dead++;
    if (dead) return shoal__tb_fail(err, cap, "a Slurm daemon exited at start (logs: %s/ctld/, %s/d/)", S->dir, S->dir);
    usleep(100000);
  }
  if (idle != n)
    return shoal__tb_fail(err, cap, "the Slurm nodes were not idle within %g s (logs: %s/ctld/slurmctld.log, %s/d/)",
                          SLURM_UP_DEADLINE_S, S->dir, S->dir);
  return 0;
}

/* The steps of up --slurm, in order. Accounting (slurmdbd and its database, accounting.c) starts after munged
 * and before slurmctld, which connects to it at start. */
int shoal__tb_slurm_up(const char *name, int gpus, int cpus, int accounting, char *err, size_t cap) {
  tb_t *tb = calloc(1, sizeof *tb);
  if (!tb) return shoal__tb_fail(err, cap, "out of memory");
  slurm_up_t S = {.tb = tb, .gpus = gpus, .cpus = cpus < 1 ? (gpus > 2 ? gpus : 2) : cpus, .accounting = accounting};
  shoal__tb_slurm_dir(name, S.dir, sizeof S.dir);
  snprintf(S.conf, sizeof S.conf, "%s/slurm.conf", S.dir);
  snprintf(S.pids, sizeof S.pids, "%s/pids", S.dir);
  int rc = -1;
  double t0 = shoal__now_s();
  if (shoal__tb_load(name, tb, err, cap)) goto out;
  if (gpus < 1 || gpus > TB_SLURM_MAX_GPUS) {
    shoal__tb_fail(err, cap, "--gpus %d: 1..%d per host", gpus, TB_SLURM_MAX_GPUS);
    goto out;
  }
  if (slurm_check(&S, err, cap) || slurm_files(&S, name, err, cap) || slurm_configure(&S, name, err, cap) ||
      slurm_munged(&S, err, cap) || (accounting && shoal__tb_acct_up(tb, S.dir, S.pids, err, cap)) ||
      slurm_ctld(&S, name, err, cap) || slurm_slurmds(&S, err, cap) ||
      slurm_wait_idle(&S, err, cap))
    goto out;
  printf("testbed %s: Slurm up in %.2f s: slurmctld %s-ctl (%s), %d slurmd (%d GPUs, %d CPUs each), partition shoal%s; "
         "SLURM_CONF=%s\n",
         name, shoal__now_s() - t0, name, CTL_ADDR, tb->nhosts, gpus, S.cpus,
         accounting ? ", accounting (slurmdbd, MariaDB; accounts research, other)" : "", S.conf);
  rc = 0;
out:
  free(tb);
  return rc;
}

/* Start daemon `what` again as up started it. */
static int slurm_start_one(slurm_up_t *S, const char *name, const char *what, char *err, size_t cap) {
  if (!strcmp(what, "munged")) return slurm_munged(S, err, cap);
  if (!strcmp(what, "slurmctld")) return slurm_ctld(S, name, err, cap);
  if (!strcmp(what, "mariadbd") || !strcmp(what, "slurmdbd")) {
    char p[340];
    snprintf(p, sizeof p, "%s/slurmdbd.conf", S->dir);
    if (access(p, F_OK)) return shoal__tb_fail(err, cap, "testbed %s has no accounting (up --slurm --accounting)", name);
    return shoal__tb_acct_start(S->tb, S->dir, S->pids, what, err, cap);
  }
  if (!strncmp(what, "slurmd-", 7)) {
    int i = shoal__tb_host_index(S->tb, what + 7);
    if (i < 0) return shoal__tb_fail(err, cap, "'%s': no such host on testbed %s (h0..h%d)", what + 7, name, S->tb->nhosts - 1);
    return slurm_slurmd(S, i, err, cap);
  }
  return shoal__tb_fail(err, cap, "'%s' is not a Slurm daemon of testbed %s", what, name);
}

int shoal__tb_slurm_daemon(const char *name, const char *what, int stop, int start, char *err, size_t cap) {
  tb_t *tb = calloc(1, sizeof *tb);
  if (!tb) return shoal__tb_fail(err, cap, "out of memory");
  slurm_up_t S = {.tb = tb};
  shoal__tb_slurm_dir(name, S.dir, sizeof S.dir);
  snprintf(S.conf, sizeof S.conf, "%s/slurm.conf", S.dir);
  snprintf(S.pids, sizeof S.pids, "%s/pids", S.dir);
  int rc = -1;
  char w[64];
  if (shoal__tb_load(name, tb, err, cap)) goto out;
  if (access(S.conf, F_OK)) {
    shoal__tb_fail(err, cap, "testbed %s has no Slurm (up --slurm)", name);
    goto out;
  }
  /* "slurmd-3", "slurmd-h3" and "slurmd-NAME-h3" name the same record */
  snprintf(w, sizeof w, "%s", what);
  if (!strncmp(what, "slurmd-", 7)) {
    int i = shoal__tb_host_index(tb, what + 7);
    if (i >= 0) snprintf(w, sizeof w, "slurmd-%s", tb->h[i].name);
  }
  int known = !strcmp(w, "munged") || !strcmp(w, "mariadbd") || !strcmp(w, "slurmdbd") || !strcmp(w, "slurmctld") ||
              (!strncmp(w, "slurmd-", 7) && shoal__tb_host_index(tb, w + 7) >= 0);
  if (!known) {
    shoal__tb_fail(err, cap, "'%s' is not a Slurm daemon of testbed %s (munged, mariadbd, slurmdbd, slurmctld, slurmd-h0.."
                   "slurmd-h%d)", what, name, tb->nhosts - 1);
    goto out;
  }
  if (stop) {
    int was = shoal__tb_daemon_stop(S.pids, w, 5);
    printf("testbed %s: %s %s\n", name, w, was ? "stopped" : "was not running");
  }
  if (start) {
    pid_t pid = shoal__tb_daemon_running(S.pids, w);
    if (pid) {
      shoal__tb_fail(err, cap, "%s already runs (pid %d)", w, (int)pid);
      goto out;
    }
    if (slurm_check(&S, err, cap) || slurm_start_one(&S, name, w, err, cap)) goto out;
    double dl = shoal__now_s() + 5; /* until it runs as itself (exec'd), or it died at start */
    while (!(pid = shoal__tb_daemon_running(S.pids, w)) && shoal__now_s() < dl) usleep(20000);
    if (!pid) {
      shoal__tb_fail(err, cap, "%s exited at start (logs under %s)", w, S.dir);
      goto out;
    }
    printf("testbed %s: %s started (pid %d)\n", name, w, (int)pid);
  }
  rc = 0;
out:
  free(tb);
  return rc;
}

/* Stop the daemons (SIGTERM, then SIGKILL after 5 s), then remove <dir>. 0 if nothing was there. */
int shoal__tb_slurm_down(const char *name, int quiet) {
  char dir[160];
  shoal__tb_slurm_dir(name, dir, sizeof dir);
  struct stat st;
  if (stat(dir, &st)) return 0;
  int n, rc = shoal__tb_part_remove(dir, 5, &n);
  if (!quiet && !rc) printf("testbed %s: Slurm stopped (%d daemons)\n", name, n);
  return rc;
}

/* One status line. */
void shoal__tb_slurm_status(const char *name) {
  char dir[160], p[256];
  shoal__tb_slurm_dir(name, dir, sizeof dir);
  snprintf(p, sizeof p, "%s/pids", dir);
  struct stat st;
  if (stat(p, &st)) return;
  int n, alive;
  shoal__tb_daemons_count(p, &n, &alive);
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
  if (shoal__tb_enter_fabric(tb, err, cap)) goto out;
  setenv("SLURM_CONF", p, 1);
  rc = 0;
out:
  free(tb);
  return rc;
}
