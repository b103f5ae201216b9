"""The central learner: averaged meta-gradients applied to ``theta`` by an outer optimizer.

:class:`GradientLearner` holds ``theta`` (from ``lopt.init`` or a file) and the outer
optimizer's state. Its update averages the estimates it is given, clips the mean to
``max_grad_norm`` and applies it only if the estimate, the new ``theta`` and the new
outer-optimizer state are all finite; a skipped step is counted, never applied.
:class:`~learnopt.outer_trainers.fused_learner.SingleMachineGradientLearner` runs this update
inside its one fused program.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from learnopt import _validate, checkpoints
from learnopt.canonical import settle_dtypes
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers.gradient_estimator import OuterState
from learnopt.outer_trainers.worker import AggregatedGradient, WorkerWeights
from learnopt.tree_utils import tree_all_finite, tree_cast_like, tree_norm, tree_path_str

PyTree = Any
MetaParams = Any

__all__ = ["GradientLearnerState", "OptCheckpoint", "GradientLearner", "frozen_mask"]


@flax.struct.dataclass
class GradientLearnerState:
    """The learner's state: the outer optimizer's state on ``theta`` and two counters.

    Attributes:
      theta_opt_state: the outer optimizer's state; ``theta`` is its params.
      outer_iteration: int32 scalar, outer steps taken (applied or skipped).
      num_nonfinite: int32 scalar, estimates skipped because they were not finite.
    """

    theta_opt_state: PyTree
    outer_iteration: jax.Array  # int32: outer steps taken (applied or skipped)
    num_nonfinite: jax.Array  # int32: estimates skipped because they were not finite


@flax.struct.dataclass
class OptCheckpoint:
    """The learner's state written to disk for continuing outer training (library layout).

    Attributes:
      gradient_learner_state: the :class:`GradientLearnerState`.
      elapsed_time: seconds of outer training so far (the library's field).
      total_inner_steps: inner steps taken so far (the library's field).
    """

    gradient_learner_state: Any
    elapsed_time: Any
    total_inner_steps: int


# ------------------------------------------------------------------------------ learner


def _as_optimizer(theta_opt: Any) -> opt_base.Optimizer:
    if isinstance(theta_opt, opt_base.Optimizer):
        return theta_opt
    if isinstance(theta_opt, optax.GradientTransformation):
        return opt_base.OptaxOptimizer(theta_opt)
    raise TypeError(
        "theta_opt must be a learnopt Optimizer (e.g. opt_base.Adam(1e-3)) or an optax "
        f"GradientTransformation, got {type(theta_opt).__name__}"
    )


def _check_path(name: str, path: Any) -> None:
    if path is not None and not os.path.isfile(path):
        raise FileNotFoundError(f"{name}: no checkpoint file at {path}")


def _load_initial_theta(path: Any, lopt: lopt_base.LearnedOptimizer, theta: MetaParams):
    """``theta`` read from ``path``, with the structure and dtypes of ``theta``.

    The file is a ``ParameterCheckpoint`` (``checkpoints.save_state``), a library
    checkpoint or a ``checkpoints.save_theta`` file; see
    :func:`learnopt.learned_optimizers.convert.theta_from_library`.
    """
    from learnopt.learned_optimizers import convert

    return tree_cast_like(convert.load_library_theta(path, lopt), theta)


def frozen_mask(theta: PyTree, frozen_keys: Sequence[str]) -> PyTree:
    """Which leaves of ``theta`` the keys ``frozen_keys`` name (a tree of Python bools).

    A key names a leaf if it is the leaf's path (``"a/b"``: dict keys, attribute names
    and indices joined by ``"/"``) or a prefix of it ending at a ``"/"``: ``"rnn_params"``
    names every leaf under ``theta["rnn_params"]``.

    Args:
      theta: the meta-parameters (arrays or ``jax.ShapeDtypeStruct``).
      frozen_keys: the keys to freeze.

    Returns:
      A tree like ``theta`` with True at the frozen leaves.

    Raises:
      ValueError: a key names no leaf of ``theta`` (the message lists the top-level keys).
    """
    keys = [str(k).strip("/") for k in frozen_keys]
    flat, treedef = jax.tree_util.tree_flatten_with_path(theta)
    names = [tree_path_str(path, "/") for path, _ in flat]

    def named(name: str, key: str) -> bool:
        return name == key or name.startswith(key + "/")

    unused = [k for k in keys if not any(named(n, k) for n in names)]
    if unused:
        top = sorted({n.split("/")[0] for n in names})
        raise ValueError(f"frozen_keys: {unused} name no leaf of theta (its keys: {top})")
    return treedef.unflatten([any(named(n, k) for k in keys) for n in names])


class GradientLearner:
    """The central learner: applies averaged meta-gradients to ``theta``.

    ``update`` averages the :class:`~learnopt.outer_trainers.worker.AggregatedGradient` s
    it is given, clips the mean to ``max_grad_norm``, and applies it with ``theta_opt``
    only if it, its loss, the new ``theta`` and the new outer-optimizer state are all
    finite; a skipped step is counted in ``num_nonfinite`` and leaves ``theta`` and the
    outer optimizer's state unchanged. Metrics per step: ``finite`` (the estimate was
    finite), ``skipped`` (the step was not applied), ``update_norm`` (the norm of the
    change of ``theta``; 0 when skipped).

    Args:
      lopt: the learned optimizer.
      theta_opt: outer optimizer on ``theta`` (a learnopt Optimizer or optax transform).
      init_theta_from_path: start from the ``theta`` in this file (a
        ``ParameterCheckpoint`` written with ``checkpoints.save_state``, or a
        ``checkpoints.save_theta`` file) instead of ``lopt.init``.
      init_outer_state_from_path: start from the learner state in this file (an
        :class:`OptCheckpoint` written with ``checkpoints.save_state``): ``theta``, the
        outer optimizer's state (e.g. Adam's moments and step) and the counters.
      reset_outer_iteration: with ``init_outer_state_from_path``, start the loaded state's
        iteration counters (the outer optimizer's ``iteration`` and ``outer_iteration``)
        at 0, keeping ``theta`` and the accumulators (the library's argument: e.g. to
        rerun a truncation or learning-rate schedule from a trained state).
      num_steps: number of outer steps (passed to ``theta_opt.init`` for schedules).
      max_grad_norm: clip the averaged meta-gradient to this global norm.
      frozen_keys: keys of ``theta`` to keep fixed (see :func:`frozen_mask`; e.g.
        ``Celo.get_frozen_param_keys()`` for Celo's two meta-training phases): their
        meta-gradients are zeroed before clipping and the outer update, and their
        values are restored after it (so an outer weight decay cannot move them).
        Not in the notes' library; the name of the Celo release's learner. The ES
        estimators handed to ``gradient_worker_compute`` do not see this learner: set
        their ``frozen_keys`` to the same keys, or they perturb the frozen leaves and
        every estimate carries those leaves' noise
        (:class:`~learnopt.outer_trainers.fused_learner.SingleMachineGradientLearner`
        does this for its own estimators).
    """

    def __init__(
        self,
        lopt: lopt_base.LearnedOptimizer,
        theta_opt: Any,
        init_theta_from_path: str | os.PathLike | None = None,
        init_outer_state_from_path: str | os.PathLike | None = None,
        reset_outer_iteration: bool = False,
        num_steps: int | None = None,
        max_grad_norm: float | None = None,
        frozen_keys: Sequence[str] | None = None,
    ):
        _validate.optional_positive_float("max_grad_norm", max_grad_norm)
        if reset_outer_iteration and init_outer_state_from_path is None:
            raise ValueError(
                "reset_outer_iteration=True needs init_outer_state_from_path (the state "
                "whose iteration to reset)"
            )
        if num_steps is not None:
            _validate.positive_int("num_steps", num_steps)
        _check_path("init_theta_from_path", init_theta_from_path)
        _check_path("init_outer_state_from_path", init_outer_state_from_path)
        self._lopt = lopt
        self._theta_opt = _as_optimizer(theta_opt)
        self.init_theta_from_path = init_theta_from_path
        self.init_outer_state_from_path = init_outer_state_from_path
        self.reset_outer_iteration = bool(reset_outer_iteration)
        self.num_steps = num_steps
        self.max_grad_norm = max_grad_norm
        if isinstance(frozen_keys, str):
            raise TypeError(
                f"frozen_keys must be a sequence of keys, got the string {frozen_keys!r}"
            )
        self.frozen_keys = tuple(frozen_keys) if frozen_keys else None
        if self.frozen_keys is not None:  # fails early on a key theta does not have
            frozen_mask(jax.eval_shape(lopt.init, jax.random.PRNGKey(0)), self.frozen_keys)
        self._update_jit = jax.jit(self._apply)

    @property
    def learned_optimizer(self) -> lopt_base.LearnedOptimizer:
        """The learned optimizer whose ``theta`` is trained."""
        return self._lopt

    @property
    def theta_opt(self) -> opt_base.Optimizer:
        """The outer optimizer on ``theta`` (an optax transform comes wrapped)."""
        return self._theta_opt

    def get_meta_params(self, state: GradientLearnerState) -> MetaParams:
        """``theta``.

        Args:
          state: the learner's state.

        Returns:
          The meta-parameters.
        """
        return self._theta_opt.get_params(state.theta_opt_state)

    get_lopt_params = get_meta_params

    def get_meta_model_state(self, state: GradientLearnerState) -> PyTree:
        """The model state of ``theta`` (None for learned optimizers without one).

        Args:
          state: the learner's state.

        Returns:
          The outer optimizer's model state.
        """
        return self._theta_opt.get_state(state.theta_opt_state)

    get_lopt_model_state = get_meta_model_state

    def get_state_for_worker(self, state: GradientLearnerState) -> WorkerWeights:
        """What workers need: ``theta``, its model state and the outer iteration.

        Args:
          state: the learner's state.

        Returns:
          The :class:`~learnopt.outer_trainers.worker.WorkerWeights`.
        """
        return WorkerWeights(
            theta=self.get_meta_params(state),
            theta_model_state=self.get_meta_model_state(state),
            outer_state=OuterState(outer_iteration=state.outer_iteration),
        )

    def _fresh_state(self, key: jax.Array) -> GradientLearnerState:
        theta = jax.jit(self._lopt.init)(key)
        if self.init_theta_from_path is not None:
            theta = _load_initial_theta(self.init_theta_from_path, self._lopt, theta)
        theta_opt_state = jax.jit(
            functools.partial(self._theta_opt.init, num_steps=self.num_steps)
        )(theta)
        state = GradientLearnerState(
            theta_opt_state=theta_opt_state,
            outer_iteration=jnp.zeros((), jnp.int32),
            num_nonfinite=jnp.zeros((), jnp.int32),
        )
        if self.init_outer_state_from_path is not None:
            target = OptCheckpoint(
                gradient_learner_state=state, elapsed_time=0.0, total_inner_steps=0
            )
            state = checkpoints.load_state(
                self.init_outer_state_from_path, target
            ).gradient_learner_state
            if self.reset_outer_iteration:
                opt_state = state.theta_opt_state
                if hasattr(opt_state, "iteration"):
                    opt_state = opt_state.replace(iteration=jnp.zeros_like(opt_state.iteration))
                state = state.replace(
                    theta_opt_state=opt_state,
                    outer_iteration=jnp.zeros_like(state.outer_iteration),
                )
        return state

    def init(self, key: jax.Array) -> GradientLearnerState:
        """The initial state: ``theta`` (from ``lopt.init(key)`` or a file) and its optimizer.

        The state is settled to the dtypes :meth:`update` produces (it compiles once).

        Args:
          key: randomness of ``lopt.init``.

        Returns:
          The learner's state.
        """
        state = self._fresh_state(key)
        grads = AggregatedGradient(
            theta_grads=jax.tree_util.tree_map(
                lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)),
                self.get_meta_params(state),
            ),
            theta_model_state=None,
            mean_loss=jax.ShapeDtypeStruct((), jnp.float32),
        )
        return settle_dtypes(
            lambda s, g, k: self._apply(s, [g], k)[0],
            state,
            grads,
            key,
            what="gradient learner state",
        )

    def _apply(
        self, state: GradientLearnerState, grads_list: Sequence[AggregatedGradient], key: jax.Array
    ) -> tuple[GradientLearnerState, dict[str, jax.Array]]:
        """Averages, clips and (if finite) applies ``grads_list`` (traced)."""
        n = len(grads_list)
        grad = jax.tree_util.tree_map(
            lambda *g: sum(jnp.asarray(x) for x in g) / n, *[g.theta_grads for g in grads_list]
        )
        losses = [jnp.asarray(g.mean_loss, jnp.float32) for g in grads_list]
        mean_loss = sum(losses) / n
        old_theta = self._theta_opt.get_params(state.theta_opt_state)
        mask = None if self.frozen_keys is None else frozen_mask(old_theta, self.frozen_keys)
        if mask is not None:
            grad = jax.tree_util.tree_map(
                lambda g, frozen: jnp.zeros_like(g) if frozen else g, grad, mask
            )
        grad_norm = tree_norm(grad)
        if self.max_grad_norm is not None:
            scale = jnp.minimum(1.0, self.max_grad_norm / (grad_norm + 1e-12))
            grad = jax.tree_util.tree_map(lambda g: (g * scale).astype(g.dtype), grad)
        finite = tree_all_finite(grad) & jnp.isfinite(mean_loss)
        model_states = [g.theta_model_state for g in grads_list]
        kwargs = {}
        if jax.tree_util.tree_leaves(model_states):
            kwargs["model_state"] = jax.tree_util.tree_map(lambda *m: sum(m) / n, *model_states)
        applied = self._theta_opt.update(
            state.theta_opt_state, grad, loss=mean_loss, key=key, **kwargs
        )
        if mask is not None:
            kept = jax.tree_util.tree_map(
                lambda new, old, frozen: old if frozen else new,
                self._theta_opt.get_params(applied),
                old_theta,
                mask,
            )
            applied = self._theta_opt.set_params(applied, kept)
        # Applied only if the estimate *and* the resulting theta and outer state are finite
        # (a finite but huge step can still overflow theta or the optimizer's moments).
        ok = finite & _all_finite_floats(applied)
        theta_opt_state = jax.tree_util.tree_map(
            lambda a, b: jnp.where(ok, a, b), applied, state.theta_opt_state
        )
        num_nonfinite = state.num_nonfinite + (~ok).astype(jnp.int32)
        new_theta = self._theta_opt.get_params(theta_opt_state)
        update_norm = tree_norm(
            jax.tree_util.tree_map(
                lambda a, b: jnp.asarray(a, jnp.float32) - jnp.asarray(b, jnp.float32),
                new_theta,
                old_theta,
            )
        )
        new_state = GradientLearnerState(
            theta_opt_state=theta_opt_state,
            outer_iteration=state.outer_iteration + 1,
            num_nonfinite=num_nonfinite,
        )
        metrics = {
            "meta_loss": mean_loss,
            "best_of_mean_loss": jnp.min(jnp.stack(losses)),
            "grad_norm": grad_norm,
            "finite": finite,
            "skipped": ~ok,
            "num_nonfinite": num_nonfinite,
            "update_norm": update_norm,
        }
        metrics.update(_scalar_theta_metrics(self._theta_opt.get_params(theta_opt_state)))
        return new_state, metrics

    def update(
        self,
        state: GradientLearnerState,
        grads_list: Sequence[AggregatedGradient],
        with_metrics: bool = False,
        key: jax.Array | None = None,
    ) -> tuple[GradientLearnerState, dict[str, jax.Array]]:
        """One outer step with the mean of ``grads_list``.

        One jitted program (compiled once per number of gradients); metrics are cheap
        scalars computed every time.

        Args:
          state: the learner's state.
          grads_list: one or more workers' estimates.
          with_metrics: accepted for compatibility (metrics are always computed).
          key: randomness of the outer optimizer (default: derived from the outer
            iteration).

        Returns:
          ``(state, metrics)``.
        """
        del with_metrics
        if not grads_list:
            raise ValueError("GradientLearner.update needs at least one AggregatedGradient")
        if key is None:
            key = jax.random.fold_in(jax.random.PRNGKey(0), state.outer_iteration)
        return self._update_jit(state, list(grads_list), key)


def _all_finite_floats(tree: PyTree) -> jax.Array:
    """Whether every floating-point leaf of ``tree`` is finite (integer leaves are)."""
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree_util.tree_leaves(tree)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _scalar_theta_metrics(theta: PyTree) -> dict[str, jax.Array]:
    """Scalar leaves of theta as metrics; ``log_lr`` also exponentiated."""
    out = {}
    if not isinstance(theta, dict):
        return out
    for name, value in theta.items():
        if hasattr(value, "shape") and value.shape == ():
            out[f"theta/{name}"] = value
            if name == "log_lr":
                out["learning_rate"] = jnp.exp(value)
    return out
