"""shoal for Python: collectives (blocking and non-blocking) on NumPy arrays and PyTorch CPU tensors
over libshoal, shoal's synchronization strategies, and a DistributedDataParallel-like helper for
torch.nn.Module (shoal.ddp); shoal.torch is the torch.distributed backend "shoal". See docs/python.md."""
import sys as _sys

from ._lib import path as library_path
from .comm import (FLOAT32, FLOAT64, INT32, INT64, BFLOAT16, FLOAT16, UINT8, INT8, INT16, IN_PLACE, UNDEFINED, REDOPS,
                   Aborted, Comm, InvalidArgument, Mismatch, PeerClosed, Request, ShoalError, Timeout, as_buffer,
                   check, init, last_error, status_string, wait_all)
from .sync import Sync, strategies

__version__ = "0.1.0"

if "torch.distributed" in _sys.modules:  # torch.distributed in use: the "shoal" backend registered too
    try:
        from . import torch as _backend  # noqa: F401
    except ImportError:  # not built: `import shoal.torch` says why
        pass
__all__ = ["Comm", "Sync", "strategies", "Request", "ShoalError", "InvalidArgument", "Timeout", "PeerClosed", "Mismatch", "Aborted",
           "init", "wait_all", "as_buffer", "check", "last_error", "status_string", "library_path", "REDOPS",
           "FLOAT32", "FLOAT64", "INT32", "INT64", "BFLOAT16", "FLOAT16", "UINT8", "INT8", "INT16", "IN_PLACE",
           "UNDEFINED"]
