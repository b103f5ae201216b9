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

from learnopt.evaluation.config import DEFAULT_BASELINES, DEFAULT_LEARNING_RATES
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base

PyTree = Any

__all__ = [
    "Sweep",
    "lr_sweep",
    "learned_sweep",
    "optimizer_sweep",
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


def default_baselines() -> tuple[str, ...]:
    """:data:`DEFAULT_BASELINES`, with ``AdamW`` standing in for ``NAdamW`` if it is missing.

    Returns:
      Registered optimizer names.
    """
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
    """Learning-rate sweeps of registered optimizers (default: :func:`default_baselines`).

    Args:
      names: registered optimizer names (``None``: :func:`default_baselines`).
      learning_rates: the grid every baseline is swept over.

    Returns:
      One :func:`lr_sweep` per name.

    Raises:
      ValueError: ``names`` is empty.
      KeyError: a name is not a registered optimizer.
    """
    names = default_baselines() if names is None else tuple(names)
    if not names:
        raise ValueError("need at least one baseline optimizer")
    return [lr_sweep(n, learning_rates) for n in names]
