/* shoal launch -n N [options] -- PROGRAM ARGS: start N local ranks.
 *
 * The launcher binds the rendezvous store's listening socket itself (port 0
 * by default, so no port clash) and hands it to rank 0 as an inherited
 * descriptor (SHOAL_STORE_FD); every other rank gets the real port in
 * SHOAL_MASTER_PORT. Each rank's stdout and stderr come through pipes and
 * leave here line by line, prefixed with "[rank] ", one write() per line.
 * If a rank fails (non-zero exit or a signal) the others get SIGTERM, then
 * SIGKILL after a grace period, and the launcher exits non-zero naming the
 * rank. SIGINT/SIGTERM sent to the launcher are forwarded to the ranks.
 * Each rank runs in its own process group; what is left of the groups once
 * every rank has exited (orphaned children) is killed.
 *
 * Binding (--bind / SHOAL_BIND, default auto): when the ranks fit on the CPUs
 * this process may use, rank r is pinned to the (r mod ncpu)-th of them, as
 * mpirun binds to cores by default. Unpinned, the kernel sometimes lets two
 * busy ranks share a CPU for a while or migrates them between CPUs; on the
 * 2-core machines we measure on that made shared-memory and loopback
 * bandwidth bimodal run to run (e.g. 10 vs 19 GB/s at 1 MiB). When the ranks
 * outnumber the CPUs, auto still pins round-robin if shared memory is on
 * (SHOAL_SHM, the default): ranks waiting on shm flags yield to the rank
 * they wait for, and a fixed placement kept 4 ranks on 2 CPUs at 3.3 us per
 * small allreduce where unpinned runs wandered between 3.3 and 9 us. With
 * SHOAL_SHM=0 oversubscribed ranks stay unpinned: over TCP the kernel's
 * balancing did better (4 ranks, 256 KiB-2 MiB: 150-220 vs 240 us).
 *
 * --on-failure continue|restart: for jobs that survive a lost rank (shoal_comm_shrink): a rank that dies
 * or fails does not stop the others; with restart it is started again as a new process that joins the
 * running job (SHOAL_JOIN=1), up to --max-restarts times. Every rank then holds the store socket
 * (SHOAL_STORE_FD), the job's door for restarted ranks, which so outlives rank 0. */
#include <arpa/inet.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/bootstrap/sock.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "testbed.h"

#define LINE_MAX_BYTES 65536

typedef struct stream {
  int fd;     /* read end, -1 at EOF */
  int out;    /* 1 or 2 */
  char *buf;
  size_t len;
} stream_t;

typedef struct rank_proc {
  pid_t pid;
  int running;
  int status;
  int signaled_by_us;
  int sent_sig;   /* first signal the launcher sent (0: none) */
  int sent_kill;  /* the launcher sent SIGKILL */
  int stop_sig;   /* stopped by this signal (not by us) and not continued since, else 0 */
  int order;      /* 1, 2, ...: order in which ranks ended (0: still running) */
  int restarted;  /* a process the launcher started again (--on-failure restart): it joins the running job */
  stream_t s[2];
} rank_proc_t;

/* --on-failure restart: once every rank never restarted has exited 0 the job has finished; a restarted
 * rank still running then waits at a door no grow will open (shoal train --grow-every 0, or its loss came
 * after the last grow), or finishes its last steps: it gets this long, then is stopped. */
#define JOINER_GRACE_S 10.0

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_signal;

static void on_signal(int sig) {
  int e = errno;
  if (sig != SIGCHLD) got_signal = sig;
  char b = (char)sig;
  ssize_t k = write(sig_pipe[1], &b, 1);
  (void)k;
  errno = e;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal launch -n N [options] -- PROGRAM [ARGS...]\n"
          "Start N ranks of PROGRAM on this machine, like torchrun/mpirun.\n\n"
          "  -n, --nranks N    number of ranks (required)\n"
          "  --port P          rendezvous store port (default 0: the launcher picks a free one)\n"
          "  --addr A          store address given to the ranks (default SHOAL_MASTER_ADDR, MASTER_ADDR or 127.0.0.1;\n"
          "                    not with --testbed, whose first host holds the store)\n"
          "  --timeout S       stop every rank after S seconds (exit 124); default: none\n"
          "  --grace S         seconds between SIGTERM and SIGKILL when stopping ranks (default 3)\n"
          "  --hosts h1,h2     several machines: not started from here (no ssh); prints the per-host commands\n"
          "  --no-prefix       do not prefix output lines with [rank]\n"
          "  --testbed NAME    place the ranks on the hosts of `shoal testbed` NAME (network namespaces):\n"
          "                    --per-host K ranks per host (default: spread evenly), --place block|rr,\n"
          "                    --hosts h0,h3 to use only those hosts (docs/testbed.md)\n"
          "  --bind MODE       core: pin rank r to the (r mod ncpu)-th usable CPU; none; auto (default,\n"
          "                    SHOAL_BIND): core when the ranks fit on the usable CPUs or shared memory\n"
          "                    is on (SHOAL_SHM), else none\n"
          "  --on-failure MODE stop (default): a rank that fails stops the others; continue: the others go\n"
          "                    on (for programs that shrink, e.g. shoal train --on-failure shrink); restart:\n"
          "                    continue, and start the rank again as a new process that joins the job\n"
          "                    (stopped 10 s after the job finished if it never got in)\n"
          "  --max-restarts K  with restart: at most K restarts in all (default 3)\n\n"
          "Each rank gets SHOAL_RANK, SHOAL_WORLD_SIZE, SHOAL_MASTER_ADDR, SHOAL_MASTER_PORT and the torchrun\n"
          "names RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. If a rank exits\n"
          "non-zero or is killed, the others are stopped and the launcher exits non-zero naming it.\n");
}

