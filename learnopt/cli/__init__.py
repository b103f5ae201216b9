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
missing, disk full), 2 bad input, 130/143 stopped by SIGINT/SIGTERM (checkpointed; resume
with ``--resume``). Heavy imports (JAX, the tasks, matplotlib) happen only when a command
runs, so ``learnopt --help`` is instant.

One run can span several processes and machines (JAX's multi-controller runtime, see
``docs/distributed.md``): start the same command on every host, adding
``--coordinator HOST:PORT --num-processes N --process-id I`` (process 0's host and a free
port; I = 0..N-1), or ``--distributed`` where JAX reads them from the cluster (SLURM,
Open MPI, ...). The population is split over every device of every process; process 0
writes ``--out``. ``--all-devices`` splits it over the GPUs of one process.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser", "TRAINERS", "LOPTS"]

PROG = "learnopt"
DEFAULT_TASK = "ImageMLP_Digits8_Relu32"
DEFAULT_LOPT = "LearnableAdam"
#: Names accepted by ``--lopt`` (the learned optimizer registry also accepts these).
LOPTS = ("LearnableSGD", "LearnableSGDM", "LearnableAdam", "MLPLOpt")
TRAINERS = {
    "full_grad": "FullGrad: backprop through a whole fresh inner run of T steps (exact)",
    "tbptt": "TruncatedGrad: backprop through K-step truncations of T-step runs (biased)",
    "full_es": "FullES: antithetic ES over a whole fresh inner run of T steps",
    "tes": "TruncatedES: antithetic ES over K-step truncations of T-step runs (biased)",
    "pes": "TruncatedPES: persistent ES over K-step truncations of T-step runs (unbiased)",
    "nres": "NoiseReuseES: noise-reuse ES over K-step truncations of T-step runs (unbiased)",
}
#: Defaults of --trunc-length and --total-length (as ``outer_trainers.registry``).
DEFAULT_TRUNC_LENGTH = 4
DEFAULT_TOTAL_LENGTH = {"full": 4, "truncated": 200}
#: meta_train's argument names as the flags that set them (for error messages).
FLAGS = {
    "out_dir": "--out",
    "coordinator_address": "--coordinator",
    "num_processes": "--num-processes",
    "process_id": "--process-id",
    "init_timeout": "--init-timeout",
    "peer_timeout": "--peer-timeout",
    "trunc_length": "--trunc-length",
    "total_length": "--total-length",
    "num_tasks": "--num-tasks",
    "outer_lr": "--outer-lr",
    "max_grad_norm": "--max-grad-norm",
    "data_dir": "--data-dir",
    "log_every": "--log-every",
    "checkpoint_every": "--checkpoint-every",
    "keep_checkpoints": "--keep-checkpoints",
    "health_window": "--health-window",
    "steps": "--steps",
    "seed": "--seed",
    "std": "--std",
    "task": "--task",
    "lopt": "--lopt",
    "trainer": "--trainer",
    "families": "--family",
    "lopt_config": "--lopt-arg",
}


# ------------------------------------------------------------------------------ parser


