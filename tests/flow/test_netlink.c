/* The agent's telemetry of one socket (flow/netlink.h): a lookup by the socket's addresses finds that
 * connection and its acknowledged bytes, the same as the dump of every socket sees, and a lookup of a
 * connection that does not exist says so. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../runner.h"
#include "core/clock.h"
#include "flow/netlink.h"
#include "shoal/status.h"

static shoal__tcpstat_t all[2048];

TEST(tcp_socket_lookup_finds_one_connection) {
  int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}, ca, sa;
  socklen_t al = sizeof a;
  CHECK_EQ(bind(l, (struct sockaddr *)&a, sizeof a), 0);
  CHECK_EQ(listen(l, 1), 0);
  CHECK_EQ(getsockname(l, (struct sockaddr *)&a, &al), 0);
  CHECK_EQ(connect(c, (struct sockaddr *)&a, sizeof a), 0);
  int s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  static char data[300000];
  size_t left = sizeof data;
  /* the server reads while the client sends: everything written is acknowledged */
  while (left) {
    ssize_t k = send(c, data, left > 65536 ? 65536 : left, 0);
    CHECK(k > 0);
    left -= (size_t)k;
    for (ssize_t r = 1; r > 0;) r = recv(s, data, sizeof data, MSG_DONTWAIT);
  }
  for (ssize_t r = 1; r > 0;) r = recv(s, data, sizeof data, MSG_DONTWAIT);
  al = sizeof ca;
  CHECK_EQ(getsockname(c, (struct sockaddr *)&ca, &al), 0);
  al = sizeof sa;
  CHECK_EQ(getpeername(c, (struct sockaddr *)&sa, &al), 0);

  shoal__tcpdiag_t *d = shoal__tcpdiag_open();
  CHECK_MSG(d != NULL, "%s", shoal_last_error());
  shoal__tcpstat_t t;
  uint64_t deadline = shoal__now_ns() + 5000000000ull; /* a bound, not a timing: acks on loopback are at once */
  do {
    CHECK_EQ(shoal__tcp_socket(d, ca.sin_addr.s_addr, ntohs(ca.sin_port), sa.sin_addr.s_addr, ntohs(sa.sin_port), &t), 0);
  } while (t.bytes_acked < sizeof data + 1 && shoal__now_ns() < deadline && usleep(1000) == 0);
  CHECK_EQ(t.sport, ntohs(ca.sin_port));
  CHECK_EQ(t.dport, ntohs(sa.sin_port));
  CHECK_EQ(t.bytes_acked, sizeof data + 1); /* the SYN counts one */
  /* the dump of every socket sees the same connection with the same bytes */
  int n = shoal__tcp_sockets(d, all, 2048), found = 0;
  CHECK(n > 0);
  for (int i = 0; i < n; i++)
    if (all[i].sport == t.sport && all[i].dport == t.dport) {
      CHECK_EQ(all[i].cookie, t.cookie);
      found++;
    }
  CHECK_EQ(found, 1);
  /* the other direction is another socket; a connection to a port nobody listens on is none */
  CHECK_EQ(shoal__tcp_socket(d, sa.sin_addr.s_addr, ntohs(sa.sin_port), ca.sin_addr.s_addr, ntohs(ca.sin_port), &t), 0);
  CHECK_EQ(t.sport, ntohs(sa.sin_port));
  CHECK_EQ(t.bytes_acked <= 1, 1);
  CHECK_EQ(shoal__tcp_socket(d, ca.sin_addr.s_addr, ntohs(ca.sin_port), sa.sin_addr.s_addr, 1, &t), SHOAL_ERR_NOT_FOUND);
  close(c);
  close(s);
  close(l);
  shoal__tcpdiag_close(d);
}
