"""One small registry mechanism: name -> constructor, for every kind of thing learnopt ships.

Tasks, task families, optimizers, learned optimizers and gradient estimators each have a
:class:`Registry`. The command line, the benchmarks and the conformance tests read them,
so adding one ``@REGISTRY.register`` line adds an entry everywhere (and to the test sweep)::

    from learnopt.tasks import base as tasks_base

    @tasks_base.TASKS.register
    class MyTask(tasks_base.Task): ...

    tasks_base.TASKS.get("MyTask")       # an instance
    tasks_base.TASKS.names()             # sorted names

An unknown name raises :class:`UnknownNameError` (a ``KeyError``) with a one-line message
that names the closest matches and how to list them all (:func:`unknown_name_message`)::

    Unknown task 'ImageMLP_Digits8_Relu3'; did you mean 'ImageMLP_Digits8_Relu32'?
    ('learnopt list tasks' shows all 68)

An entry is registered in the module that defines it, and a package's ``__init__``
imports its modules, so a registry never imports its implementations (which would make
an import cycle): ``learnopt.tasks``, ``learnopt.optimizers`` and
``learnopt.learned_optimizers`` fill theirs that way. The optional ``loader`` is kept
for registries outside learnopt that fill themselves on first use.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["Registry", "UnknownNameError", "close_matches", "unknown_name_message"]

T = TypeVar("T")


class UnknownNameError(KeyError):
    """An unknown registry name; the message names close matches and how to list them all."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def close_matches(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The known names closest to ``name``, best first.

    Same name but for case first, then names that start ``name`` or that ``name`` starts
    (ignoring case; ``"Adam_v2"`` finds ``"Adam"``), then
    :func:`difflib.get_close_matches`, then the same ignoring case, then (if still none)
    the shortest names that contain ``name`` ignoring case (``"digits8"`` finds the
    ``*Digits8*`` tasks).

    Args:
      name: the unknown name.
      known: the known names.
      n: at most this many matches.

    Returns:
      Up to ``n`` known names.
    """
    known = sorted(set(known))
    by_lower: dict[str, list[str]] = {}
    for k in known:
        by_lower.setdefault(k.lower(), []).append(k)
    lower = name.lower()
    found: list[str] = list(by_lower.get(lower, []))
    if len(lower) >= 3:  # one name starts the other: a name cut short or with a suffix
        prefixed = [k for k in known if min(len(k), len(name)) >= 3]
        prefixed = [
            k for k in prefixed if k.lower().startswith(lower) or lower.startswith(k.lower())
        ]
        found += sorted(prefixed, key=lambda k: (abs(len(k) - len(name)), k))
    found += difflib.get_close_matches(name, known, n=n)
    for match in difflib.get_close_matches(lower, by_lower, n=n):
        found += by_lower[match]
    if not found and lower:
        found = sorted((k for k in known if lower in k.lower()), key=lambda k: (len(k), k))
    return list(dict.fromkeys(found))[:n]


def _either(names: list[str]) -> str:
    quoted = [repr(x) for x in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def unknown_name_message(
    kind: str,
    name: object,
    known: Iterable[str],
    listing: str | None = None,
    *,
    lister: str | None = None,
) -> str:
    """The one-line message for an unknown name: close matches and where the rest are.

    ``Unknown task 'X'; did you mean 'A', 'B' or 'C'? ('learnopt list tasks' shows all
    68)``. A few known names (100 characters in all) are listed instead; many, without a
    ``listing``, are counted.

    Args:
      kind: what the names are ("task", "learned optimizer", ...).
      name: the unknown name (shortened in the message when long).
      known: the known names.
      listing: the ``learnopt list`` topic that prints them all (``"tasks"``), if any.
      lister: else, what prints them all, in words (``"optax_names()"``), if anything.

    Returns:
      The message, one line.
    """
    known = sorted(set(known))
    text = str(name)
    shown = repr(text if len(text) <= 60 else text[:57] + "...")
    close = close_matches(text, known)
    hint = f"; did you mean {_either(close)}?" if close else ""
    if len(", ".join(known)) <= 100:
        where = f"known: {', '.join(known) or 'none'}"
    elif listing or lister:
        where = f"{lister or repr(f'learnopt list {listing}')} shows all {len(known)}"
    else:
        where = f"{len(known)} known"
    return f"Unknown {kind} {shown}{hint} ({where})"


class Registry(Generic[T]):
    """A name -> constructor mapping with readable errors.

    Args:
      kind: what the entries are, for messages ("task", "learned optimizer", ...).
      loader: called once before the first lookup (learnopt's own registries do not use
        it: their packages import the modules that register the entries).
      listing: the ``learnopt list`` topic that prints the names (``"tasks"``), named by
        the message of an unknown name; None for a registry the command does not list.
    """

    def __init__(
        self,
        kind: str,
        loader: Callable[[], None] | None = None,
        *,
        listing: str | None = None,
    ):
        self.kind = kind
        self.listing = listing
        self._entries: dict[str, Callable[..., T]] = {}
        self._loader = loader
        self._loaded = loader is None

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            assert self._loader is not None
            self._loader()

    def register(self, fn_or_name: Any = None, *, name: str | None = None) -> Any:
        """Registers a constructor under ``name`` (default: its ``__name__``).

        Usable as ``@reg.register``, ``@reg.register("name")``,
        ``@reg.register(name="name")`` or ``reg.register(fn, name="name")``.
        Re-registering a name replaces the entry (so reloading a module is harmless).

        Args:
          fn_or_name: the constructor, or (as ``@reg.register("name")``) its name.
          name: the name, as a keyword (default: the constructor's ``__name__``).

        Returns:
          The constructor, unchanged; used with a name only, a decorator that registers.
        """

        def add(fn: Callable[..., T]) -> Callable[..., T]:
            if not callable(fn):
                raise TypeError(f"can only register callables, got {type(fn).__name__}")
            key = name or getattr(fn, "__name__", None)
            if not key:
                raise ValueError(f"cannot infer a {self.kind} name for {fn!r}; pass name=")
            self._entries[key] = fn
            return fn

        if isinstance(fn_or_name, str):
            name = fn_or_name
            return add
        if fn_or_name is None:
            return add
        return add(fn_or_name)

    def names(self) -> list[str]:
        """The registered names, sorted.

        Returns:
          A new list of the names.
        """
        self._load()
        return sorted(self._entries)

    def constructor(self, name: str) -> Callable[..., T]:
        """The constructor registered under ``name``.

        Args:
          name: a registered name.

        Returns:
          The callable registered under ``name``.

        Raises:
          UnknownNameError: no entry has that name (the message names close matches).
        """
        self._load()
        if not isinstance(name, str):
            raise TypeError(f"{self.kind} name must be a string, got {type(name).__name__}")
        if name not in self._entries:
            raise UnknownNameError(
                unknown_name_message(self.kind, name, self._entries, listing=self.listing)
            )
        return self._entries[name]

    def get(self, name: str, **kwargs: Any) -> T:
        """Builds the entry ``name`` with ``kwargs``.

        Args:
          name: a registered name.
          **kwargs: arguments for its constructor.

        Returns:
          What the constructor returns.
        """
        return self.constructor(name)(**kwargs)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} entries)"
