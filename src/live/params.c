/* The shoal comment convention (params.h). Unknown fields and malformed values
 * are errors, not defaults: a job whose parameters cannot be read is reported
 * unschedulable with the reason, never run with guessed ones. */
#include "live/params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int shoal__live_params_tagged(const char *comment) {
  return comment && !strncmp(comment, SHOAL_LIVE_COMMENT_TAG, strlen(SHOAL_LIVE_COMMENT_TAG));
}

static int read_count(const char *key, const char *v, int *out, char *why, size_t cap) {
  char *e = NULL;
  errno = 0;
  long x = strtol(v, &e, 10);
  if (!*v || *e || errno || x < 1 || x > SHOAL_LIVE_WORKERS_MAX) {
    snprintf(why, cap, "%s='%s' is not a count 1..%d", key, v, SHOAL_LIVE_WORKERS_MAX);
    return SHOAL_ERR_PARSE;
  }
  *out = (int)x;
  return 0;
}

static int read_field(shoal_live_params_t *p, char *t, char *why, size_t cap) {
  char *eq = strchr(t, '=');
  if (!eq) {
    snprintf(why, cap, "field '%s' is not key=value", t);
    return SHOAL_ERR_PARSE;
  }
  *eq++ = 0;
  if (!strcmp(t, "gpus")) return read_count(t, eq, &p->gpus, why, cap);
  if (!strcmp(t, "min")) return read_count(t, eq, &p->min, why, cap);
  if (!strcmp(t, "max")) return read_count(t, eq, &p->max, why, cap);
  if (!strcmp(t, "model")) {
    if (strlen(eq) >= sizeof p->model) {
      snprintf(why, cap, "model name longer than %zu characters", sizeof p->model - 1);
      return SHOAL_ERR_PARSE;
    }
    snprintf(p->model, sizeof p->model, "%s", eq);
    return 0;
  }
  if (!strcmp(t, "ps")) return read_count(t, eq, &p->ps, why, cap);
  if (!strcmp(t, "leave")) {
    if (strcmp(eq, "1") && strcmp(eq, "0")) {
      snprintf(why, cap, "leave='%s' is not 0 or 1", eq);
      return SHOAL_ERR_PARSE;
    }
    p->leave = eq[0] == '1';
    return 0;
  }
  if (!strcmp(t, "layout")) {
    if (strlen(eq) >= sizeof p->layout) {
      snprintf(why, cap, "layout longer than %zu characters", sizeof p->layout - 1);
      return SHOAL_ERR_PARSE;
    }
    snprintf(p->layout, sizeof p->layout, "%s", eq);
    return 0;
  }
  if (!strcmp(t, "work")) {
    char *e = NULL;
    p->work = strtod(eq, &e);
    if (!*eq || *e || !isfinite(p->work) || p->work < 0) {
      snprintf(why, cap, "work='%s' is not a number of steps >= 0", eq);
      return SHOAL_ERR_PARSE;
    }
    return 0;
  }
  snprintf(why, cap, "unknown field '%s' (known: gpus, min, max, ps, model, work, leave, layout)", t);
  return SHOAL_ERR_PARSE;
}

int shoal__live_params_parse(const char *comment, shoal_live_params_t *out, char *why, size_t cap) {
  if (!shoal__live_params_tagged(comment)) {
    snprintf(why, cap, "not a shoal job (its comment does not start with '%s')", SHOAL_LIVE_COMMENT_TAG);
    return SHOAL_ERR_PARSE;
  }
  char buf[512];
  if (strlen(comment) >= sizeof buf) {
    snprintf(why, cap, "comment longer than %zu characters", sizeof buf - 1);
    return SHOAL_ERR_PARSE;
  }
  snprintf(buf, sizeof buf, "%s", comment + strlen(SHOAL_LIVE_COMMENT_TAG));
  shoal_live_params_t p;
  memset(&p, 0, sizeof p);
  for (char *sv = NULL, *t = strtok_r(buf, ":", &sv); t; t = strtok_r(NULL, ":", &sv)) {
    int rc = read_field(&p, t, why, cap);
    if (rc) return rc;
  }
  if (!p.gpus) p.gpus = p.min ? p.min : 1;
  if (!p.min) p.min = p.gpus;
  if (!p.max) p.max = p.gpus;
  int rc = shoal__live_params_check(&p, why, cap);
  if (rc) return SHOAL_ERR_PARSE;
  *out = p;
  return 0;
}

