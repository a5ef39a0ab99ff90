/* The fresh listener of a shrink or grow never takes a port a rank of the old world advertised: the kernel
 * hands out a lost rank's port again once that process is gone, and shrink's coordinator would take the
 * connection that port accepts for the lost rank being alive (and wait for it until the deadline). The
 * kernel's choice is made certain with a network namespace whose ephemeral range is two ports (bind(0)
 * offers the odd one first). */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../runner.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/comm_impl.h"
#include "comm/elastic/elastic.h"
#include "shoal/comm.h"

/* This test process in a network namespace of its own, loopback up, ephemeral ports 40000-40001. */
static void two_port_namespace(void) {
  if (geteuid() != 0) shoal_test_skip("not root: a network namespace needs root");
  if (unshare(CLONE_NEWNET) != 0) shoal_test_skip("cannot create a network namespace here");
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  CHECK(s >= 0);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  CHECK(ioctl(s, SIOCGIFFLAGS, &ifr) == 0);
  ifr.ifr_flags |= IFF_UP;
  CHECK(ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
  close(s);
  int fd = open("/proc/sys/net/ipv4/ip_local_port_range", O_WRONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  CHECK(write(fd, "40000 40001", 11) == 11);
  close(fd);
}

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static int listening_port(int fd) {
  struct sockaddr_in a;
  socklen_t l = sizeof a;
  return getsockname(fd, (struct sockaddr *)&a, &l) == 0 ? ntohs(a.sin_port) : -1;
}

TEST(reform_listener_skips_the_ports_of_the_old_worlds_ranks) {
  two_port_namespace();
  shoal__boot_cfg_t cfg;
  memset(&cfg, 0, sizeof cfg);
  struct in_addr lo = {htonl(INADDR_LOOPBACK)};
  shoal__world_t *was = shoal__world_new(0, 3);
  CHECK(was != NULL);
  snprintf(was->peers[0].addr, sizeof was->peers[0].addr, "127.0.0.1:40000"); /* this rank's own: not avoided */
  snprintf(was->peers[1].addr, sizeof was->peers[1].addr, "127.0.0.1:40001"); /* a lost rank's */
  snprintf(was->peers[2].addr, sizeof was->peers[2].addr, "10.0.0.9:40000");  /* another host's */
  int fds0 = open_fds(), fd = -1;
  shoal__reg_t reg;
  /* without the old world the kernel's first offer stands: the lost rank's port */
  CHECK_OK(shoal__reform_listen(&cfg, lo, NULL, &fd, reg));
  CHECK_MSG(listening_port(fd) == 40001, "kernel offered %d first, the test expects 40001", listening_port(fd));
  close(fd);
  CHECK_OK(shoal__reform_listen(&cfg, lo, was, &fd, reg));
  CHECK_MSG(listening_port(fd) == 40000, "listener on %d, a port rank 1 of the old world advertised",
            listening_port(fd));
  CHECK_MSG(!strncmp(reg, "127.0.0.1:40000 ", 16), "registration '%s'", reg);
  close(fd);
  CHECK_MSG(open_fds() == fds0, "%d descriptors open, %d before", open_fds(), fds0);
  /* every port the kernel has is one an old rank advertised: an error, nothing left open */
  snprintf(was->peers[0].addr, sizeof was->peers[0].addr, "127.0.0.1:1");
  snprintf(was->peers[2].addr, sizeof was->peers[2].addr, "127.0.0.1:40000");
  fd = -1;
  CHECK(shoal__reform_listen(&cfg, lo, was, &fd, reg) == SHOAL_ERR_ADDR_IN_USE);
  CHECK(fd == -1);
  CHECK_MSG(open_fds() == fds0, "%d descriptors open after the error, %d before", open_fds(), fds0);
  shoal__world_free(was);
}
