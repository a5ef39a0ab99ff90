/* Configuration of a joining rank. Precedence (docs/comm.md):
 *   rank/size: params > SHOAL_RANK/SHOAL_WORLD_SIZE > RANK/WORLD_SIZE (torchrun)
 *              > OMPI_COMM_WORLD_RANK/SIZE > PMI_RANK/PMI_SIZE > SLURM_PROCID/SLURM_NTASKS
 *              (all in the environment) > SHOAL_RANK/SHOAL_WORLD_SIZE in SHOAL_CONF_FILE
 *              > a world of one;
 *   store:     params > SHOAL_MASTER_ADDR/PORT > MASTER_ADDR/PORT (environment)
 *              > SHOAL_MASTER_ADDR/PORT in SHOAL_CONF_FILE > 127.0.0.1:29500. */
#include "comm/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/bootstrap/sock.h"
#include "comm/bootstrap/store.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

static const char *const rank_vars[][2] = {
    {"SHOAL_RANK", "SHOAL_WORLD_SIZE"}, {"RANK", "WORLD_SIZE"},  {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},           {"SLURM_PROCID", "SLURM_NTASKS"},
};

/* SHOAL_* may come from the config file too; launcher variables only from the environment. */
static const char *var(const char *name) {
  return strncmp(name, "SHOAL_", 6) ? getenv(name) : shoal__config_raw(name);
}

/* The environment wins over the config file across the families: a launcher's RANK or MASTER_ADDR in
 * the environment is not overridden by a SHOAL_RANK or SHOAL_MASTER_ADDR default in the file. in_env 1:
 * the environment only, 0: the environment or the file. */
static const char *var_in(const char *name, int in_env) { return in_env ? getenv(name) : var(name); }

int shoal__boot_world_given(void) {
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++)
    if (var(rank_vars[i][0]) || var(rank_vars[i][1])) return 1;
  return 0;
}

static int parse_int_var(const char *name, const char *s, long min, long max, int *out) {
  long v;
  int rc = shoal__parse_long(name, s, min, max, &v);
  if (rc) return shoal__config_from_where(name, rc); /* SHOAL_ERR_CONFIG naming the variable (and file:line) */
  *out = (int)v;
  return 0;
}

static int resolve_rank(const shoal_comm_params_t *p, shoal__boot_cfg_t *cfg) {
  int rank = p->rank, size = p->world_size;
  if (rank < -1 || size < -1)
    return shoal__seterr(SHOAL_ERR_CONFIG, "params.%s=%d: expected -1 (from the environment) or %s",
                         rank < -1 ? "rank" : "world_size", rank < -1 ? rank : size,
                         rank < -1 ? "a rank 0 .. world_size-1" : "a world size >= 1");
  const char *src = "params";
  const char *rname = "params.rank", *sname = "params.world_size";
  if (rank < 0 || size < 0) {
    size_t n = sizeof rank_vars / sizeof rank_vars[0];
    size_t i = n;
    for (int in_env = 1; in_env >= 0 && i == n; in_env--)
      for (i = 0; i < n; i++)
        if ((rank < 0 && var_in(rank_vars[i][0], in_env)) || (size < 0 && var_in(rank_vars[i][1], in_env))) break;
    if (i == n) {
      if (rank < 0) rank = 0;
      if (size < 0) size = 1;
      src = "defaults (no rank variable set: a world of one)";
    } else {
      src = rank_vars[i][0];
      if (rank < 0) {
        const char *s = var(rank_vars[i][0]);
        if (!s)
          return shoal__seterr(SHOAL_ERR_CONFIG, "%s is set but %s is not", rank_vars[i][1], rank_vars[i][0]);
        if (parse_int_var(rank_vars[i][0], s, 0, 1 << 24, &rank)) return SHOAL_ERR_CONFIG;
        rname = rank_vars[i][0];
      }
      if (size < 0) {
        const char *s = var(rank_vars[i][1]);
        if (!s)
          return shoal__seterr(SHOAL_ERR_CONFIG, "%s is set but %s is not", rank_vars[i][0], rank_vars[i][1]);
        if (parse_int_var(rank_vars[i][1], s, 1, 1 << 24, &size)) return SHOAL_ERR_CONFIG;
        sname = rank_vars[i][1];
      }
    }
  }
  if (size < 1) return shoal__seterr(SHOAL_ERR_CONFIG, "%s=%d: the world size must be at least 1", sname, size);
  if (rank >= size)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s=%d is not below %s=%d (ranks are 0 .. size-1)", rname, rank, sname, size);
  cfg->rank = rank;
  cfg->size = size;
  cfg->rank_src = src;
  return 0;
}

