# CuPy elementwise arithmetic and an ElementwiseKernel against NumPy.
# gpu-check: requires cupy
from _gpucheck import check, passed, require, require_cupy_gpu

numpy = require("numpy")

cupy = require_cupy_gpu()
rng = numpy.random.default_rng(6)
a = rng.standard_normal(1 << 20).astype(numpy.float32)
b = rng.standard_normal(1 << 20).astype(numpy.float32)
got = cupy.asnumpy(cupy.sqrt(cupy.abs(cupy.asarray(a))) * cupy.asarray(b) + 2.0)
check(numpy.allclose(got, numpy.sqrt(numpy.abs(a)) * b + 2.0, rtol=1e-5, atol=1e-6),
      "sqrt/abs/multiply/add")
axpy = cupy.ElementwiseKernel("float32 x, float32 y, float32 alpha", "float32 z",
                              "z = alpha * x + y", "axpy")
got = cupy.asnumpy(axpy(cupy.asarray(a), cupy.asarray(b), numpy.float32(3.0)))
check(numpy.allclose(got, 3.0 * a + b, rtol=1e-6, atol=1e-6), "ElementwiseKernel axpy")
passed()
