"""Learned optimizers in Flax's loops: Linen's TrainState (learnopt.flax_utils) and NNX's
nnx.Optimizer, the two examples, and the loss reaching the optimizer through each."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from flax.training import train_state

from learnopt.flax_utils import TrainState
from learnopt.learned_optimizers import hyper_v2, rnn_mlp_lopt
from learnopt.testing import TraceCounter


@pytest.fixture(scope="module")
def hyper():
    """A small HyperV2 at its initial theta (reads the loss; compiles quickly)."""
    lopt = hyper_v2.HyperV2(lstm_hidden_size=8, param_inits=4)
    return lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))


def _params():
    return {
        "w": jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(3, 4),
        "b": jnp.zeros((4,), jnp.float32),
    }


@pytest.mark.parametrize("example", ["flax_linen_trainstate", "flax_nnx"])
def test_example_trains_with_the_pretrained_optimizer(example, repo_script):
    first, last = repo_script(f"examples/{example}.py", register=True).main(steps=40)
    assert last < 0.5 * first


@pytest.mark.parametrize("example", ["flax_linen_trainstate", "flax_nnx"])
def test_example_runs_hyper_v2_with_the_loss(example, repo_script):
    # Without the loss HyperV2 raises, so a finite run means the loop passed it on.
    first, last = repo_script(f"examples/{example}.py", register=True).main(
        steps=8, lopt="HyperV2", batch_size=32, lstm_hidden_size=8, param_inits=4
    )
    assert np.isfinite(first) and np.isfinite(last)


def test_trainstate_gives_the_optimizer_the_loss_and_compiles_once(hyper):
    params = _params()
    grads = jax.tree_util.tree_map(lambda p: 0.1 * p + 0.01, params)
    state = TrainState.create(apply_fn=None, params=params, tx=hyper.as_optax(num_steps=10))
    counter = TraceCounter()
    step = jax.jit(counter.wrap(lambda s, loss: s.apply_gradients(grads=grads, loss=loss)))
    low, high = step(state, jnp.float32(0.5)), step(state, jnp.float32(3.0))
    step(low, jnp.float32(0.5))
    assert counter.count == 1
    assert int(low.step) == 1
    # The same step as the learnopt optimizer's own update with that loss.
    direct = jax.jit(lambda p, loss: hyper.update(hyper.init(p, num_steps=10), grads, loss=loss))
    expected = hyper.get_params(direct(params, jnp.float32(0.5)))
    leaves = jax.tree_util.tree_leaves
    for a, b in zip(leaves(low.params), leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    # And the loss matters: HyperV2's loss features differ between the two values.
    differs = [
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(leaves(low.opt_state), leaves(high.opt_state), strict=True)
    ]
    assert any(differs)


def test_without_the_loss_each_loop_says_how_to_pass_it(hyper):
    params = _params()
    tx = hyper.as_optax(num_steps=10)
    rnn = rnn_mlp_lopt.RNNMLPLOpt(hidden_size=4, lstm_hidden_size=4)
    rnn_tx = rnn.opt_fn(rnn.init(jax.random.PRNGKey(0))).as_optax(num_steps=10)
    how = r"needs the training loss.*apply_gradients\(grads=grads, loss=loss\)"
    # Flax's own TrainState, and learnopt's without loss=, for both loss-reading kinds.
    for cls, opt in [(train_state.TrainState, tx), (TrainState, tx), (TrainState, rnn_tx)]:
        state = cls.create(apply_fn=None, params=params, tx=opt)
        with pytest.raises(ValueError, match=how):
            state.apply_gradients(grads=params)
    model = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    grads = nnx.state(model, nnx.Param)
    with pytest.raises(ValueError, match=r"optimizer.update\(model, grads, value=loss\)"):
        optimizer.update(model, grads)


def test_trainstate_refuses_a_loss_that_is_not_a_scalar():
    params = _params()
    state = TrainState.create(apply_fn=None, params=params, tx=optax.sgd(0.1))
    with pytest.raises(ValueError, match="loss must be a scalar"):
        state.apply_gradients(grads=params, loss=jnp.ones(3))
    # Any optax transformation still works, with or without the loss.
    stepped = state.apply_gradients(grads=params, loss=jnp.float32(1.0))
    np.testing.assert_allclose(np.asarray(stepped.params["b"]), 0.0)
    np.testing.assert_allclose(np.asarray(stepped.params["w"]), 0.9 * np.asarray(params["w"]))


def test_loss_and_value_are_one_keyword_in_optax_nnx_and_linen(hyper):
    params = _params()
    grads = jax.tree_util.tree_map(lambda p: 0.1 * p + 0.01, params)
    tx = hyper.as_optax(num_steps=10)
    loss = jnp.float32(0.7)
    state = tx.init(params)
    by_value, _ = tx.update(grads, state, params, value=loss)
    by_loss, _ = tx.update(grads, state, params, loss=loss)
    linen = TrainState.create(apply_fn=None, params=params, tx=tx)
    linen_value = linen.apply_gradients(grads=grads, value=loss).params
    linen_loss = linen.apply_gradients(grads=grads, loss=loss).params
    expected = optax.apply_updates(params, by_value)
    for got in (optax.apply_updates(params, by_loss), linen_value, linen_loss):
        for a, b in zip(
            jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="give the training loss once"):
        linen.apply_gradients(grads=grads, value=loss, loss=loss)
    # NNX forwards either keyword to tx.update.
    for keyword in ("value", "loss"):
        model = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
        optimizer.update(model, nnx.state(model, nnx.Param), **{keyword: loss})
        assert int(optimizer.step.value) == 1
