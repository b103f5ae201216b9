"""The last names of the notes' library's API, tested by what they must do.

* ``optimizers.shampoo.Shampoo``: equal to a numpy re-derivation of Shampoo with SGD
  grafting (Gupta et al. 2018, arXiv:1802.09568; grafting and momentum as in Anil et al.
  2020, arXiv:2002.09018) for a few steps on a small matrix and a vector; blocks and
  merged dimensions; registered, so the conformance sweeps run it (``-k Shampoo``).
* ``lopt_truncated_step.SimpleVecLOptTruncatedStep``: the vectorized step on the task
  with a constant schedule, bit for bit; runs restart after ``unroll_length`` steps.
* ``GradientLearner(init_outer_state_from_path=, reset_outer_iteration=)``: the whole
  learner state round-trips through an ``OptCheckpoint`` file; the reset zeroes only
  the iteration counters.
* The library's test helpers at its paths (``tasks.test_utils`` ...) catch what they
  should.
* ``unroll_step`` returns the library's one-step shapes (``[num_tasks]``);
  ``research.general_lopt.hyper_v2`` is importable at the library's path.
* ``ImageMLP_Imagenet16_Relu256x256x256`` / ``Conv_imagenet16_16_64x128x128x128``: build
  without data, name the missing npz files, read a tiny fake dataset placed in a tmp
  manual dir (channel layout and labels checked) and train one step on it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt import checkpoints
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import test_utils as lopt_test_utils
from learnopt.optimizers import base as opt_base
from learnopt.optimizers import shampoo
from learnopt.outer_trainers import gradient_learner, lopt_truncated_step
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.tasks import base as tasks_base
from learnopt.tasks import quadratics
from learnopt.tasks import test_utils as task_test_utils
from learnopt.testing import count_compiles

# ------------------------------------------------------------------------------ Shampoo


def _np_inv_root(s, p, eps):
    """(S + eps * max_eig * I)^(-1/p) by numpy's eigendecomposition (float64)."""
    w, v = np.linalg.eigh(s)
    ridge = eps * max(w.max(), 1e-16)
    return (v * (w + ridge) ** (-1.0 / p)) @ v.T


def _np_shampoo(p0, grads, lr, b1, b2, eps, start):
    """Shampoo, SGD grafting, Nesterov momentum, for one matrix or vector (float64).

    Step t (0-based): S_i <- b2 S_i + (1-b2) G_(i) G_(i)^T (S_i(0) = eps I);
    P = G x_i (S_i + r_i)^(-1/p), p = 2 * rank; U = |G| / |P| * P for t >= start, else G;
    m <- b1 m + U (both momenta kept, the one in use picked by t); p -= lr (U + b1 m).
    """
    p = np.array(p0, np.float64)
    rank = p.ndim
    stats = [eps * np.eye(d) for d in p.shape]
    m_shampoo = np.zeros_like(p)
    m_graft = np.zeros_like(p)
    for t, g in enumerate(grads):
        g = np.asarray(g, np.float64)
        pre = g
        for i in range(rank):
            gi = np.moveaxis(g, i, 0).reshape(g.shape[i], -1)
            stats[i] = b2 * stats[i] + (1 - b2) * gi @ gi.T
            root = _np_inv_root(stats[i], 2 * rank, eps)
            pre = np.moveaxis(np.tensordot(root, pre, axes=([1], [i])), 0, i)
        shampoo_u = pre * np.linalg.norm(g) / (np.linalg.norm(pre) + 1e-16)
        m_shampoo = b1 * m_shampoo + shampoo_u
        m_graft = b1 * m_graft + g
        if t >= start:
            p = p - lr * (shampoo_u + b1 * m_shampoo)
        else:
            p = p - lr * (g + b1 * m_graft)
    return p


