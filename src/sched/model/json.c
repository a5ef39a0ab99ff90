/* Recursive-descent JSON parser (see json.h). */
#include "sched/model/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"

#define JSON_MAX_DEPTH 64

typedef struct {
  const char *name, *p, *end;
  int line;
} jp_t;

static int jerr(jp_t *s, const char *what) {
  if (s->p >= s->end) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s (at end of input)", s->name, s->line, what);
  unsigned char ch = (unsigned char)*s->p;
  if (ch >= 32 && ch < 127) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s (at '%c')", s->name, s->line, what, ch);
  return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s (at byte 0x%02x)", s->name, s->line, what, ch);
}

static void skip_ws(jp_t *s) {
  while (s->p < s->end) {
    char c = *s->p;
    if (c == '\n') s->line++;
    else if (c != ' ' && c != '\t' && c != '\r') return;
    s->p++;
  }
}

static shoal_json_t *node(jp_t *s, shoal_json_type_t t) {
  shoal_json_t *j = calloc(1, sizeof *j);
  if (j) {
    j->type = t;
    j->line = s->line;
  }
  return j;
}

static int add_kid(shoal_json_t *parent, shoal_json_t *kid, int *cap) {
  if (parent->n == *cap) {
    int nc = *cap ? *cap * 2 : 4;
    shoal_json_t **k = realloc(parent->kids, (size_t)nc * sizeof *k);
    if (!k) return SHOAL_ERR_NOMEM;
    parent->kids = k;
    *cap = nc;
  }
  parent->kids[parent->n++] = kid;
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int parse_string(jp_t *s, char **out) {
  /* s->p at the opening quote */
  s->p++;
  size_t cap = 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) return SHOAL_ERR_NOMEM;
  for (;;) {
    if (s->p >= s->end) {
      free(buf);
      return jerr(s, "unterminated string");
    }
    unsigned char c = (unsigned char)*s->p;
    if (c == '"') {
      s->p++;
      break;
    }
    if (c < 0x20) {
      free(buf);
      return jerr(s, "control character in string");
    }
    char tmp[4];
    int tn = 1;
    tmp[0] = (char)c;
    if (c == '\\') {
      if (s->p + 1 >= s->end) {
        free(buf);
        return jerr(s, "unterminated escape");
      }
      char e = s->p[1];
      s->p++;
      switch (e) {
      case '"': tmp[0] = '"'; break;
      case '\\': tmp[0] = '\\'; break;
      case '/': tmp[0] = '/'; break;
      case 'b': tmp[0] = '\b'; break;
      case 'f': tmp[0] = '\f'; break;
      case 'n': tmp[0] = '\n'; break;
      case 'r': tmp[0] = '\r'; break;
      case 't': tmp[0] = '\t'; break;
      case 'u': {
        if (s->end - s->p < 5) {
          free(buf);
          return jerr(s, "short \\u escape");
        }
        unsigned v = 0;
        for (int k = 1; k <= 4; k++) {
          int h = hexval(s->p[k]);
          if (h < 0) {
            free(buf);
            return jerr(s, "bad \\u escape");
          }
          v = v * 16 + (unsigned)h;
        }
        s->p += 4;
        if (v == 0) v = '?'; /* no NULs inside C strings */
        if (v < 0x80) tmp[0] = (char)v;
        else if (v < 0x800) {
          tmp[0] = (char)(0xc0 | (v >> 6));
          tmp[1] = (char)(0x80 | (v & 63));
          tn = 2;
        } else {
          tmp[0] = (char)(0xe0 | (v >> 12));
          tmp[1] = (char)(0x80 | ((v >> 6) & 63));
          tmp[2] = (char)(0x80 | (v & 63));
          tn = 3;
        }
        break;
      }
      default:
        free(buf);
        return jerr(s, "unknown escape");
      }
    }
    s->p++;
    if (n + (size_t)tn + 1 > cap) {
      cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        return SHOAL_ERR_NOMEM;
      }
      buf = nb;
    }
    memcpy(buf + n, tmp, (size_t)tn);
    n += (size_t)tn;
  }
  buf[n] = 0;
  *out = buf;
  return 0;
}

static int parse_value(jp_t *s, int depth, shoal_json_t **out);

