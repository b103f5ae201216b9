"""Theta files with metadata: ``learned_optimizers.theta_files`` and ``checkpoints``."""

from __future__ import annotations

import json

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt import checkpoints
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import mlp_lopt, theta_files

NAMES = lopt_base.registered_learned_optimizers()


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True)
    )


@pytest.fixture(scope="module")
def small():
    lopt = mlp_lopt.MLPLOpt(hidden_size=4, hidden_layers=1, step_mult=0.02, exp_mult=0.1)
    theta = jax.tree_util.tree_map(lambda x: x + 0.5, lopt.init(jax.random.PRNGKey(0)))
    return lopt, theta


@pytest.mark.parametrize("name", NAMES)
def test_every_registered_architecture_is_described_and_rebuilt(name):
    lopt = lopt_base.LOPTS.get(name)
    assert theta_files.registered_name(lopt) == name
    config = theta_files.lopt_config(lopt)
    assert config is not None, f"{name}: constructor arguments are not readable back"
    json.dumps(config)  # JSON-representable
    rebuilt = theta_files.build(name, config)
    assert type(rebuilt) is type(lopt) and theta_files.lopt_config(rebuilt) == config
    shapes = lambda lo: jax.tree_util.tree_map(  # noqa: E731
        lambda s: s.shape, jax.eval_shape(lo.init, jax.random.PRNGKey(0))
    )
    assert shapes(rebuilt) == shapes(lopt)


def test_a_saved_theta_loads_without_declaring_the_optimizer(small, tmp_path):
    lopt, theta = small
    path = theta_files.save(
        tmp_path / "t.msgpack",
        lopt,
        theta,
        licence="Apache-2.0",
        meta_training={"families": ["MetaTrain_MLP_Digits8_32"], "steps": (3, 4)},
        description="a test theta",
    )
    trained = theta_files.load(path)
    assert isinstance(trained.lopt, mlp_lopt.MLPLOpt)
    assert trained.lopt.step_mult == 0.02 and trained.lopt.hidden_size == 4
    assert _leaves_equal(trained.theta, theta)
    md = trained.metadata
    assert md["architecture"] == "MLPLOpt" and md["registered"] is True
    assert md["licence"] == "Apache-2.0" and md["description"] == "a test theta"
    assert md["meta_training"] == {"families": ["MetaTrain_MLP_Digits8_32"], "steps": [3, 4]}
    assert md["num_theta"] == sum(x.size for x in jax.tree_util.tree_leaves(theta))
    assert md["learnopt_version"] and md["created"].endswith("+00:00")
    assert trained.path == path and "MLPLOpt" in repr(trained)
    # It unpacks, and the plain reader returns the theta alone.
    lopt2, theta2 = trained
    assert lopt2 is trained.lopt and theta2 is trained.theta
    assert _leaves_equal(checkpoints.load_theta(path), flax.serialization.to_state_dict(theta))
    assert checkpoints.load_theta_metadata(path) == md
    # Saving the loaded object writes the same theta and metadata.
    again = theta_files.load(trained.save(tmp_path / "copy.msgpack"))
    assert again.metadata == md and _leaves_equal(again.theta, theta)


def test_the_loaded_optimizer_composes_with_optax(small, tmp_path):
    lopt, theta = small
    trained = theta_files.load(theta_files.save(tmp_path / "t.msgpack", lopt, theta))
    schedule = optax.linear_schedule(1.0, 0.5, 4)
    tx = optax.chain(trained.as_optax(weight_decay=1e-2), optax.scale_by_schedule(schedule))
    params = {"w": jnp.ones((3, 2)), "b": jnp.zeros((2,))}
    state = tx.init(params)
    for _ in range(3):
        loss, grads = jax.value_and_grad(lambda p: jnp.sum(jnp.square(p["w"])) + 0.0)(params)
        updates, state = tx.update(grads, state, params, value=loss)
        params = optax.apply_updates(params, updates)
    assert all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(params))
    assert not np.allclose(params["w"], 1.0)
    tx2 = trained.as_optax(num_steps=10)  # for architectures that read the horizon
    assert tx2.init(params) is not None


