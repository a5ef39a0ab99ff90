/* The journal: records that cannot be half-read, a torn tail dropped, damage
 * refused (file, line, the running jobs the controller cannot vouch for) unless
 * recovering, and a restart on the journal that neither loses nor starts twice
 * a job: also with its last record cut at every byte offset, and with one fixed
 * record (a start) cut at every byte offset of it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runner.h"
#include "live/journal.h"
#include "live/replay.h"
#include "world.h"

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  static char buf[1 << 20];
  *len = fread(buf, 1, sizeof buf - 1, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

TEST(live_journal_records_round_trip_and_fail_when_cut) {
  char path[96], line[256];
  snprintf(path, sizeof path, "/tmp/shoal-journal-rt-%d", (int)getpid());
  unlink(path);
  shoal_live_journal_t *j;
  CHECK_OK(shoal__live_journal_open(path, NULL, &j));
  CHECK_OK(shoal__live_journal_append(j, "ctl t1 epoch %.3f", 1000.0));
  CHECK_OK(shoal__live_journal_append(j, "start 34 90.500 h1:2,h3:1"));
  shoal__live_journal_close(j);
  shoal_live_replay_t r;
  shoal_live_journal_scan_t sc;
  CHECK_OK(shoal__live_replay(path, &r, &sc));
  CHECK_EQ(sc.records, 2);
  CHECK_EQ(sc.ndamage, 0);
  shoal_live_jjob_t *e = shoal__live_replay_find(&r, 34);
  CHECK(e && e->open && e->n == 2 && !strcmp(e->node[1], "h3") && e->workers[0] == 2);
  shoal__live_replay_free(&r);
  /* every cut of the last record is a torn tail, never a record: the first one alone stays */
  int k = shoal__live_journal_encode("start 34 90.500 h1:2,h3:1", line, sizeof line);
  CHECK(k > 0);
  size_t len;
  char *all = read_file(path, &len), copy[1024];
  memcpy(copy, all, len);
  for (size_t cut = len - (size_t)k; cut < len; cut++) {
    int fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, copy, cut) == (ssize_t)cut);
    close(fd);
    CHECK_OK(shoal__live_replay(path, &r, &sc));
    CHECK_MSG(sc.records == 1 && sc.ndamage == 0 && sc.torn_line == (cut > len - (size_t)k ? 2 : 0),
              "cut at %zu: %d records, %d damaged, torn line %d", cut, sc.records, sc.ndamage, sc.torn_line);
    CHECK(shoal__live_replay_find(&r, 34) == NULL);
    shoal__live_replay_free(&r);
  }
  /* one changed byte in a record followed by another: damage with its line */
  memcpy(copy + len, copy + len - (size_t)k, (size_t)k);
  copy[len - (size_t)k + 3] ^= 0x20;
  int fd = open(path, O_WRONLY | O_TRUNC);
  CHECK(fd >= 0 && write(fd, copy, len + (size_t)k) == (ssize_t)(len + (size_t)k));
  close(fd);
  CHECK_OK(shoal__live_replay(path, &r, &sc));
  CHECK_EQ(sc.ndamage, 1);
  CHECK_EQ(sc.damage[0].line, 2);
  CHECK_MSG(sc.records == 2, "%d records in '%.*s'", sc.records, (int)(len + (size_t)k), copy);
  shoal__live_replay_free(&r);
  unlink(path);
}

/* Two running jobs, then the journal's middle is damaged: the controller refuses, naming file, line and both
 * jobs; with recover it goes on, the damaged journal kept aside, and adopts both from the manager. */