static int parse_container(jp_t *s, int depth, int is_obj, shoal_json_t **out) {
  shoal_json_t *j = node(s, is_obj ? SHOAL_JSON_OBJ : SHOAL_JSON_ARR);
  if (!j) return SHOAL_ERR_NOMEM;
  int cap = 0, rc;
  char close = is_obj ? '}' : ']';
  s->p++;
  skip_ws(s);
  if (s->p < s->end && *s->p == close) {
    s->p++;
    *out = j;
    return 0;
  }
  for (;;) {
    char *key = NULL;
    skip_ws(s);
    if (is_obj) {
      if (s->p >= s->end || *s->p != '"') {
        rc = jerr(s, "expected a member name in quotes");
        goto fail;
      }
      if ((rc = parse_string(s, &key))) goto fail;
      skip_ws(s);
      if (s->p >= s->end || *s->p != ':') {
        free(key);
        rc = jerr(s, "expected ':' after member name");
        goto fail;
      }
      s->p++;
    }
    shoal_json_t *kid = NULL;
    if ((rc = parse_value(s, depth + 1, &kid))) {
      free(key);
      goto fail;
    }
    kid->key = key;
    if ((rc = add_kid(j, kid, &cap))) {
      shoal__json_free(kid);
      goto fail;
    }
    skip_ws(s);
    if (s->p < s->end && *s->p == ',') {
      s->p++;
      continue;
    }
    if (s->p < s->end && *s->p == close) {
      s->p++;
      break;
    }
    rc = jerr(s, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    goto fail;
  }
  *out = j;
  return 0;
fail:
  shoal__json_free(j);
  return rc;
}

static int parse_value(jp_t *s, int depth, shoal_json_t **out) {
  if (depth > JSON_MAX_DEPTH) return jerr(s, "nesting too deep");
  skip_ws(s);
  if (s->p >= s->end) return jerr(s, "expected a value");
  char c = *s->p;
  if (c == '{' || c == '[') return parse_container(s, depth, c == '{', out);
  if (c == '"') {
    shoal_json_t *j = node(s, SHOAL_JSON_STR);
    if (!j) return SHOAL_ERR_NOMEM;
    int rc = parse_string(s, &j->str);
    if (rc) {
      free(j);
      return rc;
    }
    *out = j;
    return 0;
  }
  static const struct { const char *w; shoal_json_type_t t; double v; } lits[] = {
      {"true", SHOAL_JSON_BOOL, 1}, {"false", SHOAL_JSON_BOOL, 0}, {"null", SHOAL_JSON_NULL, 0}};
  for (int i = 0; i < 3; i++) {
    size_t l = strlen(lits[i].w);
    if ((size_t)(s->end - s->p) >= l && !memcmp(s->p, lits[i].w, l)) {
      shoal_json_t *j = node(s, lits[i].t);
      if (!j) return SHOAL_ERR_NOMEM;
      j->num = lits[i].v;
      s->p += l;
      *out = j;
      return 0;
    }
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    char buf[64];
    size_t n = 0;
    while (s->p + n < s->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", s->p[n])) n++;
    memcpy(buf, s->p, n);
    buf[n] = 0;
    char *e;
    errno = 0;
    double v = strtod(buf, &e);
    if (e != buf + n || n == 0 || !isfinite(v)) return jerr(s, "malformed number");
    shoal_json_t *j = node(s, SHOAL_JSON_NUM);
    if (!j) return SHOAL_ERR_NOMEM;
    j->num = v;
    s->p += n;
    *out = j;
    return 0;
  }
  return jerr(s, "expected a value");
}

int shoal__json_parse(const char *name, const char *text, size_t len, shoal_json_t **out) {
  jp_t s = {name, text, text + len, 1};
  shoal_json_t *j = NULL;
  int rc = parse_value(&s, 0, &j);
  if (rc) return rc;
  skip_ws(&s);
  if (s.p < s.end) {
    shoal__json_free(j);
    return jerr(&s, "trailing characters after the value");
  }
  *out = j;
  return 0;
}

int shoal__json_parse_file(const char *path, shoal_json_t **out) {
  char *buf;
  size_t len;
  int rc = shoal__file_read_all(path, "JSON file", (size_t)1 << 30, &buf, &len);
  if (rc) return rc == SHOAL_ERR_NOT_FOUND ? SHOAL_ERR_IO : rc; /* a missing file is an I/O error here, as before */
  rc = shoal__json_parse(path, buf, len, out);
  free(buf);
  return rc;
}

void shoal__json_free(shoal_json_t *j) {
  if (!j) return;
  for (int i = 0; i < j->n; i++) shoal__json_free(j->kids[i]);
  free(j->kids);
  free(j->str);
  free(j->key);
  free(j);
}

const shoal_json_t *shoal__json_get(const shoal_json_t *obj, const char *key) {
  if (!obj || obj->type != SHOAL_JSON_OBJ) return NULL;
  for (int i = 0; i < obj->n; i++)
    if (obj->kids[i]->key && !strcmp(obj->kids[i]->key, key)) return obj->kids[i];
  return NULL;
}