const char *shoal__boot_store_addr(const char *given, const char **src) {
  const char *addr = given;
  *src = "params";
  if (!addr && (addr = getenv("SHOAL_MASTER_ADDR"))) *src = "SHOAL_MASTER_ADDR";
  if (!addr && (addr = getenv("MASTER_ADDR"))) *src = "MASTER_ADDR";
  if (!addr && (addr = var("SHOAL_MASTER_ADDR"))) *src = "SHOAL_MASTER_ADDR (SHOAL_CONF_FILE)";
  if (!addr) addr = "127.0.0.1", *src = "default";
  return addr;
}

static int resolve_store(const shoal_comm_params_t *p, shoal__boot_cfg_t *cfg) {
  const char *asrc, *addr = shoal__boot_store_addr(p->master_addr, &asrc);
  if (!*addr || strlen(addr) >= sizeof cfg->master_addr)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': not a host name or address", asrc, addr);
  snprintf(cfg->master_addr, sizeof cfg->master_addr, "%s", addr);
  cfg->addr_src = asrc;
  /* a world of one needs no store (resolved on first use); else an unknown host names its variable now */
  if (cfg->size > 1) {
    int rc = shoal__boot_store_ip(cfg, &cfg->master_ip);
    if (rc) return rc;
    cfg->master_ip_ok = 1;
  }
  int port = p->master_port;
  const char *psrc = "params";
  if (port < -1 || port > 65535)
    return shoal__seterr(SHOAL_ERR_CONFIG, "params.master_port=%d: expected -1 (from the environment) or a port "
                         "0..65535", port);
  if (port < 0) {
    const char *s = getenv("SHOAL_MASTER_PORT"), *pvar = "SHOAL_MASTER_PORT";
    psrc = "SHOAL_MASTER_PORT";
    if (!s) s = getenv("MASTER_PORT"), psrc = pvar = "MASTER_PORT";
    if (!s) s = var("SHOAL_MASTER_PORT"), psrc = "SHOAL_MASTER_PORT (SHOAL_CONF_FILE)", pvar = "SHOAL_MASTER_PORT";
    if (!s) s = "29500", psrc = pvar = "default";
    if (parse_int_var(pvar, s, 0, 65535, &port)) return SHOAL_ERR_CONFIG;
    if (!strcmp(pvar, "MASTER_PORT") && getenv("TORCHELASTIC_RUN_ID")) {
      /* under torchrun MASTER_PORT is torch's: its agent's store listens there (static rendezvous), or
       * rank 0's process group will (elastic): shoal's store takes the next port */
      if (port < 1 || port > 65534)
        return shoal__seterr(SHOAL_ERR_CONFIG, "MASTER_PORT='%s': under torchrun shoal's store listens on "
                             "MASTER_PORT + 1, which needs MASTER_PORT 1..65534 (or set SHOAL_MASTER_PORT)", s);
      port++;
      psrc = "MASTER_PORT + 1 (torchrun's agent holds MASTER_PORT)";
    }
  }
  cfg->master_port = port;
  cfg->port_src = psrc;
  return 0;
}

int shoal__boot_store_ip(const shoal__boot_cfg_t *cfg, struct in_addr *ip) {
  if (cfg->master_ip_ok) {
    *ip = cfg->master_ip;
    return 0;
  }
  int rc = shoal__sock_resolve(cfg->master_addr, ip);
  return rc ? shoal__err_prefix(rc, "%s: ", cfg->addr_src) : 0;
}

