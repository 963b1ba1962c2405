"""python/fusc without a GPU or PyTorch (make check): compiling (for an explicit arch: NVRTC
only), the fusions as methods, and every argument check, with stand-in tensors that have
__cuda_array_interface__ or __dlpack__ (a real DLPack capsule made with ctypes). A call whose
arguments are right reaches libfusrt's launch, which fails for want of a driver."""
import ctypes
import os
import sys
import tempfile
import unittest

os.environ["FUSRT_LIBCUDA"] = "/nonexistent/libcuda.so.1"  # no driver, even on a GPU machine
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import fusc  # noqa: E402

SAXPY = """fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {
  z[i] = a * x[i] + y[i];
}
"""
MIXED = """fusion mixed(s: f16, n: i32, x: bf16[M, 4], w: f32[K]) -> (y: bf16[M, 4], c: f32[K]) {
  y[i, j] = x[i, j] * s + n;
  c[k] = w[k];
}
"""
CACHE = tempfile.mkdtemp(prefix="fusc_py_")


class Cai:
    """A CUDA tensor as __cuda_array_interface__ describes it (nothing is allocated)."""

    def __init__(self, shape, typestr="<f4", ptr=0x10000, strides=None, readonly=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (ptr, readonly), "version": 3}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Dl:
    """A tensor known only through DLPack: a real "dltensor" capsule (no deleter)."""

    def __init__(self, shape, code=4, bits=16, device=(2, 0), ptr=0x20000, strides=None):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        self.m = DLManaged()
        t = self.m.dl_tensor
        t.data, t.device, t.ndim = ptr, DLDevice(*device), len(shape)
        t.dtype = DLDataType(code, bits, 1)
        t.shape = self.shape
        t.strides = self.strides
        self.device = device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self):
        return _new_capsule(ctypes.addressof(self.m), b"dltensor", None)


