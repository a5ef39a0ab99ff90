/* The learned placer's files and pieces: the interference model file, the
 * weights file (every refusal names the file and what is wrong), the shipped
 * copies of both, the GPU slot map and the co-location slowdowns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runner.h"
#include "sched/model/colocation.h"
#include "sched/model/gpu_slots.h"
#include "sched/model/interference.h"
#include "sched/model/marl_net.h"
#include "sched/policy.h"

/* a model with two classes at the socket level: g(a,b) = softplus(alpha[a] + beta[b] + u[a] v[b]) */
static const char *IMODEL =
    "{\"format\": \"shoal-interference 1\", \"rank\": 1,\n"
    " \"levels\": {\"socket\": {\"classes\": [\"calm\", \"noisy\"], \"alpha\": [0, 0], \"beta\": [-20, 0],\n"
    "                         \"u\": [[0], [1]], \"v\": [[0], [1]]},\n"
    "            \"nic\": {\"classes\": [\"noisy\"], \"alpha\": [1], \"beta\": [0], \"u\": [[0]], \"v\": [[0]]}},\n"
    " \"models\": {\"resnet50\": \"noisy\", \"Res*\": \"calm\"}, \"default_class\": \"calm\"}\n";

static double softplus(double x) { return log1p(exp(x)); }

TEST(interference_model_terms_and_classes) {
  shoal_interference_t *m;
  CHECK_OK(shoal__interference_parse("t.json", IMODEL, strlen(IMODEL), &m));
  int calm = shoal__interference_class_of(m, "calm"), noisy = shoal__interference_class_of(m, "noisy");
  CHECK(calm >= 0 && noisy >= 0 && calm != noisy);
  CHECK_EQ(shoal__interference_class_of(m, "resnet50"), noisy);
  CHECK_EQ(shoal__interference_class_of(m, "ResNet-18 (batch size 32)"), calm); /* prefix pattern */
  CHECK_EQ(shoal__interference_class_of(m, "anything"), calm);                   /* default class */
  CHECK_NEAR(shoal__interference_term(m, SHOAL_IL_SOCKET, noisy, noisy), softplus(0 + 0 + 1), 1e-12);
  CHECK_NEAR(shoal__interference_term(m, SHOAL_IL_SOCKET, noisy, calm), softplus(-20), 1e-12);
  CHECK_NEAR(shoal__interference_term(m, SHOAL_IL_NIC, noisy, noisy), softplus(1), 1e-12);
  CHECK(shoal__interference_term(m, SHOAL_IL_NIC, calm, noisy) == 0); /* calm does not use the NIC level */
  CHECK(shoal__interference_term(m, SHOAL_IL_CORE, noisy, noisy) == 0);
  CHECK(shoal__interference_term(m, SHOAL_IL_SOCKET, -1, noisy) == 0);
  shoal__interference_free(m);
  CHECK_OK(shoal__interference_shipped(&m));
  CHECK(shoal__interference_has_level(m, SHOAL_IL_SOCKET) && shoal__interference_has_level(m, SHOAL_IL_NIC));
  CHECK(shoal__interference_class_of(m, "resnet50") >= 0);
  shoal__interference_free(m);
}

static void bad_imodel(const char *text, const char *want) {
  shoal_interference_t *m = NULL;
  int rc = shoal__interference_parse("bad.json", text, strlen(text), &m);
  CHECK_MSG(rc == SHOAL_ERR_PARSE, "accepted (rc %d): %s", rc, text);
  CHECK_CONTAINS(shoal_last_error(), "bad.json");
  CHECK_CONTAINS(shoal_last_error(), want);
}

