/* shoal flow controller|agent|status: flow scheduling between training jobs (docs/flow.md). The daemons and
 * the planner live in src/flow; this file reads options and, for --testbed, finds the testbed's hosts and
 * enters its fabric. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "flow/agent.h"
#include "flow/controller.h"
#include "flow/status.h"
#include "flow/topo.h"
#include "options.h"
#include "shoal/status.h"
#include "testbed/testbed.h"

#define FLOW_CTL_ADDR TB_CTL_ADDR /* the controller's address in a testbed's fabric namespace */
#define FLOW_CTL_PORT TB_FLOW_PORT

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}
static void catch_signals(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

/* --testbed NAME: a testbed's name; 0, or 2 after the message */
static int check_testbed(const char *cmd, const char *name) {
  if (!name || shoal__tb_name_ok(name)) return 0;
  fprintf(stderr, "shoal flow %s: --testbed '%s': a lower-case letter then up to 11 letters or digits\n", cmd, name);
  return 2;
}

/* ---- testbeds ---- */

static int load_testbed(const char *cmd, const char *name, tb_t *tb) {
  char err[512];
  if (shoal__tb_load(name, tb, err, sizeof err)) return fprintf(stderr, "shoal flow %s: %s\n", cmd, err), 1;
  return 0;
}

/* The testbed as the controller sees it: every host link, every rack uplink, and the qdiscs of the fabric
 * that shape them (host ingress h<i>, rack uplinks up<r> and dn<r>). */
static void testbed_topo(const tb_t *tb, shoal__ftopo_t *t) {
  memset(t, 0, sizeof *t);
  t->nhosts = tb->nhosts;
  t->nracks = tb->nracks;
  for (int i = 0; i < tb->nhosts; i++) {
    shoal__ftopo_host_t *h = &t->host[i];
    snprintf(h->name, sizeof h->name, "%s", tb->h[i].name);
    inet_pton(AF_INET, tb->h[i].addr, &h->ip);
    h->rack = tb->h[i].rack;
    h->up_bps = tb->h[i].egress_bps;
    h->down_bps = tb->h[i].ingress_bps;
    snprintf(h->in_if, sizeof h->in_if, "%s", tb->h[i].name);
  }
  for (int r = 0; tb->nracks > 1 && r < tb->nracks; r++) {
    t->rack_up_bps[r] = tb->up_bps[r];
    t->rack_down_bps[r] = tb->down_bps[r];
    snprintf(t->up_if[r], sizeof t->up_if[r], "up%d", r);
    snprintf(t->down_if[r], sizeof t->down_if[r], "dn%d", r);
  }
}

/* Into the testbed's fabric namespace, with the controller's address on the core bridge (on the rack
 * bridge with one rack), where every host reaches it. */
static int enter_fabric(const tb_t *tb) {
  char err[512], path[128];
  const char *br = tb->nracks > 1 ? "brc" : "br0";
  if (shoal__tb_run(err, sizeof err, "ip -n %s addr replace %s/16 dev %s", tb->fabric, FLOW_CTL_ADDR, br))
    return fprintf(stderr, "shoal flow controller: the controller's address on %s: %s\n", tb->fabric, err), 1;
  snprintf(path, sizeof path, "/run/netns/%s", tb->fabric);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "shoal flow controller: entering %s: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
    return 1;
  }
  close(fd);
  return 0;
}

/* ---- controller ---- */

typedef struct ctl_cli {
  shoal__fctl_opts_t o;
  const char *testbed, *topo, *listen;
  double slot_ms;
} ctl_cli_t;

