/* The inference server: the protocol's answers equal the model's forward pass, every kind of bad request
 * gets a 4xx naming what was wrong, batching, a full queue, slow clients. */
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>

#include "core/clock.h"
#include "serve/oip.h"
#include "serve_testutil.h"
#include "train/model.h"

TEST(oip_requests_are_checked_field_by_field) {
  shoal__oip_input_t in;
  const char *ok = "{\"id\":\"x\",\"inputs\":[{\"name\":\"input\",\"shape\":[1,2,2],\"datatype\":\"UINT8\",\"data\":[[0,255],[51,102]]}]}";
  CHECK_OK(shoal__oip_parse_infer(ok, strlen(ok), 2, 2, 8, &in));
  CHECK_EQ(in.rows, 1);
  CHECK(!strcmp(in.id, "x"));
  CHECK_NEAR(in.x[1], (1.0 - 0.2860) / 0.3530, 1e-6);
  CHECK_NEAR(in.x[2], (0.2 - 0.2860) / 0.3530, 1e-6);
  shoal__oip_input_free(&in);
  static const struct {
    const char *body, *msg;
  } bad[] = {
      {"{\"inputs\":[", "not JSON: line 1 column"},
      {"[1,2]", "must be a JSON object"},
      {"{}", "\"inputs\" must be an array of one tensor"},
      {"{\"inputs\":[{\"name\":\"x\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,0,0,0]}]}", "input 'x' unknown"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"INT64\",\"data\":[0,0,0,0]}]}", "datatype 'INT64'"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,5],\"datatype\":\"FP32\",\"data\":[0,0,0,0,0]}]}", "shape [1,5]: expected [N,4]"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[9,4],\"datatype\":\"FP32\",\"data\":[]}]}", "1 <= N <= 8"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[0,4],\"datatype\":\"FP32\",\"data\":[]}]}", "1 <= N <= 8"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,0,0]}]}", "holds 3 values; the shape says 4"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,0,0,0,0]}]}", "data[4] holds more values"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,\"a\",0,0]}]}", "data[1] is not a number"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,0,-0.5,0]}]}", "data[2] = -0.5 is outside [0, 1]"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"UINT8\",\"data\":[0,0,256,0]}]}", "data[2] = 256 is not an integer in 0..255"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,0,0,0]}],\"outputs\":[{\"name\":\"logits\"}]}", "output 'logits' unknown"},
      {"{\"id\":5,\"inputs\":[]}", "\"id\" must be a string"},
      {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,0,0,0]}],\"inputs\":[]}", "not JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = shoal__oip_parse_infer(bad[i].body, strlen(bad[i].body), 2, 2, 8, &in);
    CHECK_MSG(rc != 0, "accepted: %s", bad[i].body);
    CHECK_CONTAINS(shoal_last_error(), bad[i].msg);
  }
}

TEST(answers_are_the_models_probabilities) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_t *m = write_params(SHOAL_MODEL_MLP, 7, params);
  shoal__server_t *s = start_server(params, 32, 0.001, 64);
  char url[128], *ans = NULL, *body = infer_body(3);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/mlp/infer", shoal__server_port(s));
  CHECK_EQ(http_do("POST", url, body, &ans), 200);
  /* the same rows through the model directly */
  float *x = malloc(3 * 784 * sizeof(float));
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 784; k++) x[r * 784 + k] = ((float)(((r * 7 + k * 13) % 256) / 255.0) - 0.2860f) / 0.3530f;
  shoal__model_forward(m, x, 3);
  const float *z = m->layers[m->nlayers - 1].out;
  json_error_t je;
  json_t *j = json_loads(ans, 0, &je);
  CHECK(j);
  CHECK(!strcmp(json_string_value(json_object_get(j, "id")), "t3"));
  json_t *out = json_array_get(json_object_get(j, "outputs"), 0);
  CHECK(!strcmp(json_string_value(json_object_get(out, "name")), "scores"));
  CHECK_EQ(json_integer_value(json_array_get(json_object_get(out, "shape"), 1)), 10);
  json_t *data = json_object_get(out, "data");
  CHECK_EQ(json_array_size(data), 30);
  for (int r = 0; r < 3; r++) {
    double zmax = z[r * 10], sum = 0;
    for (int c = 1; c < 10; c++) zmax = z[r * 10 + c] > zmax ? z[r * 10 + c] : zmax;
    for (int c = 0; c < 10; c++) sum += exp(z[r * 10 + c] - zmax);
    for (int c = 0; c < 10; c++)
      CHECK_NEAR(json_number_value(json_array_get(data, (size_t)(r * 10 + c))), exp(z[r * 10 + c] - zmax) / sum, 1e-6);
  }
  json_decref(j);
  free(ans);
  /* metadata and health */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/mlp", shoal__server_port(s));
  CHECK_EQ(http_do("GET", url, NULL, &ans), 200);
  CHECK_CONTAINS(ans, "\"shape\":[-1,784]");
  free(ans);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/health/ready", shoal__server_port(s));
  CHECK_EQ(http_do("GET", url, NULL, NULL), 200);
  shoal__server_stop(s);
  shoal_model_destroy(m);
  free(x);
  free(body);
  unlink(params);
}

