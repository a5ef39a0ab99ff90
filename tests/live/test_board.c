/* The controller's HTTP board: /status and /metrics over its abstract socket, what else is asked answered 404, a
 * controller that is not there named; a controller publishes after each round. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runner.h"
#include "live/board.h"
#include "live/http_get.h"
#include "world.h"

TEST(live_board_serves_status_and_metrics) {
  char id[64];
  snprintf(id, sizeof id, "test-%d", (int)getpid());
  shoal_live_board_t *b;
  CHECK_OK(shoal__live_board_create(NULL, &b));
  CHECK_OK(shoal__live_board_listen_id(b, id));
  char *body = NULL;
  CHECK_OK(shoal__live_board_fetch(id, "/status", 10, &body));
  CHECK_CONTAINS(body, "has not finished a round yet");
  free(body);
  shoal__live_board_set(b, "the status\n", "shoal_live_ticks_total 3\n");
  CHECK_OK(shoal__live_board_fetch(id, "/status", 10, &body));
  CHECK(!strcmp(body, "the status\n"));
  free(body);
  CHECK_OK(shoal__live_board_fetch(id, "/metrics", 10, &body));
  CHECK(!strcmp(body, "shoal_live_ticks_total 3\n"));
  free(body);
  CHECK(shoal__live_board_fetch(id, "/nothing", 10, &body) != 0);
  /* one board per identity */
  shoal_live_board_t *b2;
  CHECK_OK(shoal__live_board_create(NULL, &b2));
  CHECK(shoal__live_board_listen_id(b2, id) == SHOAL_ERR_ADDR_IN_USE);
  shoal__live_board_destroy(b2);
  shoal__live_board_destroy(b);
  CHECK(shoal__live_board_fetch(id, "/status", 10, &body) == SHOAL_ERR_CONNECT);
  CHECK_CONTAINS(shoal_last_error(), "is it running");
  CHECK(shoal__live_board_create("127.0.0.1:notaport", &b2) == SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "--metrics '127.0.0.1:notaport': expected ADDR:PORT");
}

TEST(live_controller_publishes_each_round) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  char id[64];
  snprintf(id, sizeof id, "pub-%d", (int)getpid());
  w.cfg.id = id;
  CHECK_OK(world_start(&w));
  shoal_live_board_t *b;
  CHECK_OK(shoal__live_board_create(NULL, &b));
  CHECK_OK(shoal__live_board_listen_id(b, id));
  shoal__live_ctl_publish(w.L, b);
  world_submit(&w, 1, 1, 1, 50, 1);
  world_run(&w, 2, 0);
  char *body = NULL;
  CHECK_OK(shoal__live_board_fetch(id, "/status", 10, &body));
  CHECK_CONTAINS(body, "controller pub-");
  CHECK_CONTAINS(body, "running");
  free(body);
  CHECK_OK(shoal__live_board_fetch(id, "/metrics", 10, &body));
  CHECK_CONTAINS(body, "shoal_live_jobs{state=\"running\"} 1");
  free(body);
  shoal__live_ctl_publish(w.L, NULL);
  shoal__live_board_destroy(b);
  world_fini(&w);
}

/* The one bounded GET the controller's clients use (shoal sched status, the loaning router's load): an answer,
 * one longer than its bound refused, an HTTP error and a refused connection each said as what they are. */
TEST(live_http_get_bounded_and_its_failures) {
  int port = shoal_test_free_port();
  char addr[64], url[128];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  shoal_live_board_t *b;
  CHECK_OK(shoal__live_board_create(addr, &b));
  shoal__live_board_set(b, "the status\n", "shoal_live_ticks_total 3\n");
  char *body = NULL;
  shoal__live_get_fail_t f;
  snprintf(url, sizeof url, "http://%s/metrics", addr);
  CHECK_OK(shoal__live_http_get(url, NULL, 10, 1024, &body, &f));
  CHECK(!strcmp(body, "shoal_live_ticks_total 3\n"));
  free(body);
  CHECK(shoal__live_http_get(url, NULL, 10, 8, &body, &f) != 0); /* 25 bytes against a bound of 8 */
  CHECK(f.curl != 0 && f.err[0]);
  snprintf(url, sizeof url, "http://%s/nothing", addr);
  CHECK(shoal__live_http_get(url, NULL, 10, 1024, &body, &f) != 0);
  CHECK_EQ(f.curl, 0);
  CHECK_EQ(f.http, 404);
  shoal__live_board_destroy(b);
  CHECK(shoal__live_http_get(url, NULL, 10, 1024, &body, &f) != 0);
  CHECK_EQ(f.curl, 7); /* CURLE_COULDNT_CONNECT */
  CHECK_CONTAINS(f.err, "onnect");
}
