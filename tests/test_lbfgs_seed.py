"""The seed example (``seeds/optax_zoom_linesearch_pr.txt``) in learnopt: L-BFGS with the

zoom line search in a jitted step, 16x2 linear regression, compiles once in every float
dtype (raw optax compiles it twice in all of them, and its float16 loss turns NaN once
the loss reaches 0). The same code is in ``docs/dtypes.md``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.optimizers import base as opt_base
from learnopt.testing import TraceCounter, conformance


def seed_run(params_dtype, grads_dtype, num_steps=10):
    """The seed's script with ``opt_base.OptaxOptimizer(optax.lbfgs())``; returns the run."""
    key = jax.random.PRNGKey(42)
    x = jax.random.normal(key, (16, 2), dtype=params_dtype)
    y = jnp.sum(x * 0.5, axis=-1)
    optimizer = opt_base.OptaxOptimizer(optax.lbfgs())
    counter = TraceCounter()

    def loss_fn(params):
        y_pred = (params @ x.T).T  # a linear model
        return jnp.mean(optax.l2_loss(y_pred, y))

    @jax.jit
    @counter.wrap
    def training_step(state):
        params = optimizer.get_params(state)
        loss, grad = jax.value_and_grad(loss_fn)(params)
        grad = grad.astype(grads_dtype)  # mixed precision: grads in another dtype
        return optimizer.update(state, grad, loss, value_fn=loss_fn), loss

    state = optimizer.init(jnp.array([0.0, 0.0], dtype=params_dtype))
    losses = []
    for _ in range(num_steps):
        state, loss = training_step(state)
        losses.append(float(loss))
    params = optimizer.get_params(state)
    return counter.count, params, losses + [float(loss_fn(params))]


@pytest.mark.parametrize("case", list(conformance.DTYPE_CASES))
def test_seed_lbfgs_compiles_once_and_converges(case):
    with conformance.dtype_case(case) as (params_dtype, grads_dtype):
        compiles, params, losses = seed_run(params_dtype, grads_dtype)
    assert compiles == 1
    assert params.dtype == params_dtype
    assert np.all(np.isfinite(losses)), losses
    assert losses[-1] < 0.05 * losses[0], losses
    assert min(losses[1:]) < losses[0]


def test_seed_float16_stays_finite_after_the_loss_reaches_zero():
    """Raw optax divides by <s, y> in float16: 1/<s, y> overflows once the loss is ~0."""
    compiles, params, losses = seed_run(jnp.float16, jnp.float16, num_steps=40)
    assert compiles == 1
    assert losses[-1] == 0.0 and np.all(np.isfinite(losses)), losses
    np.testing.assert_allclose(np.asarray(params, np.float32), [0.5, 0.5], atol=1e-3)
