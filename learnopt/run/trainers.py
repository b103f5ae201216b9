"""The trainers of meta-training runs: one entry per gradient estimator, the rest derived.

An estimator class lives in ``learnopt/outer_trainers/`` (in ``ESTIMATORS`` under its class
name); one :class:`TrainerSpec` registered here makes it a trainer: its ``--trainer`` name,
whether it unrolls whole inner runs, its default population and how a run builds it. The
command line's ``--trainer`` (choices, ``--help``, ``learnopt list trainers``),
``learnopt.run.config.TRAINERS``/``FULL_TRAINERS``/``DEFAULT_NUM_TASKS``,
``learnopt.train.TRAINERS``, :func:`learnopt.run.build.make_estimator` and the tests' trainer
sweeps read :data:`SPECS`. Pure Python (no JAX): the command line's parser is built from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from learnopt.registry import UnknownNameError, unknown_name_message

__all__ = ["TrainerSpec", "SPECS", "DEFAULT_POPULATION", "View", "register"]

#: Inner runs per meta-step of a trainer that sets no other (ES: antithetic pairs).
DEFAULT_POPULATION = 8


@dataclasses.dataclass(frozen=True)
class TrainerSpec:
    """A gradient estimator as meta-training runs know it.

    Attributes:
      name: the command line's name (``--trainer pes``).
      estimator: its class's name in ``learnopt.outer_trainers.ESTIMATORS``.
      help: what it does, one line (``learnopt meta-train --help``).
      takes: the run settings its constructor takes as keywords (``"trunc_length"``, ...).
      full: whether it unrolls whole fresh inner runs (it then takes ``total_length``, and
        ``trunc_length`` is refused).
      num_tasks: its default population (inner runs per meta-step).
      builder: ``builder(settings, truncated_step, cls) -> estimator``, for an estimator
        that :meth:`build`'s default does not make.
    """

    name: str
    estimator: str
    help: str
    takes: tuple[str, ...] = ()
    full: bool = False
    num_tasks: int = DEFAULT_POPULATION
    builder: Callable[[Any, Any, type], Any] | None = None

    def build(self, settings: Any, truncated_step: Any, cls: type) -> Any:
        """The estimator, from the run's settings.

        Args:
          settings: the run's resolved settings (a ``RunConfig``, every setting filled in).
          truncated_step: its population: ``num_tasks`` inner runs of ``total_length`` steps.
          cls: the estimator class.

        Returns:
          ``builder(settings, truncated_step, cls)``, or by default ``cls(truncated_step,
          **{name: settings.name for name in takes})``.
        """
        if self.builder is not None:
            return self.builder(settings, truncated_step, cls)
        return cls(truncated_step, **{k: getattr(settings, k) for k in self.takes})


class _Specs(dict):
    """A dict whose unknown keys are a ``KeyError`` that names the closest trainers."""

    def __missing__(self, name: str) -> TrainerSpec:
        raise UnknownNameError(unknown_name_message("trainer", name, self, listing="trainers"))


#: The trainers by name, in the order ``--help`` lists them (``SPECS["pes2"]`` raises an
#: ``UnknownNameError``, a ``KeyError`` that names the closest names).
SPECS: dict[str, TrainerSpec] = _Specs()


def register(spec: TrainerSpec) -> TrainerSpec:
    """Adds a trainer to :data:`SPECS` (one of the same name is replaced).

    Args:
      spec: the trainer.

    Returns:
      ``spec``.
    """
    SPECS[spec.name] = spec
    return spec


class View(Mapping):
    """A read-only mapping made from :data:`SPECS` at each use (so it shows later entries).

    Args:
      make: returns the mapping's contents, e.g. ``lambda: {n: s.help for n, s in
        SPECS.items()}``.
    """

    def __init__(self, make: Callable[[], dict[str, Any]]):
        self._make = make

    def __getitem__(self, key: str) -> Any:
        return self._make()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._make())

    def __len__(self) -> int:
        return len(self._make())

    def __repr__(self) -> str:
        return repr(self._make())


register(
    TrainerSpec(
        "full_grad",
        "FullGrad",
        "backprop through a whole fresh inner run of T steps (exact)",
        full=True,
        num_tasks=1,
    )
)
register(
    TrainerSpec(
        "tbptt",
        "TruncatedGrad",
        "backprop through K-step truncations of T-step runs (biased)",
        takes=("trunc_length",),
    )
)
register(
    TrainerSpec(
        "full_es",
        "FullES",
        "antithetic ES over a whole fresh inner run of T steps",
        takes=("std",),
        full=True,
    )
)
register(
    TrainerSpec(
        "tes",
        "TruncatedES",
        "antithetic ES over K-step truncations of T-step runs (biased)",
        takes=("trunc_length", "std"),
    )
)
register(
    TrainerSpec(
        "pes",
        "TruncatedPES",
        "persistent ES over K-step truncations of T-step runs (unbiased)",
        takes=("trunc_length", "std"),
    )
)
register(
    TrainerSpec(
        "nres",
        "NoiseReuseES",
        "noise-reuse ES over K-step truncations of T-step runs (unbiased)",
        takes=("trunc_length", "std"),
    )
)