@pytest.mark.parametrize("shape", [(3, 4), (4,)])
def test_shampoo_matches_numpy_rederivation(shape):
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=shape).astype(np.float32)
    grads = [rng.normal(size=shape).astype(np.float32) for _ in range(4)]
    # block_size 4: no dimension merged or cut (3 * 4 > 4), so the numpy form applies.
    opt = shampoo.Shampoo(0.1, 4, beta2=0.9, matrix_epsilon=1e-3, start_preconditioning_step=2)
    state = opt.init(jnp.asarray(p0))
    for g in grads:
        state = opt.update(state, jnp.asarray(g))
    want = _np_shampoo(p0, grads, 0.1, 0.9, 0.9, 1e-3, start=2)
    np.testing.assert_allclose(np.asarray(opt.get_params(state)), want, rtol=2e-4, atol=2e-5)
    # The preconditioned step differs from plain SGD-with-momentum (the test can fail).
    sgd_like = _np_shampoo(p0, grads, 0.1, 0.9, 0.9, 1e-3, start=10)
    assert np.max(np.abs(want - sgd_like)) > 1e-3


def test_shampoo_blocks_and_merged_dims():
    assert shampoo.block_layout((3, 4, 5), 32, True, 4096)[0] == (12, 5)
    shape, blocks = shampoo.block_layout((10, 3), 4, False, 4096)
    assert shape == (10, 3) and len(blocks) == 3  # rows 0:4, 4:8, 8:10
    assert blocks[-1] == ((8, 10), (0, 3))
    assert shampoo.block_layout((5000, 2), 128, True, 4096) is None  # too large: grafted
    assert shampoo.block_layout((), 128, True, 4096) is None  # scalar: grafted
    # One step on a [6, 3] matrix cut into two [3, 3] blocks: each block is
    # preconditioned with its own statistics, the whole is rescaled to |G| (SGD graft).
    rng = np.random.default_rng(1)
    p0 = rng.normal(size=(6, 3)).astype(np.float32)
    g = rng.normal(size=(6, 3)).astype(np.float32)
    opt = shampoo.Shampoo(
        0.1, 3, beta2=0.9, matrix_epsilon=1e-3, start_preconditioning_step=0, nesterov=False
    )
    state = opt.update(opt.init({"w": jnp.asarray(p0)}), {"w": jnp.asarray(g)})
    pre = np.zeros((6, 3))
    for rows in (slice(0, 3), slice(3, 6)):
        gb = g[rows].astype(np.float64)
        left = _np_inv_root(0.9 * 1e-3 * np.eye(3) + 0.1 * gb @ gb.T, 4, 1e-3)
        right = _np_inv_root(0.9 * 1e-3 * np.eye(3) + 0.1 * gb.T @ gb, 4, 1e-3)
        pre[rows] = left @ gb @ right
    want = p0 - 0.1 * pre * np.linalg.norm(g) / np.linalg.norm(pre)
    np.testing.assert_allclose(np.asarray(opt.get_params(state)["w"]), want, rtol=2e-4, atol=2e-5)


def test_shampoo_library_constructor_and_errors():
    opt = shampoo.Shampoo(1e-4, 32, graft_type="rmsprop_normalized")
    assert opt.graft_type == shampoo.GraftingType.RMSPROP_NORMALIZED
    with pytest.raises(ValueError, match="graft_type"):
        shampoo.Shampoo(1e-4, 32, graft_type="lion")
    with pytest.raises(ValueError, match="block_size"):
        shampoo.Shampoo(1e-4, 0)
    assert "Shampoo" in opt_base.OPTIMIZERS


def test_shampoo_compiles_once_in_bf16_and_grafts_adagrad():
    params = {"w": jnp.ones((4, 3), jnp.bfloat16), "b": jnp.zeros((3,), jnp.bfloat16)}
    opt = shampoo.Shampoo(1e-2, 8, graft_type=shampoo.GraftingType.ADAGRAD)
    state = opt.init(params)
    step = jax.jit(lambda s, g: opt.update(s, g))
    grads = jax.tree_util.tree_map(lambda p: jnp.full(p.shape, 0.5, p.dtype), params)
    with count_compiles() as compiled:
        for _ in range(3):
            state = step(state, grads)
    assert len(compiled) == 1, compiled
    assert opt.get_params(state)["w"].dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(state.diagonal_statistics["w"]), 0.75)  # 3 * 0.25


# ----------------------------------------------------------- SimpleVecLOptTruncatedStep


