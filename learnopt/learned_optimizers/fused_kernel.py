"""The fused per-element MLP kernel for XLA:CPU, compiled on first use.

XLA:CPU runs the ``[N, 32] @ [32, 32]`` products of the width-32 learned optimizers
(``MLPLOpt``) at about a third of its large-matmul rate, because every hidden layer goes
through memory (``docs/benchmarks.md``). ``kernels/fused_mlp.cc`` computes the same MLP
(two hidden layers of 32 units, ReLU, 1-4 outputs, float32) tile by tile with the hidden
units in registers and L1, as an XLA FFI custom call: measured 3x faster than the
blocked products on the benchmark model (87% of the machine's matmul rate). It can also
normalize the feature columns itself (:func:`fused_mlp`'s ``norm_eps``) and write
MLPLOpt's and RNNMLPLOpt's update in place of the two outputs (:func:`fused_mlp_step`).

The kernel ships as C++ source. :func:`available` compiles it once per machine with the
system's C++ compiler (``$CXX``, else ``g++`` / ``c++``; ``-O3 -march=native``) into a
cache folder (``$LEARNOPT_KERNEL_CACHE``, default ``~/.cache/learnopt/kernels``; the file
name hashes the source, the flags, the jax version and the CPU), and registers it with
JAX. Where that fails (no compiler, a read-only cache, an FFI API mismatch) it returns
False and :func:`unavailable_reason` says why; :mod:`~learnopt.learned_optimizers.per_element`
then keeps the blocked products, which compute the same function. Setting
``LEARNOPT_FUSED_KERNEL=0`` turns the kernel off.

Only the forward pass is fused: :func:`~learnopt.learned_optimizers.per_element.mlp`
and :func:`~learnopt.learned_optimizers.per_element.mlp_step` take derivatives through
the blocked form (a custom JVP), so meta-gradients are unchanged.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "available",
    "unavailable_reason",
    "supports",
    "fused_mlp",
    "fused_mlp_step",
    "TARGET",
    "STEP_TARGET",
    "WIDTH",
    "MAX_OUTPUTS",
    "ROWS_PER_SUM",
]

#: The FFI target name the kernel is registered under (CPU).
TARGET = "learnopt_fused_mlp"
#: The FFI target of the kernel with the update epilogue (:func:`fused_mlp_step`).
STEP_TARGET = "learnopt_fused_mlp_step"
#: The hidden width the kernel is written for (both hidden layers).
WIDTH = 32
#: The most outputs the kernel computes.
MAX_OUTPUTS = 4
#: Rows per partial sum of the second hidden layer (the kernel's chunk: 16 tiles of 64).
ROWS_PER_SUM = 1024
_FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-w")
if platform.machine().lower() in ("x86_64", "amd64"):
    # GCC otherwise keeps 512-bit vectors off for auto-vectorized loops (an x86 option).
    _FLAGS = (*_FLAGS, "-mprefer-vector-width=512")

_lock = threading.Lock()
_state: dict[str, object] = {}


def _source() -> str:
    return resources.files(__package__).joinpath("kernels", "fused_mlp.cc").read_text()


def _cpu_id() -> str:
    """What ``-march=native`` compiles for: the CPU's model and feature flags."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor() or platform.machine()


def _compiler() -> str | None:
    cxx = os.environ.get("CXX")
    if cxx:
        return shutil.which(cxx)
    return shutil.which("g++") or shutil.which("c++")


def _build() -> str:
    """Compiles the kernel (or finds it in the cache); returns the library's path."""
    cxx = _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found ($CXX, g++ or c++ on PATH)")
    source = _source()
    key = "\n".join([source, " ".join(_FLAGS), cxx, jax.__version__, _cpu_id()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    cache = os.environ.get("LEARNOPT_KERNEL_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "learnopt", "kernels"
    )
    lib = os.path.join(cache, f"fused_mlp-{digest}.so")
    if os.path.exists(lib):
        return lib
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src = os.path.join(tmp, "fused_mlp.cc")
        with open(src, "w") as f:
            f.write(source)
        out = os.path.join(tmp, "fused_mlp.so")
        cmd = [cxx, *_FLAGS, f"-I{jax.ffi.include_dir()}", src, "-o", out, "-lpthread"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:2])} ... failed: {done.stderr.strip()[-500:]}")
        os.replace(out, lib)  # atomic: a concurrent process sees the whole file or none
    return lib


def available() -> bool:
    """Whether the fused kernel is compiled and registered (compiling it on first call).

    Returns:
      True once the kernel is registered with JAX for the CPU platform; False if it is
      turned off or could not be built (:func:`unavailable_reason` says why).
    """
    with _lock:
        if "ok" not in _state:
            if os.environ.get("LEARNOPT_FUSED_KERNEL", "1") == "0":
                _state.update(ok=False, reason="turned off by LEARNOPT_FUSED_KERNEL=0")
            else:
                try:
                    handle = ctypes.cdll.LoadLibrary(_build())
                    for target, symbol in (
                        (TARGET, handle.LearnoptFusedMlp),
                        (STEP_TARGET, handle.LearnoptFusedMlpStep),
                    ):
                        capsule = jax.ffi.pycapsule(symbol)
                        jax.ffi.register_ffi_target(target, capsule, platform="cpu")
                    _state.update(ok=True, reason=None)
                except Exception as e:  # any failure means: use the blocked products
                    _state.update(ok=False, reason=f"{type(e).__name__}: {e}")
        return bool(_state["ok"])


def unavailable_reason() -> str | None:
    """Why :func:`available` returned False.

    Returns:
      The reason, or None if it returned True or was not called yet.
    """
    return _state.get("reason")  # type: ignore[return-value]


