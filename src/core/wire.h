/* Little-endian encoding of wire integers: every protocol of shoal (the store, the peer links, the flow
 * agents and controller) writes its integers this way. */
#ifndef SHOAL_CORE_WIRE_H
#define SHOAL_CORE_WIRE_H

#include <stdint.h>

static inline void shoal__put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void shoal__put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t shoal__get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static inline uint64_t shoal__get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

#endif
