/* The Open Inference Protocol (KServe v2, as Triton and Seldon speak it) for
 * image classifiers: parsing an infer request into model inputs, writing the
 * response and the metadata, with jansson. Every refusal says what was wrong
 * where (the field, the index) so that the HTTP layer can answer 400 with it. */
#ifndef SHOAL_SERVE_OIP_H
#define SHOAL_SERVE_OIP_H

#include <stddef.h>

#define SHOAL__OIP_INPUT "input"   /* the model's one input tensor */
#define SHOAL__OIP_OUTPUT "scores" /* its one output: class probabilities */

typedef struct shoal__oip_input {
  int rows;     /* N images */
  float *x;     /* rows * features, normalized as the training data (train.h) */
  char id[256]; /* the request's "id", echoed in the response ("" when none) */
} shoal__oip_input_t;

/* Parse an infer request for a model of `features` inputs per row (rows x cols pixels) taking at most
 * max_rows rows. The tensor is FP32 pixel intensities in [0, 1] or UINT8 pixels 0..255, shape [N, features],
 * [N, rows, cols] or [N, 1, rows, cols], data flat or nested row-major. 0 and *out, or SHOAL_ERR_PARSE
 * (not JSON: line and column) / SHOAL_ERR_INVALID (what is wrong) with the message in shoal_last_error(). */
int  shoal__oip_parse_infer(const char *body, size_t len, int rows, int cols, int max_rows, shoal__oip_input_t *out);
void shoal__oip_input_free(shoal__oip_input_t *in);

/* {"model_name":..., "model_version":"1", "id":..., "outputs":[{"name":"scores","datatype":"FP32",
 * "shape":[N,C],"data":[...]}]} (malloc'ed text, *len its length; NULL when out of memory). */
char *shoal__oip_infer_response(const char *model, const char *id, const float *scores, int n, int nclass, size_t *len);
/* Model metadata: name, versions, platform, the input and output tensors. */
char *shoal__oip_model_metadata(const char *model, const char *kind, int rows, int cols, int nclass, size_t *len);
/* Server metadata: name, version, extensions. */
char *shoal__oip_server_metadata(const char *version, size_t *len);
/* {"error": msg}: the protocol's error body. */
char *shoal__oip_error(const char *msg, size_t *len);

#endif
