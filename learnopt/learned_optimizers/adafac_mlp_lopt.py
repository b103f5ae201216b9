r"""AdafacMLPLOpt: a per-parameter MLP fed momentum, RMS and Adafactor-style features.

The "small_fc_lopt" family of Metz et al., "Practical tradeoffs between memory,
compute, and performance in learned optimizers" (2022, arXiv:2203.11860), as
learned_optimization's ``adafac_mlp_lopt.AdafacMLPLOpt`` defines it: same
constructor, features, maths and ``theta`` layout.

Accumulators per tensor (decays learnable, see below): momenta ``m`` (default decays
0.9, 0.99, 0.999), second moments ``rms`` (0.999) and factored second moments (0.9,
0.99, 0.999; Shazeer & Stern, 2018, arXiv:1804.04235) that also give the
Adafactor-preconditioned gradient ``fac_g``. Per element, the feature groups

    g, p, m, rms, m / sqrt(rms + 1e-6), 1 / sqrt(rms + 1e-6), fac_g,
    row, col, 1 / sqrt(row + 1e-8), 1 / sqrt(col + 1e-8), m * fac_rsqrt

(for tensors of rank < 2 the factored groups are ``v, v, 1 / sqrt(v + 1e-8)`` twice
and ``m / sqrt(v + 1e-6)``) are concatenated (28 with the defaults), normalized by their root
mean square over the tensor, joined by the 11 ``tanh(t / s - 1)`` time features and
fed to an MLP (ReLU) with outputs ``(d, a)``:

    p <- p - step_mult * d * exp(exp_mult * a)

.. math::

   (d, a) = \mathrm{MLP}_\theta(\text{features};\ \phi(t)), \qquad
   p \leftarrow p - \lambda_s\, d\, \exp(\lambda_e\, a)

   \beta = 1 - (1 - \beta^{0}) \exp(10\, \theta_\beta)

with ``lambda_s = step_mult``, ``lambda_e = exp_mult``, ``phi(t)`` the time features and
``beta^0`` a decay's initial value.

``theta = {"momentum_decays": [3], "rms_decays": [1], "adafactor_decays": [3],
"nn": {"~": {"w0": [39, hidden], "b0", ..., "w{L}": [hidden, 2], "b{L}"}}}``. A decay
is ``1 - (1 - b0) * exp(10 * theta_decay)`` (``theta_decay`` starts at 0).

learnopt option (off by default): ``tau_features=True`` appends the 7 features of the
fraction of training done ``tau = t / T`` (:mod:`~learnopt.learned_optimizers.blocks.progress`;
``T`` from ``opt.init(params, num_steps=T)``; Celo, arXiv:2501.12670) after the time
features, as per-tensor inputs (first layer ``[46, hidden]``); registered as
``AdafacMLPLOpt_tau`` (and ``MLPNomLOpt_tau``).

learnopt differences: ``num_steps`` at ``init`` is optional (the library raises
without it; it is stored but unused); arithmetic in float32 (float64 for float64
params); the scalar-math code path (``concat_weights=False``) computes the same function
in the fastest form (:mod:`~learnopt.learned_optimizers.blocks.per_element`). The non-factored
``m / sqrt(v + 1e-6)`` is the library's since its 2022-04-11 fix (learnopt used a 1e-20
floor instead until 2026-12-01).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import accumulators, element_features, per_element, progress

PyTree = Any

__all__ = [
    "AdafacMLPLOpt",
    "AdafacMLPLOptState",
    "adafac_features",
    "num_adafac_features",
    "AdafacMLPLOptTau",
    "adafac_decays",
    "adafac_init",
    "adafac_update",
    "init_adafac_theta",
    "mlp_forward",
]


@flax.struct.dataclass
class AdafacMLPLOptState:
    """State of the adafactor MLP optimizers (:class:`AdafacMLPLOpt`, ``MLPNomLOpt``).

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      mom_rolling: momenta ``mom_rolling.m`` (per param, one array of ``p.shape`` per
        decay, see :mod:`~learnopt.learned_optimizers.blocks.accumulators`).
      rms_rolling: second moments ``rms_rolling.rms`` (likewise).
      fac_rolling_features: factored second moments (fields are trees like params).
      num_steps: the inner-run length given to ``init`` (int32; -1 if not given).
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    num_steps: jax.Array
    mom_rolling: accumulators.MomAccumulator
    rms_rolling: accumulators.RMSAccumulator
    fac_rolling_features: accumulators.FactoredAccum


