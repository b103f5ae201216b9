"""Tests for learnopt.evaluation: sweeps as one program, fair data, tuned baselines, summaries."""

from __future__ import annotations

import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt import evaluation, testing
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base
from learnopt.tasks import quadratics
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed import image_mlp

STEPS = 12
EVERY = 4
SEEDS = 2
LRS = (1e-3, 1e-2, 1e-1)


# ------------------------------------------------------------------------------ tasks


class _Counter:
    """Batch ``i`` of the stream is ``{"x": [i, i]}``; ``take`` stacks like ``next``."""

    def __init__(self, offset: float = 0.0):
        self.position = 0
        self.offset = offset

    def __next__(self):
        return {"x": self._values(1)[0]}

    def take(self, *shape):
        count = math.prod(shape)
        values = self._values(count)
        return {"x": values.reshape(*shape, 2)}

    def _values(self, count):
        idx = np.arange(self.position, self.position + count, dtype=np.float32) + self.offset
        self.position += count
        return np.repeat(idx[:, None], 2, axis=1)


class RecordingTask(tasks_base.Task):
    """Loss = mean of the batch (plus a zero-gradient term): the curves record the data."""

    def __init__(self):
        self.datasets = types.SimpleNamespace(
            train=_Counter(),
            inner_valid=_Counter(500.0),
            outer_valid=_Counter(1000.0),
            test=_Counter(2000.0),
        )

    def init(self, key):
        return {"w": jax.random.normal(key, (3,))}

    def loss(self, params, key, batch):
        return jnp.mean(batch["x"]) + 0.0 * jnp.sum(jnp.square(params["w"]))


class CountingStateTask(tasks_base.Task):
    """A model state that counts steps; the loss is the count (params get no gradient)."""

    datasets = None

    def init_with_state(self, key):
        return {"w": jnp.zeros((2,))}, jnp.zeros((), jnp.float32)

    def loss_with_state(self, params, state, key, batch):
        return state + 0.0 * jnp.sum(params["w"]), state + 1


def _tiny_image_task(seed: int = 0) -> image_mlp.ImageMLPTask:
    """A 4x4 two-class image MLP on in-memory data (no disk, fast to compile)."""
    rng = np.random.default_rng(seed)
    splits = {}
    for name, n in (("train", 96), ("test", 32)):
        labels = rng.integers(0, 2, n).astype(np.int32)
        images = rng.uniform(0, 0.5, (n, 4, 4, 1)).astype(np.float32)
        images[labels == 1, :2] += 0.5  # a learnable signal
        splits[name] = (images, labels)
    ds = datasets_base.datasets_from_arrays(splits, batch_size=8, num_classes=2)
    return image_mlp.ImageMLPTask(ds, hidden_sizes=(4,), name="TinyImageMLP")


@pytest.fixture(scope="module")
def sweep_result():
    """Adam over 3 learning rates and a fixed Adam at the middle one, in lockstep."""
    sweeps = [
        evaluation.lr_sweep("Adam", LRS),
        evaluation.optimizer_sweep(opt_base.Adam(learning_rate=LRS[1]), name="fixed"),
    ]
    with testing.count_compiles() as names:
        result = evaluation.evaluate_task(
            _tiny_image_task(), sweeps, num_steps=STEPS, num_seeds=SEEDS, eval_every=EVERY
        )
    return result, names


# ------------------------------------------------------------------------- training


def test_sweep_compiles_once_per_sweep_for_all_chunks(sweep_result):
    result, names = sweep_result
    assert result.num_steps == STEPS and STEPS // EVERY == 3  # three chunks
    assert names.count("_train_chunk") == 2  # one program per sweep, reused by every chunk
    assert names.count("_init_runs") == 2


def test_curves_have_sweep_seed_and_step_axes(sweep_result):
    result, _ = sweep_result
    adam = result["Adam"]
    assert adam.train_loss.shape == (len(LRS), SEEDS, STEPS)
    assert adam.train_loss.dtype == np.float32
    assert adam.valid_steps.tolist() == [0, 4, 8, 12]
    assert adam.valid_loss.shape == (len(LRS), SEEDS, 4)
    assert np.all(np.isfinite(adam.train_loss))
    # Different learning rates train differently; different seeds see different data.
    assert not np.allclose(adam.train_loss[0], adam.train_loss[2])
    assert not np.allclose(adam.train_loss[1, 0], adam.train_loss[1, 1])


def test_sweep_point_equals_the_same_optimizer_run_alone(sweep_result):
    result, _ = sweep_result
    np.testing.assert_allclose(result["fixed"].train_loss[0], result["Adam"].train_loss[1], 1e-5)
    np.testing.assert_allclose(result["fixed"].valid_loss[0], result["Adam"].valid_loss[1], 1e-5)


