"""ControlledAdam: a bounded per-tensor controller on Adam's warmup-cosine schedule (issue 32).

The identity at its initial theta (bit for bit against the ScheduledAdam it controls, and
against the shipped default entry it can start from), the bound on its factors, the loss
features' state and the named groups. Compile-once, dtypes and finite meta-gradients come
from the sweeps every registered architecture goes through (test_conformance.py,
test_lopt_conformance.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt import pretrained
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import controlled_adam, scheduled_adam

STEPS = 12


def _params():
    rng = np.random.default_rng(0)
    return {
        "b": jnp.asarray(rng.normal(size=3), jnp.float32),
        "w": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
        "conv": jnp.asarray(rng.normal(size=(2, 2, 1, 3)), jnp.float32),
    }


def _run(opt, steps=STEPS, loss=True):
    """Params after ``steps`` jitted updates on fixed pseudo-gradients, and the state."""

    @jax.jit
    def step(state, i):
        grads = jax.tree_util.tree_map(lambda p: jnp.sin(p * (i + 1.0)), state.params)
        return opt.update(state, grads, loss=1.0 / (i + 1.0) if loss else None)

    state = opt.init(_params(), num_steps=2 * steps)
    for i in range(steps):
        state = step(state, jnp.float32(i))
    return state


def _same(a, b):
    return all(
        np.array_equal(x, y)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


def test_at_its_initial_theta_it_is_the_scheduled_adam_it_controls_bit_for_bit():
    lopt = controlled_adam.ControlledAdam(initial_lr=3e-3, initial_kind_offsets=(0.5, 0, -1, 0))
    theta = lopt.init(jax.random.PRNGKey(1))
    base = scheduled_adam.ScheduledAdam(
        initial_lr=3e-3, schedule_prior="warmup_cosine", learn_schedule=False
    )
    base_theta = {k: theta[k] for k in controlled_adam.BASE_KEYS}
    controlled = _run(lopt.opt_fn(theta))
    assert _same(controlled.params, _run(base.opt_fn(base_theta)).params)
    assert not _same(controlled.params, _params())  # it trained


def test_started_from_the_shipped_default_its_first_updates_are_the_defaults():
    entry = pretrained.load("ScheduledAdam_cosine_hparams")
    lopt, theta = controlled_adam.ControlledAdam.from_scheduled_adam(
        entry.lopt, entry.theta, jax.random.PRNGKey(0), max_multiplier=3.0
    )
    assert lopt.max_multiplier == 3.0 and lopt.offset_kinds == entry.lopt.offset_kinds
    for key in controlled_adam.BASE_KEYS:
        np.testing.assert_array_equal(theta[key], entry.theta[key])
    assert _same(_run(lopt.opt_fn(theta)).params, _run(entry.lopt.opt_fn(entry.theta)).params)
    with pytest.raises(ValueError, match="from_scheduled_adam takes a ScheduledAdam"):
        controlled_adam.ControlledAdam.from_scheduled_adam(
            scheduled_adam.ScheduledAdam(), entry.theta, jax.random.PRNGKey(0)
        )


def test_its_factors_stay_within_the_bound_whatever_the_controller_says():
    # Saturated outputs: every step is exactly 2x (or 1/2x) the uncontrolled one, so after
    # two steps params(hi) - params(base) = -(2 - 1) S and params(lo) - params(base) =
    # -(1/2 - 1) S, S the uncontrolled movement: the first is -2 times the second.
    lopt = controlled_adam.ControlledAdam(initial_lr=1e-2, max_multiplier=2.0)
    theta = lopt.init(jax.random.PRNGKey(0))
    start = _params()
    grads = jax.tree_util.tree_map(jnp.cos, start)

    def two_steps(opt):
        state = opt.init(start, num_steps=10)
        return opt.update(opt.update(state, grads), grads).params

    base = two_steps(lopt.opt_fn(theta))
    moved = {}
    for sign in (1e4, -1e4):
        wild = jax.tree_util.tree_map(lambda x: x, theta)
        wild["controller"]["mlp/~/linear_1"]["b"] = jnp.full((2,), sign, jnp.float32)
        moved[sign] = jax.tree_util.tree_map(
            lambda a, b: np.asarray(a - b), two_steps(lopt.opt_fn(wild)), base
        )
    for name in ("b", "w", "conv"):
        assert np.abs(moved[-1e4][name]).max() > 0
        np.testing.assert_allclose(moved[1e4][name], -2.0 * moved[-1e4][name], rtol=1e-4, atol=1e-7)


def test_the_loss_features_keep_the_first_loss_and_its_average():
    lopt = controlled_adam.ControlledAdam()
    opt = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    with_loss = _run(opt, steps=3)
    assert float(with_loss.first_loss) == 1.0
    assert float(with_loss.loss_ema) == pytest.approx(0.9 * (0.9 * 1 + 0.1 / 2) + 0.1 / 3)
    without = _run(opt, steps=3, loss=False)
    assert float(without.first_loss) == 0.0 and float(without.loss_ema) == 0.0


def test_registered_with_named_groups_and_clear_errors():
    lopt = lopt_base.get_learned_optimizer("ControlledAdam", weight_decay=1e-4)
    assert repr(lopt) == "ControlledAdam(weight_decay=0.0001)"
    assert lopt.freeze_groups() == {
        "base": controlled_adam.BASE_KEYS,
        "controller": ("controller",),
    }
    theta = lopt.init(jax.random.PRNGKey(0))
    assert theta["controller"]["mlp/~/linear_0"]["w"].shape == (controlled_adam.NUM_FEATURES, 16)
    assert not np.any(theta["controller"]["mlp/~/linear_1"]["w"])
    with pytest.raises(ValueError, match="initial_kind_offsets must be 4 finite numbers"):
        controlled_adam.ControlledAdam(initial_kind_offsets=(0.0, 1.0))
    with pytest.raises(ValueError, match="max_multiplier"):
        controlled_adam.ControlledAdam(max_multiplier=1.0)
    with pytest.raises(ValueError, match="weight_decay"):
        controlled_adam.ControlledAdam(weight_decay=-1.0)


def test_the_recipe_starts_from_the_shipped_default():
    from learnopt.run import recipes

    recipe = recipes.get_recipe("controlledadam-from-default")
    assert recipe.settings["lopt"] == "ControlledAdam" and recipe.settings["freeze"] == ("base",)
    lopt = controlled_adam.ControlledAdam(**recipe.settings["lopt_config"])
    theta = lopt.init(jax.random.PRNGKey(0))
    entry = pretrained.load("ScheduledAdam_cosine_hparams")
    assert lopt.offset_kinds == entry.lopt.offset_kinds
    for key in controlled_adam.BASE_KEYS:  # float32 round trips: beta2's logit 4e-5 off
        np.testing.assert_allclose(theta[key], entry.theta[key], atol=1e-4, rtol=0)
