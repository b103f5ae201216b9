"""Theta files that say what they are: load a meta-trained optimizer in one line.

A theta alone is not an optimizer: the same weights mean different things under another
architecture, and even under the same architecture with another ``step_mult``. A theta
file written here carries, beside theta, the **metadata** that rebuilds the learned
optimizer::

    from learnopt.learned_optimizers import theta_files

    theta_files.save("my_lopt.msgpack", lopt, theta, licence="Apache-2.0")
    trained = theta_files.load("my_lopt.msgpack")     # no architecture to declare
    tx = trained.as_optax(weight_decay=1e-4)
    lopt, theta = trained                              # it also unpacks

``learnopt meta-train`` (:func:`learnopt.train.meta_train`) writes its ``theta.msgpack``
this way, so ``theta_files.load("runs/X/theta.msgpack")`` works on every run;
``learnopt.pretrained.load(name)`` returns the same :class:`TrainedLOpt` for the thetas
that ship with learnopt.

Metadata fields (format 1; JSON inside the msgpack file, see
:mod:`learnopt.checkpoints`):

* ``architecture``: the registered name in ``lopt_base.LOPTS`` (``"MLPLOpt"``), or the
  class name of an unregistered learned optimizer (``registered`` is then false);
* ``config``: the constructor arguments (``MLPLOpt(**config)`` rebuilds it), read from
  the attributes of the same names; ``None`` when they cannot be read;
* ``class``: the class's import path; ``num_theta``: the number of theta values;
* ``learnopt_version``, ``created`` (UTC, ISO 8601), ``licence`` (``None``: not stated);
* ``meta_training``: how theta was obtained (task or families, trainer, steps and the
  run's settings, as :func:`learnopt.train.meta_train` records them), or ``None``;
* ``description``: free text (evaluation figures of a shipped theta, ...).

Files without metadata (``checkpoints.save_theta(path, theta)``, older runs) still load,
given the learned optimizer: ``load(path, lopt=MLPLOpt(...))``. Every error names the
file and what is wrong (:class:`ThetaFileError`, a ``ValueError``).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax

from learnopt import checkpoints
from learnopt.learned_optimizers import base as lopt_base

PyTree = Any

__all__ = [
    "FORMAT",
    "TrainedLOpt",
    "ThetaFileError",
    "save",
    "load",
    "read_metadata",
    "make_metadata",
    "lopt_config",
    "registered_name",
    "build",
]

#: Version of the metadata layout written by :func:`save`.
FORMAT = 1


class ThetaFileError(ValueError):
    """A theta file that cannot be turned into a learned optimizer (the message says why)."""


# ------------------------------------------------------------------------ description


def _jsonable(value: Any) -> Any:
    """``value`` as JSON types (tuples -> lists, numpy scalars -> numbers), else raise."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _jsonable(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def lopt_config(lopt: lopt_base.LearnedOptimizer) -> dict[str, Any] | None:
    """The constructor arguments of ``lopt``, read back from its attributes.

    Every learned optimizer in learnopt stores each constructor argument under its own
    name, so ``type(lopt)(**lopt_config(lopt))`` rebuilds it. Returns ``None`` when an
    argument has no attribute of its name or its value is not JSON-representable (a
    callable, an array, ...): such an optimizer is saved without a config.

    Args:
      lopt: the learned optimizer.

    Returns:
      ``{argument name: JSON value}`` for every named constructor argument, or None.

    Raises:
      TypeError: ``lopt`` is not a :class:`~learnopt.learned_optimizers.base.LearnedOptimizer`.
    """
    if not isinstance(lopt, lopt_base.LearnedOptimizer):
        raise TypeError(f"lopt must be a LearnedOptimizer, got {type(lopt).__name__}")
    args = lopt_base.constructor_args(lopt)
    try:
        return None if args is None else {k: _jsonable(v) for k, v in args.items()}
    except TypeError:
        return None


