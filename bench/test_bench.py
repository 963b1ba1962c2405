#!/usr/bin/env python3
"""CPU tests of bench.py (`make check-bench`): the signature and prototype parsers, the launcher
binding, the arithmetic of the table and the machine-readable lines. No GPU, no PyTorch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402
import cases as C  # noqa: E402

LAYERNORM = """
// a comment with fusion fake(x: f32) -> (y: f32) {
fusion layernorm(x: bf16[M, N], gamma: bf16[N], /* c */ beta: bf16[N],
                 eps: f32) -> (y: bf16[M, N]) {
  y[i, j] = x[i, j];
}
fusion total(x: f16[N]) -> (s: f32) { s = sum(i: x[i]); }
"""


class Parse(unittest.TestCase):
    def test_fusions(self):
        fs = B.parse_fusions(LAYERNORM)
        self.assertEqual(sorted(fs), ["layernorm", "total"])
        params, outputs = fs["layernorm"]
        self.assertEqual([p.name for p in params], ["x", "gamma", "beta", "eps"])
        self.assertEqual(params[0].dims, ["M", "N"])
        self.assertIsNone(params[3].dims)
        self.assertEqual(outputs[0].dtype, "bf16")
        self.assertEqual(B.size_symbols(params, outputs), ["M", "N"])
        self.assertEqual(params[0].shape({"M": 3, "N": 5}), (3, 5))
        self.assertEqual(params[0].nbytes({"M": 3, "N": 5}), 30)
        s = fs["total"][1][0]
        self.assertEqual((s.dims, s.shape({}), s.nbytes({})), (None, (), 4))

    def test_constant_dims(self):
        (x,), (y,) = B.parse_fusions("fusion f(x: f32[M, 4096]) -> (y: f32[M]) {}")["f"]
        self.assertEqual(x.shape({"M": 2}), (2, 4096))
        self.assertEqual(B.size_symbols([x], [y]), ["M"])

    def test_bad_dtype(self):
        with self.assertRaises(ValueError):
            B.parse_fusions("fusion f(x: f33[N]) -> (y: f32[N]) {}")

    def test_prototype_and_binding(self):
        header = ("cudaError_t layernorm(const uint16_t *x, const uint16_t *gamma, "
                  "const uint16_t *beta, float eps, uint16_t *y,\n  int64_t M, int64_t N, "
                  "cudaStream_t stream);\nconst char *layernorm_last_error(void);\n")
        proto = B.parse_prototype(header, "layernorm")
        self.assertEqual(proto[0], ("const uint16_t*", "x"))
        self.assertEqual(proto[3], ("float", "eps"))
        params, outputs = B.parse_fusions(LAYERNORM)["layernorm"]
        kinds = [(k, n) for k, n, _ in B.bind_launcher(proto, params, outputs)]
        self.assertEqual(kinds, [("tensor", "x"), ("tensor", "gamma"), ("tensor", "beta"),
                                 ("scalar", "eps"), ("tensor", "y"), ("size", "M"),
                                 ("size", "N"), ("stream", "stream")])
        with self.assertRaises(ValueError):
            B.parse_prototype(header, "softmax")
        # A launcher that lost an argument, or names one the fusion does not have.
        with self.assertRaises(ValueError):
            B.bind_launcher(proto[:5] + proto[6:], params, outputs)
        with self.assertRaises(ValueError):
            B.bind_launcher([("float", "alpha")] + proto, params, outputs)

    def test_zero_d_output_is_a_pointer(self):
        params, outputs = B.parse_fusions(LAYERNORM)["total"]
        proto = B.parse_prototype("cudaError_t total(const uint16_t *x, float *s, int64_t N, "
                                  "cudaStream_t stream);", "total")
        self.assertEqual([k for k, _, _ in B.bind_launcher(proto, params, outputs)],
                         ["tensor", "tensor", "size", "stream"])


class Arithmetic(unittest.TestCase):
    def test_rate_ratio_geomean(self):
        self.assertAlmostEqual(B.rate(4e9, 1.0), 4000.0)
        self.assertIsNone(B.rate(4e9, None))
        self.assertEqual(B.best_peer({"eager": 2.0, "compile": 1.5, "triton": "FAIL"}),
                         ("compile", 1.5))
        self.assertEqual(B.best_peer({"eager": "FAIL", "triton": "n/a"}), (None, None))
        self.assertAlmostEqual(B.ratio(1.0, 1.5), 1.5)
        self.assertIsNone(B.ratio("FAIL: x", 1.5))
        self.assertIsNone(B.ratio(1.0, None))
        self.assertAlmostEqual(B.geomean([0.5, 2.0, None]), 1.0)
        self.assertIsNone(B.geomean([None]))

    def row(self, fusc_ms, peers, flops=None):
        case = C.Case("auto", "softmax f32 16384x4096", "bench/auto/softmax_f32.fus",
                      {"M": 16384, "N": 4096}, None, flops=flops)
        return B.Row(case, 4e9 if not flops else flops, fusc_ms, peers, 4000.0)

    def test_row_line(self):
        r = self.row(1.0, {"eager": 2.0, "compile": 1.25, "triton": "FAIL"})
        self.assertEqual(r.line(), "ROW suite=auto name=softmax_f32_16384x4096 fusc_ms=1.0000 "
                         "fusc_gbs=4000.0 eager_gbs=2000.0 compile_gbs=3200.0 triton_gbs=FAIL "
                         "best=compile best_gbs=3200.0 ratio=1.250 copy_frac=1.000 status=ok")
        f = self.row("FAIL: y: relative error 1 > 0.0001", {"eager": 2.0})
        self.assertIn(" fusc_ms=- fusc_gbs=- ", f.line())
        self.assertIn(" ratio=- ", f.line())
        self.assertTrue(f.line().endswith("status=FAIL"))
        g = self.row(2.0, {"eager": 1.0}, flops=2e9)  # 2 GFLOP in 2 ms: 1 TFLOP/s
        self.assertIn("fusc_tflops=1.0 eager_tflops=2.0", g.line())
        self.assertIn("ratio=0.500 copy_frac=-", g.line())

    def test_markdown_and_summary(self):
        rows = [self.row(1.0, {"eager": 2.0, "compile": "skipped", "triton": "n/a"}),
                self.row("FAIL: launcher returned 1: x", {"eager": 2.0})]
        md = B.markdown(rows).splitlines()
        self.assertEqual(len(md), 4)
        self.assertTrue(md[0].startswith("| case | fusc ms | fusc GB/s | eager GB/s |"))
        self.assertEqual(md[2], "| softmax f32 16384x4096 | 1.000 | 4000 | 2000 | skipped | n/a "
                         "| eager | 2.00 | 1.00 |")
        self.assertIn("| FAIL |", md[3])
        s = B.summary(rows)
        self.assertTrue(s.startswith("geometric mean of fusc/best over 1 rows: 2.000"))
        self.assertIn("fusc not timed (1): softmax f32 16384x4096", s)


class Suites(unittest.TestCase):
    def test_every_case_names_an_existing_file_and_unique_label(self):
        labels = set()
        for name, make in C.SUITES.items():
            for c in make():
                self.assertEqual(c.suite, name)
                self.assertTrue(os.path.exists(c.fus), c.fus)
                self.assertNotIn((c.suite, c.label), labels)
                labels.add((c.suite, c.label))

    def test_auto_covers_the_row_lengths(self):
        labels = [c.label for c in C.auto_cases()]
        for op in ("softmax", "layernorm", "rmsnorm", "logsumexp", "row sum"):
            for n in C.ROW_LENGTHS:
                self.assertTrue(any(l.startswith(op + " f32") and l.endswith(f"x{n}")
                                    for l in labels), (op, n))


if __name__ == "__main__":
    unittest.main()
