/* The agent-controller protocol (docs/flow.md#protocol): frames round-trip field by field, and every frame
 * that breaks a rule is refused with the reason. */
#include <string.h>

#include "../runner.h"
#include "core/wire.h"
#include "flow/proto.h"
#include "shoal/status.h"

static unsigned char buf[SHOAL__FP_HDR + SHOAL__FP_MAX_PAYLOAD + 64];

TEST(proto_frames_round_trip) {
  shoal__fp_hello_t h = {.slot_us = 100000}, h2;
  snprintf(h.host, sizeof h.host, "tb-h3");
  int n = shoal__fp_encode_hello(buf, sizeof buf, &h), type = 0;
  CHECK(n > 0);
  CHECK_EQ(shoal__fp_frame(buf, (size_t)n - 1, &type), 0); /* not complete yet */
  CHECK_EQ(shoal__fp_frame(buf, (size_t)n, &type), n);
  CHECK_EQ(type, SHOAL__FP_HELLO);
  CHECK_OK(shoal__fp_decode_hello(buf, (size_t)n, &h2));
  CHECK_EQ(h2.slot_us, 100000);
  CHECK(strcmp(h2.host, "tb-h3") == 0);

  shoal__fp_flow_t fl[3];
  for (int i = 0; i < 3; i++)
    fl[i] = (shoal__fp_flow_t){.job = 0x1234567890abcdefull + (uint64_t)i, .src_rank = (uint32_t)i, .dst_rank = 7,
                               .src_ip = 0x0a5a0001u, .dst_ip = 0x0a5a0102u, .status = SHOAL__FS_RESCHEDULE,
                               .rtt_us = 250, .iter = 41, .volume = 3u << 20, .sent = 12345, .e_bps = 5000000,
                               .delivered_bps = 4800000};
  shoal__fp_report_t r = {.seq = 9, .background_bps = 777, .n = 3, .flows = fl}, r2;
  shoal__fp_flow_t back[3];
  r2.flows = back;
  n = shoal__fp_encode_report(buf, sizeof buf, &r);
  CHECK_EQ(n, SHOAL__FP_HDR + 24 + 3 * SHOAL__FP_FLOW_BYTES);
  CHECK_OK(shoal__fp_decode_report(buf, (size_t)n, &r2, 3));
  CHECK_EQ(r2.seq, 9);
  CHECK_EQ(r2.background_bps, 777);
  CHECK_EQ(r2.n, 3);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(back[i].job, fl[i].job);
    CHECK_EQ(back[i].src_rank, fl[i].src_rank);
    CHECK_EQ(back[i].dst_ip, fl[i].dst_ip);
    CHECK_EQ(back[i].status, SHOAL__FS_RESCHEDULE);
    CHECK_EQ(back[i].volume, 3u << 20);
    CHECK_EQ(back[i].delivered_bps, 4800000);
  }
  CHECK(shoal__fp_decode_report(buf, (size_t)n, &r2, 2) == SHOAL_ERR_PROTOCOL); /* more flows than room */

  shoal__fp_rate_t rt[2] = {{.job = 5, .src_rank = 0, .dst_rank = 1, .rate = 1250000}, {.job = 6, .rate = 0}}, rb[2];
  shoal__fp_rates_t rs = {.seq = 9, .slot = 17000000001ll, .n = 2, .rates = rt}, rs2 = {.rates = rb};
  n = shoal__fp_encode_rates(buf, sizeof buf, &rs);
  CHECK_OK(shoal__fp_decode_rates(buf, (size_t)n, &rs2, 2));
  CHECK_EQ(rs2.slot, 17000000001ll);
  CHECK_EQ(rb[0].rate, 1250000);
  CHECK_EQ(rb[1].job, 6);

  char text[64];
  n = shoal__fp_encode_text(buf, sizeof buf, SHOAL__FP_ERROR, "too many agents on this controller");
  CHECK_EQ(shoal__fp_frame(buf, (size_t)n, &type), n);
  CHECK_EQ(type, SHOAL__FP_ERROR);
  CHECK_OK(shoal__fp_decode_text(buf, (size_t)n, text, sizeof text));
  CHECK(strcmp(text, "too many agents on this controller") == 0);
}

TEST(proto_refuses_broken_frames) {
  shoal__fp_hello_t h = {.slot_us = 100000};
  snprintf(h.host, sizeof h.host, "h0");
  int n = shoal__fp_encode_hello(buf, sizeof buf, &h), type;
  CHECK(n > 0);
  unsigned char f[256];
  /* a wrong version, reserved bytes, an unknown type, a length over the bound */
  memcpy(f, buf, (size_t)n);
  f[5] = 2;
  CHECK(shoal__fp_frame(f, (size_t)n, &type) == SHOAL_ERR_PROTOCOL);
  memcpy(f, buf, (size_t)n);
  f[7] = 1;
  CHECK(shoal__fp_frame(f, (size_t)n, &type) == SHOAL_ERR_PROTOCOL);
  memcpy(f, buf, (size_t)n);
  f[4] = 99;
  CHECK(shoal__fp_frame(f, (size_t)n, &type) == SHOAL_ERR_PROTOCOL);
  memcpy(f, buf, (size_t)n);
  shoal__put_u32(f, SHOAL__FP_MAX_PAYLOAD + 1);
  CHECK(shoal__fp_frame(f, 8, &type) == SHOAL_ERR_PROTOCOL);
  CHECK_CONTAINS(shoal_last_error(), "flow protocol");
  /* a bad magic; a host name without its NUL */
  memcpy(f, buf, (size_t)n);
  f[SHOAL__FP_HDR] ^= 0xff;
  shoal__fp_hello_t out;
  CHECK(shoal__fp_decode_hello(f, (size_t)n, &out) == SHOAL_ERR_PROTOCOL);
  memcpy(f, buf, (size_t)n);
  memset(f + SHOAL__FP_HDR + 8, 'x', 64);
  CHECK(shoal__fp_decode_hello(f, (size_t)n, &out) == SHOAL_ERR_PROTOCOL);
  /* a REPORT whose count does not match its length; a frame decoded as the wrong type */
  shoal__fp_flow_t fl = {.job = 1};
  shoal__fp_report_t r = {.seq = 1, .n = 1, .flows = &fl}, r2 = {0};
  shoal__fp_flow_t back[4];
  r2.flows = back;
  n = shoal__fp_encode_report(buf, sizeof buf, &r);
  shoal__put_u32(buf + SHOAL__FP_HDR + 16, 2);
  CHECK(shoal__fp_decode_report(buf, (size_t)n, &r2, 4) == SHOAL_ERR_PROTOCOL);
  CHECK(shoal__fp_decode_hello(buf, (size_t)n, &out) == SHOAL_ERR_PROTOCOL);
  /* more flows than a frame may carry cannot be encoded; a buffer too small is an error, not an overflow */
  static shoal__fp_flow_t many[SHOAL__FP_MAX_FLOWS + 1];
  shoal__fp_report_t big = {.n = SHOAL__FP_MAX_FLOWS + 1, .flows = many};
  CHECK(shoal__fp_encode_report(buf, sizeof buf, &big) == SHOAL_ERR_INVALID);
  CHECK(shoal__fp_encode_hello(buf, 10, &h) == SHOAL_ERR_INVALID);
}