def test_evaluating_tuned_adam_as_a_learned_optimizer_reproduces_the_baseline(sweep_result):
    """The sanity check: Adam at its tuned lr, as a LearnableAdam theta, in a new run."""
    result, _ = sweep_result
    summary = evaluation.summarize_task(result, "fixed", ["Adam"])
    best = summary.baselines["Adam"]
    lr = LRS[best.index]
    adam = opt_base.Adam()
    lopt = lopt_base.LearnableAdam(
        initial_lr=lr,
        initial_epsilon=adam.epsilon,
        initial_beta1=adam.beta1,
        initial_beta2=adam.beta2,
    )
    again = evaluation.evaluate_task(
        _tiny_image_task(),  # fresh task: the same data stream as the baseline saw
        [evaluation.learned_sweep(lopt, lopt.init(jax.random.PRNGKey(0)))],
        num_steps=STEPS,
        num_seeds=SEEDS,
        eval_every=EVERY,
    )
    curves = again["LearnableAdam"]
    np.testing.assert_allclose(curves.train_loss[0], result["Adam"].train_loss[best.index], 1e-4)
    result.curves["LearnableAdam"] = curves
    try:
        s = evaluation.summarize_task(result, "LearnableAdam", ["Adam"])
    finally:
        del result.curves["LearnableAdam"]
    assert s.comparisons["Adam"].normalized_loss == pytest.approx(1.0, rel=1e-4)
    assert s.comparisons["Adam"].speedup == pytest.approx(1.0)


def test_runs_one_after_another_match_batched_runs(sweep_result):
    result, _ = sweep_result
    with testing.count_compiles() as names:
        mapped = evaluation.evaluate_task(
            _tiny_image_task(),
            [evaluation.lr_sweep("Adam", LRS)],
            num_steps=STEPS,
            num_seeds=SEEDS,
            eval_every=EVERY,
            vectorize="map",
        )
    assert names.count("_train_chunk") == 1
    np.testing.assert_allclose(mapped["Adam"].train_loss, result["Adam"].train_loss, 1e-5)
    np.testing.assert_allclose(mapped["Adam"].valid_loss, result["Adam"].valid_loss, 1e-5)


class _TinyConvTask(tasks_base.Task):
    datasets = None

    def init(self, key):
        return jax.random.normal(key, (3, 3, 1, 2))

    def loss(self, params, key, batch):
        x = jnp.ones((1, 5, 5, 1))
        y = jax.lax.conv_general_dilated(
            x, params, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return jnp.mean(jnp.square(y))


class _TinyLoopTask(tasks_base.Task):
    datasets = None

    def init(self, key):
        return jax.random.normal(key, (2, 2))

    def loss(self, params, key, batch):
        h, _ = jax.lax.scan(lambda h, _: (jnp.tanh(params @ h), None), jnp.ones(2), None, 3)
        return jnp.sum(jnp.square(h))


@pytest.mark.parametrize(
    "task, sequential",
    [(_TinyConvTask(), True), (_TinyLoopTask(), True), (RecordingTask(), False)],
)
def test_auto_vectorize_batches_only_matrix_product_losses_on_cpu(task, sequential):
    ev = evaluation.TaskEvaluator(
        task, [evaluation.lr_sweep("SGD", (0.01, 0.02))], num_steps=2, num_seeds=2
    )
    result = ev.run()
    assert ev._sequential is (sequential and jax.default_backend() == "cpu")
    assert np.all(np.isfinite(result["SGD"].train_loss))


def test_each_seed_has_its_own_batches_the_same_for_every_optimizer():
    sweeps = [evaluation.lr_sweep("SGD", (0.1, 0.2)), evaluation.lr_sweep("Adam", (0.1,))]
    result = evaluation.evaluate_task(
        RecordingTask(), sweeps, num_steps=6, num_seeds=3, eval_every=4, valid_batches=2
    )
    # Step t of seed s is batch t * seeds + s of the train stream.
    expected = np.arange(6)[None, :] * 3 + np.arange(3)[:, None]
    for name, size in (("SGD", 2), ("Adam", 1)):
        curves = result[name]
        np.testing.assert_array_equal(curves.train_loss, np.broadcast_to(expected, (size, 3, 6)))
        # Valid: the first 2 batches of outer_valid, fixed for every evaluation.
        assert curves.valid_steps.tolist() == [0, 4, 6]  # the last chunk is shorter
        np.testing.assert_array_equal(curves.valid_loss, np.full((size, 3, 3), 1000.5))


def test_valid_split_is_configurable():
    result = evaluation.evaluate_task(
        RecordingTask(),
        [evaluation.lr_sweep("SGD", (0.1,))],
        num_steps=2,
        num_seeds=1,
        valid_split="test",
        valid_batches=3,
    )
    assert result.valid_split == "test"
    np.testing.assert_array_equal(result["SGD"].valid_loss, 2001.0)


def test_same_task_name_gives_identical_runs():
    sweeps = [evaluation.lr_sweep("Adam", (0.05,))]
    runs = [
        evaluation.evaluate_task("QuadraticTask", sweeps, num_steps=5, num_seeds=2)
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0]["Adam"].train_loss, runs[1]["Adam"].train_loss)
    assert runs[0]["Adam"].valid_loss.shape == (1, 2, 2)


