"""Bad input gets a ValueError/TypeError naming the argument and what is expected.

One test per class of bad input (the table in docs/reliability.md points here), and
property-based tests (hypothesis): constructors and updates over arbitrary hyperparameters
and random pytrees either succeed with finite results or raise ValueError/TypeError.
"""

from __future__ import annotations

import math
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from learnopt import _validate, checkpoints, train
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import (
    gradient_estimator,
    gradient_learner,
    lopt_truncated_step,
    noise_reuse_es,
    truncated_es,
    truncated_grad,
    truncated_pes,
    truncation_schedule,
)
from learnopt.run import build as run_build
from learnopt.run import settings as run_settings
from learnopt.tasks import base as tasks_base
from learnopt.tasks import quadratics
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed import _common as fixed_common
from learnopt.tasks.fixed import image_mlp

PROPERTY = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
NAN, INF = float("nan"), float("inf")


# ------------------------------------------------------------------ classes of bad input


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: opt_base.SGD(-0.1), ValueError, "learning_rate must be a finite number > 0"),
        (lambda: opt_base.Adam(NAN), ValueError, "learning_rate must be a finite number > 0"),
        (lambda: opt_base.SGD("0.1"), TypeError, "learning_rate must be a real number"),
        (lambda: lopt_base.LearnableAdam(initial_lr=0), ValueError, "initial_lr must be"),
    ],
)
def test_learning_rates(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: opt_base.Adam(beta1=1.0), r"beta1 must be a finite number in \[0, 1\)"),
        (lambda: opt_base.Adam(beta2=-0.1), r"beta2 must be a finite number in \[0, 1\)"),
        (lambda: opt_base.SGDM(momentum=1.5), r"momentum must be a finite number in \[0, 1\)"),
        (lambda: opt_base.RMSProp(decay=INF), r"decay must be a finite number in \[0, 1\)"),
        (lambda: opt_base.AdamW(1e-3, b1=2.0), r"b1 must be a finite number in \[0, 1\)"),
        (lambda: lopt_base.LearnableAdam(initial_beta2=1.0), "initial_beta2 must be"),
        (lambda: lopt_base.LearnableSGDM(initial_momentum=-1), "initial_momentum must be"),
    ],
)
def test_betas(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: opt_base.Adam(epsilon=-1e-8), "epsilon must be a finite number >= 0"),
        (lambda: opt_base.Adam(epsilon_root=NAN), "epsilon_root must be a finite number >= 0"),
        (lambda: opt_base.RMSProp(epsilon=INF), "epsilon must be a finite number >= 0"),
        (lambda: lopt_base.LearnableAdam(initial_epsilon=0.0), "initial_epsilon must be"),
    ],
)
def test_epsilons(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_std_and_clip_norms():
    task, lopt = quadratics.QuadraticTask(), lopt_base.LearnableSGD()
    for std in (0.0, -1.0, INF, NAN):
        with pytest.raises(ValueError, match="std must be a finite number > 0"):
            run_build.make_estimator("pes", task, lopt, std=std)
    for norm in (0.0, INF):
        with pytest.raises(ValueError, match="max_grad_norm must be a finite number > 0"):
            gradient_learner.GradientLearner(lopt, opt_base.Adam(), max_grad_norm=norm)
    with pytest.raises(ValueError, match="grad_clip must be a finite number > 0"):
        opt_base.GradientClipOptimizer(opt_base.SGD(), grad_clip=-3.0)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: truncation_schedule.ConstantTruncationSchedule(0),
            ValueError,
            "total_length must be an integer >= 1, got 0",
        ),
        (
            lambda: truncation_schedule.ConstantTruncationSchedule(2.5),
            TypeError,
            "total_length must be an integer, got 2.5",
        ),
        (
            lambda: lopt_truncated_step.VectorizedLOptTruncatedStep(
                quadratics.QuadraticTask(),
                lopt_base.LearnableSGD(),
                truncation_schedule.ConstantTruncationSchedule(4),
                num_tasks=0,
            ),
            ValueError,
            "num_tasks must be an integer >= 1, got 0",
        ),
        (
            lambda: run_build.make_estimator(
                "tes", quadratics.QuadraticTask(), lopt_base.LearnableSGD(), trunc_length=0
            ),
            ValueError,
            r"trunc_length \(inner steps per estimate\) must be an integer >= 1",
        ),
        (
            lambda: gradient_learner.GradientLearner(
                lopt_base.LearnableSGD(), opt_base.Adam(), num_steps=-1
            ),
            ValueError,
            "num_steps must be an integer >= 1",
        ),
    ],
)
def test_counts(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    "estimator",
    [
        truncated_grad.TruncatedGrad,
        truncated_es.TruncatedES,
        truncated_pes.TruncatedPES,
        noise_reuse_es.NoiseReuseES,
    ],
)
def test_truncations_longer_than_the_inner_runs(estimator):
    def step(schedule):
        return lopt_truncated_step.VectorizedLOptTruncatedStep(
            quadratics.QuadraticTask(), lopt_base.LearnableSGD(), schedule, num_tasks=2
        )

    five = truncation_schedule.ConstantTruncationSchedule(5)
    with pytest.raises(
        ValueError,
        match=r"trunc_length=10 .* longer than the inner runs of "
        r"ConstantTruncationSchedule\(5\) \(at most 5 steps\)",
    ):
        estimator(step(five), trunc_length=10)
    with pytest.raises(ValueError, match=r"LogUniformLengthSchedule\(2, 5\) \(at most 5 steps\)"):
        estimator(step(truncation_schedule.LogUniformLengthSchedule(2, 5)), trunc_length=6)
    assert estimator(step(five), trunc_length=5).trunc_length == 5  # a whole run fits
    # A schedule without a static bound is not checked.
    unbounded = truncation_schedule.ScheduledTruncationSchedule(lambda it: 3)
    assert estimator(step(unbounded), trunc_length=10).trunc_length == 10


