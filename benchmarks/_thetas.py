"""``--theta LABEL=PATH`` for the benchmark scripts that compare learned optimizers."""

from __future__ import annotations

import argparse
from typing import Any

from learnopt.evaluation.candidates import load_learned_candidate


def add_theta_argument(parser: argparse.ArgumentParser) -> None:
    """Adds the repeatable, required ``--theta LABEL=PATH`` option to ``parser``."""
    parser.add_argument(
        "--theta",
        action="append",
        required=True,
        metavar="LABEL=PATH",
        help="a theta file or shipped entry's name, labelled; the first is the reference",
    )


def labelled_thetas(
    parser: argparse.ArgumentParser, items: list[str]
) -> list[tuple[str, Any, Any]]:
    """``(label, lopt, theta)`` for each ``--theta`` value; a malformed one is a parser error.

    Args:
      parser: the script's parser (its ``error`` reports a malformed value).
      items: the ``--theta`` values.

    Returns:
      The labelled learned optimizers and thetas, in the order given.
    """
    out = []
    for item in items:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            parser.error(f"--theta {item!r}: expected LABEL=PATH")
        out.append((label, *load_learned_candidate(path)))
    return out