TEST(live_journal_damage_refused_unless_recovering) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 1, 1, 1, 100, 1), b = world_submit(&w, 1, 1, 1, 100, 1);
  world_run(&w, 5, 0);
  world_crash(&w);
  size_t len;
  char *j = read_file(w.journal, &len);
  char *second = strchr(j, '\n') + 1;
  second[4] = second[4] == 'x' ? 'y' : 'x';
  FILE *f = fopen(w.journal, "w");
  fwrite(j, 1, len, f);
  fclose(f);
  CHECK(world_start(&w) != 0);
  CHECK_LOGGED(&w, "journal %s:2: ", w.journal);
  CHECK_LOGGED(&w, "the running jobs it can no longer vouch for: job %ld (user ann, running on", a);
  CHECK_LOGGED(&w, "job %ld (user ann, running on", b);
  CHECK(world_logged(&w, "start with --recover"));
  w.cfg.recover = 1;
  CHECK_OK(world_start(&w));
  CHECK(world_logged(&w, "recovering (--recover)"));
  CHECK(world_logged(&w, "the damaged one kept as"));
  world_run(&w, 200, 2);
  CHECK_EQ(world_runs(&w, a), 1);
  CHECK_EQ(world_runs(&w, b), 1);
  CHECK_EQ(world_completions(&w, a), 1);
  CHECK_EQ(world_completions(&w, b), 1);
  world_fini(&w);
  char saved[256];
  snprintf(saved, sizeof saved, "rm -f %s.damaged-*", w.journal);
  CHECK(system(saved) == 0);
}

/* a journal replaced by garbage: refused, every running job named */
TEST(live_journal_replaced_by_garbage_is_refused) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 2, 2, 2, 100, 1);
  world_run(&w, 5, 0);
  world_crash(&w);
  write_file(w.journal, "garbage\nmore garbage\n\x01\x02\x03\n");
  CHECK(world_start(&w) != 0);
  CHECK_LOGGED(&w, "vouch for: job %ld (user ann, running on h0,h1)", a);
  CHECK(world_logged(&w, ":1: not a checksummed record"));
  world_fini(&w);
}

/* one controller per journal */
TEST(live_journal_locked_by_its_controller) {
  world_t w;
  world_init(&w, 1, 1, "fifo");
  CHECK_OK(world_start(&w));
  shoal_live_ctl_t *second = NULL;
  int rc = shoal__live_ctl_create(&w.cfg, w.mgr, &second);
  CHECK(rc != 0);
  CHECK_CONTAINS(shoal_last_error(), "in use by another controller");
  /* the refused one gave nothing away: the first still holds its lease and goes on */
  long a = world_submit(&w, 1, 1, 1, 3, 1);
  world_run(&w, 30, 1);
  CHECK_EQ(w.rc, 0);
  CHECK_EQ(world_completions(&w, a), 1);
  world_fini(&w);
}

/* The controller dies after each of its records (restart on the journal as it was then), and the last record is
 * cut at every byte offset: no job is lost, none runs twice, none completes twice. */
TEST_T(live_restart_at_every_record_and_every_cut, 120) {
  world_t w;
  world_init(&w, 2, 1, "srtf");
  CHECK_OK(world_start(&w));
  long id[4];
  id[0] = world_submit(&w, 2, 2, 2, 60, 1);
  int cuts = 0, restarts = 0;
  for (int step = 0; step < 200; step++) {
    if (step == 4) id[1] = world_submit(&w, 1, 1, 1, 6, 1);
    if (step == 5) id[2] = world_submit(&w, 1, 1, 1, 8, 1);
    if (step == 30) id[3] = world_submit(&w, 1, 1, 1, 4, 0);
    size_t before;
    read_file(w.journal, &before);
    world_step(&w, 0.5);
    CHECK_EQ(w.rc, 0);
    size_t after;
    char *j = read_file(w.journal, &after);
    if (after == before || step % 3) continue;
    /* the controller dies; its journal as it left it, cut somewhere in its last record */
    char keep[1 << 16];
    memcpy(keep, j, after);
    const char *last = keep + after - 1;
    while (last > keep && last[-1] != '\n') last--;
    size_t cut = (size_t)(last - keep) + (size_t)(cuts % (int)(keep + after - last));
    cuts++;
    world_crash(&w);
    int fd = open(w.journal, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, keep, cut) == (ssize_t)cut);
    close(fd);
    CHECK_OK(world_start(&w));
    restarts++;
  }
  world_run(&w, 300, 4);
  for (int k = 0; k < 4; k++) {
    shoal_live_mem_stats_t st;
    CHECK_OK(shoal__live_mem_stats(w.m, id[k], &st));
    CHECK_MSG(st.completions == 1, "job %ld completed %d times: %s", id[k], st.completions, world_log(&w));
    CHECK_MSG(st.refused_starts == 0, "job %ld started while it ran or had ended: %s", id[k], world_log(&w));
  }
  CHECK(restarts >= 5);
  shoal__live_ctl_summary(w.L);
  CHECK_MSG(world_logged(&w, "4 jobs seen, 4 completed"), "%s", world_log(&w));
  world_fini(&w);
}

