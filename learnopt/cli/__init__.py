"""The ``learnopt`` command line.

``learnopt meta-train`` meta-trains a learned optimizer on a registered task and writes
its results to an output folder; it maps its flags onto :func:`learnopt.train.meta_train`,
which holds the loop, the checkpoints and the resume logic::

    learnopt meta-train                                  # the notes' walkthrough
    learnopt meta-train --trainer pes --trunc-length 10 --steps 500 --out runs/pes
    learnopt meta-train --resume runs/pes                # continue it (after a kill, ...)
    learnopt meta-train --resume runs/pes --steps 2000   # ... or extend it
    learnopt meta-train --lopt MLPLOpt --trainer pes --family meta-train --eval-every 1000
    learnopt evaluate --theta runs/pes/theta.msgpack     # against tuned baselines
    learnopt list                                        # tasks, optimizers, trainers
    learnopt list families                               # one registered name per line

The default run is the notes' tutorial: ``LearnableAdam`` on the embedded 8x8 digits
MLP (``ImageMLP_Digits8_Relu32``, offline stand-in for ``ImageMLP_FashionMnist8_Relu32``),
the exact meta-gradient of the mean training loss over a fresh 4-step inner run
(``full_grad``, ``--total-length 4``), outer optimizer ``opt_base.Adam(1e-2)``, 2000 meta-steps.

Output folder (``--out``): ``config.json``, ``metrics.csv`` (one row per meta-step),
``theta.msgpack`` (theta of the latest checkpoint, then the final one; read it with
:func:`learnopt.checkpoints.load_theta`), ``checkpoints/step_<N>/`` (the whole state, every
``--checkpoint-every`` steps, at the end and on SIGINT/SIGTERM), ``meta_loss.png`` and
``learning_rate.png``. An ``--out`` that holds a run is never replaced unless
``--overwrite`` is given. Exit status: 0 done, 1 the run failed (diverged, stalled, data
missing, disk full), 2 bad input (also an output path, ``--out``, ``--tensorboard``,
``--baseline-cache``, that is a file where a folder is needed or cannot be written:
checked before any work), 130/143 stopped by SIGINT/SIGTERM (``meta-train``:
checkpointed, resume with ``--resume``; ``evaluate``: the finished tasks kept). An
unknown name (task, family, learned optimizer, optimizer, suite, ...) is a one-line error
naming the closest matches and the ``learnopt list`` topic that shows them all. Heavy
imports (JAX, the tasks, matplotlib) happen only when a command runs, so ``learnopt
--help`` is instant.

One run can span several processes and machines (JAX's multi-controller runtime, see
``docs/distributed.md``): start the same command on every host, adding
``--coordinator HOST:PORT --num-processes N --process-id I`` (process 0's host and a free
port; I = 0..N-1), or ``--distributed`` where JAX reads them from the cluster (SLURM,
Open MPI, ...). The population is split over every device of every process; process 0
writes ``--out``. ``--all-devices`` splits it over the GPUs of one process.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from learnopt.cli import evaluate as evaluate_cmd
from learnopt.cli import meta_train as meta_train_cmd
from learnopt.cli.args import HelpFormatter
from learnopt.run.config import LOPTS, TRAINERS

__all__ = ["main", "build_parser", "list_names", "PROG", "TRAINERS", "LOPTS", "LISTINGS"]

PROG = "learnopt"

#: ``learnopt list TOPIC``: what each topic lists (the registries' ``listing`` names).
LISTINGS: dict[str, str] = {
    "tasks": "registered tasks (--task, evaluate --tasks)",
    "families": "registered task families (--family, --task)",
    "lopts": "registered learned optimizers (--lopt)",
    "optimizers": "registered optimizers (evaluate --optimizer, --baselines)",
    "suites": "task suites and their number of tasks (evaluate --suite, --eval-suite)",
    "trainers": "meta-gradient estimators of the command line (--trainer)",
    "estimators": "registered gradient estimator classes",
    "pretrained": "meta-trained thetas that ship with learnopt (learnopt.pretrained)",
    "recipes": "named meta-training recipes and what each is (meta-train --recipe)",
}


class _ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, then where the flags are.

    argparse prints the whole usage block (20-odd lines for ``meta-train``) before the
    error, burying its one line (and its did-you-mean); here the error comes alone.
    """

    def error(self, message: str) -> NoReturn:
        """Exits with status 2 after ``PROG: error: MESSAGE`` and a pointer to ``--help``.

        Args:
          message: argparse's message.
        """
        self.exit(2, f"{self.prog}: error: {message}\nrun '{self.prog} --help' for the flags\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``learnopt`` argument parser (``meta-train``, ``evaluate`` and ``list``).

    Returns:
      The parser; building it imports no JAX.
    """
    from learnopt import __version__

    parser = _ArgumentParser(
        prog=PROG,
        formatter_class=HelpFormatter,
        description="learnopt: learned optimizers and meta-training in JAX.",
        epilog=(
            "examples:\n"
            f"  {PROG} meta-train                      # LearnableAdam on 8x8 digits, 2000 steps\n"
            f"  {PROG} meta-train --trainer pes --trunc-length 10 --steps 500\n"
            f"  {PROG} meta-train --lopt MLPLOpt --outer-lr 1e-3 --out runs/mlp\n"
            f"  {PROG} meta-train --resume runs/mlp    # continue an interrupted run\n"
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(
        title="commands",
        description=(
            "meta-train  meta-train a learned optimizer on a task\n"
            "evaluate    evaluate a learned optimizer against tuned baselines on a suite\n"
            "list        list the registered tasks, learned optimizers, ... (list TOPIC:\n"
            "            one name per line)\n"
            "doctor      what learnopt finds here: versions, devices, the fused kernel,\n"
            "            data and caches"
        ),
        dest="command",
        metavar="COMMAND",
        help=f"run '{PROG} COMMAND --help' for the flags of a command",
        required=True,
    )
    meta_train_cmd.add_parser(sub, HelpFormatter)
    ls = sub.add_parser(
        "list",
        formatter_class=HelpFormatter,
        description=(
            "Without a topic, list the registered tasks, learned optimizers and trainers.\n"
            "With one, print its names one per line:\n"
            + "".join(f"  {k:<11} {text}\n" for k, text in LISTINGS.items())
        ),
    )
    ls.add_argument(
        "topic", nargs="?", choices=tuple(LISTINGS), metavar="TOPIC", help="what to list"
    )
    ls.set_defaults(parser=ls)
    evaluate_cmd.add_parser(sub, HelpFormatter)
    doctor = sub.add_parser(
        "doctor",
        formatter_class=HelpFormatter,
        description=(
            "What learnopt finds on this machine: versions, JAX's backend and devices, the\n"
            "fused CPU kernel (on, or off and why), the data folder and which datasets are\n"
            "prepared or can be, the caches. Prepares no data."
        ),
    )
    doctor.set_defaults(parser=doctor)
    return parser


def list_names(topic: str) -> list[str]:
    """The lines ``learnopt list TOPIC`` prints: one registered name each.

    Suites come with their number of tasks (``heldout  9 tasks``), pretrained entries
    with their source (``Celo  github.com/amoudgl/celo@66d9761 (MIT)``), recipes with
    their one-line description.

    Args:
      topic: a key of :data:`LISTINGS`.

    Returns:
      The lines, sorted by name.
    """
    if topic not in LISTINGS:
        from learnopt.registry import unknown_name_message

        raise ValueError(f"topic: {unknown_name_message('list topic', topic, LISTINGS)}")
    if topic == "trainers":
        return sorted(TRAINERS)
    if topic == "pretrained":
        from learnopt import pretrained

        names = pretrained.names()
        width = max(map(len, names), default=0)
        return [f"{n:<{width}}  {pretrained.source(n)}" for n in names]
    if topic == "recipes":
        from learnopt.run import recipes

        names = recipes.recipe_names()
        width = max(map(len, names), default=0)
        return [f"{n:<{width}}  {recipes.get_recipe(n).description}" for n in names]
    if topic == "suites":
        from learnopt.evaluation import suites

        names = suites.suite_names()
        width = max(map(len, names), default=0)
        counts = {name: len(suites.get_suite(name)) for name in names}
        return [f"{n:<{width}}  {k} task{'s' * (k != 1)}" for n, k in counts.items()]
    # JAX and the registries' modules: imported only to list them.
    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.optimizers import base as opt_base
    from learnopt.outer_trainers import gradient_estimator
    from learnopt.tasks import base as tasks_base

    registry = {
        "tasks": tasks_base.TASKS,
        "families": tasks_base.TASK_FAMILIES,
        "lopts": lopt_base.LOPTS,
        "optimizers": opt_base.OPTIMIZERS,
        "estimators": gradient_estimator.ESTIMATORS,
    }[topic]
    return registry.names()


def _list(topic: str | None = None, out: Any = None) -> None:
    out = out or sys.stdout
    if topic is not None:
        for line in list_names(topic):
            print(line, file=out)
        return
    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.tasks import base as tasks_base

    print("tasks:", file=out)
    for name in tasks_base.registered_tasks():
        print(f"  {name}", file=out)
    print("learned optimizers:", file=out)
    for name in lopt_base.registered_learned_optimizers():
        print(f"  {name}", file=out)
    print("trainers:", file=out)
    for name, (cls, text) in TRAINERS.items():
        print(f"  {name:<10} {cls}: {text}", file=out)
    print(f"more: {PROG} list {{{','.join(LISTINGS)}}} (one name per line)", file=out)


def _unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> NoReturn:
    """The command's own usage error for unknown arguments, with a did-you-mean."""
    import difflib

    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    first = next((x for x in extra if x.startswith("-")), extra[0]).split("=")[0]
    close = difflib.get_close_matches(first, flags, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    parser.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``learnopt`` console script and ``python -m learnopt``.

    Args:
      argv: the arguments (default: ``sys.argv[1:]``, and then this is the program: see
        below).

    Returns:
      0 on success. Bad input exits with status 2 and a message naming what is wrong
      (``SystemExit``, as argparse does); a run that cannot proceed or that fails
      (missing data, a full disk, divergence, a folder another run is writing) returns 1
      with the reason on stderr; SIGINT/SIGTERM return 130/143 after writing a checkpoint
      (``meta-train``) or keeping the finished tasks (``evaluate``), with one line saying
      so. As the program (no ``argv``), a run stopped by a signal then ends the process at
      once, after flushing its output (``os._exit``): a JAX compilation or computation the
      signal left running on XLA's threads must not meet the interpreter's shutdown,
      which frees the XLA client under it (a segfault).
    """
    code = _main(argv)
    if argv is None and code in (130, 143):
        _end_process(code)
    return code


def _end_process(code: int) -> NoReturn:
    """Flushes stdout and stderr, then ends the process with ``code`` without shutting the
    interpreter down (nothing is left to write: every file was closed by then)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    """What :func:`main` runs: parse, then the command."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unrecognized(args.parser, extra)
    if args.command == "list":
        try:
            _list(args.topic)
            sys.stdout.flush()
        except BrokenPipeError:  # `learnopt list tasks | head`: the reader had enough
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error when Python exits
        return 0
    if args.command == "evaluate":
        return evaluate_cmd.run(args)
    if args.command == "doctor":
        from learnopt.cli import doctor  # JAX: only for this command

        return doctor.run()
    return meta_train_cmd.run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