def test_model_state_is_threaded_through_training():
    result = evaluation.evaluate_task(
        CountingStateTask(), [evaluation.lr_sweep("SGD", (0.1,))], num_steps=5, num_seeds=2
    )
    np.testing.assert_array_equal(result["SGD"].train_loss[0], np.tile(np.arange(5), (2, 1)))
    np.testing.assert_array_equal(result["SGD"].valid_loss[0, :, -1], [5.0, 5.0])


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_low_precision_params_train_and_compile_once(dtype):
    task = quadratics.QuadraticTask(dim=4)
    with testing.count_compiles() as names:
        result = evaluation.evaluate_task(
            task,
            [evaluation.lr_sweep("Adam", (0.01, 0.1))],
            num_steps=6,
            num_seeds=2,
            eval_every=2,
            param_dtype=dtype,
        )
    assert names.count("_train_chunk") == 1
    loss = result["Adam"].train_loss
    assert np.all(np.isfinite(loss)) and np.all(loss[:, :, -1] < loss[:, :, 0])


def test_bad_arguments_are_named():
    sweeps = [evaluation.lr_sweep("SGD", (0.1,))]
    task = quadratics.QuadraticTask()
    with pytest.raises(ValueError, match="num_steps"):
        evaluation.TaskEvaluator(task, sweeps, num_steps=0)
    with pytest.raises(ValueError, match="valid_split"):
        evaluation.TaskEvaluator(task, sweeps, num_steps=2, valid_split="validation")
    with pytest.raises(ValueError, match="distinct"):
        evaluation.TaskEvaluator(task, sweeps * 2, num_steps=2)
    with pytest.raises(ValueError, match="learning_rates"):
        evaluation.lr_sweep("SGD", (0.1, -1.0))
    with pytest.raises(KeyError, match="Unknown optimizer"):
        evaluation.lr_sweep("Adamm")
    with pytest.raises(KeyError, match="Unknown suite"):
        evaluation.get_suite("no-such-suite")


# ------------------------------------------------------------------------ summaries


def test_speedup_of_a_curve_that_runs_twice_as_fast():
    t = np.arange(400.0)
    baseline = np.exp(-t / 100)
    faster = np.exp(-2 * t / 100)
    s, reaches = evaluation.speedup(faster, baseline, window=40)
    assert reaches
    # The baseline's final loss (mean of its last 40 steps) is reached in half the steps:
    # counting each crossing at the centre of its window removes the smoothing's delay.
    assert s == pytest.approx(2.0, rel=0.02)  # convexity: a window mean sits above its centre
    s, reaches = evaluation.speedup(baseline, faster, window=40)
    assert not reaches and s == pytest.approx(0.5, rel=0.02)
    assert evaluation.speedup(np.full(400, np.nan), baseline, 40) == (0.0, False)
    assert evaluation.speedup(baseline, baseline, 40)[0] == 1.0


def test_speedup_is_not_decided_by_one_batch_that_both_optimizers_see():
    """Two flat noisy curves share one easy batch; only the trend may decide."""
    t = np.arange(300.0)
    noise = 0.05 * np.sin(t * 1.7)
    noise[100] = -1.0  # an easy batch for everyone at step 100
    baseline = 2.0 - 0.5 * t / 300 + noise  # slow, steady progress
    slower = 2.0 - 0.25 * t / 300 + noise
    s, reaches = evaluation.speedup(slower, baseline, window=30)
    assert not reaches and s == pytest.approx(0.5, abs=0.08)


def test_smooth_is_a_trailing_mean():
    x = np.array([4.0, 2.0, 0.0, 2.0, 4.0])
    np.testing.assert_allclose(evaluation.smooth(x, 2), [4.0, 3.0, 1.0, 1.0, 3.0])
    assert evaluation.steps_to_reach(x, 1.0) == 3.0
    assert evaluation.steps_to_reach(x, 1.0, window=2) == 2.5  # the centre of steps 2 and 3
    assert evaluation.steps_to_reach(x, -1.0) == math.inf


