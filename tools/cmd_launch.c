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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/bootstrap/sock.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "options.h"
#include "testbed/testbed.h"

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
  double stopped_at; /* when (stop_sig) */
  int stop_killed; /* --on-failure continue|restart: it stayed stopped past the deadline and was killed */
  int order;      /* 1, 2, ...: order in which ranks ended (0: still running) */
  int restarted;  /* a process the launcher started again (--on-failure restart): it joins the running job */
  int lost_to;    /* 1 + the rank whose leaving made this one's communication fail (its note), 0: none */
  stream_t s[2];
} rank_proc_t;

/* --on-failure restart: once every rank never restarted has exited 0 the job has finished; a restarted
 * rank still running then waits at a door no grow will open (shoal train --grow-every 0, or its loss came
 * after the last grow), or finishes its last steps: it gets this long, then is stopped. */
#define JOINER_GRACE_S 10.0

static int sig_pipe[2] = {-1, -1};
/* The ranks' notes (SHOAL_NOTE_FD, comm/bootstrap/note.h): "lost PID PEER_PID" when a rank's communication
 * failed because that peer closed, left or aborted first. Non-blocking at both ends. */
static int note_pipe[2] = {-1, -1};
static char note_env[64];
static volatile sig_atomic_t got_signal;

static void on_signal(int sig) {
  int e = errno;
  if (sig != SIGCHLD) got_signal = sig;
  char b = (char)sig;
  ssize_t k = write(sig_pipe[1], &b, 1);
  (void)k;
  errno = e;
}

/* --on-failure: what a failing rank does to the others */
enum { ON_FAIL_STOP = 0, ON_FAIL_CONTINUE = 1, ON_FAIL_RESTART = 2 };

typedef struct launch_cli {
  int n, port, master_port, no_prefix, per_host, on_failure, max_restarts;
  double timeout, grace;
  const char *addr, *hosts, *bind, *testbed, *place;
} launch_cli_t;

enum { M_TESTBED, M_RESTART };
static int on_testbed(const void *c) { return ((const launch_cli_t *)c)->testbed != NULL; }
static int on_restart(const void *c) { return ((const launch_cli_t *)c)->on_failure == ON_FAIL_RESTART; }
static const shoal_opt_mode_t launch_modes[] = {
    [M_TESTBED] = {on_testbed, "needs --testbed (the testbed whose hosts the ranks are placed on)", NULL},
    [M_RESTART] = {on_restart, "applies to --on-failure restart only", NULL},
};

#define SHOAL_OPTS_STRUCT launch_cli_t
static const shoal_opt_t launch_opts[] = {
    OPT_INT("-n|--nranks|--np", "N", n, 1, 4096, "number of ranks (required)", .def = ""),
    OPT_INT("--port", "P", port, 0, 65535, "shoal's rendezvous store port (0: the launcher picks a free one)"),
    OPT_INT("--master-port", "P", master_port, 0, 65535,
            "MASTER_PORT given to the ranks, for torch's own store (init_process_group with env://)\n"
            "(0: a free port the launcher finds, as torchrun does)"),
    OPT_STRING("--addr", "A", addr,
               "store address given to the ranks (not with --testbed, whose first host holds the store)",
               .def = "SHOAL_MASTER_ADDR, MASTER_ADDR or 127.0.0.1", .expect = "a host name or address"),
    OPT_DOUBLE("--timeout", "S", timeout, 0.001, 1e7, "stop every rank after S seconds (exit 124)", .def = "none"),
    OPT_DOUBLE("--grace", "S", grace, 0, 3600, "seconds between SIGTERM and SIGKILL when stopping ranks"),
    OPT_STRING("--hosts", "h1,h2", hosts,
               "several machines: not started from here (no ssh); prints the per-host commands.\n"
               "With --testbed: use only these hosts of the testbed (h0,h3)",
               .expect = "host names separated by commas"),
    OPT_FLAG("--no-prefix", no_prefix, "do not prefix output lines with [rank]"),
    OPT_CHOICE("--bind", "MODE", bind, "core|none|auto",
               "core: pin rank r to the (r mod ncpu)-th usable CPU; none; auto: core when the ranks fit on\n"
               "the usable CPUs or shared memory is on (SHOAL_SHM), else none",
               .def = "SHOAL_BIND, else auto"),
    OPT_ENUM("--on-failure", "MODE", on_failure, "stop|continue|restart",
             "stop: a rank that fails stops the others; continue: the others go on (for programs that\n"
             "shrink, e.g. shoal train --on-failure shrink); restart: continue, and start the rank again as\n"
             "a new process that joins the job (stopped 10 s after the job finished if it never got in);\n"
             "with either, a rank stopped from outside (SIGSTOP) is killed and counted as lost once it stayed\n"
             "stopped past SHOAL_TIMEOUT + --grace, or --grace after every other rank ended"),
    OPT_INT("--max-restarts", "K", max_restarts, 0, 1000000, "with restart: at most K restarts in all",
            .when = 1u << M_RESTART),
    OPT_GROUP("on an emulated cluster (docs/testbed.md):"),
    OPT_STRING("--testbed", "NAME", testbed, "place the ranks on the hosts of `shoal testbed` NAME (network namespaces)",
               .expect = "a testbed name"),
    OPT_INT("--per-host", "K", per_host, 1, 4096, "ranks per host", .def = "spread evenly", .when = 1u << M_TESTBED),
    OPT_CHOICE("--place", "block|rr", place, "block|rr", "fill hosts in turn (block) or deal ranks round-robin (rr)",
               .def = "block", .when = 1u << M_TESTBED),
    OPT_END,
};

