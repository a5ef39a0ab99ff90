/* Request-rate predictors: one table line each. Every predictor gives a
 * point forecast; the headroom (z standard deviations of that predictor's
 * own past errors) is common, so the ablation compares the predictors and
 * not their margins. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/serving/serving.h"

struct shoal__forecast {
  const struct predictor *p;
  double alpha, z;
  int seen;
  double last, level, trend; /* the predictors' state */
  double err_mean, err_var;  /* of (observed - point forecast), weight alpha */
};

typedef struct predictor {
  const char *name;
  void (*observe)(shoal__forecast_t *f, double rate);
  double (*point)(const shoal__forecast_t *f, double true_next);
} predictor_t;

static void last_observe(shoal__forecast_t *f, double rate) { f->level = rate; }
static double level_point(const shoal__forecast_t *f, double t) { (void)t; return f->level; }

static void ewma_observe(shoal__forecast_t *f, double rate) {
  f->level = f->seen ? f->alpha * rate + (1 - f->alpha) * f->level : rate;
}

/* Holt: the trend follows rising load a step ahead, which is what a burst's onset needs. */
static void holt_observe(shoal__forecast_t *f, double rate) {
  if (!f->seen) {
    f->level = rate, f->trend = 0;
    return;
  }
  double prev = f->level;
  f->level = f->alpha * rate + (1 - f->alpha) * (f->level + f->trend);
  f->trend = f->alpha * (f->level - prev) + (1 - f->alpha) * f->trend;
}
static double holt_point(const shoal__forecast_t *f, double t) { (void)t; return f->level + f->trend; }

static void oracle_observe(shoal__forecast_t *f, double rate) { (void)f, (void)rate; }
static double oracle_point(const shoal__forecast_t *f, double t) { (void)f; return t; }

static const predictor_t predictors[] = {
    {"off", last_observe, level_point},
    {"ewma", ewma_observe, level_point},
    {"holt", holt_observe, holt_point},
    {"oracle", oracle_observe, oracle_point},
};
#define NPRED (sizeof predictors / sizeof predictors[0])

const char *shoal__forecast_names(void) { return "off, ewma, holt, oracle"; }

int shoal__forecast_create(const char *name, double alpha, double z, shoal__forecast_t **out) {
  const predictor_t *p = NULL;
  for (size_t i = 0; i < NPRED && name; i++)
    if (!strcmp(predictors[i].name, name)) p = &predictors[i];
  if (!p) return shoal__seterr(SHOAL_ERR_INVALID, "predictor '%s': unknown (%s)", name ? name : "(null)",
                               shoal__forecast_names());
  if (!(alpha > 0 && alpha <= 1)) return shoal__seterr(SHOAL_ERR_INVALID, "predictor alpha %g: not in (0, 1]", alpha);
  if (!(z >= 0 && z <= 10)) return shoal__seterr(SHOAL_ERR_INVALID, "predictor headroom z %g: not in 0..10", z);
  shoal__forecast_t *f = calloc(1, sizeof *f);
  if (!f) return shoal__seterr(SHOAL_ERR_NOMEM, "predictor: out of memory");
  f->p = p, f->alpha = alpha, f->z = z;
  *out = f;
  return 0;
}

void shoal__forecast_observe(shoal__forecast_t *f, double rate) {
  if (!(rate >= 0)) rate = 0;
  if (f->seen && f->p->point != oracle_point) {
    double e = rate - f->p->point(f, rate);
    double d = e - f->err_mean;
    f->err_mean += f->alpha * d;
    f->err_var = (1 - f->alpha) * (f->err_var + f->alpha * d * d);
  }
  f->p->observe(f, rate);
  f->last = rate;
  f->seen = 1;
}

double shoal__forecast_next(const shoal__forecast_t *f, double true_next) {
  double v = f->p->point(f, true_next) + f->z * sqrt(f->err_var);
  return v > 0 ? v : 0;
}

const char *shoal__forecast_name(const shoal__forecast_t *f) { return f->p->name; }
void shoal__forecast_free(shoal__forecast_t *f) { free(f); }
