/* shoal's test runner: every TEST runs in a forked child in its own process
 * group, killed (with everything it started) when it passes its timeout.
 * Exit 0 = pass, 77 = skip, anything else = fail. */
#ifndef SHOAL_TESTS_RUNNER_H
#define SHOAL_TESTS_RUNNER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal/status.h"

typedef void (*shoal_test_fn)(void);
void shoal_test_register(const char *name, const char *file, shoal_test_fn fn, int timeout_s);
void shoal_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
void shoal_test_skip(const char *why) __attribute__((noreturn));

#define TEST_T(name, timeout_s)                                                 \
  static void test_##name(void);                                                \
  __attribute__((constructor)) static void shoal_reg_##name(void) {             \
    shoal_test_register(#name, __FILE__, test_##name, (timeout_s));              \
  }                                                                             \
  static void test_##name(void)
#define TEST(name) TEST_T(name, 0)

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) shoal_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);        \
  } while (0)
#define CHECK_MSG(cond, ...)                                                    \
  do {                                                                          \
    if (!(cond)) shoal_test_fail(__FILE__, __LINE__, __VA_ARGS__);               \
  } while (0)
#define CHECK_EQ(a, b)                                                          \
  do {                                                                          \
    long long _a = (long long)(a), _b = (long long)(b);                         \
    if (_a != _b) shoal_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, _a, _b); \
  } while (0)
#define CHECK_NEAR(a, b, tol)                                                   \
  do {                                                                          \
    double _a = (double)(a), _b = (double)(b);                                  \
    if (!(_a - _b <= (tol) && _b - _a <= (tol)))                                \
      shoal_test_fail(__FILE__, __LINE__, "%s ~= %s: %.17g vs %.17g (tol %g)", #a, #b, _a, _b, (double)(tol)); \
  } while (0)
/* expr must return 0; otherwise print the status and the detailed message. */
#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    int _r = (expr);                                                            \
    if (_r != 0)                                                                \
      shoal_test_fail(__FILE__, __LINE__, "%s = %d (%s): %s", #expr, _r, shoal_status_string(_r), shoal_last_error()); \
  } while (0)
/* haystack must contain needle (for asserting error messages). */
#define CHECK_CONTAINS(haystack, needle)                                        \
  do {                                                                          \
    const char *_h = (haystack), *_n = (needle);                                \
    if (!_h || !strstr(_h, _n))                                                 \
      shoal_test_fail(__FILE__, __LINE__, "expected \"%s\" in \"%s\"", _n, _h ? _h : "(null)"); \
  } while (0)

/* --- multi-process helpers (harness.c) --- */

/* Run fn(rank, arg) in n forked children; each child's return value is its
 * exit code. Waits up to timeout_s; past it every child is SIGKILLed.
 * statuses[i] receives the raw wait status of child i (or -1 on timeout).
 * Returns the number of children that exited 0. */
int shoal_test_fork_ranks(int n, int (*fn)(int rank, void *arg), void *arg, double timeout_s, int *statuses);
/* A free TCP port on 127.0.0.1 (bound then closed; racy but fine for tests). */
int shoal_test_free_port(void);
/* Path of the built shoal CLI (SHOAL_BIN, set by the Makefile). */
const char *shoal_test_cli(void);
/* Run a shell command, capturing stdout+stderr into out (NUL-terminated,
 * truncated at cap); returns the exit status as from system(), or -1. The
 * command is killed after timeout_s. */
int shoal_test_run_cmd(const char *cmd, char *out, size_t cap, double timeout_s);

#endif