static void launch_more_help(FILE *f) {
  fprintf(f, "\nEach rank gets SHOAL_RANK, SHOAL_WORLD_SIZE, SHOAL_MASTER_ADDR, SHOAL_MASTER_PORT and the torchrun\n"
             "names RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. MASTER_PORT is not\n"
             "shoal's store port: it is left free for torch's own store, so that init_process_group(\"gloo\")\n"
             "(or \"shoal\") with env:// works under the launcher as under torchrun. If a rank exits non-zero or\n"
             "is killed, the others are stopped and the launcher exits non-zero naming it.\n");
}

static const shoal_opts_spec_t launch_spec = {
    .name = "shoal launch",
    .usage = "usage: shoal launch -n N [options] -- PROGRAM [ARGS...]\n"
             "Start N ranks of PROGRAM on this machine, like torchrun/mpirun.\n",
    .opts = launch_opts,
    .modes = launch_modes,
    .args = SHOAL_ARGS_COMMAND,
    .col = 22,
    .more_help = launch_more_help,
};

/* --testbed placement: which host each rank runs on (testbed.h). */
static tb_plan_t *tb_plan;
static int on_failure = ON_FAIL_STOP;

static void set_env_int(const char *name, long v);

/* Plan the placement; the store address becomes rank 0's host address. */
static int testbed_setup(const launch_cli_t *c, const char **addr) {
  if (!c->testbed) return 0;
  char err[512];
  tb_plan = malloc(sizeof *tb_plan);
  if (!tb_plan || shoal__tb_plan(c->testbed, c->hosts, c->n, c->per_host, c->place, tb_plan, err, sizeof err)) {
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


/* A launched job: its ranks, their output, and what has happened to them. */
typedef struct job {
  const launch_cli_t *c;
  int n, prefix;
  const char *addr;
  int port, store_fd;
  int torch_port; /* MASTER_PORT: torch's own store (TCPStore) on rank 0, not shoal's */
  char **prog;
  cpu_set_t usable;
  const cpu_set_t *bind; /* &usable when ranks are pinned, else NULL */
  rank_proc_t *rp;
  struct pollfd *pf;
  int *pf_rank;
  int running, failed, fail_status, stopped, interrupted, timed_out, nended, restarts, nlost;
  char lost[512];   /* the ranks lost and tolerated (--on-failure continue|restart) */
  double t_start, kill_at, out_deadline, joiners_stop_at;
  double comm_timeout; /* the ranks' SHOAL_TIMEOUT: a rank stopped this long (+ the grace) is lost to them */
  double term_at; /* the first failure lost a rank still running: the others are stopped then, or when it ends */
  char notes[256];
  size_t nnotes;
} job_t;

/* Start rank r of the job (joining: a restart that joins the running job) into *rp. */
static pid_t spawn_rank(const job_t *J, int r, rank_proc_t *rp, int joining) {
  int n = J->n, store_fd = J->store_fd;
  const cpu_set_t *bind = J->bind;
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
    setenv("SHOAL_MASTER_ADDR", J->addr, 1);
    set_env_int("SHOAL_MASTER_PORT", J->port);
    set_env_int("RANK", r);
    set_env_int("WORLD_SIZE", n);
    set_env_int("LOCAL_RANK", r);
    set_env_int("LOCAL_WORLD_SIZE", n);
    setenv("MASTER_ADDR", J->addr, 1);
    set_env_int("MASTER_PORT", J->torch_port); /* free for torch's TCPStore (init_process_group, env://) */
    if (r == 0 || on_failure != ON_FAIL_STOP) { /* elastic jobs: every rank may become the door keeper */
      int fl = fcntl(store_fd, F_GETFD);
      fcntl(store_fd, F_SETFD, fl & ~FD_CLOEXEC);
      set_env_int("SHOAL_STORE_FD", store_fd);
    } else {
      unsetenv("SHOAL_STORE_FD");
    }
    if (note_pipe[1] >= 0) {
      fcntl(note_pipe[1], F_SETFD, fcntl(note_pipe[1], F_GETFD) & ~FD_CLOEXEC);
      setenv("SHOAL_NOTE_FD", note_env, 1);
    }
    if (joining)
      setenv("SHOAL_JOIN", "1", 1);
    else
      unsetenv("SHOAL_JOIN");
    if (tb_plan) testbed_child(r);
    execvp(J->prog[0], J->prog);
    int e = errno; /* the shell's codes: 127 not found, 126 found but not runnable */
    fprintf(stderr, "shoal launch: cannot run '%s': %s\n", J->prog[0], strerror(e));
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


/* The checks of what the table cannot say: a well-formed --hosts, -n and a program given, the bind mode
 * (--bind or SHOAL_BIND). SHOAL_OPTS_GO, or the exit status. */
static int check_cli(const launch_cli_t *c, int nprog, const char **bind_mode, int *shm_on) {
  if (c->hosts) {
    const char *p = c->hosts;
    if (shoal__list_has_empty(p, ',')) return fprintf(stderr, "shoal launch: --hosts '%s': an empty host name\n", p), 2;
    /* names and addresses only: the printed commands carry them to a shell */
    size_t bad = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:,");
    if (p[bad])
      return fprintf(stderr, "shoal launch: --hosts '%s': '%c' in a host name (expected names or addresses "
                     "separated by commas)\n", p, p[bad]), 2;
  }
  if (c->n < 1) return fprintf(stderr, "shoal launch: -n N is required (see shoal launch --help)\n"), 2;
  if (nprog < 1) return fprintf(stderr, "shoal launch: no program given (shoal launch -n %d -- PROGRAM ARGS)\n", c->n), 2;
  const char *src = "--bind";
  *bind_mode = c->bind;
  if (!*bind_mode) *bind_mode = shoal__config_str("SHOAL_BIND", "auto"), src = "SHOAL_BIND";
  if (strcmp(*bind_mode, "core") && strcmp(*bind_mode, "none") && strcmp(*bind_mode, "auto"))
    return fprintf(stderr, "shoal launch: %s '%s': expected core, none or auto\n", src, *bind_mode), 2;
  if (shoal__config_bool("SHOAL_SHM", 1, shm_on)) return fprintf(stderr, "shoal launch: %s\n", shoal_last_error()), 2;
  if (c->testbed && c->addr)
    return fprintf(stderr, "shoal launch: --addr with --testbed: the store is on the testbed's first host\n"), 2;
  return SHOAL_OPTS_GO;
}

/* MASTER_PORT, for torch's own store on rank 0 (a script's init_process_group with env://): --master-port,
 * else a port free now on rank 0's host, bound and released as torchrun's agent finds one (torch's TCPStore
 * binds it again at once: a listener never connected leaves no TIME_WAIT). 0, or -1 said why. */
static int pick_torch_port(job_t *J) {
  if (J->c->master_port) {
    if (J->c->master_port == J->port) {
      fprintf(stderr, "shoal launch: --master-port %d is shoal's store port (--port): torch's store needs "
              "another\n", J->port);
      return -1;
    }
    J->torch_port = J->c->master_port;
    return 0;
  }
  int fd = -1, port = 0;
  struct in_addr any = {htonl(INADDR_ANY)};
  if (tb_plan ? testbed_listen(&port, &fd) : shoal__sock_listen(any, 0, &fd, &port)) {
    if (!tb_plan) fprintf(stderr, "shoal launch: a free port for MASTER_PORT: %s\n", shoal_last_error());
    return -1;
  }
  close(fd);
  J->torch_port = port;
  return 0;
}

/* The CPUs to pin to, the placement, the store's address and its listening socket. SHOAL_OPTS_GO, or the
 * exit status. */
static int open_store(job_t *J, const char *bind_mode, int shm_on) {
  const launch_cli_t *c = J->c;
  CPU_ZERO(&J->usable);
  if (strcmp(bind_mode, "none") && sched_getaffinity(0, sizeof J->usable, &J->usable) == 0 &&
      (!strcmp(bind_mode, "core") || J->n <= CPU_COUNT(&J->usable) || shm_on))
    J->bind = &J->usable;
  const char *addr = c->addr;
  if (testbed_setup(c, &addr)) return 2;
  const char *addr_src; /* --addr's or the testbed's, else the library's order */
  const char *given_src = !addr ? NULL : c->testbed ? "the testbed" : "--addr";
  addr = shoal__boot_store_addr(addr, &addr_src);
  if (given_src) addr_src = given_src;
  J->addr = addr;
  J->port = c->port;
  if (c->hosts && !tb_plan) {
    int rc = hosts_instructions(c->hosts, J->n, addr, J->port, J->prog);
    if (rc) return rc;
  }
  struct in_addr ip;
  if (!*addr || shoal__sock_resolve(addr, &ip)) {
    fprintf(stderr, "shoal launch: the store address from %s: %s\n", addr_src,
            *addr ? shoal_last_error() : given_src ? "empty (name a host)" : "empty (unset it, or name a host)");
    return 1;
  }
  if ((ntohl(ip.s_addr) >> 24) != 127) ip.s_addr = htonl(INADDR_ANY);
  int lrc;
  if (tb_plan) {
    if (testbed_listen(&J->port, &J->store_fd)) return 1;
  } else if ((lrc = shoal__sock_listen(ip, J->port, &J->store_fd, &J->port))) {
    /* the launcher's port is --port (it does not read SHOAL_MASTER_PORT), not the library's advice */
    if (lrc == SHOAL_ERR_ADDR_IN_USE)
      fprintf(stderr, "shoal launch: --port %d is in use (another job or a stale rank holds it); pick another "
              "--port, or leave it out to let the launcher choose a free one\n", J->port);
    else
      fprintf(stderr, "shoal launch: %s\n", shoal_last_error());
    return 1;
  }
  return pick_torch_port(J) ? 1 : SHOAL_OPTS_GO;
}

/* Signals forwarded, the job's identity, every rank started. SHOAL_OPTS_GO, or the exit status. */
static int start_ranks(job_t *J) {
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

  J->rp = calloc((size_t)J->n, sizeof *J->rp);
  struct stat nst;
  if (pipe2(note_pipe, O_CLOEXEC | O_NONBLOCK) == 0 && fstat(note_pipe[1], &nst) == 0)
    snprintf(note_env, sizeof note_env, "%d:%llu", note_pipe[1], (unsigned long long)nst.st_ino);
  else /* no notes: the blame falls on the first rank to fail, as without them */
    note_pipe[0] = note_pipe[1] = -1;
  if (!getenv("SHOAL_JOB_ID")) { /* the job's identity: its store refuses ranks of any other job */
    char job[40];
    snprintf(job, sizeof job, "%016llx-%d", (unsigned long long)shoal__auth_random_u64(), (int)getpid());
    setenv("SHOAL_JOB_ID", job, 1);
  }
  for (int r = 0; r < J->n; r++)
    if (spawn_rank(J, r, &J->rp[r], 0) < 0) {
      fprintf(stderr, "shoal launch: cannot start rank %d: %s\n", r, strerror(errno));
      int cnt = 0;
      signal_all(J->rp, r, SIGKILL, &cnt);
      for (int k = 0; k < r; k++) /* reaped, not left to init */
        if (J->rp[k].running)
          while (waitpid(J->rp[k].pid, NULL, 0) < 0 && errno == EINTR) {
          }
      return 1;
    }
  if (on_failure != ON_FAIL_RESTART) close(J->store_fd); /* the ranks own it now (restarts need it here) */
  J->pf = calloc((size_t)(2 * J->n + 1), sizeof *J->pf);
  J->pf_rank = calloc((size_t)(2 * J->n + 1), sizeof *J->pf_rank);
  J->running = J->n;
  J->failed = -1;
  J->t_start = shoal__now_s();
  if (shoal__config_double("SHOAL_TIMEOUT", 300, 0.001, 1e7, &J->comm_timeout)) J->comm_timeout = 300;
  return SHOAL_OPTS_GO;
}

/* --on-failure restart: rank r ended (`what`); its last output, then a new process that joins the job. */
static void restart_rank(job_t *J, int r, const char *what) {
  rank_proc_t *p = &J->rp[r];
  J->restarts++;
  kill(-p->pid, SIGKILL); /* what is left of its process group */
  for (int k = 0; k < 2; k++) { /* its last output, then a fresh pair of pipes */
    if (p->s[k].fd >= 0) {
      shoal__sock_set_nonblock(p->s[k].fd);
      while (p->s[k].fd >= 0) {
        ssize_t before = (ssize_t)p->s[k].len;
        read_stream(&p->s[k], r, J->prefix);
        if (p->s[k].fd >= 0 && (ssize_t)p->s[k].len == before) break; /* EAGAIN */
      }
      if (p->s[k].fd >= 0) {
        drain_stream(&p->s[k], r, J->prefix, 1);
        close(p->s[k].fd);
      }
    }
    free(p->s[k].buf);
  }
  rank_proc_t old = *p;
  memset(p, 0, sizeof *p);
  if (spawn_rank(J, r, p, 1) < 0) {
    fprintf(stderr, "shoal launch: rank %d %s; cannot restart it: %s\n", r, what, strerror(errno));
    *p = old;
    p->s[0] = (stream_t){-1, 1, NULL, 0};
    p->s[1] = (stream_t){-1, 2, NULL, 0};
  } else {
    J->running++;
    p->restarted = 1;
    fprintf(stderr, "shoal launch: rank %d %s; restarted it (restart %d of at most %d) as a new process "
            "that joins the running job\n", r, what, J->restarts, J->c->max_restarts);
  }
}

static int rank_of_pid(const job_t *J, long pid) {
  for (int r = 0; r < J->n; r++)
    if (J->rp[r].pid == pid) return r;
  return -1;
}

/* What the ranks wrote on the note pipe so far: each rank's first "lost" note names the rank it lost. */
static void read_notes(job_t *J) {
  if (note_pipe[0] < 0) return;
  for (;;) {
    ssize_t k = read(note_pipe[0], J->notes + J->nnotes, sizeof J->notes - 1 - J->nnotes);
    if (k <= 0) break;
    J->nnotes += (size_t)k;
    J->notes[J->nnotes] = '\0';
    char *line = J->notes, *nl;
    while ((nl = strchr(line, '\n'))) {
      long a, b;
      *nl = '\0';
      int ra, rb;
      if (sscanf(line, "lost %ld %ld", &a, &b) == 2 && (ra = rank_of_pid(J, a)) >= 0 && (rb = rank_of_pid(J, b)) >= 0 &&
          ra != rb && !J->rp[ra].lost_to)
        J->rp[ra].lost_to = rb + 1;
      line = nl + 1;
    }
    J->nnotes -= (size_t)(line - J->notes);
    memmove(J->notes, line, J->nnotes);
    if (J->nnotes == sizeof J->notes - 1) J->nnotes = 0; /* not a note: dropped */
  }
}

/* Following the notes from rank r (r lost q, which failed after losing s ...): the first rank of that chain
 * still running, or -1 (the chain ends at a rank that ended by itself or was stopped by the launcher). */
static int running_cause(const job_t *J, int r) {
  for (int hops = 0, q = J->rp[r].lost_to - 1; hops < J->n && q >= 0 && q != r; hops++, q = J->rp[q].lost_to - 1) {
    const rank_proc_t *p = &J->rp[q];
    if (p->running) return q;
    if (p->signaled_by_us || (WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0)) return -1;
  }
  return -1;
}

/* The job's first failure, rank r: stop the others; but when r failed because a rank still running left
 * first (or failed after losing one that is still running), that rank is on its way out with its own
 * error: it gets the grace to end by itself (and be named with its own status) before the others are
 * stopped. */
static void first_failure(job_t *J, int r, int st) {
  J->failed = r;
  J->fail_status = st;
  read_notes(J);
  if (running_cause(J, r) >= 0 && J->c->grace > 0) {
    J->term_at = shoal__now_s() + J->c->grace;
    return;
  }
  signal_all(J->rp, J->n, SIGTERM, &J->stopped);
  J->kill_at = shoal__now_s() + J->c->grace;
}

/* Rank r ended with wait status st: tolerated (and maybe restarted), the job's failure, or its end. */
static void rank_ended(job_t *J, int r, int st) {
  rank_proc_t *p = &J->rp[r];
  p->running = 0;
  p->order = ++J->nended;
  p->status = st;
  J->running--;
  int bad = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (bad && on_failure != ON_FAIL_STOP && !p->signaled_by_us && !J->interrupted && !J->timed_out) {
    char what[128];
    if (p->stop_killed)
      snprintf(what, sizeof what, "was stopped by signal %d (%s) and stayed stopped %.0f s: killed it", p->stop_sig,
               strsignal(p->stop_sig), shoal__now_s() - p->stopped_at);
    else
      describe(st, what, sizeof what);
    J->nlost++;
    size_t ul = strlen(J->lost);
    if (ul < sizeof J->lost - 64) snprintf(J->lost + ul, sizeof J->lost - ul, "%srank %d %s", ul ? ", " : "", r, what);
    if (on_failure == ON_FAIL_RESTART && J->restarts < J->c->max_restarts) restart_rank(J, r, what);
    else
      fprintf(stderr, "shoal launch: rank %d %s; the other ranks go on (--on-failure %s)\n", r, what,
              on_failure == ON_FAIL_RESTART ? "restart, no restarts left" : "continue");
    return;
  }
  if (bad && J->failed < 0 && !p->signaled_by_us && !J->interrupted && !J->timed_out) first_failure(J, r, st);
}

static void reap(job_t *J) {
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG | WUNTRACED | WCONTINUED)) > 0)
    for (int r = 0; r < J->n; r++) {
      rank_proc_t *p = &J->rp[r];
      if (p->pid != pid || !p->running) continue;
      if (WIFSTOPPED(st) || WIFCONTINUED(st)) { /* a continue the launcher caused (stopping it) keeps the record */
        if (!p->signaled_by_us && !p->stop_killed) {
          p->stop_sig = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
          p->stopped_at = shoal__now_s();
        }
        continue;
      }
      rank_ended(J, r, st);
    }
}

