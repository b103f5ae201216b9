r"""MLPLOpt: one small MLP applied to every parameter ("LOLv2").

The per-parameter model of Metz et al., "Understanding and correcting pathologies in
the training of learned optimizers" (2019, arXiv:1810.10180), as learned_optimization's
``mlp_lopt.MLPLOpt`` defines it, and the baseline of Metz et al., "Practical tradeoffs
between memory, compute, and performance in learned optimizers" (2022,
arXiv:2203.11860). Same constructor, features, maths and ``theta`` layout as the
library, so a ``theta`` meta-trained there loads here (see
:mod:`learnopt.learned_optimizers.convert`).

For every parameter tensor ``p`` with gradient ``g`` the optimizer keeps momentum
accumulators ``m_k <- b_k m_k + (1 - b_k) g`` for ``b = (0.1, 0.5, 0.9, 0.99, 0.999,
0.9999)``. Each element gets the 8 features ``[g, p, m_1, ..., m_6]``, each divided by
its root mean square over the tensor (``x / sqrt(1e-5 + mean(x^2))``), then the 11
features ``tanh(t / s - 1)`` of the step count ``t`` (before this update) for
timescales ``s`` from 1 to 1e5: 19 inputs. An MLP (ReLU, ``hidden_layers`` layers of
``hidden_size``) maps them to a direction ``d`` and a magnitude ``a``:

    p <- p - step_mult * d * exp(exp_mult * a)

.. math::

   (d, a) = \mathrm{MLP}_\theta\big(\hat g, \hat p, \hat m_{1..6};\ \phi(t)\big),
   \qquad
   p \leftarrow p - \lambda_s\, d\, \exp(\lambda_e\, a)

   \hat x = \frac{x}{\sqrt{10^{-5} + \operatorname{mean}(x^2)}}, \qquad
   \phi(t) = \big(\tanh(t/s - 1)\big)_{s \in \{1, 3, 10, 30, \dots, 10^5\}}

with ``lambda_s = step_mult`` and ``lambda_e = exp_mult`` (both 1e-3 by default).

``theta`` is Haiku's ``hk.nets.MLP`` parameter dict::

    {"mlp/~/linear_0": {"w": [19, hidden_size], "b": [hidden_size]},
     ...,
     "mlp/~/linear_{hidden_layers}": {"w": [hidden_size, 2], "b": [2]}}

learnopt options (off by default, so the library's maths and theta stay the default):
``tau_features=True`` appends the ``progress.NUM_TAU_FEATURES`` (7) features of the
fraction of training done ``tau = t / T`` (``T`` from ``opt.init(params,
num_steps=T)``; Celo, arXiv:2501.12670) after the time features, as per-tensor inputs
(first layer ``[26, hidden_size]``); ``param_scale_steps=True`` multiplies each tensor's
step by its RMS plus ``param_scale_floor`` (steps relative to the parameter scale, as
Celo's and VeLO's are). ``MLPLOpt_tau`` is registered with ``tau_features=True``.

learnopt differences: arithmetic runs in float32 (float64 for float64 params) and new
params are cast back to their dtype, so bfloat16/float16 and mixed precision work;
``compute_summary`` puts step statistics in ``state.summary`` instead of the
library's global summary writer.

Example::

    lopt = mlp_lopt.MLPLOpt()
    theta = lopt.init(jax.random.PRNGKey(0))
    opt = lopt.opt_fn(theta)
    state = opt.init(params)
    state = opt.update(state, grads, loss=loss)
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import per_element, progress
from learnopt.tree_utils import tree_map_multi

PyTree = Any

__all__ = [
    "MLPLOpt",
    "MLPLOptOptimizer",
    "MLPLOptState",
    "MomAccumulator",
    "MOMENTUM_DECAYS",
    "NUM_FEATURES",
    "MLPLOptTau",
]

#: Decays of the momentum accumulators (one feature each).
MOMENTUM_DECAYS = (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999)
#: Inputs of the MLP per element: g, p, 6 momenta, 11 time features.
NUM_FEATURES = 2 + len(MOMENTUM_DECAYS) + len(common.TIMESCALES)
_SUMMARY_KEYS = ("avg_step_size", "direction_mean_abs", "magnitude_mean", "magnitude_mean_abs")


MomAccumulator = common.MomAccumulator


@flax.struct.dataclass
class MLPLOptState:
    """State of :class:`MLPLOptOptimizer`.

    Attributes:
      params: the parameters being optimized, in their own dtypes.
      model_state: the task's non-trainable state (or ``None``).
      iteration: number of updates applied, int32.
      rolling_features: the momentum accumulators (``rolling_features.m``, as in the
        library), in the params' arithmetic dtype.
      summary: with ``compute_summary``, float32 statistics of the last step, averaged
        over all parameter elements (``avg_step_size``, ``direction_mean_abs``,
        ``magnitude_mean``, ``magnitude_mean_abs``); otherwise an empty dict.
      num_steps: with ``tau_features``, the run length ``T`` given to ``init`` (int32);
        otherwise None (no leaf: the library's state).
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    rolling_features: MomAccumulator
    summary: dict[str, jax.Array]
    num_steps: Any = None


class MLPLOptOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`MLPLOpt.opt_fn` returns: the MLP update with a fixed ``theta``.

    Args:
      theta: the meta-parameters of :class:`MLPLOpt` (concrete or traced).
      lopt: the :class:`MLPLOpt` that built it (its ``step_mult``, ``exp_mult``, decays...).
    """

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Zero momentum accumulators, one per decay, in each leaf's arithmetic dtype.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        k = len(MOMENTUM_DECAYS)
        m = jax.tree_util.tree_map(
            lambda p: jnp.zeros((*np.shape(p), k), leaf_compute_dtype(p.dtype)), params
        )
        summary = {}
        if self.lopt.compute_summary:
            summary = {name: jnp.zeros((), jnp.float32) for name in _SUMMARY_KEYS}
        return MLPLOptState(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            rolling_features=MomAccumulator(m=m),
            summary=summary,
            num_steps=_num_steps(self.lopt, num_steps),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step: ``p <- p - step_mult * d * exp(exp_mult * a)`` (module docstring).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        lopt = self.lopt
        iteration = opt_state.iteration

        def time_features(cd):
            time = common.tanh_embedding(iteration, cd)
            if not lopt.tau_features:
                return time
            tau = progress.tau_embedding(iteration, opt_state.num_steps, cd)
            return jnp.concatenate([time, tau])

        layers = [
            (self.theta[f"mlp/~/linear_{i}"]["w"], self.theta[f"mlp/~/linear_{i}"]["b"])
            for i in range(lopt.hidden_layers + 1)
        ]

        def step(p, g, m):
            cd = m.dtype
            g = g.astype(cd)
            m = common.momentum_update(m, g, jnp.asarray(MOMENTUM_DECAYS, cd))
            pc = p.astype(cd)
            # Scalars are handled as [1] tensors (as in the library).
            shape = p.shape or (1,)
            groups = [g.reshape(*shape, 1), pc.reshape(*shape, 1), m.reshape(*shape, -1)]
            mult = lopt.step_mult
            if lopt.param_scale_steps:
                mult = mult * progress.param_scale(pc, lopt.param_scale_floor)
            # Each feature normalized over the tensor; the time features (the same for
            # every element) go in as per-tensor inputs.
            out = per_element.mlp_step(
                layers,
                groups,
                shape,
                pc.reshape(shape),
                step_mult=mult,
                exp_mult=lopt.exp_mult,
                summary=lopt.compute_summary,
                tensor_inputs=time_features(cd),
                norm_axes=tuple(range(len(shape))),
                form=lopt.mlp_form,
            )
            new_p = out.params.reshape(p.shape).astype(p.dtype)
            stats = () if out.sums is None else out.sums.astype(jnp.float32)
            return new_p, m, stats

        params, m, stats = tree_map_multi(
            step, opt_state.params, grads, opt_state.rolling_features.m
        )
        summary = {}
        if lopt.compute_summary:
            count = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params))
            total = sum(jax.tree_util.tree_leaves(stats), jnp.zeros((4,), jnp.float32))
            summary = dict(zip(_SUMMARY_KEYS, total / max(count, 1), strict=True))
        return common.next_state(
            opt_state, params, model_state, rolling_features=MomAccumulator(m=m), summary=summary
        )


def _num_steps(lopt: Any, num_steps: Any) -> jax.Array | None:
    """``T`` for the state when ``lopt`` reads the fraction of training, else None."""
    if not lopt.tau_features:
        return None
    return progress.resolve_num_steps(num_steps, lopt.default_num_steps, lopt.name)


class MLPLOpt(lopt_base.LearnedOptimizer):
    """Per-parameter MLP learned optimizer (Metz et al., 2019, arXiv:1810.10180).

    ``p <- p - step_mult * direction * exp(exp_mult * magnitude)`` where
    ``(direction, magnitude)`` is the output of an MLP applied to every parameter
    element's 19 features (see the module docstring). learned_optimization's
    ``MLPLOpt``: same arguments, defaults, maths and theta layout.

    Args:
      exp_mult: scale of the magnitude output inside the exponential.
      step_mult: scale of the step; at a fresh ``theta`` steps are of this order.
      hidden_size: width of each hidden layer.
      hidden_layers: number of hidden (ReLU) layers.
      compute_summary: if true, states carry step statistics in ``state.summary``.
      tau_features: learnopt option: also feed the fraction of training done (module
        docstring; changes the first layer to ``[26, hidden_size]``).
      default_num_steps: with ``tau_features``, the run length assumed when
        ``opt.init`` gets no ``num_steps`` (None: ``num_steps`` is required).
      param_scale_steps: learnopt option: multiply each tensor's step by
        ``rms(p) + param_scale_floor``.
      param_scale_floor: the floor added to the RMS (so zero tensors still move).
    """

    #: How the per-element MLP is evaluated (:data:`per_element.FORMS`; the same function
    #: in every form). Not a constructor argument: the library's constructor is kept.
    mlp_form = "auto"

    def __init__(
        self,
        exp_mult: float = 0.001,
        step_mult: float = 0.001,
        hidden_size: int = 32,
        hidden_layers: int = 2,
        compute_summary: bool = True,
        tau_features: bool = False,
        default_num_steps: int | None = None,
        param_scale_steps: bool = False,
        param_scale_floor: float = 1e-3,
    ):
        if int(hidden_size) < 1 or int(hidden_layers) < 0:
            raise ValueError(
                f"MLPLOpt needs hidden_size >= 1 and hidden_layers >= 0, got "
                f"hidden_size={hidden_size}, hidden_layers={hidden_layers}"
            )
        lopt_base.keep_arguments(self, locals())

    @property
    def name(self) -> str:
        return "MLPLOpt"

    @property
    def num_features(self) -> int:
        """Inputs of the MLP per parameter element (19; 26 with ``tau_features``)."""
        return NUM_FEATURES + (progress.NUM_TAU_FEATURES if self.tau_features else 0)

    def init(self, key: jax.Array) -> dict[str, dict[str, jax.Array]]:
        """Haiku MLP parameters: weights ~ truncated normal, std ``1/sqrt(fan_in)``; zero biases.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        sizes = [self.num_features] + [self.hidden_size] * self.hidden_layers + [2]
        return common.mlp_init(key, sizes)

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = MLPLOptOptimizer


#: MLPLOpt with the fraction-of-training inputs on (``tau_features=True``).
MLPLOptTau = lopt_base.register_learned_optimizer("MLPLOpt", MLPLOpt, tau="MLPLOpt_tau")

# The library's module-level names here, for research code that imports them from this
# module (muLO's fed_mlp_lopt.py does): the same functions, learnopt's own.
PRNGKey = jax.Array
_second_moment_normalizer = common.second_moment_normalizer
_tanh_embedding = common.tanh_embedding
