/* Status strings and the per-thread detailed error message. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *shoal_status_string(int status) {
  switch (status) {
  case SHOAL_OK: return "success";
  case SHOAL_ERR_INVALID: return "invalid argument";
  case SHOAL_ERR_NOMEM: return "out of memory";
  case SHOAL_ERR_IO: return "input/output error";
  case SHOAL_ERR_TIMEOUT: return "timed out";
  case SHOAL_ERR_PEER_CLOSED: return "peer closed the connection";
  case SHOAL_ERR_MISMATCH: return "mismatched collective call";
  case SHOAL_ERR_AUTH: return "authentication failed";
  case SHOAL_ERR_ADDR_IN_USE: return "address already in use";
  case SHOAL_ERR_CONFIG: return "bad configuration";
  case SHOAL_ERR_PARSE: return "malformed input";
  case SHOAL_ERR_UNSUPPORTED: return "unsupported";
  case SHOAL_ERR_INFEASIBLE: return "infeasible";
  case SHOAL_ERR_SOLVER: return "solver failed";
  case SHOAL_ERR_NOT_FOUND: return "not found";
  case SHOAL_ERR_PROTOCOL: return "protocol error";
  case SHOAL_ERR_SYSTEM: return "system call failed";
  case SHOAL_ERR_INTERNAL: return "internal error";
  case SHOAL_ERR_ABORTED: return "communicator aborted";
  case SHOAL_ERR_CONNECT: return "connection failed";
  default: return "unknown status";
  }
}

const char *shoal_last_error(void) { return last_error; }

int shoal__seterr(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

void shoal__clearerr(void) { last_error[0] = '\0'; }
