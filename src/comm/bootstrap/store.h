/* The rendezvous key-value store served by rank 0 (one thread) and its
 * blocking client. Protocol (docs/comm.md): frames of
 *   u32 payload length (LE), u8 type, 3 zero bytes, payload.
 * The server opens with CHALLENGE{nonce_s}; the client must answer
 * AUTH{nonce_c, mac_C} before anything else and gets AUTH_OK{mac_A} (mutual
 * proof of SHOAL_TOKEN) or AUTH_FAIL{reason}. Then SET/GET frames. Malformed
 * or unauthenticated input closes that client with a WARN; never the server. */
#ifndef SHOAL_COMM_STORE_H
#define SHOAL_COMM_STORE_H

#include <netinet/in.h>

#include <stddef.h>
#include <stdint.h>

#include "comm/bootstrap/auth.h"
#include "core/clock.h"

enum shoal__store_frame {
  SHOAL__STORE_CHALLENGE = 1,
  SHOAL__STORE_AUTH = 2,
  SHOAL__STORE_AUTH_OK = 3,
  SHOAL__STORE_AUTH_FAIL = 4,
  SHOAL__STORE_SET = 5,   /* u32 key length, key, value */
  SHOAL__STORE_GET = 6,   /* u8 wait, key */
  SHOAL__STORE_VALUE = 7, /* value */
  SHOAL__STORE_NOT_FOUND = 8,
  SHOAL__STORE_ERROR = 9, /* text */
  SHOAL__STORE_JOIN = 10, /* u32 rank, u32 world size, job id: checked against rank 0's (reply VALUE or ERROR) */
  /* The door of a running job (door.c): same framing and authentication, served by its rank 0. */
  SHOAL__STORE_ENTER = 11,   /* new process -> door: u8 job id length, job id, its registration */
  SHOAL__STORE_ADMIT = 12,   /* door -> new process: u64 world id, u32 rank, u32 size, size registrations */
  SHOAL__STORE_VERDICT = 13, /* door -> new process: u32 1 (the new communicator is in use) or 0 (abandoned) */
};
#define SHOAL__JOB_ID_MAX 64
#define SHOAL__STORE_MAX_FRAME (1u << 20)
/* Rank 0 sets this key (u32 -status, then its error text) when it gives up;
 * every parked and later GET with wait then gets an ERROR frame with it. */
#define SHOAL__STORE_ABORT_KEY "abort"
#define SHOAL__STORE_MAGIC 0x53484c53u /* "SLHS" little-endian: "SHLS" */

typedef struct shoal__store_server shoal__store_server_t;

/* Serve on an already listening socket (taken over; closed by stop). The
 * store belongs to one job: world size `size` and job id `job` (SHOAL_JOB_ID,
 * may be ""). A JOIN of another job is refused; a JOIN with another world
 * size or a rank that already joined abandons the rendezvous (every waiting
 * rank gets the reason): the job is misconfigured, or two jobs without job
 * ids share the port, and nobody can tell which rank is the stranger. */
int  shoal__store_server_start(int listen_fd, const shoal__authkey_t *key, int size, const char *job,
                               shoal__store_server_t **out);
void shoal__store_server_stop(shoal__store_server_t *s);

typedef struct shoal__store_client {
  int fd;
  char addr[64]; /* host:port of the store, for messages */
} shoal__store_client_t;

/* Connect to the store at ip:port (host: how the user named it, for messages; retry until dl) and
 * authenticate. A token mismatch gives SHOAL_ERR_AUTH. */
int  shoal__store_connect(const char *host, struct in_addr ip, int port, const shoal__authkey_t *key, shoal__deadline_t dl,
                          shoal__store_client_t *out);
int  shoal__store_set(shoal__store_client_t *c, const char *key, const void *val, size_t len, shoal__deadline_t dl);
/* Get key's value into buf (cap bytes, NUL-terminated when it fits). wait: block
 * until the key exists or dl passes (SHOAL_ERR_TIMEOUT); otherwise a missing key
 * is SHOAL_ERR_NOT_FOUND. */
int  shoal__store_get(shoal__store_client_t *c, const char *key, int wait, void *buf, size_t cap, size_t *len,
                      shoal__deadline_t dl);
void shoal__store_close(shoal__store_client_t *c);
/* One frame on a blocking-with-deadline exchange (the door and its clients use them too). read: the
 * payload's first cap bytes in buf (the rest is read and dropped), its full length in *len. Errors name
 * `what`. */
int  shoal__store_frame_write(int fd, int type, const void *p1, size_t n1, const void *p2, size_t n2,
                              shoal__deadline_t dl, const char *what);
int  shoal__store_frame_read(int fd, int *type, void *buf, size_t cap, size_t *len, shoal__deadline_t dl,
                             const char *what);
/* Register as `rank` of a world of `size` in job `job`: 0, or the store's
 * refusal (SHOAL_ERR_CONFIG, text naming both sides). */
int  shoal__store_join(shoal__store_client_t *c, int rank, int size, const char *job, shoal__deadline_t dl);

#endif
