/* The emulated cluster of `shoal testbed` (docs/testbed.md): hosts are
 * network namespaces named "<testbed>-h<i>" joined by veth links to per-rack
 * bridges in one fabric namespace "<testbed>-net"; racks are joined to a
 * core bridge by shaped veth pairs (the oversubscribed uplinks). Everything
 * created is recorded, before it is created, in the append-only state file
 * /run/shoal-testbed/<testbed>/state, so that `down` (or the rollback of an
 * interrupted `up`) removes exactly that. Shared by cmd_testbed.c (the
 * subcommand) and cmd_launch.c (--testbed placement). */
#ifndef SHOAL_TOOLS_TESTBED_H
#define SHOAL_TOOLS_TESTBED_H

#include <signal.h>
#include <stddef.h>

#define TB_MAX_HOSTS 64
#define TB_SLURM_MAX_GPUS 16 /* gres gpu devices per emulated host under --slurm */
#define TB_MAX_RACKS 16
#define TB_RUN_DIR "/run/shoal-testbed"
#define TB_CGROUP_CPU "/sys/fs/cgroup/cpu"
#define TB_IFNAME "eth0" /* every host's link, inside its namespace */

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

/* The signal (SIGINT, SIGTERM, SIGHUP) that interrupted `up`, 0 if none: set by
 * the handler `up` installs for its whole run, looked at between its steps
 * and in its waits (the network part and the Slurm part alike), which then
 * stop so that `up` rolls back what exists. */
extern volatile sig_atomic_t shoal__tb_interrupted;
/* -1 with "interrupted by SIG" in err when `up` was interrupted (so that it rolls back), else 0. */
int shoal__tb_check_interrupted(char *err, size_t cap);

/* Valid testbed name: [a-z][a-z0-9]{0,11}. */
/* Write the message into err (cap bytes) and return -1. */
int shoal__tb_fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Run a command given as space-separated words (none contains a space), with
 * stdin/stdout on /dev/null and stderr captured into the error; bounded by
 * TB_CMD_DEADLINE_S. 0, or -1 with err set. */
#define TB_CMD_DEADLINE_S 20.0
int shoal__tb_run(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int shoal__tb_name_ok(const char *name);
/* Load the state of testbed `name`; 0, or -1 with a message in err. */
int shoal__tb_load(const char *name, tb_t *tb, char *err, size_t cap);
/* A host or rack number as written after its letter: 1 to 3 decimal digits, else -1. */
int shoal__tb_index(const char *s);
/* Host index from "h3", "3" or "<testbed>-h3"; -1 if none. */
int shoal__tb_host_index(const tb_t *tb, const char *spec);
/* Move the calling process onto host i: its cgroup (if any), its network
 * namespace, a new UTS namespace named after the host, a private mount
 * namespace whose /etc/hosts lists the testbed's hosts; sets
 * SHOAL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to the host's link unless set.
 * 0, or -1 with a message in err. */
int shoal__tb_enter(const tb_t *tb, int i, char *err, size_t cap);
/* Run fn(arg) inside host i's network namespace, then come back. */
int shoal__tb_in_netns(const tb_t *tb, int i, int (*fn)(void *), void *arg, char *err, size_t cap);

/* Placement for `shoal launch --testbed`. */
typedef struct tb_plan {
  tb_t tb;
  int n;
  int host_of[4096], local_rank[4096], local_size[TB_MAX_HOSTS];
} tb_plan_t;
/* hosts: comma list of hosts to use ("" or NULL: all, in order); per_host
 * 0: ceil(n / hosts); place "block" or "rr". 0, or -1 with err. */
int shoal__tb_plan(const char *name, const char *hosts, int n, int per_host, const char *place, tb_plan_t *p,
                   char *err, size_t cap);

/* Slurm on a testbed (cmd_testbed_slurm.c, docs/live.md). */
void shoal__tb_slurm_dir(const char *name, char *buf, size_t cap);
int shoal__tb_slurm_up(const char *name, int gpus, int cpus, char *err, size_t cap);
int shoal__tb_slurm_down(const char *name, int quiet);
void shoal__tb_slurm_status(const char *name);
int shoal__tb_slurm_enter(const char *name, char *err, size_t cap);

#endif
