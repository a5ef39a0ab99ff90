/* The learned placement policy's network (marl_net.h): the weights file reader
 * and the forward pass. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "sched/model/marl_net.h"

#define MAGIC "shoal-marl-weights"
#define VERSION 1
#define HIERARCHY "rack,server,socket"

enum { T_SW, T_SB, T_MW, T_MB, T_RW, T_RB, T_CW, T_CB, T_OW, T_OB, NT };
static const char *const tname[NT] = {"socket.W", "socket.b", "server.W", "server.b", "rack.W",
                                      "rack.b",   "score.W",  "score.b",  "out.W",    "out.b"};

struct shoal_marl_net {
  int hidden, agents;
  float *t[NT];
  int rows[NT], cols[NT];
  char origin[512];
  char trained[512];
  /* scratch of the forward pass */
  float *work;
  size_t work_cap;
  int *cnt;               /* rows per group of a pooling */
  int cnt_cap;
};

void shoal__marl_net_free(shoal_marl_net_t *n) {
  if (!n) return;
  for (int i = 0; i < NT; i++) free(n->t[i]);
  free(n->work);
  free(n->cnt);
  free(n);
}

int shoal__marl_net_agents(const shoal_marl_net_t *n) { return n->agents; }
int shoal__marl_net_hidden(const shoal_marl_net_t *n) { return n->hidden; }
const char *shoal__marl_net_origin(const shoal_marl_net_t *n) { return n->origin; }
const char *shoal__marl_net_trained(const shoal_marl_net_t *n) { return n->trained; }

/* ---- reading ---- */

typedef struct {
  const char *name;
  const char *p, *end;
  int line;
} reader_t;

/* next whitespace-separated token (comments: '#' to the end of the line); its
 * line in *line; 0 at the end of the text */
static int token(reader_t *r, const char **tok, size_t *len, int *line) {
  for (;;) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r' || *r->p == '\n')) {
      if (*r->p == '\n') r->line++;
      r->p++;
    }
    if (r->p < r->end && *r->p == '#') {
      while (r->p < r->end && *r->p != '\n') r->p++;
      continue;
    }
    break;
  }
  if (r->p >= r->end) return 0;
  *tok = r->p;
  while (r->p < r->end && *r->p != ' ' && *r->p != '\t' && *r->p != '\r' && *r->p != '\n') r->p++;
  *len = (size_t)(r->p - *tok);
  *line = r->line;
  return 1;
}

/* the rest of the current line (after a key), trimmed */
static void rest_of_line(reader_t *r, char *buf, size_t cap) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t')) r->p++;
  const char *s = r->p;
  while (r->p < r->end && *r->p != '\n') r->p++;
  size_t l = (size_t)(r->p - s);
  while (l > 0 && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\r')) l--;
  if (l >= cap) l = cap - 1;
  memcpy(buf, s, l);
  buf[l] = 0;
}

static int is(const char *tok, size_t len, const char *word) { return strlen(word) == len && !memcmp(tok, word, len); }

/* an integer token in [lo, hi] */
static int integer(reader_t *r, const char *what, long lo, long hi, long *out) {
  const char *tok;
  size_t len;
  int line;
  if (!token(r, &tok, &len, &line))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s: truncated: the file ends where %s was expected", r->name, what);
  char buf[32], *e;
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, tok, len);
  buf[len] = 0;
  errno = 0;
  long v = strtol(buf, &e, 10);
  if (*e || e == buf || errno || v < lo || v > hi)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s: '%s' is not an integer in %ld..%ld", r->name, line, what, buf, lo, hi);
  *out = v;
  return 0;
}

