/* Policy parameters: "key=value:key=value" (policy.h). */
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "sched/policy.h"

/* Find key in params; returns pointer to the value and its length via *len. */
static const char *find(const char *params, const char *key, size_t *len) {
  if (!params) return NULL;
  size_t kl = strlen(key);
  const char *p = params;
  while (*p) {
    const char *end = strchr(p, ':');
    size_t l = end ? (size_t)(end - p) : strlen(p);
    if (l > kl && !strncmp(p, key, kl) && p[kl] == '=') {
      *len = l - kl - 1;
      return p + kl + 1;
    }
    if (!end) break;
    p = end + 1;
  }
  return NULL;
}

int shoal__param_check(const char *policy, const char *params, const char *const *keys) {
  if (!params) return 0;
  const char *p = params;
  while (*p) {
    const char *end = strchr(p, ':');
    size_t l = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', l);
    if (!eq) return shoal__seterr(SHOAL_ERR_CONFIG, "policy %s: parameter '%.*s' is not key=value", policy, (int)l, p);
    size_t kl = (size_t)(eq - p);
    if (eq + 1 == p + l)
      return shoal__seterr(SHOAL_ERR_CONFIG, "policy %s: parameter '%.*s' has no value", policy, (int)kl, p);
    for (const char *q = params; q < p;) { /* the same key earlier: which one was meant? */
      const char *qe = strchr(q, ':');
      if (!strncmp(q, p, kl + 1))
        return shoal__seterr(SHOAL_ERR_CONFIG, "policy %s: parameter '%.*s' given twice", policy, (int)kl, p);
      q = qe + 1;
    }
    int ok = 0;
    for (int i = 0; keys && keys[i]; i++)
      if (strlen(keys[i]) == kl && !strncmp(keys[i], p, kl)) ok = 1;
    if (!ok) {
      char known[256] = "";
      for (int i = 0; keys && keys[i]; i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, keys[i], sizeof known - strlen(known) - 1);
      }
      return shoal__seterr(SHOAL_ERR_CONFIG, "policy %s: unknown parameter '%.*s' (known: %s)", policy, (int)kl, p,
                           known[0] ? known : "none");
    }
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

int shoal__param_str(const char *params, const char *key, char *buf, size_t cap) {
  size_t l = 0;
  const char *v = find(params, key, &l);
  if (!v) {
    if (cap) buf[0] = 0;
    return 0;
  }
  if (l >= cap) {
    if (cap) buf[0] = 0;
    return shoal__seterr(SHOAL_ERR_CONFIG, "policy parameter %s=%.20s...: longer than %zu characters", key, v, cap - 1);
  }
  memcpy(buf, v, l);
  buf[l] = 0;
  return 1;
}

int shoal__param_double(const char *policy, const char *params, const char *key, double def, double min, double max,
                        double *out) {
  char v[64], what[96];
  int found = shoal__param_str(params, key, v, sizeof v);
  if (found < 0) return found;
  if (!found) {
    *out = def;
    return 0;
  }
  snprintf(what, sizeof what, "policy %s: %s", policy, key);
  return shoal__parse_double(what, v, min, max, out);
}

int shoal__param_long(const char *policy, const char *params, const char *key, long def, long min, long max, long *out) {
  char v[64], what[96];
  int found = shoal__param_str(params, key, v, sizeof v);
  if (found < 0) return found;
  if (!found) {
    *out = def;
    return 0;
  }
  snprintf(what, sizeof what, "policy %s: %s", policy, key);
  return shoal__parse_long(what, v, min, max, out);
}
