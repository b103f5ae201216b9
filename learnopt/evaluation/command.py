"""What ``learnopt evaluate`` does: a learned optimizer against tuned baselines on a suite.

::

    learnopt evaluate --theta runs/meta-train-X/theta.msgpack  # lopt from config.json
    learnopt evaluate --theta Celo                             # a shipped entry
    learnopt evaluate --theta theta.msgpack --lopt LearnableAdam --suite smoke --steps 500
    learnopt evaluate --optimizer Adam --lr 3e-3               # a hand-designed one

The candidate (a learned optimizer with the theta of ``--theta``, or ``--optimizer``
at ``--lr`` evaluated "as if it were a learned optimizer") and the baselines
(``--baselines``; by default constant Adam and Adam with warmup + cosine decay, each
tuned per task over ``--lrs``, the best of OptList's first NAdamW settings, and the
untuned reference schedule) train every task of the suite for ``--steps`` steps over
``--seeds`` seeds; see :mod:`learnopt.evaluation` for what is measured. Output folder:
``summary.md`` (also printed), ``summary.csv`` (one row per task and optimizer),
``sweep.csv`` (every learning rate), ``curves.csv`` (candidate and tuned baselines, per
seed), ``curves.npz`` (every curve), ``curves_<task>.png`` and ``config.json``.
Every output folder (``--out``, ``--tensorboard``, ``--baseline-cache``) is checked
before any work. Nothing already in the output folder is overwritten without
``--overwrite``, which removes an earlier evaluation's files first; a folder that holds a
meta-training run is refused even so. The files are rewritten as each task finishes
(``summary.md`` says "Partial" until the last one, ``config.json`` counts
``tasks_done``), so an interrupted evaluation keeps the tasks it finished: SIGINT and
SIGTERM stop it at once, never in the middle of those writes
(:class:`EvaluationInterrupted` says what was kept where). Tuned baselines are cached
(:mod:`learnopt.evaluation.cache`, in :func:`~learnopt.evaluation.cache.default_cache_dir`
unless ``--baseline-cache DIR`` or ``--no-baseline-cache``): a rerun with the same
settings trains only the candidate.
``--tensorboard DIR`` also writes the curves as TensorBoard events.

:func:`evaluate` runs it for an :class:`~learnopt.evaluation.config.EvaluateConfig`
(``learnopt.cli.evaluate`` builds one from the flags); every failure it can name is an
:class:`EvalError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from learnopt._signals import SignalHandlers
from learnopt.evaluation import report
from learnopt.evaluation.candidates import EvalError, _candidate, load_learned_candidate
from learnopt.evaluation.config import DEFAULT_LEARNING_RATES, EvaluateConfig
from learnopt.evaluation.results import SuiteResult
from learnopt.evaluation.runner import evaluate_suite
from learnopt.evaluation.suites import default_suite, get_suite
from learnopt.evaluation.sweeps import Sweep, baseline_sweeps

__all__ = [
    "evaluate",
    "load_learned_candidate",
    "EvalError",
    "EvaluationInterrupted",
    "FIXED_OUTPUTS",
    "META_TRAIN_FILES",
]

#: The files every evaluation writes (besides one ``curves_<task>.png`` per task).
FIXED_OUTPUTS = (
    "summary.md",
    "summary.csv",
    "sweep.csv",
    "curves.csv",
    "curves.npz",
    "config.json",
)


#: What a meta-training run keeps in its folder (:mod:`learnopt.run.folder`, the periodic
#: evaluation): ``learnopt evaluate`` never writes into a folder that holds one of these.
META_TRAIN_FILES = (
    "metrics.csv",
    "theta.msgpack",
    "checkpoints",
    "eval.csv",
    "eval_config.json",
    "theta_best.msgpack",
)


class EvaluationInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped ``learnopt evaluate``; the finished tasks are written.

    Args:
      signal: ``"SIGINT"`` or ``"SIGTERM"``.
      tasks_done: the tasks whose results are in ``out``.
      num_tasks: the tasks of the evaluation (0 if it stopped before they were known).
      out: the output folder (None if it stopped before it was known).
    """

    def __init__(
        self, signal: str, tasks_done: int = 0, num_tasks: int = 0, out: Path | None = None
    ):
        super().__init__(signal)
        self.signal, self.tasks_done, self.num_tasks, self.out = signal, tasks_done, num_tasks, out

    @property
    def exit_code(self) -> int:
        """The command line's exit status: 130 (SIGINT) or 143 (SIGTERM)."""
        return 143 if self.signal == "SIGTERM" else 130

    def describe(self) -> str:
        """One line: what stopped the evaluation, and what was kept where.

        Returns:
          E.g. ``stopped by SIGTERM during task 2 of 3; kept the 1 finished task in runs/x
          (summary.md says 'Partial: 1 of 3 tasks done')``.
        """
        done, total = self.tasks_done, self.num_tasks
        if done == 0:
            return f"stopped by {self.signal} before the first task finished; nothing was written"
        s = "s" if done != 1 else ""
        if done >= total:
            return (
                f"stopped by {self.signal} after the last task; all {done} tasks are in {self.out}"
            )
        return (
            f"stopped by {self.signal} during task {done + 1} of {total}; kept the {done} "
            f"finished task{s} in {self.out} (summary.md says 'Partial: {done} of {total} "
            "tasks done')"
        )


