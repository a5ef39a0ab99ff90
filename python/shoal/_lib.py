"""Loading libshoal.so and declaring its C prototypes (ctypes)."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
SONAME = "libshoal.so.0"


def _candidates():
    env = os.environ.get("SHOAL_LIBRARY")
    if env:
        return [env]  # explicit: no fallback that could load another copy
    found = [
        # installed: PREFIX/lib/python3/dist-packages/shoal -> PREFIX/lib
        os.path.normpath(os.path.join(_HERE, "..", "..", "..", SONAME)),
    ]
    try:  # installed with PYTHONDIR or LIBDIR given: the LIBDIR make install recorded
        from . import _install
        found.append(os.path.join(_install.LIBDIR, SONAME))
    except ImportError:
        pass
    return found + [
        # repository: python/shoal -> build/
        os.path.normpath(os.path.join(_HERE, "..", "..", "build", SONAME)),
        SONAME,  # the dynamic loader's search path (ldconfig, LD_LIBRARY_PATH)
    ]


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: not found" % path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("shoal: cannot load the shoal library (build it with `make`, install it with "
                      "`make install`, or point SHOAL_LIBRARY at libshoal.so.0): " + "; ".join(errors))


lib, path = _load()

c_int, c_size_t, c_double, c_char_p, c_void_p, c_long = (ctypes.c_int, ctypes.c_size_t, ctypes.c_double,
                                                         ctypes.c_char_p, ctypes.c_void_p, ctypes.c_long)
PP = ctypes.POINTER(c_void_p)

ON_STORE_PORT = ctypes.CFUNCTYPE(None, c_int, c_void_p)


class CommParams(ctypes.Structure):
    """shoal_comm_params_t (include/shoal/comm.h)."""
    _fields_ = [
        ("rank", c_int),
        ("world_size", c_int),
        ("master_addr", c_char_p),
        ("master_port", c_int),
        ("token", c_char_p),
        ("ifname", c_char_p),
        ("hostname", c_char_p),
        ("timeout_s", c_double),
        ("connect_timeout_s", c_double),
        ("on_store_port", ON_STORE_PORT),
        ("on_store_port_arg", c_void_p),
    ]


def _proto(name, restype, *argtypes, optional=False):
    try:
        f = getattr(lib, name)
    except AttributeError:
        if optional:
            return None
        raise
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P = c_void_p
_proto("shoal_status_string", c_char_p, c_int)
_proto("shoal_last_error", c_char_p)
_proto("shoal_comm_params_init", None, ctypes.POINTER(CommParams))
_proto("shoal_comm_init", c_int, ctypes.POINTER(CommParams), PP)
_proto("shoal_comm_init_env", c_int, PP)
_proto("shoal_comm_split", c_int, P, c_int, c_int, PP)
_proto("shoal_comm_destroy", None, P)
_proto("shoal_comm_rank", c_int, P)
_proto("shoal_comm_size", c_int, P)
_proto("shoal_comm_world_rank", c_int, P)
_proto("shoal_comm_errmsg", c_char_p, P)
_proto("shoal_comm_set_timeout", c_int, P, c_double)
_proto("shoal_allreduce", c_int, P, P, P, c_size_t, c_int, c_int)
_proto("shoal_allreduce_algo", c_int, P, P, P, c_size_t, c_int, c_int, c_int)
_proto("shoal_broadcast", c_int, P, P, c_size_t, c_int, c_int)
_proto("shoal_reduce", c_int, P, P, P, c_size_t, c_int, c_int, c_int)
_proto("shoal_reduce_scatter", c_int, P, P, P, c_size_t, c_int, c_int)
_proto("shoal_allgather", c_int, P, P, P, c_size_t, c_int)
_proto("shoal_barrier", c_int, P)
_proto("shoal_send", c_int, P, P, c_size_t, c_int, c_int, c_int)
_proto("shoal_recv", c_int, P, P, c_size_t, c_int, c_int, c_int)
_proto("shoal_iallreduce", c_int, P, P, P, c_size_t, c_int, c_int, PP)
_proto("shoal_ibroadcast", c_int, P, P, c_size_t, c_int, c_int, PP)
_proto("shoal_ireduce", c_int, P, P, P, c_size_t, c_int, c_int, c_int, PP)
_proto("shoal_ireduce_scatter", c_int, P, P, P, c_size_t, c_int, c_int, PP)
_proto("shoal_iallgather", c_int, P, P, P, c_size_t, c_int, PP)
_proto("shoal_ibarrier", c_int, P, PP)
_proto("shoal_test", c_int, PP, ctypes.POINTER(c_int))
_proto("shoal_wait", c_int, PP)
_proto("shoal_request_free", None, P)
_proto("shoal_comm_pending", c_int, P)
_proto("shoal_dtype_size", c_size_t, c_int)
_proto("shoal_algo_parse", c_int, c_char_p, ctypes.POINTER(c_int))
HAVE_REDOP_SUPPORTED = _proto("shoal_redop_supported", c_int, c_int, c_int, optional=True) is not None

# Synchronization strategies (include/shoal/sync.h); absent from libraries built before it.
HAVE_SYNC = _proto("shoal_sync_create", c_int, P, c_char_p, c_char_p, PP, optional=True) is not None
if HAVE_SYNC:
    _proto("shoal_sync_destroy", None, P)
    _proto("shoal_sync_add_bucket", c_int, P, P, P, c_size_t)
    _proto("shoal_sync_flags", c_int, P)
    _proto("shoal_sync_set_lr", c_int, P, c_double)
    _proto("shoal_sync_begin", c_int, P, c_long)
    _proto("shoal_sync_bucket_ready", c_int, P, c_int)
    _proto("shoal_sync_finish", c_int, P)
    _proto("shoal_sync_end", c_int, P)
    _proto("shoal_sync_final", c_int, P)
    _proto("shoal_sync_serve", c_int, P)
    _proto("shoal_sync_workers", c_void_p, P)
    _proto("shoal_sync_last_step", c_int, P, ctypes.POINTER(c_double), ctypes.POINTER(c_int),
           ctypes.POINTER(c_double))
    _proto("shoal_sync_max_staleness", c_int, P)
    _proto("shoal_sync_pause", c_int, P)
    _proto("shoal_sync_checkpoint", c_int, P)
    _proto("shoal_sync_errmsg", c_char_p, P)
    _proto("shoal_sync_strategy_name", c_char_p, c_int)