def test_simple_vec_step_is_the_vectorized_step_with_a_constant_schedule():
    task = quadratics.QuadraticTask(3)
    lopt = lopt_base.LearnableSGD(0.1)
    simple = lopt_truncated_step.SimpleVecLOptTruncatedStep(task, lopt, 2, unroll_length=3)
    vec = lopt_truncated_step.VectorizedLOptTruncatedStep(
        tasks_base.single_task_to_family(task), lopt, tsched.ConstantTruncationSchedule(3), 2
    )
    key = jax.random.PRNGKey(0)
    theta = simple.outer_init(key)
    a = simple.init_step_state(theta, None, key)
    b = vec.init_step_state(theta, None, key)
    for i in range(4):
        k = jax.random.fold_in(key, i)
        a, out_a = simple.unroll_step(theta, a, k, simple.get_batch(), None)
        b, out_b = vec.unroll_step(theta, b, k, vec.get_batch(), None)
        np.testing.assert_array_equal(np.asarray(out_a.loss), np.asarray(out_b.loss))
    np.testing.assert_array_equal(
        np.asarray(a.inner_opt_state.params), np.asarray(b.inner_opt_state.params)
    )
    # Three steps, then a restart: after 4 steps every run is 1 step into its second run.
    np.testing.assert_array_equal(np.asarray(a.inner_step), [1, 1])
    assert simple.unroll_length == 3 and simple.task is task and simple.lopt is lopt
    with pytest.raises(ValueError, match="unroll_length"):
        lopt_truncated_step.SimpleVecLOptTruncatedStep(task, lopt, 2, unroll_length=0)


# ------------------------------------------------------- learner init from a checkpoint