def test_plain_files_need_the_optimizer(small, tmp_path):
    lopt, theta = small
    path = checkpoints.save_theta(tmp_path / "plain.msgpack", theta)
    assert checkpoints.load_theta_metadata(path) is None
    with pytest.raises(
        theta_files.ThetaFileError, match=r"plain\.msgpack .*without metadata.*lopt="
    ):
        theta_files.load(path)
    trained = theta_files.load(path, lopt=lopt)
    assert trained.metadata == {} and _leaves_equal(trained.theta, theta)


def test_a_different_optimizer_given_is_warned_about(small, tmp_path):
    lopt, theta = small
    path = theta_files.save(tmp_path / "t.msgpack", lopt, theta)
    other = mlp_lopt.MLPLOpt(hidden_size=4, hidden_layers=1, step_mult=0.5, exp_mult=0.1)
    with pytest.warns(UserWarning, match=r"step_mult=0.02 \(given 0.5\)"):
        trained = theta_files.load(path, lopt=other)
    assert trained.lopt is other


def _rewrite(path, out, edit):
    """Copies a theta file with its metadata changed by ``edit(dict)``."""
    raw = flax.serialization.msgpack_restore(path.read_bytes())
    md = json.loads(raw[checkpoints.THETA_METADATA_KEY])
    edit(md)
    raw[checkpoints.THETA_METADATA_KEY] = json.dumps(md)
    out.write_bytes(flax.serialization.msgpack_serialize(raw))
    return out


def test_corrupted_and_mismatched_files_are_named_with_the_reason(small, tmp_path):
    lopt, theta = small
    good = theta_files.save(tmp_path / "good.msgpack", lopt, theta)
    data = good.read_bytes()

    cases = {}
    (tmp_path / "truncated.msgpack").write_bytes(data[: len(data) // 2])
    cases["truncated"] = "not a msgpack checkpoint"
    (tmp_path / "garbage.msgpack").write_bytes(b"\x00not msgpack at all\xff")
    cases["garbage"] = "not a msgpack checkpoint"
    raw = flax.serialization.msgpack_restore(data)
    raw[checkpoints.THETA_METADATA_KEY] = "{broken json"
    (tmp_path / "badjson.msgpack").write_bytes(flax.serialization.msgpack_serialize(raw))
    cases["badjson"] = "metadata is not valid JSON"
    _rewrite(good, tmp_path / "unknown.msgpack", lambda m: m.update(architecture="NoSuchLOpt"))
    cases["unknown"] = "'NoSuchLOpt'.*not registered.*lopt="
    _rewrite(good, tmp_path / "wider.msgpack", lambda m: m["config"].update(hidden_size=8))
    cases["wider"] = r"does not fit MLPLOpt\(.*hidden_size=8.*wrong shape"
    _rewrite(good, tmp_path / "badarg.msgpack", lambda m: m["config"].update(no_such_arg=1))
    cases["badarg"] = "cannot rebuild MLPLOpt"
    _rewrite(good, tmp_path / "future.msgpack", lambda m: m.update(format=99))
    cases["future"] = "format 99"
    _rewrite(good, tmp_path / "noconfig.msgpack", lambda m: m.update(config=None))
    cases["noconfig"] = "no constructor config.*lopt="
    for name, pattern in cases.items():
        path = tmp_path / f"{name}.msgpack"
        with pytest.raises(theta_files.ThetaFileError, match=pattern) as info:
            theta_files.load(path)
        assert str(path) in str(info.value), name
        assert isinstance(info.value, ValueError)
    with pytest.raises(FileNotFoundError, match="missing.msgpack"):
        theta_files.load(tmp_path / "missing.msgpack")
    with pytest.raises(IsADirectoryError, match="is a directory, not a theta file"):
        theta_files.load(tmp_path)
    # A theta that does not fit the optimizer is refused when saving, too.
    with pytest.raises(ValueError, match="does not fit"):
        theta_files.save(tmp_path / "x.msgpack", mlp_lopt.MLPLOpt(hidden_size=8), theta)


def test_metadata_must_be_json(small, tmp_path):
    _, theta = small
    with pytest.raises(TypeError, match="JSON"):
        checkpoints.save_theta(tmp_path / "t.msgpack", theta, metadata={"f": object()})
    assert not (tmp_path / "t.msgpack").exists()