def _int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        value = _int_any(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _int_any(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _seed(text: str) -> int:
    value = _int_any(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), got {value}")
    return value


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    """The ``learnopt`` argument parser (``meta-train``, ``evaluate`` and ``list``)."""
    from learnopt import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=_HelpFormatter,
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
            "list        list the registered tasks, learned optimizers and trainers"
        ),
        dest="command",
        metavar="COMMAND",
        help=f"run '{PROG} COMMAND --help' for the flags of a command",
        required=True,
    )
    mt = sub.add_parser(
        "meta-train",
        formatter_class=_HelpFormatter,
        description=(
            "Meta-train a learned optimizer on a task and write metrics.csv (one row per\n"
            "meta-step: step, meta_loss, learning_rate, grad_norm, num_nonfinite, finite,\n"
            "skipped, update_norm, theta/...), theta.msgpack (load with\n"
            "learnopt.checkpoints.load_theta), checkpoints/step_<N>/ (the whole state),\n"
            "meta_loss.png, learning_rate.png and config.json into --out.\n"
            "\n"
            "The defaults reproduce the notes' walkthrough: LearnableAdam on the embedded\n"
            f"8x8 digits MLP ({DEFAULT_TASK}), meta-loss = mean training loss over a fresh\n"
            "4-step inner run, exact meta-gradient (full_grad), outer Adam(1e-2), 2000 steps.\n"
            "\n"
            "Checkpoints hold theta, the outer optimizer's and every estimator's state, the\n"
            "data positions and the step; --resume DIR continues a run from its latest one\n"
            "(bit-identical to an uninterrupted run). SIGINT/SIGTERM checkpoint and stop.\n"
            "A step is applied only if theta stays finite; a run that diverges or stalls\n"
            "exits with status 1."
        ),
        epilog="trainers:\n" + "".join(f"  {k:<10} {v}\n" for k, v in TRAINERS.items()),
    )
    g = mt.add_argument_group("what to meta-train")
    g.add_argument(
        "--task",
        default=None,
        metavar="NAME",
        help=f"registered task (default: {DEFAULT_TASK}; '{PROG} list' shows all)",
    )
    g.add_argument(
        "--lopt",
        default=None,
        metavar="NAME",
        help=f"learned optimizer: {', '.join(LOPTS)}, ... ('{PROG} list' shows all; default: "
        f"{DEFAULT_LOPT}); built with its meta-training defaults (learnopt.recipes), which "
        "also set --outer-lr, --max-grad-norm, --trunc-length, --total-length, --num-tasks "
        "and --std where not given",
    )
    g.add_argument(
        "--family",
        action="append",
        default=None,
        metavar="NAME",
        help="meta-train on this task family instead of --task; repeat it for several (one "
        "gradient estimator each, their estimates averaged every meta-step); 'meta-train' "
        "stands for its four MetaTrain_* buckets",
    )
    g.add_argument(
        "--lopt-arg",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a constructor argument of --lopt, VALUE in JSON (step_mult=0.003, "
        "exp_mult=[0.1,0.1,0.1]; plain words are strings); repeatable",
    )
    g = mt.add_argument_group("meta-gradient estimator")
    g.add_argument(
        "--trainer",
        choices=tuple(TRAINERS),
        default=None,
        help="gradient estimator (default: full_grad; see 'trainers' below)",
    )
    g.add_argument(
        "--trunc-length",
        type=_positive_int,
        default=None,
        metavar="K",
        help="inner steps per meta-gradient estimate (a truncation) of the truncated "
        "trainers tbptt/tes/pes/nres; must be <= T; full_grad/full_es unroll whole runs "
        f"and take --total-length instead (default: {DEFAULT_TRUNC_LENGTH})",
    )
    g.add_argument(
        "--total-length",
        type=_positive_int,
        default=None,
        metavar="T",
        help="length of each inner training run: the whole horizon of full_grad/full_es "
        f"(default: {DEFAULT_TOTAL_LENGTH['full']}); for tbptt/tes/pes/nres the runs start "
        f"staggered in [0, T) and restart when they reach T (default: "
        f"{DEFAULT_TOTAL_LENGTH['truncated']})",
    )
    g.add_argument("--unroll", action=_RenamedUnroll, help=argparse.SUPPRESS)
    g.add_argument(
        "--num-tasks",
        type=_positive_int,
        default=None,
        metavar="N",
        help="inner runs per meta-step (ES: antithetic pairs) (default: 1 for full_grad, "
        "8 for the others)",
    )
    g.add_argument(
        "--std",
        type=_positive_float,
        default=None,
        help="ES perturbation standard deviation (full_es/tes/pes/nres) (default: 0.01)",
    )
    g = mt.add_argument_group("outer optimizer")
    g.add_argument(
        "--steps",
        type=_positive_int,
        default=None,
        metavar="N",
        help="number of meta-steps, >= 1; with --resume, the new total (default: 2000)",
    )
    g.add_argument(
        "--outer-lr",
        type=_positive_float,
        default=None,
        metavar="LR",
        help="learning rate of the outer Adam on theta (default: 1e-2)",
    )
    g.add_argument(
        "--max-grad-norm",
        type=_positive_float,
        default=None,
        metavar="C",
        help="clip the meta-gradient to this global norm (default: no clipping)",
    )
    g.add_argument("--seed", type=_seed, default=None, metavar="N", help="random seed (default: 0)")
    g = mt.add_argument_group("periodic held-out evaluation (eval.csv, eval.png)")
    g.add_argument(
        "--eval-every",
        type=_positive_int,
        default=None,
        metavar="N",
        help="every N meta-steps train a few held-out tasks with the current theta and "
        "compare the final training loss with Adam tuned over 7 learning rates (default: off)",
    )
    g.add_argument(
        "--eval-tasks",
        default=None,
        metavar="A,B",
        help="registered tasks of the periodic evaluation (default: an MLP, an auto-encoder, "
        "an LSTM and a Transformer LM of the held-out suite)",
    )
    g.add_argument(
        "--eval-suite",
        default=None,
        metavar="NAME",
        help="a task suite for the periodic evaluation instead of --eval-tasks",
    )
    g.add_argument(
        "--eval-steps",
        type=_positive_int,
        default=300,
        metavar="T",
        help="inner steps per evaluation run (default: 300)",
    )
    g.add_argument(
        "--eval-seeds",
        type=_positive_int,
        default=1,
        metavar="S",
        help="runs per task and evaluation (default: 1)",
    )
    g = mt.add_argument_group("output, checkpoints and resume")
    g.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder, created if needed; refused if it holds a run, unless "
        "--resume or --overwrite (default: runs/meta-train-<timestamp>)",
    )
    g.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue the run in DIR from its latest checkpoint, with its settings "
        "(--steps may extend it)",
    )
    g.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in --out (its files and checkpoints)",
    )
    g.add_argument(
        "--checkpoint-every",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="checkpoint the whole state every N steps; 0: only at the end and on "
        "SIGINT/SIGTERM (default: 500)",
    )
    g.add_argument(
        "--keep-checkpoints",
        type=_positive_int,
        default=None,
        metavar="K",
        help="keep the last K checkpoints (default: 3)",
    )
    g.add_argument(
        "--health-window",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="stop (exit 1) when theta has not changed for N steps; warn when most of the "
        "last N steps were skipped as non-finite; 0: off (default: 500)",
    )
    g.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="TFDS data dir for prepared datasets (default: $LEARNOPT_DATA_DIR, else "
        "~/tensorflow_datasets)",
    )
    g.add_argument(
        "--log-every",
        type=_positive_int,
        default=None,
        metavar="N",
        help="fetch metrics from the device, update the progress bar and append to "
        "metrics.csv every N steps (default: 50)",
    )
    g.add_argument(
        "--no-plots", action="store_true", help="do not write meta_loss.png/learning_rate.png"
    )
    g.add_argument("--quiet", action="store_true", help="no progress bar, only the summary")
    g = mt.add_argument_group("devices, processes and machines (docs/distributed.md)")
    g.add_argument(
        "--all-devices",
        action="store_true",
        help="split the population over every device of this process (e.g. the GPUs of "
        "one host); automatic in a multi-process run. --num-tasks must be a multiple of "
        "the number of devices",
    )
    g.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="join a multi-process run whose process 0 listens at HOST:PORT (the same on "
        "every process); with --num-processes and --process-id",
    )
    g.add_argument(
        "--num-processes",
        type=_positive_int,
        default=None,
        metavar="N",
        help="the number of processes of the run",
    )
    g.add_argument(
        "--process-id",
        type=_non_negative_int,
        default=None,
        metavar="I",
        help="this process's index in [0, N); process 0 writes --out, the others never touch it",
    )
    g.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process run described by the cluster's environment (SLURM, "
        "Open MPI, ...: JAX detects it) instead of the three flags above",
    )
    g.add_argument(
        "--init-timeout",
        type=_positive_int,
        default=None,
        metavar="S",
        help="seconds to wait for every process to join, then exit 1 (default: 300)",
    )
    g.add_argument(
        "--peer-timeout",
        type=_positive_int,
        default=None,
        metavar="S",
        help="a process silent for S seconds is declared dead: the others stop with a "
        "non-zero exit status; restart the job with --resume (default: 100)",
    )

    mt.set_defaults(parser=mt)
    ls = sub.add_parser(
        "list",
        description="List the registered tasks, learned optimizers and trainers.",
    )
    ls.set_defaults(parser=ls)
    from learnopt.cli import evaluate as evaluate_cmd

    evaluate_cmd.add_parser(sub, _HelpFormatter)
    return parser