def test_learner_state_round_trips_and_reset_outer_iteration(tmp_path):
    lopt = lopt_base.LearnableSGD(1.0)
    key = jax.random.PRNGKey(0)
    learner = gradient_learner.GradientLearner(lopt, opt_base.Adam(1e-2))
    state = jax.tree_util.tree_map(lambda x: x + 11, learner.init(key))
    path = tmp_path / "checkpoint.param"
    checkpoints.save_state(
        path, gradient_learner.OptCheckpoint(state, elapsed_time=1.0, total_inner_steps=2)
    )
    loaded = gradient_learner.GradientLearner(
        lopt, opt_base.Adam(1e-2), init_outer_state_from_path=path
    ).init(key)
    for x, y in zip(
        jax.tree_util.tree_leaves(loaded), jax.tree_util.tree_leaves(state), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    reset = gradient_learner.GradientLearner(
        lopt, opt_base.Adam(1e-2), init_outer_state_from_path=path, reset_outer_iteration=True
    ).init(key)
    assert int(reset.theta_opt_state.iteration) == 0 and int(reset.outer_iteration) == 0
    assert int(reset.num_nonfinite) == 11
    np.testing.assert_array_equal(  # theta and Adam's moments are kept
        np.asarray(reset.theta_opt_state.mu["log_lr"]),
        np.asarray(state.theta_opt_state.mu["log_lr"]),
    )
    assert float(reset.theta_opt_state.params["log_lr"]) == 11.0
    with pytest.raises(ValueError, match="reset_outer_iteration"):
        gradient_learner.GradientLearner(lopt, opt_base.Adam(1e-2), reset_outer_iteration=True)


# ------------------------------------------------------------ the library's test helpers


class _NanTask(tasks_base.Task):
    datasets = None

    def init(self, key):
        return {"w": jnp.ones((2,))}

    def loss(self, params, key, data):
        return jnp.sum(params["w"]) * jnp.nan


def test_library_test_helpers_pass_good_objects_and_catch_bad_ones():
    task_test_utils.smoketest_task(quadratics.QuadraticTask(3))
    task_test_utils.smoketest_task_family(quadratics.FixedDimQuadraticFamily(3))
    lopt_test_utils.smoketest_learned_optimizer(lopt_base.LearnableAdam())
    with pytest.raises(AssertionError, match="finite"):
        task_test_utils.smoketest_task(_NanTask())


# ------------------------------------------------- unroll_step: the library's shapes


def test_unroll_step_returns_the_library_shapes_with_vector_theta():
    task = quadratics.QuadraticTask(3)
    lopt = lopt_base.LearnableSGD(0.1)
    step = lopt_truncated_step.SimpleVecLOptTruncatedStep(task, lopt, 3, unroll_length=2)
    key = jax.random.PRNGKey(0)
    theta = jax.vmap(step.outer_init)(jax.random.split(key, 3))
    state = step.init_step_state(theta, None, key, True)
    iterations = []
    for i in range(3):
        state, out = step.unroll_step(theta, state, jax.random.fold_in(key, i), None, None, True)
        assert out.loss.shape == (3,) and out.mask.shape == (3,) and out.is_done.shape == (3,)
        iterations.append(np.asarray(out.iteration))
    # Steps 0 and 1 of the first runs, then step 0 of the restarted ones.
    np.testing.assert_array_equal(iterations, [[0] * 3, [1] * 3, [0] * 3])
    # The multi-step unroll keeps its steps axis.
    _, out = step.unroll(theta, state, key, None, 2, True)
    assert out.loss.shape == (2, 3)


# ---------------------------------------------- research.general_lopt.hyper_v2 path


def test_hyper_v2_at_the_library_research_path():
    from learnopt.learned_optimizers import hyper_v2 as lopt_hyper_v2
    from learnopt.research.general_lopt import hyper_v2

    assert hyper_v2.HyperV2 is lopt_hyper_v2.HyperV2
    assert hyper_v2.State is lopt_hyper_v2.HyperV2State
    assert hyper_v2.factored_dims((3, 5, 2)) == (0, 1) and hyper_v2.factored_dims((4,)) is None


# ------------------------------------------------------------ ImageNet 16x16 tasks


def _fake_imagenet16(folder, n_per_file=3, n_val=4, seed=0):
    """Writes the 11 npz files with tiny arrays; returns ``{split: (images, labels)}``.

    Image ``i`` of the train split has red pixel ``[0, 0]`` = ``i`` (its id) and blue
    pixel ``[15, 15]`` = 255 - ``i``, so the reader's channel layout is checked.
    """
    from learnopt.tasks.datasets import _sources

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = {"train": ([], []), "test": ([], [])}
    count = 0
    for fname in _sources.SPECS["imagenet16"].files:
        split = "test" if fname == "val_data.npz" else "train"
        n = n_val if split == "test" else n_per_file
        planes = rng.integers(0, 256, (n, 3, 16, 16), dtype=np.uint8)
        ids = np.arange(count, count + n)
        count += n
        planes[:, 0, 0, 0] = ids
        planes[:, 2, 15, 15] = 255 - ids
        labels = rng.integers(1, 1001, n)
        np.savez(folder / fname, data=planes.reshape(n, 768), labels=labels)
        out[split][0].append(planes.transpose(0, 2, 3, 1))
        out[split][1].append(labels - 1)
    return {k: (np.concatenate(x), np.concatenate(y)) for k, (x, y) in out.items()}


@pytest.fixture
def imagenet_dirs(tmp_path, monkeypatch):
    from learnopt.tasks.datasets import base as datasets_base

    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(tmp_path / "data"))
    monkeypatch.setenv(datasets_base.ENV_MANUAL_DIR, str(tmp_path / "manual"))
    return tmp_path


def test_imagenet16_missing_files_are_named(imagenet_dirs):
    from learnopt.tasks.datasets import base as datasets_base
    from learnopt.tasks.fixed import conv, image_mlp

    task = image_mlp.ImageMLP_Imagenet16_Relu256x256x256()  # no data needed to build it
    assert task.datasets.abstract_batch["image"].shape == (128, 16, 16, 3)
    assert task.datasets.extra_info["num_classes"] == 1000
    assert conv.Conv_imagenet16_16_64x128x128x128().abstract_batch["label"].shape == (128,)
    with pytest.raises(datasets_base.DatasetNotFoundError) as info:
        next(task.datasets.train)
    msg = str(info.value)
    assert "'imagenet16' is not available" in msg
    assert "train_data_batch_10.npz" in msg and "val_data.npz" in msg
    assert str(imagenet_dirs / "manual" / "imagenet16") in msg
    # A file that is not in the format is named.
    _fake_imagenet16(imagenet_dirs / "manual" / "imagenet16")
    bad = imagenet_dirs / "manual" / "imagenet16" / "train_data_batch_4.npz"
    np.savez(bad, data=np.zeros((2, 3072), np.uint8), labels=np.ones(2, np.int64))
    with pytest.raises(
        ValueError, match=r"train_data_batch_4\.npz: 'data' must be uint8 \[N, 768\]"
    ):
        datasets_base.prepare_dataset("imagenet16")


