"""Pieces shared by the gradient estimators: perturbations, antithetic unrolls, ES maths.

Vocabulary used by every estimator: ``trunc_length`` is the number of inner steps one
estimate unrolls (a truncation); the length of a whole inner run comes from a truncation
schedule (``ConstantTruncationSchedule(total_length)``). Full-run estimators (FullES,
FullGrad) unroll a whole run per estimate, so for them the two are the same.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt import _validate
from learnopt.outer_trainers import truncation_schedule as ts_mod
from learnopt.outer_trainers.estimator_checks import (
    check_fits_schedule,
    check_steps_per_jit,
    check_weighted_loss_type,
    steps_per_estimate,
)
from learnopt.outer_trainers.gradient_estimator import (
    GradientEstimator,
    GradientEstimatorOut,
    UnrollInfo,
)
from learnopt.outer_trainers.lopt_truncated_step import (
    TruncatedUnrollOut,
    TruncatedUnrollState,
    VectorizedLOptTruncatedStep,
)
from learnopt.outer_trainers.outer_update import frozen_mask

PyTree = Any

__all__ = [
    "sample_perturbations",
    "antithetic_unroll",
    "es_grad",
    "reduce_loss",
    "FullHorizon",
    "WholeRuns",
    "unroll_info",
    "AntitheticEstimator",
    "TruncatedAntitheticEstimator",
]


def sample_perturbations(theta: PyTree, key: jax.Array, std: float, num: int) -> PyTree:
    """``num`` Gaussian perturbations of ``theta`` with standard deviation ``std``.

    Args:
      theta: the meta-parameters.
      key: randomness (one split per leaf).
      std: the standard deviation.
      num: the number of perturbations (antithetic pairs).

    Returns:
      A tree like ``theta`` whose leaves have a leading ``[num]`` axis, in their dtypes.
    """
    leaves, treedef = jax.tree_util.tree_flatten(theta)
    keys = jax.random.split(key, len(leaves))
    eps = [
        (std * jax.random.normal(k, (num, *jnp.shape(x)), jnp.float32)).astype(x.dtype)
        for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, eps)


def _plus(theta: PyTree, eps: PyTree, sign: float) -> PyTree:
    return jax.tree_util.tree_map(lambda t, e: t[None] + sign * e, theta, eps)


def antithetic_unroll(
    truncated_step: VectorizedLOptTruncatedStep,
    theta: PyTree,
    eps: PyTree,
    pos_state: TruncatedUnrollState,
    neg_state: TruncatedUnrollState,
    key: jax.Array,
    data: PyTree,
    num_steps: int,
    stacked: bool = True,
    length: jax.Array | None = None,
) -> tuple[TruncatedUnrollState, TruncatedUnrollState, TruncatedUnrollOut, TruncatedUnrollOut]:
    """Unrolls ``theta + eps`` from ``pos_state`` and ``theta - eps`` from ``neg_state``.

    Both halves see the same batches and the same random keys (common random numbers),
    which is what makes the antithetic difference low-variance.

    Args:
      truncated_step: the population of ``num_tasks`` inner runs.
      theta: the meta-parameters.
      eps: perturbations with a leading ``[num_tasks]`` axis.
      pos_state: the state of the runs of ``theta + eps``.
      neg_state: the state of the runs of ``theta - eps``.
      key: randomness of the unroll (shared by both halves).
      data: batches ``[num_steps, num_tasks, ...]`` or None.
      num_steps: the unroll length (static).
      stacked: run the halves as one population of ``2 * num_tasks`` members (faster);
        otherwise as two unrolls (less memory).
      length: optional int32 scalar: the steps past it are skipped (see
        ``VectorizedLOptTruncatedStep.unroll``).

    Returns:
      ``(pos_state, neg_state, pos_out, neg_out)``: the two halves' states and
      ``TruncatedUnrollOut`` s.
    """
    theta_pos, theta_neg = _plus(theta, eps, 1.0), _plus(theta, eps, -1.0)
    if stacked:
        cat = lambda a, b: jax.tree_util.tree_map(lambda x, y: jnp.concatenate([x, y]), a, b)
        state, out = truncated_step.unroll(
            cat(theta_pos, theta_neg),
            cat(pos_state, neg_state),
            key,
            data,
            num_steps,
            theta_is_vector=True,
            num_copies=2,
            length=length,
        )
        n = truncated_step.num_tasks
        first = lambda t, ax: jax.tree_util.tree_map(
            lambda x: jax.lax.slice_in_dim(x, 0, n, axis=ax), t
        )
        last = lambda t, ax: jax.tree_util.tree_map(
            lambda x: jax.lax.slice_in_dim(x, n, 2 * n, axis=ax), t
        )
        pos_out = TruncatedUnrollOut(
            loss=first(out.loss, 1),
            iteration=first(out.iteration, 1),
            is_done=first(out.is_done, 0),
            weight=first(out.weight, 1),
        )
        neg_out = TruncatedUnrollOut(
            loss=last(out.loss, 1),
            iteration=last(out.iteration, 1),
            is_done=last(out.is_done, 0),
            weight=last(out.weight, 1),
        )
        return first(state, 0), last(state, 0), pos_out, neg_out
    pos_state, pos_out = truncated_step.unroll(
        theta_pos, pos_state, key, data, num_steps, theta_is_vector=True, length=length
    )
    neg_state, neg_out = truncated_step.unroll(
        theta_neg, neg_state, key, data, num_steps, theta_is_vector=True, length=length
    )
    return pos_state, neg_state, pos_out, neg_out


def reduce_loss(
    out: TruncatedUnrollOut, loss_type: str = "avg", length: jax.Array | None = None
) -> jax.Array:
    """Per-member meta-loss of an unroll: the mean over its steps, the min, or the last.

    With step weights ``w`` (``out.weight``, from the truncated step's
    ``meta_loss_weighting``; mean 1 over a run) ``"avg"`` is ``(1/K) sum_k w_k L_k`` over
    the unroll's ``K`` steps (``K = length`` when given); see
    :mod:`learnopt.outer_trainers.meta_objective`. ``"min"`` and ``"last"`` take no
    weights.

    Args:
      out: the unroll's output (losses ``[K, P]``, optional weights ``[K, P]``).
      loss_type: ``"avg"``, ``"min"`` or ``"last"``.
      length: optional int32 scalar: only the first ``length`` steps count.

    Returns:
      The ``[P]`` meta-losses.

    Raises:
      ValueError: an unknown ``loss_type``, or weights with ``"min"``/``"last"``.
    """
    loss = out.loss
    if out.weight is not None:
        if loss_type != "avg":
            raise ValueError(
                f"loss_type={loss_type!r} takes no step weights: a meta_loss_weighting of the "
                "truncated step needs loss_type='avg'"
            )
        # Steps of weight 0 count 0 even where their loss is not finite.
        loss = jnp.where(out.weight == 0, 0.0, out.weight * loss)
    if length is None:
        if loss_type == "avg":
            return jnp.mean(loss, axis=0)
        if loss_type == "min":
            return jnp.min(loss, axis=0)
        if loss_type == "last":
            return loss[-1]
    else:
        valid = (jnp.arange(loss.shape[0]) < length)[:, None]
        if loss_type == "avg":
            return jnp.sum(jnp.where(valid, loss, 0.0), axis=0) / length.astype(loss.dtype)
        if loss_type == "min":
            return jnp.min(jnp.where(valid, loss, jnp.inf), axis=0)
        if loss_type == "last":
            return jax.lax.dynamic_index_in_dim(loss, length - 1, axis=0, keepdims=False)
    raise ValueError(f"loss_type must be 'avg', 'min' or 'last' here, got {loss_type!r}")


def es_grad(
    eps: PyTree,
    pos_loss: jax.Array,
    neg_loss: jax.Array,
    std: float,
    clip_loss_diff: float | None = None,
    sign_delta_loss_scalar: float | None = None,
) -> tuple[PyTree, jax.Array]:
    """Antithetic ES estimate ``mean_i eps_i (L+_i - L-_i) / (2 std^2)`` and the deltas.

    Args:
      eps: the perturbations, with a leading ``[num]`` axis (for PES: the accumulated
        perturbations).
      pos_loss: ``[num]`` meta-losses of ``theta + eps``.
      neg_loss: ``[num]`` meta-losses of ``theta - eps``.
      std: the perturbations' standard deviation.
      clip_loss_diff: clip each ``L+ - L-`` to this magnitude.
      sign_delta_loss_scalar: replace each ``L+ - L-`` by its sign times this scalar.

    Returns:
      ``(grad, delta)``: the estimate (shaped like one perturbation) and the ``[num]``
      loss differences used.
    """
    delta = pos_loss - neg_loss
    if clip_loss_diff is not None:
        delta = jnp.clip(delta, -clip_loss_diff, clip_loss_diff)
    if sign_delta_loss_scalar is not None:
        delta = jnp.sign(delta) * sign_delta_loss_scalar
    scale = delta / (2.0 * std**2)
    grad = jax.tree_util.tree_map(
        lambda e: jnp.tensordot(scale, e.astype(jnp.float32), axes=1).astype(e.dtype) / e.shape[0],
        eps,
    )
    return grad, delta


class WholeRuns:
    """What the estimators over whole fresh runs (``FullES``, ``FullGrad``) share: their
    loss type checked, their :class:`FullHorizon`, an empty worker state and the batches
    of one run.

    Subclasses set ``LOSS_TYPES`` and ``STATE`` (the empty state class), and call
    ``_whole_runs`` from ``__init__`` (after ``truncated_step`` is set).
    """

    LOSS_TYPES: tuple[str, ...] = ()
    STATE: type = type(None)
    truncated_step: Any

    def _whole_runs(
        self,
        truncation_schedule: ts_mod.TruncationSchedule | None,
        steps_per_jit: int | None,
        loss_type: str,
        recompute_samples: int,
    ) -> None:
        """Checks and keeps the run settings (names the estimator in every error)."""
        if loss_type not in self.LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {self.LOSS_TYPES}, got {loss_type!r}")
        if int(recompute_samples) < 1:
            raise ValueError(f"recompute_samples must be >= 1, got {recompute_samples}")
        who = type(self).__name__
        self.loss_type = loss_type
        self.recompute_samples = int(recompute_samples)
        self._horizon = FullHorizon(who, self.truncated_step, truncation_schedule, steps_per_jit)
        check_weighted_loss_type(who, self.truncated_step, loss_type)
        self.truncation_schedule = self._horizon.schedule
        self.steps_per_jit = steps_per_jit

    @property
    def horizon(self) -> int:
        """Inner steps of a run (the maximum, for a variable length)."""
        return self._horizon.num_steps

    def init_worker_state(self, theta: Any, key: jax.Array, outer_state: Any = None) -> Any:
        """The (empty) state: every estimate starts fresh runs.

        Args:
          theta: the meta-parameters.
          key: randomness of nothing (unused).
          outer_state: an ``OuterState`` (the outer iteration, for schedules of it).

        Returns:
          An empty ``STATE()``.
        """
        return self.STATE()

    def get_datas(self) -> Any:
        """The batches of one whole run (host side).

        Returns:
          ``(batches of horizon steps, recompute batches or None)``.
        """
        data = self.truncated_step.get_batch(self.horizon)
        if self.loss_type == "last_recompute":
            return data, self.truncated_step.get_outer_batch(self.recompute_samples)
        return data, None


def unroll_info(state: TruncatedUnrollState, out: TruncatedUnrollOut) -> UnrollInfo:
    """The library's record of an unroll (from the positive half for ES).

    Args:
      state: the population's state at the end of the unroll.
      out: the unroll's output.

    Returns:
      The :class:`~learnopt.outer_trainers.gradient_estimator.UnrollInfo`.
    """
    return UnrollInfo(
        loss=out.loss, iteration=out.iteration, task_param=state.task_param, is_done=out.is_done
    )


class FullHorizon:
    """The horizon of full-run estimators: a static number of steps and an optional length.

    With ``truncation_schedule`` (the library's way) the truncated step must have a
    ``NeverEndingTruncationSchedule``; without it, the truncated step's own schedule
    gives the run length (learnopt's shortcut). A schedule that is not constant makes a
    variable horizon: the estimator unrolls ``max_length`` steps in one compiled program
    and skips those past the sampled length (all members share one length, as in the
    library), so the batches of ``max_length`` steps are fetched.
    ``steps_per_jit`` rounds lengths down to a multiple of it (at least one multiple),
    as the library does.

    Args:
      who: the estimator's name, for error messages.
      truncated_step: the estimator's truncated step.
      truncation_schedule: the length of each run (its ``max_length`` must be static),
        or None to use the truncated step's own schedule.
      steps_per_jit: the multiple lengths are rounded down to, or None.
    """

    def __init__(
        self,
        who: str,
        truncated_step: VectorizedLOptTruncatedStep,
        truncation_schedule: ts_mod.TruncationSchedule | None,
        steps_per_jit: int | None,
    ):
        never = ts_mod.NeverEndingTruncationSchedule
        if truncation_schedule is None:
            sched = truncated_step.trunc_sched
            if isinstance(sched, never):
                raise ValueError(
                    f"{who} unrolls whole inner runs: pass truncation_schedule= (e.g. "
                    "ConstantTruncationSchedule(100)) for their length"
                )
        else:
            if not hasattr(truncation_schedule, "sample_length"):
                raise TypeError(
                    f"{who}: truncation_schedule must be a learnopt TruncationSchedule, got "
                    f"{type(truncation_schedule).__name__}"
                )
            if not isinstance(truncated_step.trunc_sched, never):
                raise ValueError(
                    f"{who} manages the length of its runs with truncation_schedule=; give "
                    "the truncated step a NeverEndingTruncationSchedule() (got "
                    f"{truncated_step.trunc_sched!r})"
                )
            sched = truncation_schedule
        check_steps_per_jit(who, steps_per_jit, None)
        max_length = sched.max_length
        if max_length is None or isinstance(sched, never):
            raise ValueError(
                f"{who} compiles its whole horizon: {sched!r} has no static max_length "
                "(give ScheduledTruncationSchedule a max_length=)"
            )
        self.schedule = sched
        self.steps_per_jit = None if steps_per_jit is None else int(steps_per_jit)
        self.variable = not isinstance(sched, ts_mod.ConstantTruncationSchedule)
        self.num_steps = self._round(int(max_length))

    def _round(self, n):
        spj = self.steps_per_jit
        if spj is None:
            return n
        if isinstance(n, int):
            return max(n // spj * spj, spj)
        return jnp.maximum(n // spj * spj, spj)

    def length(self, key: jax.Array, outer_state: Any) -> jax.Array | None:
        """The sampled horizon of one estimate.

        Args:
          key: randomness of the length.
          outer_state: the outer state (for schedules of the outer iteration).

        Returns:
          An int32 scalar, or None when the horizon is always ``num_steps``.
        """
        if not self.variable:
            return None
        return self._round(self.schedule.sample_length(key, outer_state))


class AntitheticEstimator(GradientEstimator):
    """Shared plumbing of the antithetic ES estimators (FullES, TES, PES, NRES).

    Args:
      truncated_step: its ``num_tasks`` is the number of antithetic pairs.
      std: perturbation standard deviation.
      stack_antithetic_samples: run the + and - halves as one population of
        ``2 * num_tasks`` (faster; learnopt's default) or as two unrolls (half the peak
        memory; the library's default). Same results either way.
      clip_loss_diff: clip ``L+ - L-`` to this magnitude (robustness to outliers).
      sign_delta_loss_scalar: use ``sign(L+ - L-)`` times this instead of the difference.

    Attributes:
      frozen_keys: theta keys left unperturbed (None: all of theta is perturbed). A
        learner with ``frozen_keys`` sets them here: a frozen leaf's estimate is thrown
        away, and its noise would only add variance to every other leaf's (ES's
        variance grows with the number of perturbed values).
    """

    frozen_keys: tuple[str, ...] | None = None

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        std: float = 0.01,
        stack_antithetic_samples: bool = True,
        clip_loss_diff: float | None = None,
        sign_delta_loss_scalar: float | None = None,
    ):
        _validate.positive_float("std", std)
        _validate.optional_positive_float("clip_loss_diff", clip_loss_diff)
        self.truncated_step = truncated_step
        self.std = float(std)
        self.stack_antithetic_samples = bool(stack_antithetic_samples)
        self.clip_loss_diff = clip_loss_diff
        self.sign_delta_loss_scalar = sign_delta_loss_scalar

    def _perturbations(self, theta: PyTree, key: jax.Array) -> PyTree:
        """One perturbation per pair (``[num_tasks, ...]`` leaves), zero on frozen leaves."""
        eps = sample_perturbations(theta, key, self.std, self.truncated_step.num_tasks)
        if not self.frozen_keys:
            return eps
        mask = frozen_mask(theta, self.frozen_keys)
        return jax.tree_util.tree_map(lambda e, f: jnp.zeros_like(e) if f else e, eps, mask)

    def _unroll_pair(
        self, theta, eps, pos_state, neg_state, key, datas, num_steps, length=None, loss_type="avg"
    ):
        """Antithetic unroll; returns (pos, neg, pos loss, neg loss [P], pos_out)."""
        pos, neg, pos_out, neg_out = antithetic_unroll(
            self.truncated_step,
            theta,
            eps,
            pos_state,
            neg_state,
            key,
            datas,
            num_steps,
            stacked=self.stack_antithetic_samples,
            length=length,
        )
        pos_loss = reduce_loss(pos_out, loss_type, length)
        neg_loss = reduce_loss(neg_out, loss_type, length)
        return pos, neg, pos_loss, neg_loss, pos_out

    def _output(self, weights, pos_loss, neg_loss, new_state, metrics=None, info=None):
        """The estimate ``mean_i w_i (L+_i - L-_i) / (2 std^2)``, its output and metrics."""
        grad, delta = es_grad(
            weights,
            pos_loss,
            neg_loss,
            self.std,
            self.clip_loss_diff,
            self.sign_delta_loss_scalar,
        )
        metrics = {"delta_loss_abs": jnp.mean(jnp.abs(delta)), **(metrics or {})}
        mean_loss = jnp.mean((pos_loss + neg_loss) / 2)
        out = GradientEstimatorOut(
            mean_loss=mean_loss, grad=grad, unroll_state=new_state, unroll_info=info
        )
        return out, metrics


class TruncatedAntitheticEstimator(AntitheticEstimator):
    """Antithetic ES over truncations of ongoing runs (TES, PES, NRES).

    The meta-loss of a truncation is the mean of its steps' meta-losses, weighted by the
    truncated step's ``meta_loss_weighting`` when it has one (:func:`reduce_loss`,
    :mod:`~learnopt.outer_trainers.meta_objective`).

    Args:
      truncated_step: its ``num_tasks`` is the number of antithetic pairs.
      trunc_length: inner steps per estimate (``unroll_length`` is accepted as the same).
      std: perturbation standard deviation.
      steps_per_jit: the library's chunking of a truncation; accepted and validated
        (``trunc_length`` must be a multiple of it), the whole truncation is one program.
      stack_antithetic_samples: run the + and - halves as one population of
        ``2 * num_tasks`` (faster; learnopt's default) or as two unrolls (half the peak
        memory; the library's default). Same results either way.
      sign_delta_loss_scalar: use ``sign(L+ - L-)`` times this instead of the
        difference (None: the difference).
      clip_loss_diff: clip ``L+ - L-`` to this magnitude (robustness to outliers; None:
        no clipping).
      unroll_length: the library's name for ``trunc_length`` (keyword only; both given
        must agree).
    """

    default_trunc_length = 10

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        trunc_length: int | None = None,
        std: float = 0.01,
        steps_per_jit: int | None = None,
        stack_antithetic_samples: bool = True,
        sign_delta_loss_scalar: float | None = None,
        clip_loss_diff: float | None = None,
        *,
        unroll_length: int | None = None,
    ):
        super().__init__(
            truncated_step, std, stack_antithetic_samples, clip_loss_diff, sign_delta_loss_scalar
        )
        self.trunc_length = steps_per_estimate(
            self.name, trunc_length, unroll_length, self.default_trunc_length
        )
        check_steps_per_jit(self.name, steps_per_jit, self.trunc_length)
        check_fits_schedule(self.name, truncated_step, self.trunc_length)
        self.steps_per_jit = steps_per_jit

    @property
    def unroll_length(self) -> int:
        """The same as ``trunc_length`` (the library's name in TES and TBPTT)."""
        return self.trunc_length

    def get_datas(self) -> Any:
        """The batches of one truncation (host side).

        Returns:
          ``truncated_step.get_batch(trunc_length)``.
        """
        return self.truncated_step.get_batch(self.trunc_length)

    def _unroll_truncation(self, theta, eps, pos_state, neg_state, key, datas):
        return self._unroll_pair(theta, eps, pos_state, neg_state, key, datas, self.trunc_length)

    def _both_halves_then_restarts(self, theta, eps, state, keys, datas, outer_state):
        """One truncation of both halves of every pair (``state.pos_state``,
        ``state.neg_state``), then the finished runs restart, both halves from the same
        fresh state built with ``theta`` itself (PES, NRES):
        ``(new_pos, new_neg, done, pos_loss, neg_loss, info)``; ``keys`` are the
        unroll's and the restarts'."""
        k_unroll, k_reset = keys
        pos, neg, pos_loss, neg_loss, pos_out = self._unroll_truncation(
            theta, eps, state.pos_state, state.neg_state, k_unroll, datas
        )
        ts = self.truncated_step
        new_pos, done = ts.reset_done(theta, pos, k_reset, outer_state=outer_state)
        new_neg, _ = ts.reset_done(theta, neg, k_reset, outer_state=outer_state)
        return new_pos, new_neg, done, pos_loss, neg_loss, unroll_info(pos, pos_out)
