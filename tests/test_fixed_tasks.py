"""The Flax fixed tasks: conv nets, ResNets, MLP auto-encoders, RNN and Transformer LMs.

Generic checks (finite init/loss, compile once, descent with Adam, abstract batches without
data) are in ``test_task_conformance.py``; these pin each model's own behaviour on small,
synthesized batches (no data on disk).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.tasks import base as tasks_base
from learnopt.tasks.fixed import conv, image_mlp_ae, resnet, rnn_lm, transformer_lm

KEY = jax.random.key(0)


def _image_batch(task, n=8, seed=0):
    rng = np.random.default_rng(seed)
    shape = task.abstract_batch["image"].shape[1:]
    return {
        "image": rng.uniform(0, 1, (n, *shape)).astype(np.float32),
        "label": rng.integers(0, 10, n).astype(np.int32),
    }


def _lm_batch(task, n=4, seed=0):
    t = task.abstract_batch["obs"].shape[1]
    tokens = np.random.default_rng(seed).integers(3, 259, (n, t + 1)).astype(np.int32)
    return {"obs": tokens[:, :-1], "target": tokens[:, 1:]}


@pytest.fixture(autouse=True)
def empty_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LEARNOPT_MANUAL_DIR", str(tmp_path / "manual"))


def test_registered_under_the_library_names(fast_jit):
    names = set(tasks_base.TASKS.names())
    library = {
        "Conv_Cifar10_16_32x64x64",
        "Conv_Cifar10_32x64x64",
        "Conv_Cifar10_32x64x64_Tanh",
        "Conv_Cifar10_32x64x64_batchnorm",
        "Conv_Cifar10_32x64x64_layernorm",
        "ImageMLPAE_Cifar10_32x32x32_bs128",
        "ImageMLPAE_Mnist_128x32x128_bs128",
        "ImageMLPAE_FashionMnist_128x32x128_bs128",
        "RNNLM_pystdlibbytes_Patch32_LSTM128_Embed64",
        "RNNLM_pystdlibbytes_Patch32_IRNN128_Embed64",
        "TransformerLM_PyStdlibBytes_MultiRuntime_0",
    }
    assert library <= names, sorted(library - names)
    # Constructing a task needs no data: CIFAR-10 is not on disk here.
    task = conv.Conv_Cifar10_32x64x64()
    params = fast_jit(task.init)(KEY)
    assert params["Conv_0"]["kernel"].shape == (3, 3, 3, 32)
    assert task.abstract_batch["image"].shape == (128, 32, 32, 3)


def test_conv_net_layout_strides_and_pooling(fast_jit):
    task = conv.Conv_Cifar10_16_32x64x64()
    params = fast_jit(task.init)(KEY)
    shapes = jax.tree.map(jnp.shape, params)
    assert shapes["Conv_1"]["kernel"] == (3, 3, 32, 64) and shapes["Dense_0"]["kernel"] == (64, 10)
    net = task.make_module()
    x = jnp.ones((2, 16, 16, 3))
    _, inter = net.apply({"params": params}, x, capture_intermediates=True)
    out = inter["intermediates"]
    assert out["Conv_0"]["__call__"][0].shape == (2, 8, 8, 32)  # the first conv has stride 2
    assert out["Conv_2"]["__call__"][0].shape == (2, 8, 8, 64)
    # Haiku's default init: truncated normal with std 1/sqrt(fan_in) (about 0.88 of it).
    w = np.asarray(params["Conv_2"]["kernel"])
    assert (
        abs(w.std() * math.sqrt(9 * 64) - 0.88) < 0.05
        and np.abs(w).max() * math.sqrt(9 * 64) <= 2.0
    )
    assert task.normalizer(jnp.float32(100.0)) == pytest.approx(1.5 * math.log(10))


def test_batchnorm_state_updates_keeps_dtype_and_plain_loss_matches(fast_jit):
    task = conv.Conv_Mnist5k_12_8x16x16_batchnorm()
    params, state = fast_jit(task.init_with_state)(KEY)
    assert set(state) == {"batch_stats"}
    batch = _image_batch(task)
    loss, new_state = fast_jit(task.loss_with_state)(params, state, KEY, batch)
    changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state, new_state)
    assert all(jax.tree.leaves(changed))
    assert jax.tree.map(lambda x: x.dtype, new_state) == jax.tree.map(lambda x: x.dtype, state)
    # Training-mode batch norm does not depend on the running averages.
    np.testing.assert_allclose(task.loss(params, KEY, batch), loss, rtol=1e-6)
    mean = new_state["batch_stats"]["BatchNorm_0"]["mean"]
    assert np.all(np.asarray(mean) >= 0)  # ReLU comes before the norm: means are >= 0


@pytest.mark.parametrize(
    "name", ["Resnet_Mnist5k_16_8x16x16x16", "Resnet_Mnist5k_16_8x16x16x16_V1"]
)
def test_resnet_starts_at_chance_and_updates_batch_stats(name, fast_jit):
    task = tasks_base.get_task(name)
    params, state = fast_jit(task.init_with_state)(KEY)
    assert np.all(np.asarray(params["logits"]["kernel"]) == 0)  # zero-initialized head
    batch = _image_batch(task)
    (loss, new_state), grads = fast_jit(jax.value_and_grad(task.loss_with_state, has_aux=True))(
        params, state, KEY, batch
    )
    assert float(loss) == pytest.approx(math.log(10), rel=1e-5)
    assert len(jax.tree.leaves(state)) == len(jax.tree.leaves(new_state)) > 8
    assert float(jnp.abs(grads["logits"]["kernel"]).sum()) > 0


def test_autoencoder_loss_is_the_mean_squared_sigmoid_error(fast_jit):
    task = image_mlp_ae.ImageMLPAE_Digits8_32x8x32_bs128()
    params = fast_jit(task.init)(KEY)
    widths = [params[f"Dense_{i}"]["kernel"].shape for i in range(4)]
    assert widths == [(64, 32), (32, 8), (8, 32), (32, 64)]
    batch = _image_batch(task)
    x = batch["image"].reshape(8, -1)
    h = x
    for i in range(4):
        h = h @ params[f"Dense_{i}"]["kernel"] + params[f"Dense_{i}"]["bias"]
        if i < 3:
            h = jax.nn.relu(h)
    expected = np.mean((x - jax.nn.sigmoid(h)) ** 2)
    np.testing.assert_allclose(task.loss(params, KEY, batch), expected, rtol=1e-5)
    assert float(task.normalizer(jnp.float32(3.0))) == 1.0


def test_lstm_core_matches_its_equations():
    core = rnn_lm.LSTM(4)
    x = jax.random.normal(KEY, (2, 3))
    carry = core.initial_state(2)
    params = core.init(KEY, carry, x)
    (h, c), out = core.apply(params, carry, x)
    w, b = params["params"]["linear"]["kernel"], params["params"]["linear"]["bias"]
    gates = jnp.concatenate([x, carry[0]], -1) @ w + b
    i, g, f, o = jnp.split(gates, 4, -1)
    c_ref = jax.nn.sigmoid(f + 1) * carry[1] + jax.nn.sigmoid(i) * jnp.tanh(g)
    np.testing.assert_allclose(c, c_ref, rtol=1e-5)
    np.testing.assert_allclose(h, jax.nn.sigmoid(o) * jnp.tanh(c_ref), rtol=1e-5)
    np.testing.assert_array_equal(out, h)


def test_irnn_starts_with_identity_recurrence():
    core = rnn_lm.IRNN(5)
    params = core.init(KEY, core.initial_state(1), jnp.ones((1, 3)))
    np.testing.assert_array_equal(params["params"]["hidden_to_hidden"]["kernel"], np.eye(5))


def test_rnn_lm_learns_its_initial_state_and_masks_padding(fast_jit):
    task = tasks_base.get_task("RNNLM_pystdlibbytes_Patch16_GRU32_Embed16_bs32")
    params = fast_jit(task.init)(KEY)
    assert params["initial_state_0"].shape == (1, 32)
    assert np.all(np.asarray(params["initial_state_0"]) == 0)
    batch = _lm_batch(task)
    grads = fast_jit(jax.grad(task.loss))(params, KEY, batch)
    assert float(jnp.abs(grads["initial_state_0"]).sum()) > 0
    # Positions whose input is padding (id 0) do not count.
    padded = {k: v.copy() for k, v in batch.items()}
    padded["obs"][:, -4:] = 0
    logits = fast_jit(task.make_module().apply)({"params": params}, padded["obs"])
    manual = task.loss_from_output(logits, padded)
    ce = -jax.nn.log_softmax(logits)[np.arange(4)[:, None], np.arange(16)[None], padded["target"]]
    np.testing.assert_allclose(manual, ce[:, :-4].mean(), rtol=1e-5)
    np.testing.assert_allclose(fast_jit(task.loss)(params, KEY, padded), manual, rtol=1e-6)


def test_vocab_folding_keeps_padding_and_stays_in_range(fast_jit):
    task = rnn_lm.TeacherForcedRNNLM(
        lambda: rnn_lm.LSTM(8),
        8,
        50,
        lambda: None,
        batch_size=2,
        sequence_length=4,
        data_vocab_size=259,
    )
    ids = jnp.arange(259)
    folded = task.fold(ids)
    assert int(folded.min()) == 0 and int(folded.max()) < 50 and int(folded[0]) == 0
    np.testing.assert_array_equal(folded[:50], ids[:50])
    batch = {"obs": np.full((2, 4), 258, np.int32), "target": np.full((2, 4), 200, np.int32)}
    assert np.isfinite(float(task.loss(fast_jit(task.init)(KEY), KEY, batch)))


def test_transformer_is_causal(fast_jit):
    task = tasks_base.get_task("TransformerLM_PyStdlibBytes_MultiRuntime_3")
    params = fast_jit(task.init)(KEY)
    batch = _lm_batch(task)
    apply = fast_jit(task.make_module().apply)
    logits = apply({"params": params}, batch["obs"])
    changed = batch["obs"].copy()
    changed[:, 10:] = 7
    logits2 = apply({"params": params}, changed)
    np.testing.assert_allclose(logits[:, :10], logits2[:, :10], rtol=1e-5, atol=1e-6)
    assert not np.allclose(logits[:, 10:], logits2[:, 10:])
    assert logits.shape == (4, 16, 259)


def test_transformer_dropout_uses_the_loss_key(fast_jit):
    task = tasks_base.get_task("TransformerLM_PyStdlibBytes_MultiRuntime_0")  # dropout 0.1
    params = fast_jit(task.init)(KEY)
    batch = _lm_batch(task)
    k1, k2 = jax.random.split(KEY)
    loss = fast_jit(task.loss)
    assert float(loss(params, k1, batch)) != float(loss(params, k2, batch))
    assert float(loss(params, k1, batch)) == float(loss(params, k1, batch))


@pytest.mark.parametrize(
    "name",
    [
        "Conv_Mnist5k_16_8x16_Tanh",
        "ImageMLPAE_Digits8_32x8x32_bs128",
        "RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32",
        "TransformerLM_PyStdlibBytes_MultiRuntime_3",
    ],
)
def test_bfloat16_params_give_bfloat16_grads_and_a_float32_loss(name, fast_jit):
    ctor = tasks_base.TASKS.constructor(name)
    f32, bf16 = ctor(), ctor(param_dtype=jnp.bfloat16)
    p32, s32 = fast_jit(f32.init_with_state)(KEY)
    p16, s16 = fast_jit(bf16.init_with_state)(KEY)
    assert {x.dtype for x in jax.tree.leaves(p16)} == {jnp.dtype(jnp.bfloat16)}
    batch = _lm_batch(f32) if "obs" in f32.abstract_batch else _image_batch(f32)
    (l16, _), g16 = fast_jit(jax.value_and_grad(bf16.loss_with_state, has_aux=True))(
        p16, s16, KEY, batch
    )
    l32, _ = fast_jit(f32.loss_with_state)(p32, s32, KEY, batch)
    assert l16.dtype == jnp.float32
    assert {x.dtype for x in jax.tree.leaves(g16)} == {jnp.dtype(jnp.bfloat16)}
    np.testing.assert_allclose(float(l16), float(l32), rtol=0.05)


def test_bad_batches_name_the_task_and_the_expected_shape(fast_jit):
    task = conv.Conv_Digits8_16x32x32()
    params = fast_jit(task.init)(KEY)
    with pytest.raises(ValueError, match=r"Conv_Digits8_16x32x32.*\[batch, 8, 8, 1\]"):
        task.loss(params, KEY, {"image": np.zeros((2, 28, 28, 1)), "label": np.zeros(2)})
    with pytest.raises(ValueError, match="keys"):
        task.loss(params, KEY, {"obs": np.zeros((2, 8))})
    with pytest.raises(ValueError, match="param_dtype"):
        conv.ConvTask("digits8", (4,), param_dtype=jnp.int32)
    with pytest.raises(ValueError, match="unknown ResNet config keys"):
        resnet.ResnetTask({"dataset": "digits8", "image_size": 8, "batch_size": 4, "depth": 3})
    assert isinstance(transformer_lm.TransformerLMTask.__doc__, str)
