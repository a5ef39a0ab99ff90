/* Trace readers: good input round-trips; malformed input gives an error
 * naming the file, the line and the field (never a crash). */
#include <unistd.h>

#include "simtest.h"

static int parse(const char *text, shoal_workload_t *w) {
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  int rc = shoal__trace_parse("t.csv", text, strlen(text), &o, sp, w);
  shoal__speed_destroy(sp);
  return rc;
}

#define HDR "timestamp,duration,num_gpus,gpu_time,cluster\n"

TEST(philly_reader_sorts_and_shifts) {
  shoal_workload_t w;
  CHECK_OK(parse(HDR "2017-10-09 07:01:55,66.0,1,66.0,11cb48\r\n"
                     "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n"
                     "\n"
                     "2017-10-09 06:13:03,10,1,10,11cb48\n",
                 &w));
  CHECK_EQ(w.njobs, 3);
  CHECK_EQ(w.nvcs, 2);
  CHECK_NEAR(w.jobs[0].arrival, 0, 0);
  CHECK_EQ(w.jobs[0].row, 3); /* same time: by row */
  CHECK_EQ(w.jobs[0].gpus, 2);
  CHECK_EQ(w.jobs[1].row, 5);
  CHECK_NEAR(w.jobs[2].arrival, 48 * 60 + 52, 1e-9);
  CHECK(!strcmp(w.vc_names[w.jobs[2].vc], "11cb48"));
  shoal__workload_free(&w);
}

static void expect_error(const char *text, const char *needle1, const char *needle2) {
  shoal_workload_t w;
  int rc = parse(text, &w);
  CHECK_MSG(rc == SHOAL_ERR_PARSE, "accepted or wrong code %d for:\n%s", rc, text);
  CHECK_CONTAINS(shoal_last_error(), needle1);
  if (needle2) CHECK_CONTAINS(shoal_last_error(), needle2);
}

TEST(philly_reader_errors_name_line_and_field) {
  expect_error(HDR "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-13-09 07:01:55,66.0,1,66.0,a\n", "t.csv:3:", "'timestamp'");
  expect_error(HDR "2017-10-09 07:01:55,abc,1,66.0,a\n", "t.csv:2:", "'duration' = 'abc'");
  expect_error(HDR "2017-10-09 07:01:55,0,1,0,a\n", "t.csv:2:", "'duration'");
  expect_error(HDR "2017-10-09 07:01:55,-5,1,-5,a\n", "t.csv:2:", "out of range");
  expect_error(HDR "2017-10-09 07:01:55,5,0,0,a\n", "t.csv:2:", "'num_gpus'");
  expect_error(HDR "2017-10-09 07:01:55,5,1.5,7.5,a\n", "t.csv:2:", "'num_gpus'");
  expect_error(HDR "2017-10-09 07:01:55,5,2,11,a\n", "t.csv:2:", "'gpu_time'");
  expect_error(HDR "2017-10-09 07:01:55,5,2,10,\n", "t.csv:2:", "'cluster'");
  expect_error(HDR "2017-10-09 07:01:55,5,2,10\n", "t.csv:2:", "expected 5 fields");
  expect_error(HDR "2017-10-09 07:01:55,5,2,10,a,b\n", "t.csv:2:", "found 6");
  expect_error(HDR "2017-10-09 07:01:55,nan,2,10,a\n", "t.csv:2:", "'duration'");
  expect_error(HDR "2017-10-09 07:01:55,1e400,2,10,a\n", "t.csv:2:", "'duration'");
  expect_error(HDR "2017-02-30 07:01:55,5,2,10,a\n", "t.csv:2:", "valid date");
  /* Feb 29 only in leap years (divisible by 4, centuries by 400) */
  expect_error(HDR "2017-02-29 07:01:55,5,2,10,a\n", "t.csv:2:", "valid date");
  expect_error(HDR "1900-02-29 07:01:55,5,2,10,a\n", "t.csv:2:", "valid date");
  shoal_workload_t w;
  CHECK_OK(parse(HDR "2016-02-29 07:01:55,5,2,10,a\n2000-02-29 07:01:55,5,2,10,a\n", &w));
  CHECK_NEAR(w.jobs[1].arrival - w.jobs[0].arrival, (double)(365 * 16 + 4) * 86400, 1e-6);
  shoal__workload_free(&w);
  expect_error("", "t.csv", "empty");
  expect_error("time,dur\n", "t.csv:1:", "header");
  expect_error(HDR "2017-10-09 07:01:55,5\0,2,10,a\n", "t.csv:2:", NULL);
}