class _RenamedUnroll(argparse.Action):
    """The old ``--unroll`` flag: an error that says which flag replaced it."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=1, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(
            "--unroll was renamed: use --trunc-length K for the inner steps per estimate "
            "of tbptt/tes/pes/nres, or --total-length T for the length of a whole inner "
            "run (the horizon of full_grad/full_es)"
        )


# -------------------------------------------------------------------------- meta-train


def _default_out_dir() -> Path:
    base = Path("runs") / time.strftime("meta-train-%Y%m%d-%H%M%S")
    out, i = base, 1
    while out.exists():
        out = base.with_name(f"{base.name}-{i}")
        i += 1
    return out


def _as_flags(message: str) -> str:
    """An API error message in the command line's words (argument names as flags)."""
    message = message.replace("resume=True (--resume)", "--resume DIR")
    message = message.replace("overwrite=True (--overwrite)", "--overwrite")
    message = re.sub(r"\blearner= ", "", message)
    message = re.sub(r"^resume(?=[: ])", "--resume", message)
    for name, flag in FLAGS.items():
        message = re.sub(rf"(?<![\w/.'-]){name}(?=[=:]| must | \(| differs)", flag, message)
    return message


def _meta_train_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``args`` as :func:`learnopt.train.meta_train` keyword arguments."""
    if args.resume is not None:
        if args.overwrite:
            raise ValueError("--resume and --overwrite exclude each other")
        if args.out is not None and Path(args.out).absolute() != Path(args.resume).absolute():
            raise ValueError(
                f"--out ({args.out}) and --resume ({args.resume}) differ: --resume DIR "
                "continues the run in DIR"
            )
        out = args.resume
    else:
        out = args.out if args.out is not None else _default_out_dir()
    if args.task is not None and args.family:
        raise ValueError("--task and --family exclude each other: meta-train on one or the other")
    return dict(
        task=args.task,
        families=args.family,
        lopt=args.lopt,
        lopt_config=_lopt_config(args.lopt_arg),
        trainer=args.trainer,
        trunc_length=args.trunc_length,
        total_length=args.total_length,
        num_tasks=args.num_tasks,
        std=args.std,
        outer_lr=args.outer_lr,
        max_grad_norm=args.max_grad_norm,
        seed=args.seed,
        steps=args.steps,
        out_dir=out,
        resume=args.resume is not None,
        overwrite=args.overwrite,
        data_dir=args.data_dir,
        log_every=args.log_every,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        health_window=args.health_window,
        plots=not args.no_plots,
        progress=not args.quiet,
        mesh="all" if args.all_devices else None,
        callbacks=_eval_callbacks(args),
    )


def _json_value(text: str) -> Any:
    """A ``--lopt-arg`` value: JSON, Python's True/False/None, else the text itself."""
    import json

    python = {"True": True, "False": False, "None": None}
    if text in python:
        return python[text]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _lopt_config(items: Sequence[str] | None) -> dict[str, Any] | None:
    """``--lopt-arg KEY=VALUE`` flags as a dict (None when there are none)."""
    if not items:
        return None
    config: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"--lopt-arg must look like KEY=VALUE, got {item!r}")
        config[key.strip()] = _json_value(value.strip())
    return config


