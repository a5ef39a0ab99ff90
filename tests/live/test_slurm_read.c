/* Reading Slurm's answers: sinfo/squeue --json as Slurm 22.05 writes them (taken from the testbed's Slurm), the
 * error answer of a slurmctld that does not answer, sshare -P, topology switches, gres strings. */
#include <string.h>

#include "../runner.h"
#include "live/ctl.h"
#include "live/slurm_read.h"

static const char *sinfo_json =
    "{\"nodes\": [{\"name\": \"lv1-h0\", \"state\": \"idle\", \"state_flags\": [], \"cpus\": 2, \"gres\": \"gpu:2\", "
    "\"gres_used\": \"gpu:0\", \"partitions\": [\"shoal\"], \"alloc_cpus\": 0}, {\"name\": \"lv1-h1\", \"state\": "
    "\"mixed\", \"state_flags\": [\"DRAIN\", \"NOT_RESPONDING\"], \"cpus\": 2, \"gres\": \"gpu:v100:4(S:0-1)\", "
    "\"gres_used\": \"gpu:0\", \"partitions\": [\"shoal\", \"big\"], \"alloc_cpus\": 0}], \"errors\": []}";

static const char *squeue_json =
    "{\"jobs\": [{\"job_id\": 1, \"job_state\": \"CANCELLED\", \"state_reason\": \"JobHeldUser\", \"priority\": 0, "
    "\"exit_code\": 0, \"restart_cnt\": 0, \"submit_time\": 1795838537, \"start_time\": 1795838603, \"end_time\": "
    "1795838603, \"name\": \"wrap\", \"user_name\": \"root\", \"account\": \"\", \"partition\": \"shoal\", \"comment\": "
    "\"shoal:gpus=1\", \"admin_comment\": \"shoal-ctl=c1;scope=shoal\", \"standard_output\": \"\", "
    "\"current_working_directory\": \"/work/live\", \"gres_detail\": [], \"tres_per_node\": \"\"}, {\"job_id\": 4, "
    "\"job_state\": \"RUNNING\", \"state_reason\": \"None\", \"priority\": 4294901757, \"exit_code\": 0, \"restart_cnt\": "
    "2, \"submit_time\": 1795840678, \"start_time\": 1795840678, \"end_time\": 1827376678, \"name\": \"wrap\", "
    "\"user_name\": \"bob\", \"account\": \"other\", \"partition\": \"shoal\", \"comment\": \"\", \"admin_comment\": \"\", "
    "\"standard_output\": \"/tmp/live-%j.out\", \"current_working_directory\": \"/work/live\", \"job_resources\": "
    "{\"nodes\": \"lv1-h[0-1]\", \"allocated_cores\": 2, \"allocated_hosts\": 2, \"allocated_nodes\": [{\"sockets\": "
    "{\"1\": {\"cores\": {\"0\": \"allocated\"}}}, \"nodename\": \"lv1-h0\", \"cpus_used\": 0, \"memory_used\": 0, "
    "\"memory_allocated\": 0}, {\"sockets\": {\"0\": {\"cores\": {\"0\": \"allocated\", \"1\": \"allocated\"}}}, "
    "\"nodename\": \"lv1-h1\", \"cpus_used\": 0, \"memory_used\": 0, \"memory_allocated\": 0}]}, \"gres_detail\": "
    "[\"gpu:1(IDX:0)\", \"gpu:2(IDX:0-1)\"], \"tres_per_node\": \"gres:gpu:1\"}], \"errors\": []}";

TEST(live_slurm_nodes_as_sinfo_writes_them) {
  shoal_live_nodes_t n;
  CHECK_OK(shoal__slurm_parse_nodes(sinfo_json, &n));
  CHECK_EQ(n.n, 2);
  CHECK(!strcmp(n.node[0].name, "lv1-h0") && n.node[0].usable && n.node[0].gpus == 2 && n.node[0].cpus == 2);
  CHECK(!strcmp(n.node[1].state, "mixed+DRAIN+NOT_RESPONDING") && !n.node[1].usable && n.node[1].drain);
  CHECK_EQ(n.node[1].gpus, 4);
  CHECK(!strcmp(n.node[1].partitions, "shoal,big"));
  shoal__live_nodes_free(&n);
}

TEST(live_slurm_jobs_as_squeue_writes_them) {
  shoal_live_jobs_t j;
  CHECK_OK(shoal__slurm_parse_jobs(squeue_json, &j));
  CHECK_EQ(j.n, 2);
  const shoal_live_job_t *a = &j.job[0], *b = &j.job[1];
  CHECK(a->run == SHOAL_LIVE_ENDED && a->held && !strcmp(a->claim, "shoal-ctl=c1;scope=shoal"));
  CHECK_MSG(!strcmp(a->output, "/work/live/slurm-1.out"), "output %s", a->output);
  CHECK(b->run == SHOAL_LIVE_RUNNING && !b->held && b->restarts == 2 && !strcmp(b->account, "other"));
  CHECK_MSG(!strcmp(b->output, "/tmp/live-4.out"), "output %s", b->output);
  CHECK_EQ(b->nuse, 2);
  CHECK(!strcmp(b->use[0].node, "lv1-h0") && b->use[0].gpus == 1 && b->use[0].cpus == 1);
  CHECK(!strcmp(b->use[1].node, "lv1-h1") && b->use[1].gpus == 2 && b->use[1].cpus == 2);
  shoal__live_jobs_free(&j);
}

