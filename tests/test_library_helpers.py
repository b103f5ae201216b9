"""learned_optimization's helpers that research code imports, with the library's semantics.

``learnopt.tree_utils`` (``tree_mean_abs``, ``tree_mean``, ``tree_sub``/``tree_div``/
``tree_mul`` with a scalar or a tree, ``tree_dot``, ``tree_zip_onp``/``tree_zip_jnp``,
``first_dim``, ``match_type``, ``map_named``, ``strip_weak_type``) and
``learned_optimizers.common``'s accumulators (``rolling_mom``, ``rolling_rms``, their
``vec_`` forms with the decays on a last axis, ``factored_rolling`` and
``vec_factored_rolling``), each checked against a plain numpy computation.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt import tree_utils
from learnopt.learned_optimizers import common

RNG = np.random.default_rng(0)
TREE = {
    "a": RNG.normal(size=(3, 2)).astype(np.float32),
    "b": {"c": np.arange(4.0, dtype=np.float32)},
}


def _all(tree):
    return np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(tree)])


def test_reductions_over_every_element():
    values = _all(TREE)
    np.testing.assert_allclose(tree_utils.tree_mean_abs(TREE), np.abs(values).mean(), rtol=1e-6)
    np.testing.assert_allclose(tree_utils.tree_mean(TREE), values.mean(), rtol=1e-6)
    other = jax.tree_util.tree_map(lambda x: x + 1, TREE)
    np.testing.assert_allclose(
        tree_utils.tree_dot(TREE, other), (values * (values + 1)).sum(), rtol=1e-6
    )


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (tree_utils.tree_sub, np.subtract),
        (tree_utils.tree_div, np.divide),
        (tree_utils.tree_mul, np.multiply),
    ],  # fmt: skip
)
def test_elementwise_with_a_scalar_or_a_tree(fn, op):
    for b in (2.0, jnp.float32(2.0), np.float32(2.0)):
        got = fn(TREE, b)
        np.testing.assert_allclose(got["a"], op(TREE["a"], 2.0), rtol=1e-6)
        np.testing.assert_allclose(got["b"]["c"], op(TREE["b"]["c"], 2.0), rtol=1e-6)
    other = jax.tree_util.tree_map(lambda x: x + 3, TREE)
    got = fn(TREE, other)
    np.testing.assert_allclose(got["a"], op(TREE["a"], TREE["a"] + 3), rtol=1e-6)


def test_zip_stacks_trees_on_a_new_first_axis():
    trees = [jax.tree_util.tree_map(lambda x, i=i: x + i, TREE) for i in range(3)]
    for zip_fn, kind in (
        (tree_utils.tree_zip_onp, np.ndarray),
        (tree_utils.tree_zip_jnp, jax.Array),
    ):
        z = zip_fn(iter(trees))
        assert isinstance(z["a"], kind) and z["a"].shape == (3, 3, 2)
        np.testing.assert_array_equal(np.asarray(z["b"]["c"])[2], TREE["b"]["c"] + 2)
        assert tree_utils.first_dim(z) == 3
    with pytest.raises(ValueError, match="no trees"):
        tree_utils.tree_zip_onp([])


def test_match_type_casts_to_the_targets_dtypes_and_names_a_dtypeless_leaf():
    got = tree_utils.match_type(
        {"x": 1.5, "y": np.arange(2)}, {"x": jnp.bfloat16(0), "y": np.int8(0)}
    )
    assert got["x"].dtype == jnp.bfloat16 and got["y"].dtype == np.int8
    with pytest.raises(ValueError, match="has no dtype: 3"):
        tree_utils.match_type({"x": 1.0}, {"x": 3})


@flax.struct.dataclass
class _State:
    mom: jax.Array
    count: jax.Array


def test_map_named_gives_the_library_paths():
    seen = {}

    def record(path, value):
        seen[path] = value
        return value * 2

    tree = {"a": 1, "b": {"c": 2, "d": (3, 4)}, "e": _State(mom=5, count=6)}
    out = tree_utils.map_named(record, tree)
    assert seen == {"/a": 1, "/b/c": 2, "/b/d/0": 3, "/b/d/1": 4, "/e/_State.mom": 5,
                    "/e/_State.count": 6}  # fmt: skip
    assert out == {"a": 2, "b": {"c": 4, "d": (6, 8)}, "e": _State(mom=10, count=12)}
    assert tree_utils.map_named(lambda k, v: k, [1], key="root") == ["root/0"]
    acc = common.MomAccumulator(m={"w": 1.0})  # flax dataclasses of learnopt's own states
    assert tree_utils.map_named(lambda k, v: k, acc) == common.MomAccumulator(
        m={"w": "/MomAccumulator.m/w"}
    )


def test_strip_weak_type_fixes_every_dtype():
    tree = {"lr": 0.1, "n": 3, "x": jnp.asarray(2.0)}
    assert all(jnp.asarray(v).weak_type for v in jax.tree_util.tree_leaves(tree))
    out = tree_utils.strip_weak_type(tree)
    assert not any(v.weak_type for v in jax.tree_util.tree_leaves(out))
    assert out["lr"].dtype == jnp.float32 and out["n"].dtype == jnp.int32
    calls = []

    @jax.jit
    def f(t):
        calls.append(1)
        return t["lr"] * 2

    f(out)
    f(tree_utils.strip_weak_type({"lr": jnp.float32(0.3), "n": np.int32(1), "x": 1.0}))
    assert len(calls) == 1  # one compile: the dtypes no longer depend on how values came


PARAMS = {
    "w": RNG.normal(size=(4, 3)).astype(np.float32),
    "b": RNG.normal(size=(3,)).astype(np.float32),
}
GRADS = [jax.tree_util.tree_map(lambda p: RNG.normal(size=p.shape).astype(np.float32), PARAMS)
         for _ in range(3)]  # fmt: skip


def test_rolling_mom_and_rms_are_running_averages_with_a_step_count():
    mom, rms = common.rolling_mom(0.9), common.rolling_rms(0.99)
    sm, sr = mom.init(PARAMS), rms.init(PARAMS)
    m = jax.tree_util.tree_map(np.zeros_like, PARAMS)
    v = jax.tree_util.tree_map(np.zeros_like, PARAMS)
    for g in GRADS:
        sm, sr = mom.update(sm, g), rms.update(sr, g)
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: 0.99 * a + 0.01 * b * b, v, g)
    assert int(sm.t) == int(sr.t) == len(GRADS)
    for k in PARAMS:
        np.testing.assert_allclose(sm.m[k], m[k], rtol=1e-5)
        np.testing.assert_allclose(sr.rms[k], v[k], rtol=1e-5)
    np.testing.assert_allclose(  # the second moment's decay is clipped to [0, 1]
        common.rolling_rms(1.5).update(rms.init(PARAMS), GRADS[0]).rms["w"], 0.0
    )


def test_vec_accumulators_put_the_decays_last():
    decays = jnp.asarray([0.5, 0.9, 0.99])
    for vec, one, field in (
        (common.vec_rolling_mom, common.rolling_mom, "m"),
        (common.vec_rolling_rms, common.rolling_rms, "rms"),
    ):
        acc = vec(decays)
        state = acc.init(PARAMS)
        assert getattr(state, field)["w"].shape == (4, 3, 3) and state.t.shape == (3,)
        for g in GRADS:
            state = acc.update(state, g)
        for i, d in enumerate(np.asarray(decays)):
            single = one(float(d))
            s = single.init(PARAMS)
            for g in GRADS:
                s = single.update(s, g)
            np.testing.assert_allclose(
                getattr(state, field)["w"][..., i], getattr(s, field)["w"], rtol=1e-5
            )


def _numpy_factored(grads, decay, eps=1e-30):
    """Adafactor's factored statistics of a [4, 3] tensor and a [3] one, in numpy."""
    row, col, diag = np.zeros(3), np.zeros(4), np.zeros(3)  # w: d1=1... see below
    out = None
    for g in grads:
        w, b = g["w"].astype(np.float64), g["b"].astype(np.float64)
        sq = w * w + eps
        # w is [4, 3]: the largest axis is 0 (d0), the second largest 1 (d1).
        row = decay * row + (1 - decay) * sq.mean(axis=0)  # drops d0: shape [3]
        col = decay * col + (1 - decay) * sq.mean(axis=1)  # drops d1: shape [4]
        row_scale = 1 / np.sqrt(np.maximum(row / (row.mean() + 1e-9), 1e-9))
        col_scale = 1 / np.sqrt(np.maximum(col, 1e-9))
        diag = decay * diag + (1 - decay) * (b * b + eps)
        out = {
            "w": w * row_scale[None, :] * col_scale[:, None],
            "b": b / np.sqrt(np.maximum(diag + 1e-9, 1e-9)),
        }
    return row, col, diag, out