#define SHOAL_OPTS_STRUCT ctl_cli_t
static const shoal_opt_t ctl_opts[] = {
    OPT_STRING("--testbed", "NAME", testbed, "run in the testbed's fabric namespace at " FLOW_CTL_ADDR ", with its links\n"
               "and qdiscs as the topology", .def = "", .expect = "a testbed name"),
    OPT_STRING("--topo", "FILE", topo, "hosts, racks and rates (docs/flow.md#topology-file)", .def = "", .expect = "a file"),
    OPT_STRING("--listen", "ADDR", listen, "the address to listen on (with --testbed: " FLOW_CTL_ADDR ")",
               .expect = "an IPv4 address"),
    OPT_INT("--port", "P", o.port, 0, 65535, "the port agents connect to (0: any, printed)"),
    OPT_DOUBLE("--slot-ms", "MS", slot_ms, 1, 10000, "slot length; the agents follow it"),
    OPT_INT("--horizon", "K", o.cfg.horizon, 1, SHOAL__FPLAN_MAX_K, "slots planned ahead"),
    OPT_DOUBLE("--factor", "F", o.cfg.factor, 1, 10, "volume planned for an iteration, as a multiple of the previous one's"),
    OPT_ENUM("--policy", "mlcc|greedy|equal", o.cfg.policy, "mlcc|greedy|equal",
             "mlcc: dependency-aware slots; greedy: the same without the ring rule; equal: static\n"
             "equal-share pacing", .def = "mlcc"),
    OPT_DOUBLE("--floor", "F", o.cfg.floor_frac, 1e-6, 1, "rate of a flow told to wait, as a fraction of its path"),
    OPT_FLAG_SET("--no-feedback", o.feedback, 0, "ignore the qdiscs' backlog and drops"),
    OPT_STRING("--log", "FILE", o.log_path, "a CSV line per link and flow each slot", .def = "", .expect = "a file"),
    OPT_DOUBLE("--duration", "S", o.duration_s, 0, 1e7, "stop after S seconds (0: at SIGINT or SIGTERM)"),
    OPT_END,
};

static int ctl_resolve(void *cli, const shoal_opts_res_t *r) {
  ctl_cli_t *c = cli;
  (void)r;
  if (!!c->testbed == !!c->topo)
    return fprintf(stderr, "shoal flow controller: give the network: --testbed NAME or --topo FILE (one of them)\n"), 2;
  if (strlen(c->listen) >= sizeof c->o.listen_addr)
    return fprintf(stderr, "shoal flow controller: --listen '%s': too long\n", c->listen), 2;
  return check_testbed("controller", c->testbed);
}

static const shoal_opts_spec_t ctl_spec = {
    .name = "shoal flow controller",
    .usage = "usage: shoal flow controller (--testbed NAME | --topo FILE) [--listen ADDR] [--port P] [--slot-ms MS]\n"
             "         [--horizon K] [--factor F] [--policy mlcc|greedy|equal] [--floor F] [--no-feedback]\n"
             "         [--log FILE] [--duration S]\n"
             "The emulated switch: plans every flow's rate over the next K slots from the agents' reports and the\n"
             "links' qdiscs (docs/flow.md#the-controller).\n",
    .opts = ctl_opts,
    .resolve = ctl_resolve,
};

static void print_port(int port, void *arg) {
  (void)arg;
  printf("shoal flow controller: listening on port %d\n", port);
  fflush(stdout);
}

static int cmd_controller(int argc, char **argv) {
  static shoal__ftopo_t topo;
  ctl_cli_t c = {.o = {.port = FLOW_CTL_PORT, .feedback = 1, .stop = &stop_flag, .on_listen = print_port},
                 .listen = "0.0.0.0"};
  shoal__fplan_cfg_default(&c.o.cfg);
  c.slot_ms = c.o.cfg.slot_s * 1e3;
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&ctl_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  c.o.cfg.slot_s = c.slot_ms / 1e3;
  if (c.o.log_path && !*c.o.log_path) c.o.log_path = NULL;
  if (c.testbed && !shoal_opts_given(&res, "--listen")) c.listen = FLOW_CTL_ADDR;
  snprintf(c.o.listen_addr, sizeof c.o.listen_addr, "%s", c.listen);
  if (c.topo && shoal__ftopo_read(c.topo, &topo)) return fprintf(stderr, "shoal flow controller: %s\n", shoal_last_error()), 1;
  if (c.testbed) {
    static tb_t tb;
    if (load_testbed("controller", c.testbed, &tb)) return 1;
    testbed_topo(&tb, &topo);
    if (enter_fabric(&tb)) return 1;
  }
  c.o.topo = &topo;
  catch_signals();
  int rc = shoal__fctl_run(&c.o);
  if (rc) fprintf(stderr, "shoal flow controller: %s\n", shoal_last_error());
  return rc ? 1 : 0;
}

