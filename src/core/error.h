/* Internal error helpers: set the thread's detailed message and return a code. */
#ifndef SHOAL_CORE_ERROR_H
#define SHOAL_CORE_ERROR_H

#include "shoal/status.h"

/* Format the thread's last-error message and return `status`, so that
 * `return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: ...", file, line);` reads well. */
int shoal__seterr(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void shoal__clearerr(void);

#endif
