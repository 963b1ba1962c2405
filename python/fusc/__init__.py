"""fusc from Python: compile .fus fusions at run time and call them on GPU tensors.

Pure ctypes over libfusrt (include/fusrt.h), no build step, no dependency: the compiler does
not depend on Python, and this package depends only on libfusrt.

    import fusc
    k = fusc.compile("softmax.fus")        # a path, or the .fus text itself
    k.softmax(x, out=y)                    # any CUDA tensor: PyTorch, CuPy, ...

A fusion is a method of the module. Its non-output arguments come in signature order
(positionally or by name), its outputs as ``out=`` (one tensor, or a tuple in signature order)
or by name; with PyTorch inputs and no ``out`` the outputs are allocated and returned. A tensor
is anything with ``__cuda_array_interface__`` (PyTorch, CuPy, Numba) or ``__dlpack__`` (also
bfloat16), row-major and contiguous, on device 0 (libfusrt's device). The size symbols (``N``)
are read from the tensors' shapes; one no tensor has is passed by name (``N=4096``). Wrong
arguments raise TypeError (a missing or extra argument, a dtype, not a tensor) or ValueError
(the number of dimensions, inconsistent or negative sizes, not contiguous, another device)
with the argument's name, before anything runs; libfusrt's own failures raise fusc.Error
(``.status`` is the fusrt_status name: FUSRT_ERR_PRECONDITION, FUSRT_ERR_NO_DRIVER, ...).

``stream=``: an int handle or an object with ``cuda_stream`` (torch.cuda.Stream) or ``ptr``
(CuPy); by default PyTorch's current stream for PyTorch tensors, else the default stream.
The launch is asynchronous, as any kernel launch.

libfusrt is found through $FUSC_LIBFUSRT (a path), else this source tree's build/libfusrt.so,
else the system's libfusrt.so.0 (``make install``). Environment variables of libfusrt apply
(FUSRT_CACHE_DIR, FUSRT_DUMP, ...: docs/runtime.md).
"""
import ctypes
import ctypes.util
import os

__all__ = ["compile", "Module", "Fusion", "Error", "CompileError"]

_STATUS = ["FUSRT_OK", "FUSRT_ERR_INVALID", "FUSRT_ERR_COMPILE", "FUSRT_ERR_NO_DRIVER",
           "FUSRT_ERR_NO_DEVICE", "FUSRT_ERR_ARCH", "FUSRT_ERR_NVRTC",
           "FUSRT_ERR_OUT_OF_MEMORY", "FUSRT_ERR_PRECONDITION", "FUSRT_ERR_LAUNCH",
           "FUSRT_ERR_CUDA", "FUSRT_ERR_INTERNAL"]


class Error(RuntimeError):
    """A libfusrt call failed: ``status`` is its name, the message is libfusrt's."""

    def __init__(self, status, message):
        super().__init__("%s: %s" % (status, message))
        self.status = status
        self.message = message


class CompileError(Error):
    """The .fus text has errors; the message is the diagnostics."""


class _Options(ctypes.Structure):
    _fields_ = [("arch", ctypes.c_int), ("cache_dir", ctypes.c_char_p)]


class _Arg(ctypes.Structure):
    _fields_ = [("f", ctypes.c_double), ("i", ctypes.c_int64), ("ptr", ctypes.c_uint64)]


class _ArgInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int), ("dtype", ctypes.c_char_p),
                ("ndim", ctypes.c_int)]


_SCALAR, _INPUT, _OUTPUT = 0, 1, 2
_lib_handle = None


