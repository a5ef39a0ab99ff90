/* A small SVG line-chart writer (no dependencies): axes with "nice" ticks,
 * optional log-scale x, one polyline per series, a legend. Long series are
 * thinned to at most 2,000 points per line (visually lossless). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "sim/sim.h"

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static void xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else fputc(*s, f);
  }
}

static double nice_step(double range, int target) {
  double raw = range / target, mag = pow(10, floor(log10(raw))), r = raw / mag;
  double s = r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10;
  return s * mag;
}

static void fmt_num(char *buf, size_t cap, double v) {
  double a = fabs(v);
  if (a >= 1e6 || (a > 0 && a < 1e-3)) snprintf(buf, cap, "%.0e", v);
  else if (a >= 1000) snprintf(buf, cap, "%.0f", v);
  else snprintf(buf, cap, "%g", v);
}

int shoal__svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                     const shoal_svg_series_t *s, int ns, int logx) {
  const double W = 720, H = 440, L = 80, R = 170, T = 40, B = 60;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (int k = 0; k < ns; k++)
    for (long i = 0; i < s[k].n; i++) {
      double x = s[k].x[i], y = s[k].y[i];
      if (!isfinite(x) || !isfinite(y) || (logx && x <= 0)) continue;
      if (logx) x = log10(x);
      if (x < xmin) xmin = x;
      if (x > xmax) xmax = x;
      if (y < ymin) ymin = y;
      if (y > ymax) ymax = y;
    }
  if (!(xmin <= xmax)) xmin = 0, xmax = 1;
  if (!(ymin <= ymax)) ymin = 0, ymax = 1;
  if (ymin > 0) ymin = 0;
  if (xmax - xmin < 1e-12) xmax = xmin + 1;
  if (ymax - ymin < 1e-12) ymax = ymin + 1;
  FILE *f = fopen(path, "w");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "%s: %s", path, strerror(errno));
  double pw = W - L - R, ph = H - T - B;
#define PX(x) (L + ((x) - xmin) / (xmax - xmin) * pw)
#define PY(y) (T + ph - ((y) - ymin) / (ymax - ymin) * ph)
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">", L + pw / 2);
  xml_text(f, title);
  fprintf(f, "</text>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", L, T, pw, ph);
  char buf[32];
  if (logx) {
    for (int e = (int)ceil(xmin - 1e-9); e <= (int)floor(xmax + 1e-9); e++) {
      fmt_num(buf, sizeof buf, pow(10, e));
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
              PX(e), T, PX(e), T + ph, PX(e), T + ph + 16, buf);
    }
  } else {
    double st = nice_step(xmax - xmin, 6);
    for (double x = ceil(xmin / st) * st; x <= xmax + st * 1e-9; x += st) {
      fmt_num(buf, sizeof buf, x);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
              PX(x), T, PX(x), T + ph, PX(x), T + ph + 16, buf);
    }
  }
  double st = nice_step(ymax - ymin, 5);
  for (double y = ceil(ymin / st) * st; y <= ymax + st * 1e-9; y += st) {
    fmt_num(buf, sizeof buf, y);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
            L, PY(y), L + pw, PY(y), L - 6, PY(y) + 4, buf);
  }
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", L + pw / 2, H - 18);
  xml_text(f, xlabel);
  fprintf(f, "</text>\n<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">", T + ph / 2, T + ph / 2);
  xml_text(f, ylabel);
  fprintf(f, "</text>\n");
  for (int k = 0; k < ns; k++) {
    const char *col = colors[k % 10];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", col);
    long stride = s[k].n > 2000 ? s[k].n / 2000 + 1 : 1;
    for (long i = 0; i < s[k].n; i++) {
      if (i % stride && i != s[k].n - 1) continue;
      double x = s[k].x[i], y = s[k].y[i];
      if (!isfinite(x) || !isfinite(y) || (logx && x <= 0)) continue;
      if (logx) x = log10(x);
      fprintf(f, "%.1f,%.1f ", PX(x), PY(y));
    }
    fprintf(f, "\"/>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"3\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">", W - R + 12,
            T + 10 + 18 * k, col, W - R + 32, T + 14 + 18 * k);
    xml_text(f, s[k].label);
    fprintf(f, "</text>\n");
  }
#undef PX
#undef PY
  fprintf(f, "</svg>\n");
  if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "%s: write error", path);
  return 0;
}
