"""Evaluating optimizers and learned optimizers against tuned baselines on held-out tasks.

The question a learned optimizer must answer is whether it beats hand-designed
optimizers *whose learning rate was tuned for each task*, on tasks it never saw. This
module trains tasks with any optimizer or learned optimizer, over several seeds, and
compares the result with learning-rate sweeps of baselines::

    from learnopt import eval as lopt_eval
    from learnopt.learned_optimizers import base as lopt_base

    lopt = lopt_base.LearnableAdam()
    candidate = lopt_eval.learned_sweep(lopt, theta)           # theta in memory or loaded
    result = lopt_eval.evaluate_suite("heldout", candidate, num_steps=1000, num_seeds=3)
    print(result.markdown())                                   # per task, then the suite

**Sweeps.** A :class:`Sweep` is an optimizer constructor ``make_opt(hparams) ->
Optimizer`` plus a pytree of hyperparameter values with a leading *sweep axis*
(e.g. 9 learning rates, or one theta). :func:`lr_sweep` builds the baselines,
:func:`learned_sweep` a learned optimizer with a fixed theta, :func:`optimizer_sweep`
a hand-designed optimizer "as if it were a learned optimizer".

**How a task is trained.** For one task and a list of sweeps, every sweep's runs
(sweep points x seeds) are one ``vmap``: the hyperparameters are traced arrays, so a
9-point learning-rate sweep over 3 seeds is one XLA program, which costs little more
than one run. Training proceeds in chunks of ``eval_every`` steps: each chunk is one
jitted ``lax.scan`` whose batches (``[eval_every, seeds, batch, ...]``) are fetched on
the host and passed in. All sweeps advance in lockstep on the *same* fetched chunk,
so every optimizer sees exactly the same data:

* seed ``s`` draws its own batches (interleaved from the task's ``train`` iterator:
  step ``t`` of seed ``s`` is batch ``t * num_seeds + s`` of the stream), the same for
  every optimizer and every sweep point; with a freshly built task (tasks given by
  name are built fresh for each evaluation) the whole evaluation is deterministic;
* seed ``s`` initializes the params with the same key for every optimizer, and step
  ``t`` uses the same loss / optimizer keys (``fold_in`` of the seed's key by ``t``).

Params are cast to ``param_dtype`` (float32 by default) after ``task.init``.

**What is recorded.**

* ``train_loss[h, s, t]``: the minibatch loss at step ``t`` (the loss whose gradient
  made update ``t + 1``, measured before it), every step;
* ``valid_loss[h, s, e]``: the mean loss over ``valid_batches`` *fixed* batches of the
  ``valid_split`` split (default ``outer_valid``, the library's evaluation split; drawn
  once per task, shared by all runs), after ``valid_steps[e]`` updates: at step 0, every
  ``eval_every`` steps and at the end.

**Summaries** (all means over seeds; a run that became non-finite counts as diverged
and loses against any finite run):

* ``final_train``: mean train loss over the last ``window`` steps (``window =
  max(1, num_steps // 10)``, 10 % of the run);
* ``mean_train``: mean train loss over the whole run (the area under the curve);
* ``final_valid``: the valid loss after the last step;
* the **tuned baseline**: for each baseline, the learning rate with the lowest
  ``final_train`` (``select_by="final"``, the library's choice) or ``mean_train``
  (``select_by="mean"``); ``at_edge`` says whether it is the smallest or largest of
  the grid (then the grid should be widened);
* **speed-up** of a candidate over a tuned baseline: with ``target`` the worse of the
  two ``final_train`` values, ``steps_to_reach(baseline, target) /
  steps_to_reach(candidate, target)`` on the seed-mean curves smoothed by a trailing
  mean of ``window`` steps, each crossing counted at the centre of its window (so the
  smoothing delays neither curve, and the last point of a smoothed curve is exactly
  its ``final_train``; a narrower window would let one batch that is easy for both
  optimizers, which see the same data, decide the crossing for both). When the
  candidate ends lower this is how many times fewer steps it needs to reach the
  baseline's final loss (``> 1``); when it ends higher, the ratio of the steps both
  need to reach the candidate's final loss (usually ``< 1``; ``> 1`` when the candidate
  got there first and then stalled). This is the step-count idea behind the library's
  ``speedup_over_adam`` normalizer, measured against the tuned baseline of this run;
* ``normalized_loss = final_train(candidate) / final_train(tuned baseline)``
  (``< 1`` is better; undefined for a baseline loss ``<= 0``); over the suite its
  geometric mean, and the number of tasks won (``normalized_loss < 1``) against each
  tuned baseline and against the best of them per task.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base

PyTree = Any

__all__ = [
    "DEFAULT_LEARNING_RATES",
    "DEFAULT_BASELINES",
    "LOCAL_SUITES",
    "Sweep",
    "Curves",
    "TaskResult",
    "TaskSummary",
    "SuiteResult",
    "lr_sweep",
    "learned_sweep",
    "optimizer_sweep",
    "baseline_sweeps",
    "default_baselines",
    "log_grid",
    "get_suite",
    "suite_names",
    "TaskEvaluator",
    "evaluate_task",
    "evaluate_suite",
    "summarize_task",
    "smooth",
    "steps_to_reach",
    "speedup",
    "windows",
]


def log_grid(low: float, high: float, num: int) -> tuple[float, ...]:
    """``num`` log-spaced values from ``low`` to ``high`` (both included)."""
    if not (0 < low <= high) or not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"log_grid needs 0 < low <= high, got low={low}, high={high}")
    if num < 1 or (num == 1 and low != high):
        raise ValueError(f"log_grid needs num >= 2 for low < high, got num={num}")
    return tuple(float(x) for x in np.geomspace(low, high, num))


#: Learning rates of the baseline sweeps: 1e-4 ... 1 in half-decades (9 points). The
#: library sweeps 1e-7 ... 1 (15 points); the low end never wins in short runs, and
#: the high end is where SGD with momentum is tuned on small problems.
DEFAULT_LEARNING_RATES: tuple[float, ...] = log_grid(1e-4, 1.0, 9)

#: Baselines compared against by default; ``NAdamW`` is used when it is registered
#: (else ``AdamW``), see :func:`default_baselines`.
DEFAULT_BASELINES: tuple[str, ...] = ("Adam", "NAdamW", "SGDM")


# ------------------------------------------------------------------------------ sweeps


@dataclasses.dataclass(frozen=True, eq=False)
class Sweep:
    """One optimizer and the points of a hyperparameter sweep, trained as one ``vmap``.

    Attributes:
      name: how results are labeled (``"Adam"``, ``"LearnableAdam"``).
      make_opt: ``hparams -> Optimizer`` for *one* sweep point; called inside ``jit``
        with traced hyperparameters, so it must not convert them to Python numbers.
      hparams: a pytree whose leaves share a leading sweep axis of size ``size``.
      labels: one readable label per sweep point (``"lr=0.001"``).
      values: per hyperparameter name, the swept values (for CSVs); may be empty.
      cache_id: what identifies the sweep's results across processes (set by
        :func:`lr_sweep` for registered optimizers), or ``None``: never cached.
    """

    name: str
    make_opt: Callable[[PyTree], opt_base.Optimizer]
    hparams: PyTree
    labels: tuple[str, ...]
    values: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    cache_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Sweep name must be a non-empty string, got {self.name!r}")
        sizes = {int(np.shape(x)[0]) for x in jax.tree_util.tree_leaves(self.hparams)}
        if len(sizes) > 1:
            raise ValueError(
                f"Sweep {self.name!r}: hparams leaves must share one leading sweep axis, "
                f"got sizes {sorted(sizes)}"
            )
        if sizes and sizes != {len(self.labels)}:
            raise ValueError(
                f"Sweep {self.name!r}: {len(self.labels)} labels for a sweep axis of size "
                f"{sizes.pop()}"
            )
        if not self.labels:
            raise ValueError(f"Sweep {self.name!r} has no sweep points")

    @property
    def size(self) -> int:
        """Number of sweep points."""
        return len(self.labels)


def lr_sweep(
    optimizer: str | Callable[..., opt_base.Optimizer],
    learning_rates: Sequence[float] = DEFAULT_LEARNING_RATES,
    *,
    name: str | None = None,
    **fixed: Any,
) -> Sweep:
    """A learning-rate sweep of a hand-designed optimizer.

    Args:
      optimizer: a registered optimizer name (``opt_base.OPTIMIZERS``: ``"Adam"``,
        ``"SGDM"``, ...) or a constructor taking ``learning_rate=`` as a keyword.
      learning_rates: the grid (positive, finite; at least one value).
      name: label of the sweep (default: the registered name or ``__name__``).
      **fixed: further constructor arguments, the same for every point.

    Returns:
      A :class:`Sweep` whose ``hparams`` are ``{"learning_rate": float32[len(lrs)]}``.
    """
    if isinstance(optimizer, str):
        ctor = _optimizer_constructor(optimizer)
        label = name or optimizer
    elif callable(optimizer):
        ctor = optimizer
        label = name or getattr(optimizer, "__name__", type(optimizer).__name__)
    else:
        raise TypeError(
            f"optimizer must be a registered name or a constructor, got {type(optimizer).__name__}"
        )
    lrs = tuple(float(x) for x in learning_rates)
    if not lrs or not all(math.isfinite(x) and x > 0 for x in lrs):
        raise ValueError(f"learning_rates must be positive finite numbers, got {lrs}")

    def make_opt(hparams: PyTree) -> opt_base.Optimizer:
        return ctor(learning_rate=hparams["learning_rate"], **fixed)

    return Sweep(
        name=label,
        make_opt=make_opt,
        hparams={"learning_rate": jnp.asarray(np.asarray(lrs, np.float32))},
        labels=tuple(f"lr={x:.3g}" for x in lrs),
        values={"learning_rate": lrs},
        cache_id=(
            f"{optimizer}|lrs={list(lrs)}|{sorted((k, repr(v)) for k, v in fixed.items())}"
            if isinstance(optimizer, str)
            else None
        ),
    )


def learned_sweep(
    lopt: lopt_base.LearnedOptimizer, theta: PyTree, *, name: str | None = None
) -> Sweep:
    """A learned optimizer with a fixed ``theta`` (in memory or from ``load_theta``).

    ``theta`` is passed to the jitted training as an argument (never baked in as a
    constant), so evaluating another theta of the same structure reuses the program.
    """
    if not isinstance(lopt, lopt_base.LearnedOptimizer):
        raise TypeError(f"lopt must be a LearnedOptimizer, got {type(lopt).__name__}")
    stacked = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], theta)

    def make_opt(hparams: PyTree) -> opt_base.Optimizer:
        return lopt.opt_fn(hparams, is_training=False)

    return Sweep(name=name or lopt.name, make_opt=make_opt, hparams=stacked, labels=("theta",))


def optimizer_sweep(optimizer: opt_base.Optimizer, *, name: str | None = None) -> Sweep:
    """One fixed hand-designed optimizer, evaluated as if it were a learned optimizer."""
    if not isinstance(optimizer, opt_base.Optimizer):
        raise TypeError(f"optimizer must be an Optimizer, got {type(optimizer).__name__}")
    return Sweep(
        name=name or optimizer.name,
        make_opt=lambda hparams: optimizer,
        hparams={},
        labels=(repr(optimizer),),
    )


def _optimizer_constructor(name: str) -> Callable[..., opt_base.Optimizer]:
    """A registered optimizer's constructor; ``NAdamW`` also from its module if unregistered."""
    if name == "NAdamW" and name not in opt_base.OPTIMIZERS:
        try:
            from learnopt.optimizers import nadamw
        except ImportError:
            pass
        else:
            return nadamw.NAdamW
    return opt_base.OPTIMIZERS.constructor(name)