TEST(bad_requests_get_4xx_with_a_message) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  shoal__server_t *s = start_server(params, 32, 0.001, 64);
  int port = shoal__server_port(s);
  static const struct {
    const char *method, *path, *body;
    int status;
    const char *msg;
  } cases[] = {
      {"POST", "/v2/models/mlp/infer", "{\"inputs\":", 400, "not JSON"},
      {"POST", "/v2/models/mlp/infer", "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,783],\"datatype\":\"FP32\",\"data\":[0]}]}", 400, "shape [1,783]"},
      {"POST", "/v2/models/cnn/infer", "{}", 404, "model 'cnn' not found"},
      {"GET", "/v2/models/mlp/infer", NULL, 405, "not allowed"},
      {"POST", "/v2/models/mlp/versions/2/infer", "{}", 404, "one version, 1"},
      {"GET", "/nothing", NULL, 404, "no such endpoint"},
      {"DELETE", "/v2/health/ready", NULL, 405, "not allowed"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char url[256], *ans = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, cases[i].path);
    CHECK_EQ(http_do(cases[i].method, url, cases[i].body, &ans), cases[i].status);
    CHECK_CONTAINS(ans, cases[i].msg);
    free(ans);
  }
  /* a body over the limit: refused by its Content-Length, and a chunked one as it grows */
  size_t big = (2u << 20);
  char *huge = malloc(big + 1);
  memset(huge, 'a', big);
  huge[big] = 0;
  char url[128], *ans = NULL;
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/mlp/infer", port);
  CHECK_EQ(http_do_expect("POST", url, huge, &ans, 1), 413);
  CHECK_CONTAINS(ans, "larger than the server's limit of 1048576 bytes");
  free(ans);
  /* without Expect the client uploads at once: the server reads and drops the body, so the 413 is never lost
   * to a reset (several rounds: the race, when there was one, lost it now and then) */
  for (int round = 0; round < 5; round++) {
    ans = NULL;
    CHECK_EQ(http_do_expect("POST", url, huge, &ans, 0), 413);
    CHECK_CONTAINS(ans, "larger than the server's limit of 1048576 bytes");
    free(ans);
  }
  int fd = tcp_connect(port);
  CHECK(fd >= 0);
  const char *hdr = "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
  CHECK(send(fd, hdr, strlen(hdr), MSG_NOSIGNAL) == (ssize_t)strlen(hdr));
  char chunk[70000];
  int n = snprintf(chunk, sizeof chunk, "%x\r\n", 65536);
  memset(chunk + n, 'b', 65536);
  memcpy(chunk + n + 65536, "\r\n", 2);
  for (int k = 0; k < 20; k++) CHECK(send(fd, chunk, (size_t)n + 65538, MSG_NOSIGNAL) > 0);
  CHECK(send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL) == 5);
  char resp[1024] = {0};
  size_t got = 0;
  ssize_t k;
  while (got < sizeof resp - 1 && (k = recv(fd, resp + got, sizeof resp - 1 - got, 0)) > 0) got += (size_t)k;
  close(fd);
  CHECK_CONTAINS(resp, "413");
  CHECK_CONTAINS(resp, "larger than the server's limit");
  /* malformed HTTP: a header line without a colon, a Content-Length that is no number: 400 from the
   * library; a request line that is no HTTP at all: the connection is closed. The server goes on. */
  static const char *const junk[] = {"GET /v2 HTTP/1.1\r\nNoColonHere\r\n\r\n",
                                     "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
                                     "GARBAGE\r\n\r\n"};
  for (int j = 0; j < 3; j++) {
    fd = tcp_connect(port);
    CHECK(send(fd, junk[j], strlen(junk[j]), MSG_NOSIGNAL) == (ssize_t)strlen(junk[j]));
    memset(resp, 0, sizeof resp);
    got = 0;
    while (got < sizeof resp - 1 && (k = recv(fd, resp + got, sizeof resp - 1 - got, 0)) > 0) got += (size_t)k;
    close(fd);
    if (j < 2) CHECK_CONTAINS(resp, "400 Bad Request");
    else CHECK_EQ(got, 0);
  }
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/health/ready", port);
  CHECK_EQ(http_do("GET", url, NULL, NULL), 200);
  shoal__server_stats_t *st = malloc(sizeof *st);
  shoal__server_stats(s, st);
  CHECK_EQ(st->ok, 0);
  CHECK(st->refused >= 9);
  free(st);
  free(huge);
  shoal__server_stop(s);
  unlink(params);
}

