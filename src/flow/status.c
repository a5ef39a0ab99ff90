/* `shoal flow status`: one line per host agent, read from the host's flow segment (status.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/flowseg.h"
#include "flow/status.h"

static void rate_str(uint64_t bytes_per_s, char *b, size_t cap) {
  double bits = 8.0 * (double)bytes_per_s;
  if (bits >= 1e9) snprintf(b, cap, "%.2fGbit/s", bits / 1e9);
  else if (bits >= 1e6) snprintf(b, cap, "%.1fMbit/s", bits / 1e6);
  else snprintf(b, cap, "%.0fkbit/s", bits / 1e3);
}

static void ago(uint64_t then_ns, uint64_t now_ns, char *b, size_t cap) {
  if (!then_ns) snprintf(b, cap, "never");
  else snprintf(b, cap, "%.1f s ago", (double)(now_ns > then_ns ? now_ns - then_ns : 0) / 1e9);
}

int shoal__flow_status_line(const char *host, char *buf, size_t cap) {
  const shoal__flowseg_t *seg;
  int rc = shoal__flowseg_open_ro(host, &seg);
  if (rc == SHOAL_ERR_NOT_FOUND) {
    snprintf(buf, cap, "%-12s no agent (no flow segment)", host);
    return 0;
  }
  if (rc) return rc;
  uint64_t now = shoal__now_ns();
  int32_t pid = atomic_load_explicit(&seg->agent_pid, memory_order_relaxed);
  int alive = pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) && shoal__flowseg_agent_alive(seg, now);
  int live = 0, paced = 0;
  char rates[512] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < seg->nflows; i++) {
    const shoal__flowseg_flow_t *f = &seg->flow[i];
    if (atomic_load_explicit(&f->state, memory_order_relaxed) != SHOAL__FLOWSEG_LIVE) continue;
    if (!atomic_load_explicit(&f->bytes, memory_order_relaxed)) continue; /* an idle connection of the mesh */
    live++;
    uint64_t r = atomic_load_explicit(&f->applied, memory_order_relaxed);
    if (!r) continue;
    paced++;
    char rs[32];
    rate_str(r, rs, sizeof rs);
    if (used + 48 < sizeof rates)
      used += (size_t)snprintf(rates + used, sizeof rates - used, "%sr%u->r%u %s", used ? ", " : "", f->src_rank,
                               f->dst_rank, rs);
  }
  char contact[32], bg[32];
  ago(atomic_load_explicit(&seg->ctl_contact_ns, memory_order_relaxed), now, contact, sizeof contact);
  rate_str(atomic_load_explicit(&seg->background_bps, memory_order_relaxed), bg, sizeof bg);
  if (!alive)
    /* paced here is what the ranks still apply: they drop the limit of an agent whose beat stopped */
    snprintf(buf, cap, "%-12s agent not running%s; flows %d, paced %d; last controller contact %s", seg->host,
             pid > 0 ? " (its beat stopped)" : "", live, paced, contact);
  else
    snprintf(buf, cap, "%-12s agent pid %d, controller %s; flows %d, paced %d%s%s; background %s; last controller contact %s",
             seg->host, (int)pid, seg->ctl_addr, live, paced, paced ? ": " : "", rates, bg, contact);
  shoal__flowseg_close(seg);
  return 0;
}
