"""``OptaxOptimizer``: any optax ``GradientTransformation`` as a learnopt optimizer.

The transformation runs in float32 (float64 for float64 params), its state is
settled at ``init`` so a jitted step compiles once, and a transform that fails only
because of the dtype it runs in raises :class:`OptaxDtypeError` at ``init``, naming
the transform and the dtypes. :mod:`learnopt.optimizers.optax_opts` builds the
library's optax-backed optimizers (``AdaBelief``, ``Lamb``, ...) on it.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from learnopt.canonical import compute_dtype
from learnopt.optimizers.common import OptimizerState, Params, PyTree, next_state
from learnopt.optimizers.interface import Optimizer
from learnopt.optimizers.library_compat import OptaxStateAlias

__all__ = ["OptaxOptimizer", "OptaxState", "OptaxDtypeError"]


@flax.struct.dataclass
class OptaxState(OptimizerState, OptaxStateAlias):
    """State of :class:`OptaxOptimizer`.

    The fields of :class:`~learnopt.optimizers.common.OptimizerState`, then:

    Attributes:
      optax_state: the wrapped transformation's state (``.optax_opt_state``, the
        library's name, reads it too).
    """

    optax_state: PyTree


class OptaxDtypeError(TypeError):
    """An optax transform fails for the dtype learnopt runs it in (raised at ``init``)."""


def _transform_name(tx: Any) -> str:
    """A readable name for an optax transform: the function that built it, if known."""
    qualname = getattr(getattr(tx, "update", None), "__qualname__", "")
    head = qualname.split(".<locals>")[0]
    if head and head != qualname:
        return head
    return type(tx).__name__


def _first_lines(err: BaseException, n: int = 3) -> str:
    lines = [x for x in str(err).splitlines() if x.strip()]
    text = "\n    ".join(lines[:n])
    return f"{type(err).__name__}: {text}" + (" ..." if len(lines) > n else "")


def _dtype_names(tree: PyTree) -> str:
    names = sorted({str(np.dtype(x.dtype)) for x in jax.tree_util.tree_leaves(tree)})
    return "/".join(names)


class OptaxOptimizer(Optimizer):
    """Wraps any optax ``GradientTransformation`` as a learnopt :class:`Optimizer`.

    The transformation runs in float32 (float64 for float64 params): low-precision
    params and grads are upcast before ``tx.update`` and the new params cast back, so
    every optax transform works for bfloat16/float16 params and mixed precision,
    and quantities such as L-BFGS's ``1 / <s, y>`` cannot overflow float16. The state
    is settled at ``init`` (see :mod:`learnopt.canonical`), so a jitted step compiles
    once. The cost: optax accumulators are float32 even for bfloat16 params.

    ``update`` passes ``value=loss`` and ``grad=grads`` and forwards any other keyword
    arguments, such as ``value_fn``, to ``GradientTransformationExtraArgs`` (e.g.
    ``optax.lbfgs()``); plain transforms ignore them (``optax.with_extra_args_support``)::

        opt = OptaxOptimizer(optax.lbfgs())
        state = opt.update(state, grads, loss, value_fn=loss_fn)

    If the transform itself fails for the dtype it runs in (an internal ``lax.cond``
    whose branches disagree on dtype, say), ``init`` raises :class:`OptaxDtypeError`
    naming the transform and the dtypes, instead of a trace from inside the first step.

    Args:
      opt: the optax transformation.
      name: its name in error messages and ``repr`` (default: the optax function that
        built it, e.g. ``chain``).
    """

    def __init__(self, opt: optax.GradientTransformation, name: str | None = None):
        if not (hasattr(opt, "init") and hasattr(opt, "update")):
            raise TypeError(
                f"OptaxOptimizer expects an optax GradientTransformation, got {type(opt).__name__}"
            )
        self.tx_name = name or _transform_name(opt)
        if not isinstance(opt, optax.GradientTransformationExtraArgs):
            opt = optax.with_extra_args_support(opt)
        self.opt = opt

    def init(self, params, model_state=None, num_steps=None, key=None):
        """The params and ``tx.init`` of them in the arithmetic dtype.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`.

        Raises:
          OptaxDtypeError: the transform fails only because of the dtype it runs in.
        """
        cd = compute_dtype(params)
        params_c = self._to_tx(jax.tree_util.tree_map(lambda p: p.astype(cd), params))
        try:
            optax_state = self.opt.init(params_c)
        except Exception as err:
            raise self._dtype_error(params, err) from None
        return OptaxState.initial(params, model_state, optax_state=optax_state)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One ``tx.update`` in the arithmetic dtype, its updates added to the params.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        params = opt_state.params
        cd = compute_dtype(params)
        params_c = self._to_tx(jax.tree_util.tree_map(lambda p: p.astype(cd), params))
        grads_c = self._to_tx(jax.tree_util.tree_map(lambda g: g.astype(cd), grads))
        extra = dict(kwargs)
        extra["grad"] = grads_c
        if loss is not None:
            extra["value"] = jnp.asarray(loss).astype(cd)
        if "value_fn" in extra:
            user_fn = extra["value_fn"]

            def value_fn(p_c, *args, **kw):
                p = self._from_tx(p_c, params)
                p = jax.tree_util.tree_map(lambda x, ref: x.astype(ref.dtype), p, params)
                return jnp.asarray(user_fn(p, *args, **kw)).astype(cd)

            extra["value_fn"] = value_fn
        updates, optax_state = self.opt.update(grads_c, opt_state.optax_state, params_c, **extra)
        new_params = jax.tree_util.tree_map(
            lambda pc, u, p: (pc + u.astype(cd)).astype(p.dtype),
            self._from_tx(params_c, params),
            self._from_tx(updates, params),
            params,
        )
        return next_state(opt_state, new_params, model_state, optax_state=optax_state)

    def _to_tx(self, tree: PyTree) -> PyTree:
        """Params-shaped tree -> what the transform sees (identity; SM3 adds an axis to scalars)."""
        return tree

    def _from_tx(self, tree: PyTree, params: Params) -> PyTree:
        """Inverse of :meth:`_to_tx`, given the params for their shapes."""
        return tree

    def _abstract_update_kwargs(self, opt_state):
        # A stand-in objective with the params' structure, for transforms (such as
        # L-BFGS's line search) that evaluate the loss at new points.
        return {"value_fn": lambda p: sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(p))}

    def _settle(self, state):
        try:
            return super()._settle(state)
        except Exception as err:
            raise self._dtype_error(state.params, err) from None

    def _works_in(self, params: Params, dtype: Any) -> bool:
        """Whether the transform initializes and settles for ``params`` cast to ``dtype``."""
        try:
            p = jax.tree_util.tree_map(lambda x: jnp.zeros(np.shape(x), dtype), params)
            tx_state = self.opt.init(self._to_tx(p))
            state = OptaxState.initial(p, None, optax_state=tx_state)
            Optimizer._settle(self, state)
        except Exception:
            return False
        return True

    def _dtype_error(self, params: Params, err: Exception) -> Exception:
        """``err`` as a short :class:`OptaxDtypeError` if it is caused by the dtype.

        The transform is tried once more in float32: if it fails there too, the
        problem is not the dtype and ``err`` is returned unchanged.
        """
        cd = compute_dtype(params)
        if cd == np.dtype(jnp.float32) or not self._works_in(params, jnp.float32):
            return err
        new = OptaxDtypeError(
            f"optax transform {self.tx_name!r} does not work in {cd}: learnopt runs it in "
            f"{cd} for params of dtype {_dtype_names(params)} (grads, value and value_fn "
            f"outputs are cast to {cd}), and the transform raises\n    {_first_lines(err)}\n"
            "It works in float32: use float32 params (or bfloat16/float16 ones, which run "
            "in float32) for this transform."
        )
        new.original = err  # type: ignore[attr-defined]
        return new

    @property
    def name(self) -> str:
        """``OptaxOptimizer(<transform name>)``."""
        return f"OptaxOptimizer({self.tx_name})"

    def __repr__(self) -> str:
        return self.name
