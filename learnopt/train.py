"""Meta-training runs: checkpointed, resumable, safe against faults and divergence.

:func:`meta_train` is the meta-training loop that ``learnopt meta-train``, notebooks and
research scripts all call::

    from learnopt import train

    result = train.meta_train(out_dir="runs/adam")              # the notes' walkthrough
    result = train.meta_train(out_dir="runs/adam", resume=True)  # continue it after a kill
    result = train.meta_train(out_dir="runs/adam", resume=True, steps=5000)  # extend it

Settings name registered things (``task="ImageMLP_Digits8_Relu32"``, ``lopt="MLPLOpt"``,
``trainer="pes"``) or are already-built objects (a ``Task``/``TaskFamily``, a
``LearnedOptimizer``, a ``SingleMachineGradientLearner`` as ``learner=``).

**Output folder** (``out_dir``; None writes nothing): ``config.json`` (the settings),
``metrics.csv`` (one row per meta-step: ``step, meta_loss, learning_rate, grad_norm,
num_nonfinite, finite, skipped, update_norm, theta/<name>...``), ``theta.msgpack`` (theta
of the latest checkpoint, then the final theta; :func:`learnopt.checkpoints.load_theta`),
``checkpoints/step_<N>/`` (Orbax), ``meta_loss.png`` and ``learning_rate.png``.

**Checkpoints** hold the whole state: theta, the outer optimizer's state (e.g. Adam's
moments and step), every estimator's state (inner runs, PES accumulators), the step
counter and skipped-step count, and (as JSON) the position of every data iterator; the
per-step PRNG keys are a pure function of the seed and the step. One is written every
``checkpoint_every`` steps, at the end, and when SIGINT or SIGTERM arrives (the current
step finishes first; a second signal stops at once). Writes are atomic and fsynced; the
last ``keep_checkpoints`` are kept. A run resumed from any checkpoint ends with a theta
bit-identical to the uninterrupted run's (same settings, same machine).

**Nothing is overwritten unasked**: a new run refuses an ``out_dir`` that holds a run
(:class:`RunExistsError`); ``resume=True`` continues it, ``overwrite=True`` replaces it.

**Divergence**: a step is applied only if the meta-gradient, the new theta and the new
outer state are finite (``skipped`` column). When more than half of the last
``health_window`` steps were skipped a ``MetaTrainWarning`` is issued; when theta has not
changed for ``health_window`` steps the run stops. Either way the result's ``status`` is
``"diverged"``/``"stalled"`` (``ok`` is False; the CLI exits 1), and theta is the last
finite one.

**Faults**: a checkpoint or metrics write that fails (full disk, unwritable folder) stops
the run with ``status="failed"`` and a one-line ``message``; the previous checkpoint stays
complete and loadable. Leftover temporary files of killed writes are removed at the
next start.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import json
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from learnopt import _validate

__all__ = [
    "meta_train",
    "build_learner",
    "build_task",
    "build_lopt",
    "MetaTrainResult",
    "StepInfo",
    "MetaTrainWarning",
    "RunExistsError",
    "DataUnavailableError",
    "TRAINERS",
    "FULL_TRAINERS",
    "DEFAULT_TASK",
    "DEFAULT_LOPT",
    "BASE_COLUMNS",
    "holds_run",
    "read_metrics",
]

DEFAULT_TASK = "ImageMLP_Digits8_Relu32"
DEFAULT_LOPT = "LearnableAdam"
TRAINERS = {
    "full_grad": "FullGrad: backprop through a whole fresh inner run of T steps (exact)",
    "tbptt": "TruncatedGrad: backprop through K-step truncations of T-step runs (biased)",
    "full_es": "FullES: antithetic ES over a whole fresh inner run of T steps",
    "tes": "TruncatedES: antithetic ES over K-step truncations of T-step runs (biased)",
    "pes": "TruncatedPES: persistent ES over K-step truncations of T-step runs (unbiased)",
    "nres": "NoiseReuseES: noise-reuse ES over K-step truncations of T-step runs (unbiased)",
}
FULL_TRAINERS = ("full_grad", "full_es")
#: Columns of metrics.csv before the ``theta/<name>`` columns.
BASE_COLUMNS = (
    "step",
    "meta_loss",
    "learning_rate",
    "grad_norm",
    "num_nonfinite",
    "finite",
    "skipped",
    "update_norm",
)
#: Settings that define a run: a resumed run must have the same ones.
RUN_SETTINGS = {
    "task": DEFAULT_TASK,
    "families": None,
    "lopt": DEFAULT_LOPT,
    "lopt_config": None,
    "trainer": "full_grad",
    "trunc_length": None,
    "total_length": None,
    "num_tasks": None,
    "std": 0.01,
    "outer_lr": 1e-2,
    "max_grad_norm": None,
    "seed": 0,
}
#: Settings a resumed run may change.
RUN_OPTIONS = {
    "steps": 2000,
    "log_every": 50,
    "checkpoint_every": 500,
    "keep_checkpoints": 3,
    "health_window": 500,
    "data_dir": None,
}
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
THETA_FILE = "theta.msgpack"
PLOT_FILES = ("meta_loss.png", "learning_rate.png")
_RUN_FILES = (CONFIG_FILE, METRICS_FILE, THETA_FILE, *PLOT_FILES)
_CUSTOM = "<object>"


class MetaTrainWarning(UserWarning):
    """A meta-training run that is going wrong (most steps skipped, theta not moving)."""


class RunExistsError(ValueError):
    """``out_dir`` already holds a run and neither ``resume`` nor ``overwrite`` was asked."""


class DataUnavailableError(RuntimeError):
    """The task's data cannot be had (not prepared, corrupted, unreadable)."""


@dataclasses.dataclass
class StepInfo:
    """What callbacks receive after each metrics flush (every ``log_every`` steps)."""

    step: int
    num_steps: int
    state: Any
    learner: Any
    rows: list[dict[str, Any]]
    out_dir: Path | None

    @property
    def theta(self) -> Any:
        return self.learner.get_theta(self.state)


@dataclasses.dataclass
class MetaTrainResult:
    """What :func:`meta_train` returns.

    Attributes:
      status: ``"completed"``, ``"interrupted"`` (SIGINT/SIGTERM), ``"diverged"`` (most
        steps skipped), ``"stalled"`` (theta stopped changing) or ``"failed"`` (a write
        failed); ``message`` says why for all but ``"completed"``.
      step: meta-steps done (including those before a resume); ``num_steps`` asked.
      theta, state, learner: the final theta (last finite one), the whole state.
      columns: metrics.csv as numpy arrays (``NaN`` where a cell is empty).
      checkpoint: the folder of the last checkpoint written, if any.
    """

    out_dir: Path | None
    status: str
    message: str
    step: int
    num_steps: int
    theta: Any
    state: Any
    learner: Any
    columns: dict[str, Any]
    summary: str
    checkpoint: Path | None = None
    signal: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def interrupted(self) -> bool:
        return self.status == "interrupted"

    @property
    def exit_code(self) -> int:
        """The command line's exit status: 0, 130 (SIGINT), 143 (SIGTERM), else 1."""
        if self.status == "completed":
            return 0
        if self.status == "interrupted":
            return 143 if self.signal == "SIGTERM" else 130
        return 1

    def __repr__(self) -> str:
        return (
            f"MetaTrainResult(status={self.status!r}, step={self.step}/{self.num_steps}, "
            f"out_dir={str(self.out_dir) if self.out_dir else None!r})"
        )


