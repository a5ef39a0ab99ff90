/* One bounded HTTP GET (libcurl), for the controller's clients: `shoal sched status` asking a controller's board
 * and the controller asking a router for its load. */
#ifndef SHOAL_LIVE_HTTP_GET_H
#define SHOAL_LIVE_HTTP_GET_H

#include <stddef.h>

/* Why a GET failed: libcurl's code (CURLcode; 0 when the transfer went through; -1 when no handle could be
 * made: out of memory), the HTTP status (0 when none came), and libcurl's own words for the failure (its error
 * buffer, else curl_easy_strerror; "" when the transfer went through). */
typedef struct shoal__live_get_fail {
  int curl;
  long http;
  char err[256];
} shoal__live_get_fail_t;

/* GET url within deadline_s, over the abstract Unix socket `abstract` (its name without the leading NUL) when
 * not NULL. 0 on an HTTP 200 with *body its answer (malloc'ed, NUL-ended; "" when empty); otherwise nonzero with
 * *fail saying why (an answer longer than cap bytes stops the transfer: a write error). */
int shoal__live_http_get(const char *url, const char *abstract, double deadline_s, size_t cap, char **body,
                         shoal__live_get_fail_t *fail);

#endif
