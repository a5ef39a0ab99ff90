#include "comm/bootstrap/auth.h"

#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/siphash.h"

void shoal__auth_key(const char *token, shoal__authkey_t *out) {
  /* Two SipHash passes under distinct fixed keys give 128 bits from any token. */
  static const uint8_t k0[16] = "shoal-token-key0", k1[16] = "shoal-token-key1";
  size_t n = token ? strlen(token) : 0;
  uint64_t a = shoal__siphash24(k0, token ? token : "", n);
  uint64_t b = shoal__siphash24(k1, token ? token : "", n);
  memcpy(out->k, &a, 8);
  memcpy(out->k + 8, &b, 8);
}

void shoal__auth_random(void *buf, size_t n) {
  uint8_t *p = buf;
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, GRND_NONBLOCK);
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (got < n) { /* no entropy yet (early boot): still unique per process and call */
    static uint64_t ctr;
    for (size_t i = got; i < n; i += 8) {
      uint64_t seed[3] = {shoal__now_ns(), (uint64_t)getpid(), ++ctr};
      static const uint8_t k[16] = "shoal-nonce-key!";
      uint64_t h = shoal__siphash24(k, seed, sizeof seed);
      memcpy(p + i, &h, n - i < 8 ? n - i : 8);
    }
  }
}

uint64_t shoal__auth_random_u64(void) {
  uint64_t v;
  shoal__auth_random(&v, sizeof v);
  return v;
}

uint64_t shoal__auth_mac(const shoal__authkey_t *key, char role, const uint8_t *nonce1, const uint8_t *nonce2,
                         const void *ctx, size_t ctxlen) {
  uint8_t msg[1 + 2 * SHOAL__NONCE_BYTES + 64];
  size_t n = 0;
  msg[n++] = (uint8_t)role;
  memcpy(msg + n, nonce1, SHOAL__NONCE_BYTES);
  n += SHOAL__NONCE_BYTES;
  memcpy(msg + n, nonce2, SHOAL__NONCE_BYTES);
  n += SHOAL__NONCE_BYTES;
  if (ctxlen > 64) ctxlen = 64;
  if (ctx && ctxlen) memcpy(msg + n, ctx, ctxlen);
  n += ctxlen;
  return shoal__siphash24(key->k, msg, n);
}