int shoal__live_params_leaves(const char *comment) {
  shoal_live_params_t p;
  char why[256];
  return shoal__live_params_parse(comment, &p, why, sizeof why) == 0 && p.leave;
}

int shoal__live_params_check(const shoal_live_params_t *p, char *why, size_t cap) {
  if (p->gpus < 1 || p->min < 1 || p->max < 1 || p->max > SHOAL_LIVE_WORKERS_MAX) {
    snprintf(why, cap, "worker counts must be 1..%d", SHOAL_LIVE_WORKERS_MAX);
    return SHOAL_ERR_INVALID;
  }
  if (p->min > p->gpus || p->gpus > p->max) {
    snprintf(why, cap, "need min <= gpus <= max (min %d, gpus %d, max %d)", p->min, p->gpus, p->max);
    return SHOAL_ERR_INVALID;
  }
  for (const char *c = p->model; *c; c++)
    if (*c == ':' || *c == '=' || *c == ' ' || *c == '\'' || *c == '"' || *c == ',' || *c < 0x21 || *c > 0x7e) {
      snprintf(why, cap, "model '%s': no ':', '=', ',', quote, space or control character", p->model);
      return SHOAL_ERR_INVALID;
    }
  if (p->ps < 0 || p->ps > SHOAL_LIVE_WORKERS_MAX) {
    snprintf(why, cap, "servers must be 0..%d", SHOAL_LIVE_WORKERS_MAX);
    return SHOAL_ERR_INVALID;
  }
  if (p->ps > 0 && (p->min != p->gpus || p->max != p->gpus)) {
    snprintf(why, cap, "a parameter-server job runs at its requested size only (it resumes with the same workers and "
             "servers): min and max must be gpus (%d), not %d..%d", p->gpus, p->min, p->max);
    return SHOAL_ERR_INVALID;
  }
  if (p->ps > 0 && p->leave) {
    snprintf(why, cap, "a parameter-server job cannot leave in part (leave=1 is for all-reduce jobs)");
    return SHOAL_ERR_INVALID;
  }
  if (!(p->work >= 0) || !isfinite(p->work)) {
    snprintf(why, cap, "work must be a number of steps >= 0");
    return SHOAL_ERR_INVALID;
  }
  return 0;
}

int shoal__live_params_format(const shoal_live_params_t *p, char *buf, size_t cap) {
  int k = snprintf(buf, cap, SHOAL_LIVE_COMMENT_TAG "gpus=%d:min=%d:max=%d", p->gpus, p->min, p->max);
  if (k >= 0 && (size_t)k < cap && p->ps > 0) k += snprintf(buf + k, cap - (size_t)k, ":ps=%d", p->ps);
  if (k >= 0 && (size_t)k < cap && p->model[0]) k += snprintf(buf + k, cap - (size_t)k, ":model=%s", p->model);
  if (k >= 0 && (size_t)k < cap && p->work > 0) k += snprintf(buf + k, cap - (size_t)k, ":work=%.0f", p->work);
  if (k >= 0 && (size_t)k < cap && p->leave) k += snprintf(buf + k, cap - (size_t)k, ":leave=1");
  if (k >= 0 && (size_t)k < cap && p->layout[0]) k += snprintf(buf + k, cap - (size_t)k, ":layout=%s", p->layout);
  if (k < 0 || (size_t)k >= cap) return shoal__seterr(SHOAL_ERR_INVALID, "shoal parameters do not fit in %zu bytes", cap);
  return 0;
}
