# A CuPy RawKernel: CUDA C compiled at run time by NVRTC, loaded and launched.
# gpu-check: requires cupy
from _gpucheck import check, passed, require, require_cupy_gpu

numpy = require("numpy")

cupy = require_cupy_gpu()
source = r"""
extern "C" __global__ void scale_shift(const float* in, float* out, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * scale + (float)i;
}
"""
kernel = cupy.RawKernel(source, "scale_shift")
n = 100003
data = numpy.random.default_rng(8).standard_normal(n).astype(numpy.float32)
out = cupy.empty(n, dtype=cupy.float32)
kernel(((n + 255) // 256,), (256,), (cupy.asarray(data), out, numpy.float32(2.5), numpy.int32(n)))
expected = data * numpy.float32(2.5) + numpy.arange(n, dtype=numpy.float32)
check(numpy.allclose(cupy.asnumpy(out), expected, rtol=1e-6, atol=1e-3), "RawKernel result")
passed()
