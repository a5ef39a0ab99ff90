/* Reading a testbed's state, entering one of its hosts, and placing the ranks
 * of `shoal launch --testbed` (see testbed.h and docs/testbed.md). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "testbed.h"

int shoal__tb_fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return -1;
}

/* Run a command given as one string of space-separated words (none of ours
 * contains a space), capturing stderr; bounded by TB_CMD_DEADLINE_S. */
int shoal__tb_run(char *err, size_t cap, const char *fmt, ...) {
  char cmd[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char copy[1024], *argv[64];
  int argc = 0;
  snprintf(copy, sizeof copy, "%s", cmd);
  for (char *s = NULL, *t = strtok_r(copy, " ", &s); t && argc < 63; t = strtok_r(NULL, " ", &s)) argv[argc++] = t;
  argv[argc] = NULL;
  int pe[2];
  if (pipe2(pe, O_CLOEXEC)) return snprintf(err, cap, "pipe: %s", strerror(errno)), -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return snprintf(err, cap, "fork: %s", strerror(errno)), close(pe[0]), close(pe[1]), -1;
  if (pid == 0) {
    setpgid(0, 0); /* a ^C reaches us, not the half-done command */
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(pe[1], 2);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s", argv[0], strerror(errno));
    _exit(127);
  }
  close(pe[1]);
  char buf[512];
  size_t len = 0;
  double deadline = shoal__now_s() + TB_CMD_DEADLINE_S;
  int timed_out = 0;
  for (;;) {
    int left = (int)((deadline - shoal__now_s()) * 1000);
    if (left <= 0) {
      timed_out = 1;
      kill(pid, SIGKILL);
      break;
    }
    struct pollfd pf = {pe[0], POLLIN, 0};
    int pr = poll(&pf, 1, left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t k = read(pe[0], buf + len, sizeof buf - 1 - len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    len += (size_t)k;
    if (len >= sizeof buf - 1) len = sizeof buf - 2;
  }
  close(pe[0]);
  buf[len] = 0;
  while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) buf[--len] = 0;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return snprintf(err, cap, "'%s' did not finish within %g s", cmd, TB_CMD_DEADLINE_S), -1;
  if (!WIFEXITED(st) || WEXITSTATUS(st)) return snprintf(err, cap, "'%s' failed: %s", cmd, len ? buf : "(no message)"), -1;
  return 0;
}


int shoal__tb_name_ok(const char *name) {
  size_t l = strlen(name);
  if (l < 1 || l > 12 || name[0] < 'a' || name[0] > 'z') return 0;
  for (size_t i = 0; i < l; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9'))) return 0;
  return 1;
}

int shoal__tb_load(const char *name, tb_t *tb, char *err, size_t cap) {
  memset(tb, 0, sizeof *tb);
  if (!shoal__tb_name_ok(name))
    return shoal__tb_fail(err, cap, "testbed name '%s': expected a lower-case letter then up to 11 letters or digits", name);
  snprintf(tb->name, sizeof tb->name, "%s", name);
  snprintf(tb->dir, sizeof tb->dir, "%s/%s", TB_RUN_DIR, name);
  snprintf(tb->fabric, sizeof tb->fabric, "%s-net", name);
  char path[160];
  snprintf(path, sizeof path, "%s/state", tb->dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return shoal__tb_fail(err, cap, "no testbed '%s' (%s does not exist; start one with shoal testbed up)", name, path);
    return shoal__tb_fail(err, cap, "%s: %s", path, strerror(errno));
  }
  char line[512];
  int ln = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    char k[32] = "", a[160] = "", b[64] = "", c[64] = "";
    double x = 0, y = 0;
    int i = 0, r = 0;
    if (sscanf(line, "%31s", k) != 1 || k[0] == '#') continue;
    if (!strcmp(k, "testbed")) {
      if (sscanf(line, "testbed %*s hosts %d racks %d rate %lf", &tb->nhosts, &tb->nracks, &tb->rate_bps) != 3 ||
          tb->nhosts < 1 || tb->nhosts > TB_MAX_HOSTS || tb->nracks < 1 || tb->nracks > TB_MAX_RACKS) {
        bad = ln; /* the lines after it cannot be checked against it */
        break;
      }
    } else if (!strcmp(k, "host")) {
      if (sscanf(line, "host %d %15s %47s %15s rack %d", &i, a, b, c, &r) != 5 || i < 0 || i >= tb->nhosts ||
          r < 0 || r >= tb->nracks) {
        if (!bad) bad = ln;
        continue;
      }
      tb_host_t *h = &tb->h[i];
      snprintf(h->name, sizeof h->name, "%s", a);
      snprintf(h->ns, sizeof h->ns, "%s", b);
      snprintf(h->addr, sizeof h->addr, "%s", c);
      h->rack = r;
    } else if (!strcmp(k, "rate")) { /* rate <host> <egress> <ingress> */
      if (sscanf(line, "rate %d %lf %lf", &i, &x, &y) != 3 || i < 0 || i >= tb->nhosts) bad = bad ? bad : ln;
      else tb->h[i].egress_bps = x, tb->h[i].ingress_bps = y;
    } else if (!strcmp(k, "uplink")) { /* uplink <rack> <up> <down> */
      if (sscanf(line, "uplink %d %lf %lf", &r, &x, &y) != 3 || r < 0 || r >= tb->nracks) bad = bad ? bad : ln;
      else tb->up_bps[r] = x, tb->down_bps[r] = y;
    } else if (!strcmp(k, "cpu")) { /* cpu <host> <fraction> <method> */
      if (sscanf(line, "cpu %d %lf %7s", &i, &x, a) != 3 || i < 0 || i >= tb->nhosts) bad = bad ? bad : ln;
      else tb->h[i].cpu = x, snprintf(tb->h[i].cpu_method, sizeof tb->h[i].cpu_method, "%s", a);
    } else if (!strcmp(k, "cgroup")) {
      if (sscanf(line, "cgroup %159s", a) == 1 && !tb->cgroup[0]) snprintf(tb->cgroup, sizeof tb->cgroup, "%s", a);
    } else if (!strcmp(k, "complete")) {
      tb->complete = 1;
    }
  }
  fclose(f);
  if (bad) return shoal__tb_fail(err, cap, "%s:%d: malformed line", path, bad);
  if (tb->nhosts < 1) return shoal__tb_fail(err, cap, "%s: no 'testbed' line (interrupted up? run shoal testbed down --name %s)", path, name);
  if (tb->complete)
    for (int i = 0; i < tb->nhosts; i++)
      if (!tb->h[i].name[0]) return shoal__tb_fail(err, cap, "%s: no 'host %d' line (the state was edited?)", path, i);
  if (!tb->complete)
    return shoal__tb_fail(err, cap, "testbed '%s' is incomplete (an interrupted up?); remove it with shoal testbed down --name %s", name,
                name);
  return 0;
}

int shoal__tb_index(const char *s) {
  size_t n = strlen(s);
  return n >= 1 && n <= 3 && strspn(s, "0123456789") == n ? (int)strtol(s, NULL, 10) : -1;
}

/* "h3", "3" or "NAME-h3": nothing else (no sign, no blank, NAME- only before h) */
int shoal__tb_host_index(const tb_t *tb, const char *spec) {
  const char *s = spec;
  size_t nl = strlen(tb->name);
  if (!strncmp(s, tb->name, nl) && s[nl] == '-') {
    s += nl + 1;
    if (s[0] != 'h') return -1;
  }
  if (s[0] == 'h') s++;
  int v = shoal__tb_index(s);
  return v < tb->nhosts ? v : -1;
}

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
  snprintf(p, sizeof p, "%s/slurm/slurm.conf", tb->dir); /* Slurm's commands work on a host */
  if (access(p, R_OK) == 0) setenv("SLURM_CONF", p, 0);
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

int shoal__tb_plan(const char *name, const char *hosts, int n, int per_host, const char *place, tb_plan_t *p,
                   char *err, size_t cap) {
  memset(p, 0, sizeof *p);
  if (shoal__tb_load(name, &p->tb, err, cap)) return -1;
  if (n < 1 || n > 4096) return shoal__tb_fail(err, cap, "--testbed: %d ranks (1..4096)", n);
  int list[TB_MAX_HOSTS], nl = 0;
  if (hosts && *hosts) {
    char *dup = strdup(hosts), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int h = shoal__tb_host_index(&p->tb, t);
      if (h < 0 || nl == TB_MAX_HOSTS) {
        shoal__tb_fail(err, cap, "--hosts: '%s' is not a host of testbed '%s' (h0..h%d)", t, name, p->tb.nhosts - 1);
        free(dup);
        return -1;
      }
      for (int k = 0; k < nl; k++)
        if (list[k] == h) {
          shoal__tb_fail(err, cap, "--hosts: host '%s' given twice", t);
          free(dup);
          return -1;
        }
      list[nl++] = h;
    }
    free(dup);
  } else {
    for (int h = 0; h < p->tb.nhosts; h++) list[nl++] = h;
  }
  if (per_host <= 0) per_host = (n + nl - 1) / nl;
  int used = (n + per_host - 1) / per_host;
  if (used > nl)
    return shoal__tb_fail(err, cap, "--testbed %s: %d ranks at %d per host need %d hosts; %d available", name, n, per_host, used, nl);
  int rr = 0;
  if (!place || !strcmp(place, "block")) rr = 0;
  else if (!strcmp(place, "rr")) rr = 1;
  else return shoal__tb_fail(err, cap, "--place '%s': expected block or rr", place);
  p->n = n;
  for (int r = 0; r < n; r++) {
    int h = list[rr ? r % used : r / per_host];
    p->host_of[r] = h;
    p->local_rank[r] = p->local_size[h]++;
  }
  return 0;
}