TEST(shoal_csv_roundtrip_and_errors) {
  shoal_workload_t w;
  CHECK_OK(parse("arrival,gpus,duration,work,model,arch,ps,vc\n"
                 "10,4,100,,resnet50,ps,2,teamA\n"
                 "0,2,,5000,vgg16,allreduce,0,teamB\n",
                 &w));
  CHECK_EQ(w.njobs, 2);
  CHECK_EQ(w.jobs[0].gpus, 2);
  CHECK_NEAR(w.jobs[0].work, 5000, 0);
  CHECK_EQ(w.jobs[1].arch, SHOAL_ARCH_PS);
  CHECK_EQ(w.jobs[1].ps, 2);
  CHECK_NEAR(w.jobs[1].arrival, 10, 0);
  /* write and read back: identical jobs */
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  CHECK_OK(shoal__workload_assign_models(&w, sp, c, &o));
  char path[] = "/tmp/shoal-test-trace-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  CHECK_OK(shoal__trace_write_shoal(path, &w, sp));
  shoal_workload_t w2;
  CHECK_OK(shoal__trace_read(path, &o, sp, &w2));
  unlink(path);
  CHECK_EQ(w2.njobs, 2);
  for (int i = 0; i < 2; i++) {
    CHECK_EQ(w2.jobs[i].gpus, w.jobs[i].gpus);
    CHECK_EQ(w2.jobs[i].model, w.jobs[i].model);
    CHECK_EQ(w2.jobs[i].arch, w.jobs[i].arch);
    CHECK_NEAR(w2.jobs[i].work, w.jobs[i].work, 0);
    CHECK_NEAR(w2.jobs[i].arrival, w.jobs[i].arrival, 0);
  }
  shoal__workload_free(&w2);
  shoal__workload_free(&w);
  shoal__cluster_destroy(c);
  shoal__speed_destroy(sp);
  expect_error("arrival,gpus,duration\n1,2\n", "t.csv:2:", "expected 3 fields");
  expect_error("arrival,gpus,duration,model\n1,2,3,nosuchnet\n", "t.csv:2:", "'model' = 'nosuchnet'");
  expect_error("arrival,gpus,duration,arch\n1,2,3,mpi\n", "t.csv:2:", "'arch'");
  expect_error("arrival,gpus,duration,arch,ps\n1,2,3,allreduce,1\n", "t.csv:2:", "'ps'");
  expect_error("arrival,gpus,duration,arch,ps\n1,2,3,ps,0\n", "t.csv:2:", "'ps'");
  expect_error("arrival,gpus,duration,min_workers\n1,2,3,4\n", "t.csv:2:", "'min_workers'");
  expect_error("arrival,gpus,duration\n-1,2,3\n", "t.csv:2:", "'arrival'");
  expect_error("arrival,gpus\n1,2\n", "t.csv:1:", "duration or work");
  expect_error("arrival,gpus,duration,colour\n", "t.csv:1:", "'colour'");
  expect_error("arrival,gpus,duration\n1,2,\n", "t.csv:2:", "duration'/'work");
}

TEST(philly_filters) {
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.pollux_filter = 1;
  o.max_gpus = 4;
  const char *text = HDR "2017-10-09 00:00:00,30,1,30,a\n"    /* < 60 s: filtered */
                         "2017-10-09 00:00:01,4000000,1,4000000,a\n" /* >= 1000 GPU-h: filtered */
                         "2017-10-09 00:00:02,100,8,800,a\n"   /* larger than 4: dropped and counted */
                         "2017-10-09 00:00:03,100,2,200,a\n";
  shoal_workload_t w;
  CHECK_OK(shoal__trace_parse("f.csv", text, strlen(text), &o, NULL, &w));
  CHECK_EQ(w.njobs, 1);
  CHECK_EQ(w.dropped_filter, 2);
  CHECK_EQ(w.dropped_large, 1);
  shoal__workload_free(&w);
  o.pollux_filter = 0;
  o.max_gpus = 0;
  o.sample = 2;
  CHECK_OK(shoal__trace_parse("f.csv", text, strlen(text), &o, NULL, &w));
  CHECK_EQ(w.njobs, 2);
  shoal__workload_free(&w);
}