# ---------------------------------------------------------------------------- settings


def _name_of(obj: Any) -> str:
    name = getattr(obj, "name", None)
    if callable(name):
        try:
            name = name()
        except TypeError:
            name = None
    return str(name) if isinstance(name, str) else type(obj).__name__


def _check_setting(name: str, value: Any) -> Any:
    """Validates one run setting (names are checked later, against the registries)."""
    if value is None:
        return None
    if name in ("trunc_length", "total_length", "num_tasks"):
        return _validate.positive_int(name, value)
    if name in ("std", "outer_lr"):
        return _validate.positive_float(name, value)
    if name == "max_grad_norm":
        return _validate.optional_positive_float(name, value)
    if name == "seed":
        return _validate.seed(name, value)
    if name == "trainer":
        if not isinstance(value, str):
            raise TypeError(f"trainer must be a name in {sorted(TRAINERS)}, got {value!r}")
        if value not in TRAINERS:
            raise ValueError(f"trainer must be one of {sorted(TRAINERS)}, got {value!r}")
    if name == "families":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not value:
            raise TypeError(f"families must be a non-empty list of family names, got {value!r}")
        if not all(isinstance(v, str) for v in value):
            raise TypeError(f"families must be family names (strings), got {value!r}")
        return list(value)
    if name == "lopt_config":
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise TypeError(f"lopt_config must be a dict of constructor arguments, got {value!r}")
        return dict(value)
    return value


def _check_option(name: str, value: Any) -> Any:
    if name == "steps":
        return _validate.positive_int(name, value)
    if name == "log_every":
        return _validate.positive_int(name, value)
    if name == "checkpoint_every":
        return _validate.non_negative_int(name, value)
    if name == "keep_checkpoints":
        return _validate.positive_int(name, value)
    if name == "health_window":
        return _validate.non_negative_int(name, value)
    if name == "data_dir" and value is not None:
        return str(_validate.readable_dir(name, value).absolute())
    return value


def _resolve_lengths(s: dict[str, Any]) -> None:
    """Fills trunc_length/total_length/num_tasks with the registry's defaults; checks them."""
    from learnopt.outer_trainers import registry

    full = s["trainer"] in FULL_TRAINERS
    if full and s["trunc_length"] is not None:
        raise ValueError(
            f"{s['trainer']} unrolls whole inner runs: set their length with total_length "
            "(trunc_length is the truncation of tbptt/tes/pes/nres)"
        )
    if s["total_length"] is None:
        s["total_length"] = registry.DEFAULT_TOTAL_LENGTH["full" if full else "truncated"]
    if not full:
        if s["trunc_length"] is None:
            s["trunc_length"] = registry.DEFAULT_TRUNC_LENGTH
        if s["trunc_length"] > s["total_length"]:
            raise ValueError(
                f"trunc_length ({s['trunc_length']}, steps per estimate) must be <= "
                f"total_length ({s['total_length']}, the length of an inner run) for the "
                f"truncated trainer {s['trainer']}"
            )
    if s["num_tasks"] is None:
        s["num_tasks"] = 1 if s["trainer"] == "full_grad" else 8


def build_task(task: Any, data_dir: str | os.PathLike | None = None) -> Any:
    """A registered task or task family by name (its data in ``data_dir``), or ``task``."""
    from learnopt.tasks import base as tasks_base
    from learnopt.tasks.datasets import base as datasets_base

    if not isinstance(task, str):
        if not isinstance(task, tasks_base.Task | tasks_base.TaskFamily):
            raise TypeError(
                f"task must be a registered task name, a Task or a TaskFamily, got "
                f"{type(task).__name__}"
            )
        return task
    with datasets_base.using_data_dir(data_dir):
        if task not in tasks_base.TASKS and task in tasks_base.TASK_FAMILIES:
            return tasks_base.TASK_FAMILIES.get(task)
        try:
            return tasks_base.get_task(task)
        except KeyError as e:  # the registry's message lists close matches and known names
            raise ValueError(f"task: {e}") from None


def build_lopt(lopt: Any, config: dict[str, Any] | None = None) -> Any:
    """A registered learned optimizer by name (built with ``config``), or ``lopt``."""
    from learnopt.learned_optimizers import base as lopt_base

    if isinstance(lopt, str):
        try:
            return lopt_base.get_learned_optimizer(lopt, **(config or {}))
        except KeyError as e:
            raise ValueError(f"lopt: {e}") from None
        except TypeError as e:  # an unknown constructor argument
            raise ValueError(f"lopt_config: {lopt}: {e}") from None
    if config:
        raise ValueError("lopt_config applies to a learned optimizer given by name, not an object")
    if not isinstance(lopt, lopt_base.LearnedOptimizer):
        raise TypeError(
            f"lopt must be a registered learned optimizer name or a LearnedOptimizer, got "
            f"{type(lopt).__name__}"
        )
    return lopt


def build_learner(
    *,
    task: Any = DEFAULT_TASK,
    lopt: Any = DEFAULT_LOPT,
    trainer: str = "full_grad",
    trunc_length: int | None = None,
    total_length: int | None = None,
    num_tasks: int | None = None,
    std: float = 0.01,
    outer_lr: float = 1e-2,
    max_grad_norm: float | None = None,
    steps: int | None = None,
    theta_opt: Any = None,
    data_dir: str | os.PathLike | None = None,
    mesh: Any = None,
) -> Any:
    """The :class:`SingleMachineGradientLearner` that :func:`meta_train` would build.

    ``trainer`` names a registered estimator (``outer_trainers.registry.ESTIMATORS``);
    ``task`` may be a list of tasks / families (one estimator each, their estimates
    averaged); the outer optimizer is ``theta_opt`` or ``opt_base.Adam(outer_lr)``;
    ``mesh`` as :func:`meta_train`'s.
    """
    from learnopt.optimizers import base as opt_base
    from learnopt.outer_trainers import gradient_learner, registry

    s = {
        "trainer": _check_setting("trainer", trainer),
        "trunc_length": _check_setting("trunc_length", trunc_length),
        "total_length": _check_setting("total_length", total_length),
        "num_tasks": _check_setting("num_tasks", num_tasks),
    }
    _resolve_lengths(s)
    std = _check_setting("std", std)
    tasks = list(task) if isinstance(task, list | tuple) else [task]
    if not tasks:
        raise ValueError("task: an empty list of tasks")
    tasks, lopt = [build_task(t, data_dir) for t in tasks], build_lopt(lopt)
    estimators = [
        registry.make_estimator(
            s["trainer"],
            t,
            lopt,
            num_tasks=s["num_tasks"],
            trunc_length=None if s["trainer"] in FULL_TRAINERS else s["trunc_length"],
            total_length=s["total_length"],
            std=std,
        )
        for t in tasks
    ]
    mesh = _resolve_mesh(mesh)
    for est in estimators if mesh is not None else ():
        if getattr(est, "stack_antithetic_samples", False):
            # Split over devices, a stacked +/- population is resharded at every step
            # (dozens of collectives); unstacked, each device keeps its pairs. Same maths.
            est.stack_antithetic_samples = False
    if theta_opt is None:
        theta_opt = opt_base.Adam(_check_setting("outer_lr", outer_lr))
    return gradient_learner.SingleMachineGradientLearner(
        lopt,
        estimators,
        theta_opt,
        num_steps=steps,
        max_grad_norm=_check_setting("max_grad_norm", max_grad_norm),
        mesh=mesh,
    )


