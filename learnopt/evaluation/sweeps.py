"""Sweeps: an optimizer and the points of a hyperparameter sweep, trained as one ``vmap``.

A :class:`Sweep` is an optimizer constructor ``make_opt(hparams) -> Optimizer`` plus a
pytree of hyperparameter values with a leading *sweep axis* (e.g. 9 learning rates, or
one theta). :func:`lr_sweep` builds the baselines, :func:`learned_sweep` a learned
optimizer with a fixed theta, :func:`optimizer_sweep` a hand-designed optimizer "as if
it were a learned optimizer"; :func:`baseline_sweeps` the default baselines.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.evaluation.config import (
    DEFAULT_BASELINES,
    DEFAULT_LEARNING_RATES,
    OPT_LIST_TRIALS,
    REFERENCE_SCHEDULE,
    REFERENCE_SCHEDULE_LR,
)
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base

PyTree = Any

__all__ = [
    "Sweep",
    "lr_sweep",
    "learned_sweep",
    "optimizer_sweep",
    "opt_list_sweep",
    "reference_sweep",
    "baseline_sweep",
    "baseline_sweeps",
    "default_baselines",
    "log_grid",
    "DEFAULT_LEARNING_RATES",
    "DEFAULT_BASELINES",
]


def log_grid(low: float, high: float, num: int) -> tuple[float, ...]:
    """``num`` log-spaced values from ``low`` to ``high`` (both included).

    Args:
      low: the first value, ``> 0``.
      high: the last value, ``>= low``.
      num: how many values (``>= 2`` unless ``low == high``).

    Returns:
      The values as Python floats (``np.geomspace``).
    """
    if not (0 < low <= high) or not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"log_grid needs 0 < low <= high, got low={low}, high={high}")
    if num < 1 or (num == 1 and low != high):
        raise ValueError(f"log_grid needs num >= 2 for low < high, got num={num}")
    return tuple(float(x) for x in np.geomspace(low, high, num))


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

    Args:
      lopt: the learned optimizer.
      theta: its meta-parameters.
      name: label of the sweep (default: ``lopt.name``).

    Returns:
      A :class:`Sweep` of one point, ``theta`` stacked along the sweep axis.
    """
    if not isinstance(lopt, lopt_base.LearnedOptimizer):
        raise TypeError(f"lopt must be a LearnedOptimizer, got {type(lopt).__name__}")
    stacked = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], theta)

    def make_opt(hparams: PyTree) -> opt_base.Optimizer:
        return lopt.opt_fn(hparams, is_training=False)

    return Sweep(name=name or lopt.name, make_opt=make_opt, hparams=stacked, labels=("theta",))


def optimizer_sweep(optimizer: opt_base.Optimizer, *, name: str | None = None) -> Sweep:
    """One fixed hand-designed optimizer, evaluated as if it were a learned optimizer.

    Args:
      optimizer: the optimizer, hyperparameters fixed.
      name: label of the sweep (default: ``optimizer.name``).

    Returns:
      A :class:`Sweep` of one point with empty ``hparams``.
    """
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


def opt_list_sweep(trials: int = OPT_LIST_TRIALS, *, name: str = "OptList") -> Sweep:
    """The first ``trials`` NAdamW settings of the OptList (Metz et al., arXiv:2002.11887).

    The list is ordered so that trying its first ``k`` entries and keeping the best is a
    strong tuning strategy for every ``k`` (:mod:`learnopt.optimizers.opt_list`); each
    entry carries its own learning rate, betas, epsilon, weight decays and warmup +
    cosine schedule relative to the run length. As a baseline, the best entry is picked
    per task like a tuned learning rate.

    Args:
      trials: how many entries, ``1 <= trials <= opt_list.num_configs()``.
      name: label of the sweep.

    Returns:
      A :class:`Sweep` whose ``hparams`` are ``{"idx": int32[trials]}``.
    """
    from learnopt.optimizers import opt_list

    total = opt_list.num_configs()
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= total:
        raise ValueError(f"OptList trials must be an integer in [1, {total}], got {trials!r}")

    def make_opt(hparams: PyTree) -> opt_base.Optimizer:
        return opt_list.OptList(hparams["idx"])

    return Sweep(
        name=name,
        make_opt=make_opt,
        hparams={"idx": jnp.arange(trials, dtype=jnp.int32)},
        labels=tuple(f"config={i}" for i in range(trials)),
        values={"config": tuple(float(i) for i in range(trials))},
        cache_id=f"OptList|trials={trials}",
    )


def reference_sweep(learning_rate: float = REFERENCE_SCHEDULE_LR) -> Sweep:
    """The untuned reference schedule: Adam with warmup + cosine decay at one peak rate.

    Registered as ``AdamWarmupCosine``
    (:func:`learnopt.optimizers.nadamw.adam_warmup_cosine`); the default rate
    :data:`~learnopt.evaluation.config.REFERENCE_SCHEDULE_LR` was chosen on the
    meta-training and meta-validation tasks, so comparing with it on ``heldout`` asks
    whether a candidate beats the best hand-designed schedule one would use without
    tuning.

    Args:
      learning_rate: the peak rate.

    Returns:
      A :class:`Sweep` of one point named :data:`~learnopt.evaluation.config.REFERENCE_SCHEDULE`.
    """
    return lr_sweep("AdamWarmupCosine", (learning_rate,), name=REFERENCE_SCHEDULE)


def default_baselines() -> tuple[str, ...]:
    """:data:`DEFAULT_BASELINES`.

    Returns:
      Baseline names accepted by :func:`baseline_sweep`.
    """
    return tuple(DEFAULT_BASELINES)


def baseline_sweep(name: str, learning_rates: Sequence[float] = DEFAULT_LEARNING_RATES) -> Sweep:
    """One baseline by name.

    Args:
      name: ``"OptList"`` (its first :data:`OPT_LIST_TRIALS` settings), ``"OptList<k>"``
        (the first ``k``), ``"Reference"`` (:func:`reference_sweep`), or a registered
        optimizer, swept over ``learning_rates``.
      learning_rates: the grid of a registered optimizer.

    Returns:
      The :class:`Sweep`.

    Raises:
      KeyError: an unknown name (the message names the closest optimizers).
      ValueError: a bad ``OptList<k>`` count.
    """
    if name == REFERENCE_SCHEDULE:
        return reference_sweep()
    if name.startswith("OptList") and name not in opt_base.OPTIMIZERS:
        count = name.removeprefix("OptList")
        if not count.isdigit():
            raise ValueError(f"OptList baseline: 'OptList' or 'OptList<k>', got {name!r}")
        return opt_list_sweep(int(count), name=name)
    if name == "OptList":
        return opt_list_sweep()
    return lr_sweep(name, learning_rates)


def baseline_sweeps(
    names: Iterable[str] | None = None,
    learning_rates: Sequence[float] = DEFAULT_LEARNING_RATES,
) -> list[Sweep]:
    """The baselines of an evaluation (default: :func:`default_baselines`).

    Args:
      names: baseline names (:func:`baseline_sweep`; ``None``: the defaults).
      learning_rates: the grid every learning-rate-tuned baseline is swept over.

    Returns:
      One :class:`Sweep` per name.

    Raises:
      ValueError: ``names`` is empty, or names repeat.
      KeyError: a name is neither special nor a registered optimizer.
    """
    names = default_baselines() if names is None else tuple(names)
    if not names:
        raise ValueError("need at least one baseline optimizer")
    if len(set(names)) != len(names):
        raise ValueError(f"baselines repeat: {list(names)}")
    return [baseline_sweep(n, learning_rates) for n in names]