class TestArgs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.k = fusc.compile(SAXPY, arch=80, cache_dir=CACHE)
        cls.m = fusc.compile(MIXED, arch="sm_80", cache_dir=CACHE)

    def call_fails(self, exc, text, fn, *args, **kwargs):
        with self.assertRaises(exc) as cm:
            fn(*args, **kwargs)
        self.assertIn(text, str(cm.exception))
        return cm.exception

    def test_module(self):
        self.assertEqual(self.k.fusions, ["saxpy"])
        self.assertEqual(self.k.saxpy.signature(),
                         "saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N])")
        self.assertEqual(self.m.mixed.signature(), "mixed(s: f16, n: i32, x: bf16[M, 4], "
                         "w: f32[K]) -> (y: bf16[M, 4], c: f32[K])")
        self.assertIs(self.k["saxpy"], self.k.saxpy)
        self.call_fails(AttributeError, "no fusion 'softmax' (it has: saxpy)", getattr, self.k,
                        "softmax")

    def test_compile_from_path_and_errors(self):
        path = os.path.join(CACHE, "s.fus")
        with open(path, "w") as f:
            f.write(SAXPY)
        self.assertEqual(fusc.compile(path, arch=80, cache_dir=CACHE).fusions, ["saxpy"])
        e = self.call_fails(fusc.CompileError, "bad.fus:2:", fusc.compile,
                            "fusion f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[j];\n}\n",
                            name="bad.fus", arch=80)
        self.assertEqual(e.status, "FUSRT_ERR_COMPILE")
        # without an arch there is nothing to compile for, and no driver here
        e = self.call_fails(fusc.Error, "no CUDA driver", fusc.compile, SAXPY)
        self.assertEqual(e.status, "FUSRT_ERR_NO_DRIVER")
        self.call_fails(ValueError, "bad arch", fusc.compile, SAXPY, arch="sm_x")
        self.call_fails(TypeError, "expected a path or the .fus text", fusc.compile, 3)

    def test_right_arguments_reach_the_launch(self):
        x, y, z = Cai((1000,)), Cai((1000,)), Cai((1000,))
        e = self.call_fails(fusc.Error, "no CUDA driver", self.k.saxpy, 2.0, x, y, out=z)
        self.assertEqual(e.status, "FUSRT_ERR_NO_DRIVER")
        # by name, and an int for an f32 scalar
        self.call_fails(fusc.Error, "no CUDA driver", self.k.saxpy, a=2, x=x, y=y, z=z)
        # DLPack (bf16 has no __cuda_array_interface__ in PyTorch), constant dims, sizes
        xm, ym = Dl((5, 4)), Dl((5, 4))
        wm, cm = Cai((3,)), Cai((3,))
        self.call_fails(fusc.Error, "no CUDA driver", self.m.mixed, 1.5, 3, xm, wm, out=(ym, cm))
        # PyTorch gives bfloat16 a __cuda_array_interface__ of raw bytes ("<V2"): DLPack wins
        xb = Dl((5, 4))
        xb.__cuda_array_interface__ = Cai((5, 4), "<V2").__cuda_array_interface__
        self.call_fails(fusc.Error, "no CUDA driver", self.m.mixed, 1.5, 3, xb, wm, out=(ym, cm))
        self.call_fails(TypeError, "argument x (bf16[M, 4]): dtype <V2, expected bfloat16",
                        self.m.mixed, 1.5, 3, Cai((5, 4), "<V2"), wm, out=(ym, cm))

    def test_launch_checks_of_libfusrt(self):
        # a precondition libfusrt checks (the auto-scheduled saxpy has a fallback: fine);
        # a null pointer for a tensor that is not empty is refused by libfusrt
        e = self.call_fails(fusc.Error, "null pointer", self.k.saxpy, 2.0, Cai((8,), ptr=0),
                            Cai((8,)), out=Cai((8,)))
        self.assertEqual(e.status, "FUSRT_ERR_INVALID")

    def test_counts_and_names(self):
        x = Cai((8,))
        self.call_fails(TypeError, "saxpy() takes 3 positional arguments (a, x, y) but 4 were "
                        "given; outputs go in out=", self.k.saxpy, 1.0, x, x, x)
        self.call_fails(TypeError, "saxpy() missing argument: y", self.k.saxpy, 1.0, x, out=x)
        self.call_fails(TypeError, "saxpy() missing output: z (pass out=", self.k.saxpy, 1.0, x, x)
        self.call_fails(TypeError, "unexpected argument 'q'", self.k.saxpy, 1.0, x, x, out=x, q=1)
        self.call_fails(TypeError, "two values for argument 'a'", self.k.saxpy, 1.0, x, x,
                        out=x, a=2.0)
        self.call_fails(TypeError, "out= needs 2 tensors (y, c), got 1", self.m.mixed, 1.0, 1,
                        Dl((5, 4)), Cai((3,)), out=Dl((5, 4)))

    def test_dtypes_and_scalars(self):
        x = Cai((8,))
        self.call_fails(TypeError, "saxpy(): argument x (f32[N]): dtype float16, expected "
                        "float32", self.k.saxpy, 1.0, Cai((8,), "<f2"), x, out=x)
        self.call_fails(TypeError, "argument x (f32[N]): expected a CUDA tensor (an object with "
                        "__cuda_array_interface__ or __dlpack__), got list", self.k.saxpy, 1.0,
                        [1.0] * 8, x, out=x)
        self.call_fails(TypeError, "argument a (f32): expected a number, got str", self.k.saxpy,
                        "2", x, x, out=x)
        self.call_fails(TypeError, "argument n (i32): expected an int, got float", self.m.mixed,
                        1.0, 2.5, Dl((5, 4)), Cai((3,)), out=(Dl((5, 4)), Cai((3,))))
        self.call_fails(ValueError, "argument n (i32): 2147483648 does not fit in i32",
                        self.m.mixed, 1.0, 1 << 31, Dl((5, 4)), Cai((3,)),
                        out=(Dl((5, 4)), Cai((3,))))
        self.call_fails(TypeError, "argument x (bf16[M, 4]): dtype float16, expected bfloat16",
                        self.m.mixed, 1.0, 1, Dl((5, 4), code=2), Cai((3,)),
                        out=(Dl((5, 4)), Cai((3,))))

    def test_shapes_and_sizes(self):
        x = Cai((8,))
        self.call_fails(ValueError, "argument y (f32[N]): dimension 0 is 9, but size N = 8 "
                        "(from x dimension 0)", self.k.saxpy, 1.0, x, Cai((9,)), out=x)
        self.call_fails(ValueError, "argument x (f32[N]): 2 dimensions, expected 1",
                        self.k.saxpy, 1.0, Cai((2, 4)), x, out=x)
        self.call_fails(ValueError, "argument x (bf16[M, 4]): dimension 1 is 5, expected 4",
                        self.m.mixed, 1.0, 1, Dl((5, 5)), Cai((3,)), out=(Dl((5, 4)), Cai((3,))))
        self.call_fails(ValueError, "dimension 0 is 8, but size N = 7 (given by name)",
                        self.k.saxpy, 1.0, x, x, out=x, N=7)
        self.call_fails(ValueError, "size N: expected a non-negative int, got -1", self.k.saxpy,
                        1.0, x, x, out=x, N=-1)

    def test_layout_device_and_outputs(self):
        x = Cai((8,))
        self.call_fails(ValueError, "argument x (f32[N]): not contiguous (strides (2,) in "
                        "elements)", self.k.saxpy, 1.0, Cai((8,), strides=(8,)), x, out=x)
        # explicit row-major strides are fine (and size-1 dimensions may have any stride)
        self.call_fails(fusc.Error, "no CUDA driver", self.k.saxpy, 1.0, Cai((8,), strides=(4,)),
                        x, out=x)
        self.call_fails(ValueError, "argument z (f32[N]): read-only, but it is an output",
                        self.k.saxpy, 1.0, x, x, out=Cai((8,), readonly=True))
        self.call_fails(ValueError, "argument x (bf16[M, 4]): not on a CUDA device (DLPack "
                        "device type 1)", self.m.mixed, 1.0, 1, Dl((5, 4), device=(1, 0)),
                        Cai((3,)), out=(Dl((5, 4)), Cai((3,))))
        self.call_fails(ValueError, "on CUDA device 1; libfusrt runs on device 0", self.m.mixed,
                        1.0, 1, Dl((5, 4), device=(2, 1)), Cai((3,)),
                        out=(Dl((5, 4)), Cai((3,))))
        self.call_fails(ValueError, "not contiguous (strides (1, 5)", self.m.mixed, 1.0, 1,
                        Dl((5, 4), strides=(1, 5)), Cai((3,)), out=(Dl((5, 4)), Cai((3,))))
        self.call_fails(TypeError, "stream: expected an int handle", self.k.saxpy, 1.0, x, x,
                        out=x, stream="s")


if __name__ == "__main__":
    unittest.main()