/* --testbed placement: which host each rank runs on (testbed.h). */
static tb_plan_t *tb_plan;
static const char *tb_name, *tb_place;
static double tb_per_host;

static int parse_num(const char *opt, const char *s, double min, double max, double *out);
static int parse_int(const char *opt, const char *s, long min, long max, double *out);
static void set_env_int(const char *name, long v);

/* The --testbed options; 1 if argv[*i] was one (consumed), 0 if not, -1 on error. */
static int testbed_opt(int argc, char **argv, int *i) {
  const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!strcmp(a, "--testbed") || !strcmp(a, "--place")) {
    if (!v) return fprintf(stderr, "shoal launch: %s needs a value\n", a), -1;
    *(a[2] == 't' ? &tb_name : &tb_place) = v;
  } else if (!strcmp(a, "--per-host")) {
    if (parse_int(a, v, 1, 4096, &tb_per_host)) return -1;
  } else {
    return 0;
  }
  (*i)++;
  return 1;
}

/* Plan the placement; the store address becomes rank 0's host address. */
static int testbed_setup(int n, const char *hosts, const char **addr) {
  if (!tb_name) {
    if (tb_place || tb_per_host > 0) return fprintf(stderr, "shoal launch: --place and --per-host need --testbed\n"), -1;
    return 0;
  }
  char err[512];
  tb_plan = malloc(sizeof *tb_plan);
  if (!tb_plan || shoal__tb_plan(tb_name, hosts, n, (int)tb_per_host, tb_place, tb_plan, err, sizeof err)) {
    fprintf(stderr, "shoal launch: %s\n", tb_plan ? err : "out of memory");
    return -1;
  }
  *addr = tb_plan->tb.h[tb_plan->host_of[0]].addr;
  return 0;
}

typedef struct { int port, fd; } tb_listen_t;
static int tb_listen_cb(void *arg) {
  tb_listen_t *l = arg;
  struct in_addr any = {htonl(INADDR_ANY)};
  return shoal__sock_listen(any, l->port, &l->fd, &l->port) ? -1 : 0;
}

/* The store socket, bound inside rank 0's host namespace. */
static int testbed_listen(int *port, int *fd) {
  tb_listen_t l = {*port, -1};
  char err[512] = "";
  if (shoal__tb_in_netns(&tb_plan->tb, tb_plan->host_of[0], tb_listen_cb, &l, err, sizeof err)) {
    fprintf(stderr, "shoal launch: store socket on host %s: %s\n", tb_plan->tb.h[tb_plan->host_of[0]].name,
            err[0] ? err : shoal_last_error());
    return -1;
  }
  *port = l.port, *fd = l.fd;
  return 0;
}

/* In rank r's child: move onto its host and give it the host-local variables. */
static void testbed_child(int r) {
  char err[512];
  int h = tb_plan->host_of[r];
  if (shoal__tb_enter(&tb_plan->tb, h, err, sizeof err)) {
    fprintf(stderr, "shoal launch: rank %d: %s\n", r, err);
    _exit(127);
  }
  set_env_int("LOCAL_RANK", tb_plan->local_rank[r]);
  set_env_int("LOCAL_WORLD_SIZE", tb_plan->local_size[h]);
}

/* A missing value or the parser's error on stderr: -1; else 0. */
static int parsed(const char *opt, const char *s, int rc) {
  if (!s) fprintf(stderr, "shoal launch: %s needs a value\n", opt);
  else if (rc) fprintf(stderr, "shoal launch: %s\n", shoal_last_error());
  return !s || rc ? -1 : 0;
}

