"""A small configuration language for building (and describing) tasks and task families.

A :class:`CFGObject` names a registered constructor and its keyword arguments, which may
themselves be ``CFGObject`` s; :func:`object_from_config` builds the object. Host-side
samplers (``sample_image_mlp(key)`` ...) return such configurations, so a sampled task
family can be logged, saved (:func:`serialize_cfg`, JSON) and rebuilt. A
:class:`CFGNamed` carries the *traced* part of a task sample (``family.sample(key)``):
its ``values`` are arrays, so it can be ``vmap``-ed. :class:`LogFeature` marks a value
(a width, a batch size) best seen on a log scale by :func:`featurize`;
:class:`DoNotFeaturize` hides a value from the featurizations it names.

Constructors are found in :data:`CONFIGURABLES` (the notes' library used gin);
register one with ``@cfgobject.configurable``. Code ported from the library that
registers its classes with ``gin.configurable`` also works: when a name is not in
:data:`CONFIGURABLES` and the program has imported gin itself, gin's registry is asked
(learnopt never imports gin).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.registry import Registry, UnknownNameError

__all__ = [
    "CFGNamed",
    "CFGObject",
    "CONFIGURABLES",
    "DoNotFeaturize",
    "LogFeature",
    "configurable",
    "deserialize_cfg",
    "featurize",
    "featurize_many",
    "flatten_cfg",
    "hash_trick",
    "object_from_config",
    "serialize_cfg",
]


@flax.struct.dataclass
class CFGObject:
    """``obj(**kwargs)``: ``obj`` names a constructor in :data:`CONFIGURABLES`.

    Attributes:
      obj: the registered constructor's name (static, not a pytree leaf).
      kwargs: its keyword arguments; values may be ``CFGObject`` s, :class:`LogFeature` s,
        lists, tuples, dicts, numbers, strings or arrays.
    """

    obj: str = flax.struct.field(pytree_node=False)
    kwargs: Mapping[str, Any] = flax.struct.field(default_factory=dict)


@flax.struct.dataclass
class CFGNamed:
    """Named values (a traced task sample); ``name`` is static, ``values`` a pytree.

    Attributes:
      name: what the values belong to (usually the family's class name).
      values: ``{name: value}``; the leaves may be traced arrays.
    """

    name: str = flax.struct.field(pytree_node=False)
    values: Mapping[str, Any] = flax.struct.field(default_factory=dict)


@flax.struct.dataclass
class LogFeature:
    """A positive value that :func:`featurize` should see as ``log(value)``.

    Attributes:
      value: the value (a number or a sequence of numbers).
    """

    value: Any


@flax.struct.dataclass
class DoNotFeaturize:
    """A value that :func:`flatten_cfg` / :func:`featurize` leave out for some uses.

    Attributes:
      value: the value (what :func:`object_from_config` passes on).
      feature_types: the ``feature_type`` s (e.g. ``"a"``) whose features omit it; other
        featurizations see ``value`` (static, not a pytree leaf).
    """

    value: Any
    feature_types: Sequence[str] = flax.struct.field(pytree_node=False, default=())


#: Constructors usable in a :class:`CFGObject` (``obj`` -> callable). The modules that
#: define them register them; ``learnopt.tasks`` imports those modules.
CONFIGURABLES: Registry[Any] = Registry("configurable")


def configurable(fn_or_name: Any = None, *, name: str | None = None) -> Any:
    """Registers a constructor for :func:`object_from_config` (usable as a decorator).

    Args:
      fn_or_name: the constructor (``@configurable``), or its name
        (``@configurable("name")``).
      name: the name, as a keyword (default: the constructor's ``__name__``).

    Returns:
      The constructor (used with a name only, the decorator that registers it).
    """
    return CONFIGURABLES.register(fn_or_name, name=name)


def _unwrap(value: Any) -> Any:
    if isinstance(value, LogFeature | DoNotFeaturize):
        return _unwrap(value.value)
    if isinstance(value, CFGObject):
        return object_from_config(value)
    if isinstance(value, list | tuple):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, Mapping) and not isinstance(value, CFGNamed):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _constructor(name: str) -> Constructor:
    """:data:`CONFIGURABLES`' constructor ``name``, else gin's if the program imported gin."""
    try:
        return CONFIGURABLES.constructor(name)
    except UnknownNameError:
        gin = sys.modules.get("gin")
        if gin is not None:
            try:
                return gin.get_configurable(name)
            except ValueError:  # gin: no configurable of that name
                pass
        raise


def object_from_config(cfg: Any) -> Any:
    """Builds the object a :class:`CFGObject` describes (other values pass through).

    :class:`LogFeature` and :class:`DoNotFeaturize` wrappers are removed. The built
    object gets ``.cfg = cfg`` when it accepts attributes. Names are looked up in
    :data:`CONFIGURABLES`, then (only if the program imported gin) among gin's
    configurables.

    Args:
      cfg: a :class:`CFGObject` (its keyword arguments are built first, recursively), or
        any other value.

    Returns:
      The built object; for other values, the value with nested ``CFGObject`` s built
      and ``LogFeature`` s unwrapped.

    Raises:
      UnknownNameError: a ``CFGObject`` names no registered (or gin) constructor.
    """
    if not isinstance(cfg, CFGObject):
        return _unwrap(cfg)
    obj = _constructor(cfg.obj)(**{k: _unwrap(v) for k, v in cfg.kwargs.items()})
    if not (isinstance(obj, type) or inspect.isroutine(obj)):
        try:
            obj.cfg = cfg
        except AttributeError:
            pass
    return obj


def _to_json(x: Any) -> Any:
    if isinstance(x, CFGObject):
        return {"__cfgobject__": x.obj, "kwargs": _to_json(dict(x.kwargs))}
    if isinstance(x, CFGNamed):
        return {"__cfgnamed__": x.name, "values": _to_json(dict(x.values))}
    if isinstance(x, LogFeature):
        return {"__log__": _to_json(x.value)}
    if isinstance(x, DoNotFeaturize):
        types = [x.feature_types] if isinstance(x.feature_types, str) else x.feature_types
        return {"__do_not_featurize__": _to_json(x.value), "feature_types": list(types)}
    if isinstance(x, Mapping):
        return {str(k): _to_json(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return {"__tuple__": [_to_json(v) for v in x]}
    if isinstance(x, list):
        return [_to_json(v) for v in x]
    if isinstance(x, jax.Array | np.ndarray | np.generic):
        arr = np.asarray(x)
        return {"__array__": arr.tolist(), "dtype": str(arr.dtype)}
    if x is None or isinstance(x, bool | int | float | str):
        return x
    raise TypeError(f"cannot serialize a {type(x).__name__} in a task configuration")


def _from_json(x: Any) -> Any:
    if isinstance(x, list):
        return [_from_json(v) for v in x]
    if not isinstance(x, dict):
        return x
    if "__cfgobject__" in x:
        return CFGObject(x["__cfgobject__"], _from_json(x["kwargs"]))
    if "__cfgnamed__" in x:
        return CFGNamed(x["__cfgnamed__"], _from_json(x["values"]))
    if "__log__" in x:
        return LogFeature(_from_json(x["__log__"]))
    if "__do_not_featurize__" in x:
        return DoNotFeaturize(_from_json(x["__do_not_featurize__"]), tuple(x["feature_types"]))
    if "__tuple__" in x:
        return tuple(_from_json(v) for v in x["__tuple__"])
    if "__array__" in x:
        return np.asarray(x["__array__"], dtype=x["dtype"])
    return {k: _from_json(v) for k, v in x.items()}


def serialize_cfg(cfg: Any) -> str:
    """A JSON string of a configuration (arrays become lists with their dtype).

    Args:
      cfg: a configuration: ``CFGObject``, ``CFGNamed``, ``LogFeature``, dicts, lists,
        tuples, arrays, numbers, strings and None, nested.

    Returns:
      The JSON text (keys sorted); :func:`deserialize_cfg` reads it back.

    Raises:
      TypeError: a value of another type.
    """
    return json.dumps(_to_json(cfg), sort_keys=True)


def deserialize_cfg(text: str | bytes) -> Any:
    """The configuration :func:`serialize_cfg` wrote (arrays come back as numpy).

    Args:
      text: the JSON text.

    Returns:
      The configuration.
    """
    return _from_json(json.loads(text))


def flatten_cfg(cfg: Any, features_for: str | None = None) -> dict[str, Any]:
    """``{"/Obj/key/...": leaf}`` for every leaf of a nested configuration.

    Paths join the names of ``CFGObject`` s (``obj``), ``CFGNamed`` s (``name``) and dict
    keys; anything else (lists, tuples, arrays, ``LogFeature`` s) is a leaf. A
    :class:`DoNotFeaturize` is left out when ``features_for`` is one of its
    ``feature_types``, else its value stands in its place.

    Args:
      cfg: a configuration.
      features_for: the featurization the leaves are for (the library's argument), or
        None.

    Returns:
      ``{path: leaf}``.
    """
    out: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [("", cfg)]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, CFGObject):
            stack.append((f"{prefix}/{node.obj}", node.kwargs))
        elif isinstance(node, CFGNamed):
            stack.append((f"{prefix}/{node.name}", node.values))
        elif isinstance(node, Mapping):
            stack.extend((f"{prefix}/{k}", v) for k, v in node.items())
        elif isinstance(node, DoNotFeaturize):
            if features_for is None or features_for not in node.feature_types:
                stack.append((prefix, node.value))
        else:
            out[prefix] = node
    return out


def hash_trick(text: str) -> int:
    """A stable integer id of a string (md5, modulo ``2**30``).

    Args:
      text: the string.

    Returns:
      An int in ``[0, 2**30)``, the same in every process.
    """
    return int(hashlib.md5(text.encode("utf-8")).hexdigest(), 16) % (2 << 29)


def _pad(x: Any, length: int = 8) -> np.ndarray:
    x = np.asarray(x, np.float64).ravel()
    if len(x) > length:
        raise ValueError(f"a configuration value has {len(x)} entries, more than {length}")
    return np.pad(x, (0, length - len(x)))


def featurize(
    cfg: Any, other_cfg: Any = None, feature_type: str | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Features of a configuration for models that condition on the task.

    Returns ``ids int32 [K, 8]`` (hashed path components), ``floats float32 [K, 8]``
    (numeric values, ``log`` of :class:`LogFeature` s) and ``ints int32 [K]`` (hashed
    strings, integers), one row per leaf of :func:`flatten_cfg`, sorted by path.

    Args:
      cfg: a configuration (at most 8 path components and 8 numbers per leaf).
      other_cfg: a second configuration whose leaves are added (replacing those of
        ``cfg`` at the same path), e.g. a task family's static configuration plus a
        sampled task's; or None.
      feature_type: passed to :func:`flatten_cfg` (``features_for``): leaves out the
        :class:`DoNotFeaturize` values marked for it.

    Returns:
      ``(ids, floats, ints)`` as above.

    Raises:
      ValueError: an empty configuration, or a leaf with more than 8 components or
        numbers.
    """
    flat = flatten_cfg(cfg, feature_type)
    if other_cfg is not None:
        flat.update(flatten_cfg(other_cfg, feature_type))
    rows = []
    for path, value in sorted(flat.items()):
        ids = _pad([hash_trick(p) for p in path.split("/") if p]).astype(np.int64)
        floats, ints = np.zeros(8), 0
        if isinstance(value, LogFeature):
            floats = _pad(np.log(np.asarray(value.value, np.float64)))
        elif isinstance(value, str):
            ints = hash_trick(value)
        elif isinstance(value, bool | int | np.integer) and not isinstance(value, np.ndarray):
            ints = int(value)
        elif isinstance(value, Sequence | float | np.ndarray | jax.Array | np.floating):
            floats = _pad(value)
        rows.append((ids, floats, ints))
    if not rows:
        raise ValueError("cannot featurize an empty configuration")
    ids, floats, ints = zip(*rows, strict=True)
    return (
        jnp.asarray(np.stack(ids) % (2**31), jnp.int32),
        jnp.asarray(np.stack(floats), jnp.float32),
        jnp.asarray(np.asarray(ints) % (2**31), jnp.int32),
    )


def featurize_many(
    cfgs: Sequence[Any], max_length: int | None = None, feature_type: str | None = None
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """:func:`featurize` of several configurations, zero-padded to one length.

    Args:
      cfgs: the configurations.
      max_length: the number of rows ``N`` (default: the most any configuration has).
      feature_type: passed to :func:`featurize`.

    Returns:
      ``(ids int32 [B, N, 8], floats float32 [B, N, 8], ints int32 [B, N], mask
      float32 [B, N])``; ``mask`` is 1 for real rows and 0 for padding.

    Raises:
      ValueError: no configurations, or one with more than ``max_length`` rows.
    """
    if not cfgs:
        raise ValueError("cfgs is empty: nothing to featurize")
    feats = [featurize(c, feature_type=feature_type) for c in cfgs]
    lengths = [len(ids) for ids, _, _ in feats]
    n = max(lengths) if max_length is None else int(max_length)
    if max(lengths) > n:
        raise ValueError(
            f"max_length={n} is smaller than a configuration's {max(lengths)} features"
        )

    def padded(i: int) -> jax.Array:
        return jnp.stack(
            [jnp.pad(f[i], [(0, n - len(f[i]))] + [(0, 0)] * (f[i].ndim - 1)) for f in feats]
        )

    mask = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
    return padded(0), padded(1), padded(2), jnp.asarray(mask, jnp.float32)


Constructor = Callable[..., Any]