def test_imagenet16_from_placed_files_trains_one_step(imagenet_dirs, fast_jit):
    from learnopt.tasks.datasets import base as datasets_base
    from learnopt.tasks.fixed import image_mlp

    fake = _fake_imagenet16(imagenet_dirs / "manual" / "imagenet16")
    raw = datasets_base.load_split_arrays("imagenet16")
    for split in ("train", "test"):
        images, labels = raw[split]
        order = np.argsort(images[:, 0, 0, 0], kind="stable")  # ids of the fake images
        np.testing.assert_array_equal(images[order], fake[split][0])
        np.testing.assert_array_equal(labels[order], fake[split][1])
    assert (imagenet_dirs / "data" / "learnopt_imagenet16" / "1.0.0").is_dir()

    task = image_mlp.ImageMLP_Imagenet16_Relu256x256x256()
    batch = next(task.datasets.train)
    assert batch["image"].shape == (128, 16, 16, 3) and batch["image"].dtype == np.float32
    assert (
        batch["label"].shape == (128,) and 0 <= batch["label"].min() <= batch["label"].max() < 1000
    )
    assert {k: v.num_examples for k, v in task.datasets.splits.items()} == {
        "train": 24,
        "inner_valid": 3,
        "outer_valid": 3,
        "test": 4,
    }
    params = task.init(jax.random.PRNGKey(0))
    assert [params[k]["w"].shape for k in sorted(params)][-1] == (256, 1000)
    opt = opt_base.SGD(0.1)

    @fast_jit
    def train_step(state, key, batch):
        p = opt.get_params(state)
        loss, grads = jax.value_and_grad(task.loss)(p, key, batch)
        return opt.update(state, grads, loss=loss), loss

    state = opt.init(params)
    key = jax.random.PRNGKey(1)
    state, loss0 = train_step(state, key, batch)
    _, loss1 = train_step(state, key, batch)
    assert np.isfinite(loss0) and float(loss1) < float(loss0)
    assert abs(float(loss0) - np.log(1000)) < 1.0  # about chance at initialization


# ------------------------------------------------ task_augmentation.AsyncDelayedGradients


class _Bowl(tasks_base.Task):
    """``sum((p - 1)^2)`` on 2 params; no data."""

    datasets = None

    def init(self, key):
        return {"w": jnp.zeros((2,), jnp.float32)}

    def loss(self, params, key, data):
        return jnp.sum((params["w"] - 1.0) ** 2)


@pytest.mark.parametrize("delay_steps, staleness", [(1, 1), (3, 2)])
def test_async_delayed_gradients_are_the_gradients_at_stale_params(delay_steps, staleness):
    from learnopt.tasks import task_augmentation
    from learnopt.testing import TraceCounter

    task = task_augmentation.AsyncDelayedGradients(_Bowl(), delay_steps)
    params, state = task.init_with_state(jax.random.PRNGKey(0))
    counter = TraceCounter()

    @jax.jit
    @counter.wrap
    def loss_and_grad(p, s):
        (loss, s), g = jax.value_and_grad(task.loss_with_state, has_aux=True)(p, s, None, None)
        return loss, s, g

    sequence = [params] + [{"w": jnp.asarray([k, -k], jnp.float32)} for k in range(1, 6)]
    for k, p in enumerate(sequence):
        loss, state, grads = loss_and_grad(p, state)
        stale = sequence[max(0, k - staleness)]["w"]  # the buffer starts full of params 0
        np.testing.assert_allclose(float(loss), np.sum((np.asarray(stale) - 1) ** 2))
        np.testing.assert_allclose(np.asarray(grads["w"]), 2 * (np.asarray(stale) - 1))
    assert counter.count == 1 and int(state.count) == len(sequence)
    with pytest.raises(ValueError, match="loss_with_state"):
        task.loss(params, None, None)
    with pytest.raises(ValueError, match="delay_steps"):
        task_augmentation.AsyncDelayedGradients(_Bowl(), 0)
    family = task_augmentation.AsyncDelayedGradientsTaskFamily(
        tasks_base.single_task_to_family(_Bowl()), 2
    )
    member = family.task_fn(family.sample(jax.random.PRNGKey(1)))
    assert family.name.startswith("AsyncDelayedGradients_") and member.delay_steps == 2