/* --on-failure restart: once every rank never restarted has exited 0, the restarted ones still waiting to
 * join get JOINER_GRACE_S (or the grace if longer), then are stopped. */
static void stop_late_joiners(job_t *J) {
  int originals = 0, originals_ok = 0, waiting = 0;
  for (int r = 0; r < J->n; r++)
    if (!J->rp[r].restarted) {
      originals++;
      originals_ok += !J->rp[r].running && WIFEXITED(J->rp[r].status) && WEXITSTATUS(J->rp[r].status) == 0;
    } else {
      waiting += J->rp[r].running && !J->rp[r].signaled_by_us;
    }
  double now = shoal__now_s(), wait_s = J->c->grace > JOINER_GRACE_S ? J->c->grace : JOINER_GRACE_S;
  if (originals == 0 || originals_ok != originals || waiting == 0) return;
  if (J->joiners_stop_at == 0) {
    J->joiners_stop_at = now + wait_s;
  } else if (now >= J->joiners_stop_at) {
    for (int r = 0; r < J->n; r++)
      if (J->rp[r].restarted && J->rp[r].running && !J->rp[r].signaled_by_us) {
        fprintf(stderr, "shoal launch: the job finished (every rank never restarted exited 0); rank %d, "
                "restarted, was still running %.0f s later (waiting to join): stopped it\n", r, wait_s);
        signal_rank(&J->rp[r], SIGTERM);
      }
    J->kill_at = now + J->c->grace;
  }
}

