/* Cluster model, cluster files, placement primitives, the JSON reader, the
 * speed models and policy parameters (the simulator's sched layer). */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "../runner.h"
#include "core/rng.h"
#include "sched/model/json.h"
#include "sched/model/place.h"
#include "sched/policy.h"
#include "sched/model/speed.h"

#define GAVEL "../shared/data/gavel/throughputs.json"

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
}

static int load_text(const char *text, shoal_cluster_spec_t *cs) {
  char path[] = "/tmp/shoal-test-cluster-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  write_file(path, text);
  shoal__cluster_spec_default(cs);
  int rc = shoal__cluster_spec_load(path, cs);
  unlink(path);
  return rc;
}

TEST(cluster_file_ini_and_json) {
  shoal_cluster_spec_t cs;
  CHECK_OK(load_text("# test cluster\n[cluster]\nmachines = 10\ngpus_per_machine = 4\nracks = 2\noversub = 2 ; comment\n", &cs));
  CHECK_EQ(cs.ngroups, 1);
  CHECK_EQ(cs.group[0].machines, 10);
  CHECK_EQ(cs.group[0].per_machine.gpus, 4);
  CHECK_NEAR(cs.net.oversub, 2, 0);
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  CHECK_EQ(c->gpus_total, 40);
  CHECK_EQ(c->nracks, 2);
  CHECK_EQ(c->racks[1].first, 5);
  CHECK_NEAR(c->racks[0].uplink_gbps, 5 * 100 / 2.0, 1e-9);
  shoal__cluster_destroy(c);
  CHECK_OK(load_text("{\"racks\": 1, \"oversub\": 1,\n \"groups\": [{\"machines\": 2, \"gpus_per_machine\": 8},\n"
                     " {\"machines\": 3, \"gpus_per_machine\": 4, \"cpus_per_machine\": 32}]}",
                     &cs));
  CHECK_EQ(cs.ngroups, 2);
  CHECK_OK(shoal__cluster_create(&cs, &c));
  CHECK_EQ(c->gpus_total, 28);
  CHECK_EQ(c->max_gpus_per_machine, 8);
  CHECK_NEAR(c->m[4].cap.cpus, 32, 0);
  shoal__cluster_destroy(c);
}

