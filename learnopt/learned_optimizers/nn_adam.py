r"""NNAdam: Adam whose per-tensor hyperparameters are steered by an LSTM.

learned_optimization's ``nn_adam.NNAdam`` (same constructor, maths and ``theta``
layout), the "LSTM-controlled Adam hyperparameters" baseline of Metz et al.,
"Practical tradeoffs between memory, compute, and performance in learned optimizers"
(2022, arXiv:2203.11860).

Every tensor has its own ``lr, beta1, beta2, epsilon``, stored in an unconstrained
form: ``lr = clip(exp(10 x), 1e-8, 1e3)``, ``epsilon = clip(exp(10 x), 1e-11, 1e4)``,
``beta = 1 - exp(clip(10 x, -10, 0))``. A step (no bias correction):

    m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
    p <- p - lr (1 + epsilon) m / (epsilon + sqrt(v + 1e-10))

.. math::

   m \leftarrow \beta_1 m + (1 - \beta_1)\, \bar g, \quad
   v \leftarrow \beta_2 v + (1 - \beta_2)\, \bar g^2, \quad
   p \leftarrow p - \eta\, (1 + \epsilon)\, \frac{m}{\epsilon + \sqrt{v + 10^{-10}}}

   \eta = \operatorname{clip}(e^{10 x_{\mathrm{lr}}}, 10^{-8}, 10^{3}), \quad
   \epsilon = \operatorname{clip}(e^{10 x_\epsilon}, 10^{-11}, 10^{4}), \quad
   \beta_i = 1 - \exp\big(\operatorname{clip}(10 x_{\beta_i}, -10, 0)\big)

with ``g_bar = clip(g, -1000, 1000)`` (the gradient is clipped before the moments) and
``x`` the unconstrained hyperparameters.

(the ``(1 + epsilon)`` factor lets a large epsilon turn the update into momentum SGD
without a compensating learning rate). Then an LSTM (hidden 32, shared by all
tensors) reads 19 per-tensor features (log-magnitudes, signs and variances of
``p, g, m, v``, the rank, and the current hyperparameters) and a linear layer
(initialized at zero) outputs ``output_scale * delta`` added to the four
unconstrained hyperparameters, which are then clipped to their ranges.

``theta = {"lstm_init_state": LSTMState([1, 32], [1, 32]), "rnn_params":
{"rnn/linear": {"w": [51, 128], "b": [128]}}, "rnn_to_controls_params":
{"rnn_to_controls": {"w": [32, 4], "b": [4]}}, "per_layer_lr", "per_layer_beta1",
"per_layer_beta2", "per_layer_epsilon"}`` (scalars, the initial hyperparameters in
their unconstrained form). At the initial theta the controls are zero, so NNAdam is
the Adam above with the initial hyperparameters: a meaningful default.

learnopt option (off by default): ``tau_features=True`` appends the 7 features of the
fraction of training done ``tau = t / T`` (:mod:`~learnopt.learned_optimizers.blocks.progress`;
``T`` from ``opt.init(params, num_steps=T)``; Celo, arXiv:2501.12670) to every
tensor's LSTM inputs (``rnn/linear`` ``w: [58, 128]``); registered as ``NNAdam_tau``.

learnopt differences: ``num_steps`` at ``init`` is optional (the library requires it
and does not use it); arithmetic in float32 (float64 for float64 params).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import compute_dtype, leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import progress
from learnopt.tree_utils import tree_map_multi

PyTree = Any

__all__ = [
    "NNAdam",
    "NNAdamState",
    "MeanAndMeanSquareAccumulator",
    "NNAdamTau",
]

_LSTM_HIDDEN = 32
_NUM_FEATURES = 19


@flax.struct.dataclass
class MeanAndMeanSquareAccumulator:
    """``m`` and ``rms`` (second moment) per param, in the arithmetic dtype.

    Attributes:
      m: the first moments (EMA of the gradient), a tree like the params.
      rms: the second moments (EMA of the squared gradient), a tree like the params.
    """

    m: PyTree
    rms: PyTree


@flax.struct.dataclass
class NNAdamState:
    """State of the NNAdam optimizer.

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      rolling_features: the accumulators ``m`` and ``rms``.
      per_layer_lr, per_layer_beta1, per_layer_beta2, per_layer_epsilon: per-tensor
        scalars (trees like params) in the unconstrained form.
      lstm_hidden_state: ``LSTMState([num_tensors, 32], [num_tensors, 32])``.
      num_steps: with ``tau_features``, the run length ``T`` given to ``init`` (int32);
        otherwise None (no leaf: the library's state).
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    rolling_features: MeanAndMeanSquareAccumulator
    per_layer_lr: PyTree
    per_layer_beta1: PyTree
    per_layer_beta2: PyTree
    per_layer_epsilon: PyTree
    lstm_hidden_state: common.LSTMState
    num_steps: Any = None


# (forward, inverse) of the unconstrained hyperparameter forms.
def _lr_inverse(x):
    return jnp.clip(jnp.exp(10.0 * x), 1e-8, 1e3)


def _eps_inverse(x):
    return jnp.clip(jnp.exp(10.0 * x), 1e-11, 1e4)


def _beta_inverse(x):
    return 1 - jnp.exp(jnp.clip(10 * x, -10, 0))


def _log_forward(x):
    return 0.1 * jnp.log(x)


def _one_minus_log_forward(x):
    return 0.1 * jnp.log(1 - x)


def _clip_log_abs(x: jax.Array) -> jax.Array:
    return jnp.clip(jnp.log(1e-8 + jnp.abs(x)), -5, 5) * 0.5


def _tensor_features(p, g, m, rms, lr, beta1, beta2, epsilon) -> jax.Array:
    """The 19 LSTM inputs of one tensor, in the library's (alphabetical) order."""
    dtype = m.dtype

    def mean_var(x):
        mean = jnp.mean(x)
        return mean, jnp.mean(jnp.square(x - mean))

    mean_m, var_m = mean_var(m)
    mean_rms, var_rms = mean_var(rms)
    mean_p, var_p = mean_var(p)
    mean_g, var_g = mean_var(g)
    const = lambda v: jnp.asarray(v, dtype)  # noqa: E731
    feats = {
        "beta1": jnp.clip(beta1, -5, 5) * 0.2,
        "beta2": jnp.clip(beta2, -5, 5) * 0.2,
        "epsilon": jnp.clip(epsilon, -5, 5) * 0.2,
        "is_bias": const(1.0 if p.ndim == 1 else -1.0),
        "is_scalar": const(1.0 if p.ndim == 0 else -1.0),
        "lr": jnp.clip(lr, -5, 5) * 0.2,
        "mean_g_mag": _clip_log_abs(mean_g),
        "mean_g_sign": jnp.sign(mean_g),
        "mean_gabs_mag": _clip_log_abs(jnp.mean(jnp.abs(g))),
        "mean_m_mag": _clip_log_abs(mean_m),
        "mean_m_sign": jnp.sign(mean_m),
        "mean_p_mag": _clip_log_abs(mean_p),
        "mean_p_sign": jnp.sign(mean_p),
        "mean_rms": _clip_log_abs(mean_rms),
        "mean_sign": jnp.sign(mean_rms),
        "var_g": _clip_log_abs(var_g),
        "var_m": _clip_log_abs(var_m),
        "var_p": _clip_log_abs(var_p),
        "var_rms": _clip_log_abs(var_rms),
    }
    return jnp.stack([jnp.asarray(feats[k]).astype(dtype) for k in sorted(feats)])


class _NNAdamOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`NNAdam.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        theta = self.theta
        n = len(jax.tree_util.tree_leaves(params))
        init_state = common.as_lstm_state(theta["lstm_init_state"])
        lstm_state = jax.tree_util.tree_map(lambda x: jnp.tile(x, (n, 1)), init_state)

        def per_tensor(name):
            return jax.tree_util.tree_map(lambda p: theta[name], params)

        zeros = jax.tree_util.tree_map(
            lambda p: jnp.zeros(np.shape(p), leaf_compute_dtype(p.dtype)), params
        )
        return NNAdamState(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            rolling_features=MeanAndMeanSquareAccumulator(m=zeros, rms=zeros),
            per_layer_lr=per_tensor("per_layer_lr"),
            per_layer_beta1=per_tensor("per_layer_beta1"),
            per_layer_beta2=per_tensor("per_layer_beta2"),
            per_layer_epsilon=per_tensor("per_layer_epsilon"),
            lstm_hidden_state=lstm_state,
            num_steps=(
                progress.resolve_num_steps(num_steps, self.lopt.default_num_steps, self.lopt.name)
                if self.lopt.tau_features
                else None
            ),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        theta, lopt = self.theta, self.lopt
        tree_dtype = compute_dtype(opt_state.params)

        def step(p, g, m, rms, lr_x, b1_x, b2_x, eps_x):
            cd = m.dtype
            g = jnp.clip(g.astype(cd), -1000.0, 1000.0)
            b1, b2 = _beta_inverse(b1_x).astype(cd), _beta_inverse(b2_x).astype(cd)
            lr, eps = _lr_inverse(lr_x).astype(cd), _eps_inverse(eps_x).astype(cd)
            m = b1 * m + (1 - b1) * g
            rms = b2 * rms + (1 - b2) * jnp.square(g)
            delta = lr * (1 + eps) / (eps + jnp.sqrt(rms + jnp.asarray(1e-10, cd))) * m
            new_p = (p.astype(cd) - delta).astype(p.dtype)
            feats = _tensor_features(p.astype(cd), g, m, rms, lr_x, b1_x, b2_x, eps_x)
            return new_p, m, rms, feats.astype(tree_dtype)

        s = opt_state
        params, m, rms, feats = tree_map_multi(
            step,
            s.params,
            grads,
            s.rolling_features.m,
            s.rolling_features.rms,
            s.per_layer_lr,
            s.per_layer_beta1,
            s.per_layer_beta2,
            s.per_layer_epsilon,
        )
        treedef = jax.tree_util.tree_structure(s.params)
        stack = jnp.stack(jax.tree_util.tree_leaves(feats))
        if lopt.tau_features:
            tau = progress.tau_embedding(s.iteration, s.num_steps, tree_dtype)
            stack = jnp.concatenate(
                [stack, jnp.broadcast_to(tau, (stack.shape[0], tau.shape[0]))], 1
            )
        lstm_params = common.cast_tree(theta["rnn_params"]["rnn/linear"], tree_dtype)
        lstm_out, lstm_state = common.lstm_apply(lstm_params, stack, s.lstm_hidden_state)
        controls = theta["rnn_to_controls_params"]["rnn_to_controls"]
        deltas = common.linear_apply(controls, lstm_out) * lopt.output_scale  # [n, 4]

        def moved(tree, column, inverse, forward):
            leaves = [
                forward(inverse(x + deltas[i, column].astype(x.dtype))).astype(x.dtype)
                for i, x in enumerate(treedef.flatten_up_to(tree))
            ]
            return treedef.unflatten(leaves)

        return common.next_state(
            s,
            params,
            model_state,
            rolling_features=MeanAndMeanSquareAccumulator(m=m, rms=rms),
            per_layer_lr=moved(s.per_layer_lr, 0, _lr_inverse, _log_forward),
            per_layer_beta1=moved(s.per_layer_beta1, 1, _beta_inverse, _one_minus_log_forward),
            per_layer_beta2=moved(s.per_layer_beta2, 2, _beta_inverse, _one_minus_log_forward),
            per_layer_epsilon=moved(s.per_layer_epsilon, 3, _eps_inverse, _log_forward),
            lstm_hidden_state=lstm_state,
        )


class NNAdam(lopt_base.LearnedOptimizer):
    """Adam with per-tensor hyperparameters controlled by an LSTM (arXiv:2203.11860).

    learned_optimization's ``NNAdam``; see the module docstring.

    Args:
      output_scale: multiplier of the LSTM's hyperparameter changes.
      initial_learning_rate: learning rate at the initial theta.
      initial_beta1: first-moment decay at the initial theta.
      initial_beta2: second-moment decay at the initial theta.
      initial_epsilon: epsilon at the initial theta.
      tau_features: learnopt option: the LSTM also reads the fraction of training done
        (module docstring).
      default_num_steps: with ``tau_features``, the run length assumed when
        ``opt.init`` gets no ``num_steps`` (None: ``num_steps`` is required).
    """

    def __init__(
        self,
        output_scale: float = 0.01,
        initial_learning_rate: float = 1e-4,
        initial_beta1: float = 0.9,
        initial_beta2: float = 0.999,
        initial_epsilon: float = 1e-8,
        tau_features: bool = False,
        default_num_steps: int | None = None,
    ):
        lopt_base.keep_arguments(self, locals())
        self.lstm_hidden_size = _LSTM_HIDDEN
        self.rnn_input_features = _NUM_FEATURES + (
            progress.NUM_TAU_FEATURES if self.tau_features else 0
        )

    def init(self, key: jax.Array) -> dict:
        """Haiku-layout theta: LSTM and zero-weight control layer, initial hyperparameters.

        The per-layer hyperparameters are stored as ``0.1 * log(lr)``, ``0.1 *
        log(epsilon)`` and ``0.1 * log(1 - beta)``.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        f32 = lambda x: np.float32(x)  # noqa: E731
        spec = {
            "lstm_init_state": common.lstm_initial_state(_LSTM_HIDDEN),
            "per_layer_beta1": f32(0.1 * np.log(1 - self.initial_beta1)),
            "per_layer_beta2": f32(0.1 * np.log(1 - self.initial_beta2)),
            "per_layer_epsilon": f32(0.1 * np.log(self.initial_epsilon)),
            "per_layer_lr": f32(0.1 * np.log(self.initial_learning_rate)),
            "rnn_params": {"rnn/linear": common.lstm_spec(self.rnn_input_features, _LSTM_HIDDEN)},
            "rnn_to_controls_params": {
                "rnn_to_controls": common.linear_spec(_LSTM_HIDDEN, 4, zero_weights=True)
            },
        }
        return common.draw(key, spec)

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _NNAdamOptimizer


#: NNAdam whose LSTM also reads the fraction of training (``tau_features=True``).
NNAdamTau = lopt_base.register_learned_optimizer("NNAdam", NNAdam, tau="NNAdam_tau")