def test_theta_that_does_not_fit_its_learned_optimizer(tmp_path):
    lopt = lopt_base.LearnableAdam()
    theta = lopt.init(jax.random.PRNGKey(0))
    bad = {
        r"missing \['log_lr'\]": {k: v for k, v in theta.items() if k != "log_lr"},
        r"unexpected \['extra'\]": dict(theta, extra=jnp.float32(0)),
        r"wrong shape \['log_lr'\] \[2\] \(expected \[\]\)": dict(theta, log_lr=jnp.zeros(2)),
    }
    for message, t in bad.items():
        with pytest.raises(ValueError, match=rf"theta does not fit LearnableAdam: {message}"):
            lopt.opt_fn(t)
    with pytest.raises(TypeError, match="theta must be a dict with keys"):
        lopt_base.LearnableSGD().opt_fn([jnp.float32(0)])
    # Also under jit (the check is on shapes).
    with pytest.raises(ValueError, match="missing"):
        jax.jit(lambda t: lopt.opt_fn(t).learning_rate)(bad[r"missing \['log_lr'\]"])
    # A theta file of another learned optimizer, read into this one's structure.
    path = checkpoints.save_theta(tmp_path / "sgd.msgpack", {"log_lr": jnp.float32(-3)})
    with pytest.raises(ValueError, match=r"sgd.msgpack does not fit the target: missing"):
        checkpoints.load_theta(path, target=theta)


def _digits_like_task(tmp_path):
    rng = np.random.default_rng(0)
    splits = {
        "train": (rng.integers(0, 255, (40, 8, 8, 1), dtype=np.uint8), np.arange(40) % 10),
        "test": (rng.integers(0, 255, (10, 8, 8, 1), dtype=np.uint8), np.arange(10)),
    }
    ds = datasets_base.datasets_from_arrays(splits, batch_size=4)
    return image_mlp.ImageMLPTask(ds, (8,)), splits


def test_labels_out_of_range_and_uint8_images(tmp_path):
    task, splits = _digits_like_task(tmp_path)
    params = task.init(jax.random.PRNGKey(0))
    batch = next(task.datasets.train)
    assert np.isfinite(float(task.loss(params, None, batch)))
    with pytest.raises(ValueError, match=r"batch\['label'\] must be in \[0, 10\), got values"):
        task.loss(params, None, dict(batch, label=np.array([0, 1, 2, 10])))
    with pytest.raises(TypeError, match=r"batch\['image'\] must be floating-point images"):
        task.loss(params, None, dict(batch, image=(batch["image"] * 255).astype(np.uint8)))
    with pytest.raises(TypeError, match=r"batch\['label'\] must be integer class labels"):
        task.loss(params, None, dict(batch, label=batch["label"].astype(np.float32)))
    bad = dict(splits, test=(splits["test"][0], np.full(10, -1)))
    with pytest.raises(ValueError, match=r"splits\['test'\] labels must be in \[0, 10\)"):
        datasets_base.datasets_from_arrays(bad, batch_size=4, num_classes=10)
    floats = dict(splits, train=(splits["train"][0] * 2.0, splits["train"][1]))
    with pytest.raises(ValueError, match="images must be uint8 pixels or floats in"):
        datasets_base.datasets_from_arrays(floats, batch_size=4)


