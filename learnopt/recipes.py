"""Meta-training recipes: the tables of per-architecture defaults.

``learnopt meta-train --lopt NAME --trainer pes --family NAME`` (and
:func:`learnopt.train.meta_train` with ``lopt="NAME", families=[...]``) take what they
are not told from here (pure data: importing this module imports no JAX):

* :data:`LOPT_DEFAULTS`: constructor arguments of a learned optimizer given by name
  (``MLPLOpt``'s library default ``step_mult=0.001`` cannot reach the steps tuned Adam
  takes, see ``docs/meta-training.md``); explicit ``lopt_config`` entries win;
* :data:`TRAINING_DEFAULTS`: the meta-training settings that go with an architecture
  (outer learning rate, clipping, truncation and run length, perturbation size,
  population) where the run does not set them. Architectures without an entry (the
  ``Learnable*`` ones) keep :func:`learnopt.train.meta_train`'s defaults, the notes'
  walkthrough.

The task families of a run are expanded by :func:`learnopt.run.build.expand_families`;
the periodic meta-validation is :class:`learnopt.evaluation.periodic.PeriodicEval`.
"""

from __future__ import annotations

from typing import Any

from learnopt.run.config import FULL_TRAINERS

__all__ = [
    "LOPT_DEFAULTS",
    "TRAINING_DEFAULTS",
    "TRUNCATION_SETTINGS",
    "lopt_defaults",
    "training_defaults",
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
    """The constructor arguments :func:`learnopt.train.meta_train` uses for ``name``.

    Args:
      name: a learned optimizer's registered name.

    Returns:
      A copy of its :data:`LOPT_DEFAULTS` entry (``{}`` if it has none).
    """
    return dict(LOPT_DEFAULTS.get(name, {}))


def training_defaults(name: str, trainer: str) -> dict[str, Any]:
    """The meta-training settings that go with architecture ``name`` and ``trainer``.

    Args:
      name: a learned optimizer's registered name.
      trainer: a trainer name (the full-run ones take no truncation settings).

    Returns:
      A copy of its :data:`TRAINING_DEFAULTS` entry, less what ``trainer`` does not take.
    """
    out = dict(TRAINING_DEFAULTS.get(name, {}))
    if trainer in FULL_TRAINERS:
        for k in TRUNCATION_SETTINGS:
            out.pop(k, None)
    return out
