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
system's C++ compiler into a cache folder and registers it with JAX. Where that fails
(no compiler, a read-only cache, a compile error or time-out, an FFI API mismatch) it
returns False, :func:`unavailable_reason` says why, and one :class:`FusedKernelWarning`
says so; :mod:`~learnopt.learned_optimizers.blocks.per_element` then keeps the blocked
products, which compute the same function. Environment variables:

* ``LEARNOPT_FUSED_KERNEL``: ``1``, ``true``, ``yes``, ``on`` (or unset / empty) use the
  kernel; ``0``, ``false``, ``no``, ``off`` turn it off without a warning (any case,
  surrounding spaces ignored). Any other value is a ``ValueError`` from :func:`available`
  naming the variable and these values: a typo must not silently pick either meaning.
* ``CXX``: the compiler command, split like a shell would (``shlex.split``), so
  ``ccache g++`` and ``g++ -O0`` work (the kernel's flags ``-O3 -march=native ...``
  follow the command's own arguments). Unset or empty: ``g++``, else ``c++``, from PATH.
* ``LEARNOPT_KERNEL_CACHE``: the cache folder (default ``~/.cache/learnopt/kernels``).
* ``LEARNOPT_KERNEL_BUILD_TIMEOUT``: the compile's time limit in seconds (default 120; a
  build takes about 5 s). A compile that runs longer is stopped (its whole process group)
  and the kernel is off, with the warning saying so.

