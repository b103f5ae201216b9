"""Strongly typed states: the mechanism behind "a jitted step compiles once".

A jitted function recompiles whenever an argument's dtype or *weak type* changes.
Optimizer states built at ``init`` from Python scalars (``jnp.asarray(0.0)`` is
weakly typed) or with a different dtype than the update produces change type after
one step, so the step compiles twice (see the optax zoom-linesearch report in
``seeds/``). :func:`settle_dtypes` removes the whole class of bugs: it evaluates one
step abstractly (``jax.eval_shape``, no FLOPs), casts the state to the dtypes the step
produces and repeats until nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.tree_utils import tree_cast_like, tree_path_str

PyTree = Any

__all__ = [
    "settle_dtypes",
    "compute_dtype",
    "type_signature",
    "StateTypeError",
    "leaf_compute_dtype",
]


class StateTypeError(TypeError):
    """A state's types do not settle under its own step function."""


def _dtype(x: Any) -> Any:
    """``x.dtype`` as a comparable value; extended dtypes (typed PRNG keys) stay as they are."""
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
        return x.dtype
    return np.dtype(x.dtype)


def _sig(x: Any) -> tuple:
    return (tuple(np.shape(x)), _dtype(x), bool(getattr(x, "weak_type", False)))


def type_signature(tree: PyTree) -> list[tuple]:
    """``(shape, dtype, weak_type)`` of every array leaf, in tree order.

    Args:
      tree: a pytree of arrays (concrete, tracers or ``jax.ShapeDtypeStruct`` s).

    Returns:
      One ``(shape, dtype, weak_type)`` tuple per array leaf, and the leaf's type for
      a leaf without a dtype; two trees with equal signatures hit the same compiled
      program.
    """
    return [_sig(x) if hasattr(x, "dtype") else type(x) for x in jax.tree_util.tree_leaves(tree)]


def _describe_diff(before: PyTree, after: PyTree) -> str:
    lines = []
    for (path, a), b in zip(
        jax.tree_util.tree_leaves_with_path(before),
        jax.tree_util.tree_leaves(after),
        strict=True,
    ):
        if hasattr(a, "dtype") and _sig(a) != _sig(b):
            lines.append(f"  {tree_path_str(path)}: {_fmt(a)} -> {_fmt(b)}")
    return "\n".join(lines[:10])


def _fmt(x: Any) -> str:
    shape, dtype, weak = _sig(x)
    return f"{dtype}{list(shape)}{' (weak)' if weak else ''}"


def settle_dtypes(
    step_fn: Callable[..., PyTree],
    state: PyTree,
    *args: Any,
    max_iters: int = 4,
    what: str = "state",
) -> PyTree:
    """Casts ``state`` to the dtypes ``step_fn`` produces, iterated to a fixed point.

    Args:
      step_fn: ``(state, *args) -> next_state`` with the same tree structure and shapes.
      state: the initial state (concrete arrays or tracers).
      *args: further inputs of ``step_fn`` (arrays or ``jax.ShapeDtypeStruct`` s).
      max_iters: bound on the abstract steps; dtypes that still change after it raise.
      what: a name for the state used in error messages.

    Returns:
      ``state`` with every leaf cast so that ``step_fn`` maps its types to themselves.
    """
    # Python numbers in the state (a model_state of floats) come out of a traced step as
    # weakly typed arrays: hold them as those arrays from the start.
    state = jax.tree_util.tree_map(
        lambda x: jnp.asarray(x) if type(x) in (bool, int, float, complex) else x, state
    )
    for _ in range(max_iters):
        out = jax.eval_shape(step_fn, state, *args)
        in_def = jax.tree_util.tree_structure(state)
        out_def = jax.tree_util.tree_structure(out)
        if in_def != out_def:
            raise StateTypeError(
                f"{what}: one step changes the tree structure of the state.\n"
                f"  before: {in_def}\n  after:  {out_def}"
            )
        if type_signature(state) == type_signature(out):
            return state
        shapes_in = [s[0] for s in type_signature(state) if isinstance(s, tuple)]
        shapes_out = [s[0] for s in type_signature(out) if isinstance(s, tuple)]
        if shapes_in != shapes_out:
            raise StateTypeError(
                f"{what}: one step changes the shape of the state:\n" + _describe_diff(state, out)
            )
        state = tree_cast_like(state, out)
    out = jax.eval_shape(step_fn, state, *args)
    raise StateTypeError(
        f"{what}: dtypes do not reach a fixed point after {max_iters} steps; still changing:\n"
        + _describe_diff(state, out)
    )


def compute_dtype(tree: PyTree) -> np.dtype:
    """The dtype optimizer arithmetic runs in for ``tree``: its widest float, at least float32.

    bfloat16/float16 params get float32 accumulators and updates (then are cast back),
    float64 params (with ``jax_enable_x64``) stay float64.

    Args:
      tree: a pytree (e.g. the params); leaves without a floating dtype are ignored.

    Returns:
      ``result_type(float32, *float leaf dtypes)``, as a NumPy dtype.
    """
    dtypes = [_dtype(x) for x in jax.tree_util.tree_leaves(tree) if hasattr(x, "dtype")]
    dtypes = [d for d in dtypes if isinstance(d, np.dtype) and jnp.issubdtype(d, jnp.floating)]
    return np.dtype(jnp.result_type(jnp.float32, *dtypes))


def leaf_compute_dtype(dtype: Any) -> np.dtype:
    """Per-leaf version of :func:`compute_dtype`.

    Args:
      dtype: the dtype of one leaf.

    Returns:
      ``dtype`` promoted with float32, as a NumPy dtype (float32 for 16-bit floats).
    """
    return np.dtype(jnp.promote_types(dtype, jnp.float32))
