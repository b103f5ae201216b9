"""VeLO from the user's checkpoint: ``research.general_lopt.prefab`` and ``pretrained_optimizers``.

A synthetic checkpoint is written in the library's own format (Flax msgpack of
``ParameterCheckpoint(params=theta, gen_id, step)``, VeLO's exact shapes: 2,320,385
values, 9.3 MB) with random values, so that every leaf is distinct: loading must give back
exactly the values written, in VeLO's ``HyperV2`` configuration. Nothing here needs the
real weights or the network.
"""

from __future__ import annotations

from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt.optimizers import opt_to_optax
from learnopt.research.general_lopt import prefab
from learnopt.research.general_lopt import pretrained_optimizers as po

ENV_VARS = (po.ENV_VELO_CHECKPOINT, po.ENV_PRETRAINED_LOPTS)
NUM_STEPS = 20


@pytest.fixture(autouse=True)
def _no_checkpoint_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def _random_theta(config: dict, seed: int = 0) -> dict:
    """A theta with the layout of ``HyperV2(**config)``, every value drawn at random."""
    lopt = _hyper_v2(config)
    shapes = jax.eval_shape(lopt.init, jax.random.PRNGKey(0))
    rng = np.random.default_rng(seed)
    theta = jax.tree.map(lambda s: (0.05 * rng.standard_normal(s.shape)).astype(np.float32), shapes)
    return flax.serialization.to_state_dict(theta)


def _hyper_v2(config: dict):
    from learnopt.learned_optimizers.hyper_v2 import HyperV2

    return HyperV2(**config)


def _write(path: Path, state: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(flax.serialization.msgpack_serialize(state))
    return path


@pytest.fixture(scope="module")
def velo_theta() -> dict:
    return _random_theta(po.VELO_CONFIG)


@pytest.fixture(scope="module")
def velo_file(tmp_path_factory: pytest.TempPathFactory, velo_theta: dict) -> Path:
    """VeLO's checkpoint as the library writes it: ``<name>/params``."""
    folder = tmp_path_factory.mktemp("pretrained_lopts") / po.VELO
    return _write(folder / "params", {"params": velo_theta, "gen_id": "", "step": 0})


def _assert_same_theta(got, written: dict) -> None:
    got = flax.serialization.to_state_dict(got)
    flat_got = dict(jax.tree_util.tree_flatten_with_path(got)[0])
    flat_written = dict(jax.tree_util.tree_flatten_with_path(written)[0])
    assert flat_got.keys() == flat_written.keys()
    for k, v in flat_written.items():
        assert flat_got[k].dtype == np.float32
        np.testing.assert_array_equal(np.asarray(flat_got[k]), v, err_msg=jax.tree_util.keystr(k))


def _quadratic():
    target = {"w": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4), "b": jnp.full((4,), 0.5)}
    params = {"w": jnp.ones((3, 4)), "b": jnp.zeros((4,))}

    def loss_fn(p):
        return sum(jnp.sum((p[k] - target[k]) ** 2) for k in p)

    return params, loss_fn


def _train(tx: optax.GradientTransformationExtraArgs, steps: int = 4):
    params, loss_fn = _quadratic()

    @jax.jit
    def step(p, s):
        loss, g = jax.value_and_grad(loss_fn)(p)
        u, s = tx.update(g, s, p, extra_args={"loss": loss})
        return optax.apply_updates(p, u), s, loss

    state = tx.init(params)
    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    return params, losses


def test_optax_lopt_trains_with_the_checkpoint_it_is_given(velo_file, velo_theta):
    tx = prefab.optax_lopt(NUM_STEPS, checkpoint=velo_file)
    params, losses = _train(tx)
    assert np.all(np.isfinite(losses))
    start, _ = _quadratic()
    assert not np.allclose(params["w"], start["w"]), "the optimizer did not move the params"
    # The same run through HyperV2 in VeLO's configuration with the values written.
    lopt = _hyper_v2(po.VELO_CONFIG)
    written = flax.serialization.from_state_dict(
        jax.eval_shape(lopt.init, jax.random.PRNGKey(0)), velo_theta
    )
    direct = opt_to_optax.opt_to_optax_opt(lopt.opt_fn(written), num_steps=NUM_STEPS)
    expected, expected_losses = _train(direct)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    for k in params:
        np.testing.assert_allclose(params[k], expected[k], rtol=1e-6, atol=1e-7)


def test_the_loaded_theta_is_the_written_one_in_velos_configuration(velo_file, velo_theta):
    trained = po.load(checkpoint=velo_file)
    _assert_same_theta(trained.theta, velo_theta)
    for name, value in po.VELO_CONFIG.items():
        assert getattr(trained.lopt, name) == value, name
    assert (trained.lopt.lstm_hidden_size, trained.lopt.param_inits) == (512, 256)
    assert trained.lopt.use_bugged_loss_features is False
    assert trained.lopt.use_bugged_next_lstm_state is False
    # The library's function and prefab's wrapper hold the same values.
    opt = po.aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620(checkpoint=velo_file)
    _assert_same_theta(opt.theta, velo_theta)
    wrapped = prefab.LearnedOptimizer(100, checkpoint=velo_file)
    _assert_same_theta(wrapped.opt.theta, velo_theta)
    # A folder holding ``params`` works as well as the file.
    _assert_same_theta(po.load(checkpoint=velo_file.parent).theta, velo_theta)