TEST(a_params_file_of_another_model_is_refused) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_CNN, 7, params));
  shoal__server_opts_t o;
  shoal__server_opts_init(&o);
  o.params_path = params;
  shoal__server_t *s = NULL;
  CHECK_EQ(shoal__server_start(&o, &s), SHOAL_ERR_MISMATCH);
  CHECK(s == NULL);
  CHECK_CONTAINS(shoal_last_error(), params);
  CHECK_CONTAINS(shoal_last_error(), "a mlp model has 535818 parameters");
  o.params_path = "/nonexistent/params";
  CHECK(shoal__server_start(&o, &s) != 0);
  CHECK_CONTAINS(shoal_last_error(), "/nonexistent/params");
  unlink(params);
}

typedef struct {
  int port, status;
  char *body;
} req_arg_t;

static void *post_thread(void *arg) {
  req_arg_t *a = arg;
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/mlp/infer", a->port);
  a->status = http_do("POST", url, a->body, NULL);
  return NULL;
}

TEST(requests_are_batched_and_a_full_queue_is_503) {
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  /* a batch closes when 8 rows are there (the timeout is far away): 8 requests make one batch */
  shoal__server_t *s = start_server(params, 8, 60, 64);
  pthread_t t[8];
  req_arg_t a[8];
  char *body = infer_body(1);
  for (int i = 0; i < 8; i++) {
    a[i] = (req_arg_t){shoal__server_port(s), 0, body};
    pthread_create(&t[i], NULL, post_thread, &a[i]);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ(a[i].status, 200);
  }
  shoal__server_stats_t *st = malloc(sizeof *st);
  shoal__server_stats(s, st);
  CHECK_EQ(st->ok, 8);
  CHECK_EQ(st->batches, 1);
  CHECK_EQ(st->service_n[8], 1);
  shoal__server_stop(s);
  /* a queue of 2 with batches that never fill: the third request is refused at once */
  s = start_server(params, 64, 60, 2);
  for (int i = 0; i < 2; i++) {
    a[i] = (req_arg_t){shoal__server_port(s), 0, body};
    pthread_create(&t[i], NULL, post_thread, &a[i]);
  }
  do {
    shoal__sleep_s(0.01);
    shoal__server_stats(s, st);
  } while (st->queued < 2);
  char url[128], *ans = NULL;
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/mlp/infer", shoal__server_port(s));
  CHECK_EQ(http_do("POST", url, body, &ans), 503);
  CHECK_CONTAINS(ans, "overloaded: 2 requests are waiting");
  free(ans);
  shoal__server_stop(s); /* the two queued are answered first */
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ(a[i].status, 200);
  }
  free(st);
  free(body);
  unlink(params);
}