TEST(cluster_file_errors_name_line_and_key) {
  shoal_cluster_spec_t cs;
  CHECK_EQ(load_text("[cluster]\nmachines = 10\ngpus = 4\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":3: unknown key 'gpus'");
  CHECK_EQ(load_text("[cluster]\n\nmachines = ten\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":3: machines = 'ten'");
  CHECK_EQ(load_text("[cluster]\nmachines = 2.5\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":2: machines = 2.5: expected an integer");
  CHECK_EQ(load_text("[rack]\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":1: unknown section [rack]");
  CHECK_EQ(load_text("[group]\noversub = 2\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":2: 'oversub' belongs to [cluster]");
  CHECK_EQ(load_text("[cluster]\nmachines\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":2: expected key = value");
  CHECK_EQ(load_text("[cluster]\nmachines = 4\nracks = 8\n", &cs), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "racks = 8");
  CHECK_EQ(load_text("{\"machines\": 4,\n \"racks\": \"two\"}", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":2: racks: expected a number");
  CHECK_EQ(load_text("{\"machines\": 4,\n\n \"racks\": }", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":3: expected a value");
  /* a key given twice (which one was meant?), hex, and a file with no setting (it was the default cluster) */
  CHECK_EQ(load_text("[cluster]\nmachines = 4\nmachines = 8\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":3: machines given again (first on line 2)");
  CHECK_EQ(load_text("{\"machines\": 4,\n \"groups\": [],\n \"groups\": 5}", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":3: groups given again (first on line 2)");
  CHECK_EQ(load_text("[cluster]\nmachines = 0x10\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":2: machines = '0x10': not a number");
  CHECK_EQ(load_text("# nothing here\n\n", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "no settings");
  CHECK_EQ(load_text("{}", &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "no settings");
  shoal__cluster_spec_default(&cs);
  CHECK_EQ(shoal__cluster_spec_load("/nonexistent/cluster.ini", &cs), SHOAL_ERR_IO);
  CHECK_CONTAINS(shoal_last_error(), "/nonexistent/cluster.ini");
}

/* The documented example: [group] machines are added to the [cluster]
 * ones (16 x 8 + 4 x 4 GPUs), in INI and JSON. */
TEST(cluster_file_groups_add_to_cluster) {
  const char *texts[] = {"[cluster]\nmachines = 16\ngpus_per_machine = 8\nracks = 2\noversub = 2\n[group]\nmachines = 4\n"
                         "gpus_per_machine = 4\n",
                         "{\"machines\": 16, \"gpus_per_machine\": 8,\n \"racks\": 2, \"oversub\": 2,\n"
                         " \"groups\": [{\"machines\": 4, \"gpus_per_machine\": 4}]}"};
  for (int k = 0; k < 2; k++) {
    shoal_cluster_spec_t cs;
    CHECK_OK(load_text(texts[k], &cs));
    CHECK_EQ(cs.ngroups, 2);
    shoal_cluster_t *c;
    CHECK_OK(shoal__cluster_create(&cs, &c));
    CHECK_EQ(c->nmachines, 20);
    CHECK_EQ(c->gpus_total, 16 * 8 + 4 * 4);
    CHECK_EQ(c->nracks, 4);
    CHECK_EQ(c->m[0].cap.gpus, 8);
    CHECK_EQ(c->m[19].cap.gpus, 4);
    shoal__cluster_destroy(c);
  }
  /* 8 machine groups at most, [cluster] machines included */
  char big[1024] = "[cluster]\nmachines = 2\n";
  for (int i = 0; i < 8; i++) strcat(big, "[group]\nmachines = 1\n");
  shoal_cluster_spec_t cs;
  CHECK_EQ(load_text(big, &cs), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "at most 8");
}

/* racks not written: min(16, machines); written above machines: an error
 * naming its line (never a key the user did not write). */
TEST(cluster_file_default_racks) {
  shoal_cluster_spec_t cs;
  CHECK_OK(load_text("[cluster]\nmachines = 2\ngpus_per_machine = 4\n", &cs));
  CHECK_EQ(cs.group[0].racks, 2);
  CHECK_OK(load_text("{\"machines\": 40}", &cs));
  CHECK_EQ(cs.group[0].racks, 16);
  CHECK_OK(load_text("[cluster]\nmachines = 20\nracks = 5\n[group]\nmachines = 3\n", &cs));
  CHECK_EQ(cs.group[0].racks, 5);
  CHECK_EQ(cs.group[1].racks, 3);
  CHECK_EQ(load_text("[cluster]\nmachines = 4\n[group]\nracks = 9\nmachines = 2\n", &cs), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), ":4: racks = 9: more than the 2 machines of group 1");
  CHECK_EQ(load_text("{\"machines\": 3,\n \"racks\": 4}", &cs), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), ":2: racks = 4");
  /* the CLI: default clamps, an explicit --racks above --machines is an error naming it */
  char cmd[512], out[8192];
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 5 --machines 2 --policy fifo --no-progress 2>&1", shoal_test_cli());
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 20) == 0, "%s", out);
  CHECK_CONTAINS(out, "2 machines, 16 GPUs (up to 8 per machine), 2 racks");
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 5 --racks 5 --machines 2 --policy fifo --no-progress 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "--racks=5: more than the 2 machines");
}

TEST(json_reader) {
  shoal_json_t *j;
  const char *t = "{\"a\": [1, 2.5e3, -3], \"b\": {\"c\": \"x\\u00e9\\n\"}, \"d\": true, \"e\": null}";
  CHECK_OK(shoal__json_parse("t", t, strlen(t), &j));
  const shoal_json_t *a = shoal__json_get(j, "a");
  CHECK(a && a->type == SHOAL_JSON_ARR && a->n == 3);
  CHECK_NEAR(a->kids[1]->num, 2500, 0);
  CHECK(!strcmp(shoal__json_get(shoal__json_get(j, "b"), "c")->str, "x\xc3\xa9\n"));
  shoal__json_free(j);
  const char *bad[] = {"{\"a\": 1,}", "[1 2]", "{\"a\" 1}", "\"abc", "[1e999]", "{} x", "[\"\\q\"]", "", "[-]"};
  for (int i = 0; i < 9; i++) {
    CHECK_EQ(shoal__json_parse("bad.json", bad[i], strlen(bad[i]), &j), SHOAL_ERR_PARSE);
    CHECK_CONTAINS(shoal_last_error(), "bad.json:1:");
  }
  char deep[400];
  memset(deep, '[', sizeof deep);
  CHECK_EQ(shoal__json_parse("deep", deep, sizeof deep, &j), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "nesting too deep");
}

static shoal_job_t job_of(int gpus) {
  shoal_job_t j;
  memset(&j, 0, sizeof j);
  j.gpus = gpus;
  j.worker_demand = (shoal_res_t){1, 4, 16};
  j.ps_demand = (shoal_res_t){0, 4, 16};
  return j;
}

static void take(shoal_cluster_t *c, const shoal_job_t *j, const shoal_place_t *p, int n) {
  for (int i = 0; i < n; i++) {
    shoal_res_t r = shoal_job_demand(j, p[i].workers, p[i].ps);
    CHECK_OK(shoal__cluster_take(c, p[i].machine, &r));
  }
}

/* 2 racks x 3 machines x 8 GPUs. */
TEST(placement_consolidated_best_fit_rack_cluster) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 6;
  cs.group[0].racks = 2;
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_place_t p[8];
  shoal_job_t j5 = job_of(5), j3 = job_of(3), j2 = job_of(2);
  /* best fit: all 8 free, lowest id */
  CHECK_EQ(shoal__place_consolidated(c, &j5, 5, p, 8), 1);
  CHECK_EQ(p[0].machine, 0);
  take(c, &j5, p, 1);
  /* 3 GPUs: machine 0 has exactly 3 free: best fit */
  CHECK_EQ(shoal__place_consolidated(c, &j3, 3, p, 8), 1);
  CHECK_EQ(p[0].machine, 0);
  /* 2 GPUs also go to machine 0 (3 free < 8) */
  CHECK_EQ(shoal__place_consolidated(c, &j2, 2, p, 8), 1);
  CHECK_EQ(p[0].machine, 0);
  /* 12 GPUs: rack 0 has 3+8+8, rack 1 8+8+8; both need 2 machines: lowest rack;
   * largest free first: machines 1 (8) and 2 (4) */
  shoal_job_t j12 = job_of(12);
  CHECK_EQ(shoal__place_consolidated(c, &j12, 12, p, 8), 2);
  CHECK_EQ(p[0].machine, 1);
  CHECK_EQ(p[0].workers, 8);
  CHECK_EQ(p[1].machine, 2);
  CHECK_EQ(p[1].workers, 4);
  /* 20 GPUs: rack 0 has 19 free, rack 1 has 24: rack 1, 3 machines */
  shoal_job_t j20 = job_of(20);
  CHECK_EQ(shoal__place_consolidated(c, &j20, 20, p, 8), 3);
  CHECK_EQ(p[0].machine, 3);
  /* 40 GPUs: cluster-wide (43 free): five machines of 8, largest first */
  shoal_job_t j40 = job_of(40);
  int n = shoal__place_consolidated(c, &j40, 40, p, 8);
  CHECK_EQ(n, 5);
  CHECK_EQ(p[0].machine, 1);
  int sum = 0;
  for (int i = 0; i < n; i++) sum += p[i].workers;
  CHECK_EQ(sum, 40);
  shoal_job_t j44 = job_of(44);
  CHECK_EQ(shoal__place_consolidated(c, &j44, 44, p, 8), 0);
  /* strict: 12 GPUs needs 2 whole idle machines */
  CHECK_EQ(shoal__place_strict(c, &j12, 12, p, 8), 2);
  CHECK_EQ(p[0].machine, 1);
  CHECK_EQ(p[0].workers, 8);
  CHECK_EQ(p[1].workers, 4);
  /* spread: seeded, all workers placed, within capacity */
  shoal_rng_t r;
  shoal_rng_seed(&r, 3);
  n = shoal__place_spread(c, &j20, 20, &r, p, 8);
  CHECK(n >= 3);
  sum = 0;
  for (int i = 0; i < n; i++) {
    sum += p[i].workers;
    CHECK(p[i].workers <= c->m[p[i].machine].free.gpus);
  }
  CHECK_EQ(sum, 20);
  shoal__cluster_destroy(c);
}

/* CPU limits: 16-core machines fit 4 workers (4 cores each) even with 8 GPUs;
 * PSs go on the workers' machines while CPUs last, then elsewhere. */
TEST(placement_respects_cpu_and_places_ps) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 3;
  cs.group[0].racks = 1;
  cs.group[0].per_machine.cpus = 16;
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_place_t p[8];
  shoal_job_t j = job_of(6);
  int n = shoal__place_consolidated(c, &j, 6, p, 8);
  CHECK_EQ(n, 2);
  CHECK_EQ(p[0].workers, 4);
  CHECK_EQ(p[1].workers, 2);
  j.arch = SHOAL_ARCH_PS;
  n = shoal__place_ps_job(c, &j, 3, 2, p, 8);
  /* 3 workers on machine 0 (12 cores), one PS fits there (16), the other goes
   * to the machine with the most free CPU (machine 1) */
  CHECK_EQ(n, 2);
  CHECK_EQ(p[0].machine, 0);
  CHECK_EQ(p[0].workers, 3);
  CHECK_EQ(p[0].ps, 1);
  CHECK_EQ(p[1].machine, 1);
  CHECK_EQ(p[1].ps, 1);
  shoal_res_t big = {9, 1, 1};
  CHECK_EQ(shoal__cluster_take(c, 0, &big), SHOAL_ERR_INFEASIBLE);
  CHECK_EQ(c->gpus_free, 24);
  shoal__cluster_destroy(c);
}

/* Servers on machines without the job's workers move beside them (the live controller on Slurm): each to the worker
 * machine with the fewest servers, ties to the lowest id; the emptied machines leave the placement. */
TEST(placement_ps_with_workers_moves_servers_beside_them) {
  shoal_place_t p[4] = {{0, 3, 1}, {1, 0, 1}};
  CHECK_EQ(shoal__place_ps_with_workers(p, 2), 1);
  CHECK(p[0].machine == 0 && p[0].workers == 3 && p[0].ps == 2);
  shoal_place_t q[4] = {{0, 1, 0}, {1, 0, 2}, {2, 1, 1}, {3, 0, 1}};
  CHECK_EQ(shoal__place_ps_with_workers(q, 4), 2);
  /* the two of machine 1: to 0 (0 servers), then to 0 again (1 = machine 2's 1, lower id); machine 3's: to 2 */
  CHECK(q[0].machine == 0 && q[0].workers == 1 && q[0].ps == 2);
  CHECK(q[1].machine == 2 && q[1].workers == 1 && q[1].ps == 2);
  shoal_place_t r[2] = {{0, 2, 0}, {5, 1, 1}}; /* every server beside workers already: unchanged */
  CHECK_EQ(shoal__place_ps_with_workers(r, 2), 2);
  CHECK(r[0].ps == 0 && r[1].machine == 5 && r[1].ps == 1);
}

TEST(analytic_speed_model_formulas) {
  shoal_speed_t *s;
  CHECK_OK(shoal__speed_analytic_create(&s));
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.net.oversub = 4;
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_job_t j = job_of(8);
  j.model = (int16_t)shoal__speed_find_model(s, "resnet50");
  CHECK(j.model >= 0);
  const shoal_model_t *m = &s->models[j.model];
  /* one GPU: no communication */
  shoal_shape_t one = {1, 0, 1, 1, 0, 0};
  CHECK_NEAR(s->rate(s, c, &j, &one), 1 / m->compute_s, 1e-9);
  /* 8 GPUs on one machine: ring at 400 Gb/s, alpha 5 us, reduction 1000 Gb/s */
  shoal_shape_t cons = {8, 0, 1, 1, 0, 0};
  double B = 400e9 / 8, R = 1000e9 / 8, mb = m->grad_bytes;
  double t = m->compute_s + 2 * 7 * 5e-6 + 2 * (7.0 / 8) * mb / B + (7.0 / 8) * mb / R;
  CHECK_NEAR(s->rate(s, c, &j, &cons), 8 / t, 1e-9);
  /* two machines in a rack: NIC 100 Gb/s, alpha 20 us; across racks: NIC/oversub */
  shoal_shape_t rack = {8, 0, 2, 1, 0, 0}, xr = {8, 0, 2, 2, 0, 0};
  double tr = m->compute_s + 2 * 7 * 20e-6 + 2 * (7.0 / 8) * mb / (100e9 / 8) + (7.0 / 8) * mb / R;
  double tx = m->compute_s + 2 * 7 * 20e-6 + 2 * (7.0 / 8) * mb / (25e9 / 8) + (7.0 / 8) * mb / R;
  CHECK_NEAR(s->rate(s, c, &j, &rack), 8 / tr, 1e-9);
  CHECK_NEAR(s->rate(s, c, &j, &xr), 8 / tx, 1e-9);
  CHECK(s->rate(s, c, &j, &cons) > s->rate(s, c, &j, &rack));
  /* PS: all PSs local vs none: locality helps; more PSs relieve the PS side */
  j.arch = SHOAL_ARCH_PS;
  shoal_shape_t local = {4, 2, 1, 1, 2, 0}, remote1 = {4, 1, 2, 1, 0, 0}, remote2 = {4, 2, 2, 1, 0, 0};
  double rl = s->rate(s, c, &j, &local), r1 = s->rate(s, c, &j, &remote1), r2 = s->rate(s, c, &j, &remote2);
  CHECK(rl > r2 && r2 > r1);
  double tw = 2 * mb / (100e9 / 8), tps = 2 * mb * 4 / (1 * 100e9 / 8);
  CHECK_NEAR(r1, 4 / (m->compute_s + (tw > tps ? tw : tps) + 20e-6 * 5), 1e-9);
  shoal_shape_t nops = {4, 0, 1, 1, 0, 0};
  CHECK_NEAR(s->rate(s, c, &j, &nops), 0, 0);
  shoal__cluster_destroy(c);
  shoal__speed_destroy(s);
}

TEST(table_speed_model_reads_gavel) {
  if (access(GAVEL, R_OK) != 0) shoal_test_skip(GAVEL " not available");
  shoal_speed_t *s;
  CHECK_OK(shoal__speed_table_create(GAVEL, "v100", 1, &s));
  CHECK_EQ(s->nmodels, 26);
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_job_t j = job_of(1);
  j.model = (int16_t)shoal__speed_find_model(s, "ResNet-50 (batch size 64)");
  CHECK(j.model >= 0);
  /* spec §3.2 values: 4.39 (1), 7.92 (2), 9.45 (4), 17.30 (8) consolidated */
  shoal_shape_t sh = {1, 0, 1, 1, 0, 0};
  CHECK_NEAR(s->rate(s, c, &j, &sh), 4.39, 0.01);
  sh.workers = 2;
  CHECK_NEAR(s->rate(s, c, &j, &sh), 7.92, 0.01);
  sh.workers = 8;
  CHECK_NEAR(s->rate(s, c, &j, &sh), 17.30, 0.01);
  /* interpolation between 4 and 8 */
  sh.workers = 6;
  CHECK_NEAR(s->rate(s, c, &j, &sh), (9.45 + 17.30) / 2, 0.02);
  /* spread ratio > 1 for this type: clamped to the consolidated value */
  sh.workers = 8;
  sh.machines = 2;
  CHECK_NEAR(s->rate(s, c, &j, &sh), 17.30, 0.01);
  shoal__speed_destroy(s);
  CHECK_OK(shoal__speed_table_create(GAVEL, "v100", 0, &s));
  CHECK(s->rate(s, c, &j, &sh) > 17.31); /* raw spread value (19.76) */
  /* extrapolation above 8 GPUs: S(8) * n/8 * min(1, S(8)/(2 S(4))) */
  sh.workers = 16;
  sh.machines = 1;
  double e = 17.30 / (2 * 9.45);
  CHECK_NEAR(s->rate(s, c, &j, &sh), 17.30 * 2 * (e < 1 ? e : 1), 0.02);
  shoal__speed_destroy(s);
  CHECK_EQ(shoal__speed_table_create(GAVEL, "h100", 1, &s), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "no object \"h100\"");
  shoal__cluster_destroy(c);
}

TEST(policy_registry_and_params) {
  const char *names[] = {"fifo", "srtf", "tiresias", "optimus", "drf", "gavel"};
  for (int i = 0; i < 6; i++) CHECK_MSG(shoal__policy_find(names[i]) != NULL, "%s", names[i]);
  CHECK(shoal__policy_find("nosuch") == NULL);
  static const char *const keys[] = {"a", "bb", NULL};
  CHECK_OK(shoal__param_check("p", "a=1:bb=x", keys));
  CHECK_EQ(shoal__param_check("p", "a=1:c=2", keys), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "unknown parameter 'c'");
  CHECK_EQ(shoal__param_check("p", "a", keys), SHOAL_ERR_CONFIG);
  double d;
  CHECK_OK(shoal__param_double("p", "a=1:bb=2.5", "bb", 0, 0, 10, &d));
  CHECK_NEAR(d, 2.5, 0);
  CHECK_EQ(shoal__param_double("p", "bb=20", "bb", 0, 0, 10, &d), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "policy p: bb='20': out of range");
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_sched_t s;
  CHECK_OK(shoal__sched_init(&s, c, sp, 4));
  void *st;
  CHECK_EQ(shoal__policy_find("tiresias")->create(&s, "thresholds=100/50", &st), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "thresholds must increase");
  CHECK_OK(shoal__policy_find("tiresias")->create(&s, "thresholds=100/500/1000:starve=4", &st));
  shoal__policy_find("tiresias")->destroy(st);
  CHECK_EQ(shoal__policy_find("gavel")->create(&s, "round=0", &st), SHOAL_ERR_CONFIG);
  shoal__sched_fini(&s);
  shoal__speed_destroy(sp);
  shoal__cluster_destroy(c);
}