def _synthetic_result(finals: list[float], candidate_final: float, steps: int = 100):
    """Curves that fall linearly from 2 to ``final`` (one seed), NaN for a diverged run."""

    def curve(final):
        if math.isnan(final):
            return np.full(steps, np.nan, np.float32)
        return np.linspace(2.0, final, steps).astype(np.float32)

    def curves(name, values):
        train = np.stack([curve(v) for v in values])[:, None]
        return evaluation.Curves(
            name=name,
            labels=tuple(f"lr={i}" for i in range(len(values))),
            values={"learning_rate": tuple(float(i) for i in range(len(values)))},
            train_loss=train,
            valid_steps=np.asarray([0, steps]),
            valid_loss=train[..., [0, -1]],
        )

    return evaluation.TaskResult(
        task="synthetic",
        curves={"cand": curves("cand", [candidate_final]), "base": curves("base", finals)},
        num_steps=steps,
        num_seeds=1,
        eval_every=steps,
        valid_split="outer_valid",
        valid_batches=1,
        seconds=0.0,
    )


def test_tuned_baseline_ignores_diverged_runs_and_flags_the_grid_edge():
    s = evaluation.summarize_task(_synthetic_result([1.0, 0.5, np.nan], 0.25), "cand")
    base = s.baselines["base"]
    assert base.index == 1 and not base.at_edge and base.grid[2].diverged == 1
    comp = s.comparisons["base"]
    assert comp.wins and comp.reaches and comp.speedup > 1
    ratio = s.candidate_stats.final_train / base.stats.final_train
    assert comp.normalized_loss == pytest.approx(ratio) and 0.45 < ratio < 0.6

    s = evaluation.summarize_task(_synthetic_result([1.0, 0.8, 0.5], 0.9), "cand")
    assert s.baselines["base"].index == 2 and s.baselines["base"].at_edge
    assert not s.comparisons["base"].wins and s.comparisons["base"].speedup < 1


def test_select_by_mean_prefers_the_curve_with_less_area():
    result = _synthetic_result([0.5, 0.6], 1.0)
    fast = np.full(100, 0.6, np.float32)  # at its final value from the start
    result.curves["base"].train_loss[1, 0] = fast
    assert evaluation.summarize_task(result, "cand", select_by="final").baselines["base"].index == 0
    assert evaluation.summarize_task(result, "cand", select_by="mean").baselines["base"].index == 1
    with pytest.raises(ValueError, match="select_by"):
        evaluation.summarize_task(result, "cand", select_by="best")


def test_suite_aggregates_wins_and_geometric_means(tmp_path):
    lopt = lopt_base.LearnableSGD(initial_lr=0.05)
    candidate = evaluation.learned_sweep(lopt, lopt.init(jax.random.PRNGKey(0)))
    result = evaluation.evaluate_suite(
        ["QuadraticTask", quadratics.QuadraticTask(dim=3)],
        candidate,
        [evaluation.lr_sweep("SGD", (0.01, 0.3))],
        num_steps=8,
        num_seeds=2,
    )
    agg = result.aggregate()
    assert set(agg) == {"SGD", "best"} and agg["SGD"]["tasks"] == 2
    # Plain SGD at lr 0.3 decays sum(p^2) by 0.16 per step, faster than 0.05's 0.81.
    assert agg["SGD"]["wins"] == 0
    assert 0 < agg["SGD"]["geomean_speedup"] < 1
    assert agg["SGD"]["geomean_normalized_loss"] > 1
    assert all(s.baselines["SGD"].label == "lr=0.3" for s in result.summaries)
    text = result.markdown()
    assert "| QuadraticTask |" in text and "tuned SGD" in text
    written = evaluation.write_results(result, tmp_path, plots=True)
    assert {p.name for p in written["plots"]} == {"curves_QuadraticTask.png"}
    assert (tmp_path / "summary.md").read_text() == text


def test_baseline_cache_reuses_curves_and_runs_only_the_candidate(tmp_path):
    lopt = lopt_base.LearnableSGD(initial_lr=0.05)
    candidate = evaluation.learned_sweep(lopt, lopt.init(jax.random.PRNGKey(0)))
    kwargs = dict(num_steps=6, num_seeds=2, baseline_cache=tmp_path / "cache")

    def run():
        baselines = [evaluation.lr_sweep("SGD", (0.01, 0.3)), evaluation.lr_sweep("Adam", (0.1,))]
        with testing.count_compiles() as names:
            result = evaluation.evaluate_suite(["QuadraticTask"], candidate, baselines, **kwargs)
        return result, names.count("_train_chunk")

    first, compiled_first = run()
    assert compiled_first == 3 and len(list((tmp_path / "cache").glob("*.npz"))) == 2
    second, compiled_second = run()
    assert compiled_second == 1  # only the candidate trains
    for name in ("SGD", "Adam", "LearnableSGD"):
        np.testing.assert_array_equal(
            first.tasks[0][name].train_loss, second.tasks[0][name].train_loss
        )
    assert list(second.tasks[0].curves) == ["LearnableSGD", "SGD", "Adam"]
    # Other settings (here: more steps) never reuse the cached curves.
    kwargs["num_steps"] = 7
    assert run()[1] == 3