def registered_name(lopt: lopt_base.LearnedOptimizer) -> str | None:
    """The name under which ``type(lopt)`` is registered in ``LOPTS``, or ``None``.

    Args:
      lopt: the learned optimizer.

    Returns:
      ``lopt.name`` if that name is registered to ``type(lopt)``, else the first
      registered name whose constructor is ``type(lopt)``, else None.
    """
    cls = type(lopt)
    names = lopt_base.LOPTS.names()
    preferred = [lopt.name] if lopt.name in names else []
    for name in preferred + names:
        if lopt_base.LOPTS.constructor(name) is cls:
            return name
    return None


def build(architecture: str, config: Mapping[str, Any] | None = None):
    """``LOPTS.get(architecture, **config)``: the learned optimizer a metadata describes.

    Args:
      architecture: a registered learned-optimizer name (the metadata's
        ``architecture``).
      config: its constructor arguments (the metadata's ``config``); None for none.

    Returns:
      The learned optimizer.
    """
    return lopt_base.LOPTS.get(architecture, **dict(config or {}))


def make_metadata(
    lopt: lopt_base.LearnedOptimizer,
    theta: PyTree | None = None,
    *,
    meta_training: Mapping[str, Any] | None = None,
    licence: str | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """The metadata :func:`save` writes for ``lopt`` (see the module docstring).

    Args:
      lopt: the learned optimizer the theta belongs to.
      theta: its meta-parameters, to count (``num_theta``); None leaves the count out.
      meta_training: how theta was obtained (JSON-able values), or None.
      licence: the licence of the theta, or None (not stated).
      description: free text, or None.

    Returns:
      The metadata dict (JSON types only), format :data:`FORMAT`.
    """
    from learnopt import __version__

    name = registered_name(lopt)
    cls = type(lopt)
    metadata = {
        "format": FORMAT,
        "architecture": name or cls.__name__,
        "registered": name is not None,
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "config": lopt_config(lopt),
        "learnopt_version": __version__,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "licence": licence,
        "meta_training": _jsonable(dict(meta_training)) if meta_training is not None else None,
        "description": description,
    }
    if theta is not None:
        metadata["num_theta"] = int(sum(np.size(x) for x in jax.tree_util.tree_leaves(theta)))
    return metadata


# ------------------------------------------------------------------------- the object


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedLOpt:
    """A learned optimizer together with its meta-trained ``theta`` (and where it came from).

    Attributes:
      lopt: the learned optimizer (rebuilt from the file's metadata).
      theta: its meta-parameters, in the structure of ``lopt.init``.
      metadata: the file's metadata (see the module docstring); ``{}`` if it had none.
      path: the file it was loaded from, if any.

    ``lopt, theta = trained`` unpacks it.
    """

    lopt: lopt_base.LearnedOptimizer
    theta: PyTree
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    path: Path | None = None

    def opt_fn(self, is_training: bool = False):
        """``lopt.opt_fn(theta)``: a learnopt ``Optimizer``.

        Args:
          is_training: passed to ``lopt.opt_fn`` (True when built for meta-training).

        Returns:
          The :class:`~learnopt.optimizers.base.Optimizer` the trained theta defines.
        """
        return self.lopt.opt_fn(self.theta, is_training=is_training)

    def as_optax(
        self,
        num_steps: int | None = None,
        weight_decay: float = 0.0,
        weight_decay_mask: Any = None,
    ) -> optax.GradientTransformationExtraArgs:
        """The optimizer as an optax transformation (composes with ``optax.chain``).

        Pass the loss as ``extra_args={"loss": loss}`` or ``value=loss`` to ``update``
        (learned optimizers that read it use it as a feature). ``num_steps``: the planned
        length of training, for architectures that condition on progress.

        Args:
          num_steps: the planned number of steps, passed to the optimizer's ``init``;
            None when unknown.
          weight_decay: decoupled weight decay per step (``p <- p + step -
            weight_decay * p``), in [0, 1); use this rather than chaining
            ``optax.add_decayed_weights``, which would make the weights grow.
          weight_decay_mask: which parameters decay (None: all).

        Returns:
          An ``optax.GradientTransformationExtraArgs`` whose updates are
          ``new_params - params``.
        """
        decay = {"weight_decay": weight_decay, "weight_decay_mask": weight_decay_mask}
        if num_steps is None:
            return self.lopt.as_optax(self.theta, **decay)
        return self.opt_fn().as_optax(num_steps=num_steps, **decay)

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the same theta and metadata to ``path`` (the write is atomic).

        Args:
          path: the file to write (``.msgpack`` by convention).

        Returns:
          The path written, as a ``pathlib.Path``.
        """
        return checkpoints.save_theta(path, self.theta, metadata=self.metadata or None)

    def __iter__(self) -> Iterator[Any]:
        yield self.lopt
        yield self.theta

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path else ""
        return f"TrainedLOpt({self.lopt!r}{where})"


# ------------------------------------------------------------------------ save / load


def save(
    path: str | os.PathLike,
    lopt: lopt_base.LearnedOptimizer,
    theta: PyTree,
    *,
    meta_training: Mapping[str, Any] | None = None,
    licence: str | None = None,
    description: str | None = None,
) -> Path:
    """Writes ``theta`` with the metadata that rebuilds ``lopt`` (atomically); returns the path.

    Raises ``ValueError`` when ``theta`` does not fit ``lopt``.

    Args:
      path: the file to write (``.msgpack`` by convention).
      lopt: the learned optimizer ``theta`` belongs to.
      theta: the meta-parameters, with the structure and shapes of ``lopt.init``.
      meta_training: how theta was obtained (JSON-able values), or None.
      licence: the licence of the theta, or None (not stated).
      description: free text, or None.

    Returns:
      The path written, as a ``pathlib.Path``.
    """
    _check_fits(lopt, theta, "theta")
    metadata = make_metadata(
        lopt, theta, meta_training=meta_training, licence=licence, description=description
    )
    return checkpoints.save_theta(path, theta, metadata=metadata)


def read_metadata(path: str | os.PathLike) -> dict[str, Any] | None:
    """The metadata of the theta file ``path`` (``None`` if it has none).

    Args:
      path: a theta file.

    Returns:
      The metadata dict, or None for a file written without metadata.

    Raises:
      FileNotFoundError: no file at ``path``.
      ThetaFileError: the file cannot be read as a theta file.
    """
    path = Path(path)
    try:
        return checkpoints.load_theta_metadata(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no theta file at {path}") from None
    except ValueError as e:
        raise ThetaFileError(str(e)) from None


def _check_fits(lopt: lopt_base.LearnedOptimizer, theta: PyTree, what: str) -> None:
    """Raises ``ValueError`` naming the entries where ``theta`` does not fit ``lopt``."""
    import flax.serialization

    from learnopt import _validate

    expected = flax.serialization.to_state_dict(jax.eval_shape(lopt.init, jax.random.PRNGKey(0)))
    got = flax.serialization.to_state_dict(theta)
    _validate.theta_like(what, got, expected, repr(lopt))


def _lopt_from_metadata(path: Path, metadata: dict[str, Any]) -> lopt_base.LearnedOptimizer:
    fmt = metadata.get("format")
    if not isinstance(fmt, int) or fmt > FORMAT:
        raise ThetaFileError(
            f"{path}: metadata format {fmt!r} is not one this learnopt reads (<= {FORMAT}); "
            "upgrade learnopt"
        )
    name, config = metadata.get("architecture"), metadata.get("config")
    if not isinstance(name, str) or not name:
        raise ThetaFileError(f"{path}: the metadata names no architecture")
    if not metadata.get("registered", True) or name not in lopt_base.LOPTS:
        raise ThetaFileError(
            f"{path}: its learned optimizer {name!r} ({metadata.get('class')}) is not "
            "registered in learnopt.learned_optimizers.base.LOPTS; register it or pass "
            "lopt= to load the theta into it"
        )
    if config is not None and not isinstance(config, dict):
        raise ThetaFileError(f"{path}: the metadata's config must be a dict, got {config!r}")
    if config is None:
        raise ThetaFileError(
            f"{path}: the metadata of {name} has no constructor config; pass lopt= (the "
            "learned optimizer it was trained with)"
        )
    try:
        return build(name, config)
    except (TypeError, ValueError) as e:
        raise ThetaFileError(
            f"{path}: cannot rebuild {name}(**{config}) from its metadata: {e}"
        ) from None


def _differences(lopt: lopt_base.LearnedOptimizer, metadata: dict[str, Any]) -> list[str]:
    """How ``lopt`` differs from the learned optimizer a metadata describes."""
    name = registered_name(lopt) or type(lopt).__name__
    wrapped = getattr(lopt, "wraps_theta_of", None)
    if metadata.get("architecture") != name and wrapped is not None:
        # A wrapper whose theta is its wrapped optimizer's (WidthAware) starts from that
        # optimizer's files: compared with the wrapped one.
        return _differences(wrapped, metadata)
    if metadata.get("architecture") != name:
        return [f"architecture {metadata.get('architecture')!r} (given {name!r})"]
    saved, given = metadata.get("config"), lopt_config(lopt)
    if not isinstance(saved, dict) or given is None:
        return []
    # An argument added after the file was written: the file meant its default.
    params = lopt_base.constructor_parameters(type(lopt))
    saved = {
        **{
            k: _jsonable(params[k].default)
            for k in given
            if k not in saved and k in params and params[k].default is not params[k].empty
        },
        **saved,
    }
    return [
        f"{k}={saved.get(k)!r} (given {given.get(k)!r})"
        for k in sorted(set(saved) | set(given))
        if saved.get(k) != given.get(k)
    ]


def load(path: str | os.PathLike, lopt: lopt_base.LearnedOptimizer | None = None) -> TrainedLOpt:
    """Reads a theta file and rebuilds its learned optimizer: ``TrainedLOpt(lopt, theta)``.

    Args:
      path: a theta file (``learnopt meta-train``'s ``theta.msgpack``, :func:`save`).
      lopt: the learned optimizer to load theta into, instead of the one the metadata
        describes (needed for files without metadata). When it differs from the
        metadata's architecture or config a ``UserWarning`` says how.

    Returns:
      a :class:`TrainedLOpt` (``lopt, theta = load(path)`` unpacks it).

    Raises:
      FileNotFoundError: no file at ``path``.
      IsADirectoryError: ``path`` is a folder (the message names the ``theta.msgpack``
        in it, if any: a run folder's theta file).
      ThetaFileError: (a ``ValueError``) a corrupted or truncated file, broken
        metadata, an architecture that is not registered, or a theta that does not fit
        the learned optimizer (the message names the file and the mismatching entries).
    """
    path = Path(path)
    if lopt is not None and not isinstance(lopt, lopt_base.LearnedOptimizer):
        raise TypeError(f"lopt must be a LearnedOptimizer or None, got {type(lopt).__name__}")
    metadata = read_metadata(path)
    if lopt is None:
        if metadata is None:
            raise ThetaFileError(
                f"{path} is a theta file without metadata (written by "
                "checkpoints.save_theta or an older learnopt): pass lopt= (the learned "
                "optimizer it was trained with)"
            )
        lopt = _lopt_from_metadata(path, metadata)
    elif metadata is not None:
        diffs = _differences(lopt, metadata)
        if diffs:
            warnings.warn(
                f"{path} was meta-trained with another learned optimizer than the lopt "
                f"given: {', '.join(diffs)}",
                UserWarning,
                stacklevel=2,
            )
    raw = checkpoints.load_theta(path)
    extended = lopt.extend_theta(raw)
    try:
        _check_fits(lopt, extended, f"the theta in {path}")
    except (TypeError, ValueError) as e:
        raise ThetaFileError(str(e)) from None
    if extended is raw:
        theta = checkpoints.load_theta(path, target=lopt.init(jax.random.PRNGKey(0)))
    else:  # completed by the learned optimizer: restored as an in-memory library theta
        from learnopt.learned_optimizers import convert

        theta = convert.theta_from_library(extended, lopt)
    return TrainedLOpt(lopt=lopt, theta=theta, metadata=dict(metadata or {}), path=path)