/* --on-failure continue|restart: a rank stopped from outside (SIGSTOP) stays a running child that the
 * launcher would wait for until --timeout, while the others shrink past it at their deadline and finish.
 * Once it has been stopped longer than the ranks' deadline (SHOAL_TIMEOUT) plus the grace, or the grace
 * after every other rank has ended, it is lost to the job: killed, and counted as lost (restarted with
 * restart). */
static void kill_stopped_ranks(job_t *J) {
  int others = 0;
  double now = shoal__now_s();
  for (int r = 0; r < J->n; r++) others += J->rp[r].running && !J->rp[r].stop_sig;
  for (int r = 0; r < J->n; r++) {
    rank_proc_t *p = &J->rp[r];
    if (!p->running || !p->stop_sig || p->signaled_by_us || p->stop_killed) continue;
    double limit = others ? J->comm_timeout + J->c->grace : J->c->grace;
    if (now - p->stopped_at < limit) continue;
    fprintf(stderr, "shoal launch: rank %d was stopped by signal %d (%s) %.0f s ago and is still stopped (%s): "
            "killing it\n", r, p->stop_sig, strsignal(p->stop_sig), now - p->stopped_at,
            others ? "past the ranks' deadline, SHOAL_TIMEOUT, and the grace" : "every other rank has ended");
    p->stop_killed = 1;
    kill(-p->pid, SIGKILL);
  }
}