def _resolve_mesh(mesh: Any) -> Any:
    """``mesh=``: None (one device; every device of every process in a multi-process
    run), ``"all"`` (every device of every process) or a ``jax.sharding.Mesh``."""
    import jax

    from learnopt import distributed

    if mesh is None:
        return distributed.population_mesh() if jax.process_count() > 1 else None
    if isinstance(mesh, str):
        if mesh != "all":
            raise ValueError(f"mesh must be None, 'all' or a jax.sharding.Mesh, got {mesh!r}")
        return distributed.population_mesh()
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"mesh must be None, 'all' or a jax.sharding.Mesh, got {mesh!r}")
    return mesh


# ------------------------------------------------------------------------- run folder


def holds_run(out_dir: str | os.PathLike) -> bool:
    """Whether ``out_dir`` holds (part of) a meta-training run."""
    from learnopt import checkpoints

    out = Path(out_dir)
    return (
        any((out / f).exists() for f in (CONFIG_FILE, METRICS_FILE, THETA_FILE))
        or (out / checkpoints.CHECKPOINT_DIR).exists()
    )


def _remove_run(out: Path) -> None:
    from learnopt import checkpoints

    for name in _RUN_FILES:
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / checkpoints.CHECKPOINT_DIR, ignore_errors=True)


def _clean_temporaries(out: Path) -> list[Path]:
    """Removes temporary files that killed writes left behind (ours and Orbax's)."""
    from learnopt import checkpoints

    removed = []
    for p in out.glob(".*.tmp*"):
        if p.is_file() and p.name[1:].split(".tmp")[0] in _RUN_FILES:
            p.unlink(missing_ok=True)
            removed.append(p)
    ck = out / checkpoints.CHECKPOINT_DIR
    if ck.is_dir():
        for p in ck.glob("*.orbax-checkpoint-tmp*"):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _read_config(out: Path) -> dict[str, Any]:
    path = out / CONFIG_FILE
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"resume: {out} holds no run to resume (no {CONFIG_FILE}); start a new run "
            "without resume"
        ) from None
    except (OSError, ValueError) as e:
        raise ValueError(f"resume: {path} cannot be read ({e})") from None
    if not isinstance(config, dict):
        raise ValueError(f"resume: {path} is not a run's config (expected a JSON object)")
    return config


def _write_json(path: Path, data: dict[str, Any]) -> None:
    from learnopt import checkpoints

    checkpoints.write_atomic(path, (json.dumps(data, indent=2, default=str) + "\n").encode())


