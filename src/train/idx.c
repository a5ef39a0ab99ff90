/* IDX reader (the MNIST file format), gzip or plain through zlib. Images are
 * scaled to [0,1] and normalized with Fashion-MNIST's mean and std, so the
 * same constants serve the PyTorch comparison (bench/torch_mlp.py). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "shoal/train.h"

#define IDX_UBYTE 0x08
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f

/* Read exactly n bytes; SHOAL_ERR_PARSE naming the file when it ends early. */
static int read_exact(gzFile g, const char *path, void *buf, size_t n, const char *what) {
  unsigned char *p = buf;
  while (n > 0) {
    unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
    int got = gzread(g, p, chunk);
    if (got < 0) {
      int zerr;
      const char *msg = gzerror(g, &zerr);
      return shoal__seterr(SHOAL_ERR_IO, "%s: read error in %s: %s", path, what, msg);
    }
    if (got == 0) return shoal__seterr(SHOAL_ERR_PARSE, "%s: truncated file: %zu bytes missing in %s", path, n, what);
    p += got;
    n -= (size_t)got;
  }
  return 0;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Read an IDX file of unsigned bytes with `want_dims` dimensions. */
static int idx_read(const char *path, int want_dims, uint32_t dims[3], uint8_t **data_out) {
  gzFile g = gzopen(path, "rb");
  if (!g) return shoal__seterr(errno == ENOENT ? SHOAL_ERR_NOT_FOUND : SHOAL_ERR_IO, "%s: cannot open: %s", path,
                               strerror(errno ? errno : EIO));
  int rc;
  unsigned char hdr[4 + 12];
  if ((rc = read_exact(g, path, hdr, 4, "the magic number"))) goto err_close;
  if (hdr[0] != 0 || hdr[1] != 0 || hdr[2] != IDX_UBYTE || hdr[3] != want_dims) {
    rc = shoal__seterr(SHOAL_ERR_PARSE,
                       "%s: bad magic number 0x%02x%02x%02x%02x (expected 0x000008%02x: unsigned bytes, %d dimensions)",
                       path, hdr[0], hdr[1], hdr[2], hdr[3], want_dims, want_dims);
    goto err_close;
  }
  if ((rc = read_exact(g, path, hdr + 4, 4u * (unsigned)want_dims, "the dimensions"))) goto err_close;
  size_t total = 1;
  for (int d = 0; d < want_dims; d++) {
    dims[d] = be32(hdr + 4 + 4 * d);
    if (dims[d] == 0 || dims[d] > (1u << 28)) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: dimension %d is %u (expected 1..2^28)", path, d, dims[d]);
      goto err_close;
    }
    total *= dims[d];
  }
  if (total > ((size_t)1 << 34)) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: %zu elements is too large", path, total);
    goto err_close;
  }
  uint8_t *data = malloc(total);
  if (!data) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, total);
    goto err_close;
  }
  if ((rc = read_exact(g, path, data, total, "the data"))) goto err_free;
  unsigned char extra;
  if (gzread(g, &extra, 1) == 1) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: trailing bytes after %zu data bytes", path, total);
    goto err_free;
  }
  gzclose(g);
  *data_out = data;
  return 0;
err_free:
  free(data);
err_close:
  gzclose(g);
  return rc;
}

int shoal_dataset_load_idx(const char *images_path, const char *labels_path, int nclass, shoal_dataset_t **out) {
  uint32_t idims[3], ldims[3];
  uint8_t *pix = NULL, *lab = NULL;
  if (!images_path || !labels_path || !out)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_dataset_load_idx: %s is NULL",
                         !images_path ? "images_path" : !labels_path ? "labels_path" : "out");
  if (nclass == 0) nclass = SHOAL_DATASET_CLASSES;
  if (nclass < 2 || nclass > 256)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: %d classes: expected 2..256", labels_path, nclass);
  int rc = idx_read(images_path, 3, idims, &pix);
  if (rc) return rc;
  if ((rc = idx_read(labels_path, 1, ldims, &lab))) goto err_pix;
  if (ldims[0] != idims[0]) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: %u labels but %s has %u images", labels_path, ldims[0], images_path,
                       idims[0]);
    goto err_lab;
  }
  for (uint32_t i = 0; i < ldims[0]; i++)
    if (lab[i] >= nclass) {
      /* the label file is an 8-byte header (magic, count) and one byte per item */
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: label %u at byte offset %lu (item %u) is outside the %d classes 0..%d",
                         labels_path, lab[i], 8UL + i, i, nclass, nclass - 1);
      goto err_lab;
    }
  shoal_dataset_t *d = calloc(1, sizeof *d);
  size_t npix = (size_t)idims[0] * idims[1] * idims[2];
  float *x = malloc(npix * sizeof *x);
  if (!d || !x) {
    free(d);
    free(x);
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "%s: cannot allocate %zu floats", images_path, npix);
    goto err_lab;
  }
  for (size_t i = 0; i < npix; i++) x[i] = ((float)pix[i] * (1.0f / 255.0f) - FMNIST_MEAN) / FMNIST_STD;
  d->n = idims[0];
  d->rows = (int)idims[1];
  d->cols = (int)idims[2];
  d->nclass = nclass;
  d->x = x;
  d->y = lab;
  free(pix);
  *out = d;
  return 0;
err_lab:
  free(lab);
err_pix:
  free(pix);
  return rc;
}

/* dir/prefix-kind[.gz]: the .gz file when it exists, else the plain one. */
static void idx_path(char *buf, size_t cap, const char *dir, const char *split, const char *kind) {
  snprintf(buf, cap, "%s/%s-%s-ubyte.gz", dir, split, kind);
  FILE *f = fopen(buf, "rb");
  if (f) {
    fclose(f);
    return;
  }
  snprintf(buf, cap, "%s/%s-%s-ubyte", dir, split, kind);
  f = fopen(buf, "rb");
  if (f) {
    fclose(f);
    return;
  }
  snprintf(buf, cap, "%s/%s-%s-ubyte.gz", dir, split, kind); /* the error names the usual file */
}

int shoal_dataset_load_dir(const char *dir, const char *split, int nclass, shoal_dataset_t **out) {
  if (!dir || !split || !out)
    return shoal__seterr(SHOAL_ERR_INVALID, "shoal_dataset_load_dir: %s is NULL", !dir ? "dir" : !split ? "split" : "out");
  if (strcmp(split, "train") && strcmp(split, "t10k"))
    return shoal__seterr(SHOAL_ERR_INVALID, "dataset split '%s': expected train or t10k", split);
  char ip[4096], lp[4096];
  idx_path(ip, sizeof ip, dir, split, "images-idx3");
  idx_path(lp, sizeof lp, dir, split, "labels-idx1");
  return shoal_dataset_load_idx(ip, lp, nclass, out);
}

void shoal_dataset_destroy(shoal_dataset_t *d) {
  if (!d) return;
  free(d->x);
  free(d->y);
  free(d);
}