/* A signal to forward, the --timeout, late joiners, the SIGKILL after the grace. */
static void watch(job_t *J) {
  if (got_signal && !J->interrupted) {
    J->interrupted = got_signal;
    signal_all(J->rp, J->n, J->interrupted == SIGHUP ? SIGTERM : J->interrupted, NULL);
    J->kill_at = shoal__now_s() + J->c->grace;
  }
  if (J->c->timeout > 0 && !J->timed_out && J->failed < 0 && !J->interrupted &&
      shoal__now_s() - J->t_start > J->c->timeout) {
    J->timed_out = 1;
    signal_all(J->rp, J->n, SIGTERM, NULL);
    J->kill_at = shoal__now_s() + J->c->grace;
  }
  if (on_failure == ON_FAIL_RESTART && J->failed < 0 && !J->interrupted && !J->timed_out) stop_late_joiners(J);
  if (on_failure != ON_FAIL_STOP && J->failed < 0 && !J->interrupted && !J->timed_out) kill_stopped_ranks(J);
  if (J->term_at > 0 && (shoal__now_s() >= J->term_at || running_cause(J, J->failed) < 0)) {
    J->term_at = 0;
    signal_all(J->rp, J->n, SIGTERM, &J->stopped);
    J->kill_at = shoal__now_s() + J->c->grace;
  }
  if (J->kill_at > 0 && shoal__now_s() >= J->kill_at && J->running > 0) {
    signal_all(J->rp, J->n, SIGKILL, NULL);
    J->kill_at = 0;
  }
}

