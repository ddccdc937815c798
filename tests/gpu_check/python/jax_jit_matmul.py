# JAX: a jit-compiled matmul (XLA on the GPU) against NumPy.
# gpu-check: requires jax
from _gpucheck import check, passed, require, require_jax_gpu

numpy = require("numpy")

jax = require_jax_gpu()
import jax.numpy as jnp  # noqa: E402

print("jax %s on %s" % (jax.__version__, jax.devices("gpu")[0]))
rng = numpy.random.default_rng(10)
a = rng.standard_normal((256, 384)).astype(numpy.float32)
b = rng.standard_normal((384, 128)).astype(numpy.float32)
matmul = jax.jit(lambda x, y: jnp.tanh(jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST)))
got = numpy.asarray(matmul(jax.device_put(a, jax.devices("gpu")[0]), b))
check(numpy.allclose(got, numpy.tanh(a.astype(numpy.float64) @ b), rtol=1e-4, atol=1e-4),
      "jit matmul + tanh")
passed()