static int parse_num(const char *opt, const char *s, double min, double max, double *out) {
  return parsed(opt, s, s ? shoal__parse_double(opt, s, min, max, out) : 0);
}

/* A count, a port: an integer (2.9 ranks is an error, not 2). */
static int parse_int(const char *opt, const char *s, long min, long max, double *out) {
  long v = 0;
  int rc = parsed(opt, s, s ? shoal__parse_long(opt, s, min, max, &v) : 0);
  if (!rc) *out = (double)v;
  return rc;
}

/* One shell word for the printed commands: as is when it is safe, else in single quotes. */
static void put_word(FILE *f, const char *w) {
  if (*w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == strlen(w)) {
    fputs(w, f);
    return;
  }
  fputc('\'', f);
  for (; *w; w++)
    if (*w == '\'') fputs("'\\''", f);
    else fputc(*w, f);
  fputc('\'', f);
}

static int is_local_host(const char *h, const char *me) {
  return !strcmp(h, "localhost") || !strncmp(h, "127.", 4) || !strcmp(h, me);
}

/* --hosts with other machines: print what to run on each and refuse. */
static int hosts_instructions(const char *hosts, int n, const char *addr, int port, char **prog) {
  char *list = strdup(hosts);
  char *hv[256];
  char me[256] = "";
  gethostname(me, sizeof me - 1);
  int nh = 0, remote = 0;
  for (char *t = strtok(list, ","); t && nh < 256; t = strtok(NULL, ",")) {
    hv[nh++] = t;
    if (!is_local_host(t, me)) remote = 1;
  }
  if (!remote || nh == 0) {
    free(list);
    return 0;
  }
  int per = (n + nh - 1) / nh;
  /* the store is on the first host: the others need a name of it that is not their own loopback */
  const char *store = strcmp(addr, "127.0.0.1") ? addr : is_local_host(hv[0], me) ? me : hv[0];
  fprintf(stderr,
          "shoal launch: --hosts names other machines (%s); shoal does not start processes remotely (no ssh).\n"
          "Run the ranks on each host yourself, with the same store address (the first host), a fixed port and\n"
          "the same SHOAL_TOKEN, e.g.:\n",
          hosts);
  for (int h = 0; h < nh; h++) {
    int lo = h * per, hi = lo + per > n ? n : lo + per;
    if (lo >= hi) break;
    fprintf(stderr, "  on %s: for r in $(seq %d %d); do SHOAL_RANK=$r SHOAL_WORLD_SIZE=%d SHOAL_MASTER_ADDR=%s "
            "SHOAL_MASTER_PORT=%d%s", hv[h], lo, hi - 1, n, store, port ? port : 29500,
            getenv("SHOAL_TOKEN") ? " SHOAL_TOKEN=\"$SHOAL_TOKEN\"" : "");
    for (char **a = prog; *a; a++) fputc(' ', stderr), put_word(stderr, *a);
    fprintf(stderr, " & done; wait\n");
  }
  fprintf(stderr, "(set SHOAL_SOCKET_IFNAME if the hosts have several interfaces%s; see docs/comm.md)\n",
          getenv("SHOAL_TOKEN") ? "; export the same SHOAL_TOKEN on every host" : "");
  free(list);
  return 2;
}

