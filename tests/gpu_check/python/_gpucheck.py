"""Shared by the Python checks of gpu-check.sh: each check is its own process, prints what it
verified, and ends with PASS (exit 0), FAIL: reason (exit 1), or SKIP: reason (exit 77) when its
module or a GPU is missing. A check that records figures writes them as JSON to the file named by
GPU_CHECK_ARTIFACT, which gpu-check.sh compares between the native and the pooled run."""

import importlib
import json
import os
import sys

SKIP_EXIT = 77


def skip(reason):
    print("SKIP: " + reason, flush=True)
    sys.exit(SKIP_EXIT)


def fail(reason):
    print("FAIL: " + reason, flush=True)
    sys.exit(1)


def check(condition, what):
    if not condition:
        fail(what)
    print("ok: " + what, flush=True)


def passed():
    print("PASS", flush=True)
    sys.exit(0)


def require(module):
    """Imports a module or skips the check, naming what is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        skip("%s cannot be imported: %s" % (module, error))


def require_torch_gpu():
    torch = require("torch")
    if not torch.cuda.is_available():
        skip("torch.cuda.is_available() is False (torch %s, built for CUDA %s)"
             % (torch.__version__, torch.version.cuda))
    return torch


def require_cupy_gpu():
    cupy = require("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy raises its own CUDARuntimeError without a GPU
        skip("cupy finds no GPU: %s" % error)
    if count < 1:
        skip("cupy finds no GPU")
    return cupy


def require_jax_gpu():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = require("jax")
    try:
        devices = jax.devices("gpu")
    except RuntimeError as error:
        skip("jax finds no GPU: %s" % error)
    if not devices:
        skip("jax finds no GPU")
    return jax


def write_artifact(figures):
    path = os.environ.get("GPU_CHECK_ARTIFACT")
    if path:
        with open(path, "w") as f:
            json.dump(figures, f)
