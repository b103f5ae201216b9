"""``learnopt evaluate``: a learned optimizer against tuned baselines on a task suite.

::

    learnopt evaluate --theta runs/meta-train-X/theta.msgpack          # lopt from config.json
    learnopt evaluate --theta theta.msgpack --lopt LearnableAdam --suite smoke --steps 500
    learnopt evaluate --optimizer Adam --lr 3e-3                          # a hand-designed one

The candidate (a learned optimizer with the theta of ``--theta``, or ``--optimizer``
at ``--lr`` evaluated "as if it were a learned optimizer") and learning-rate sweeps of
the baselines (``--baselines``, default Adam, NAdamW (AdamW until NAdamW is registered)
and SGDM over ``--lrs``) train every task of the suite for ``--steps`` steps over
``--seeds`` seeds; see :mod:`learnopt.eval` for what is measured. Output folder:
``summary.md`` (also printed), ``summary.csv`` (one row per task and optimizer),
``sweep.csv`` (every learning rate), ``curves.csv`` (candidate and tuned baselines, per
seed), ``curves.npz`` (every curve), ``curves_<task>.png`` and ``config.json``.
Nothing already in the output folder is overwritten without ``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run", "evaluate", "load_learned_candidate", "EvalError"]

DEFAULT_SUITE_PREFERENCE = ("heldout", "held_out", "eval", "smoke")
FIXED_OUTPUTS = (
    "summary.md",
    "summary.csv",
    "sweep.csv",
    "curves.csv",
    "curves.npz",
    "config.json",
)


class EvalError(Exception):
    """A failure of ``learnopt evaluate``; ``usage`` errors exit 2, others exit 1."""

    def __init__(self, message: str, usage: bool = False):
        super().__init__(message)
        self.usage = usage


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _float_list(text: str) -> tuple[float, ...]:
    values = tuple(_positive_float(x.strip()) for x in text.split(",") if x.strip())
    if not values:
        raise argparse.ArgumentTypeError("expected comma-separated learning rates")
    return values


def _name_list(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated names")
    return names


def add_parser(subparsers: Any, formatter_class: Any = None) -> argparse.ArgumentParser:
    """Adds the ``evaluate`` subcommand to ``subparsers`` (from ``add_subparsers``)."""
    kwargs = {"formatter_class": formatter_class} if formatter_class else {}
    p = subparsers.add_parser(
        "evaluate",
        description=(
            "Evaluate a learned optimizer (or a hand-designed one) against learning-rate-\n"
            "tuned baselines on a suite of tasks, over several seeds. Writes summary.md,\n"
            "summary.csv, sweep.csv, curves.csv, curves.npz, curves_<task>.png and\n"
            "config.json into --out."
        ),
        epilog=(
            "examples:\n"
            "  learnopt evaluate --theta runs/meta-train-X/theta.msgpack\n"
            "  learnopt evaluate --theta theta.msgpack --lopt LearnableAdam --steps 500\n"
            "  learnopt evaluate --optimizer Adam --lr 3e-3 --suite smoke\n"
        ),
        **kwargs,
    )
    g = p.add_argument_group("candidate (one of --theta or --optimizer)")
    g.add_argument("--theta", metavar="PATH", help="theta file written by 'learnopt meta-train'")
    g.add_argument(
        "--lopt",
        metavar="NAME",
        help="learned optimizer of a theta file without metadata (default: 'lopt' in the "
        "config.json next to it; files with metadata name their own)",
    )
    g.add_argument(
        "--optimizer",
        metavar="NAME",
        help="evaluate this registered hand-designed optimizer instead (with --lr)",
    )
    g.add_argument("--lr", type=_positive_float, metavar="X", help="learning rate of --optimizer")
    g = p.add_argument_group("tasks and baselines")
    g.add_argument("--suite", metavar="NAME", help="task suite (default: the held-out suite)")
    g.add_argument(
        "--tasks", type=_name_list, metavar="A,B", help="registered task names instead of --suite"
    )
    g.add_argument(
        "--baselines",
        type=_name_list,
        metavar="A,B",
        help="baseline optimizers to tune (default: Adam,NAdamW,SGDM; AdamW if NAdamW "
        "is not registered)",
    )
    g.add_argument(
        "--lrs",
        type=_float_list,
        metavar="X,Y",
        help="learning-rate grid of the baselines (default: 1e-4..1, 9 log-spaced points)",
    )
    g.add_argument(
        "--select-by",
        choices=("final", "mean"),
        default="final",
        help="pick each baseline's learning rate by the seed-mean final train loss "
        "(default) or the mean train loss over the run",
    )
    g = p.add_argument_group("training")
    g.add_argument("--steps", type=_positive_int, default=1000, metavar="N", help="(default 1000)")
    g.add_argument("--seeds", type=_positive_int, default=3, metavar="S", help="(default 3)")
    g.add_argument(
        "--eval-every",
        type=_positive_int,
        metavar="K",
        help="steps between valid evaluations, also the steps per jitted chunk "
        "(default: steps/20, at least 10)",
    )
    g.add_argument(
        "--valid-split",
        choices=("inner_valid", "outer_valid", "test", "train"),
        default="outer_valid",
        help="split of the valid loss (default: outer_valid)",
    )
    g.add_argument(
        "--valid-batches",
        type=_positive_int,
        default=5,
        metavar="V",
        help="fixed batches per valid evaluation (default 5)",
    )
    g.add_argument(
        "--vectorize",
        choices=("auto", "vmap", "map"),
        default="auto",
        help="runs of a sweep batched (vmap) or one after another in one program (map); "
        "auto: on CPU vmap for MLP-like losses, map for convolutions, loops and "
        "attention (default: auto)",
    )
    g.add_argument("--seed", type=int, default=0, metavar="N", help="base seed (default 0)")
    g = p.add_argument_group("input and output")
    g.add_argument("--out", metavar="DIR", help="output folder (default: runs/evaluate-<time>)")
    g.add_argument(
        "--overwrite", action="store_true", help="replace outputs of an earlier run in --out"
    )
    g.add_argument(
        "--baseline-cache",
        metavar="DIR",
        help="keep the baselines' curves here and reuse them when the settings and "
        "learnopt's source are unchanged (default: no cache)",
    )
    g.add_argument("--data-dir", metavar="DIR", help="TFDS data dir (default: $LEARNOPT_DATA_DIR)")
    g.add_argument("--no-plots", action="store_true", help="do not write curves_<task>.png")
    g.add_argument("--quiet", action="store_true", help="no progress bar, only the summary")
    p.set_defaults(parser=p)
    return p


# ------------------------------------------------------------------------ candidates


def _read_lopt_name(theta_path: Path) -> str:
    config = theta_path.parent / "config.json"
    if not config.is_file():
        raise EvalError(
            f"--lopt is needed: there is no config.json next to {theta_path} to read the "
            "learned optimizer's name from",
            usage=True,
        )
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError) as e:
        raise EvalError(f"cannot read {config}: {e}; pass --lopt NAME") from None
    name = data.get("lopt") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise EvalError(f"{config} has no 'lopt' entry; pass --lopt NAME", usage=True)
    return name


def _flat_shapes(tree: Any) -> dict[str, tuple[int, ...]]:
    import flax.serialization
    import jax
    import numpy as np

    state = flax.serialization.to_state_dict(tree)
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        key = "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
        out[key] = tuple(np.shape(leaf))
    return out


def _describe(shapes: dict[str, tuple[int, ...]], limit: int = 8) -> str:
    items = [f"{k} {list(v)}" for k, v in sorted(shapes.items())]
    more = f", ... ({len(items)} leaves)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def load_learned_candidate(theta_path: str | os.PathLike, lopt_name: str | None = None):
    """``(lopt, theta)`` from a theta file.

    A file with metadata (every ``learnopt meta-train`` run, ``learnopt.pretrained``)
    rebuilds its learned optimizer, configuration included
    (:func:`learnopt.learned_optimizers.theta_files.load`); ``lopt_name``, if given, must
    match it. Otherwise the name comes from ``lopt_name`` or the ``config.json`` next to
    the file, with the constructor's defaults. Raises :class:`EvalError` naming the file
    and what was expected when the file is missing, not a theta file, or holds a theta
    of another structure.
    """
    import jax

    from learnopt import checkpoints
    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.learned_optimizers import theta_files

    path = Path(theta_path)
    if not path.is_file():
        raise EvalError(f"--theta: no file at {path}", usage=True)
    try:
        metadata = theta_files.read_metadata(path)
    except ValueError as e:
        if lopt_name is None:
            raise EvalError(f"--theta: {e}") from None
        metadata = None  # the path below names what the file should have held
    if metadata is not None:
        held = metadata.get("architecture")
        if lopt_name is not None and lopt_name != held:
            raise EvalError(
                f"--lopt {lopt_name}: {path} holds a theta of {held} (its metadata says so); "
                "leave --lopt out",
                usage=True,
            )
        try:
            trained = theta_files.load(path)
        except ValueError as e:
            raise EvalError(f"--theta: {e}") from None
        return trained.lopt, trained.theta
    name = lopt_name or _read_lopt_name(path)
    try:
        lopt = lopt_base.LOPTS.get(name)
    except KeyError as e:
        raise EvalError(f"--lopt: {e}", usage=True) from None
    target = lopt.init(jax.random.PRNGKey(0))
    expected = _flat_shapes(target)
    try:
        raw = checkpoints.load_theta(path)
    except Exception as e:  # msgpack raises several types for corrupt bytes
        raise EvalError(
            f"--theta: {path} is not a theta file ({type(e).__name__}: {e}); expected a "
            f"msgpack theta of {name} (written by 'learnopt meta-train' or "
            f"learnopt.checkpoints.save_theta) with {_describe(expected)}"
        ) from None
    found = _flat_shapes(raw) if isinstance(raw, dict) else {}
    if found != expected:
        raise EvalError(
            f"--theta: {path} does not hold a theta of {name}: expected {_describe(expected)}; "
            f"found {_describe(found) or 'no arrays'}. Pass the --lopt it was trained with."
        )
    theta = checkpoints.load_theta(path, target=target)
    return lopt, theta


def _candidate(args: argparse.Namespace):
    from learnopt import eval as lopt_eval
    from learnopt.optimizers import base as opt_base

    if args.optimizer:
        if args.theta or args.lopt:
            raise EvalError("--optimizer cannot be combined with --theta/--lopt", usage=True)
        if args.lr is None:
            raise EvalError("--optimizer needs --lr", usage=True)
        try:
            opt = opt_base.OPTIMIZERS.get(args.optimizer, learning_rate=args.lr)
        except KeyError as e:
            raise EvalError(f"--optimizer: {e}", usage=True) from None
        return lopt_eval.optimizer_sweep(opt, name=f"{args.optimizer}(lr={args.lr:g})"), {
            "optimizer": args.optimizer,
            "lr": args.lr,
        }
    if args.lr is not None:
        raise EvalError("--lr goes with --optimizer", usage=True)
    if not args.theta:
        raise EvalError(
            "give --theta PATH (a learned optimizer) or --optimizer NAME --lr X", usage=True
        )
    lopt, theta = load_learned_candidate(args.theta, args.lopt)
    return lopt_eval.learned_sweep(lopt, theta), {
        "theta": str(args.theta),
        "lopt": lopt.name,
        "lopt_repr": repr(lopt),
    }


def _tasks(args: argparse.Namespace) -> tuple[str, list[Any]]:
    from learnopt import eval as lopt_eval
    from learnopt.tasks import base as tasks_base

    if args.tasks and args.suite:
        raise EvalError("give --suite or --tasks, not both", usage=True)
    if args.tasks:
        for name in args.tasks:
            try:
                tasks_base.TASKS.constructor(name)
            except KeyError as e:
                raise EvalError(f"--tasks: {e}", usage=True) from None
        return "tasks", list(args.tasks)
    name = args.suite or default_suite()
    try:
        return name, lopt_eval.get_suite(name)
    except KeyError as e:
        raise EvalError(f"--suite: {e}", usage=True) from None


def default_suite() -> str:
    """The held-out suite when it is defined, else the small local one."""
    from learnopt import eval as lopt_eval

    names = lopt_eval.suite_names()
    for preferred in DEFAULT_SUITE_PREFERENCE:
        if preferred in names:
            return preferred
    return "smoke"


def _task_name(entry: Any) -> str:
    return entry if isinstance(entry, str) else entry.name


def _planned_outputs(out: Path, tasks: list[Any], plots: bool) -> list[Path]:
    from learnopt.eval import _file_safe

    files = [out / f for f in FIXED_OUTPUTS]
    if plots:
        files += [out / f"curves_{_file_safe(_task_name(t))}.png" for t in tasks]
    return files


def _default_out() -> Path:
    base = Path("runs") / time.strftime("evaluate-%Y%m%d-%H%M%S")
    out, i = base, 1
    while out.exists():
        out = base.with_name(f"{base.name}-{i}")
        i += 1
    return out


def evaluate(args: argparse.Namespace):
    """Runs ``learnopt evaluate`` for parsed ``args``; returns the :class:`SuiteResult`."""
    from learnopt import eval as lopt_eval

    t_start = time.perf_counter()
    candidate, cand_info = _candidate(args)
    suite_name, tasks = _tasks(args)
    out = Path(args.out) if args.out else _default_out()
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out: {out} exists and is not a directory", usage=True)
    existing = [p for p in _planned_outputs(out, tasks, not args.no_plots) if p.exists()]
    if existing and not args.overwrite:
        raise EvalError(
            f"--out: {out} already holds {', '.join(p.name for p in existing[:4])}"
            f"{' ...' if len(existing) > 4 else ''} from an earlier run; pass --overwrite to "
            "replace them or choose another --out",
            usage=True,
        )
    try:
        baselines = lopt_eval.baseline_sweeps(
            args.baselines, args.lrs or lopt_eval.DEFAULT_LEARNING_RATES
        )
    except KeyError as e:
        raise EvalError(f"--baselines: {e}", usage=True) from None

    from learnopt.tasks import base as tasks_base
    from learnopt.tasks.datasets import base as datasets_base

    for entry in tasks:  # fail on missing data before compiling anything
        task = tasks_base.get_task(entry) if isinstance(entry, str) else entry
        try:
            ds = task.datasets
            if ds is not None and hasattr(ds, "check_available"):
                ds.check_available()
        except datasets_base.DatasetNotFoundError as e:
            raise EvalError(
                f"task {task.name} needs data that is not available (--data-dir sets the "
                f"data dir).\n{e}"
            ) from None

    if not args.quiet:
        names = ", ".join(b.name for b in baselines)
        print(
            f"learnopt evaluate: {candidate.name} vs tuned {names} on {len(tasks)} task"
            f"{'s' if len(tasks) != 1 else ''} ({suite_name}), {args.steps} steps x "
            f"{args.seeds} seeds -> {out}",
            flush=True,
        )
    try:
        result = lopt_eval.evaluate_suite(
            tasks,  # names are built afresh there: reproducible data, cacheable baselines
            candidate,
            baselines,
            num_steps=args.steps,
            num_seeds=args.seeds,
            select_by=args.select_by,
            progress=not args.quiet,
            eval_every=args.eval_every,
            valid_split=args.valid_split,
            valid_batches=args.valid_batches,
            seed=args.seed,
            vectorize=args.vectorize,
            baseline_cache=args.baseline_cache,
        )
    except (datasets_base.DatasetNotFoundError, datasets_base.ChecksumMismatchError) as e:
        raise EvalError(
            f"a task's data is not available (--data-dir sets the data dir).\n{e}"
        ) from None
    out.mkdir(parents=True, exist_ok=True)
    lopt_eval.write_results(result, out, plots=not args.no_plots)
    import jax

    config = {k: v for k, v in vars(args).items() if k != "parser"}
    config.update(
        cand_info,
        candidate=candidate.name,
        suite=suite_name,
        tasks=[_task_name(t) for t in tasks],
        baselines=[b.name for b in baselines],
        settings=result.settings,
        out=str(out),
        seconds=round(time.perf_counter() - t_start, 2),
        jax_version=jax.__version__,
        backend=jax.default_backend(),
    )
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str) + "\n")
    print(result.markdown(), flush=True)
    print(f"{time.perf_counter() - t_start:.1f} s; wrote {out}", flush=True)
    return result


def run(args: argparse.Namespace) -> int:
    """Runs ``evaluate`` with the exit conventions of ``learnopt`` (2: usage, 1: failure)."""
    parser = args.parser
    from learnopt.tasks.datasets import base as datasets_base

    old = os.environ.get(datasets_base.ENV_DATA_DIR)
    if args.data_dir is not None:
        os.environ[datasets_base.ENV_DATA_DIR] = str(Path(args.data_dir).expanduser().absolute())
    try:
        evaluate(args)
    except EvalError as e:
        if e.usage:
            parser.error(str(e))  # exits 2
        parser.exit(1, f"{parser.prog}: error: {e}\n")
    except KeyboardInterrupt:
        print(f"\n{parser.prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        if args.data_dir is not None:
            if old is None:
                os.environ.pop(datasets_base.ENV_DATA_DIR, None)
            else:
                os.environ[datasets_base.ENV_DATA_DIR] = old
    return 0
