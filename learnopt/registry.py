"""One small registry mechanism: name -> constructor, for every kind of thing learnopt ships.

Tasks, task families, optimizers, learned optimizers and gradient estimators each have a
:class:`Registry`. The command line, the benchmarks and the conformance tests read them,
so adding one ``@REGISTRY.register`` line adds an entry everywhere (and to the test sweep)::

    from learnopt.tasks import base as tasks_base

    @tasks_base.TASKS.register
    class MyTask(tasks_base.Task): ...

    tasks_base.TASKS.get("MyTask")       # an instance
    tasks_base.TASKS.names()             # sorted names

An unknown name raises :class:`UnknownNameError` (a ``KeyError``) whose message lists
close matches and every known name.

An entry is registered in the module that defines it, and a package's ``__init__``
imports its modules, so a registry never imports its implementations (which would make
an import cycle): ``learnopt.tasks``, ``learnopt.optimizers`` and
``learnopt.learned_optimizers`` fill theirs that way. The optional ``loader`` is kept
for registries outside learnopt that fill themselves on first use.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["Registry", "UnknownNameError"]

T = TypeVar("T")


class UnknownNameError(KeyError):
    """An unknown registry name; the message lists close matches and the known names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """A name -> constructor mapping with readable errors.

    Args:
      kind: what the entries are, for messages ("task", "learned optimizer", ...).
      loader: called once before the first lookup (learnopt's own registries do not use
        it: their packages import the modules that register the entries).
    """

    def __init__(self, kind: str, loader: Callable[[], None] | None = None):
        self.kind = kind
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
          UnknownNameError: no entry has that name (the message lists close matches).
        """
        self._load()
        if not isinstance(name, str):
            raise TypeError(f"{self.kind} name must be a string, got {type(name).__name__}")
        if name not in self._entries:
            close = difflib.get_close_matches(name, self._entries, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise UnknownNameError(
                f"Unknown {self.kind} {name!r}.{hint} Known: {', '.join(sorted(self._entries))}."
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
