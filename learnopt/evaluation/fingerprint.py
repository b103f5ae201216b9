"""What a cached baseline depends on: the learnopt source it runs and a description of
the code and data of a task or optimizer that is not learnopt's own.

:mod:`~learnopt.evaluation.cache` builds its keys from these: :func:`source_hash` for
learnopt's own code, the private describers (``_code_identity``, ``_fingerprint``,
``_data_identity``) for what a user registered. A describer sees code (bytecode,
source, the module-level values it reads, the values it closes over) and values
(arrays by digest, objects by their attributes, to a fixed depth); memory addresses
are left out, so the same definitions give the same description in every process.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import re
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from learnopt.tasks.datasets.base import SPLITS

__all__ = ["source_hash", "PACKAGE_ROOT", "NOT_IN_BASELINES"]

#: The ``learnopt`` package: its ``.py`` files are part of the cache key.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
#: Parts of the package that training a hand-designed baseline never runs (the layers
#: of docs/design.md: baselines are ``learnopt.optimizers`` on ``learnopt.tasks``, driven
#: by ``learnopt.evaluation``), left out of the key: top-level folders and modules, and
#: the evaluation's modules that only read finished curves (the tables, the figures and
#: the files written from them; a change of theirs leaves every cached curve as it was).
#: ``results.py`` holds the curves' containers too: a field they lose or gain fails the
#: cache's load loudly, it does not change a number.
NOT_IN_BASELINES = (
    "learned_optimizers",
    "research",
    "pretrained",
    "outer_trainers",
    "run",
    "cli",
    "recipes.py",
    "summary.py",
    "testing",
    "evaluation/results.py",
    "evaluation/metrics.py",
    "evaluation/report.py",
    "evaluation/figures.py",
)

#: How deep objects are described when their attributes are part of the key.
_DEPTH = 4


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """A hash of the learnopt source baselines can run (cached curves die with it).

    Returns:
      The SHA-256 hex digest of the relative path and bytes of every ``.py`` file of the
      ``learnopt`` package outside ``NOT_IN_BASELINES`` (a top-level name or a relative
      path), in sorted order.
    """
    return _hash_sources(PACKAGE_ROOT)


def _hash_sources(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_IN_BASELINES or rel.as_posix() in NOT_IN_BASELINES:
            continue
        digest.update(str(rel).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# ------------------------------------------------------------------ describing code


def _digest(data: str | bytes) -> str:
    """A short SHA-256 hex digest of ``data``."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:16]


def _strip_addresses(text: str) -> str:
    """``text`` without memory addresses (``<X object at 0x7f...>``), which change per run."""
    return re.sub(r"0x[0-9a-fA-F]{4,}", "0x?", text)