def supports(widths, n_outputs: int, dtype) -> bool:
    """Whether the kernel computes this MLP.

    Args:
      widths: the hidden layers' widths (the kernel: ``[32, 32]``).
      n_outputs: the number of output units (1-4).
      dtype: the compute dtype (float32).

    Returns:
      True for those, on the CPU backend (the default one, where the program compiles).
    """
    return (
        list(widths) == [WIDTH, WIDTH]
        and 1 <= n_outputs <= MAX_OUTPUTS
        and jnp.dtype(dtype) == jnp.float32
        and jax.default_backend() == "cpu"
    )


def fused_mlp(layers, groups, hidden_sum: bool = False, norm_eps: float | None = None):
    """``relu(relu(x @ w0 + b0) @ w1 + b1) @ w2 + b2`` with ``x = concat(groups, axis=1)``,
    transposed: ``[K, N]``.

    Args:
      layers: ``[(w0 [F, 32], b0), (w1 [32, 32], b1), (w2 [32, K], b2)]``, float32.
      groups: the feature groups, each ``[N, F_g]`` float32 (``F`` = the ``F_g`` summed),
        read in place: the concatenation is never written to memory.
      hidden_sum: also return the second hidden layer (after the ReLU) summed over the
        ``N`` rows, ``[32]`` (for outputs needed only as means over the rows).
      norm_eps: if given (``>= 0``), each column of ``x`` is first divided by
        ``sqrt(norm_eps + mean(column^2))`` (mean over the ``N`` rows), computed in the
        kernel: a pass of sums of squares over the groups, folded into ``w0``'s rows.

    Returns:
      One row per output unit, ``[K, N]`` (and the hidden sum with ``hidden_sum``). Not
      differentiable by itself (see :func:`~learnopt.learned_optimizers.per_element.mlp`);
      batched by ``vmap`` one slice after another.
    """
    (w0, b0), (w1, b1), (w2, b2) = layers
    n = groups[0].shape[0]
    if norm_eps is not None and not norm_eps >= 0:
        raise ValueError(f"fused_mlp: norm_eps must be >= 0 or None, got {norm_eps!r}")
    call = jax.ffi.ffi_call(
        TARGET,
        (
            jax.ShapeDtypeStruct((w2.shape[1], n), jnp.float32),
            # No rows: the kernel skips the sums.
            jax.ShapeDtypeStruct((-(-n // ROWS_PER_SUM) if hidden_sum else 0, WIDTH), jnp.float32),
        ),
        vmap_method="sequential",
    )
    eps = np.float32(-1.0 if norm_eps is None else norm_eps)  # < 0: no normalization
    out, partial_sums = call(w0, b0, w1, b1, w2, b2, *groups, norm_eps=eps)
    return (out, jnp.sum(partial_sums, axis=0)) if hidden_sum else out


def fused_mlp_step(
    layers,
    groups,
    p: jax.Array,
    mult: jax.Array,
    exp_mult: float,
    hidden_sum: bool = False,
    norm_eps: float | None = None,
    step_sums: bool = False,
):
    """The update ``p - mult * d * exp(exp_mult * a)`` with ``(d, a)`` the two outputs of
    :func:`fused_mlp` (MLPLOpt's and RNNMLPLOpt's rule), written in place of them.

    Args:
      layers: as :func:`fused_mlp`, with two outputs (``w2 [32, 2]``).
      groups: the feature groups, each ``[N, F_g]`` float32, read in place.
      p: the parameters ``[N]``, float32.
      mult: the step multiplier, a float32 scalar (may be traced).
      exp_mult: the magnitude's scale inside the exponential (static).
      hidden_sum: also return the second hidden layer summed over the rows, ``[32]``.
      norm_eps: if given (``>= 0``), each feature column is first divided by its root
        mean square over the rows, plus ``norm_eps`` under the root (as :func:`fused_mlp`).
      step_sums: also return the sums over the rows of ``|delta|``, ``|d|``, ``a`` and
        ``|a|`` (``delta = mult * d * exp(exp_mult * a)``), ``[4]``.

    Returns:
      ``(new_p [N], hidden sum [32] or None, step sums [4] or None)``. Not
      differentiable by itself (see :func:`~learnopt.learned_optimizers.per_element.mlp_step`).
    """
    (w0, b0), (w1, b1), (w2, b2) = layers
    n = p.shape[0]
    if norm_eps is not None and not norm_eps >= 0:
        raise ValueError(f"fused_mlp_step: norm_eps must be >= 0 or None, got {norm_eps!r}")
    chunks = -(-n // ROWS_PER_SUM)
    call = jax.ffi.ffi_call(
        STEP_TARGET,
        (
            jax.ShapeDtypeStruct((n,), jnp.float32),
            jax.ShapeDtypeStruct((chunks if hidden_sum else 0, WIDTH), jnp.float32),
            jax.ShapeDtypeStruct((chunks if step_sums else 0, 4), jnp.float32),
        ),
        vmap_method="sequential",
    )
    eps = np.float32(-1.0 if norm_eps is None else norm_eps)  # < 0: no normalization
    mult = jnp.reshape(jnp.asarray(mult, jnp.float32), (1,))
    new_p, partial_hidden, partial_steps = call(
        w0, b0, w1, b1, w2, b2, p, mult, *groups, norm_eps=eps, exp_mult=np.float32(exp_mult)
    )
    return (
        new_p,
        jnp.sum(partial_hidden, axis=0) if hidden_sum else None,
        jnp.sum(partial_steps, axis=0) if step_sums else None,
    )