/* Forward what the ranks wrote, for up to 100 ms. 1 once every rank has ended and its output is read. */
static int pump(job_t *J) {
  read_notes(J);
  int np = 0;
  J->pf[np++] = (struct pollfd){sig_pipe[0], POLLIN, 0};
  for (int r = 0; r < J->n; r++)
    for (int k = 0; k < 2; k++)
      if (J->rp[r].s[k].fd >= 0) {
        J->pf_rank[np] = r * 2 + k;
        J->pf[np++] = (struct pollfd){J->rp[r].s[k].fd, POLLIN, 0};
      }
  if (J->running == 0) {
    if (np == 1) return 1;
    /* pipes still open after every rank exited: an orphan of a rank holds them.
     * Kill what is left of the ranks' process groups, and bound the wait. */
    if (J->out_deadline == 0) {
      for (int r = 0; r < J->n; r++) kill(-J->rp[r].pid, SIGKILL);
      J->out_deadline = shoal__now_s() + 1.0;
    }
    if (shoal__now_s() > J->out_deadline) return 1;
  }
  int pr = poll(J->pf, (nfds_t)np, 100);
  if (pr < 0 && errno != EINTR) return 1;
  if (pr <= 0) return 0;
  if (J->pf[0].revents) {
    char b[64];
    while (read(sig_pipe[0], b, sizeof b) > 0) {
    }
  }
  for (int j = 1; j < np; j++)
    if (J->pf[j].revents) read_stream(&J->rp[J->pf_rank[j] / 2].s[J->pf_rank[j] % 2], J->pf_rank[j] / 2, J->prefix);
  return 0;
}

