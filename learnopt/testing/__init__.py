"""Testing helpers: count how often a function is traced (compiled) by ``jax.jit``.

A jitted step that compiles twice usually means a state leaf changed dtype or weak
type between calls (see ``docs/design.md``, "compiles once"). These helpers make that a
one-line assertion::

    step = jax.jit(counter.wrap(step_fn))
    for _ in range(10):
        state = step(state)
    counter.assert_count(1)

or, as a context manager around any number of calls of an already-jitted function::

    with assert_max_compiles(1):
        for _ in range(10):
            state = step(state)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import jax

__all__ = ["TraceCounter", "assert_max_compiles", "assert_same_theta", "count_compiles"]


class TraceCounter:
    """Counts Python traces of the functions it wraps (one trace = one compilation)."""

    def __init__(self) -> None:
        self.count = 0

    def wrap(self, fn: Callable) -> Callable:
        """``fn`` with a counter: each call of the result (each trace, under ``jit``) adds 1.

        Args:
          fn: the function to count (wrap it before ``jax.jit``).

        Returns:
          The counting wrapper, with ``fn``'s name and signature.
        """

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return fn(*args, **kwargs)

        return wrapped

    def assert_count(self, expected: int, what: str = "function") -> None:
        """Raises ``AssertionError`` unless the count is ``expected``.

        Args:
          expected: the number of traces wanted (usually 1).
          what: how the message names the function.
        """
        if self.count != expected:
            raise AssertionError(
                f"{what} was traced {self.count} times, expected {expected}: some argument "
                "changed shape, dtype or weak type between calls"
            )


_COMPILING = re.compile(r"Compiling jit\((.+?)\) with global shapes")


_COMPILE_LOGGERS = ("interpreters.pxla", "dispatch", "compiler", "pjit", "compilation_cache")


class _CompileLogHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.names: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        match = _COMPILING.match(record.getMessage())
        if match:
            self.names.append(match.group(1))


@contextlib.contextmanager
def count_compiles() -> Iterator[list[str]]:
    """Yields a list that collects the name of every function XLA compiles in the block.

    Uses JAX's compile logging (``jax_log_compiles``); a cache hit logs nothing, so
    ``len(names)`` is the number of compilations. Eager ``jnp`` calls on new shapes
    compile tiny programs too: filter by name when counting one step function.

    Yields:
      The list of compiled function names, filled while the ``with`` block runs.
    """
    handler = _CompileLogHandler()
    # With jax_log_compiles these loggers print at WARNING; keep them quiet here.
    loggers = [logging.getLogger(f"jax._src.{n}") for n in _COMPILE_LOGGERS]
    old = [(lg.level, lg.propagate) for lg in loggers]
    null = logging.NullHandler()
    for lg in loggers:
        lg.propagate = False
        lg.setLevel(logging.DEBUG)
        lg.addHandler(null)
    loggers[0].addHandler(handler)
    prev = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)
    try:
        yield handler.names
    finally:
        jax.config.update("jax_log_compiles", prev)
        loggers[0].removeHandler(handler)
        for lg, (level, propagate) in zip(loggers, old, strict=True):
            lg.removeHandler(null)
            lg.setLevel(level)
            lg.propagate = propagate


@contextlib.contextmanager
def assert_max_compiles(n: int, name: str | None = None) -> Iterator[list[str]]:
    """Fails if the block compiles jitted functions more than ``n`` times.

    Args:
      n: the largest number of compilations allowed.
      name: if given, only compilations of functions with this ``__name__`` count.

    Yields:
      The list of compiled function names, as :func:`count_compiles` fills it.

    Raises:
      AssertionError: after the block, if more than ``n`` compilations counted.
    """
    with count_compiles() as names:
        yield names
    counted = [x for x in names if name is None or x == name]
    if len(counted) > n:
        raise AssertionError(
            f"expected at most {n} compilation(s){' of ' + name if name else ''}, got "
            f"{len(counted)}: {counted}. A state leaf probably changed dtype or weak type "
            "between calls."
        )


def assert_same_theta(a: Any, b: Any) -> None:
    """Asserts two thetas (pytrees or theta files) are bit-identical: structure, dtypes, bits.

    Theta files compare by their theta alone: their metadata (creation time, run folder)
    differs between runs that computed the same theta.

    Args:
      a: a theta pytree, or the path of a theta file.
      b: the same, to compare with ``a``.

    Raises:
      AssertionError: the structures, a dtype or shape, or the bytes of a leaf differ.
    """
    import os

    import numpy as np

    from learnopt import checkpoints

    def load(x: Any) -> Any:
        return checkpoints.load_theta(x) if isinstance(x, str | os.PathLike) else x

    ta, tb = load(a), load(b)
    assert jax.tree.structure(ta) == jax.tree.structure(tb), (
        jax.tree.structure(ta),
        jax.tree.structure(tb),
    )
    for x, y in zip(jax.tree.leaves(ta), jax.tree.leaves(tb), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
        assert x.tobytes() == y.tobytes(), f"theta differs: {x} != {y}"
