# CuPy's FFT (cuFFT) against NumPy's.
# gpu-check: requires cupy
from _gpucheck import check, passed, require, require_cupy_gpu

numpy = require("numpy")

cupy = require_cupy_gpu()
rng = numpy.random.default_rng(9)
signal = rng.standard_normal((16, 4096)) + 1j * rng.standard_normal((16, 4096))
got = cupy.asnumpy(cupy.fft.fft(cupy.asarray(signal), axis=1))
check(numpy.allclose(got, numpy.fft.fft(signal, axis=1), rtol=1e-9, atol=1e-8),
      "batched complex FFT")
real = rng.standard_normal((64, 64)).astype(numpy.float32)
got = cupy.asnumpy(cupy.fft.rfft2(cupy.asarray(real)))
check(numpy.allclose(got, numpy.fft.rfft2(real), rtol=1e-4, atol=1e-3), "2D real FFT")
back = cupy.asnumpy(cupy.fft.irfft2(cupy.fft.rfft2(cupy.asarray(real)), s=real.shape))
check(numpy.allclose(back, real, rtol=1e-4, atol=1e-4), "inverse FFT round trip")
passed()
