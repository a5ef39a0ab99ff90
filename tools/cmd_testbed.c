/* shoal testbed up|down|status|set|exec: an emulated multi-host cluster on one Linux machine (network
 * namespaces, veth, bridges, tbf; docs/testbed.md). The command line only: the testbed itself is
 * tools/testbed/ (testbed.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "options.h"
#include "testbed/testbed.h"

/* --name: shoal__tb_name_ok; 0, or 2 after the message */
static int check_name(const char *name) {
  if (shoal__tb_name_ok(name)) return 0;
  fprintf(stderr, "shoal testbed: --name '%s': a lower-case letter then up to 11 letters or digits\n", name);
  return 2;
}

/* ---- up ---- */

typedef struct up_cli {
  tb_up_opts_t o;
} up_cli_t;

/* --topo FILE: lines 'hosts 8', 'racks 2', 'rate 1gbit', 'oversub 4', 'uplink 500mbit'; # comments */
static int read_topo(const char *n, const char *path, void *field) {
  tb_topo_t *t = field;
  FILE *f;
  if (shoal__fopen_input(path, "--topo", &f)) return -1;
  char *line = NULL, msg[256];
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
    double d;
    if (m != 2) rc = -1;
    else if (!strcmp(k, "hosts")) rc = shoal_opts_integer("hosts", v, 1, TB_MAX_HOSTS, &d), t->hosts = rc ? 0 : (int)d;
    else if (!strcmp(k, "racks")) rc = shoal_opts_integer("racks", v, 1, TB_MAX_RACKS, &d), t->racks = rc ? 0 : (int)d;
    else if (!strcmp(k, "rate")) rc = shoal_opts_rate("rate", v, &t->rate);
    else if (!strcmp(k, "uplink")) rc = shoal_opts_rate("uplink", v, &t->uplink);
    else if (!strcmp(k, "oversub")) /* as --oversub: 1..1000 (inf would leave the uplinks unshaped) */
      rc = shoal__parse_double("oversub", v, 1, 1000, &t->oversub) ? -1 : 0, t->uplink = -1;
    else rc = -1;
    if (rc)
      snprintf(msg, sizeof msg, "--topo %s:%d: expected 'hosts N' (1..%d), 'racks R' (1..%d), 'rate RATE', 'oversub X' "
               "(1..1000) or 'uplink RATE'", path, ln, TB_MAX_HOSTS, TB_MAX_RACKS);
  }
  free(line);
  fclose(f);
  if (rc) return shoal__seterr(SHOAL_ERR_CONFIG, "%s", msg);
  if (!settings) return shoal__seterr(SHOAL_ERR_CONFIG, "--topo %s: no settings in it (e.g. 'hosts 4')", path);
  return 0;
}

/* --oversub X: the uplinks at hosts-per-rack x rate / X (an --uplink or a topology's before it no longer counts) */
static int parse_oversub(const char *n, const char *v, void *field) {
  tb_topo_t *t = field;
  if (shoal__parse_double(n, v, 1, 1000, &t->oversub)) return -1;
  t->uplink = -1;
  return 0;
}

enum { M_SLURM, M_FLOW };
static int on_slurm(const void *c) { return ((const up_cli_t *)c)->o.slurm; }
static int on_flow(const void *c) { return ((const up_cli_t *)c)->o.flow; }
static const shoal_opt_mode_t up_modes[] = {[M_SLURM] = {on_slurm, "applies with --slurm only", NULL},
                                            [M_FLOW] = {on_flow, "applies with --flow only", NULL}};

