"""Fashion-MNIST (any IDX image set) for the examples and tests: the same files, checks and
normalization as the C runtime (src/train/idx.c): DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]."""
import gzip
import os
import struct

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
MEAN, STD = 0.2860, 0.3530


def _path(d, split, kind):
    for name in ("%s-%s-ubyte.gz" % (split, kind), "%s-%s-ubyte" % (split, kind)):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError("%s: no such file (install Debian's dataset-fashion-mnist or pass the directory)"
                            % os.path.join(d, "%s-%s-ubyte.gz" % (split, kind)))


def _open(p):
    return gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb")


def _read_exact(f, n, p, what):
    b = f.read(n)
    if len(b) != n:
        raise ValueError("%s: truncated (%s: %d of %d bytes)" % (p, what, len(b), n))
    return b


def load(split="train", directory=None, limit=0):
    """(x, y): float32 images (n, 1, rows, cols) normalized as the C runtime does, uint8 labels (n,)."""
    import numpy as np
    d = directory or FASHION_MNIST_DIR
    ip, lp = _path(d, split, "images-idx3"), _path(d, split, "labels-idx1")
    with _open(ip) as fi, _open(lp) as fl:  # only the images asked for are decompressed
        ih, lh = _read_exact(fi, 16, ip, "header"), _read_exact(fl, 8, lp, "header")
        if struct.unpack(">I", ih[:4])[0] != 0x803:
            raise ValueError("%s: not an IDX image file (bad magic)" % ip)
        if struct.unpack(">I", lh[:4])[0] != 0x801:
            raise ValueError("%s: not an IDX label file (bad magic)" % lp)
        n, rows, cols = struct.unpack(">III", ih[4:16])
        nl = struct.unpack(">I", lh[4:8])[0]
        if n != nl:
            raise ValueError("%s: %d images but %s has %d labels" % (ip, n, lp, nl))
        if limit:
            n = min(n, limit)
        img = _read_exact(fi, n * rows * cols, ip, "images")
        lab = _read_exact(fl, n, lp, "labels")
    x = np.frombuffer(img, np.uint8, n * rows * cols).astype(np.float32).reshape(n, 1, rows, cols)
    x = (x / 255.0 - MEAN) / STD
    y = np.frombuffer(lab, np.uint8, n).copy()
    bad = np.nonzero(y >= 10)[0]
    if bad.size:
        raise ValueError("%s: label %d at offset %d is outside the 10 classes" % (lp, y[bad[0]], 8 + bad[0]))
    return x.astype(np.float32), y
