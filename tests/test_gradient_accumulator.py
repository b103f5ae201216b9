"""learnopt.optimizers.gradient_accumulator: average ``num_average`` gradients, then step.

The library's ``gradient_accumulator_test`` smoke-tests ``GradientAccumulator(Adam(),
5)``; here that holds, the wrapped optimizer steps exactly every ``num_average``-th
update on the mean gradient and mean loss, and it sees the shortened run length.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.optimizers import base as opt_base
from learnopt.optimizers import gradient_accumulator, nadamw, optax_opts, test_utils
from learnopt.testing import TraceCounter


def test_library_case_passes_the_smoke_test():
    opt = gradient_accumulator.GradientAccumulator(optax_opts.Adam(), 5)
    test_utils.smoketest_optimizer(opt)


def test_steps_every_num_average_updates_on_the_mean_gradient():
    inner = opt_base.SGD(0.5)
    opt = gradient_accumulator.GradientAccumulator(inner, num_average=3)
    state = opt.init({"w": jnp.zeros(2)})
    seen = []
    for g in (1.0, 2.0, 6.0, 4.0):
        state = opt.update(state, {"w": jnp.full(2, g)}, loss=g)
        seen.append(float(opt.get_params(state)["w"][0]))
    # no step, no step, step on mean(1, 2, 6) = 3, accumulating again
    np.testing.assert_allclose(seen, [0.0, 0.0, -1.5, -1.5])
    np.testing.assert_allclose(state.grad_accum["w"], 4.0)
    np.testing.assert_allclose(state.loss_accum, 4.0)
    assert int(state.iteration) == 4


def test_inner_optimizer_sees_the_shortened_run_length_and_the_model_state():
    opt = gradient_accumulator.GradientAccumulator(nadamw.NAdamW(1e-2), num_average=2)
    state = opt.init({"w": jnp.ones(3)}, model_state=jnp.int32(0), num_steps=10)
    assert int(state.inner_opt_state.num_steps) == 5
    state = opt.update(state, {"w": jnp.ones(3)}, model_state=jnp.int32(7))
    assert int(opt.get_state(state)) == 7 and int(state.state) == 7
    params = {"w": jnp.full(3, 2.0)}
    np.testing.assert_allclose(opt.get_params(opt.set_params(state, params))["w"], 2.0)


def test_one_compile_in_a_scan_of_accumulated_steps():
    opt = gradient_accumulator.GradientAccumulator(opt_base.Adam(0.1), num_average=2)

    counter = TraceCounter()

    @jax.jit
    @counter.wrap
    def run(state):
        def body(s, g):
            return opt.update(s, {"w": g}, loss=jnp.sum(g)), None

        return jax.lax.scan(body, state, jnp.ones((6, 2), jnp.bfloat16))[0]

    state = opt.init({"w": jnp.ones(2, jnp.bfloat16)})
    out = run(run(state))
    assert out.inner_opt_state.params["w"].dtype == jnp.bfloat16
    assert int(out.inner_opt_state.iteration) == 6
    counter.assert_count(1)
