"""A smoke test any optimizer should pass (the checks of learned_optimization's helper).

``smoketest_optimizer(opt)`` runs ``opt`` on a two-scalar quadratic, without and with a
model state, in float32 and (with ``strict_types``) float16, calling ``init`` with
``num_steps`` and ``update`` with ``loss=``, ``model_state=``, ``key=`` and the
library's ``is_valid=`` keyword, and raises ``AssertionError`` unless the state keeps
its tree structure, shapes and (with ``strict_types``) dtypes, and the model state
passed to ``update`` is the one ``get_state`` returns. learnopt's own tests use it for
every optimizer module; it is public so that user optimizers can be checked the same way.
The library's tests import it as ``optimizers.test_utils.smoketest_optimizer``, which
:mod:`learnopt.optimizers.test_utils` re-exports.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.optimizers import interface

__all__ = ["smoketest_optimizer"]


def _loss(params: dict[str, jax.Array]) -> jax.Array:
    return jnp.mean(params["a"] ** 2 + params["b"] ** 2)


def _signature(tree: Any) -> list[tuple]:
    return [(np.shape(x), jnp.asarray(x).dtype) for x in jax.tree_util.tree_leaves(tree)]


def smoketest_optimizer(optimizer: interface.Optimizer, strict_types: bool = True) -> None:
    """Runs ``optimizer`` through init/update and checks its state stays well formed.

    Args:
      optimizer: the optimizer to check.
      strict_types: also run in float16 and require every state leaf to keep its dtype
        across updates (learnopt's optimizers all do).

    Raises:
      AssertionError: naming the check that failed.
    """
    dtypes = [jnp.float32, jnp.float16] if strict_types else [jnp.float32]
    key = jax.random.PRNGKey(0)
    for dtype in dtypes:
        params = {"a": jnp.asarray(1.0, dtype), "b": jnp.asarray(1.0, dtype)}

        state = optimizer.init(params, num_steps=100)
        for _ in range(2):
            loss, grads = jax.value_and_grad(_loss)(optimizer.get_params(state))
            state = optimizer.update(state, grads, loss=loss, key=key)
        for name, value in optimizer.get_params(state).items():
            if not np.all(np.isfinite(np.asarray(value, np.float32))):
                raise AssertionError(f"param {name!r} is not finite after two steps ({dtype})")

        def loss_and_state(p, s):
            return _loss(p), s + 1

        state = optimizer.init(params, model_state=jnp.asarray(0), num_steps=100)
        before = (jax.tree_util.tree_structure(state), _signature(state))
        (loss, model_state), grads = jax.value_and_grad(loss_and_state, has_aux=True)(
            optimizer.get_params(state), optimizer.get_state(state)
        )
        state = optimizer.update(state, grads, loss=loss, model_state=model_state, key=key)
        after = (jax.tree_util.tree_structure(state), _signature(state))
        if before[0] != after[0]:
            raise AssertionError(
                f"update changed the state's tree structure ({dtype}):\n  {before[0]}\n  {after[0]}"
            )
        shapes_before = [s for s, _ in before[1]]
        shapes_after = [s for s, _ in after[1]]
        if shapes_before != shapes_after:
            raise AssertionError(f"update changed state shapes ({dtype})")
        if strict_types and before[1] != after[1]:
            raise AssertionError(
                f"update changed state dtypes ({dtype}): {before[1]} -> {after[1]}"
            )
        state = optimizer.update(
            state, grads, loss=loss, model_state=model_state, is_valid=True, key=key
        )
        if int(optimizer.get_state(state)) != 1:
            raise AssertionError(
                f"get_state returned {optimizer.get_state(state)!r}, not the model state "
                f"passed to update (1)"
            )
