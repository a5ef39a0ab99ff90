/* The agent-controller protocol (docs/flow.md#protocol): TCP, little-endian, one frame per message,
 * bounded in size and count. An agent says HELLO once, then sends one REPORT per slot and gets one RATES
 * back; either side may send ERROR (then closes) or BYE. Decoding checks every length and field; a frame
 * that breaks a rule is SHOAL_ERR_PROTOCOL with the reason, and the connection is closed. */
#ifndef SHOAL_FLOW_PROTO_H
#define SHOAL_FLOW_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define SHOAL__FP_MAGIC 0x434c4653u   /* bytes 'S' 'F' 'L' 'C' */
#define SHOAL__FP_VERSION 1
#define SHOAL__FP_HDR 8               /* u32 payload length, u8 type, u8 version, u16 zero */
#define SHOAL__FP_MAX_FLOWS 256       /* flows in one REPORT or RATES (a host segment's slots) */
#define SHOAL__FP_FLOW_BYTES 72       /* one flow of a REPORT */
#define SHOAL__FP_RATE_BYTES 24       /* one flow of a RATES */
#define SHOAL__FP_MAX_PAYLOAD (24 + SHOAL__FP_MAX_FLOWS * SHOAL__FP_FLOW_BYTES)
#define SHOAL__FP_MAX_TEXT 512

enum {
  SHOAL__FP_HELLO = 1,   /* agent -> controller, first */
  SHOAL__FP_WELCOME = 2, /* controller -> agent */
  SHOAL__FP_REPORT = 3,  /* agent -> controller, once per slot */
  SHOAL__FP_RATES = 4,   /* controller -> agent, the answer */
  SHOAL__FP_ERROR = 5,   /* either way: text, then close */
  SHOAL__FP_BYE = 6,     /* either way: a normal end */
};

/* What a flow is doing in this slot (the agent decides from the monitor's counters). */
enum { SHOAL__FS_IDLE = 0, SHOAL__FS_NEW_ITER = 1, SHOAL__FS_RESCHEDULE = 2 };

typedef struct shoal__fp_hello {
  uint32_t slot_us;
  char host[64];
} shoal__fp_hello_t;

typedef struct shoal__fp_welcome {
  uint32_t slot_us, horizon;
  char policy[16];
} shoal__fp_welcome_t;

/* One flow of a report: a cross-host TCP connection of a rank. */
typedef struct shoal__fp_flow {
  uint64_t job;
  uint32_t src_rank, dst_rank;
  uint32_t src_ip, dst_ip; /* network byte order */
  uint8_t status;          /* SHOAL__FS_* */
  uint32_t rtt_us;         /* TCP_INFO, 0: unknown */
  uint64_t iter;           /* the job's iteration on the sending rank (0: none marked yet) */
  uint64_t volume;         /* bytes of the job's previous iteration on this flow (0: unknown yet) */
  uint64_t sent;           /* bytes sent in the current iteration so far */
  uint64_t e_bps;          /* the agent's estimate of the rate the flow can get, bytes/s (0: line rate) */
  uint64_t delivered_bps;  /* TCP_INFO delivery rate, bytes/s (telemetry) */
} shoal__fp_flow_t;

typedef struct shoal__fp_report {
  uint64_t seq;
  uint64_t background_bps; /* this host's TCP traffic that is not shoal's, bytes/s */
  uint32_t n;
  shoal__fp_flow_t *flows; /* [n], owned by the caller */
} shoal__fp_report_t;

typedef struct shoal__fp_rate {
  uint64_t job;
  uint32_t src_rank, dst_rank;
  uint64_t rate; /* bytes/s for this slot; 0: no limit */
} shoal__fp_rate_t;

typedef struct shoal__fp_rates {
  uint64_t seq; /* the report's */
  int64_t slot; /* the controller's slot number */
  uint32_t n;
  shoal__fp_rate_t *rates; /* [n], owned by the caller */
} shoal__fp_rates_t;

/* Encoders write a whole frame (header included) into buf (cap bytes) and return its length, or a
 * negative status (SHOAL_ERR_INVALID: too many flows, a text too long, buf too small). */
int shoal__fp_encode_hello(unsigned char *buf, size_t cap, const shoal__fp_hello_t *h);
int shoal__fp_encode_welcome(unsigned char *buf, size_t cap, const shoal__fp_welcome_t *w);
int shoal__fp_encode_report(unsigned char *buf, size_t cap, const shoal__fp_report_t *r);
int shoal__fp_encode_rates(unsigned char *buf, size_t cap, const shoal__fp_rates_t *r);
int shoal__fp_encode_text(unsigned char *buf, size_t cap, int type, const char *text);

/* Frame boundary: with have bytes of input, 0 if the frame is not complete yet, its total length if it
 * is, or SHOAL_ERR_PROTOCOL (a length over the bound, a wrong version, non-zero reserved bytes, an unknown
 * type); *type is set when the header is complete. */
int shoal__fp_frame(const unsigned char *in, size_t have, int *type);

/* Decoders take one complete frame. Reports and rates decode into the caller's arrays (cap entries). */
int shoal__fp_decode_hello(const unsigned char *f, size_t len, shoal__fp_hello_t *out);
int shoal__fp_decode_welcome(const unsigned char *f, size_t len, shoal__fp_welcome_t *out);
int shoal__fp_decode_report(const unsigned char *f, size_t len, shoal__fp_report_t *out, uint32_t cap);
int shoal__fp_decode_rates(const unsigned char *f, size_t len, shoal__fp_rates_t *out, uint32_t cap);
/* ERROR's text (NUL-terminated, cut at cap). */
int shoal__fp_decode_text(const unsigned char *f, size_t len, char *text, size_t cap);

#endif
