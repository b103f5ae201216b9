"""Argument checks shared by learnopt's public constructors and functions.

Every check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, bad
value) with one message format: ``"<name> must be <what is expected>, got <value>"``.
Checks return the value normalized (a Python ``int``/``float``) so callers can write
``self.lr = _validate.positive_float("learning_rate", learning_rate)``.

Hyperparameters that are JAX arrays (traced inside ``jit``/``grad``, or computed, e.g. a
learned optimizer's ``exp(theta["log_lr"])``) pass through unchecked; Python numbers and
numpy arrays are checked (element-wise). Class labels are data, not hyperparameters:
:func:`labels_in_range` checks every concrete batch, JAX arrays included. Nothing here
imports more than numpy and JAX.
"""

from __future__ import annotations

import numbers
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "integer",
    "positive_int",
    "non_negative_int",
    "real",
    "positive_float",
    "non_negative_float",
    "unit_interval",
    "optional_positive_float",
    "seed",
    "prng_key",
    "theta_like",
    "scalar_loss",
    "float_images",
    "labels_in_range",
    "writable_dir",
    "output_dir",
    "readable_dir",
]

SEED_LIMIT = 2**32


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def integer(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int`` in ``[minimum, maximum]``; bools and floats are rejected.

    Args:
      name: the argument's name, used in the error message.
      value: the value to check: a Python or numpy integer, or a concrete integer
        0-d array.
      minimum: the smallest value accepted, or None for no bound.
      maximum: the largest value accepted, or None for no bound.

    Returns:
      ``int(value)``.

    Raises:
      TypeError: ``value`` is not an integer (a bool, a float, a traced value).
      ValueError: ``value`` is out of bounds.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, np.ndarray | jax.Array) and np.ndim(value) == 0:
            if _is_traced(value) or not np.issubdtype(np.asarray(value).dtype, np.integer):
                raise TypeError(f"{name} must be an integer, got {_show(value)}")
        else:
            raise TypeError(f"{name} must be an integer, got {_show(value)}")
    value = int(value)
    if minimum is not None and maximum is not None and not minimum <= value <= maximum:
        raise ValueError(f"{name} must be an integer in [{minimum}, {maximum}], got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {value}")
    return value


def positive_int(name: str, value: Any) -> int:
    """:func:`integer` with ``minimum=1``."""
    return integer(name, value, minimum=1)


class RunLengthMissing(ValueError):
    """An optimizer that reads the fraction of training done got no ``num_steps``."""


def run_length(name: str, value: Any) -> Any:
    """A run length ``T``: None, an integer >= 1, or a traced / batched value left as it is.

    Meta-training passes each inner run's length as a traced (or per-run) integer array,
    checked where it is drawn; a concrete scalar is checked here, so ``num_steps=0``,
    ``-5`` or ``2.5`` fail at once instead of making a learned optimizer step backwards,
    not at all, or by an undefined fraction of training.

    Args:
      name: the argument's name, used in the error message.
      value: the value to check.

    Returns:
      ``int(value)`` for a concrete scalar, else ``value`` itself.

    Raises:
      TypeError: a bool, a float or another non-integer.
      ValueError: an integer below 1.
    """
    if value is None or _is_traced(value):
        return value
    if isinstance(value, np.ndarray | jax.Array) and np.ndim(value) != 0:
        return value
    try:
        return positive_int(name, value)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{err} (the planned number of steps of the run)") from None


def non_negative_int(name: str, value: Any) -> int:
    """:func:`integer` with ``minimum=0``."""
    return integer(name, value, minimum=0)


def _concrete(name: str, value: Any) -> np.ndarray | None:
    """``value`` as a float64 array, or None for a JAX array (traced or computed on device,
    e.g. a learned optimizer's ``exp(theta)``: checking it would cost a device sync)."""
    if isinstance(value, jax.Array) or _is_traced(value):
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, numbers.Real | np.number | np.ndarray
    ):
        raise TypeError(f"{name} must be a real number, got {_show(value)}")
    try:
        arr = np.asarray(value)
    except Exception:
        raise TypeError(f"{name} must be a real number, got {_show(value)}") from None
    if (
        arr.size == 0
        or arr.dtype == object
        or not (np.issubdtype(arr.dtype, np.number) or arr.dtype.name == "bfloat16")
    ):
        raise TypeError(f"{name} must be a real number, got {_show(value)}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be a real number, got {_show(value)}")
    return arr.astype(np.float64)


