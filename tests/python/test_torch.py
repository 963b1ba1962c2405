"""python/fusc with PyTorch on a GPU (make check-gpu, tests/gpu.sh part python): fusions from
examples/ and inline texts run on torch tensors and match PyTorch's own results; f16 through
__cuda_array_interface__, bf16 through DLPack; outputs allocated; a side stream; errors.
Exits 77 ("skipped") without PyTorch or a CUDA device, 0 when every test passes, 1 otherwise.
"""
import os
import sys
import tempfile
import unittest

top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(top, "python"))

try:
    import torch
except ImportError:
    print("skipped: no PyTorch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("skipped: no CUDA device")
    sys.exit(77)

import fusc  # noqa: E402

CACHE = tempfile.mkdtemp(prefix="fusc_torch_")
dev = torch.device("cuda", 0)


def example(path):
    return fusc.compile(os.path.join(top, "examples", path), cache_dir=CACHE)


class TestTorch(unittest.TestCase):
    def test_saxpy(self):
        k = example("saxpy.fus")
        for n in (1, 7, 4096, 1000003):
            x = torch.randn(n, device=dev)
            y = torch.randn(n, device=dev)
            z = torch.empty(n, device=dev)
            k.saxpy(2.5, x, y, out=z)
            torch.cuda.synchronize()
            torch.testing.assert_close(z, 2.5 * x + y, rtol=1e-6, atol=1e-6)

    def test_softmax(self):
        k = example("reduce/softmax.fus")
        for m, n in ((1, 4), (37, 1000), (1024, 4096)):
            x = torch.randn(m, n, device=dev)
            y = torch.empty_like(x)
            k.softmax(x, out=y)
            torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
            # the output allocated like the input
            torch.testing.assert_close(k.softmax(x), torch.softmax(x, dim=1), rtol=1e-5,
                                       atol=1e-6)

    def test_half(self):
        k = example("half_scale.fus")
        for n in (8, 1000, 1 << 20):
            x = torch.randn(n, device=dev).half()
            y = torch.randn(n, device=dev).half()
            z = k.half_scale(0.75, x, y)
            want = (torch.tanh(0.75 * x.float()) + y.float() * y.float()).half()
            torch.testing.assert_close(z, want, rtol=1e-2, atol=1e-2)

    def test_bf16_dlpack(self):
        k = fusc.compile("fusion bscale(s: f32, x: bf16[M, N]) -> (y: bf16[M, N]) {\n"
                         "  y[i, j] = s * x[i, j];\n}\n", cache_dir=CACHE)
        x = torch.randn(33, 517, device=dev).bfloat16()
        y = torch.empty_like(x)
        k.bscale(3.0, x, out=y)
        torch.testing.assert_close(y, (3.0 * x.float()).bfloat16(), rtol=0, atol=0)

    def test_stream(self):
        k = example("saxpy.fus")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.ones(1 << 20, device=dev)
            z = torch.empty_like(x)
            k.saxpy(2.0, x, x, out=z)  # on s, PyTorch's current stream here
        s.synchronize()
        torch.testing.assert_close(z, torch.full_like(z, 3.0))
        z2 = torch.empty_like(x)
        k.saxpy(1.0, x, x, out=z2, stream=s)
        s.synchronize()
        torch.testing.assert_close(z2, torch.full_like(z2, 2.0))

    def test_errors(self):
        k = example("reduce/softmax.fus")
        x = torch.randn(8, 16, device=dev)
        with self.assertRaisesRegex(TypeError, r"argument x \(f32\[M, N\]\): dtype float64, "
                                    "expected float32"):
            k.softmax(x.double(), out=torch.empty_like(x))
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            k.softmax(x.t(), out=torch.empty(16, 8, device=dev))
        with self.assertRaisesRegex(ValueError, "dimension 1 is 8, but size N = 16"):
            k.softmax(x, out=torch.empty(8, 8, device=dev))
        with self.assertRaisesRegex(fusc.Error, "multiple of 4") as cm:
            k.softmax(torch.randn(8, 10, device=dev), out=torch.empty(8, 10, device=dev))
        self.assertEqual(cm.exception.status, "FUSRT_ERR_PRECONDITION")
        with self.assertRaisesRegex(ValueError, "not on a CUDA device"):
            k.softmax(torch.randn(8, 16), out=torch.empty_like(x))  # on the CPU


if __name__ == "__main__":
    result = unittest.main(exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
