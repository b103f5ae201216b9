"""Loading a ``theta`` meta-trained with learned_optimization.

The library stores a learned optimizer's meta-parameters with Flax's msgpack
serialization (``flax.serialization.to_bytes``), usually wrapped:

* ``gradient_learner.ParameterCheckpoint(params=theta, gen_id, step)`` (what its
  ``outer_train`` writes and ``opt_from_checkpoint`` reads): ``{"params": theta,
  "gen_id": ..., "step": ...}`` on disk;
* a tuple ``(theta, gen_id, step)`` (its older "no_config" checkpoints): ``{"0": theta,
  "1": ..., "2": ...}``;
* or ``theta`` itself.

``theta`` is Haiku's parameter dict (``{"mlp/~/linear_0": {"w", "b"}, ...}``), plus
Haiku ``LSTMState`` named tuples and plain arrays. learnopt's ported architectures
(``MLPLOpt``, ``AdafacMLPLOpt``, ``MLPNomLOpt``, ``RNNMLPLOpt``, ``NNAdam``,
``HyperV2``) use that same layout, so conversion is unwrapping, validating the
structure and shapes against the learned optimizer, and casting to float32::

    lopt = mlp_lopt.MLPLOpt(hidden_size=32)          # the constructor used for training
    theta = convert.load_library_theta("params", lopt)
    opt = lopt.opt_fn(theta)

The architecture's constructor arguments must match the ones the checkpoint was
trained with (the library keeps them in the ``config.gin`` next to the checkpoint);
a mismatch raises ValueError naming the leaves that differ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import checkpoints
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common

PyTree = Any

__all__ = ["theta_from_library", "load_library_theta", "unwrap_checkpoint"]

_CHECKPOINT_KEYS = {"params", "gen_id", "step"}


def unwrap_checkpoint(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``theta`` state dict inside a library checkpoint's state dict (see module doc).

    Args:
      state: a restored state dict: a ``ParameterCheckpoint``'s (``{"params", "gen_id",
        "step"}``), an older tuple checkpoint's (``{"0", "1", "2"}``), a learnopt theta
        file's with metadata (``{THETA_METADATA_KEY, "theta"}``, what ``learnopt
        meta-train`` writes), or theta's own.

    Returns:
      ``state["params"]``, ``state["0"]`` or ``state["theta"]`` for a wrapped
      checkpoint, else ``state``.
    """
    if isinstance(state, Mapping):
        keys = set(state)
        if keys == {checkpoints.THETA_METADATA_KEY, "theta"}:
            return state["theta"]
        if "params" in keys and keys <= _CHECKPOINT_KEYS:
            return state["params"]
        if keys == {"0", "1", "2"} and isinstance(state["0"], Mapping):
            return state["0"]
    return state


def theta_from_library(
    source: bytes | str | os.PathLike | Mapping[str, Any],
    lopt: lopt_base.LearnedOptimizer,
) -> PyTree:
    """Converts a library ``theta`` (file bytes, a path, or an in-memory tree) for ``lopt``.

    Args:
      source: the bytes of a checkpoint file, its path, or the theta (or checkpoint)
        as a nested mapping (e.g. Haiku params, a ``flax`` state dict).
      lopt: the learnopt learned optimizer, built with the training run's arguments.

    Returns:
      ``theta`` in ``lopt``'s structure (as ``lopt.init`` returns it), float32 leaves.

    Raises:
      ValueError: the checkpoint does not match ``lopt``'s layout.
    """
    if isinstance(source, str | os.PathLike):
        source = Path(source).read_bytes()
    if isinstance(source, bytes | bytearray):
        state = flax.serialization.msgpack_restore(bytes(source))
    else:
        state = flax.serialization.to_state_dict(source)
    state = lopt.extend_theta(unwrap_checkpoint(state))
    target = jax.eval_shape(lopt.init, jax.random.PRNGKey(0))
    try:
        restored = flax.serialization.from_state_dict(target, state)
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"the checkpoint does not have the theta layout of {lopt!r}: {err}. Build the "
            "learned optimizer with the arguments the checkpoint was trained with."
        ) from None

    def to_f32(path: tuple, x: Any, ref: Any) -> jax.Array:
        x = np.asarray(x)
        if x.shape != tuple(ref.shape):
            raise ValueError(
                f"checkpoint leaf {jax.tree_util.keystr(path)} has shape {x.shape} where "
                f"{lopt!r} expects {tuple(ref.shape)}. Build the learned optimizer with the "
                "arguments the checkpoint was trained with."
            )
        return jnp.asarray(x, dtype=jnp.float32)

    theta = jax.tree_util.tree_map_with_path(to_f32, restored, target)
    common.check_theta(lopt, theta)
    return theta


def load_library_theta(path: str | os.PathLike, lopt: lopt_base.LearnedOptimizer) -> PyTree:
    """Reads a library checkpoint file; see :func:`theta_from_library`.

    Args:
      path: the checkpoint file (e.g. the library's ``params`` file).
      lopt: the learnopt learned optimizer, built with the training run's arguments.

    Returns:
      ``theta`` in ``lopt``'s structure, float32 leaves.

    Raises:
      FileNotFoundError: no file at ``path``.
      ValueError: the checkpoint does not match ``lopt``'s layout.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no learned_optimization checkpoint at {path}")
    return theta_from_library(path.read_bytes(), lopt)
