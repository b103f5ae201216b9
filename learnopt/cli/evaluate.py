"""``learnopt evaluate``: its flags (derived from ``EvaluateConfig``) and exit codes.

The flags, their defaults and help texts come from the fields of
:class:`learnopt.evaluation.config.EvaluateConfig`; :func:`run` maps the given ones
onto it and calls :func:`learnopt.evaluation.command.evaluate`. Building the parser
imports no JAX (the evaluation is imported when the command runs).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from learnopt.cli import args as cli_args
from learnopt.evaluation.config import EvaluateConfig

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any, formatter_class: Any = None) -> argparse.ArgumentParser:
    """Adds the ``evaluate`` subcommand.

    Args:
      subparsers: the object ``ArgumentParser.add_subparsers`` returned.
      formatter_class: the ``--help`` formatter (default: argparse's).

    Returns:
      The subcommand's parser (also stored as the ``parser`` default of its namespace).
    """
    kwargs = {"formatter_class": formatter_class} if formatter_class else {}
    p = subparsers.add_parser(
        "evaluate",
        description=(
            "Evaluate a learned optimizer (or a hand-designed one) against learning-rate-\n"
            "tuned baselines on a suite of tasks, over several seeds. Writes summary.md,\n"
            "summary.csv, sweep.csv, curves.csv, curves.npz, curves_<task>.png and\n"
            "config.json into --out, rewritten as each task finishes. SIGINT (Ctrl-C) and\n"
            "SIGTERM stop it at once (exit 130/143), never in the middle of those writes,\n"
            "keeping the finished tasks, and say so in one line. The tuned baselines are\n"
            "cached (default: ~/.cache/learnopt/baselines, see --baseline-cache): a rerun\n"
            "with the same settings trains only the candidate. --out, --tensorboard and\n"
            "--baseline-cache are checked before anything trains: a file where a folder is\n"
            "needed, or a place that cannot be written, is an error (exit 2)."
        ),
        epilog=(
            "examples:\n"
            "  learnopt evaluate --theta runs/meta-train-X/theta.msgpack\n"
            "  learnopt evaluate --theta theta.msgpack --lopt LearnableAdam --steps 500\n"
            "  learnopt evaluate --optimizer Adam --lr 3e-3 --suite smoke\n"
            "  learnopt evaluate --theta theta.msgpack --tensorboard runs/tb  # also events\n"
        ),
        **kwargs,
    )
    cli_args.add_flags(p, EvaluateConfig)
    p.set_defaults(parser=p)
    return p


def run(args: argparse.Namespace) -> int:
    """Runs ``learnopt evaluate`` for parsed ``args``.

    Args:
      args: the namespace of a parser built by :func:`add_parser`.

    Returns:
      0 when done; 130 (SIGINT) or 143 (SIGTERM) when a signal stopped it, after one
      line on stderr saying what was kept where. Bad input (a flag's value, an output
      folder that is a file or cannot be written, an ``--out`` that holds a meta-training
      run) exits 2 (argparse's usage error), a run that cannot proceed exits 1, both with
      the reason on stderr (``SystemExit``).
    """
    # Imported here, not at the top: the evaluation imports JAX, and building the
    # parser (``learnopt --help``) must not.
    from learnopt.evaluation import command

    parser = args.parser
    config = EvaluateConfig(**cli_args.given(args, EvaluateConfig))
    try:
        command.evaluate(config)
    except command.EvalError as e:
        if e.usage:
            parser.error(str(e))  # exits 2
        parser.exit(1, f"{parser.prog}: error: {e}\n")
    except command.EvaluationInterrupted as e:
        print(f"\n{parser.prog}: {e.describe()}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0
