/* The gradient noise scale estimate and training to an accuracy target. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/train.h"
#include "train/gns.h"

TEST(gns_estimator_recovers_a_known_noise_scale) {
  /* E|g_B|^2 = |G|^2 + tr(Sigma)/B: with |G|^2 = 4 and tr(Sigma) = 400 the noise scale is 100 */
  shoal__gns_t g;
  shoal__gns_init(&g, 1);
  CHECK_EQ(shoal__gns_value(&g), 0);
  for (int i = 0; i < 5; i++) shoal__gns_add(&g, 4 + 400.0 / 16, 16, 4 + 400.0 / 256, 256);
  CHECK_NEAR(shoal__gns_value(&g), 100, 1e-9);
  CHECK_NEAR(shoal__gns_efficiency(100, 64, 128), 164.0 / 228.0, 1e-12);
  CHECK_NEAR(shoal__gns_efficiency(0, 64, 128), 1, 0); /* unknown: no penalty */
  /* noisy pairs: the moving averages still land near the truth */
  shoal__gns_init(&g, 1);
  for (int i = 0; i < 400; i++) {
    double e = (i % 2 ? 1 : -1) * 0.2;
    shoal__gns_add(&g, (4 + 400.0 / 16) * (1 + e), 16, (4 + 400.0 / 256) * (1 - e / 4), 256);
  }
  CHECK_NEAR(shoal__gns_value(&g), 100, 15);
  /* a pair without a bigger batch teaches nothing */
  shoal__gns_init(&g, 1);
  shoal__gns_add(&g, 5, 16, 5, 16);
  CHECK_EQ(g.samples, 0);
}

static const char *fmnist(void) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK)) shoal_test_skip("dataset-fashion-mnist is not installed");
  return SHOAL_FASHION_MNIST_DIR;
}

TEST(training_reports_the_noise_scale_and_stops_at_its_target) {
  shoal_train_opts_t o;
  shoal_train_opts_init(&o);
  o.data_dir = fmnist();
  o.train_subset = 3000;
  o.test_subset = 1000;
  o.epochs = 6;
  o.batch = 32;
  o.lr = 0.05;
  o.gns_every = 4;
  o.target_acc = 0.60;
  o.quiet = 1;
  char csv[] = "/tmp/shoal-gns-XXXXXX";
  CHECK(mkstemp(csv) >= 0);
  o.csv_path = csv;
  shoal_train_result_t res;
  CHECK_OK(shoal_train_run(&o, NULL, &res));
  CHECK_EQ(res.reached_target, 1);
  CHECK(res.epochs_done < 6);
  CHECK(res.final_test_acc >= 0.60);
  CHECK(res.gns > 0 && isfinite(res.gns));
  FILE *f = fopen(csv, "r");
  char line[512];
  CHECK(fgets(line, sizeof line, f));
  CHECK_CONTAINS(line, ",lr,gns");
  CHECK(fgets(line, sizeof line, f));
  double gns = atof(strrchr(line, ',') + 1);
  CHECK(gns > 0);
  fclose(f);
  unlink(csv);
  /* without the estimate the column is 0; without a target every epoch runs */
  o.gns_every = 0;
  o.target_acc = 0;
  o.epochs = 1;
  o.csv_path = NULL;
  CHECK_OK(shoal_train_run(&o, NULL, &res));
  CHECK_EQ(res.reached_target, 0);
  CHECK_EQ(res.gns, 0);
  o.target_acc = 1.5;
  CHECK_EQ(shoal_train_run(&o, NULL, &res), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "--target-acc 1.5");
}