def _in_source_hash(obj: Any) -> bool:
    """Whether ``obj``'s code is in :func:`source_hash` (a module of learnopt it covers)."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    file = getattr(module, "__file__", None)
    if not file:
        return False
    try:
        rel = Path(file).resolve().relative_to(PACKAGE_ROOT)
    except ValueError:
        return False
    return rel.parts[0] not in NOT_IN_BASELINES


def _named_only(obj: Any) -> bool:
    """Whether ``obj`` is named by the key without a hash: learnopt's or Python's own code."""
    module = getattr(obj, "__module__", None) or ""
    top = module.partition(".")[0]
    return top == "builtins" or top in sys.stdlib_module_names or _in_source_hash(obj)


def _bytecode(code: types.CodeType) -> str:
    """A function's compiled code: instructions, constants (nested code too) and names."""
    consts = [_bytecode(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return f"{code.co_code.hex()}|{_strip_addresses(repr(consts))}|{code.co_names}"


def _repr(obj: Any) -> str:
    """``repr(obj)`` without memory addresses, or its class's name where ``repr`` fails."""
    try:
        return _strip_addresses(repr(obj))
    except Exception:  # a user's __repr__; the class still names it
        return f"<{type(obj).__module__}.{type(obj).__qualname__}>"


def _compiled(obj: Any) -> str:
    """What stands for ``obj``'s source when there is none (defined in a REPL, compiled)."""
    if inspect.isfunction(obj):
        return _bytecode(obj.__code__)
    if isinstance(obj, type):
        parts = []
        for name, attr in sorted(vars(obj).items()):
            fn = getattr(attr, "__func__", attr)  # staticmethod, classmethod
            fn = getattr(fn, "fget", fn)  # property
            if inspect.isfunction(fn):
                parts.append(f"{name}={_bytecode(fn.__code__)}")
            elif not name.startswith("__"):
                parts.append(f"{name}={_repr(attr)}")
        return "\n".join(parts)
    return _repr(obj)


def _functions(obj: Any) -> list[types.FunctionType]:
    """A function itself, or the functions a class defines (methods, properties)."""
    if inspect.isfunction(obj):
        return [obj]
    if not isinstance(obj, type):
        return []
    out = []
    for attr in vars(obj).values():
        fn = getattr(attr, "__func__", attr)  # staticmethod, classmethod
        fn = getattr(fn, "fget", fn)  # property
        if inspect.isfunction(fn):
            out.append(fn)
    return out


def _names_read(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` (and code nested in it) reads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def _globals_read(obj: Any) -> dict[str, Any]:
    """The module-level values the code of a function or class reads, by name."""
    found: dict[str, Any] = {}
    for fn in _functions(obj):
        module_globals = fn.__globals__
        for name in sorted(_names_read(fn.__code__)):
            value = module_globals.get(name, obj)
            if value is not obj:
                found[name] = value
    return found


def _code_identity(obj: Any, depth: int = _DEPTH) -> str:
    """What identifies a class or function in the key.

    learnopt's own code (covered by :func:`source_hash`) and Python's are named only;
    other code (a user's task or optimizer) also by a hash of its source (else of its
    compiled code) and of the module-level values its code reads (constants, helper
    functions, to ``depth`` levels), and a function by the values it closes over and its
    defaults.
    """
    if isinstance(obj, functools.partial):
        parts = [_code_identity(obj.func, depth - 1), obj.args, obj.keywords]
        return "partial " + json.dumps(_fingerprint(parts, depth - 1), sort_keys=True)
    if hasattr(obj, "__wrapped__"):  # functools.wraps, jax.jit
        obj = inspect.unwrap(obj)
    if not (isinstance(obj, type) or inspect.isroutine(obj)):  # a callable object
        return json.dumps(_fingerprint(obj, depth), sort_keys=True)
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    ident = f"{module}.{name or type(obj).__qualname__}"
    if _named_only(obj):
        return ident
    try:
        text = inspect.getsource(obj)
    except Exception:  # no source (a REPL, exec, a C extension) or none inspect can parse
        text = _compiled(obj)
    if depth > 0:  # module-level values its code reads (constants, helpers' code)
        text += json.dumps(_fingerprint(_globals_read(obj), depth - 2), sort_keys=True)
    if inspect.isfunction(obj) and depth > 0:
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # an empty cell
                cells.append(None)
        values = [cells, obj.__defaults__, obj.__kwdefaults__]
        text += json.dumps(_fingerprint(values, depth - 1), sort_keys=True)
    return f"{ident} {_digest(text)}"


def _fingerprint(obj: Any, depth: int = _DEPTH) -> Any:
    """A JSON-able description of ``obj`` that is the same in every process for equal values.

    Numbers and strings are themselves, arrays their dtype, shape and a hash of their
    bytes, containers their items, code :func:`_code_identity`, and other objects their
    class and (to ``depth`` levels) their attributes.
    """
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, bytes | bytearray):
        return f"bytes {_digest(bytes(obj))}"
    if isinstance(obj, jax.ShapeDtypeStruct):
        return f"{obj.dtype}{list(obj.shape)}"
    if isinstance(obj, np.ndarray | np.generic | jax.Array):
        arr = np.asarray(obj)
        if arr.dtype == object:
            return _fingerprint(arr.tolist(), depth)
        return f"array {arr.dtype} {list(arr.shape)} {_digest(np.ascontiguousarray(arr).tobytes())}"
    if inspect.ismodule(obj):
        return f"module {obj.__name__}"
    if isinstance(obj, type | functools.partial) or inspect.isroutine(obj):
        return _code_identity(obj, max(depth, 0))
    if depth < 0:
        return _code_identity(type(obj), 0)
    if isinstance(obj, Mapping):
        items = sorted(obj.items(), key=lambda kv: repr(kv[0]))
        pairs = [[_fingerprint(k, depth - 1), _fingerprint(v, depth - 1)] for k, v in items]
        return {"items": pairs}
    if isinstance(obj, list | tuple):
        return [_fingerprint(v, depth - 1) for v in obj]
    if isinstance(obj, set | frozenset):
        return sorted(json.dumps(_fingerprint(v, depth - 1), sort_keys=True) for v in obj)
    kind = _code_identity(type(obj), depth)
    if dataclasses.is_dataclass(obj):
        attrs = {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
    else:
        attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, Mapping):
        return [kind, _repr(obj)]
    return [kind, {str(k): _fingerprint(v, depth - 1) for k, v in attrs.items()}]


def _data_identity(datasets: Any) -> Any:
    """What identifies the data a task reads: its datasets' facts and each split's stream.

    The datasets' ``extra_info`` (name, batch size, image shape, classes, ...) and
    ``abstract_batch`` (every batch's shapes and dtypes), and for each split its
    iterator's class and public settings (split, batch size, seed); the data behind a
    registered dataset is checked against its checksums when it is read.
    """
    if datasets is None:
        return None
    out = {"type": _code_identity(type(datasets), 1)}
    for attr in ("extra_info", "abstract_batch"):
        if hasattr(datasets, attr):
            out[attr] = _fingerprint(getattr(datasets, attr))
    for split in SPLITS:
        if hasattr(datasets, split):
            out[split] = _iterator_identity(getattr(datasets, split))
    return out


def _iterator_identity(iterator: Any, depth: int = 2) -> Any:
    """A split's iterator: its class and public attributes, and what it wraps, if anything."""
    attrs = getattr(iterator, "__dict__", None)
    if not isinstance(attrs, Mapping):
        return _code_identity(type(iterator), 1)
    public = {k: _fingerprint(v, 2) for k, v in attrs.items() if not k.startswith("_")}
    out: dict[str, Any] = {"type": _code_identity(type(iterator), 1), "attributes": public}
    wrapped = attrs.get("_iterator")  # a plain iterator given ``take`` (Datasets does that)
    if wrapped is not None and depth > 0:
        out["wraps"] = _iterator_identity(wrapped, depth - 1)
    return out


# ---------------------------------------------------------------------------- keys