class _Signals(SignalHandlers):
    """SIGINT/SIGTERM stop the evaluation at once, except while results are written.

    A signal raises :class:`EvaluationInterrupted` where the program is (the task being
    trained is lost either way: only finished tasks are written), unless :meth:`writing`
    is active: then it is raised when the write is done, so that the files of a finished
    task are never left half written. ``received`` keeps it too, for :meth:`check`,
    called before each task and after each chunk of training: an exception raised inside
    a destructor is swallowed by Python, and the signal must not be lost with it.

    Args:
      enabled: whether to install the handlers (only done in the main thread).
    """

    def __init__(self, enabled: bool):
        super().__init__(enabled)
        self._writing = 0

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signal.Signals(signum).name
        if not self._writing:
            raise EvaluationInterrupted(self.received)

    def check(self) -> None:
        """Raises :class:`EvaluationInterrupted` if a signal was received."""
        if self.received is not None:
            raise EvaluationInterrupted(self.received)

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """A block that a signal does not interrupt (it is raised at its end)."""
        self._writing += 1
        try:
            yield
        finally:
            self._writing -= 1
        if not self._writing:
            self.check()


# ------------------------------------------------------------------------ candidates


def _tasks(cfg: EvaluateConfig) -> tuple[str, list[Any]]:
    """The suite's name (``"tasks"`` for ``--tasks``) and its entries."""
    from learnopt.tasks import base as tasks_base

    if cfg.tasks and cfg.suite:
        raise EvalError("give --suite or --tasks, not both", usage=True)
    if cfg.tasks:
        for name in cfg.tasks:
            try:
                tasks_base.TASKS.constructor(name)
            except KeyError as e:
                raise EvalError(f"--tasks: {e}", usage=True) from None
        return "tasks", list(cfg.tasks)
    name = cfg.suite or default_suite()
    try:
        return name, get_suite(name)
    except KeyError as e:
        raise EvalError(f"--suite: {e}", usage=True) from None


# -------------------------------------------------------------------- output folder


def _task_name(entry: Any) -> str:
    return entry if isinstance(entry, str) else entry.name


def _planned_outputs(out: Path, tasks: list[Any], plots: bool) -> list[Path]:
    files = [out / f for f in FIXED_OUTPUTS]
    if plots:
        files += [out / report.plot_name(_task_name(t)) for t in tasks]
    return files


def _default_out() -> Path:
    base = Path("runs") / time.strftime("evaluate-%Y%m%d-%H%M%S")
    out, i = base, 1
    while out.exists():
        out = base.with_name(f"{base.name}-{i}")
        i += 1
    return out


def _check_paths(cfg: EvaluateConfig, out: Path) -> None:
    """Every folder the evaluation writes, checked before any work (nothing is created).

    A path that is a file, lies under a file or cannot be written is a usage error naming
    the flag: ``--out``, ``--tensorboard`` and ``--baseline-cache`` (the default cache
    folder, not named by the user, stays best effort: a warning, nothing cached).
    """
    from learnopt import _validate

    paths = [("--out", out), ("--tensorboard", cfg.tensorboard)]
    if cfg.use_baseline_cache:
        paths.append(("--baseline-cache", cfg.baseline_cache))
    for flag, path in paths:
        if path is not None:
            try:
                _validate.output_dir(flag, path)
            except ValueError as e:
                raise EvalError(str(e), usage=True) from None


def _meta_train_files(out: Path) -> list[str]:
    """What of a meta-training run ``out`` holds (empty: none)."""
    names = [n + "/" * (out / n).is_dir() for n in META_TRAIN_FILES if (out / n).exists()]
    try:
        config = json.loads((out / "config.json").read_text())
    except (OSError, ValueError):
        config = None
    if isinstance(config, dict) and config.get("command") != "evaluate" and "trainer" in config:
        names.insert(0, "config.json")
    return names


def _earlier_evaluation(out: Path) -> list[Path]:
    """The files of an earlier evaluation in ``out`` (what ``--overwrite`` removes)."""
    if not out.is_dir():
        return []
    files = [out / f for f in FIXED_OUTPUTS if (out / f).is_file()]
    return files + sorted(p for p in out.glob("curves_*.png") if p.is_file())