def test_labels_out_of_range_as_jax_arrays_or_lists_in_every_kind_of_image_task(tmp_path):
    task, _ = _digits_like_task(tmp_path)
    ds = task.datasets
    flax_task = fixed_common.ImageClassifierTask(
        lambda: fixed_common.MLP((8, 10)), ds, image_shape=(8, 8, 1), num_classes=10, batch_size=4
    )
    norm_task = image_mlp.ImageMLPNormTask(ds, (8,), "layer_norm")
    batch = next(ds.train)
    for t in (task, norm_task, flax_task):
        params = t.init(jax.random.PRNGKey(0))
        assert np.isfinite(float(t.loss(params, jax.random.PRNGKey(0), batch)))
        for label in (jnp.array([0, 1, 2, 10]), [0, 1, 2, 10], jnp.array([-1, 0, 1, 2])):
            with pytest.raises(ValueError, match=r"batch\['label'\] must be in \[0, 10\), got"):
                t.loss(params, jax.random.PRNGKey(0), dict(batch, label=label))
        with pytest.raises(TypeError, match=r"batch\['label'\] must be integer class labels"):
            t.loss(params, jax.random.PRNGKey(0), dict(batch, label=[0.5, 1, 2, 3]))
        # Traced labels cannot raise: jit computes some number (documented in reliability.md).
        jax.jit(t.loss)(params, jax.random.PRNGKey(0), dict(batch, label=np.array([0, 1, 2, 10])))


def test_loss_that_is_not_a_scalar():
    class VectorLoss(quadratics.QuadraticTask):
        def loss(self, params, key, data):
            return jnp.square(params)  # forgot the sum

    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        VectorLoss(), lopt_base.LearnableSGD(), truncation_schedule.ConstantTruncationSchedule(2), 1
    )
    est = gradient_estimator.ESTIMATORS.constructor("FullGrad")(step)
    theta = lopt_base.LearnableSGD().init(None)
    state = est.init_worker_state(theta, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"the loss of task .* must be a scalar \(shape \(\)\)"):
        est.compute_gradient_estimate(theta, jax.random.PRNGKey(1), state, est.get_datas())


def test_invalid_prng_keys():
    learner = train.build_learner(task="QuadraticTask")
    for key, error in ((0, TypeError), (jnp.zeros(3), TypeError), ("key", TypeError)):
        with pytest.raises(error, match="key must be a PRNG key"):
            learner.init(key)
    state = learner.init(jax.random.PRNGKey(0))
    with pytest.raises(TypeError, match=r"key must be a PRNG key .*got float32\[2\]"):
        learner.update(state, jnp.zeros(2))
    assert learner.update(state, jax.random.key(1))[0] is not None  # typed keys are fine


def test_corrupted_truncated_and_mismatched_checkpoints(tmp_path, request):
    out = tmp_path / "run"
    result = train.meta_train(
        task="QuadraticTask", steps=2, out_dir=out, progress=False, plots=False
    )
    ck = checkpoints.RunCheckpointer(out / "checkpoints")
    request.addfinalizer(ck.close)
    step_dir = ck.path(2)
    # Mismatched: the state of another learned optimizer.
    other = train.build_learner(task="QuadraticTask", lopt="LearnableSGD")
    with pytest.raises(checkpoints.CheckpointError, match=rf"{step_dir} does not match"):
        ck.restore(other.init(jax.random.PRNGKey(0)))
    with pytest.raises(ValueError, match="lopt='LearnableSGD' differs from the run's"):
        train.meta_train(out_dir=out, resume=True, lopt="LearnableSGD")
    # Truncated: every array file of the checkpoint cut in half.
    for f in (step_dir / "state").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(checkpoints.CheckpointError, match=rf"checkpoint {step_dir} cannot be"):
        ck.restore(result.state)
    # Corrupted metadata.
    (step_dir / "meta" / "metadata").write_text("{not json")
    with pytest.raises(checkpoints.CheckpointError, match=str(step_dir)):
        train.meta_train(out_dir=out, resume=True)
    # A corrupted theta file.
    (out / "theta.msgpack").write_bytes(b"\x92garbage")
    with pytest.raises(ValueError, match=r"theta.msgpack is not a msgpack checkpoint"):
        checkpoints.load_theta(out / "theta.msgpack")


