/* What the controller is doing, said three ways (status.c in ctl.h): the
 * summary at its end (every job accounted for), the status `shoal sched status`
 * prints (why each job waits, what it holds, the policy's last decision), and
 * metrics in Prometheus' text exposition format. All of it is read from the
 * controller's state; nothing here changes it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "live/ctl.h"

typedef struct out {
  char *b;
  size_t n, cap;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...) {
  if (o->n >= o->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(o->b + o->n, o->cap - o->n, fmt, ap);
  va_end(ap);
  if (k > 0) o->n = o->n + (size_t)k < o->cap ? o->n + (size_t)k : o->cap;
}

typedef struct tally {
  int seen, waiting, running, stopping, unsched, done, completed, failed, cancelled;
  int runs, preempts, resizes, retries, gpus_held;
} tally_t;

static tally_t count(const shoal_live_ctl_t *L) {
  tally_t t;
  memset(&t, 0, sizeof t);
  for (int i = 0; i < L->njobs; i++) {
    const lj_t *x = L->jobs[i];
    if (x->ignored) continue;
    t.seen++;
    t.runs += x->runs, t.preempts += x->preempts, t.resizes += x->resizes, t.retries += x->retries;
    if (x->phase == PH_DONE) {
      t.done++;
      if (!strcmp(x->final, "COMPLETED")) t.completed++;
      else if (!strcmp(x->final, FINAL_USER_CANCELLED)) t.cancelled++;
      else t.failed++;
    } else if (x->unsched[0]) t.unsched++;
    else if (x->phase == PH_RELEASED) t.running++, t.gpus_held += x->j.alloc.workers;
    else if (x->phase == PH_STOPPING) t.stopping++;
    else t.waiting++;
  }
  return t;
}

static const char *phase_word(const lj_t *x) {
  if (x->phase == PH_DONE) return "ended";
  if (x->unsched[0]) return "unschedulable";
  static const char *const w[] = {"waiting", "started", "stopping", "requeued"};
  if (x->phase == PH_RELEASED && !x->ran) return "released";
  if (x->phase == PH_RELEASED) return "running";
  return w[x->phase];
}

/* ---- the summary ---- */

void shoal__live_ctl_summary(shoal_live_ctl_t *L) {
  tally_t t = count(L);
  double jct = 0, first = 1e30, last = 0;
  int nd = 0;
  for (int i = 0; i < L->njobs; i++) {
    const lj_t *x = L->jobs[i];
    if (x->ignored || x->phase != PH_DONE || strcmp(x->final, "COMPLETED") || x->j.finish < 0) continue;
    nd++;
    jct += x->j.finish - x->j.arrival;
    if (x->j.arrival < first) first = x->j.arrival;
    if (x->j.finish > last) last = x->j.finish;
  }
  live_log(L, "summary: policy %s, %d jobs seen, %d completed, %d failed, %d cancelled, %d not ended (%d unschedulable) "
           "(avg JCT %.1f s, makespan %.1f s over the completed), starts %d, preemptions %d, resizes %d, retries %d",
           L->ops->name, t.seen, t.completed, t.failed, t.cancelled, t.seen - t.done, t.unsched, nd ? jct / nd : 0,
           nd ? last - first : 0, t.runs, t.preempts, t.resizes, t.retries);
  char stats[256] = "";
  if (L->ops->stats) L->ops->stats(L->pstate, stats, sizeof stats);
  if (stats[0]) live_log(L, "  policy stats: %s", stats);
  for (int i = 0; i < L->njobs; i++) {
    const lj_t *x = L->jobs[i];
    if (x->ignored) continue;
    char start[32] = "-", fin[32] = "-", jc[32] = "-";
    if (x->first_run >= 0) snprintf(start, sizeof start, "%.1f", x->first_run);
    if (x->phase == PH_DONE && x->j.finish >= 0) snprintf(fin, sizeof fin, "%.1f", x->j.finish);
    /* a JCT for jobs that ran to their end, not for jobs cancelled (or failed) before they ever ran */
    if (x->phase == PH_DONE && x->first_run >= 0 && x->j.finish >= 0 && strcmp(x->final, FINAL_USER_CANCELLED))
      snprintf(jc, sizeof jc, "%.1f", x->j.finish - x->j.arrival);
    live_log(L, "  job %ld: %s arrival %.1f start %s finish %s jct %s preemptions %d resizes %d retries %d", x->sid,
             x->phase == PH_DONE ? x->final : x->unsched[0] ? "unschedulable" : "not ended", x->j.arrival, start, fin, jc,
             x->preempts, x->resizes, x->retries);
  }
}

