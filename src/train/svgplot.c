/* A small SVG line-plot writer for the training logs: test accuracy (%)
 * against training time (s), one polyline per CSV file, with axes, ticks and
 * a legend. Reads the CSV written by shoal_train_run (columns by header). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "shoal/train.h"

#define MAXPTS 4096

typedef struct series {
  char label[128];
  int n;
  double t[MAXPTS], acc[MAXPTS];
} series_t;

static int col_index(char *header, const char *name) {
  int i = 0;
  for (char *tok = strtok(header, ",\n\r"); tok; tok = strtok(NULL, ",\n\r"), i++)
    if (!strcmp(tok, name)) return i;
  return -1;
}

static const char *field(const char *line, int idx, char *buf, size_t cap) {
  const char *p = line;
  for (int i = 0; i < idx && p; i++) {
    p = strchr(p, ',');
    if (p) p++;
  }
  if (!p) return NULL;
  size_t n = strcspn(p, ",\n\r");
  if (n >= cap) n = cap - 1;
  memcpy(buf, p, n);
  buf[n] = 0;
  return buf;
}

static int read_csv(const char *path, series_t *s) {
  FILE *f = fopen(path, "r");
  if (!f) return shoal__seterr(SHOAL_ERR_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
  char line[4096], hdr[4096];
  int rc = 0;
  if (!fgets(line, sizeof line, f)) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: empty file", path);
    goto out;
  }
  memcpy(hdr, line, sizeof hdr);
  int it = col_index(hdr, "time_s");
  memcpy(hdr, line, sizeof hdr);
  int ia = col_index(hdr, "test_acc");
  memcpy(hdr, line, sizeof hdr);
  int il = col_index(hdr, "label");
  if (it < 0 || ia < 0) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:1: no time_s/test_acc columns (not a shoal train CSV)", path);
    goto out;
  }
  s->n = 0;
  snprintf(s->label, sizeof s->label, "%s", path);
  int lineno = 1;
  while (fgets(line, sizeof line, f) && s->n < MAXPTS) {
    lineno++;
    char a[64], b[64], c[128];
    char *e1, *e2;
    if (!field(line, it, a, sizeof a) || !field(line, ia, b, sizeof b)) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: missing columns", path, lineno);
      goto out;
    }
    double t = strtod(a, &e1), acc = strtod(b, &e2);
    if (e1 == a || e2 == b || !isfinite(t) || !isfinite(acc)) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: time_s '%s' / test_acc '%s' not numbers", path, lineno, a, b);
      goto out;
    }
    if (il >= 0 && field(line, il, c, sizeof c)) snprintf(s->label, sizeof s->label, "%s", c);
    s->t[s->n] = t;
    s->acc[s->n] = 100 * acc;
    s->n++;
  }
  if (s->n == 0) rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: no data rows", path);
out:
  fclose(f);
  return rc;
}

static double nice_step(double range, int target) {
  double raw = range / target, p = pow(10, floor(log10(raw))), m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void xml_escape(FILE *f, const char *s) {
  for (; *s; s++) switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
}

int shoal_train_plot_svg(const char *svg_path, const char *const *csv_paths, int ncsv, const char *title) {
  if (ncsv < 1) return shoal__seterr(SHOAL_ERR_INVALID, "plot: no CSV files");
  if (!svg_path || !csv_paths) return shoal__seterr(SHOAL_ERR_INVALID, "plot: %s is NULL", !svg_path ? "svg_path" : "csv_paths");
  for (int i = 0; i < ncsv; i++)
    if (!csv_paths[i]) return shoal__seterr(SHOAL_ERR_INVALID, "plot: CSV path %d is NULL", i);
  series_t *s = calloc((size_t)ncsv, sizeof *s);
  if (!s) return shoal__seterr(SHOAL_ERR_NOMEM, "plot: out of memory");
  int rc = 0;
  double tmax = 0, amin = 100, amax = 0;
  for (int i = 0; i < ncsv; i++) {
    if ((rc = read_csv(csv_paths[i], &s[i]))) goto out;
    for (int j = 0; j < s[i].n; j++) {
      if (s[i].t[j] > tmax) tmax = s[i].t[j];
      if (s[i].acc[j] < amin) amin = s[i].acc[j];
      if (s[i].acc[j] > amax) amax = s[i].acc[j];
    }
  }
  if (tmax <= 0) tmax = 1;
  amin = floor(amin / 5) * 5;
  amax = ceil(amax / 5) * 5 + (amax >= 100 ? 0 : 0);
  if (amax <= amin) amax = amin + 5;
  FILE *f = fopen(svg_path, "w");
  if (!f) {
    rc = shoal__seterr(SHOAL_ERR_IO, "plot: cannot write %s: %s", svg_path, strerror(errno));
    goto out;
  }
  const int W = 800, H = 460, L = 70, R = 240, T = 40, B = 55;
  const int pw = W - L - R, ph = H - T - B;
  static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
             "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
  fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">", L + pw / 2);
  xml_escape(f, title ? title : "test accuracy vs training time");
  fprintf(f, "</text>\n");
  double xs = nice_step(tmax, 6), ys = nice_step(amax - amin, 6);
  double xmax = ceil(tmax / xs) * xs;
  for (double x = 0; x <= xmax + 1e-9; x += xs) {
    double px = L + pw * x / xmax;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", px, T, px, T + ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px, T + ph + 18, x);
  }
  for (double y = amin; y <= amax + 1e-9; y += ys) {
    double py = T + ph - ph * (y - amin) / (amax - amin);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, py, L + pw, py);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, py + 4, y);
  }
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"black\"/>\n", L, T, pw, ph);
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">training time (s)</text>\n", L + pw / 2, H - 15);
  fprintf(f, "<text transform=\"translate(18,%d) rotate(-90)\" text-anchor=\"middle\">test accuracy (%%)</text>\n",
          T + ph / 2);
  for (int i = 0; i < ncsv; i++) {
    const char *col = colors[i % 8];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    for (int j = 0; j < s[i].n; j++)
      fprintf(f, "%.1f,%.1f ", L + pw * s[i].t[j] / xmax, T + ph - ph * (s[i].acc[j] - amin) / (amax - amin));
    fprintf(f, "\"/>\n");
    for (int j = 0; j < s[i].n; j++)
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", L + pw * s[i].t[j] / xmax,
              T + ph - ph * (s[i].acc[j] - amin) / (amax - amin), col);
    int ly = T + 10 + 20 * i;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>\n", L + pw + 12, ly,
            L + pw + 36, ly, col);
    fprintf(f, "<text x=\"%d\" y=\"%d\">", L + pw + 42, ly + 4);
    xml_escape(f, s[i].label);
    fprintf(f, " (%.2f%%)</text>\n", s[i].acc[s[i].n - 1]);
  }
  fprintf(f, "</svg>\n");
  if (fclose(f)) rc = shoal__seterr(SHOAL_ERR_IO, "plot: write %s failed", svg_path);
out:
  free(s);
  return rc;
}