static int read_header(reader_t *r, shoal_marl_net_t *n) {
  const char *tok;
  size_t len;
  int line;
  if (!token(r, &tok, &len, &line)) return shoal__seterr(SHOAL_ERR_PARSE, "%s: empty: not a shoal marl weights file", r->name);
  if (!is(tok, len, MAGIC))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: not a shoal marl weights file (it starts with '%.*s', not '%s')", r->name,
                         line, (int)(len > 40 ? 40 : len), tok, MAGIC);
  long v;
  int rc = integer(r, "the version", 0, 1000000, &v);
  if (rc) return rc;
  if (v != VERSION)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: weights file version %ld; this shoal reads version %d (retrain with "
                         "python/shoal/marl.py)", r->name, r->line, v, VERSION);
  int have_h = 0, have_f = 0, have_a = 0, have_hier = 0;
  for (;;) {
    const char *save = r->p;
    int save_line = r->line;
    if (!token(r, &tok, &len, &line))
      return shoal__seterr(SHOAL_ERR_PARSE, "%s: truncated: the file ends before its first tensor", r->name);
    if (is(tok, len, "tensor")) {
      r->p = save;
      r->line = save_line;
      break;
    }
    char val[512];
    if (is(tok, len, "hidden")) {
      long h;
      if ((rc = integer(r, "hidden", 1, SHOAL_MARL_MAX_HIDDEN, &h))) return rc;
      n->hidden = (int)h;
      have_h = 1;
    } else if (is(tok, len, "agents")) {
      long a;
      if ((rc = integer(r, "agents", 1, SHOAL_MARL_MAX_AGENTS, &a))) return rc;
      n->agents = (int)a;
      have_a = 1;
    } else if (is(tok, len, "hierarchy")) {
      rest_of_line(r, val, sizeof val);
      if (strcmp(val, HIERARCHY))
        return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: topology: the weights encode the hierarchy '%s'; this shoal's "
                             "encoder reads '%s'", r->name, line, val, HIERARCHY);
      have_hier = 1;
    } else if (is(tok, len, "features")) {
      rest_of_line(r, val, sizeof val);
      char want[128];
      snprintf(want, sizeof want, "socket=%d server=%d rack=%d job=%d", SHOAL_MARL_FS, SHOAL_MARL_FM, SHOAL_MARL_FR,
               SHOAL_MARL_FJ);
      if (strcmp(val, want))
        return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: shape: the weights were trained on features '%s'; this shoal "
                             "computes '%s' (retrain with python/shoal/marl.py)", r->name, line, val, want);
      have_f = 1;
    } else if (is(tok, len, "trained")) {
      rest_of_line(r, n->trained, sizeof n->trained);
    } else {
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: unknown key '%.*s' (hierarchy, features, hidden, agents, trained, "
                           "tensor)", r->name, line, (int)(len > 40 ? 40 : len), tok);
    }
  }
  if (!have_h || !have_f || !have_a || !have_hier)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s: missing %s before the tensors", r->name,
                         !have_hier ? "'hierarchy'" : !have_f ? "'features'" : !have_h ? "'hidden'" : "'agents'");
  return 0;
}

static void expected_shape(const shoal_marl_net_t *n, int i, int *rows, int *cols) {
  int H = n->hidden;
  static const int f_in[NT] = {SHOAL_MARL_FS, 1, SHOAL_MARL_FM, 1, SHOAL_MARL_FR, 1, SHOAL_MARL_FJ, 1, 0, 1};
  *rows = i >= T_OW ? 1 : H;
  switch (i) {
    case T_MW: case T_RW: *cols = f_in[i] + 2 * H; break;
    case T_CW: *cols = 5 * H + SHOAL_MARL_FJ; break;
    case T_OW: *cols = H; break;
    default: *cols = f_in[i];
  }
}

static int read_tensor(reader_t *r, shoal_marl_net_t *n, int i) {
  const char *tok;
  size_t len;
  int line;
  if (!token(r, &tok, &len, &line))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s: truncated: the file ends before tensor %s", r->name, tname[i]);
  if (!is(tok, len, "tensor"))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: expected 'tensor %s', found '%.*s'", r->name, line, tname[i],
                         (int)(len > 40 ? 40 : len), tok);
  if (!token(r, &tok, &len, &line) || !is(tok, len, tname[i]))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: shape: expected tensor %s here (tensors in the order socket.W, "
                         "socket.b, server.W, server.b, rack.W, rack.b, score.W, score.b, out.W, out.b)", r->name, r->line,
                         tname[i]);
  long rows, cols;
  int rc;
  char what[64];
  snprintf(what, sizeof what, "the rows of %s", tname[i]);
  if ((rc = integer(r, what, 1, 1 << 20, &rows))) return rc;
  snprintf(what, sizeof what, "the columns of %s", tname[i]);
  if ((rc = integer(r, what, 1, 1 << 20, &cols))) return rc;
  int er, ec;
  expected_shape(n, i, &er, &ec);
  if (rows != er || cols != ec)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: shape: tensor %s is %ld x %ld in the file; with hidden %d this shoal "
                         "expects %d x %d", r->name, r->line, tname[i], rows, cols, n->hidden, er, ec);
  size_t cnt = (size_t)rows * (size_t)cols;
  n->t[i] = malloc(cnt * sizeof *n->t[i]);
  if (!n->t[i]) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", r->name);
  n->rows[i] = (int)rows;
  n->cols[i] = (int)cols;
  for (size_t k = 0; k < cnt; k++) {
    if (!token(r, &tok, &len, &line))
      return shoal__seterr(SHOAL_ERR_PARSE, "%s: truncated: tensor %s has %zu of its %zu numbers", r->name, tname[i], k, cnt);
    char buf[64], *e;
    size_t l = len < sizeof buf ? len : sizeof buf - 1;
    memcpy(buf, tok, l);
    buf[l] = 0;
    errno = 0;
    double v = strtod(buf, &e);
    if (*e || e == buf || l != len || !isfinite(v) || fabs(v) > 3.4e38)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: tensor %s, number %zu of %zu: '%s' is not a finite number", r->name,
                           line, tname[i], k + 1, cnt, buf);
    n->t[i][k] = (float)v;
  }
  return 0;
}