# -------------------------------------------- parametric: cfgobject and SampleInitializer


def test_cfgobject_featurize_two_configs_many_and_do_not_featurize():
    from learnopt.tasks.parametric import cfgobject

    static = cfgobject.CFGObject("Obj", {"a": 3, "b": cfgobject.LogFeature(8.0)})
    dynamic = cfgobject.CFGObject("Obj", {"a": 5, "c": 0.5})
    ids, floats, ints = cfgobject.featurize(static, dynamic)
    # Paths /Obj/a (dynamic's value wins), /Obj/b, /Obj/c, sorted.
    assert ids.shape == (3, 8) and floats.shape == (3, 8) and ints.shape == (3,)
    np.testing.assert_array_equal(np.asarray(ints), [5, 0, 0])
    np.testing.assert_allclose(np.asarray(floats[:, 0]), [0, np.log(8.0), 0.5], rtol=1e-6)

    ids, floats, ints, mask = cfgobject.featurize_many(
        [static, dynamic, cfgobject.CFGObject("X", {"z": 1})]
    )
    assert ids.shape == (3, 2, 8) and floats.shape == (3, 2, 8) and ints.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(mask), [[1, 1], [1, 1], [1, 0]])
    assert not np.asarray(ids[2, 1]).any() and int(ints[2, 0]) == 1
    with pytest.raises(ValueError, match="max_length=1"):
        cfgobject.featurize_many([static], max_length=1)

    hidden = cfgobject.CFGObject(
        "Obj", {"a": cfgobject.DoNotFeaturize(1, ("meta",)), "b": cfgobject.DoNotFeaturize(2, "x")}
    )
    assert cfgobject.flatten_cfg(hidden, "meta") == {"/Obj/b": 2}
    assert cfgobject.flatten_cfg(hidden) == {"/Obj/a": 1, "/Obj/b": 2}
    assert cfgobject.featurize(hidden, feature_type="meta")[0].shape == (1, 8)
    again = cfgobject.deserialize_cfg(cfgobject.serialize_cfg(hidden))
    assert cfgobject.flatten_cfg(again, "meta") == {"/Obj/b": 2}


def test_object_from_config_asks_gin_only_when_the_program_imported_it(monkeypatch):
    import sys
    import types

    from learnopt.registry import UnknownNameError
    from learnopt.tasks.parametric import cfgobject

    class GinOnly:
        def __init__(self, param):
            self.param = param

    def get_configurable(name):
        if name == "GinOnly":
            return GinOnly
        raise ValueError(f"No configurable matching '{name}'")

    cfg = cfgobject.CFGObject("GinOnly", {"param": cfgobject.CFGObject("GinOnly", {"param": 7})})
    monkeypatch.delitem(sys.modules, "gin", raising=False)
    with pytest.raises(UnknownNameError, match="GinOnly"):
        cfgobject.object_from_config(cfg)
    monkeypatch.setitem(
        sys.modules, "gin", types.SimpleNamespace(get_configurable=get_configurable)
    )
    obj = cfgobject.object_from_config(cfg)
    assert isinstance(obj, GinOnly) and obj.param.param == 7 and obj.cfg is cfg
    with pytest.raises(UnknownNameError, match="Nowhere"):
        cfgobject.object_from_config(cfgobject.CFGObject("Nowhere", {}))


