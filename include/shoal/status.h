/* shoal status codes. Every fallible function returns 0 (SHOAL_OK) or one of
 * these negative codes; output parameters are written only on success. */
#ifndef SHOAL_STATUS_H
#define SHOAL_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum shoal_status {
  SHOAL_OK               =   0,
  SHOAL_ERR_INVALID      =  -1, /* invalid argument */
  SHOAL_ERR_NOMEM        =  -2, /* out of memory */
  SHOAL_ERR_IO           =  -3, /* read/write/open failed (errno in the message) */
  SHOAL_ERR_TIMEOUT      =  -4, /* a deadline passed */
  SHOAL_ERR_PEER_CLOSED  =  -5, /* a peer closed its connection or died */
  SHOAL_ERR_MISMATCH     =  -6, /* ranks called different collectives / sizes / types */
  SHOAL_ERR_AUTH         =  -7, /* wrong or missing SHOAL_TOKEN */
  SHOAL_ERR_ADDR_IN_USE  =  -8, /* bind: address already in use */
  SHOAL_ERR_CONFIG       =  -9, /* malformed environment variable or option */
  SHOAL_ERR_PARSE        = -10, /* malformed input file */
  SHOAL_ERR_UNSUPPORTED  = -11, /* operation not supported for these arguments */
  SHOAL_ERR_INFEASIBLE   = -12, /* LP/IP has no feasible solution */
  SHOAL_ERR_SOLVER       = -13, /* the LP/MIP solver failed */
  SHOAL_ERR_NOT_FOUND    = -14, /* key, file or interface not found */
  SHOAL_ERR_PROTOCOL     = -15, /* malformed message on the wire */
  SHOAL_ERR_SYSTEM       = -16, /* a system call failed (errno in the message) */
  SHOAL_ERR_INTERNAL     = -17, /* a bug in shoal: please report */
  SHOAL_ERR_ABORTED      = -18, /* the communicator was aborted after an earlier error */
  SHOAL_ERR_CONNECT      = -19, /* could not connect to a peer or the store */
  SHOAL_ERR__LAST        = -20
} shoal_status_t;

/* A short constant description of a status code ("timeout", ...). */
const char *shoal_status_string(int status);

/* The detailed message of the last error raised on this thread (file and
 * line for parsers, variable name for configuration, ...); "" if none. */
const char *shoal_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