def _check_out(out: Path, tasks: list[Any], cfg: EvaluateConfig) -> None:
    """Refuses an ``out`` that is a file, holds a meta-training run, or (without
    ``--overwrite``) outputs of an earlier evaluation."""
    if out.exists() and not out.is_dir():
        raise EvalError(f"--out: {out} exists and is not a directory", usage=True)
    held = _meta_train_files(out) if out.is_dir() else []
    if held:
        raise EvalError(
            f"--out: {out} holds a meta-training run ({', '.join(held[:4])}"
            f"{' ...' if len(held) > 4 else ''}): an evaluation never writes into another "
            "kind of run's folder, not even with --overwrite; choose another --out",
            usage=True,
        )
    existing = [p for p in _planned_outputs(out, tasks, cfg.plots) if p.exists()]
    existing += [p for p in _earlier_evaluation(out) if p not in existing]
    if existing and not cfg.overwrite:
        raise EvalError(
            f"--out: {out} already holds {', '.join(p.name for p in existing[:4])}"
            f"{' ...' if len(existing) > 4 else ''} from an earlier run; pass --overwrite to "
            "replace them or choose another --out",
            usage=True,
        )


def _check_data(tasks: list[Any]) -> None:
    """Fails on missing data before anything compiles."""
    from learnopt.tasks import base as tasks_base
    from learnopt.tasks.datasets import base as datasets_base

    for entry in tasks:
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


@contextlib.contextmanager
def _data_dir(path: str | None) -> Iterator[None]:
    """``$LEARNOPT_DATA_DIR`` set to ``path`` for the evaluation (unchanged for None)."""
    from learnopt.tasks.datasets import base as datasets_base

    if path is None:
        yield
        return
    old = os.environ.get(datasets_base.ENV_DATA_DIR)
    os.environ[datasets_base.ENV_DATA_DIR] = str(Path(path).expanduser().absolute())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(datasets_base.ENV_DATA_DIR, None)
        else:
            os.environ[datasets_base.ENV_DATA_DIR] = old


# ------------------------------------------------------------------------- evaluate


@dataclasses.dataclass
class _Done:
    """How far an evaluation got: what :class:`EvaluationInterrupted` reports."""

    out: Path | None = None
    num_tasks: int = 0
    tasks_done: int = 0


def evaluate(config: EvaluateConfig, *, handle_signals: bool = True) -> SuiteResult:
    """Runs ``learnopt evaluate``: trains, compares, writes ``config.out`` and prints.

    Every output folder is checked before any work. The results are rewritten as each
    task finishes; SIGINT and SIGTERM stop the evaluation at once, except while those
    files are written (then right after), keeping the finished tasks.

    Args:
      config: the settings (:class:`~learnopt.evaluation.config.EvaluateConfig`).
      handle_signals: stop on SIGINT/SIGTERM with :class:`EvaluationInterrupted` (main
        thread only; the earlier handlers are restored at the end).

    Returns:
      The :class:`~learnopt.evaluation.results.SuiteResult`.

    Raises:
      EvalError: bad input (``usage``), a run that cannot proceed (missing data) or a
        result that cannot be written.
      EvaluationInterrupted: SIGINT or SIGTERM (also a ``KeyboardInterrupt`` raised
        while it runs), saying how many tasks were written where.
    """
    if not isinstance(config, EvaluateConfig):
        raise TypeError(f"config must be an EvaluateConfig, got {type(config).__name__}")
    done = _Done()
    signals = _Signals(handle_signals)
    try:
        with _data_dir(config.data_dir), signals:
            return _evaluate(config, signals, done)
    except KeyboardInterrupt as e:
        name = getattr(e, "signal", None) or signals.received or "SIGINT"
        raise EvaluationInterrupted(name, done.tasks_done, done.num_tasks, done.out) from None


