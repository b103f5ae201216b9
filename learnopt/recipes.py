"""Meta-training recipes: per-architecture defaults, task-family lists, periodic evaluation.

``learnopt meta-train --lopt NAME --trainer pes --family NAME`` (and
:func:`learnopt.train.meta_train` with ``lopt="NAME", families=[...]``) take what they
are not told from here:

* :data:`LOPT_DEFAULTS`: constructor arguments of a learned optimizer given by name
  (``MLPLOpt``'s library default ``step_mult=0.001`` cannot reach the steps tuned Adam
  takes, see ``docs/meta-training.md``); explicit ``lopt_config`` entries win;
* :data:`TRAINING_DEFAULTS`: the meta-training settings that go with an architecture
  (outer learning rate, clipping, truncation and run length, perturbation size,
  population) where the run does not set them. Architectures without an entry (the
  ``Learnable*`` ones) keep :func:`learnopt.train.meta_train`'s defaults, the notes'
  walkthrough;
* :func:`expand_families`: ``--family`` names to families, one gradient estimator each
  (the learner averages their estimates, as the notes' library does with several task
  families); the name of a mixture (``meta-train``) stands for its buckets;
* :class:`PeriodicEval`: a ``meta_train`` callback that every N meta-steps trains a few
  held-out tasks with the current theta and compares the final training loss with Adam
  tuned over a small learning-rate grid (computed once, on the same batches), writing
  ``eval.csv`` and ``eval.png`` into the run's folder.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "LOPT_DEFAULTS",
    "TRAINING_DEFAULTS",
    "EVAL_TASKS",
    "EVAL_LEARNING_RATES",
    "lopt_defaults",
    "training_defaults",
    "expand_families",
    "PeriodicEval",
    "EVAL_COLUMNS",
]

#: Constructor arguments of learned optimizers built by name for meta-training.
LOPT_DEFAULTS: dict[str, dict[str, Any]] = {
    "MLPLOpt": dict(hidden_size=16, hidden_layers=2, step_mult=0.01, exp_mult=0.1),
    "AdafacMLPLOpt": dict(hidden_size=8, step_mult=0.01, exp_mult=0.1),
    "MLPNomLOpt": dict(
        hidden_size=8,
        step_mult=0.001,
        exp_mult=(0.1, 0.1, 0.1),
        nominal_stepsize=3e-3,
        nominal_controller=True,
        nominal_grad_estimator="Adam",
    ),
    "RNNMLPLOpt": dict(step_multiplier=0.01, magnitude_rate=0.1),
    "NNAdam": dict(initial_learning_rate=3e-3),
    "HyperV2": dict(lstm_hidden_size=32, param_inits=64, step_mult=0.005),
    "Celo2": dict(step_mult=0.003),
}

#: Meta-training settings per architecture (used where a run leaves them unset). The
#: truncation settings apply to the truncated trainers (tbptt, tes, pes, nres) only.
TRAINING_DEFAULTS: dict[str, dict[str, Any]] = {
    name: dict(
        outer_lr=1e-3,
        max_grad_norm=1.0,
        trunc_length=20,
        total_length=1000,
        num_tasks=8,
        std=0.01,
    )
    for name in LOPT_DEFAULTS
}
TRAINING_DEFAULTS["HyperV2"]["std"] = 0.003  # VeLO's mixing amplifies perturbations
#: Settings of :data:`TRAINING_DEFAULTS` that only the truncated trainers take.
TRUNCATION_SETTINGS = ("trunc_length", "total_length", "num_tasks", "std")


def lopt_defaults(name: str) -> dict[str, Any]:
    """The constructor arguments :func:`learnopt.train.meta_train` uses for ``name``."""
    return dict(LOPT_DEFAULTS.get(name, {}))


def training_defaults(name: str, trainer: str) -> dict[str, Any]:
    """The meta-training settings that go with architecture ``name`` and ``trainer``."""
    from learnopt.outer_trainers import registry

    out = dict(TRAINING_DEFAULTS.get(name, {}))
    if trainer in registry.FULL_RUN:
        for k in TRUNCATION_SETTINGS:
            out.pop(k, None)
    return out


def expand_families(names: Sequence[str]) -> list[str]:
    """Family (or task) names, with a registered mixture's name replaced by its buckets.

    ``["meta-train"]`` becomes the four ``MetaTrain_*`` buckets of
    :mod:`learnopt.tasks.suites`. Names must be registered task families or tasks;
    duplicates are an error (each name is one gradient estimator).
    """
    from learnopt.tasks import base as tasks_base
    from learnopt.tasks import suites

    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise TypeError(f"families must be a non-empty list of names, got {names!r}")
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"families must be names (strings), got {name!r}")
        if name == "meta-train":
            out.extend(suites.META_TRAIN_BUCKETS)
        elif name in tasks_base.TASK_FAMILIES or name in tasks_base.TASKS:
            out.append(name)
        else:
            # The registry's message lists close matches and the known names.
            try:
                tasks_base.TASK_FAMILIES.constructor(name)
            except KeyError as e:
                raise ValueError(f"families: {e}") from None
    dup = sorted({n for n in out if out.count(n) > 1})
    if dup:
        raise ValueError(f"families: each family is one estimator; {dup} given twice")
    return out


# --------------------------------------------------------------------- periodic eval

#: Held-out tasks of the periodic evaluation: one of each kind that costs about a
#: millisecond per step on a CPU (an MLP, an auto-encoder, a recurrent and an attention
#: language model).
EVAL_TASKS: tuple[str, ...] = (
    "ImageMLP_Mnist5k_14_Tanh64x64",
    "ImageMLPAE_Digits8_32x8x32_bs128",
    "RNNLM_pystdlibbytes_Patch16_LSTM32_Embed32_bs32",
    "TransformerLM_PyStdlibBytes_MultiRuntime_3",
)
#: Adam's learning-rate grid in the periodic evaluation (computed once per run).
EVAL_LEARNING_RATES: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
#: Columns of ``eval.csv``.
EVAL_COLUMNS = (
    "step",
    "task",
    "final_train",
    "final_valid",
    "adam_final_train",
    "adam_lr",
    "normalized_loss",
    "seconds",
)


@dataclasses.dataclass
class _TaskEval:
    """One task's evaluator (compiled once; the data rewound before every run)."""

    name: str
    evaluator: Any
    data_state: dict[str, Any] | None
    adam: dict[str, float] | None = None


