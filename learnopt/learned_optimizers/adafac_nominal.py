r"""MLPNomLOpt: the Adafactor-feature MLP optimizer plus a "nominal" hand-designed term.

learned_optimization's ``adafac_nominal.MLPNomLOpt`` (same constructor, maths and
``theta`` layout): the features of :mod:`~learnopt.learned_optimizers.adafac_mlp_lopt`
(with ``m / sqrt(v + 1e-6)`` in the non-factored group) feed an MLP with four outputs
``(d, a, a_nom, a_reg)`` and the update combines a learned ("black-box") step, a
nominal step along a hand-designed direction ``g_est`` and weight decay:

    step     = step_mult * d * exp(exp_mult[0] * a)        [* rsqrt(rms_0 + 1e-6)]
    nom_step = nominal_stepsize * exp(exp_mult[1] * a_nom) * g_est
    p       <- (1 - weight_decay * exp(exp_mult[2] * a_reg)) * p - step - nom_step

.. math::

   p \leftarrow \big(1 - \lambda_{\mathrm{wd}}\, e^{\lambda_{e,2}\, a_{\mathrm{reg}}}\big)\, p
   - \lambda_s\, d\, e^{\lambda_{e,0}\, a}
   - \eta_{\mathrm{nom}}\, e^{\lambda_{e,1}\, a_{\mathrm{nom}}}\, g_{\mathrm{est}}

   g_{\mathrm{est}}^{\text{AdamAggMo}} = \frac{1}{K} \sum_{k=1}^{K} \frac{m_k}{\sqrt{v + 10^{-6}}}

with ``lambda_s = step_mult``, ``lambda_(e,j) = exp_mult[j]``,
``lambda_wd = weight_decay``, ``eta_nom = nominal_stepsize`` and ``m_1 .. m_K`` the momenta.

``a_nom`` is 1 and ``a_reg`` is 0 unless ``nominal_controller`` /
``regularization_controller`` let the MLP set them. ``g_est`` is the gradient ("SGD"),
the slowest momentum ("SGDM"), the mean momentum ("AggMo"), the slowest momentum over
``sqrt(rms + 1e-6)`` ("Adam") or the mean of those ("AdamAggMo", the default): a
learned optimizer that starts as a hand-designed one when ``nominal_stepsize > 0``.
This is the "nominal term" design of Harrison, Metz & Sohl-Dickstein, "A closer look at
learned optimization: stability, robustness, and inductive biases" (2022,
arXiv:2209.11208); with the defaults (``nominal_stepsize = weight_decay = 0``) it is
AdafacMLPLOpt with four outputs.

``theta`` as AdafacMLPLOpt's, with a last layer of 4 outputs. ``tau_features=True``
(learnopt option, off by default; registered as ``MLPNomLOpt_tau``) adds the
fraction-of-training inputs as in AdafacMLPLOpt.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import adafac_mlp_lopt as adafac
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common

__all__ = [
    "MLPNomLOpt",
    "NOMINAL_GRAD_ESTIMATORS",
    "MLPNomLOptTau",
]

NOMINAL_GRAD_ESTIMATORS = ("SGD", "SGDM", "AggMo", "Adam", "AdamAggMo")


def _mean_over_decays(x: list[jax.Array]) -> jax.Array:
    """The mean of a feature group's per-decay columns, written as a sum: elementwise, so
    XLA keeps the whole update (the per-element MLP included) in one fused loop, where a
    reduction would split it into several."""
    total = x[0]
    for k in range(1, len(x)):
        total = total + x[k]
    return total / len(x)


class _NomOptimizer(common.ThetaOptimizer):
    """The optimizer :meth:`MLPNomLOpt.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        return adafac.adafac_init(self.lopt, params, model_state, num_steps)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        lopt = self.lopt

        def tensor_step(p, groups, time, stat_groups):
            # Each group is a list of per-decay columns (accumulators.py's layout).
            g, m, rms = groups[0][0], groups[2], groups[3]
            adam_feats = groups[4]
            out = adafac.mlp_forward(
                self.theta["nn"], groups, time, p.shape, lopt.mlp_form, stat_groups
            )
            direction, magnitude = out[0], out[1]
            ones, zeros = jnp.ones_like(direction), jnp.zeros_like(direction)
            nom_mag = out[2] if lopt.nominal_controller else ones
            reg_mag = out[3] if lopt.regularization_controller else zeros
            if lopt.aggregate_magnitude:
                magnitude = jnp.mean(magnitude)
            if lopt.aggregate_nom_magnitude:
                nom_mag = jnp.mean(nom_mag)
            if lopt.aggregate_reg_magnitude:
                reg_mag = jnp.mean(reg_mag)
            e0, e1, e2 = lopt.exp_mult
            step = direction * jnp.exp(magnitude * e0) * lopt.step_mult
            if lopt.normalize_blackbox:
                step = step * jax.lax.rsqrt(rms[0] + jnp.asarray(1e-6, rms[0].dtype))
            if lopt.selfnormalize_blackbox:
                step = step * jnp.mean(g)
            shape = p.shape or (1,)
            new_p = p.reshape(shape)
            # Off (the defaults: no weight decay, no nominal step, no controllers), the
            # decay factor is exactly 1 and the nominal step exactly 0 for finite state:
            # both are skipped, so the estimate g_est is not computed per element.
            if lopt.weight_decay != 0 or lopt.regularization_controller:
                reg = 1.0 - lopt.weight_decay * jnp.exp(reg_mag * e2)
                new_p = jnp.broadcast_to(reg, shape) * new_p
            new_p = new_p - jnp.broadcast_to(step, shape)
            if lopt.nominal_stepsize != 0 or lopt.nominal_controller:
                estimator = lopt.nominal_grad_estimator
                if estimator == "SGD":
                    g_est = g
                elif estimator == "SGDM":
                    g_est = m[-1]
                elif estimator == "AggMo":
                    g_est = _mean_over_decays(m)
                elif estimator == "Adam":
                    g_est = adam_feats[-1]
                else:
                    g_est = _mean_over_decays(adam_feats)
                nom_step = lopt.nominal_stepsize * jnp.exp(nom_mag * e1) * g_est
                new_p = new_p - jnp.broadcast_to(nom_step, shape)
            return new_p.reshape(p.shape)

        return adafac.adafac_update(opt_state, grads, model_state, self.theta, lopt, tensor_step)


class MLPNomLOpt(adafac.AdafacMLPLOpt):
    """Adafactor-feature MLP with a nominal step (Harrison et al., 2022, arXiv:2209.11208).

    learned_optimization's ``adafac_nominal.MLPNomLOpt``; see the module docstring.

    Args:
      exp_mult: three scales inside the exponentials of the black-box step, the
        nominal step and the weight decay.
      step_mult: scale of the black-box step.
      hidden_size: width of the MLP's hidden layers.
      hidden_layers: number of hidden layers.
      initial_momentum_decays: decays of the momentum accumulators at ``theta = 0``.
      initial_rms_decays: decays of the second-moment accumulators.
      initial_adafactor_decays: decays of the factored accumulators.
      nominal_stepsize: learning rate of the nominal step (0 turns it off).
      weight_decay: weight decay (0 turns it off).
      nominal_controller: let the MLP's third output scale the nominal step.
      regularization_controller: let the fourth output scale the weight decay.
      nominal_grad_estimator: one of :data:`NOMINAL_GRAD_ESTIMATORS`.
      aggregate_magnitude, aggregate_nom_magnitude, aggregate_reg_magnitude: average
        that output over the tensor (one value per tensor).
      normalize_blackbox: divide the black-box step by ``sqrt(rms + 1e-6)``.
      selfnormalize_blackbox: multiply the black-box step by the tensor's mean gradient.
      concat_weights: the library's matmul code path (True) or scalar-math path (False);
        both compute the same function here.
      make_separate_weights: the library's one-scalar-per-weight theta layout; not
        supported (raises ValueError).
      split_weights: a variant of the scalar-math path; same function.
      tau_features: learnopt option: also feed the fraction of training done (see
        :mod:`learnopt.learned_optimizers.blocks.progress`).
      default_num_steps: with ``tau_features``, the run length assumed when
        ``opt.init`` gets no ``num_steps`` (None: ``num_steps`` is required).
    """

    mom_eps = 1e-6

    def __init__(
        self,
        exp_mult: Sequence[float] = (0.001, 0.001, 0.001),
        step_mult: float = 0.001,
        hidden_size: int = 4,
        hidden_layers: int = 2,
        initial_momentum_decays: Sequence[float] = (0.9, 0.99, 0.999),
        initial_rms_decays: Sequence[float] = (0.999,),
        initial_adafactor_decays: Sequence[float] = (0.9, 0.99, 0.999),
        nominal_stepsize: float = 0.0,
        weight_decay: float = 0.0,
        concat_weights: bool = True,
        make_separate_weights: bool = False,
        split_weights: bool = False,
        nominal_controller: bool = False,
        regularization_controller: bool = False,
        nominal_grad_estimator: str = "AdamAggMo",
        aggregate_magnitude: bool = False,
        aggregate_nom_magnitude: bool = False,
        aggregate_reg_magnitude: bool = False,
        normalize_blackbox: bool = False,
        selfnormalize_blackbox: bool = False,
        tau_features: bool = False,
        default_num_steps: int | None = None,
    ):
        if len(tuple(exp_mult)) != 3:
            raise ValueError(f"exp_mult must be a sequence of 3 floats, got {exp_mult!r}")
        if nominal_grad_estimator not in NOMINAL_GRAD_ESTIMATORS:
            raise ValueError(
                f"nominal_grad_estimator must be one of {NOMINAL_GRAD_ESTIMATORS}, got "
                f"{nominal_grad_estimator!r}"
            )
        super().__init__(
            step_mult=step_mult,
            hidden_size=hidden_size,
            hidden_layers=hidden_layers,
            initial_momentum_decays=initial_momentum_decays,
            initial_rms_decays=initial_rms_decays,
            initial_adafactor_decays=initial_adafactor_decays,
            concat_weights=concat_weights,
            make_separate_weights=make_separate_weights,
            split_weights=split_weights,
            tau_features=tau_features,
            default_num_steps=default_num_steps,
        )
        lopt_base.keep_arguments(self, locals())

    def init(self, key: jax.Array) -> dict:
        """A random theta: AdafacMLPLOpt's layout with 4 MLP outputs.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        return adafac.init_adafac_theta(self, key, num_outputs=4)

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _NomOptimizer


#: MLPNomLOpt with the fraction-of-training inputs on (``tau_features=True``).
MLPNomLOptTau = lopt_base.register_learned_optimizer("MLPNomLOpt", MLPNomLOpt, tau="MLPNomLOpt_tau")
