/* The agent-controller protocol's frames (proto.h). */
#include <string.h>

#include "core/error.h"
#include "core/wire.h"
#include "flow/proto.h"

#define HELLO_BYTES 72
#define WELCOME_BYTES 32
#define LIST_HEAD_BYTES 24

static void put_hdr(unsigned char *b, uint32_t len, int type) {
  shoal__put_u32(b, len);
  b[4] = (unsigned char)type;
  b[5] = SHOAL__FP_VERSION;
  b[6] = b[7] = 0;
}

static int room(size_t cap, size_t need, const char *what) {
  if (cap < need) return shoal__seterr(SHOAL_ERR_INVALID, "flow protocol: %s needs %zu bytes, buffer %zu", what, need, cap);
  return 0;
}

/* A NUL-terminated text field of exactly n bytes on the wire (the string cut at n - 1). */
static void put_text(unsigned char *p, size_t n, const char *s) {
  memset(p, 0, n);
  size_t l = strnlen(s, n - 1);
  memcpy(p, s, l);
}
static int get_text(const unsigned char *p, size_t n, char *out, const char *what) {
  if (memchr(p, 0, n) == NULL)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: %s is not NUL-terminated within %zu bytes", what, n);
  memcpy(out, p, n);
  return 0;
}

int shoal__fp_encode_hello(unsigned char *b, size_t cap, const shoal__fp_hello_t *h) {
  int rc = room(cap, SHOAL__FP_HDR + HELLO_BYTES, "HELLO");
  if (rc) return rc;
  put_hdr(b, HELLO_BYTES, SHOAL__FP_HELLO);
  unsigned char *p = b + SHOAL__FP_HDR;
  shoal__put_u32(p, SHOAL__FP_MAGIC);
  shoal__put_u32(p + 4, h->slot_us);
  put_text(p + 8, 64, h->host);
  return SHOAL__FP_HDR + HELLO_BYTES;
}

int shoal__fp_encode_welcome(unsigned char *b, size_t cap, const shoal__fp_welcome_t *w) {
  int rc = room(cap, SHOAL__FP_HDR + WELCOME_BYTES, "WELCOME");
  if (rc) return rc;
  put_hdr(b, WELCOME_BYTES, SHOAL__FP_WELCOME);
  unsigned char *p = b + SHOAL__FP_HDR;
  shoal__put_u32(p, SHOAL__FP_MAGIC);
  shoal__put_u32(p + 4, w->slot_us);
  shoal__put_u32(p + 8, w->horizon);
  shoal__put_u32(p + 12, 0);
  put_text(p + 16, 16, w->policy);
  return SHOAL__FP_HDR + WELCOME_BYTES;
}

int shoal__fp_encode_report(unsigned char *b, size_t cap, const shoal__fp_report_t *r) {
  if (r->n > SHOAL__FP_MAX_FLOWS)
    return shoal__seterr(SHOAL_ERR_INVALID, "flow protocol: a REPORT of %u flows (at most %d)", r->n, SHOAL__FP_MAX_FLOWS);
  size_t len = LIST_HEAD_BYTES + (size_t)r->n * SHOAL__FP_FLOW_BYTES;
  int rc = room(cap, SHOAL__FP_HDR + len, "REPORT");
  if (rc) return rc;
  put_hdr(b, (uint32_t)len, SHOAL__FP_REPORT);
  unsigned char *p = b + SHOAL__FP_HDR;
  shoal__put_u64(p, r->seq);
  shoal__put_u64(p + 8, r->background_bps);
  shoal__put_u32(p + 16, r->n);
  shoal__put_u32(p + 20, 0);
  p += LIST_HEAD_BYTES;
  for (uint32_t i = 0; i < r->n; i++, p += SHOAL__FP_FLOW_BYTES) {
    const shoal__fp_flow_t *f = &r->flows[i];
    shoal__put_u64(p, f->job);
    shoal__put_u32(p + 8, f->src_rank);
    shoal__put_u32(p + 12, f->dst_rank);
    memcpy(p + 16, &f->src_ip, 4); /* already in network order */
    memcpy(p + 20, &f->dst_ip, 4);
    p[24] = f->status;
    p[25] = p[26] = p[27] = 0;
    shoal__put_u32(p + 28, f->rtt_us);
    shoal__put_u64(p + 32, f->iter);
    shoal__put_u64(p + 40, f->volume);
    shoal__put_u64(p + 48, f->sent);
    shoal__put_u64(p + 56, f->e_bps);
    shoal__put_u64(p + 64, f->delivered_bps);
  }
  return (int)(SHOAL__FP_HDR + len);
}