/* Write one prefixed line with a single write() so lines never interleave. */
static void emit_line(int out, int rank, int prefix, const char *p, size_t n) {
  char stackbuf[4096];
  size_t cap = n + 32;
  char *b = cap <= sizeof stackbuf ? stackbuf : malloc(cap);
  if (!b) return;
  int k = prefix ? snprintf(b, cap, "[%d] ", rank) : 0;
  memcpy(b + k, p, n);
  size_t tot = (size_t)k + n;
  b[tot++] = '\n';
  for (size_t off = 0; off < tot;) {
    ssize_t w = write(out, b + off, tot - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (b != stackbuf) free(b);
}

static void drain_stream(stream_t *s, int rank, int prefix, int at_eof) {
  size_t start = 0;
  for (size_t i = 0; i < s->len; i++)
    if (s->buf[i] == '\n') {
      emit_line(s->out, rank, prefix, s->buf + start, i - start);
      start = i + 1;
    }
  if (start < s->len && (at_eof || s->len - start >= LINE_MAX_BYTES)) { /* overlong or unterminated */
    emit_line(s->out, rank, prefix, s->buf + start, s->len - start);
    start = s->len;
  }
  memmove(s->buf, s->buf + start, s->len - start);
  s->len -= start;
}

static void read_stream(stream_t *s, int rank, int prefix) {
  ssize_t k = read(s->fd, s->buf + s->len, LINE_MAX_BYTES - s->len);
  if (k < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (k <= 0) {
    drain_stream(s, rank, prefix, 1);
    close(s->fd);
    s->fd = -1;
    return;
  }
  s->len += (size_t)k;
  drain_stream(s, rank, prefix, 0);
}

static void describe(int status, char *out, size_t cap) {
  if (WIFSIGNALED(status))
    snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
}

static void signal_rank(rank_proc_t *p, int sig) {
  kill(-p->pid, sig); /* the rank's process group: its children too */
  if (sig != SIGKILL) kill(-p->pid, SIGCONT); /* a stopped rank must see it */
  p->signaled_by_us = 1;
  if (!p->sent_sig) p->sent_sig = sig;
  if (sig == SIGKILL) p->sent_kill = 1;
}

static void signal_all(rank_proc_t *rp, int n, int sig, int *count) {
  for (int r = 0; r < n; r++)
    if (rp[r].running) {
      signal_rank(&rp[r], sig);
      if (count) (*count)++;
    }
}

/* Did the rank die of a signal the launcher did not send? (A rank killed
 * from outside may be reaped after the launcher signalled it: compare.) */
static int killed_from_outside(const rank_proc_t *p) {
  if (!p->order || !WIFSIGNALED(p->status)) return 0;
  int sig = WTERMSIG(p->status);
  return !p->sent_sig || (sig != p->sent_sig && !(sig == SIGKILL && p->sent_kill));
}

static void set_env_int(const char *name, long v) {
  char b[32];
  snprintf(b, sizeof b, "%ld", v);
  setenv(name, b, 1);
}

/* The (k mod ncpu)-th CPU this process may run on, or -1. */
static int nth_usable_cpu(const cpu_set_t *set, int k) {
  int ncpu = CPU_COUNT(set);
  if (ncpu < 1) return -1;
  k %= ncpu;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, set) && k-- == 0) return c;
  return -1;
}

/* --on-failure: what a failing rank does to the others */
enum { ON_FAIL_STOP = 0, ON_FAIL_CONTINUE = 1, ON_FAIL_RESTART = 2 };
static int on_failure = ON_FAIL_STOP;

static pid_t spawn_rank(int r, int n, const char *addr, int port, int store_fd, char **prog, rank_proc_t *rp,
                        const cpu_set_t *bind, int joining) {
  int po[2], pe[2];
  if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) return -1;
  pid_t parent = getpid();
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the launcher */
    if (getppid() != parent) _exit(127);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    dup2(po[1], 1);
    dup2(pe[1], 2);
    if (bind) {
      int cpu = nth_usable_cpu(bind, r);
      cpu_set_t one;
      CPU_ZERO(&one);
      if (cpu >= 0) CPU_SET(cpu, &one);
      if (cpu < 0 || sched_setaffinity(0, sizeof one, &one))
        fprintf(stderr, "shoal launch: rank %d: cannot bind to CPU %d: %s (running unbound)\n", r, cpu, strerror(errno));
    }
    set_env_int("SHOAL_RANK", r);
    set_env_int("SHOAL_WORLD_SIZE", n);
    setenv("SHOAL_MASTER_ADDR", addr, 1);
    set_env_int("SHOAL_MASTER_PORT", port);
    set_env_int("RANK", r);
    set_env_int("WORLD_SIZE", n);
    set_env_int("LOCAL_RANK", r);
    set_env_int("LOCAL_WORLD_SIZE", n);
    setenv("MASTER_ADDR", addr, 1);
    set_env_int("MASTER_PORT", port);
    if (r == 0 || on_failure != ON_FAIL_STOP) { /* elastic jobs: every rank may become the door keeper */
      int fl = fcntl(store_fd, F_GETFD);
      fcntl(store_fd, F_SETFD, fl & ~FD_CLOEXEC);
      set_env_int("SHOAL_STORE_FD", store_fd);
    } else {
      unsetenv("SHOAL_STORE_FD");
    }
    if (joining)
      setenv("SHOAL_JOIN", "1", 1);
    else
      unsetenv("SHOAL_JOIN");
    if (tb_plan) testbed_child(r);
    execvp(prog[0], prog);
    int e = errno; /* the shell's codes: 127 not found, 126 found but not runnable */
    fprintf(stderr, "shoal launch: cannot run '%s': %s\n", prog[0], strerror(e));
    _exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
  }
  setpgid(pid, pid);
  close(po[1]);
  close(pe[1]);
  rp->pid = pid;
  rp->running = 1;
  rp->s[0] = (stream_t){po[0], 1, malloc(LINE_MAX_BYTES), 0};
  rp->s[1] = (stream_t){pe[0], 2, malloc(LINE_MAX_BYTES), 0};
  return pid;
}

