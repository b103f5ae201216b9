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


def test_bytes_roundtrip_under_jit_output():
    theta = jax.jit(lambda: {"a": jnp.float32(2.0) * 3})()
    data = checkpoints.theta_to_bytes(theta)
    assert float(checkpoints.theta_from_bytes(data)["a"]) == 6.0
