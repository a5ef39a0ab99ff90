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


def _read(p):
    with (gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb")) as f:
        return f.read()


def load(split="train", directory=None, limit=0):
    """(x, y): float32 images (n, 1, rows, cols) normalized as the C runtime does, uint8 labels (n,)."""
    import numpy as np
    d = directory or FASHION_MNIST_DIR
    ip, lp = _path(d, split, "images-idx3"), _path(d, split, "labels-idx1")
    img, lab = _read(ip), _read(lp)
    if len(img) < 16 or struct.unpack(">I", img[:4])[0] != 0x803:
        raise ValueError("%s: not an IDX image file (bad magic)" % ip)
    if len(lab) < 8 or struct.unpack(">I", lab[:4])[0] != 0x801:
        raise ValueError("%s: not an IDX label file (bad magic)" % lp)
    n, rows, cols = struct.unpack(">III", img[4:16])
    nl = struct.unpack(">I", lab[4:8])[0]
    if n != nl:
        raise ValueError("%s: %d images but %s has %d labels" % (ip, n, lp, nl))
    if len(img) < 16 + n * rows * cols or len(lab) < 8 + n:
        raise ValueError("%s or %s: truncated" % (ip, lp))
    if limit:
        n = min(n, limit)
    x = np.frombuffer(img, np.uint8, n * rows * cols, 16).astype(np.float32).reshape(n, 1, rows, cols)
    x = (x / 255.0 - MEAN) / STD
    y = np.frombuffer(lab, np.uint8, n, 8).copy()
    bad = np.nonzero(y >= 10)[0]
    if bad.size:
        raise ValueError("%s: label %d at offset %d is outside the 10 classes" % (lp, y[bad[0]], 8 + bad[0]))
    return x.astype(np.float32), y
