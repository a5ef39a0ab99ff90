/* Files shipped inside the library, so that an installed shoal finds them
 * without a data directory: the interference model measured on shoal's testbed
 * (data/interference-measured.json) and the learned placer's trained weights
 * (data/marl-default.weights). The assembler includes the bytes (paths
 * relative to the repository root, where make runs the compiler); the Makefile
 * makes this object depend on them. */
#include <string.h>

#include "sched/model/interference.h"
#include "sched/model/marl_net.h"

#define SHIP(sym, path)                                                                     \
  __asm__(".section .rodata\n.balign 16\n.globl " #sym "\n.hidden " #sym "\n.type " #sym ", @object\n" #sym \
          ":\n.incbin \"" path "\"\n.byte 0\n.size " #sym ", . - " #sym "\n.previous\n")

SHIP(shoal__shipped_interference_json, "data/interference-measured.json");
extern const char shoal__shipped_interference_json[];

int shoal__interference_shipped(shoal_interference_t **out) {
  return shoal__interference_parse("shipped data/interference-measured.json", shoal__shipped_interference_json,
                                   strlen(shoal__shipped_interference_json), out);
}

SHIP(shoal__shipped_marl_weights, "data/marl-default.weights");
extern const char shoal__shipped_marl_weights[];

int shoal__marl_net_shipped(shoal_marl_net_t **out) {
  return shoal__marl_net_parse("shipped data/marl-default.weights", shoal__shipped_marl_weights,
                               strlen(shoal__shipped_marl_weights), out);
}