int shoal__marl_net_parse(const char *name, const char *text, size_t len, shoal_marl_net_t **out) {
  shoal_marl_net_t *n = calloc(1, sizeof *n);
  if (!n) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", name);
  snprintf(n->origin, sizeof n->origin, "%s", name);
  reader_t r = {name, text, text + len, 1};
  int rc = read_header(&r, n);
  for (int i = 0; i < NT && !rc; i++) rc = read_tensor(&r, n, i);
  if (!rc) {
    const char *tok;
    size_t l;
    int line;
    if (!token(&r, &tok, &l, &line))
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: truncated: no 'end' after the last tensor", name);
    else if (!is(tok, l, "end"))
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: shape: more numbers than tensor out.b holds, or no 'end' ('%.*s')",
                         name, line, (int)(l > 40 ? 40 : l), tok);
    else if (token(&r, &tok, &l, &line))
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: text after 'end'", name, line);
  }
  if (rc) {
    shoal__marl_net_free(n);
    return rc;
  }
  *out = n;
  return 0;
}

int shoal__marl_net_load(const char *path, shoal_marl_net_t **out) {
  char *buf;
  size_t len;
  int rc = shoal__file_read_all(path, "weights file", (size_t)256 << 20, &buf, &len);
  if (rc) return rc;
  rc = shoal__marl_net_parse(path, buf, len, out);
  free(buf);
  return rc;
}

/* ---- forward pass ---- */

/* y[r] = relu(W[r] . x + b[r]) for W rows x cols */
static void dense_relu(const float *W, const float *b, int rows, int cols, const float *x, float *y) {
  for (int r = 0; r < rows; r++) {
    const float *w = W + (size_t)r * cols;
    float acc = b[r];
    for (int c = 0; c < cols; c++) acc += w[c] * x[c];
    y[r] = acc > 0 ? acc : 0;
  }
}

/* per group g in 0..ng-1, the mean and max of the rows of h (n x H) in that group, into
 * out[g][0..H) and out[g][H..2H) (group NULL: all rows in group 0); an empty group gives zeros, as
 * the trainer's scatter does */
static void pool(const float *h, const int32_t *group, int n, int H, int ng, float *out, int *cnt) {
  memset(out, 0, (size_t)ng * 2 * H * sizeof *out);
  memset(cnt, 0, (size_t)ng * sizeof *cnt);
  for (int i = 0; i < n; i++) {
    int g = group ? group[i] : 0;
    const float *x = h + (size_t)i * H;
    float *o = out + (size_t)g * 2 * H;
    for (int k = 0; k < H; k++) {
      o[k] += x[k];
      if (cnt[g] == 0 || x[k] > o[H + k]) o[H + k] = x[k];
    }
    cnt[g]++;
  }
  for (int g = 0; g < ng; g++)
    if (cnt[g])
      for (int k = 0; k < H; k++) out[(size_t)g * 2 * H + k] /= (float)cnt[g];
}

/* y[r] = W[r][off .. off+len) . x for W rows x cols (a block of columns) */
static void dense_block(const float *W, int rows, int cols, int off, int len, const float *x, float *y) {
  for (int r = 0; r < rows; r++) {
    const float *w = W + (size_t)r * cols + off;
    float acc = 0;
    for (int c = 0; c < len; c++) acc += w[c] * x[c];
    y[r] = acc;
  }
}

