/* SipHash-2-4 (Aumasson & Bernstein, 2012): a keyed 64-bit hash, used as the
 * MAC of shoal's challenge-response handshakes so SHOAL_TOKEN never crosses
 * the wire. Reference: https://github.com/veorq/SipHash (the test vectors in
 * tests/comm/test_bootstrap.c come from its vectors.h). */
#ifndef SHOAL_CORE_SIPHASH_H
#define SHOAL_CORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t shoal__siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