def default_baselines() -> tuple[str, ...]:
    """:data:`DEFAULT_BASELINES`, with ``AdamW`` standing in for ``NAdamW`` if it is missing."""
    names = []
    for b in DEFAULT_BASELINES:
        if b == "NAdamW":
            try:
                _optimizer_constructor(b)
            except KeyError:
                b = "AdamW"
        names.append(b)
    return tuple(names)


def baseline_sweeps(
    names: Iterable[str] | None = None,
    learning_rates: Sequence[float] = DEFAULT_LEARNING_RATES,
) -> list[Sweep]:
    """Learning-rate sweeps of registered optimizers (default: :func:`default_baselines`)."""
    names = default_baselines() if names is None else tuple(names)
    if not names:
        raise ValueError("need at least one baseline optimizer")
    return [lr_sweep(n, learning_rates) for n in names]


# ------------------------------------------------------------------------------ suites


#: Small suites defined here, used until (and besides) ``learnopt.tasks.suites``.
LOCAL_SUITES: dict[str, tuple[str, ...]] = {
    "smoke": ("BatchQuadraticTask", "ImageMLP_Digits8_Relu32"),
}


def _suites_module() -> Any:
    try:
        from learnopt.tasks import suites
    except ImportError:
        return None
    return suites


def suite_names() -> list[str]:
    """Names accepted by :func:`get_suite`."""
    names = set(LOCAL_SUITES)
    suites = _suites_module()
    if suites is not None:
        registry = getattr(suites, "SUITES", None)
        if registry is not None:
            names.update(registry.names() if hasattr(registry, "names") else registry)
        elif hasattr(suites, "suite_names"):
            names.update(suites.suite_names())
    return sorted(names)


