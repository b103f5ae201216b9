"""The run length ``num_steps``: checked at once, required where it is read, and a run past
it announced, never silent.

* ``as_optax(num_steps=...)`` and ``opt.init(..., num_steps=...)`` reject 0, -5, 2.5 and
  True with the argument named (``-5`` once made ``ScheduledAdam`` climb the gradient).
* Without ``num_steps``, an architecture that reads the fraction of training done fails
  at ``as_optax()`` with the optax-level fix (not later at ``tx.init`` with a fix that an
  optax user cannot apply).
* The documented rule past ``T``: the fraction of training done holds at 1 (the
  architectures keep their end-of-run behaviour; a schedule that decays to zero steps
  zero) and the optax form warns once, at the first update past ``T``. The sweep runs
  every shipped entry and every architecture that reads the run length for 2T steps.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt import pretrained
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base

T = 4
#: Architectures that read the fraction of training done.
READS_RUN_LENGTH = ("ScheduledAdam", "Celo", "CeloAdam", "MLPLOpt_tau", "AdafacMLPLOpt_tau")
#: Those of them without a default run length (Celo and CeloAdam assume
#: ``default_num_steps=10_000``, as VeLO's library code does, and document it).
NEEDS_RUN_LENGTH = ("ScheduledAdam", "MLPLOpt_tau", "AdafacMLPLOpt_tau")


def _optimizers():
    out = {f"pretrained:{n}": pretrained.load(n).opt_fn() for n in pretrained.names()}
    for name in READS_RUN_LENGTH:
        lopt = lopt_base.get_learned_optimizer(name)
        out[name] = lopt.opt_fn(lopt.init(jax.random.PRNGKey(0)))
    return out


OPTIMIZERS = _optimizers()


def _params():
    rng = np.random.default_rng(0)
    return {
        "w": jnp.asarray(rng.normal(size=(4, 3)) * 0.3, jnp.float32),
        "b": jnp.zeros((3,), jnp.float32),
    }


@pytest.mark.parametrize("bad", [0, -5, 2.5, True], ids=["0", "-5", "2.5", "True"])
def test_as_optax_rejects_a_run_length_that_is_not_a_positive_integer(bad):
    for opt in (OPTIMIZERS[f"pretrained:{pretrained.DEFAULT}"], opt_base.Adam(1e-3)):
        with pytest.raises((ValueError, TypeError), match="as_optax: num_steps must be an integer"):
            opt.as_optax(num_steps=bad)
    with pytest.raises((ValueError, TypeError), match="num_steps"):
        pretrained.load().as_optax(num_steps=bad)


def _reads_run_length(name: str) -> bool:
    if name.startswith("pretrained:"):
        return pretrained.metadata(name.split(":")[1])["architecture"] in READS_RUN_LENGTH
    return name in READS_RUN_LENGTH


@pytest.mark.parametrize("name", [n for n in sorted(OPTIMIZERS) if _reads_run_length(n)])
def test_init_rejects_zero_and_negative_run_lengths(name):
    opt = OPTIMIZERS[name]
    for bad in (0, -5):
        with pytest.raises(ValueError, match="num_steps must be an integer >= 1"):
            opt.init(_params(), num_steps=bad)


@pytest.mark.parametrize("name", NEEDS_RUN_LENGTH)
def test_as_optax_without_a_run_length_names_the_optax_fix(name):
    with pytest.raises(ValueError, match=r"as_optax\(num_steps=T\)"):
        OPTIMIZERS[name].as_optax()


def test_as_optax_without_a_run_length_is_fine_where_none_is_read():
    tx = pretrained.load("MLPLOpt_mlp8k").as_optax()
    tx.init(_params())  # MLPLOpt reads no fraction of training: no num_steps needed


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_2t_steps_after_as_optax_follow_the_documented_rule(name):
    """Finite params for 2T steps, and exactly one RuntimeWarning, at the first step past T."""
    tx = OPTIMIZERS[name].as_optax(num_steps=T)
    params = _params()
    state = tx.init(params)

    @jax.jit
    def step(params, state, i):
        grads = jax.tree_util.tree_map(lambda p: jnp.full_like(p, 0.05) * (1 + i), params)
        updates, state = tx.update(grads, state, params, value=jnp.float32(1.0))
        return optax.apply_updates(params, updates), state

    warned_at = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(2 * T):
            params, state = step(params, state, jnp.float32(i))
            jax.effects_barrier()
            if any(issubclass(w.category, RuntimeWarning) for w in caught) and not warned_at:
                warned_at.append(i)
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1, [str(w.message) for w in caught]
    assert f"past num_steps={T}" in str(runtime[0].message)
    assert warned_at == [T]  # the first update past the planned run, not before
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree_util.tree_leaves(params))