def _evaluate(cfg: EvaluateConfig, signals: _Signals, done: _Done) -> SuiteResult:
    from learnopt.tasks.datasets import base as datasets_base

    t_start = time.perf_counter()
    out = Path(cfg.out).expanduser() if cfg.out else _default_out()
    _check_paths(cfg, out)
    candidate, cand_info = _candidate(cfg)
    suite_name, tasks = _tasks(cfg)
    _check_out(out, tasks, cfg)
    try:
        baselines = baseline_sweeps(cfg.baselines, cfg.lrs or DEFAULT_LEARNING_RATES)
    except (KeyError, ValueError) as e:
        raise EvalError(f"--baselines: {e}", usage=True) from None
    _check_data(tasks)
    cache_dir = _baseline_cache(cfg)
    board = _tensorboard(cfg)
    if not cfg.quiet:
        names = ", ".join(b.name for b in baselines)
        print(
            f"learnopt evaluate: {candidate.name} vs tuned {names} on {len(tasks)} task"
            f"{'s' if len(tasks) != 1 else ''} ({suite_name}), {cfg.steps} steps x "
            f"{cfg.seeds} seeds -> {out}",
            flush=True,
        )
        where = cache_dir if cache_dir is not None else "off (--no-baseline-cache)"
        print(f"baseline cache: {where}", flush=True)
    cand_info = {**cand_info, "candidate": candidate.name}
    done.out, done.num_tasks = out, len(tasks)
    signals.check()
    if cfg.overwrite:  # the earlier evaluation goes as a whole: no stale task stays
        for path in _earlier_evaluation(out):
            path.unlink(missing_ok=True)

    def write(partial: SuiteResult) -> None:
        """The tasks done so far, written as each one finishes (a killed run keeps them)."""
        n = len(partial.tasks)
        note = "" if n == len(tasks) else f"Partial: {n} of {len(tasks)} tasks done."
        with signals.writing(), _write_errors(out, done):
            out.mkdir(parents=True, exist_ok=True)
            plots = [partial.tasks[-1].task] if cfg.plots else False
            report.write_results(partial, out, plots=plots, note=note)
            _write_config(
                out, cfg, partial, cand_info, suite_name, tasks, baselines, t_start, cache_dir
            )
            done.tasks_done = n
            if board is not None:
                board.add_task(partial)

    try:
        result = evaluate_suite(
            tasks,  # names are built afresh there: reproducible data, cacheable baselines
            candidate,
            baselines,
            num_steps=cfg.steps,
            num_seeds=cfg.seeds,
            select_by=cfg.select_by,
            progress=not cfg.quiet,
            eval_every=cfg.eval_every,
            valid_split=cfg.valid_split,
            valid_batches=cfg.valid_batches,
            seed=cfg.seed,
            vectorize=cfg.vectorize,
            baseline_cache=cache_dir,
            on_task=write,
            check=signals.check,
        )
    except (datasets_base.DatasetNotFoundError, datasets_base.ChecksumMismatchError) as e:
        raise EvalError(
            f"a task's data is not available (--data-dir sets the data dir).\n{e}"
        ) from None
    finally:
        if board is not None:
            board.close()
    with signals.writing(), _write_errors(out, done):
        _write_config(out, cfg, result, cand_info, suite_name, tasks, baselines, t_start, cache_dir)
    print(result.markdown(), flush=True)
    print(f"{time.perf_counter() - t_start:.1f} s; wrote {out}", flush=True)
    return result


@contextlib.contextmanager
def _write_errors(out: Path, done: _Done) -> Iterator[None]:
    """A result that cannot be written (a full disk, ...) as one :class:`EvalError`."""
    try:
        yield
    except OSError as e:
        kept = (
            f"the {done.tasks_done} tasks finished before are in {out}"
            if done.tasks_done
            else "nothing was written"
        )
        what = e.filename or f"the results into {out}"
        raise EvalError(
            f"cannot write {what} ({type(e).__name__}: {e.strerror or e}); {kept}"
        ) from None


def _baseline_cache(cfg: EvaluateConfig) -> Path | None:
    """The baseline cache's folder: ``--baseline-cache``, the default one, or None."""
    from learnopt.evaluation.cache import default_cache_dir

    if not cfg.use_baseline_cache:
        if cfg.baseline_cache is not None:
            raise EvalError(
                "--baseline-cache and --no-baseline-cache exclude each other", usage=True
            )
        return None
    if cfg.baseline_cache is not None:
        return Path(cfg.baseline_cache).expanduser().absolute()
    return default_cache_dir()


def _tensorboard(cfg: EvaluateConfig) -> report.TensorBoardReport | None:
    """The TensorBoard writer of ``--tensorboard`` (None without it)."""
    if cfg.tensorboard is None:
        return None
    try:
        return report.TensorBoardReport(cfg.tensorboard)
    except ImportError as e:
        raise EvalError(str(e)) from None


def _write_config(
    out: Path,
    cfg: EvaluateConfig,
    result: SuiteResult,
    cand_info: dict[str, Any],  # what the candidate is, its name included
    suite_name: str,
    tasks: list[Any],
    baselines: list[Sweep],
    t_start: float,
    cache_dir: Path | None,
) -> None:
    """``config.json``: the settings, the candidate, the tasks, how many are done and how
    long it took."""
    import jax

    config = {"command": "evaluate", **dataclasses.asdict(cfg)}
    config.update(
        cand_info,
        suite=suite_name,
        tasks=[_task_name(t) for t in tasks],
        baselines=[b.name for b in baselines],
        tasks_done=len(result.tasks),
        baseline_cache_dir=None if cache_dir is None else str(cache_dir),
        settings=result.settings,
        out=str(out),
        seconds=round(time.perf_counter() - t_start, 2),
        jax_version=jax.__version__,
        backend=jax.default_backend(),
    )
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str) + "\n")