TEST(interference_model_refusals) {
  bad_imodel("{\"format\": \"shoal-interference 2\", \"rank\": 0, \"levels\": {}}", "format");
  bad_imodel("{\"format\": \"shoal-interference 1\", \"rank\": 0, \"levels\": {\"disk\": {}}}", "unknown level 'disk'");
  bad_imodel("{\"format\": \"shoal-interference 1\", \"rank\": 0, \"levels\": {\"socket\": {\"classes\": [\"a\"], "
             "\"alpha\": [1, 2], \"beta\": [0], \"u\": [[]], \"v\": [[]]}}}", "alpha");
  bad_imodel("{\"format\": \"shoal-interference 1\", \"rank\": 1, \"levels\": {\"socket\": {\"classes\": [\"a\"], "
             "\"alpha\": [1], \"beta\": [\"x\"], \"u\": [[0]], \"v\": [[0]]}}}", "beta[0]");
  bad_imodel("{\"format\": \"shoal-interference 1\", \"rank\": 2, \"levels\": {\"socket\": {\"classes\": [\"a\"], "
             "\"alpha\": [1], \"beta\": [0], \"u\": [[0]], \"v\": [[0, 0]]}}}", "u[0]");
  bad_imodel("{\"format\": \"shoal-interference 1\", \"rank\": 0, \"levels\": {\"socket\": {\"classes\": [\"a\"], "
             "\"alpha\": [1], \"beta\": [0], \"u\": [[]], \"v\": [[]]}}, \"models\": {\"x\": \"b\"}}", "class 'b'");
  bad_imodel("{\"format\": \"shoal-interference 1\", \"rank\": 0, \"levels\": {\"socket\": {\"classes\": [\"a\"], "
             "\"alpha\": [1], \"beta\": [0], \"u\": [[]], \"v\": [[]]}}, \"extra\": 1}", "unknown key 'extra'");
  bad_imodel("{\"format\": \"shoal-interference 1\", \"rank\": 0, \"levels\": {\"socket\": {\"classes\": [\"a\"], "
             "\"alpha\": [1], \"beta\": [0], \"u\": [[]], \"v\": [[]]}", "bad.json:1");
  shoal_interference_t *m;
  CHECK(shoal__interference_load("/nonexistent/model.json", &m) == SHOAL_ERR_NOT_FOUND);
  CHECK_CONTAINS(shoal_last_error(), "interference model /nonexistent/model.json: cannot open");
  char fifo[64]; /* a FIFO is refused at once: reading one would wait for a writer forever */
  snprintf(fifo, sizeof fifo, "/tmp/shoal-imodel-fifo-%d", (int)getpid());
  CHECK(mkfifo(fifo, 0600) == 0);
  CHECK(shoal__interference_load(fifo, &m) == SHOAL_ERR_IO);
  unlink(fifo);
  CHECK_CONTAINS(shoal_last_error(), ": a FIFO (expected a regular file)");
}

/* ---- weights ---- */

/* a valid weights text of hidden h: every number 0.01 */
static char *weights_text(int h, const char *agents, const char *hier) {
  size_t cap = 1 << 20, n = 0;
  char *t = malloc(cap);
  n += (size_t)snprintf(t + n, cap - n, "shoal-marl-weights 1\n# test\nhierarchy %s\nfeatures socket=%d server=%d rack=%d "
                        "job=%d\nhidden %d\nagents %s\n", hier, SHOAL_MARL_FS, SHOAL_MARL_FM, SHOAL_MARL_FR, SHOAL_MARL_FJ,
                        h, agents);
  struct { const char *name; int r, c; } ts[] = {
      {"socket.W", h, SHOAL_MARL_FS}, {"socket.b", h, 1}, {"server.W", h, SHOAL_MARL_FM + 2 * h}, {"server.b", h, 1},
      {"rack.W", h, SHOAL_MARL_FR + 2 * h}, {"rack.b", h, 1}, {"score.W", h, 5 * h + SHOAL_MARL_FJ}, {"score.b", h, 1},
      {"out.W", 1, h}, {"out.b", 1, 1}};
  for (int i = 0; i < 10; i++) {
    n += (size_t)snprintf(t + n, cap - n, "tensor %s %d %d\n", ts[i].name, ts[i].r, ts[i].c);
    for (int k = 0; k < ts[i].r * ts[i].c; k++) n += (size_t)snprintf(t + n, cap - n, "0.01%c", k % 8 == 7 ? '\n' : ' ');
    n += (size_t)snprintf(t + n, cap - n, "\n");
  }
  snprintf(t + n, cap - n, "end\n");
  return t;
}

