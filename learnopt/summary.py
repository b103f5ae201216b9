"""Summaries inside JAX functions, with the notes' library's names (``summary.summary``).

Research code written on ``learned_optimization`` calls ``summary.summary(name, value)``
inside its learned optimizers and tasks (Celo's release does, in every update) and asks
for the values with :func:`with_summary_output_reduced` or :func:`add_with_summary`.
This module keeps those names and signatures so that such code runs on learnopt with
only the import prefix changed.

How values are collected (learnopt's own design, no Oryx and no TensorFlow):

* :func:`summary` returns its value unchanged. When no collection is active it records
  nothing and costs nothing: compiled programs are the same as without the call.
* :func:`with_summary_output_reduced` runs the function with a collector active and with
  ``jax.disable_jit()``: jitted helpers are inlined and ``lax.scan`` / ``fori_loop``
  bodies run once per iteration at the caller's level (eagerly, or inside the caller's
  own ``jit`` trace), so every :func:`summary` value of every iteration is collected.
  Repeated names are gathered under one key (``"mean||loop"`` holds all 20 iterations'
  values, as the library's "append" harvesting does); :func:`aggregate_metric_list`
  reduces them with the library's rules. Collecting is for analysis steps: a long loop
  is unrolled while collecting.
* A value made inside a transformation of its own (``jax.vmap``, ``jax.grad``) cannot
  leave it; such summaries are skipped, with one ``RuntimeWarning`` per name.

The writers (:class:`InMemorySummaryWriter`, :class:`PrintWriter`, :class:`MultiWriter`,
:class:`TensorboardWriter`, the latter through the optional tensorboardX) have the
library's methods.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import functools
import inspect
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from learnopt._summary_writers import (  # re-exported: the library's writers live here
    InMemorySummaryWriter,
    JaxboardWriter,
    MultiWriter,
    PrintWriter,
    SummaryWriterBase,
    TensorboardWriter,
)

__all__ = [
    "AggregationType",
    "COLLECTS",
    "ORYX_LOGGING",
    "summary",
    "summary_scope",
    "summary_decorator",
    "current_summary_prefix",
    "reset_summary_counter",
    "with_summary_output_reduced",
    "add_with_summary",
    "aggregate_metric_list",
    "aggregate_metric",
    "sample_value",
    "tree_scalar_mean",
    "tree_step",
    "summarize_inner_params",
    "SummaryWriterBase",
    "InMemorySummaryWriter",
    "PrintWriter",
    "MultiWriter",
    "TensorboardWriter",
    "JaxboardWriter",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Summaries are collected when asked (the library's flag of the same meaning, which
#: there depends on Oryx being installed; here it is always true).
COLLECTS = True
#: The library's name for :data:`COLLECTS` (its tests and users branch on it).
ORYX_LOGGING = COLLECTS


class AggregationType(enum.StrEnum):
    """How the values of one summary name are reduced (the library's five kinds)."""

    mean = "mean"
    sample = "sample"
    collect = "collect"
    none = "none"
    tensor = "tensor"


class _Collector:
    """The values recorded while one :func:`with_summary_output_reduced` call runs."""

    def __init__(self) -> None:
        from jax._src import core  # the trace the collection runs at

        self.trace = core.trace_ctx.trace
        self.values: dict[str, list[Any]] = collections.defaultdict(list)
        self.skipped: set[str] = set()

    def at_level(self) -> bool:
        from jax._src import core

        return core.trace_ctx.trace is self.trace


class _State(threading.local):
    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[str] = []
        self.collectors: list[_Collector] = []


_state = _State()

#: How many times each summary name was seen (the library's counter; names are not
#: suffixed here: repeated names are gathered under one key instead).
count_per_tags: dict[str, int] = {}


def current_summary_prefix() -> str:
    """The prefix :func:`summary` adds to names here.

    Returns:
      The ``/``-joined names of the enclosing :func:`summary_scope` blocks ("" if none).
    """
    return "/".join(_state.scopes)


@contextlib.contextmanager
def summary_scope(val: str) -> Iterator[None]:
    """Prefixes the names of the summaries made inside the block with ``val/``.

    Args:
      val: the prefix (an empty string adds none).

    Returns:
      The context manager.
    """
    if not val:
        yield
        return
    _state.scopes.append(val)
    try:
        yield
    finally:
        _state.scopes.pop()


def summary_decorator(name: str) -> Callable[[F], F]:
    """Runs the decorated function inside ``summary_scope(name)``.

    Args:
      name: the prefix.

    Returns:
      The decorator.
    """

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def scoped(*args: Any, **kwargs: Any) -> Any:
            with summary_scope(name):
                return fn(*args, **kwargs)

        return scoped  # type: ignore[return-value]

    return wrap


def reset_summary_counter() -> None:
    """Clears ``count_per_tags`` (kept for the library's callers)."""
    count_per_tags.clear()


def summary(name: str, val: Any, aggregation: AggregationType | str = AggregationType.mean) -> Any:
    """Records ``val`` under ``name`` when a collection is active; returns ``val``.

    Args:
      name: the summary's name (the enclosing scopes are prefixed); must not contain
        ``"||"``.
      val: a scalar or array (traced or concrete).
      aggregation: how repeated values are reduced: ``"mean"``, ``"sample"`` (one at
        random), ``"collect"`` (all, raveled), ``"tensor"`` (exactly one array) or
        ``"none"`` (exactly one scalar).

    Returns:
      ``val`` itself.

    Raises:
      ValueError: ``name`` is not a string, contains ``"||"``, or ``aggregation`` is not
        one of the five kinds.
    """
    if not isinstance(name, str):
        raise ValueError(
            "summary: the first argument is the name, a string (the library changed the "
            f"argument order in 2022); got {type(name).__name__}"
        )
    if "||" in name:
        raise ValueError(f"summary: a name may not contain '||': {name!r}")
    try:
        kind = AggregationType(aggregation)
    except ValueError:
        kinds = ", ".join(k.value for k in AggregationType)
        raise ValueError(
            f"summary {name!r}: aggregation {aggregation!r} is not one of {kinds}"
        ) from None
    prefix = current_summary_prefix()
    full = f"{prefix}/{name}" if prefix else name
    count_per_tags[full] = count_per_tags.get(full, -1) + 1
    if _state.collectors:
        collector = _state.collectors[-1]
        key = f"{kind.value}||{full}"
        if collector.at_level():
            collector.values[key].append(val)
        elif key not in collector.skipped:
            collector.skipped.add(key)
            warnings.warn(
                f"summary {full!r} was made inside jax.vmap, jax.grad or another "
                "transformation whose values cannot leave it; it is not collected",
                RuntimeWarning,
                stacklevel=2,
            )
    return val


def _reduce(key: str, vals: list[Any]) -> Any:
    """The values one key gathered, as the library's harvest returns them."""
    kind = AggregationType(key.split("||", 1)[0])
    if kind in (AggregationType.tensor, AggregationType.none):
        if len(vals) != 1:
            raise ValueError(
                f"summary {key.split('||', 1)[1]!r} with aggregation {kind.value!r} must be "
                f"made exactly once; it was made {len(vals)} times"
            )
        return jnp.asarray(vals[0])
    if len(vals) == 1:
        return jnp.asarray(vals[0])
    return jnp.concatenate([jnp.ravel(jnp.asarray(v)) for v in vals])


def with_summary_output_reduced(fn: F, static_argnums: Sequence[int] = ()) -> Callable:
    """``fn`` returning ``(outputs, metrics)``: the summaries its call made.

    Args:
      fn: a function calling :func:`summary` (jitted or not; inner ``jit`` and loops are
        inlined while collecting, see the module docstring).
      static_argnums: accepted for the library's signature (arguments are passed through
        as given, so static ones need no special handling).

    Returns:
      A function with ``fn``'s positional arguments (and an optional keyword
      ``sample_rng_key``, accepted for the library's signature) returning
      ``(fn(*args), metrics)``, where ``metrics`` maps ``"<aggregation>||<name>"`` to the
      value, or to the raveled values when a name was made several times.
    """
    del static_argnums

    @functools.wraps(fn)
    def collected(*args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        kwargs.pop("sample_rng_key", None)
        if kwargs:
            raise TypeError(
                f"with_summary_output_reduced passes positional arguments only; got "
                f"keywords {sorted(kwargs)}"
            )
        collector = _Collector()
        _state.collectors.append(collector)
        try:
            with jax.disable_jit():
                outs = fn(*args)
        finally:
            _state.collectors.pop()
        metrics = {k: _reduce(k, v) for k, v in collector.values.items()}
        return outs, metrics

    return collected


def add_with_summary(fn: F, static_argnums: Sequence[int] = ()) -> Callable:
    """``fn`` with a keyword ``with_summary`` and a second output, the metrics.

    Args:
      fn: the function to wrap.
      static_argnums: passed to :func:`with_summary_output_reduced`.

    Returns:
      A function returning ``(fn(*args, **kwargs), metrics)``: the metrics of
      :func:`with_summary_output_reduced` with ``with_summary=True``, ``{}`` otherwise.
    """

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        with_summary = kwargs.pop("with_summary", False)
        if with_summary:
            return with_summary_output_reduced(fn, static_argnums)(*args, **kwargs)
        kwargs.pop("sample_rng_key", None)
        return fn(*args, **kwargs), {}

    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    has_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    if not has_var_kw and "with_summary" not in signature.parameters:
        params.append(
            inspect.Parameter("with_summary", inspect.Parameter.KEYWORD_ONLY, default=False)
        )
        wrapped.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapped


def sample_value(key: jax.Array, val: Any) -> jax.Array:
    """One element of ``val``, chosen uniformly.

    Args:
      key: the PRNG key.
      val: an array.

    Returns:
      The element, a scalar.
    """
    val = jnp.asarray(val)
    i = jax.random.randint(key, (), 0, val.size, jnp.int32)
    return jnp.ravel(val)[i]


def aggregate_metric(k: str, vs: Sequence[Any], use_jnp: bool = False, key: Any = None) -> Any:
    """Reduces the values ``vs`` of the metric ``k`` (``"<aggregation>||<name>"``).

    Args:
      k: the metric's key.
      vs: its values (from several calls, or several devices).
      use_jnp: reduce with ``jax.numpy`` (inside a jitted function) instead of numpy.
      key: the PRNG key for ``"sample"`` with ``use_jnp``.

    Returns:
      mean: the mean over every element of every value; sample: one element at random;
      collect: all elements, raveled; tensor / none: the single value.

    Raises:
      ValueError: ``k`` has no aggregation, or ``tensor`` / ``none`` got several values.
    """
    if "||" not in k:
        raise ValueError(f"metric {k!r} has no '<aggregation>||' prefix")
    xnp = jnp if use_jnp else np
    kind = AggregationType(k.split("||", 1)[0])
    vs = [xnp.asarray(v) for v in vs]
    if kind is AggregationType.mean:
        size = sum(int(np.prod(v.shape)) for v in vs)
        return xnp.sum(xnp.asarray([xnp.sum(v) / size for v in vs]))
    if kind is AggregationType.sample:
        flat = xnp.concatenate([xnp.ravel(v) for v in vs])
        if use_jnp:
            if key is None:
                raise ValueError(f"metric {k!r}: sampling with use_jnp needs a key")
            return flat[jax.random.randint(key, (), 0, flat.shape[0])]
        return flat[np.random.default_rng().integers(flat.shape[0])]
    if kind is AggregationType.collect:
        return xnp.concatenate([xnp.ravel(v) for v in vs])
    if len(vs) != 1:
        raise ValueError(f"metric {k!r} ({kind.value}) must have one value, got {len(vs)}")
    if kind is AggregationType.none:
        if vs[0].size != 1:
            raise ValueError(f"metric {k!r} (none) must be a scalar, got shape {vs[0].shape}")
        return xnp.reshape(vs[0], ())
    return vs[0]


def aggregate_metric_list(
    metric_list: Sequence[Mapping[str, Any]], use_jnp: bool = False, key: Any = None
) -> MutableMapping[str, Any]:
    """Reduces a list of metric dicts (one per call) into one dict, key by key.

    Names the library suffixed with ``___N`` (repeats) are merged with their base name.

    Args:
      metric_list: dicts from :func:`with_summary_output_reduced`.
      use_jnp: reduce with ``jax.numpy``.
      key: the PRNG key for ``"sample"`` metrics with ``use_jnp``.

    Returns:
      ``{key: aggregate_metric(key, values)}``.
    """
    gathered: dict[str, list[Any]] = collections.defaultdict(list)
    for metrics in metric_list:
        for k, v in metrics.items():
            gathered[k.split("___")[0]].append(v)
    keys = jax.random.split(key, len(gathered)) if use_jnp and key is not None else None
    return {
        k: aggregate_metric(k, vs, use_jnp=use_jnp, key=None if keys is None else keys[i])
        for i, (k, vs) in enumerate(gathered.items())
    }


def tree_scalar_mean(prefix: str, values: Any) -> None:
    """Summarizes the mean of each leaf of ``values`` as ``prefix/<leaf index>``.

    Args:
      prefix: the names' prefix.
      values: a pytree of arrays.
    """
    for i, leaf in enumerate(jax.tree_util.tree_leaves(values)):
        summary(f"{prefix}/{i}", jnp.mean(leaf))


def tree_step(prefix: str, values: Any) -> None:
    """Summarizes each leaf's mean absolute value as ``prefix/<i>_avg_step_size``.

    Args:
      prefix: the names' prefix.
      values: a pytree of arrays (e.g. the updates).
    """
    for i, leaf in enumerate(jax.tree_util.tree_leaves(values)):
        summary(f"{prefix}/{i}_avg_step_size", jnp.mean(jnp.abs(leaf)))


def _nested_names(tree: Any) -> list[tuple[str, Any]]:
    if not isinstance(tree, Mapping):
        return [("params", tree)]
    out, todo = [], list(tree.items())
    while todo:
        k, v = todo.pop()
        if isinstance(v, Mapping):
            todo.extend((f"{k}/{k2}", v2) for k2, v2 in v.items())
        else:
            out.append((k, v))
    return out


def summarize_inner_params(params: Any) -> None:
    """Summarizes each parameter's mean and mean absolute value (``name/mean``, ...).

    Args:
      params: a nested dict of arrays (names joined with ``/``), or one array.
    """
    for name, value in _nested_names(params):
        summary(f"{name}/mean", jnp.mean(value))
        summary(f"{name}/mean_abs", jnp.mean(jnp.abs(value)))