class _MetricsFile:
    """metrics.csv: rows appended every flush, fsynced before each checkpoint."""

    def __init__(self, path: Path, columns: list[str]):
        self.path = path
        self.columns = columns
        self._file: io.TextIOWrapper | None = None
        self._writer: Any = None

    def open(self, keep_rows: int) -> list[list[str]]:
        """Keeps the header and the first ``keep_rows`` rows (a resume); returns them."""
        from learnopt import checkpoints

        rows: list[list[str]] = []
        if keep_rows and self.path.exists():
            with open(self.path, newline="") as f:
                reader = csv.reader(f)
                header = next(reader, None)
                if header != self.columns:
                    raise ValueError(
                        f"resume: {self.path} has columns {header}, this run writes {self.columns}"
                    )
                for row in reader:
                    if len(rows) == keep_rows:
                        break
                    if len(row) == len(self.columns):
                        rows.append(row)
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(self.columns)
        writer.writerows(rows)
        checkpoints.write_atomic(self.path, buf.getvalue().encode())
        self._file = open(self.path, "a", newline="")
        self._writer = csv.writer(self._file)
        return rows

    def write(self, rows: list[list[str]]) -> None:
        self._writer.writerows(rows)
        self._file.flush()

    def sync(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


def read_metrics(path: str | os.PathLike) -> dict[str, Any]:
    """metrics.csv as ``{column: float64 array}`` (empty cells are NaN)."""
    import numpy as np

    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        data = [row for row in reader if len(row) == len(header)]
    cols: dict[str, Any] = {}
    for i, name in enumerate(header):
        cols[name] = np.asarray([float(r[i]) if r[i] != "" else np.nan for r in data])
    return cols


# -------------------------------------------------------------------------- data state


def _datasets_of(learner: Any) -> list[Any]:
    out, seen = [], set()
    for est in learner.gradient_estimators:
        family = getattr(est, "task_family", None)
        ds = getattr(family, "datasets", None)
        if ds is not None and id(ds) not in seen:
            seen.add(id(ds))
            out.append(ds)
    return out


def _data_state(learner: Any) -> tuple[list[Any], list[str]]:
    """Every split's ``get_state()`` (None where a split cannot report one), and those."""
    from learnopt.tasks.datasets import base as datasets_base

    states, missing = [], []
    for i, ds in enumerate(_datasets_of(learner)):
        entry = {}
        for split in datasets_base.SPLITS:
            it = getattr(ds, split, None)
            try:
                entry[split] = it.get_state()
            except (AttributeError, TypeError, NotImplementedError):
                entry[split] = None
                missing.append(f"datasets[{i}].{split} ({type(it).__name__})")
        states.append(entry)
    return states, missing


def _set_data_state(learner: Any, states: list[Any]) -> None:
    datasets = _datasets_of(learner)
    if len(states) != len(datasets):
        raise ValueError(
            f"the checkpoint has data positions of {len(states)} datasets, this run has "
            f"{len(datasets)}"
        )
    for ds, entry in zip(datasets, states, strict=True):
        for split, st in entry.items():
            if st is not None:
                getattr(ds, split).set_state(st)


# ----------------------------------------------------------------------------- signals


class _Signals:
    """SIGINT/SIGTERM: the first asks the loop to stop after its step; a second acts at once."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.received: str | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signal.Signals(signum).name
        for sig, old in self._old.items():  # a second signal gets the usual behaviour
            signal.signal(sig, old)
        print(
            f"\nlearnopt: {self.received} received: finishing this meta-step and writing a "
            "checkpoint (send it again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    def __enter__(self) -> _Signals:
        if self.enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.getsignal(sig)
                signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old.clear()


# ------------------------------------------------------------------------------ health


class _Health:
    """Tracks skipped steps and steps where theta did not change."""

    def __init__(self, window: int):
        self.window = window
        self.recent: collections.deque = collections.deque(maxlen=max(1, window))
        self.skipped_total = 0
        self.steps = 0
        self.still = 0  # consecutive steps where theta did not change
        self.last_moved = 0  # the last step that changed theta
        self._warned = False

    def add(self, step: int, skipped: bool, update_norm: float) -> None:
        self.steps = step
        self.recent.append(bool(skipped))
        self.skipped_total += bool(skipped)
        moved = (not skipped) and update_norm != 0.0
        if moved:
            self.still, self.last_moved = 0, step
        else:
            self.still += 1

    def warning(self) -> str | None:
        """A warning the first time most recent steps were skipped (again after recovery)."""
        if not self.window or len(self.recent) < min(self.window, 20):
            return None
        frac = sum(self.recent) / len(self.recent)
        if frac > 0.5 and not self._warned:
            self._warned = True
            return (
                f"{sum(self.recent)} of the last {len(self.recent)} meta-steps were skipped "
                f"(non-finite meta-gradient, theta or outer state; step {self.steps}); theta "
                "stays at its last finite value. Try a smaller outer learning rate or "
                "max_grad_norm."
            )
        if frac <= 0.25:
            self._warned = False
        return None

    def stop_reason(self) -> tuple[str, str] | None:
        """``(status, message)`` when theta has not changed for ``window`` steps."""
        if not self.window or self.still < self.window:
            return None
        all_skipped = len(self.recent) == self.recent.maxlen and all(self.recent)
        if all_skipped:
            return "diverged", (
                f"meta-training diverged: every meta-step since step {self.last_moved} was "
                f"skipped as non-finite ({self.still} steps); theta is the last finite one "
                f"(step {self.last_moved}). Try a smaller outer learning rate or max_grad_norm."
            )
        return "stalled", (
            f"meta-training stalled: theta has not changed for {self.still} meta-steps "
            f"(since step {self.last_moved})"
        )

    def final(self) -> tuple[str, str] | None:
        if self.steps and self.skipped_total * 2 > self.steps:
            return "diverged", (
                f"meta-training diverged: {self.skipped_total} of {self.steps} meta-steps were "
                "skipped as non-finite; theta is the last finite one. Try a smaller outer "
                "learning rate or max_grad_norm."
            )
        return self.stop_reason()


# ------------------------------------------------------------------------------- keys


class _StepKeys:
    """The PRNG key of meta-step ``i``: ``split(fold_in(key, i // BLOCK), BLOCK)[i % BLOCK]``.

    A pure function of the key and the step (so a resumed run draws the same keys), split
    in blocks on the device and indexed on the host; memory bounded for any run length.
    """

    BLOCK = 4096

    def __init__(self, key: Any):
        self._key = key
        self._block = -1
        self._keys: Any = None

    def __getitem__(self, i: int) -> Any:
        import jax
        import numpy as np

        block, offset = divmod(int(i), self.BLOCK)
        if block != self._block:
            folded = jax.random.fold_in(self._key, block)
            self._keys = np.asarray(jax.random.split(folded, self.BLOCK))
            self._block = block
        return self._keys[offset]


# ------------------------------------------------------------------------------- loop


def _fmt(value: Any) -> str:
    """A CSV cell: floats with ``repr`` (round-trips float32 exactly), '' for missing."""
    if value is None:
        return ""
    return repr(value) if isinstance(value, float | int) else str(value)


def _scalar(value: Any) -> float | int | None:
    if value is None:
        return None
    v = value.item() if hasattr(value, "item") else value
    return int(v) if isinstance(v, bool) else v


def _theta_columns(theta: Any) -> list[str]:
    if not isinstance(theta, dict):
        return []
    return sorted(f"theta/{k}" for k, v in theta.items() if getattr(v, "shape", None) == ())


def _window_mean(values: Any, window: int, last: bool) -> float:
    import numpy as np

    values = np.asarray(values, np.float64)
    part = values[-window:] if last else values[:window]
    part = part[np.isfinite(part)]
    return float(part.mean()) if part.size else float("nan")


def _summary(name: str, cols: dict[str, Any], elapsed: float, out: Path | None) -> str:
    import numpy as np

    meta_loss = cols.get("meta_loss", np.zeros(0))
    n = len(meta_loss)
    if not n:
        return f"{name}: no meta-step done"
    window = max(1, min(100, n // 10))
    first, last = _window_mean(meta_loss, window, False), _window_mean(meta_loss, window, True)
    text = (
        f"{name}: meta-loss {first:.4f} -> {last:.4f} (mean of the first/last {window} "
        f"step{'s' if window > 1 else ''})"
    )
    lr = cols.get("learning_rate")
    if lr is not None and np.all(np.isfinite(lr)):
        text += f", learning rate {lr[0]:.3g} -> {lr[-1]:.3g}"
    skipped = int(np.nansum(cols["skipped"])) if "skipped" in cols else 0
    text += f", {skipped} non-finite step{'s' if skipped != 1 else ''} skipped; {n} steps"
    text += f" ({elapsed:.1f} s this session)"
    if out is not None:
        text += f"; wrote {out}"
    return text


def meta_train(
    *,
    task: Any = None,
    families: Sequence[str] | None = None,
    lopt: Any = None,
    lopt_config: dict[str, Any] | None = None,
    trainer: str | None = None,
    trunc_length: int | None = None,
    total_length: int | None = None,
    num_tasks: int | None = None,
    std: float | None = None,
    outer_lr: float | None = None,
    max_grad_norm: float | None = None,
    seed: int | None = None,
    learner: Any = None,
    theta_opt: Any = None,
    steps: int | None = None,
    out_dir: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    data_dir: str | os.PathLike | None = None,
    log_every: int | None = None,
    checkpoint_every: int | None = None,
    keep_checkpoints: int | None = None,
    health_window: int | None = None,
    plots: bool = True,
    progress: bool = True,
    callbacks: Sequence[Callable[[StepInfo], Any]] = (),
    handle_signals: bool = True,
    mesh: Any = None,
) -> MetaTrainResult:
    """Meta-trains a learned optimizer; checkpoints, resumes, survives faults.

    Arguments left as None take their default, or, with ``resume=True``, the resumed
    run's value (an explicit value that differs from the run's raises ``ValueError``).

    Args:
      task: a registered task or task family name (default ``ImageMLP_Digits8_Relu32``),
        or a ``Task``/``TaskFamily``.
      families: instead of ``task``, registered task family (or task) names, one
        gradient estimator each, their estimates averaged every meta-step; a mixture's
        name (``"meta-train"``) stands for its buckets (:func:`learnopt.recipes.expand_families`).
      lopt: a registered learned optimizer name (default ``LearnableAdam``) or a
        ``LearnedOptimizer``. A name is built with the architecture's meta-training
        defaults (:data:`learnopt.recipes.LOPT_DEFAULTS`, e.g. ``MLPLOpt``'s
        ``step_mult=0.01``) updated by ``lopt_config``; an architecture with defaults
        there also brings its training settings
        (:data:`learnopt.recipes.TRAINING_DEFAULTS`: outer_lr, max_grad_norm and, for
        the truncated trainers, trunc_length, total_length, num_tasks, std) wherever
        they are not given.
      lopt_config: constructor arguments of a learned optimizer given by name.
      trainer: the gradient estimator: ``full_grad`` (default), ``tbptt``, ``full_es``,
        ``tes``, ``pes``, ``nres`` (see :data:`TRAINERS`).
      trunc_length: inner steps per estimate of the truncated trainers (default 4).
      total_length: length of an inner run (default 4 for full_grad/full_es, else 200).
      num_tasks: inner runs per meta-step (default 1 for full_grad, else 8).
      std: ES perturbation standard deviation (default 0.01).
      outer_lr: learning rate of the outer ``Adam`` on theta (default 1e-2).
      max_grad_norm: clip the meta-gradient to this global norm (default: no clipping).
      seed: the run's seed, an integer in ``[0, 2**32)`` (default 0).
      learner: an already-built ``SingleMachineGradientLearner`` (instead of task, lopt,
        trainer and their lengths, std, outer_lr, max_grad_norm).
      theta_opt: an outer optimizer instead of ``Adam(outer_lr)``.
      steps: total meta-steps of the run (default 2000); a resumed run may be extended.
      out_dir: the output folder (None: write nothing, no checkpoints).
      resume: continue the run in ``out_dir`` from its latest checkpoint.
      overwrite: replace the run in ``out_dir`` (its files and checkpoints).
      data_dir: the TFDS data dir of tasks given by name (default ``$LEARNOPT_DATA_DIR``).
      log_every: fetch metrics and append them to metrics.csv every N steps (default 50).
      checkpoint_every: checkpoint every N steps (default 500; 0: only at the end and on
        signals).
      keep_checkpoints: checkpoints to keep (default 3).
      health_window: stop when theta has not changed for this many steps, and warn when
        more than half of the last this-many steps were skipped (default 500; 0: off).
      plots: write meta_loss.png and learning_rate.png at the end.
      progress: show a progress bar (stderr) and print the summary.
      callbacks: called with a :class:`StepInfo` after each metrics flush.
      handle_signals: turn SIGINT/SIGTERM into "checkpoint and stop" (main thread only).
      mesh: the devices the population is split over: None (default) one device, or in
        a multi-process run (after :func:`learnopt.distributed.initialize`) every device
        of every process; ``"all"`` every device (e.g. the GPUs of one host); or a
        one-axis ``jax.sharding.Mesh``. ``num_tasks`` must be a multiple of its size. Not
        a setting of the run: a run may resume on other devices or processes. In a
        multi-process run every process calls ``meta_train`` with the same arguments
        (checked; ``data_dir`` may differ); process 0's ``out_dir`` is the run's and only
        process 0 reads or writes it; callbacks run on every process (see
        :mod:`learnopt.distributed`).

    Returns:
      a :class:`MetaTrainResult`; check ``result.ok`` (or ``status``).

    Raises:
      ValueError / TypeError: bad arguments (naming the argument), a resume whose settings
        differ, a corrupted or mismatched checkpoint (:class:`RunExistsError` when
        ``out_dir`` holds a run and neither ``resume`` nor ``overwrite`` is set).
      DataUnavailableError: the task's data is missing, corrupted or unreadable.
    """
    given = {
        "task": task,
        "families": families,
        "lopt": lopt,
        "lopt_config": lopt_config,
        "trainer": trainer,
        "trunc_length": trunc_length,
        "total_length": total_length,
        "num_tasks": num_tasks,
        "std": std,
        "outer_lr": outer_lr,
        "max_grad_norm": max_grad_norm,
        "seed": seed,
    }
    options = {
        "steps": steps,
        "log_every": log_every,
        "checkpoint_every": checkpoint_every,
        "keep_checkpoints": keep_checkpoints,
        "health_window": health_window,
        "data_dir": data_dir,
    }
    for flag, value in (
        ("resume", resume),
        ("overwrite", overwrite),
        ("plots", plots),
        ("progress", progress),
        ("handle_signals", handle_signals),
    ):
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be True or False, got {value!r}")
    if resume and overwrite:
        raise ValueError("resume and overwrite exclude each other: continue the run or replace it")
    if resume and out_dir is None:
        raise ValueError("resume needs out_dir: the folder of the run to continue")
    for name, value in given.items():
        if name not in ("task", "lopt"):
            given[name] = _check_setting(name, value)
    if given["task"] is not None and given["families"] is not None:
        raise ValueError("task and families exclude each other: pass one of them")
    for name, value in options.items():
        options[name] = None if value is None else _check_option(name, value)
    callbacks = list(callbacks)
    for cb in callbacks:
        if not callable(cb):
            raise TypeError(f"callbacks must be callables taking a StepInfo, got {cb!r}")
    if learner is not None:
        clash = [k for k, v in given.items() if k != "seed" and v is not None]
        if clash or theta_opt is not None:
            raise ValueError(
                f"learner= already defines {', '.join(clash or ['theta_opt'])}: pass either "
                "a learner or the settings that build one"
            )
    if theta_opt is not None and given["outer_lr"] is not None:
        raise ValueError("theta_opt= replaces outer_lr: pass one of them")
    if learner is not None:
        _check_learner_mesh(learner, mesh)
    _check_same_everywhere(given, options, resume, overwrite, learner, theta_opt, mesh)

    out, saved = _prepare_out_dir_once(out_dir, resume, overwrite)
    settings, options, custom = _resolve_settings(given, options, saved, learner, theta_opt)
    if learner is None:
        if settings["families"]:
            from learnopt import recipes

            task_obj = [
                build_task(f, options["data_dir"])
                for f in recipes.expand_families(settings["families"])
            ]
        else:
            task_obj = build_task(_first(given["task"], settings["task"]), options["data_dir"])
        lopt_obj = build_lopt(_first(given["lopt"], settings["lopt"]), settings["lopt_config"])
        for name, obj in (("task", task_obj), ("lopt", lopt_obj)):
            if name in custom:
                settings[name] = _name_of(obj)
        learner = build_learner(
            task=task_obj,
            lopt=lopt_obj,
            **{k: settings[k] for k in ("trainer", "trunc_length", "total_length", "num_tasks")},
            std=settings["std"],
            outer_lr=None if theta_opt is not None else settings["outer_lr"],
            max_grad_norm=settings["max_grad_norm"],
            steps=options["steps"],
            theta_opt=theta_opt,
            mesh=mesh,
        )
        if theta_opt is not None:
            settings["outer_lr"] = _name_of(theta_opt)
    else:
        estimators = learner.gradient_estimators
        settings["task"] = ",".join(e.task_name() for e in estimators)
        settings["lopt"] = _name_of(learner.lopt)
        settings["trainer"] = ",".join(e.name for e in estimators)
    from learnopt import distributed

    distributed.check_everywhere(_check_data, learner)  # every process loads its own data
    if out is not None:

        def prepare() -> None:
            if overwrite and holds_run(out):
                _remove_run(out)
            _validate.writable_dir("out_dir", out)
            _clean_temporaries(out)

        distributed.run_on_primary(prepare, errors=(RunExistsError,))
    run = _Run(learner, settings, options, custom, out, resume, callbacks, progress)
    try:
        run.start()
    except BaseException:
        if run.ckpt is not None:
            run.ckpt.close()
        if run.metrics_file is not None:
            run.metrics_file.close()
        raise
    run.loop(handle_signals)
    return run.finish(plots)


def _first(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _check_learner_mesh(learner: Any, mesh: Any) -> None:
    import jax

    from learnopt import distributed

    if mesh is not None:
        raise ValueError("learner= brings its own mesh: pass mesh= to its constructor instead")
    if jax.process_count() > 1 and not distributed.spans_processes(getattr(learner, "mesh", None)):
        raise ValueError(
            "learner: in a multi-process run the learner's mesh must span the devices of "
            "every process (mesh=learnopt.distributed.population_mesh()); otherwise each "
            "process would repeat the whole run"
        )


def _check_same_everywhere(given, options, resume, overwrite, learner, theta_opt, mesh) -> None:
    """Several processes: they must all run the same meta_train (else they would wait for
    each other in different collectives forever). ``data_dir`` may differ per host and
    ``out_dir`` is process 0's."""
    from learnopt import distributed

    def describe(value: Any) -> Any:
        if value is None or isinstance(value, str | int | float | bool):
            return value
        if isinstance(value, list | tuple):
            return [describe(v) for v in value]
        if isinstance(value, dict):
            return {k: describe(v) for k, v in value.items()}
        return f"<{_name_of(value)}>"

    call = dict(given, **{k: v for k, v in options.items() if k != "data_dir"})
    call.update(resume=resume, overwrite=overwrite, learner=learner, theta_opt=theta_opt)
    call["mesh"] = getattr(mesh, "shape", mesh)
    distributed.check_same(describe(call), "the meta_train arguments")


def _prepare_out_dir_once(
    out_dir: Any, resume: bool, overwrite: bool
) -> tuple[Path | None, dict[str, Any]]:
    """:func:`_prepare_out_dir` on process 0 (the only one that reads ``out_dir``); the
    other processes take its ``out_dir`` (theirs is ignored)."""
    from learnopt import distributed

    def prepare() -> dict[str, Any]:
        out, saved = _prepare_out_dir(out_dir, resume, overwrite)
        return {"out": None if out is None else str(out), "saved": saved}

    reply = distributed.run_on_primary(prepare, errors=(RunExistsError,))
    return (None if reply["out"] is None else Path(reply["out"])), reply["saved"]


def _prepare_out_dir(
    out_dir: Any, resume: bool, overwrite: bool
) -> tuple[Path | None, dict[str, Any]]:
    """The output folder and, when resuming, its run's config; refuses to replace a run."""
    if out_dir is None:
        return None, {}
    out = _validate._path("out_dir", out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a directory")
    if resume:
        if not out.is_dir():
            raise ValueError(f"resume: there is no run at {out} (no such folder)")
        return out, _read_config(out)
    if out.is_dir() and holds_run(out) and not overwrite:
        raise RunExistsError(
            f"out_dir: {out} already holds a meta-training run; pass resume=True (--resume) to "
            "continue it or overwrite=True (--overwrite) to replace it"
        )
    return out, {}


def _resolve_settings(
    given: dict[str, Any],
    options: dict[str, Any],
    saved: dict[str, Any],
    learner: Any,
    theta_opt: Any,
) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """Each setting: explicit, else the resumed run's, else the default.

    Settings given as objects (a Task, a learner, ...) are recorded as "custom": resuming
    such a run needs the same objects again. A resumed run's settings cannot change.
    """
    settings: dict[str, Any] = {}
    custom = set(saved.get("custom", ()))
    recipe = _recipe_settings(given, saved) if learner is None else {}
    for name, default in RUN_SETTINGS.items():
        if name == "lopt_config":
            continue
        default = recipe.get(name, default)
        value = given[name]
        is_object = name in ("task", "lopt") and value is not None and not isinstance(value, str)
        if (learner is not None and name != "seed") or (
            theta_opt is not None and name == "outer_lr"
        ):
            value, is_object = _CUSTOM, True
        if saved:
            old = saved.get(name, default)
            if name in custom:
                if not is_object:
                    raise ValueError(
                        f"resume: this run was started with a custom {name} object; pass the "
                        f"same {name}= (or learner=) again to resume it"
                    )
            elif is_object:
                raise ValueError(
                    f"resume: this run was started with {name}={old!r}; pass that, not an object"
                )
            elif value is not None and value != old:
                raise ValueError(
                    f"resume: {name}={value!r} differs from the run's {name}={old!r}; a resumed "
                    "run keeps its settings (start a new run to change them)"
                )
            value = old if value is None else value
        settings[name] = default if value is None else value
        if is_object:
            custom.add(name)
    settings["lopt_config"] = _resolve_lopt_config(given, saved, settings, learner, custom)
    if settings["families"]:
        settings["task"] = None
    options = {
        name: options[name] if options[name] is not None else saved.get(name, default)
        for name, default in RUN_OPTIONS.items()
    }
    if learner is None:
        _resolve_lengths(settings)
    return settings, options, custom


def _recipe_settings(given: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """The training settings that go with the run's architecture (see learnopt.recipes)."""
    from learnopt import recipes

    lopt = _first(given["lopt"], saved.get("lopt", RUN_SETTINGS["lopt"]))
    if not isinstance(lopt, str):
        return {}
    trainer = _first(given["trainer"], saved.get("trainer", RUN_SETTINGS["trainer"]))
    return recipes.training_defaults(lopt, trainer)


def _resolve_lopt_config(
    given: dict[str, Any],
    saved: dict[str, Any],
    settings: dict[str, Any],
    learner: Any,
    custom: set[str],
) -> dict[str, Any] | None:
    """The constructor arguments of a learned optimizer given by name.

    A new run: the architecture's defaults (``learnopt.recipes.LOPT_DEFAULTS``) updated
    by ``lopt_config``. A resumed run keeps its own (``{}``, the constructor's defaults,
    for runs written before lopt_config was recorded); a ``lopt_config`` that would
    change it is refused.
    """
    from learnopt import recipes

    if learner is not None or "lopt" in custom or not isinstance(settings["lopt"], str):
        if given["lopt_config"]:
            raise ValueError(
                "lopt_config applies to a learned optimizer given by name, not an object"
            )
        return None
    if saved:
        old = saved.get("lopt_config") or {}
        if given["lopt_config"] is not None and {**old, **given["lopt_config"]} != old:
            raise ValueError(
                f"resume: lopt_config={given['lopt_config']!r} differs from the run's "
                f"lopt_config={old!r}; a resumed run keeps its settings"
            )
        return dict(old)
    return {**recipes.lopt_defaults(settings["lopt"]), **(given["lopt_config"] or {})}


class _Run:
    """One session of a run: starts (fresh or from a checkpoint), loops, finishes."""

    def __init__(self, learner, settings, options, custom, out, resume, callbacks, progress):
        self.learner = learner
        self.settings = settings
        self.options = options
        self.custom = custom
        self.out: Path | None = out
        self.resume = resume
        self.callbacks = callbacks
        self.progress = progress
        self.num_steps = options["steps"]
        self.desc = f"{_name_of(learner.lopt)} on " + ", ".join(
            e.task_name() for e in learner.gradient_estimators
        )
        self.t_start = time.perf_counter()
        self.status, self.message, self.signal = "completed", "", None
        self.ckpt: Any = None
        self.last_ckpt: Path | None = None
        self.metrics_file: _MetricsFile | None = None
        self.history: dict[str, list] | None = None
        self.health = _Health(options["health_window"])
        self.pending: list[dict] = []
        self.step = 0
        from learnopt import distributed

        # A multi-process run: every process runs this loop in lockstep; process 0 alone
        # writes out_dir, shows progress and judges health (it has the whole history).
        self.multi = distributed.process_count() > 1
        self.primary = distributed.is_primary()
        if not self.primary:
            self.progress = False
            self.health = _Health(0)

    # ------------------------------------------------------------------------- start
    def start(self) -> None:
        import jax

        from learnopt import checkpoints, distributed

        learner, out = self.learner, self.out
        k_init, k_loop = jax.random.split(jax.random.PRNGKey(self.settings["seed"]))
        self.step_keys = _StepKeys(k_loop)
        try:
            self.state = learner.init(k_init)  # prepares and loads the data on first use
        except Exception as e:
            _raise_data_error(learner, e, self.options["data_dir"])
            raise
        if out is not None:
            self.ckpt = checkpoints.RunCheckpointer(
                out / checkpoints.CHECKPOINT_DIR, keep=self.options["keep_checkpoints"]
            )
            latest = distributed.run_on_primary(self.ckpt.latest_step) if self.resume else None
            if latest is not None:
                if latest > self.num_steps:
                    raise ValueError(
                        f"steps must be >= the step of the run's latest checkpoint ({latest}), "
                        f"got {self.num_steps}"
                    )
                self.state, meta = self._restore(latest)
                try:
                    _set_data_state(learner, meta.get("data", []))
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    raise checkpoints.CheckpointError(
                        f"checkpoint {self.ckpt.path(latest)} does not match this run's data: {e}"
                    ) from None
                self.step, self.last_ckpt = latest, self.ckpt.path(latest)
            _, not_resumable = _data_state(learner)
            if not_resumable:
                warnings.warn(
                    "a resumed run will not draw the same batches: these data iterators cannot "
                    f"report their position (no get_state/set_state): {', '.join(not_resumable)}",
                    MetaTrainWarning,
                    stacklevel=3,
                )
        self.columns = list(BASE_COLUMNS) + _theta_columns(learner.get_theta(self.state))
        self.wanted = [c for c in self.columns if c != "step"]
        if out is None or not self.primary:
            self.history = {c: [] for c in self.columns}
            return
        mesh = getattr(learner, "mesh", None)
        config = dict(self.settings, **self.options)
        config.update(
            custom=sorted(self.custom),
            out=str(out),
            learnopt_version=_version(),
            jax_version=jax.__version__,
            backend=jax.default_backend(),
            processes=jax.process_count(),
            devices=1 if mesh is None else int(mesh.size),
        )
        _write_json(out / CONFIG_FILE, config)
        self.metrics_file = _MetricsFile(out / METRICS_FILE, self.columns)
        i_skip, i_norm = self.columns.index("skipped"), self.columns.index("update_norm")
        for row in self.metrics_file.open(self.step):
            self.health.add(int(row[0]), row[i_skip] == "1", float(row[i_norm] or 0.0))
        if self.health.steps != self.step:
            warnings.warn(
                f"{METRICS_FILE} holds {self.health.steps} rows, the checkpoint is at step "
                f"{self.step}: the missing rows are lost",
                MetaTrainWarning,
                stacklevel=3,
            )
            self.health.steps = self.step

    # -------------------------------------------------------------------------- loop
    def loop(self, handle_signals: bool) -> None:
        # tqdm.auto only for a visible bar: in Jupyter without ipywidgets importing it warns.
        if self.progress:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm

        if self.progress:
            where = f", writing {self.out}" if self.out else ""
            print(
                f"learnopt meta-train: {self.desc} ({self.settings['trainer']}), steps "
                f"{self.step} -> {self.num_steps}{where}",
                flush=True,
            )
        self.bar = tqdm(
            total=self.num_steps,
            initial=self.step,
            desc="meta-train",
            unit="step",
            disable=not self.progress,
            file=sys.stderr,
            dynamic_ncols=True,
            mininterval=0.5,
        )
        self.bar.set_postfix_str("compiling...")
        log_every, every = self.options["log_every"], self.options["checkpoint_every"]
        with _Signals(handle_signals) as signals:
            try:
                while self.step < self.num_steps and self.status == "completed":
                    self.state, _, metrics = self.learner.update(
                        self.state, self.step_keys[self.step]
                    )
                    self.step += 1
                    self.pending.append({k: metrics[k] for k in self.wanted if k in metrics})
                    stop = False
                    # Several processes act on a signal at the next flush, all at one step.
                    flush = (
                        self.step % log_every == 0
                        or self.step == self.num_steps
                        or (signals.received and not self.multi)
                    )
                    if flush:
                        if not self._write(self._flush, METRICS_FILE):
                            break
                        reason = self.health.stop_reason()
                        if reason:
                            self.status, self.message = reason
                            stop = True
                    if signals.received and (flush or not self.multi):
                        self.signal = signals.received
                        self.status = "interrupted"
                        self.message = (
                            f"interrupted by {self.signal} after step {self.step} of "
                            f"{self.num_steps}"
                        )
                        stop = True
                    if flush and self.multi:
                        stop = self._agree() or stop
                    periodic = every and self.step % every == 0 and self.step < self.num_steps
                    if self.ckpt is not None and (stop or periodic):
                        if not self._write(self._checkpoint, "a checkpoint"):
                            break
            except KeyboardInterrupt:
                # A second Ctrl-C: `state` and `pending` both end at the last finished step.
                self.status, self.signal = "interrupted", "SIGINT"
                self.message = (
                    f"interrupted after step {self.step} of {self.num_steps}; the last "
                    "checkpoint is kept, this step was not checkpointed"
                )
                try:
                    self._flush(agree=False)
                except OSError:
                    pass
            finally:
                self.bar.close()

    def _write(self, fn: Callable[[], None], what: str) -> bool:
        """Runs a write; on failure records status "failed" with a one-line message."""
        from learnopt import checkpoints

        try:
            fn()
            return True
        except OSError as e:
            if self.last_ckpt is not None:
                where = f"the last good checkpoint is {self.last_ckpt}"
            else:
                where = "no checkpoint was written yet"
            self.status = "failed"
            self.message = (
                f"cannot write {what} at step {self.step} in {self.out} "
                f"({checkpoints._one_line(e)}); {where}"
            )
            return False

    def _flush(self, agree: bool = True) -> None:
        """Fetches the pending metrics (one transfer), writes them, checks health.

        In a multi-process run a failed write on process 0 raises on every process
        (``agree``), so that all of them stop at the same step.
        """
        import jax

        from learnopt import distributed

        if not self.pending:
            return
        rows = jax.device_get(self.pending)
        self.pending.clear()
        first = self.step - len(rows) + 1
        table, infos = [], []
        for j, row in enumerate(rows):
            values = {"step": first + j}
            values.update({c: _scalar(row.get(c)) for c in self.wanted})
            table.append([_fmt(values[c]) for c in self.columns])
            infos.append(values)
            self.health.add(first + j, bool(values["skipped"]), float(values["update_norm"] or 0))
        if self.history is not None:
            for values in infos:
                for c in self.columns:
                    self.history[c].append(values[c])

        def write() -> None:
            if self.metrics_file is not None:
                self.metrics_file.write(table)

        if agree and self.multi:
            distributed.run_on_primary(write, errors=(OSError,))
        else:
            write()
        last = infos[-1]
        postfix = f"meta_loss={float(last['meta_loss']):.4g}"
        if last.get("learning_rate") is not None:
            postfix += f" lr={float(last['learning_rate']):.3g}"
        if last["num_nonfinite"]:
            postfix += f" skipped={last['num_nonfinite']}"
        self.bar.set_postfix_str(postfix, refresh=False)
        self.bar.update(len(rows))
        text = self.health.warning()
        if text:
            warnings.warn(text, MetaTrainWarning, stacklevel=4)
        info = StepInfo(self.step, self.num_steps, self.state, self.learner, infos, self.out)
        for cb in self.callbacks:
            cb(info)

    def _checkpoint(self) -> None:
        from learnopt import checkpoints, distributed

        # Several processes: the state is gathered here (a collective) and written by
        # process 0; a failed write raises on every process.
        state = distributed.to_host(self.state) if self.multi else self.state
        data, _ = _data_state(self.learner)
        meta = {
            "data": data,
            "num_steps": self.num_steps,
            "skipped_total": self.health.skipped_total,
        }

        def write() -> str:
            self.metrics_file.sync()
            path = self.ckpt.save(self.step, state, meta)
            theta = self.learner.get_theta(state)
            checkpoints.save_theta(
                self.out / THETA_FILE, theta, metadata=self._theta_metadata(theta)
            )
            return str(path)

        errors = (checkpoints.CheckpointWriteError, OSError)
        self.last_ckpt = Path(distributed.run_on_primary(write, errors=errors))

    def _theta_metadata(self, theta: Any) -> dict[str, Any] | None:
        """What theta.msgpack says about itself (learned_optimizers.theta_files)."""
        from learnopt.learned_optimizers import theta_files

        settings = {k: v for k, v in self.settings.items() if k != "lopt_config"}
        meta_training = dict(
            settings,
            estimators=[e.task_name() for e in self.learner.gradient_estimators],
            step=self.step,
            steps=self.num_steps,
            out_dir=str(self.out),
        )
        try:
            return theta_files.make_metadata(self.learner.lopt, theta, meta_training=meta_training)
        except (TypeError, ValueError):  # a custom learned optimizer we cannot describe
            return None

    def _restore(self, step: int) -> tuple[Any, dict[str, Any]]:
        """The state and meta of checkpoint ``step``: read by process 0, sent to the others,
        each process placing only its own shards on its devices."""
        from learnopt import checkpoints, distributed

        if not self.multi:
            return self.ckpt.restore(self.state, step)
        read = {}

        def restore() -> dict[str, Any]:
            read["state"], meta = self.ckpt.restore(self.state, step, to_host=True)
            return meta

        meta = distributed.run_on_primary(restore, errors=(checkpoints.CheckpointError,))
        host = read.get("state", distributed.host_zeros_like(self.state))
        host = distributed.broadcast_from_primary(host)
        return distributed.put_like(host, self.state), meta

    def _agree(self) -> bool:
        """Several processes: all take process 0's verdict (health, failed writes) or, if
        it has none, a signal received by any process. Returns whether the run stops."""
        from learnopt import distributed

        statuses = ("completed", "interrupted", "diverged", "stalled", "failed")
        signals = (None, "SIGINT", "SIGTERM")
        table = distributed.all_gather_ints(
            [statuses.index(self.status), signals.index(self.signal)]
        )
        stopped = [i for i, row in enumerate(table) if row[0]]
        if not stopped:
            return False
        who = 0 if table[0][0] else stopped[0]
        status, signal = statuses[table[who][0]], signals[table[who][1]]
        message = distributed.broadcast_json(self.message) if who == 0 else None
        if (status, signal) != (self.status, self.signal):
            self.status, self.signal = status, signal
            self.message = message or (
                f"interrupted by {signal} (received by process {who}) after step {self.step} "
                f"of {self.num_steps}"
            )
        return True

    # ------------------------------------------------------------------------ finish
    def finish(self, plots: bool) -> MetaTrainResult:
        import jax
        import numpy as np

        from learnopt import plots as plots_lib

        if self.status in ("completed", "diverged", "stalled") and self.ckpt is not None:
            if self.last_ckpt != self.ckpt.path(self.step) and self._write(
                self._flush, METRICS_FILE
            ):
                self._write(self._checkpoint, "the final checkpoint")
        if self.metrics_file is not None:
            self.metrics_file.close()
        if self.ckpt is not None:
            self.ckpt.close()
        if self.status == "completed" and self.primary:
            final = self.health.final()
            if final:
                self.status, self.message = final
        if self.multi:
            self._agree()
        out = self.out
        if self.history is None:
            try:
                cols = read_metrics(out / METRICS_FILE)
            except (OSError, ValueError, StopIteration):
                cols = {}
        else:
            cols = {
                c: np.asarray([np.nan if v is None else v for v in vals], np.float64)
                for c, vals in self.history.items()
            }
        writes = out is not None and self.primary
        if writes and plots and self.status != "failed" and len(cols.get("step", ())):
            try:
                plots_lib.meta_train_plots(out, cols)
            except OSError as e:
                self.message = self.message or f"could not write the plots ({e})"
        elapsed = time.perf_counter() - self.t_start
        summary = _summary(f"{self.desc} ({self.settings['trainer']})", cols, elapsed, out)
        if self.progress:
            print(summary, flush=True)
        if self.message and self.status != "completed":
            print(f"learnopt meta-train: {self.message}", file=sys.stderr, flush=True)
        return MetaTrainResult(
            out_dir=out,
            status=self.status,
            message=self.message,
            step=self.step,
            num_steps=self.num_steps,
            theta=jax.device_get(self.learner.get_theta(self.state)),
            state=self.state,
            learner=self.learner,
            columns=cols,
            summary=summary,
            checkpoint=self.last_ckpt,
            signal=self.signal,
        )


def _version() -> str:
    from learnopt import __version__

    return __version__


def _check_data(learner: Any) -> None:
    """Fails before any compilation if a task's data cannot be had."""
    from learnopt.tasks.datasets import base as datasets_base

    names = ", ".join(e.task_name() for e in learner.gradient_estimators)
    for ds in _datasets_of(learner):
        if hasattr(ds, "check_available"):
            try:
                ds.check_available()
            except datasets_base.DatasetNotFoundError as e:
                raise DataUnavailableError(
                    f"task {names} needs data that is not available (data_dir / --data-dir "
                    f"sets the data dir).\n{e}"
                ) from None


def _raise_data_error(learner: Any, error: Exception, data_dir: Any) -> None:
    """Re-raises a data-loading failure of ``learner.init`` as DataUnavailableError."""
    from learnopt.tasks.datasets import base as datasets_base

    if isinstance(error, datasets_base.DatasetNotFoundError | datasets_base.ChecksumMismatchError):
        raise DataUnavailableError(str(error)) from None
    unloaded = [ds for ds in _datasets_of(learner) if not getattr(ds, "loaded", True)]
    if unloaded and isinstance(error, OSError | ValueError | RuntimeError | KeyError):
        data_dir = datasets_base.default_data_dir(data_dir)
        raise DataUnavailableError(
            f"the task's data could not be loaded from the data dir {data_dir} (corrupted or "
            f"unreadable? delete the dataset's folder there to prepare it again): "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from error
