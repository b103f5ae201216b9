"""Meta-training runs: checkpointed, resumable, safe against faults and divergence.

:func:`meta_train` is the meta-training loop that ``learnopt meta-train``, notebooks and
research scripts all call (this module is its public face; the run's pieces live in the
package :mod:`learnopt.run`: ``config``, ``settings``, ``build``, ``folder``, ``metrics``,
``health``, ``processes``, ``loop``)::

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
While a run writes its folder it holds the folder's lock: a second run on it is refused at
once (:class:`RunLockedError` names the process); a killed run's lock never blocks a
resume.

**Divergence**: a step is applied only if the meta-gradient, the new theta and the new
outer state are finite (``skipped`` column). When more than half of the last
``health_window`` steps were skipped a ``MetaTrainWarning`` is issued; when theta has not
changed for ``health_window`` steps the run stops. Either way the result's ``status`` is
``"diverged"``/``"stalled"`` (``ok`` is False; the CLI exits 1), and theta is the last
finite one.

**Faults**: a checkpoint or metrics write that fails (full disk, unwritable folder) stops
the run with ``status="failed"`` and a one-line ``message``; the previous checkpoint stays
complete and loadable. Leftover temporary files of killed writes are removed at the
next start. Space for the final theta is reserved when the run starts, so a disk that
fills up during the run cannot lose the trained theta: if the final checkpoint cannot be
written, theta.msgpack still gets the final theta (and the message says so).
"""

from __future__ import annotations

from learnopt.run import trainers as _trainers
from learnopt.run.build import (
    build_learner,
    build_lopt,
    build_task,
    expand_families,
    make_estimator,
)
from learnopt.run.config import DEFAULT_LOPT, DEFAULT_TASK, FULL_TRAINERS, RunConfig
from learnopt.run.folder import RunExistsError, RunLockedError, holds_run
from learnopt.run.loop import meta_train
from learnopt.run.metrics import BASE_COLUMNS, read_metrics
from learnopt.run.results import DataUnavailableError, MetaTrainResult, MetaTrainWarning, StepInfo

__all__ = [
    "meta_train",
    "RunConfig",
    "build_learner",
    "build_task",
    "build_lopt",
    "make_estimator",
    "expand_families",
    "MetaTrainResult",
    "StepInfo",
    "MetaTrainWarning",
    "RunExistsError",
    "RunLockedError",
    "DataUnavailableError",
    "TRAINERS",
    "FULL_TRAINERS",
    "DEFAULT_TASK",
    "DEFAULT_LOPT",
    "BASE_COLUMNS",
    "holds_run",
    "read_metrics",
]

#: The trainer names and what each does (``learnopt.run.config.TRAINERS`` has the classes).
TRAINERS = _trainers.View(
    lambda: {n: f"{s.estimator}: {s.help}" for n, s in _trainers.SPECS.items()}
)