def _eval_callbacks(args: argparse.Namespace) -> list[Any]:
    """The periodic evaluation of ``--eval-every`` (none without it)."""
    if args.eval_every is None:
        if args.eval_tasks or args.eval_suite:
            raise ValueError("--eval-tasks/--eval-suite need --eval-every N")
        return []
    from learnopt import recipes

    if args.eval_tasks and args.eval_suite:
        raise ValueError("give --eval-tasks or --eval-suite, not both")
    if args.eval_suite:
        from learnopt import eval as lopt_eval

        try:
            tasks = [
                t if isinstance(t, str) else t.name for t in lopt_eval.get_suite(args.eval_suite)
            ]
        except KeyError as e:
            raise ValueError(f"--eval-suite: {e}") from None
    elif args.eval_tasks:
        tasks = [t.strip() for t in args.eval_tasks.split(",") if t.strip()]
        from learnopt.tasks import base as tasks_base

        for name in tasks:
            try:
                tasks_base.TASKS.constructor(name)
            except KeyError as e:
                raise ValueError(f"--eval-tasks: {e}") from None
    else:
        tasks = list(recipes.EVAL_TASKS)
    return [
        recipes.PeriodicEval(
            args.eval_every,
            tasks,
            steps=args.eval_steps,
            seeds=args.eval_seeds,
            progress=not args.quiet,
        )
    ]