class PeriodicEval:
    """A :func:`learnopt.train.meta_train` callback: a small held-out evaluation every N steps.

    Every ``every`` meta-steps (at the first metrics flush at or after each multiple) the
    current theta trains each of ``tasks`` for ``steps`` inner steps over ``seeds``
    seeds (:class:`learnopt.eval.TaskEvaluator`, the same batches every time). The
    figures: ``final_train`` (mean training loss over the last 10% of steps),
    ``final_valid``, and ``normalized_loss = final_train / final_train`` of Adam tuned
    over ``learning_rates`` (computed on the first call, on the same batches; < 1 means
    the learned optimizer wins). Rows go to ``<out_dir>/eval.csv`` (appended, so a
    resumed run continues it) and ``<out_dir>/eval.png`` plots the normalized losses
    against the meta-step; ``history`` keeps them in memory too. Each task's programs
    compile once per run (theta is an argument).

    Args:
      every: meta-steps between evaluations.
      tasks: registered task names (default :data:`EVAL_TASKS`).
      steps: inner steps per run.
      seeds: runs per task.
      learning_rates: Adam's grid (empty: no baseline, ``normalized_loss`` empty).
      out_dir: where to write (default: the run's ``out_dir``; None writes nothing).
      at_start: also evaluate the initial theta (at the first flush).
      progress: print one line per evaluation.
    """

    def __init__(
        self,
        every: int,
        tasks: Sequence[str] = EVAL_TASKS,
        *,
        steps: int = 300,
        seeds: int = 1,
        learning_rates: Sequence[float] = EVAL_LEARNING_RATES,
        out_dir: str | Path | None = None,
        at_start: bool = False,
        progress: bool = True,
    ):
        from learnopt import _validate

        self.every = _validate.positive_int("every", every)
        self.steps = _validate.positive_int("steps", steps)
        self.seeds = _validate.positive_int("seeds", seeds)
        if isinstance(tasks, str) or not tasks:
            raise ValueError(f"tasks must be a non-empty list of task names, got {tasks!r}")
        self.tasks = tuple(tasks)
        self.learning_rates = tuple(float(x) for x in learning_rates)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.at_start = at_start
        self.progress = progress
        self.history: list[dict[str, Any]] = []
        self._evals: list[_TaskEval] | None = None
        self._lopt: Any = None
        self._last: int | None = None

    # -- the callback
    def __call__(self, info: Any) -> None:
        due = info.step // self.every
        if self._last is None:
            self._last = (info.step - len(info.rows)) // self.every
            if self.at_start and info.step - len(info.rows) == 0:
                self._last = -1
        if due <= self._last and not (info.step == info.num_steps and self._last < due):
            return
        self._last = due
        self.evaluate(info.learner.lopt, info.theta, info.step, info.out_dir)

    def evaluate(self, lopt: Any, theta: Any, step: int, out_dir: Path | None = None) -> list:
        """Evaluates ``theta`` now; returns the rows (also appended to ``history``)."""
        import jax
        import numpy as np

        from learnopt import eval as lopt_eval

        if self._evals is None or lopt is not self._lopt:
            self._setup(lopt, theta)
        stacked = jax.tree_util.tree_map(lambda x: np.asarray(x)[None], jax.device_get(theta))
        rows = []
        for te in self._evals:
            start = time.perf_counter()
            ev = te.evaluator
            ev.sweeps[0] = dataclasses.replace(ev.sweeps[0], hparams=stacked)
            result = self._run(te)
            window = lopt_eval.windows(self.steps)[1]
            stats = lopt_eval.PointStats.of(result.curves["candidate"], 0, window)
            adam = te.adam or {}
            base = adam.get("final_train", math.nan)
            ratio = stats.final_train / base if base > 0 and math.isfinite(base) else math.nan
            rows.append(
                {
                    "step": int(step),
                    "task": te.name,
                    "final_train": stats.final_train,
                    "final_valid": stats.final_valid,
                    "adam_final_train": base,
                    "adam_lr": adam.get("lr", math.nan),
                    "normalized_loss": ratio,
                    "seconds": round(time.perf_counter() - start, 2),
                }
            )
        self.history.extend(rows)
        out = self.out_dir or (Path(out_dir) if out_dir is not None else None)
        if out is not None and jax.process_index() == 0:
            self._write(out, rows)
        if self.progress:
            ratios = [r["normalized_loss"] for r in rows]
            wins = sum(1 for r in ratios if r < 1)
            text = ", ".join(f"{r['task'].split('_')[0]} {r['normalized_loss']:.3g}" for r in rows)
            print(
                f"learnopt eval at step {step}: loss / tuned Adam: {text}; wins {wins} of "
                f"{len(rows)}",
                flush=True,
            )
        return rows

    # -- internals
    def _setup(self, lopt: Any, theta: Any) -> None:
        from learnopt import eval as lopt_eval
        from learnopt.tasks import base as tasks_base

        self._lopt = lopt
        candidate = lopt_eval.learned_sweep(lopt, theta, name="candidate")
        self._evals = []
        for name in self.tasks:
            task = tasks_base.get_task(name)
            te = _TaskEval(
                name,
                lopt_eval.TaskEvaluator(
                    task, [candidate], num_steps=self.steps, num_seeds=self.seeds
                ),
                _data_state(task),
            )
            if self.learning_rates:  # the tuned baseline, once, on the same batches
                adam = lopt_eval.TaskEvaluator(
                    task,
                    [lopt_eval.lr_sweep("Adam", self.learning_rates)],
                    num_steps=self.steps,
                    num_seeds=self.seeds,
                )
                _set_data_state(task, te.data_state)
                result = adam.run()
                window = lopt_eval.windows(self.steps)[1]
                curves = result.curves["Adam"]
                grid = [
                    lopt_eval.PointStats.of(curves, i, window)
                    for i in range(curves.train_loss.shape[0])
                ]
                finals = [g.final_train if math.isfinite(g.final_train) else math.inf for g in grid]
                best = min(range(len(finals)), key=finals.__getitem__)
                te.adam = {"final_train": grid[best].final_train, "lr": self.learning_rates[best]}
            self._evals.append(te)

    def _run(self, te: _TaskEval) -> Any:
        _set_data_state(te.evaluator.task, te.data_state)
        return te.evaluator.run()

    def _write(self, out: Path, rows: list[dict[str, Any]]) -> None:
        from learnopt import plots

        path = out / "eval.csv"
        new = not path.exists()
        with open(path, "a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(EVAL_COLUMNS)
            for r in rows:
                writer.writerow([_cell(r[c]) for c in EVAL_COLUMNS])
        table = read_eval_csv(path)
        if table:
            steps = sorted({r["step"] for r in table})
            ys = {}
            for task in dict.fromkeys(r["task"] for r in table):
                by_step = {r["step"]: r["normalized_loss"] for r in table if r["task"] == task}
                ys[task] = [by_step.get(s, math.nan) for s in steps]
            try:
                plots.line_plot(
                    out / "eval.png",
                    steps,
                    ys,
                    xlabel="meta-step",
                    ylabel="final train loss / tuned Adam's",
                    title=f"held-out evaluation ({self.steps} steps, {self.seeds} seed(s))",
                    logy=True,
                )
            except (OSError, ValueError):
                pass


def read_eval_csv(path: str | Path) -> list[dict[str, Any]]:
    """``eval.csv`` as a list of rows (numbers as floats, ``step`` as int)."""
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            parsed: dict[str, Any] = {}
            for k, v in row.items():
                if k == "task":
                    parsed[k] = v
                elif k == "step":
                    parsed[k] = int(v)
                else:
                    parsed[k] = float(v) if v != "" else math.nan
            rows.append(parsed)
    return rows


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def _data_state(task: Any) -> dict[str, Any] | None:
    """The position of every split of ``task``'s data (None if a split cannot report it)."""
    from learnopt.tasks.datasets import base as datasets_base

    ds = getattr(task, "datasets", None)
    if ds is None:
        return None
    try:
        return {s: getattr(ds, s).get_state() for s in datasets_base.SPLITS}
    except (AttributeError, TypeError, NotImplementedError):
        return None


def _set_data_state(task: Any, state: Mapping[str, Any] | None) -> None:
    if state is None:
        return
    for split, st in state.items():
        getattr(task.datasets, split).set_state(st)
