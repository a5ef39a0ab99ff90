/* A testbed's lifecycle: up builds the network, then the parts the options ask for; down removes the parts
 * (in the reverse order), the CPU limits and the network; an error or a signal part-way through up takes
 * down what exists (testbed.h says which file does what). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testbed.h"

/* What up adds on the network, in this order; down removes every part, in the reverse order, before the
 * network, whether up asked for it or not (a part not there is nothing to remove). A part that runs
 * daemons on the hosts starts them with shoal__tb_daemon_on_host in its up and stops them with
 * shoal__tb_daemons_stop in its down (slurm.c does both): a new per-host service is one more line here. */
typedef struct tb_part {
  const char *flag;                                             /* "--slurm": named in the rollback's message */
  int (*wanted)(const tb_up_opts_t *o);
  int (*up)(const tb_up_opts_t *o, char *err, size_t cap);      /* 0, or -1 with err set */
  int (*down)(const char *name, int quiet);                     /* 0, or 1 after a message */
  void (*status)(const char *name);                             /* a line of shoal testbed status, if it is up */
} tb_part_t;

static int slurm_wanted(const tb_up_opts_t *o) { return o->slurm; }
static int slurm_up(const tb_up_opts_t *o, char *err, size_t cap) {
  return shoal__tb_slurm_up(o->name, o->slurm_gpus, o->slurm_cpus, o->slurm_accounting, err, cap);
}

static int flow_wanted(const tb_up_opts_t *o) { return o->flow; }
static int flow_up(const tb_up_opts_t *o, char *err, size_t cap) { return shoal__tb_flow_up(o->name, &o->flow_opts, err, cap); }

static const tb_part_t parts[] = {
    {"--slurm", slurm_wanted, slurm_up, shoal__tb_slurm_down, shoal__tb_slurm_status},
    {"--flow", flow_wanted, flow_up, shoal__tb_flow_down, shoal__tb_flow_status},
};
#define NPARTS (sizeof parts / sizeof parts[0])

static void on_sig(int s) { shoal__tb_interrupted = s; }

int shoal__tb_down(const char *name, int quiet) {
  int rc = 0;
  for (size_t k = NPARTS; k-- > 0;) rc |= parts[k].down(name, quiet); /* their daemons first, by their recorded pids */
  char dir[96];
  snprintf(dir, sizeof dir, "%s/%s", TB_RUN_DIR, name);
  if (access(dir, F_OK) == 0) shoal__tb_cpu_down(dir, -1); /* SIGCONT the hosts' processes on their way out */
  return shoal__tb_net_down(name, quiet) | rc;
}

/* up failed or was interrupted part-way (`what`: "up", "up --slurm"): what exists is taken down; the exit
 * status is 128 + the signal that interrupted it, else 1 */
static int roll_back(const char *what, const char *name, const char *err) {
  fprintf(stderr, "shoal testbed: %s %s: %s; rolling back\n", what, name, err);
  shoal__tb_down(name, 1);
  return shoal__tb_interrupted ? 128 + shoal__tb_interrupted : 1;
}

static int up_steps(const tb_up_opts_t *o) {
  const tb_topo_t *t = &o->topo;
  if (geteuid() != 0) return fprintf(stderr, "shoal testbed: up needs root (network namespaces, tc)\n"), 1;
  if (t->racks > t->hosts) return fprintf(stderr, "shoal testbed: %d racks for %d hosts\n", t->racks, t->hosts), 2;
  char err[768];
  int rc = shoal__tb_net_up(o->name, t, err, sizeof err);
  if (rc > 0) return rc;
  if (rc < 0) return roll_back("up", o->name, err);
  for (size_t k = 0; k < NPARTS; k++)
    if (parts[k].wanted(o) && parts[k].up(o, err, sizeof err)) {
      char what[64];
      snprintf(what, sizeof what, "up %s", parts[k].flag);
      return roll_back(what, o->name, err);
    }
  return 0;
}

int shoal__tb_up(const tb_up_opts_t *o) {
  /* a signal part-way through any step rolls back what exists */
  struct sigaction sa, old[3];
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sig;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old[0]);
  sigaction(SIGTERM, &sa, &old[1]);
  sigaction(SIGHUP, &sa, &old[2]);
  int rc = up_steps(o);
  for (int k = 0; k < 3; k++) sigaction(k == 0 ? SIGINT : k == 1 ? SIGTERM : SIGHUP, &old[k], NULL);
  return rc;
}

int shoal__tb_status(const char *name) {
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
         tb->nhosts, tb->nracks, tb->nracks > 1 ? "s" : "", shoal__tb_rate_str(tb->rate_bps, b1, sizeof b1), tb->fabric, tb->dir);
  printf("%-5s %-16s %-12s %-4s %-10s %-10s %-12s %s\n", "host", "namespace", "address", "rack", "egress", "ingress", "cpu",
         "procs");
  pid_t *pids = calloc(4096, sizeof *pids);
  for (int i = 0; i < tb->nhosts; i++) {
    const tb_host_t *h = &tb->h[i];
    char cpu[32];
    if (h->cpu > 0) snprintf(cpu, sizeof cpu, "%g(%s)", h->cpu, h->cpu_method);
    else snprintf(cpu, sizeof cpu, "-");
    printf("%-5s %-16s %-12s %-4d %-10s %-10s %-12s %d\n", h->name, h->ns, h->addr, h->rack,
           shoal__tb_rate_str(h->egress_bps, b1, sizeof b1), shoal__tb_rate_str(h->ingress_bps, b2, sizeof b2), cpu,
           shoal__tb_pids_in_netns(h->ns, pids, 4096));
  }
  free(pids);
  for (int r = 0; tb->nracks > 1 && r < tb->nracks; r++)
    printf("rack r%d uplink: rack->core %s, core->rack %s\n", r, shoal__tb_rate_str(tb->up_bps[r], b1, sizeof b1),
           shoal__tb_rate_str(tb->down_bps[r], b2, sizeof b2));
  if (tb->cgroup[0]) printf("cgroup: %s/h<i>\n", tb->cgroup);
  for (size_t k = 0; k < NPARTS; k++) parts[k].status(name);
  free(tb);
  return 0;
}