def get_suite(name: str) -> list[str | tasks_base.Task]:
    """The tasks of the suite ``name``: task names (built fresh per evaluation) or tasks.

    Reads ``learnopt.tasks.suites`` (its ``get_suite`` or ``SUITES`` registry) when that
    module exists, then :data:`LOCAL_SUITES`. Unknown names raise a ``KeyError`` that
    lists the known suites.
    """
    if not isinstance(name, str):
        raise TypeError(f"suite name must be a string, got {type(name).__name__}")
    suites = _suites_module()
    if suites is not None and name not in LOCAL_SUITES:
        getter = getattr(suites, "get_suite", None)
        registry = getattr(suites, "SUITES", None)
        try:
            if getter is not None:
                return list(getter(name))
            if registry is not None:
                entry = registry.get(name) if hasattr(registry, "get") else registry[name]
                return list(entry() if callable(entry) else entry)
        except KeyError:
            pass
    if name in LOCAL_SUITES:
        return list(LOCAL_SUITES[name])
    raise tasks_base.UnknownNameError(f"Unknown suite {name!r}. Known: {', '.join(suite_names())}.")


def _task_and_name(task: str | tasks_base.Task) -> tuple[tasks_base.Task, str]:
    if isinstance(task, str):
        return tasks_base.get_task(task), task
    if isinstance(task, tasks_base.Task):
        return task, task.name
    raise TypeError(f"expected a task or a registered task name, got {type(task).__name__}")


# ---------------------------------------------------------------------------- results


@dataclasses.dataclass
class Curves:
    """The loss curves of one sweep on one task (numpy, float32).

    Attributes:
      name, labels, values: as in the :class:`Sweep`.
      train_loss: ``[points, seeds, num_steps]``, minibatch loss at each step.
      valid_steps: ``[evals]``, number of updates before each valid evaluation.
      valid_loss: ``[points, seeds, evals]``.
    """

    name: str
    labels: tuple[str, ...]
    values: Mapping[str, tuple[float, ...]]
    train_loss: np.ndarray
    valid_steps: np.ndarray
    valid_loss: np.ndarray

    @property
    def num_steps(self) -> int:
        return int(self.train_loss.shape[-1])

    def point(self, index: int) -> Curves:
        """The curves of one sweep point (keeps a sweep axis of size 1)."""
        sl = slice(index, index + 1)
        return Curves(
            name=self.name,
            labels=self.labels[sl],
            values={k: v[sl] for k, v in self.values.items()},
            train_loss=self.train_loss[sl],
            valid_steps=self.valid_steps,
            valid_loss=self.valid_loss[sl],
        )


@dataclasses.dataclass
class TaskResult:
    """The curves of every sweep on one task, and how they were obtained."""

    task: str
    curves: dict[str, Curves]
    num_steps: int
    num_seeds: int
    eval_every: int
    valid_split: str
    valid_batches: int
    seconds: float

    def __getitem__(self, name: str) -> Curves:
        return self.curves[name]


