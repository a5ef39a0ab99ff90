/* Checkpoint file: "SHOALCK3", meta (little-endian host layout, fixed-width
 * fields), params, momentum, CRC-32 of everything before it. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "core/file.h"
#include "train/ckpt.h"

static const char MAGIC[8] = {'S', 'H', 'O', 'A', 'L', 'C', 'K', '3'};

static int write_all(FILE *f, const void *p, size_t n, uLong *crc) {
  *crc = crc32(*crc, p, (uInt)n);
  return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static int write_floats(FILE *f, const float *p, size_t n, uLong *crc) {
  const size_t chunk = (size_t)1 << 26;
  for (size_t i = 0; i < n; i += chunk / sizeof(float)) {
    size_t m = n - i < chunk / sizeof(float) ? n - i : chunk / sizeof(float);
    if (write_all(f, p + i, m * sizeof(float), crc)) return -1;
  }
  return 0;
}

int shoal__ckpt_save(const char *path, const shoal__ckpt_meta_t *meta, const float *params, const float *momentum) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) /* cut, it would be the checkpoint itself */
    return shoal__seterr(SHOAL_ERR_INVALID, "checkpoint %.60s...: a path of %zu bytes (too long)", path, strlen(path));
  FILE *f = fopen(tmp, "wb");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "checkpoint %s: cannot create: %s", tmp, strerror(errno));
  uLong crc = crc32(0L, Z_NULL, 0);
  int bad = write_all(f, MAGIC, sizeof MAGIC, &crc) || write_all(f, meta, sizeof *meta, &crc) ||
            write_floats(f, params, meta->nparams, &crc) || write_floats(f, momentum, meta->nparams, &crc);
  uint32_t c32 = (uint32_t)crc;
  bad = bad || fwrite(&c32, 1, 4, f) != 4;
  bad = bad || fflush(f) != 0 || fsync(fileno(f)) != 0;
  if (fclose(f)) bad = 1;
  if (bad) {
    remove(tmp);
    return shoal__seterr(SHOAL_ERR_IO, "checkpoint %s: write failed: %s", tmp, strerror(errno));
  }
  if (rename(tmp, path)) {
    remove(tmp);
    return shoal__seterr(SHOAL_ERR_IO, "checkpoint %s: rename from %s failed: %s", path, tmp, strerror(errno));
  }
  /* the rename itself is durable once the directory is */
  char *dup = strdup(path);
  int dfd = dup ? open(dirname(dup), O_RDONLY | O_DIRECTORY) : -1;
  int drc = dfd >= 0 ? fsync(dfd) : -1;
  int derr = errno;
  if (dfd >= 0) close(dfd);
  free(dup);
  if (drc) return shoal__seterr(SHOAL_ERR_IO, "checkpoint %s: fsync of its directory failed: %s", path, strerror(derr));
  return 0;
}

int shoal__ckpt_peek(const char *path, shoal__ckpt_meta_t *meta) {
  FILE *f;
  int frc = shoal__fopen_input(path, "checkpoint", &f);
  if (frc) return frc;
  char magic[8];
  shoal__ckpt_meta_t m;
  int rc = 0;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, MAGIC, 8))
    rc = shoal__seterr(SHOAL_ERR_PARSE, "checkpoint %s: bad magic (not a shoal checkpoint of this version)", path);
  else if (fread(&m, 1, sizeof m, f) != sizeof m)
    rc = shoal__seterr(SHOAL_ERR_PARSE, "checkpoint %s: truncated header", path);
  fclose(f);
  if (!rc) *meta = m;
  return rc;
}

static int read_all(FILE *f, void *p, size_t n, uLong *crc) {
  if (fread(p, 1, n, f) != n) return -1;
  *crc = crc32(*crc, p, (uInt)n);
  return 0;
}

int shoal__ckpt_load(const char *path, shoal__ckpt_meta_t *meta, float *params, float *momentum, size_t nparams) {
  FILE *f;
  int frc = shoal__fopen_input(path, "checkpoint", &f);
  if (frc) return frc;
  int rc;
  uLong crc = crc32(0L, Z_NULL, 0);
  char magic[8];
  shoal__ckpt_meta_t m;
  if (read_all(f, magic, 8, &crc) || memcmp(magic, MAGIC, 8)) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "checkpoint %s: bad magic (not a shoal checkpoint)", path);
    goto out_close;
  }
  if (read_all(f, &m, sizeof m, &crc)) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "checkpoint %s: truncated header", path);
    goto out_close;
  }
  if (m.nparams != nparams) {
    rc = shoal__seterr(SHOAL_ERR_MISMATCH, "checkpoint %s: %llu parameters, the model has %zu (other --model?)", path,
                       (unsigned long long)m.nparams, nparams);
    goto out_close;
  }
  /* Read in chunks: crc32 takes a uInt length. */
  for (int part = 0; part < 2; part++) {
    float *dst = part ? momentum : params;
    const size_t chunk = (size_t)1 << 24;
    for (size_t i = 0; i < nparams; i += chunk) {
      size_t n = nparams - i < chunk ? nparams - i : chunk;
      if (read_all(f, dst + i, n * sizeof(float), &crc)) {
        rc = shoal__seterr(SHOAL_ERR_PARSE, "checkpoint %s: truncated data", path);
        goto out_close;
      }
    }
  }
  uint32_t c32;
  if (fread(&c32, 1, 4, f) != 4 || c32 != (uint32_t)crc) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "checkpoint %s: CRC mismatch (corrupt or truncated)", path);
    goto out_close;
  }
  *meta = m;
  rc = 0;
out_close:
  fclose(f);
  return rc;
}