static void bad_weights(const char *text, const char *want) {
  shoal_marl_net_t *n = NULL;
  int rc = shoal__marl_net_parse("w.weights", text, strlen(text), &n);
  CHECK_MSG(rc == SHOAL_ERR_PARSE, "accepted (rc %d), wanted '%s'", rc, want);
  CHECK_CONTAINS(shoal_last_error(), "w.weights");
  CHECK_CONTAINS(shoal_last_error(), want);
}

static char *replace(const char *t, const char *from, const char *to) {
  const char *p = strstr(t, from);
  CHECK(p != NULL);
  char *o = malloc(strlen(t) + strlen(to) + 1);
  size_t a = (size_t)(p - t);
  memcpy(o, t, a);
  strcpy(o + a, to);
  strcat(o, p + strlen(from));
  return o;
}

TEST(marl_weights_refusals) {
  char *ok = weights_text(4, "2", "rack,server,socket");
  shoal_marl_net_t *n;
  CHECK_OK(shoal__marl_net_parse("w.weights", ok, strlen(ok), &n));
  CHECK_EQ(shoal__marl_net_agents(n), 2);
  CHECK_EQ(shoal__marl_net_hidden(n), 4);
  shoal__marl_net_free(n);
  char *t;
  bad_weights((t = replace(ok, "shoal-marl-weights 1", "shoal-marl-weights 7")), "version 7"), free(t);
  bad_weights((t = replace(ok, "shoal-marl-weights", "pytorch-weights")), "not a shoal marl weights file"), free(t);
  bad_weights((t = replace(ok, "tensor server.W 4 15", "tensor server.W 4 14")), "shape: tensor server.W is 4 x 14"), free(t);
  bad_weights((t = replace(ok, "features socket=6", "features socket=5")), "shape"), free(t);
  bad_weights((t = replace(ok, "hierarchy rack,server,socket", "hierarchy rack,server")), "topology"), free(t);
  bad_weights((t = replace(ok, "tensor rack.W", "tensor score.W")), "expected tensor rack.W"), free(t);
  bad_weights((t = replace(ok, "0.01 0.01 0.01", "0.01 abc 0.01")), "'abc' is not a finite number"), free(t);
  bad_weights((t = replace(ok, "0.01 0.01 0.01", "0.01 nan 0.01")), "'nan' is not a finite number"), free(t);
  bad_weights((t = replace(ok, "0.01 0.01 0.01", "0.01 1e999 0.01")), "not a finite number"), free(t);
  bad_weights((t = replace(ok, "hidden 4", "hidden 0")), "hidden"), free(t);
  bad_weights((t = replace(ok, "end\n", "")), "truncated"), free(t);
  bad_weights((t = replace(ok, "end\n", "end\n0.5\n")), "after 'end'"), free(t);
  /* cut anywhere: truncated, never accepted */
  for (size_t cut = 0; cut < strlen(ok); cut += 97) {
    shoal_marl_net_t *x = NULL;
    CHECK(shoal__marl_net_parse("w.weights", ok, cut, &x) == SHOAL_ERR_PARSE);
    CHECK_CONTAINS(shoal_last_error(), "w.weights");
  }
  CHECK(shoal__marl_net_load("/nonexistent/w.weights", &n) == SHOAL_ERR_NOT_FOUND);
  CHECK_CONTAINS(shoal_last_error(), "weights file /nonexistent/w.weights: cannot open");
  char fifo[64]; /* a FIFO is refused at once: reading one would wait for a writer forever */
  snprintf(fifo, sizeof fifo, "/tmp/shoal-weights-fifo-%d", (int)getpid());
  CHECK(mkfifo(fifo, 0600) == 0);
  CHECK(shoal__marl_net_load(fifo, &n) == SHOAL_ERR_IO);
  unlink(fifo);
  CHECK_CONTAINS(shoal_last_error(), "weights file /tmp/shoal-weights-fifo-");
  CHECK_CONTAINS(shoal_last_error(), ": a FIFO (expected a regular file)");
  CHECK_OK(shoal__marl_net_shipped(&n));
  shoal__marl_net_free(n);
  free(ok);
}