def test_data_dirs_that_are_files_or_corrupted(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(ValueError, match=r"data_dir: .*file is a file, expected a directory"):
        train.meta_train(data_dir=file, progress=False)
    data = tmp_path / "data"
    datasets_base.prepare_dataset("digits8", data)
    for f in (data / "learnopt_digits8").rglob("*train.array_record*"):
        f.write_bytes(f.read_bytes()[:1000] + b"\0" * 100)
    datasets_base.clear_cache()
    try:
        with pytest.raises(train.DataUnavailableError, match=rf"from the data dir {data}"):
            train.meta_train(data_dir=data, steps=1, progress=False)
    finally:
        datasets_base.clear_cache()
        shutil.rmtree(data)


# ----------------------------------------------------------------- property-based tests

ANY_VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.floats(), max_size=2),
)
CHECKS = [
    lambda v: _validate.positive_float("x", v),
    lambda v: _validate.non_negative_float("x", v),
    lambda v: _validate.unit_interval("x", v),
    lambda v: _validate.positive_int("x", v),
    lambda v: _validate.seed("x", v),
    lambda v: _validate.prng_key("x", v),
    lambda v: run_settings.check_setting("outer_lr", v),
    lambda v: run_settings.check_option("steps", v),
]


@PROPERTY
@given(value=ANY_VALUE, check=st.sampled_from(CHECKS))
def test_checks_return_or_raise_value_or_type_errors(value, check):
    try:
        check(value)
    except (ValueError, TypeError) as e:
        assert str(e).startswith("x ") or str(e).split()[0] in ("outer_lr", "steps"), str(e)


def _pytrees():
    leaf = st.integers(0, 3).flatmap(
        lambda n: st.lists(
            st.floats(-100, 100, allow_nan=False, width=32), min_size=n, max_size=n
        ).map(lambda xs: np.asarray(xs, np.float32))
    )
    return st.recursive(
        leaf,
        lambda kids: st.dictionaries(st.sampled_from("abc"), kids, min_size=1, max_size=3),
        max_leaves=4,
    ).filter(lambda t: isinstance(t, dict))


OPTIMIZERS = {
    "SGD": (opt_base.SGD, {"learning_rate": "lr"}),
    "SGDM": (opt_base.SGDM, {"learning_rate": "lr", "momentum": "beta"}),
    "Adam": (
        opt_base.Adam,
        {"learning_rate": "lr", "beta1": "beta", "beta2": "beta", "epsilon": "eps"},
    ),
    "RMSProp": (
        opt_base.RMSProp,
        {"learning_rate": "lr", "decay": "beta", "epsilon": "eps", "momentum": "beta"},
    ),
    "AdamW": (
        opt_base.AdamW,
        {"learning_rate": "lr", "b1": "beta", "b2": "beta", "eps": "eps", "weight_decay": "eps"},
    ),
}
SANE = {
    "lr": st.floats(1e-6, 10.0),
    "beta": st.floats(0.0, 0.9999),
    "eps": st.floats(0.0, 1.0),
}


@PROPERTY
@given(name=st.sampled_from(sorted(OPTIMIZERS)), data=st.data())
def test_optimizer_constructors_accept_valid_or_raise(name, data):
    cls, args = OPTIMIZERS[name]
    kwargs = {a: data.draw(st.one_of(ANY_VALUE, SANE[kind]), label=a) for a, kind in args.items()}
    try:
        cls(**kwargs)
    except (ValueError, TypeError) as e:
        assert any(a in str(e) for a in kwargs), str(e)
        return
    for a, kind in args.items():  # constructed: every value is a valid one
        v = kwargs[a]
        assert isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        assert v > 0 if kind == "lr" else v >= 0
        if kind == "beta":
            assert v < 1


