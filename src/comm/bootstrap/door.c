/* The door of a running job (rank 0 of its world keeps it): a listening socket at the job's master address
 * and port (where the rendezvous store was), opened on the first grow: the socket `shoal launch` hands
 * every rank (SHOAL_STORE_FD), else the master port bound again on rank 0's host. A new process
 * (shoal_comm_join, elastic/grow.c) connects there and waits, authenticated like a store client
 * (SHOAL_TOKEN, challenge-response), with its job id and the registration of its own listener. */
#include "comm/bootstrap/door.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/bootstrap/sock.h"
#include "comm/bootstrap/store.h"
#include "comm/comm_impl.h"
#include "core/error.h"
#include "core/log.h"

static int door_open(shoal__world_t *w) {
  if (w->door_fd >= 0) return 0;
  const shoal__boot_cfg_t *cfg = w->cfg;
  int fd = -1, rc = 0;
  char where[300];
  if (cfg->store_fd >= 0) { /* `shoal launch`: the store socket, still bound where the store was */
    int acc = 0;
    socklen_t l = sizeof acc;
    if (getsockopt(cfg->store_fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) != 0 || !acc)
      return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_STORE_FD=%d: not a listening socket", cfg->store_fd);
    fd = fcntl(cfg->store_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "SHOAL_STORE_FD=%d: dup: %s", cfg->store_fd, strerror(errno));
    snprintf(where, sizeof where, "the launcher's store socket (SHOAL_STORE_FD, %s:%d)", cfg->master_addr,
             cfg->master_port);
  } else {
    struct in_addr ip;
    if ((rc = shoal__boot_store_ip(cfg, &ip))) return rc;
    if ((ntohl(ip.s_addr) >> 24) != 127) ip.s_addr = htonl(INADDR_ANY);
    int port;
    if ((rc = shoal__sock_listen(ip, cfg->master_port, &fd, &port))) return rc;
    snprintf(where, sizeof where, "%s:%d on host %s (new ranks reach it with SHOAL_MASTER_ADDR naming this host)",
             (ntohl(ip.s_addr) >> 24) == 127 ? cfg->master_addr : "*", port, cfg->hostname);
  }
  shoal__sock_set_nonblock(fd);
  w->door_fd = fd;
  SHOAL_INFO("INIT", "rank 0: the door for new ranks is open at %s", where);
  return 0;
}

/* One waiting process: authenticate it (the store's challenge-response) and read its ENTER. 0 and its
 * registration; otherwise it is refused (and told why where that helps). */
static int door_serve(shoal__world_t *w, int fd, const char *src, shoal__reg_t reg) {
  shoal__deadline_t dl = shoal__deadline_in(SHOAL__DOOR_HS_S);
  char what[96];
  snprintf(what, sizeof what, "door: %s", src);
  uint8_t ns[SHOAL__NONCE_BYTES], nc[SHOAL__NONCE_BYTES];
  unsigned char ch[4 + SHOAL__NONCE_BYTES], buf[1 + SHOAL__JOB_ID_MAX + SHOAL__REG_BYTES + 8];
  shoal__auth_random(ns, sizeof ns);
  shoal__put_u32(ch, SHOAL__STORE_MAGIC);
  memcpy(ch + 4, ns, sizeof ns);
  int type = 0, rc;
  size_t len = 0;
  if ((rc = shoal__store_frame_write(fd, SHOAL__STORE_CHALLENGE, ch, sizeof ch, NULL, 0, dl, what)) ||
      (rc = shoal__store_frame_read(fd, &type, buf, sizeof buf, &len, dl, what)))
    return rc;
  if (type != SHOAL__STORE_AUTH || len != SHOAL__NONCE_BYTES + 8)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: no authentication answer", what);
  memcpy(nc, buf, sizeof nc);
  if (shoal__get_u64(buf + SHOAL__NONCE_BYTES) != shoal__auth_mac(&w->key, 'C', ns, nc, NULL, 0)) {
    static const char why[] = "wrong SHOAL_TOKEN (this job and the new rank were given different tokens)";
    shoal__store_frame_write(fd, SHOAL__STORE_AUTH_FAIL, why, sizeof why - 1, NULL, 0, dl, what);
    return shoal__seterr(SHOAL_ERR_AUTH, "%s: wrong token: refused", what);
  }
  unsigned char ok[8];
  shoal__put_u64(ok, shoal__auth_mac(&w->key, 'A', nc, ns, NULL, 0));
  if ((rc = shoal__store_frame_write(fd, SHOAL__STORE_AUTH_OK, ok, 8, NULL, 0, dl, what)) ||
      (rc = shoal__store_frame_read(fd, &type, buf, sizeof buf, &len, dl, what)))
    return rc;
  if (type != SHOAL__STORE_ENTER || len < 1 || len != 1u + buf[0] + SHOAL__REG_BYTES || buf[0] > SHOAL__JOB_ID_MAX)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "%s: not a new rank (frame %d of %zu bytes)", what, type, len);
  char job[SHOAL__JOB_ID_MAX + 1];
  memcpy(job, buf + 1, buf[0]);
  job[buf[0]] = '\0';
  if (strcmp(job, w->cfg->job_id)) {
    char why[400];
    unsigned char st[4];
    shoal__put_u32(st, (uint32_t)-SHOAL_ERR_CONFIG);
    snprintf(why, sizeof why, "this door belongs to job '%s' and the new rank to job '%s' (SHOAL_JOB_ID): "
             "two jobs on one port?", w->cfg->job_id, job);
    shoal__store_frame_write(fd, SHOAL__STORE_ERROR, st, 4, why, strlen(why), dl, what);
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s: %s", what, why);
  }
  memcpy(reg, buf + 1 + buf[0], SHOAL__REG_BYTES);
  reg[SHOAL__REG_BYTES - 1] = '\0';
  return 0;
}

int shoal__door_poll(shoal__world_t *w, int *fds, shoal__reg_t *regs, int max) {
  if (door_open(w)) {
    if (!w->door_warned)
      SHOAL_WARN("INIT", "rank 0: cannot open the door for new ranks: %s; new ranks cannot enter this job",
                 shoal_last_error());
    w->door_warned = 1;
    return 0;
  }
  int k = 0;
  while (k < max) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int fd = accept4(w->door_fd, (struct sockaddr *)&a, &al, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    char src[64];
    shoal__sock_addr_str(&a, src, sizeof src);
    shoal__sock_tune(fd, 0);
    if (door_serve(w, fd, src, regs[k])) {
      SHOAL_WARN("INIT", "rank 0: %s", shoal_last_error());
      close(fd);
      continue;
    }
    SHOAL_INFO("INIT", "rank 0: a new rank is waiting at the door: %s", regs[k]);
    fds[k++] = fd;
  }
  return k;
}

void shoal__door_finish(shoal__world_t *w) {
  if (w->rank != 0 || w->aborted || w->door_fd < 0) return;
  for (;;) { /* whoever waits now would wait for nothing: tell them */
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int fd = accept4(w->door_fd, (struct sockaddr *)&a, &al, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    char src[64];
    shoal__reg_t reg;
    shoal__sock_addr_str(&a, src, sizeof src);
    if (door_serve(w, fd, src, reg) == 0) {
      static const char why[] = "the job has finished: there is nothing to join";
      unsigned char st[4];
      shoal__put_u32(st, (uint32_t)-SHOAL_ERR_NOT_FOUND);
      shoal__store_frame_write(fd, SHOAL__STORE_ERROR, st, 4, why, sizeof why - 1, shoal__deadline_in(SHOAL__DOOR_HS_S),
                               "door");
    }
    close(fd);
  }
}