def real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    what: str | None = None,
) -> Any:
    """A finite real number (or concrete array of them) in the given interval.

    Python and numpy scalars come back as ``float``; arrays and traced values unchanged.

    Args:
      name: the argument's name, used in the error message.
      value: a Python or numpy real number or a numpy array of them (checked
        element-wise); JAX arrays and tracers pass unchecked.
      low: the lower bound, or None for none.
      high: the upper bound, or None for none.
      low_open: whether ``low`` itself is excluded.
      high_open: whether ``high`` itself is excluded.
      what: the expectation the message states (default: written from the bounds).

    Returns:
      ``float(value)`` for a scalar, else ``value`` unchanged.

    Raises:
      TypeError: ``value`` is not a real number (bool, complex, string, empty array).
      ValueError: a value is not finite or is out of the interval.
    """
    arr = _concrete(name, value)
    if arr is None:
        return value
    if what is None:
        lo = "" if low is None else f"{'(' if low_open else '['}{low:g}"
        hi = "" if high is None else f"{high:g}{')' if high_open else ']'}"
        if low is not None and high is not None:
            what = f"a finite number in {lo}, {hi}"
        elif low is not None:
            what = f"a finite number {'>' if low_open else '>='} {low:g}"
        elif high is not None:
            what = f"a finite number {'<' if high_open else '<='} {high:g}"
        else:
            what = "a finite number"
    ok = np.isfinite(arr)
    if low is not None:
        ok &= (arr > low) if low_open else (arr >= low)
    if high is not None:
        ok &= (arr < high) if high_open else (arr <= high)
    if not np.all(ok):
        shown = _show(value)
        raise ValueError(f"{name} must be {what}, got {shown}")
    if isinstance(value, numbers.Real | np.number) and np.ndim(value) == 0:
        return float(arr)
    return value


def positive_float(name: str, value: Any) -> Any:
    """A finite number > 0: :func:`real` with ``low=0.0, low_open=True``."""
    return real(name, value, low=0.0, low_open=True)


def non_negative_float(name: str, value: Any) -> Any:
    """A finite number >= 0: :func:`real` with ``low=0.0``."""
    return real(name, value, low=0.0)


def unit_interval(name: str, value: Any, *, high_open: bool = True) -> Any:
    """A number in ``[0, 1)`` (e.g. a decay rate ``beta``), or ``[0, 1]``.

    Args:
      name: the argument's name, used in the error message.
      value: the value to check (JAX arrays pass unchecked).
      high_open: whether 1 is excluded (True: ``[0, 1)``).

    Returns:
      What :func:`real` returns (a ``float`` for a scalar).
    """
    return real(name, value, low=0.0, high=1.0, high_open=high_open)


def optional_positive_float(name: str, value: Any) -> Any:
    """None, or a finite number > 0.

    Args:
      name: the argument's name, used in the error message.
      value: the value to check.

    Returns:
      None for None, else what :func:`positive_float` returns.
    """
    return None if value is None else positive_float(name, value)


def seed(name: str, value: Any) -> int:
    """A PRNG seed: :func:`integer` in ``[0, 2**32)`` (JAX keys of larger seeds collide)."""
    return integer(name, value, minimum=0, maximum=SEED_LIMIT - 1)


