"""``learnopt meta-train``: the flags of :class:`learnopt.run.config.RunConfig`,
:class:`~learnopt.run.config.LaunchConfig` and
:class:`learnopt.evaluation.config.PeriodicEvalConfig`, mapped onto
:func:`learnopt.train.meta_train`.

Building the parser imports no JAX; :func:`run` imports the run only when it runs.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from learnopt.cli import args as cli_args
from learnopt.evaluation.config import PeriodicEvalConfig
from learnopt.run.config import DEFAULT_TASK, FULL_TRAINERS, TRAINERS, LaunchConfig, RunConfig

__all__ = [
    "add_parser",
    "run",
    "meta_train_kwargs",
    "lopt_config",
    "as_flags",
    "check_output_paths",
]

_DESCRIPTION = (
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
    "exits with status 1. While a run writes its folder, a second run on it is refused.\n"
    "--out (--resume) and --tensorboard are checked before any work: a file where a\n"
    "folder is needed, or a place that cannot be written, is an error (exit 2); so is\n"
    "a folder that holds an evaluation (learnopt evaluate), even with --overwrite."
)
#: ``--help`` sections, in order.
_SECTIONS = (
    "what to meta-train",
    "meta-gradient estimator",
    "outer optimizer",
    "periodic meta-validation (eval.csv, eval.png, theta_best.msgpack)",
    "output, checkpoints and resume",
    "devices, processes and machines (docs/distributed.md)",
)
#: meta_train's argument names as the flags that set them (for error messages).
_FLAGS = {
    "out_dir": "--out",
    "coordinator_address": "--coordinator",
    "families": "--family",
    "lopt_config": "--lopt-arg",
}


def add_parser(subparsers: Any, formatter_class: type) -> argparse.ArgumentParser:
    """Adds the ``meta-train`` command to ``subparsers``.

    Args:
      subparsers: what ``ArgumentParser.add_subparsers`` returned.
      formatter_class: the ``--help`` formatter.

    Returns:
      The command's parser.
    """
    p = subparsers.add_parser(
        "meta-train",
        formatter_class=formatter_class,
        description=_DESCRIPTION,
        epilog="trainers:\n"
        + "".join(f"  {k:<10} {cls}: {text}\n" for k, (cls, text) in TRAINERS.items()),
    )
    sections = cli_args.add_flags(p, RunConfig, PeriodicEvalConfig, LaunchConfig, order=_SECTIONS)
    sections["meta-gradient estimator"].add_argument(
        "--unroll", action=_RenamedUnroll, help=argparse.SUPPRESS
    )
    p.set_defaults(parser=p)
    return p


class _RenamedUnroll(argparse.Action):
    """The old ``--unroll`` flag: an error that says which flag replaced it."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=1, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        truncated = "/".join(n for n in TRAINERS if n not in FULL_TRAINERS)
        parser.error(
            "--unroll was renamed: use --trunc-length K for the inner steps per estimate "
            f"of {truncated}, or --total-length T for the length of a whole inner "
            f"run (the horizon of {'/'.join(FULL_TRAINERS)})"
        )


def _flag_names() -> dict[str, str]:
    """Setting names as the flags that set them."""
    from learnopt import _fields

    names = dict(_FLAGS)
    for cls in (RunConfig, LaunchConfig):
        for f in _fields.flags_of(cls):
            names.setdefault(f.field, f.flag)
    return names


def as_flags(message: str) -> str:
    """An API error message in the command line's words (argument names as flags).

    Args:
      message: a ``ValueError``/``TypeError`` message of ``meta_train``.

    Returns:
      The message with ``outer_lr`` as ``--outer-lr`` and so on.
    """
    message = message.replace("resume=True (--resume)", "--resume DIR")
    message = message.replace("overwrite=True (--overwrite)", "--overwrite")
    message = re.sub(r"\blearner= ", "", message)
    message = re.sub(r"^resume(?=[: ])", "--resume", message)
    for name, flag in _flag_names().items():
        if name in ("resume", "overwrite", "plots", "quiet", "distributed"):
            continue
        message = re.sub(rf"(?<![\w/.'-]){name}(?=[=:]| must | \(| differs)", flag, message)
    return message


def _default_out_dir() -> Path:
    base = Path("runs") / time.strftime("meta-train-%Y%m%d-%H%M%S")
    out, i = base, 1
    while out.exists():
        out = base.with_name(f"{base.name}-{i}")
        i += 1
    return out


