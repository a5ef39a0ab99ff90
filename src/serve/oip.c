/* Open Inference Protocol requests and responses (oip.h). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "serve/oip.h"

/* Fashion-MNIST's pixel mean and deviation: the training data's normalization (train.h). */
#define PIX_MEAN 0.2860f
#define PIX_STD 0.3530f

static char *dump(json_t *j, size_t *len) {
  char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
  json_decref(j);
  if (s && len) *len = strlen(s);
  return s;
}

char *shoal__oip_error(const char *msg, size_t *len) { return dump(json_pack("{s:s}", "error", msg), len); }

char *shoal__oip_server_metadata(const char *version, size_t *len) {
  return dump(json_pack("{s:s,s:s,s:[]}", "name", "shoal", "version", version, "extensions"), len);
}

char *shoal__oip_model_metadata(const char *model, const char *kind, int rows, int cols, int nclass, size_t *len) {
  return dump(json_pack("{s:s,s:[s],s:s,s:[{s:s,s:s,s:[i,i]}],s:[{s:s,s:s,s:[i,i]}]}", "name", model, "versions", "1",
                        "platform", kind, "inputs", "name", SHOAL__OIP_INPUT, "datatype", "FP32", "shape", -1,
                        rows * cols, "outputs", "name", SHOAL__OIP_OUTPUT, "datatype", "FP32", "shape", -1, nclass),
              len);
}

char *shoal__oip_infer_response(const char *model, const char *id, const float *scores, int n, int nclass, size_t *len) {
  json_t *data = json_array();
  for (int i = 0; data && i < n * nclass; i++)
    if (json_array_append_new(data, json_real(scores[i]))) {
      json_decref(data);
      data = NULL;
    }
  if (!data) return NULL;
  json_t *r = json_pack("{s:s,s:s,s:[{s:s,s:s,s:[i,i],s:o}]}", "model_name", model, "model_version", "1", "outputs",
                        "name", SHOAL__OIP_OUTPUT, "datatype", "FP32", "shape", n, nclass, "data", data);
  if (r && id && *id) json_object_set_new(r, "id", json_string(id));
  return dump(r, len);
}

typedef struct {
  float *x;
  size_t n, cap;
  int uint8;
  const char *err; /* set on the first bad element */
  size_t bad_at;
  double bad_val;
  int has_val; /* the bad element is a number (printed) */
} flat_t;