@PROPERTY
@given(name=st.sampled_from(sorted(OPTIMIZERS)), params=_pytrees(), data=st.data())
def test_updates_on_random_pytrees_are_finite(name, params, data):
    cls, args = OPTIMIZERS[name]
    opt = cls(**{a: data.draw(SANE[kind], label=a) for a, kind in args.items()})
    grads = jax.tree.map(lambda p: np.cos(p) * 10, params)
    state = opt.init(params)
    for _ in range(2):
        state = opt.update(state, grads, loss=jnp.float32(1.0))
    new = opt.get_params(state)
    assert jax.tree.structure(new) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(params), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.all(np.isfinite(a))


@pytest.fixture(scope="module")
def learnable_adam_step():
    lopt = lopt_base.LearnableAdam()
    params = {"w": jnp.array([1.0, -2.0, 0.5, 3e-3]), "b": jnp.zeros(())}

    def run(theta):
        opt = lopt.opt_fn(theta)

        def body(s, i):
            g = jax.tree.map(lambda p: 2 * p + jnp.sin(i * 1.0), opt.get_params(s))
            return opt.update(s, g, jnp.float32(1.0)), None

        s, _ = jax.lax.scan(body, opt.init(params), jnp.arange(20))
        return sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(opt.get_params(s)))

    return jax.jit(jax.value_and_grad(run))


@PROPERTY
@given(
    theta=st.fixed_dictionaries(
        {
            "log_lr": st.floats(-30.0, 0.0, width=32),
            "log_epsilon": st.floats(-80.0, 0.0, width=32),
            "one_minus_beta1": st.floats(-300.0, 50.0, width=32),
            "one_minus_beta2": st.floats(-300.0, 50.0, width=32),
        }
    )
)
def test_learnable_adam_is_finite_for_any_reachable_theta(theta, learnable_adam_step):
    """Values and meta-gradients stay finite, betas arbitrarily close to 1 included."""
    value, grads = learnable_adam_step({k: jnp.float32(v) for k, v in theta.items()})
    assert np.isfinite(float(value))
    assert all(np.isfinite(float(g)) for g in grads.values()), grads


def test_learnable_adam_matches_adam_where_beta_is_representable():
    lopt = lopt_base.LearnableAdam(initial_lr=1e-2, initial_beta1=0.8, initial_beta2=0.99)
    adam = opt_base.Adam(1e-2, beta1=0.8, beta2=0.99, epsilon=1e-8)
    params = {"w": jnp.array([1.0, -2.0, 0.5])}
    a, b = lopt.opt_fn(lopt.init(None)), adam
    sa, sb = a.init(params), b.init(params)
    for i in range(10):
        g = {"w": jnp.array([0.3, -1.0, 2.0]) * (i + 1)}
        sa, sb = a.update(sa, g, jnp.float32(0)), b.update(sb, g, jnp.float32(0))
    np.testing.assert_allclose(sa.params["w"], sb.params["w"], rtol=2e-6)


def test_registered_tasks_are_untouched_by_validation():
    # The checks run on shapes and numpy values only: a registered task's jitted loss
    # still traces with abstract batches.
    task = tasks_base.get_task("ImageMLP_Digits8_Relu32")
    params = jax.eval_shape(task.init, jax.random.PRNGKey(0))
    out = jax.eval_shape(task.loss, params, jax.random.PRNGKey(0), task.datasets.abstract_batch)
    assert out.shape == ()


def test_empty_params_and_empty_leaves_get_a_named_error():
    lopt = lopt_base.get_learned_optimizer("MLPLOpt")
    learned = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    for opt in (learned, opt_base.Adam(1e-3)):
        with pytest.raises(ValueError, match=r"params has no arrays to optimize \(got \{\}\)"):
            opt.init({})
    params = {"w": jnp.zeros((0, 3)), "b": jnp.zeros((3,))}
    with pytest.raises(ValueError, match=r"params leaf \['w'\] has no elements \(shape \(0, 3\)\)"):
        learned.init(params, num_steps=10)
    state = opt_base.Adam(1e-3).init(params)  # a hand-designed rule has nothing to normalize
    new = opt_base.Adam(1e-3).update(state, {"w": jnp.zeros((0, 3)), "b": jnp.ones((3,))})
    assert opt_base.Adam(1e-3).get_params(new)["w"].shape == (0, 3)