def _bcast(a: int, b: int) -> int:
    return int(np.broadcast_shapes((a,), (b,))[0])


def num_adafac_features(num_mom: int, num_rms: int, num_fac: int) -> int:
    """Number of normalized per-element features of :func:`adafac_features`.

    Args:
      num_mom: the number of momentum decays.
      num_rms: the number of second-moment decays.
      num_fac: the number of factored second-moment decays.

    Returns:
      The total width of the feature groups (28 with the default decays).
    """
    return (
        2 + num_mom + num_rms + _bcast(num_mom, num_rms) + num_rms + num_fac
        + 4 * num_fac + _bcast(num_mom, num_fac)
    )  # fmt: skip


def adafac_features(
    p: jax.Array,
    g: jax.Array,
    m: jax.Array,
    rms: jax.Array,
    fac_g: jax.Array,
    acc: accumulators.FactoredAccum,
    mom_eps: float = 0.0,
    *,
    broadcast: bool = True,
) -> list[jax.Array]:
    """The feature groups of the module docstring for one tensor (scalars as ``[1]``).

    Args:
      p, g: the parameter and its gradient, in the compute dtype.
      m, rms, fac_g: the updated momenta, second moments and preconditioned gradient.
      acc: the updated factored second moments of the tensor.
      mom_eps: added to ``v`` in the non-factored ``m / sqrt(v)`` (0 floors ``v``; see
        :func:`~learnopt.learned_optimizers.blocks.element_features.factored_features`).
      broadcast: False leaves the row and column groups unbroadcast (see
        :func:`~learnopt.learned_optimizers.blocks.element_features.factored_features`), as
        :func:`~learnopt.learned_optimizers.blocks.per_element.mlp` takes them.

    Returns:
      The groups, each a list of ``n`` columns of shape ``shape = p.shape or (1,)``
      (one per decay; with ``broadcast=False`` the row and column groups broadcast to it).
    """
    shape = p.shape or (1,)
    p, g, m, rms, fac_g, acc = element_features.lift_scalar(p, g, m, rms, fac_g, acc)
    # rms_eps 1e-6: learned_optimization's adafac_mlp_lopt, rsqrt(rms + 1e-6).
    f = element_features.element_features(p, g, m, rms, fac_g, rms_eps=1e-6)
    groups = [f.g, f.p, f.m, f.rms, f.m_rsqrt_rms, f.rsqrt_rms, f.fac_g]
    factored = element_features.factored_features(
        acc, m, shape, mom_eps=mom_eps, broadcast=broadcast
    )
    return groups + factored


def adafac_decays(lopt: Any, theta: dict) -> accumulators.Decays:
    """The momentum, rms and adafactor decays: initial decays moved by theta's offsets.

    Each decay is ``param_to_decay(decay_to_param(initial) + offset)``, i.e.
    ``1 - (1 - initial) * exp(10 * offset)``.

    Args:
      lopt: the learned optimizer (its ``initial_*_decays``).
      theta: its meta-parameters (``momentum_decays``, ``rms_decays``,
        ``adafactor_decays``).

    Returns:
      The three decays.
    """

    def one(initial: Sequence[float], offset: jax.Array) -> jax.Array:
        return accumulators.param_to_decay(accumulators.decay_to_param(initial) + offset)

    return accumulators.Decays(
        one(lopt.initial_momentum_decays, theta["momentum_decays"]),
        one(lopt.initial_rms_decays, theta["rms_decays"]),
        one(lopt.initial_adafactor_decays, theta["adafactor_decays"]),
    )


