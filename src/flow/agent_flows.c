/* The agent's reading of the flow segment, once per slot (agent.h). */
#include <string.h>

#include "flow/agent.h"

static int status_of(shoal__fagent_flow_t *m, uint64_t iter, uint64_t sent, uint64_t prev) {
  if (iter == 0) return sent > m->last_bytes ? SHOAL__FS_RESCHEDULE : SHOAL__FS_IDLE; /* no marks: no phases */
  if (m->started == iter) return SHOAL__FS_RESCHEDULE;
  uint64_t start = prev / 100 > SHOAL__FAGENT_START_BYTES ? SHOAL__FAGENT_START_BYTES : prev / 100;
  if (sent > start && sent > 0) {
    m->started = iter;
    return SHOAL__FS_NEW_ITER;
  }
  return SHOAL__FS_IDLE;
}

void shoal__fagent_collect(const shoal__flowseg_t *seg, shoal__fagent_flow_t *mem, shoal__fp_report_t *r, int *idx) {
  r->n = 0;
  for (uint32_t i = 0; i < seg->nflows && r->n < SHOAL__FP_MAX_FLOWS; i++) {
    const shoal__flowseg_flow_t *s = &seg->flow[i];
    shoal__fagent_flow_t *m = &mem[i];
    m->reported = 0;
    if (atomic_load_explicit(&s->state, memory_order_acquire) != SHOAL__FLOWSEG_LIVE) continue;
    if (m->gen != s->gen) memset(m, 0, sizeof *m), m->gen = s->gen;
    uint64_t iter = atomic_load_explicit(&s->iter, memory_order_acquire);
    uint64_t mark = atomic_load_explicit(&s->iter_bytes, memory_order_relaxed);
    uint64_t prev = atomic_load_explicit(&s->prev_iter_bytes, memory_order_relaxed);
    uint64_t bytes = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    if (bytes == 0) continue; /* a connection of the mesh that carries nothing */
    uint64_t sent = iter ? (bytes > mark ? bytes - mark : 0) : bytes;
    shoal__fp_flow_t *f = &r->flows[r->n];
    memset(f, 0, sizeof *f);
    f->job = s->job;
    f->src_rank = s->src_rank;
    f->dst_rank = s->dst_rank;
    f->src_ip = s->src_ip;
    f->dst_ip = s->dst_ip;
    f->status = (uint8_t)status_of(m, iter, iter ? sent : bytes, prev);
    f->iter = iter;
    f->volume = prev;
    f->sent = sent;
    m->last_bytes = bytes;
    m->reported = 1;
    idx[r->n++] = (int)i;
  }
}
