"""Flag parsing shared by every ``learnopt`` command: value parsers, ``--help`` layout, and
flags derived from configuration dataclasses (:mod:`learnopt._fields`).

Pure Python (argparse, json, math): building the parser never imports JAX.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Iterable
from typing import Any

from learnopt import _fields

__all__ = [
    "HelpFormatter",
    "PARSERS",
    "int_at_least",
    "positive_float",
    "seed",
    "name_list",
    "float_list",
    "key_value",
    "window",
    "add_flags",
    "dest",
    "given",
]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` with descriptions kept as written and flags in a wider column.

    Args:
      prog: the program name (argparse passes it).
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer ``>= minimum``.

    Args:
      minimum: the smallest value accepted.

    Returns:
      A function ``text -> int`` that raises ``argparse.ArgumentTypeError`` otherwise.
    """

    def parse(text: str) -> int:
        value = _int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = "int" if minimum <= 0 else "positive_int"
    return parse


def positive_float(text: str) -> float:
    """An argparse type: a finite number ``> 0``.

    Args:
      text: the flag's value.

    Returns:
      The number.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def seed(text: str) -> int:
    """An argparse type: an integer in ``[0, 2**32)``.

    Args:
      text: the flag's value.

    Returns:
      The seed.
    """
    value = _int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {value}")
    return value


def name_list(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated names (``Adam,SGDM``).

    Args:
      text: the flag's value.

    Returns:
      The names, blanks dropped.

    Raises:
      argparse.ArgumentTypeError: no name, or a name given twice (it would count twice).
    """
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated names")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} given twice")
    return names


def float_list(text: str) -> tuple[float, ...]:
    """An argparse type: comma-separated positive finite numbers (``1e-3,3e-3``).

    Args:
      text: the flag's value.

    Returns:
      The numbers.
    """
    values = tuple(positive_float(x.strip()) for x in text.split(",") if x.strip())
    if not values:
        raise argparse.ArgumentTypeError("expected comma-separated numbers")
    return values


def _json_value(text: str) -> Any:
    python = {"True": True, "False": False, "None": None}
    if text in python:
        return python[text]
    try:
        return json.loads(text)
    except ValueError:
        return text


def key_value(text: str) -> tuple[str, Any]:
    """An argparse type: ``KEY=VALUE`` with VALUE in JSON (plain words are strings).

    Args:
      text: the flag's value.

    Returns:
      ``(key, value)``; ``step_mult=0.003`` gives ``("step_mult", 0.003)``.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"must look like KEY=VALUE, got {text!r}")
    return key.strip(), _json_value(value.strip())


def window(text: str) -> int | float:
    """An argparse type: a number of steps (an integer >= 1) or a fraction in ``(0, 1]``.

    Args:
      text: the flag's value (``100`` or ``0.1``).

    Returns:
      The int (a count of steps) or the float (a fraction).
    """
    try:
        return int_at_least(1)(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of steps or a fraction in (0, 1], got {text!r}"
        ) from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"must be a number of steps (an integer >= 1) or a fraction in (0, 1], got {text}"
        )
    return value


#: The parsers that :func:`learnopt._fields.setting` names, by name.
PARSERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": _int,
    "positive_int": int_at_least(1),
    "non_negative_int": int_at_least(0),
    "positive_float": positive_float,
    "seed": seed,
    "name_list": name_list,
    "float_list": float_list,
    "key_value": key_value,
    "window": window,
}
assert set(PARSERS) == set(_fields.PARSERS)


_show_default = _fields.show_default


def add_flags(
    parser: argparse.ArgumentParser,
    *config_classes: type,
    order: Iterable[str] = (),
    skip: Iterable[str] = (),
) -> dict[str, argparse._ArgumentGroup]:
    """Adds one flag per field (declared with a flag) of each of ``config_classes``.

    Every flag's argparse default is ``None``, so that a value the user did not give can
    be told from one that equals the default (a resumed run keeps its own settings);
    :func:`given` collects the given ones. ``--help`` shows each field's default.

    Args:
      parser: the (sub)command's parser.
      *config_classes: dataclasses whose fields come from :func:`learnopt._fields.setting`.
      order: ``--help`` sections (the fields' ``group`` names) to list first, in order.
      skip: field names to leave out.

    Returns:
      The argument groups by section name (to add further flags to them).
    """
    made: dict[str, argparse._ArgumentGroup] = {}
    for title in order:
        made[title] = parser.add_argument_group(title)
    skipped = set(skip)
    for config_cls in config_classes:
        for f in _fields.flags_of(config_cls):
            if f.field in skipped:
                continue
            if f.group not in made:
                made[f.group] = parser.add_argument_group(f.group or None)
            made[f.group].add_argument(f.flag, **_argparse_kwargs(config_cls, f))
    return made


def dest(config_cls: type, field: str) -> str:
    """Where the value of ``config_cls``'s ``field`` lands in the parsed namespace.

    Prefixed by the class name, so that two configurations of one command may both have
    a ``steps`` (``RunConfig.steps`` and ``PeriodicEvalConfig.steps`` of ``meta-train``).

    Args:
      config_cls: the configuration dataclass.
      field: one of its fields.

    Returns:
      The argparse ``dest``.
    """
    return f"{config_cls.__name__}.{field}"


def _argparse_kwargs(config_cls: type, f: _fields.Flag) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "dest": dest(config_cls, f.field),
        "help": f.help.replace("{default}", _show_default(f.default)),
        "default": None,
    }
    if f.switch == "negate":
        kwargs["action"] = "store_false"
    elif f.switch:
        kwargs["action"] = "store_true"
    else:
        kwargs["type"] = PARSERS[f.parse or "str"]
        # Without one, argparse would show the dest ("RUNCONFIG.STD").
        kwargs["metavar"] = f.metavar or f.field.upper()
        if f.choices is not None:
            kwargs["choices"] = f.choices
        if f.repeat:
            kwargs["action"] = "append"
    return kwargs


def given(args: argparse.Namespace, config_cls: type) -> dict[str, Any]:
    """The settings of ``config_cls`` that were given on the command line.

    Args:
      args: the parsed namespace.
      config_cls: the dataclass whose flags were added with :func:`add_flags`.

    Returns:
      ``{field: value}`` for every flag that was given (repeated flags as tuples).
    """
    out = {}
    for f in _fields.flags_of(config_cls):
        value = getattr(args, dest(config_cls, f.field), None)
        if value is not None:
            out[f.field] = tuple(value) if f.repeat else value
    return out
