/* The frames of the peer handshake (docs/comm.md), one layout for every link
 * that authenticates with SHOAL_TOKEN: the world's mesh and the links of a
 * shrink, each with its own magic so that one cannot be taken for the other.
 *
 *   acceptor A -> C   hello   {magic, nonce_a}
 *   connector C -> A  answer  {magic, from, to, session, nonce_c, MAC_C}
 *   acceptor A -> C   verdict {status, MAC_A (only when status is OK)}
 *
 * Both MACs bind the two nonces, both ranks and the session (world or
 * communicator id), so a stale rank of another job, a stray client or a
 * wrong token is refused without the token ever being sent. The socket I/O,
 * deadlines and the meaning of a non-OK status stay with the caller. */
#ifndef SHOAL_COMM_HANDSHAKE_H
#define SHOAL_COMM_HANDSHAKE_H

#include <stdint.h>

#include "comm/bootstrap/auth.h"

#define SHOAL__HS_HELLO_BYTES (4 + SHOAL__NONCE_BYTES)
#define SHOAL__HS_ANSWER_BYTES (4 + 4 + 4 + 8 + SHOAL__NONCE_BYTES + 8)
#define SHOAL__HS_VERDICT_BYTES (4 + 8)
#define SHOAL__HS_OK 0u /* verdict status: accepted; other values are the caller's refusals */

/* One link: who connects to whom, in which session, under which magic. */
typedef struct shoal__hs_link {
  uint32_t magic;
  int from, to;       /* connector's and acceptor's rank */
  uint64_t session;   /* world id or communicator id */
} shoal__hs_link_t;

/* Acceptor: the greeting with a fresh nonce `na` (kept for the answer). */
void shoal__hs_hello(uint32_t magic, uint8_t na[SHOAL__NONCE_BYTES], unsigned char hello[SHOAL__HS_HELLO_BYTES]);

/* Connector: the answer to `hello` for `link`, with a fresh nonce `nc` (kept
 * for the verdict). -1 when the hello does not carry link->magic. */
int shoal__hs_answer(const shoal__authkey_t *key, const shoal__hs_link_t *link,
                     const unsigned char hello[SHOAL__HS_HELLO_BYTES], uint8_t nc[SHOAL__NONCE_BYTES],
                     unsigned char ans[SHOAL__HS_ANSWER_BYTES]);

/* Acceptor: read an answer to the greeting with nonce `na`. -1 when it does
 * not carry `magic`; otherwise *link is what the connector claims and the
 * result is 1 when its MAC proves the token, 0 when it does not. */
int shoal__hs_read_answer(const shoal__authkey_t *key, uint32_t magic, const uint8_t na[SHOAL__NONCE_BYTES],
                          const unsigned char ans[SHOAL__HS_ANSWER_BYTES], shoal__hs_link_t *link);

/* Acceptor: the verdict `status` on `ans` (MAC_A only when SHOAL__HS_OK). */
void shoal__hs_verdict(const shoal__authkey_t *key, uint32_t status, const uint8_t na[SHOAL__NONCE_BYTES],
                       const unsigned char ans[SHOAL__HS_ANSWER_BYTES], unsigned char verdict[SHOAL__HS_VERDICT_BYTES]);

/* Connector: the verdict's status; *proved is 1 when the acceptor's MAC
 * proves the token (meaningful only for SHOAL__HS_OK). */
uint32_t shoal__hs_read_verdict(const shoal__authkey_t *key, const shoal__hs_link_t *link,
                                const unsigned char hello[SHOAL__HS_HELLO_BYTES], const uint8_t nc[SHOAL__NONCE_BYTES],
                                const unsigned char verdict[SHOAL__HS_VERDICT_BYTES], int *proved);

#endif
