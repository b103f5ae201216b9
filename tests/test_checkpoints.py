"""Tests for learnopt.checkpoints (save_theta / load_theta)."""

from __future__ import annotations

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt import checkpoints
from learnopt.learned_optimizers import base as lopt_base


def _assert_same(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("name", ["LearnableSGD", "LearnableSGDM", "LearnableAdam", "MLPLOpt"])
def test_roundtrip_registered_lopts(tmp_path, name):
    lopt = lopt_base.get_learned_optimizer(name)
    theta = lopt.init(jax.random.PRNGKey(0))
    theta = jax.tree_util.tree_map(lambda t: t + 0.125, theta)
    path = checkpoints.save_theta(tmp_path / "theta.msgpack", theta)
    assert path.is_file()
    loaded = checkpoints.load_theta(path)
    _assert_same(loaded, flax.serialization.to_state_dict(theta))
    for leaf in jax.tree_util.tree_leaves(loaded):
        assert isinstance(leaf, jax.Array)
        assert leaf.dtype == jnp.float32
        assert not leaf.weak_type
    # With a target, the structure and dtypes of the target come back.
    restored = checkpoints.load_theta(path, target=lopt.init(jax.random.PRNGKey(1)))
    _assert_same(restored, theta)


def test_loadable_without_structure_and_without_learnopt(tmp_path):
    theta = {"log_lr": jnp.float32(-3.0), "nested": {"w": jnp.ones((2, 3), jnp.float32)}}
    path = checkpoints.save_theta(tmp_path / "sub" / "dir" / "t.msgpack", theta)  # makes dirs
    raw = flax.serialization.msgpack_restore(path.read_bytes())  # plain flax, no learnopt
    assert set(raw) == {"log_lr", "nested"}
    np.testing.assert_array_equal(raw["nested"]["w"], np.ones((2, 3), np.float32))
    loaded = checkpoints.load_theta(path)
    assert float(loaded["log_lr"]) == -3.0
    assert loaded["log_lr"].shape == ()


def test_low_precision_and_integer_leaves(tmp_path):
    theta = {
        "bf16": jnp.full((3,), 1.5, jnp.bfloat16),
        "f16": jnp.full((2,), 0.25, jnp.float16),
        "count": jnp.arange(4, dtype=jnp.int32),
        "seq": [jnp.zeros(2, jnp.float32), jnp.ones(1, jnp.float32)],
    }
    path = checkpoints.save_theta(tmp_path / "t.msgpack", theta)
    loaded = checkpoints.load_theta(path)
    assert loaded["bf16"].dtype == jnp.float32
    assert loaded["f16"].dtype == jnp.float32
    assert loaded["count"].dtype == jnp.int32
    assert set(loaded["seq"]) == {"0", "1"}  # sequences come back as dicts without a target
    np.testing.assert_array_equal(loaded["bf16"], np.full((3,), 1.5, np.float32))
    restored = checkpoints.load_theta(path, target=theta)
    assert restored["bf16"].dtype == jnp.bfloat16
    assert isinstance(restored["seq"], list)
    _assert_same(restored, theta)


def test_overwrite_is_atomic_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "theta.msgpack"
    for value in (1.0, 2.0, 3.0):
        checkpoints.save_theta(path, {"log_lr": jnp.float32(value)})
    assert float(checkpoints.load_theta(path)["log_lr"]) == 3.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theta.msgpack"]


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no theta checkpoint"):
        checkpoints.load_theta(tmp_path / "missing.msgpack")
    path = checkpoints.save_theta(tmp_path / "t.msgpack", {"w": jnp.zeros((2,), jnp.float32)})
    with pytest.raises(ValueError, match="shape"):
        checkpoints.load_theta(path, target={"w": jnp.zeros((3,), jnp.float32)})


def test_a_non_finite_theta_is_refused_unless_allowed(tmp_path):
    path = tmp_path / "theta.msgpack"
    with pytest.raises(ValueError, match=r"non-finite values in log_lr \(1 of 1\): refusing") as e:
        checkpoints.save_theta(path, {"log_lr": jnp.float32(np.nan)})
    assert str(path) in str(e.value)
    theta = {"a": {"w": np.array([1.0, np.inf, np.nan])}, "b": [jnp.ones(2), np.float64(1e300)]}
    with pytest.raises(ValueError, match=r"in a/w \(2 of 3\), b/1 \(1 of 1\)"):  # 1e300 -> inf
        with np.errstate(over="ignore"):
            checkpoints.save_theta(path, theta, metadata={"x": 1})
    assert not path.exists() and list(tmp_path.iterdir()) == []
    checkpoints.save_theta(path, {"log_lr": jnp.float32(np.nan)}, allow_nonfinite=True)
    assert np.isnan(checkpoints.load_theta(path)["log_lr"])


def test_a_directory_is_not_a_theta_file(tmp_path):
    run = tmp_path / "run"
    checkpoints.save_theta(run / "theta.msgpack", {"log_lr": jnp.float32(-3)})
    for load in (checkpoints.load_theta, checkpoints.load_theta_metadata):
        with pytest.raises(IsADirectoryError, match="is a directory, not a theta file") as e:
            load(run)
        assert f"a run folder? its theta is {run / 'theta.msgpack'}" in str(e.value)
    with pytest.raises(IsADirectoryError, match="holds no theta.msgpack"):
        checkpoints.load_theta(tmp_path)


def test_bytes_roundtrip_under_jit_output():
    theta = jax.jit(lambda: {"a": jnp.float32(2.0) * 3})()
    data = checkpoints.theta_to_bytes(theta)
    assert float(checkpoints.theta_from_bytes(data)["a"]) == 6.0


# ----------------------------------------------------------------------------------------
# save_state / load_state (the library's functions) and the learner's init from files
# ----------------------------------------------------------------------------------------


def test_state_roundtrip_keeps_dtypes_structure_and_python_leaves(tmp_path):
    from learnopt.outer_trainers import gradient_learner

    theta = {
        "w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3),
        "half": jnp.full((2,), 0.5, jnp.bfloat16),
    }
    ckpt = gradient_learner.ParameterCheckpoint(params=theta, gen_id="run-7", step=123)
    path = checkpoints.save_state(tmp_path / "a" / "params", ckpt)
    target = gradient_learner.ParameterCheckpoint(
        params=jax.tree_util.tree_map(jnp.zeros_like, theta), gen_id="", step=0
    )
    loaded = checkpoints.load_state(path, target)
    assert isinstance(loaded, gradient_learner.ParameterCheckpoint)
    assert loaded.gen_id == "run-7" and loaded.step == 123
    _assert_same(loaded.params, theta)
    assert loaded.params["half"].dtype == jnp.bfloat16  # not widened, unlike save_theta
    # The library's files are flax.serialization.to_bytes of the same tree: readable.
    assert flax.serialization.msgpack_restore(path.read_bytes())["gen_id"] == "run-7"
    lib_bytes = flax.serialization.to_bytes(ckpt)
    (tmp_path / "lib").write_bytes(lib_bytes)
    _assert_same(checkpoints.load_state(tmp_path / "lib", target).params, theta)


def test_load_state_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no state checkpoint"):
        checkpoints.load_state(tmp_path / "missing", {"a": jnp.zeros(2)})
    path = checkpoints.save_state(tmp_path / "s", {"a": jnp.zeros((2,), jnp.float32)})
    with pytest.raises(ValueError, match="shape"):
        checkpoints.load_state(path, {"a": jnp.zeros((3,), jnp.float32)})
    with pytest.raises(ValueError, match="does not match the structure"):
        checkpoints.load_state(path, {"b": jnp.zeros((2,), jnp.float32)})


def test_learner_starts_from_a_parameter_checkpoint_or_a_theta_file(tmp_path):
    """The library's test_init_from_params, plus learnopt's own theta files."""
    from learnopt.optimizers import base as opt_base
    from learnopt.outer_trainers import gradient_learner

    lopt = lopt_base.LearnableSGD(1)
    key = jax.random.PRNGKey(0)
    theta = jax.tree_util.tree_map(lambda x: (x + 1) * 10, lopt.init(key))
    param_path = tmp_path / "param.param"
    checkpoints.save_state(
        param_path, gradient_learner.ParameterCheckpoint(params=theta, gen_id="test", step=123)
    )
    theta_path = checkpoints.save_theta(tmp_path / "theta.msgpack", theta)
    for path in (param_path, theta_path):
        learner = gradient_learner.GradientLearner(lopt, opt_base.SGD(3), init_theta_from_path=path)
        restored = learner.get_meta_params(learner.init(key))
        _assert_same(restored, theta)
    with pytest.raises(FileNotFoundError, match="init_theta_from_path"):
        gradient_learner.GradientLearner(lopt, opt_base.SGD(3), init_theta_from_path=tmp_path / "x")


def test_learner_resumes_its_outer_state_and_compiles_once(tmp_path):
    """The library's test_init_from_checkpoint on the single-machine learner, then steps."""
    from learnopt.optimizers import base as opt_base
    from learnopt.outer_trainers import full_grad, gradient_learner, lopt_truncated_step
    from learnopt.outer_trainers import truncation_schedule as tsched
    from learnopt.tasks import quadratics
    from learnopt.testing import count_compiles

    lopt = lopt_base.LearnableSGDM(initial_lr=0.05)

    def make(**kw):
        step = lopt_truncated_step.VectorizedLOptTruncatedStep(
            quadratics.CurvatureQuadraticFamily(3), lopt, tsched.ConstantTruncationSchedule(4), 2
        )
        return gradient_learner.SingleMachineGradientLearner(
            lopt, [full_grad.FullGrad(step)], opt_base.Adam(1e-2), **kw
        )

    learner = make()
    state = learner.init(jax.random.PRNGKey(0))
    for i in range(3):
        state, _, _ = learner.update(state, jax.random.PRNGKey(i))
    learner_state = jax.tree_util.tree_map(lambda x: x + 11, state.gradient_learner_state)
    path = checkpoints.save_state(
        tmp_path / "checkpoint.param",
        gradient_learner.OptCheckpoint(learner_state, elapsed_time=123.0, total_inner_steps=123),
    )

    resumed = make(init_outer_state_from_path=path)
    new = resumed.init(jax.random.PRNGKey(5))
    assert int(new.theta_opt_state.iteration) == 3 + 11  # Adam's step count came back
    assert int(new.outer_iteration) == 3 + 11
    _assert_same(new.gradient_learner_state, learner_state)
    with count_compiles() as names:
        for i in range(3):
            new, loss, _ = resumed.update(new, jax.random.PRNGKey(10 + i))
    assert names.count("_update") == 1
    # (the +11 state makes these steps overflow Adam's second moment: they are skipped)
    assert np.isfinite(float(loss)) and int(new.outer_iteration) == 17