/* ---- agent ---- */

typedef struct agent_cli {
  shoal__fagent_opts_t o;
  const char *host;
  double slot_ms;
} agent_cli_t;

/* --controller HOST[:PORT] */
static int parse_ctl(const char *n, const char *v, void *field) {
  shoal__fagent_opts_t *o = field;
  const char *colon = strrchr(v, ':');
  size_t hl = colon ? (size_t)(colon - v) : strlen(v);
  if (hl == 0 || hl >= sizeof o->ctl_host)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': expected HOST[:PORT]", n, v);
  double p = FLOW_CTL_PORT;
  if (colon && shoal_opts_integer("--controller's port", colon + 1, 1, 65535, &p)) return -1;
  memcpy(o->ctl_host, v, hl);
  o->ctl_host[hl] = 0;
  o->ctl_port = (int)p; /* 1..65535: given */
  return 0;
}

enum { M_ESTIMATE };
static int on_estimate(const void *c) { return ((const agent_cli_t *)c)->o.estimate; }
static const shoal_opt_mode_t agent_modes[] = {[M_ESTIMATE] = {on_estimate, "applies with --estimate only", NULL}};

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT agent_cli_t
static const shoal_opt_t agent_opts[] = {
    OPT_CALL("--controller", "HOST[:PORT]", o, shoal__fagent_opts_t, parse_ctl, "the controller (port 29610 unless given)",
             .def = "", .expect = "HOST[:PORT]"),
    OPT_STRING("--host", "NAME", host, "the segment /dev/shm/shoal-flow.NAME this host's ranks write", .def =
               "SHOAL_FLOW_HOST, else the host name", .expect = "a host name"),
    OPT_DOUBLE("--slot-ms", "MS", slot_ms, 1, 10000, "slot length until the controller says its own"),
    OPT_FLAG("--estimate", o.estimate, "report each flow's best delivery rate of the last slots (minus --bias) as\n"
             "what it can get (else: the line rate)"),
    OPT_RATE("--bias", "RATE", o.bias_bps, "subtracted from the delivery rate in the estimate", .def = "0", .when = 1u << M_ESTIMATE),
    OPT_STRING("--log", "FILE", o.log_path, "a CSV line per flow each slot", .def = "", .expect = "a file"),
    OPT_DOUBLE("--duration", "S", o.duration_s, 0, 1e7, "stop after S seconds (0: at SIGINT or SIGTERM)"),
    OPT_END,
};

static int agent_resolve(void *cli, const shoal_opts_res_t *r) {
  agent_cli_t *c = cli;
  (void)r;
  if (!c->o.ctl_port) return fprintf(stderr, "shoal flow agent: --controller HOST[:PORT] is required\n"), 2;
  if (c->host && (!*c->host || strlen(c->host) >= sizeof c->o.host))
    return fprintf(stderr, "shoal flow agent: --host '%s': 1 to %zu characters\n", c->host, sizeof c->o.host - 1), 2;
  return 0;
}

static const shoal_opts_spec_t agent_spec = {
    .name = "shoal flow agent",
    .usage = "usage: shoal flow agent --controller HOST[:PORT] [--host NAME] [--slot-ms MS] [--estimate [--bias RATE]]\n"
             "         [--log FILE] [--duration S]\n"
             "The host agent: each slot it reads this host's flow segment, asks the controller for the flows'\n"
             "rates and writes them for the ranks' transports. One per host (a testbed's: shoal testbed up --flow).\n",
    .opts = agent_opts,
    .modes = agent_modes,
    .resolve = agent_resolve,
};