def meta_train_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed flags as :func:`learnopt.train.meta_train` keyword arguments.

    Args:
      args: the namespace of ``learnopt meta-train``.

    Returns:
      The keyword arguments (settings not given are left out, so a resumed run keeps its
      own).
    """
    launch = LaunchConfig(**cli_args.given(args, LaunchConfig))
    if launch.resume is not None:
        if launch.overwrite:
            raise ValueError("--resume and --overwrite exclude each other")
        if launch.out is not None and Path(launch.out).absolute() != Path(launch.resume).absolute():
            raise ValueError(
                f"--out ({launch.out}) and --resume ({launch.resume}) differ: --resume DIR "
                "continues the run in DIR"
            )
        out = launch.resume
    else:
        out = launch.out if launch.out is not None else _default_out_dir()
    settings = cli_args.given(args, RunConfig)
    if "task" in settings and "families" in settings:
        raise ValueError("--task and --family exclude each other: meta-train on one or the other")
    if "families" in settings:
        settings["families"] = list(settings["families"])
    if "lopt_config" in settings:
        settings["lopt_config"] = lopt_config(settings["lopt_config"])
    return dict(
        settings,
        out_dir=out,
        resume=launch.resume is not None,
        overwrite=launch.overwrite,
        plots=launch.plots,
        progress=not launch.quiet,
        mesh="all" if launch.all_devices else None,
        callbacks=_eval_callbacks(args, quiet=launch.quiet, resume=launch.resume)
        + _tensorboard_callbacks(launch.tensorboard),
    )


def check_output_paths(out_flag: str, out: str | Path, tensorboard: str | None) -> None:
    """Checks the folders the run writes before any work (nothing is created).

    A path that is a file where a folder is needed, lies under a file, or is on a place
    that cannot be written is a ``ValueError`` naming the flag and the path (exit 2),
    instead of a failure after training. Only the process that writes them (process 0)
    checks; :func:`run` makes its error every process's.

    Args:
      out_flag: the flag that names the run folder (``--out`` or ``--resume``).
      out: the run folder.
      tensorboard: the folder of ``--tensorboard``, or None.
    """
    from learnopt import _validate

    _validate.output_dir(out_flag, out)
    if tensorboard is not None:
        _validate.output_dir("--tensorboard", tensorboard)


def _tensorboard_callbacks(logdir: str | None) -> list[Any]:
    """The TensorBoard writer of ``--tensorboard DIR`` (none without it)."""
    if logdir is None:
        return []
    from learnopt import tensorboard

    try:
        tensorboard.require()
    except ImportError as e:
        raise RuntimeError(str(e)) from None
    return [tensorboard.MetaTrainWriter(logdir)]


def lopt_config(items: Sequence[str]) -> dict[str, Any]:
    """``--lopt-arg KEY=VALUE`` flags as constructor arguments (VALUE in JSON).

    Args:
      items: the flags' values.

    Returns:
      ``{"step_mult": 0.003, ...}``.
    """
    config: dict[str, Any] = {}
    for item in items:
        try:
            key, value = cli_args.key_value(item)
        except argparse.ArgumentTypeError:
            raise ValueError(f"--lopt-arg must look like KEY=VALUE, got {item!r}") from None
        config[key] = value
    return config


def _eval_callbacks(args: argparse.Namespace, quiet: bool, resume: str | None = None) -> list[Any]:
    """The periodic evaluation of ``--eval-every``; without it, a resumed run's own, if any."""
    given = cli_args.given(args, PeriodicEvalConfig)
    recipe = cli_args.given(args, RunConfig).get("recipe")
    if recipe is not None and resume is None:
        from learnopt.run import recipes

        given = {**recipes.get_recipe(recipe).evaluation, **given}
    cfg = PeriodicEvalConfig(**given)
    if cfg.every is None:
        if "tasks" in given or cfg.suite:
            raise ValueError("--eval-tasks/--eval-suite need --eval-every N")
        return _resumed_eval(resume, quiet) if resume is not None else []
    evaluator = _new_eval(cfg, given, quiet)
    if resume is not None:  # the run's best, checked now: theta_best must be readable
        evaluator.restore(resume)
    return [evaluator]


