/* The live controller beside Slurm (docs/live.md):
 *   shoal submit       sbatch --hold with the job's shoal parameters in its comment
 *   shoal sched serve  watches squeue --json / sinfo --json, decides with a shoal
 *                      policy (policy.h, the simulator's objects) on the live
 *                      clock, and acts through scontrol: start (NumNodes,
 *                      ReqNodeList, Gres, StartTime=now, release), preempt
 *                      (USR1 to the batch script; the job checkpoints and exits
 *                      SHOAL_EXIT_REQUEUE, or is killed after the grace; then
 *                      requeuehold), resize (preempt, then start at the new
 *                      size). A job that exits 0 has finished, also when it was
 *                      being preempted: it is never run again.
 * State lives in Slurm (comment = parameters, hold = not started by us,
 * released = started) plus an append-only journal (epoch and the placements
 * given), so a restarted controller loses no job and starts none twice. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "sched/model/json.h"
#include "sched/model/place.h"
#include "live.h"
#include "sched/policy.h"
#include "options.h"
#include "testbed/testbed.h"

#define COMMENT_TAG "shoal:"
#define MAX_NODES 256
#define CMD_DEADLINE_S 20

/* ---- running Slurm's commands ---- */

/* Run argv, capture stdout into a malloc'ed buffer (if out), bounded. 0 on exit 0. */
static int slurm_cmd(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int slurm_cmd(char **out, const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char full[2200];
  snprintf(full, sizeof full, "timeout %d %s", CMD_DEADLINE_S, cmd);
  FILE *f = popen(full, "r");
  if (!f) return -1;
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  if (!b) {
    pclose(f);
    return -1;
  }
  size_t k;
  while ((k = fread(b + n, 1, cap - n - 1, f)) > 0) {
    n += k;
    if (n + 1 == cap) {
      char *nb = realloc(b, cap * 2);
      if (!nb) break;
      b = nb, cap *= 2;
    }
  }
  b[n] = 0;
  int st = pclose(f);
  if (out) *out = b;
  else free(b);
  return (WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 0 : -1;
}

static const char *jstr(const shoal_json_t *o, const char *k) {
  const shoal_json_t *v = shoal__json_get(o, k);
  return v && v->type == SHOAL_JSON_STR ? v->str : "";
}
static double jnum(const shoal_json_t *o, const char *k) {
  const shoal_json_t *v = shoal__json_get(o, k);
  return v && (v->type == SHOAL_JSON_NUM || v->type == SHOAL_JSON_BOOL) ? v->num : 0;
}

/* The first error Slurm put in its JSON answer (squeue/sinfo exit 0 with "errors" and an empty list when
 * slurmctld does not answer), NULL if none: such an answer is not an empty queue. */
static const char *slurm_json_error(const shoal_json_t *root) {
  const shoal_json_t *e = shoal__json_get(root, "errors");
  if (!e || e->type != SHOAL_JSON_ARR || e->n == 0) return NULL;
  const shoal_json_t *first = e->kids[0];
  const char *d = jstr(first, "description");
  if (!*d) d = jstr(first, "error");
  return *d ? d : "an error without description";
}

/* ---- shoal submit ---- */

static int enter_testbed(const char *tb) {
  if (!tb) return 0;
  char err[512];
  if (shoal__tb_slurm_enter(tb, err, sizeof err)) return fprintf(stderr, "shoal: --testbed %s: %s\n", tb, err), -1;
  return 0;
}

/* single-quote for sh */
static void shq(char *dst, size_t cap, const char *s) {
  size_t n = 0;
  if (cap < 3) return;
  dst[n++] = '\'';
  for (; *s && n + 5 < cap; s++) {
    if (*s == '\'') memcpy(dst + n, "'\\''", 4), n += 4;
    else dst[n++] = *s;
  }
  dst[n++] = '\'';
  dst[n] = 0;
}

typedef struct submit_cli {
  const char *tb, *name, *model, *output;
  long gpus, minw, maxw;
  double work;
} submit_cli_t;

/* --work STEPS: the job's length in steps, > 0 */
static int parse_work(const char *n, const char *v, void *f) {
  char *e;
  double w = strtod(v, &e);
  if (*e || !(w > 0)) return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': steps > 0", n, v);
  *(double *)f = w;
  return 0;
}

#define SHOAL_OPTS_STRUCT submit_cli_t
static const shoal_opt_t submit_opts[] = {
    OPT_STRING("--testbed", "NAME", tb, "the Slurm of `shoal testbed up --slurm` NAME", .expect = "a testbed name"),
    OPT_LONG("--gpus", "N", gpus, 1, 4096, "GPUs (workers) the job asks for"),
    OPT_LONG("--min", "N", minw, 1, 4096, "fewest workers the job runs with (elastic policies)", .def = "--gpus"),
    OPT_LONG("--max", "N", maxw, 1, 4096, "most workers the job runs with (elastic policies)", .def = "--gpus"),
    OPT_STRING("--model", "NAME", model, "the job's model, for the speed model"),
    OPT_CALL("--work", "STEPS", work, double, parse_work, "the job's length in steps", .def = "unknown",
             .expect = "steps > 0"),
    OPT_STRING("--name", "NAME", name, "Slurm's job name"),
    OPT_STRING("--output", "FILE", output, "the job's output (appended)", .def = "Slurm's", .expect = "a file"),
    OPT_END,
};

static const shoal_opts_spec_t submit_spec = {
    .name = "shoal submit",
    .usage = "usage: shoal submit [--testbed NAME] [--gpus N] [--min N] [--max N] [--model NAME] [--work STEPS]\n"
             "                    [--name NAME] [--output FILE] -- COMMAND [ARGS...]\n"
             "Submits COMMAND to Slurm held (sbatch --hold) with comment 'shoal:gpus=N:min=..:max=..:model=..:work=..'\n"
             "for `shoal sched serve` to place. The batch script runs `srun COMMAND` on every node of the\n"
             "allocation (one task per node, --gres gpu:<workers on that node>, SHOAL_MASTER_ADDR = the first node);\n"
             "a USR1 to the batch script asks for a checkpoint before a preemption or resize: the job exits\n"
             SHOAL_EXIT_REQUEUE_STR " after checkpointing (requeue me); exit 0 means finished (shoal train --preemptible\n"
             "does both). Prints the Slurm job id.\n",
    .opts = submit_opts,
    .args = SHOAL_ARGS_AFTER_DDASH,
};

int shoal_cmd_submit(int argc, char **argv) {
  submit_cli_t c = {.name = "shoal-job", .model = "resnet50", .gpus = 1};
  shoal_opts_res_t res;
  int st = shoal_opts_parse(&submit_spec, argc, argv, &c, &res);
  if (st != SHOAL_OPTS_GO) return st;
  if (res.ncmd < 1) return fprintf(stderr, "shoal submit: no command (shoal submit --gpus 2 -- shoal train ...)\n"), 2;
  const char *tb = c.tb, *name = c.name, *model = c.model, *output = c.output;
  long gpus = c.gpus, minw = c.minw, maxw = c.maxw;
  double work = c.work;
  if (!minw) minw = gpus;
  if (!maxw) maxw = gpus;
  if (minw > gpus || maxw < gpus) return fprintf(stderr, "shoal submit: need --min <= --gpus <= --max\n"), 2;
  for (const char *ch = model; *ch; ch++)
    if (*ch == ':' || *ch == '=' || *ch == ' ' || *ch == '\'')
      return fprintf(stderr, "shoal submit: --model '%s': no ':', '=', quote or space\n", model), 2;
  if (enter_testbed(tb)) return 1;
  char cmd[8192], q[1024];
  size_t n = 0;
  n += (size_t)snprintf(cmd + n, sizeof cmd - n, "srun --kill-on-bad-exit=1 -N $SLURM_JOB_NUM_NODES -n $SLURM_JOB_NUM_NODES --ntasks-per-node=1");
  for (int k = 0; k < res.ncmd && n < sizeof cmd; k++) {
    shq(q, sizeof q, res.cmd[k]);
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %s", q);
  }
  if (n >= sizeof cmd - 1) return fprintf(stderr, "shoal submit: command too long\n"), 2;
  /* The batch script forwards USR1 (checkpoint request) to the job's tasks and gives them the
   * rendezvous: the allocation's first node, a port from the job id, and a job identity per run
   * (a rank left over from an earlier run of a requeued job cannot join the next one). */
  char script[9000];
  snprintf(script, sizeof script,
           "trap 'scancel --signal=USR1 $SLURM_JOB_ID.0 2>/dev/null' USR1; "
           "export SHOAL_MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) "
           "SHOAL_MASTER_PORT=$((20000 + SLURM_JOB_ID %% 20000)) SHOAL_JOB_ID=slurm:$SLURM_JOB_ID.r${SLURM_RESTART_COUNT:-0}; "
           "export MASTER_ADDR=$SHOAL_MASTER_ADDR MASTER_PORT=$SHOAL_MASTER_PORT; "
           "%s & p=$!; while :; do wait $p; rc=$?; kill -0 $p 2>/dev/null || exit $rc; done",
           cmd);
  char qs[9500], qn[256], qo[600] = "";
  shq(qs, sizeof qs, script);
  shq(qn, sizeof qn, name);
  if (output) {
    char t[512];
    shq(t, sizeof t, output);
    snprintf(qo, sizeof qo, "-o %s --open-mode=append", t);
  }
  char *out = NULL;
  char comment[256];
  snprintf(comment, sizeof comment, COMMENT_TAG "gpus=%ld:min=%ld:max=%ld:model=%s:work=%.0f", gpus, minw, maxw, model,
           work);
  int rc = slurm_cmd(&out, "sbatch --hold --parsable --job-name %s --comment %s --gres=gpu:1 --ntasks-per-node=1 %s --wrap %s",
                     qn, comment, qo, qs);
  if (rc) {
    fprintf(stderr, "shoal submit: sbatch failed%s%s\n", out && *out ? ": " : "", out ? out : "");
    free(out);
    return 1;
  }
  printf("%s", out);
  free(out);
  return 0;
}

/* ---- the controller ---- */

enum { PH_HELD, PH_RELEASED, PH_STOPPING, PH_REQUEUED, PH_DONE };

typedef struct lj {
  long sid;
  int phase;
  double stop_at;
  int killed;     /* PH_STOPPING: the grace ran out, SIGKILL sent */
  int start_failing; /* PH_HELD: a start failed; retried every tick while the policy keeps the placement (want) */
  int retries;    /* requeues after the job failed on its own */
  int req_restarts; /* PH_REQUEUED: Slurm's restart count of the ended run we requeued (the requeue counts one,
                     * so an ended record with a higher count is news), -1 when held without a requeue */
  shoal_place_t want[MAX_NODES];
  int nwant;
  char final[32];
  shoal_job_t j;
} lj_t;

typedef struct live {
  const char *journal_path;
  FILE *journal;
  double epoch, grace, tick;
  int nnodes;
  char node[MAX_NODES][64];
  int drained[MAX_NODES];
  shoal_res_t blocked[MAX_NODES];
  shoal_cluster_t *c;
  shoal_speed_t *speed;
  shoal_sched_t s;
  const shoal_policy_ops_t *ops;
  void *pstate;
  lj_t **jobs;
  int njobs, cap;
  shoal_job_t **touched;
  shoal_alloc_t *prev;
  int ntouched;
  struct {
    double at;
    int64_t tag;
  } timers[4096];
  int ntimers;
  int starts, preempts, resizes, finished, retried, failed;
  int warned_malleable; /* a job's min was said not to bind the policy */
  double slurm_down_since, slurm_down_said; /* squeue failing since (0: it answers), last said */
  int cancelled;        /* jobs a user cancelled (scancel), waiting or running */
  int retries_max;
  double sinfo_every, sinfo_next;
  FILE *log;
} live_t;

static volatile sig_atomic_t live_stop;
static void on_stop(int sig) { live_stop = sig; }

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void logf_(live_t *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(live_t *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(L->log, "[%8.1f] ", wall() - L->epoch);
  vfprintf(L->log, fmt, ap);
  fputc('\n', L->log);
  fflush(L->log);
  va_end(ap);
}

static void jrec(live_t *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jrec(live_t *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(L->journal, fmt, ap);
  va_end(ap);
  fputc('\n', L->journal);
  fflush(L->journal);
  fsync(fileno(L->journal));
}

static void hook_touch(void *arg, shoal_job_t *j) {
  live_t *L = arg;
  if (j->touched) return;
  shoal_alloc_t *pv = &L->prev[L->ntouched];
  *pv = j->alloc;
  pv->p = NULL;
  if (j->alloc.n) {
    pv->p = malloc((size_t)j->alloc.n * sizeof *pv->p);
    if (!pv->p) abort();
    memcpy(pv->p, j->alloc.p, (size_t)j->alloc.n * sizeof *pv->p);
  }
  L->touched[L->ntouched++] = j;
  j->touched = L->ntouched;
}

static int hook_timer(void *arg, double at, int64_t tag) {
  live_t *L = arg;
  if (L->ntimers == (int)(sizeof L->timers / sizeof L->timers[0]))
    return shoal__seterr(SHOAL_ERR_NOMEM, "live: too many pending timers");
  L->timers[L->ntimers].at = at;
  L->timers[L->ntimers].tag = tag;
  L->ntimers++;
  return 0;
}

static int node_index(live_t *L, const char *name) {
  for (int i = 0; i < L->nnodes; i++)
    if (!strcmp(L->node[i], name)) return i;
  return -1;
}

/* Bring counters of a holding job to now (the engine's lazy accounting). */
static void advance(live_t *L, shoal_job_t *j) {
  double now = L->s.now, dt = now - j->t_last;
  if (dt > 0 && j->state == SHOAL_JOB_RUN) {
    j->work_done += j->rate * dt;
    if (j->work_done > j->work) j->work_done = j->work;
    j->run_s += dt;
    j->gpu_s += dt * j->alloc.workers;
  }
  if (dt > 0) j->t_last = now;
}

static void set_running(live_t *L, shoal_job_t *j) {
  j->state = SHOAL_JOB_RUN;
  j->rate = shoal_sched_rate(&L->s, j, j->alloc.p, j->alloc.n);
  if (!(j->rate > 0)) j->rate = 1e-9; /* a job Slurm runs progresses; the model only ranks */
  if (j->first_start < 0) j->first_start = L->s.now;
  if (j->alloc.n > j->max_machines) j->max_machines = j->alloc.n;
}

static void place_str(live_t *L, const shoal_place_t *p, int n, char *nodes, size_t cap, int *maxw) {
  size_t k = 0;
  *maxw = 0;
  nodes[0] = 0;
  for (int i = 0; i < n; i++) {
    k += (size_t)snprintf(nodes + k, k < cap ? cap - k : 0, "%s%s", i ? "," : "", L->node[p[i].machine]);
    if (p[i].workers > *maxw) *maxw = p[i].workers;
  }
}

/* start a held job on its placement: journal first, then Slurm */
static int do_start(live_t *L, lj_t *x, const shoal_place_t *p, int n) {
  char nodes[4096], jp[4096];
  int maxw;
  place_str(L, p, n, nodes, sizeof nodes, &maxw);
  size_t k = 0;
  for (int i = 0; i < n; i++) k += (size_t)snprintf(jp + k, sizeof jp - k, "%s%d:%d", i ? "," : "", p[i].machine, p[i].workers);
  jrec(L, "start %ld %.3f %s", x->sid, L->s.now, jp);
  /* one scontrol process for both commands (it exits non-zero if either fails). NumCPUs too: a
   * requeued job keeps the CPU count of its last run, and k nodes with fewer CPUs than that never
   * run (BadConstraints) */
  int rc = slurm_cmd(NULL,
                     "printf 'update JobId=%ld NumNodes=%d-%d NumTasks=%d NumCPUs=%d ReqNodeList=%s Gres=gpu:%d "
                     "StartTime=now\\nrelease %ld\\n' | timeout 20 scontrol -Q",
                     x->sid, n, n, n, n, nodes, maxw, x->sid);
  if (rc) {
    if (!x->start_failing) logf_(L, "job %ld: start on %s failed (scontrol); it stays held and is retried", x->sid, nodes);
    x->start_failing = 1;
    if (p != x->want) memcpy(x->want, p, (size_t)n * sizeof *x->want);
    x->nwant = n;
    return -1;
  }
  x->phase = PH_RELEASED;
  x->nwant = 0;
  x->start_failing = 0;
  L->starts++;
  logf_(L, "start job %ld on %s (%d workers)", x->sid, nodes, x->j.alloc.workers);
  return 0;
}

static void do_stop(live_t *L, lj_t *x) {
  jrec(L, "stop %ld %.3f", x->sid, L->s.now);
  slurm_cmd(NULL, "scancel --signal=USR1 --batch %ld", x->sid); /* checkpoint request */
  x->phase = PH_STOPPING;
  x->killed = 0;
  x->stop_at = L->s.now + L->grace;
}

/* an ended run of the job (Slurm's restart count `restarts`) goes back to the queue, held (Slurm requeues
 * ended batch jobs too) */
static int do_requeue(live_t *L, lj_t *x, const char *why, int restarts) {
  x->req_restarts = restarts;
  if (slurm_cmd(NULL, "scontrol requeuehold %ld", x->sid)) {
    logf_(L, "job %ld: requeuehold failed (%s); retried next tick", x->sid, why);
    return -1;
  }
  x->phase = PH_REQUEUED;
  return 0;
}

/* Slurm's exit_code field is the batch script's wait status */
static void exit_desc(int ws, char *buf, size_t cap) {
  if (WIFSIGNALED(ws)) snprintf(buf, cap, "killed by signal %d", WTERMSIG(ws));
  else snprintf(buf, cap, "exit %d", WEXITSTATUS(ws));
}

static lj_t *find_job(live_t *L, long sid) {
  for (int i = 0; i < L->njobs; i++)
    if (L->jobs[i]->sid == sid) return L->jobs[i];
  return NULL;
}

static int parse_comment(const char *c, lj_t *x, const shoal_speed_t *sp) {
  if (strncmp(c, COMMENT_TAG, strlen(COMMENT_TAG))) return -1;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", c + strlen(COMMENT_TAG));
  x->j.gpus = 1;
  x->j.work = 0;
  for (char *sv = NULL, *t = strtok_r(buf, ":", &sv); t; t = strtok_r(NULL, ":", &sv)) {
    char *eq = strchr(t, '=');
    if (!eq) continue;
    *eq++ = 0;
    if (!strcmp(t, "gpus")) x->j.gpus = atoi(eq);
    else if (!strcmp(t, "min")) x->j.min_workers = atoi(eq);
    else if (!strcmp(t, "max")) x->j.max_workers = atoi(eq);
    else if (!strcmp(t, "work")) x->j.work = atof(eq);
    else if (!strcmp(t, "model")) {
      int m = shoal__speed_find_model(sp, eq);
      x->j.model = (int16_t)(m >= 0 ? m : 0);
    }
  }
  if (x->j.gpus < 1) x->j.gpus = 1;
  if (x->j.min_workers < 1 || x->j.min_workers > x->j.gpus) x->j.min_workers = x->j.gpus;
  if (x->j.max_workers < x->j.gpus) x->j.max_workers = x->j.gpus;
  if (!(x->j.work > 0)) x->j.work = 1e9;
  return 0;
}

/* journal replay: epoch and the last placement given to each job */
typedef struct jstate {
  long sid;
  double first_start, last_start;
  double held_s, arrival;
  int stopped, npre, arrived, retries;
  int started, retry_stop; /* a start was recorded; the last stop was a retry's (not a preemption) */
  shoal_place_t p[MAX_NODES];
  int n;
} jstate_t;

static int replay(live_t *L, jstate_t **out, int *nout) {
  *out = NULL;
  *nout = 0;
  FILE *f = fopen(L->journal_path, "r");
  if (!f) return 0;
  char line[8192];
  int ln = 0, cap = 0;
  jstate_t *js = NULL;
  while (fgets(line, sizeof line, f)) {
    ln++;
    long sid;
    double t;
    char pl[8000];
    if (sscanf(line, "epoch %lf", &t) == 1) {
      L->epoch = t;
      continue;
    }
    int isstart = sscanf(line, "start %ld %lf %7999s", &sid, &t, pl) == 3;
    int isretry = !isstart && sscanf(line, "retry %ld %lf", &sid, &t) == 2;
    int isstop = !isstart && (isretry || sscanf(line, "stop %ld %lf", &sid, &t) == 2);
    int isarr = !isstart && !isstop && sscanf(line, "arrive %ld %lf", &sid, &t) == 2;
    if (!isstart && !isstop && !isarr) {
      if (strspn(line, " \t\r\n") != strlen(line)) /* (a line cut by a crash mid-write, or an edit) */
        logf_(L, "journal %s:%d: not a record, ignored: '%.60s'", L->journal_path, ln, strtok(line, "\n"));
      continue;
    }
    jstate_t *e = NULL;
    for (int k = 0; k < *nout; k++)
      if (js[k].sid == sid) e = &js[k];
    if (!e) {
      if (*nout == cap) {
        cap = cap ? cap * 2 : 64;
        jstate_t *nj = realloc(js, (size_t)cap * sizeof *nj);
        if (!nj) break;
        js = nj;
      }
      e = &js[(*nout)++];
      memset(e, 0, sizeof *e);
      e->sid = sid;
      e->stopped = 1;
    }
    if (isretry) e->retries++, e->retry_stop = 1;
    if (isarr) {
      e->arrival = t;
      e->arrived = 1;
    } else if (isstart) {
      if (e->n > 0 && e->stopped && !e->retry_stop) e->npre++;
      e->retry_stop = 0;
      if (!e->started) e->first_start = t, e->started = 1;
      e->n = 0;
      for (char *sv = NULL, *tk = strtok_r(pl, ",", &sv); tk && e->n < MAX_NODES; tk = strtok_r(NULL, ",", &sv)) {
        int m, w;
        if (sscanf(tk, "%d:%d", &m, &w) == 2) e->p[e->n].machine = m, e->p[e->n].workers = (int16_t)w, e->p[e->n].ps = 0, e->n++;
      }
      e->last_start = t;
      e->stopped = 0;
    } else if (!e->stopped) {
      e->held_s += t - e->last_start;
      e->stopped = 1;
    }
  }
  fclose(f);
  *out = js;
  return 0;
}

/* the job's preemptions in the journal: stops followed by a start, and its last stop if no start followed
 * yet (a failure's retry is not one) */
static int journal_preemptions(const jstate_t *e) { return e->npre + (e->stopped && e->n > 0 && !e->retry_stop); }

static int read_nodes(live_t *L, int first, const char *tbname) {
  char *out = NULL;
  shoal_json_t *root = NULL;
  const char *serr = NULL;
  if (slurm_cmd(&out, "sinfo --json") || shoal__json_parse("sinfo --json", out, strlen(out), &root) ||
      (serr = slurm_json_error(root))) {
    fprintf(stderr, "shoal sched serve: sinfo --json failed: %s\n",
            serr ? serr : out && *out ? out : "no answer (Slurm's own error above; is Slurm configured here?)");
    shoal__json_free(root);
    free(out);
    return -1;
  }
  free(out);
  const shoal_json_t *nodes = shoal__json_get(root, "nodes");
  int rc = 0;
  if (first) {
    tb_t *tb = NULL;
    if (tbname) {
      char err[256];
      tb = calloc(1, sizeof *tb);
      if (tb && shoal__tb_load(tbname, tb, err, sizeof err)) free(tb), tb = NULL;
    }
    int rack_of[MAX_NODES], gpus = 1;
    L->nnodes = 0;
    for (int i = 0; nodes && i < nodes->n && L->nnodes < MAX_NODES; i++) {
      const shoal_json_t *nd = nodes->kids[i];
      snprintf(L->node[L->nnodes], 64, "%s", jstr(nd, "name"));
      const char *g = jstr(nd, "gres");
      const char *c = strstr(g, "gpu:");
      if (c) {
        const char *d = strrchr(c, ':');
        int v = atoi(d + 1);
        if (v > gpus) gpus = v;
      }
      rack_of[L->nnodes] = 0;
      if (tb) {
        int h = shoal__tb_host_index(tb, L->node[L->nnodes]);
        if (h >= 0) rack_of[L->nnodes] = tb->h[h].rack;
      }
      L->nnodes++;
    }
    free(tb);
    if (L->nnodes == 0) {
      shoal__json_free(root);
      fprintf(stderr, "shoal sched serve: sinfo lists no nodes\n");
      return -1;
    }
    /* nodes sorted by rack (racks contiguous), one group per rack */
    for (int a = 1; a < L->nnodes; a++)
      for (int b = a; b > 0 && rack_of[b - 1] > rack_of[b]; b--) {
        int t = rack_of[b];
        rack_of[b] = rack_of[b - 1], rack_of[b - 1] = t;
        char tmp[64];
        memcpy(tmp, L->node[b], 64), memcpy(L->node[b], L->node[b - 1], 64), memcpy(L->node[b - 1], tmp, 64);
      }
    shoal_cluster_spec_t cs;
    shoal__cluster_spec_default(&cs);
    cs.ngroups = 0;
    for (int i = 0; i < L->nnodes && cs.ngroups < 8;) {
      int k = i;
      while (k < L->nnodes && rack_of[k] == rack_of[i]) k++;
      shoal_cluster_group_t *g = &cs.group[cs.ngroups++];
      memset(g, 0, sizeof *g);
      g->machines = k - i;
      g->racks = 1;
      g->per_machine.gpus = gpus;
      g->per_machine.cpus = 1e6;
      g->per_machine.mem_gb = 1e6;
      g->nic_gbps = 1;
      i = k;
    }
    if (shoal__cluster_create(&cs, &L->c)) {
      fprintf(stderr, "shoal sched serve: cluster: %s\n", shoal_last_error());
      rc = -1;
    }
  } else {
    for (int i = 0; nodes && i < nodes->n; i++) {
      const shoal_json_t *nd = nodes->kids[i];
      int m = node_index(L, jstr(nd, "name"));
      if (m < 0) continue;
      const char *st = jstr(nd, "state");
      int bad = strstr(st, "down") || strstr(st, "fail") != NULL;
      const shoal_json_t *fl = shoal__json_get(nd, "state_flags");
      for (int k = 0; fl && k < fl->n; k++)
        if (fl->kids[k]->type == SHOAL_JSON_STR && (strstr(fl->kids[k]->str, "DRAIN") || strstr(fl->kids[k]->str, "NOT_RESPONDING")))
          bad = 1;
      if (bad && !L->drained[m]) logf_(L, "node %s is %s: no new work there", L->node[m], st);
      if (!bad && L->drained[m]) {
        shoal__cluster_give(L->c, m, &L->blocked[m]);
        memset(&L->blocked[m], 0, sizeof L->blocked[m]);
        logf_(L, "node %s is back", L->node[m]);
      }
      L->drained[m] = bad;
    }
  }
  shoal__json_free(root);
  return rc;
}

/* a drained node: block whatever is free on it now (more frees up as its jobs leave) */
static void block_drained(live_t *L) {
  for (int m = 0; m < L->nnodes; m++) {
    if (!L->drained[m]) continue;
    shoal_res_t f = L->c->m[m].free;
    if (f.gpus > 0 || f.cpus > 0 || f.mem_gb > 0) {
      if (shoal__cluster_take(L->c, m, &f) == 0) {
        L->blocked[m].gpus += f.gpus;
        L->blocked[m].cpus += f.cpus;
        L->blocked[m].mem_gb += f.mem_gb;
      }
    }
  }
}

/* held by scontrol hold/requeuehold (Slurm keeps priority 0 and the reason on a held job's ended record too) */
static int is_held(const shoal_json_t *o) {
  return jnum(o, "priority") == 0 || strstr(jstr(o, "state_reason"), "Held") != NULL ||
         strstr(jstr(o, "state_reason"), "held") != NULL;
}

static int is_terminal(const char *st) {
  static const char *t[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                            "DEADLINE", "PREEMPTED", NULL};
  for (int i = 0; t[i]; i++)
    if (!strcmp(st, t[i])) return 1;
  return 0;
}

/* the final state of a job a user cancelled, while it waited or ran (counted apart: not a failure to retry).
 * Slurm says CANCELLED also when the controller itself kills a whole job that ignored its checkpoint
 * request, but only after a stop the journal records: so CANCELLED is the user's unless we were stopping
 * it and had sent the kill. */
#define FINAL_USER_CANCELLED "CANCELLED (by the user)"

static void finish_job(live_t *L, lj_t *x, const char *st) {
  shoal_job_t *j = &x->j;
  advance(L, j);
  void (*touch)(void *, shoal_job_t *) = L->s.hooks.touch;
  L->s.hooks.touch = NULL;
  if (j->alloc.n) shoal_sched_assign(&L->s, j, NULL, 0);
  L->s.hooks.touch = touch;
  j->state = SHOAL_JOB_DONE;
  j->rate = 0;
  j->finish = L->s.now;
  shoal__sched_remove_active(&L->s, j);
  x->phase = PH_DONE;
  snprintf(x->final, sizeof x->final, "%s", st);
  if (!strcmp(st, "COMPLETED")) L->finished++;
  else if (!strcmp(st, FINAL_USER_CANCELLED)) L->cancelled++;
  else L->failed++;
  if (L->ops->finish) L->ops->finish(L->pstate, &L->s, j);
  L->s.events |= SHOAL_EV_FINISH;
  logf_(L, "job %ld %s (jct %.1f s, %d preemptions)", x->sid, st, j->finish - j->arrival, j->n_preempt);
}

/* The job lost its nodes outside a decision (it failed, or its node was drained). Policies learn of
 * changes they did not make only through finish and arrive, so it finishes for the policy and arrives
 * again at once: same job, same arrival time, its work and service so far kept; its policy state
 * starts afresh (Tiresias: queue 0). */
static void forced_off(live_t *L, lj_t *x, int preempted) {
  shoal_job_t *j = &x->j;
  advance(L, j);
  void (*touch)(void *, shoal_job_t *) = L->s.hooks.touch;
  L->s.hooks.touch = NULL; /* not a decision */
  if (j->alloc.n) shoal_sched_assign(&L->s, j, NULL, 0);
  L->s.hooks.touch = touch;
  j->state = SHOAL_JOB_DONE;
  j->rate = 0;
  shoal__sched_remove_active(&L->s, j);
  if (L->ops->finish) L->ops->finish(L->pstate, &L->s, j);
  j->state = SHOAL_JOB_WAIT;
  if (preempted) j->n_preempt++; /* a failure's retry is not a preemption */
  memset(j->pkey, 0, sizeof j->pkey);
  memset(j->pint, 0, sizeof j->pint);
  j->t_last = L->s.now;
  shoal__sched_add_active(&L->s, j);
  if (L->ops->arrive) L->ops->arrive(L->pstate, &L->s, j);
  L->s.events |= SHOAL_EV_FINISH | SHOAL_EV_ARRIVAL;
  if (preempted) L->preempts++;
  x->nwant = 0;
}

#define FINAL_IGNORED "ignored"
static int is_ignored(const lj_t *x) { return !strcmp(x->final, FINAL_IGNORED); }

/* The job last added to L->jobs is not the controller's to place or account (it ended before it was ours,
 * or it was released outside the controller): it stays, blank, under its id so that it is not looked at
 * again, and is left out of the summary ("ignored"). */
static int ignore_last_job(live_t *L, long sid) {
  lj_t *x = calloc(1, sizeof *x);
  if (!x) return -1;
  free(L->jobs[L->njobs - 1]);
  x->sid = sid;
  x->phase = PH_DONE;
  x->j.id = L->njobs - 1;
  x->j.state = SHOAL_JOB_DONE;
  x->j.finish = -1;
  snprintf(x->final, sizeof x->final, "%s", FINAL_IGNORED);
  L->jobs[L->njobs - 1] = x;
  return 0;
}

static int tick(live_t *L, const jstate_t *js, int njs) {
  char *out = NULL;
  shoal_json_t *root = NULL;
  const char *serr = NULL;
  if (slurm_cmd(&out, "squeue --json -t all") || shoal__json_parse("squeue --json", out, strlen(out), &root) ||
      (serr = slurm_json_error(root))) {
    /* said at the first failure, then once a minute while Slurm does not answer */
    double now = shoal__now_s();
    if (L->slurm_down_since == 0 || now >= L->slurm_down_said + 60) {
      if (L->slurm_down_since == 0) L->slurm_down_since = now;
      L->slurm_down_said = now;
      logf_(L, "squeue --json failed%s%s (for %.0f s); retrying every tick", serr ? ": Slurm reports: " : "",
            serr ? serr : "", now - L->slurm_down_since);
    }
    shoal__json_free(root);
    free(out);
    return 0;
  }
  if (L->slurm_down_since > 0) {
    logf_(L, "Slurm answers again after %.0f s", shoal__now_s() - L->slurm_down_since);
    L->slurm_down_since = 0;
  }
  free(out);
  /* nodes change rarely (a drain, a failure): sinfo every sinfo_every seconds, not every tick */
  if (shoal__now_s() >= L->sinfo_next) {
    if (read_nodes(L, 0, NULL)) {
      shoal__json_free(root);
      return 0;
    }
    L->sinfo_next = shoal__now_s() + L->sinfo_every;
  }
  L->s.now = wall() - L->epoch;
  for (int i = 0; i < L->s.nactive; i++) advance(L, L->s.active[i]);
  const shoal_json_t *jobs = shoal__json_get(root, "jobs");
  /* arrivals in submit order (ties: job id) */
  int n = jobs ? jobs->n : 0;
  for (int pass = 0; pass < n; pass++) {
    const shoal_json_t *o = jobs->kids[pass];
    const char *c = jstr(o, "comment");
    long sid = (long)jnum(o, "job_id");
    if (strncmp(c, COMMENT_TAG, strlen(COMMENT_TAG)) || find_job(L, sid)) continue;
    lj_t *x = calloc(1, sizeof *x);
    if (!x) return -1;
    x->sid = sid;
    parse_comment(c, x, L->speed);
    shoal_job_t *j = &x->j;
    if (L->ops->malleable && j->min_workers > 1 && !L->warned_malleable) {
      L->warned_malleable = 1; /* once: it holds for every such job */
      logf_(L, "warning: job %ld asks for at least %d workers, but policy %s plans malleable jobs (any worker count "
            "up to max, docs/scheduling.md): it may run such jobs with fewer", sid, j->min_workers, L->ops->name);
    }
    j->id = L->njobs;
    j->row = sid;
    j->arrival = jnum(o, "submit_time") - L->epoch;
    if (j->arrival > L->s.now) j->arrival = L->s.now;
    j->arch = SHOAL_ARCH_ALLREDUCE;
    j->sync = 1;
    j->worker_demand.gpus = 1;
    j->first_start = -1;
    j->finish = -1;
    j->active_index = -1;
    j->t_last = L->s.now;
    j->state = SHOAL_JOB_WAIT;
    if (L->njobs == L->cap) {
      L->cap = L->cap ? L->cap * 2 : 64;
      lj_t **nj = realloc(L->jobs, (size_t)L->cap * sizeof *nj);
      shoal_job_t **nt = realloc(L->touched, (size_t)L->cap * sizeof *nt);
      shoal_alloc_t *np = realloc(L->prev, (size_t)L->cap * sizeof *np);
      if (nj) L->jobs = nj;
      if (nt) L->touched = nt;
      if (np) L->prev = np;
      if (!nj || !nt || !np) return -1;
    }
    L->jobs[L->njobs++] = x;
    const char *st = jstr(o, "job_state");
    const jstate_t *e0 = NULL;
    for (int k = 0; k < njs; k++)
      if (js[k].sid == sid) e0 = &js[k];
    if (is_terminal(st) && !e0) { /* ended without ever being ours (cancelled while held, or another controller's) */
      if (ignore_last_job(L, sid)) return -1;
      continue;
    }
    /* what Slurm shows, with what the journal says we did */
    int ws = (int)jnum(o, "exit_code");
    int completed = !strcmp(st, "COMPLETED") && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    int wants_requeue = is_terminal(st) && WIFEXITED(ws) && WEXITSTATUS(ws) == SHOAL_EXIT_REQUEUE;
    int stopped_by_us = e0 && e0->stopped && e0->n > 0; /* its last start is closed: we asked it to stop */
    int held = is_held(o);
    if (!is_terminal(st) && !held && !stopped_by_us && !(e0 && !e0->stopped)) {
      /* released outside the controller (a user's scontrol release) before it placed the job: Slurm runs it
       * where Slurm likes; placing it now would stop and restart a running job */
      logf_(L, "job %ld: released outside the controller before it was placed: left to Slurm, not accounted", sid);
      if (ignore_last_job(L, sid)) return -1;
      continue;
    }
    /* our kill ends a running job CANCELLED only after a stop we journaled; a cancelled job that was held
     * (Slurm keeps priority 0 on its record) or that we never stopped was the user's */
    int user_cancelled = !completed && !strcmp(st, "CANCELLED") && (!stopped_by_us || held);
    if (e0) x->retries = e0->retries;
    if (completed || user_cancelled ||
        (is_terminal(st) && !stopped_by_us && !wants_requeue && x->retries >= L->retries_max)) {
      /* ours, ended while the controller was down: finished (exit 0 always means finished), cancelled by a
       * user (a checkpointing job exits 75 on scancel's SIGTERM: still the user's cancel), or failed */
      j->finish = jnum(o, "end_time") - L->epoch;
      j->state = SHOAL_JOB_DONE;
      x->phase = PH_DONE;
      if (completed) {
        L->finished++;
        snprintf(x->final, sizeof x->final, "COMPLETED");
      } else if (user_cancelled) {
        L->cancelled++;
        snprintf(x->final, sizeof x->final, "%s", FINAL_USER_CANCELLED);
      } else {
        char d[48];
        exit_desc(ws, d, sizeof d);
        L->failed++;
        snprintf(x->final, sizeof x->final, "%s (%s)", st, d);
      }
      if (e0 && e0->arrived) j->arrival = e0->arrival;
      if (e0) j->first_start = e0->first_start, j->n_preempt = journal_preemptions(e0);
      continue;
    }
    shoal__sched_add_active(&L->s, j);
    const jstate_t *e = e0;
    if (e) j->run_s = e->held_s, j->n_preempt = journal_preemptions(e);
    if (e && e->arrived) j->arrival = e->arrival;
    else jrec(L, "arrive %ld %.3f", sid, j->arrival);
    if (e && e->started) j->first_start = e->first_start;
    if (is_terminal(st)) {
      /* asked to stop (or checkpointed on its own, or failed with retries left) while the controller was
       * down: finish the requeue; the policy places it again */
      x->phase = PH_STOPPING;
      x->killed = 1;
      if (!stopped_by_us && !wants_requeue) {
        x->retries++, L->retried++;
        jrec(L, "retry %ld %.3f", sid, L->s.now);
      } else if (!stopped_by_us && e && e->n > 0) jrec(L, "stop %ld %.3f", sid, L->s.now);
      logf_(L, "job %ld: ended (%s) while the controller was down: requeued", sid, st);
    } else if (stopped_by_us && !(held && !strcmp(st, "PENDING"))) {
      /* the previous controller asked it to checkpoint and died before the requeue: finish that */
      x->phase = PH_STOPPING;
      x->stop_at = L->s.now + L->grace;
      slurm_cmd(NULL, "scancel --signal=USR1 --batch %ld", sid); /* again: it may never have been sent */
      logf_(L, "job %ld: was being preempted; requeue it", sid);
    } else if (!held && e && !e->stopped) { /* started by an earlier controller: take its placement back */
      x->phase = PH_RELEASED;
      if (shoal_sched_assign(&L->s, j, e->p, e->n) == 0) {
        set_running(L, j);
        logf_(L, "job %ld: adopted (running on the placement the journal recorded)", sid);
      }
    } else {
      x->phase = PH_HELD;
      if (e && !e->stopped) jrec(L, "stop %ld %.3f", sid, L->s.now); /* a start that never reached Slurm */
    }
    if (L->ops->arrive) L->ops->arrive(L->pstate, &L->s, j);
    L->s.events |= SHOAL_EV_ARRIVAL;
  }
  /* state changes seen in Slurm */
  for (int k = 0; k < n; k++) {
    const shoal_json_t *o = jobs->kids[k];
    lj_t *x = find_job(L, (long)jnum(o, "job_id"));
    if (!x || x->phase == PH_DONE) continue;
    const char *st = jstr(o, "job_state");
    int held = is_held(o);
    int ws = (int)jnum(o, "exit_code");
    int finished = !strcmp(st, "COMPLETED") && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    /* (requeued: the ended record of the run before the requeue is not news, but exit 0 always is, and so is
     * an end after the requeue: a run the hold did not stop in time, below, may finish, a user may cancel) */
    int restarts = (int)jnum(o, "restart_cnt");
    if (is_terminal(st) && (x->phase != PH_REQUEUED || finished || restarts > x->req_restarts)) {
      char d[48];
      exit_desc(ws, d, sizeof d);
      if (finished) {
        /* finished, also when it was being preempted (it completed within the grace): never run again */
        if (x->phase == PH_STOPPING) logf_(L, "job %ld completed while being preempted: not requeued", x->sid);
        finish_job(L, x, "COMPLETED");
      } else if (!strcmp(st, "CANCELLED") && !(x->phase == PH_STOPPING && x->killed)) {
        /* a user cancelled it (waiting or running; a checkpointing job exits 75 on scancel's SIGTERM, so
         * before that test): not a failure to retry, not a checkpoint to resume */
        finish_job(L, x, FINAL_USER_CANCELLED);
      } else if (x->phase == PH_STOPPING || (WIFEXITED(ws) && WEXITSTATUS(ws) == SHOAL_EXIT_REQUEUE)) {
        /* checkpointed on our request (or killed after the grace): back to the queue, held */
        if (x->phase == PH_RELEASED) {
          /* ... or on its own, unasked: for the policy it stopped (not a preemption) and waits again */
          logf_(L, "job %ld checkpointed on its own (%s): requeued", x->sid, d);
          jrec(L, "stop %ld %.3f", x->sid, L->s.now);
          forced_off(L, x, 0);
        }
        do_requeue(L, x, d, restarts);
      } else if (x->retries < L->retries_max) {
        /* failed on its own (a rank died, a node failed): again from its checkpoint, where the policy
         * places it next */
        x->retries++, L->retried++;
        jrec(L, "retry %ld %.3f", x->sid, L->s.now);
        logf_(L, "job %ld %s (%s): requeued from its checkpoint (retry %d of %d)", x->sid, st, d, x->retries,
              L->retries_max);
        forced_off(L, x, 0);
        do_requeue(L, x, d, restarts);
      } else {
        char why[64];
        snprintf(why, sizeof why, "%s (%s)", st, d);
        finish_job(L, x, why);
      }
      continue;
    }
    if (x->phase == PH_RELEASED && !strcmp(st, "PENDING") && !held && strstr(jstr(o, "state_reason"), "BadConstraints") &&
        x->j.alloc.n > 0) {
      /* Slurm cannot run it as placed: hold it and give the placement again */
      logf_(L, "job %ld: Slurm cannot run it as placed (%s): held and started again", x->sid, jstr(o, "state_reason"));
      if (slurm_cmd(NULL, "scontrol hold %ld", x->sid) == 0) {
        memcpy(x->want, x->j.alloc.p, (size_t)x->j.alloc.n * sizeof *x->want);
        x->nwant = x->j.alloc.n;
        x->phase = PH_REQUEUED;
        x->req_restarts = -1;
      }
      continue;
    }
    if (x->phase == PH_RELEASED && held && !strcmp(st, "PENDING")) {
      /* held again outside the controller (an operator's scontrol hold or requeuehold): it does not run, so
       * for the policy it stopped (not a preemption); held means waiting for the controller, which starts it
       * again where the policy places it */
      logf_(L, "job %ld: held outside the controller (%s): back to the queue", x->sid, jstr(o, "state_reason"));
      jrec(L, "stop %ld %.3f", x->sid, L->s.now);
      forced_off(L, x, 0);
      x->phase = PH_HELD;
      continue;
    }
    if (x->phase == PH_STOPPING && !strcmp(st, "PENDING")) {
      /* released but not started yet (its nodes were still busy): hold it again instead */
      x->req_restarts = -1; /* held, not requeued: an end from now on is news */
      if (held) x->phase = PH_REQUEUED;
      else {
        if (slurm_cmd(NULL, "scontrol hold %ld", x->sid) == 0) x->phase = PH_REQUEUED;
        continue;
      }
    }
    if (x->phase == PH_STOPPING && L->s.now >= x->stop_at && !x->killed && strcmp(st, "COMPLETING")) {
      /* (COMPLETING: it has exited, Slurm is cleaning up its nodes; its end state follows) */
      /* The grace is over and it still runs: it does not checkpoint. Kill its tasks (step 0), not its
       * batch script: the script then ends with srun's failure and the job is requeued once it ended,
       * while a job whose tasks ended 0 just before completes and is not run again (killing the
       * whole job here cancelled such a job 0.2 s before its script exited 0, and it ran twice). A
       * job without a running step is killed whole one grace later. */
      if (slurm_cmd(NULL, "scancel --signal=KILL %ld.0", x->sid) == 0) {
        x->killed = 1;
        logf_(L, "job %ld: no exit within the %.1f s grace: its tasks killed", x->sid, L->grace);
      } else if (L->s.now >= x->stop_at + L->grace && slurm_cmd(NULL, "scancel --signal=KILL %ld", x->sid) == 0) {
        x->killed = 1;
        logf_(L, "job %ld: no exit within twice the %.1f s grace and no running step: killed", x->sid, L->grace);
      }
      continue;
    }
    if (x->phase == PH_REQUEUED && !strcmp(st, "RUNNING")) {
      /* Slurm started it between our look at the queue and the hold (the hold raced its start): it runs,
       * so ask it to stop again; its end is handled like any stop's (exit 0: finished; checkpointed:
       * requeued and held, then started where the policy wants it) */
      logf_(L, "job %ld: started by Slurm before the hold took effect: checkpoint requested again", x->sid);
      do_stop(L, x);
      continue;
    }
    if (x->phase == PH_HELD && x->start_failing && x->nwant > 0 && !strcmp(st, "PENDING") && held) {
      do_start(L, x, x->want, x->nwant); /* the policy's placement, again */
      continue;
    }
    if (x->phase == PH_REQUEUED && !strcmp(st, "PENDING") && held) {
      if (x->nwant > 0) do_start(L, x, x->want, x->nwant);
      else x->phase = PH_HELD;
    }
  }
  shoal__json_free(root);
  block_drained(L);
  /* jobs on a drained node: preempt them (the policy sees the node as full) */
  for (int i = 0; i < L->s.nactive; i++) {
    shoal_job_t *j = L->s.active[i];
    for (int k = 0; k < j->alloc.n; k++)
      if (L->drained[j->alloc.p[k].machine]) {
        lj_t *x = L->jobs[j->id];
        logf_(L, "job %ld runs on drained node %s: requeued", x->sid, L->node[j->alloc.p[k].machine]);
        if (x->phase == PH_RELEASED) do_stop(L, x);
        forced_off(L, x, 1);
        block_drained(L);
        i--; /* forced_off moved j to the end of the active set */
        break;
      }
  }
  /* timers due */
  for (int i = 0; i < L->ntimers;) {
    if (L->timers[i].at <= L->s.now) {
      int64_t tag = L->timers[i].tag;
      L->timers[i] = L->timers[--L->ntimers];
      if (L->ops->timer) L->ops->timer(L->pstate, &L->s, tag);
      L->s.events |= SHOAL_EV_TIMER;
    } else i++;
  }
  /* decide */
  L->ntouched = 0;
  int rc = L->ops->schedule(L->pstate, &L->s);
  L->s.events = 0;
  if (rc < 0) {
    logf_(L, "policy %s failed: %s", L->ops->name, shoal_last_error());
    return -1;
  }
  /* act */
  for (int i = 0; i < L->ntouched; i++) {
    shoal_job_t *j = L->touched[i];
    shoal_alloc_t *old = &L->prev[i];
    j->touched = 0;
    lj_t *x = L->jobs[j->id];
    int changed = !shoal__place_equal(old->p, old->n, j->alloc.p, j->alloc.n);
    if (changed) {
      j->version++;
      if (j->alloc.n == 0) {
        j->state = SHOAL_JOB_WAIT;
        j->rate = 0;
        if (old->n) j->n_preempt++, L->preempts++;
        if (x->phase == PH_RELEASED) {
          logf_(L, "preempt job %ld", x->sid);
          do_stop(L, x);
        }
        x->nwant = 0;
      } else {
        if (old->n) j->n_realloc++;
        set_running(L, j);
        if (x->phase == PH_HELD) do_start(L, x, j->alloc.p, j->alloc.n);
        else {
          if (x->phase == PH_RELEASED) {
            logf_(L, "resize/migrate job %ld: %d -> %d workers", x->sid, old->workers, j->alloc.workers);
            L->resizes++;
            do_stop(L, x);
          }
          memcpy(x->want, j->alloc.p, (size_t)j->alloc.n * sizeof *x->want);
          x->nwant = j->alloc.n;
        }
      }
    }
    free(old->p);
    old->p = NULL;
  }
  L->ntouched = 0;
  return 0;
}

typedef struct serve_cli {
  const char *tb, *policy, *journal, *log, *throughputs, *gpu;
  double tick, grace, max_time, restart_cost;
  long until, retries;
  int raw_spread;
} serve_cli_t;

static int on_table(const void *c) { return ((const serve_cli_t *)c)->throughputs != NULL; }
static const shoal_opt_mode_t serve_modes[] = {{on_table, "applies with --throughputs only (the speed table)", NULL}};

#undef SHOAL_OPTS_STRUCT
#define SHOAL_OPTS_STRUCT serve_cli_t
static const shoal_opt_t serve_opts[] = {
    OPT_STRING("--testbed", "NAME", tb, "the Slurm of `shoal testbed up --slurm` NAME", .expect = "a testbed name"),
    OPT_STRING("--policy", "NAME[:k=v...]", policy, "a shoal policy with its parameters (shoal sim --help lists them)",
               .expect = "a policy name"),
    OPT_STRING("--journal", "FILE", journal, "the epoch and placements given; a restarted controller reads it and\n"
               "adopts the running jobs", .expect = "a file"),
    OPT_DOUBLE("--tick", "S", tick, 0, 1e7, "seconds between looks at Slurm (at least 0.05)"),
    OPT_DOUBLE("--grace", "S", grace, 0, 1e7,
               "seconds a preempted job has to checkpoint and exit (" SHOAL_EXIT_REQUEUE_STR ") before it is killed"),
    OPT_DOUBLE("--restart-cost", "S", restart_cost, 0, 1e7, "what a preemption or resize costs a job (the policies weigh it)"),
    OPT_LONG("--retries", "N", retries, 0, 1000000, "requeues of a job that failed on its own before it is reported failed"),
    OPT_LONG("--until-done", "N", until, 0, 1000000, "exit once N shoal jobs ended", .def = "never"),
    OPT_DOUBLE("--max-time", "S", max_time, 0, 1e7, "exit (status 3) after S seconds", .def = "never"),
    OPT_STRING("--throughputs", "FILE", throughputs, "job speeds from this table (the one `shoal sim --speed table`\n"
               "reads)", .def = "the analytic model", .expect = "a file"),
    OPT_STRING("--gpu", "TYPE", gpu, "the table's GPU type", .when = 1u, .expect = "v100, p100 or k80"),
    OPT_FLAG("--raw-spread", raw_spread, "table: keep spread/consolidated ratios > 1", .when = 1u),
    OPT_STRING("--log", "FILE", log, "the controller's log (appended)", .def = "the standard output", .expect = "a file"),
    OPT_END,
};

static const shoal_opts_spec_t serve_spec = {
    .name = "shoal sched serve",
    .usage = "usage: shoal sched serve [--testbed NAME] [--policy NAME[:k=v...]] [--journal FILE] [options]\n"
             "Controller beside Slurm: places the jobs `shoal submit` left held, with a shoal policy (the simulator's\n"
             "policy objects, on the live clock), through scontrol (docs/live.md).\n",
    .opts = serve_opts,
    .modes = serve_modes,
};

int shoal_sched_serve(int argc, char **argv) {
  serve_cli_t c = {.policy = "fifo", .journal = "shoal-live.journal", .gpu = "v100", .tick = 0.5, .grace = 5,
                   .restart_cost = 10, .retries = 1};
  int st = shoal_opts_parse(&serve_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  const char *tb = c.tb, *policy = c.policy, *jpath = c.journal, *logp = c.log, *tput = c.throughputs, *gpu = c.gpu;
  double tick_s = c.tick > 0.05 ? c.tick : 0.05, grace = c.grace, max_time = c.max_time, restart_cost = c.restart_cost;
  long until = c.until, retries = c.retries;
  int raw_spread = c.raw_spread;
  if (enter_testbed(tb)) return 1;
  live_t *L = calloc(1, sizeof *L);
  if (!L) return 1;
  L->log = stdout;
  if (logp && !(L->log = fopen(logp, "a"))) return fprintf(stderr, "shoal sched serve: --log %s: %s\n", logp, strerror(errno)), free(L), 1;
  L->journal_path = jpath;
  L->grace = grace;
  L->tick = tick_s;
  L->retries_max = (int)retries;
  L->sinfo_every = 2;
  char pname[64], params[512] = "";
  snprintf(pname, sizeof pname, "%s", policy);
  char *colon = strchr(pname, ':');
  if (colon) {
    *colon = 0;
    snprintf(params, sizeof params, "%s", strchr(policy, ':') + 1);
  }
  L->ops = shoal__policy_find(pname);
  int rc = 1;
  jstate_t *js = NULL;
  int njs = 0;
  if (!L->ops) {
    fprintf(stderr, "shoal sched serve: --policy '%s': no such policy (see shoal sim --help)\n", pname);
    goto out;
  }
  if (!(L->journal = fopen(jpath, "a+e"))) { /* (close-on-exec: a Slurm command must not keep the lock) */
    fprintf(stderr, "shoal sched serve: --journal %s: %s\n", jpath, strerror(errno));
    goto out;
  }
  /* one controller per journal: a second one would place the same jobs and interleave its records */
  if (flock(fileno(L->journal), LOCK_EX | LOCK_NB)) {
    fprintf(stderr, "shoal sched serve: --journal %s: %s\n", jpath,
            errno == EWOULDBLOCK ? "in use by another controller (one controller per journal)" : strerror(errno));
    goto out;
  }
  if (replay(L, &js, &njs)) goto out;
  /* a last line cut by a crash mid-write: the next record starts on a line of its own */
  if (fseek(L->journal, -1, SEEK_END) == 0 && fgetc(L->journal) != '\n') {
    fseek(L->journal, 0, SEEK_END);
    fputc('\n', L->journal);
    fflush(L->journal);
  }
  if (L->epoch <= 0) {
    L->epoch = floor(wall());
    jrec(L, "epoch %.3f", L->epoch);
  }
  if (read_nodes(L, 1, tb)) goto out; /* (it said why) */
  if ((tput ? shoal__speed_table_create(tput, gpu, !raw_spread, &L->speed) : shoal__speed_analytic_create(&L->speed)) ||
      shoal__sched_init(&L->s, L->c, L->speed, 256)) {
    fprintf(stderr, "shoal sched serve: %s\n", shoal_last_error());
    goto out;
  }
  L->s.hooks.touch = hook_touch;
  L->s.hooks.timer = hook_timer;
  L->s.engine = L;
  L->s.nvcs = 1;
  L->s.restart_cost = restart_cost;
  if (L->ops->create(&L->s, params, &L->pstate)) {
    fprintf(stderr, "shoal sched serve: policy %s: %s\n", pname, shoal_last_error());
    goto out;
  }
  L->s.events = SHOAL_EV_START;
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  char cdesc[256];
  shoal__cluster_describe(L->c, cdesc, sizeof cdesc);
  logf_(L, "serving with policy %s on %d Slurm nodes (%s); journal %s", L->ops->name, L->nnodes, cdesc, jpath);
  double t_end = max_time > 0 ? shoal__now_s() + max_time : 0;
  rc = 0;
  while (!live_stop) {
    if (tick(L, js, njs)) {
      rc = 1;
      break;
    }
    int done = 0, seen = 0; /* of the jobs seen (not those ignored: other controllers', cancelled before) */
    for (int i = 0; i < L->njobs; i++) {
      int ign = is_ignored(L->jobs[i]);
      seen += !ign;
      done += L->jobs[i]->phase == PH_DONE && !ign;
    }
    /* --until-done counts ended jobs (completed or failed) */
    if (until > 0 && done >= until) break;
    if (t_end > 0 && shoal__now_s() > t_end) {
      logf_(L, "--max-time reached with %d of %d jobs done", done, seen);
      rc = 3;
      break;
    }
    struct timespec ts = {(time_t)L->tick, (long)(fmod(L->tick, 1) * 1e9)};
    nanosleep(&ts, NULL);
  }
  /* summary: every job accounted for */
  double jct = 0, first = 1e30, last = 0;
  int nd = 0, nact = 0;
  for (int i = 0; i < L->njobs; i++) {
    lj_t *x = L->jobs[i];
    nact += x->phase != PH_DONE;
    if (x->phase != PH_DONE || x->j.finish < 0 || strcmp(x->final, "COMPLETED")) continue;
    nd++;
    jct += x->j.finish - x->j.arrival;
    if (x->j.arrival < first) first = x->j.arrival;
    if (x->j.finish > last) last = x->j.finish;
  }
  int nign = 0;
  for (int i = 0; i < L->njobs; i++) nign += is_ignored(L->jobs[i]);
  logf_(L, "summary: policy %s, %d jobs seen, %d completed, %d failed, %d cancelled, %d not ended (avg JCT %.1f s, "
           "makespan %.1f s over the completed), starts %d, preemptions %d, resizes %d, retries %d",
        L->ops->name, L->njobs - nign, L->finished, L->failed, L->cancelled, nact, nd ? jct / nd : 0,
        nd ? last - first : 0, L->starts, L->preempts, L->resizes, L->retried);
  for (int i = 0; i < L->njobs; i++) {
    lj_t *x = L->jobs[i];
    if (is_ignored(x)) continue;
    logf_(L, "  job %ld: %s arrival %.1f start %.1f finish %.1f preemptions %d retries %d", x->sid,
          x->phase == PH_DONE ? x->final : "not ended", x->j.arrival, x->j.first_start, x->j.finish, x->j.n_preempt,
          x->retries);
  }
  if (L->pstate) L->ops->destroy(L->pstate);
out:
  free(js);
  if (L->journal) fclose(L->journal);
  if (L->log && L->log != stdout) fclose(L->log);
  for (int i = 0; i < L->njobs; i++) {
    free(L->jobs[i]->j.alloc.p);
    free(L->jobs[i]);
  }
  free(L->jobs);
  free(L->touched);
  free(L->prev);
  if (L->s.active) shoal__sched_fini(&L->s);
  if (L->speed) shoal__speed_destroy(L->speed);
  if (L->c) shoal__cluster_destroy(L->c);
  free(L);
  return rc;
}