def adafac_init(lopt: Any, params: PyTree, model_state: PyTree, num_steps: Any):
    """Zero accumulators for the adafactor MLP optimizers.

    Args:
      lopt: the learned optimizer (the number of each kind of decay).
      params: the parameters to optimize.
      model_state: the model state kept in the optimizer state.
      num_steps: the inner-run length (stored; None stores -1, or, with
        ``lopt.tau_features``, ``lopt.default_num_steps``, and without one raises).

    Returns:
      The initial :class:`AdafacMLPLOptState`.
    """
    mom, rms, fac = accumulators.init_accumulators(
        params,
        len(lopt.initial_momentum_decays),
        len(lopt.initial_rms_decays),
        len(lopt.initial_adafactor_decays),
    )
    return AdafacMLPLOptState(
        params=params,
        model_state=model_state,
        iteration=jnp.zeros((), jnp.int32),
        num_steps=_num_steps(lopt, num_steps),
        mom_rolling=mom,
        rms_rolling=rms,
        fac_rolling_features=fac,
    )


def _num_steps(lopt: Any, num_steps: Any) -> jax.Array:
    if lopt.tau_features:
        return progress.resolve_num_steps(num_steps, lopt.default_num_steps, lopt.name)
    return jnp.asarray(-1 if num_steps is None else num_steps, jnp.int32)


TensorStep = Callable[[jax.Array, list[jax.Array], jax.Array], jax.Array]


def adafac_update(
    opt_state: AdafacMLPLOptState,
    grads: PyTree,
    model_state: PyTree,
    theta: dict,
    lopt: Any,
    tensor_step: TensorStep,
) -> AdafacMLPLOptState:
    """Updates the accumulators and applies ``tensor_step(p, groups, time) -> new p``.

    Args:
      opt_state: the current state.
      grads: the gradients (cast to the accumulators' dtype here).
      model_state: the new model state (None keeps the current one).
      theta: the meta-parameters (the decay offsets are read here).
      lopt: the learned optimizer.
      tensor_step: the architecture's step of one tensor, given the parameter in the
        compute dtype, the feature groups of :func:`adafac_features` and the 11 time
        features (followed by the 7 fraction-of-training features with
        ``lopt.tau_features``).

    Returns:
      The next state.
    """
    decays = adafac_decays(lopt, theta)
    time = common.tanh_embedding(opt_state.iteration, jnp.float32)
    if lopt.tau_features:
        tau = progress.tau_embedding(opt_state.iteration, opt_state.num_steps, jnp.float32)
        time = jnp.concatenate([time, tau])
    grads = accumulators.accumulator_grads(grads, opt_state.mom_rolling)

    def step(p, g, m, v, fac_g, fac):
        cd = g.dtype  # the accumulators' dtype (grads are cast to it)

        # The row and column groups unbroadcast: per_element.mlp reads their statistics
        # and their first-layer terms once per row or column, not once per element.
        # fac_g is computed where it is used, never written to memory: in the MLP's pass
        # from g and the row and column factors, and in the statistics' pass only as its
        # mean squares (one contraction of g^2 for every decay).
        def features(p, g, m, v, fac):
            fac_g = accumulators.preconditioned_grad(fac, g)
            return adafac_features(p, g, m, v, fac_g, fac, lopt.mom_eps, broadcast=False)

        def stat_features(p, g, m, v, fac):
            if accumulators.factored_dims(p.shape) is None:
                fac_g = accumulators.preconditioned_grad(fac, g)
            else:
                ms = accumulators.preconditioned_grad_mean_squares(fac, g)
                fac_g = [per_element.MeanSquare(ms[k]) for k in range(ms.shape[0])]
            return adafac_features(p, g, m, v, fac_g, fac, lopt.mom_eps, broadcast=False)

        groups, stat_groups = per_element.twice(
            features, p.astype(cd), g, m, v, fac, stat_features=stat_features
        )
        return tensor_step(p.astype(cd), groups, time.astype(cd), stat_groups)

    params, mom, rms, fac = accumulators.update_tree(
        step,
        opt_state.params,
        grads,
        opt_state.mom_rolling,
        opt_state.rms_rolling,
        opt_state.fac_rolling_features,
        decays,
    )
    return common.next_state(
        opt_state, params, model_state, mom_rolling=mom, rms_rolling=rms, fac_rolling_features=fac
    )


