/* `shoal testbed up --slurm --accounting`: Slurm's accounting on a testbed (docs/live.md): a private MariaDB
 * (Debian's mariadb-server) and slurmdbd, both in the fabric namespace, so that their ports (3306 on the
 * fabric's loopback, 6819 on the controller's address) are the testbed's own and no system database is touched.
 *
 * Layout, under /run/shoal-testbed/<testbed>/slurm:
 *   db/data        the database's files (mariadb-install-db, root by unix socket only)
 *   db/init.sql    run by mariadbd at start: the slurm user (a random password) and its grant
 *   db/sock, db/log, db/pid
 *   dbd/           slurmdbd's log and pid; slurmdbd.conf (0600) beside slurm.conf
 * The daemons are recorded in the Slurm part's pids file (daemon.c), so that `down` stops them with the
 * others; slurmctld, started after them, then finds slurmdbd, the cluster and its associations. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "testbed.h"

#define ACCT_UP_DEADLINE_S 30.0

/* The accounts made for every testbed with accounting: the controller's (`research`, also root's default) and a
 * second one (`other`) for another user's plain jobs; `nobody` stands for that other user. */
static const char *const acct_setup[] = {
    "add account research,other Description=testbed Organization=shoal",
    "add user root Account=research,other DefaultAccount=research",
    "add user nobody Account=other DefaultAccount=other",
};

static int write_file(const char *path, const char *text, mode_t mode, char *err, size_t cap) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  size_t len = strlen(text);
  if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
    if (fd >= 0) close(fd);
    return shoal__tb_fail(err, cap, "%s: %s", path, strerror(errno));
  }
  if (close(fd)) return shoal__tb_fail(err, cap, "%s: %s", path, strerror(errno));
  return 0;
}

/* AccountingStoragePass: the munge socket for connections to slurmdbd (Slurm's commands would use the system's) */
void shoal__tb_acct_slurm_conf(const char *dir, char *b, size_t cap) {
  snprintf(b, cap,
           "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=%s\nAccountingStoragePort=6819\n"
           "AccountingStoragePass=%s/munge/sock\n"
           "AccountingStorageEnforce=associations\nJobCompType=jobcomp/none\n"
           "PriorityType=priority/multifactor\nPriorityWeightFairshare=100000\nPriorityWeightAge=1000\n"
           "PriorityDecayHalfLife=0-1\nPriorityCalcPeriod=1\n",
           TB_CTL_ADDR, dir);
}

/* The database's files, its start-up SQL and slurmdbd.conf; pw: the slurm user's password (hex). */
static int acct_files(const tb_t *tb, const char *dir, char *err, size_t cap) {
  char p[320], text[1024], pw[33];
  unsigned char r[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, r, sizeof r) : -1;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)sizeof r) return shoal__tb_fail(err, cap, "cannot read /dev/urandom for the database password");
  for (int k = 0; k < 16; k++) snprintf(pw + 2 * k, 3, "%02x", r[k]);
  const char *subs[] = {"db", "dbd"};
  for (size_t k = 0; k < 2; k++) {
    snprintf(p, sizeof p, "%s/%s", dir, subs[k]);
    if (mkdir(p, 0700)) return shoal__tb_fail(err, cap, "mkdir %s: %s", p, strerror(errno));
  }
  if (shoal__tb_run(err, cap,
                    "mariadb-install-db --no-defaults --datadir=%s/db/data --user=root "
                    "--auth-root-authentication-method=socket --skip-test-db --skip-name-resolve "
                    "--innodb-log-file-size=8M --innodb-buffer-pool-size=32M",
                    dir))
    return -1;
  snprintf(p, sizeof p, "%s/db/init.sql", dir);
  snprintf(text, sizeof text,
           "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '%s';\n"
           "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';\n",
           pw);
  if (write_file(p, text, 0600, err, cap)) return -1;
  snprintf(p, sizeof p, "%s/slurmdbd.conf", dir);
  snprintf(text, sizeof text,
           "# written by shoal testbed up --slurm --accounting; removed by shoal testbed down\n"
           "AuthType=auth/munge\nAuthInfo=socket=%s/munge/sock\nDbdHost=%s-ctl\nDbdAddr=%s\nDbdPort=6819\n"
           "SlurmUser=root\nLogFile=%s/dbd/slurmdbd.log\nPidFile=%s/dbd/slurmdbd.pid\nDebugLevel=info\n"
           "StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStoragePort=3306\nStorageUser=slurm\n"
           "StoragePass=%s\nStorageLoc=slurm_acct_db\n",
           dir, tb->name, TB_CTL_ADDR, dir, dir, pw);
  return write_file(p, text, 0600, err, cap); /* slurmdbd refuses a configuration others can read */
}