/* the network by hand: all weights 0.01, features all 1 -> every feasible socket scores the same */
TEST(marl_forward_by_hand) {
  char *ok = weights_text(2, "1", "rack,server,socket");
  shoal_marl_net_t *n;
  CHECK_OK(shoal__marl_net_parse("w.weights", ok, strlen(ok), &n));
  float xs[4 * SHOAL_MARL_FS], xm[2 * SHOAL_MARL_FM], xr[SHOAL_MARL_FR], xj[SHOAL_MARL_FJ], lg[4];
  for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) xs[i] = 1;
  for (size_t i = 0; i < sizeof xm / sizeof *xm; i++) xm[i] = 1;
  for (size_t i = 0; i < sizeof xr / sizeof *xr; i++) xr[i] = 1;
  for (size_t i = 0; i < sizeof xj / sizeof *xj; i++) xj[i] = 1;
  int32_t ss[4] = {0, 0, 1, 1}, sr[2] = {0, 0};
  uint8_t mask[4] = {0, 1, 1, 1};
  shoal_marl_obs_t o = {4, 2, 1, xs, xm, xr, xj, ss, sr, mask};
  CHECK_EQ(shoal__marl_net_scores(n, &o, lg), 1);
  /* hs = 0.01*6 + 0.01 = 0.07; hm = 0.01*(7 + 4*0.07) + 0.01 = 0.0828; hr = 0.01*(4 + 4*0.0828) + 0.01
   * = 0.053312; z = 0.01*(0.07*2 + 0.0828*2 + 0.053312*2 + 0.053312*4 + 7) + 0.01; out = 0.01*2z + 0.01 */
  double hs = 0.07, hm = 0.01 * (7 + 4 * hs) + 0.01, hr = 0.01 * (4 + 4 * hm) + 0.01;
  double z = 0.01 * (2 * hs + 2 * hm + 2 * hr + 4 * hr + 7) + 0.01, out = 0.01 * 2 * z + 0.01;
  CHECK(isinf(lg[0]) && lg[0] < 0);
  for (int i = 1; i < 4; i++) CHECK_NEAR(lg[i], out, 1e-6);
  mask[1] = mask[2] = mask[3] = 0;
  CHECK_EQ(shoal__marl_net_scores(n, &o, lg), -1);
  shoal__marl_net_free(n);
  free(ok);
}

/* ---- slot map and co-location ---- */

