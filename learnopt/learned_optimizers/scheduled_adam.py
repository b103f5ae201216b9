r"""ScheduledAdam: Adam's direction with a learned schedule over the fraction of training.

Learned optimizers meta-trained over runs of one length learn warm-up and decay
schedules (Maheswaranathan et al., "Reverse engineering learned optimizers reveals
known and novel mechanisms", 2020, arXiv:2011.02159), but a schedule over the absolute
step count does not transfer to runs of another length. ScheduledAdam keeps Adam's
hand-designed direction and learns only *how far* to step, as a function of the
fraction of training done ``tau = t / T`` (``T`` from ``opt.init(params,
num_steps=T)``; Celo, Moudgil et al., 2025, arXiv:2501.12670, feeds its rule the same
quantity) and of the kind of tensor. For a tensor ``p`` of kind ``k`` with gradient
``g``, at step ``t`` (counted from 0 before the update):

    m <- b1 m + (1 - b1) g;   v <- b2 v + (1 - b2) g^2
    d  = m_hat / (sqrt(v_hat) + eps)        (bias-corrected, optax's scale_by_adam)
    p <- p - exp(log_lr + s(tau) + offset_k) * d

.. math::

   p \leftarrow p - c(t, T)\, \exp\!\big(\theta_{\mathrm{lr}} + s_\theta(\tau)
   + o_{\kappa(p)} \,[\, + r_\theta(\varphi_p)\,]\big)\, \frac{\hat m}{\sqrt{\hat v} + \epsilon},
   \qquad \tau = \frac{t}{T}

   c(t, T) =
   \begin{cases}
   \dfrac{\bar t}{wT} & \bar t < wT, \\[8pt]
   \dfrac{1}{2}\left(1 + \cos \dfrac{\pi (\bar t - wT)}{T - wT}\right) & \text{otherwise,}
   \end{cases}
   \qquad \bar t = \min(t, T)

(``c = 1`` unless ``schedule_prior="warmup_cosine"``, ``w = warmup_fraction``; the
per-tensor offset ``r(phi_p)`` only with ``tensor_features=True``; both below.)
with ``s`` a small MLP over :func:`~learnopt.learned_optimizers.blocks.progress.tau_embedding`
(ReLU, ``hidden_size`` units) whose output layer starts at zero, ``offset`` one scalar
per tensor kind (:data:`TENSOR_KINDS`, zero at first), ``b = sigmoid(beta_logit)``
and ``eps = exp(log_epsilon)``. At its initial theta ScheduledAdam is
``optax.adam(initial_lr, initial_beta1, initial_beta2, initial_epsilon)`` step for step.

Tensor kinds, from each parameter's shape and path: ``"vector"`` (rank 0 or 1: biases,
scales), ``"matrix"`` (rank 2), ``"conv"`` (rank 3 and more: convolution kernels) and
``"embedding"`` (rank 2 with ``embed`` in its path, case-insensitive).

Three options (their defaults keep the default theta and update unchanged):

* ``schedule_prior="warmup_cosine"`` multiplies the step by a fixed schedule ``c(t, T)``:
  a linear warmup over the first ``warmup_fraction`` of the run, then a half cosine to
  zero (:func:`~learnopt.optimizers.nadamw.adam_warmup_cosine`'s schedule; Loshchilov &
  Hutter, arXiv:1608.03983). The learned ``s(tau)`` then corrects a good hand-designed
  schedule instead of inventing one, and the initial theta *is*
  ``adam_warmup_cosine(initial_lr)`` step for step.
* ``tensor_features=True`` adds a per-tensor offset ``r(phi_p)`` to the log step size,
  from a second small MLP (output layer zero at first) over statistics of each tensor,
  recomputed every step: the tau embedding, the bias-corrected momentum's signal-to-noise
  ratio ``rms(m_hat) / rms(sqrt(v_hat))`` (near 1 when the gradient keeps its sign, near 0
  when noise dominates), ``log10`` of the parameters' RMS and of the tensor's size, and
  the tensor kind (one-hot). Step sizes that follow tensor scale and gradient noise are
  what per-task tuning buys (step sizes that scale with the parameters: LARS, You et al.
  arXiv:1708.03888; Adafactor, Shazeer & Stern arXiv:1804.04235; Celo2's per-tensor
  normalization, arXiv:2602.19142). Theta gains ``"tensor_mlp"``.

* ``learn_schedule=False`` drops ``s`` (theta has no ``"schedule"``): the schedule is
  the fixed prior's alone, and theta is the 8 scalars of Adam's hyperparameters and the
  per-kind offsets, the notes' ``LearnableAdam`` with a step per tensor kind on a fixed
  schedule. Few meta-parameters make ES estimates far less noisy (the variance of each
  coordinate's estimate grows with the number of perturbed dimensions), at the price of
  a schedule that cannot change shape.

``theta = {"log_lr": [], "log_epsilon": [], "beta1_logit": [], "beta2_logit": [],
"kind_offsets": [4], "schedule": {"mlp/~/linear_0": {"w": [7, H], "b": [H]},
"mlp/~/linear_1": {"w": [H, 1], "b": [1]}}}``. learned_optimization has no such
architecture; its closest is ``LearnableAdam`` (constant learnable hyperparameters).

Example::

    lopt = scheduled_adam.ScheduledAdam(initial_lr=1e-3)
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    state = opt.init(params, num_steps=1000)
    state = opt.update(state, grads)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate
from learnopt.canonical import leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import progress
from learnopt.optimizers.adam import adam_direction_from_decays
from learnopt.optimizers.common import safe_sqrt
from learnopt.tree_utils import tree_map_multi

PyTree = Any

__all__ = [
    "NUM_TENSOR_FEATURES",
    "SCHEDULE_PRIORS",
    "ScheduledAdam",
    "ScheduledAdamState",
    "TENSOR_KINDS",
    "tensor_features",
    "tensor_kind",
]

#: The tensor kinds with their own learned step-size offset (in ``kind_offsets`` order).
TENSOR_KINDS = ("vector", "matrix", "conv", "embedding")

#: The fixed schedules ``schedule_prior`` accepts.
SCHEDULE_PRIORS = ("constant", "warmup_cosine")

#: Inputs of the per-tensor offset network: tau embedding, SNR, log10 RMS(p), log10 size,
#: kind one-hot.
NUM_TENSOR_FEATURES = progress.NUM_TAU_FEATURES + 3 + len(TENSOR_KINDS)


def tensor_kind(path: Any, shape: tuple[int, ...]) -> int:
    """The index in :data:`TENSOR_KINDS` of a parameter (see the module docstring).

    Args:
      path: the parameter's key path in the params tree (``jax.tree_util`` path entries).
      shape: its shape.

    Returns:
      0 (vector), 1 (matrix), 2 (conv) or 3 (embedding).
    """
    rank = len(shape)
    if rank <= 1:
        return 0
    if rank >= 3:
        return 2
    if "embed" in jax.tree_util.keystr(tuple(path)).lower():
        return 3
    return 1


def tensor_features(
    p: jax.Array,
    m: jax.Array,
    v: jax.Array,
    kind: int,
    tau_features: jax.Array,
    correction1: Any = 1.0,
    correction2: Any = 1.0,
) -> jax.Array:
    """The inputs of ScheduledAdam's per-tensor offset network for one tensor.

    The bias corrections enter as scalars (``m_hat = m / correction1``, ``v_hat = v /
    correction2``), so no corrected copy of the moments is formed.

    Args:
      p: the parameter tensor (before the update).
      m: its first moment.
      v: its second moment.
      kind: its index in :data:`TENSOR_KINDS`.
      tau_features: :func:`~learnopt.learned_optimizers.blocks.progress.tau_embedding` of the step.
      correction1: Adam's ``1 - beta1^t``.
      correction2: Adam's ``1 - beta2^t``.

    Returns:
      ``[NUM_TENSOR_FEATURES]`` float32 features: ``tau_features``, the signal-to-noise
      ratio ``rms(m_hat) / rms(sqrt(v_hat))`` in [0, 1], ``log10(rms(p) + 1e-6) / 3``,
      ``log10(size) / 6`` and the kind one-hot. Every entry is of order 1 or less.
    """
    f32 = jnp.float32
    ms = lambda x: jnp.mean(jnp.square(x.astype(f32)))  # noqa: E731
    c1, c2 = jnp.asarray(correction1, f32), jnp.asarray(correction2, f32)
    # safe_sqrt: the same values, and finite meta-gradients where a tensor is all zeros
    # (zero-initialized biases, a dead unit's gradients), where sqrt's derivative is inf.
    # (the floor 1e-12, not 1e-30: the quotient's derivative divides by its square, and
    # 1e-60 is 0 in float32, so a tensor with zero gradients gave NaN meta-gradients)
    snr = safe_sqrt(ms(m) * c2 / jnp.maximum(jnp.mean(v.astype(f32)) * jnp.square(c1), 1e-12))
    log_rms = jnp.log10(safe_sqrt(ms(p)) + 1e-6) / 3.0
    log_size = jnp.asarray(np.log10(max(int(np.size(p)), 1)) / 6.0, f32)
    one_hot = jax.nn.one_hot(kind, len(TENSOR_KINDS), dtype=f32)
    return jnp.concatenate(
        [tau_features.astype(f32), jnp.stack([jnp.minimum(snr, 1.0), log_rms, log_size]), one_hot]
    )


@flax.struct.dataclass
class ScheduledAdamState:
    """State of the optimizer :meth:`ScheduledAdam.opt_fn` returns.

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      num_steps: the run length ``T`` given to ``init``, int32.
      mu, nu: Adam's first and second moments, in the params' arithmetic dtypes.
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    num_steps: jax.Array
    mu: PyTree
    nu: PyTree