/* Where the start record of a job sits in the journal after a step: its offset and length (newline included). */
static int find_start_record(const char *j, size_t from, size_t len, size_t *at, size_t *reclen) {
  for (size_t p = from; p < len;) {
    const char *nl = memchr(j + p, '\n', len - p);
    size_t l = nl ? (size_t)(nl - (j + p)) + 1 : len - p;
    unsigned n;
    char crc[16];
    int off = 0;
    if (sscanf(j + p, "%u %15s %n", &n, crc, &off) == 2 && off > 0 && !strncmp(j + p + off, "start ", 6)) {
      *at = p, *reclen = l;
      return 1;
    }
    p += l;
  }
  return 0;
}

/* The controller is killed while it writes one fixed record, the start of a job that takes both nodes, cut on
 * disk at every byte offset (nothing of it written .. all but its newline); the start either reached the manager
 * or did not. The restarted controller drops the cut record, and the job runs exactly once: adopted if it runs,
 * started if it does not; a second job never starts on its nodes meanwhile. */
static void restart_after_cut_start(size_t cut, int reached, size_t *reclen) {
  world_t w;
  world_init(&w, 2, 1, "fifo");
  CHECK_OK(world_start(&w));
  long a = world_submit(&w, 2, 2, 2, 20, 1);
  size_t before, after, at = 0;
  read_file(w.journal, &before);
  if (!reached) shoal__live_mem_fail_next(w.m, "start", 1);
  world_step(&w, 0.5);
  char *j = read_file(w.journal, &after);
  CHECK_MSG(find_start_record(j, before, after, &at, reclen), "no start record in '%s'", j + before);
  world_crash(&w);
  if (cut >= *reclen) return world_fini(&w);
  int fd = open(w.journal, O_WRONLY | O_TRUNC);
  CHECK(fd >= 0 && write(fd, j, at + cut) == (ssize_t)(at + cut));
  close(fd);
  long b = world_submit(&w, 1, 1, 1, 5, 1);
  CHECK_OK(world_start(&w));
  if (cut > 0) CHECK_LOGGED(&w, "its last record was cut (a crash while it was written): dropped");
  world_run(&w, 200, 2);
  for (int k = 0; k < 2; k++) {
    shoal_live_mem_stats_t st;
    CHECK_OK(shoal__live_mem_stats(w.m, k ? b : a, &st));
    CHECK_MSG(st.completions == 1 && st.runs == 1 && st.refused_starts == 0,
              "cut at %zu of %zu, start %s: job %ld ran %d times, completed %d, refused starts %d: %s", cut, *reclen,
              reached ? "done" : "not done", k ? b : a, st.runs, st.completions, st.refused_starts, world_log(&w));
  }
  world_fini(&w);
}

TEST_T(live_restart_after_one_record_cut_at_every_offset, 120) {
  size_t reclen = 0;
  restart_after_cut_start((size_t)-1, 1, &reclen);
  CHECK(reclen > 20);
  for (int reached = 0; reached < 2; reached++)
    for (size_t cut = 0; cut < reclen; cut++) {
      size_t l = 0;
      restart_after_cut_start(cut, reached, &l);
      CHECK_EQ(l, reclen); /* the same record every time */
    }
}
