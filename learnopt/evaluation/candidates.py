"""What ``learnopt evaluate`` evaluates: a theta file, a pretrained entry or a registered
optimizer, as the sweep the evaluation runs; and the command's error type.

:func:`load_learned_candidate` rebuilds a learned optimizer and its theta from a file
(its metadata name the architecture) or a pretrained entry's name, and says what does
not fit (the architecture, the shapes) in an :class:`EvalError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from learnopt.evaluation.config import EvaluateConfig
from learnopt.evaluation.sweeps import Sweep, learned_sweep, optimizer_sweep

__all__ = ["EvalError", "load_learned_candidate"]


class EvalError(Exception):
    """A failure of ``learnopt evaluate``; ``usage`` errors exit 2, others exit 1.

    Args:
      message: what is wrong and what to do.
      usage: whether the input was wrong (exit 2) rather than the run (exit 1).
    """

    def __init__(self, message: str, usage: bool = False):
        super().__init__(message)
        self.usage = usage


def _read_lopt_name(theta_path: Path) -> str:
    config = theta_path.parent / "config.json"
    if not config.is_file():
        raise EvalError(
            f"--lopt is needed: there is no config.json next to {theta_path} to read the "
            "learned optimizer's name from",
            usage=True,
        )
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError) as e:
        raise EvalError(f"cannot read {config}: {e}; pass --lopt NAME") from None
    name = data.get("lopt") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise EvalError(f"{config} has no 'lopt' entry; pass --lopt NAME", usage=True)
    return name


def _flat_shapes(tree: Any) -> dict[str, tuple[int, ...]]:
    import flax.serialization
    import jax
    import numpy as np

    state = flax.serialization.to_state_dict(tree)
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        key = "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
        out[key] = tuple(np.shape(leaf))
    return out


def _describe(shapes: dict[str, tuple[int, ...]], limit: int = 8) -> str:
    items = [f"{k} {list(v)}" for k, v in sorted(shapes.items())]
    more = f", ... ({len(items)} leaves)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def load_learned_candidate(theta_path: str | os.PathLike, lopt_name: str | None = None):
    """``(lopt, theta)`` from a theta file, or from a shipped entry given by name.

    A file with metadata (every ``learnopt meta-train`` run, ``learnopt.pretrained``)
    rebuilds its learned optimizer, configuration included
    (:func:`learnopt.learned_optimizers.theta_files.load`); ``lopt_name``, if given, must
    match it. Otherwise the name comes from ``lopt_name`` or the ``config.json`` next to
    the file, with the constructor's defaults.

    Args:
      theta_path: the theta file, or the name of a :mod:`learnopt.pretrained` entry
        (``"Celo"``) where no such file exists.
      lopt_name: the registered learned optimizer it holds a theta of, or ``None``.

    Returns:
      ``(lopt, theta)``.

    Raises:
      EvalError: naming the file and what was expected when the file is missing, not a
        theta file, or holds a theta of another structure.
    """
    import jax

    from learnopt import checkpoints, pretrained
    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.learned_optimizers import theta_files

    try:  # a file, else a shipped entry by name
        path = pretrained.find(theta_path)
    except OSError as e:
        raise EvalError(f"--theta: {e}", usage=True) from None
    try:
        metadata = theta_files.read_metadata(path)
    except ValueError as e:
        if lopt_name is None:
            raise EvalError(f"--theta: {e}") from None
        metadata = None  # the path below names what the file should have held
    if metadata is not None:
        held = metadata.get("architecture")
        if lopt_name is not None and lopt_name != held:
            raise EvalError(
                f"--lopt {lopt_name}: {path} holds a theta of {held} (its metadata says so); "
                "leave --lopt out",
                usage=True,
            )
        try:
            trained = theta_files.load(path)
        except ValueError as e:
            raise EvalError(f"--theta: {e}") from None
        return trained.lopt, trained.theta
    name = lopt_name or _read_lopt_name(path)
    try:
        lopt = lopt_base.LOPTS.get(name)
    except KeyError as e:
        raise EvalError(f"--lopt: {e}", usage=True) from None
    target = lopt.init(jax.random.PRNGKey(0))
    expected = _flat_shapes(target)
    try:
        raw = checkpoints.load_theta(path)
    except Exception as e:  # msgpack raises several types for corrupt bytes
        raise EvalError(
            f"--theta: {path} is not a theta file ({type(e).__name__}: {e}); expected a "
            f"msgpack theta of {name} (written by 'learnopt meta-train' or "
            f"learnopt.checkpoints.save_theta) with {_describe(expected)}"
        ) from None
    found = _flat_shapes(raw) if isinstance(raw, dict) else {}
    if found != expected:
        raise EvalError(
            f"--theta: {path} does not hold a theta of {name}: expected {_describe(expected)}; "
            f"found {_describe(found) or 'no arrays'}. Pass the --lopt it was trained with."
        )
    theta = checkpoints.load_theta(path, target=target)
    return lopt, theta


def _candidate(cfg: EvaluateConfig) -> tuple[Sweep, dict[str, Any]]:
    """The candidate's sweep and what config.json records of it."""
    from learnopt.optimizers import base as opt_base

    if cfg.optimizer:
        if cfg.theta or cfg.lopt:
            raise EvalError("--optimizer cannot be combined with --theta/--lopt", usage=True)
        if cfg.lr is None:
            raise EvalError("--optimizer needs --lr", usage=True)
        try:
            opt = opt_base.OPTIMIZERS.get(cfg.optimizer, learning_rate=cfg.lr)
        except KeyError as e:
            raise EvalError(f"--optimizer: {e}", usage=True) from None
        return optimizer_sweep(opt, name=f"{cfg.optimizer}(lr={cfg.lr:g})"), {
            "optimizer": cfg.optimizer,
            "lr": cfg.lr,
        }
    if cfg.lr is not None:
        raise EvalError("--lr goes with --optimizer", usage=True)
    if not cfg.theta:
        raise EvalError(
            "give --theta PATH (a learned optimizer) or --optimizer NAME --lr X", usage=True
        )
    lopt, theta = load_learned_candidate(cfg.theta, cfg.lopt)
    return learned_sweep(lopt, theta), {
        "theta": str(cfg.theta),
        "lopt": lopt.name,
        "lopt_repr": repr(lopt),
    }
