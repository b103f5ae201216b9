r"""Celo2: a compute-efficient learned update rule with normalized inputs and outputs.

Moudgil, Knyazev & Belilovsky, "Celo2: Towards learned optimization free lunch"
(2026, arXiv:2602.19142), the successor of "Celo: Training versatile learned optimizers
on a compute diet" (Moudgil, Knyazev, Lajoie & Belilovsky, 2025, arXiv:2501.12670).
Not in learned_optimization; written for learnopt from the paper and the authors'
public release (github.com/amoudgl/celo at 66d9761, ``celo/optimizers/celo2.py`` and
``celo2_optax.py``; facts only: features, normalizations, routing, defaults, theta
names).

Where VeLO spends most of its compute on a per-tensor LSTM that generates the MLP,
Celo2 keeps only a tiny per-parameter MLP (ReLU, 2 x 8) and makes it scale-free. Its
tensors take one of two rules.

**The learned rule** (matrices and every other tensor not routed to Adam):

* features per element (VeLO's per-parameter groups, without time or loss features):
  ``g, clip(g, +-0.1), p, m, rms, m / sqrt(rms + 1e-8), 1 / sqrt(rms + 1e-8), fac_g,
  g / sqrt(rms + 1e-8)`` and, for tensors of rank >= 2, the factored row/column second
  moments, their ``rsqrt(. + 1e-8)`` and the factored-preconditioned momentum; each
  feature column is divided by ``sqrt(mean(x^2) + 1e-9)``, the mean over the tensor's
  last two axes (each trailing 2-D slice of a conv kernel on its own);
* the MLP's direction output ``d`` (times ``exp(exp_mult * a)``, ``exp_mult = 0`` by
  default) is, for tensors of rank >= 2, orthogonalized by Newton-Schulz (as in Muon)
  on each trailing 2-D slice (a ``[kh, kw, cin, cout]`` kernel: each ``[cin, cout]``),
  then normalized the same way as the inputs, so every slice moves by an RMS of
  ``step_mult`` per step whatever the gradient scale:

      p <- p - step_mult * normalize(NS(d)) - step_mult * weight_decay * p

In symbols, with ``lambda_s = step_mult``, ``lambda_e = exp_mult``,
``lambda_wd = weight_decay`` and ``NS`` the identity for tensors of rank < 2:

.. math::

   p \leftarrow p - \lambda_s\, \operatorname{nrm}\!\big(\mathrm{NS}(d\, e^{\lambda_e a})\big)
   - \lambda_s\, \lambda_{\mathrm{wd}}\, p,
   \qquad \operatorname{nrm}(x) = \frac{x}{\sqrt{\operatorname{mean}(x^2) + 10^{-9}}}

**Adam** (tensors of rank <= 1 and embeddings by default): ``m <- 0.9 m + 0.1 g``,
``v <- 0.95 v + 0.05 g^2`` (unclipped gradients, no bias correction, as in the
authors' meta-training wrapper) and

      p <- p - 20 step_mult * m / sqrt(v + 1e-8) - 20 step_mult * weight_decay * p.

.. math::

   m \leftarrow 0.9 m + 0.1 g, \quad v \leftarrow 0.95 v + 0.05 g^2, \quad
   p \leftarrow p - 20 \lambda_s \frac{m}{\sqrt{v + 10^{-8}}}
   - 20 \lambda_s \lambda_{\mathrm{wd}}\, p

Accumulators of the learned rule: momenta (0.9, 0.99, 0.999), second moment (0.95),
factored second moments (0.9, 0.99, 0.999); its gradients are clipped to [-1000, 1000].
The update ignores the loss and the step count, so it is cheap (no LSTM, no per-tensor
reductions beyond the normalizations) and drops into optax chains with a learning-rate
schedule: ``optax.chain(lopt.as_optax(theta, weight_decay=wd), optax.scale_by_schedule(...))``
(decoupled decay; ``add_decayed_weights(wd)`` after the signed step would grow weights).

``Celo2(orthogonalize=False)`` is the paper's "Celo2-base": the learned rule on every
tensor, without Newton-Schulz or Adam.

**PyLO's deployment** (``Celo2_naive`` of github.com/Belilovsky-Lab/pylo at faf6fcb, the
shipped entry ``learnopt.pretrained.load("Celo2")``) differs from the release's wrapper
in four ways, each set by a constructor option here (the defaults keep the release's):
its Adam is AdamW (bias-corrected, epsilon outside the square root:
``adam_bias_correction=True, adam_eps_inside_sqrt=False``); it runs at the learned
rule's own learning rate (``mult_1d=1``); it also sends the first and the last tensor
of rank >= 2 (the input and output layers) to Adam (``adam_first_last=True``); and it
decays the parameters after the learned step, ``p <- (p - lr * step) * (1 - lr *
weight_decay)`` (``weight_decay_after_step=True``).

``theta = {"ff_mod_stack": {"~": {"w0__0", ..., "w0__13", "b0", "w1", "b1", "w2",
"b2"}}}``: one input matrix per feature group (``w0__i: [width_i, 8]``), hidden layers
and 3 outputs (direction, magnitude, unused), the names of the authors' release (the
Adam branch has no meta-parameters). The paper meta-trains it with PES on small
image-MLP tasks; at a random ``theta`` the normalized step is a random direction of
RMS ``step_mult``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.canonical import leaf_compute_dtype
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import common
from learnopt.learned_optimizers.blocks import accumulators, element_features, per_element
from learnopt.optimizers.common import safe_sqrt
from learnopt.tree_utils import tree_map_multi, tree_path_str

PyTree = Any

__all__ = ["Celo2", "Celo2State", "newton_schulz"]

_NS_COEFFS = (3.4445, -4.7750, 2.0315)


@flax.struct.dataclass
class Celo2State:
    """State of the Celo2 optimizer.

    The learned rule's accumulators are trees like the params with ``None`` at the
    tensors Adam takes, Adam's the other way round.

    Attributes:
      params, model_state, iteration: as in every learnopt state.
      mom_rolling: the momentum accumulators, one array per decay (see
        :mod:`~learnopt.learned_optimizers.blocks.accumulators`).
      rms_rolling: the second-moment accumulators, likewise.
      fac_rolling: the Adafactor-style factored second moments.
      adam_mom: Adam's first moments.
      adam_rms: Adam's second moments.
    """

    params: PyTree
    model_state: PyTree
    iteration: jax.Array
    mom_rolling: accumulators.MomAccumulator
    rms_rolling: accumulators.RMSAccumulator
    fac_rolling: accumulators.FactoredAccum
    adam_mom: PyTree = None
    adam_rms: PyTree = None


def newton_schulz(
    x: jax.Array,
    coeffs: Sequence[float] = _NS_COEFFS,
    iters: int = 5,
    eps: float = 1e-8,
) -> jax.Array:
    """Approximately orthogonalizes each trailing 2-D slice of ``x`` (Muon's iteration).

    On each ``[..., r, c]`` slice (the wider orientation: transposed if ``r > c``):
    ``X <- X / (||X||_F + eps)``, then ``iters`` times ``X <- a X + (b A + c A^2) X``
    with ``A = X X^T``. A conv kernel ``[kh, kw, cin, cout]`` is ``kh * kw``
    independent ``[cin, cout]`` matrices (as in the Celo2 release). The Frobenius norm
    has a zero (not NaN) derivative at 0.

    Args:
      x: a tensor of rank >= 2.
      coeffs: ``(a, b, c)`` of the quintic iteration (Muon's by default).
      iters: the number of iterations.
      eps: added to each slice's Frobenius norm.

    Returns:
      The approximately orthogonal tensor, shape ``x.shape``.

    Raises:
      ValueError: ``x`` has rank < 2.
    """
    if x.ndim < 2:
        raise ValueError(f"newton_schulz needs x of rank >= 2, got shape {x.shape}")
    a, b, c = coeffs
    transpose = x.shape[-2] > x.shape[-1]
    if transpose:
        x = jnp.swapaxes(x, -2, -1)
    norm = safe_sqrt(jnp.sum(jnp.square(x), axis=(-2, -1), keepdims=True))
    x = x / (norm + jnp.asarray(eps, x.dtype))
    for _ in range(iters):
        gram = x @ jnp.swapaxes(x, -2, -1)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return jnp.swapaxes(x, -2, -1) if transpose else x


def _split(tree: PyTree, mask: Sequence[bool], treedef) -> tuple[PyTree, PyTree]:
    """``(learned, adam)``: ``tree`` with ``None`` at the Adam / the learned leaves."""
    leaves = treedef.flatten_up_to(tree)
    learned = treedef.unflatten([None if a else x for x, a in zip(leaves, mask, strict=True)])
    adam = treedef.unflatten([x if a else None for x, a in zip(leaves, mask, strict=True)])
    return learned, adam


def _merge(learned: PyTree, adam: PyTree, mask: Sequence[bool], treedef) -> PyTree:
    """Inverse of :func:`_split`."""
    from_learned = iter(jax.tree_util.tree_leaves(learned))
    from_adam = iter(jax.tree_util.tree_leaves(adam))
    return treedef.unflatten([next(from_adam) if a else next(from_learned) for a in mask])


class _Celo2Optimizer(common.ThetaOptimizer):
    """The optimizer :meth:`Celo2.opt_fn` returns."""

    def init(self, params, model_state=None, num_steps=None, key=None):
        """Zero accumulators.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.
        """
        lopt = self.lopt
        treedef = jax.tree_util.tree_structure(params)
        learned, adam = _split(params, lopt.adam_mask(params), treedef)
        mom, rms, fac = accumulators.init_accumulators(
            learned,
            len(lopt.initial_momentum_decays),
            len(lopt.initial_rms_decays),
            len(lopt.initial_adafactor_decays),
        )
        zeros = lambda p: jnp.zeros(np.shape(p), leaf_compute_dtype(p.dtype))  # noqa: E731
        return Celo2State(
            params=params,
            model_state=model_state,
            iteration=jnp.zeros((), jnp.int32),
            mom_rolling=mom,
            rms_rolling=rms,
            fac_rolling=fac,
            adam_mom=jax.tree_util.tree_map(zeros, adam),
            adam_rms=jax.tree_util.tree_map(zeros, adam),
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step (see the module docstring); the loss is not used.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        lopt, s = self.lopt, opt_state
        t = s.iteration + 1
        treedef = jax.tree_util.tree_structure(s.params)
        mask = lopt.adam_mask(s.params)
        p_learned, p_adam = _split(s.params, mask, treedef)
        g_learned, g_adam = _split(grads, mask, treedef)
        mom, rms, fac = s.mom_rolling, s.rms_rolling, s.fac_rolling
        if not all(mask):
            p_learned, mom, rms, fac = self._learned(p_learned, g_learned, s, t)
        adam_mom, adam_rms = s.adam_mom, s.adam_rms
        if any(mask):
            p_adam, adam_mom, adam_rms = self._adam(p_adam, g_adam, adam_mom, adam_rms, t)
        return common.next_state(
            s,
            _merge(p_learned, p_adam, mask, treedef),
            model_state,
            mom_rolling=mom,
            rms_rolling=rms,
            fac_rolling=fac,
            adam_mom=adam_mom,
            adam_rms=adam_rms,
        )

    def _learned(self, params, grads, s, t):
        """The learned rule on the tensors it takes (``None`` elsewhere)."""
        lopt = self.lopt
        decays = accumulators.constant_decays(
            lopt.initial_momentum_decays,
            lopt.initial_rms_decays,
            lopt.initial_adafactor_decays,
        )
        weights = self.theta["ff_mod_stack"]["~"]
        grads = accumulators.accumulator_grads(grads, s.mom_rolling, clip=1000.0)

        def step(p, g, m, v, fac_g, fac):
            cd = g.dtype  # the accumulators' dtype (grads are cast to it)
            mc, vc, feat_fac = m, v, fac
            if lopt.bias_correction:
                tc = t.astype(cd)

                def unbias(x, d):
                    # One array per decay (accumulators.py): one correction each.
                    d = d.astype(cd)
                    return [xk / (1 - d[k] ** tc) for k, xk in enumerate(x)]

                mc, vc = unbias(m, decays.mom), unbias(v, decays.rms)
                feat_fac = fac.replace(
                    v_row=unbias(fac.v_row, decays.fac), v_col=unbias(fac.v_col, decays.fac)
                )
            direction = lopt.direction(
                common.cast_tree(weights, cd), p.astype(cd), g, mc, vc, fac_g, feat_fac
            )
            pc = p.astype(cd)
            if lopt.weight_decay_after_step:
                stepped = pc - lopt.step_mult * direction
                return stepped - lopt.weight_decay * lopt.step_mult * stepped
            return pc - lopt.step_mult * direction - lopt.weight_decay * lopt.step_mult * pc

        return accumulators.update_tree(
            step, params, grads, s.mom_rolling, s.rms_rolling, s.fac_rolling, decays
        )

    def _adam(self, params, grads, mom, rms, t):
        """Adam at ``mult_1d * step_mult`` on the tensors it takes (``None`` elsewhere)."""
        lopt = self.lopt
        lr = lopt.mult_1d * lopt.step_mult
        b1, b2 = lopt.adam_b1, lopt.adam_b2

        def one(p, g, m, v):
            cd = m.dtype
            g = g.astype(cd)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * jnp.square(g)
            mc, vc = m, v
            if lopt.adam_bias_correction:
                tc = t.astype(cd)
                mc = m / (1 - jnp.asarray(b1, cd) ** tc)
                vc = v / (1 - jnp.asarray(b2, cd) ** tc)
            eps = jnp.asarray(lopt.adam_epsilon, cd)
            if lopt.adam_eps_inside_sqrt:  # as the release's meta-training wrapper
                step = mc * jax.lax.rsqrt(vc + eps)
            else:  # AdamW's (optax.adamw, PyLO's Celo2_naive)
                step = mc / (jnp.sqrt(vc) + eps)
            pc = p.astype(cd)
            new_p = pc - lr * step - lopt.weight_decay * lr * pc
            return new_p.astype(p.dtype), m, v

        return tree_map_multi(one, params, grads, mom, rms)


class Celo2(lopt_base.LearnedOptimizer):
    """Normalized per-parameter MLP update rule (Moudgil et al., 2026, arXiv:2602.19142).

    See the module docstring. The defaults are the paper's "Celo2" (the release's
    ``celo2`` configuration): the learned rule with Newton-Schulz on the matrices, Adam
    (0.9, 0.95) at 20x the step on vectors and embeddings. ``orthogonalize=False`` is
    "Celo2-base" (the learned rule on every tensor).

    Args:
      ff_hidden_size: hidden width of the MLP.
      ff_hidden_layers: hidden layers of the MLP.
      initial_momentum_decays, initial_rms_decays, initial_adafactor_decays: decays of
        the learned rule's accumulators.
      exp_mult: scale of the magnitude output inside the exponential (0: unused).
      step_mult: the learning rate (RMS of each tensor slice's learned step).
      rmsmult: extra multiplier of the normalized step.
      weight_decay: decoupled weight decay, times the tensor's learning rate.
      param_scale_mult: multiply steps by the tensor's parameter RMS (before output
        normalization, so it only matters with ``normalize_output=False``).
      precondition_output: divide the step by ``sqrt(rms + 1e-6)`` after normalization.
      normalize_input: RMS-normalize each feature column over the tensor's last two axes.
      normalize_output: RMS-normalize the step over the tensor's last two axes.
      norm_eps: added to the mean squares of both normalizations (the release's 1e-9;
        learnopt's Celo2 used 1e-5 before it matched the release).
      aggregate_mag: one magnitude per tensor (mean of the magnitude output).
      bias_correction: Adam-style bias correction of the learned rule's accumulators.
      mlp_activation: "relu" or "tanh".
      orthogonalize: Newton-Schulz-orthogonalize the learned steps of rank >= 2 tensors
        (each trailing 2-D slice).
      ns_coeffs, ns_iters, ns_eps: the Newton-Schulz iteration.
      regex_1d: which tensors Adam takes instead of the learned rule. None: with
        ``orthogonalize``, tensors of rank <= 1 and those whose path contains
        ``"embed"`` (the release README's rule), without it none (Celo2-base). A
        regular expression: the tensors whose ``"/"``-joined path
        (:func:`~learnopt.tree_utils.tree_path_str`) it matches (``re.search``; the
        meta-training wrapper's rule, e.g. ``r"/b$"`` for Haiku biases); ``""``: none.
      mult_1d: Adam's learning rate as a multiple of ``step_mult``.
      adam_b1, adam_b2, adam_epsilon: Adam's decays and its epsilon (inside the square
        root).
      adam_bias_correction: bias-correct Adam's moments (the meta-training wrapper does
        not; the README's deployment recipe uses ``optax.adamw``, which does).
      adam_eps_inside_sqrt: Adam's step is ``m / sqrt(v + adam_epsilon)`` (True, the
        meta-training wrapper's) or ``m / (sqrt(v) + adam_epsilon)`` (False: AdamW's, as
        ``optax.adamw`` and PyLO's ``Celo2_naive`` compute it).
      adam_first_last: Adam also takes the first and the last tensor of rank >= 2 in the
        params' leaf order (``jax.tree_util.tree_leaves``: dict keys sorted), as PyLO's
        ``Celo2_naive`` does with a model's input and output layers (in its parameter
        order). The leaf order is the network's only when the names sort that way
        (``Dense_10`` sorts before ``Dense_2``, ``blocks`` before ``embed``); otherwise
        name the layers with ``regex_1d``. Added to whichever rule ``regex_1d`` sets.
      weight_decay_after_step: the learned rule decays the parameters after its step,
        ``p <- (p - lr * step) * (1 - lr * weight_decay)`` (PyLO's ``Celo2_naive``),
        instead of ``p <- p - lr * step - lr * weight_decay * p`` (they differ by
        ``lr^2 * weight_decay * step``). Adam's decay is unaffected (the same in both).
    """

    #: How the per-element MLP is evaluated (:data:`per_element.FORMS`; the same function
    #: in every form). Not a constructor argument.
    mlp_form = "auto"

    def __init__(
        self,
        ff_hidden_size: int = 8,
        ff_hidden_layers: int = 2,
        initial_momentum_decays: Sequence[float] = (0.9, 0.99, 0.999),
        initial_rms_decays: Sequence[float] = (0.95,),
        initial_adafactor_decays: Sequence[float] = (0.9, 0.99, 0.999),
        exp_mult: float = 0.0,
        step_mult: float = 0.001,
        rmsmult: float = 1.0,
        weight_decay: float = 0.0,
        param_scale_mult: bool = False,
        precondition_output: bool = False,
        normalize_input: bool = True,
        normalize_output: bool = True,
        norm_eps: float = 1e-9,
        aggregate_mag: bool = False,
        bias_correction: bool = False,
        mlp_activation: str = "relu",
        orthogonalize: bool = True,
        ns_coeffs: Sequence[float] = _NS_COEFFS,
        ns_iters: int = 5,
        ns_eps: float = 1e-8,
        regex_1d: str | None = None,
        mult_1d: float = 20.0,
        adam_b1: float = 0.9,
        adam_b2: float = 0.95,
        adam_epsilon: float = 1e-8,
        adam_bias_correction: bool = False,
        adam_eps_inside_sqrt: bool = True,
        adam_first_last: bool = False,
        weight_decay_after_step: bool = False,
    ):
        """Checks and stores the settings (documented on the class).

        Long (over 80 lines) for its signature: one line per setting of the release's
        constructor, which it keeps.
        """
        if mlp_activation not in ("relu", "tanh"):
            raise ValueError(f"mlp_activation must be 'relu' or 'tanh', got {mlp_activation!r}")
        if int(ff_hidden_size) < 1 or int(ff_hidden_layers) < 0:
            raise ValueError(
                f"Celo2 needs ff_hidden_size >= 1 and ff_hidden_layers >= 0, got "
                f"{ff_hidden_size}, {ff_hidden_layers}"
            )
        if not norm_eps >= 0:
            raise ValueError(f"norm_eps must be >= 0, got {norm_eps!r}")
        if regex_1d is not None:
            try:
                re.compile(regex_1d)
            except (re.error, TypeError) as e:
                raise ValueError(f"regex_1d must be a regular expression or None: {e}") from None
        for name, b in (("adam_b1", adam_b1), ("adam_b2", adam_b2)):
            if not 0 <= b < 1:
                raise ValueError(f"{name} must be in [0, 1), got {b!r}")
        if not adam_epsilon > 0:
            raise ValueError(f"adam_epsilon must be > 0, got {adam_epsilon!r}")
        lopt_base.keep_arguments(self, locals())

    def adam_mask(self, params: PyTree) -> list[bool]:
        """Which tensors Adam takes (see ``regex_1d``), in the order of the params' leaves.

        Args:
          params: the parameters (arrays or shape-dtype structs).

        Returns:
          One bool per leaf of ``params`` (``jax.tree_util.tree_leaves`` order).
        """
        pairs = jax.tree_util.tree_flatten_with_path(params)[0]
        if self.regex_1d is None:
            if not self.orthogonalize:
                mask = [False] * len(pairs)
            else:
                mask = [
                    len(np.shape(x)) <= 1 or "embed" in tree_path_str(path, "/")
                    for path, x in pairs
                ]
        elif not self.regex_1d:
            mask = [False] * len(pairs)
        else:
            pattern = re.compile(self.regex_1d)
            mask = [bool(pattern.search(tree_path_str(path, "/"))) for path, _ in pairs]
        if self.adam_first_last:
            matrices = [i for i, (_, x) in enumerate(pairs) if len(np.shape(x)) >= 2]
            for i in matrices[:1] + matrices[-1:]:
                mask[i] = True
        return mask

    def _group_widths(self) -> list[int]:
        nm = len(self.initial_momentum_decays)
        nr = len(self.initial_rms_decays)
        nf = len(self.initial_adafactor_decays)
        b = lambda x, y: int(np.broadcast_shapes((x,), (y,))[0])  # noqa: E731
        return [1, 1, 1, nm, nr, b(nm, nr), nr, nf, nr, nf, nf, nf, nf, b(nm, nf)]

    def direction(self, weights, p, g, m, rms, fac_g, acc) -> jax.Array:
        """The normalized step of one tensor (before ``step_mult``).

        Args:
          weights: the MLP ``{"w0__0", ..., "b0", "w1", ...}`` in the compute dtype.
          p, g: the parameter and its (clipped) gradient, in the compute dtype.
          m, rms, fac_g: momenta, second moments, preconditioned gradient (one array per
            decay;
            bias-corrected if ``bias_correction``).
          acc: the tensor's factored second moments.

        Returns:
          The step direction, shape ``p.shape``.
        """
        original = p.shape
        shape = p.shape or (1,)
        p, g, m, rms, fac_g, acc = element_features.lift_scalar(p, g, m, rms, fac_g, acc)

        # rms_eps 1e-8: the authors' Celo2 release, rsqrt(rms + 1e-8) (learned_optimization's
        # adafac_mlp_lopt and hyper_v2 use 1e-6).
        def features(p, g, m, rms, fac_g, acc):
            f = element_features.element_features(p, g, m, rms, fac_g, rms_eps=1e-8)
            groups = [f.g, f.clipped_g, f.p, f.m, f.rms, f.m_rsqrt_rms, f.rsqrt_rms]
            groups += [f.fac_g, f.g_rsqrt_rms]
            # Celo2's release has no factored groups for tensors of rank < 2 (hence no
            # mom_eps).
            if accumulators.factored_dims(shape) is not None:
                groups += element_features.factored_features(acc, m, shape)
            return groups

        groups, stat_groups = per_element.twice(features, p, g, m, rms, fac_g, acc)
        axes = tuple(range(len(shape)))[-2:]
        # Each feature column normalized over the tensor's last two axes (eps norm_eps,
        # the release's 1e-9); the first layer's w0__i stacked in the groups' order.
        w0 = jnp.concatenate([weights[f"w0__{i}"] for i in range(len(groups))], axis=0)
        layers = [(w0, weights["b0"])]
        layers += [
            (weights[f"w{i}"], weights[f"b{i}"]) for i in range(1, self.ff_hidden_layers + 1)
        ]
        act = jax.nn.relu if self.mlp_activation == "relu" else jnp.tanh
        direction, magnitude = per_element.mlp(
            layers,
            groups,
            shape,
            stat_groups=stat_groups,
            norm_axes=axes if self.normalize_input else None,
            norm_eps=self.norm_eps,
            activation=act,
            form=self.mlp_form,
            feature_axis=0,
        )[:2]
        if self.aggregate_mag:
            magnitude = jnp.mean(magnitude)
        step = direction * jnp.exp(magnitude * self.exp_mult)
        if self.param_scale_mult:
            step = step * jnp.sqrt(jnp.mean(jnp.square(p)) + jnp.asarray(1e-9, p.dtype))
        if self.orthogonalize and len(shape) >= 2:
            step = newton_schulz(step, self.ns_coeffs, self.ns_iters, self.ns_eps)
        if self.normalize_output:
            step = common.second_moment_normalizer(step, axis=axes, eps=self.norm_eps)
        step = step * self.rmsmult
        if self.precondition_output:
            step = step * jax.lax.rsqrt(rms[-1] + jnp.asarray(1e-6, rms[-1].dtype))
        return step.reshape(original)

    def init(self, key: jax.Array) -> dict:
        """A random theta: truncated-normal weights (std ``1 / sqrt(fan_in)``), zero biases.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        widths = self._group_widths()
        fan_in = sum(widths)
        h = self.ff_hidden_size
        layer = {
            f"w0__{i}": common.Normal((w, h), 1 / np.sqrt(fan_in)) for i, w in enumerate(widths)
        }
        layer["b0"] = np.zeros((h,), np.float32)
        sizes = [h] * self.ff_hidden_layers + [3]
        for i in range(1, len(sizes)):
            layer[f"w{i}"] = common.Normal((sizes[i - 1], sizes[i]), 1 / np.sqrt(sizes[i - 1]))
            layer[f"b{i}"] = np.zeros((sizes[i],), np.float32)
        return common.draw(key, {"ff_mod_stack": {"~": layer}})

    #: What :meth:`opt_fn` builds from a checked theta.
    optimizer_class = _Celo2Optimizer


lopt_base.register_learned_optimizer("Celo2", Celo2)