def test_factored_rolling_is_adafactor_on_the_two_largest_axes():
    acc = common.factored_rolling(0.9)
    state = acc.init(PARAMS)
    assert state.v_row["w"].shape == (3,) and state.v_col["w"].shape == (4,)
    assert state.v_diag["w"].shape == (0,) and state.v_diag["b"].shape == (3,)
    for g in GRADS:
        state, out = acc.update(state, g)
    row, col, diag, want = _numpy_factored(GRADS, 0.9)
    np.testing.assert_allclose(state.v_row["w"], row, rtol=1e-5)
    np.testing.assert_allclose(state.v_col["w"], col, rtol=1e-5)
    np.testing.assert_allclose(state.v_diag["b"], diag, rtol=1e-5)
    np.testing.assert_allclose(out["w"], want["w"], rtol=1e-4)
    np.testing.assert_allclose(out["b"], want["b"], rtol=1e-4)
    vec = common.vec_factored_rolling(jnp.asarray([0.9, 0.5]))
    vstate = vec.init(PARAMS)
    for g in GRADS:
        vstate, vout = vec.update(vstate, g)
    np.testing.assert_allclose(vstate.v_row["w"][..., 0], row, rtol=1e-5)
    np.testing.assert_allclose(vout["w"][..., 0], want["w"], rtol=1e-4)
    with pytest.raises(ValueError, match="numbers of tensors"):
        acc.update(state, {"w": GRADS[0]["w"]})


def test_tree_path_str_names_paths_for_messages_and_for_matching():
    """One helper names key paths: keystr for messages, bare entries joined for theta keys
    (dict keys, attributes and indices; a Haiku module name with "/" stays whole)."""
    from learnopt.tree_utils import tree_path_str

    @flax.struct.dataclass
    class S:
        a: dict

    tree = {"x": [S(a={"mlp/~/linear_0": {"b": 1.0}})], "y": (2.0,)}
    paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    assert [tree_path_str(p, "/") for p in paths] == ["x/0/a/mlp/~/linear_0/b", "y/0"]
    assert tree_path_str(paths[1]) == "['y'][0]"
    assert tree_path_str(()) == "<root>" and tree_path_str((), "/") == ""
