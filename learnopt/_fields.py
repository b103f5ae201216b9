"""Settings of a configuration dataclass, described once for the code and the command line.

A configuration (``learnopt.run.config.RunConfig``, ``learnopt.evaluation.config``) is a
frozen dataclass; each field is declared with :func:`setting`, which records its default
and the text and form of its command-line flag. ``learnopt.cli`` derives the flags from
these fields, so a default is written once and ``--help`` shows it. Pure Python: no JAX,
no numpy, so that the command line's ``--help`` stays instant.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["setting", "Flag", "flags_of", "document_settings", "show_default", "MISSING"]

MISSING = dataclasses.MISSING
#: The value parsers a flag can name (``learnopt.cli.args`` implements them).
PARSERS = (
    "str",
    "int",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "seed",
    "name_list",
    "float_list",
    "key_value",
    "window",
)


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a field appears on the command line.

    Attributes:
      field: the dataclass field name (``trunc_length``).
      flag: the option string (``--trunc-length``); ``None``: no flag.
      help: the help text; ``{default}`` in it is replaced by the default.
      metavar: the value's name in ``--help`` (``K``).
      parse: one of :data:`PARSERS` (``"positive_int"``); ``None`` for a switch.
      choices: the allowed values, or ``None``.
      repeat: whether the flag may be given several times (a list).
      switch: a ``store_true`` flag for a boolean field that defaults to False, or
        ``"negate"``: a ``--no-...`` flag for one that defaults to True.
      default: the field's default (None if it has none, see ``required``).
      group: the ``--help`` section the flag is listed in.
      required: whether the field has no default.
    """

    field: str
    flag: str | None
    help: str
    metavar: str | None = None
    parse: str | None = "str"
    choices: tuple[Any, ...] | None = None
    repeat: bool = False
    switch: str | None = None
    default: Any = None
    group: str = ""
    required: bool = False


def setting(
    default: Any = MISSING,
    help: str = "",
    *,
    flag: str | None = "",
    metavar: str | None = None,
    parse: str | None = "str",
    choices: Iterable[Any] | None = None,
    repeat: bool = False,
    switch: str | None = None,
    group: str = "",
    default_factory: Callable[[], Any] | None = None,
) -> Any:
    """A dataclass field with its command-line flag.

    Args:
      default: the default value (the only place it is written).
      help: what the setting does, for ``--help`` and the API docs; ``{default}`` is
        replaced by the default.
      flag: the option string; ``""`` derives it from the field name (``trunc_length``
        -> ``--trunc-length``); ``None``: the setting has no flag.
      metavar, parse, repeat, switch, group: see :class:`Flag`.
      choices: the allowed values, or ``None``; read each time the flags are made (a
        live view of a registry stays current).
      default_factory: instead of ``default``, for mutable defaults.

    Returns:
      A ``dataclasses.field`` carrying the flag description in its metadata.
    """
    if parse is not None and parse not in PARSERS:
        raise ValueError(f"parse must be one of {PARSERS}, got {parse!r}")
    meta = {
        "flag": flag,
        "help": help,
        "metavar": metavar,
        "parse": None if switch else parse,
        "choices": choices,
        "repeat": repeat,
        "switch": switch,
        "group": group,
    }
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata={"learnopt": meta})
    return dataclasses.field(default=default, metadata={"learnopt": meta})


def flags_of(config_cls: type) -> list[Flag]:
    """The :class:`Flag` of every field of ``config_cls`` declared with :func:`setting`.

    Args:
      config_cls: a dataclass.

    Returns:
      One :class:`Flag` per field that has one, in declaration order.
    """
    out = []
    for f in dataclasses.fields(config_cls):
        meta = f.metadata.get("learnopt")
        if meta is None or meta["flag"] is None:
            continue
        required = False
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default, required = None, True
        flag = meta["flag"] or "--" + f.name.replace("_", "-")
        out.append(
            Flag(
                field=f.name,
                flag=flag,
                help=meta["help"],
                metavar=meta["metavar"],
                parse=meta["parse"],
                choices=None if meta["choices"] is None else tuple(meta["choices"]),
                repeat=meta["repeat"],
                switch=meta["switch"],
                default=default,
                group=meta["group"],
                required=required,
            )
        )
    return out


def show_default(value: Any) -> str:
    """A default as ``--help`` and the API docs show it.

    Args:
      value: the default.

    Returns:
      ``"none"`` for None (and empty sequences), ``"a,b"`` for sequences, ``"0.01"`` for
      floats (``%g``), ``str(value)`` otherwise.
    """
    if value is None:
        return "none"
    if isinstance(value, tuple | list):
        return ",".join(show_default(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def document_settings(config_cls: type) -> type:
    """Appends an ``Attributes:`` section, one entry per :func:`setting`, to the docstring.

    Each entry is the field's flag and its help text (the one home of both), so the API
    reference documents every field without a second copy of the text. Use it above
    ``@dataclasses.dataclass``.

    Args:
      config_cls: a dataclass whose fields are declared with :func:`setting`.

    Returns:
      ``config_cls``, its ``__doc__`` extended.
    """
    flags = {f.field: f for f in flags_of(config_cls)}
    entries = []
    for f in dataclasses.fields(config_cls):
        meta = f.metadata.get("learnopt")
        if meta is None:
            continue
        flag = flags.get(f.name)
        if flag is not None:
            default = flag.default
            shown = flag.flag if flag.metavar is None else f"{flag.flag} {flag.metavar}"
            text = f"``{shown}``: {meta['help']}"
        else:
            default = f.default if f.default is not MISSING else None
            text = f"{meta['help']} (no command-line flag)"
        text = text.replace("{default}", show_default(default))
        entries.append(
            textwrap.fill(
                f"{f.name}: {text}",
                width=88,
                initial_indent="  ",
                subsequent_indent="    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    if entries:
        doc = inspect.cleandoc(config_cls.__doc__ or "")
        config_cls.__doc__ = doc + "\n\nAttributes:\n" + "\n".join(entries) + "\n"
    return config_cls
