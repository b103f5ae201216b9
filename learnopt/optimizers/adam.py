"""Adam and AdamW, and the bias-corrected moment update they share.

:func:`adam_direction` is one step of Adam's moments and the direction
``m_hat / (sqrt(v_hat + eps_root) + eps)`` (optax's ``scale_by_adam``);
:func:`adam_direction_from_decays` is the same with ``1 - beta`` given directly, in a
form that stays exact when ``beta`` is within float precision of 1 (how
``LearnableAdam`` calls Adam). :class:`Adam` steps along the direction;
:class:`AdamW` adds decoupled weight decay. Both keep their moments in float32
(float64 for float64 params) and cast the params back to their dtype.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate
from learnopt.optimizers.common import (
    OptimizerState,
    Params,
    PyTree,
    accumulator,
    hp,
    is_zero,
    next_state,
    safe_sqrt,
)
from learnopt.optimizers.interface import OPTIMIZERS, Optimizer
from learnopt.tree_utils import tree_map_multi

__all__ = ["Adam", "AdamW", "AdamState", "adam_direction", "adam_direction_from_decays"]


@flax.struct.dataclass
class AdamState(OptimizerState):
    """State of :class:`Adam` and :class:`AdamW`.

    The fields of :class:`~learnopt.optimizers.common.OptimizerState`, then:

    Attributes:
      mu: the first moments, shaped like the params, in their arithmetic dtype
        (AdamW: in ``mu_dtype`` when it is given).
      nu: the second moments, likewise.
    """

    mu: PyTree
    nu: PyTree


def adam_direction(m, v, g, t, b1, b2, eps, eps_root):
    """One Adam moment update in the arithmetic dtype of ``m``; returns (direction, m, v).

    ``direction = m_hat / (sqrt(v_hat + eps_root) + eps)`` with the bias-corrected
    moments ``m_hat = m / (1 - b1^t)``, ``v_hat = v / (1 - b2^t)`` (optax's
    ``scale_by_adam``).

    Args:
      m: the first moment (its dtype is the arithmetic dtype).
      v: the second moment.
      g: the gradient (cast to ``m``'s dtype).
      t: the step number, counting from 1 (an integer array).
      b1: decay of the first moment (a float or traced scalar).
      b2: decay of the second moment.
      eps: added to the root of ``v_hat``.
      eps_root: added to ``v_hat`` inside the root (left out when a Python zero).

    Returns:
      ``(direction, new_m, new_v)``.
    """
    cd = m.dtype
    b1, b2 = hp(b1, cd), hp(b2, cd)
    g = g.astype(cd)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * jnp.square(g)
    m_hat = m / (1 - b1 ** t.astype(cd))
    v_hat = v / (1 - b2 ** t.astype(cd))
    return _direction(m_hat, v_hat, eps, eps_root), m, v


def _direction(m_hat: jax.Array, v_hat: jax.Array, eps: Any, eps_root: Any) -> jax.Array:
    """``m_hat / (sqrt(v_hat + eps_root) + eps)`` in ``m_hat``'s dtype."""
    cd = m_hat.dtype
    if not is_zero(eps_root):
        v_hat = v_hat + hp(eps_root, cd)
    return m_hat / (safe_sqrt(v_hat) + hp(eps, cd))


def _decay_complement(one_minus_beta: Any, dtype: np.dtype) -> jax.Array:
    """``1 - beta`` for arithmetic in ``dtype``, as a float32 (float64) scalar.

    Kept in ``[max(16 sqrt(tiny32), tiny), 1 - ulp]`` with ``where`` (a zero gradient
    outside, never ``0 * inf``): ``beta`` never rounds to 1 (a bias correction of 0) nor
    to 0, and ``1 / (1 - beta^t)`` and its derivative stay finite. Below the floor
    (``beta > 1 - 2e-18``) every result is the same to float32 precision.
    """
    sd = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    omb = jnp.asarray(one_minus_beta).astype(sd)
    lo = max(16 * np.sqrt(np.finfo(sd).tiny), float(jnp.finfo(dtype).tiny))
    hi = 1 - float(jnp.finfo(dtype).epsneg)
    omb = jnp.where(omb < lo, jnp.asarray(lo, sd), omb)
    return jnp.where(omb > hi, jnp.asarray(hi, sd), omb)


def adam_direction_from_decays(m, v, g, t, omb1, omb2, eps, eps_root):
    """:func:`adam_direction` with ``1 - beta`` given directly (numerically safe form).

    ``m <- m + (1-b1)(g - m)``, ``v <- v + (1-b2)(g^2 - v)`` and the bias corrections
    ``1 - b^t = -expm1(t * log1p(-(1-b)))`` (in float32 or float64 scalars): exact for
    ``1 - b`` far below float precision, where ``b`` itself would round to 1 and
    ``1 - b^t`` to 0.

    Args:
      m, v, g, t: the moments, the gradient and the step number, as for
        :func:`adam_direction`.
      omb1: ``1 - beta1`` (kept in a safe range, see ``_decay_complement``).
      omb2: ``1 - beta2``.
      eps, eps_root: the epsilons outside and inside the root, as for
        :func:`adam_direction`.

    Returns:
      ``(direction, new_m, new_v)``.
    """
    cd = m.dtype
    omb1, omb2 = _decay_complement(omb1, cd), _decay_complement(omb2, cd)
    g = g.astype(cd)
    m = m + omb1.astype(cd) * (g - m)
    v = v + omb2.astype(cd) * (jnp.square(g) - v)

    def inverse_correction(omb):
        return (1 / -jnp.expm1(t.astype(omb.dtype) * jnp.log1p(-omb))).astype(cd)

    m_hat, v_hat = m * inverse_correction(omb1), v * inverse_correction(omb2)
    return _direction(m_hat, v_hat, eps, eps_root), m, v


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, arXiv:1412.6980), as learned_optimization's ``Adam``.

    ``m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
    p <- p - lr * m_hat / (sqrt(v_hat + epsilon_root) + epsilon)`` with bias-corrected
    ``m_hat``, ``v_hat``; this is ``optax.adam(lr, b1, b2, eps, eps_root)``.
    Hyperparameters may be traced arrays, which is how learned optimizers such as
    ``LearnableAdam`` use it.

    Args:
      learning_rate: step size (the library's default, 1e-2).
      beta1: decay of the first moment.
      beta2: decay of the second moment.
      epsilon: added to the root of the second moment.
      epsilon_root: added to the second moment inside the root (the library's default,
        1e-8, keeps the root's derivative finite where gradients are zero).
      one_minus_beta1, one_minus_beta2: ``1 - beta`` given directly instead of the betas
        (learnopt's addition, e.g. ``exp(theta)`` in ``LearnableAdam``): the moments then
        update as ``m + (1-b)(g - m)`` and the bias corrections are
        ``-expm1(t log1p(-(1-b)))``, so a beta within float precision of 1 never rounds
        to 1; ``1 - b`` is kept in ``[tiny, 1)`` of the arithmetic dtype.
    """

    def __init__(
        self,
        learning_rate: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        epsilon_root: float = 1e-8,
        *,
        one_minus_beta1: Any = None,
        one_minus_beta2: Any = None,
    ):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("beta1", beta1)
        _validate.unit_interval("beta2", beta2)
        _validate.non_negative_float("epsilon", epsilon)
        _validate.non_negative_float("epsilon_root", epsilon_root)
        for name, omb in (
            ("one_minus_beta1", one_minus_beta1),
            ("one_minus_beta2", one_minus_beta2),
        ):
            if omb is not None:
                _validate.real(name, omb, low=0.0, high=1.0, low_open=True)
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.epsilon_root = epsilon_root
        if (one_minus_beta1 is None) != (one_minus_beta2 is None):
            raise ValueError("one_minus_beta1 and one_minus_beta2 go together: pass both or none")
        self.one_minus_beta1 = one_minus_beta1
        self.one_minus_beta2 = one_minus_beta2

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Adam's state: the params, zero moments ``mu``/``nu`` (arithmetic dtype).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        return AdamState.initial(
            params, model_state, mu=accumulator(params), nu=accumulator(params)
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One Adam step (see the class docstring).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        t = opt_state.iteration + 1

        def step(p, m, v, g):
            cd = m.dtype
            if self.one_minus_beta1 is None:
                d, m, v = adam_direction(
                    m, v, g, t, self.beta1, self.beta2, self.epsilon, self.epsilon_root
                )
            else:
                omb1, omb2 = self.one_minus_beta1, self.one_minus_beta2
                d, m, v = adam_direction_from_decays(
                    m, v, g, t, omb1, omb2, self.epsilon, self.epsilon_root
                )
            return (p.astype(cd) - hp(self.learning_rate, cd) * d).astype(p.dtype), m, v

        params, mu, nu = tree_map_multi(step, opt_state.params, opt_state.mu, opt_state.nu, grads)
        return next_state(opt_state, params, model_state, mu=mu, nu=nu)

    @property
    def name(self) -> str:
        """The name with the hyperparameters, e.g. ``Adam_lr0.01_b10.9_b20.999_...``."""
        return (
            f"Adam_lr{self.learning_rate}_b1{self.beta1}_b2{self.beta2}"
            f"_eps{self.epsilon}_epsroot{self.epsilon_root}"
        )

    def __repr__(self) -> str:
        return (
            f"Adam(learning_rate={self.learning_rate}, beta1={self.beta1}, "
            f"beta2={self.beta2}, epsilon={self.epsilon}, epsilon_root={self.epsilon_root})"
        )


def _full_mask(mask: Any, params: Params) -> PyTree:
    """``mask`` (a pytree prefix of params, or a callable of params) as one bool per leaf."""
    if callable(mask):
        mask = mask(params)
    return jax.tree_util.tree_map(
        lambda m, sub: jax.tree_util.tree_map(lambda _: bool(m), sub), mask, params
    )


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019, arXiv:1711.05101).

    ``p <- p - lr * (m_hat / (sqrt(v_hat + eps_root) + eps) + weight_decay * p)``;
    this is ``optax.adamw`` and learned_optimization's ``optax_opts.AdamW`` (same
    arguments and defaults).

    Args:
      learning_rate: step size (required, as in the library).
      b1: decay of the first moment.
      b2: decay of the second moment.
      eps: added to the root of the second moment.
      eps_root: added to the second moment inside the root.
      mu_dtype: dtype the first moment is stored in (default: the arithmetic dtype).
      weight_decay: decoupled weight-decay rate.
      mask: which params are decayed: a pytree of bools with the params' structure
        (or a prefix of it), or a callable ``params -> such a pytree``; None decays all.
    """

    def __init__(
        self,
        learning_rate: float,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        eps_root: float = 0.0,
        mu_dtype: Any = None,
        weight_decay: float = 1e-4,
        mask: Any = None,
    ):
        _validate.positive_float("learning_rate", learning_rate)
        _validate.unit_interval("b1", b1)
        _validate.unit_interval("b2", b2)
        _validate.non_negative_float("eps", eps)
        _validate.non_negative_float("eps_root", eps_root)
        _validate.non_negative_float("weight_decay", weight_decay)
        self.learning_rate = learning_rate
        self.b1 = b1
        self.b2 = b2
        self.eps = eps
        self.eps_root = eps_root
        self.mu_dtype = None if mu_dtype is None else jnp.dtype(mu_dtype)
        self.weight_decay = weight_decay
        self.mask = mask

    def init(self, params, model_state=None, num_steps=None, key=None):
        """AdamW's state: the params, zero moments (``mu`` in ``mu_dtype`` if given).

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        mu = accumulator(params, self.mu_dtype)
        return AdamState.initial(params, model_state, mu=mu, nu=accumulator(params))

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One AdamW step: Adam's direction plus decoupled weight decay.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        t = opt_state.iteration + 1
        params = opt_state.params
        decay = (
            _full_mask(self.mask, params)
            if self.mask is not None
            else jax.tree_util.tree_map(lambda _: True, params)
        )

        def step(p, m, v, g, decayed):
            cd = v.dtype
            d, m_new, v = adam_direction(
                m.astype(cd), v, g, t, self.b1, self.b2, self.eps, self.eps_root
            )
            pc = p.astype(cd)
            if decayed and not is_zero(self.weight_decay):
                d = d + hp(self.weight_decay, cd) * pc
            p = (pc - hp(self.learning_rate, cd) * d).astype(p.dtype)
            return p, m_new.astype(m.dtype), v

        params, mu, nu = tree_map_multi(step, params, opt_state.mu, opt_state.nu, grads, decay)
        return next_state(opt_state, params, model_state, mu=mu, nu=nu)

    def __repr__(self) -> str:
        return (
            f"AdamW(learning_rate={self.learning_rate}, b1={self.b1}, b2={self.b2}, "
            f"eps={self.eps}, eps_root={self.eps_root}, weight_decay={self.weight_decay})"
        )


OPTIMIZERS.register(Adam)
OPTIMIZERS.register(functools.partial(AdamW, learning_rate=1e-2), name="AdamW")