int shoal__fp_encode_rates(unsigned char *b, size_t cap, const shoal__fp_rates_t *r) {
  if (r->n > SHOAL__FP_MAX_FLOWS)
    return shoal__seterr(SHOAL_ERR_INVALID, "flow protocol: RATES for %u flows (at most %d)", r->n, SHOAL__FP_MAX_FLOWS);
  size_t len = LIST_HEAD_BYTES + (size_t)r->n * SHOAL__FP_RATE_BYTES;
  int rc = room(cap, SHOAL__FP_HDR + len, "RATES");
  if (rc) return rc;
  put_hdr(b, (uint32_t)len, SHOAL__FP_RATES);
  unsigned char *p = b + SHOAL__FP_HDR;
  shoal__put_u64(p, r->seq);
  shoal__put_u64(p + 8, (uint64_t)r->slot);
  shoal__put_u32(p + 16, r->n);
  shoal__put_u32(p + 20, 0);
  p += LIST_HEAD_BYTES;
  for (uint32_t i = 0; i < r->n; i++, p += SHOAL__FP_RATE_BYTES) {
    shoal__put_u64(p, r->rates[i].job);
    shoal__put_u32(p + 8, r->rates[i].src_rank);
    shoal__put_u32(p + 12, r->rates[i].dst_rank);
    shoal__put_u64(p + 16, r->rates[i].rate);
  }
  return (int)(SHOAL__FP_HDR + len);
}

int shoal__fp_encode_text(unsigned char *b, size_t cap, int type, const char *text) {
  if (type != SHOAL__FP_ERROR && type != SHOAL__FP_BYE)
    return shoal__seterr(SHOAL_ERR_INVALID, "flow protocol: type %d carries no text", type);
  size_t l = text ? strlen(text) : 0;
  if (l > SHOAL__FP_MAX_TEXT) l = SHOAL__FP_MAX_TEXT;
  int rc = room(cap, SHOAL__FP_HDR + l, "ERROR");
  if (rc) return rc;
  put_hdr(b, (uint32_t)l, type);
  if (l) memcpy(b + SHOAL__FP_HDR, text, l);
  return (int)(SHOAL__FP_HDR + l);
}

int shoal__fp_frame(const unsigned char *in, size_t have, int *type) {
  if (have < SHOAL__FP_HDR) return 0;
  uint32_t len = shoal__get_u32(in);
  int t = in[4];
  if (in[5] != SHOAL__FP_VERSION)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: version %u (this side speaks %d)", in[5], SHOAL__FP_VERSION);
  if (in[6] || in[7]) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: reserved header bytes are not zero");
  if (t < SHOAL__FP_HELLO || t > SHOAL__FP_BYE) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: unknown frame type %d", t);
  if (len > SHOAL__FP_MAX_PAYLOAD)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: a frame of %u bytes (at most %d)", len, SHOAL__FP_MAX_PAYLOAD);
  *type = t;
  return have < SHOAL__FP_HDR + (size_t)len ? 0 : (int)(SHOAL__FP_HDR + len);
}

static int expect(const unsigned char *f, size_t len, int type, size_t want, int exact, const char *what) {
  if (len < SHOAL__FP_HDR || f[4] != type)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: expected %s, got frame type %d", what, len >= 5 ? f[4] : -1);
  size_t pl = len - SHOAL__FP_HDR;
  if (exact ? pl != want : pl < want)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: %s of %zu bytes (expected %s%zu)", what, pl,
                         exact ? "" : "at least ", want);
  return 0;
}

int shoal__fp_decode_hello(const unsigned char *f, size_t len, shoal__fp_hello_t *out) {
  int rc = expect(f, len, SHOAL__FP_HELLO, HELLO_BYTES, 1, "HELLO");
  if (rc) return rc;
  const unsigned char *p = f + SHOAL__FP_HDR;
  if (shoal__get_u32(p) != SHOAL__FP_MAGIC) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: HELLO with a wrong magic (not a shoal flow agent)");
  shoal__fp_hello_t h;
  h.slot_us = shoal__get_u32(p + 4);
  if ((rc = get_text(p + 8, 64, h.host, "HELLO's host name"))) return rc;
  *out = h;
  return 0;
}

int shoal__fp_decode_welcome(const unsigned char *f, size_t len, shoal__fp_welcome_t *out) {
  int rc = expect(f, len, SHOAL__FP_WELCOME, WELCOME_BYTES, 1, "WELCOME");
  if (rc) return rc;
  const unsigned char *p = f + SHOAL__FP_HDR;
  if (shoal__get_u32(p) != SHOAL__FP_MAGIC) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: WELCOME with a wrong magic (not a shoal flow controller)");
  shoal__fp_welcome_t w;
  w.slot_us = shoal__get_u32(p + 4);
  w.horizon = shoal__get_u32(p + 8);
  if (shoal__get_u32(p + 12)) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: WELCOME's reserved field is not zero");
  if ((rc = get_text(p + 16, 16, w.policy, "WELCOME's policy"))) return rc;
  *out = w;
  return 0;
}

