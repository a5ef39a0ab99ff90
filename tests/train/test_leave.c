/* A worker asked to leave (its server is reclaimed) leaves at an iteration boundary; the others shrink
 * and finish without a restart, with the same parameters on every survivor. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/train.h"
#include "train_testutil.h"

static volatile int g_leave;
static int g_port, g_leaver = 2, g_ck_every;
static char g_dir[64];

static void *ask_to_leave(void *arg) {
  (void)arg;
  usleep(300000);
  g_leave = 1;
  return NULL;
}

static int leave_rank(int rank, void *arg) {
  (void)arg;
  shoal_comm_t *c = train_test_join(rank, 3, g_port);
  if (!c) return 1;
  char pout[128], flag[128];
  snprintf(pout, sizeof pout, "%s/params", g_dir);
  shoal_train_opts_t o;
  shoal_train_opts_init(&o);
  o.model = SHOAL_MODEL_MLP;
  o.train_subset = 6144;
  o.test_subset = 1000;
  o.epochs = 3;
  o.batch = 32;
  o.lr = 0.05;
  o.quiet = 1;
  o.on_failure_shrink = 1;
  o.grow_every = 0;
  o.leave_flag = &g_leave;
  o.params_out = pout;
  char ck[128];
  snprintf(ck, sizeof ck, "%s/ck", g_dir);
  if (g_ck_every) {
    o.ckpt_path = ck;
    o.ckpt_every = g_ck_every;
  }
  pthread_t t;
  if (rank == g_leaver) pthread_create(&t, NULL, ask_to_leave, NULL);
  shoal_train_result_t res;
  int rc = shoal_train_run(&o, c, &res);
  if (rc) fprintf(stderr, "rank %d: %s\n", rank, shoal_last_error());
  shoal_comm_destroy(c);
  snprintf(flag, sizeof flag, "%s/left%d", g_dir, rank);
  if (!rc && res.left) fclose(fopen(flag, "w"));
  return rc ? 1 : rank == g_leaver ? !res.left : res.left || res.epochs_done != 3 || res.final_test_acc < 0.6;
}

TEST_T(a_worker_asked_to_leave_goes_and_the_others_shrink_and_finish, 240) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK)) shoal_test_skip("dataset-fashion-mnist is not installed");
  snprintf(g_dir, sizeof g_dir, "/tmp/shoal-leave-XXXXXX");
  CHECK(mkdtemp(g_dir));
  g_port = shoal_test_free_port();
  int st[3];
  CHECK_EQ(shoal_test_fork_ranks(3, leave_rank, NULL, 200, st), 3);
  char p0[128], p1[128], l2[128];
  snprintf(p0, sizeof p0, "%s/params", g_dir);
  snprintf(p1, sizeof p1, "%s/params.rank1", g_dir);
  snprintf(l2, sizeof l2, "%s/left2", g_dir);
  CHECK(access(l2, F_OK) == 0);
  FILE *a = fopen(p0, "rb"), *b = fopen(p1, "rb");
  CHECK(a && b);
  int same = 1, ca, cb;
  do {
    ca = fgetc(a), cb = fgetc(b);
    same &= ca == cb;
  } while (ca != EOF && cb != EOF);
  fclose(a), fclose(b);
  CHECK_MSG(same, "the survivors' parameters differ");
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  CHECK(system(cmd) == 0);
}

/* The reclaim races a checkpoint: the leaver is rank 0, the one that writes the checkpoint every 2
 * iterations. It leaves only after its iteration's checkpoint is on disk (written before the boundary's
 * agreement), the survivors' new rank 0 writes the later ones, and the file resumes. */
TEST_T(a_leave_that_races_a_checkpoint_leaves_it_whole, 240) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK)) shoal_test_skip("dataset-fashion-mnist is not installed");
  snprintf(g_dir, sizeof g_dir, "/tmp/shoal-leave-XXXXXX");
  CHECK(mkdtemp(g_dir));
  g_port = shoal_test_free_port();
  g_leaver = 0;
  g_ck_every = 2;
  int st[3];
  CHECK_EQ(shoal_test_fork_ranks(3, leave_rank, NULL, 200, st), 3);
  char ck[128], l0[128];
  snprintf(ck, sizeof ck, "%s/ck", g_dir);
  snprintf(l0, sizeof l0, "%s/left0", g_dir);
  CHECK(access(l0, F_OK) == 0);
  shoal_train_opts_t o;
  shoal_train_opts_init(&o);
  o.train_subset = 6144;
  o.test_subset = 1000;
  o.epochs = 4;
  o.batch = 32;
  o.quiet = 1;
  o.resume_path = ck;
  o.elastic = 1;
  shoal_train_result_t res;
  CHECK_OK(shoal_train_run(&o, NULL, &res)); /* the checkpoint of the finished 3 epochs, then one more */
  CHECK_EQ(res.epochs_done, 4);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  CHECK(system(cmd) == 0);
}