/* mariadbd in the fabric, until its socket exists. */
static int acct_mariadbd(const tb_t *tb, const char *dir, const char *pids, char *err, size_t cap) {
  char a[6][352], log[320];
  snprintf(a[0], sizeof a[0], "--datadir=%s/db/data", dir);
  snprintf(a[1], sizeof a[1], "--socket=%s/db/sock", dir);
  snprintf(a[2], sizeof a[2], "--pid-file=%s/db/pid", dir);
  snprintf(a[3], sizeof a[3], "--log-error=%s/db/log", dir);
  snprintf(a[4], sizeof a[4], "--init-file=%s/db/init.sql", dir);
  char *const dbargv[] = {"mariadbd", "--no-defaults", a[0], a[1], a[2], a[3], a[4], "--user=root",
                          "--bind-address=127.0.0.1", "--port=3306", "--skip-name-resolve",
                          "--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M", NULL};
  snprintf(log, sizeof log, "%s/db/out", dir);
  if (shoal__tb_daemon_in_fabric(tb, pids, "mariadbd", NULL, log, "/usr/sbin/mariadbd", dbargv, NULL, err, cap) < 0)
    return -1;
  snprintf(a[5], sizeof a[5], "%s/db/sock", dir);
  struct stat st;
  double dl = shoal__now_s() + ACCT_UP_DEADLINE_S;
  while (stat(a[5], &st) && shoal__now_s() < dl) {
    if (shoal__tb_check_interrupted(err, cap)) return -1;
    usleep(50000);
  }
  if (stat(a[5], &st))
    return shoal__tb_fail(err, cap, "mariadbd did not open %s within %g s (see %s/db/log)", a[5], ACCT_UP_DEADLINE_S, dir);
  return 0;
}

/* slurmdbd in the fabric under the controller's host name (it checks DbdHost against it). */
static int acct_slurmdbd(const tb_t *tb, const char *dir, const char *pids, char *err, size_t cap) {
  char log[320], env[340], host[48];
  snprintf(env, sizeof env, "SLURM_CONF=%s/slurm.conf", dir);
  snprintf(log, sizeof log, "%s/dbd/out", dir);
  snprintf(host, sizeof host, "%s-ctl", tb->name);
  char *const dbdargv[] = {"slurmdbd", "-D", NULL};
  char *const envv[] = {env, NULL};
  return shoal__tb_daemon_in_fabric(tb, pids, "slurmdbd", host, log, "/usr/sbin/slurmdbd", dbdargv, envv, err, cap) < 0 ? -1
                                                                                                                       : 0;
}

int shoal__tb_acct_start(const tb_t *tb, const char *dir, const char *pids, const char *what, char *err, size_t cap) {
  if (!strcmp(what, "mariadbd")) return acct_mariadbd(tb, dir, pids, err, cap);
  if (!strcmp(what, "slurmdbd")) return acct_slurmdbd(tb, dir, pids, err, cap);
  return shoal__tb_fail(err, cap, "'%s' is not an accounting daemon (mariadbd, slurmdbd)", what);
}

/* The cluster (retried until slurmdbd answers: it connects to the database at start), then the accounts. */
static int acct_associations(const tb_t *tb, const char *dir, char *err, size_t cap) {
  double dl = shoal__now_s() + ACCT_UP_DEADLINE_S;
  for (;;) {
    if (shoal__tb_check_interrupted(err, cap)) return -1;
    if (!shoal__tb_run(err, cap, "ip netns exec %s env SLURM_CONF=%s/slurm.conf sacctmgr -i add cluster %s", tb->fabric, dir,
                       tb->name))
      break;
    if (shoal__now_s() > dl) {
      char last[512];
      snprintf(last, sizeof last, "%s", err);
      return shoal__tb_fail(err, cap, "slurmdbd did not answer within %g s (%s; logs: %s/dbd/slurmdbd.log, %s/db/log)",
                            ACCT_UP_DEADLINE_S, last, dir, dir);
    }
    usleep(200000);
  }
  for (size_t k = 0; k < sizeof acct_setup / sizeof *acct_setup; k++)
    if (shoal__tb_run(err, cap, "ip netns exec %s env SLURM_CONF=%s/slurm.conf sacctmgr -i %s Cluster=%s", tb->fabric, dir,
                      acct_setup[k], tb->name))
      return -1;
  return 0;
}

int shoal__tb_acct_up(const tb_t *tb, const char *dir, const char *pids, char *err, size_t cap) {
  const char *bins[] = {"/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db", "/usr/sbin/slurmdbd", "/usr/bin/sacctmgr"};
  for (size_t k = 0; k < sizeof bins / sizeof *bins; k++)
    if (access(bins[k], X_OK))
      return shoal__tb_fail(err, cap, "%s not found: --accounting needs Debian's mariadb-server slurmdbd (scripts/deps.sh test)",
                            bins[k]);
  if (acct_files(tb, dir, err, cap) || acct_mariadbd(tb, dir, pids, err, cap) || acct_slurmdbd(tb, dir, pids, err, cap) ||
      acct_associations(tb, dir, err, cap))
    return -1;
  return 0;
}