def _linear_curves(name, finals, valids, values, steps=100):
    """One seed per point: train falls linearly from 2 to ``final``; valid 2 -> ``valid``."""
    train = np.stack([np.linspace(2.0, f, steps) for f in finals]).astype(np.float32)[:, None]
    valid = np.asarray([[[2.0, v]] for v in valids], np.float32)
    return evaluation.Curves(
        name=name,
        labels=tuple(f"p{i}" for i in range(len(finals))),
        values=values,
        train_loss=train,
        valid_steps=np.asarray([0, steps]),
        valid_loss=valid,
    )


def _four_baseline_task(task, cand, adam, cosine, opt_list, reference):
    """A task's curves: ``(final train, final valid)`` pairs for the candidate and each point."""

    def curves(name, points, values):
        return _linear_curves(name, [p[0] for p in points], [p[1] for p in points], values)

    lrs = {"learning_rate": (1e-3, 1e-2, 1e-1)}
    return evaluation.TaskResult(
        task=task,
        curves={
            "cand": curves("cand", [cand], {}),
            "Adam": curves("Adam", adam, lrs),
            "AdamWarmupCosine": curves("AdamWarmupCosine", cosine, lrs),
            "OptList": curves("OptList", opt_list, {"config": (0.0, 1.0)}),
            "Reference": curves("Reference", [reference], {"learning_rate": (1e-2,)}),
        },
        num_steps=100,
        num_seeds=1,
        eval_every=100,
        valid_split="outer_valid",
        valid_batches=1,
        seconds=0.0,
    )