def prng_key(name: str, key: Any) -> Any:
    """A JAX PRNG key: a typed key array, or raw ``uint32[..., 2]`` key data.

    Args:
      name: the argument's name, used in the error message.
      key: the value to check (concrete or traced; only dtype and shape are read).

    Returns:
      ``key``, unchanged.

    Raises:
      TypeError: ``key`` is neither a typed key nor ``uint32`` data with last axis 2.
    """
    if _is_traced(key):
        dtype = key.dtype
        shape = key.shape
    elif hasattr(key, "dtype") and hasattr(key, "shape"):
        dtype, shape = key.dtype, key.shape
    else:
        raise TypeError(
            f"{name} must be a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
            f"got {_show(key)}"
        )
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return key
    if np.dtype(dtype) != np.uint32 or len(shape) < 1 or shape[-1] != 2:
        raise TypeError(
            f"{name} must be a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed): "
            f"uint32[2]), got {np.dtype(dtype).name}{list(shape)}"
        )
    return key


def _leaf_shapes(tree: Any) -> dict[str, tuple]:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(p) or "<root>": tuple(jnp.shape(x)) for p, x in flat}


def theta_like(name: str, theta: Any, expected: Any, owner: str = "the learned optimizer") -> Any:
    """``theta`` has the keys and shapes of ``expected`` (e.g. ``jax.eval_shape(lopt.init, k)``).

    Raises ``ValueError`` naming the missing, extra or misshapen entries.

    Args:
      name: the argument's name, used in the error message.
      theta: the meta-parameters given.
      expected: a pytree with the structure and shapes ``theta`` must have (arrays or
        ``jax.ShapeDtypeStruct`` s).
      owner: what ``theta`` is for, in the message.

    Returns:
      ``theta``, unchanged.

    Raises:
      TypeError: ``expected`` is a dict and ``theta`` is not.
      ValueError: the leaf paths or shapes differ.
    """
    if isinstance(expected, Mapping) and not isinstance(theta, Mapping):
        raise TypeError(
            f"{name} must be a dict with keys {sorted(expected)} for {owner}, got "
            f"{type(theta).__name__}"
        )
    got, want = _leaf_shapes(theta), _leaf_shapes(expected)
    if got == want:
        return theta
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = [
        f"{k} {list(got[k])} (expected {list(want[k])})"
        for k in want
        if k in got and got[k] != want[k]
    ]
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing)}")
    if extra:
        parts.append(f"unexpected {', '.join(extra)}")
    if wrong:
        parts.append(f"wrong shape {', '.join(wrong)}")
    raise ValueError(f"{name} does not fit {owner}: {'; '.join(parts)}")


def scalar_loss(name: str, loss: Any) -> Any:
    """A loss is a real scalar (shape ``()``); checked on shapes, so it works under ``jit``.

    Args:
      name: the argument's name, used in the error message.
      loss: the loss value (array, tracer or Python float).

    Returns:
      ``loss``, unchanged.

    Raises:
      ValueError: ``loss`` is not 0-d.
      TypeError: its dtype is not floating.
    """
    shape = jnp.shape(loss)
    if shape != ():
        raise ValueError(f"{name} must be a scalar (shape ()), got shape {shape}")
    dtype = jnp.result_type(loss)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"{name} must be a floating-point scalar, got {dtype}")
    return loss


def float_images(name: str, images: Any) -> Any:
    """Images where floats in [0, 1] are expected: integer pixels (uint8) are rejected.

    Only the dtype is checked (the range is not: it would need the values).

    Args:
      name: the argument's name, used in the error message.
      images: the image array (concrete or traced).

    Returns:
      ``images``, unchanged.

    Raises:
      TypeError: the dtype is not floating.
    """
    dtype = jnp.result_type(images)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(
            f"{name} must be floating-point images in [0, 1], got {np.dtype(dtype).name} "
            "(divide uint8 pixels by 255 first)"
        )
    return images