/* Flatten data (numbers, or arrays of them nested to any depth up to 4) into f->x, checking each value. */
static int flatten(json_t *v, flat_t *f, int depth) {
  if (json_is_array(v)) {
    if (depth >= 4) {
      f->err = "is nested deeper than the shape allows";
      f->bad_at = f->n;
      return -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (flatten(e, f, depth + 1)) return -1;
    return 0;
  }
  if (!json_is_number(v)) {
    f->err = "is not a number";
    f->bad_at = f->n;
    return -1;
  }
  if (f->n >= f->cap) {
    f->err = "holds more values than the shape";
    f->bad_at = f->n;
    return -1;
  }
  double d = json_number_value(v);
  if (f->uint8 ? (!json_is_integer(v) || d < 0 || d > 255) : !(d >= 0 && d <= 1)) {
    f->err = f->uint8 ? "is not an integer in 0..255 (UINT8 pixels)"
                      : "is outside [0, 1]: send pixel intensities x/255, the server normalizes them";
    f->bad_at = f->n;
    f->bad_val = d;
    f->has_val = 1;
    return -1;
  }
  double p = f->uint8 ? d / 255.0 : d;
  f->x[f->n++] = ((float)p - PIX_MEAN) / PIX_STD;
  return 0;
}

/* The shape [N, rows*cols], [N, rows, cols] or [N, 1, rows, cols] with 1 <= N <= max_rows: N, or -1. */
static int shape_rows(json_t *shape, int rows, int cols, int max_rows) {
  size_t nd = json_array_size(shape);
  if (!json_is_array(shape) || nd < 2 || nd > 4) return -1;
  long long d[4];
  for (size_t i = 0; i < nd; i++) {
    json_t *e = json_array_get(shape, i);
    if (!json_is_integer(e)) return -1;
    d[i] = json_integer_value(e);
  }
  int ok = (nd == 2 && d[1] == (long long)rows * cols) || (nd == 3 && d[1] == rows && d[2] == cols) ||
           (nd == 4 && d[1] == 1 && d[2] == rows && d[3] == cols);
  return ok && d[0] >= 1 && d[0] <= max_rows ? (int)d[0] : -1;
}

static int bad(const char *fmt, const char *a) { return shoal__seterr(SHOAL_ERR_INVALID, fmt, a); }

/* The request's one input tensor, checked for name, datatype and shape. */
static int input_tensor(json_t *root, int rows, int cols, int max_rows, json_t **data, int *n, int *uint8) {
  json_t *inputs = json_object_get(root, "inputs");
  if (!json_is_array(inputs) || json_array_size(inputs) != 1)
    return bad("\"inputs\" must be an array of one tensor (this model has one input, '%s')", SHOAL__OIP_INPUT);
  json_t *t = json_array_get(inputs, 0);
  const char *name = json_string_value(json_object_get(t, "name"));
  const char *dt = json_string_value(json_object_get(t, "datatype"));
  if (!json_is_object(t) || !name) return bad("inputs[0] needs a \"name\" ('%s')", SHOAL__OIP_INPUT);
  if (strcmp(name, SHOAL__OIP_INPUT))
    return shoal__seterr(SHOAL_ERR_INVALID, "input '%.64s' unknown: this model has one input, '%s'", name,
                         SHOAL__OIP_INPUT);
  if (!dt || (strcmp(dt, "FP32") && strcmp(dt, "UINT8")))
    return bad("inputs[0].datatype '%.32s': expected FP32 (pixels in [0, 1]) or UINT8 (pixels 0..255)", dt ? dt : "");
  int N = shape_rows(json_object_get(t, "shape"), rows, cols, max_rows);
  if (N < 0) {
    char *s = json_dumps(json_object_get(t, "shape"), JSON_COMPACT | JSON_ENCODE_ANY);
    shoal__seterr(SHOAL_ERR_INVALID, "inputs[0].shape %.64s: expected [N,%d] (or [N,%d,%d], [N,1,%d,%d]) with 1 <= N <= %d",
                  s ? s : "(none)", rows * cols, rows, cols, rows, cols, max_rows);
    free(s);
    return SHOAL_ERR_INVALID;
  }
  if (json_object_get(t, "parameters") && json_object_get(json_object_get(t, "parameters"), "binary_data_size"))
    return bad("inputs[0]: binary tensor data is not supported; send \"data\" as JSON%s", "");
  *data = json_object_get(t, "data");
  if (!json_is_array(*data)) return bad("inputs[0].data must be an array of %s", "numbers");
  *n = N;
  *uint8 = !strcmp(dt, "UINT8");
  return 0;
}

/* Requested outputs, if named, can only be ours. */
static int check_outputs(json_t *root) {
  json_t *outs = json_object_get(root, "outputs");
  if (!outs) return 0;
  if (!json_is_array(outs)) return bad("\"outputs\" must be an array%s", "");
  size_t i;
  json_t *o;
  json_array_foreach(outs, i, o) {
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name || strcmp(name, SHOAL__OIP_OUTPUT))
      return shoal__seterr(SHOAL_ERR_INVALID, "outputs[%zu]: output '%.64s' unknown: this model has one output, '%s'",
                           i, name ? name : "", SHOAL__OIP_OUTPUT);
  }
  return 0;
}

int shoal__oip_parse_infer(const char *body, size_t len, int rows, int cols, int max_rows, shoal__oip_input_t *out) {
  json_error_t je;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return shoal__seterr(SHOAL_ERR_PARSE, "the body is not JSON: line %d column %d: %s", je.line, je.column, je.text);
  int rc = 0, N = 0, u8 = 0;
  json_t *data = NULL, *id = json_object_get(root, "id");
  flat_t f = {0};
  if (!json_is_object(root))
    rc = bad("the body must be a JSON object with \"inputs\"%s", "");
  else if (id && (!json_is_string(id) || strlen(json_string_value(id)) >= sizeof out->id))
    rc = shoal__seterr(SHOAL_ERR_INVALID, "\"id\" must be a string of at most %zu bytes", sizeof out->id - 1);
  if (!rc) rc = check_outputs(root);
  if (!rc) rc = input_tensor(root, rows, cols, max_rows, &data, &N, &u8);
  if (!rc) {
    f.cap = (size_t)N * rows * cols;
    f.uint8 = u8;
    if (!(f.x = malloc(f.cap * sizeof(float))))
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "out of memory for %d rows", N);
  }
  if (!rc && flatten(data, &f, 0)) {
    if (f.has_val)
      rc = shoal__seterr(SHOAL_ERR_INVALID, "inputs[0].data[%zu] = %g %s", f.bad_at, f.bad_val, f.err);
    else
      rc = shoal__seterr(SHOAL_ERR_INVALID, "inputs[0].data[%zu] %s", f.bad_at, f.err);
  }
  if (!rc && f.n != f.cap)
    rc = shoal__seterr(SHOAL_ERR_INVALID, "inputs[0].data holds %zu values; the shape says %zu (%d x %d)", f.n, f.cap,
                       N, rows * cols);
  if (!rc) {
    memset(out, 0, sizeof *out);
    out->rows = N;
    out->x = f.x;
    if (id) strcpy(out->id, json_string_value(id));
    f.x = NULL;
  }
  free(f.x);
  json_decref(root);
  return rc;
}

void shoal__oip_input_free(shoal__oip_input_t *in) {
  if (!in) return;
  free(in->x);
  in->x = NULL;
}