/* The job failed: blame the cause, not the first to exit: a rank killed by a signal the launcher did not
 * send (its peers notice within milliseconds and may be reaped before it), else a rank that was stopped
 * (its peers time out), else the first rank that failed. The exit status. */
static int report_failure(job_t *J) {
  rank_proc_t *rp = J->rp;
  int blame = J->failed, stop_blame = -1, fail_status = J->fail_status;
  char what[128];
  for (int r = 0; r < J->n; r++) {
    if (killed_from_outside(&rp[r]) && (!killed_from_outside(&rp[blame]) || rp[r].order < rp[blame].order)) blame = r;
    if (rp[r].stop_sig && stop_blame < 0) stop_blame = r;
  }
  /* a rank that failed because another left first (its note): the blame moves to that one if it failed too */
  for (int hops = 0; hops < J->n && rp[blame].lost_to; hops++) {
    const rank_proc_t *q = &rp[rp[blame].lost_to - 1];
    int q_failed = q->order && !(WIFEXITED(q->status) && WEXITSTATUS(q->status) == 0) &&
                   (!q->signaled_by_us || killed_from_outside(q));
    if (!q_failed) break;
    blame = rp[blame].lost_to - 1;
  }
  int blame_sig = killed_from_outside(&rp[blame]);
  if (!blame_sig && stop_blame >= 0) {
    describe(fail_status, what, sizeof what);
    fprintf(stderr, "shoal launch: rank %d was stopped by signal %d (%s) and stopped answering; rank %d then %s; "
            "stopped the other %d rank%s\n", stop_blame, rp[stop_blame].stop_sig, strsignal(rp[stop_blame].stop_sig),
            J->failed, what, J->stopped, J->stopped == 1 ? "" : "s");
  } else {
    fail_status = rp[blame].status;
    describe(fail_status, what, sizeof what);
    char first[160] = "";
    if (blame != J->failed) {
      char fw[128];
      describe(rp[J->failed].status, fw, sizeof fw);
      snprintf(first, sizeof first, " (rank %d %s first, after losing it)", J->failed, fw);
    }
    if (J->stopped)
      fprintf(stderr, "shoal launch: rank %d %s%s; stopped the other %d rank%s\n", blame, what, first, J->stopped,
              J->stopped == 1 ? "" : "s");
    else
      fprintf(stderr, "shoal launch: rank %d %s%s\n", blame, what, first);
  }
  int rc = WIFSIGNALED(fail_status) ? 128 + WTERMSIG(fail_status) : WEXITSTATUS(fail_status);
  return rc ? rc : 1;
}