def test_the_environment_variables_give_the_checkpoint(velo_file, velo_theta, monkeypatch):
    monkeypatch.setenv(po.ENV_VELO_CHECKPOINT, str(velo_file))
    _assert_same_theta(prefab.LearnedOptimizer(10).opt.theta, velo_theta)
    assert po.checkpoint_path() == velo_file
    monkeypatch.delenv(po.ENV_VELO_CHECKPOINT)
    # A local copy of the library's pretrained_lopts/ folder, in its layout.
    monkeypatch.setenv(po.ENV_PRETRAINED_LOPTS, str(velo_file.parents[1]))
    assert po.checkpoint_path() == velo_file
    # The argument comes first.
    monkeypatch.setenv(po.ENV_VELO_CHECKPOINT, "/nonexistent/params")
    assert po.checkpoint_path(checkpoint=velo_file) == velo_file


def test_without_the_file_one_error_says_which_file_and_how_to_give_it(tmp_path, monkeypatch):
    with pytest.raises(po.CheckpointNotFoundError) as info:
        prefab.optax_lopt(NUM_STEPS)
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert prefab.CheckpointNotFoundError is po.CheckpointNotFoundError
    for needed in (
        "'params'",
        po.PRETRAIN_ROOT + po.VELO + "/params",
        po.PRETRAIN_ROOT_HTTPS + po.VELO + "/params",
        "checkpoint=",
        po.ENV_VELO_CHECKPOINT,
        po.ENV_PRETRAINED_LOPTS,
    ):
        assert needed in message, (needed, message)
    assert info.value.__cause__ is None and info.value.__context__ is None

    missing = tmp_path / "velo_params"
    with pytest.raises(po.CheckpointNotFoundError, match="no file at .*velo_params.*checkpoint="):
        prefab.LearnedOptimizer(10, checkpoint=missing)
    monkeypatch.setenv(po.ENV_VELO_CHECKPOINT, str(missing))
    with pytest.raises(po.CheckpointNotFoundError, match=r"\$LEARNOPT_VELO_CHECKPOINT"):
        prefab.LearnedOptimizer(10)
    with pytest.raises(po.CheckpointNotFoundError, match="remote address"):
        po.load(checkpoint=po.published_location())


def test_a_file_of_another_structure_is_named_with_what_differs(tmp_path, velo_theta):
    # The library's default HyperV2 (128 LSTM units, 64 MLPs): same keys, other shapes.
    small = _write(
        tmp_path / "small" / "params", {"params": _random_theta({}), "gen_id": "", "step": 0}
    )
    with pytest.raises(po.CheckpointFormatError) as info:
        prefab.optax_lopt(NUM_STEPS, checkpoint=small)
    message = str(info.value)
    assert str(small) in message and "wrong shape" in message
    assert "[64, 4] (expected [256, 4])" in message and "lstm_hidden_size=512" in message
    assert isinstance(info.value, ValueError)

    missing_leaf = {k: dict(v) if isinstance(v, dict) else v for k, v in velo_theta.items()}
    del missing_leaf["rnn_params"]["step_size"]
    broken = _write(tmp_path / "broken", {"params": missing_leaf, "gen_id": "", "step": 0})
    with pytest.raises(po.CheckpointFormatError, match=r"missing .*step_size"):
        po.load(checkpoint=broken)

    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\xc1 this is not msgpack")
    with pytest.raises(po.CheckpointFormatError, match="garbage is not a Flax msgpack"):
        po.load(checkpoint=garbage)


def test_the_no_config_baselines_read_the_librarys_tuple_checkpoints(tmp_path, velo_theta):
    # The same shapes as VeLO's; the library saved these as (theta, gen_id, step).
    path = _write(
        tmp_path / "aug11_aug4_trunc10per_last.checkpoint", {"0": velo_theta, "1": "", "2": 0}
    )
    opt = po.aug11_aug4_trunc10per_last(checkpoint=path)
    _assert_same_theta(opt.theta, velo_theta)
    assert opt.lopt.use_bugged_next_lstm_state and opt.lopt.use_bugged_loss_features
    assert po.published_location("aug11_aug4_trunc10per_last") == (
        po.PRETRAIN_ROOT + "no_config/aug11_aug4_trunc10per_last.checkpoint"
    )


def test_a_bare_theta_file_loads_too(tmp_path, velo_theta):
    # theta alone, as the Celo release stores VeLO (algoperf/submissions/velo_4000/theta.state).
    path = _write(tmp_path / "theta.state", velo_theta)
    _assert_same_theta(po.load(checkpoint=path).theta, velo_theta)


def test_accumulation_and_weight_decay_wrap_as_in_the_library(velo_file):
    opt = prefab.LearnedOptimizer(100, max_training_steps=10, checkpoint=velo_file)
    assert opt.opt.num_average == 10
    opt = prefab.LearnedOptimizer(100, weight_decay=1e-6, checkpoint=velo_file)
    assert opt.opt.weight_decay == 1e-6
    with pytest.raises(ValueError, match="must match"):
        opt.init({"w": jnp.ones(3)}, num_steps=50)
    # The library's other pretrained names need their config.gin: a clear AttributeError.
    with pytest.raises(AttributeError, match="config.gin"):
        _ = po.aug1_jul18_continue_on_bigger_2753
    assert po.VELO in po.opt_names and po.names()[0] == po.VELO