def _new_eval(cfg: PeriodicEvalConfig, given: dict[str, Any], quiet: bool) -> Any:
    """The periodic evaluation of ``--eval-every`` and the ``--eval-*`` flags."""
    if "tasks" in given and cfg.suite:
        raise ValueError("give --eval-tasks or --eval-suite, not both")
    from learnopt.evaluation import periodic, suites
    from learnopt.tasks import base as tasks_base

    if cfg.suite:
        try:
            tasks = [t if isinstance(t, str) else t.name for t in suites.get_suite(cfg.suite)]
        except KeyError as e:
            raise ValueError(f"--eval-suite: {e}") from None
    else:
        tasks = list(cfg.tasks)
        for name in tasks:
            try:
                tasks_base.TASKS.constructor(name)
            except KeyError as e:
                raise ValueError(f"--eval-tasks: {e}") from None
    return periodic.PeriodicEval(
        cfg.every,
        tasks,
        steps=cfg.steps,
        seeds=cfg.seeds,
        at_start=cfg.at_start,
        progress=not quiet,
        select_by=cfg.select_by,
    )


def _resumed_eval(run_dir: str, quiet: bool) -> list[Any]:
    """The periodic evaluation a run had (its ``eval_config.json``), none if it had none."""
    import json

    from learnopt.evaluation import periodic

    path = Path(run_dir) / periodic.SETTINGS_FILE
    if not path.exists():
        return []
    try:
        values = json.loads(path.read_text())
        evaluator = periodic.from_settings(values, progress=not quiet)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"--resume: cannot read the run's periodic evaluation settings {path} ({e}); "
            "give --eval-every N (and --eval-tasks) to set them again"
        ) from None
    evaluator.restore(run_dir)  # the run's best, checked now: theta_best must be readable
    return [evaluator]


def _join_processes(args: argparse.Namespace) -> None:
    """Joins a multi-process run if the flags ask for one (before any JAX computation)."""
    given = cli_args.given(args, LaunchConfig)
    launch = LaunchConfig(**given)
    where = [launch.coordinator, launch.num_processes, launch.process_id]
    timeouts = [k for k in ("init_timeout", "peer_timeout") if k in given]
    if launch.distributed and any(v is not None for v in where):
        raise ValueError(
            "--distributed takes the processes from the cluster's environment: drop "
            "--coordinator/--num-processes/--process-id, or drop --distributed"
        )
    if not launch.distributed and all(v is None for v in where):
        if timeouts:
            raise ValueError(
                "--init-timeout/--peer-timeout apply to a multi-process run (--coordinator "
                "or --distributed)"
            )
        return
    if not launch.distributed and any(v is None for v in where):
        raise ValueError("--coordinator, --num-processes and --process-id go together")
    from learnopt import distributed

    distributed.initialize(
        launch.coordinator,
        launch.num_processes,
        launch.process_id,
        init_timeout=launch.init_timeout,
        peer_timeout=launch.peer_timeout,
    )


def run(args: argparse.Namespace) -> int:
    """``learnopt meta-train``: exit 0 done, 1 failed, 2 bad input, 130/143 signals.

    Args:
      args: the parsed namespace.

    Returns:
      The exit status.
    """
    sub = args.parser
    try:
        kwargs = meta_train_kwargs(args)
        _join_processes(args)
        from learnopt import distributed, train  # JAX: only once a run starts

        launch = LaunchConfig(**cli_args.given(args, LaunchConfig))
        out_flag = "--resume" if launch.resume is not None else "--out"
        distributed.run_on_primary(
            check_output_paths, out_flag, str(kwargs["out_dir"]), launch.tensorboard
        )
        try:
            result = train.meta_train(**kwargs)
        finally:
            for cb in kwargs["callbacks"]:
                if hasattr(cb, "close"):
                    cb.close()
    except (ValueError, TypeError, KeyError) as e:
        text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        sub.error(as_flags(str(text)))  # exits 2
    except RuntimeError as e:  # data unavailable, the folder in use, ...
        sub.exit(1, f"{sub.prog}: error: {as_flags(str(e))}\n")
    except KeyboardInterrupt as e:  # before the loop (building, loading data, first eval)
        name = getattr(e, "signal", "SIGINT")
        print(
            f"\n{sub.prog}: interrupted by {name} before the first meta-step of this call: "
            "nothing was trained (checkpoints already in the folder are kept)",
            file=sys.stderr,
        )
        return getattr(e, "exit_code", 130)
    if not kwargs["progress"]:  # meta_train printed nothing: the summary alone
        print(result.summary, flush=True)
    return result.exit_code
