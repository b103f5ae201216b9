"""Width-aware (muP) steps: roles from shapes and names, multipliers, the wrappers, the sweep."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import theta_files
from learnopt.learned_optimizers.scheduled_adam import ScheduledAdam
from learnopt.learned_optimizers.width_aware import (
    WidthAware,
    WidthAwareSteps,
    step_multipliers,
    tensor_roles,
)
from learnopt.optimizers.adam import Adam
from learnopt.testing import conformance


def _mlp(widths, dtype=jnp.float32, key=0):
    """Haiku-layout MLP params: ``mlp/~/linear_i`` with ``w`` (fan_in, fan_out) and ``b``."""
    keys = jax.random.split(jax.random.PRNGKey(key), len(widths) - 1)
    return {
        f"mlp/~/linear_{i}": {
            "w": (jax.random.normal(k, (a, b)) / np.sqrt(a)).astype(dtype),
            "b": jnp.zeros((b,), dtype),
        }
        for i, (k, a, b) in enumerate(zip(keys, widths[:-1], widths[1:], strict=True))
    }


def _grads(params, key=1):
    leaves, treedef = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(key), len(leaves))
    return treedef.unflatten(
        [jax.random.normal(k, x.shape).astype(x.dtype) for k, x in zip(keys, leaves, strict=True)]
    )


def test_an_mlps_roles_come_from_its_shapes():
    roles = tensor_roles(_mlp((196, 32, 32, 10)))
    assert [roles[f"mlp/~/linear_{i}"]["w"] for i in range(3)] == ["input", "hidden", "output"]
    assert {roles[f"mlp/~/linear_{i}"]["b"] for i in range(3)} == {"vector"}
    # One hidden layer: the readout is fed by the input layer.
    roles = tensor_roles(_mlp((196, 32, 10)))
    assert [roles[f"mlp/~/linear_{i}"]["w"] for i in range(2)] == ["input", "output"]
    # A linear model is an input alone (its step is left as it is).
    assert tensor_roles(_mlp((196, 10)))["mlp/~/linear_0"]["w"] == "input"


def test_a_conv_nets_roles_read_kernels_as_hwio():
    params = {
        "conv_0": {"kernel": jax.ShapeDtypeStruct((3, 3, 1, 8), jnp.float32)},
        "conv_1": {"kernel": jax.ShapeDtypeStruct((3, 3, 8, 16), jnp.float32)},
        "dense": {"kernel": jax.ShapeDtypeStruct((16 * 7 * 7, 10), jnp.float32)},
    }
    roles = tensor_roles(params)
    assert (roles["conv_0"]["kernel"], roles["conv_1"]["kernel"]) == ("input", "hidden")
    assert roles["dense"]["kernel"] == "output"
    mults = step_multipliers(params, base_width=4)
    assert mults["conv_1"]["kernel"] == pytest.approx(4 / 8)  # the input channels
    assert mults["conv_0"]["kernel"] == 1.0


def test_names_and_a_mapping_override_the_shapes():
    # The hidden width equals the data's size, so the shapes alone cannot tell.
    params = _mlp((32, 32, 32, 10))
    assert tensor_roles(params)["mlp/~/linear_0"]["w"] == "hidden"
    fixed = tensor_roles(params, {"mlp/~/linear_0": "input"})
    assert fixed["mlp/~/linear_0"]["w"] == "input"
    assert fixed["mlp/~/linear_1"]["w"] == "hidden"
    # The longest key wins: the leaf's entry over its module's.
    both = tensor_roles(params, {"mlp/~/linear_0": "input", "mlp/~/linear_0/b": "hidden"})
    assert both["mlp/~/linear_0"]["b"] == "hidden"
    # A module declared by its name, and embeddings; a plain "output" module (an
    # attention block's projection) is read by its shape.
    named = {
        "mup_input_proj": {"w": jnp.zeros((32, 32))},
        "body": {"w": jnp.zeros((32, 32))},
        "attn": {"output": {"w": jnp.zeros((32, 32))}},
        "token_embed": {"embeddings": jnp.zeros((50, 32))},
        "unembed": {"w": jnp.zeros((32, 50))},
    }
    roles = tensor_roles(named)
    assert roles["mup_input_proj"]["w"] == "input"
    assert roles["token_embed"]["embeddings"] == "input"
    assert roles["unembed"]["w"] == "output"
    assert roles["body"]["w"] == roles["attn"]["output"]["w"] == "hidden"


def test_bad_roles_are_named():
    params = _mlp((196, 32, 10))
    with pytest.raises(ValueError, match=r"'middle'.*roles are"):
        tensor_roles(params, {"mlp/~/linear_0": "middle"})
    with pytest.raises(ValueError, match=r"\['nope'\] name no parameter"):
        tensor_roles(params, {"nope": "input"})
    with pytest.raises(TypeError, match="mapping of parameter paths"):
        tensor_roles(params, ["input"])
    with pytest.raises(ValueError, match="base_width must be a positive number, got 0"):
        step_multipliers(params, 0)
    with pytest.raises(ValueError, match="base_width must be a positive number"):
        WidthAwareSteps(Adam(), -1.0)
    with pytest.raises(ValueError, match="max_multiplier must be a positive number"):
        WidthAware("ScheduledAdam", max_multiplier=0.0)


def test_multipliers_scale_hidden_and_output_by_base_over_fan_in():
    mults = step_multipliers(_mlp((196, 128, 128, 10)), base_width=32)
    assert mults["mlp/~/linear_0"] == {"w": 1.0, "b": 1.0}
    assert mults["mlp/~/linear_1"] == {"w": 0.25, "b": 1.0}
    assert mults["mlp/~/linear_2"] == {"w": 0.25, "b": 1.0}


def test_max_multiplier_caps_the_steps_that_would_grow():
    # A conv net's 8-channel kernel is 8x narrower than a base width of 64.
    params = {
        "conv_0": {"kernel": jnp.zeros((3, 3, 1, 8))},
        "conv_1": {"kernel": jnp.zeros((3, 3, 8, 128))},
        "dense": {"kernel": jnp.zeros((128, 10))},
    }
    free = step_multipliers(params, 64)
    capped = step_multipliers(params, 64, max_multiplier=1.0)
    assert free["conv_1"]["kernel"] == 8.0 and capped["conv_1"]["kernel"] == 1.0
    assert free["dense"]["kernel"] == capped["dense"]["kernel"] == 0.5


def _run(opt, params, steps=4):
    state = opt.init(params, num_steps=10)
    update = jax.jit(opt.update)
    for i in range(steps):
        state = update(state, _grads(params, key=i), jnp.asarray(1.0))
    return opt.get_params(state)


def test_at_the_base_width_the_steps_are_adams_bit_for_bit():
    params = _mlp((196, 32, 32, 10))
    plain = _run(Adam(1e-2), params)
    wide = _run(WidthAwareSteps(Adam(1e-2), base_width=32), params)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(wide), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_each_step_is_adams_times_the_multiplier(dtype):
    params = _mlp((196, 64, 64, 10), dtype)
    opt = Adam(1e-2)
    width_aware = WidthAwareSteps(opt, base_width=16)
    grads = _grads(params)
    base_next = opt.get_params(opt.update(opt.init(params), grads, jnp.asarray(1.0)))
    next_params = width_aware.get_params(
        width_aware.update(width_aware.init(params), grads, jnp.asarray(1.0))
    )
    mults = step_multipliers(params, 16)
    for p, q, r, m in zip(
        *(jax.tree.leaves(t) for t in (params, base_next, next_params, mults)), strict=True
    ):
        assert r.dtype == p.dtype
        f = lambda x: np.asarray(x, np.float32)  # noqa: E731
        # Within two roundings of the parameters' own dtype.
        atol = 2 * float(jnp.finfo(dtype).eps) * float(np.abs(f(p)).max())
        np.testing.assert_allclose(f(r), f(p) + m * (f(q) - f(p)), atol=atol, rtol=0)
        if m == 1.0:
            np.testing.assert_array_equal(f(r), f(q))
    assert {m for m in jax.tree.leaves(mults)} == {1.0, 0.25}


def test_the_wrapped_step_compiles_once_for_every_dtype():
    opt = WidthAwareSteps(Adam(1e-2), base_width=16)
    for dtype in (jnp.float32, jnp.bfloat16):
        params = _mlp((196, 64, 10), dtype)
        state = opt.init(params)
        update = jax.jit(opt.update)
        for i in range(3):
            state = update(state, _grads(params, key=i), jnp.asarray(1.0, jnp.float32))
        assert update._cache_size() == 1
        assert {x.dtype for x in jax.tree.leaves(opt.get_params(state))} == {jnp.dtype(dtype)}


def test_the_learned_wrapper_is_under_the_conformance_tests():
    """Registered, so tests/test_conformance.py checks compile-once and dtypes for it."""
    assert "lopt:WidthAware" in conformance.conformance_optimizers()


def test_the_learned_wrapper_scales_the_learned_optimizers_steps():
    inner = ScheduledAdam(initial_lr=3e-3)
    lopt = WidthAware(inner, base_width=16)
    theta = lopt.init(jax.random.PRNGKey(0))
    ref = jax.tree.map(np.asarray, inner.init(jax.random.PRNGKey(0)))
    assert jax.tree.all(jax.tree.map(np.array_equal, jax.tree.map(np.asarray, theta), ref))
    params = _mlp((196, 64, 64, 10))
    plain = _run(inner.opt_fn(theta), params, steps=3)
    scaled = _run(lopt.opt_fn(theta), params, steps=3)
    # The first matrix and the vectors move as the learned optimizer moves them.
    np.testing.assert_array_equal(
        np.asarray(plain["mlp/~/linear_0"]["w"]), np.asarray(scaled["mlp/~/linear_0"]["w"])
    )
    # The hidden and output matrices move less (a quarter of the step, for Adam's
    # direction the same as the unscaled run's only on the first step).
    for name in ("mlp/~/linear_1", "mlp/~/linear_2"):
        start = params[name]["w"]
        ratio = jnp.linalg.norm(scaled[name]["w"] - start) / jnp.linalg.norm(
            plain[name]["w"] - start
        )
        assert 0.1 < float(ratio) < 0.5
    # At the base width the wrapper is the learned optimizer itself.
    narrow = _mlp((196, 16, 16, 10))
    for a, b in zip(
        jax.tree.leaves(_run(inner.opt_fn(theta), narrow)),
        jax.tree.leaves(_run(lopt.opt_fn(theta), narrow)),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_the_learned_wrapper_round_trips_through_a_theta_file(tmp_path):
    lopt = WidthAware(
        "ControlledAdam",
        {"initial_lr": 2e-3},
        base_width=32,
        roles={"x": "input"},
        max_multiplier=1,
    )
    assert lopt.freeze_groups() == lopt.inner.freeze_groups()
    theta = lopt.init(jax.random.PRNGKey(0))
    path = theta_files.save(tmp_path / "t.msgpack", lopt, theta)
    loaded = theta_files.load(path)
    assert isinstance(loaded.lopt, WidthAware)
    assert loaded.lopt.lopt == "ControlledAdam"
    assert loaded.lopt.inner.initial_lr == pytest.approx(2e-3)
    assert (loaded.lopt.base_width, loaded.lopt.roles) == (32.0, {"x": "input"})
    assert loaded.lopt.max_multiplier == 1.0
    assert "WidthAware" in lopt_base.registered_learned_optimizers()


def test_the_learned_wrapper_refuses_what_it_cannot_rebuild():
    with pytest.raises(ValueError, match="cannot wrap WidthAware"):
        WidthAware("WidthAware")
    with pytest.raises(ValueError, match="only with lopt given by its name"):
        WidthAware(ScheduledAdam(), {"initial_lr": 1e-3})
    with pytest.raises(TypeError, match="registered name or a LearnedOptimizer"):
        WidthAware(3)


@pytest.fixture(scope="module")
def width_sweep(repo_script):
    return repo_script("benchmarks/width_sweep.py")


def test_with_width_aware_steps_the_best_rate_stays_across_widths(width_sweep):
    """The muP check of benchmarks/width_sweep.py, small: 8x8 digits, widths 32 and 512
    (16x apart), 60 steps; seeds 0 and 1 both gave Adam's best rate 2 grid points apart
    and muP's 0 and 1 when this was written (the full sweep: docs/algorithms.md)."""
    images, labels = width_sweep.load_digits(8)
    rates = 0.25 * 2.0 ** -np.arange(9, -1, -1)
    best = {}
    for arm in width_sweep.ARMS:
        best[arm] = [
            width_sweep.best_index(
                width_sweep.sweep_width(
                    arm,
                    width,
                    rates,
                    images,
                    labels,
                    steps=60,
                    batch_size=64,
                    base_width=128,
                    readout="zero",
                    seed=0,
                )
            )
            for width in (32, 512)
        ]
    moves = {arm: abs(b[1] - b[0]) for arm, b in best.items()}
    assert moves["muP"] <= 1, best
    assert moves["adam"] > moves["muP"], best
