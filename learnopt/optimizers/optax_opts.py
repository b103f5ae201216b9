"""learned_optimization's optax-backed optimizers, by name, arguments and defaults.

Each class is an :class:`~learnopt.optimizers.optax_adapter.OptaxOptimizer` around the
optax transformation of the same name, so it inherits learnopt's guarantees: the
transformation runs in float32 for low-precision params, the state is settled at
``init`` (a jitted step compiles once), and eager calls run as cached programs.
See optax's documentation for each algorithm's maths.

``SGD``, ``SGDM``, ``Adam``, ``RMSProp`` and ``AdamW`` are learnopt's own strongly
typed implementations from :mod:`~learnopt.optimizers.sgd`,
:mod:`~learnopt.optimizers.adam` and :mod:`~learnopt.optimizers.rmsprop` (the same
objects as ``opt_base.Adam`` etc.), with the library's arguments, defaults and maths; their
states hold the accumulators directly (``mu``/``nu``, ``momentums``) instead of an
optax state.

``SM3`` works on scalar params: optax's SM3 needs at least one axis, so scalars get
a leading axis of size one inside the transformation, and the params in the state
keep their shapes (the library stores the reshaped params instead).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax

from learnopt.optimizers.adam import Adam, AdamW
from learnopt.optimizers.common import Params, PyTree
from learnopt.optimizers.interface import OPTIMIZERS
from learnopt.optimizers.learning_rate_schedules import PiecewiseLinear
from learnopt.optimizers.optax_adapter import OptaxOptimizer, OptaxState
from learnopt.optimizers.rmsprop import RMSProp
from learnopt.optimizers.sgd import SGD, SGDM

__all__ = [
    "OptaxOptimizer",
    "OptaxState",
    "OptaxWrapper",
    "SGD",
    "SGDM",
    "Adam",
    "AdamW",
    "RMSProp",
    "AdaBelief",
    "AdaGrad",
    "Adafactor",
    "Fromage",
    "Lamb",
    "Lars",
    "RAdam",
    "Yogi",
    "SM3",
    "PiecewiseLinearAdam",
    "piecewise_linear",
]


class OptaxWrapper(OptaxOptimizer):
    """An optax optimizer built from its constructor and keyword arguments.

    ``OptaxWrapper(optax.adamw, learning_rate=1e-3, weight_decay=0.1)`` is
    ``OptaxOptimizer(optax.adamw(learning_rate=1e-3, weight_decay=0.1))`` with a name
    that records the constructor and its arguments.

    Args:
      opt_fn: an optax constructor (``optax.adam``, ``optax.lion``, ...).
      **kwargs: its arguments.
    """

    def __init__(self, opt_fn: Callable[..., optax.GradientTransformation], **kwargs: Any):
        self.opt_fn = opt_fn
        self.kwargs = dict(kwargs)
        fn_name = getattr(opt_fn, "__name__", type(opt_fn).__name__)
        super().__init__(opt_fn(**kwargs), name=fn_name)

    @property
    def name(self) -> str:
        args = "".join(f"_{k}{v}" for k, v in self.kwargs.items())
        return f"OptaxWrapper_{self.tx_name}{args}"


class AdaBelief(OptaxOptimizer):
    """AdaBelief (Zhuang et al., 2020, arXiv:2010.07468): ``optax.adabelief``.

    Args:
      learning_rate: step size.
      b1: decay of the gradient average.
      b2: decay of the average of ``(g - m)^2``, the "belief".
      eps: added to the denominator's square root.
      eps_root: added inside the square root.
    """

    def __init__(
        self,
        learning_rate: float = 0.01,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-16,
        eps_root: float = 1e-16,
    ):
        super().__init__(
            optax.adabelief(learning_rate, b1=b1, b2=b2, eps=eps, eps_root=eps_root),
            name="adabelief",
        )


class AdaGrad(OptaxOptimizer):
    """AdaGrad (Duchi et al., 2011): ``optax.adagrad``.

    Args:
      learning_rate: step size.
      initial_accumulator_value: the starting value of the sum of squared gradients.
      eps: added to the denominator's square root.
    """

    def __init__(
        self, learning_rate: float, initial_accumulator_value: float = 0.1, eps: float = 1e-7
    ):
        super().__init__(
            optax.adagrad(
                learning_rate, initial_accumulator_value=initial_accumulator_value, eps=eps
            ),
            name="adagrad",
        )


class Adafactor(OptaxOptimizer):
    """Adafactor (Shazeer & Stern, 2018, arXiv:1804.04235): ``optax.adafactor``.

    The arguments are ``optax.adafactor``'s.

    Args:
      learning_rate: step size.
      min_dim_size_to_factor: only params whose two largest dimensions are at least
        this size get factored second moments.
      decay_rate: exponent of the second-moment decay schedule.
      decay_offset: step offset of that schedule.
      multiply_by_parameter_scale: scale the step by the params' root mean square.
      clipping_threshold: threshold of the update clipping (None: no clipping).
      momentum: first-moment decay (None: no first moment).
      dtype_momentum: dtype of the first moment.
      weight_decay_rate: decoupled weight decay (None: none).
      eps: added to the squared gradients.
      factored: whether second moments are factored at all.
      weight_decay_mask: which params get weight decay (a tree of bools or a
        callable), None for all.
    """

    def __init__(
        self,
        learning_rate: float,
        min_dim_size_to_factor: int = 128,
        decay_rate: float = 0.8,
        decay_offset: int = 0,
        multiply_by_parameter_scale: bool = True,
        clipping_threshold: float | None = 1.0,
        momentum: float | None = None,
        dtype_momentum: Any = jnp.float32,
        weight_decay_rate: float | None = None,
        eps: float = 1e-30,
        factored: bool = True,
        weight_decay_mask: Any = None,
    ):
        super().__init__(
            optax.adafactor(
                learning_rate=learning_rate,
                min_dim_size_to_factor=min_dim_size_to_factor,
                decay_rate=decay_rate,
                decay_offset=decay_offset,
                multiply_by_parameter_scale=multiply_by_parameter_scale,
                clipping_threshold=clipping_threshold,
                momentum=momentum,
                dtype_momentum=dtype_momentum,
                weight_decay_rate=weight_decay_rate,
                eps=eps,
                factored=factored,
                weight_decay_mask=weight_decay_mask,
            ),
            name="adafactor",
        )


class Fromage(OptaxOptimizer):
    """Fromage (Bernstein et al., 2020, arXiv:2002.03432): ``optax.fromage``.

    Args:
      learning_rate: step size (relative to each layer's norm).
      min_norm: the smallest norm used in the per-layer scaling (avoids dividing by 0).
    """

    def __init__(self, learning_rate: float, min_norm: float = 1e-6):
        super().__init__(optax.fromage(learning_rate, min_norm), name="fromage")


class Lamb(OptaxOptimizer):
    """LAMB (You et al., 2019, arXiv:1904.00962): ``optax.lamb``.

    Args:
      learning_rate: step size.
      b1: decay of the gradient average.
      b2: decay of the squared-gradient average.
      eps: added to the denominator's square root.
      eps_root: added inside the square root.
      weight_decay: decoupled weight decay, applied before the trust ratio.
      mask: which params get weight decay (a tree of bools or a callable), None for all.
    """

    def __init__(
        self,
        learning_rate: float,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-6,
        eps_root: float = 0.0,
        weight_decay: float = 0.0,
        mask: Any = None,
    ):
        super().__init__(
            optax.lamb(
                learning_rate,
                b1=b1,
                b2=b2,
                eps=eps,
                eps_root=eps_root,
                weight_decay=weight_decay,
                mask=mask,
            ),
            name="lamb",
        )


class Lars(OptaxOptimizer):
    """LARS (You et al., 2017, arXiv:1708.03888): ``optax.lars``.

    ``min_norm`` is accepted for the library's signature; like the library, it is not
    used (``optax.lars`` has no such argument).

    Args:
      learning_rate: step size.
      weight_decay: weight decay, added to the gradient before the trust ratio.
      weight_decay_mask: which params get weight decay (True: all).
      trust_coefficient: multiplier of the layer-wise trust ratio.
      eps: added to the trust ratio's denominator.
      trust_ratio_mask: which params get the trust ratio (True: all).
      momentum: momentum decay.
      nesterov: use Nesterov momentum.
      min_norm: unused (see above).
    """

    def __init__(
        self,
        learning_rate: float,
        weight_decay: float = 0.0,
        weight_decay_mask: Any = True,
        trust_coefficient: float = 0.001,
        eps: float = 0.0,
        trust_ratio_mask: Any = True,
        momentum: float = 0.9,
        nesterov: bool = False,
        min_norm: float = 1e-6,
    ):
        self.min_norm = min_norm
        super().__init__(
            optax.lars(
                learning_rate,
                weight_decay=weight_decay,
                weight_decay_mask=weight_decay_mask,
                trust_coefficient=trust_coefficient,
                eps=eps,
                trust_ratio_mask=trust_ratio_mask,
                momentum=momentum,
                nesterov=nesterov,
            ),
            name="lars",
        )


class RAdam(OptaxOptimizer):
    """Rectified Adam (Liu et al., 2020, arXiv:1908.03265): ``optax.radam``.

    Args:
      learning_rate: step size.
      b1: decay of the gradient average.
      b2: decay of the squared-gradient average.
      eps: added to the denominator's square root.
      eps_root: added inside the square root.
      threshold: the length of the approximated simple moving average at or below
        which the step is the bias-corrected momentum (no adaptive scaling).
    """

    def __init__(
        self,
        learning_rate: float,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        eps_root: float = 0.0,
        threshold: float = 5.0,
    ):
        super().__init__(
            optax.radam(
                learning_rate, b1=b1, b2=b2, eps=eps, eps_root=eps_root, threshold=threshold
            ),
            name="radam",
        )


class Yogi(OptaxOptimizer):
    """Yogi (Zaheer et al., 2018): ``optax.yogi``.

    Args:
      learning_rate: step size.
      b1: decay of the gradient average.
      b2: decay rate of the second-moment estimate (Yogi's additive update).
      eps: added to the denominator's square root.
    """

    def __init__(self, learning_rate: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-3):
        super().__init__(optax.yogi(learning_rate, b1=b1, b2=b2, eps=eps), name="yogi")


class SM3(OptaxOptimizer):
    """SM3 (Anil et al., 2019, arXiv:1901.11150): ``optax.scale_by_sm3`` then ``-lr``.

    Scalar params are given a leading axis of size one inside the transformation
    (optax's SM3 needs one); the state's params keep their own shapes.

    Args:
      learning_rate: step size.
      momentum: SM3's first-moment decay (optax's ``b1``).
      b2: SM3's second-moment decay.
    """

    def __init__(self, learning_rate: float, momentum: float = 0.9, b2: float = 1.0):
        tx = optax.chain(optax.scale_by_sm3(momentum, b2=b2), optax.scale(-learning_rate))
        super().__init__(tx, name="sm3")

    def _to_tx(self, tree: PyTree) -> PyTree:
        return jax.tree_util.tree_map(lambda x: x[None] if jnp.ndim(x) == 0 else x, tree)

    def _from_tx(self, tree: PyTree, params: Params) -> PyTree:
        return jax.tree_util.tree_map(lambda x, p: x.reshape(jnp.shape(p)), tree, params)


def piecewise_linear(times: Sequence[float], vals: Sequence[float]) -> PiecewiseLinear:
    """The schedule interpolating ``vals`` linearly between ``times`` (constant outside).

    Args:
      times: increasing steps.
      vals: the values at ``times`` (same length).

    Returns:
      ``PiecewiseLinear(times, vals)``.
    """
    return PiecewiseLinear(times, vals)


class PiecewiseLinearAdam(OptaxOptimizer):
    """Adam whose learning rate follows a piecewise-linear schedule of the step.

    ``optax.scale_by_adam`` scaled by ``PiecewiseLinear(times, lrs)(step)`` (steps
    counted from 0), as in learned_optimization.

    Args:
      times: steps at which the learning rate is given.
      lrs: the learning rates at ``times`` (constant before the first and after the last).
      beta1, beta2, epsilon, epsilon_root: Adam's hyperparameters.
    """

    def __init__(
        self,
        times: Sequence[float] = (10000, 20000),
        lrs: Sequence[float] = (1e-4, 1e-5),
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        epsilon_root: float = 1e-8,
    ):
        self.schedule = PiecewiseLinear(times, lrs)
        tx = optax.chain(
            optax.scale_by_adam(b1=beta1, b2=beta2, eps=epsilon, eps_root=epsilon_root),
            optax.scale_by_schedule(self.schedule),
            optax.scale(-1),
        )
        super().__init__(tx, name="piecewise_linear_adam")


def _register() -> None:
    # Classes whose learning rate is required get a small-problem default here
    # (``OPTIMIZERS.get("Lamb", learning_rate=...)`` overrides it).
    OPTIMIZERS.register(AdaBelief)
    OPTIMIZERS.register(PiecewiseLinearAdam)
    for cls in (AdaGrad, Adafactor, Fromage, Lamb, Lars, RAdam, Yogi, SM3):
        OPTIMIZERS.register(functools.partial(cls, learning_rate=1e-2), name=cls.__name__)


_register()
