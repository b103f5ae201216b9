"""Task families with sampled configurations (learnopt.tasks.parametric) and suites."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.tasks import base as tasks_base
from learnopt.tasks import suites
from learnopt.tasks.parametric import (
    cfgobject,
    image_conv,
    image_mlp,
    image_mlp_ae,
    lm_rnn,
    lm_transformer,
    parametric_utils,
)

KEY = jax.random.key(0)


@pytest.fixture(autouse=True)
def empty_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path / "data"))


def _batch(abstract, seed=0):
    rng = np.random.default_rng(seed)

    def make(s):
        if jnp.issubdtype(s.dtype, jnp.integer):
            return rng.integers(1, 10, s.shape).astype(s.dtype)
        return rng.uniform(0, 1, s.shape).astype(s.dtype)

    return jax.tree.map(make, abstract)


def test_traced_activation_equals_the_static_choice(fast_jit):
    x = jnp.linspace(-2, 2, 7)
    dynamic = fast_jit(lambda a, x: parametric_utils.SampleActivation.get_dynamic(a)(x))
    for i in range(len(parametric_utils.SampleActivation.acts)):
        act = {"index": jnp.int32(i)}
        np.testing.assert_allclose(
            dynamic(act, x),
            parametric_utils.SampleActivation.get_static(act)(x),
            rtol=1e-5,
            atol=1e-6,
        )


def test_sampled_initializers_have_the_sampled_scale(fast_jit):
    # At scale 1 every initializer has variance 1 / fan_in. The scale multiplies the std of
    # the orthogonal and uniform-scaled ones and the variance of the variance-scaling ones,
    # as in the notes' library.
    shape = (400, 60)
    init = fast_jit(
        lambda cfg: parametric_utils.SampleInitializer.get_dynamic(cfg)(KEY, shape, jnp.bfloat16)
    )
    for i in range(len(parametric_utils.SampleInitializer.inits)):
        for scale in (0.5, 2.0):
            w = init({"index": jnp.int32(i), "init_scale": jnp.float32(scale)})
            assert w.dtype == jnp.bfloat16 and w.shape == shape
            std = float(jnp.std(w.astype(jnp.float32))) * np.sqrt(400)
            expected = scale if i < 2 else np.sqrt(scale)
            assert std == pytest.approx(expected, rel=0.1), (i, scale)
    q = parametric_utils.orth_init((6, 4), jnp.float32, KEY)
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-5)


def test_orthonormalize_columns_is_the_q_of_qr_with_a_positive_diagonal():
    for shape in [(9, 4), (5, 5), (40, 7)]:
        a = jax.random.normal(KEY, shape)
        q, r = jnp.linalg.qr(a)
        np.testing.assert_allclose(
            parametric_utils.orthonormalize_columns(a), q * jnp.sign(jnp.diag(r)), atol=2e-6
        )


def test_batched_orthogonal_init_inside_a_loop_needs_no_lapack():
    # Batched LAPACK QR inside a loop can deadlock XLA:CPU's intra-op pool on 2 cores
    # (meta-training a family with orthogonal init hung at its first inner-run reset).
    def body(_, acc):
        keys = jax.random.split(jax.random.fold_in(KEY, acc.shape[0]), 8)
        q = jax.vmap(lambda k: parametric_utils.orth_init((32, 32), jnp.float32, k))(keys)
        return acc + q.sum(0)

    fn = jax.jit(lambda: jax.lax.fori_loop(0, 3, body, jnp.zeros((32, 32))))
    assert "lapack" not in fn.lower().as_text()
    assert np.isfinite(np.asarray(fn())).all()


def test_vmapped_members_differ_in_activation_and_match_one_by_one(fast_jit):
    fam = tasks_base.TASK_FAMILIES.get("ParametricImageMLP_Digits8_32x32")
    many = fast_jit(jax.vmap(fam.sample))(jax.random.split(KEY, 16))
    assert len(set(np.asarray(many.values["activation"]["index"]).tolist())) > 2
    assert len(set(np.asarray(many.values["initializer"]["index"]).tolist())) > 2
    keys = jax.random.split(KEY, 2)
    batch = jax.tree.map(lambda x: x[:8], _batch(fam.datasets.abstract_batch))

    def loss(key):
        task = fam.task_fn(fam.sample(key))
        return task.loss(task.init(key), key, batch)

    together = fast_jit(jax.vmap(loss))(keys)
    single = fast_jit(loss)
    np.testing.assert_allclose(together, [single(k) for k in keys], rtol=1e-5)
    # The library's parametric normalizer: chance (log 10) maps to 10 * log(5) / log(10).
    task = fam.task_fn(fam.sample(KEY))
    assert float(task.normalizer(jnp.float32(np.log(10)))) == pytest.approx(
        10 * np.log(5) / np.log(10), rel=1e-5
    )
    assert float(task.normalizer(jnp.float32(jnp.nan))) == pytest.approx(10.0, rel=1e-5)


def test_autoencoder_family_switches_loss_form_per_member(fast_jit):
    fam = tasks_base.TASK_FAMILIES.get("ParametricImageMLPAE_Digits8_32x8x32")
    batch = _batch(fam.datasets.abstract_batch)
    batch["image"][:] = batch["image"][:1]  # equal examples: mean of logs = log of mean
    cfg = fam.sample(KEY)
    params = fam.task_fn(cfg).init(KEY)

    @fast_jit
    def loss(log_loss):
        values = dict(cfg.values, log_loss=log_loss)
        return fam.task_fn(cfgobject.CFGNamed(cfg.name, values)).loss(params, KEY, batch)

    losses = {flag: float(loss(jnp.bool_(flag))) for flag in (False, True)}
    assert losses[True] == pytest.approx(np.log(losses[False] + 1e-8), rel=1e-5)


@pytest.mark.parametrize(
    "sampler",
    [
        image_mlp.sample_image_mlp,
        image_conv.sample_image_conv,
        image_mlp_ae.sample_image_mlp_ae,
        lm_rnn.sample_lm_rnn,
        lm_transformer.sample_lm_transformer,
    ],
)
def test_host_samplers_give_serializable_buildable_configs(sampler):
    cfg = sampler(jax.random.PRNGKey(7))
    assert cfg == sampler(jax.random.PRNGKey(7))  # deterministic in the key
    text = cfgobject.serialize_cfg(cfg)
    assert cfgobject.serialize_cfg(cfgobject.deserialize_cfg(text)) == text
    family = cfgobject.object_from_config(cfgobject.deserialize_cfg(text))
    assert isinstance(family, tasks_base.TaskFamily) and family.cfg == cfgobject.deserialize_cfg(
        text
    )
    ids, floats, ints = cfgobject.featurize(cfg)
    assert ids.shape[0] == floats.shape[0] == ints.shape[0] >= 3 and floats.shape[1] == 8
    abstract = family.datasets.abstract_batch
    cfg_inner = family.sample(KEY)
    task = family.task_fn(cfg_inner)
    params, state = jax.eval_shape(task.init_with_state, KEY)
    loss = jax.eval_shape(task.loss_with_state, params, state, KEY, abstract)[0]
    assert loss.shape == ()


def test_samplers_cover_their_ranges():
    cfgs = [image_mlp.sample_image_mlp(jax.random.PRNGKey(s)) for s in range(40)]
    flat = [cfgobject.flatten_cfg(c) for c in cfgs]
    depths = {len(f["/ParametricImageMLP/hidden_layers"].value) for f in flat}
    datasets = {c.kwargs["datasets"].obj for c in cfgs}
    assert depths == {0, 1, 2, 3, 4}
    assert datasets == {"digits8_datasets", "mnist5k_datasets"}  # offline data only
    batch = [f["/ParametricImageMLP/datasets/" + c.kwargs["datasets"].obj + "/batch_size"].value
             for f, c in zip(flat, cfgs, strict=True)]  # fmt: skip
    assert min(batch) >= 4 and max(batch) < 512


def test_task_from_sample_task_family_fn():
    task = parametric_utils.task_from_sample_task_family_fn(lm_rnn.sample_lm_rnn, 3)
    assert set(task.abstract_batch) == {"obs", "target"}
    with pytest.raises(KeyError, match="Unknown configurable"):
        cfgobject.object_from_config(cfgobject.CFGObject("NoSuchThing", {}))


# -------------------------------------------------------------------------- suites


def test_meta_train_mixture_uses_the_chosen_bucket_only(fast_jit):
    fam = tasks_base.TASK_FAMILIES.get("meta-train")
    assert list(fam.families) == list(suites.META_TRAIN_BUCKETS)
    batch = jax.tree.map(lambda x: x[:4], _batch(fam.datasets.abstract_batch))
    cfg = fam.sample(KEY)
    name = list(fam.families)[int(cfg["which"])]

    @fast_jit
    def mixture(cfg):
        task = fam.task_fn(cfg)
        params = task.init(KEY)
        return params, *jax.value_and_grad(task.loss)(params, KEY, batch)

    params, loss, grads = mixture(cfg)
    member = fam.families[name].task_fn(cfg["cfgs"][name])
    member_loss = fast_jit(member.loss)(params[name], KEY, batch[name])
    np.testing.assert_allclose(loss, member_loss, rtol=1e-6)
    norms = {
        k: float(sum(jnp.sum(jnp.abs(x)) for x in jax.tree.leaves(g))) for k, g in grads.items()
    }
    assert norms[name] > 0 and all(v == 0 for k, v in norms.items() if k != name)
    whichs = fast_jit(jax.vmap(fam.sample))(jax.random.split(KEY, 64))["which"]
    assert set(np.asarray(whichs).tolist()) == set(range(4))


def test_heldout_suite_is_disjoint_and_covers_three_kinds():
    heldout = suites.get_suite("heldout")
    assert len(heldout) >= 8 and len(set(heldout)) == len(heldout)
    assert set(heldout) <= set(tasks_base.TASKS.names())
    kinds = {n.split("_")[0] for n in heldout}
    assert {"ImageMLP", "Conv", "ImageMLPAE", "RNNLM", "TransformerLM"} <= kinds
    # No held-out task has the input size and layer widths of a meta-train bucket.
    buckets = [*suites.meta_train_families(), *(m() for m in suites.WIDE_BUCKETS.values())]

    def signature(params, batch):
        shapes = sorted(tuple(x.shape) for x in jax.tree.leaves(params))
        return (tuple(jax.tree.leaves(batch)[0].shape[1:]), tuple(shapes))

    train_sigs = set()
    for fam in buckets:
        task = fam.task_fn(fam.sample(KEY))
        train_sigs.add(signature(jax.eval_shape(task.init, KEY), fam.datasets.abstract_batch))
    for name in heldout:
        task = tasks_base.get_task(name)
        sig = signature(jax.eval_shape(task.init, KEY), task.datasets.abstract_batch)
        assert sig not in train_sigs, name
    assert set(suites.suite_names()) >= {"heldout", "meta-train"}
    with pytest.raises(KeyError):
        suites.get_suite("nope")


def test_meta_valid_suite_shares_no_task_or_configuration_with_meta_train_or_heldout():
    """Every pair of members across the three sets differs in name and in configuration.

    A configuration is the model's input shape and its sorted parameter shapes (so the
    same model on another dataset or batch size counts as the same configuration).
    """
    meta_valid = suites.get_suite("meta-valid")
    assert len(meta_valid) == len(set(meta_valid)) >= 5
    kinds = {n.split("_")[0] for n in meta_valid}
    assert {"ImageMLP", "Conv", "RNNLM", "TransformerLM"} <= kinds

    def signature(task, batch):
        shapes = sorted(tuple(x.shape) for x in jax.tree.leaves(jax.eval_shape(task.init, KEY)))
        return (tuple(jax.tree.leaves(batch)[0].shape[1:]), tuple(shapes))

    members = {}  # name -> (set, signature)
    for fam in [*suites.meta_train_families(), *(m() for m in suites.WIDE_BUCKETS.values())]:
        members[fam.name] = (
            "meta-train",
            signature(fam.task_fn(fam.sample(KEY)), fam.datasets.abstract_batch),
        )
    for set_name in ("meta-train", "heldout", "meta-valid"):
        for name in suites.get_suite(set_name):
            task = tasks_base.get_task(name)
            assert name not in members, (name, set_name, members.get(name))
            members[name] = (set_name, signature(task, task.datasets.abstract_batch))
    for a, (set_a, sig_a) in members.items():
        for b, (set_b, sig_b) in members.items():
            if set_a != set_b and "meta-valid" in (set_a, set_b):
                assert sig_a != sig_b, f"{a} ({set_a}) has the configuration of {b} ({set_b})"
