/* Running a program to completion under a deadline: its standard input from a
 * buffer, its standard output and error captured (bounded), the whole process
 * group killed when the deadline passes. What the live controller calls to talk
 * to a cluster manager's commands (squeue, scontrol, ...): none of them may hang
 * the caller, and their error text is kept for the caller's message. */
#ifndef SHOAL_CORE_COMMAND_H
#define SHOAL_CORE_COMMAND_H

#include <stddef.h>

typedef struct shoal_command_result {
  int status;   /* wait status (WIFEXITED/WEXITSTATUS) */
  char *out;    /* standard output, NUL-terminated (malloc'ed; "" if none) */
  char *err;    /* standard error, NUL-terminated, trailing blanks cut */
  size_t out_len;
} shoal_command_result_t;

/* Run argv[0] (searched on PATH) with argv, `input` (NULL: /dev/null) on its standard input, for at most
 * deadline_s seconds; output beyond max_out bytes is read and dropped (the result says so in err). 0 when it ran
 * and ended (any exit status: look at res->status), SHOAL_ERR_TIMEOUT when it was killed at the deadline,
 * SHOAL_ERR_SYSTEM when it could not be started (pipe, fork) or was not found (exit 127 with "cannot run").
 * *res is written on 0 only; free it with shoal__command_result_free. */
int shoal__command_run(const char *const *argv, const char *input, double deadline_s, size_t max_out,
                       shoal_command_result_t *res);
/* 1 if the command exited 0 */
int shoal__command_ok(const shoal_command_result_t *res);
void shoal__command_result_free(shoal_command_result_t *res);
/* "exit 3", "killed by signal 9" for a wait status */
void shoal__command_describe_status(int status, char *buf, size_t cap);

#endif
