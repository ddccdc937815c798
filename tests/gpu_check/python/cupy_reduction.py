# CuPy reductions against NumPy.
# gpu-check: requires cupy
from _gpucheck import check, passed, require, require_cupy_gpu

numpy = require("numpy")

cupy = require_cupy_gpu()
rng = numpy.random.default_rng(7)
a = rng.standard_normal((1000, 999))
d = cupy.asarray(a)
check(numpy.allclose(cupy.asnumpy(d.sum(axis=0)), a.sum(axis=0)), "sum over axis 0")
check(numpy.allclose(cupy.asnumpy(d.max(axis=1)), a.max(axis=1)), "max over axis 1")
check(abs(float(d.std()) - a.std()) < 1e-9, "standard deviation")
check(int(cupy.count_nonzero(d > 0.5)) == int(numpy.count_nonzero(a > 0.5)), "count_nonzero")
check(int(d.argmin()) == int(a.argmin()), "argmin")
passed()
