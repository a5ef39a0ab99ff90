/* The emulated cluster of `shoal testbed` (docs/testbed.md), apart from the command line (tools/cmd_testbed.c)
 * so that `shoal launch --testbed`, `shoal submit` and `shoal sched serve` use it too.
 *
 * Hosts are network namespaces "<testbed>-h<i>" joined by veth links to per-rack bridges in one fabric
 * namespace "<testbed>-net"; racks are joined to a core bridge by shaped veth pairs (the oversubscribed
 * uplinks). Everything created is recorded, before it is created, in the append-only state file
 * /run/shoal-testbed/<testbed>/state, so that `down` (or the rollback of an interrupted `up`) removes
 * exactly that.
 *
 * The parts, and what may call what (no circle):
 *   testbed.c  the lifecycle: up (the network, then the parts of its table: Slurm; per-host daemons go
 *              there too), down (the parts in reverse, the CPU limits, the network), status
 *     -> net.c    namespaces, bridges, veth, tbf: the network's up and down, and rates changed later
 *     -> cpu.c    per-host CPU limits: cgroup v1 quota or a SIGSTOP/SIGCONT duty-cycle daemon
 *     -> slurm.c  Slurm on the hosts (munged, slurmctld in the fabric, a slurmd per host)
 *          -> accounting.c  with --accounting: MariaDB and slurmdbd in the fabric, the cluster's accounts
 *     -> flow.c   flow scheduling (the controller in the fabric, an agent per host)
 *          -> daemon.c  daemons started by a part, recorded with their start time, stopped by down
 *   plan.c     placing the ranks of `shoal launch --testbed`
 *   all of them -> host.c (entering a host: setns, UTS, private /etc/hosts, cgroup; the processes on it)
 *               -> state.c (the state file: reading, recording; names and indices) and run.c (system
 *                  commands with a deadline; the interruption of up) */
#ifndef SHOAL_TOOLS_TESTBED_H
#define SHOAL_TOOLS_TESTBED_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#define TB_MAX_HOSTS 64
#define TB_SLURM_MAX_GPUS 16 /* gres gpu devices per emulated host under --slurm */
#define TB_MAX_RACKS 16
#define TB_RUN_DIR "/run/shoal-testbed"
#define TB_CGROUP_CPU "/sys/fs/cgroup/cpu"
#define TB_IFNAME "eth0" /* every host's link, inside its namespace */
#define TB_DEFAULT_NAME "shoal"
#define TB_CTL_ADDR "10.90.255.254" /* the fabric's address: slurmctld's, slurmdbd's, the flow controller's */
#define TB_FLOW_PORT 29610 /* the flow controller's port at TB_CTL_ADDR */

typedef struct tb_host {
  char name[16]; /* "h3" */
  char ns[48];   /* "<testbed>-h3": namespace and host name */
  char addr[16]; /* 10.90.<rack>.<index in rack + 1> */
  int rack;
  double egress_bps, ingress_bps; /* 0: unshaped */
  double cpu;                     /* CPUs' worth of time for the host's processes; 0: unlimited */
  char cpu_method[8];             /* "cgroup" or "stop" when cpu > 0 */
} tb_host_t;

typedef struct tb {
  char name[32];
  char dir[96];  /* TB_RUN_DIR/<name> */
  char fabric[48];
  int nhosts, nracks, complete;
  double rate_bps;                 /* host link rate at creation */
  double up_bps[TB_MAX_RACKS];     /* rack -> core */
  double down_bps[TB_MAX_RACKS];   /* core -> rack */
  char cgroup[160];                /* per-testbed cgroup directory, "" if none */
  tb_host_t h[TB_MAX_HOSTS];
} tb_t;

/* What `up` builds. */
typedef struct tb_topo {
  int hosts, racks, cgroup;
  double rate, oversub, uplink; /* uplink < 0: from oversub */
} tb_topo_t;

/* Flow scheduling on the hosts (docs/flow.md): the controller's policy and slot, and whether the daemons
 * write their per-slot CSV logs. */
typedef struct tb_flow_opts {
  const char *policy; /* mlcc, greedy or equal */
  double slot_ms;
  int log;            /* controller.csv and agent-<host>.csv in the flow directory */
} tb_flow_opts_t;

typedef struct tb_up_opts {
  const char *name;
  tb_topo_t topo;
  int slurm, slurm_gpus, slurm_cpus; /* Slurm on the hosts: GPUs and CPUs per host (cpus 0: max(gpus, 2)) */
  int slurm_accounting;              /* and slurmdbd on a MariaDB of its own */
  int flow;                          /* a flow controller in the fabric and an agent per host */
  tb_flow_opts_t flow_opts;
} tb_up_opts_t;

/* ---- testbed.c: the lifecycle ---- */
/* Bring testbed o->name up; on an error or a signal (SIGINT, SIGTERM, SIGHUP) part-way, what exists is
 * taken down. Prints what it built. The exit status: 0, 1 (failed), 2 (refused), 128 + the signal. */