def test_the_summary_against_each_baseline_on_train_and_valid_is_what_hand_arithmetic_gives():
    # (final train, final valid) of the candidate and of every point of every baseline.
    tasks = [
        _four_baseline_task(
            "a", (0.2, 0.9), adam=[(0.5, 1.0), (0.4, 0.8), (0.6, 0.7)],
            cosine=[(0.3, 0.6), (0.25, 1.2), (0.35, 0.5)], opt_list=[(0.1, 1.5), (0.2, 0.4)],
            reference=(0.8, 0.3),
        ),
        _four_baseline_task(
            "b", (1e-4, 0.5), adam=[(1e-3, 0.5), (2e-3, 0.4), (3e-3, 0.3)],
            cosine=[(5e-5, 1.0), (1e-4, 1.0), (2e-4, 1.0)], opt_list=[(4e-4, 0.5), (3e-4, 0.6)],
            reference=(1e-3, 0.25),
        ),
    ]  # fmt: skip
    names = ("Adam", "AdamWarmupCosine", "OptList", "Reference")
    summaries = [evaluation.summarize_task(t, "cand", names) for t in tasks]

    # By hand: each tuned baseline is its lowest final train point; window = 10 steps of a
    # linear curve, so final_train = final + 4.5 * slope (slope = (2 - final) / 99).
    def ft(final):
        return final + 4.5 * (2.0 - final) / 99

    chosen = {
        "a": {"Adam": (1, 0.4, 0.8), "AdamWarmupCosine": (1, 0.25, 1.2),
              "OptList": (0, 0.1, 1.5), "Reference": (0, 0.8, 0.3)},
        "b": {"Adam": (0, 1e-3, 0.5), "AdamWarmupCosine": (0, 5e-5, 1.0),
              "OptList": (1, 3e-4, 0.6), "Reference": (0, 1e-3, 0.25)},
    }  # fmt: skip
    cand = {"a": (0.2, 0.9), "b": (1e-4, 0.5)}
    expected = {n: {"log": [], "logv": [], "wins": 0, "wins_valid": 0} for n in names}
    for s in summaries:
        c_train, c_valid = ft(cand[s.task][0]), cand[s.task][1]
        assert s.candidate_stats.final_train == pytest.approx(c_train)
        for name in names:
            index, final, valid = chosen[s.task][name]
            b, comp = s.baselines[name], s.comparisons[name]
            assert b.index == index, (s.task, name)
            assert b.stats.final_train == pytest.approx(ft(final))
            assert comp.normalized_loss == pytest.approx(c_train / ft(final))
            # The curves are float32: absolute tolerance on the (possibly near-zero) logs.
            log_diff = math.log(c_train) - math.log(ft(final))
            assert comp.log_loss_diff == pytest.approx(log_diff, abs=1e-5)
            assert comp.normalized_valid == pytest.approx(c_valid / valid)
            assert comp.log_valid_diff == pytest.approx(math.log(c_valid / valid), abs=1e-5)
            assert comp.wins == (c_train < ft(final)) and comp.wins_valid == (c_valid < valid)
            expected[name]["log"].append(math.log(c_train / ft(final)))
            expected[name]["logv"].append(math.log(c_valid / valid))
            expected[name]["wins"] += c_train < ft(final)
            expected[name]["wins_valid"] += c_valid < valid
    # Only a learning-rate grid has edges: OptList's last entry is not "at the edge".
    assert summaries[0].baselines["AdamWarmupCosine"].at_edge is False
    assert summaries[1].baselines["Adam"].at_edge is True
    assert summaries[1].baselines["OptList"].at_edge is False

    result = evaluation.SuiteResult("cand", names, tasks, summaries, {
        "num_steps": 100, "num_seeds": 1, "select_by": "final", "window": 10,
        "valid_split": "outer_valid", "valid_batches": 1,
    })  # fmt: skip
    agg = result.aggregate()
    for name in names:
        e, a = expected[name], agg[name]
        assert (a["wins"], a["wins_valid"]) == (e["wins"], e["wins_valid"]), name
        assert a["mean_log_loss_diff"] == pytest.approx(np.mean(e["log"]), abs=1e-5)
        assert a["mean_log_valid_diff"] == pytest.approx(np.mean(e["logv"]), abs=1e-5)
        assert a["geomean_normalized_loss"] == pytest.approx(math.exp(np.mean(e["log"])))
        assert a["geomean_normalized_valid"] == pytest.approx(math.exp(np.mean(e["logv"])))
    text = result.markdown()
    a = agg["Adam"]
    assert (
        f"| tuned Adam | {a['wins']}/2 | {a['wins_valid']}/2 | {a['reaches']}/2 | "
        f"{a['geomean_normalized_loss']:.3g} | {a['geomean_normalized_valid']:.3g} | "
        f"{a['mean_log_loss_diff']:+.3f} | {a['mean_log_valid_diff']:+.3f} |"
    ) in text
    assert "| Reference (untuned, p0) |" in text
    log_a = summaries[0].comparisons["OptList"]
    assert f"{log_a.log_loss_diff:+.3f} / {log_a.log_valid_diff:+.3f}" in text
    rows = evaluation.summary_rows(result)
    row = next(r for r in rows if r["task"] == "b" and r["optimizer"] == "OptList")
    assert row["log_valid_diff"] == pytest.approx(
        summaries[1].comparisons["OptList"].log_valid_diff
    )


def _seeded_task(task, cand, points, steps=20):
    """Curves with several seeds: ``cand`` and each point are per-seed ``(train, valid)``."""

    def curves(name, pts, values):
        train = np.asarray([[np.full(steps, t) for t, _ in p] for p in pts], np.float32)
        valid = np.asarray([[[2.0, v] for _, v in p] for p in pts], np.float32)
        return evaluation.Curves(name, tuple(f"p{i}" for i in range(len(pts))), values,
                                 train, np.asarray([0, steps]), valid)  # fmt: skip

    return evaluation.TaskResult(
        task=task,
        curves={
            "cand": curves("cand", [cand], {}),
            "Adam": curves("Adam", points, {"learning_rate": (1e-3, 1e-2)}),
        },
        num_steps=steps, num_seeds=len(cand), eval_every=steps, valid_split="outer_valid",
        valid_batches=1, seconds=0.0,
    )  # fmt: skip