def labels_in_range(name: str, labels: Any, num_classes: int) -> Any:
    """Integer class labels in ``[0, num_classes)``.

    Concrete labels (numpy arrays, lists, and JAX arrays outside ``jit``: copied to the
    host, which only eager calls pay) are checked value by value. Traced labels (inside
    ``jit``, ``vmap``, ``grad`` of the labels) and arrays spread over several processes
    are checked on their dtype only: nothing that depends on the data can raise there.

    Args:
      name: what the labels are called in the message (e.g. ``"task: batch['label']"``).
      labels: the labels.
      num_classes: the number of classes.

    Returns:
      ``labels``, unchanged.
    """
    concrete = not _is_traced(labels) and not (
        isinstance(labels, jax.Array) and not labels.is_fully_addressable
    )
    if not concrete:  # traced, or spread over processes: dtype only
        dtype = jnp.result_type(labels)
    else:
        try:
            values = np.asarray(labels)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be integer class labels, got {_show(labels)}") from None
        dtype = values.dtype
    if not jnp.issubdtype(dtype, jnp.integer):
        raise TypeError(f"{name} must be integer class labels, got {np.dtype(dtype).name}")
    if concrete and values.size:
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= num_classes:
            raise ValueError(f"{name} must be in [0, {num_classes}), got values in [{low}, {high}]")
    return labels


def _path(name: str, value: Any) -> Path:
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {_show(value)}")
    text = os.fspath(value)
    if isinstance(text, bytes) or not text or "\0" in text:
        raise ValueError(f"{name} must be a non-empty path, got {_show(value)}")
    return Path(text).expanduser()


def writable_dir(name: str, value: Any, create: bool = True) -> Path:
    """A folder that exists (or is created) and can be written: probed with a file.

    Args:
      name: the argument's name, used in the error message.
      value: the path (``str`` or ``os.PathLike``; ``~`` is expanded).
      create: whether to create the folder (with its parents) if it is missing.

    Returns:
      The folder as a ``pathlib.Path``.

    Raises:
      TypeError: ``value`` is not a path.
      ValueError: the path is empty, is a file, or cannot be created or written.
    """
    path = _path(name, value)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}: {path} exists and is not a directory")
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        probe = path / f".learnopt-write-probe-{os.getpid()}"
        with open(probe, "wb") as f:
            f.write(b"x")
            f.flush()
            os.fsync(f.fileno())
        probe.unlink()
    except OSError as e:
        raise ValueError(
            f"{name}: {path} is not a writable directory ({e.strerror or e})"
        ) from None
    return path


def output_dir(name: str, value: Any) -> Path:
    """A folder that output can go into, checked before any work; nothing is created.

    The folder itself if it exists, else its nearest existing parent, must be a folder in
    which a file can be written (probed with a file that is removed at once): a path that
    is a file, lies under a file, or is on a read-only or otherwise unwritable place fails.

    Args:
      name: the argument's (or flag's) name, used in the error message.
      value: the path (``str`` or ``os.PathLike``; ``~`` is expanded).

    Returns:
      The path as a ``pathlib.Path``.

    Raises:
      TypeError: ``value`` is not a path.
      ValueError: one line naming ``name``, the path and what is wrong.
    """
    path = _path(name, value)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}: {path} exists and is not a directory")
    base = path
    while not base.exists() and not base.is_symlink() and base.parent != base:
        base = base.parent
    if not base.is_dir():
        what = "a broken link" if base.is_symlink() and not base.exists() else "a file"
        raise ValueError(f"{name}: {path} cannot be created: {base} is {what}, not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".learnopt-write-probe-", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        where = "" if base == path else f" (in {base})"
        raise ValueError(
            f"{name}: {path} is not a writable place{where}: {e.strerror or e}"
        ) from None
    return path


def readable_dir(name: str, value: Any) -> Path:
    """A path that is not a file: a readable folder, or one that does not exist yet.

    Args:
      name: the argument's name, used in the error message.
      value: the path (``str`` or ``os.PathLike``; ``~`` is expanded).

    Returns:
      The path as a ``pathlib.Path``.

    Raises:
      TypeError: ``value`` is not a path.
      ValueError: the path is empty, is a file, or is a folder that cannot be read.
    """
    path = _path(name, value)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"{name}: {path} is a file, expected a directory")
        try:
            next(iter(os.scandir(path)), None)
        except OSError as e:
            raise ValueError(f"{name}: {path} cannot be read ({e.strerror or e})") from None
    return path
