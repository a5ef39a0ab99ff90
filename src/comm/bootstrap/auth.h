/* Challenge-response authentication with SHOAL_TOKEN (see docs/comm.md).
 * Both sides derive a 128-bit key from the token; each proves it knows the
 * key by a SipHash-2-4 MAC over both sides' fresh nonces, so the token never
 * crosses the wire and a recorded exchange cannot be replayed. */
#ifndef SHOAL_COMM_AUTH_H
#define SHOAL_COMM_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define SHOAL__NONCE_BYTES 16

typedef struct shoal__authkey {
  uint8_t k[16];
} shoal__authkey_t;

/* Key from the token (NULL or "" gives the well-known empty-token key). */
void     shoal__auth_key(const char *token, shoal__authkey_t *out);
/* Fresh random bytes (getrandom, falling back to the clock and pid). */
void     shoal__auth_random(void *buf, size_t n);
uint64_t shoal__auth_random_u64(void);
/* MAC of a role byte ('C' connector / 'A' acceptor), two nonces and an
 * optional context (ranks, world id) that binds the proof to this link. */
uint64_t shoal__auth_mac(const shoal__authkey_t *key, char role, const uint8_t *nonce1, const uint8_t *nonce2,
                         const void *ctx, size_t ctxlen);

#endif
