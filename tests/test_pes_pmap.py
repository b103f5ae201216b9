"""TruncatedPESPMAP (the library's pmap PES) is PES on the devices' combined population,
split over the local devices: the same estimate as TruncatedPES on that population."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.outer_trainers import lopt_truncated_step as lts
from learnopt.outer_trainers import truncated_pes
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.tasks import quadratics

# Runs on 4 host-platform devices (a fresh process: the device count is fixed at start).
PROBE = """
import jax, numpy as np
from learnopt.learned_optimizers import base as lopt_base
from learnopt.outer_trainers import lopt_truncated_step as lts, truncated_pes
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.tasks import quadratics

def step(n):
    return lts.VectorizedLOptTruncatedStep(
        quadratics.FixedDimQuadraticFamily(4), lopt_base.LearnableSGD(),
        tsched.ConstantTruncationSchedule(6), num_tasks=n)

theta = lopt_base.LearnableSGD().init(jax.random.PRNGKey(0))
pmap = truncated_pes.TruncatedPESPMAP(step(2), trunc_length=3, num_devices=4)
plain = truncated_pes.TruncatedPES(step(8), trunc_length=3)
key = jax.random.PRNGKey(1)
s_pmap, s_plain = pmap.init_worker_state(theta, key), plain.init_worker_state(theta, key)
spread = len(s_pmap.pos_state.inner_step.sharding.device_set)
for i in range(3):
    k = jax.random.fold_in(key, i)
    o_pmap, _ = jax.jit(pmap.compute_gradient_estimate)(theta, k, s_pmap, None)
    o_plain, _ = jax.jit(plain.compute_gradient_estimate)(theta, k, s_plain, None)
    s_pmap, s_plain = o_pmap.unroll_state, o_plain.unroll_state
    g1, g2 = (float(o.grad["log_lr"]) for o in (o_pmap, o_plain))
    assert np.isfinite(g1) and abs(g1 - g2) <= 1e-5 * max(1.0, abs(g2)), (i, g1, g2)
print("OK", spread)
"""


def test_pmap_pes_on_4_devices_is_pes_on_their_population():
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"
    env = dict(os.environ, XLA_FLAGS=flags.strip())
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split()[-2:] == ["OK", "4"]


def test_pmap_pes_wants_the_local_device_count():
    step = lts.VectorizedLOptTruncatedStep(
        quadratics.FixedDimQuadraticFamily(4),
        lopt_base.LearnableSGD(),
        tsched.ConstantTruncationSchedule(6),
        num_tasks=2,
    )
    with pytest.raises(ValueError, match="num_devices=8, but there are 1 local devices"):
        truncated_pes.TruncatedPESPMAP(step, trunc_length=3, num_devices=8)