def _join_processes(args: argparse.Namespace) -> None:
    """Joins a multi-process run if the flags ask for one (before any JAX computation)."""
    given = [args.coordinator, args.num_processes, args.process_id]
    timeouts = {"init_timeout": args.init_timeout, "peer_timeout": args.peer_timeout}
    if args.distributed and any(v is not None for v in given):
        raise ValueError(
            "--distributed takes the processes from the cluster's environment: drop "
            "--coordinator/--num-processes/--process-id, or drop --distributed"
        )
    if not args.distributed and all(v is None for v in given):
        if any(v is not None for v in timeouts.values()):
            raise ValueError(
                "--init-timeout/--peer-timeout apply to a multi-process run (--coordinator "
                "or --distributed)"
            )
        return
    if not args.distributed and any(v is None for v in given):
        raise ValueError("--coordinator, --num-processes and --process-id go together")
    from learnopt import distributed

    distributed.initialize(
        args.coordinator,
        args.num_processes,
        args.process_id,
        **{k: v for k, v in timeouts.items() if v is not None},
    )


def _run_meta_train(args: argparse.Namespace) -> int:
    """``learnopt meta-train``: exit 0 done, 1 failed, 2 bad input, 130/143 signals."""
    sub = args.parser
    try:
        kwargs = _meta_train_kwargs(args)
        _join_processes(args)
        from learnopt import train

        result = train.meta_train(**kwargs)
    except (ValueError, TypeError, KeyError) as e:
        text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        sub.error(_as_flags(str(text)))  # exits 2
    except RuntimeError as e:  # the data cannot be had (DataUnavailableError), ...
        sub.exit(1, f"{sub.prog}: error: {_as_flags(str(e))}\n")
    except KeyboardInterrupt:  # before the loop (e.g. while loading data)
        print(f"\n{sub.prog}: interrupted before the first meta-step", file=sys.stderr)
        return 130
    if args.quiet:  # meta_train printed nothing: the summary alone
        print(result.summary, flush=True)
    return result.exit_code


# -------------------------------------------------------------------------------- list


def _list(out: Any = None) -> None:
    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.tasks import base as tasks_base

    out = out or sys.stdout
    print("tasks:", file=out)
    for name in tasks_base.registered_tasks():
        print(f"  {name}", file=out)
    print("learned optimizers:", file=out)
    for name in lopt_base.registered_learned_optimizers():
        print(f"  {name}", file=out)
    print("trainers:", file=out)
    for name, text in TRAINERS.items():
        print(f"  {name:<10} {text}", file=out)


# -------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``learnopt`` console script and ``python -m learnopt``.

    Returns 0 on success. Bad input exits with status 2 and a message naming what is
    wrong (``SystemExit``, as argparse does); a run that cannot proceed or that fails
    (missing data, a full disk, divergence) returns 1 with the reason on stderr;
    SIGINT/SIGTERM return 130/143 after writing a checkpoint.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        _list()
        return 0
    if args.command == "evaluate":
        from learnopt.cli import evaluate as evaluate_cmd

        return evaluate_cmd.run(args)
    return _run_meta_train(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