#define SHOAL_OPTS_STRUCT up_cli_t
static const shoal_opt_t up_opts[] = {
    OPT_STRING("--name", "NAME", o.name, "the testbed: a lower-case letter then up to 11 letters or digits; its\n"
               "namespaces are NAME-h<i> and NAME-net", .expect = "a testbed name"),
    OPT_INT("--hosts", "H", o.topo.hosts, 1, TB_MAX_HOSTS, "hosts (network namespaces)"),
    OPT_INT("--racks", "R", o.topo.racks, 1, TB_MAX_RACKS, "racks: hosts are split into racks in blocks"),
    OPT_RATE("--rate", "RATE", o.topo.rate, "every host's link, both directions (1gbit, 200mbit, 500M; 0: unshaped)"),
    OPT_CALL("--oversub", "X", o.topo, tb_topo_t, parse_oversub, "each rack's uplink at hosts-per-rack x RATE / X (4 = 4:1)",
             .def = "1", .expect = "a ratio in [1, 1000]"),
    OPT_RATE("--uplink", "RATE", o.topo.uplink, "each rack's uplink, instead of --oversub", .def = ""),
    OPT_CALL("--topo", "FILE", o.topo, tb_topo_t, read_topo,
             "lines 'hosts 8', 'racks 2', 'rate 1gbit', 'oversub 4', 'uplink 500mbit' (flags after it win)",
             .expect = "a file"),
    OPT_FLAG_SET("--no-cgroup", o.topo.cgroup, 0, "no per-host cgroup (then --cpu of set stops and continues processes)"),
    OPT_GROUP("Slurm on the hosts (docs/live.md):"),
    OPT_FLAG("--slurm", o.slurm, "munged, slurmctld in the fabric, a slurmd per host, racks as its topology"),
    OPT_INT("--gpus", "G", o.slurm_gpus, 1, TB_SLURM_MAX_GPUS, "emulated GPUs per host", .when = 1u << M_SLURM),
    OPT_INT("--cpus", "C", o.slurm_cpus, 1, 64, "CPUs per host", .def = "max(G, 2)", .when = 1u << M_SLURM),
    OPT_FLAG("--accounting", o.slurm_accounting, "slurmdbd on a MariaDB of its own, fair share, accounts research and\n"
             "other (users root and nobody)", .when = 1u << M_SLURM),
    OPT_GROUP("Flow scheduling between jobs (docs/flow.md):"),
    OPT_FLAG("--flow", o.flow, "the flow controller in the fabric (" TB_CTL_ADDR "), an agent per host"),
    OPT_CHOICE("--flow-policy", "mlcc|greedy|equal", o.flow_opts.policy, "mlcc|greedy|equal", "the controller's policy",
               .when = 1u << M_FLOW),
    OPT_DOUBLE("--flow-slot-ms", "MS", o.flow_opts.slot_ms, 1, 10000, "the slot length", .when = 1u << M_FLOW),
    OPT_FLAG("--flow-log", o.flow_opts.log, "the controller and the agents write a CSV line per link and flow each slot\n"
             "(controller.csv, agent-<host>.csv beside their logs)", .when = 1u << M_FLOW),
    OPT_END,
};

/* --uplink and --oversub both: which one? */
static int up_resolve(void *cli, const shoal_opts_res_t *r) {
  if (shoal_opts_given(r, "--uplink") && shoal_opts_given(r, "--oversub")) {
    fprintf(stderr, "shoal testbed up: --uplink and --oversub both set the uplink: give one\n");
    return 2;
  }
  return 0;
}

static const shoal_opts_spec_t up_spec = {
    .name = "shoal testbed up",
    .usage = "usage: shoal testbed up [--name NAME] [--hosts H] [--racks R] [--rate RATE] [--oversub X | --uplink RATE]\n"
             "                        [--topo FILE] [--no-cgroup] [--slurm [--gpus G] [--cpus C] [--accounting]]\n"
             "                        [--flow [--flow-policy mlcc|greedy|equal] [--flow-slot-ms MS] [--flow-log]]\n"
             "An emulated cluster on this machine: each host is a network namespace with its own host name and\n"
             "address (10.90.<rack>.<i>), linked to its rack's bridge; racks meet at a core bridge through an\n"
             "uplink. Rates are tbf-shaped on egress and ingress. Needs root.\n",
    .opts = up_opts,
    .modes = up_modes,
    .resolve = up_resolve,
};