/* ---- status ---- */

static void why_waiting(const shoal_live_ctl_t *L, const lj_t *x, char *buf, size_t cap) {
  int free_gpus = L->c ? L->c->gpus_free : 0;
  int need = x->j.min_workers < x->j.gpus ? x->j.min_workers : x->j.gpus;
  if (x->unsched[0]) snprintf(buf, cap, "%s", x->unsched);
  else if (x->phase == PH_HELD && x->start_failing) snprintf(buf, cap, "its start failed; retried every tick");
  else if (x->phase == PH_HELD && free_gpus < need)
    snprintf(buf, cap, "needs %d GPU%s; %d free of %d usable", need, need == 1 ? "" : "s", free_gpus, L->usable_gpus);
  else if (x->phase == PH_HELD)
    snprintf(buf, cap, "the policy keeps it waiting (%d GPUs free; it needs %d)", free_gpus, need);
  else if (x->phase == PH_RELEASED && !x->ran) snprintf(buf, cap, "released; the manager has not started it yet");
  else if (x->phase == PH_STOPPING)
    snprintf(buf, cap, "asked to checkpoint (%s), grace until %.1f%s", x->stop_why, x->stop_at, x->killed ? ", killed" : "");
  else if (x->phase == PH_REQUEUED) snprintf(buf, cap, "requeued; %s", x->nwant ? "starts at its new placement" : "waits");
  else buf[0] = 0;
}

static void job_line(const shoal_live_ctl_t *L, const lj_t *x, out_t *o) {
  char place[512] = "-", why[240];
  size_t k = 0;
  for (int i = 0; i < x->j.alloc.n && k < sizeof place; i++)
    k += (size_t)snprintf(place + k, sizeof place - k, "%s%s:%d", i ? "," : "", L->node[x->j.alloc.p[i].machine],
                          x->j.alloc.p[i].workers);
  why_waiting(L, x, why, sizeof why);
  put(o, "%-8ld %-10s %-10s %-13s %4d %3d-%-4d %-24s %s\n", x->sid, x->user[0] ? x->user : "-",
      x->account[0] ? x->account : "-", phase_word(x), x->j.gpus, x->j.min_workers, x->j.max_workers, place, why);
}

int shoal__live_ctl_status(const shoal_live_ctl_t *L, char *buf, size_t cap) {
  out_t o = {buf, 0, cap};
  tally_t t = count(L);
  put(&o, "controller %s (%s), policy %s%s%s, %s manager %s\n", L->id, L->where, L->ops->name,
      L->partition_s[0] ? ", partition " : "", L->partition_s, L->mgr.ops->name,
      L->down_since > 0 ? "NOT ANSWERING" : "answering");
  put(&o, "clock %.1f s; nodes %d with %d GPUs, %d usable now", live_wall(L) - L->epoch, L->nnodes, L->capacity_gpus,
      L->usable_gpus);
  for (int m = 0; m < L->nnodes; m++) {
    if (!L->usable[m]) put(&o, "; %s %s", L->node[m], L->node_state[m]);
    else if (L->foreign_gpus[m] || L->foreign_cpus[m] >= L->node_cpus[m])
      put(&o, "; %s: %d GPU%s held by others", L->node[m], L->foreign_gpus[m], L->foreign_gpus[m] == 1 ? "" : "s");
  }
  put(&o, "\njobs %d: %d running (%d GPUs), %d stopping, %d waiting, %d unschedulable, %d ended (%d completed, "
          "%d failed, %d cancelled)\n", t.seen, t.running, t.gpus_held, t.stopping, t.waiting, t.unsched, t.done,
      t.completed, t.failed, t.cancelled);
  if (L->last.text[0]) put(&o, "last decision at %.1f s (%.2f ms): %s\n", L->last.at, L->last.ms, L->last.text);
  else put(&o, "last decision: none changed anything yet\n");
  put(&o, "%-8s %-10s %-10s %-13s %4s %-8s %-24s %s\n", "job", "user", "account", "state", "gpus", "range", "placement",
      "why");
  for (int i = 0; i < L->njobs; i++)
    if (!L->jobs[i]->ignored && L->jobs[i]->phase != PH_DONE) job_line(L, L->jobs[i], &o);
  return o.n < cap ? 0 : -1;
}

