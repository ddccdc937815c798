# numba-cuda: a Python kernel compiled to PTX by Numba, loaded through the driver and launched.
# gpu-check: requires numba
from _gpucheck import check, passed, require, skip

numpy = require("numpy")
if not hasattr(numpy, "row_stack"):
    # numba-cuda still names numpy.row_stack (an alias of vstack that numpy 2.5, seen on the GPU
    # machine, no longer has) when it compiles its first kernel; without it every kernel fails to
    # compile, pool or not.
    numpy.row_stack = numpy.vstack
    print("note: numpy %s has no row_stack; aliased to vstack for numba-cuda" % numpy.__version__,
          flush=True)

numba = require("numba")
from numba import cuda  # noqa: E402

if not cuda.is_available():
    skip("numba.cuda.is_available() is False")

@cuda.jit
def saxpy(out, x, y, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

n = 1 << 20
rng = numpy.random.default_rng(12)
x = rng.standard_normal(n).astype(numpy.float32)
y = rng.standard_normal(n).astype(numpy.float32)
out = cuda.device_array(n, dtype=numpy.float32)
saxpy[(n + 255) // 256, 256](out, cuda.to_device(x), cuda.to_device(y), numpy.float32(2.0))
check(numpy.allclose(out.copy_to_host(), 2.0 * x + y, rtol=1e-6, atol=1e-6), "saxpy kernel result")
passed()
