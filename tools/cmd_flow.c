/* shoal flow: flow scheduling between training jobs (docs/flow.md). The daemons and the planner live in
 * src/flow; this file reads options and, for --testbed, finds the testbed's hosts and enters its fabric. */
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
#include "core/log.h"
#include "flow/agent.h"
#include "flow/controller.h"
#include "flow/status.h"
#include "flow/topo.h"
#include "shoal/status.h"
#include "testbed/testbed.h"

#define FLOW_CTL_ADDR "10.90.255.254" /* the controller's address in a testbed's fabric namespace */
#define FLOW_CTL_PORT 29610

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

static int bad(const char *cmd, const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "shoal flow %s: ", cmd);
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 2;
}

/* The value of option argv[*i]; NULL (and a message) when it is the last word. */
static const char *val(const char *cmd, int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "shoal flow %s: %s needs a value\n", cmd, argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

static int num(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out) {
  if (!s) return 2;
  if (shoal__parse_double(opt, s, lo, hi, out)) return fprintf(stderr, "shoal flow %s: %s\n", cmd, shoal_last_error()), 2;
  return 0;
}

static int rate(const char *cmd, const char *opt, const char *s, double *out) {
  if (!s) return 2;
  if (shoal__parse_rate(opt, s, out)) return fprintf(stderr, "shoal flow %s: %s\n", cmd, shoal_last_error()), 2;
  return 0;
}

/* "host:port" or "host" (the default port). */
static int host_port(const char *cmd, const char *s, char *host, size_t cap, int *port) {
  if (!s) return 2;
  const char *colon = strrchr(s, ':');
  size_t hl = colon ? (size_t)(colon - s) : strlen(s);
  if (hl == 0 || hl >= cap) return bad(cmd, "--controller '%s': expected HOST[:PORT]%s", s, "");
  memcpy(host, s, hl);
  host[hl] = 0;
  *port = FLOW_CTL_PORT;
  if (colon) {
    double p;
    if (num(cmd, "--controller's port", colon + 1, 1, 65535, &p)) return 2;
    *port = (int)p;
  }
  return 0;
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

static void ctl_usage(FILE *f) {
  fprintf(f,
          "usage: shoal flow controller (--testbed NAME | --topo FILE) [--listen ADDR] [--port P]\n"
          "         [--slot-ms MS] [--horizon K] [--factor F] [--policy mlcc|greedy|equal] [--floor F]\n"
          "         [--no-feedback] [--log FILE] [--duration S]\n"
          "  the emulated switch: plans every flow's rate over the next K slots from the agents' reports.\n"
          "  --testbed NAME  run in the testbed's fabric namespace at " FLOW_CTL_ADDR ", its links and qdiscs\n"
          "  --topo FILE     hosts, racks and rates (docs/flow.md#topology-file); --listen [0.0.0.0]\n"
          "  --port P [%d]  --slot-ms [100] (1..10000)  --horizon [10] (1..%d)  --factor [1.6] (1..10)\n"
          "  --policy [mlcc]: mlcc (dependency-aware), greedy (no ring rule), equal (static equal share)\n"
          "  --floor [0.02]: rate of a waiting flow, fraction of its path (0..1]\n"
          "  --no-feedback: ignore the qdiscs  --log FILE: a CSV line per link and flow each slot\n",
          FLOW_CTL_PORT, SHOAL__FPLAN_MAX_K);
}

static void print_port(int port, void *arg) {
  (void)arg;
  printf("shoal flow controller: listening on port %d\n", port);
  fflush(stdout);
}

/* Long function: one branch per option of the table in ctl_usage. */
static int cmd_controller(int argc, char **argv) {
  static shoal__ftopo_t topo;
  shoal__fctl_opts_t o = {.port = FLOW_CTL_PORT, .feedback = 1, .stop = &stop_flag, .on_listen = print_port};
  shoal__fplan_cfg_default(&o.cfg);
  snprintf(o.listen_addr, sizeof o.listen_addr, "0.0.0.0");
  const char *testbed = NULL, *topo_path = NULL, *c = "controller";
  double v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return ctl_usage(stdout), 0;
    if (!strcmp(a, "--testbed")) {
      if (!(testbed = val(c, argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--topo")) {
      if (!(topo_path = val(c, argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--listen")) {
      const char *s = val(c, argc, argv, &i);
      if (!s || strlen(s) >= sizeof o.listen_addr) return s ? bad(c, "--listen '%s': too long%s", s, "") : 2;
      snprintf(o.listen_addr, sizeof o.listen_addr, "%s", s);
    } else if (!strcmp(a, "--port")) {
      if (num(c, a, val(c, argc, argv, &i), 0, 65535, &v)) return 2;
      o.port = (int)v;
    } else if (!strcmp(a, "--slot-ms")) {
      if (num(c, a, val(c, argc, argv, &i), 1, 10000, &v)) return 2;
      o.cfg.slot_s = v / 1e3;
    } else if (!strcmp(a, "--horizon")) {
      if (num(c, a, val(c, argc, argv, &i), 1, SHOAL__FPLAN_MAX_K, &v) || v != (int)v)
        return fprintf(stderr, "shoal flow controller: --horizon: a whole number of slots, 1..%d\n", SHOAL__FPLAN_MAX_K), 2;
      o.cfg.horizon = (int)v;
    } else if (!strcmp(a, "--factor")) {
      if (num(c, a, val(c, argc, argv, &i), 1, 10, &o.cfg.factor)) return 2;
    } else if (!strcmp(a, "--floor")) {
      if (num(c, a, val(c, argc, argv, &i), 1e-6, 1, &o.cfg.floor_frac)) return 2;
    } else if (!strcmp(a, "--policy")) {
      const char *s = val(c, argc, argv, &i);
      if (!s) return 2;
      if ((o.cfg.policy = shoal__fplan_policy_parse(s)) < 0) return bad(c, "--policy '%s': expected mlcc, greedy or equal%s", s, "");
    } else if (!strcmp(a, "--no-feedback")) {
      o.feedback = 0;
    } else if (!strcmp(a, "--log")) {
      if (!(o.log_path = val(c, argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--duration")) {
      if (num(c, a, val(c, argc, argv, &i), 0.1, 1e7, &o.duration_s)) return 2;
    } else {
      ctl_usage(stderr);
      return bad(c, "unknown option '%s'%s", a, "");
    }
  }
  if (!!testbed == !!topo_path) return bad(c, "give the network: --testbed NAME or --topo FILE (one of them)%s%s", "", "");
  if (topo_path && shoal__ftopo_read(topo_path, &topo)) return fprintf(stderr, "shoal flow controller: %s\n", shoal_last_error()), 1;
  if (testbed) {
    static tb_t tb;
    if (load_testbed(c, testbed, &tb)) return 1;
    testbed_topo(&tb, &topo);
    if (enter_fabric(&tb)) return 1;
    if (!strcmp(o.listen_addr, "0.0.0.0")) snprintf(o.listen_addr, sizeof o.listen_addr, FLOW_CTL_ADDR);
  }
  o.topo = &topo;
  catch_signals();
  int rc = shoal__fctl_run(&o);
  if (rc) fprintf(stderr, "shoal flow controller: %s\n", shoal_last_error());
  return rc ? 1 : 0;
}

/* ---- agent ---- */

static void agent_usage(FILE *f) {
  fprintf(f,
          "usage: shoal flow agent --controller HOST[:PORT] [--host NAME] [--slot-ms MS] [--estimate [--bias RATE]]\n"
          "         [--log FILE] [--duration S]\n"
          "  the host agent: reads this host's flow segment each slot, asks the controller for rates, writes them\n"
          "  for the ranks' transports (SO_MAX_PACING_RATE). One per host (on a testbed: shoal testbed exec hN --).\n"
          "  --controller HOST[:PORT] (port %d)  --host NAME: segment /dev/shm/shoal-flow.NAME [SHOAL_FLOW_HOST,\n"
          "  else the host name]  --slot-ms [100] (1..10000; the controller's wins)  --estimate: report each flow's\n"
          "  best delivery rate of the last slots minus --bias [0] as what it can get (else the line rate)\n",
          FLOW_CTL_PORT);
}

static int cmd_agent(int argc, char **argv) {
  shoal__fagent_opts_t o = {.slot_s = 0.1, .stop = &stop_flag};
  const char *c = "agent";
  int have_ctl = 0;
  double v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return agent_usage(stdout), 0;
    if (!strcmp(a, "--controller")) {
      if (host_port(c, val(c, argc, argv, &i), o.ctl_host, sizeof o.ctl_host, &o.ctl_port)) return 2;
      have_ctl = 1;
    } else if (!strcmp(a, "--host")) {
      const char *s = val(c, argc, argv, &i);
      if (!s || !*s || strlen(s) >= sizeof o.host) return s ? bad(c, "--host '%s': 1 to 63 characters%s", s, "") : 2;
      snprintf(o.host, sizeof o.host, "%s", s);
    } else if (!strcmp(a, "--slot-ms")) {
      if (num(c, a, val(c, argc, argv, &i), 1, 10000, &v)) return 2;
      o.slot_s = v / 1e3;
    } else if (!strcmp(a, "--estimate")) {
      o.estimate = 1;
    } else if (!strcmp(a, "--bias")) {
      if (rate(c, a, val(c, argc, argv, &i), &o.bias_bps)) return 2;
    } else if (!strcmp(a, "--log")) {
      if (!(o.log_path = val(c, argc, argv, &i))) return 2;
    } else if (!strcmp(a, "--duration")) {
      if (num(c, a, val(c, argc, argv, &i), 0.1, 1e7, &o.duration_s)) return 2;
    } else {
      agent_usage(stderr);
      return bad(c, "unknown option '%s'%s", a, "");
    }
  }
  if (!have_ctl) return agent_usage(stderr), bad(c, "--controller HOST[:PORT] is required%s%s", "", "");
  catch_signals();
  int rc = shoal__fagent_run(&o);
  if (rc) fprintf(stderr, "shoal flow agent: %s\n", shoal_last_error());
  return rc ? 1 : 0;
}

/* ---- status ---- */

static int cmd_status(int argc, char **argv) {
  const char *testbed = NULL, *c = "status";
  const char *hosts[64];
  int nh = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: shoal flow status [--testbed NAME | --host NAME ...]\n"
             "  one line per host agent: its flows, their rates, the background, the last controller contact\n"
             "  (default: this host, SHOAL_FLOW_HOST or the host name)\n");
      return 0;
    }
    if (!strcmp(argv[i], "--testbed")) {
      if (!(testbed = val(c, argc, argv, &i))) return 2;
    } else if (!strcmp(argv[i], "--host")) {
      if (nh == 64) return bad(c, "--host: at most 64 hosts%s%s", "", "");
      if (!(hosts[nh++] = val(c, argc, argv, &i))) return 2;
    } else {
      return bad(c, "unknown option '%s'%s", argv[i], "");
    }
  }
  if (testbed && nh) return bad(c, "--testbed and --host: one or the other%s%s", "", "");
  static tb_t tb;
  if (testbed && load_testbed(c, testbed, &tb)) return 1;
  int n = testbed ? tb.nhosts : nh ? nh : 1;
  char line[1024];
  for (int i = 0; i < n; i++) {
    const char *h = testbed ? tb.h[i].ns : nh ? hosts[i] : shoal__config_str("SHOAL_FLOW_HOST", NULL);
    char me[256];
    if (!h || !*h) h = gethostname(me, sizeof me) == 0 ? me : "localhost";
    if (shoal__flow_status_line(h, line, sizeof line)) return fprintf(stderr, "shoal flow status: %s\n", shoal_last_error()), 1;
    printf("%s\n", line);
  }
  return 0;
}

int shoal_cmd_flow(int argc, char **argv) {
  const char *sub = argc > 1 ? argv[1] : NULL;
  if (sub && !strcmp(sub, "controller")) return cmd_controller(argc - 1, argv + 1);
  if (sub && !strcmp(sub, "agent")) return cmd_agent(argc - 1, argv + 1);
  if (sub && !strcmp(sub, "status")) return cmd_status(argc - 1, argv + 1);
  FILE *f = sub && (!strcmp(sub, "-h") || !strcmp(sub, "--help")) ? stdout : stderr;
  fprintf(f, "usage: shoal flow controller|agent|status [options]   (shoal flow SUB --help)\n"
             "  flow scheduling between training jobs that share a network (docs/flow.md)\n");
  if (sub && f == stderr) fprintf(stderr, "shoal flow: unknown subcommand '%s'\n", sub);
  return f == stdout ? 0 : 2;
}