def test_tasks_won_or_lost_on_every_seed_pair_the_seeds_against_the_tuned_rate():
    nan = float("nan")
    tasks = [
        # Seed-mean: the candidate loses train (0.4 > 0.233) but is lower on 2 of 3 seeds;
        # valid lower on every seed. The tuned rate is p0 (p1's mean train is higher).
        _seeded_task("a", [(0.1, 1.0), (0.1, 1.0), (1.0, 1.0)],
                     [[(0.2, 2.0), (0.2, 2.0), (0.3, 2.0)], [(0.9, 0.1), (0.9, 0.1), (0.9, 0.1)]]),
        # Lower on every seed (train); valid higher on every seed.
        _seeded_task("b", [(0.1, 3.0), (0.2, 3.0), (0.3, 3.0)],
                     [[(0.5, 1.0), (0.5, 1.0), (0.5, 1.0)], [(0.6, 1.0), (0.6, 1.0), (0.6, 1.0)]]),
        # A diverged candidate seed is a loss on that seed; the others are won.
        _seeded_task("c", [(nan, 1.0), (0.1, 0.5), (0.1, 0.5)],
                     [[(0.3, 0.9), (0.3, 0.9), (0.3, 0.9)], [(0.4, 0.9), (0.4, 0.9), (0.4, 0.9)]]),
    ]  # fmt: skip
    summaries = [evaluation.summarize_task(t, "cand", ["Adam"]) for t in tasks]
    comps = [s.comparisons["Adam"] for s in summaries]
    assert [s.baselines["Adam"].index for s in summaries] == [0, 0, 0]
    assert [(c.seeds_won, c.seeds_won_valid, c.seeds) for c in comps] == [
        (2, 3, 3),
        (3, 0, 3),
        (2, 2, 3),
    ]
    assert [c.wins for c in comps] == [False, True, False]  # seed means: c's is NaN
    result = evaluation.SuiteResult("cand", ("Adam",), tasks, summaries, {
        "num_steps": 20, "num_seeds": 3, "select_by": "final", "window": 2,
        "valid_split": "outer_valid", "valid_batches": 1,
    })  # fmt: skip
    a = result.aggregate()["Adam"]
    assert (a["wins_every_seed"], a["losses_every_seed"]) == (1, 0)
    assert (a["wins_valid_every_seed"], a["losses_valid_every_seed"]) == (1, 1)
    text = result.markdown()
    assert "Paired by seed (each of the 3 seeds" in text
    assert "| tuned Adam | 1 / 0 | 1 / 1 |" in text
    rows = evaluation.summary_rows(result)
    row = next(r for r in rows if r["task"] == "a" and r["optimizer"] == "Adam")
    assert (row["seeds_won"], row["seeds_won_valid"]) == (2, 3)
    # One seed: nothing is counted as won or lost on every seed, and no such table.
    one = [_seeded_task("d", [(0.1, 0.1)], [[(0.5, 0.5)], [(0.6, 0.6)]])]
    one_result = evaluation.SuiteResult(
        "cand", ("Adam",), one, [evaluation.summarize_task(one[0], "cand", ["Adam"])],
        {**result.settings, "num_seeds": 1},
    )  # fmt: skip
    assert one_result.aggregate()["Adam"]["wins_every_seed"] == 0
    assert one_result.summaries[0].comparisons["Adam"].seeds_won == 1
    assert "Paired by seed" not in one_result.markdown()


def test_the_default_baselines_are_tuned_adam_tuned_warmup_cosine_opt_list_and_the_reference():
    assert evaluation.default_baselines() == ("Adam", "AdamWarmupCosine", "OptList", "Reference")
    ref_lr = evaluation.REFERENCE_SCHEDULE_LR
    lopt = lopt_base.LearnableSGD(initial_lr=0.05)
    candidate = evaluation.learned_sweep(lopt, lopt.init(jax.random.PRNGKey(0)))
    baselines = evaluation.baseline_sweeps(None, (ref_lr, ref_lr / 10))
    assert [b.name for b in baselines] == list(evaluation.default_baselines())
    assert baselines[2].size == evaluation.OPT_LIST_TRIALS and baselines[3].size == 1
    result = evaluation.evaluate_suite(
        ["QuadraticTask"], candidate, baselines, num_steps=10, num_seeds=1
    )
    curves = result.tasks[0].curves
    # The reference is the warmup + cosine schedule at one rate: the same runs, up to
    # float32 rounding between the batched sweep's program and the single run's (one ulp
    # where XLA fuses them differently; another schedule differs by far more).
    np.testing.assert_allclose(
        curves["Reference"].train_loss[0], curves["AdamWarmupCosine"].train_loss[0], rtol=1e-6
    )
    # Warmup: the schedule's first step is at rate 0, so the loss is unchanged by it.
    assert (
        curves["AdamWarmupCosine"].train_loss[0, 0, 1]
        == curves["AdamWarmupCosine"].train_loss[0, 0, 0]
    )
    assert curves["Adam"].train_loss[0, 0, 1] < curves["Adam"].train_loss[0, 0, 0]
    # OptList's entries differ from each other.
    assert len({float(x) for x in curves["OptList"].train_loss[:, 0, -1]}) > 1
    assert set(result.summaries[0].comparisons) == set(evaluation.default_baselines())
    assert evaluation.baseline_sweep("OptList3").size == 3
    with pytest.raises(ValueError, match="OptList"):
        evaluation.baseline_sweep("OptListX")
    with pytest.raises(ValueError, match="trials"):
        evaluation.opt_list_sweep(0)
    with pytest.raises(ValueError, match="repeat"):
        evaluation.baseline_sweeps(["Adam", "Adam"])


# ---------------------------------------------------------------- the package's faces

