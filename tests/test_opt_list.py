"""learnopt.optimizers.opt_list: NAdamW with the library's published hyperparameter list.

The library's ``opt_list_test`` smoke-tests ``OptList(0)`` and vmaps ``init``/``update``
over the index; both hold here, the shipped list is the published one (1000 entries,
spot-checked values), and a traced index gives what the Python index gives.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.optimizers import nadamw, opt_list, test_utils


def test_first_entry_passes_the_smoke_test():
    test_utils.smoketest_optimizer(opt_list.OptList(0))


def test_vmap_over_the_index_gives_different_updates():
    def init_update(idx):
        opt = opt_list.OptList(idx)
        p = jnp.ones(10)
        opt_state = opt.init(p, num_steps=10)
        return opt.get_params(opt.update(opt_state, p))

    result = jax.vmap(init_update)(jnp.arange(10, dtype=jnp.int32))
    assert np.sum(np.abs(result[0] - result[1])) > 1e-4
    for idx in (0, 3):  # a traced index is the Python index
        np.testing.assert_allclose(result[idx], init_update(idx), rtol=1e-6)


def test_the_shipped_list_is_the_published_one():
    assert opt_list.num_configs() == 1000
    first, last = opt_list.config(0), opt_list.config(999)
    assert first["beta1"] == 0.9360043452616368
    assert first["use_nesterov"] is False
    assert first["learning_rate"].learning_rate == 0.0011948335721160095
    assert first["learning_rate"].constant_fraction == 0.747304046223346
    assert last["learning_rate"].constant_fraction == 0.7937974108202099
    assert opt_list.config(1)["epsilon"] == 107.85861559302559


def test_entry_k_is_nadamw_with_the_kth_hyperparameters():
    params, grads = {"w": jnp.linspace(-1.0, 1.0, 5)}, {"w": jnp.full(5, 0.2)}
    for idx in (0, 5):
        a, b = opt_list.OptList(idx), nadamw.NAdamW(**opt_list.config(idx))
        sa, sb = a.init(params, num_steps=20), b.init(params, num_steps=20)
        for _ in range(3):
            sa, sb = a.update(sa, grads), b.update(sb, grads)
        np.testing.assert_array_equal(a.get_params(sa)["w"], b.get_params(sb)["w"])


def test_bad_uses_raise_clearly():
    with pytest.raises(ValueError, match="num_steps"):
        opt_list.OptList(0).init({"w": jnp.ones(2)})
    with pytest.raises(IndexError, match="out of range"):
        opt_list.config(1000)
    with pytest.raises(TypeError, match="integer"):
        opt_list.OptList(jnp.float32(1.0))