static int cmd_agent(int argc, char **argv) {
  agent_cli_t c = {.o = {.slot_s = 0.1, .stop = &stop_flag}};
  c.slot_ms = c.o.slot_s * 1e3;
  int st = shoal_opts_parse(&agent_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  c.o.slot_s = c.slot_ms / 1e3;
  if (c.o.log_path && !*c.o.log_path) c.o.log_path = NULL;
  if (c.host) snprintf(c.o.host, sizeof c.o.host, "%s", c.host);
  catch_signals();
  int rc = shoal__fagent_run(&c.o);
  if (rc) fprintf(stderr, "shoal flow agent: %s\n", shoal_last_error());
  return rc ? 1 : 0;
}

/* ---- status ---- */

typedef struct status_cli {
  const char *testbed;
  shoal_opts_list_t hosts;
} status_cli_t;

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT status_cli_t
static const shoal_opt_t status_opts[] = {
    OPT_STRING("--testbed", "NAME", testbed, "every host of the testbed", .def = "", .expect = "a testbed name"),
    OPT_LIST("--host", "NAME", hosts, "this host (repeatable)", .def = "SHOAL_FLOW_HOST, else the host name"),
    OPT_END,
};

static int status_resolve(void *cli, const shoal_opts_res_t *r) {
  status_cli_t *c = cli;
  (void)r;
  if (c->testbed && c->hosts.n) return fprintf(stderr, "shoal flow status: --testbed and --host: one or the other\n"), 2;
  return check_testbed("status", c->testbed);
}

static const shoal_opts_spec_t status_spec = {
    .name = "shoal flow status",
    .usage = "usage: shoal flow status [--testbed NAME | --host NAME ...]\n"
             "One line per host agent: its flows, their rates, the background, the last controller contact.\n",
    .opts = status_opts,
    .resolve = status_resolve,
};

static int cmd_status(int argc, char **argv) {
  status_cli_t c = {0};
  int st = shoal_opts_parse(&status_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  static tb_t tb;
  if (c.testbed && load_testbed("status", c.testbed, &tb)) return 1;
  int n = c.testbed ? tb.nhosts : c.hosts.n ? c.hosts.n : 1;
  char line[1024];
  for (int i = 0; i < n; i++) {
    const char *h = c.testbed ? tb.h[i].ns : c.hosts.n ? c.hosts.v[i] : shoal__config_str("SHOAL_FLOW_HOST", NULL);
    char me[256];
    if (!h || !*h) h = gethostname(me, sizeof me) == 0 ? me : "localhost";
    if (shoal__flow_status_line(h, line, sizeof line)) return fprintf(stderr, "shoal flow status: %s\n", shoal_last_error()), 1;
    printf("%s\n", line);
  }
  return 0;
}

int shoal_cmd_flow_sim(int argc, char **argv); /* cmd_flow_sim.c */

static const shoal_subcmd_t flow_subs[] = {
    {"controller", cmd_controller, "the emulated switch: plans the flows' rates slot by slot"},
    {"agent", cmd_agent, "the host agent: reports this host's flows, applies their rates"},
    {"status", cmd_status, "one line per host agent"},
    {"sim", shoal_cmd_flow_sim, "the flow-level simulator: jobs on a two-tier network under each policy"},
    {NULL, NULL, NULL},
};

int shoal_cmd_flow(int argc, char **argv) {
  return shoal_opts_dispatch("shoal flow",
                             "usage: shoal flow controller|agent|status|sim [options]\n"
                             "Flow scheduling between training jobs that share a network (docs/flow.md).\n",
                             flow_subs, NULL, argc, argv);
}