int shoal__boot_store_connect(const shoal__boot_cfg_t *cfg, int port, const shoal__authkey_t *key,
                              shoal__deadline_t dl, shoal__store_client_t *out) {
  struct in_addr ip;
  int rc = shoal__boot_store_ip(cfg, &ip);
  return rc ? rc : shoal__store_connect(cfg->master_addr, ip, port, key, dl, out);
}

static void read_boot_id(char *out, size_t cap) {
  snprintf(out, cap, "unknown");
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return;
  if (fgets(out, (int)cap, f)) out[strcspn(out, "\n")] = '\0';
  fclose(f);
}

/* The launcher's id of this job, from the launcher that gave the rank first (several launchers' variables
 * coexist: mpirun inside a Slurm allocation sees SLURM_JOB_ID without a step, the same for every mpirun
 * there, while each has its own PMIx namespace), "" if none tells jobs apart:
 *   torchrun: TORCHELASTIC_RUN_ID; "none" (static rendezvous, every job's) -> its agent's MASTER_ADDR:PORT;
 *   srun: SLURM_JOB_ID.SLURM_STEP_ID;  mpirun (OMPI_*, PMI_*): PMIX_NAMESPACE, else srun's step. */
static void launcher_job_id(const char *rank_src, char *out, size_t cap) {
  const char *te = getenv("TORCHELASTIC_RUN_ID"), *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
  const char *ns = getenv("PMIX_NAMESPACE");
  int from_mpi = !strncmp(rank_src, "OMPI_", 5) || !strncmp(rank_src, "PMI_", 4);
  int from_slurm = !strncmp(rank_src, "SLURM_", 6);
  out[0] = '\0';
  if (!from_mpi && !from_slurm && te && *te) {
    const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
    if (strcmp(te, "none")) snprintf(out, cap, "torchrun:%.50s", te);
    else if (p) snprintf(out, cap, "torchrun:%.40s:%.8s", a ? a : "", p);
  } else if (from_mpi) {
    if (ns && *ns) snprintf(out, cap, "pmix:%.50s", ns);
    else if (job && *job && step && *step) snprintf(out, cap, "slurm:%.30s.%.20s", job, step);
  } else if (job && *job && step && *step) {
    snprintf(out, cap, "slurm:%.30s.%.20s", job, step);
  } else if (ns && *ns) {
    snprintf(out, cap, "pmix:%.50s", ns);
  }
}

/* The rack of this host, for the cost model's shared uplinks (topo.h): SHOAL_RACK, else the switch above the
 * node in Slurm's tree topology (SLURM_TOPOLOGY_ADDR "core.r0.node3" with pattern "switch.switch.node": the
 * last switch), else "-" (unknown). */
static int resolve_rack(char *out, size_t cap) {
  const char *r = shoal__config_str("SHOAL_RACK", "");
  const char *src = "SHOAL_RACK";
  char buf[256] = "";
  if (!*r) {
    const char *addr = getenv("SLURM_TOPOLOGY_ADDR"), *pat = getenv("SLURM_TOPOLOGY_ADDR_PATTERN");
    const char *last = addr ? strrchr(addr, '.') : NULL;
    if (last && (!pat || (strlen(pat) > 5 && !strcmp(pat + strlen(pat) - 5, ".node")))) {
      const char *first = last;
      while (first > addr && first[-1] != '.') first--;
      snprintf(buf, sizeof buf, "%.*s", (int)(last - first), first);
      r = buf, src = "SLURM_TOPOLOGY_ADDR";
    }
  }
  if (!*r) r = "-";
  if (strlen(r) >= cap) return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': at most %zu bytes", src, r, cap - 1);
  for (const char *h = r; *h; h++)
    if (*h == ' ' || *h == '\t' || *h == '\n')
      return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': must not contain white space", src, r);
  snprintf(out, cap, "%s", r);
  return 0;
}