int shoal__tb_up(const tb_up_opts_t *o);
/* Take it down: its parts, then the network. Exit status 0, or 1 (named on stderr unless quiet). */
int shoal__tb_down(const char *name, int quiet);
/* Print its hosts, links, CPU limits and parts. Exit status 0, or 1. */
int shoal__tb_status(const char *name);

/* ---- state.c ---- */
/* Valid testbed name: [a-z][a-z0-9]{0,11}. */
int shoal__tb_name_ok(const char *name);
/* Write the message into err (cap bytes) and return -1. */
int shoal__tb_fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Load the state of testbed `name`; 0, or -1 with a message in err. */
int shoal__tb_load(const char *name, tb_t *tb, char *err, size_t cap);
/* A host or rack number as written after its letter: 1 to 3 decimal digits, else -1. */
int shoal__tb_index(const char *s);
/* Host index from "h3", "3" or "<testbed>-h3"; -1 if none. */
int shoal__tb_host_index(const tb_t *tb, const char *spec);
/* Append a record to <dir>/state (a change made after `up`); 0, or -1 with err set. */
int shoal__tb_record(const char *dir, char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- run.c ---- */
/* The signal (SIGINT, SIGTERM, SIGHUP) that interrupted `up`, 0 if none: set by the handler `up` installs
 * for its whole run, looked at between its steps and in its waits, which then stop so that `up` rolls back
 * what exists. */
extern volatile sig_atomic_t shoal__tb_interrupted;
/* -1 with "interrupted by SIG" in err when `up` was interrupted (so that it rolls back), else 0. */
int shoal__tb_check_interrupted(char *err, size_t cap);
/* Run a command given as space-separated words (none contains a space), with stdin/stdout on /dev/null and
 * stderr captured into the error; bounded by TB_CMD_DEADLINE_S. 0, or -1 with err set. */
#define TB_CMD_DEADLINE_S 20.0
int shoal__tb_run(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- host.c ---- */
/* Move the calling process onto host i: its cgroup (if any), its network namespace, a new UTS namespace
 * named after the host, a private mount namespace whose /etc/hosts lists the testbed's hosts; sets
 * SHOAL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to the host's link unless set (and SLURM_CONF under Slurm).
 * 0, or -1 with a message in err. */
int shoal__tb_enter(const tb_t *tb, int i, char *err, size_t cap);
/* Join the fabric namespace (where the bridges and Slurm's controller are). 0, or -1 with err. */
int shoal__tb_enter_fabric(const tb_t *tb, char *err, size_t cap);
/* Run fn(arg) inside host i's network namespace, then come back. */
int shoal__tb_in_netns(const tb_t *tb, int i, int (*fn)(void *), void *arg, char *err, size_t cap);
/* The processes (not this one) in network namespace /run/netns/<ns>, or in cgroup directory dir: at most
 * cap pids into out; their number. */
int shoal__tb_pids_in_netns(const char *ns, pid_t *out, int cap);
int shoal__tb_pids_in_cgroup(const char *dir, pid_t *out, int cap);

/* ---- net.c ---- */
/* The network of up (the state file's first records, `complete` last); 0, or -1 with err set (what exists
 * is then for shoal__tb_down to remove). Prints what it built. */
int shoal__tb_net_up(const char *name, const tb_topo_t *t, char *err, size_t cap);
/* Kill the processes left on the hosts, remove the namespaces, cgroups and the state. 0, or 1. */
int shoal__tb_net_down(const char *name, int quiet);
/* Shape host i's egress and ingress (< 0: leave it), rack r's uplink up (rack -> core) and down; recorded. */
int shoal__tb_set_host_rate(tb_t *tb, int i, double egress, double ingress, char *err, size_t cap);
int shoal__tb_set_uplink(tb_t *tb, int r, double up, double down, char *err, size_t cap);
/* netem delay on host i's link; -1 with err when the kernel lacks netem. */
int shoal__tb_set_delay(const tb_t *tb, int i, double ms, char *err, size_t cap);
/* "1gbit", "200mbit", "unshaped" */
const char *shoal__tb_rate_str(double bps, char *b, size_t cap);

/* ---- cpu.c ---- */
/* Host i's processes get at most `cpus` CPUs of time (0: no limit) by method "cgroup" (CFS quota) or
 * "stop" (a duty-cycle daemon, below 1 CPU only); recorded. 0, or -1 with err. */
int shoal__tb_set_cpu(const tb_t *tb, int i, double cpus, const char *method, char *err, size_t cap);
/* Stop the duty-cycle daemons of host i (all hosts if i < 0), their hosts' processes continued. */
void shoal__tb_cpu_down(const char *dir, int i);

/* ---- daemon.c: daemons a part starts, recorded in a pids file ("<what> <pid> <start time>") ---- */
/* Record pid as `what` in pids_file (replacing an earlier record of `what`); 0, or -1. */
int shoal__tb_daemon_record(const char *pids_file, const char *what, pid_t pid);
/* Run program `path` with argv on host i (shoal__tb_enter) in a session of its own, its output appended to
 * log, the variables of env set ("K=V", NULL-terminated; may be NULL), and record it as `what`. The pid, or
 * -1 with err set. A part that runs a daemon on every host (Slurm's slurmd; a per-host agent) starts each
 * with this from its up, and stops them all from its down with shoal__tb_daemons_stop. */
pid_t shoal__tb_daemon_on_host(const tb_t *tb, int i, const char *pids_file, const char *what, const char *log,
                               const char *path, char *const argv[], char *const env[], char *err, size_t cap);
/* The same in the fabric namespace (where slurmctld and the accounting run), under host name `hostname` in a UTS
 * namespace of its own if not NULL. */
pid_t shoal__tb_daemon_in_fabric(const tb_t *tb, const char *pids_file, const char *what, const char *hostname,
                                 const char *log, const char *path, char *const argv[], char *const env[], char *err,
                                 size_t cap);
/* Stop the daemons recorded in pids_file, last first (SIGTERM, then SIGKILL after grace_s; a pid whose start
 * time changed is someone else's and left alone); the number stopped. */
int shoal__tb_daemons_stop(const char *pids_file, double grace_s);
/* The pid of the daemon recorded as `what` if it still runs, else 0. */
pid_t shoal__tb_daemon_running(const char *pids_file, const char *what);
/* Stop that one (SIGTERM, SIGKILL after grace_s); 1 if it ran, 0 if not. */
int shoal__tb_daemon_stop(const char *pids_file, const char *what, double grace_s);
/* How many are recorded and how many of them still run. */
void shoal__tb_daemons_count(const char *pids_file, int *recorded, int *alive);
/* A part's down: stop the daemons recorded in <dir>/pids (shoal__tb_daemons_stop), then remove dir. 0, or 1
 * after a message; *stopped: how many were running. */
int shoal__tb_part_remove(const char *dir, double grace_s, int *stopped);
/* The output of a daemon's child: stdin on /dev/null, stdout and stderr appended to log. */
void shoal__tb_daemon_redirect(const char *log);

/* ---- slurm.c: Slurm on a testbed (docs/live.md) ---- */
void shoal__tb_slurm_dir(const char *name, char *buf, size_t cap);
int shoal__tb_slurm_up(const char *name, int gpus, int cpus, int accounting, char *err, size_t cap);
int shoal__tb_slurm_down(const char *name, int quiet);
void shoal__tb_slurm_status(const char *name);
/* Stop (SIGTERM, SIGKILL after 5 s) and/or start again one of the testbed's Slurm daemons: munged, mariadbd,
 * slurmdbd, slurmctld or slurmd-h<i> (`shoal testbed daemon`), as `up` started it. Prints what it did. 0, or -1
 * with err set. */
int shoal__tb_slurm_daemon(const char *name, const char *what, int stop, int start, char *err, size_t cap);
/* Make Slurm's commands work from this process and its children: the fabric namespace and SLURM_CONF. */
int shoal__tb_slurm_enter(const char *name, char *err, size_t cap);

/* ---- accounting.c: slurmdbd and its MariaDB for up --slurm --accounting (called by slurm.c) ---- */
/* slurm.conf's accounting and fair-share lines */
void shoal__tb_acct_slurm_conf(const char *dir, char *b, size_t cap);
/* The database, slurmdbd (recorded in pids), the cluster and its accounts; before slurmctld starts. 0, or -1. */
int shoal__tb_acct_up(const tb_t *tb, const char *dir, const char *pids, char *err, size_t cap);
/* Start one of its daemons again ("mariadbd" or "slurmdbd"); 0, or -1 with err. */
int shoal__tb_acct_start(const tb_t *tb, const char *dir, const char *pids, const char *what, char *err, size_t cap);
/* ---- flow.c: flow scheduling on a testbed (docs/flow.md) ---- */
void shoal__tb_flow_dir(const char *name, char *buf, size_t cap);
int shoal__tb_flow_up(const char *name, const tb_flow_opts_t *o, char *err, size_t cap);
int shoal__tb_flow_down(const char *name, int quiet);
void shoal__tb_flow_status(const char *name);

/* ---- plan.c: placement for `shoal launch --testbed` ---- */
typedef struct tb_plan {
  tb_t tb;
  int n;
  int host_of[4096], local_rank[4096], local_size[TB_MAX_HOSTS];
} tb_plan_t;
/* hosts: comma list of hosts to use ("" or NULL: all, in order); per_host 0: ceil(n / hosts); place "block"
 * or "rr" (NULL: block). 0, or -1 with err. */
int shoal__tb_plan(const char *name, const char *hosts, int n, int per_host, const char *place, tb_plan_t *p,
                   char *err, size_t cap);

#endif