def test_sample_initializer_takes_haiku_calls_too(monkeypatch):
    import sys
    import types

    from learnopt.tasks.parametric import parametric_utils

    key = jax.random.PRNGKey(3)
    cfg = parametric_utils.SampleInitializer.sample(jax.random.PRNGKey(0))
    init = parametric_utils.SampleInitializer.get_dynamic(cfg)
    flax_style = init(key, (3, 2), jnp.float32)
    monkeypatch.delitem(sys.modules, "haiku", raising=False)
    with pytest.raises(TypeError, match="Haiku"):
        init([3, 2], jnp.float32)
    monkeypatch.setitem(sys.modules, "haiku", types.SimpleNamespace(next_rng_key=lambda: key))
    haiku_style = init([3, 2], jnp.bfloat16)  # key from hk.next_rng_key(), as in the library
    assert haiku_style.dtype == jnp.bfloat16
    np.testing.assert_allclose(
        np.asarray(haiku_style, np.float32),
        np.asarray(flax_style.astype(jnp.bfloat16), np.float32),
    )


# --------------------------------------------------- names research code imports (muLO's)


def test_module_level_names_research_code_imports_exist_with_the_library_meaning():
    import learnopt.optimizers as optimizers
    from learnopt.learned_optimizers import adafac_mlp_lopt, mlp_lopt

    # learned_optimization.optimizers re-exports base's and optax_opts' names.
    assert optimizers.OptaxOptimizer is opt_base.OptaxOptimizer
    assert optimizers.Adam is opt_base.Adam and optimizers.SM3 is not None
    assert opt_base.Gradient is not None and lopt_base.MetaParams is not None
    assert lopt_base.PRNGKey is jax.Array is adafac_mlp_lopt.PRNGKey is mlp_lopt.PRNGKey
    # The library: decay_to_param(x) = log(1 - x) / 10, param_to_decay its inverse.
    np.testing.assert_allclose(adafac_mlp_lopt.decay_to_param(0.9), np.log(0.1) / 10, rtol=1e-6)
    np.testing.assert_allclose(adafac_mlp_lopt.param_to_decay(np.log(0.1) / 10), 0.9, rtol=1e-6)
    # tanh(t / s - 1) over the 11 timescales 1 ... 100000.
    emb = np.asarray(adafac_mlp_lopt.tanh_embedding(jnp.asarray(30)))
    assert emb.shape == (11,) and emb[3] == pytest.approx(0.0) and emb[0] > 0.99
    np.testing.assert_array_equal(emb, mlp_lopt._tanh_embedding(jnp.asarray(30)))
    x = jnp.asarray([[3.0, 4.0]])
    np.testing.assert_allclose(
        mlp_lopt._second_moment_normalizer(x, axis=1),
        adafac_mlp_lopt.second_moment_normalizer(x, axis=1),
    )
    np.testing.assert_allclose(
        adafac_mlp_lopt.second_moment_normalizer(x, axis=1), x / np.sqrt(12.5 + 1e-5), rtol=1e-6
    )


def test_a_model_state_of_python_numbers_passes_through_every_step():
    # muLO keeps its per-tensor muP multipliers as Python floats in the model state.
    opt = opt_base.Adam(1e-2)
    params = {"w": jnp.ones(3)}
    model_state = {"mup_lrs_to_use": {"w": 1.0}, "flag": True}
    state = opt.init(params, model_state=model_state)
    step = jax.jit(lambda s: opt.update(s, {"w": jnp.ones(3)}, model_state=model_state))
    state = step(step(state))
    np.testing.assert_allclose(opt.get_params(state)["w"], 1 - 2e-2, rtol=1e-5)
    assert float(opt.get_state(state)["mup_lrs_to_use"]["w"]) == 1.0


def test_library_image_dataset_path_gives_learnopts_constructors():
    from learnopt.tasks.datasets import base, image

    assert image.mnist_datasets is base.mnist_datasets
    assert image.cifar10_datasets is base.cifar10_datasets
    with pytest.raises(AttributeError, match="svhn_cropped_datasets has no learnopt counterpart"):
        image.svhn_cropped_datasets  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        image.nope  # noqa: B018