void shoal_comm_params_init(shoal_comm_params_t *p) {
  memset(p, 0, sizeof *p);
  p->rank = -1;
  p->world_size = -1;
  p->master_port = -1;
}

int shoal__boot_resolve(const shoal_comm_params_t *p, shoal__boot_cfg_t *cfg) {
  shoal__boot_cfg_t c;
  memset(&c, 0, sizeof c);
  int rc;
  if ((rc = resolve_rank(p, &c)) || (rc = resolve_store(p, &c))) return rc;
  const char *tok = p->token ? p->token : shoal__config_str("SHOAL_TOKEN", "");
  if (strlen(tok) >= sizeof c.token) return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_TOKEN: longer than 511 bytes");
  snprintf(c.token, sizeof c.token, "%s", tok);
  /* the job's identity: SHOAL_JOB_ID (`shoal launch` sets it), else the launcher's own job id */
  const char *job = shoal__config_str("SHOAL_JOB_ID", "");
  if (strlen(job) > 64) return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_JOB_ID: longer than 64 bytes");
  if (*job) snprintf(c.job_id, sizeof c.job_id, "%s", job);
  else launcher_job_id(c.rank_src, c.job_id, sizeof c.job_id);
  const char *ifn = p->ifname ? p->ifname : shoal__config_str("SHOAL_SOCKET_IFNAME", "");
  c.ifname_src = p->ifname ? "params.ifname" : "SHOAL_SOCKET_IFNAME";
  snprintf(c.ifname, sizeof c.ifname, "%s", ifn);
  if (strlen(ifn) >= sizeof c.ifname)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s: longer than %zu bytes", c.ifname_src, sizeof c.ifname - 1);
  const char *hn = p->hostname ? p->hostname : shoal__config_str("SHOAL_HOSTNAME", "");
  c.hostname_src = p->hostname ? "params.hostname" : "SHOAL_HOSTNAME";
  if (strlen(hn) >= sizeof c.hostname) /* cut, two emulated hosts could become one */
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s: %zu bytes, at most %zu", c.hostname_src, strlen(hn),
                         sizeof c.hostname - 1);
  if (*hn)
    snprintf(c.hostname, sizeof c.hostname, "%s", hn);
  else if (gethostname(c.hostname, sizeof c.hostname) != 0)
    snprintf(c.hostname, sizeof c.hostname, "unknown");
  c.hostname[sizeof c.hostname - 1] = '\0';
  for (const char *h = c.hostname; *h; h++)
    if (*h == ' ' || *h == '\t' || *h == '\n')
      return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s': must not contain white space", c.hostname_src, c.hostname);
  if (!c.hostname[0]) snprintf(c.hostname, sizeof c.hostname, "unknown");
  read_boot_id(c.boot_id, sizeof c.boot_id);
  if ((rc = resolve_rack(c.rack, sizeof c.rack))) return rc;
  double d;
  if (isnan(p->timeout_s) || isinf(p->timeout_s) || isnan(p->connect_timeout_s) || isinf(p->connect_timeout_s))
    return shoal__seterr(SHOAL_ERR_CONFIG, "params.%s=%g: expected seconds (<= 0: from the environment); every "
                         "blocking call has a finite deadline", isfinite(p->timeout_s) ? "connect_timeout_s" : "timeout_s",
                         isfinite(p->timeout_s) ? p->connect_timeout_s : p->timeout_s);
  if (p->timeout_s > 1e7 || p->connect_timeout_s > 1e7)
    return shoal__seterr(SHOAL_ERR_CONFIG, "params.%s=%g: out of range (at most 1e+07 s)",
                         p->timeout_s > 1e7 ? "timeout_s" : "connect_timeout_s",
                         p->timeout_s > 1e7 ? p->timeout_s : p->connect_timeout_s);
  if (p->timeout_s > 0)
    c.timeout_s = p->timeout_s;
  else if ((rc = shoal__config_double("SHOAL_TIMEOUT", 300, 0.001, 1e7, &d)))
    return rc;
  else
    c.timeout_s = d;
  if (p->connect_timeout_s > 0)
    c.connect_timeout_s = p->connect_timeout_s;
  else if ((rc = shoal__config_double("SHOAL_CONNECT_TIMEOUT", 120, 0.001, 1e7, &d)))
    return rc;
  else
    c.connect_timeout_s = d;
  if ((rc = shoal__config_long("SHOAL_SOCKET_BUFFER", 4194304, 0, 1L << 30, &c.sockbuf))) return rc;
  if ((rc = shoal__config_long("SHOAL_SOCKET_RCVBUF_REMOTE", 131072, 0, 1L << 30, &c.rcvbuf_remote))) return rc;
  if ((rc = shoal__config_double("SHOAL_EMU_DELAY_US", 0, 0, 1e7, &c.emu_delay_us))) return rc;
  if ((rc = shoal__config_double("SHOAL_SPIN_US", 0, 0, 1e6, &c.spin_us))) return rc;
  const char *cc = shoal__config_str("SHOAL_TCP_CONGESTION", "auto");
  if (!cc || !*cc || strlen(cc) >= sizeof c.tcp_cc || strspn(cc, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(cc))
    return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_TCP_CONGESTION='%s': expected auto, system or an algorithm name "
                         "(see /proc/sys/net/ipv4/tcp_available_congestion_control)", cc ? cc : "");
  snprintf(c.tcp_cc, sizeof c.tcp_cc, "%s", cc);
  long fd;
  if ((rc = shoal__config_long("SHOAL_STORE_FD", -1, -1, 1 << 20, &fd))) return rc;
  c.store_fd = (int)fd;
  *cfg = c;
  return 0;
}