/* slurmctld down: squeue exits 0 with an error and no jobs; that is no empty queue */
TEST(live_slurm_error_answer_is_an_error) {
  shoal_live_jobs_t j;
  int rc = shoal__slurm_parse_jobs("{\"errors\": [{\"error\": \"Unable to contact slurm controller (connect failure)\", "
                                   "\"error_number\": 1}], \"jobs\": []}", &j);
  CHECK(rc == SHOAL_ERR_CONNECT);
  CHECK_CONTAINS(shoal_last_error(), "Unable to contact slurm controller");
  CHECK(shoal__slurm_parse_jobs("{\"jobs\": [", &j) != 0);
}

TEST(live_slurm_gres_and_shares_and_topology) {
  CHECK_EQ(shoal__slurm_gres_gpus("gpu:2"), 2);
  CHECK_EQ(shoal__slurm_gres_gpus("gpu:v100:4(S:0-1)"), 4);
  CHECK_EQ(shoal__slurm_gres_gpus("gres:gpu:1"), 1);
  CHECK_EQ(shoal__slurm_gres_gpus("gpu:a100:2,gpu:v100:1"), 3);
  CHECK_EQ(shoal__slurm_gres_gpus("(null)"), 0);
  shoal_live_shares_t s;
  CHECK_OK(shoal__slurm_parse_shares("root||1|1.000000|1.000000|0.500000\n research||3|0.750000|0.200000|0.800000\n"
                                     "  research|ann|1|1.000000|0.200000|0.800000\n", &s));
  CHECK_EQ(s.n, 3);
  CHECK(!strcmp(s.share[1].account, "research") && s.share[1].user[0] == 0 && s.share[1].shares == 3);
  CHECK(!strcmp(s.share[2].user, "ann"));
  CHECK_NEAR(s.share[2].fairshare, 0.8, 1e-9);
  shoal__live_shares_free(&s);
  char buf[128];
  shoal__slurm_output_path("/o/%x-%j-%u-%%.out", 12, "train", "ann", buf, sizeof buf);
  CHECK(!strcmp(buf, "/o/train-12-ann-%.out"));
}

/* sshare -a -n -P -o Account,User,RawShares,NormShares,EffectvUsage,FairShare on the testbed's Slurm with
 * accounting (Fair Tree, PriorityDecayHalfLife 1 min) after `sacctmgr modify account research set fairshare=3` and
 * a 100 s job of user nobody in account other: the FairShare column holds Fair Tree's ranks on user lines and
 * nothing on account lines; the weights come from the shares and the decayed usage (EffectvUsage) */
TEST(live_slurm_shares_real_output_weighs_by_usage) {
  const char *text = "root|||0.000000|1.000000|\n"
                     " root|root|1|0.200000|0.000000|1.000000\n"
                     " other||1|0.200000|1.000000|\n"
                     "  other|nobody|1|0.500000|1.000000|0.250000\n"
                     "  other|root|1|0.500000|0.000000|0.500000\n"
                     " research||3|0.600000|0.000000|\n"
                     "  research|root|1|1.000000|0.000000|1.000000\n";
  shoal_live_shares_t s;
  CHECK_OK(shoal__slurm_parse_shares(text, &s));
  CHECK_EQ(s.n, 7);
  CHECK(!strcmp(s.share[0].account, "root") && !s.share[0].user[0] && s.share[0].shares == 0);
  CHECK(!strcmp(s.share[2].account, "other") && !s.share[2].user[0] && s.share[2].shares == 1);
  CHECK_NEAR(s.share[2].norm_shares, 0.2, 1e-9);
  CHECK_NEAR(s.share[2].usage, 1.0, 1e-9);
  CHECK(!strcmp(s.share[3].user, "nobody"));
  CHECK_NEAR(s.share[3].fairshare, 0.25, 1e-9);
  /* research: 3 of the accounts' 4 shares, no usage; other: 1 of 4, all the usage: 1/4 x 2^(-1/0.2) */
  CHECK_NEAR(live_tenant_weight(&s, "research", 0), 0.75, 1e-9);
  CHECK_NEAR(live_tenant_weight(&s, "other", 0), 0.25 / 32, 1e-9);
  CHECK_NEAR(live_tenant_weight(&s, "root", 0), 0, 1e-12);
  /* users: nobody has half of other's users' shares and all its usage (2^(-1/0.5)); root is in all three */
  CHECK_NEAR(live_tenant_weight(&s, "nobody", 1), 0.5 * 0.25 * 0.25 / 32, 1e-12);
  CHECK_NEAR(live_tenant_weight(&s, "root", 1), 0.5 * 0.25 / 32 + 1.0 * 0.75, 1e-9);
  shoal__live_shares_free(&s);
}

static int nracks;
static char rack_nodes[4][64];
static void on_rack(void *arg, int rack, const char *nodes) {
  (void)arg;
  if (rack < 4) snprintf(rack_nodes[rack], 64, "%s", nodes);
  nracks++;
}

TEST(live_slurm_topology_racks) {
  nracks = 0;
  CHECK_OK(shoal__slurm_parse_topology("SwitchName=r0 Level=0 LinkSpeed=1 Nodes=lv1-h[0-3]\n"
                                       "SwitchName=r1 Level=0 LinkSpeed=1 Nodes=lv1-h[4-7]\n"
                                       "SwitchName=core Level=1 LinkSpeed=1 Nodes=lv1-h[0-7] Switches=r[0-1]\n",
                                       on_rack, NULL));
  CHECK_EQ(nracks, 2);
  CHECK(!strcmp(rack_nodes[1], "lv1-h[4-7]"));
}
