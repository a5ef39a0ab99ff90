/* What a running controller shows over HTTP (libmicrohttpd): GET /status (the
 * text `shoal sched status` prints) and GET /metrics (Prometheus' text
 * exposition format), on an abstract Unix socket named after the controller's
 * identity (always: `shoal sched status --journal FILE` finds it from the
 * journal's first record; abstract sockets leave no file behind and belong to
 * the network namespace the controller runs in) and, if asked, on a TCP
 * address (--metrics ADDR:PORT). The controller's thread writes the texts after
 * each round; the server's thread only copies them out, under a lock. */
#ifndef SHOAL_LIVE_BOARD_H
#define SHOAL_LIVE_BOARD_H

#include <stddef.h>

typedef struct shoal_live_board shoal_live_board_t;

/* The abstract socket name of controller `id` (without the leading NUL). */
void shoal__live_board_socket(const char *id, char *buf, size_t cap);
/* Serve on tcp "ADDR:PORT" (NULL: none), bound in the caller's network namespace now (a controller that then
 * enters a testbed's namespace keeps it reachable from where it was started). Errors name what could not be
 * bound. */
int shoal__live_board_create(const char *tcp, shoal_live_board_t **out);
/* Serve on the abstract socket of controller `id` too (in the network namespace the caller is in now). */
int shoal__live_board_listen_id(shoal_live_board_t *b, const char *id);
void shoal__live_board_set(shoal_live_board_t *b, const char *status, const char *metrics);
void shoal__live_board_destroy(shoal_live_board_t *b);
/* GET path from controller `id`'s socket, within deadline_s: the body (malloc'ed) or an error saying why. */
int shoal__live_board_fetch(const char *id, const char *path, double deadline_s, char **body);

#endif