#: Every public name of the old ``learnopt.eval`` module (its ``__all__`` and the
#: names callers used besides).
OLD_EVAL_NAMES = (
    "DEFAULT_LEARNING_RATES", "DEFAULT_BASELINES", "LOCAL_SUITES", "Sweep", "Curves",
    "TaskResult", "TaskSummary", "SuiteResult", "lr_sweep", "learned_sweep",
    "optimizer_sweep", "baseline_sweeps", "default_baselines", "log_grid", "get_suite",
    "suite_names", "TaskEvaluator", "evaluate_task", "evaluate_suite", "summarize_task",
    "smooth", "steps_to_reach", "speedup", "windows", "PointStats", "TunedBaseline",
    "Comparison", "summary_markdown", "summary_rows", "sweep_rows", "curve_rows",
    "write_results", "SUMMARY_COLUMNS", "CURVE_COLUMNS",
)  # fmt: skip


def test_learnopt_eval_keeps_every_old_name_as_the_same_object():
    import importlib
    import sys

    sys.modules.pop("learnopt.eval", None)
    with pytest.warns(DeprecationWarning, match="import learnopt.evaluation instead"):
        lopt_eval = importlib.import_module("learnopt.eval")
    for name in OLD_EVAL_NAMES:
        assert getattr(lopt_eval, name) is getattr(evaluation, name), name
    assert set(lopt_eval.__all__) <= set(OLD_EVAL_NAMES) <= set(dir(lopt_eval))
    assert set(OLD_EVAL_NAMES) <= set(evaluation.__all__)


def test_lazy_exports_name_the_modules_that_define_them():
    import importlib

    from learnopt._lazy import defined_names

    for module in evaluation.MODULES:
        for name in defined_names(module):
            assert getattr(evaluation, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="no_such_name"):
        evaluation.no_such_name  # noqa: B018


def test_default_learning_rates_are_the_log_grid_without_numpy():
    from learnopt.evaluation import config

    assert config.DEFAULT_LEARNING_RATES == evaluation.log_grid(1e-4, 1.0, 9)
    assert config.DEFAULT_LEARNING_RATES == tuple(float(x) for x in np.geomspace(1e-4, 1, 9))


def test_training_settings_are_the_keyword_arguments():
    sweeps = [evaluation.lr_sweep("SGD", (0.1,))]
    task = quadratics.QuadraticTask()
    settings = evaluation.TrainingSettings(num_steps=40, num_seeds=2, valid_split="test")
    by_settings = evaluation.TaskEvaluator(task, sweeps, settings=settings)
    by_keywords = evaluation.TaskEvaluator(
        task, sweeps, num_steps=40, num_seeds=2, valid_split="test"
    )
    assert by_settings.settings == by_keywords.settings == settings
    assert by_settings.eval_every == settings.steps_per_eval == 10  # max(10, 40 // 20)
    longer = evaluation.TaskEvaluator(task, sweeps, settings=settings, num_steps=400)
    assert (longer.num_steps, longer.num_seeds, longer.eval_every) == (400, 2, 20)
    with pytest.raises(ValueError, match="vectorize"):
        evaluation.TrainingSettings(num_steps=2, vectorize="pmap")
    with pytest.raises(TypeError, match="num_steps"):
        evaluation.TaskEvaluator(task, sweeps)


def test_baseline_cache_key_hashes_the_source_baselines_can_run(tmp_path):
    import shutil
    from pathlib import Path

    from learnopt.evaluation import cache

    root = Path(evaluation.__file__).resolve().parent.parent
    assert cache.PACKAGE_ROOT == root and (root / "__init__.py").is_file()
    assert (root / "evaluation" / "cache.py").is_file() and (root / "train.py").is_file()
    copy = tmp_path / "learnopt"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    before = cache._hash_sources(copy)
    assert before == cache.source_hash()
    # A learned optimizer's code is not in the key: baselines never run it.
    (copy / "learned_optimizers" / "celo.py").write_text("# changed\n")
    (copy / "cli" / "args.py").write_text("# changed\n")
    # Nor is the code that only reads finished curves (tables, figures, report files).
    for rel in ("results.py", "metrics.py", "report.py", "figures.py"):
        (copy / "evaluation" / rel).write_text("# changed\n")
    assert cache._hash_sources(copy) == before
    # Code a baseline runs is: optimizers, tasks, the evaluation itself, top-level modules.
    code = ("optimizers/adam.py", "tasks/base.py", "evaluation/engine.py", "evaluation/cache.py")
    for rel in (*code, "evaluation/sweeps.py", "canonical.py"):
        path = copy / rel
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert cache._hash_sources(copy) != before, rel
        path.write_bytes(original)
