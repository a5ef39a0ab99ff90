/* A replica's own place in a router (serve.h): it says where it listens when it is ready and that it leaves
 * before it drains, through the router's POST /router/replicas, so whoever starts replicas (an operator, the
 * controller's loaning) need not tell the router. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "serve/serve.h"

static size_t discard(char *p, size_t s, size_t n, void *arg) {
  (void)p, (void)arg;
  return s * n;
}

int shoal__serve_announce(const char *router, const char *self, int add, double service_s, double timeout_s) {
  size_t rl = router ? strlen(router) : 0;
  if (rl < 8 || rl > 400 || strncmp(router, "http://", 7))
    return shoal__seterr(SHOAL_ERR_INVALID, "router %s: expected http://HOST:PORT", router ? router : "(none)");
  if (!self || !shoal__pool_url_ok(self))
    return shoal__seterr(SHOAL_ERR_INVALID, "replica '%s': expected http://HOST:PORT", self ? self : "(null)");
  char url[512], body[256];
  snprintf(url, sizeof url, "%.*s/router/replicas", (int)rl - (router[rl - 1] == '/'), router);
  if (add && service_s > 0) snprintf(body, sizeof body, "{\"add\":\"%s\",\"service_s\":%.6f}", self, service_s);
  else snprintf(body, sizeof body, "{\"%s\":\"%s\"}", add ? "add" : "drop", self);
  CURL *e = curl_easy_init();
  if (!e) return shoal__seterr(SHOAL_ERR_NOMEM, "router %s: out of memory", router);
  char err[CURL_ERROR_SIZE] = "";
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1e3) + 1);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
  CURLcode cc = curl_easy_perform(e);
  long code = 0;
  if (cc == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(e);
  curl_slist_free_all(h);
  if (cc != CURLE_OK) return shoal__seterr(SHOAL_ERR_IO, "router %s: %s", router, err[0] ? err : curl_easy_strerror(cc));
  /* a drop of a replica the router does not hold (it was never added, or the router restarted) is done */
  if (code == 200 || (!add && code == 404)) return 0;
  return shoal__seterr(code == 400 ? SHOAL_ERR_INVALID : SHOAL_ERR_IO, "router %s: %s %s answered HTTP %ld", router,
                       add ? "adding" : "dropping", self, code);
}

int shoal__serve_self_url(const char *addr, int port, char *out, size_t cap) {
  char ip[INET_ADDRSTRLEN] = "127.0.0.1";
  if (addr && strcmp(addr, "0.0.0.0")) {
    snprintf(ip, sizeof ip, "%s", addr);
  } else {
    /* listening everywhere: the first address of an interface that is up and not loopback (a testbed host's
     * veth, a node's NIC); none: loopback */
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0)
      for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) {
          inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof ip);
          break;
        }
    if (ifs) freeifaddrs(ifs);
  }
  int k = snprintf(out, cap, "http://%s:%d", ip, port);
  return k < 0 || (size_t)k >= cap ? shoal__seterr(SHOAL_ERR_INVALID, "a replica's URL longer than %zu", cap) : 0;
}