The cache holds ``fused_mlp-<hash>.so`` (the hash covers the source, the compiler command,
the flags, the jax version and the CPU) and next to it ``fused_mlp-<hash>.so.sha256``
(the library's sha256 and size). A build compiles into a temporary folder inside the
cache and moves the library, then its checksum file, into place with ``os.replace``, so
concurrent processes building the same kernel each see a whole file or none (at worst
one rebuilds a copy another just wrote). Before loading, the library's size and sha256
are checked against the checksum file, on the same open file that is then loaded
(``/proc/self/fd`` on Linux), and a missing, truncated or altered library, or a missing
or unreadable checksum file (a cache written before checksums were kept), is rebuilt,
with the compile's one-line note on stderr saying why. A truncated library must never
reach ``dlopen``: mapping it ends the process with SIGBUS, not an exception.

There is no trial load in a child process: a library whose bytes match the checksum that
this machine's own successful build recorded is the file the compiler wrote, and the
checksum is what catches the damage a cache suffers (a copy cut short by a full disk or a
killed process, a stray write); a library that the compiler writes but that cannot load
raises ``OSError`` in ``dlopen`` rather than crashing, and a child process would cost
every run a second interpreter start for nothing more.

Only the forward pass is fused: :func:`~learnopt.learned_optimizers.blocks.per_element.mlp`
and :func:`~learnopt.learned_optimizers.blocks.per_element.mlp_step` take derivatives through
the blocked form (a custom JVP), so meta-gradients are unchanged.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from importlib import resources
from typing import Any, BinaryIO

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "available",
    "unavailable_reason",
    "status",
    "supports",
    "fused_mlp",
    "fused_mlp_step",
    "FusedKernelWarning",
    "TARGET",
    "STEP_TARGET",
    "WIDTH",
    "MAX_OUTPUTS",
    "ROWS_PER_SUM",
    "ENV_SWITCH",
    "ENV_CACHE",
    "ENV_BUILD_TIMEOUT",
    "DEFAULT_BUILD_TIMEOUT",
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
#: Turns the kernel on or off (see the module's docstring for the values).
ENV_SWITCH = "LEARNOPT_FUSED_KERNEL"
#: The folder of the compiled libraries (default ``~/.cache/learnopt/kernels``).
ENV_CACHE = "LEARNOPT_KERNEL_CACHE"
#: The compile's time limit in seconds.
ENV_BUILD_TIMEOUT = "LEARNOPT_KERNEL_BUILD_TIMEOUT"
#: The compile's time limit without :data:`ENV_BUILD_TIMEOUT`, seconds.
DEFAULT_BUILD_TIMEOUT = 120.0
_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")
_SUM_SUFFIX = ".sha256"
_FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-w")
if platform.machine().lower() in ("x86_64", "amd64"):
    # GCC otherwise keeps 512-bit vectors off for auto-vectorized loops (an x86 option).
    _FLAGS = (*_FLAGS, "-mprefer-vector-width=512")

_lock = threading.Lock()
_state: dict[str, object] = {}


class FusedKernelWarning(RuntimeWarning):
    """The fused kernel is off though not turned off: why, and what runs instead."""


class _CacheMiss(Exception):
    """The cached library is missing or fails its checksum (the message says how)."""

    def __init__(self, reason: str, missing: bool = False):
        super().__init__(reason)
        self.missing = missing


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


def _enabled() -> bool:
    """Whether :data:`ENV_SWITCH` asks for the kernel (unset or empty: yes).

    Returns:
      True for ``1``/``true``/``yes``/``on``, False for ``0``/``false``/``no``/``off``
      (any case, spaces stripped).

    Raises:
      ValueError: for any other value, naming the variable and the accepted values.
    """
    raw = os.environ.get(ENV_SWITCH, "")
    value = raw.strip().lower()
    if not value or value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(
        f"{ENV_SWITCH}={raw!r} is neither on ({', '.join(_ON)}) nor off ({', '.join(_OFF)}); "
        "any case is accepted"
    )


def _build_timeout() -> float:
    """The compile's time limit: :data:`ENV_BUILD_TIMEOUT`, else the default (seconds).

    Raises:
      ValueError: if the variable is set to anything but a finite number above 0.
    """
    raw = os.environ.get(ENV_BUILD_TIMEOUT, "").strip()
    if not raw:
        return DEFAULT_BUILD_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{ENV_BUILD_TIMEOUT}={raw!r}: expected a number of seconds above 0")
    return value


def _find_compiler() -> list[str]:
    """The compiler command: ``$CXX`` split like a shell would, else ``g++`` or ``c++``.

    Raises:
      RuntimeError: naming the program that is not found (or why ``$CXX`` is unusable).
    """
    cxx = os.environ.get("CXX", "")
    try:
        argv = shlex.split(cxx)
    except ValueError as e:
        raise RuntimeError(f"$CXX={cxx!r} is not a valid command line ({e})") from None
    if not argv:
        found = shutil.which("g++") or shutil.which("c++")
        if found is None:
            raise RuntimeError(
                "no C++ compiler: $CXX is not set and neither g++ nor c++ is on PATH"
            )
        return [found]
    found = shutil.which(argv[0])
    if found is None:
        raise RuntimeError(
            f"the C++ compiler {argv[0]!r} (from $CXX={cxx!r}) is not found: not on PATH, "
            "or not an executable file"
        )
    return [found, *argv[1:]]


def _compiler() -> list[str] | None:
    """The compiler command, or None where :func:`_find_compiler` finds none."""
    try:
        return _find_compiler()
    except RuntimeError:
        return None


def _cache_dir() -> str:
    return os.environ.get(ENV_CACHE) or os.path.join(
        os.path.expanduser("~"), ".cache", "learnopt", "kernels"
    )


def _library_path(cxx: list[str]) -> str:
    """Where the library compiled by ``cxx`` lives in the cache (it may not exist)."""
    key = "\n".join([_source(), " ".join(_FLAGS), shlex.join(cxx), jax.__version__, _cpu_id()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return os.path.join(_cache_dir(), f"fused_mlp-{digest}.so")


def _digest(f: BinaryIO) -> tuple[str, int]:
    """The sha256 (hex) and size of an open file, read from its start."""
    f.seek(0)
    sha, size = hashlib.sha256(), 0
    while chunk := f.read(1 << 20):
        sha.update(chunk)
        size += len(chunk)
    return sha.hexdigest(), size


def _mismatch(f: BinaryIO, lib: str) -> str | None:
    """How the open library ``f`` (at ``lib``) differs from its checksum file, or None."""
    sidecar = lib + _SUM_SUFFIX
    try:
        with open(sidecar) as s:
            fields = s.read(200).split()
    except FileNotFoundError:
        return f"its checksum file {os.path.basename(sidecar)} is missing"
    except (OSError, UnicodeDecodeError) as e:
        return f"its checksum file {os.path.basename(sidecar)} is unreadable ({e})"
    if len(fields) != 2 or not re.fullmatch("[0-9a-f]{64}", fields[0]) or not fields[1].isdigit():
        return f"its checksum file {os.path.basename(sidecar)} is malformed"
    sha, size = _digest(f)
    if size != int(fields[1]):
        return f"it has {size} bytes where its build wrote {fields[1]}"
    if sha != fields[0]:
        return "its sha256 differs from its build's"
    return None


def _load(lib: str) -> ctypes.CDLL:
    """Loads the cached library after checking its size and sha256.

    Args:
      lib: the library's path in the cache (:func:`_library_path`).

    Returns:
      The loaded library.

    Raises:
      _CacheMiss: if it is missing or fails the check (nothing is loaded then).
      RuntimeError: if it passes the check but ``dlopen`` refuses it.
    """
    try:
        f = open(lib, "rb")
    except FileNotFoundError:
        raise _CacheMiss("not built yet", missing=True) from None
    with f:
        problem = _mismatch(f, lib)
        if problem is not None:
            raise _CacheMiss(problem)
        # Load the very file just checked, even if another process replaces the path now.
        fd_path = f"/proc/self/fd/{f.fileno()}"
        try:
            return ctypes.CDLL(fd_path if os.path.exists(fd_path) else lib)
        except OSError as e:  # checked, so not a damaged copy: a rebuild would not help
            raise RuntimeError(f"loading {lib} failed: {e}") from None


def _run_compiler(cmd: list[str], timeout: float, shown: str) -> None:
    """Runs the compile, stopping it (with its child processes) after ``timeout`` seconds.

    Args:
      cmd: the command line.
      timeout: the time limit, seconds.
      shown: the compiler command as the messages name it.

    Raises:
      RuntimeError: on a non-zero exit (with the end of its stderr) or on the time limit.
    """
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the time limit stops cc1plus too
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (AttributeError, OSError):  # no process groups (Windows), or already gone
            proc.kill()
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        raise RuntimeError(
            f"the compile ({shown} ...) did not finish within its time limit of "
            f"{timeout:g} s and was stopped (raise {ENV_BUILD_TIMEOUT}, default "
            f"{DEFAULT_BUILD_TIMEOUT:g} s)"
        ) from None
    if proc.returncode != 0:
        raise RuntimeError(
            f"{shown} ... exited with status {proc.returncode}: {err.strip()[-500:]}"
        )


def _compile(cxx: list[str], lib: str, timeout: float, why: str) -> None:
    """Compiles the kernel into ``lib`` and its checksum file, each moved into place whole.

    Args:
      cxx: the compiler command (:func:`_find_compiler`).
      lib: the library's path in the cache (:func:`_library_path`).
      timeout: the compile's time limit, seconds.
      why: why the cached copy is not used, for the one-line note on stderr.
    """
    cache = os.path.dirname(lib)
    os.makedirs(cache, exist_ok=True)
    print(
        f"learnopt: compiling the fused CPU kernel ({why}; about 5 s, once per machine): {lib}",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as tmp:
        src = os.path.join(tmp, "fused_mlp.cc")
        with open(src, "w") as f:
            f.write(_source())
        out = os.path.join(tmp, "fused_mlp.so")
        _run_compiler(
            [*cxx, *_FLAGS, f"-I{jax.ffi.include_dir()}", src, "-o", out, "-lpthread"],
            timeout,
            shlex.join(cxx),
        )
        try:
            with open(out, "rb") as f:
                sha, size = _digest(f)
        except FileNotFoundError:
            raise RuntimeError(f"{shlex.join(cxx)} exited 0 but wrote no library") from None
        if size == 0:
            raise RuntimeError(f"{shlex.join(cxx)} exited 0 but wrote an empty library")
        sidecar = os.path.join(tmp, "fused_mlp.so" + _SUM_SUFFIX)
        with open(sidecar, "w") as f:
            f.write(f"{sha} {size}\n")
        # Atomic: a concurrent process sees each file whole or not at all. The library goes
        # first; one that reads the new library with the old checksum file rebuilds.
        os.replace(out, lib)
        os.replace(sidecar, lib + _SUM_SUFFIX)


def _load_or_build(timeout: float) -> ctypes.CDLL:
    """The kernel's library from the cache, (re)built first if missing or damaged.

    Raises:
      RuntimeError: with the reason (naming the library) where it cannot be built or loaded.
    """
    cxx = _find_compiler()
    lib = _library_path(cxx)
    try:
        return _load(lib)
    except _CacheMiss as miss:
        why = "not built yet" if miss.missing else f"the cached copy is rejected: {miss}"
        try:
            _compile(cxx, lib, timeout, why)
        except Exception as e:
            action = "building" if miss.missing else f"rebuilding ({why})"
            detail = str(e) if isinstance(e, RuntimeError) else f"{type(e).__name__}: {e}"
            raise RuntimeError(f"{action} {lib} failed: {detail}") from None
    try:
        return _load(lib)
    except _CacheMiss as miss:  # replaced by a concurrent build that differs from ours
        raise RuntimeError(f"{lib} failed its check right after its build: {miss}") from None


def available() -> bool:
    """Whether the fused kernel is compiled and registered (compiling it on first call).

    The first call in a process that has to compile says so in one line on stderr; one
    that cannot make the kernel available gives one :class:`FusedKernelWarning`.

    Returns:
      True once the kernel is registered with JAX for the CPU platform; False if it is
      turned off or could not be built (:func:`unavailable_reason` says why).

    Raises:
      ValueError: if ``LEARNOPT_FUSED_KERNEL`` or ``LEARNOPT_KERNEL_BUILD_TIMEOUT`` holds
        a value they do not accept (the message names them).
    """
    with _lock:
        if "ok" not in _state:
            if not _enabled():
                _state.update(
                    ok=False, reason=f"turned off by {ENV_SWITCH}={os.environ[ENV_SWITCH].strip()}"
                )
            else:
                timeout = _build_timeout()
                try:
                    handle = _load_or_build(timeout)
                    for target, symbol in (
                        (TARGET, handle.LearnoptFusedMlp),
                        (STEP_TARGET, handle.LearnoptFusedMlpStep),
                    ):
                        capsule = jax.ffi.pycapsule(symbol)
                        jax.ffi.register_ffi_target(target, capsule, platform="cpu")
                    _state.update(ok=True, reason=None)
                except Exception as e:  # any failure means: use the blocked products
                    reason = str(e) if isinstance(e, RuntimeError) else f"{type(e).__name__}: {e}"
                    _state.update(ok=False, reason=reason)
                    warnings.warn(
                        f"learnopt: the fused CPU kernel is off: {reason}. The per-element "
                        "MLPs use the blocked matmuls instead (same values; their updates "
                        "about 2.3-2.6x slower on ~2M parameters, docs/benchmarks.md); "
                        f"{ENV_SWITCH}=0 skips the kernel without this warning.",
                        FusedKernelWarning,
                        stacklevel=2,
                    )
        return bool(_state["ok"])


def status() -> dict[str, Any]:
    """What the kernel is doing on this machine, for ``learnopt doctor``.

    Calls :func:`available` (which may compile the library once, saying so).

    Returns:
      ``{"on": bool, "reason": str | None, "library": path or None, "compiler": str or
      None, "switch": the value of ``LEARNOPT_FUSED_KERNEL`` or None}``.
    """
    cxx = _compiler() if _enabled() else None
    on = available()
    return {
        "on": on,
        "reason": unavailable_reason(),
        "library": _library_path(cxx) if cxx else None,
        "compiler": shlex.join(cxx) if cxx else None,
        "switch": os.environ.get(ENV_SWITCH),
    }


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
      differentiable by itself (see :func:`~learnopt.learned_optimizers.blocks.per_element.mlp`);
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
      differentiable by itself (see
      :func:`~learnopt.learned_optimizers.blocks.per_element.mlp_step`).
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
