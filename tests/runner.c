/* The runner: `test_LAYER [-t timeout_s] [-j jobs] [-l] [pattern...]`.
 * Prints one line per test and a closing "LAYER: N passed, N failed, N skipped". */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  const char *name, *file;
  shoal_test_fn fn;
  int timeout_s;
  pid_t pid;
  double start;
  int result; /* 0 pending, 1 pass, 2 fail, 3 skip, 4 timeout */
} test_entry;

static test_entry *tests;
static int ntests, cap;

void shoal_test_register(const char *name, const char *file, shoal_test_fn fn, int timeout_s) {
  if (ntests == cap) {
    cap = cap ? cap * 2 : 64;
    tests = realloc(tests, (size_t)cap * sizeof *tests);
    if (!tests) abort();
  }
  tests[ntests++] = (test_entry){name, file, fn, timeout_s, 0, 0, 0};
}

void shoal_test_fail(const char *file, int line, const char *fmt, ...) {
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, msg);
  fflush(NULL);
  _exit(1);
}

void shoal_test_skip(const char *why) {
  fprintf(stderr, "  SKIP: %s\n", why);
  fflush(NULL);
  _exit(77);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int matches(const char *name, int npat, char **pat) {
  if (npat == 0) return 1;
  for (int i = 0; i < npat; i++)
    if (strstr(name, pat[i])) return 1;
  return 0;
}

static void start_test(test_entry *t) {
  fflush(NULL);
  t->start = now_s();
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    t->result = 2;
    return;
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed runner (say, by an outer timeout) takes its tests along */
    signal(SIGPIPE, SIG_IGN);
    t->fn();
    fflush(NULL);
    _exit(0);
  }
  setpgid(pid, pid);
  t->pid = pid;
}

int main(int argc, char **argv) {
  int timeout = 120, jobs = 1, list = 0;
  const char *env_jobs = getenv("TEST_JOBS");
  if (env_jobs) jobs = atoi(env_jobs) > 0 ? atoi(env_jobs) : 1;
  int npat = 0;
  char **pat = calloc((size_t)argc, sizeof *pat);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-t") && i + 1 < argc) timeout = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-j") && i + 1 < argc) jobs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-l")) list = 1;
    else pat[npat++] = argv[i];
  }
  if (jobs < 1) jobs = 1;
  const char *base = strrchr(argv[0], '/');
  base = base ? base + 1 : argv[0];
  if (!strncmp(base, "test_", 5)) base += 5;
  if (list) {
    for (int i = 0; i < ntests; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);
  /* the tuning profile's default file is under $XDG_CACHE_HOME, else ~/.cache: a test binary run by hand
   * (scripts/run-tests.sh sets it) would write the user's; a private one instead, removed at the end */
  char cache[64] = "";
  if (!getenv("XDG_CACHE_HOME")) {
    snprintf(cache, sizeof cache, "/tmp/shoal-test-cache.XXXXXX");
    if (mkdtemp(cache)) setenv("XDG_CACHE_HOME", cache, 1);
    else cache[0] = '\0';
  }
  int next = 0, running = 0, pass = 0, fail = 0, skip = 0, selected = 0;
  for (int i = 0; i < ntests; i++) selected += matches(tests[i].name, npat, pat);
  printf("# %s: %d tests (timeout %d s each, %d at a time)\n", base, selected, timeout, jobs);
  fflush(stdout);
  for (;;) {
    while (running < jobs && next < ntests) {
      test_entry *t = &tests[next++];
      if (!matches(t->name, npat, pat)) continue;
      start_test(t);
      if (t->pid > 0) running++;
    }
    if (running == 0) break;
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      double now = now_s();
      for (int i = 0; i < ntests; i++) {
        test_entry *t = &tests[i];
        int lim = t->timeout_s > 0 ? t->timeout_s : timeout;
        if (t->pid > 0 && t->result == 0 && now - t->start > lim) {
          kill(-t->pid, SIGKILL);
          t->result = 4;
        }
      }
      usleep(5000);
      continue;
    }
    if (pid < 0) break;
    for (int i = 0; i < ntests; i++) {
      test_entry *t = &tests[i];
      if (t->pid != pid) continue;
      kill(-pid, SIGKILL); /* anything the test left running */
      double el = now_s() - t->start;
      if (t->result == 4) {
        printf("not ok %s - TIMEOUT after %.1fs\n", t->name, el);
        fail++;
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("ok %s (%.2fs)\n", t->name, el);
        pass++;
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        printf("ok %s # SKIP (%.2fs)\n", t->name, el);
        skip++;
      } else {
        if (WIFSIGNALED(status))
          printf("not ok %s - killed by signal %d (%s) after %.2fs\n", t->name, WTERMSIG(status),
                 strsignal(WTERMSIG(status)), el);
        else
          printf("not ok %s - exit %d after %.2fs (%s)\n", t->name, WEXITSTATUS(status), el, t->file);
        fail++;
      }
      t->pid = -1;
      running--;
      fflush(stdout);
      break;
    }
  }
  printf("%s: %d passed, %d failed, %d skipped\n", base, pass, fail, skip);
  if (cache[0]) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache);
  }
  free(pat);
  return fail ? 1 : 0;
}
