"""learnopt.summary: the library's summary calls accepted, and collected when asked."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt import summary


def _looped(a):
    summary.summary("a", a[0])

    def body(c, _):
        c = c + 1
        summary.summary("loop", c[0])
        return c, c

    a, _ = jax.lax.scan(body, a, jnp.arange(20))
    return a * 2


def test_summary_returns_its_value_and_records_nothing_without_a_collection():
    x = jnp.arange(3.0)
    assert summary.summary("x", x) is x
    jitted = jax.jit(_looped)
    out = jitted(jnp.zeros(1) + 1.0)
    np.testing.assert_allclose(out, [42.0])


def test_summary_adds_nothing_to_a_compiled_program_when_not_collected():
    def plain(a):
        return jax.lax.scan(lambda c, _: (c + 1, c), a, jnp.arange(4))[0] * 2

    def with_summaries(a):
        def body(c, _):
            summary.summary("loop", c)
            return c + 1, c

        summary.summary("a", a)
        return jax.lax.scan(body, a, jnp.arange(4))[0] * 2

    x = jnp.zeros(2)
    assert str(jax.make_jaxpr(plain)(x)) == str(jax.make_jaxpr(with_summaries)(x))


def test_collects_every_iteration_of_a_jitted_scan():
    out, metrics = summary.with_summary_output_reduced(jax.jit(_looped))(jnp.zeros(1) + 123)
    np.testing.assert_allclose(out, [286.0])
    assert set(metrics) == {"mean||a", "mean||loop"}
    assert metrics["mean||loop"].shape == (20,)
    reduced = summary.aggregate_metric_list([metrics])
    assert float(reduced["mean||a"]) == 123.0
    assert float(reduced["mean||loop"]) == pytest.approx(133.5)


def test_collects_inside_the_callers_own_jit():
    def step(a):
        return summary.with_summary_output_reduced(_looped)(a)

    out, metrics = jax.jit(step)(jnp.zeros(1) + 1.0)
    np.testing.assert_allclose(out, [42.0])
    np.testing.assert_allclose(metrics["mean||loop"], np.arange(2.0, 22.0))


def test_each_collection_starts_clean():
    fn = summary.with_summary_output_reduced(lambda a: summary.summary("v", a) * 2)
    _, first = fn(jnp.asarray(1.0))
    _, second = fn(jnp.asarray(5.0))
    assert set(first) == set(second) == {"mean||v"}
    assert float(second["mean||v"]) == 5.0


def test_scopes_and_decorator_prefix_names():
    @summary.summary_decorator("outer")
    def fn(a):
        with summary.summary_scope("inner"):
            summary.summary("x", a, aggregation="collect")
        with summary.summary_scope(""):
            summary.summary("y", a, aggregation=summary.AggregationType.tensor)
        assert summary.current_summary_prefix() == "outer"
        return a

    _, metrics = summary.with_summary_output_reduced(fn)(jnp.arange(3.0))
    assert set(metrics) == {"collect||outer/inner/x", "tensor||outer/y"}
    assert summary.current_summary_prefix() == ""


def test_add_with_summary_adds_a_keyword_and_an_output():
    def fn(name, a):
        summary.summary(name, a)
        return a * 2

    wrapped = summary.add_with_summary(fn, static_argnums=(0,))
    assert "with_summary" in str(__import__("inspect").signature(wrapped))
    out, metrics = wrapped("t", 1.0, with_summary=False)
    assert (out, metrics) == (2.0, {})
    out, metrics = wrapped("t", 1.0, with_summary=True)
    assert out == 2.0 and float(metrics["mean||t"]) == 1.0


def test_summaries_inside_vmap_are_skipped_with_one_warning():
    def fn(a):
        jax.vmap(lambda x: summary.summary("inside", x))(a)
        summary.summary("outside", jnp.sum(a))
        jax.vmap(lambda x: summary.summary("inside", x))(a)
        return a

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, metrics = summary.with_summary_output_reduced(fn)(jnp.arange(4.0))
    assert set(metrics) == {"mean||outside"}
    messages = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(messages) == 1 and "'inside'" in messages[0]


@pytest.mark.parametrize(
    ("name", "aggregation", "match"),
    [
        (3, "mean", "the name, a string"),
        ("a||b", "mean", "may not contain"),
        ("a", "median", "'median' is not one of"),
    ],
)
def test_bad_summary_calls_name_what_is_wrong(name, aggregation, match):
    with pytest.raises(ValueError, match=match):
        summary.summary(name, 1.0, aggregation)


def test_tensor_summary_made_twice_is_an_error_naming_it():
    def fn(a):
        summary.summary("t", a, "tensor")
        summary.summary("t", a, "tensor")
        return a

    with pytest.raises(ValueError, match="'t' with aggregation 'tensor' must be made exactly once"):
        summary.with_summary_output_reduced(fn)(jnp.ones(2))


def test_aggregate_metric_follows_the_library_rules():
    vs = [np.asarray([1.0, 2.0]), np.asarray(6.0)]
    assert summary.aggregate_metric("mean||m", vs) == pytest.approx(3.0)
    np.testing.assert_array_equal(summary.aggregate_metric("collect||c", vs), [1.0, 2.0, 6.0])
    assert summary.aggregate_metric("sample||s", vs) in (1.0, 2.0, 6.0)
    key = jax.random.PRNGKey(0)
    assert float(summary.aggregate_metric("sample||s", vs, use_jnp=True, key=key)) in (1, 2, 6)
    assert summary.aggregate_metric("none||n", [np.asarray([4.0])]) == 4.0
    with pytest.raises(ValueError, match="must be a scalar"):
        summary.aggregate_metric("none||n", [np.ones(2)])
    with pytest.raises(ValueError, match="one value, got 2"):
        summary.aggregate_metric("tensor||t", [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match="no '<aggregation>||' prefix"):
        summary.aggregate_metric("m", vs)
    merged = summary.aggregate_metric_list([{"mean||m": 1.0, "mean||m___1": 3.0}])
    assert merged == {"mean||m": pytest.approx(2.0)}


def test_tree_helpers_summarize_each_leaf():
    tree = {"w": jnp.asarray([[1.0, -3.0]]), "b": {"c": jnp.asarray([2.0])}}

    def fn(t):
        summary.tree_scalar_mean("p", t)
        summary.tree_step("u", t)
        summary.summarize_inner_params(t)
        return t

    _, m = summary.with_summary_output_reduced(fn)(tree)
    assert float(m["mean||p/1"]) == -1.0  # leaves in sorted order: b/c, w
    assert float(m["mean||u/1_avg_step_size"]) == 2.0
    assert float(m["mean||w/mean_abs"]) == 2.0
    assert float(m["mean||b/c/mean"]) == 2.0


def test_writers_keep_print_and_forward(capsys):
    memory = summary.InMemorySummaryWriter()
    printer = summary.PrintWriter(filter_fn=lambda tag: tag != "hidden")
    both = summary.MultiWriter(memory, printer)
    both.scalar("loss", 0.5, 3)
    both.scalar("hidden", 1.0, 3)
    both.tensor("w", np.ones((2, 2)), 4)
    both.flush()
    steps, values = memory.data["loss"]
    assert (steps, values) == ([3], [0.5])
    out = capsys.readouterr().out
    assert "3] loss=0.5" in out and "hidden" not in out and "4] w=Tensor: (2, 2)" in out


def test_tensorboard_writer_writes_scalars_read_back(tmp_path):
    from learnopt import tensorboard  # tensorboardX is in the test extra

    writer = summary.TensorboardWriter(tmp_path / "tb")
    writer.scalar("loss", np.float32(0.25), 7)
    writer.text("note", "hello", 7)
    writer.close()
    writer.close()  # final, and idempotent
    scalars = tensorboard.read_scalars(tmp_path / "tb")
    assert scalars["loss"] == [(7, 0.25)]
    assert summary.JaxboardWriter is summary.TensorboardWriter