static int cmd_up(int argc, char **argv) {
  up_cli_t c = {.o = {.name = TB_DEFAULT_NAME, .slurm_gpus = 1, .flow_opts = {.policy = "mlcc", .slot_ms = 100},
                      .topo = {.hosts = 2, .racks = 1, .cgroup = 1, .rate = 1e9, .oversub = 1, .uplink = -1}}};
  int st = shoal_opts_parse(&up_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  if (check_name(c.o.name)) return 2;
  return shoal__tb_up(&c.o);
}

/* ---- down, status ---- */

typedef struct name_cli {
  const char *name;
} name_cli_t;

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT name_cli_t
static const shoal_opt_t name_opts[] = {
    OPT_STRING("--name", "NAME", name, "the testbed", .expect = "a testbed name"),
    OPT_END,
};
static const shoal_opts_spec_t down_spec = {
    .name = "shoal testbed down",
    .usage = "usage: shoal testbed down [--name NAME]\n"
             "Remove the testbed: its flow daemons and segments, its Slurm, the processes left on its hosts, its namespaces and cgroups.\n",
    .opts = name_opts,
};
static const shoal_opts_spec_t status_spec = {
    .name = "shoal testbed status",
    .usage = "usage: shoal testbed status [--name NAME]\n"
             "The testbed's hosts, addresses, racks, link rates, CPU limits, processes, uplinks and Slurm.\n",
    .opts = name_opts,
};

static int cmd_down(int argc, char **argv) {
  name_cli_t c = {TB_DEFAULT_NAME};
  int st = shoal_opts_parse(&down_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  return check_name(c.name) ? 2 : shoal__tb_down(c.name, 0);
}

static int cmd_status(int argc, char **argv) {
  name_cli_t c = {TB_DEFAULT_NAME};
  int st = shoal_opts_parse(&status_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  return check_name(c.name) ? 2 : shoal__tb_status(c.name);
}

/* ---- set ---- */

typedef struct set_cli {
  const char *name, *method;
  double rate[2]; /* egress, ingress; < 0: unchanged */
  double cpu, delay;
} set_cli_t;

/* --rate RATE: both directions */
static int parse_both(const char *n, const char *v, void *field) {
  double *r = field, x;
  if (shoal_opts_rate(n, v, &x)) return -1;
  r[0] = r[1] = x;
  return 0;
}

enum { M_CPU };
static int on_cpu(const void *c) { return ((const set_cli_t *)c)->cpu >= 0; }
static const shoal_opt_mode_t set_modes[] = {[M_CPU] = {on_cpu, "applies with --cpu only", NULL}};

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT set_cli_t
static const shoal_opt_t set_opts[] = {
    OPT_STRING("--name", "NAME", name, "the testbed", .expect = "a testbed name"),
    OPT_CALL("--rate", "RATE", rate[0], double, parse_both, "a host's link (both directions), or a rack's uplink",
             .expect = "a rate like 1gbit, 200mbit, 500M or 0"),
    OPT_RATE("--egress", "RATE", rate[0], "out of the host (a rack: rack -> core)", .def = ""),
    OPT_RATE("--ingress", "RATE", rate[1], "into the host (a rack: core -> rack)", .def = ""),
    OPT_DOUBLE("--cpu", "F", cpu, 0, 1024, "the host's processes get at most F CPUs of time (0: no limit)", .def = ""),
    OPT_CHOICE("--cpu-method", "auto|cgroup|stop", method, "auto|cgroup|stop",
               "cgroup: the host's cgroup v1 CFS quota; stop: a SIGSTOP/SIGCONT duty cycle of F per 100 ms\n"
               "(below 1 CPU); auto: cgroup when the testbed has cgroups", .when = 1u << M_CPU),
    OPT_DOUBLE("--delay", "MS", delay, 0, 10000, "netem delay on the host's link (absent on some kernels: then use\n"
               "SHOAL_EMU_DELAY_US for shoal's ranks)", .def = ""),
    OPT_END,
};

static const shoal_opts_spec_t set_spec = {
    .name = "shoal testbed set",
    .usage = "usage: shoal testbed set [--name NAME] HOST [--rate RATE] [--egress RATE] [--ingress RATE]\n"
             "                         [--cpu F [--cpu-method auto|cgroup|stop]] [--delay MS]\n"
             "       shoal testbed set [--name NAME] rK --rate RATE   (rack K's uplink)\n"
             "Change a host's link, CPU or delay, or a rack's uplink, while jobs run. HOST: h3, 3 or NAME-h3.\n",
    .opts = set_opts,
    .modes = set_modes,
    .args = SHOAL_ARGS_WORDS,
    .max_words = 1,
};

/* What set may do to host `host` (or rack `rack`) of tb, checked before anything is applied: a refused
 * command changes nothing. 0, or 2 after the message. */
static int set_check(const set_cli_t *c, const tb_t *tb, int rack, const char **method) {
  if (c->rate[0] < 0 && c->rate[1] < 0 && c->cpu < 0 && c->delay < 0)
    return fprintf(stderr, "shoal testbed set: nothing to set (--rate, --egress, --ingress, --cpu, --delay)\n"), 2;
  if (rack >= 0) {
    if (tb->nracks < 2)
      return fprintf(stderr, "shoal testbed set: rack r%d: this testbed has one rack, so no uplink to set\n", rack), 2;
    if (c->cpu >= 0 || c->delay >= 0)
      return fprintf(stderr, "shoal testbed set: rack r%d: a rack takes only --rate/--egress/--ingress (its uplink); --cpu "
                     "and --delay are per host\n", rack), 2;
    return 0;
  }
  if (c->cpu < 0) return 0;
  if (!strcmp(*method, "auto")) *method = tb->cgroup[0] ? "cgroup" : "stop";
  if (!strcmp(*method, "cgroup") && !tb->cgroup[0])
    return fprintf(stderr, "shoal testbed set: --cpu-method cgroup: testbed '%s' has no cgroup (cgroup v1 cpu controller "
                   "missing at up, or --no-cgroup); use --cpu-method stop\n", tb->name), 2;
  if (c->cpu > 0 && c->cpu < 0.01) return fprintf(stderr, "shoal testbed set: --cpu %g: at least 0.01\n", c->cpu), 2;
  return 0;
}

/* Apply to host `host` or rack `rack`; the exit status. */
static int set_apply(const set_cli_t *c, tb_t *tb, int host, int rack, const char *method) {
  char err[768];
  int rc = 0;
  if (rack >= 0) return shoal__tb_set_uplink(tb, rack, c->rate[0], c->rate[1], err, sizeof err) ? fprintf(stderr,
                          "shoal testbed set: %s\n", err), 1 : 0;
  if (shoal__tb_set_host_rate(tb, host, c->rate[0], c->rate[1], err, sizeof err)) goto failed;
  if (c->delay >= 0 && shoal__tb_set_delay(tb, host, c->delay, err, sizeof err)) {
    fprintf(stderr, "shoal testbed set: --delay needs the netem qdisc, which this kernel lacks (%s).\n"
                    "For shoal's ranks use the user-space delay instead: SHOAL_EMU_DELAY_US=%g\n", err, c->delay * 1000);
    rc = 1;
  }
  if (c->cpu >= 0 && shoal__tb_set_cpu(tb, host, c->cpu, method, err, sizeof err)) goto failed;
  return rc;
failed:
  fprintf(stderr, "shoal testbed set: %s\n", err);
  return 1;
}

static int cmd_set(int argc, char **argv) {
  set_cli_t c = {.name = TB_DEFAULT_NAME, .method = "auto", .rate = {-1, -1}, .cpu = -1, .delay = -1};
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&set_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  if (check_name(c.name)) return 2;
  if (res.nwords < 1) return fprintf(stderr, "shoal testbed set: which host? (shoal testbed set h1 --rate 200mbit)\n"), 2;
  tb_t *tb = calloc(1, sizeof *tb);
  char err[768];
  if (!tb || shoal__tb_load(c.name, tb, err, sizeof err)) {
    fprintf(stderr, "shoal testbed: %s\n", tb ? err : "out of memory");
    free(tb);
    return 1;
  }
  const char *target = res.words[0], *method = c.method;
  int host = shoal__tb_host_index(tb, target), rack = -1;
  if (host < 0 && target[0] == 'r') {
    int v = shoal__tb_index(!strncmp(target, "rack", 4) ? target + 4 : target + 1);
    if (v >= 0 && v < tb->nracks) rack = v;
  }
  if (host < 0 && rack < 0) {
    fprintf(stderr, "shoal testbed set: '%s' is neither a host (h0..h%d) nor a rack (r0..r%d) of testbed '%s'\n", target,
            tb->nhosts - 1, tb->nracks - 1, c.name);
    st = 2;
  } else if (!(st = set_check(&c, tb, rack, &method))) {
    st = set_apply(&c, tb, host, rack, method);
  }
  free(tb);
  return st;
}

/* ---- exec ---- */

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT name_cli_t
static const shoal_opts_spec_t exec_spec = {
    .name = "shoal testbed exec",
    .usage = "usage: shoal testbed exec [--name NAME] HOST [--] COMMAND [ARGS...]\n"
             "Run COMMAND on the host: its network namespace, host name, /etc/hosts and cgroup (SLURM_CONF set\n"
             "under Slurm). HOST: h3, 3 or NAME-h3.\n",
    .opts = name_opts,
    .args = SHOAL_ARGS_COMMAND,
};

static int cmd_exec(int argc, char **argv) {
  name_cli_t c = {TB_DEFAULT_NAME};
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&exec_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  if (check_name(c.name)) return 2;
  if (res.ncmd < 1) return fprintf(stderr, "shoal testbed exec: which host? (shoal testbed exec h0 -- hostname)\n"), 2;
  tb_t *tb = calloc(1, sizeof *tb);
  char err[768];
  if (!tb || shoal__tb_load(c.name, tb, err, sizeof err)) {
    fprintf(stderr, "shoal testbed exec: %s\n", tb ? err : "out of memory");
    free(tb);
    return 1;
  }
  char **cmd = res.cmd;
  int host = shoal__tb_host_index(tb, cmd[0]), i = 1;
  if (host < 0) {
    fprintf(stderr, "shoal testbed exec: '%s' is not a host of testbed '%s' (h0..h%d)\n", cmd[0], c.name, tb->nhosts - 1);
    free(tb);
    return 2;
  }
  if (i < res.ncmd && !strcmp(cmd[i], "--")) i++;
  if (i >= res.ncmd) {
    free(tb);
    return fprintf(stderr, "shoal testbed exec: no command (shoal testbed exec %s -- COMMAND ARGS)\n", cmd[0]), 2;
  }
  if (shoal__tb_enter(tb, host, err, sizeof err)) {
    fprintf(stderr, "shoal testbed exec: %s\n", err);
    free(tb);
    return 1;
  }
  free(tb);
  execvp(cmd[i], cmd + i);
  fprintf(stderr, "shoal testbed exec: cannot run '%s': %s\n", cmd[i], strerror(errno));
  return 127;
}

/* ---- daemon ---- */

static const shoal_opts_spec_t daemon_spec = {
    .name = "shoal testbed daemon",
    .usage = "usage: shoal testbed daemon [--name NAME] stop|start|restart DAEMON\n"
             "Stop (SIGTERM, SIGKILL after 5 s), start or restart one of the testbed's Slurm daemons as `up --slurm`\n"
             "started it, where it ran: slurmctld (fabric namespace, host name NAME-ctl), slurmd-h<i> (on host i),\n"
             "munged, and with --accounting slurmdbd and mariadbd. Jobs keep running meanwhile (their slurmstepd\n"
             "does not depend on slurmd; slurmctld recovers its state from its StateSaveLocation).\n",
    .opts = name_opts,
    .args = SHOAL_ARGS_WORDS,
    .max_words = 2,
};

static int cmd_daemon(int argc, char **argv) {
  name_cli_t c = {TB_DEFAULT_NAME};
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&daemon_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  if (check_name(c.name)) return 2;
  const char *act = res.nwords > 0 ? res.words[0] : "";
  int stop = !strcmp(act, "stop") || !strcmp(act, "restart"), start = !strcmp(act, "start") || !strcmp(act, "restart");
  if (!stop && !start)
    return fprintf(stderr, "shoal testbed daemon: '%s': give stop, start or restart (then the daemon)\n", act), 2;
  if (res.nwords < 2)
    return fprintf(stderr, "shoal testbed daemon: %s which daemon? (slurmctld, slurmd-h0, slurmdbd, mariadbd, munged)\n",
                   act), 2;
  char err[768];
  if (shoal__tb_slurm_daemon(c.name, res.words[1], stop, start, err, sizeof err)) {
    fprintf(stderr, "shoal testbed daemon: %s\n", err);
    return 1;
  }
  return 0;
}

static const shoal_subcmd_t testbed_subs[] = {
    {"up", cmd_up, "bring a testbed up (and Slurm on it with --slurm)"},
    {"down", cmd_down, "take it down"},
    {"status", cmd_status, "its hosts, links, CPU limits and Slurm"},
    {"set", cmd_set, "change a host's link, CPU or delay, or a rack's uplink, while jobs run"},
    {"exec", cmd_exec, "run a command on one of its hosts"},
    {"daemon", cmd_daemon, "stop, start or restart one of its Slurm daemons (slurmctld, slurmd-h<i>, ...)"},
    {NULL, NULL, NULL},
};

int shoal_cmd_testbed(int argc, char **argv) {
  return shoal_opts_dispatch("shoal testbed",
                             "usage: shoal testbed up|down|status|set|exec|daemon [--name NAME] [options]\n"
                             "An emulated multi-host cluster on this machine: hosts are network namespaces on per-rack\n"
                             "bridges, racks joined by shaped uplinks (docs/testbed.md). NAME (default " TB_DEFAULT_NAME
                             "): a lower-case\n"
                             "letter then up to 11 letters or digits. Needs root.\n",
                             testbed_subs, NULL, argc, argv);
}
