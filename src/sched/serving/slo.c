/* Replicas for a latency SLO: an M/M/c queue with the measured mean service
 * time. The waiting time's tail is P(W > t) = C(c, a) exp(-(c mu - lambda) t)
 * (Erlang C, a = lambda / mu), so its quantile q is closed-form. */
#include <math.h>

#include "sched/serving/serving.h"

/* Erlang C by the stable Erlang B recursion. */
static double erlang_c(int c, double a) {
  double b = 1;
  for (int k = 1; k <= c; k++) b = a * b / (k + a * b);
  return c * b / (c - a * (1 - b));
}

double shoal__slo_latency_quantile(double rate, int replicas, double service_s, double q) {
  if (!(service_s > 0) || replicas < 1 || !(q > 0 && q < 1)) return INFINITY;
  if (!(rate > 0)) return service_s;
  double mu = 1 / service_s, a = rate / mu;
  if (a >= replicas) return INFINITY;
  double pw = erlang_c(replicas, a);
  double tail = 1 - q;
  if (pw <= tail) return service_s;
  return service_s + log(pw / tail) / (replicas * mu - rate);
}

int shoal__slo_replicas(double rate, double service_s, double slo_s, double q, int max) {
  if (max < 1) max = 1;
  if (!(service_s > 0) || service_s >= slo_s) return max + 1;
  int lo = (int)floor(rate * service_s) + 1; /* fewer cannot keep up */
  if (lo < 1) lo = 1;
  for (int c = lo; c <= max; c++)
    if (shoal__slo_latency_quantile(rate, c, service_s, q) <= slo_s) return c;
  return max + 1;
}

int shoal__slo_replicas_waiting(double waiting, double rate, double service_s, double slo_s, int max) {
  if (max < 1) max = 1;
  if (!(service_s > 0) || service_s >= slo_s) return max + 1;
  if (!(waiting > 0)) waiting = 0;
  if (!(rate > 0)) rate = 0;
  double need = ceil(service_s * (waiting / (slo_s - service_s) + rate) - 1e-9);
  if (need < 1) return 1;
  return need > max ? max + 1 : (int)need;
}

int shoal__reactive_replicas(double rate, double service_s, int have, double lo, double hi, int max) {
  if (max < 1) max = 1;
  if (!(rate > 0)) rate = 0;
  if (have > 0) {
    double util = rate * service_s / have;
    if (util <= hi && util >= lo) return have > max ? max : have;
  }
  int want = (int)ceil(rate * service_s / ((lo + hi) / 2));
  if (want < 1) want = 1;
  return want > max ? max : want;
}