/* The list head shared by REPORT and RATES: n, and the payload holding exactly n entries of esize. */
static int list_head(const unsigned char *f, size_t len, int type, size_t esize, uint32_t cap, const char *what, uint32_t *n) {
  int rc = expect(f, len, type, LIST_HEAD_BYTES, 0, what);
  if (rc) return rc;
  const unsigned char *p = f + SHOAL__FP_HDR;
  uint32_t k = shoal__get_u32(p + 16);
  if (shoal__get_u32(p + 20)) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: %s's reserved field is not zero", what);
  if (k > SHOAL__FP_MAX_FLOWS || k > cap)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: %s of %u flows (at most %u)", what, k,
                         cap < SHOAL__FP_MAX_FLOWS ? cap : SHOAL__FP_MAX_FLOWS);
  if (len - SHOAL__FP_HDR != LIST_HEAD_BYTES + (size_t)k * esize)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: %s says %u flows but carries %zu bytes", what, k,
                         len - SHOAL__FP_HDR);
  *n = k;
  return 0;
}

int shoal__fp_decode_report(const unsigned char *f, size_t len, shoal__fp_report_t *out, uint32_t cap) {
  uint32_t n;
  int rc = list_head(f, len, SHOAL__FP_REPORT, SHOAL__FP_FLOW_BYTES, cap, "REPORT", &n);
  if (rc) return rc;
  const unsigned char *p = f + SHOAL__FP_HDR;
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *q = p + LIST_HEAD_BYTES + (size_t)i * SHOAL__FP_FLOW_BYTES;
    if (q[24] > SHOAL__FS_RESCHEDULE || q[25] || q[26] || q[27])
      return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: REPORT flow %u: status %u or reserved bytes invalid", i, q[24]);
  }
  out->seq = shoal__get_u64(p);
  out->background_bps = shoal__get_u64(p + 8);
  out->n = n;
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *q = p + LIST_HEAD_BYTES + (size_t)i * SHOAL__FP_FLOW_BYTES;
    shoal__fp_flow_t *o = &out->flows[i];
    o->job = shoal__get_u64(q);
    o->src_rank = shoal__get_u32(q + 8);
    o->dst_rank = shoal__get_u32(q + 12);
    memcpy(&o->src_ip, q + 16, 4);
    memcpy(&o->dst_ip, q + 20, 4);
    o->status = q[24];
    o->rtt_us = shoal__get_u32(q + 28);
    o->iter = shoal__get_u64(q + 32);
    o->volume = shoal__get_u64(q + 40);
    o->sent = shoal__get_u64(q + 48);
    o->e_bps = shoal__get_u64(q + 56);
    o->delivered_bps = shoal__get_u64(q + 64);
  }
  return 0;
}

int shoal__fp_decode_rates(const unsigned char *f, size_t len, shoal__fp_rates_t *out, uint32_t cap) {
  uint32_t n;
  int rc = list_head(f, len, SHOAL__FP_RATES, SHOAL__FP_RATE_BYTES, cap, "RATES", &n);
  if (rc) return rc;
  const unsigned char *p = f + SHOAL__FP_HDR;
  out->seq = shoal__get_u64(p);
  out->slot = (int64_t)shoal__get_u64(p + 8);
  out->n = n;
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *q = p + LIST_HEAD_BYTES + (size_t)i * SHOAL__FP_RATE_BYTES;
    out->rates[i].job = shoal__get_u64(q);
    out->rates[i].src_rank = shoal__get_u32(q + 8);
    out->rates[i].dst_rank = shoal__get_u32(q + 12);
    out->rates[i].rate = shoal__get_u64(q + 16);
  }
  return 0;
}

int shoal__fp_decode_text(const unsigned char *f, size_t len, char *text, size_t cap) {
  if (len < SHOAL__FP_HDR || (f[4] != SHOAL__FP_ERROR && f[4] != SHOAL__FP_BYE))
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: expected ERROR or BYE");
  size_t l = len - SHOAL__FP_HDR;
  if (l > SHOAL__FP_MAX_TEXT) return shoal__seterr(SHOAL_ERR_PROTOCOL, "flow protocol: a text of %zu bytes (at most %d)", l, SHOAL__FP_MAX_TEXT);
  if (cap == 0) return 0;
  if (l >= cap) l = cap - 1;
  memcpy(text, f + SHOAL__FP_HDR, l);
  text[l] = 0;
  for (size_t i = 0; i < l; i++)
    if ((unsigned char)text[i] < 32 && text[i] != '\t') text[i] = '?'; /* a peer's text goes to our log */
  return 0;
}