def _library():
    global _lib_handle
    if _lib_handle is not None:
        return _lib_handle
    tree = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                        "libfusrt.so")
    path = os.environ.get("FUSC_LIBFUSRT") or (tree if os.path.exists(tree) else None) \
        or ctypes.util.find_library("fusrt") or "libfusrt.so.0"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("fusc: cannot load libfusrt (%s): %s; set FUSC_LIBFUSRT to its path "
                          "or run make install" % (path, e)) from None
    P, S, I, V = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64
    sig = {
        "fusrt_last_error": (S, []),
        "fusrt_compile": (I, [S, ctypes.c_size_t, S, ctypes.POINTER(_Options),
                              ctypes.POINTER(P)]),
        "fusrt_module_free": (None, [P]),
        "fusrt_fusion_count": (I, [P]),
        "fusrt_fusion_name": (S, [P, I]),
        "fusrt_fusion_nargs": (I, [P, S]),
        "fusrt_fusion_arg": (I, [P, S, I, ctypes.POINTER(_ArgInfo)]),
        "fusrt_fusion_nsizes": (I, [P, S]),
        "fusrt_fusion_size_name": (S, [P, S, I]),
        "fusrt_fusion_arg_dim": (I, [P, S, I, I, ctypes.POINTER(V)]),
        "fusrt_launch": (I, [P, S, ctypes.POINTER(_Arg), I, ctypes.POINTER(V), I, P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib_handle = lib
    return lib


def _fail(lib, status, cls=Error):
    name = _STATUS[status] if 0 <= status < len(_STATUS) else "FUSRT_ERR_%d" % status
    return cls(name, lib.fusrt_last_error().decode(errors="replace"))


def compile(source, *, name=None, arch=None, cache_dir=None):
    """Compiles every fusion of ``source`` (a path to a .fus file, or the text itself; bytes
    are text). ``arch``: 80, "sm_90", ... (default: the GPU's); with an explicit arch it
    compiles without a GPU (NVRTC only) and loads on the first call. ``cache_dir``: the disk
    cache ("" disables it; default libfusrt's). Raises CompileError with the diagnostics."""
    lib = _library()
    if isinstance(source, bytes):
        text = source
    elif isinstance(source, (str, os.PathLike)) and "\n" not in str(source) \
            and os.path.isfile(source):
        with open(source, "rb") as f:
            text = f.read()
        name = name or os.fspath(source)
    elif isinstance(source, str):
        text = source.encode()
    else:
        raise TypeError("fusc.compile: expected a path or the .fus text, got %s"
                        % type(source).__name__)
    if isinstance(arch, str):
        digits = arch[3:] if arch.startswith("sm_") else arch
        if not digits.isdigit():
            raise ValueError("fusc.compile: bad arch %r (expected 80, 'sm_90', ...)" % arch)
        arch = int(digits)
    opts = _Options(arch or 0, None if cache_dir is None else os.fsencode(cache_dir))
    handle = ctypes.c_void_p()
    status = lib.fusrt_compile(text, len(text), (name or "<python>").encode(),
                               ctypes.byref(opts), ctypes.byref(handle))
    if status != 0:
        raise _fail(lib, status, CompileError if status == 2 else Error)
    return Module(lib, handle)


class Module:
    """A compiled .fus text: one method per fusion (see fusions)."""

    def __init__(self, lib, handle):
        self._lib, self._handle = lib, handle
        n = lib.fusrt_fusion_count(handle)
        self._fusions = {}
        for i in range(n):
            fname = lib.fusrt_fusion_name(handle, i).decode()
            self._fusions[fname] = Fusion(self, fname)

    @property
    def fusions(self):
        """The fusions' names, in file order."""
        return list(self._fusions)

    def __getattr__(self, attr):
        fusions = self.__dict__.get("_fusions", {})
        if attr in fusions:
            return fusions[attr]
        raise AttributeError("this module has no fusion %r (it has: %s)"
                             % (attr, ", ".join(fusions) or "none"))

    def __getitem__(self, fname):
        return self.__getattr__(fname)

    def __dir__(self):
        return list(super().__dir__()) + list(self._fusions)

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.fusrt_module_free(self._handle)
            self._handle = None


# dtype of a .fus signature -> (__cuda_array_interface__ typestr, (DLPack code, bits), name)
_DTYPES = {
    "f16": ("<f2", (2, 16), "float16"), "bf16": (None, (4, 16), "bfloat16"),
    "f32": ("<f4", (2, 32), "float32"), "f64": ("<f8", (2, 64), "float64"),
    "i32": ("<i4", (0, 32), "int32"), "i64": ("<i8", (0, 64), "int64"),
    "bool": ("|b1", (6, 8), "bool"),
}
_TYPESTR_NAMES = {"<f2": "float16", "<f4": "float32", "<f8": "float64", "<i4": "int32",
                  "<i8": "int64", "|b1": "bool", "|i1": "int8", "|u1": "uint8",
                  "<i2": "int16", "<u4": "uint32"}
_DL_NAMES = {(2, 16): "float16", (4, 16): "bfloat16", (2, 32): "float32", (2, 64): "float64",
             (0, 32): "int32", (0, 64): "int64", (6, 8): "bool", (1, 8): "uint8",
             (0, 8): "int8", (0, 16): "int16"}
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                        ctypes.c_char_p]


class _View:
    """What a call needs of a tensor: address, shape, strides (elements, None: contiguous),
    dtype name, whether it may be written, and what keeps it alive during the call."""

    def __init__(self, ptr, shape, strides, dtype, readonly, device, keep):
        self.ptr, self.shape, self.strides, self.dtype = ptr, shape, strides, dtype
        self.readonly, self.device, self.keep = readonly, device, keep


def _view(obj, what):
    cai = None
    try:
        cai = obj.__cuda_array_interface__
    except (AttributeError, TypeError, RuntimeError):
        cai = None  # PyTorch refuses bfloat16 here: DLPack below
    if cai is not None and cai["typestr"][1:2] == "V" and hasattr(obj, "__dlpack__"):
        cai = None  # raw bytes ("<V2": PyTorch's bfloat16): DLPack says what they are
    if cai is not None:
        shape = tuple(int(s) for s in cai["shape"])
        typestr = cai["typestr"]
        size = int(typestr[2:]) if typestr[2:].isdigit() else 1
        strides = cai.get("strides")
        if strides is not None:
            if any(s % size for s in strides):
                raise ValueError("%s: strides %s are not whole elements" % (what, strides))
            strides = tuple(s // size for s in strides)
        ptr, readonly = cai["data"]
        name = _TYPESTR_NAMES.get(typestr, typestr)
        return _View(ptr or 0, shape, strides, name, bool(readonly), None, obj)
    if hasattr(obj, "__dlpack__"):
        if hasattr(obj, "__dlpack_device__"):
            kind, dev = obj.__dlpack_device__()
            if kind not in (_DL_CUDA, _DL_CUDA_MANAGED):
                raise ValueError("%s: not on a CUDA device (DLPack device type %d)"
                                 % (what, kind))
        capsule = obj.__dlpack__()
        t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
        shape = tuple(t.shape[i] for i in range(t.ndim))
        strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
        dt = (t.dtype.code, t.dtype.bits)
        name = _DL_NAMES.get(dt, "DLPack type code %d, %d bits" % dt)
        if t.dtype.lanes != 1:
            name += " x%d" % t.dtype.lanes
        if t.device.device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
            raise ValueError("%s: not on a CUDA device (DLPack device type %d)"
                             % (what, t.device.device_type))
        return _View((t.data or 0) + t.byte_offset, shape, strides, name, False,
                     t.device.device_id, (obj, capsule))
    raise TypeError("%s: expected a CUDA tensor (an object with __cuda_array_interface__ or "
                    "__dlpack__), got %s" % (what, type(obj).__name__))


def _contiguous(shape, strides):
    if strides is None:
        return True
    want = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            return False
        want *= n
    return True


def _stream_handle(stream, tensors):
    if stream is None:
        for t in tensors:
            if type(t).__module__.startswith("torch"):
                import torch
                return torch.cuda.current_stream(t.device).cuda_stream
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError("stream: expected an int handle or an object with cuda_stream or ptr, "
                    "got %s" % type(stream).__name__)


class Fusion:
    """One fusion of a module; call it with its arguments (see the module's help)."""

    def __init__(self, module, name):
        lib, h, b = module._lib, module._handle, name.encode()
        self._module, self.name, self._bname = module, name, b
        self.args = []  # (name, kind, dtype, dims): dims as size names or ints
        self.sizes = [lib.fusrt_fusion_size_name(h, b, i).decode()
                      for i in range(lib.fusrt_fusion_nsizes(h, b))]
        for i in range(lib.fusrt_fusion_nargs(h, b)):
            info = _ArgInfo()
            if lib.fusrt_fusion_arg(h, b, i, ctypes.byref(info)) != 0:
                raise _fail(lib, 1)
            dims = []
            for d in range(info.ndim if info.kind != _SCALAR else 0):
                extent = ctypes.c_int64()
                k = lib.fusrt_fusion_arg_dim(h, b, i, d, ctypes.byref(extent))
                dims.append(self.sizes[k] if k >= 0 else extent.value)
            self.args.append((info.name.decode(), info.kind, info.dtype.decode(), dims))

    def signature(self):
        """`saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N])`"""
        def one(a):
            return "%s: %s%s" % (a[0], a[2], "[%s]" % ", ".join(map(str, a[3])) if a[3] else "")
        ins = [one(a) for a in self.args if a[1] != _OUTPUT]
        outs = [one(a) for a in self.args if a[1] == _OUTPUT]
        return "%s(%s) -> (%s)" % (self.name, ", ".join(ins), ", ".join(outs))

    def __repr__(self):
        return "<fusc fusion %s>" % self.signature()

    def _bind(self, args, kwargs):
        """Matches the arguments to the signature: a value per argument name, and the sizes
        given by name."""
        ins = [a for a in self.args if a[1] != _OUTPUT]
        outs = [a for a in self.args if a[1] == _OUTPUT]
        names = {a[0] for a in self.args}
        if len(args) > len(ins):
            raise TypeError("%s() takes %d positional arguments (%s) but %d were given; "
                            "outputs go in out=" % (self.name, len(ins),
                                                     ", ".join(a[0] for a in ins), len(args)))
        values = {a[0]: v for a, v in zip(ins, args)}
        sizes = {}
        for k, v in kwargs.items():
            if k in values:
                raise TypeError("%s() got two values for argument %r" % (self.name, k))
            if k in names:
                values[k] = v
            elif k in self.sizes:
                sizes[k] = v
            else:
                raise TypeError("%s() got an unexpected argument %r (its arguments: %s; "
                                "sizes: %s)" % (self.name, k, ", ".join(a[0] for a in self.args),
                                               ", ".join(self.sizes) or "none"))
        return ins, outs, values, sizes

    def __call__(self, *args, out=None, stream=None, **kwargs):
        ins, outs, values, given = self._bind(args, kwargs)
        if out is not None:
            outs_given = out if isinstance(out, (tuple, list)) else (out,)
            if len(outs_given) != len(outs):
                raise TypeError("%s(): out= needs %d tensors (%s), got %d" % (
                    self.name, len(outs), ", ".join(a[0] for a in outs), len(outs_given)))
            for a, v in zip(outs, outs_given):
                if a[0] in values:
                    raise TypeError("%s() got two values for output %r" % (self.name, a[0]))
                values[a[0]] = v
        missing = [a[0] for a in ins if a[0] not in values]
        if missing:
            raise TypeError("%s() missing argument%s: %s" % (self.name, "s" if len(missing) > 1
                                                             else "", ", ".join(missing)))
        views, sizes = {}, {}
        for k, v in given.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError("size %s: expected a non-negative int, got %r" % (k, v))
            sizes[k] = (v, "given by name")
        for a in self.args:
            if a[1] == _SCALAR or a[0] not in values:
                continue
            what = "%s(): argument %s (%s)" % (self.name, a[0], self._decl(a))
            views[a[0]] = v = _view(values[a[0]], what)
            self._check(a, v, what, sizes)
        allocated = self._allocate(outs, values, views, sizes)
        missing = [a[0] for a in outs if a[0] not in views]
        if missing:
            raise TypeError("%s() missing output%s: %s (pass out=, or PyTorch inputs to have "
                            "them allocated)" % (self.name, "s" if len(missing) > 1 else "",
                                                 ", ".join(missing)))
        unbound = [s for s in self.sizes if s not in sizes]
        if unbound:
            raise TypeError("%s(): no argument's shape gives the size%s %s: pass %s" % (
                self.name, "s" if len(unbound) > 1 else "", ", ".join(unbound),
                ", ".join("%s=..." % s for s in unbound)))
        cargs = (_Arg * max(1, len(self.args)))()
        for i, a in enumerate(self.args):
            if a[1] == _SCALAR:
                cargs[i] = self._scalar(a, values[a[0]])
            else:
                cargs[i].ptr = views[a[0]].ptr
        csizes = (ctypes.c_int64 * max(1, len(self.sizes)))(*[sizes[s][0] for s in self.sizes])
        handle = _stream_handle(stream, [values[a[0]] for a in self.args if a[1] != _SCALAR])
        lib = self._module._lib
        status = lib.fusrt_launch(self._module._handle, self._bname, cargs, len(self.args),
                                  csizes, len(self.sizes), ctypes.c_void_p(handle))
        if status != 0:
            raise _fail(lib, status)
        if allocated:
            return allocated[0] if len(allocated) == 1 else tuple(allocated)
        return None

    @staticmethod
    def _decl(a):
        return "%s%s" % (a[2], "[%s]" % ", ".join(map(str, a[3])) if a[3] else "")

    def _check(self, a, v, what, sizes):
        want = _DTYPES[a[2]][2]
        if v.dtype != want:
            raise TypeError("%s: dtype %s, expected %s" % (what, v.dtype, want))
        if len(v.shape) != len(a[3]):
            raise ValueError("%s: %d dimension%s, expected %d" % (
                what, len(v.shape), "" if len(v.shape) == 1 else "s", len(a[3])))
        if not _contiguous(v.shape, v.strides):
            raise ValueError("%s: not contiguous (strides %s in elements); pass a row-major "
                             "contiguous tensor (.contiguous())" % (what, v.strides))
        if v.device not in (None, 0):
            raise ValueError("%s: on CUDA device %d; libfusrt runs on device 0" % (what, v.device))
        if a[1] == _OUTPUT and v.readonly:
            raise ValueError("%s: read-only, but it is an output" % what)
        for d, (n, dim) in enumerate(zip(v.shape, a[3])):
            if isinstance(dim, int):
                if n != dim:
                    raise ValueError("%s: dimension %d is %d, expected %d" % (what, d, n, dim))
            elif dim in sizes and sizes[dim][0] != n:
                raise ValueError("%s: dimension %d is %d, but size %s = %d (%s)" % (
                    what, d, n, dim, sizes[dim][0], sizes[dim][1]))
            else:
                sizes[dim] = (n, "from %s dimension %d" % (a[0], d))

    def _allocate(self, outs, values, views, sizes):
        """With PyTorch inputs and no outputs given: empty outputs like the inputs."""
        if any(a[0] in values for a in outs):
            return []
        like = next((values[a[0]] for a in self.args
                     if a[1] == _INPUT and type(values[a[0]]).__module__.startswith("torch")),
                    None)
        if like is None:
            return []
        import torch
        made = []
        for a in outs:
            shape = [d if isinstance(d, int) else sizes.get(d, (None,))[0] for d in a[3]]
            if None in shape:
                return []  # reported as a missing output
            t = torch.empty(shape, dtype=getattr(torch, _DTYPES[a[2]][2]), device=like.device)
            values[a[0]] = t
            views[a[0]] = _view(t, a[0])
            made.append(t)
        return made

    def _scalar(self, a, v):
        what = "%s(): argument %s (%s)" % (self.name, a[0], a[2])
        arg = _Arg()
        if hasattr(v, "item") and callable(v.item):  # a 0-d tensor or a NumPy scalar
            v = v.item()
        if a[2] == "bool":
            if not isinstance(v, (bool, int)):
                raise TypeError("%s: expected a bool, got %s" % (what, type(v).__name__))
            arg.i, arg.f = int(bool(v)), float(bool(v))
        elif a[2] in ("i32", "i64"):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError("%s: expected an int, got %s" % (what, type(v).__name__))
            lim = 1 << (31 if a[2] == "i32" else 63)
            if not -lim <= v < lim:
                raise ValueError("%s: %d does not fit in %s" % (what, v, a[2]))
            arg.i, arg.f = v, float(v)
        else:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise TypeError("%s: expected a number, got %s" % (what, type(v).__name__))
            arg.f = float(v)
        return arg