int shoal__marl_net_scores(shoal_marl_net_t *n, const shoal_marl_obs_t *o, float *logits) {
  int H = n->hidden, S = o->nsock, M = o->nserv, R = o->nrack;
  if (S <= 0 || M <= 0 || R <= 0) return shoal__seterr(SHOAL_ERR_INVALID, "marl: empty observation");
  for (int i = 0; i < S; i++)
    if (o->sock_serv[i] < 0 || o->sock_serv[i] >= M) return shoal__seterr(SHOAL_ERR_INVALID, "marl: socket %d: bad server", i);
  for (int i = 0; i < M; i++)
    if (o->serv_rack[i] < 0 || o->serv_rack[i] >= R) return shoal__seterr(SHOAL_ERR_INVALID, "marl: server %d: bad rack", i);
  int inm = SHOAL_MARL_FM + 2 * H, inr = SHOAL_MARL_FR + 2 * H, inc = 5 * H + SHOAL_MARL_FJ;
  /* hs, hm, hr; the pooled sockets per server, servers per rack, racks; one input row; the scorer's
   * products by block (per server, per rack, the part every socket shares); z */
  size_t need = (size_t)(S + M + R) * H + (size_t)(M + R + 1) * 2 * H + (size_t)inc + (size_t)(M + R + 1) * H + H;
  if (need > n->work_cap) {
    float *w = realloc(n->work, need * sizeof *w);
    if (!w) return shoal__seterr(SHOAL_ERR_NOMEM, "marl: out of memory");
    n->work = w;
    n->work_cap = need;
  }
  if (M + R + 1 > n->cnt_cap) {
    int *c = realloc(n->cnt, (size_t)(M + R + 1) * sizeof *c);
    if (!c) return shoal__seterr(SHOAL_ERR_NOMEM, "marl: out of memory");
    n->cnt = c;
    n->cnt_cap = M + R + 1;
  }
  float *hs = n->work, *hm = hs + (size_t)S * H, *hr = hm + (size_t)M * H, *pm = hr + (size_t)R * H;
  float *pr = pm + (size_t)M * 2 * H, *hp = pr + (size_t)R * 2 * H, *in = hp + 2 * H, *cm = in + inc;
  float *cr = cm + (size_t)M * H, *cp = cr + (size_t)R * H, *z = cp + H;
  int *cnt = n->cnt;
  for (int i = 0; i < S; i++) dense_relu(n->t[T_SW], n->t[T_SB], H, SHOAL_MARL_FS, o->xs + (size_t)i * SHOAL_MARL_FS, hs + (size_t)i * H);
  pool(hs, o->sock_serv, S, H, M, pm, cnt);
  for (int m = 0; m < M; m++) {
    memcpy(in, o->xm + (size_t)m * SHOAL_MARL_FM, SHOAL_MARL_FM * sizeof *in);
    memcpy(in + SHOAL_MARL_FM, pm + (size_t)m * 2 * H, 2 * H * sizeof *in);
    dense_relu(n->t[T_MW], n->t[T_MB], H, inm, in, hm + (size_t)m * H);
  }
  pool(hm, o->serv_rack, M, H, R, pr, cnt);
  for (int r = 0; r < R; r++) {
    memcpy(in, o->xr + (size_t)r * SHOAL_MARL_FR, SHOAL_MARL_FR * sizeof *in);
    memcpy(in + SHOAL_MARL_FR, pr + (size_t)r * 2 * H, 2 * H * sizeof *in);
    dense_relu(n->t[T_RW], n->t[T_RB], H, inr, in, hr + (size_t)r * H);
  }
  pool(hr, NULL, R, H, 1, hp, cnt);
  /* the scorer's input [hs, hm, hr, hp, xj] in blocks: Wc [hs; hm; hr; hp xj] + bc = Wc_s hs + (Wc_m hm)(server)
   * + (Wc_r hr)(rack) + (Wc_p [hp, xj] + bc): the server, rack and shared products once, not once per socket */
  const float *Wc = n->t[T_CW];
  for (int m = 0; m < M; m++) dense_block(Wc, H, inc, H, H, hm + (size_t)m * H, cm + (size_t)m * H);
  for (int r = 0; r < R; r++) dense_block(Wc, H, inc, 2 * H, H, hr + (size_t)r * H, cr + (size_t)r * H);
  memcpy(in, hp, 2 * H * sizeof *in);
  memcpy(in + 2 * H, o->xj, SHOAL_MARL_FJ * sizeof *in);
  dense_block(Wc, H, inc, 3 * H, 2 * H + SHOAL_MARL_FJ, in, cp);
  for (int k = 0; k < H; k++) cp[k] += n->t[T_CB][k];
  int best = -1;
  for (int i = 0; i < S; i++) {
    if (!o->mask[i]) {
      logits[i] = -INFINITY;
      continue;
    }
    int m = o->sock_serv[i], r = o->serv_rack[m];
    dense_block(Wc, H, inc, 0, H, hs + (size_t)i * H, z);
    const float *am = cm + (size_t)m * H, *ar = cr + (size_t)r * H;
    float acc = n->t[T_OB][0];
    for (int k = 0; k < H; k++) {
      float v = z[k] + am[k] + ar[k] + cp[k];
      acc += n->t[T_OW][k] * (v > 0 ? v : 0);
    }
    logits[i] = acc;
    if (best < 0 || acc > logits[best]) best = i;
  }
  return best;
}
