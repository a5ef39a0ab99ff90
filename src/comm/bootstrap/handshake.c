/* The peer handshake's frames and MACs (handshake.h). */
#include "comm/bootstrap/handshake.h"

#include <string.h>

#include "comm/bootstrap/sock.h"

/* What both MACs bind besides the nonces: the two ranks and the session. */
static void ctx_pack(unsigned char ctx[16], const shoal__hs_link_t *l) {
  shoal__put_u32(ctx, (uint32_t)l->from);
  shoal__put_u32(ctx + 4, (uint32_t)l->to);
  shoal__put_u64(ctx + 8, l->session);
}

void shoal__hs_hello(uint32_t magic, uint8_t na[SHOAL__NONCE_BYTES], unsigned char hello[SHOAL__HS_HELLO_BYTES]) {
  shoal__auth_random(na, SHOAL__NONCE_BYTES);
  shoal__put_u32(hello, magic);
  memcpy(hello + 4, na, SHOAL__NONCE_BYTES);
}

int shoal__hs_answer(const shoal__authkey_t *key, const shoal__hs_link_t *link,
                     const unsigned char hello[SHOAL__HS_HELLO_BYTES], uint8_t nc[SHOAL__NONCE_BYTES],
                     unsigned char ans[SHOAL__HS_ANSWER_BYTES]) {
  if (shoal__get_u32(hello) != link->magic) return -1;
  unsigned char ctx[16];
  shoal__auth_random(nc, SHOAL__NONCE_BYTES);
  ctx_pack(ctx, link);
  shoal__put_u32(ans, link->magic);
  shoal__put_u32(ans + 4, (uint32_t)link->from);
  shoal__put_u32(ans + 8, (uint32_t)link->to);
  shoal__put_u64(ans + 12, link->session);
  memcpy(ans + 20, nc, SHOAL__NONCE_BYTES);
  shoal__put_u64(ans + 20 + SHOAL__NONCE_BYTES, shoal__auth_mac(key, 'C', hello + 4, nc, ctx, sizeof ctx));
  return 0;
}

int shoal__hs_read_answer(const shoal__authkey_t *key, uint32_t magic, const uint8_t na[SHOAL__NONCE_BYTES],
                          const unsigned char ans[SHOAL__HS_ANSWER_BYTES], shoal__hs_link_t *link) {
  if (shoal__get_u32(ans) != magic) return -1;
  shoal__hs_link_t l = {magic, (int)shoal__get_u32(ans + 4), (int)shoal__get_u32(ans + 8), shoal__get_u64(ans + 12)};
  unsigned char ctx[16];
  ctx_pack(ctx, &l);
  *link = l;
  return shoal__get_u64(ans + 20 + SHOAL__NONCE_BYTES) == shoal__auth_mac(key, 'C', na, ans + 20, ctx, sizeof ctx);
}

void shoal__hs_verdict(const shoal__authkey_t *key, uint32_t status, const uint8_t na[SHOAL__NONCE_BYTES],
                       const unsigned char ans[SHOAL__HS_ANSWER_BYTES], unsigned char verdict[SHOAL__HS_VERDICT_BYTES]) {
  uint64_t mac = 0;
  if (status == SHOAL__HS_OK) {
    shoal__hs_link_t l = {0, (int)shoal__get_u32(ans + 4), (int)shoal__get_u32(ans + 8), shoal__get_u64(ans + 12)};
    unsigned char ctx[16];
    ctx_pack(ctx, &l);
    mac = shoal__auth_mac(key, 'A', ans + 20, na, ctx, sizeof ctx);
  }
  shoal__put_u32(verdict, status);
  shoal__put_u64(verdict + 4, mac);
}

uint32_t shoal__hs_read_verdict(const shoal__authkey_t *key, const shoal__hs_link_t *link,
                                const unsigned char hello[SHOAL__HS_HELLO_BYTES], const uint8_t nc[SHOAL__NONCE_BYTES],
                                const unsigned char verdict[SHOAL__HS_VERDICT_BYTES], int *proved) {
  unsigned char ctx[16];
  ctx_pack(ctx, link);
  *proved = shoal__get_u64(verdict + 4) == shoal__auth_mac(key, 'A', nc, hello + 4, ctx, sizeof ctx);
  return shoal__get_u32(verdict);
}