/* ---- metrics ---- */

static void metric(out_t *o, const char *name, const char *type, const char *help) {
  put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int shoal__live_ctl_metrics(const shoal_live_ctl_t *L, char *buf, size_t cap) {
  out_t o = {buf, 0, cap};
  tally_t t = count(L);
  metric(&o, "shoal_live_jobs", "gauge", "The controller's jobs by state.");
  put(&o, "shoal_live_jobs{state=\"waiting\"} %d\nshoal_live_jobs{state=\"running\"} %d\n"
          "shoal_live_jobs{state=\"stopping\"} %d\nshoal_live_jobs{state=\"unschedulable\"} %d\n"
          "shoal_live_jobs{state=\"completed\"} %d\nshoal_live_jobs{state=\"failed\"} %d\n"
          "shoal_live_jobs{state=\"cancelled\"} %d\n", t.waiting, t.running, t.stopping, t.unsched, t.completed, t.failed,
      t.cancelled);
  metric(&o, "shoal_live_decisions_total", "counter", "Policy decisions that changed an allocation.");
  put(&o, "shoal_live_decisions_total %ld\n", L->decisions);
  metric(&o, "shoal_live_decision_seconds", "summary", "Wall time of the policy's schedule() calls.");
  put(&o, "shoal_live_decision_seconds_sum %.6f\nshoal_live_decision_seconds_count %ld\n", L->decide_ms_sum / 1e3, L->schedules);
  metric(&o, "shoal_live_decision_seconds_max", "gauge", "Longest schedule() call so far.");
  put(&o, "shoal_live_decision_seconds_max %.6f\n", L->decide_ms_max / 1e3);
  metric(&o, "shoal_live_runs_total", "counter", "Runs of the controller's jobs the manager started.");
  put(&o, "shoal_live_runs_total %d\n", t.runs);
  metric(&o, "shoal_live_restarts_total", "counter", "Runs requeued (preemptions, resizes, drains, retries).");
  put(&o, "shoal_live_restarts_total %ld\n", L->requeues);
  metric(&o, "shoal_live_preemptions_total", "counter", "Preemptions (the policy's and a drain's).");
  put(&o, "shoal_live_preemptions_total %d\n", t.preempts);
  metric(&o, "shoal_live_resizes_total", "counter", "Resizes and migrations.");
  put(&o, "shoal_live_resizes_total %d\n", t.resizes);
  metric(&o, "shoal_live_gpus", "gauge", "GPUs of the controller's nodes: all, usable now, held by its jobs.");
  put(&o, "shoal_live_gpus{kind=\"capacity\"} %d\nshoal_live_gpus{kind=\"usable\"} %d\nshoal_live_gpus{kind=\"held\"} %d\n",
      L->capacity_gpus, L->usable_gpus, t.gpus_held);
  metric(&o, "shoal_live_utilization", "gauge", "GPUs held by the controller's jobs over the usable ones.");
  put(&o, "shoal_live_utilization %.4f\n", L->usable_gpus ? (double)t.gpus_held / L->usable_gpus : 0.0);
  metric(&o, "shoal_live_manager_up", "gauge", "1 if the cluster manager answered at the last round.");
  put(&o, "shoal_live_manager_up %d\n", L->down_since > 0 ? 0 : 1);
  return o.n < cap ? 0 : -1;
}
