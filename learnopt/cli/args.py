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
    "add_flags",
    "given",
]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` with descriptions kept as written and flags in a wider column."""

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
    """An argparse type: a finite number ``> 0``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def seed(text: str) -> int:
    """An argparse type: an integer in ``[0, 2**32)``."""
    value = _int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {value}")
    return value


def name_list(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated names (``Adam,SGDM``)."""
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated names")
    return names


def float_list(text: str) -> tuple[float, ...]:
    """An argparse type: comma-separated positive finite numbers (``1e-3,3e-3``)."""
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

    Returns:
      ``(key, value)``; ``step_mult=0.003`` gives ``("step_mult", 0.003)``.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"must look like KEY=VALUE, got {text!r}")
    return key.strip(), _json_value(value.strip())


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
}
assert set(PARSERS) == set(_fields.PARSERS)


def _show_default(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple | list):
        return ",".join(_show_default(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def add_flags(
    parser: argparse.ArgumentParser,
    config_cls: type,
    *,
    groups: dict[str, str] | None = None,
    only: Iterable[str] | None = None,
) -> dict[str, argparse._ArgumentGroup]:
    """Adds one flag per field of ``config_cls`` declared with a flag.

    Every flag's argparse default is ``None`` (a switch's ``False``), so that a value the
    user did not give can be told from one that equals the default (a resumed run keeps
    its own settings); :func:`given` collects the given ones.

    Args:
      parser: the (sub)command's parser.
      config_cls: a dataclass whose fields come from :func:`learnopt._fields.setting`.
      groups: ``--help`` section titles by the fields' ``group`` names (in order).
      only: restrict to these field names.

    Returns:
      The argument groups by ``group`` name (to add further flags to them).
    """
    made: dict[str, argparse._ArgumentGroup] = {}
    for name, title in (groups or {}).items():
        made[name] = parser.add_argument_group(title)
    wanted = None if only is None else set(only)
    for f in _fields.flags_of(config_cls):
        if wanted is not None and f.field not in wanted:
            continue
        if f.group not in made:
            made[f.group] = parser.add_argument_group(f.group or None)
        target = made[f.group]
        text = f.help.replace("{default}", _show_default(f.default))
        kwargs: dict[str, Any] = {"dest": f.field, "help": text}
        if f.switch == "negate":
            kwargs.update(action="store_false", default=None)
        elif f.switch:
            kwargs.update(action="store_true", default=None)
        else:
            kwargs.update(default=None, type=PARSERS[f.parse or "str"])
            if f.metavar:
                kwargs["metavar"] = f.metavar
            if f.choices is not None:
                kwargs["choices"] = f.choices
            if f.repeat:
                kwargs["action"] = "append"
        target.add_argument(f.flag, **kwargs)
    return made


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
        value = getattr(args, f.field, None)
        if value is not None:
            out[f.field] = tuple(value) if f.repeat else value
    return out