TEST(gpu_slots_sockets_and_slowdowns) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 2;
  cs.group[0].racks = 1;
  cs.group[0].per_machine.gpus = 8;
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  CHECK_EQ(c->m[0].sockets, 2); /* default: 2 for an even GPU count */
  shoal__slots_t *sl;
  CHECK_OK(shoal__slots_create(c, &sl));
  int a, n;
  shoal__slots_socket_range(sl, 0, 1, &a, &n);
  CHECK(a == 4 && n == 4);
  shoal_job_t j1, j2, j3;
  memset(&j1, 0, sizeof j1), memset(&j2, 0, sizeof j2), memset(&j3, 0, sizeof j3);
  shoal_alloc_t none = {0, 0, 0, NULL, 0};
  /* j1: 3 workers on machine 0, default rule: slots 0-2 (socket 0) */
  shoal_place_t p1 = {0, 3, 0};
  shoal__slots_assign(sl, &j1, &none, &p1, 1, NULL);
  CHECK(shoal__slots_owner(sl, 0, 2) == &j1 && shoal__slots_owner(sl, 0, 3) == NULL);
  CHECK_EQ(shoal__slots_free_in(sl, 0, 0), 1);
  /* j2: 2 workers asked on socket 1 */
  shoal_place_t p2 = {0, 2, 0};
  uint8_t want[SHOAL_MAX_SOCKETS] = {0, 2};
  shoal__slots_assign(sl, &j2, &none, &p2, 1, want);
  CHECK(shoal__slots_owner(sl, 0, 4) == &j2 && shoal__slots_owner(sl, 0, 5) == &j2);
  /* j3: 1 worker on socket 0 (the default rule: lowest free slot, 3) and 1 on machine 1 */
  shoal_place_t p3[2] = {{0, 1, 0}, {1, 1, 0}};
  shoal__slots_assign(sl, &j3, &none, p3, 2, NULL);
  CHECK(shoal__slots_owner(sl, 0, 3) == &j3 && shoal__slots_owner(sl, 1, 0) == &j3);
  /* slowdowns with the test model: j1 noisy, j2 noisy, j3 noisy */
  shoal_interference_t *m;
  CHECK_OK(shoal__interference_parse("t.json", IMODEL, strlen(IMODEL), &m));
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  int r50 = shoal__speed_find_model(sp, "resnet50");
  j1.model = j2.model = j3.model = (int16_t)r50;
  shoal_alloc_t a1 = {1, 3, 0, &p1, 0}, a2 = {1, 2, 0, &p2, 0}, a3 = {2, 2, 0, p3, 0};
  j1.alloc = a1, j2.alloc = a2, j3.alloc = a3;
  shoal__colo_t x;
  CHECK_OK(shoal__colo_init(&x, m, sp));
  double g = softplus(1), gn = softplus(1);
  CHECK_NEAR(shoal__colo_slowdown(&x, sl, &j1), 1 + g, 1e-12);      /* j3's one worker on socket 0 */
  CHECK_NEAR(shoal__colo_slowdown(&x, sl, &j2), 1, 1e-12);          /* alone on socket 1 */
  CHECK_NEAR(shoal__colo_slowdown(&x, sl, &j3), 1 + 3 * g, 1e-12);  /* j1's 3 workers; j3 spans machines but no
                                                                     * other job on machine 0 does: no NIC term */
  double own, imposed;
  shoal__colo_socket(&x, sl, &j2, 0, 0, &own, &imposed);
  CHECK_NEAR(own, 4 * g, 1e-12);
  CHECK_NEAR(imposed, 2 * g, 1e-12); /* two distinct jobs there */
  CHECK_NEAR(shoal__colo_nic(&x, sl, &j2, 0), gn, 1e-12); /* j3 spans machines */
  /* j1 shrinks to 1 worker: it keeps no old slot beyond what its count says */
  shoal_place_t p1b = {0, 1, 0};
  shoal__slots_assign(sl, &j1, &a1, &p1b, 1, NULL);
  int held = 0;
  for (int k = 0; k < 8; k++) held += shoal__slots_owner(sl, 0, k) == &j1;
  CHECK_EQ(held, 1);
  shoal__slots_release(sl, &j3, &a3);
  CHECK(shoal__slots_owner(sl, 1, 0) == NULL && shoal__slots_owner(sl, 0, 3) == NULL);
  shoal__colo_fini(&x);
  shoal__speed_destroy(sp);
  shoal__interference_free(m);
  shoal__slots_free(sl);
  shoal__cluster_destroy(c);
}

/* weights trained for more agents than the cluster has racks: refused, naming the file */
TEST(marl_weights_wrong_topology) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/shoal-marl-test-%d.weights", (int)getpid());
  char *t = weights_text(2, "4", "rack,server,socket");
  FILE *f = fopen(path, "w");
  CHECK(f && fputs(t, f) >= 0 && fclose(f) == 0);
  free(t);
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 4;
  cs.group[0].racks = 2;
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_sched_t s;
  CHECK_OK(shoal__sched_init(&s, c, sp, 16));
  const shoal_policy_ops_t *ops = shoal__policy_find("marl");
  CHECK(ops != NULL);
  char params[128];
  snprintf(params, sizeof params, "weights=%s", path);
  void *st = NULL;
  CHECK(ops->create(&s, params, &st) == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), path);
  CHECK_CONTAINS(shoal_last_error(), "topology: trained for 4 agents");
  snprintf(params, sizeof params, "weights=%s:agents=2", path); /* fewer agents: runs */
  CHECK_OK(ops->create(&s, params, &st));
  ops->destroy(st);
  unlink(path);
  shoal__sched_fini(&s);
  shoal__speed_destroy(sp);
  shoal__cluster_destroy(c);
}
