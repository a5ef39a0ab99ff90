/* The rendezvous key-value store served by rank 0 (one thread) and its
 * blocking client. Protocol (docs/comm.md): frames of
 *   u32 payload length (LE), u8 type, 3 zero bytes, payload.
 * The server opens with CHALLENGE{nonce_s}; the client must answer
 * AUTH{nonce_c, mac_C} before anything else and gets AUTH_OK{mac_A} (mutual
 * proof of SHOAL_TOKEN) or AUTH_FAIL{reason}. Then SET/GET frames. Malformed
 * or unauthenticated input closes that client with a WARN; never the server. */
#ifndef SHOAL_COMM_STORE_H
#define SHOAL_COMM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "comm/auth.h"
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
};
#define SHOAL__STORE_MAX_FRAME (1u << 20)
/* Rank 0 sets this key (u32 -status, then its error text) when it gives up;
 * every parked and later GET with wait then gets an ERROR frame with it. */
#define SHOAL__STORE_ABORT_KEY "abort"
#define SHOAL__STORE_MAGIC 0x53484c53u /* "SLHS" little-endian: "SHLS" */

typedef struct shoal__store_server shoal__store_server_t;

/* Serve on an already listening socket (taken over; closed by stop). */
int  shoal__store_server_start(int listen_fd, const shoal__authkey_t *key, shoal__store_server_t **out);
void shoal__store_server_stop(shoal__store_server_t *s);

typedef struct shoal__store_client {
  int fd;
  char addr[64]; /* host:port of the store, for messages */
} shoal__store_client_t;

/* Connect (retry until dl) and authenticate. A token mismatch gives SHOAL_ERR_AUTH. */
int  shoal__store_connect(const char *host, int port, const shoal__authkey_t *key, shoal__deadline_t dl,
                          shoal__store_client_t *out);
int  shoal__store_set(shoal__store_client_t *c, const char *key, const void *val, size_t len, shoal__deadline_t dl);
/* Get key's value into buf (cap bytes, NUL-terminated when it fits). wait: block
 * until the key exists or dl passes (SHOAL_ERR_TIMEOUT); otherwise a missing key
 * is SHOAL_ERR_NOT_FOUND. */
int  shoal__store_get(shoal__store_client_t *c, const char *key, int wait, void *buf, size_t cap, size_t *len,
                      shoal__deadline_t dl);
void shoal__store_close(shoal__store_client_t *c);

#endif