/* Ranks were lost and tolerated: the job succeeded if the ranks still there at the end all exited 0. */
static int report_losses(job_t *J) {
  int ok = 0, first_bad = -1, rc = 0;
  for (int r = 0; r < J->n; r++) {
    if (WIFEXITED(J->rp[r].status) && WEXITSTATUS(J->rp[r].status) == 0)
      ok++;
    else if (first_bad < 0 && WIFEXITED(J->rp[r].status))
      first_bad = r;
  }
  if (first_bad >= 0 || ok == 0) {
    rc = first_bad >= 0 ? WEXITSTATUS(J->rp[first_bad].status) : 1;
    fprintf(stderr, "shoal launch: %s after losing %s\n", first_bad >= 0 ? "a rank failed" : "every rank was lost", J->lost);
    if (first_bad >= 0) fprintf(stderr, "shoal launch: rank %d exited with status %d\n", first_bad, rc);
  } else {
    fprintf(stderr, "shoal launch: the job finished with %d rank%s exiting 0 after losing %d (%s; %d restart%s; "
            "--on-failure %s)\n", ok, ok == 1 ? "" : "s", J->nlost, J->lost, J->restarts, J->restarts == 1 ? "" : "s",
            on_failure == ON_FAIL_RESTART ? "restart" : "continue");
  }
  return rc;
}

/* Run the job to its end; the exit status. */
static int run_job(job_t *J) {
  for (;;) {
    reap(J);
    watch(J);
    if (pump(J)) break;
  }
  for (int r = 0; r < J->n; r++)
    for (int k = 0; k < 2; k++) {
      if (J->rp[r].s[k].fd >= 0) {
        drain_stream(&J->rp[r].s[k], r, J->prefix, 1);
        close(J->rp[r].s[k].fd);
      }
      free(J->rp[r].s[k].buf);
    }
  int rc = 0;
  if (J->failed >= 0) {
    rc = report_failure(J);
  } else if (J->interrupted) {
    fprintf(stderr, "shoal launch: %s received; forwarded to the %d ranks\n", strsignal(J->interrupted), J->n);
    rc = 128 + J->interrupted;
  } else if (J->timed_out) {
    fprintf(stderr, "shoal launch: --timeout %g s reached; stopped all %d ranks\n", J->c->timeout, J->n);
    rc = 124;
  } else if (J->nlost) {
    rc = report_losses(J);
  }
  return rc;
}

int shoal_cmd_launch(int argc, char **argv) {
  launch_cli_t c = {.grace = 3, .max_restarts = 3};
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&launch_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  const char *bind_mode;
  int shm_on = 1;
  if ((st = check_cli(&c, res.ncmd, &bind_mode, &shm_on)) != SHOAL_OPTS_GO) return st;
  on_failure = c.on_failure;
  job_t *J = calloc(1, sizeof *J);
  if (!J) return 1;
  *J = (job_t){.c = &c, .n = c.n, .prefix = !c.no_prefix, .prog = res.cmd, .store_fd = -1};
  if ((st = open_store(J, bind_mode, shm_on)) == SHOAL_OPTS_GO && (st = start_ranks(J)) == SHOAL_OPTS_GO)
    st = run_job(J);
  if (on_failure == ON_FAIL_RESTART && J->store_fd >= 0) close(J->store_fd);
  free(J->pf);
  free(J->pf_rank);
  free(J->rp);
  free(J);
  return st;
}