def windows(num_steps: int) -> tuple[int, int]:
    """``(plot_smoothing, window)`` for a run of ``num_steps``.

    ``window = max(1, num_steps // 10)`` defines ``final_train`` and the speed-up (see
    the module docstring); plots smooth train curves over ``max(1, num_steps // 50)``.
    """
    return max(1, num_steps // 50), max(1, num_steps // 10)


def smooth(curve: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps (shorter at the start), along the last axis.

    Non-finite values propagate: once a run diverges its smoothed curve stays NaN for
    ``window`` steps (and a diverged run never recovers).
    """
    curve = np.asarray(curve, np.float64)
    if window <= 1:
        return curve
    c = np.cumsum(curve, axis=-1)
    out = np.empty_like(c)
    out[..., :window] = c[..., :window] / np.arange(1, min(window, c.shape[-1]) + 1)
    if c.shape[-1] > window:
        out[..., window:] = (c[..., window:] - c[..., :-window]) / window
    return out


def steps_to_reach(curve: np.ndarray, target: float, window: int = 1) -> float:
    """Steps until the trailing ``window``-mean of ``curve`` first is ``<= target``.

    The crossing at index ``t`` is counted at the centre of the window that ends there,
    ``t + 1 - (min(t + 1, window) - 1) / 2`` steps (``t + 1`` for ``window=1``); inf if
    the curve never gets there.
    """
    return _crossing(smooth(curve, window), target, window)


def _crossing(smoothed: np.ndarray, target: float, window: int) -> float:
    if not math.isfinite(target):
        return math.inf
    hit = np.flatnonzero(smoothed <= target)
    if not hit.size:
        return math.inf
    t = int(hit[0])
    return t + 1 - (min(t + 1, window) - 1) / 2


def speedup(candidate: np.ndarray, baseline: np.ndarray, window: int) -> tuple[float, bool]:
    """Speed-up of ``candidate`` over ``baseline`` (seed-mean train curves ``[steps]``).

    Returns ``(speedup, reaches)`` where ``reaches`` says whether the candidate reaches
    the baseline's final loss. See the module docstring for the definition. A diverged
    candidate scores 0, a diverged baseline against a finite candidate scores inf.
    """
    sc, sb = smooth(candidate, window), smooth(baseline, window)
    fc, fb = float(sc[-1]), float(sb[-1])  # the final losses, in the same arithmetic
    if not math.isfinite(fc):
        return 0.0, False
    if not math.isfinite(fb):
        return math.inf, True
    target = max(fb, fc)
    return _crossing(sb, target, window) / _crossing(sc, target, window), fc <= fb


def _final(curve: np.ndarray, final_window: int) -> float:
    curve = np.asarray(curve, np.float64)
    value = float(np.mean(curve[..., -final_window:]))
    return value if math.isfinite(value) else math.nan


@dataclasses.dataclass
class PointStats:
    """Seed-mean statistics of one sweep point (NaN if any seed diverged)."""

    label: str
    final_train: float
    final_train_std: float
    mean_train: float
    final_valid: float
    diverged: int

    @staticmethod
    def of(curves: Curves, index: int, final_window: int) -> PointStats:
        train = np.asarray(curves.train_loss[index], np.float64)  # [seeds, steps]
        finals = np.mean(train[:, -final_window:], axis=-1)
        finite = np.all(np.isfinite(train), axis=-1)
        valid = np.asarray(curves.valid_loss[index, :, -1], np.float64)
        return PointStats(
            label=curves.labels[index],
            final_train=_nan_if_bad(np.mean(finals)),
            final_train_std=_nan_if_bad(np.std(finals)),
            mean_train=_nan_if_bad(np.mean(train)),
            final_valid=_nan_if_bad(np.mean(valid)),
            diverged=int(np.sum(~finite)),
        )


def _nan_if_bad(x: Any) -> float:
    x = float(x)
    return x if math.isfinite(x) else math.nan


def _key(x: float) -> float:
    return x if math.isfinite(x) else math.inf


@dataclasses.dataclass
class TunedBaseline:
    """A baseline at its best learning rate on one task."""

    name: str
    index: int
    label: str
    stats: PointStats
    at_edge: bool
    grid: tuple[PointStats, ...]


@dataclasses.dataclass
class Comparison:
    """The candidate against one tuned baseline on one task."""

    baseline: str
    normalized_loss: float
    speedup: float
    reaches: bool
    wins: bool
    wins_valid: bool


@dataclasses.dataclass
class TaskSummary:
    """Per-task figures: the candidate, each tuned baseline and the comparisons."""

    task: str
    candidate: str
    candidate_stats: PointStats
    baselines: dict[str, TunedBaseline]
    comparisons: dict[str, Comparison]
    best_baseline: str
    select_by: str

    @property
    def vs_best(self) -> Comparison:
        """The comparison with the strongest tuned baseline on this task."""
        return self.comparisons[self.best_baseline]


def summarize_task(
    result: TaskResult,
    candidate: str,
    baselines: Sequence[str] | None = None,
    select_by: str = "final",
) -> TaskSummary:
    """Tunes each baseline's learning rate and compares ``candidate`` with it.

    Args:
      result: from :func:`evaluate_task`.
      candidate: the name of the evaluated sweep (its first point is used).
      baselines: names of the baseline sweeps (default: every other sweep).
      select_by: ``"final"`` (lowest ``final_train``, as the library) or ``"mean"``
        (lowest ``mean_train``), averaged over seeds.
    """
    if select_by not in ("final", "mean"):
        raise ValueError(f"select_by must be 'final' or 'mean', got {select_by!r}")
    if candidate not in result.curves:
        raise KeyError(f"no sweep {candidate!r} in the result; have {sorted(result.curves)}")
    if baselines is None:
        baselines = [n for n in result.curves if n != candidate]
    if not baselines:
        raise ValueError("need at least one baseline sweep to compare with")
    _, final_window = windows(result.num_steps)
    cand_curves = result.curves[candidate]
    cand = PointStats.of(cand_curves, 0, final_window)
    cand_mean = np.mean(cand_curves.train_loss[0], axis=0)

    tuned: dict[str, TunedBaseline] = {}
    comparisons: dict[str, Comparison] = {}
    for name in baselines:
        curves = result.curves[name]
        grid = tuple(PointStats.of(curves, i, final_window) for i in range(len(curves.labels)))
        score = [_key(p.final_train if select_by == "final" else p.mean_train) for p in grid]
        best = int(np.argmin(score))
        edge = len(grid) > 1 and best in (0, len(grid) - 1)
        tb = TunedBaseline(name, best, grid[best].label, grid[best], edge, grid)
        tuned[name] = tb
        base_mean = np.mean(curves.train_loss[best], axis=0)
        s, reaches = speedup(cand_mean, base_mean, final_window)
        fb, fc = tb.stats.final_train, cand.final_train
        ratio = fc / fb if (math.isfinite(fb) and fb > 0 and math.isfinite(fc)) else math.nan
        comparisons[name] = Comparison(
            baseline=name,
            normalized_loss=ratio,
            speedup=s,
            reaches=reaches,
            wins=_key(fc) < _key(fb),
            wins_valid=_key(cand.final_valid) < _key(tb.stats.final_valid),
        )
    best_baseline = min(tuned, key=lambda n: _key(tuned[n].stats.final_train))
    return TaskSummary(
        task=result.task,
        candidate=candidate,
        candidate_stats=cand,
        baselines=tuned,
        comparisons=comparisons,
        best_baseline=best_baseline,
        select_by=select_by,
    )


def _geomean(values: Iterable[float]) -> float:
    vals = [v for v in values if math.isfinite(v) and v > 0]
    return float(math.exp(np.mean(np.log(vals)))) if vals else math.nan


@dataclasses.dataclass
class SuiteResult:
    """Every task's curves and summary, and the suite-level figures."""

    candidate: str
    baselines: tuple[str, ...]
    tasks: list[TaskResult]
    summaries: list[TaskSummary]
    settings: dict[str, Any]

    def aggregate(self) -> dict[str, dict[str, float]]:
        """Per baseline (and ``"best"``): wins, geometric-mean normalized loss and speed-up."""
        out: dict[str, dict[str, float]] = {}
        for name in (*self.baselines, "best"):
            comps = [s.vs_best if name == "best" else s.comparisons[name] for s in self.summaries]
            out[name] = {
                "tasks": len(comps),
                "wins": sum(c.wins for c in comps),
                "wins_valid": sum(c.wins_valid for c in comps),
                "reaches": sum(c.reaches for c in comps),
                "geomean_normalized_loss": _geomean(c.normalized_loss for c in comps),
                "geomean_speedup": _geomean(c.speedup for c in comps),
                "median_speedup": float(np.median([c.speedup for c in comps]))
                if comps
                else math.nan,
            }
        return out

    def markdown(self) -> str:
        """The summary tables (per task, then the suite) as markdown."""
        return summary_markdown(self)


# ----------------------------------------------------------------------------- training


def _take(split: Any, shape: tuple[int, ...]) -> Any:
    """``prod(shape)`` batches stacked ``[*shape, ...]`` from an iterator (``take`` if any)."""
    if hasattr(split, "take"):
        return split.take(*shape)
    count = math.prod(shape)
    batches = [next(split) for _ in range(count)]
    return jax.tree_util.tree_map(
        lambda *xs: np.stack(xs).reshape(*shape, *np.shape(xs[0])), *batches
    )


def _cast_params(params: PyTree, dtype: Any) -> PyTree:
    if dtype is None:
        return params

    def cast(x: Any) -> Any:
        x = jnp.asarray(x)
        return x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree_util.tree_map(cast, params)


class TaskEvaluator:
    """Trains every sweep on one task in lockstep; :meth:`run` may be called repeatedly.

    Each sweep gets two jitted programs, compiled once per evaluator: ``_init_runs``
    (params, optimizer states and the valid loss at step 0 of every run) and
    ``_train_chunk`` (``eval_every`` steps of every run as one ``lax.scan``, then the
    valid loss). Batches come from the task's iterators where they stand: build the
    evaluator on a fresh task for a reproducible run (:func:`evaluate_task` does).

    Args:
      task: the task.
      sweeps: the sweeps to train (names must be distinct).
      num_steps: training steps per run.
      num_seeds: seeds per sweep point.
      eval_every: steps per chunk and between valid evaluations (default:
        ``min(num_steps, max(10, num_steps // 20))``).
      valid_split: ``inner_valid``, ``outer_valid`` (default) , ``test`` or ``train``.
      valid_batches: fixed batches of the valid split per evaluation.
      seed: base seed; run seed ``s`` uses ``fold_in(PRNGKey(seed), s)``.
      param_dtype: dtype the params are cast to after ``task.init`` (``None``: keep).
      vectorize: how the runs (sweep points x seeds) of one program are laid out:
        ``"vmap"`` (batched: one step of every run at once), ``"map"`` (``lax.map``:
        the runs one after another inside the same program) or ``"auto"``: on CPU,
        ``vmap`` for losses made of plain matrix products (MLPs), ``map`` for
        convolutions (batched over per-run kernels they become grouped convolutions,
        several times slower on XLA:CPU), recurrent loops and attention; ``vmap`` on
        accelerators.
    """

    def __init__(
        self,
        task: tasks_base.Task,
        sweeps: Sequence[Sweep],
        *,
        num_steps: int,
        num_seeds: int = 3,
        eval_every: int | None = None,
        valid_split: str = "outer_valid",
        valid_batches: int = 5,
        seed: int = 0,
        param_dtype: Any = jnp.float32,
        vectorize: str = "auto",
    ):
        if not isinstance(task, tasks_base.Task):
            raise TypeError(f"task must be a Task, got {type(task).__name__}")
        sweeps = list(sweeps)
        if not sweeps or not all(isinstance(s, Sweep) for s in sweeps):
            raise TypeError("sweeps must be a non-empty sequence of Sweep")
        names = [s.name for s in sweeps]
        if len(set(names)) != len(names):
            raise ValueError(f"sweep names must be distinct, got {names}")
        _check_int("num_steps", num_steps, 1)
        _check_int("num_seeds", num_seeds, 1)
        _check_int("valid_batches", valid_batches, 1)
        if eval_every is None:
            eval_every = min(num_steps, max(10, num_steps // 20))
        _check_int("eval_every", eval_every, 1)
        if valid_split not in ("train", "inner_valid", "outer_valid", "test"):
            raise ValueError(
                "valid_split must be one of train, inner_valid, outer_valid, test; got "
                f"{valid_split!r}"
            )
        self.task = task
        self.sweeps = sweeps
        self.num_steps = int(num_steps)
        self.num_seeds = int(num_seeds)
        self.eval_every = int(min(eval_every, num_steps))
        self.valid_split = valid_split
        self.valid_batches = int(valid_batches)
        self.seed = int(seed)
        self.param_dtype = param_dtype
        if vectorize not in ("auto", "vmap", "map"):
            raise ValueError(f"vectorize must be 'auto', 'vmap' or 'map', got {vectorize!r}")
        self.vectorize = vectorize
        self._sequential: bool | None = None if vectorize == "auto" else vectorize == "map"
        self._fns = [self._build(s) for s in sweeps]
        self._init_task: Callable | None = None

    # -- the per-run maths (one sweep point, one seed), vmapped twice in _build
    def _build(self, sweep: Sweep) -> tuple[Callable, Callable]:
        task, num_steps, dtype = self.task, self.num_steps, self.param_dtype

        def valid_loss(opt, state, key, vbatches):
            params, model_state = opt.get_params_state(state)

            def one(k, batch):
                loss, _ = task.loss_with_state(params, model_state, k, batch)
                return jnp.asarray(loss, jnp.float32)

            keys = jax.random.split(key, self.valid_batches)
            if vbatches is None:
                return jnp.mean(jax.vmap(lambda k: one(k, None))(keys))
            return jnp.mean(jax.vmap(one)(keys, vbatches))

        def init_one(hparams, params, model_state, seed_key, vbatches):
            opt = sweep.make_opt(hparams["hparams"])
            k_init, _, k_valid = jax.random.split(seed_key, 3)
            _, k_opt = jax.random.split(k_init)
            params = _cast_params(params, dtype)
            state = opt.init(params, model_state, num_steps=num_steps, key=k_opt)
            return state, valid_loss(opt, state, jax.random.fold_in(k_valid, 0), vbatches)

        def chunk_one(hparams, state, seed_key, ts, batches, eval_index, vbatches):
            opt = sweep.make_opt(hparams["hparams"])
            _, k_train, k_valid = jax.random.split(seed_key, 3)

            def step(state, xs):
                t, batch = xs
                k_loss, k_opt = jax.random.split(jax.random.fold_in(k_train, t))
                params, model_state = opt.get_params_state(state)
                (loss, model_state), grads = jax.value_and_grad(task.loss_with_state, has_aux=True)(
                    params, model_state, k_loss, batch
                )
                state = opt.update(state, grads, loss, model_state=model_state, key=k_opt)
                return state, jnp.asarray(loss, jnp.float32)

            state, losses = jax.lax.scan(step, state, (ts, batches))
            valid = valid_loss(opt, state, jax.random.fold_in(k_valid, eval_index), vbatches)
            return state, losses, valid

        # Seeds: keys and batches mapped, hparams shared. Sweep points: hparams and
        # states mapped, keys and batches shared (every point sees the same data).
        def _init_runs(hparams, params, model_states, seed_keys, vbatches):
            per_seed = self._over_runs(init_one, (None, 0, 0, 0, None))
            return self._over_runs(per_seed, (0, None, None, None, None))(
                hparams, params, model_states, seed_keys, vbatches
            )

        def _train_chunk(hparams, states, seed_keys, ts, batches, eval_index, vbatches):
            fn = lambda h, s, k, b: chunk_one(h, s, k, ts, b, eval_index, vbatches)
            per_seed = self._over_runs(fn, (None, 0, 0, 1))
            return self._over_runs(per_seed, (0, 0, None, None))(
                hparams, states, seed_keys, batches
            )

        return jax.jit(_init_runs), jax.jit(_train_chunk)

    def _over_runs(self, fn: Callable, in_axes: tuple) -> Callable:
        """``vmap(fn, in_axes)``, or the same mapping with ``lax.map`` (see ``vectorize``)."""
        if not self._sequential:
            return jax.vmap(fn, in_axes=in_axes)
        mapped = [i for i, axis in enumerate(in_axes) if axis is not None]

        def run(*args):
            xs = tuple(
                jax.tree_util.tree_map(lambda x, a=in_axes[i]: jnp.moveaxis(x, a, 0), args[i])
                for i in mapped
            )

            def one(x):
                full = list(args)
                for i, value in zip(mapped, x, strict=True):
                    full[i] = value
                return fn(*full)

            return jax.lax.map(one, xs)

        return run

    def _batching_helps(self, params: PyTree, model_states: PyTree, vbatches: Any) -> bool:
        """Whether XLA:CPU runs this task's runs faster batched than one after another.

        Measured on the held-out suite (``benchmarks/bench_eval.py``): batched MLPs cost
        0.3-0.7 of separate runs, while a convolution over per-run kernels (a grouped
        convolution), a recurrent loop or batched attention products cost 2-3x more
        batched. So: batch when the loss (traced, never run) is loop-free and its only
        products are plain matrix products, with no convolution.
        """
        one = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)
        closed = jax.make_jaxpr(self.task.loss_with_state)(
            one(params), one(model_states), jax.random.PRNGKey(0), one(vbatches)
        )
        return _matrix_products_only(closed.jaxpr)

    def _seed_keys(self) -> jax.Array:
        base = jax.random.PRNGKey(self.seed)
        return jnp.stack([jax.random.fold_in(base, s) for s in range(self.num_seeds)])

    def _init_params(self, seed_keys: jax.Array) -> tuple[PyTree, PyTree]:
        """Every seed's ``(params, model_state)``, stacked; shared by all sweeps.

        One jitted ``init_with_state`` called per seed: random initializers compile
        slowly on CPU, and vmapping them would compile a second, larger program.
        """
        if self._init_task is None:
            self._init_task = jax.jit(self.task.init_with_state)
        outs = []
        for key in seed_keys:
            k_init = jax.random.split(key, 3)[0]
            outs.append(self._init_task(jax.random.split(k_init)[0]))
        return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *outs)

    def run(self, progress: Callable[[int], None] | None = None) -> TaskResult:
        """Trains every sweep for ``num_steps`` steps; returns the curves.

        Args:
          progress: called with the number of steps just finished (per chunk).
        """
        start = time.perf_counter()
        datasets = self.task.datasets
        if datasets is not None:
            vbatches = jax.device_put(
                _take(getattr(datasets, self.valid_split), (self.valid_batches,))
            )
            train = datasets.train
        else:
            vbatches, train = None, None
        seed_keys = self._seed_keys()
        params, model_states = self._init_params(seed_keys)
        if self._sequential is None:
            self._sequential = jax.default_backend() == "cpu" and not self._batching_helps(
                params, model_states, vbatches
            )
        hps = [_sweep_hparams(s) for s in self.sweeps]
        states, train_losses, valid_losses = [], [], []
        for (init_fn, _), h in zip(self._fns, hps, strict=True):
            st, v0 = init_fn(h, params, model_states, seed_keys, vbatches)
            states.append(st)
            train_losses.append([])
            valid_losses.append([v0])
        valid_steps = [0]
        done, eval_index = 0, 0
        pending: list[tuple[int, Any]] = []
        while done < self.num_steps:
            length = min(self.eval_every, self.num_steps - done)
            if train is not None:
                batches = jax.device_put(_take(train, (length, self.num_seeds)))
            else:
                batches = None
            eval_index += 1
            ts = jnp.arange(done, done + length, dtype=jnp.int32)
            e = jnp.asarray(eval_index, jnp.int32)
            for i, ((_, chunk_fn), h) in enumerate(zip(self._fns, hps, strict=True)):
                st, losses, valid = chunk_fn(h, states[i], seed_keys, ts, batches, e, vbatches)
                states[i] = st
                train_losses[i].append(losses)
                valid_losses[i].append(valid)
            done += length
            valid_steps.append(done)
            # Wait for the previous chunk once this one is queued: fetching the next
            # batches overlaps the device's work, at most two chunks of batches are
            # alive, and the progress bar counts finished steps only.
            pending.append((length, valid_losses[-1][-1]))
            if len(pending) > 1:
                self._finish(pending.pop(0), progress)
        for item in pending:
            self._finish(item, progress)
        curves = {}
        for sweep, tl, vl in zip(self.sweeps, train_losses, valid_losses, strict=True):
            tl, vl = jax.device_get((tl, vl))
            curves[sweep.name] = Curves(
                name=sweep.name,
                labels=sweep.labels,
                values=dict(sweep.values),
                train_loss=np.concatenate(tl, axis=-1).astype(np.float32),
                valid_steps=np.asarray(valid_steps, np.int64),
                valid_loss=np.stack(vl, axis=-1).astype(np.float32),
            )
        return TaskResult(
            task=self.task.name,
            curves=curves,
            num_steps=self.num_steps,
            num_seeds=self.num_seeds,
            eval_every=self.eval_every,
            valid_split=self.valid_split,
            valid_batches=self.valid_batches,
            seconds=time.perf_counter() - start,
        )

    @staticmethod
    def _finish(item: tuple[int, Any], progress: Callable[[int], None] | None) -> None:
        steps, marker = item
        jax.block_until_ready(marker)
        if progress is not None:
            progress(steps)


def _matrix_products_only(jaxpr: Any) -> bool:
    """No convolution, no loop, and every ``dot_general`` on operands of rank <= 2."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ("conv_general_dilated", "scan", "while"):
            return False
        if name == "dot_general" and any(len(getattr(v.aval, "shape", ())) > 2 for v in eqn.invars):
            return False
        for param in eqn.params.values():
            for sub in param if isinstance(param, tuple | list) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns") and not _matrix_products_only(inner):
                    return False
    return True


def _sweep_hparams(sweep: Sweep) -> PyTree:
    """The sweep's hparams plus a mapped index (so that empty hparams still vmap)."""
    return {"index": jnp.arange(sweep.size, dtype=jnp.int32), "hparams": sweep.hparams}


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def evaluate_task(
    task: str | tasks_base.Task,
    sweeps: Sequence[Sweep],
    *,
    num_steps: int,
    num_seeds: int = 3,
    eval_every: int | None = None,
    valid_split: str = "outer_valid",
    valid_batches: int = 5,
    seed: int = 0,
    param_dtype: Any = jnp.float32,
    vectorize: str = "auto",
    progress: Callable[[int], None] | None = None,
) -> TaskResult:
    """Trains every sweep on ``task`` (a name is built fresh: reproducible data).

    See :class:`TaskEvaluator` for the arguments and the module docstring for what is
    recorded. Returns a :class:`TaskResult` with one :class:`Curves` per sweep.
    """
    task, _ = _task_and_name(task)
    evaluator = TaskEvaluator(
        task,
        sweeps,
        num_steps=num_steps,
        num_seeds=num_seeds,
        eval_every=eval_every,
        valid_split=valid_split,
        valid_batches=valid_batches,
        seed=seed,
        param_dtype=param_dtype,
        vectorize=vectorize,
    )
    return evaluator.run(progress)


def evaluate_suite(
    suite: str | Sequence[str | tasks_base.Task],
    candidate: Sweep,
    baselines: Sequence[Sweep] | None = None,
    *,
    num_steps: int,
    num_seeds: int = 3,
    select_by: str = "final",
    progress: bool | Callable[[int], None] = False,
    baseline_cache: str | os.PathLike | None = None,
    **kwargs: Any,
) -> SuiteResult:
    """Evaluates ``candidate`` against tuned ``baselines`` on every task of a suite.

    Args:
      suite: a suite name (:func:`get_suite`) or a list of tasks / task names.
      candidate: the optimizer under evaluation (one sweep point).
      baselines: sweeps to tune (default: :func:`baseline_sweeps`).
      num_steps, num_seeds: per run.
      select_by: how a baseline's learning rate is picked, ``"final"`` or ``"mean"``.
      progress: ``True`` for a tqdm bar over all tasks' steps, or a callback.
      baseline_cache: a folder where the baselines' curves are kept and reused by
        later evaluations with the same settings (tasks given by name, sweeps from
        :func:`lr_sweep` with a registered optimizer). The key includes every setting
        and a hash of learnopt's source, so changed code never reuses old curves. The
        candidate always runs, and sees the same data as the cached baselines did.
      **kwargs: further :class:`TaskEvaluator` arguments (``eval_every``, ...).

    Returns:
      A :class:`SuiteResult`; ``result.markdown()`` is the summary.
    """
    if select_by not in ("final", "mean"):
        raise ValueError(f"select_by must be 'final' or 'mean', got {select_by!r}")
    if not isinstance(candidate, Sweep):
        raise TypeError(f"candidate must be a Sweep, got {type(candidate).__name__}")
    if candidate.size != 1:
        raise ValueError(f"candidate must have one sweep point, got {candidate.size}")
    entries = get_suite(suite) if isinstance(suite, str) else list(suite)
    if not entries:
        raise ValueError("the suite has no tasks")
    baselines = baseline_sweeps() if baselines is None else list(baselines)
    names = [b.name for b in baselines]
    if candidate.name in names:
        candidate = dataclasses.replace(candidate, name=f"{candidate.name} (candidate)")
    bar = None
    callback = progress if callable(progress) else None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=num_steps * len(entries), desc="evaluate", unit="step")
        callback = bar.update
    cache = _BaselineCache(baseline_cache) if baseline_cache is not None else None
    tasks, summaries = [], []
    try:
        for entry in entries:
            task, name = _task_and_name(entry)
            if bar is not None:
                bar.set_postfix_str(name)
            sweeps = [candidate, *baselines]
            evaluator = TaskEvaluator(
                task, sweeps, num_steps=num_steps, num_seeds=num_seeds, **kwargs
            )
            cached: dict[str, Curves] = {}
            if cache is not None and isinstance(entry, str):
                cached = cache.load(evaluator, baselines)
                if cached:
                    rest = [s for s in sweeps if s.name not in cached]
                    evaluator = TaskEvaluator(
                        task, rest, num_steps=num_steps, num_seeds=num_seeds, **kwargs
                    )
            result = evaluator.run(callback)
            if cache is not None and isinstance(entry, str):
                cache.save(evaluator, [b for b in baselines if b.name not in cached], result)
            result.curves = {s.name: cached.get(s.name) or result.curves[s.name] for s in sweeps}
            tasks.append(result)
            summaries.append(summarize_task(result, candidate.name, names, select_by))
    finally:
        if bar is not None:
            bar.close()
    settings = {
        "num_steps": num_steps,
        "num_seeds": num_seeds,
        "select_by": select_by,
        "eval_every": tasks[0].eval_every,
        "valid_split": tasks[0].valid_split,
        "valid_batches": tasks[0].valid_batches,
        "window": windows(num_steps)[1],
        "learning_rates": {b.name: list(b.values.get("learning_rate", ())) for b in baselines},
    }
    return SuiteResult(candidate.name, tuple(names), tasks, summaries, settings)


@functools.lru_cache(maxsize=1)
def _source_hash() -> str:
    """A hash of every learnopt source file (cached baselines die with code changes)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class _BaselineCache:
    """Baseline curves on disk, one ``.npz`` per task and sweep, keyed by every setting."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    def _path(self, ev: TaskEvaluator, sweep: Sweep) -> Path | None:
        if sweep.cache_id is None:
            return None
        key = {
            "task": ev.task.name,
            "sweep": sweep.cache_id,
            "num_steps": ev.num_steps,
            "num_seeds": ev.num_seeds,
            "eval_every": ev.eval_every,
            "valid_split": ev.valid_split,
            "valid_batches": ev.valid_batches,
            "seed": ev.seed,
            "param_dtype": str(ev.param_dtype),
            "vectorize": ev.vectorize,
            "source": _source_hash(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
        }
        digest = hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()[:20]
        return self.folder / f"{_file_safe(ev.task.name)}__{_file_safe(sweep.name)}__{digest}.npz"

    def load(self, ev: TaskEvaluator, sweeps: Sequence[Sweep]) -> dict[str, Curves]:
        out = {}
        for sweep in sweeps:
            path = self._path(ev, sweep)
            if path is None or not path.is_file():
                continue
            with np.load(path) as data:
                out[sweep.name] = Curves(
                    name=sweep.name,
                    labels=sweep.labels,
                    values=dict(sweep.values),
                    train_loss=data["train_loss"],
                    valid_steps=data["valid_steps"],
                    valid_loss=data["valid_loss"],
                )
        return out

    def save(self, ev: TaskEvaluator, sweeps: Sequence[Sweep], result: TaskResult) -> None:
        for sweep in sweeps:
            path = self._path(ev, sweep)
            if path is None:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            c = result.curves[sweep.name]
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.npz")
            np.savez_compressed(
                tmp, train_loss=c.train_loss, valid_loss=c.valid_loss, valid_steps=c.valid_steps
            )
            os.replace(tmp, path)


# ------------------------------------------------------------------------------ reports


def _g(x: float, digits: int = 4) -> str:
    if isinstance(x, float) and math.isnan(x):
        return "diverged"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def summary_markdown(result: SuiteResult) -> str:
    """Markdown tables: one row per task, then one row per baseline for the suite."""
    s0 = result.settings
    lines = [
        f"# {result.candidate} vs tuned baselines",
        "",
        f"{s0['num_steps']} steps, {s0['num_seeds']} seeds; baselines tuned per task by "
        f"{'final' if s0['select_by'] == 'final' else 'mean'} train loss over the grid; "
        f"final = mean train loss of the last {s0['window']} steps (also the speed-up's "
        "smoothing); valid = "
        f"{s0['valid_split']} ({s0['valid_batches']} fixed batches). `*`: best learning "
        "rate at the edge of the grid.",
        "",
        "| task | candidate final train | final valid | best baseline (lr) | its final train "
        "| its final valid | loss ratio | speed-up | win |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | :---: |",
    ]
    for s in result.summaries:
        b = s.baselines[s.best_baseline]
        c = s.vs_best
        edge = "*" if b.at_edge else ""
        lines.append(
            f"| {s.task} | {_g(s.candidate_stats.final_train)} | "
            f"{_g(s.candidate_stats.final_valid)} | {b.name} ({b.label}){edge} | "
            f"{_g(b.stats.final_train)} | {_g(b.stats.final_valid)} | "
            f"{_g(c.normalized_loss, 3)} | {_g(c.speedup, 3)}x | {'yes' if c.wins else 'no'} |"
        )
    lines += [
        "",
        "| against | wins (train) | wins (valid) | reaches its final loss | geo-mean loss ratio "
        "| geo-mean speed-up | median speed-up |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, a in result.aggregate().items():
        label = "best tuned baseline per task" if name == "best" else f"tuned {name}"
        n = a["tasks"]
        lines.append(
            f"| {label} | {a['wins']}/{n} | {a['wins_valid']}/{n} | {a['reaches']}/{n} | "
            f"{_g(a['geomean_normalized_loss'], 3)} | {_g(a['geomean_speedup'], 3)}x | "
            f"{_g(a['median_speedup'], 3)}x |"
        )
    lines += ["", "Tuned learning rates (`*` at the grid's edge):", ""]
    for s in result.summaries:
        tuned = ", ".join(
            f"{n} {b.label.removeprefix('lr=')}{'*' if b.at_edge else ''}"
            for n, b in s.baselines.items()
        )
        lines.append(f"- {s.task}: {tuned}")
    return "\n".join(lines) + "\n"


SUMMARY_COLUMNS = (
    "task",
    "optimizer",
    "role",
    "setting",
    "learning_rate",
    "final_train",
    "final_train_std",
    "mean_train",
    "final_valid",
    "diverged_seeds",
    "at_edge",
    "normalized_loss",
    "speedup",
    "reaches_final",
    "wins",
    "wins_valid",
)

CURVE_COLUMNS = ("task", "optimizer", "setting", "seed", "split", "step", "loss")


def _lr_of(curves: Curves, index: int) -> float | str:
    lrs = curves.values.get("learning_rate")
    return lrs[index] if lrs else ""


def summary_rows(result: SuiteResult) -> list[dict[str, Any]]:
    """One row per task and optimizer: the candidate, then every tuned baseline.

    Rows of baselines hold their comparison with the candidate (``normalized_loss``
    etc. are the candidate's figures against that baseline).
    """
    rows = []
    for task_result, s in zip(result.tasks, result.summaries, strict=True):
        c = s.candidate_stats
        vs = s.vs_best
        rows.append(
            dict(
                task=s.task,
                optimizer=s.candidate,
                role="candidate",
                setting=c.label,
                learning_rate="",
                final_train=c.final_train,
                final_train_std=c.final_train_std,
                mean_train=c.mean_train,
                final_valid=c.final_valid,
                diverged_seeds=c.diverged,
                at_edge="",
                normalized_loss=vs.normalized_loss,
                speedup=vs.speedup,
                reaches_final=int(vs.reaches),
                wins=int(vs.wins),
                wins_valid=int(vs.wins_valid),
            )
        )
        for name, b in s.baselines.items():
            comp = s.comparisons[name]
            rows.append(
                dict(
                    task=s.task,
                    optimizer=name,
                    role="best baseline" if name == s.best_baseline else "baseline",
                    setting=b.label,
                    learning_rate=_lr_of(task_result.curves[name], b.index),
                    final_train=b.stats.final_train,
                    final_train_std=b.stats.final_train_std,
                    mean_train=b.stats.mean_train,
                    final_valid=b.stats.final_valid,
                    diverged_seeds=b.stats.diverged,
                    at_edge=int(b.at_edge),
                    normalized_loss=comp.normalized_loss,
                    speedup=comp.speedup,
                    reaches_final=int(comp.reaches),
                    wins=int(comp.wins),
                    wins_valid=int(comp.wins_valid),
                )
            )
    return rows


def sweep_rows(result: SuiteResult) -> list[dict[str, Any]]:
    """One row per task, baseline and learning rate (the whole sweep)."""
    rows = []
    for task_result, s in zip(result.tasks, result.summaries, strict=True):
        for name, b in s.baselines.items():
            curves = task_result.curves[name]
            for i, p in enumerate(b.grid):
                rows.append(
                    dict(
                        task=s.task,
                        optimizer=name,
                        setting=p.label,
                        learning_rate=_lr_of(curves, i),
                        final_train=p.final_train,
                        final_train_std=p.final_train_std,
                        mean_train=p.mean_train,
                        final_valid=p.final_valid,
                        diverged_seeds=p.diverged,
                        selected=int(i == b.index),
                    )
                )
    return rows


def curve_rows(result: SuiteResult) -> Iterable[tuple]:
    """Long-format curves of the candidate and each tuned baseline, per seed.

    ``split`` is ``train`` (minibatch loss before update ``step + 1``) or the valid
    split's name (loss after ``step`` updates).
    """
    for task_result, s in zip(result.tasks, result.summaries, strict=True):
        picks = [(s.candidate, 0)] + [(n, b.index) for n, b in s.baselines.items()]
        for name, index in picks:
            curves = task_result.curves[name]
            label = curves.labels[index]
            train = curves.train_loss[index]
            valid = curves.valid_loss[index]
            for seed in range(train.shape[0]):
                for step, loss in enumerate(train[seed].tolist()):
                    yield (s.task, name, label, seed, "train", step, loss)
                for step, loss in zip(
                    curves.valid_steps.tolist(), valid[seed].tolist(), strict=True
                ):
                    yield (s.task, name, label, seed, task_result.valid_split, step, loss)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def write_results(result: SuiteResult, out_dir: Any, *, plots: bool = True) -> dict[str, Any]:
    """Writes ``summary.csv``, ``sweep.csv``, ``curves.csv``, ``summary.md``,
    ``curves.npz`` (every curve of every sweep point) and ``curves_<task>.png``.

    Returns ``{file kind: path}`` (``"plots"``: list of paths).
    """
    import csv

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Any] = {}

    def write_csv(name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        path = out / name
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            for row in rows:
                writer.writerow([_cell(v) for v in row])
        written[name] = path

    write_csv(
        "summary.csv",
        SUMMARY_COLUMNS,
        ([r[c] for c in SUMMARY_COLUMNS] for r in summary_rows(result)),
    )
    sweep_cols = tuple(sweep_rows(result)[0]) if result.summaries else ()
    write_csv("sweep.csv", sweep_cols, ([r[c] for c in sweep_cols] for r in sweep_rows(result)))
    write_csv("curves.csv", CURVE_COLUMNS, curve_rows(result))
    md = out / "summary.md"
    md.write_text(result.markdown())
    written["summary.md"] = md

    arrays = {}
    for task_result in result.tasks:
        for name, c in task_result.curves.items():
            prefix = f"{task_result.task}/{name}"
            arrays[f"{prefix}/train_loss"] = c.train_loss
            arrays[f"{prefix}/valid_loss"] = c.valid_loss
            arrays[f"{prefix}/valid_steps"] = c.valid_steps
            arrays[f"{prefix}/labels"] = np.asarray(c.labels)
    npz = out / "curves.npz"
    np.savez_compressed(npz, **arrays)
    written["curves.npz"] = npz

    if plots:
        from learnopt import plots as plots_lib

        written["plots"] = [
            plots_lib.eval_task_figure(t, s, out / f"curves_{_file_safe(t.task)}.png")
            for t, s in zip(result.tasks, result.summaries, strict=True)
        ]
    return written


def _file_safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