int shoal_cmd_launch(int argc, char **argv) {
  int n = 0, prefix = 1;
  double port_d = 0, timeout = 0, grace = 3, max_restarts = 3;
  int max_restarts_given = 0;
  const char *addr = NULL, *hosts = NULL, *bind_mode = NULL, *bind_src = "--bind";
  int i, tbo;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    double v;
    if (!strcmp(a, "--")) {
      i++;
      break;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--nranks") || !strcmp(a, "--np")) {
      if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, 1, 4096, &v)) return 2;
      n = (int)v;
    } else if (!strcmp(a, "--port")) {
      if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, 0, 65535, &port_d)) return 2;
    } else if (!strcmp(a, "--timeout")) {
      if (parse_num(a, i + 1 < argc ? argv[++i] : NULL, 0.001, 1e7, &timeout)) return 2;
    } else if (!strcmp(a, "--grace")) {
      if (parse_num(a, i + 1 < argc ? argv[++i] : NULL, 0, 3600, &grace)) return 2;
    } else if (!strcmp(a, "--addr")) {
      if (i + 1 >= argc) return fprintf(stderr, "shoal launch: --addr needs a value\n"), 2;
      addr = argv[++i];
    } else if (!strcmp(a, "--hosts")) {
      if (i + 1 >= argc) return fprintf(stderr, "shoal launch: --hosts needs a value\n"), 2;
      hosts = argv[++i];
    } else if (!strcmp(a, "--bind")) {
      if (i + 1 >= argc) return fprintf(stderr, "shoal launch: --bind needs a value (core, none or auto)\n"), 2;
      bind_mode = argv[++i];
    } else if ((tbo = testbed_opt(argc, argv, &i)) != 0) {
      if (tbo < 0) return 2;
    } else if (!strcmp(a, "--no-prefix")) {
      prefix = 0;
    } else if (!strcmp(a, "--on-failure")) {
      const char *mode = i + 1 < argc ? argv[++i] : "";
      if (!strcmp(mode, "stop"))
        on_failure = ON_FAIL_STOP;
      else if (!strcmp(mode, "continue"))
        on_failure = ON_FAIL_CONTINUE;
      else if (!strcmp(mode, "restart"))
        on_failure = ON_FAIL_RESTART;
      else
        return fprintf(stderr, "shoal launch: --on-failure '%s': expected stop, continue or restart\n", mode), 2;
    } else if (!strcmp(a, "--max-restarts")) {
      if (parse_int(a, i + 1 < argc ? argv[++i] : NULL, 0, 1000000, &max_restarts)) return 2;
      max_restarts_given = 1;
    } else if (a[0] == '-') {
      fprintf(stderr, "shoal launch: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    } else {
      break; /* the program, without "--" */
    }
  }
  if (max_restarts_given && on_failure != ON_FAIL_RESTART) {
    fprintf(stderr, "shoal launch: --max-restarts applies to --on-failure restart only\n");
    return 2;
  }
  if (hosts) {
    const char *p = hosts;
    if (shoal__list_has_empty(p, ',')) return fprintf(stderr, "shoal launch: --hosts '%s': an empty host name\n", hosts), 2;
    /* names and addresses only: the printed commands carry them to a shell */
    size_t bad = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:,");
    if (p[bad])
      return fprintf(stderr, "shoal launch: --hosts '%s': '%c' in a host name (expected names or addresses "
                     "separated by commas)\n", hosts, p[bad]), 2;
  }
  if (n < 1) {
    fprintf(stderr, "shoal launch: -n N is required\n");
    usage(stderr);
    return 2;
  }
  if (i >= argc) {
    fprintf(stderr, "shoal launch: no program given (shoal launch -n %d -- PROGRAM ARGS)\n", n);
    return 2;
  }
  char **prog = argv + i;
  if (!bind_mode) bind_mode = shoal__config_str("SHOAL_BIND", "auto"), bind_src = "SHOAL_BIND";
  if (strcmp(bind_mode, "core") && strcmp(bind_mode, "none") && strcmp(bind_mode, "auto")) {
    fprintf(stderr, "shoal launch: %s '%s': expected core, none or auto\n", bind_src, bind_mode);
    return 2;
  }
  int shm_on = 1;
  if (shoal__config_bool("SHOAL_SHM", 1, &shm_on)) {
    fprintf(stderr, "shoal launch: %s\n", shoal_last_error());
    return 2;
  }
  cpu_set_t usable, *bind = NULL;
  CPU_ZERO(&usable);
  if (strcmp(bind_mode, "none") && sched_getaffinity(0, sizeof usable, &usable) == 0 &&
      (!strcmp(bind_mode, "core") || n <= CPU_COUNT(&usable) || shm_on))
    bind = &usable;
  if (tb_name && addr) {
    fprintf(stderr, "shoal launch: --addr with --testbed: the store is on the testbed's first host\n");
    return 2;
  }
  if (testbed_setup(n, hosts, &addr)) return 2;
  const char *addr_src; /* --addr's or the testbed's, else the library's order */
  const char *given_src = !addr ? NULL : tb_name ? "the testbed" : "--addr";
  addr = shoal__boot_store_addr(addr, &addr_src);
  if (given_src) addr_src = given_src;
  int port = (int)port_d;
  if (hosts && !tb_plan) {
    int rc = hosts_instructions(hosts, n, addr, port, prog);
    if (rc) return rc;
  }
  struct in_addr ip;
  if (!*addr || shoal__sock_resolve(addr, &ip)) {
    fprintf(stderr, "shoal launch: the store address from %s: %s\n", addr_src,
            *addr ? shoal_last_error() : given_src ? "empty (name a host)" : "empty (unset it, or name a host)");
    return 1;
  }
  if ((ntohl(ip.s_addr) >> 24) != 127) ip.s_addr = htonl(INADDR_ANY);
  int store_fd = -1, lrc;
  if (tb_plan) {
    if (testbed_listen(&port, &store_fd)) return 1;
  } else if ((lrc = shoal__sock_listen(ip, port, &store_fd, &port))) {
    /* the launcher's port is --port (it does not read SHOAL_MASTER_PORT), not the library's advice */
    if (lrc == SHOAL_ERR_ADDR_IN_USE)
      fprintf(stderr, "shoal launch: --port %d is in use (another job or a stale rank holds it); pick another "
              "--port, or leave it out to let the launcher choose a free one\n", port);
    else
      fprintf(stderr, "shoal launch: %s\n", shoal_last_error());
    return 1;
  }

  if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK)) {
    perror("shoal launch: pipe");
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART; /* SIGCHLD on stops too: a stopped rank is named if the others then fail */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  rank_proc_t *rp = calloc((size_t)n, sizeof *rp);
  if (!getenv("SHOAL_JOB_ID")) { /* the job's identity: its store refuses ranks of any other job */
    char job[40];
    snprintf(job, sizeof job, "%016llx-%d", (unsigned long long)shoal__auth_random_u64(), (int)getpid());
    setenv("SHOAL_JOB_ID", job, 1);
  }
  for (int r = 0; r < n; r++)
    if (spawn_rank(r, n, addr, port, store_fd, prog, &rp[r], bind, 0) < 0) {
      fprintf(stderr, "shoal launch: cannot start rank %d: %s\n", r, strerror(errno));
      int cnt = 0;
      signal_all(rp, r, SIGKILL, &cnt);
      for (int k = 0; k < r; k++) /* reaped, not left to init */
        if (rp[k].running)
          while (waitpid(rp[k].pid, NULL, 0) < 0 && errno == EINTR) {
          }
      return 1;
    }
  if (on_failure != ON_FAIL_RESTART) close(store_fd); /* the ranks own it now (restarts need it here) */
  int restarts = 0, nlost = 0;
  char lost[512] = "";

  struct pollfd *pf = calloc((size_t)(2 * n + 1), sizeof *pf);
  int *pf_rank = calloc((size_t)(2 * n + 1), sizeof *pf_rank);
  int running = n, failed = -1, fail_status = 0, stopped = 0, interrupted = 0, timed_out = 0, nended = 0;
  double t_start = shoal__now_s(), kill_at = 0, out_deadline = 0, joiners_stop_at = 0;
  for (;;) {
    /* reap */
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG | WUNTRACED | WCONTINUED)) > 0) {
      for (int r = 0; r < n; r++) {
        if (rp[r].pid != pid || !rp[r].running) continue;
        if (WIFSTOPPED(st) || WIFCONTINUED(st)) { /* a continue the launcher caused (stopping it) keeps the record */
          if (!rp[r].signaled_by_us) rp[r].stop_sig = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
          continue;
        }
        rp[r].running = 0;
        rp[r].order = ++nended;
        rp[r].status = st;
        running--;
        int bad = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (bad && on_failure != ON_FAIL_STOP && !rp[r].signaled_by_us && !interrupted && !timed_out) {
          char what[128];
          describe(st, what, sizeof what);
          nlost++;
          size_t ul = strlen(lost);
          if (ul < sizeof lost - 64) snprintf(lost + ul, sizeof lost - ul, "%srank %d %s", ul ? ", " : "", r, what);
          if (on_failure == ON_FAIL_RESTART && restarts < (int)max_restarts) {
            restarts++;
            kill(-rp[r].pid, SIGKILL); /* what is left of its process group */
            for (int k = 0; k < 2; k++) { /* its last output, then a fresh pair of pipes */
              if (rp[r].s[k].fd >= 0) {
                shoal__sock_set_nonblock(rp[r].s[k].fd);
                while (rp[r].s[k].fd >= 0) {
                  ssize_t before = (ssize_t)rp[r].s[k].len;
                  read_stream(&rp[r].s[k], r, prefix);
                  if (rp[r].s[k].fd >= 0 && (ssize_t)rp[r].s[k].len == before) break; /* EAGAIN */
                }
                if (rp[r].s[k].fd >= 0) {
                  drain_stream(&rp[r].s[k], r, prefix, 1);
                  close(rp[r].s[k].fd);
                }
              }
              free(rp[r].s[k].buf);
            }
            rank_proc_t old = rp[r];
            memset(&rp[r], 0, sizeof rp[r]);
            if (spawn_rank(r, n, addr, port, store_fd, prog, &rp[r], bind, 1) < 0) {
              fprintf(stderr, "shoal launch: rank %d %s; cannot restart it: %s\n", r, what, strerror(errno));
              rp[r] = old;
              rp[r].s[0] = (stream_t){-1, 1, NULL, 0};
              rp[r].s[1] = (stream_t){-1, 2, NULL, 0};
            } else {
              running++;
              rp[r].restarted = 1;
              fprintf(stderr, "shoal launch: rank %d %s; restarted it (restart %d of at most %d) as a new process "
                      "that joins the running job\n", r, what, restarts, (int)max_restarts);
            }
          } else {
            fprintf(stderr, "shoal launch: rank %d %s; the other ranks go on (--on-failure %s)\n", r, what,
                    on_failure == ON_FAIL_RESTART ? "restart, no restarts left" : "continue");
          }
          continue;
        }
        if (bad && failed < 0 && !rp[r].signaled_by_us && !interrupted && !timed_out) {
          failed = r;
          fail_status = st;
          signal_all(rp, n, SIGTERM, &stopped);
          kill_at = shoal__now_s() + grace;
        }
      }
    }
    if (got_signal && !interrupted) {
      interrupted = got_signal;
      signal_all(rp, n, interrupted == SIGHUP ? SIGTERM : interrupted, NULL);
      kill_at = shoal__now_s() + grace;
    }
    if (timeout > 0 && !timed_out && failed < 0 && !interrupted && shoal__now_s() - t_start > timeout) {
      timed_out = 1;
      signal_all(rp, n, SIGTERM, NULL);
      kill_at = shoal__now_s() + grace;
    }
    if (on_failure == ON_FAIL_RESTART && failed < 0 && !interrupted && !timed_out) {
      int originals = 0, originals_ok = 0, waiting = 0;
      for (int r = 0; r < n; r++)
        if (!rp[r].restarted) {
          originals++;
          originals_ok += !rp[r].running && WIFEXITED(rp[r].status) && WEXITSTATUS(rp[r].status) == 0;
        } else {
          waiting += rp[r].running && !rp[r].signaled_by_us;
        }
      double now = shoal__now_s(), wait_s = grace > JOINER_GRACE_S ? grace : JOINER_GRACE_S;
      if (originals > 0 && originals_ok == originals && waiting > 0) {
        if (joiners_stop_at == 0) {
          joiners_stop_at = now + wait_s;
        } else if (now >= joiners_stop_at) {
          for (int r = 0; r < n; r++)
            if (rp[r].restarted && rp[r].running && !rp[r].signaled_by_us) {
              fprintf(stderr, "shoal launch: the job finished (every rank never restarted exited 0); rank %d, "
                      "restarted, was still running %.0f s later (waiting to join): stopped it\n", r, wait_s);
              signal_rank(&rp[r], SIGTERM);
            }
          kill_at = now + grace;
        }
      }
    }
    if (kill_at > 0 && shoal__now_s() >= kill_at && running > 0) {
      signal_all(rp, n, SIGKILL, NULL);
      kill_at = 0;
    }
    int np = 0;
    pf[np++] = (struct pollfd){sig_pipe[0], POLLIN, 0};
    for (int r = 0; r < n; r++)
      for (int k = 0; k < 2; k++)
        if (rp[r].s[k].fd >= 0) {
          pf_rank[np] = r * 2 + k;
          pf[np++] = (struct pollfd){rp[r].s[k].fd, POLLIN, 0};
        }
    if (running == 0) {
      if (np == 1) break;
      /* pipes still open after every rank exited: an orphan of a rank holds them.
       * Kill what is left of the ranks' process groups, and bound the wait. */
      if (out_deadline == 0) {
        for (int r = 0; r < n; r++) kill(-rp[r].pid, SIGKILL);
        out_deadline = shoal__now_s() + 1.0;
      }
      if (shoal__now_s() > out_deadline) break;
    }
    int pr = poll(pf, (nfds_t)np, 100);
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    if (pf[0].revents) {
      char b[64];
      while (read(sig_pipe[0], b, sizeof b) > 0) {
      }
    }
    for (int j = 1; j < np; j++)
      if (pf[j].revents) read_stream(&rp[pf_rank[j] / 2].s[pf_rank[j] % 2], pf_rank[j] / 2, prefix);
  }
  for (int r = 0; r < n; r++)
    for (int k = 0; k < 2; k++) {
      if (rp[r].s[k].fd >= 0) {
        drain_stream(&rp[r].s[k], r, prefix, 1);
        close(rp[r].s[k].fd);
      }
      free(rp[r].s[k].buf);
    }
  int rc = 0;
  char what[128];
  if (failed >= 0) {
    /* Blame the cause, not the first to exit: a rank killed by a signal the
     * launcher did not send (its peers notice within milliseconds and may be
     * reaped before it), else a rank that was stopped (its peers time out),
     * else the first rank that failed. */
    int blame = failed, stop_blame = -1;
    for (int r = 0; r < n; r++) {
      if (killed_from_outside(&rp[r]) && (!killed_from_outside(&rp[blame]) || rp[r].order < rp[blame].order))
        blame = r;
      if (rp[r].stop_sig && stop_blame < 0) stop_blame = r;
    }
    int blame_sig = killed_from_outside(&rp[blame]);
    if (!blame_sig && stop_blame >= 0) {
      describe(fail_status, what, sizeof what);
      fprintf(stderr, "shoal launch: rank %d was stopped by signal %d (%s) and stopped answering; rank %d then %s; "
              "stopped the other %d rank%s\n", stop_blame, rp[stop_blame].stop_sig, strsignal(rp[stop_blame].stop_sig),
              failed, what, stopped, stopped == 1 ? "" : "s");
    } else {
      fail_status = rp[blame].status;
      describe(fail_status, what, sizeof what);
      char first[160] = "";
      if (blame != failed) {
        char fw[128];
        describe(rp[failed].status, fw, sizeof fw);
        snprintf(first, sizeof first, " (rank %d %s first, after losing it)", failed, fw);
      }
      if (stopped)
        fprintf(stderr, "shoal launch: rank %d %s%s; stopped the other %d rank%s\n", blame, what, first, stopped,
                stopped == 1 ? "" : "s");
      else
        fprintf(stderr, "shoal launch: rank %d %s%s\n", blame, what, first);
    }
    rc = WIFSIGNALED(fail_status) ? 128 + WTERMSIG(fail_status) : WEXITSTATUS(fail_status);
    if (rc == 0) rc = 1;
  } else if (interrupted) {
    fprintf(stderr, "shoal launch: %s received; forwarded to the %d ranks\n", strsignal(interrupted), n);
    rc = 128 + interrupted;
  } else if (timed_out) {
    fprintf(stderr, "shoal launch: --timeout %g s reached; stopped all %d ranks\n", timeout, n);
    rc = 124;
  } else if (nlost) {
    /* a lost rank was tolerated; the job succeeded if the ranks still there at the end all exited 0 */
    int ok = 0, first_bad = -1;
    for (int r = 0; r < n; r++) {
      if (WIFEXITED(rp[r].status) && WEXITSTATUS(rp[r].status) == 0)
        ok++;
      else if (first_bad < 0 && WIFEXITED(rp[r].status))
        first_bad = r;
    }
    if (first_bad >= 0 || ok == 0) {
      rc = first_bad >= 0 ? WEXITSTATUS(rp[first_bad].status) : 1;
      fprintf(stderr, "shoal launch: %s after losing %s\n",
              first_bad >= 0 ? "a rank failed" : "every rank was lost", lost);
      if (first_bad >= 0) fprintf(stderr, "shoal launch: rank %d exited with status %d\n", first_bad, rc);
    } else {
      fprintf(stderr, "shoal launch: the job finished with %d rank%s exiting 0 after losing %d (%s; %d restart%s; "
              "--on-failure %s)\n", ok, ok == 1 ? "" : "s", nlost, lost, restarts, restarts == 1 ? "" : "s",
              on_failure == ON_FAIL_RESTART ? "restart" : "continue");
    }
  }
  if (on_failure == ON_FAIL_RESTART) close(store_fd);
  free(pf);
  free(pf_rank);
  free(rp);
  return rc;
}
