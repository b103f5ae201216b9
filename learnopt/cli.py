"""The ``learnopt`` command line.

``learnopt meta-train`` meta-trains a learned optimizer on a registered task and writes
its results to an output folder::

    learnopt meta-train                                  # the notes' walkthrough
    learnopt meta-train --trainer pes --trunc-length 10 --steps 500
    learnopt list                                        # tasks, optimizers, trainers

The default run is the notes' tutorial: ``LearnableAdam`` on the embedded 8x8 digits
MLP (``ImageMLP_Digits8_Relu32``, offline stand-in for ``ImageMLP_FashionMnist8_Relu32``),
the exact meta-gradient of the mean training loss over a fresh 4-step inner run
(``full_grad``, ``--total-length 4``), outer optimizer ``opt_base.Adam(1e-2)``, 2000 meta-steps.

Output folder (``--out``): ``metrics.csv`` (one row per meta-step), ``theta.msgpack``
(the final theta, also written every ``--checkpoint-every`` steps; read it back with
:func:`learnopt.checkpoints.load_theta`), ``meta_loss.png``, ``learning_rate.png`` and
``config.json`` (the arguments). Heavy imports (JAX, the tasks, matplotlib) happen only
when a command runs, so ``learnopt --help`` is instant.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser", "TRAINERS", "LOPTS", "MetaTrainResult", "meta_train"]

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
FULL_TRAINERS = ("full_grad", "full_es")
#: Defaults of --trunc-length and --total-length (as ``outer_trainers.registry``).
DEFAULT_TRUNC_LENGTH = 4
DEFAULT_TOTAL_LENGTH = {"full": 4, "truncated": 200}
ES_TRAINERS = ("full_es", "tes", "pes", "nres")
#: Columns of metrics.csv before the ``theta/<name>`` columns.
BASE_COLUMNS = ("step", "meta_loss", "learning_rate", "grad_norm", "num_nonfinite")


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


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    """The ``learnopt`` argument parser (``meta-train`` and ``list`` subcommands)."""
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
            "meta-step: step, meta_loss, learning_rate, grad_norm, num_nonfinite, theta/...),\n"
            "theta.msgpack (final theta; load with learnopt.checkpoints.load_theta),\n"
            "meta_loss.png, learning_rate.png and config.json into --out.\n"
            "\n"
            "The defaults reproduce the notes' walkthrough: LearnableAdam on the embedded\n"
            f"8x8 digits MLP ({DEFAULT_TASK}), meta-loss = mean training loss over a fresh\n"
            "4-step inner run, exact meta-gradient (full_grad), outer Adam(1e-2), 2000 steps."
        ),
        epilog="trainers:\n" + "".join(f"  {k:<10} {v}\n" for k, v in TRAINERS.items()),
    )
    g = mt.add_argument_group("what to meta-train")
    g.add_argument(
        "--task",
        default=DEFAULT_TASK,
        metavar="NAME",
        help=f"registered task (default: {DEFAULT_TASK}; '{PROG} list' shows all)",
    )
    g.add_argument(
        "--lopt",
        default=DEFAULT_LOPT,
        metavar="NAME",
        help=f"learned optimizer: {', '.join(LOPTS)} (default: {DEFAULT_LOPT})",
    )
    g = mt.add_argument_group("meta-gradient estimator")
    g.add_argument(
        "--trainer",
        choices=tuple(TRAINERS),
        default="full_grad",
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
        default=0.01,
        help="ES perturbation standard deviation (full_es/tes/pes/nres) (default: 0.01)",
    )
    g = mt.add_argument_group("outer optimizer")
    g.add_argument(
        "--steps",
        type=_int_any,
        default=2000,
        metavar="N",
        help="number of meta-steps, >= 1 (default: 2000)",
    )
    g.add_argument(
        "--outer-lr",
        type=_positive_float,
        default=1e-2,
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
    g.add_argument("--seed", type=_int_any, default=0, metavar="N", help="random seed (default: 0)")
    g = mt.add_argument_group("input and output")
    g.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder, created if needed (default: runs/meta-train-<timestamp>)",
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
        default=50,
        metavar="N",
        help="fetch metrics from the device, update the progress bar and append to "
        "metrics.csv every N steps (default: 50)",
    )
    g.add_argument(
        "--checkpoint-every",
        type=_non_negative_int,
        default=500,
        metavar="N",
        help="also write theta.msgpack every N steps; 0 writes it only at the end (default: 500)",
    )
    g.add_argument(
        "--no-plots", action="store_true", help="do not write meta_loss.png/learning_rate.png"
    )
    g.add_argument("--quiet", action="store_true", help="no progress bar, only the summary")

    mt.set_defaults(parser=mt)
    ls = sub.add_parser(
        "list",
        description="List the registered tasks, learned optimizers and trainers.",
    )
    ls.set_defaults(parser=ls)
    from learnopt import eval_cli

    eval_cli.add_parser(sub, _HelpFormatter)
    return parser


# ----------------------------------------------------------------------------- helpers


class _UsageError(Exception):
    """Bad command-line input: reported with usage, exit status 2."""


class _RunError(Exception):
    """A failure of the run (e.g. a dataset that is not available): exit status 1."""


def _known_lopts() -> list[str]:
    from learnopt.learned_optimizers import base as lopt_base

    return lopt_base.registered_learned_optimizers()


def _validate(args: argparse.Namespace) -> None:
    if args.steps < 1:
        raise _UsageError(f"--steps must be >= 1, got {args.steps}")
    full = args.trainer in FULL_TRAINERS
    if full and args.trunc_length is not None:
        raise _UsageError(
            f"{args.trainer} unrolls whole inner runs: set their length with --total-length "
            "(--trunc-length is the truncation of tbptt/tes/pes/nres)"
        )
    if args.total_length is None:
        args.total_length = DEFAULT_TOTAL_LENGTH["full" if full else "truncated"]
    if not full:
        if args.trunc_length is None:
            args.trunc_length = DEFAULT_TRUNC_LENGTH
        if args.trunc_length > args.total_length:
            raise _UsageError(
                f"--trunc-length ({args.trunc_length}, steps per estimate) must be <= "
                f"--total-length ({args.total_length}, the length of an inner run) for "
                f"the truncated trainer {args.trainer}"
            )


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


def _build_task(name: str):
    from learnopt.tasks import base as tasks_base

    try:
        return tasks_base.get_task(name)
    except KeyError as e:
        raise _UsageError(f"--task: {e.args[0]}") from None


def _build_lopt(name: str):
    from learnopt.learned_optimizers import base as lopt_base

    try:
        return lopt_base.get_learned_optimizer(name)
    except KeyError as e:
        raise _UsageError(f"--lopt: {e.args[0]}") from None


def _check_data(task: Any) -> None:
    """Checks ``task.datasets`` now so a missing dataset fails before any compilation."""
    from learnopt.tasks.datasets import base as datasets_base

    try:
        datasets = task.datasets
        if hasattr(datasets, "check_available"):
            datasets.check_available()
    except datasets_base.DatasetNotFoundError as e:
        raise _RunError(_data_message(task, e)) from None


def _data_message(task: Any, error: Exception) -> str:
    return (
        f"task {task.name} needs data that is not available (--data-dir sets the data "
        f"dir).\n{error}"
    )


def _num_tasks(args: argparse.Namespace) -> int:
    return args.num_tasks or (1 if args.trainer == "full_grad" else 8)


def build_learner(args: argparse.Namespace, task: Any, lopt: Any):
    """The :class:`SingleMachineGradientLearner` that ``args`` describe."""
    from learnopt.optimizers import base as opt_base
    from learnopt.outer_trainers import gradient_learner, registry

    estimator = registry.make_estimator(
        args.trainer,
        task,
        lopt,
        num_tasks=_num_tasks(args),
        trunc_length=args.trunc_length,
        total_length=args.total_length,
        std=args.std,
    )
    return gradient_learner.SingleMachineGradientLearner(
        lopt,
        [estimator],
        opt_base.Adam(args.outer_lr),
        num_steps=args.steps,
        max_grad_norm=args.max_grad_norm,
    )


def _default_out_dir() -> Path:
    base = Path("runs") / time.strftime("meta-train-%Y%m%d-%H%M%S")
    out, i = base, 1
    while out.exists():
        out = base.with_name(f"{base.name}-{i}")
        i += 1
    return out


def _fmt(value: Any) -> str:
    """A CSV cell: floats with ``repr`` (round-trips float32 exactly), '' for missing."""
    if value is None:
        return ""
    if isinstance(value, float | int):
        return repr(value)
    return str(value)


def _window_mean(values: Any, window: int, last: bool) -> float:
    import numpy as np

    values = np.asarray(values, np.float64)
    part = values[-window:] if last else values[:window]
    part = part[np.isfinite(part)]
    return float(part.mean()) if part.size else float("nan")


def write_plots(out_dir: Path, steps: Any, meta_loss: Any, learning_rate: Any | None) -> list[Path]:
    """The notes' two semilogy plots, with the Agg canvas (no display, no pyplot state)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    written = []
    steps = np.asarray(steps)

    def plot(name: str, values: Any, ylabel: str, title: str, smooth: bool) -> None:
        values = np.asarray(values, np.float64)
        fig = Figure(figsize=(6.4, 4.0), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ok = np.isfinite(values) & (values > 0)
        ax.semilogy(steps[ok], values[ok], lw=0.8, alpha=0.5 if smooth else 1.0, label=ylabel)
        window = max(1, len(values) // 50)
        if smooth and window > 1 and ok.sum() > window:
            kernel = np.ones(window) / window
            ax.semilogy(
                steps[ok][window - 1 :],
                np.convolve(values[ok], kernel, mode="valid"),
                lw=1.5,
                label=f"running mean ({window} steps)",
            )
            ax.legend()
        ax.set_xlabel("meta-step")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path)
        written.append(path)

    plot("meta_loss.png", meta_loss, "meta-loss", "meta-loss", smooth=True)
    if learning_rate is not None:
        plot("learning_rate.png", learning_rate, "learning rate", "learned learning rate", False)
    return written


# -------------------------------------------------------------------------- meta-train


class MetaTrainResult:
    """What :func:`meta_train` returns: the output folder, final theta and the curves."""

    def __init__(
        self,
        out_dir: Path,
        theta: Any,
        columns: dict[str, Any],
        summary: str,
        interrupted: bool = False,
    ):
        self.out_dir = out_dir
        self.theta = theta
        self.columns = columns
        self.summary = summary
        self.interrupted = interrupted

    def __repr__(self) -> str:
        return f"MetaTrainResult(out_dir={str(self.out_dir)!r})"


def meta_train(args: argparse.Namespace) -> MetaTrainResult:
    """Runs ``learnopt meta-train`` for parsed ``args`` (see :func:`build_parser`)."""
    _validate(args)
    t_start = time.perf_counter()
    task = _build_task(args.task)
    lopt = _build_lopt(args.lopt)
    _check_data(task)

    import jax
    import numpy as np
    from tqdm.auto import tqdm

    from learnopt import checkpoints
    from learnopt.tasks.datasets import base as datasets_base

    out_dir = Path(args.out) if args.out else _default_out_dir()
    if out_dir.exists() and not out_dir.is_dir():
        raise _UsageError(f"--out: {out_dir} exists and is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _RunError(f"cannot create the output folder {out_dir}: {e}") from None
    config = {k: v for k, v in vars(args).items() if k not in ("parser", "unroll")}
    num_tasks = _num_tasks(args)
    config.update(
        out=str(out_dir),
        num_tasks=num_tasks,
        jax_version=jax.__version__,
        backend=jax.default_backend(),
    )
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    horizon = (
        f"T={args.total_length}"
        if args.trainer in FULL_TRAINERS
        else f"K={args.trunc_length}, T={args.total_length}"
    )
    if not args.quiet:
        print(
            f"{PROG} meta-train: {lopt.name} on {task.name}, {args.trainer} ({horizon}, "
            f"{num_tasks} task{'s' if num_tasks > 1 else ''}), outer Adam({args.outer_lr:g}), "
            f"{args.steps} steps -> {out_dir}",
            flush=True,
        )

    learner = build_learner(args, task, lopt)
    k_init, k_loop = jax.random.split(jax.random.PRNGKey(args.seed))
    try:
        state = learner.init(k_init)  # prepares and loads the data on first use
    except (datasets_base.DatasetNotFoundError, datasets_base.ChecksumMismatchError) as e:
        raise _RunError(_data_message(task, e)) from None
    step_keys = _StepKeys(k_loop, args.steps)

    theta_cols = _theta_columns(learner.get_theta(state))
    columns = list(BASE_COLUMNS) + theta_cols
    wanted = [c for c in columns if c != "step"]
    history: dict[str, list] = {c: [] for c in columns}
    csv_path = out_dir / "metrics.csv"
    theta_path = out_dir / "theta.msgpack"

    bar = tqdm(
        total=args.steps,
        desc="meta-train",
        unit="step",
        disable=args.quiet,
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=0.5,
    )
    bar.set_postfix_str("compiling...")
    pending: list[dict] = []
    done = 0
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)

        def flush() -> None:
            nonlocal done
            if not pending:
                return
            rows = jax.device_get(pending)  # one bulk transfer per --log-every steps
            pending.clear()
            for row in rows:
                done += 1
                values = {"step": done}
                values.update({c: _scalar(row.get(c)) for c in wanted})
                writer.writerow([_fmt(values[c]) for c in columns])
                for c in columns:
                    history[c].append(values[c])
            f.flush()
            last = rows[-1]
            postfix = f"meta_loss={float(last['meta_loss']):.4g}"
            if "learning_rate" in last:
                postfix += f" lr={float(last['learning_rate']):.3g}"
            if int(last["num_nonfinite"]):
                postfix += f" nonfinite={int(last['num_nonfinite'])}"
            bar.set_postfix_str(postfix, refresh=False)
            bar.update(len(rows))

        interrupted = False
        try:
            for i in range(args.steps):
                state, _, metrics = learner.update(state, step_keys[i])
                pending.append({k: metrics[k] for k in wanted if k in metrics})
                step = i + 1
                if step % args.log_every == 0 or step == args.steps:
                    flush()
                if args.checkpoint_every and step % args.checkpoint_every == 0:
                    if step < args.steps:
                        checkpoints.save_theta(theta_path, learner.get_theta(state))
        except KeyboardInterrupt:
            # Keep what was done: `state` and `pending` both stop at the last finished step.
            interrupted = True
            flush()
    bar.close()
    theta = jax.device_get(learner.get_theta(state))
    checkpoints.save_theta(theta_path, theta)
    elapsed = time.perf_counter() - t_start
    if not history["step"]:
        print(f"interrupted before the first meta-step finished; wrote {out_dir}", flush=True)
        return MetaTrainResult(out_dir, theta, {}, "", interrupted=True)

    meta_loss = np.asarray(history["meta_loss"], np.float64)
    lr = history["learning_rate"]
    has_lr = all(v is not None for v in lr)
    if not args.no_plots:
        write_plots(out_dir, history["step"], meta_loss, lr if has_lr else None)

    steps_done = len(history["step"])
    window = max(1, min(100, steps_done // 10))
    first, last = _window_mean(meta_loss, window, False), _window_mean(meta_loss, window, True)
    summary = (
        f"{lopt.name} on {task.name} ({args.trainer}): meta-loss {first:.4f} -> {last:.4f} "
        f"(mean of the first/last {window} step{'s' if window > 1 else ''})"
    )
    if has_lr:
        summary += f", learning rate {lr[0]:.3g} -> {lr[-1]:.3g}"
    nonfinite = int(history["num_nonfinite"][-1])
    summary += (
        f", {nonfinite} non-finite step{'s' if nonfinite != 1 else ''} skipped; "
        f"{steps_done} steps in {elapsed:.1f} s; wrote {out_dir}"
    )
    if interrupted:
        summary = f"interrupted after {steps_done} of {args.steps} steps: {summary}"
    print(summary, flush=True)
    cols = {c: np.asarray([np.nan if v is None else v for v in history[c]]) for c in columns}
    return MetaTrainResult(out_dir, theta, cols, summary, interrupted=interrupted)


class _StepKeys:
    """One PRNG key per meta-step, split in blocks on the device, indexed on the host.

    Block ``b`` is ``split(fold_in(key, b), n)``: distinct keys, no per-step device work,
    and memory bounded for any number of steps.
    """

    BLOCK = 4096

    def __init__(self, key: Any, num_steps: int):
        self._key = key
        self._num_steps = num_steps
        self._block = -1
        self._keys: Any = None

    def __getitem__(self, i: int) -> Any:
        import jax
        import numpy as np

        block, offset = divmod(i, self.BLOCK)
        if block != self._block:
            n = min(self.BLOCK, self._num_steps - block * self.BLOCK)
            self._keys = np.asarray(jax.random.split(jax.random.fold_in(self._key, block), n))
            self._block = block
        return self._keys[offset]


def _scalar(value: Any) -> float | int | None:
    if value is None:
        return None
    arr = value.item() if hasattr(value, "item") else value
    if isinstance(arr, bool):
        return int(arr)
    return arr


def _theta_columns(theta: Any) -> list[str]:
    """``theta/<name>`` for the scalar leaves of a dict theta (what the learner reports)."""
    if not isinstance(theta, dict):
        return []
    return sorted(f"theta/{k}" for k, v in theta.items() if getattr(v, "shape", None) == ())


# -------------------------------------------------------------------------------- list


def _list(out: Any = None) -> None:
    from learnopt.tasks import base as tasks_base

    out = out or sys.stdout
    print("tasks:", file=out)
    for name in tasks_base.registered_tasks():
        print(f"  {name}", file=out)
    print("learned optimizers:", file=out)
    for name in _known_lopts():
        print(f"  {name}", file=out)
    print("trainers:", file=out)
    for name, text in TRAINERS.items():
        print(f"  {name:<10} {text}", file=out)


# -------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``learnopt`` console script and ``python -m learnopt``.

    Returns 0 on success. Bad input exits with status 2 and a message naming what is
    wrong (``SystemExit``, as argparse does); a run that cannot proceed (e.g. a dataset
    that is not available) exits with status 1 and the reason.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        _list()
        return 0
    if args.command == "evaluate":
        from learnopt import eval_cli

        return eval_cli.run(args)
    sub = args.parser
    from learnopt.tasks.datasets import base as datasets_base

    old_data_dir = os.environ.get(datasets_base.ENV_DATA_DIR)
    if args.data_dir is not None:
        os.environ[datasets_base.ENV_DATA_DIR] = str(Path(args.data_dir).expanduser().absolute())
    try:
        result = meta_train(args)
    except _UsageError as e:
        sub.error(str(e))  # exits 2
    except _RunError as e:
        sub.exit(1, f"{sub.prog}: error: {e}\n")
    except KeyboardInterrupt:
        print(f"\n{sub.prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        if args.data_dir is not None:
            if old_data_dir is None:
                os.environ.pop(datasets_base.ENV_DATA_DIR, None)
            else:
                os.environ[datasets_base.ENV_DATA_DIR] = old_data_dir
    return 130 if result.interrupted else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
