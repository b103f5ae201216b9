"""Eager calls of optimizer methods, run as cached jitted programs (docs/design.md, "eager calls").

The notes call ``theta_opt.update(state, meta_grads, loss)`` from Python, between
jitted meta-gradient calls. Run op by op, a small Adam update is a few dozen XLA
dispatches (about a millisecond); the same update jitted is one dispatch (tens of
microseconds). :func:`call` gives every :class:`~learnopt.optimizers.interface.Optimizer`
method called outside ``jit`` the jitted cost, without changing its results:

* the optimizer object is split into *dynamic* leaves (its ``jax.Array``/numpy
  attributes, e.g. ``LearnableAdam``'s ``jnp.exp(theta["log_lr"])``) and a hashable
  *static* description (its class, Python numbers, strings, functions by identity,
  nested optimizers and schedules attribute by attribute);
* the call's arguments are split the same way (arrays are dynamic, Python scalars
  static);
* ``(static optimizer, static arguments)`` keys a cache of ``jax.jit`` programs whose
  body is the ordinary (plain) method, so the program is exactly what the user would
  get by jitting the call themselves: bit-identical results, and one compilation per
  optimizer configuration (optimizers rebuilt each step from new arrays, as
  ``lopt.opt_fn(theta)`` does, share it);
* a configuration is compiled once it has been called :data:`UPDATE_WARMUP` times
  (:data:`INIT_WARMUP` for ``init``) with the same argument shapes and dtypes; before
  that it runs op by op, whose results can differ from the compiled ones in the last
  bits (XLA fuses the compiled program), so a few steps in a test never pay a
  compilation and a long loop runs compiled after its first steps.

The plain path runs instead, with the same results, whenever caching could be wrong
or useless: inside a trace (any argument or attribute is a tracer), when a call passes
a callable (``value_fn=``: it may read Python state that changes between calls), when
an attribute cannot be described (unhashable objects), when tracing the method fails
(Python control flow on values), when a class or instance sets ``eager_jit = False``,
and when a call site keeps producing configurations that are never reused. An
optimizer's ``init``/``update`` must therefore be functions of their arguments and of
the optimizer's attributes, as under ``jit`` (the reference library jits its
``OptaxOptimizer.update`` with ``self`` static on the same assumption).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

__all__ = ["call", "cache_info", "clear_cache", "EagerCacheInfo", "HYPERPARAMS_ATTR"]

#: Classes that set this class attribute to True are described attribute by attribute
#: (their array attributes become dynamic); other objects are keyed by identity.
HYPERPARAMS_ATTR = "_eager_hyperparams"

#: Calls of one ``update`` configuration (and argument shapes/dtypes) that run op by op
#: before its program is compiled: short eager uses (a few steps in a test or a
#: notebook) never pay a compilation, long loops run compiled from the 9th step on.
UPDATE_WARMUP = 8
#: The same for ``init``, usually called once per configuration.
INIT_WARMUP = 1

_MAX_ENTRIES = 64  # compiled programs kept per call site (least recently used dropped)
_MAX_UNUSED = 8  # a site holding this many never-reused programs stops compiling new ones

_SCALARS = (type(None), bool, int, float, complex, str, bytes, np.generic, np.dtype, type)


class _Uncacheable(Exception):
    """The call cannot be keyed safely; it runs on the plain path."""


class _Array:
    def __repr__(self) -> str:
        return "<array>"


_ARRAY = _Array()  # marks a dynamic leaf in a static description


@dataclasses.dataclass
class EagerCacheInfo:
    """Counters of :func:`call` since the last :func:`clear_cache`.

    Attributes:
      hits: calls served by an already compiled program.
      compiles: programs created (one per new key).
      traces: Python traces of those programs (a new key, or new shapes/dtypes).
      plain: calls that ran the plain path (tracers, callables, warm-up, ...).
      failures: keys whose tracing failed and now always run the plain path.
    """

    hits: int = 0  # calls served by an already compiled program
    compiles: int = 0  # programs created (one per new key)
    traces: int = 0  # Python traces of those programs (a new key, or new shapes/dtypes)
    plain: int = 0  # calls that ran the plain path (tracers, callables, warm-up, ...)
    failures: int = 0  # keys whose tracing failed and now always run the plain path


_info = EagerCacheInfo()
_lock = threading.Lock()


@dataclasses.dataclass
class _Entry:
    fn: Callable
    hits: int = 0


class _Site:
    """The compiled programs of one (class, method)."""

    def __init__(self) -> None:
        self.entries: collections.OrderedDict[Any, _Entry] = collections.OrderedDict()
        self.failed: set = set()
        self.seen: collections.OrderedDict[Any, int] = collections.OrderedDict()

    def unused(self) -> int:
        return sum(e.hits == 0 for e in self.entries.values())


_sites: dict[Any, _Site] = {}


def cache_info() -> EagerCacheInfo:
    """A copy of the eager-call counters (for tests and benchmarks).

    Returns:
      An :class:`EagerCacheInfo` with the counts since the last :func:`clear_cache`.
    """
    return dataclasses.replace(_info)


def clear_cache() -> None:
    """Drops every compiled eager program and resets :func:`cache_info`."""
    global _info
    with _lock:
        _sites.clear()
        _info = EagerCacheInfo()


# --- static descriptions ----------------------------------------------------------------
#
# A tree is described by its treedef and one entry per leaf: ``_ARRAY`` for a dynamic
# leaf (appended to ``leaves``), ``(type, value)`` for a Python scalar, a nested object
# description ``("obj", cls, treedef, entries)`` or ``("id", object)``. The common
# leaves (concrete jax arrays, Python numbers) are recognised by their exact type.

_array_type: Any = None  # jax's concrete array class, learnt from the first array seen
_EXACT_SCALARS = frozenset({type(None), bool, int, float, complex, str})


def _leaf_spec(x: Any, leaves: list, objects: bool, depth: int) -> Any:
    global _array_type
    t = type(x)
    if t is _array_type:
        leaves.append(x)
        return _ARRAY
    if t in _EXACT_SCALARS:
        return (t, x)
    if isinstance(x, jax.core.Tracer):
        raise _Uncacheable
    if isinstance(x, jax.Array | np.ndarray):
        if _array_type is None and isinstance(x, jax.Array):
            if not jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):  # not a typed key
                _array_type = t
        leaves.append(x)
        return _ARRAY
    if isinstance(x, _SCALARS):
        return (t, x)
    if not objects:
        raise _Uncacheable  # a callable or object passed to this call
    if getattr(t, HYPERPARAMS_ATTR, False):
        return _object_spec(x, leaves, depth + 1)
    try:
        hash(x)
    except TypeError:
        raise _Uncacheable from None
    return ("id", x)


def _tree_spec(tree: Any, leaves: list, objects: bool, depth: int = 0) -> Any:
    flat, treedef = jax.tree_util.tree_flatten(tree)
    return (treedef, tuple([_leaf_spec(x, leaves, objects, depth) for x in flat]))


def _object_spec(obj: Any, leaves: list, depth: int = 0) -> Any:
    if depth > 16:
        raise _Uncacheable
    try:
        attrs = vars(obj)
    except TypeError:
        raise _Uncacheable from None
    return ("obj", type(obj), _tree_spec(attrs, leaves, True, depth))


def _build_leaf(spec: Any, it: Any) -> Any:
    if spec is _ARRAY:
        return next(it)
    if spec[0] == "obj":
        return _build_object(spec, it)
    return spec[1]  # (type, value) or ("id", object)


def _build_tree(spec: Any, it: Any) -> Any:
    treedef, leaf_specs = spec
    return treedef.unflatten([_build_leaf(s, it) for s in leaf_specs])


def _build_object(spec: Any, it: Any) -> Any:
    _, cls, attrs_spec = spec
    obj = object.__new__(cls)
    obj.__dict__.update(_build_tree(attrs_spec, it))
    return obj


def _signature(leaves: list) -> tuple:
    return tuple((np.shape(x), x.dtype, bool(getattr(x, "weak_type", False))) for x in leaves)


# --- dispatch ---------------------------------------------------------------------------


def _program(plain: Callable, obj_spec: Any, args_spec: Any, name: str) -> Callable:
    def run(obj_leaves, arg_leaves):
        _info.traces += 1
        obj = _build_object(obj_spec, iter(obj_leaves))
        args = _build_tree(args_spec, iter(arg_leaves))
        return plain(obj, *args)

    run.__name__ = run.__qualname__ = name
    return jax.jit(run)


def call(obj: Any, method: str, plain: Callable, args: tuple, *, warmup: int = 0) -> Any:
    """Runs ``plain(obj, *args)``, through a cached jitted program when that is safe.

    Args:
      obj: the optimizer.
      method: the method's name (part of the cache key and of the program's name,
        ``"<Class>_<method>"``, which is what compile logs show).
      plain: the plain implementation, ``(obj, *args) -> result``.
      args: its arguments (arrays become program inputs; Python scalars are static;
        any other object sends the call to the plain path).
      warmup: plain calls with a given key and argument signature before a program
        is compiled for it (``init`` is usually called once per configuration:
        compiling it would cost more than it saves).

    Returns:
      What ``plain(obj, *args)`` returns.
    """
    if not getattr(obj, "eager_jit", True):
        return _plain(plain, obj, args)
    try:
        obj_leaves: list = []
        obj_spec = _object_spec(obj, obj_leaves)
        arg_leaves: list = []
        args_spec = _tree_spec(args, arg_leaves, objects=False)
        key = (obj_spec, args_spec)
        hash(key)
    except (_Uncacheable, TypeError):
        return _plain(plain, obj, args)

    site_key = (type(obj), method, plain)
    with _lock:
        site = _sites.setdefault(site_key, _Site())
        entry = site.entries.get(key)
        if entry is not None:
            entry.hits += 1
            site.entries.move_to_end(key)
            _info.hits += 1
        elif key in site.failed or site.unused() >= _MAX_UNUSED:
            entry = None
        elif warmup and _warming(site, (key, _signature(obj_leaves + arg_leaves)), warmup):
            entry = None
        else:
            name = f"{type(obj).__name__}_{method}"
            entry = site.entries[key] = _Entry(_program(plain, obj_spec, args_spec, name))
            _info.compiles += 1
            while len(site.entries) > _MAX_ENTRIES:
                site.entries.popitem(last=False)
    if entry is None:
        return _plain(plain, obj, args)
    try:
        return entry.fn(obj_leaves, arg_leaves)
    except Exception:
        # Either a genuine error, which the plain path raises again (with its own
        # message), or code that cannot be traced, which the plain path runs.
        out = _plain(plain, obj, args)
        with _lock:
            site.failed.add(key)
            site.entries.pop(key, None)
            _info.failures += 1
        return out


def _warming(site: _Site, signature_key: Any, warmup: int) -> bool:
    count = site.seen.get(signature_key, 0)
    if count >= warmup:
        return False
    site.seen[signature_key] = count + 1
    while len(site.seen) > 4 * _MAX_ENTRIES:
        site.seen.popitem(last=False)
    return True


def _plain(plain: Callable, obj: Any, args: tuple) -> Any:
    _info.plain += 1
    return plain(obj, *args)