static int item_match(const char *item, size_t len, const char *name) {
  if (len && item[0] == '=') return strlen(name) == len - 1 && !strncmp(name, item + 1, len - 1);
  return len && !strncmp(name, item, len);
}

static int spec_match(const char *spec, const char *name) {
  const char *s = spec;
  while (*s) {
    const char *e = strchr(s, ',');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (item_match(s, len, name)) return 1;
    if (!e) break;
    s = e + 1;
  }
  return 0;
}

int shoal__boot_pick_addr(const char *spec, const char *spec_src, struct in_addr route, struct in_addr *out, char *desc,
                          size_t cap) {
  if (!spec || !*spec) {
    *out = route;
    snprintf(desc, cap, "the route to the store (set SHOAL_SOCKET_IFNAME to choose)");
    return 0;
  }
  int exclude = spec[0] == '^';
  const char *list = exclude ? spec + 1 : spec;
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return shoal__seterr(SHOAL_ERR_SYSTEM, "getifaddrs failed");
  char seen[512] = "";
  size_t used = 0;
  int found = 0, found_lo = 0;
  struct in_addr lo_addr = {0};
  char lo_name[IF_NAMESIZE + 1] = "";
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    if (used < sizeof seen - 40)
      used += (size_t)snprintf(seen + used, sizeof seen - used, "%s%s %s", used ? ", " : "", i->ifa_name, ip);
    int m = spec_match(list, i->ifa_name);
    if (exclude ? m : !m) continue;
    if (exclude && (i->ifa_flags & IFF_LOOPBACK)) { /* ^docker: prefer a real interface over lo */
      if (!found_lo) lo_addr = a, snprintf(lo_name, sizeof lo_name, "%s", i->ifa_name), found_lo = 1;
      continue;
    }
    if (!found) {
      *out = a;
      snprintf(desc, cap, "interface %s (%s=%s)", i->ifa_name, spec_src, spec);
      found = 1;
    }
  }
  freeifaddrs(ifs);
  if (!found && found_lo) {
    *out = lo_addr;
    snprintf(desc, cap, "interface %s (%s=%s)", lo_name, spec_src, spec);
    found = 1;
  }
  if (!found)
    return shoal__seterr(SHOAL_ERR_CONFIG, "%s='%s' matches no interface with an IPv4 address "
                         "(interfaces: %s; syntax: prefix, =exact, ^exclude, comma list)", spec_src, spec, seen);
  return 0;
}