class _StepContext(NamedTuple):
    """What one update of every tensor shares (see ``_ScheduledAdamOptimizer._context``)."""

    log_lr: jax.Array  # [kinds] log step sizes
    omb1: jax.Array  # 1 - beta1
    omb2: jax.Array  # 1 - beta2
    eps: jax.Array
    t: jax.Array  # the step number, from 1
    kinds: PyTree  # each tensor's index in TENSOR_KINDS
    prior: jax.Array  # the fixed schedule's multiplier
    tau: jax.Array  # the fraction-of-training embedding
    correction1: jax.Array  # Adam's bias corrections 1 - beta^t (for per-tensor features)
    correction2: jax.Array


class _ScheduledAdamOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`ScheduledAdam.opt_fn` returns."""

    def _context(self, s: Any) -> _StepContext:
        """The scalars and tensor kinds one update shares, from theta and the state ``s``."""
        theta, f32 = self.theta, jnp.float32
        # 1 - beta = sigmoid(-logit): exact for beta near 1.
        omb1 = jax.nn.sigmoid(-theta["beta1_logit"])
        omb2 = jax.nn.sigmoid(-theta["beta2_logit"])
        t = s.iteration + 1
        treedef = jax.tree_util.tree_structure(s.params)
        leaves = jax.tree_util.tree_flatten_with_path(s.params)[0]
        return _StepContext(
            log_lr=self.lopt.log_step_sizes(theta, s.iteration, s.num_steps),
            omb1=omb1,
            omb2=omb2,
            eps=jnp.exp(theta["log_epsilon"]),
            t=t,
            kinds=treedef.unflatten([tensor_kind(path, np.shape(p)) for path, p in leaves]),
            prior=self.lopt.schedule_multiplier(s.iteration, s.num_steps),
            tau=progress.tau_embedding(s.iteration, s.num_steps, f32),
            correction1=-jnp.expm1(t.astype(f32) * jnp.log1p(-omb1)),
            correction2=-jnp.expm1(t.astype(f32) * jnp.log1p(-omb2)),
        )

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Zero moments and the run length.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: the run length ``T`` (required unless the learned optimizer has a
          ``default_num_steps``).

        Raises:
          ValueError: ``num_steps`` is missing and there is no ``default_num_steps``.
        """
        zeros = jax.tree_util.tree_map(
            lambda p: jnp.zeros(np.shape(p), leaf_compute_dtype(p.dtype)), params
        )
        return ScheduledAdamState(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            num_steps=progress.resolve_num_steps(
                num_steps, self.lopt.default_num_steps, self.lopt.name
            ),
            mu=zeros,
            nu=jax.tree_util.tree_map(jnp.copy, zeros),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step ``p <- p - exp(log_lr + s(tau) + offset_kind) * adam_direction``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        theta, s = self.theta, opt_state
        c = self._context(s)
        log_lr, t, kinds, prior, tau = c.log_lr, c.t, c.kinds, c.prior, c.tau

        def step(p, m, v, g, kind):
            cd = m.dtype
            d, m, v = adam_direction_from_decays(m, v, g, t, c.omb1, c.omb2, c.eps, 0.0)
            log_step = log_lr[kind]
            if self.lopt.tensor_features:
                phi = tensor_features(p, m, v, kind, tau, c.correction1, c.correction2)
                log_step = log_step + common.mlp_apply(theta["tensor_mlp"], phi[None])[0, 0]
            lr = (jnp.exp(log_step) * prior).astype(cd)
            return (p.astype(cd) - lr * d).astype(p.dtype), m, v

        params, mu, nu = tree_map_multi(step, s.params, s.mu, s.nu, grads, kinds)
        return common.next_state(s, params, model_state, mu=mu, nu=nu)


class ScheduledAdam(lopt_base.LearnedOptimizer):
    """Adam with a learned step-size schedule over ``tau = t / T`` and per-kind offsets.

    See the module docstring for the update and theta (schedules learned by learned
    optimizers: arXiv:2011.02159; fraction-of-training inputs: Celo, arXiv:2501.12670).
    At the initial theta it is ``optax.adam(initial_lr, initial_beta1, initial_beta2,
    initial_epsilon)``.

    Args:
      initial_lr: the learning rate at the initial theta (``log_lr = log(initial_lr)``).
      initial_beta1: the first-moment decay at the initial theta, in (0, 1).
      initial_beta2: the second-moment decay at the initial theta, in (0, 1).
      initial_epsilon: Adam's ``epsilon`` at the initial theta (> 0).
      hidden_size: width of the schedule MLP's hidden layer (and of the per-tensor
        network's, with ``tensor_features``).
      default_num_steps: the run length assumed when ``opt.init`` gets no
        ``num_steps``; None (the default) makes ``num_steps`` required.
      schedule_prior: ``"constant"`` (the default: the step is ``exp(...)`` alone) or
        ``"warmup_cosine"`` (multiplied by linear warmup then cosine decay to zero; the
        initial theta is then ``adam_warmup_cosine(initial_lr, warmup_fraction)``).
      warmup_fraction: the warmup's share of the run with ``"warmup_cosine"``, in [0, 1).
      tensor_features: add the per-tensor offset network ``r`` (module docstring).
      learn_schedule: learn the correction ``s(tau)`` of the schedule (the default);
        False keeps the prior schedule fixed and theta without ``"schedule"``.
      offset_kinds: for each kind of :data:`TENSOR_KINDS`, in order, the kind whose
        offset it uses (default: its own). ``("vector", "matrix", "matrix", "matrix")``
        gives conv kernels and embeddings the matrices' offset: for a meta-training
        distribution without such tensors, whose own offsets would only collect
        estimator noise. Theta keeps its four offsets; the unused ones have no effect.
    """

    def __init__(
        self,
        initial_lr: float = 1e-3,
        initial_beta1: float = 0.9,
        initial_beta2: float = 0.999,
        initial_epsilon: float = 1e-8,
        hidden_size: int = 16,
        default_num_steps: int | None = None,
        schedule_prior: str = "constant",
        warmup_fraction: float = 0.05,
        tensor_features: bool = False,
        learn_schedule: bool = True,
        offset_kinds: Sequence[str] = TENSOR_KINDS,
    ):
        _validate.positive_float("initial_lr", initial_lr)
        _validate.positive_float("initial_epsilon", initial_epsilon)
        for arg, value in (("initial_beta1", initial_beta1), ("initial_beta2", initial_beta2)):
            _validate.real(arg, value, low=0.0, high=1.0, low_open=True, high_open=True)
        _validate.positive_int("hidden_size", hidden_size)
        if default_num_steps is not None:
            _validate.positive_int("default_num_steps", default_num_steps)
        if schedule_prior not in SCHEDULE_PRIORS:
            raise ValueError(
                f"schedule_prior must be one of {SCHEDULE_PRIORS}, got {schedule_prior!r}"
            )
        _validate.real("warmup_fraction", warmup_fraction, low=0.0, high=1.0, high_open=True)
        offset_kinds = tuple(offset_kinds) if not isinstance(offset_kinds, str) else ()
        if len(offset_kinds) != len(TENSOR_KINDS) or not set(offset_kinds) <= set(TENSOR_KINDS):
            raise ValueError(
                f"offset_kinds must name, for each of {TENSOR_KINDS} in order, one of those "
                f"kinds, got {offset_kinds!r}"
            )
        lopt_base.keep_arguments(self, locals())

    def init(self, key: jax.Array) -> dict:
        """The initial theta: Adam on the prior schedule (zero learned outputs and offsets).

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        logit = lambda b: np.float32(np.log(b) - np.log1p(-b))  # noqa: E731
        h = self.hidden_size
        spec = {
            "beta1_logit": logit(self.initial_beta1),
            "beta2_logit": logit(self.initial_beta2),
            "kind_offsets": np.zeros((len(TENSOR_KINDS),), np.float32),
            "log_epsilon": np.float32(np.log(self.initial_epsilon)),
            "log_lr": np.float32(np.log(self.initial_lr)),
        }
        if self.learn_schedule:
            spec["schedule"] = {
                "mlp/~/linear_0": common.linear_spec(progress.NUM_TAU_FEATURES, h),
                "mlp/~/linear_1": common.linear_spec(h, 1, zero_weights=True),
            }
        if self.tensor_features:
            spec["tensor_mlp"] = {
                "mlp/~/linear_0": common.linear_spec(NUM_TENSOR_FEATURES, h),
                "mlp/~/linear_1": common.linear_spec(h, 1, zero_weights=True),
            }
        return common.draw(key, spec)

    def schedule_multiplier(self, iteration: jax.Array, num_steps: jax.Array) -> jax.Array:
        """The fixed prior schedule ``c(t, T)`` the learned step is multiplied by.

        Args:
          iteration: the step count ``t`` before the update.
          num_steps: the run length ``T``.

        Returns:
          A float32 scalar: 1 with ``schedule_prior="constant"``; warmup then cosine to
          zero with ``"warmup_cosine"`` (the schedule of ``adam_warmup_cosine``).
        """
        if self.schedule_prior == "constant":
            return jnp.ones((), jnp.float32)
        from learnopt.optimizers.learning_rate_schedules import CosineLearningRateSchedule

        w = self.warmup_fraction
        schedule = CosineLearningRateSchedule(
            1.0, min_learning_rate_mult=0.0, constant_fraction=w, warmup_fraction=w
        )
        return schedule(iteration, num_steps).astype(jnp.float32)

    def log_step_sizes(self, theta: dict, iteration: jax.Array, num_steps: jax.Array) -> jax.Array:
        """``log_lr + s(tau) + offset_k`` for every tensor kind ``k``.

        Args:
          theta: the meta-parameters.
          iteration: the step count ``t`` before the update.
          num_steps: the run length ``T``.

        Returns:
          ``[len(TENSOR_KINDS)]`` float32 log step sizes.
        """
        offsets = theta["kind_offsets"]
        if self.offset_kinds != TENSOR_KINDS:
            offsets = offsets[np.array([TENSOR_KINDS.index(k) for k in self.offset_kinds])]
        if not self.learn_schedule:
            return theta["log_lr"] + offsets
        features = progress.tau_embedding(iteration, num_steps, jnp.float32)
        schedule = common.mlp_apply(theta["schedule"], features[None])[0, 0]
        return theta["log_lr"] + schedule + offsets

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _ScheduledAdamOptimizer


lopt_base.register_learned_optimizer("ScheduledAdam", ScheduledAdam)