def mlp_forward(
    nn: dict,
    groups: list[jax.Array],
    time: jax.Array,
    p_shape: tuple,
    form: str = "auto",
    stat_groups: list[jax.Array] | None = None,
) -> list[jax.Array]:
    """Normalize each feature over the tensor, append the time features, run ``nn["~"]``.

    Args:
      nn: the MLP ``{"~": {"w0", "b0", ...}}``.
      groups: the feature groups of :func:`adafac_features` (features first).
      time: the time features ``[11]`` (per-tensor inputs, the same for every element).
      p_shape: the parameter's shape.
      form: how the MLP is evaluated (:data:`per_element.FORMS`; the same function).
      stat_groups: the groups again, for the normalization statistics
        (:func:`per_element.twice`).

    Returns:
      The MLP's outputs, one array of shape ``p_shape or (1,)`` each.
    """
    shape = p_shape or (1,)
    layers = nn["~"]
    pairs = [(layers[f"w{i}"], layers[f"b{i}"]) for i in range(len(layers) // 2)]
    return per_element.mlp(
        pairs,
        groups,
        shape,
        tensor_inputs=time,
        stat_groups=stat_groups,
        norm_axes=tuple(range(len(shape))),
        form=form,
        feature_axis=0,
    )


def init_adafac_theta(lopt: Any, key: jax.Array, num_outputs: int) -> dict:
    """Zero decay offsets and the MLP ``{"~": {"w0", "b0", ...}}`` as the library creates it.

    Args:
      lopt: the learned optimizer (features, hidden sizes, decays).
      key: the PRNG key of the MLP's weights.
      num_outputs: the MLP's outputs (2 for AdafacMLPLOpt, 4 for MLPNomLOpt).

    Returns:
      The initial theta.
    """
    fan_in = lopt.num_features
    sizes = [fan_in] + [lopt.hidden_size] * lopt.hidden_layers + [num_outputs]
    nn = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layer = common.linear_spec(a, b)
        nn[f"w{i}"], nn[f"b{i}"] = layer["w"], layer["b"]
    spec = {
        "adafactor_decays": np.zeros((len(lopt.initial_adafactor_decays),), np.float32),
        "momentum_decays": np.zeros((len(lopt.initial_momentum_decays),), np.float32),
        "nn": {"~": nn},
        "rms_decays": np.zeros((len(lopt.initial_rms_decays),), np.float32),
    }
    return common.draw(key, spec)


class _AdafacOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`AdafacMLPLOpt.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Zero accumulators (see :func:`adafac_init`).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        return adafac_init(self.lopt, params, model_state, num_steps)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step: ``p <- p - step_mult * d * exp(exp_mult * a)``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        lopt = self.lopt

        def tensor_step(p, groups, time, stat_groups):
            out = mlp_forward(self.theta["nn"], groups, time, p.shape, lopt.mlp_form, stat_groups)
            direction, magnitude = out[0], out[1]
            step = direction * jnp.exp(magnitude * lopt.exp_mult) * lopt.step_mult
            return p - step.reshape(p.shape)

        return adafac_update(opt_state, grads, model_state, self.theta, lopt, tensor_step)


class AdafacMLPLOpt(lopt_base.LearnedOptimizer):
    """Per-parameter MLP with Adafactor features (Metz et al., 2022, arXiv:2203.11860).

    learned_optimization's ``AdafacMLPLOpt`` (same arguments and theta layout); see the
    module docstring for the features and the update.

    Args:
      exp_mult: scale of the magnitude output inside the exponential.
      step_mult: scale of the step.
      hidden_size: width of the MLP's hidden layers.
      hidden_layers: number of hidden layers.
      initial_momentum_decays: decays of the momentum accumulators at ``theta = 0``.
      initial_rms_decays: decays of the second-moment accumulators.
      initial_adafactor_decays: decays of the factored accumulators.
      concat_weights: the library's matmul code path (True) or scalar-math path (False);
        both compute the same function here.
      make_separate_weights: the library's one-scalar-per-weight theta layout; not
        supported (raises ValueError).
      split_weights: a variant of the scalar-math path; same function.
      tau_features: learnopt option: also feed the fraction of training done (module
        docstring).
      default_num_steps: with ``tau_features``, the run length assumed when
        ``opt.init`` gets no ``num_steps`` (None: ``num_steps`` is required).
    """

    #: How the per-element MLP is evaluated (:data:`per_element.FORMS`; the same function
    #: in every form). Not a constructor argument: the library's constructor is kept.
    mlp_form = "auto"
    # Non-factored m / sqrt(v + mom_eps): learned_optimization's adafac_mlp_lopt computes
    # m * (v + 1e-6)**-0.5 (since its commit "Minor bugfix to adafac_mlp_lopt",
    # 2022-04-11; checked at 08d79a53b24889e62b4c9c9eded936ee133cfa54). MLPNomLOpt too.
    mom_eps = 1e-6

    def __init__(
        self,
        exp_mult: float = 0.001,
        step_mult: float = 0.001,
        hidden_size: int = 4,
        hidden_layers: int = 2,
        initial_momentum_decays: Sequence[float] = (0.9, 0.99, 0.999),
        initial_rms_decays: Sequence[float] = (0.999,),
        initial_adafactor_decays: Sequence[float] = (0.9, 0.99, 0.999),
        concat_weights: bool = True,
        make_separate_weights: bool = False,
        split_weights: bool = False,
        tau_features: bool = False,
        default_num_steps: int | None = None,
    ):
        if make_separate_weights and not concat_weights:
            raise ValueError(
                "make_separate_weights=True (one theta scalar per MLP weight) is not "
                "supported by learnopt; use the default matrix layout"
            )
        lopt_base.keep_arguments(self, locals())

    @property
    def num_features(self) -> int:
        """Inputs of the MLP: the normalized feature groups plus 11 time features (39),
        plus 7 fraction-of-training features with ``tau_features`` (46)."""
        tau = progress.NUM_TAU_FEATURES if self.tau_features else 0
        return (
            num_adafac_features(
                len(self.initial_momentum_decays),
                len(self.initial_rms_decays),
                len(self.initial_adafactor_decays),
            )
            + len(common.TIMESCALES)
            + tau
        )

    def init(self, key: jax.Array) -> dict:
        """A random theta: zero decay offsets, the MLP as Haiku initializes it.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        return init_adafac_theta(self, key, num_outputs=2)

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _AdafacOptimizer


#: AdafacMLPLOpt with the fraction-of-training inputs on (``tau_features=True``).
AdafacMLPLOptTau = lopt_base.register_learned_optimizer(
    "AdafacMLPLOpt", AdafacMLPLOpt, tau="AdafacMLPLOpt_tau"
)

# The library's module-level names here, for research code that imports them from this
# module (muLO's fed_adafac_mlp_lopt.py does): the same functions, learnopt's own.
PRNGKey = jax.Array
second_moment_normalizer = common.second_moment_normalizer
tanh_embedding = common.tanh_embedding
decay_to_param = accumulators.decay_to_param
param_to_decay = accumulators.param_to_decay
