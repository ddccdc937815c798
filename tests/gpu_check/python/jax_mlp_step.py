# JAX: jit-compiled training steps (value_and_grad) of a small MLP; the loss must fall.
# gpu-check: requires jax
from _gpucheck import check, passed, require, require_jax_gpu

numpy = require("numpy")

jax = require_jax_gpu()
import jax.numpy as jnp  # noqa: E402

rng = numpy.random.default_rng(11)
x = rng.standard_normal((256, 32)).astype(numpy.float32)
y = numpy.sin(x @ rng.standard_normal((32, 1)).astype(numpy.float32))
params = {"w1": rng.standard_normal((32, 64)).astype(numpy.float32) * 0.2,
          "b1": numpy.zeros(64, numpy.float32),
          "w2": rng.standard_normal((64, 1)).astype(numpy.float32) * 0.2,
          "b2": numpy.zeros(1, numpy.float32)}
params = jax.device_put(params, jax.devices("gpu")[0])

def loss(p, x, y):
    hidden = jax.nn.relu(x @ p["w1"] + p["b1"])
    return jnp.mean((hidden @ p["w2"] + p["b2"] - y) ** 2)

@jax.jit
def step(p, x, y):
    value, grads = jax.value_and_grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda w, g: w - 0.05 * g, p, grads), value

losses = []
for _ in range(50):
    params, value = step(params, x, y)
    losses.append(float(value))
print("loss %.4f -> %.4f" % (losses[0], losses[-1]))
check(losses[-1] < 0.7 * losses[0], "the loss fell by more than 30%")
passed()
